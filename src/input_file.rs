//! Reading the user's files (config, saved facts and observed documents, plans, component files
//! and their manifests, the kubeconfig): regular files only, never in /proc or /sys, opened
//! without blocking and read bounded, so `/dev/zero`, `/proc/kmsg` or a FIFO given by mistake
//! (or by a hostile config) is an error, not a hang or a machine out of memory.

use std::io::Read;
use std::path::Path;

// The tree is a node image's build context; its types belong to the image's pure model.
pub use crate::node_image::{TreeFile, TreeLimits};

/// Far above any real config, document or manifest.
pub const MAX_INPUT: u64 = 32 << 20;

/// Why a file was not read. Shown as a sentence for the user; callers that treat a kind
/// specially (a missing file, a file too large) match the variant, never the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// What the operating system said (missing, no permission, …).
    #[error("{text}")]
    Io { kind: std::io::ErrorKind, text: String },
    #[error("is a kernel file (/proc or /sys), not a document")]
    KernelFile,
    #[error("not a regular file")]
    NotRegular,
    #[error("{}", too_large(*.0))]
    TooLarge(u64),
    #[error("reading it would wait (not an ordinary file)")]
    WouldBlock,
    #[error("not UTF-8 text")]
    NotUtf8,
    /// A build context: more files than allowed.
    #[error("more than {0} files")]
    TooManyFiles(usize),
    /// A build context: a link, a special file or a name that is not plain text, at `path`.
    #[error("{path}: {why}")]
    NotInTree { path: String, why: &'static str },
    /// A build context: `path` could not be read.
    #[error("{path}: {source}")]
    InTree { path: String, source: Box<InputError> },
}

impl From<std::io::Error> for InputError {
    fn from(e: std::io::Error) -> InputError {
        InputError::Io { kind: e.kind(), text: e.to_string() }
    }
}

/// Reads `path` as UTF-8 text, refusing anything that is not a regular file or is larger
/// than [`MAX_INPUT`]. The error is a sentence for the user.
pub fn read_text(path: &Path) -> Result<String, InputError> {
    read_text_capped(path, MAX_INPUT)
}

/// [`read_text`] with a smaller cap.
pub fn read_text_capped(path: &Path, cap: u64) -> Result<String, InputError> {
    let bytes = read_capped(path, cap)?;
    String::from_utf8(bytes).map_err(|_| InputError::NotUtf8)
}

pub fn read_bytes(path: &Path) -> Result<Vec<u8>, InputError> {
    read_capped(path, MAX_INPUT)
}

/// Opens without blocking (O_NONBLOCK: a FIFO or a tty does not wait for a writer), checks the
/// type of what was opened (not of what the name pointed to a moment before), and reads at
/// most `cap` bytes. procfs calls `/proc/kmsg` a regular file, yet a read waits for the next
/// kernel message: non-blocking, that read is an error instead of a hang.
fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, InputError> {
    use std::os::unix::fs::OpenOptionsExt;
    // No input of ours lives in the kernel's own filesystems; some of their "regular files"
    // block or have side effects when read (/proc/kmsg consumes the kernel log).
    let resolved = std::fs::canonicalize(path)?;
    if resolved.starts_with("/proc") || resolved.starts_with("/sys") {
        return Err(InputError::KernelFile);
    }
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::O_NONBLOCK | libc_flags::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(InputError::NotRegular);
    }
    if meta.len() > cap {
        return Err(InputError::TooLarge(cap));
    }
    // Sized from the length read above: read into a growing buffer, an observed document of
    // 26 MB was copied through ten doublings and touched twice its size in fresh pages. The
    // file may still grow; the cap holds whatever its length was.
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => InputError::WouldBlock,
        _ => e.into(),
    })?;
    if bytes.len() as u64 > cap {
        return Err(InputError::TooLarge(cap));
    }
    Ok(bytes)
}

fn too_large(cap: u64) -> String {
    if cap >= 1 << 20 { format!("larger than {} MiB", cap >> 20) } else { format!("larger than {} KiB", cap >> 10) }
}

/// The open(2) flags std has no name for (Linux values; the same on every architecture Rust
/// supports there except alpha/sparc/parisc/mips, which k3d does not run on).
mod libc_flags {
    pub const O_NONBLOCK: i32 = 0o4000;
    pub const O_NOCTTY: i32 = 0o400;
}

/// The kind of error std gives for a missing file, for callers that treat "absent" specially.
pub fn is_missing(path: &Path) -> bool {
    matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// The directory a config's own files must stay in: the repository that holds the config
/// (the nearest directory above it with a `.git`), or the config's own directory when there
/// is none.
pub fn repository_of(config_dir: &Path) -> std::io::Result<std::path::PathBuf> {
    let dir = std::fs::canonicalize(config_dir)?;
    Ok(dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(&dir).to_path_buf())
}

/// `path` (relative to `dir`) with every link resolved, or why it may not be read: it does
/// not resolve, or it leads outside `boundary`. A file a config or a plan names must not make
/// k3d-gpu read (and echo) `/proc/self/environ` or `~/.ssh/id_rsa` through a link.
pub fn resolve_within(boundary: &Path, dir: &Path, path: &Path) -> Result<std::path::PathBuf, Unconfined> {
    let resolved = std::fs::canonicalize(dir.join(path)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Unconfined::Missing,
        kind => Unconfined::Unresolvable(kind),
    })?;
    if !resolved.starts_with(boundary) {
        return Err(Unconfined::Outside(boundary.to_path_buf()));
    }
    Ok(resolved)
}

/// Why a file a config or a plan names may not be read. The text completes a sentence that
/// names the file ("component path \"x.kdl\" leads outside …").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unconfined {
    #[error("no such file or directory")]
    Missing,
    #[error("cannot resolve it: {0}")]
    Unresolvable(std::io::ErrorKind),
    #[error("leads outside {} (links included)", .0.display())]
    Outside(std::path::PathBuf),
    /// The directory the file must stay in could not itself be resolved.
    #[error("cannot resolve the config's directory: {0}")]
    ConfigDir(std::io::ErrorKind),
    /// The name is refused before anything is read: absolute, not a `.kdl` file, …
    #[error("{0}")]
    Name(&'static str),
    /// A link on the way leads to nothing: a directory made through it would land wherever
    /// it points.
    #[error("a link on its way leads nowhere")]
    Dangling,
}

/// `path` (absolute) with every link resolved, as `realpath -m` gives it: the part that exists
/// resolved by the OS, the rest (a directory not made yet) appended as written. A link that
/// leads nowhere is refused: a directory made through it would land wherever it points.
pub fn resolve_links(path: &Path) -> Result<std::path::PathBuf, Unconfined> {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        match std::fs::symlink_metadata(existing) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
                    return Err(Unconfined::Name("holds a `..` component"));
                };
                rest.push(name);
                existing = parent;
            }
            Err(e) => return Err(Unconfined::Unresolvable(e.kind())),
        }
    }
    let resolved = std::fs::canonicalize(existing).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Unconfined::Dangling,
        kind => Unconfined::Unresolvable(kind),
    })?;
    Ok(rest.iter().rev().fold(resolved, |p, name| p.join(name)))
}

/// A directory's regular files by relative path (`/`-separated), bounded in count and size.
/// A link or a special file is refused: what is sent on (a build context to Docker) is
/// exactly what was hashed.
pub fn read_tree(
    dir: &Path,
    limits: TreeLimits,
) -> std::result::Result<std::collections::BTreeMap<String, TreeFile>, InputError> {
    use std::os::unix::fs::PermissionsExt;
    let TreeLimits { files: max_files, bytes: max_bytes } = limits;
    let mut files = std::collections::BTreeMap::new();
    let mut total: u64 = 0;
    let mut stack: Vec<(std::path::PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        let in_tree = |e: InputError| InputError::InTree { path: path.display().to_string(), source: Box::new(e) };
        let meta = std::fs::symlink_metadata(&path).map_err(|e| in_tree(e.into()))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(|e| in_tree(e.into()))? {
                let entry = entry?;
                let name = entry.file_name();
                let Some(name) = name.to_str().filter(|n| !n.chars().any(char::is_control)) else {
                    let why = "a file name that is not plain UTF-8";
                    return Err(InputError::NotInTree { path: path.display().to_string(), why });
                };
                let child = if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
                stack.push((entry.path(), child));
            }
        } else if meta.is_file() {
            if files.len() >= max_files {
                return Err(InputError::TooManyFiles(max_files));
            }
            total += meta.len();
            if total > max_bytes {
                return Err(InputError::TooLarge(max_bytes));
            }
            let bytes = read_capped(&path, max_bytes).map_err(in_tree)?;
            files.insert(rel, TreeFile { bytes, executable: meta.permissions().mode() & 0o111 != 0 });
        } else {
            let why = "a link or special file; a build context holds files and directories";
            return Err(InputError::NotInTree { path: path.display().to_string(), why });
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confined_path_says_why_by_its_variant() {
        let dir = tempfile::tempdir().unwrap();
        let inside = std::fs::canonicalize(dir.path()).unwrap().join("in");
        std::fs::create_dir(&inside).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", inside.join("out")).unwrap();
        assert_eq!(resolve_within(&inside, &inside, Path::new("gone")), Err(Unconfined::Missing));
        let outside = resolve_within(&inside, &inside, Path::new("out")).unwrap_err();
        assert_eq!(outside, Unconfined::Outside(inside.clone()));
        assert_eq!(outside.to_string(), format!("leads outside {} (links included)", inside.display()));
    }

    #[test]
    fn a_tree_keeps_each_files_execute_bit_and_its_limits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let script = dir.path().join("bin/entry.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        let limits = TreeLimits { files: 10, bytes: 1 << 20 };
        let tree = read_tree(dir.path(), limits).unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["Dockerfile", "bin/entry.sh"]);
        assert!(tree["bin/entry.sh"].executable);
        assert!(!tree["Dockerfile"].executable);
        assert_eq!(read_tree(dir.path(), TreeLimits { files: 1, ..limits }).unwrap_err(), InputError::TooManyFiles(1));
        assert_eq!(read_tree(dir.path(), TreeLimits { bytes: 8, ..limits }).unwrap_err(), InputError::TooLarge(8));
    }

    #[test]
    fn devices_and_fifos_are_refused() {
        assert_eq!(read_bytes(Path::new("/dev/zero")).unwrap_err(), InputError::NotRegular);
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(read_text(&fifo).unwrap_err(), InputError::NotRegular);
        assert!(is_missing(&dir.path().join("nothing")));
    }

    #[test]
    fn a_file_that_would_block_is_an_error_not_a_hang() {
        // procfs says "regular file", and a read of /proc/kmsg waits for the next message.
        let start = std::time::Instant::now();
        assert_eq!(read_bytes(Path::new("/proc/kmsg")).unwrap_err(), InputError::KernelFile);
        assert_eq!(read_bytes(Path::new("/proc/self/environ")).unwrap_err(), InputError::KernelFile);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        assert_eq!(read_text_capped(&big, 1024).unwrap_err().to_string(), "larger than 1 KiB");
    }
}
