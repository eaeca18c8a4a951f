//! `facts capture`: turn what detection read into a fixture host.
//!
//! Copies exactly the trail of a detection run — files, listed directories, followed links —
//! from one root into a new directory, so the copy detects to the same facts. Device nodes
//! become empty files and their owner and mode go to the `.k3d-gpu-stat` sidecar.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::stat::{NodeStat, SIDECAR, format_sidecar};
use super::{HostRoot, Trail};

/// What a capture wrote, for the command's summary. Every regular file written is counted
/// in exactly one of `files`, `device_nodes`, `placeholders`, `keeps` and `sidecar`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CaptureReport {
    /// Files copied with the content detection read.
    pub files: usize,
    pub dirs: usize,
    pub links: usize,
    /// Device nodes, written as empty files.
    pub device_nodes: usize,
    /// Empty files standing for the entries of a listed directory (their names are facts).
    pub placeholders: usize,
    /// `.keep` markers that keep empty directories in git.
    pub keeps: usize,
    /// Whether the `.k3d-gpu-stat` sidecar was written.
    pub sidecar: bool,
    pub bytes: u64,
}

impl CaptureReport {
    /// Every regular file the capture wrote.
    pub fn files_written(&self) -> usize {
        self.files + self.device_nodes + self.placeholders + self.keeps + usize::from(self.sidecar)
    }
}

/// The only `/proc/cmdline` parameters detection reads. The rest of a command line can hold
/// secrets (disk-encryption keys, tokens passed to an initramfs), so capture keeps only these.
const CMDLINE_KEPT: [&str; 3] = ["i915.force_probe=", "xe.force_probe=", "split_lock_detect="];

/// A kernel command line reduced to what detection needs.
fn cmdline_for_capture(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let kept: Vec<&str> = text.split_whitespace().filter(|p| CMDLINE_KEPT.iter().any(|k| p.starts_with(k))).collect();
    let mut line = kept.join(" ");
    line.push('\n');
    line.into_bytes()
}

/// A file's captured content in place of its bytes, when the caller keeps less of it (by
/// host path); `None` keeps the file as read.
pub type Reduce<'a> = &'a dyn Fn(&str, &[u8]) -> Option<Vec<u8>>;

/// Writes the trail of `host` into `out`, which must not exist yet or be empty.
pub fn capture(host: &HostRoot, trail: &Trail, out: &Path) -> io::Result<CaptureReport> {
    capture_reduced(host, trail, out, &|_, _| None)
}

/// [`capture`], with `reduce` cutting files down to what their reader uses (host-setup keeps
/// only the symbol versions of a library, not the library).
pub fn capture_reduced(host: &HostRoot, trail: &Trail, out: &Path, reduce: Reduce) -> io::Result<CaptureReport> {
    if out.exists() && fs::read_dir(out)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is not empty; capture writes a fresh directory", out.display()),
        ));
    }
    fs::create_dir_all(out)?;
    let mut report = CaptureReport::default();
    // Placeholders a read file later fills are counted as that file, not twice.
    let mut placeholders = std::collections::BTreeSet::new();
    for dir in &trail.dirs {
        fs::create_dir_all(inside(out, dir))?;
        report.dirs += 1;
    }
    for (link, target) in &trail.links {
        let at = inside(out, link);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent)?;
        }
        if fs::symlink_metadata(&at).is_err() {
            std::os::unix::fs::symlink(target, &at)?;
        }
        report.links += 1;
    }
    // A listing's entry names are facts too (engines, cards, queues): recreate each entry,
    // as a link, a directory or an empty file, unless something above already did.
    for dir in &trail.listings {
        for entry in fs::read_dir(host.on_disk(dir))? {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let at = inside(out, dir).join(&name);
            if fs::symlink_metadata(&at).is_ok() {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(entry.path())?, &at)?;
                report.links += 1;
            } else if kind.is_dir() {
                fs::create_dir_all(&at)?;
            } else {
                fs::write(&at, b"")?;
                placeholders.insert(at);
            }
        }
    }
    let mut stats: BTreeMap<String, NodeStat> = BTreeMap::new();
    for file in &trail.files {
        let source = host.on_disk(file);
        let at = inside(out, file);
        placeholders.remove(&at);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent)?;
        }
        if file.starts_with("/dev/") {
            // A device node: detection only tests that it exists, so an empty file stands in
            // for it, and its owner and mode go to the sidecar.
            fs::write(&at, b"")?;
            if let Ok(Some(stat)) = host.node_stat(file) {
                stats.insert(file.clone(), stat);
            }
            report.device_nodes += 1;
        } else {
            let mut bytes = fs::read(&source)?;
            if file == "/proc/cmdline" {
                bytes = cmdline_for_capture(&bytes);
            } else if let Some(kept) = reduce(file, &bytes) {
                bytes = kept;
            }
            report.bytes += bytes.len() as u64;
            fs::write(&at, bytes)?;
            report.files += 1;
        }
    }
    report.placeholders = placeholders.len();
    if !stats.is_empty() {
        fs::write(out.join(SIDECAR), format_sidecar(&stats))?;
        report.sidecar = true;
    }
    report.keeps = keep_empty_dirs(out)?;
    Ok(report)
}

/// Writes a file of captured program output at the fixture's root (`name` is a dot file such
/// as `.k3d-gpu-nvidia-smi.csv`, which detection reads only in a fixture host).
pub fn write_sidecar(out: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    fs::write(inside(out, name), bytes)
}

fn inside(out: &Path, host_path: &str) -> PathBuf {
    out.join(host_path.trim_start_matches('/'))
}

/// Git drops empty directories, and an empty directory can be a fact (an engine, a module);
/// a `.keep` file keeps it. Detection skips dot entries. Returns how many it wrote.
fn keep_empty_dirs(dir: &Path) -> io::Result<usize> {
    let mut empty = true;
    let mut written = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        empty = false;
        if entry.file_type()?.is_dir() {
            written += keep_empty_dirs(&entry.path())?;
        }
    }
    if empty {
        fs::write(dir.join(".keep"), b"")?;
        written += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_captured_cmdline_keeps_only_what_detection_reads() {
        let line =
            b"BOOT_IMAGE=/vmlinuz root=UUID=1 cryptkey=hunter2 xe.force_probe=e20b quiet i915.force_probe=!e20b\n";
        assert_eq!(cmdline_for_capture(line), b"xe.force_probe=e20b i915.force_probe=!e20b\n");
        assert_eq!(cmdline_for_capture(b"quiet splash\n"), b"\n");
    }
}
