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

impl HostRoot {
    /// Resolves `path` to a host path with no links in it. `Ok(None)` when a component is
    /// missing (a dangling link is missing too). With `follow_last` false the final component
    /// is left as it is, even if it is a link.
    pub(super) fn resolve(&self, path: &str, follow_last: bool) -> Result<Option<String>, HostError> {
        let original: Vec<String> = components(path).collect();
        // Detection reads many files in the same directories (a PCI function's vendor, device,
        // class, driver): start from the longest directory already resolved. Paths with `.`
        // or `..` are walked in full, uncached.
        let cacheable = !original.iter().any(|p| p == "." || p == "..");
        let (mut orig_done, mut done) = if cacheable { self.cached_prefix(&original) } else { (0, Vec::new()) };
        let mut todo: VecDeque<String> = original[orig_done..].iter().cloned().collect();
        let mut expanding = false;
        let mut hops = 0;
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
                    if done.pop().is_none() && !self.real_host {
                        if came_from_link {
                            return Err(HostError::Escapes { link: last_link });
                        }
                        return Err(HostError::Escapes { link: path.to_string() });
                    }
                    continue;
                }
                _ => {}
            }
            let here = join(&done, &part);
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
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(HostError::Loop);
                }
                let target = fs::read_link(self.on_disk(&here)).map_err(|e| super::io_error(&e))?;
                let target = target.to_string_lossy().into_owned();
                self.trail.borrow_mut().links.insert(here.clone(), target.clone());
                if target.starts_with('/') {
                    done.clear();
                }
                let pieces: Vec<String> = components(&target).collect();
                from_link += pieces.len();
                for (i, piece) in pieces.into_iter().enumerate() {
                    todo.insert(i, piece);
                }
                last_link = here.clone();
                expanding = !came_from_link || expanding;
                continue;
            } else {
                done.push(part);
            }
            // An original component is resolved once it is walked, or once the link it was
            // has been expanded in full.
            if from_link == 0 && (expanding || !came_from_link) {
                expanding = false;
                orig_done += 1;
                if cacheable && orig_done < original.len() {
                    self.dir_cache.borrow_mut().insert(original[..orig_done].join("/"), done.clone());
                }
            }
        }
        Ok(Some(join(&done, "")))
    }

    /// The longest proper prefix of `original` already resolved: (components covered, result).
    fn cached_prefix(&self, original: &[String]) -> (usize, Vec<String>) {
        let cache = self.dir_cache.borrow();
        for k in (1..original.len()).rev() {
            if let Some(done) = cache.get(&original[..k].join("/")) {
                return (k, done.clone());
            }
        }
        (0, Vec::new())
    }
}

fn components(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split('/').filter(|p| !p.is_empty()).map(str::to_string)
}

fn join(done: &[String], last: &str) -> String {
    let mut out = String::from("/");
    out.push_str(&done.join("/"));
    if !last.is_empty() {
        if !done.is_empty() {
            out.push('/');
        }
        out.push_str(last);
    }
    out
}
