//! Link resolution confined to the host root.
//!
//! We walk the path ourselves instead of letting the OS follow links, because the OS would
//! follow an absolute link (or enough `..`) straight out of a fixture host into the machine
//! running the tests. Absolute targets are read relative to the root, like a chroot; a `..`
//! above the root of a fixture host is refused.

use std::collections::VecDeque;
use std::fs;
use std::io;

use super::{HostError, HostRoot};

/// Linux's own limit on links followed in one lookup (`MAXSYMLINKS`).
pub const MAX_LINK_HOPS: usize = 40;

/// A path resolved to one with no links in it, with the `lstat` of its last component.
pub(super) struct Resolved {
    pub path: String,
    pub meta: fs::Metadata,
}

/// A directory resolved in full: its link-free components and the links it took to get there
/// (they count against [`MAX_LINK_HOPS`] for any path below it).
#[derive(Clone)]
pub(super) struct ResolvedDir {
    parts: Vec<String>,
    hops: usize,
}

/// Where a walk stands: the components resolved so far and the `lstat` of the last one, when
/// it is known.
struct Walk {
    done: Vec<String>,
    meta: Option<fs::Metadata>,
    hops: usize,
}

impl HostRoot {
    /// Resolves `path` to a host path with no links in it. `Ok(None)` when a component is
    /// missing (a dangling link is missing too). With `follow_last` false the final component
    /// is left as it is, even if it is a link.
    pub(super) fn resolve(&self, path: &str, follow_last: bool) -> Result<Option<Resolved>, HostError> {
        let mut parts: Vec<&str> = components(path).collect();
        // Detection reads many files in the same directories (a PCI function's vendor, device,
        // class, driver): each directory is resolved once and cached by its host path (see
        // `resolve_dir`); only the last component is walked each time. Paths with `.` or `..` are walked in
        // full, uncached, so a `..` above a fixture root is reported against the path.
        let cacheable = !parts.iter().any(|p| *p == "." || *p == "..");
        let walk = match parts.pop() {
            Some(last) if cacheable => {
                let Some(dir) = self.resolve_dir(path, &parts)? else {
                    return Ok(None);
                };
                self.walk(path, Walk { done: dir.parts, meta: None, hops: dir.hops }, &[last], follow_last)?
            }
            last => {
                parts.extend(last);
                self.walk(path, Walk { done: Vec::new(), meta: None, hops: 0 }, &parts, follow_last)?
            }
        };
        let Some(walk) = walk else { return Ok(None) };
        let resolved = join(&walk.done);
        let meta = match walk.meta {
            Some(meta) => meta,
            // The walk ended on the root, or on a `..`: the last component was not looked up.
            None => match fs::symlink_metadata(self.on_disk(&resolved)) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(super::io_error(&e)),
            },
        };
        Ok(Some(Resolved { path: resolved, meta }))
    }

    /// Resolves the directory `parts` (no `.` or `..` in them), links followed: from the cache,
    /// or from its own parent (resolved the same way) plus one component, then cached. Each
    /// entry is the full resolution of its own path, so a link to `.`, `..` or `/` anywhere
    /// above cannot leave a wrong prefix behind.
    fn resolve_dir(&self, path: &str, parts: &[&str]) -> Result<Option<ResolvedDir>, HostError> {
        let Some((last, parent)) = parts.split_last() else {
            return Ok(Some(ResolvedDir { parts: Vec::new(), hops: 0 }));
        };
        let key = parts.join("/");
        if let Some(dir) = self.dir_cache.borrow().get(&key) {
            return Ok(Some(dir.clone()));
        }
        let Some(up) = self.resolve_dir(path, parent)? else {
            return Ok(None);
        };
        let Some(w) = self.walk(path, Walk { done: up.parts, meta: None, hops: up.hops }, &[last], true)? else {
            return Ok(None);
        };
        let dir = ResolvedDir { parts: w.done, hops: w.hops };
        self.dir_cache.borrow_mut().insert(key, dir.clone());
        Ok(Some(dir))
    }

    /// Walks `parts` from `at`, following links (the last one only when `follow_last`).
    fn walk(&self, path: &str, mut at: Walk, parts: &[&str], follow_last: bool) -> Result<Option<Walk>, HostError> {
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
                    if at.done.pop().is_none() && !self.real_host {
                        if came_from_link {
                            return Err(HostError::Escapes { link: last_link });
                        }
                        return Err(HostError::Escapes { link: path.to_string() });
                    }
                    continue;
                }
                _ => {}
            }
            at.done.push(part);
            let here = join(&at.done);
            let meta = match fs::symlink_metadata(self.on_disk(&here)) {
                Ok(meta) => meta,
                Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
                    if came_from_link {
                        return Err(HostError::Dangling { link: last_link });
                    }
                    return Ok(None);
                }
                Err(e) => return Err(super::io_error(&e)),
            };
            let is_last = todo.is_empty();
            if meta.file_type().is_symlink() && (follow_last || !is_last) {
                at.done.pop();
                at.meta = None;
                at.hops += 1;
                if at.hops > MAX_LINK_HOPS {
                    return Err(HostError::Loop);
                }
                let target = fs::read_link(self.on_disk(&here)).map_err(|e| super::io_error(&e))?;
                let target = target.to_string_lossy().into_owned();
                self.trail.borrow_mut().links.insert(here.clone(), target.clone());
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
}

fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|p| !p.is_empty())
}

fn join(done: &[String]) -> String {
    let mut out = String::with_capacity(1 + done.iter().map(|p| p.len() + 1).sum::<usize>());
    for part in done {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}
