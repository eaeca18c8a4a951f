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

/// What a capture wrote, for the command's summary.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CaptureReport {
    pub files: usize,
    pub dirs: usize,
    pub links: usize,
    pub device_nodes: usize,
    pub bytes: u64,
}

/// Writes the trail of `host` into `out`, which must not exist yet or be empty.
pub fn capture(host: &HostRoot, trail: &Trail, out: &Path) -> io::Result<CaptureReport> {
    if out.exists() && fs::read_dir(out)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is not empty; capture writes a fresh directory", out.display()),
        ));
    }
    fs::create_dir_all(out)?;
    let mut report = CaptureReport::default();
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
            }
        }
    }
    let mut stats: BTreeMap<String, NodeStat> = BTreeMap::new();
    for file in &trail.files {
        let source = host.on_disk(file);
        let at = inside(out, file);
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
            let bytes = fs::read(&source)?;
            report.bytes += bytes.len() as u64;
            fs::write(&at, bytes)?;
            report.files += 1;
        }
    }
    if !stats.is_empty() {
        fs::write(out.join(SIDECAR), format_sidecar(&stats))?;
    }
    keep_empty_dirs(out)?;
    Ok(report)
}

fn inside(out: &Path, host_path: &str) -> PathBuf {
    out.join(host_path.trim_start_matches('/'))
}

/// Git drops empty directories, and an empty directory can be a fact (an engine, a module);
/// a `.keep` file keeps it. Detection skips dot entries.
fn keep_empty_dirs(dir: &Path) -> io::Result<()> {
    let mut empty = true;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        empty = false;
        if entry.file_type()?.is_dir() {
            keep_empty_dirs(&entry.path())?;
        }
    }
    if empty {
        fs::write(dir.join(".keep"), b"")?;
    }
    Ok(())
}
