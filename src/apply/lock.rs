//! One apply at a time per cluster: an advisory lock (`flock`) on a file under
//! `$XDG_STATE_HOME/k3d-gpu/` (default `~/.local/state/k3d-gpu/`). The kernel releases it when
//! the holder dies, however it dies, so a stale lock cannot exist; the pid written into the
//! file only names the holder, or the apply that ended without finishing.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct Lock {
    file: File,
    /// The pid found in the file when we took it: an apply that did not finish (killed).
    pub took_over_from: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another apply holds the lock for cluster {cluster}: {holder} ({path})")]
    Held { cluster: String, holder: String, path: String },
    #[error("cannot take the lock {path}: {reason}")]
    Io { path: String, reason: String },
}

/// The state directory: `$XDG_STATE_HOME/k3d-gpu`, else `~/.local/state/k3d-gpu`.
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match env("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("k3d-gpu"),
        None => PathBuf::from(env("HOME").unwrap_or_else(|| ".".into())).join(".local/state/k3d-gpu"),
    }
}

impl Lock {
    /// Takes the lock for `cluster` in `dir` for process `pid`, or fails at once.
    pub fn acquire(dir: &Path, cluster: &str, pid: u32) -> Result<Lock, LockError> {
        let path = dir.join(format!("{cluster}.lock"));
        let io = |e: std::io::Error| LockError::Io { path: path.display().to_string(), reason: e.to_string() };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        let mut previous = String::new();
        let _ = file.read_to_string(&mut previous);
        let previous = previous.trim().parse::<u32>().ok();
        if let Err(e) = file.try_lock() {
            return Err(match e {
                std::fs::TryLockError::WouldBlock => LockError::Held {
                    cluster: cluster.into(),
                    holder: previous.map_or_else(|| "a process".to_string(), |p| format!("pid {p}")),
                    path: path.display().to_string(),
                },
                std::fs::TryLockError::Error(e) => io(e),
            });
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        file.write_all(format!("{pid}\n").as_bytes()).map_err(io)?;
        Ok(Lock { file, took_over_from: previous.filter(|p| *p != pid) })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Empty means "released cleanly"; a pid left behind means the apply did not finish.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_and_a_dead_holders_lock_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let first = Lock::acquire(dir.path(), "gpu", 111).unwrap();
        let err = Lock::acquire(dir.path(), "gpu", 222).unwrap_err();
        assert!(err.to_string().contains("another apply holds the lock for cluster gpu: pid 111"), "{err}");
        // A holder that dies without cleaning up: its pid stays, the kernel's lock does not.
        drop(first);
        std::fs::write(dir.path().join("gpu.lock"), "4194399\n").unwrap();
        let taken = Lock::acquire(dir.path(), "gpu", 333).unwrap();
        assert_eq!(taken.took_over_from, Some(4194399));
        drop(taken);
        let clean = Lock::acquire(dir.path(), "gpu", 444).unwrap();
        assert_eq!(clean.took_over_from, None, "a clean release leaves nothing to take over");
    }

    #[test]
    fn two_takers_never_both_hold_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (path, held) = (path.clone(), held.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        if let Ok(lock) = Lock::acquire(&path, "race", 1000 + i) {
                            let now = held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            assert_eq!(now, 0, "two holders at once");
                            held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                            drop(lock);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
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
