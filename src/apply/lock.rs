//! One apply at a time per cluster: an advisory lock (`flock`) on a file in a per-user
//! directory ([`lock_dir`]: the state directory, else `/tmp/k3d-gpu-<uid>/`, never the
//! working directory, so two applies started from two directories, or from two sessions,
//! meet at the same lock). The kernel releases it when the holder dies, however
//! it dies, so a stale lock cannot exist; the pid written into the file only names the holder,
//! or the apply that ended without finishing.

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
    #[error("another apply holds the lock for cluster {cluster}: {holder}, or a k3d it started ({path})")]
    Held { cluster: String, holder: String, path: String },
    /// The lock file cannot be made or written (a read-only or full directory): not a
    /// sign of another apply.
    #[error("cannot take the lock {path}: {reason}")]
    Io { path: String, reason: String },
}

/// An environment variable naming a directory, if it names one absolutely (the XDG rule: a
/// relative value is ignored, as is an unset or empty one).
fn absolute(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<PathBuf> {
    env(key).map(PathBuf::from).filter(|p| p.is_absolute())
}

/// The state directory (k3d configs apply wrote, kept for review): `$XDG_STATE_HOME/k3d-gpu`,
/// else `~/.local/state/k3d-gpu`, else the per-user temporary directory.
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    absolute(env, "XDG_STATE_HOME")
        .map(|d| d.join("k3d-gpu"))
        .or_else(|| absolute(env, "HOME").map(|h| h.join(".local/state/k3d-gpu")))
        .unwrap_or_else(user_temp_dir)
}

/// Where the locks live: the state directory. Not `$XDG_RUNTIME_DIR`: a desktop session has
/// it, and ssh without logind, cron or `sudo -E` often do not, so two applies of one cluster
/// would lock two different files. Never relative: with HOME unset it is not `./.local/state`.
pub fn lock_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    state_dir(env)
}

/// `/tmp/k3d-gpu-<uid>`: the last resort, checked before use ([`Lock::acquire`] makes it
/// 0700 and refuses one that another user owns or that is a link).
fn user_temp_dir() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX);
    std::env::temp_dir().join(format!("k3d-gpu-{uid}"))
}

/// Makes `dir` (0700 when it is new); the shared-temp fallback must be ours alone.
fn prepare(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    if dir == user_temp_dir() { check_private(dir) } else { Ok(()) }
}

/// In a directory everyone can write to, another user could have made ours first (or left a
/// link there): it must be a directory, not a link, owned by us, closed to others.
fn check_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    let me = std::fs::metadata("/proc/self")?.uid();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private directory of this user (a link, another owner, or open to others)",
            dir.display()
        )));
    }
    Ok(())
}

impl Lock {
    /// Takes the lock for `cluster` in `dir` for process `pid`, or fails at once.
    pub fn acquire(dir: &Path, cluster: &str, pid: u32) -> Result<Lock, LockError> {
        let path = dir.join(format!("{cluster}.lock"));
        let io = |e: std::io::Error| LockError::Io { path: path.display().to_string(), reason: e.to_string() };
        // The name becomes a file name: only a checked cluster name may (see config).
        if !crate::config::cluster_name(cluster) {
            return Err(io(std::io::Error::other(format!("{cluster:?} is not a valid cluster name"))));
        }
        prepare(dir).map_err(io)?;
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

impl Lock {
    /// A second descriptor of the locked file, for a child that must hold the lock as long as
    /// it runs: k3d gets it as its stdin. An flock belongs to the open file, not the process,
    /// so while a `k3d cluster create` this apply started still runs, no other apply of the
    /// cluster can take the lock, even when this process died first (SIGKILL, an abort).
    pub fn for_child(&self) -> std::io::Result<File> {
        self.file.try_clone()
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

    /// The child side of [`a_k3d_child_holds_the_lock_after_the_apply_dies`]: an "apply" that
    /// takes the lock and runs a "k3d" which aborts it, then keeps running. Does nothing unless
    /// that test starts it.
    #[test]
    fn lock_holder_process() {
        let Some(dir) = std::env::var_os("K3D_GPU_TEST_LOCK_HOLDER") else { return };
        let dir = PathBuf::from(dir);
        let lock = Lock::acquire(&dir, "gpu", std::process::id()).unwrap();
        let script = format!("echo $$ > '{}/k3d.pid'; kill -ABRT $PPID; exec sleep 1000", dir.display());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let ran = rt.block_on(crate::apply::k3d::run_k3d(
            Path::new("/bin/sh"),
            &["-c", &script],
            std::time::Duration::from_secs(1000),
            lock.for_child().ok(),
        ));
        panic!("the k3d stand-in aborts this process before it returns: {ran:?}");
    }

    #[test]
    fn a_k3d_child_holds_the_lock_after_the_apply_dies() {
        let dir = tempfile::tempdir().unwrap();
        let holder = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["apply::lock::tests::lock_holder_process", "--exact", "--nocapture", "--test-threads=1"])
            .env("K3D_GPU_TEST_LOCK_HOLDER", dir.path())
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(holder.status.signal(), Some(6), "the apply died by SIGABRT: {holder:?}");
        let k3d = std::fs::read_to_string(dir.path().join("k3d.pid")).unwrap().trim().to_string();
        assert!(Path::new("/proc").join(&k3d).exists(), "its k3d still runs");
        let err = Lock::acquire(dir.path(), "gpu", 222).unwrap_err();
        assert!(matches!(err, LockError::Held { .. }), "a second apply is refused while k3d runs: {err}");
        // Once k3d ends, the lock is free: a blocking lock returns (no deadline to guess).
        assert!(std::process::Command::new("kill").arg(&k3d).status().unwrap().success());
        let file = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("gpu.lock")).unwrap();
        file.lock().unwrap();
        drop(file);
        let taken = Lock::acquire(dir.path(), "gpu", 333).unwrap();
        assert!(taken.took_over_from.is_some(), "the dead apply's pid is still named");
    }

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
    fn the_lock_never_lives_in_the_working_directory() {
        let none = |_: &str| None;
        assert!(lock_dir(&none).is_absolute(), "{:?}", lock_dir(&none));
        assert!(state_dir(&none).starts_with(std::env::temp_dir()));
        let relative =
            |k: &str| (k == "HOME" || k == "XDG_STATE_HOME" || k == "XDG_RUNTIME_DIR").then(|| ".".to_string());
        assert!(lock_dir(&relative).is_absolute());
        // One lock whatever the session: a runtime directory set or not changes nothing.
        let home = |k: &str| (k == "HOME").then(|| "/home/u".to_string());
        let session = |k: &str| match k {
            "HOME" => Some("/home/u".to_string()),
            "XDG_RUNTIME_DIR" => Some("/run/user/1000".to_string()),
            _ => None,
        };
        assert_eq!(lock_dir(&home), PathBuf::from("/home/u/.local/state/k3d-gpu"));
        assert_eq!(lock_dir(&session), lock_dir(&home));
        // The shared-temp fallback is made private, and one that is not is refused.
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("k3d-gpu-test");
        Lock::acquire(&ours, "gpu", 1).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&ours).unwrap().permissions().mode() & 0o777, 0o700);
        check_private(&ours).unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_private(&open).is_err());
        std::os::unix::fs::symlink(&ours, dir.path().join("link")).unwrap();
        assert!(check_private(&dir.path().join("link")).is_err());
        assert!(matches!(Lock::acquire(&ours, "../x", 1), Err(LockError::Io { .. })));
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
