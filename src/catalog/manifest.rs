//! A component's manifest: its Kubernetes objects as JSON values, parsed when first used.
//!
//! The shipped manifests were parsed by `build.rs` and are embedded as compact JSON with their
//! digest, images and kinds ([`Shipped`]); a `--stdlib DIR` manifest is read at load time and
//! parsed from YAML on first use. Either way a run parses only the manifests of the components
//! its config wants, while the catalog's digest, the kinds observe lists and the images check
//! need none parsed (shipped) or parse on demand (disk).

use std::sync::OnceLock;

use serde_json::Value;

use super::CatalogError;
use super::yaml;

/// Parses the documents of a manifest (`name` is how messages call it); empty documents are
/// skipped; each object needs `apiVersion`, `kind` and `metadata.name`.
pub fn parse_manifest(name: &str, text: &str) -> Result<Vec<Value>, Box<CatalogError>> {
    yaml::objects(name, text).map_err(|e| Box::new(CatalogError::plain(e.to_string(), None)))
}

/// Why a component's manifest could not be read: the answer of the loader the edge hands the
/// catalog (`component_files`), which refuses a file that is not YAML or is a link before it
/// reads anything.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("{} is not a .yml or .yaml file", .0.display())]
    NotYaml(std::path::PathBuf),
    #[error("{} is a link; a component's manifest must be a file beside it", .0.display())]
    Link(std::path::PathBuf),
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: std::path::PathBuf, source: Box<dyn std::error::Error + Send + Sync> },
}

/// A shipped manifest as `build.rs` embeds it.
#[derive(Debug)]
pub struct Shipped {
    pub file: &'static str,
    /// The objects, as `yaml::encode` wrote them.
    pub json: &'static str,
    /// `sha256:` of `json`.
    pub digest: &'static str,
    /// `yaml::images` of the objects.
    pub images: &'static [&'static str],
    /// `yaml::kinds` of the objects.
    pub kinds: &'static [(&'static str, &'static str)],
    /// `yaml::plurals` of the objects: each CRD's group, kind and plural.
    pub plurals: &'static [(&'static str, &'static str, &'static str, bool)],
}

#[derive(Debug, Clone)]
enum Source {
    Shipped(&'static Shipped),
    /// Read from disk, parsed on first use; then its images must be the component's.
    Yaml {
        label: String,
        text: String,
        component: String,
        listed: Vec<String>,
    },
    /// Parsed when the component was read; `places` is where each object starts
    /// (`FILE:LINE`), when known.
    Parsed {
        places: Vec<String>,
    },
}

/// A manifest's objects, in file order.
#[derive(Debug, Clone)]
pub struct Objects {
    source: Source,
    parsed: OnceLock<Result<Vec<Value>, Unusable>>,
}

impl Objects {
    /// Objects already parsed (a user's component, a test's).
    pub fn parsed(objects: Vec<Value>) -> Objects {
        Objects { source: Source::Parsed { places: Vec::new() }, parsed: OnceLock::from(Ok(objects)) }
    }

    /// Objects parsed from `text` (`label` names it in messages), with where each starts.
    pub(super) fn parsed_from(label: &str, text: &str, objects: Vec<Value>) -> Objects {
        let places = yaml::document_lines(text, objects.len())
            .map(|lines| lines.into_iter().map(|line| format!("{label}:{line}")).collect())
            .unwrap_or_default();
        Objects { source: Source::Parsed { places }, parsed: OnceLock::from(Ok(objects)) }
    }

    pub(super) fn shipped(manifest: &'static Shipped) -> Objects {
        Objects { source: Source::Shipped(manifest), parsed: OnceLock::new() }
    }

    /// A manifest read from disk (`label` names it in messages), parsed on first use, when its
    /// images are checked against those component `component` lists.
    pub(super) fn yaml(label: String, text: String, component: String, listed: Vec<String>) -> Objects {
        Objects { source: Source::Yaml { label, text, component, listed }, parsed: OnceLock::new() }
    }

    /// The objects, parsing them on first use; the error says what is wrong with the manifest.
    pub fn get(&self) -> Result<&[Value], &Unusable> {
        let parsed = self.parsed.get_or_init(|| match &self.source {
            Source::Shipped(m) => {
                Ok(serde_json::from_str(m.json).expect("build.rs wrote this JSON from parsed objects"))
            }
            Source::Yaml { label, text, component, listed } => {
                let objects = yaml::objects(label, text)?;
                images_match(label, component, &yaml::images(&objects), listed)?;
                Ok(objects)
            }
            Source::Parsed { .. } => Ok(Vec::new()),
        });
        parsed.as_ref().map(Vec::as_slice)
    }

    /// Where the `index`-th object starts, as `FILE:LINE`, for a manifest read from disk
    /// (a shipped one is ours, and held to the same rules by tests).
    pub fn place(&self, index: usize) -> Option<String> {
        match &self.source {
            Source::Yaml { label, text, .. } => {
                let count = self.get().ok()?.len();
                let line = yaml::document_lines(text, count)?.get(index).copied()?;
                Some(format!("{label}:{line}"))
            }
            Source::Parsed { places } => places.get(index).cloned(),
            Source::Shipped(_) => None,
        }
    }

    /// Whether the objects have been parsed (decoded, for a shipped manifest) yet.
    pub fn decoded(&self) -> bool {
        self.parsed.get().is_some()
    }

    /// `sha256:` of the objects' compact JSON: the same for a manifest shipped or read from
    /// disk. A manifest that does not parse is digested by its text, so it still counts.
    pub fn digest(&self) -> String {
        if let Source::Shipped(m) = &self.source {
            return m.digest.to_string();
        }
        match (self.get(), &self.source) {
            (Ok(objects), _) => crate::canonical::sha256(yaml::encode(objects).as_bytes()),
            (Err(_), Source::Yaml { text, .. }) => crate::canonical::sha256(format!("invalid\0{text}").as_bytes()),
            (Err(e), _) => crate::canonical::sha256(format!("invalid\0{e}").as_bytes()),
        }
    }

    /// The `(apiVersion, kind)` of its objects, sorted (none when it does not parse).
    pub fn kinds(&self) -> Vec<(String, String)> {
        match &self.source {
            Source::Shipped(m) => m.kinds.iter().map(|(a, k)| (a.to_string(), k.to_string())).collect(),
            _ => self.get().map(yaml::kinds).unwrap_or_default(),
        }
    }
}

impl Objects {
    /// `(group, kind, plural, namespaced)` of the CRDs among its objects (none when it does
    /// not parse).
    pub fn plurals(&self) -> Vec<(String, String, String, bool)> {
        match &self.source {
            Source::Shipped(m) => {
                m.plurals.iter().map(|(g, k, p, n)| (g.to_string(), k.to_string(), p.to_string(), *n)).collect()
            }
            _ => self.get().map(yaml::plurals).unwrap_or_default(),
        }
    }
}

/// Two manifests are equal when their objects are.
impl PartialEq for Objects {
    fn eq(&self, other: &Objects) -> bool {
        self.digest() == other.digest()
    }
}

/// Every image in the manifest is listed in the component, and the other way round. Both
/// lists sorted, once each. The error is the message and its help.
pub(super) fn images_match(
    label: &str,
    component: &str,
    in_manifest: &[String],
    listed: &[String],
) -> Result<(), Unusable> {
    let owned = |image: &String| (label.to_string(), component.to_string(), image.clone());
    if let Some((label, component, image)) = in_manifest.iter().find(|i| !listed.contains(i)).map(owned) {
        return Err(Unusable::Unlisted { label, component, image });
    }
    if let Some((label, component, image)) = listed.iter().find(|i| !in_manifest.contains(i)).map(owned) {
        return Err(Unusable::Unused { label, component, image });
    }
    Ok(())
}

/// Why a manifest's objects cannot be used: they do not parse, or their images are not the
/// ones the component lists.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unusable {
    #[error(transparent)]
    Invalid(#[from] yaml::Invalid),
    #[error("{label} uses image {image}, which component {component} does not list")]
    Unlisted { label: String, component: String, image: String },
    #[error("component {component} lists image {image}, which {label} does not use")]
    Unused { label: String, component: String, image: String },
}

impl Unusable {
    pub fn help(&self) -> Option<&'static str> {
        matches!(self, Unusable::Unlisted { .. }).then_some("add an `image` line")
    }
}
