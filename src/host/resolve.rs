//! Link resolution confined to the host root.
//!
//! We walk the path ourselves instead of letting the OS follow links, because the OS would
//! follow an absolute link (or enough `..`) straight out of a fixture host into the machine
//! running the tests. Absolute targets are read relative to the root, like a chroot; a `..`
//! above the root of a fixture host is refused.
//!
//! Every system call names one component relative to the descriptor of its directory
//! (`statat`, `readlinkat`, `openat` with `O_NOFOLLOW`), never a whole path: the kernel then
//! follows no link for us, and does not walk the dozen components of a sysfs path again on
//! each call. A component with more of the path below it is opened as a directory (`O_PATH`,
//! which also tells that it is no link); the last one, or one that is not a directory, is
//! `lstat`ed. Those descriptors and `lstat`s are kept, by link-free host path, for the
//! `HostRoot`'s life, one command; a missing path is not remembered, so it is looked up again.

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::{HostError, HostRoot};

/// Linux's own limit on links followed in one lookup (`MAXSYMLINKS`).
pub const MAX_LINK_HOPS: usize = 40;

/// The most directory descriptors the `HostRoot`s of the process keep open, all together:
/// `facts` of desktop-rpl-nvidia keeps 124, and `validate` holds a `HostRoot` per `--root`
/// until it ends, under the usual soft limit of 1024 open files for the whole process. Past
/// this, a directory is opened for one call and closed.
const MAX_DIR_FDS: usize = 256;

/// Directory descriptors kept by every `Handles` alive, against [`MAX_DIR_FDS`].
static KEPT_DIR_FDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What resolution and reading use of a path's `lstat`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    pub kind: FileType,
    /// Permission bits, with set-id and sticky.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
}

impl Meta {
    // Field types differ between targets (`st_mode` is `u16` on some): cast, whatever they are.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &Stat) -> Meta {
        Meta {
            kind: FileType::from_raw_mode(st.st_mode as _),
            mode: st.st_mode as u32 & 0o7777,
            uid: st.st_uid as u32,
            gid: st.st_gid as u32,
            size: u64::try_from(st.st_size).unwrap_or(0),
        }
    }

    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }

    pub fn is_file(&self) -> bool {
        self.kind == FileType::RegularFile
    }

    fn is_symlink(&self) -> bool {
        self.kind == FileType::Symlink
    }
}

/// A path resolved to one with no links in it, with the `lstat` of its last component.
pub(super) struct Resolved {
    pub path: String,
    pub meta: Meta,
}

/// A directory resolved in full: its link-free path (empty for the root) and the links it took
/// to get there (they count against [`MAX_LINK_HOPS`] for any path below it).
pub(super) struct ResolvedDir {
    path: String,
    hops: usize,
}

/// Where a walk stands: the link-free path resolved so far (`/` and a component for each
/// component, empty at the root) and the `lstat` of its last component, when it is known.
struct Walk {
    done: String,
    meta: Option<Meta>,
    hops: usize,
}

/// A map by host path. The keys come from the host (names in its directories, targets of its
/// links), and a fixture host is hostile: a hasher keyed per process (foldhash's, hashbrown's
/// own), so no host can be made of names that collide. SipHash, std's default, was a tenth of
/// `facts`' instructions on these 60-to-100-byte keys.
pub(super) type PathMap<V> = std::collections::HashMap<String, V, foldhash::fast::RandomState>;

/// What one command's detection resolves, give or take: the maps start this large, so they
/// are not grown and rehashed on the way.
const PATHS: usize = 256;

pub(super) fn path_map<V>() -> PathMap<V> {
    PathMap::with_capacity_and_hasher(PATHS, Default::default())
}

/// The descriptors and `lstat`s a `HostRoot` keeps, by link-free host path.
pub(super) struct Handles {
    dirs: PathMap<Arc<OwnedFd>>,
    stats: PathMap<Meta>,
    /// How many of `dirs` count against [`MAX_DIR_FDS`] (all but the root's).
    kept: usize,
}

impl Handles {
    /// Opens `root` as `/`.
    pub fn open(root: &std::path::Path) -> io::Result<Handles> {
        let fd = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(os_error)?;
        let mut dirs = path_map();
        dirs.insert("/".to_string(), Arc::new(fd));
        Ok(Handles { dirs, stats: path_map(), kept: 0 })
    }

    /// Keeps `fd` for `path` if the process's budget has room.
    fn keep(&mut self, path: &str, fd: &Arc<OwnedFd>) {
        use std::sync::atomic::Ordering::Relaxed;
        if KEPT_DIR_FDS.fetch_add(1, Relaxed) < MAX_DIR_FDS {
            self.dirs.insert(path.to_string(), Arc::clone(fd));
            self.kept += 1;
        } else {
            KEPT_DIR_FDS.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for Handles {
    fn drop(&mut self) {
        KEPT_DIR_FDS.fetch_sub(self.kept, std::sync::atomic::Ordering::Relaxed);
    }
}

pub(super) fn os_error(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

pub(super) fn host_error(e: Errno) -> HostError {
    super::io_error(&os_error(e))
}

/// A link-free host path other than `/` as its directory and its last component.
pub(super) fn split(path: &str) -> (&str, &str) {
    match memchr::memrchr(b'/', path.as_bytes()) {
        Some(0) => ("/", &path[1..]),
        Some(at) => (&path[..at], &path[at + 1..]),
        None => ("/", path),
    }
}

impl HostRoot {
    /// Resolves `path` to a host path with no links in it. `Ok(None)` when a component is
    /// missing (a dangling link is missing too). With `follow_last` false the final component
    /// is left as it is, even if it is a link.
    pub(super) fn resolve(&self, path: &str, follow_last: bool) -> Result<Option<Resolved>, HostError> {
        // Detection reads many files in the same directories (a PCI function's vendor, device,
        // class, driver): each directory is resolved once and cached by its host path (see
        // `resolve_dir`); only the last component is looked up each time. A path written
        // plainly, as detection writes them, is taken apart in place; others are split into
        // components. Paths with `.` or `..` are walked in full, uncached, so a `..` above a
        // fixture root is reported against the path.
        if let Some((dir, last)) = plain(path) {
            let Some(dir) = self.resolve_dir(path, dir)? else {
                return Ok(None);
            };
            return self.resolve_last(path, dir, last, follow_last);
        }
        let mut parts: Vec<&str> = components(path).collect();
        let cacheable = !parts.iter().any(|p| *p == "." || *p == "..");
        match parts.pop() {
            Some(last) if cacheable => {
                let Some(dir) = self.resolve_dir(path, &parts.join("/"))? else {
                    return Ok(None);
                };
                self.resolve_last(path, dir, last, follow_last)
            }
            last => {
                parts.extend(last);
                let walk =
                    self.walk(path, Walk { done: String::new(), meta: None, hops: 0 }, &parts, follow_last, false)?;
                self.finish(walk)
            }
        }
    }

    /// The component `last` of the resolved directory `dir`: its `lstat` when it is no link
    /// to follow (most are not), the walk that follows it when it is.
    fn resolve_last(
        &self,
        path: &str,
        dir: ResolvedDir,
        last: &str,
        follow_last: bool,
    ) -> Result<Option<Resolved>, HostError> {
        let mut here = dir.path;
        let up = here.len();
        here.push('/');
        here.push_str(last);
        match self.lstat(&here).map_err(host_error)? {
            None => Ok(None),
            Some(meta) if !(follow_last && meta.is_symlink()) => Ok(Some(Resolved { path: here, meta })),
            Some(_) => {
                here.truncate(up);
                let walk =
                    self.walk(path, Walk { done: here, meta: None, hops: dir.hops }, &[last], follow_last, false)?;
                self.finish(walk)
            }
        }
    }

    /// Where a walk ended, as a resolved path with its `lstat`.
    fn finish(&self, walk: Option<Walk>) -> Result<Option<Resolved>, HostError> {
        let Some(walk) = walk else { return Ok(None) };
        let resolved = if walk.done.is_empty() { "/".to_string() } else { walk.done };
        let meta = match walk.meta {
            Some(meta) => meta,
            // The walk ended on the root, or on a `..`: the last component was not looked up.
            None => match self.lstat(&resolved).map_err(host_error)? {
                Some(meta) => meta,
                None => return Ok(None),
            },
        };
        Ok(Some(Resolved { path: resolved, meta }))
    }

    /// Resolves the directory `key`, its components (none empty, `.` or `..`) joined by `/`
    /// with none in front (empty for the root), links followed: from the cache, or from its
    /// own parent (resolved the same way) plus one component, then cached. Each entry is the
    /// full resolution of its own path, so a link to `.`, `..` or `/` anywhere above cannot
    /// leave a wrong prefix behind.
    fn resolve_dir(&self, path: &str, key: &str) -> Result<Option<ResolvedDir>, HostError> {
        if key.is_empty() {
            return Ok(Some(ResolvedDir { path: String::new(), hops: 0 }));
        }
        if let Some(dir) = self.dir_cache.borrow().get(key) {
            // With room for the component the caller walks next: pushing it onto an exact copy
            // reallocated on every lookup.
            let mut path = String::with_capacity(dir.path.len() + 64);
            path.push_str(&dir.path);
            return Ok(Some(ResolvedDir { path, hops: dir.hops }));
        }
        let (parent, last) = match memchr::memrchr(b'/', key.as_bytes()) {
            Some(at) => (&key[..at], &key[at + 1..]),
            None => ("", key),
        };
        let Some(up) = self.resolve_dir(path, parent)? else {
            return Ok(None);
        };
        let Some(w) = self.walk(path, Walk { done: up.path, meta: None, hops: up.hops }, &[last], true, true)? else {
            return Ok(None);
        };
        let dir = ResolvedDir { path: w.done, hops: w.hops };
        self.dir_cache.borrow_mut().insert(key.to_string(), ResolvedDir { path: dir.path.clone(), hops: dir.hops });
        Ok(Some(dir))
    }

    /// Walks `parts` from `at`, following links (the last one only when `follow_last`).
    /// With `dir`, the walk resolves a directory, and the `lstat` of its end is not wanted.
    fn walk(
        &self,
        path: &str,
        mut at: Walk,
        parts: &[&str],
        follow_last: bool,
        dir: bool,
    ) -> Result<Option<Walk>, HostError> {
        let mut todo: VecDeque<String> = parts.iter().map(|p| p.to_string()).collect();
        // Components still to walk that came from a link's target: a missing one means the
        // link dangles, which is worth a finding, unlike an ordinary missing file.
        let mut from_link = 0usize;
        let mut last_link = String::new();
        while let Some(part) = todo.pop_front() {
            let came_from_link = from_link > 0;
            from_link = from_link.saturating_sub(1);
            match part.as_str() {
                "." => continue,
                ".." => {
                    at.meta = None;
                    if let Some(up) = at.done.rfind('/') {
                        at.done.truncate(up);
                    } else if !self.real_host {
                        if came_from_link {
                            return Err(HostError::Escapes { link: last_link });
                        }
                        return Err(HostError::Escapes { link: path.to_string() });
                    }
                    continue;
                }
                _ => {}
            }
            let up = at.done.len();
            at.done.push('/');
            at.done.push_str(&part);
            let here = &at.done;
            let is_last = todo.is_empty();
            // A component the walk goes on below is wanted only as a directory: opening it as
            // one, without following it, tells that it is no link and gives the descriptor its
            // entries are looked up from, in one call instead of an `lstat` and an open. When
            // that fails (a link, a file, missing), its `lstat` says what it is.
            if (dir || !is_last) && self.dir_fd(here).is_ok() {
                at.meta = None;
                continue;
            }
            let Some(meta) = self.lstat(here).map_err(host_error)? else {
                if came_from_link {
                    return Err(HostError::Dangling { link: last_link });
                }
                return Ok(None);
            };
            if meta.is_symlink() && (follow_last || !is_last) {
                let here = here.clone();
                at.done.truncate(up);
                at.meta = None;
                at.hops += 1;
                if at.hops > MAX_LINK_HOPS {
                    return Err(HostError::Loop);
                }
                let (parent, name) = split(&here);
                let parent = self.dir_fd(parent).map_err(host_error)?;
                let target = rustix::fs::readlinkat(&*parent, name, Vec::new()).map_err(host_error)?;
                let target = target.to_string_lossy().into_owned();
                self.trail.borrow_mut().links.push((here.clone(), target.clone()));
                if target.starts_with('/') {
                    at.done.clear();
                }
                let pieces: Vec<String> = components(&target).map(str::to_string).collect();
                from_link += pieces.len();
                for (i, piece) in pieces.into_iter().enumerate() {
                    todo.insert(i, piece);
                }
                last_link = here;
            } else {
                at.meta = Some(meta);
            }
        }
        Ok(Some(at))
    }

    /// The `O_PATH` descriptor of the link-free directory `path`, opened from its parent's
    /// with `O_NOFOLLOW`, so no link is followed on the way. A `.` or `..` in `path` is
    /// refused (EINVAL): resolution never hands one over, and `..` from the root's
    /// descriptor would open the directory above the root.
    pub(super) fn dir_fd(&self, path: &str) -> Result<Arc<OwnedFd>, Errno> {
        if let Some(fd) = self.handles.borrow().dirs.get(path) {
            return Ok(Arc::clone(fd));
        }
        let (parent, name) = split(path);
        if is_dot(name) {
            return Err(Errno::INVAL);
        }
        let up = self.dir_fd(parent)?;
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = Arc::new(rustix::fs::openat(&*up, name, flags, Mode::empty())?);
        self.handles.borrow_mut().keep(path, &fd);
        Ok(fd)
    }

    /// The `lstat` of the link-free host path `path`; `Ok(None)` when it is missing (or a
    /// component above it is not a directory).
    fn lstat(&self, path: &str) -> Result<Option<Meta>, Errno> {
        if let Some(meta) = self.handles.borrow().stats.get(path) {
            return Ok(Some(*meta));
        }
        let stat = if path == "/" {
            rustix::fs::fstat(&*self.dir_fd(path)?)
        } else {
            let (parent, name) = split(path);
            if is_dot(name) {
                return Err(Errno::INVAL);
            }
            self.dir_fd(parent).and_then(|dir| rustix::fs::statat(&*dir, name, AtFlags::SYMLINK_NOFOLLOW))
        };
        let meta = match stat {
            Ok(stat) => Meta::of(&stat),
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
            Err(e) => return Err(e),
        };
        self.handles.borrow_mut().stats.insert(path.to_string(), meta);
        Ok(Some(meta))
    }
}

/// A component that names no entry of its own: the directory itself, its parent, or nothing.
fn is_dot(name: &str) -> bool {
    matches!(name, "" | "." | "..")
}

/// A path written plainly (absolute, and no component of it empty, `.` or `..`) as its
/// directory's key for [`HostRoot::resolve_dir`] and its last component: `/sys/class/drm` is
/// `("sys/class", "drm")`. `None` for any other path, and for `/`.
fn plain(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?;
    let bytes = rest.as_bytes();
    let (mut start, mut last_slash) = (0, None);
    for end in memchr::memchr_iter(b'/', bytes).chain([bytes.len()]) {
        if matches!(&bytes[start..end], b"" | b"." | b"..") {
            return None;
        }
        if end < bytes.len() {
            last_slash = Some(end);
        }
        start = end + 1;
    }
    Some(match last_slash {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => ("", rest),
    })
}

fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::plain;

    /// The descriptor and `lstat` layers take link-free paths only: a `.` or `..` handed to
    /// them is refused, not opened (`..` of the root's descriptor is outside the root).
    #[test]
    fn a_dot_component_is_refused_below_resolution() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sys")).unwrap();
        let host = crate::host::HostRoot::open(dir.path()).unwrap();
        assert!(host.dir_fd("/sys").is_ok());
        for path in ["/..", "/sys/..", "/sys/.", "/sys/"] {
            assert_eq!(host.dir_fd(path).err(), Some(rustix::io::Errno::INVAL), "{path}");
            assert!(matches!(host.lstat(path), Err(rustix::io::Errno::INVAL)), "{path}");
        }
    }

    #[test]
    fn a_plain_path_is_its_directory_key_and_last_component() {
        assert_eq!(plain("/sys/class/drm"), Some(("sys/class", "drm")));
        assert_eq!(plain("/proc"), Some(("", "proc")));
        assert_eq!(plain("/sys/.keep/..x/..."), Some(("sys/.keep/..x", "...")));
        for other in [
            "/",
            "",
            "sys/class",
            "//sys",
            "/sys//class",
            "/sys/class/",
            "/sys/./class",
            "/sys/../etc",
            "/..",
            "/sys/.",
        ] {
            assert_eq!(plain(other), None, "{other:?}");
        }
    }
}
