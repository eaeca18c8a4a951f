//! Writing the files the user asked for (`render --out`, `plan --out`, `facts --out`, the k3d
//! config apply hands to k3d). A directory in a repository can hold a link where an output
//! file goes (`gitops/x.yaml -> ~/.bashrc`): writing through it would change a file the plan
//! never named. So a write never follows a link: the bytes go to a new file in the same
//! directory (created exclusively, so nothing there is opened) and are renamed over the name,
//! which replaces a link rather than its target. A reader sees the old file or the new one.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Owner read/write only: files that can hold a secret (Secret manifests, k3d's config).
pub const PRIVATE: u32 = 0o600;
/// Readable by everyone: plans, facts, manifests without secrets.
pub const PUBLIC: u32 = 0o644;

/// Writes `bytes` to `path` with `mode`, atomically and without following a link at `path`.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    write_with(path, mode, |file| file.write_all(bytes))
}

/// [`write`] of what `fill` writes into the file (a document streamed as it is made), giving
/// what `fill` gives.
pub fn write_with<T>(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| std::io::Error::other("not a file name"))?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut attempt = 0;
    let (temp, mut file) = loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{}.{}-{n}.k3d-gpu-tmp", name.to_string_lossy(), std::process::id()));
        // create_new: O_CREAT|O_EXCL, which never follows a link (one planted there fails).
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp) {
            Ok(f) => break (temp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let written = (|| {
        let filled = fill(&mut file)?;
        // No chmod after: the umask only ever narrows `mode` (a private file stays private), and
        // a user whose umask is 077 wants a public document private too.
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        Ok(filled)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_at_the_output_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("bashrc");
        std::fs::write(&victim, "keep\n").unwrap();
        let out = dir.path().join("x.yaml");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        write(&out, b"kind: Secret\n", PRIVATE).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
        let meta = std::fs::symlink_metadata(&out).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, PRIVATE);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "kind: Secret\n");
        // Nothing left behind but the two files.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
