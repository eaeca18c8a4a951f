//! The host edge: every read of the machine (or of a fixture host) goes through [`HostRoot`].
//!
//! A `HostRoot` is a directory standing in for `/`. Paths are absolute host paths
//! (`/sys/class/drm`); links are resolved here, one component at a time, so nothing outside
//! the root is ever opened (see [`resolve`]). Every file read, directory listed and link
//! followed is recorded in the trail, which is what `facts capture` copies.
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
    #[error("{0}")]
    Io(String),
    #[error("not valid UTF-8 text")]
    NotUtf8,
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

pub struct HostRoot {
    root: PathBuf,
    real_host: bool,
    trail: RefCell<Trail>,
    stat_sidecar: RefCell<Option<BTreeMap<String, NodeStat>>>,
}

impl HostRoot {
    /// Opens `root` as a host. `/` is the machine itself.
    pub fn open(root: &Path) -> io::Result<HostRoot> {
        let meta = fs::metadata(root)?;
        if !meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory"));
        }
        let real_host = root.canonicalize()? == Path::new("/");
        Ok(HostRoot {
            root: root.to_path_buf(),
            real_host,
            trail: RefCell::default(),
            stat_sidecar: RefCell::default(),
        })
    }

    /// True when this is the machine we run on, not a fixture host.
    pub fn is_real_host(&self) -> bool {
        self.real_host
    }

    pub fn trail(&self) -> Trail {
        self.trail.borrow().clone()
    }

    /// Reads a file's bytes; `Ok(None)` when it does not exist.
    pub fn read_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, HostError> {
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(None);
        };
        match fs::read(self.on_disk(&resolved)) {
            Ok(bytes) => {
                self.trail.borrow_mut().files.insert(resolved);
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(HostError::Io(e.to_string())),
        }
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
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(None);
        };
        let entries = match fs::read_dir(self.on_disk(&resolved)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(HostError::Io(e.to_string())),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| HostError::Io(e.to_string()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // sysfs, procfs and /dev have no dot entries; in a fixture host they are git's
            // placeholders (`.keep`), not part of the host.
            if !name.starts_with('.') {
                names.push(name);
            }
        }
        names.sort();
        let mut trail = self.trail.borrow_mut();
        trail.dirs.insert(resolved.clone());
        trail.listings.insert(resolved);
        Ok(Some(names))
    }

    /// Whether a path exists (links followed inside the root). A device node, a file and a
    /// directory all count.
    pub fn exists(&self, path: &str) -> Result<bool, HostError> {
        let Some(resolved) = self.resolve(path, true)? else {
            return Ok(false);
        };
        let present = fs::symlink_metadata(self.on_disk(&resolved)).is_ok();
        if present {
            // Capture must recreate what existence was tested on; an empty file stands in
            // for a device node and a directory for a directory.
            let mut trail = self.trail.borrow_mut();
            if fs::metadata(self.on_disk(&resolved)).is_ok_and(|m| m.is_dir()) {
                trail.dirs.insert(resolved);
            } else {
                trail.files.insert(resolved);
            }
        }
        Ok(present)
    }

    /// The host path a path resolves to, links followed (like `realpath`), or `None` if missing.
    pub fn canonical(&self, path: &str) -> Result<Option<String>, HostError> {
        let resolved = self.resolve(path, true)?;
        if let Some(target) = &resolved {
            // What a link leads to is part of what was read (a driver's name is the name of
            // the directory its link points at), so capture must recreate it.
            if let Ok(meta) = fs::metadata(self.on_disk(target)) {
                let mut trail = self.trail.borrow_mut();
                if meta.is_dir() {
                    trail.dirs.insert(target.clone());
                } else {
                    trail.files.insert(target.clone());
                }
            }
        }
        Ok(resolved)
    }

    /// Owner and mode of a device node: `stat` on the real host, the `.k3d-gpu-stat` sidecar
    /// in a fixture host (git keeps neither).
    pub fn node_stat(&self, path: &str) -> Result<Option<NodeStat>, HostError> {
        if !self.exists(path)? {
            return Ok(None);
        }
        if self.real_host {
            let Some(resolved) = self.resolve(path, true)? else {
                return Ok(None);
            };
            return stat::stat_real(&self.on_disk(&resolved)).map(Some);
        }
        let mut sidecar = self.stat_sidecar.borrow_mut();
        let table = sidecar.get_or_insert_with(|| stat::read_sidecar(&self.root));
        Ok(Some(table.get(path).copied().unwrap_or_default()))
    }

    pub(crate) fn on_disk(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }
}
