//! One apply at a time per cluster: a lock file under `$XDG_STATE_HOME/k3d-gpu/` (default
//! `~/.local/state/k3d-gpu/`) holding the holder's pid. A second apply fails at once naming
//! the holder; a lock left by a dead process is taken over, and we say so.

use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    /// Set when a stale lock was taken over: the dead holder's pid.
    pub took_over_from: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another apply holds the lock for cluster {cluster}: pid {pid} ({path})")]
    Held { cluster: String, pid: u32, path: String },
    #[error("cannot create the lock {path}: {reason}")]
    Io { path: String, reason: String },
}

/// The state directory: `$XDG_STATE_HOME/k3d-gpu`, else `~/.local/state/k3d-gpu`.
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match env("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("k3d-gpu"),
        None => PathBuf::from(env("HOME").unwrap_or_else(|| ".".into())).join(".local/state/k3d-gpu"),
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

impl Lock {
    /// Takes the lock for `cluster` in `dir`, for process `pid`.
    pub fn acquire(dir: &Path, cluster: &str, pid: u32) -> Result<Lock, LockError> {
        let io =
            |path: &Path, e: std::io::Error| LockError::Io { path: path.display().to_string(), reason: e.to_string() };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let path = dir.join(format!("{cluster}.lock"));
        let mut took_over_from = None;
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    file.write_all(format!("{pid}\n").as_bytes()).map_err(|e| io(&path, e))?;
                    return Ok(Lock { path, took_over_from });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse::<u32>().ok());
                    match holder {
                        Some(h) if alive(h) && h != pid => {
                            return Err(LockError::Held {
                                cluster: cluster.into(),
                                pid: h,
                                path: path.display().to_string(),
                            });
                        }
                        // A dead holder (or an unreadable lock): take it over.
                        _ => {
                            took_over_from = holder;
                            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
                        }
                    }
                }
                Err(e) => return Err(io(&path, e)),
            }
        }
        Err(LockError::Io { path: path.display().to_string(), reason: "lost a race for the lock twice".into() })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_a_dead_one_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let first = Lock::acquire(dir.path(), "gpu", me).unwrap();
        // pid 1 is always alive: another apply holds it.
        std::fs::write(dir.path().join("other.lock"), "1\n").unwrap();
        let err = Lock::acquire(dir.path(), "other", me).unwrap_err();
        assert!(err.to_string().contains("pid 1"), "{err}");
        // A pid that cannot exist: the lock is stale.
        std::fs::write(dir.path().join("stale.lock"), "4194399\n").unwrap();
        let taken = Lock::acquire(dir.path(), "stale", me).unwrap();
        assert_eq!(taken.took_over_from, Some(4194399));
        drop(first);
        assert!(!dir.path().join("gpu.lock").exists(), "released on drop");
    }

    #[test]
    fn the_state_directory_follows_xdg() {
        let env = |k: &str| match k {
            "XDG_STATE_HOME" => Some("/s".to_string()),
            "HOME" => Some("/h".to_string()),
            _ => None,
        };
        assert_eq!(state_dir(&env), PathBuf::from("/s/k3d-gpu"));
        let env = |k: &str| (k == "HOME").then(|| "/h".to_string());
        assert_eq!(state_dir(&env), PathBuf::from("/h/.local/state/k3d-gpu"));
    }
}
