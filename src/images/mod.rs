//! Image references and `images.lock` (DESIGN.md §7). Pure: text in, values out.
//!
//! The catalog names images by `repo:tag`, with a digest only where a public source confirmed
//! one. A lock maps `repo:tag` to the digest a registry reported; the lock beside the config
//! comes first, then the one this tool ships. [`pin_object`] rewrites a manifest object's
//! images to `repo:tag@sha256:…` where a digest is known and says which are not.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `schema` of an images.lock (contract).
pub const SCHEMA: &str = "k3d-gpu.images/v1";

/// The file name the lock has beside `k3dgpu.toml`.
pub const LOCK_FILE: &str = "images.lock";

/// The lock this tool ships: digests the project confirmed for tag-only catalog images.
const SHIPPED: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/share/images.lock"));

/// The images k3s runs on its own at the pinned release (share/k3s-images.txt says where the
/// list comes from).
const K3S_IMAGES: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/share/k3s-images.txt"));

/// k3s's own images (CoreDNS, local-path-provisioner, metrics-server, Traefik, klipper, pause),
/// as k3s names them: no plan deploys them, and every cluster runs them, so the lock pins them
/// like the catalog's.
pub fn k3s_images() -> Vec<&'static str> {
    K3S_IMAGES.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
}

/// Why a text is not an image reference ([`ImageRef::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadImageRef {
    #[error("an image reference is one short word without spaces")]
    NotAWord,
    #[error("digest {0:?} is not sha256:<64 lowercase hex digits>")]
    Digest(String),
    #[error("the image has no tag; name a released tag (repo:tag)")]
    NoTag,
    #[error("an image reference is registry/repo:tag")]
    EmptyPart,
    #[error("tag {0:?} is not a valid tag")]
    Tag(String),
}

/// Why a lock was refused: what, and the 1-based line and column it is at when known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", at.map(|(line, column)| format!("line {line}, column {column}: ")).unwrap_or_default())]
pub struct BadLock {
    pub at: Option<(usize, usize)>,
    pub problem: LockProblem,
}

/// What is wrong with a lock; each names the offending entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockProblem {
    /// TOML's own message, on one line.
    #[error("{0}")]
    Toml(String),
    #[error("schema is {0:?}, expected {SCHEMA:?}")]
    Schema(String),
    #[error("images.{key:?}: {why}")]
    Key { key: String, why: BadImageRef },
    #[error("images.{0:?}: a key is repo:tag; the digest goes in `digest`")]
    DigestInKey(String),
    #[error("images.{key:?}: digest {digest:?} is not sha256:<64 lowercase hex digits>")]
    Digest { key: String, digest: String },
    #[error("images.{key:?}: platform {platform:?} is not an os/arch")]
    Platform { key: String, platform: String },
}

/// `name:tag`, optionally `@sha256:…`. `name` keeps its registry (`docker.io/intel/…`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageRef {
    pub name: String,
    pub tag: String,
    /// `sha256:<64 hex>` when the reference pins one.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `name:tag[@sha256:hex]`. A reference without a tag, with an empty part, with
    /// whitespace or control characters, or with a digest that is not sha256 is refused.
    pub fn parse(text: &str) -> Result<ImageRef, BadImageRef> {
        if text.is_empty() || text.len() > 512 || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(BadImageRef::NotAWord);
        }
        let (named, digest) = match text.split_once('@') {
            Some((n, d)) => {
                if !is_digest(d) {
                    return Err(BadImageRef::Digest(d.into()));
                }
                (n, Some(d.to_string()))
            }
            None => (text, None),
        };
        // The tag is after the last ':' of the last path component (a registry may have a port).
        let last_slash = named.rfind('/').map_or(0, |i| i + 1);
        let Some(colon) = named[last_slash..].rfind(':').map(|i| i + last_slash) else {
            return Err(BadImageRef::NoTag);
        };
        let (name, tag) = (&named[..colon], &named[colon + 1..]);
        if name.is_empty() || tag.is_empty() || name.ends_with('/') {
            return Err(BadImageRef::EmptyPart);
        }
        if !tag.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) || tag.len() > 128 {
            return Err(BadImageRef::Tag(tag.into()));
        }
        Ok(ImageRef { name: name.into(), tag: tag.into(), digest })
    }

    /// `name:tag`, the key of a lock entry.
    pub fn tagged(&self) -> String {
        format!("{}:{}", self.name, self.tag)
    }

    /// `name:tag@digest`.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}:{}@{digest}", self.name, self.tag)
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
}

/// One locked image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub digest: String,
    /// The platforms the digest's index covers (`linux/amd64`), when the registry said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<String>,
}

/// An images.lock document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub schema: String,
    #[serde(default)]
    pub images: BTreeMap<String, Entry>,
}

impl Default for Lock {
    fn default() -> Self {
        Lock { schema: SCHEMA.into(), images: BTreeMap::new() }
    }
}

impl Lock {
    /// Parses and checks a lock: the schema, each key a `repo:tag` without digest, each
    /// digest well-formed. The error is a sentence naming the offending entry, after the line
    /// and column it is at (`line 4, column 10: …`), as config errors give theirs.
    pub fn parse(text: &str) -> Result<Lock, BadLock> {
        let lock: Lock = toml::from_str(text).map_err(|e| BadLock {
            at: at(text, e.span()),
            problem: LockProblem::Toml(crate::escape::one_line(e.message()).into_owned()),
        })?;
        let place =
            |path: &[&str], problem: LockProblem| BadLock { at: at(text, crate::config::span_of(text, path)), problem };
        if lock.schema != SCHEMA {
            return Err(place(&["schema"], LockProblem::Schema(lock.schema.clone())));
        }
        for (key, entry) in &lock.images {
            let image = ImageRef::parse(key)
                .map_err(|why| place(&["images", key], LockProblem::Key { key: key.clone(), why }))?;
            if image.digest.is_some() {
                return Err(place(&["images", key], LockProblem::DigestInKey(key.clone())));
            }
            if !is_digest(&entry.digest) {
                let problem = LockProblem::Digest { key: key.clone(), digest: entry.digest.clone() };
                return Err(place(&["images", key, "digest"], problem));
            }
            if let Some(p) = entry.platforms.iter().find(|p| p.is_empty() || p.chars().any(char::is_control)) {
                let problem = LockProblem::Platform { key: key.clone(), platform: p.clone() };
                return Err(place(&["images", key, "platforms"], problem));
            }
        }
        Ok(lock)
    }

    /// The file's bytes: a fixed header, then the entries sorted by key; no timestamps, so the
    /// same resolution always gives the same bytes.
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "# Image digests for this config, written by `k3d-gpu images lock`; check it in.\n\
             # `k3d-gpu images check` fails when it misses an image the config deploys.\n",
        );
        out.push_str(&format!("schema = {:?}\n", SCHEMA));
        for (key, entry) in &self.images {
            out.push_str(&format!("\n[images.{key:?}]\ndigest = {:?}\n", entry.digest));
            if !entry.platforms.is_empty() {
                let list: Vec<String> = entry.platforms.iter().map(|p| format!("{p:?}")).collect();
                out.push_str(&format!("platforms = [{}]\n", list.join(", ")));
            }
        }
        out
    }
}

/// The 1-based line and column where `span` starts in `text`.
fn at(text: &str, span: Option<std::ops::Range<usize>>) -> Option<(usize, usize)> {
    span.map(|s| crate::escape::line_column(text, s.start))
}

/// Where a digest for an image came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The catalog pins it (a public source confirmed it; share/README.md).
    Catalog,
    /// The images.lock beside the config.
    Lock,
    /// The lock this tool ships.
    Shipped,
    /// Nowhere: deployed by tag.
    Unlocked,
}

impl Source {
    pub fn word(self) -> &'static str {
        match self {
            Source::Catalog => "pinned in the catalog",
            Source::Lock => "locked",
            Source::Shipped => "locked by the tool",
            Source::Unlocked => "unlocked",
        }
    }
}

/// How one image of the graph is deployed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Use {
    /// What the manifests carry: `repo:tag@sha256:…`, or `repo:tag` when unlocked.
    pub reference: String,
    pub source: Source,
}

/// The locks in lookup order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Locks {
    /// The lock beside the config, when there is one.
    pub user: Option<Lock>,
    /// The lock the tool ships.
    pub shipped: Lock,
}

impl Locks {
    /// The shipped lock alone.
    pub fn shipped() -> Locks {
        Locks { user: None, shipped: shipped_lock() }
    }

    /// The lock entry for `key` (`repo:tag`): the user's lock first, then the shipped one.
    pub fn entry(&self, key: &str) -> Option<(&Entry, Source)> {
        self.user
            .as_ref()
            .and_then(|l| l.images.get(key))
            .map(|e| (e, Source::Lock))
            .or_else(|| self.shipped.images.get(key).map(|e| (e, Source::Shipped)))
    }

    /// How `image` (as the catalog names it) is deployed. A catalog pin stands; the user's
    /// lock is not allowed to move it (`images check` reports the disagreement).
    pub fn resolve(&self, image: &ImageRef) -> Use {
        if let Some(d) = &image.digest {
            return Use { reference: image.pinned(d), source: Source::Catalog };
        }
        let key = image.tagged();
        match self.entry(&key) {
            Some((entry, source)) => Use { reference: image.pinned(&entry.digest), source },
            None => Use { reference: key, source: Source::Unlocked },
        }
    }
}

/// The shipped lock. It is checked by a unit test, so a bad file never reaches a release.
pub fn shipped_lock() -> Lock {
    Lock::parse(SHIPPED).unwrap_or_default()
}

/// Rewrites every `image` string in a manifest object to how it is deployed, and returns the
/// images by their catalog name. Strings that do not parse are left alone (the catalog
/// refuses them before this runs).
pub fn pin_object(object: &mut serde_json::Value, locks: &Locks, out: &mut BTreeMap<String, Use>) {
    match object {
        serde_json::Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "image"
                    && let Some(text) = v.as_str().map(str::to_string)
                {
                    if let Ok(image) = ImageRef::parse(&text) {
                        let used = locks.resolve(&image);
                        *v = serde_json::Value::String(used.reference.clone());
                        out.insert(text, used);
                    }
                } else {
                    pin_object(v, locks, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| pin_object(v, locks, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    #[test]
    fn references() {
        let r = ImageRef::parse("127.0.0.1:5000/x/y:1.0").unwrap();
        assert_eq!((r.name.as_str(), r.tag.as_str(), r.digest), ("127.0.0.1:5000/x/y", "1.0", None));
        let r = ImageRef::parse(&format!("docker.io/a/b:v1@{D1}")).unwrap();
        assert_eq!(r.tagged(), "docker.io/a/b:v1");
        assert_eq!(r.digest.as_deref(), Some(D1));
        for bad in ["", "a/b", "127.0.0.1:5000/x/y", "a/b:", ":1", "a/b:1@sha256:12", "a b:1", "a/b:1\u{1b}", "a/b:t/x"]
        {
            assert!(ImageRef::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn k3s_images_follow_the_release_notes_of_the_pinned_k3s() {
        // k3s-io/docs release notes for v1.37.1+k3s1 (share/k3s-images.txt names the commit).
        let images = k3s_images();
        for want in [
            "docker.io/rancher/mirrored-library-traefik:3.7.13",
            "docker.io/rancher/mirrored-coredns-coredns:1.14.7",
            "docker.io/rancher/mirrored-metrics-server:v0.9.0",
            "docker.io/rancher/local-path-provisioner:v0.0.37",
            "docker.io/rancher/mirrored-pause:3.10.2",
        ] {
            assert!(images.contains(&want), "{want} missing from {images:?}");
        }
        assert_eq!(images.len(), 8);
        assert!(images.iter().all(|i| ImageRef::parse(i).is_ok()), "{images:?}");
    }

    #[test]
    fn a_lock_round_trips_sorted_and_without_timestamps() {
        let mut lock = Lock::default();
        lock.images.insert("z/z:1".into(), Entry { digest: D1.into(), platforms: vec![] });
        lock.images.insert("a/a:2".into(), Entry { digest: D1.into(), platforms: vec!["linux/amd64".into()] });
        let text = lock.to_text();
        assert!(text.find("a/a:2").unwrap() < text.find("z/z:1").unwrap());
        assert_eq!(Lock::parse(&text).unwrap(), lock);
        assert_eq!(Lock::parse(&text).unwrap().to_text(), text);
    }

    #[test]
    fn bad_locks_are_refused_with_the_entry_named() {
        // Each with the line and column it is at, as config errors give theirs.
        let cases = [
            ("schema = \"other\"\n", "line 1, column 10: schema is"),
            (
                "schema = \"k3d-gpu.images/v1\"\n[images.\"a/b\"]\ndigest = \"sha256:1\"\n",
                "line 2, column 1: images.\"a/b\"",
            ),
            (
                "schema = \"k3d-gpu.images/v1\"\n[images.\"a/b:1\"]\ndigest = \"sha256:1\"\n",
                "line 3, column 10: images.\"a/b:1\": digest \"sha256:1\" is not sha256",
            ),
            ("schema = \"k3d-gpu.images/v1\"\nextra = 1\n", "line 2, column 1: unknown field"),
            ("schema = \"k3d-gpu.images/v1\"\n[images\n", "line 2, column 8: "),
        ];
        for (text, want) in cases {
            let e = Lock::parse(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text}: {e}");
        }
        let schema = BadLock { at: Some((1, 10)), problem: LockProblem::Schema("other".into()) };
        assert_eq!(Lock::parse("schema = \"other\"\n").unwrap_err(), schema);
        assert_eq!(ImageRef::parse("a/b"), Err(BadImageRef::NoTag));
    }

    #[test]
    fn lookup_order_is_catalog_pin_then_user_lock_then_shipped() {
        let d2 = D1.replace('1', "2");
        let d3 = D1.replace('1', "3");
        let mut user = Lock::default();
        user.images.insert("a/b:1".into(), Entry { digest: d2.clone(), platforms: vec![] });
        let mut shipped = Lock::default();
        shipped.images.insert("a/b:1".into(), Entry { digest: d3.clone(), platforms: vec![] });
        shipped.images.insert("c/d:1".into(), Entry { digest: d3.clone(), platforms: vec![] });
        let locks = Locks { user: Some(user), shipped };
        let get = |s: &str| locks.resolve(&ImageRef::parse(s).unwrap());
        assert_eq!(get(&format!("a/b:1@{D1}")), Use { reference: format!("a/b:1@{D1}"), source: Source::Catalog });
        assert_eq!(get("a/b:1"), Use { reference: format!("a/b:1@{d2}"), source: Source::Lock });
        assert_eq!(get("c/d:1"), Use { reference: format!("c/d:1@{d3}"), source: Source::Shipped });
        assert_eq!(get("e/f:1"), Use { reference: "e/f:1".into(), source: Source::Unlocked });
    }

    #[test]
    fn the_shipped_lock_parses() {
        Lock::parse(SHIPPED).unwrap();
    }
}
