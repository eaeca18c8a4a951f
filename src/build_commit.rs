//! The git commit a build is made from, for `k3d-gpu version`. Not a module of the crate:
//! `build.rs` includes this file and runs it once per build (so the binary never runs git),
//! and `tests/version.rs` includes it to check its answers.
//!
//! In order: `K3D_GPU_BUILD_COMMIT` (a packager building from a tarball who knows the
//! commit); the checkout the crate sits in, when git tracks its `Cargo.toml` there (a tarball
//! unpacked inside some other repository is not that repository's commit); the
//! `.cargo_vcs_info.json` that `cargo package` writes (a crate from crates.io). Otherwise
//! [`UNKNOWN`]. Whatever is found must look like a commit id (hex, 7-64 digits), or it is
//! [`UNKNOWN`] too: the value ends up in a terminal and in JSON.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `version` says when the build had no commit to record.
pub const UNKNOWN: &str = "unknown";

/// The variable a packager sets to name the commit of a build made outside git.
pub const ENV: &str = "K3D_GPU_BUILD_COMMIT";

/// A full or abbreviated commit id: 7 to 64 lowercase hex digits (SHA-1 or SHA-256).
pub fn is_commit(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `git -C dir ARGS`, its trimmed stdout when it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out =
        Command::new("git").arg("-C").arg(dir).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

/// The commit of the checkout `dir` is the root of, when git tracks `dir/Cargo.toml` there.
fn from_git(dir: &Path) -> Option<String> {
    git(dir, &["ls-files", "--error-unmatch", "--", "Cargo.toml"])?;
    git(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).filter(|c| is_commit(c))
}

/// `git.sha1` of the `.cargo_vcs_info.json` in `dir`.
fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["git"]["sha1"].as_str().map(str::to_string).filter(|c| is_commit(c))
}

/// The commit of the crate at `dir`, given the build's `K3D_GPU_BUILD_COMMIT` (`given`).
pub fn commit(dir: &Path, given: Option<&str>) -> String {
    if let Some(given) = given.map(str::trim).filter(|g| !g.is_empty()) {
        return if is_commit(given) { given.to_string() } else { UNKNOWN.to_string() };
    }
    from_git(dir).or_else(|| from_vcs_info(dir)).unwrap_or_else(|| UNKNOWN.to_string())
}

/// The files whose change means another commit (or another branch): HEAD, the branch's ref
/// and packed-refs, each where git keeps it (a worktree's HEAD is its own, its refs shared).
/// Empty outside a checkout.
pub fn watched(dir: &Path) -> Vec<PathBuf> {
    let Some(_) = from_git(dir) else { return Vec::new() };
    let mut paths = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(dir, &["symbolic-ref", "--quiet", "HEAD"]) {
        paths.push(branch);
    }
    paths
        .iter()
        .filter_map(|p| git(dir, &["rev-parse", "--path-format=absolute", "--git-path", p]))
        .map(PathBuf::from)
        // cargo reruns a build script on every build when a path it watches is missing.
        .filter(|p| p.is_absolute() && p.exists())
        .collect()
}
