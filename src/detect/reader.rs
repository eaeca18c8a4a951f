//! [`Reader`]: host reads that turn every problem into a finding instead of an error.

use std::collections::BTreeMap;

use crate::facts::{DeviceNode, Finding, Level};
use crate::host::{HostError, HostRoot};
use crate::parse::{self, ParseError};

const BAD_VALUE_FIX: &str = "check the file; on a fixture host, regenerate it with `facts capture`";

/// The fix of a finding met while reading the host, by its code: a saved facts document's
/// `host-*` findings get their fix from here, never from the file.
pub fn fix_for(code: &str) -> Option<&'static str> {
    Some(match code {
        "host-link-escapes" => "fix or remove the link; k3d-gpu never reads outside the host root",
        "host-link-loop" => "fix the link loop",
        "host-link-dangling" => "fix or remove the broken link",
        "host-bad-text" => "the file should be text; check the fixture or the kernel",
        "host-unreadable" => "check the file's type and permissions, or run as root",
        "host-not-a-file" => "replace it with a regular file (fixture hosts hold plain files)",
        "host-file-too-large" => "this file is not what the kernel would show; check the host or fixture",
        "host-bad-value" => BAD_VALUE_FIX,
        _ => return None,
    })
}

pub struct Reader<'h> {
    host: &'h HostRoot,
    findings: Vec<Finding>,
    groups: Option<BTreeMap<u32, String>>,
}

impl<'h> Reader<'h> {
    pub fn new(host: &'h HostRoot) -> Reader<'h> {
        Reader { host, findings: Vec::new(), groups: None }
    }

    /// True on the machine itself, false on a fixture host.
    pub fn real_host(&self) -> bool {
        self.host.is_real_host()
    }

    pub fn into_findings(self) -> Vec<Finding> {
        self.findings
    }

    fn problem(&mut self, path: &str, error: &HostError) {
        let code = match error {
            HostError::Escapes { .. } => "host-link-escapes",
            HostError::Loop => "host-link-loop",
            HostError::Dangling { .. } => "host-link-dangling",
            HostError::NotUtf8 => "host-bad-text",
            HostError::PermissionDenied | HostError::Io(_) => "host-unreadable",
            HostError::NotRegular => "host-not-a-file",
            HostError::TooLarge => "host-file-too-large",
        };
        let mut finding =
            Finding::new(Level::Warn, code, format!("could not read {path}: {error}; facts from it are missing"), path);
        finding.fix = fix_for(code).map(str::to_string);
        if !self.findings.contains(&finding) {
            self.findings.push(finding);
        }
    }

    pub fn bad_value(&mut self, path: &str, error: &ParseError) {
        let finding = Finding::new(Level::Warn, "host-bad-value", format!("{path}: {error}; ignored"), path)
            .with_fix(BAD_VALUE_FIX);
        if !self.findings.contains(&finding) {
            self.findings.push(finding);
        }
    }

    /// Text of a file, `None` when missing or unreadable (the latter with a finding).
    pub fn text(&mut self, path: &str) -> Option<String> {
        match self.host.read_text(path) {
            Ok(text) => text,
            Err(e) => {
                self.problem(path, &e);
                None
            }
        }
    }

    /// Like [`text`](Self::text) but silent when permission is denied: for files only root
    /// may read (debugfs). Any other problem is still a finding.
    pub fn text_if_permitted(&mut self, path: &str) -> Option<String> {
        match self.host.read_text(path) {
            Ok(text) => text,
            Err(HostError::PermissionDenied) => None,
            Err(e) => {
                self.problem(path, &e);
                None
            }
        }
    }

    /// Like [`list`](Self::list) but silent when permission is denied (debugfs).
    pub fn list_if_permitted(&mut self, path: &str) -> Vec<String> {
        match self.host.list(path) {
            Ok(names) => names.unwrap_or_default(),
            Err(HostError::PermissionDenied) => Vec::new(),
            Err(e) => {
                self.problem(path, &e);
                Vec::new()
            }
        }
    }

    pub fn bytes(&mut self, path: &str) -> Option<Vec<u8>> {
        match self.host.read_bytes(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                self.problem(path, &e);
                None
            }
        }
    }

    /// A file parsed with `parse`; a value that does not parse becomes a finding.
    pub fn parsed<T>(&mut self, path: &str, parse: impl FnOnce(&str) -> Result<T, ParseError>) -> Option<T> {
        let text = self.text(path)?;
        match parse(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                self.bad_value(path, &e);
                None
            }
        }
    }

    /// Trimmed text of a one-value sysfs attribute.
    pub fn attr(&mut self, path: &str) -> Option<String> {
        self.text(path).map(|t| t.trim().to_string())
    }

    /// Entry names of a directory, sorted; empty when missing or unreadable.
    pub fn list(&mut self, path: &str) -> Vec<String> {
        match self.host.list(path) {
            Ok(names) => names.unwrap_or_default(),
            Err(e) => {
                self.problem(path, &e);
                Vec::new()
            }
        }
    }

    pub fn exists(&mut self, path: &str) -> bool {
        match self.host.exists(path) {
            Ok(present) => present,
            Err(e) => {
                self.problem(path, &e);
                false
            }
        }
    }

    /// Where a link leads (host path), `None` when missing or broken.
    pub fn canonical(&mut self, path: &str) -> Option<String> {
        match self.host.canonical(path) {
            Ok(resolved) => resolved,
            Err(e) => {
                self.problem(path, &e);
                None
            }
        }
    }

    /// The last component of where a link leads (a driver name, a PCI address).
    pub fn link_name(&mut self, path: &str) -> Option<String> {
        self.canonical(path).and_then(|p| p.rsplit('/').next().map(str::to_string))
    }

    /// A device node with its owner and mode, `None` when it does not exist.
    pub fn device_node(&mut self, path: &str) -> Option<DeviceNode> {
        let stat = match self.host.node_stat(path) {
            Ok(Some(stat)) => stat,
            Ok(None) => return None,
            Err(e) => {
                self.problem(path, &e);
                return None;
            }
        };
        let group = self.group_name(stat.gid);
        Some(DeviceNode {
            path: path.to_string(),
            mode: format!("{:04o}", stat.mode),
            uid: stat.uid,
            gid: stat.gid,
            group,
        })
    }

    fn group_name(&mut self, gid: u32) -> Option<String> {
        if self.groups.is_none() {
            let text = self.text("/etc/group").unwrap_or_default();
            let table = text
                .lines()
                .filter_map(|line| {
                    let mut fields = line.split(':');
                    let name = fields.next()?;
                    let id = fields.nth(1)?.parse().ok()?;
                    Some((id, name.to_string()))
                })
                .collect();
            self.groups = Some(table);
        }
        self.groups.as_ref().and_then(|g| g.get(&gid).cloned())
    }
}

/// Parses a cpulist attribute, with a finding when it is garbage.
pub fn cpulist(r: &mut Reader, path: &str) -> Option<Vec<u32>> {
    r.parsed(path, parse::parse_cpulist)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::facts::{Level, VendorFilter};
    use crate::host::HostRoot;

    fn fixture(name: &str) -> HostRoot {
        HostRoot::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name)).unwrap()
    }

    #[test]
    fn permission_denied_is_a_finding_except_for_root_only_debugfs() {
        let open = crate::detect::facts(&fixture("desktop-rpl-nvidia"), &VendorFilter::Auto);
        assert!(open.host.intel_gpus[0].guc.is_some(), "the fixture has a readable guc_info");
        assert!(!open.findings.iter().any(|f| f.code == "guc-not-checked" || f.code == "host-unreadable"));

        // debugfs is root's: refused at the listing or at the files, the read gives no
        // finding and the GuC is reported as not checked.
        for debugfs in ["/sys/kernel/debug", "/sys/kernel/debug/dri/0000:00:02.0/gt0/uc"] {
            let host = fixture("desktop-rpl-nvidia");
            host.deny_for_test("/proc/meminfo");
            host.deny_for_test(debugfs);
            let facts = crate::detect::facts(&host, &VendorFilter::Auto);
            let unreadable: Vec<_> = facts.findings.iter().filter(|f| f.code == "host-unreadable").collect();
            assert_eq!(unreadable.len(), 1, "{debugfs}: {unreadable:?}");
            assert_eq!((unreadable[0].level, unreadable[0].evidence.as_str()), (Level::Warn, "/proc/meminfo"));
            assert!(unreadable[0].text.contains("permission denied"), "{}", unreadable[0].text);
            assert_eq!(facts.host.memory.total_kib, None);
            assert!(facts.host.intel_gpus[0].guc.is_none(), "{debugfs}");
            assert!(facts.findings.iter().any(|f| f.code == "guc-not-checked"), "{debugfs}: {:?}", facts.findings);
            assert!(
                !facts.findings.iter().any(|f| f.evidence.starts_with("/sys/kernel/debug/dri/")),
                "{debugfs}: {:?}",
                facts.findings
            );
        }
    }
}
