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

/// Writes `bytes` to `path` with `mode` only when nothing is there: a file, a directory or a
/// link (even a dangling one) at `path` fails with `AlreadyExists` and is left as it was. The
/// bytes go to a new file in the same directory first, then are linked in under the name
/// (`link(2)`, which never replaces a name and never follows a link there), so a reader sees
/// no file or the whole of it. Where the filesystem has no hard links, the file is created at
/// `path` exclusively (`O_CREAT|O_EXCL`) and written there.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| std::io::Error::other("not a file name"))?;
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut attempt = 0;
    let (temp, mut file) = loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{}.{}-new{n}.k3d-gpu-tmp", name.to_string_lossy(), std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp) {
            Ok(f) => break (temp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let staged = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let linked = staged.map(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match linked? {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            // No hard links on this filesystem: an exclusive create at the name.
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
            let written = file.write_all(bytes).and_then(|()| file.sync_all());
            if written.is_err() {
                let _ = std::fs::remove_file(path);
            }
            written
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_new_never_replaces_anything_at_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("k3dgpu.toml");
        write_new(&fresh, b"a = 1\n", PUBLIC).unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "a = 1\n");
        let again = write_new(&fresh, b"b = 2\n", PUBLIC).unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "a = 1\n");
        // A dangling link is something there too, and its target is not created.
        let link = dir.path().join("dangling.toml");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert_eq!(write_new(&link, b"x\n", PUBLIC).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        assert!(!dir.path().join("nowhere").exists());
        // Nothing left behind but the file and the link.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

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
