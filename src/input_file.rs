//! Reading the user's files (config, saved facts and observed documents, component files and
//! their manifests): regular files only, bounded, so `/dev/zero` or a FIFO given by mistake is
//! an error, not a hang or a machine out of memory.

use std::io::Read;
use std::path::Path;

/// Far above any real config, document or manifest.
pub const MAX_INPUT: u64 = 32 << 20;

/// Reads `path` as UTF-8 text, refusing anything that is not a regular file or is larger
/// than [`MAX_INPUT`]. The error is a sentence for the user.
pub fn read_text(path: &Path) -> Result<String, String> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

pub fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(format!("larger than {} MiB", MAX_INPUT >> 20));
    }
    Ok(bytes)
}

/// The kind of error std gives for a missing file, for callers that treat "absent" specially.
pub fn is_missing(path: &Path) -> bool {
    matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// A build context directory: its regular files by relative path, bounded in count and size.
/// A link or a special file is refused: what is sent to Docker is exactly what was hashed.
pub fn read_context(dir: &Path) -> std::result::Result<std::collections::BTreeMap<String, Vec<u8>>, String> {
    use crate::node_image::{MAX_CONTEXT_BYTES, MAX_CONTEXT_FILES};
    let mut files = std::collections::BTreeMap::new();
    let mut total: u64 = 0;
    let mut stack: Vec<(std::path::PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(|e| format!("{}: {e}", path.display()))? {
                let entry = entry.map_err(|e| e.to_string())?;
                let name = entry.file_name();
                let Some(name) = name.to_str().filter(|n| !n.chars().any(char::is_control)) else {
                    return Err(format!("{}: a file name that is not plain UTF-8", path.display()));
                };
                let child = if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
                stack.push((entry.path(), child));
            }
        } else if meta.is_file() {
            if files.len() >= MAX_CONTEXT_FILES {
                return Err(format!("more than {MAX_CONTEXT_FILES} files"));
            }
            total += meta.len();
            if total > MAX_CONTEXT_BYTES {
                return Err(format!("larger than {} MiB", MAX_CONTEXT_BYTES >> 20));
            }
            files.insert(rel, read_bytes(&path).map_err(|e| format!("{}: {e}", path.display()))?);
        } else {
            return Err(format!(
                "{} is a link or special file; a build context holds files and directories",
                path.display()
            ));
        }
    }
    if !files.contains_key("Dockerfile") {
        return Err("no Dockerfile in it".into());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_fifos_are_refused() {
        assert_eq!(read_bytes(Path::new("/dev/zero")).unwrap_err(), "not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(read_text(&fifo).unwrap_err(), "not a regular file");
        assert!(is_missing(&dir.path().join("nothing")));
    }
}
