//! Shared helpers for the integration tests: fixture hosts and golden files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use k3d_gpu::facts::{Facts, VendorFilter};
use k3d_gpu::host::HostRoot;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn hosts_dir() -> PathBuf {
    repo().join("tests/fixtures/hosts")
}

/// Every fixture host, by name, sorted.
pub fn host_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(hosts_dir())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn facts_of(host: &str) -> Facts {
    facts_with(host, &VendorFilter::Auto)
}

pub fn facts_with(host: &str, filter: &VendorFilter) -> Facts {
    facts_at(&hosts_dir().join(host), filter)
}

pub fn facts_at(root: &Path, filter: &VendorFilter) -> Facts {
    let host = HostRoot::open(root).unwrap_or_else(|e| panic!("open {}: {e}", root.display()));
    k3d_gpu::detect::facts(&host, filter)
}

/// Compares `actual` with the golden file at `path` (relative to the repo), or rewrites it
/// when `UPDATE_GOLDEN=1`. Returns a description of the mismatch instead of panicking so one
/// run reports every stale golden.
pub fn check_golden(path: &str, actual: &[u8]) -> Result<(), String> {
    let full = repo().join(path);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, actual).unwrap();
        return Ok(());
    }
    let expected = std::fs::read(&full).map_err(|e| format!("{path}: {e} (run UPDATE_GOLDEN=1 cargo test)"))?;
    if expected == actual {
        return Ok(());
    }
    let expected = String::from_utf8_lossy(&expected);
    let actual = String::from_utf8_lossy(actual);
    let first = expected.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(0);
    Err(format!(
        "{path} is stale at line {}:\n  golden: {}\n  now:    {}\n(review, then UPDATE_GOLDEN=1 cargo test)",
        first + 1,
        expected.lines().nth(first).unwrap_or("<end>"),
        actual.lines().nth(first).unwrap_or("<end>")
    ))
}

/// Copies a fixture host to a fresh temp dir, links included.
pub fn copy_host(host: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&hosts_dir().join(host), dir.path());
    dir
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
