//! What host-setup reads of the host, through [`HostRoot`]: os-release, and the user-space
//! libraries of each vendor in the three library directories distros use. Versions come
//! from file names (`libva.so.2` → `libva.so.2.2200.0`) and from the symbol-version strings
//! inside a library (`GLIBCXX_3.4.33`, `__vaDriverInit_1_22`), scanned in bytes read with the
//! host's bound. Nothing is run. `facts capture` runs this too, so a capture carries these
//! files — reduced to the strings read here ([`reduce_for_capture`]).

use std::collections::BTreeMap;

use crate::host::HostRoot;

/// Where distros put x86-64 libraries: Debian/Ubuntu, Fedora, Arch.
pub const LIB_DIRS: [&str; 3] = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"];

const NVIDIA_CTK: &str = "/usr/bin/nvidia-ctk";
const VA_INIT: &[u8] = b"__vaDriverInit_1_";
const GLIBCXX: &[u8] = b"GLIBCXX_3.4";

/// One library found: its host path and what was read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: String,
    /// libva: the minor of 2.N; media driver: the N of the newest `__vaDriverInit_1_N`;
    /// libstdc++: the newest `GLIBCXX_3.4.N` it defines; compute runtime: the newest it needs.
    pub version: Option<u32>,
}

/// The host as host-setup sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostState {
    /// /etc/os-release keys (ID, VERSION_ID, ID_LIKE, PRETTY_NAME); empty when unreadable.
    pub os_release: BTreeMap<String, String>,
    pub libva: Option<Found>,
    pub media_driver: Option<Found>,
    pub libstdcxx: Option<Found>,
    /// The OpenCL ICD and the Level Zero GPU driver, each with the newest GLIBCXX it needs.
    pub compute_runtime: Vec<Found>,
    pub level_zero_loader: Option<Found>,
    pub npu_driver: Option<Found>,
    pub nvidia_ctk: Option<Found>,
    /// Read errors, as `path: reason`, reported rather than hidden.
    pub unreadable: Vec<String>,
}

/// The newest `N` after `prefix` in `bytes` (`prefix` then ASCII digits); for GLIBCXX, the
/// bare `GLIBCXX_3.4` counts as 0.
pub fn newest_after(bytes: &[u8], prefix: &[u8]) -> Option<u32> {
    let mut best: Option<u32> = None;
    let mut i = 0;
    while let Some(at) = find(&bytes[i..], prefix) {
        let start = i + at + prefix.len();
        let mut end = start;
        if prefix == GLIBCXX {
            // `GLIBCXX_3.4` alone, or `GLIBCXX_3.4.N`; `GLIBCXX_3.40` is not one.
            match bytes.get(start) {
                Some(b'.') => end = start + 1,
                Some(c) if c.is_ascii_digit() => {
                    i = start;
                    continue;
                }
                _ => {
                    best = best.max(Some(0));
                    i = start;
                    continue;
                }
            }
        }
        let digits_from = end;
        while end < bytes.len() && end - digits_from < 6 && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end > digits_from
            && let Ok(n) = std::str::from_utf8(&bytes[digits_from..end]).unwrap_or("").parse::<u32>()
        {
            best = best.max(Some(n));
        }
        i = end.max(start);
    }
    best
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while from + needle.len() <= hay.len() {
        let at = from + hay[from..].iter().position(|&b| b == first)?;
        if hay.get(at..at + needle.len()) == Some(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// libva's minor version from its file name: `libva.so.2.2200.0` is libva 2.22.
pub fn libva_minor(file_name: &str) -> Option<u32> {
    let rest = file_name.strip_prefix("libva.so.2.")?;
    let major_minor: u32 = rest.split('.').next()?.parse().ok()?;
    Some(major_minor / 100)
}

/// A captured library reduced to the strings this probe reads from it: a fixture stays small
/// and holds no vendor binary, and it still reads back to the same versions.
pub fn reduce_for_capture(host_path: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    if host_path == NVIDIA_CTK {
        // Only its existence is read.
        return Some(Vec::new());
    }
    let name = host_path.rsplit('/').next().unwrap_or("");
    let in_lib_dir = LIB_DIRS.iter().any(|d| host_path.starts_with(&format!("{d}/")));
    let ours = ["libva.so", "iHD_drv_video.so", "libstdc++.so", "libigdrcl.so", "libze_"];
    if !in_lib_dir || !ours.iter().any(|p| name.starts_with(p)) {
        return None;
    }
    let mut out = b"k3d-gpu facts capture: the symbol versions host-setup reads\n".to_vec();
    for prefix in [VA_INIT, GLIBCXX] {
        if let Some(n) = newest_after(bytes, prefix) {
            out.extend_from_slice(prefix);
            if prefix == GLIBCXX {
                out.push(b'.');
            }
            out.extend_from_slice(n.to_string().as_bytes());
            out.push(b'\n');
        }
    }
    Some(out)
}

impl HostState {
    fn note(&mut self, path: &str, e: crate::host::HostError) {
        self.unreadable.push(format!("{path}: {e}"));
    }

    /// The first library directory where `rel` exists, resolved (links followed).
    fn locate(&mut self, host: &HostRoot, rel: &str) -> Option<String> {
        for dir in LIB_DIRS {
            let path = format!("{dir}/{rel}");
            match host.canonical(&path) {
                Ok(Some(at)) => return Some(at),
                Ok(None) => {}
                Err(e) => self.note(&path, e),
            }
        }
        None
    }

    fn scanned(&mut self, host: &HostRoot, rel: &str, prefix: &[u8]) -> Option<Found> {
        let path = self.locate(host, rel)?;
        match host.read_bytes(&path) {
            Ok(Some(bytes)) => Some(Found { version: newest_after(&bytes, prefix), path }),
            Ok(None) => None,
            Err(e) => {
                self.note(&path, e);
                Some(Found { path, version: None })
            }
        }
    }

    fn present(&mut self, host: &HostRoot, rel: &str) -> Option<Found> {
        self.locate(host, rel).map(|path| Found { path, version: None })
    }
}

/// Reads what host-setup needs from `host`.
pub fn read(host: &HostRoot) -> HostState {
    let mut state = HostState::default();
    match host.read_text("/etc/os-release") {
        Ok(Some(text)) => state.os_release = crate::parse::parse_os_release(&text),
        Ok(None) => {}
        Err(e) => state.note("/etc/os-release", e),
    }
    state.libva = state.locate(host, "libva.so.2").map(|path| {
        let version = libva_minor(path.rsplit('/').next().unwrap_or(""));
        Found { path, version }
    });
    state.media_driver = state.scanned(host, "dri/iHD_drv_video.so", VA_INIT);
    state.libstdcxx = state.scanned(host, "libstdc++.so.6", GLIBCXX);
    let mut compute = Vec::new();
    for rel in ["intel-opencl/libigdrcl.so", "libze_intel_gpu.so.1"] {
        compute.extend(state.scanned(host, rel, GLIBCXX));
    }
    state.compute_runtime = compute;
    state.level_zero_loader = state.present(host, "libze_loader.so.1");
    state.npu_driver =
        state.present(host, "libze_intel_npu.so.1").or_else(|| state.present(host, "libze_intel_vpu.so.1"));
    state.nvidia_ctk = match host.canonical(NVIDIA_CTK) {
        Ok(found) => found.map(|path| Found { path, version: None }),
        Err(e) => {
            state.note(NVIDIA_CTK, e);
            None
        }
    };
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_version_after_a_prefix_is_found_and_lookalikes_are_not() {
        let bytes = b"\0GLIBCXX_3.4\0GLIBCXX_3.4.21\0GLIBCXX_3.4.9\0GLIBCXX_3.40\0GLIBCXX_3.4.33\0CXXABI_1.3\0";
        assert_eq!(newest_after(bytes, GLIBCXX), Some(33));
        assert_eq!(newest_after(b"\0GLIBCXX_3.4\0", GLIBCXX), Some(0));
        assert_eq!(newest_after(b"nothing here", GLIBCXX), None);
        assert_eq!(newest_after(b"__vaDriverInit_1_20\0__vaDriverInit_1_22\0", VA_INIT), Some(22));
        assert_eq!(newest_after(b"__vaDriverInit_1_", VA_INIT), None);
        assert_eq!(newest_after(b"__vaDriverInit_1_99999999999", VA_INIT), Some(999_999));
    }

    #[test]
    fn libva_versions_come_from_the_file_name() {
        assert_eq!(libva_minor("libva.so.2.2200.0"), Some(22));
        assert_eq!(libva_minor("libva.so.2.2000.0"), Some(20));
        assert_eq!(libva_minor("libva.so.2"), None);
        assert_eq!(libva_minor("libva.so.2.x.0"), None);
    }

    #[test]
    fn a_capture_keeps_only_the_versions_read() {
        let reduced =
            reduce_for_capture("/usr/lib/libstdc++.so.6.0.33", b"\x7fELF junk GLIBCXX_3.4.30 GLIBCXX_3.4.33 junk")
                .unwrap();
        assert_eq!(newest_after(&reduced, GLIBCXX), Some(33));
        assert!(!reduced.windows(4).any(|w| w == b"junk"));
        assert_eq!(reduce_for_capture("/usr/lib/os-release", b"x"), None);
        assert_eq!(reduce_for_capture("/sys/bus/libva.so.2", b"x"), None);
        assert_eq!(reduce_for_capture("/usr/bin/nvidia-ctk", b"\x7fELF..."), Some(Vec::new()));
    }
}
