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
