//! The host edge: every read of the machine (or of a fixture host) goes through [`HostRoot`].
//!
//! A `HostRoot` is a directory standing in for `/`. Paths are absolute host paths
//! (`/sys/class/drm`); links are resolved here, one component at a time, and every file and
//! directory is opened relative to its directory's descriptor without following links, so
//! detection opens nothing outside the root (see [`resolve`]). Every file read, directory
//! listed and link followed is recorded in the trail, which is what `facts capture` copies
//! (`capture.rs`, which reads the trail's paths again by their full names: it copies a host
//! the user chose to capture, and does not take these precautions).
//!
//! Architecture invariant: this is the only module of the detect stage that calls `std::fs`.

pub mod capture;
mod resolve;
mod stat;

pub use stat::parse_sidecar;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use resolve::MAX_LINK_HOPS;
pub use stat::NodeStat;

/// Why a host path could not be read. Missing paths are not errors: they come back as `None`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("link {link} points outside the host root")]
    Escapes { link: String },
    #[error("link {link} points to something that does not exist")]
    Dangling { link: String },
    #[error("more than {MAX_LINK_HOPS} links while resolving it (a link loop)")]
    Loop,
    #[error("permission denied")]
    PermissionDenied,
    #[error("not a regular file (a FIFO, socket or device cannot be read as host data)")]
    NotRegular,
    #[error("larger than {} KiB for a sysfs attribute, {} MiB for another file", MAX_SYSFS >> 10, MAX_READ >> 20)]
    TooLarge,
    /// Any other I/O error, by kind only, so the text does not depend on who runs us.
    #[error("{0}")]
    Io(String),
    #[error("not valid UTF-8 text")]
    NotUtf8,
}

/// The most detection reads from one file. Sysfs and procfs files are small; firmware images
/// are a few MiB. A larger file is hostile or broken, and reading it whole would hang us.
pub const MAX_READ: u64 = 64 << 20;

/// The most read from a sysfs attribute (under `/sys/`, debugfs aside): the kernel gives an
/// attribute's `show()` one page (Documentation/filesystems/sysfs.rst, "Reading/Writing
/// Attribute Data": the buffer is always PAGE_SIZE), 4 KiB on the machines we run on. A
/// larger one is a fixture host's, and hostile: 32 governor files of 62 MB took 3.8 s and
/// 434 MB, and were printed.
pub const MAX_SYSFS: u64 = 4 << 10;

/// The cap for `path`: [`MAX_SYSFS`] for a sysfs attribute, [`MAX_READ`] for everything else
/// (debugfs under `/sys/kernel/debug` is not sysfs: its files are not one page).
fn cap_for(path: &str) -> u64 {
    if path.starts_with("/sys/") && !path.starts_with("/sys/kernel/debug/") { MAX_SYSFS } else { MAX_READ }
}

fn io_error(e: &io::Error) -> HostError {
    match e.kind() {
        io::ErrorKind::PermissionDenied => HostError::PermissionDenied,
        io::ErrorKind::IsADirectory => HostError::Io("is a directory".into()),
        kind => HostError::Io(format!("I/O error ({kind:?})")),
    }
}

/// What detection read, as host paths, for `facts capture`.
#[derive(Debug, Default, Clone)]
pub struct Trail {
    pub files: BTreeSet<String>,
    pub dirs: BTreeSet<String>,
    /// Directories whose entry names detection used (listed), resolved host paths.
    pub listings: BTreeSet<String>,
    /// link path → its target exactly as stored.
    pub links: BTreeMap<String, String>,
}

/// The trail as it is recorded: pushed in the order met, repeats and all, and sorted into a
/// [`Trail`] only when one is asked for. Most commands never ask (only `facts capture` copies
/// it), and inserting each path into sorted sets as it was read, comparing long shared
/// prefixes, cost `facts` a twentieth of its instructions.
#[derive(Default)]
struct Recorded {
    files: Vec<String>,
    dirs: Vec<String>,
    listings: Vec<String>,
    links: Vec<(String, String)>,
}

pub struct HostRoot {
    root: PathBuf,
    real_host: bool,
    trail: RefCell<Recorded>,
    stat_sidecar: RefCell<Option<BTreeMap<String, NodeStat>>>,
    /// Resolved directories by host path (see `resolve`).
    dir_cache: RefCell<resolve::PathMap<resolve::ResolvedDir>>,
    /// Directory descriptors and `lstat`s by link-free host path (see `resolve`).
    handles: RefCell<resolve::Handles>,
    /// Unit tests only: requested paths under these prefixes are refused as if root-only
    /// (CI runs as root, where chmod cannot take read permission away).
    #[cfg(test)]
    denied: RefCell<Vec<String>>,
}

impl HostRoot {
    /// Opens `root` as a host. `/` is the machine itself.
    pub fn open(root: &Path) -> io::Result<HostRoot> {
        let meta = fs::metadata(root)?;
        if !meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory"));
        }
        let real_host = root.canonicalize()? == Path::new("/");
        let handles = resolve::Handles::open(root)?;
        Ok(HostRoot {
            root: root.to_path_buf(),
            real_host,
            trail: RefCell::default(),
            stat_sidecar: RefCell::default(),
            dir_cache: RefCell::new(resolve::path_map()),
            handles: RefCell::new(handles),
            #[cfg(test)]
            denied: RefCell::default(),
        })
    }

    /// The directory standing in for `/`, as given.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when this is the machine we run on, not a fixture host.
    pub fn is_real_host(&self) -> bool {
        self.real_host
    }

    pub fn trail(&self) -> Trail {
        let recorded = self.trail.borrow();
        Trail {
            files: recorded.files.iter().cloned().collect(),
            dirs: recorded.dirs.iter().cloned().collect(),
            listings: recorded.listings.iter().cloned().collect(),
            // A link met twice keeps the target read last, as inserting it each time did.
            links: recorded.links.iter().cloned().collect(),
        }
    }

    /// Unit tests only: refuse reads and listings of `prefix` and below with
    /// [`HostError::PermissionDenied`].
    #[cfg(test)]
    pub(crate) fn deny_for_test(&self, prefix: &str) {
        self.denied.borrow_mut().push(prefix.to_string());
    }

    #[cfg(test)]
    fn check_denied(&self, path: &str) -> Result<(), HostError> {
        let denied = self.denied.borrow();
        match denied.iter().any(|p| path == p || path.starts_with(&format!("{p}/"))) {
            true => Err(HostError::PermissionDenied),
            false => Ok(()),
        }
    }

    #[cfg(not(test))]
    fn check_denied(&self, _path: &str) -> Result<(), HostError> {
        Ok(())
    }

    /// Reads a file's bytes; `Ok(None)` when it does not exist.
    pub fn read_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, HostError> {
        self.check_denied(path)?;
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(None);
        };
        let bytes = self.read_regular(&resolved.path, &resolved.meta, cap_for(&resolved.path))?;
        self.trail.borrow_mut().files.push(resolved.path);
        Ok(Some(bytes))
    }

    /// Reads a text file; `Ok(None)` when it does not exist.
    pub fn read_text(&self, path: &str) -> Result<Option<String>, HostError> {
        match self.read_bytes(path)? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| HostError::NotUtf8),
        }
    }

    /// Lists a directory's entry names, sorted; `Ok(None)` when it does not exist.
    pub fn list(&self, path: &str) -> Result<Option<Vec<String>>, HostError> {
        self.check_denied(path)?;
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(None);
        };
        let resolved = resolved.path;
        let dir = match self.dir_fd(&resolved) {
            Ok(dir) => dir,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(resolve::host_error(e)),
        };
        // The `O_PATH` descriptor only names the directory; reading it takes one opened for it.
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&*dir, ".", flags, rustix::fs::Mode::empty()).map_err(resolve::host_error)?;
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::new(fd).map_err(resolve::host_error)? {
            let entry = entry.map_err(resolve::host_error)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // sysfs, procfs and /dev have no dot entries; in a fixture host they are git's
            // placeholders (`.keep`), not part of the host.
            if !name.starts_with('.') {
                names.push(name);
            }
        }
        names.sort();
        let mut trail = self.trail.borrow_mut();
        trail.dirs.push(resolved.clone());
        trail.listings.push(resolved);
        Ok(Some(names))
    }

    /// Whether a path exists (links followed inside the root). A device node, a file and a
    /// directory all count.
    pub fn exists(&self, path: &str) -> Result<bool, HostError> {
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(false);
        };
        // Capture must recreate what existence was tested on; an empty file stands in for a
        // device node and a directory for a directory.
        self.note(resolved);
        Ok(true)
    }

    /// The host path a path resolves to, links followed (like `realpath`), or `None` if missing.
    pub fn canonical(&self, path: &str) -> Result<Option<String>, HostError> {
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(None);
        };
        // What a link leads to is part of what was read (a driver's name is the name of the
        // directory its link points at), so capture must recreate it.
        let target = resolved.path.clone();
        self.note(resolved);
        Ok(Some(target))
    }

    /// Reads the regular file at the resolved host path `path`, at most `cap` bytes
    /// ([`cap_for`]). FIFOs and devices are refused before they are opened, so one cannot
    /// block us. `meta` is the file's `lstat` from resolution, which left no link in the path.
    fn read_regular(&self, path: &str, meta: &resolve::Meta, cap: u64) -> Result<Vec<u8>, HostError> {
        use std::io::Read;
        if meta.is_dir() {
            return Err(HostError::Io("is a directory".into()));
        }
        if !meta.is_file() {
            return Err(HostError::NotRegular);
        }
        let (dir, name) = resolve::split(path);
        let dir = self.dir_fd(dir).map_err(resolve::host_error)?;
        // NONBLOCK: the `lstat` above may be from earlier in the command, and a FIFO put in
        // the file's place since must not hang the open (a read of it then fails at once).
        let flags = rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::NONBLOCK
            | rustix::fs::OFlags::NOCTTY
            | rustix::fs::OFlags::CLOEXEC;
        let file = fs::File::from(
            rustix::fs::openat(&*dir, name, flags, rustix::fs::Mode::empty()).map_err(resolve::host_error)?,
        );
        // Room for the whole file and one byte more, so a small file takes two reads (its bytes,
        // then the end), as `cat`'s do. Sysfs gives every attribute's size as a page; procfs
        // gives 0, and a page is a fair first guess there too.
        let size = if meta.size == 0 { 4096 } else { meta.size };
        let mut bytes = Vec::with_capacity(usize::try_from(size.min(cap) + 1).unwrap_or(usize::MAX));
        file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| io_error(&e))?;
        if bytes.len() as u64 > cap {
            return Err(HostError::TooLarge);
        }
        Ok(bytes)
    }

    /// Records a resolved path in the trail as a directory or a file.
    fn note(&self, resolved: resolve::Resolved) {
        let mut trail = self.trail.borrow_mut();
        if resolved.meta.is_dir() {
            trail.dirs.push(resolved.path);
        } else {
            trail.files.push(resolved.path);
        }
    }

    /// Owner and mode of a device node: `stat` on the real host, the `.k3d-gpu-stat` sidecar
    /// in a fixture host (git keeps neither).
    pub fn node_stat(&self, path: &str) -> Result<Option<NodeStat>, HostError> {
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(None);
        };
        // Resolution left no link in the path, so its `lstat` is the node's `stat`.
        let real = self.real_host.then(|| stat::from_meta(&resolved.meta));
        self.note(resolved);
        if let Some(real) = real {
            return Ok(Some(real));
        }
        if self.stat_sidecar.borrow().is_none() {
            // The sidecar is read like host data: inside the root, regular, bounded. A bad
            // one means defaults, not a failure: it is test data, not host state.
            let text = match self.resolve(&format!("/{}", stat::SIDECAR), true) {
                Ok(Some(at)) => self.read_regular(&at.path, &at.meta, cap_for(&at.path)).unwrap_or_default(),
                _ => Vec::new(),
            };
            *self.stat_sidecar.borrow_mut() = Some(stat::parse_sidecar(&String::from_utf8_lossy(&text)));
        }
        let sidecar = self.stat_sidecar.borrow();
        Ok(Some(sidecar.as_ref().and_then(|t| t.get(path).copied()).unwrap_or_default()))
    }

    pub(crate) fn on_disk(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }
}
