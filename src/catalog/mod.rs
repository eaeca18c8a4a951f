//! The component catalog: `stdlib/*.kdl` component files and their `share/*.yml` manifests,
//! embedded at build time or read from `--stdlib DIR`, plus the user's own component files.
//! Format: docs/stdlib.md.
//!
//! The module is pure: text in, [`Component`] or a diagnostic out. The files of `--stdlib DIR`
//! and `[[components]]` are read by `component_files`, which passes their text and a manifest
//! loader to [`Catalog::from_texts`] and [`Catalog::add_user_component`]. A catalog's manifests are parsed when first used
//! ([`Objects`]): the shipped ones were turned into JSON by `build.rs`, and a run parses only
//! those of the components its config wants.

mod kdl_file;
mod kdl_tree;
mod manifest;
mod yaml;

use std::collections::BTreeMap;

use miette::Diagnostic;
use serde::Serialize;

pub use kdl_file::parse_component;
pub use manifest::{Objects, Unreadable as ManifestUnreadable, Unusable as ManifestUnusable, parse_manifest};
pub use yaml::plurals as crd_resources;

use crate::config::{Balloons, GpuMode};
use crate::facts::Vendor;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

#[cfg(test)]
mod tests;

/// One condition of a `when` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "key", content = "value")]
pub enum Condition {
    Vendor(Vendor),
    /// `intel-gpu-mode=dra`: Intel GPUs take this path (`[sharing] mode`).
    IntelGpuMode(GpuMode),
    /// `nvidia-gpu-mode=dra`: NVIDIA GPUs take this path (`[sharing] mode`).
    NvidiaGpuMode(GpuMode),
    Balloons(Balloons),
    /// `[telemetry]` wants this exporter (the compiler decides: `compile::telemetry`).
    Telemetry(crate::config::TelemetryExporter),
    /// `sandbox=on`: the config has a `[sandbox]` table (`off`: it has none).
    Sandbox(bool),
    /// `nvidia-sharing=mps`: `[sharing.nvidia]` shares NVIDIA GPUs this way.
    NvidiaSharing(crate::config::NvidiaStrategy),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rollout {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Configure {
    pub hook: String,
    pub container: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    pub name: String,
    pub summary: String,
    pub upstream: String,
    pub version: String,
    pub manifest: String,
    pub images: Vec<String>,
    /// Any line may hold; every condition on a line must. Empty: always wanted.
    pub when: Vec<Vec<Condition>>,
    pub after: Vec<String>,
    pub provides_resources: Vec<String>,
    pub provides_labels: Vec<String>,
    pub rollouts: Vec<Rollout>,
    pub configure: Vec<Configure>,
    pub replaces_baked: Option<String>,
    /// Its pods run only on the node that advertises the host's accelerators, like the
    /// device plugins' (`accelerator-node`): an exporter that reads the devices.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub accelerator_node: bool,
    /// The manifest's objects, in file order, parsed on first use.
    #[serde(skip)]
    pub objects: Objects,
    /// Where the component came from (`stdlib/NAME.kdl` or a path), for messages.
    pub origin: String,
    /// Added by the config's `[[components]]`, not part of the catalog.
    #[serde(skip)]
    pub user: bool,
}

/// A problem in a component file or its manifest.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
pub struct CatalogError {
    pub message: String,
    #[source_code]
    pub source_code: Option<miette::NamedSource<String>>,
    #[label("{label}")]
    pub span: Option<miette::SourceSpan>,
    pub label: String,
    #[help]
    pub help: Option<String>,
}

impl CatalogError {
    pub fn plain(message: impl Into<String>, help: Option<String>) -> CatalogError {
        CatalogError { message: message.into(), source_code: None, span: None, label: String::new(), help }
    }
}

/// The largest component file read from disk; real ones are a few hundred bytes.
pub const MAX_COMPONENT: u64 = 1 << 20;

/// All components, by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub components: BTreeMap<String, Component>,
    /// The image locks the compiler pins tag-only images with: the tool's own, and the one
    /// beside the config once `commands` has read it.
    pub images: crate::images::Locks,
}

/// The hook that appends the Intel GPU plugin's flags to a container's args.
pub const INTEL_GPU_PLUGIN_ARGS: &str = "intel-gpu-plugin-args";

/// The hook that points the NVIDIA device plugin's container at the config file
/// `[sharing.nvidia]` compiles to (a ConfigMap volume, `CONFIG_FILE`, the config's digest).
pub const NVIDIA_PLUGIN_CONFIG: &str = "nvidia-plugin-config";

/// The hook that tells the DCGM exporter's container, when `[sharing.nvidia]` shares the GPUs,
/// to map each GPU to every pod holding a replica of it (`KUBERNETES_VIRTUAL_GPUS=true`;
/// without it dcgm-exporter 4.5.3-4.8.2 maps a shared GPU to one pod).
pub const NVIDIA_VIRTUAL_GPUS: &str = "nvidia-virtual-gpus";

/// The hook that writes the host's CPU hints into the NRI balloons policy: the CPPC-favoured
/// CPUs on the `latency` balloon type, and `OVERRIDE_SYS_ATOM_CPUS` on container C where the
/// kernel lists low-power E-cores apart from `cpu_atom` (Arrow Lake-H).
pub const BALLOONS_HOST_HINTS: &str = "balloons-host-hints";

/// Names hooks may have; a component naming another is an error.
pub const HOOKS: &[&str] = &[INTEL_GPU_PLUGIN_ARGS, NVIDIA_PLUGIN_CONFIG, NVIDIA_VIRTUAL_GPUS, BALLOONS_HOST_HINTS];

impl Catalog {
    /// The catalog built into the binary. Its manifests were parsed at build time; none is
    /// decoded until a compile uses it.
    pub fn embedded() -> Result<Catalog, Box<CatalogError>> {
        let mut catalog = Catalog { images: crate::images::Locks::shipped(), ..Catalog::default() };
        let find = |name: &str| embedded::SHARE.iter().find(|m| m.file == name);
        for (file, text, tree) in embedded::STDLIB {
            let origin = format!("stdlib/{file}");
            let tree = serde_json::from_str(tree).expect("build.rs wrote this JSON from a parsed KDL file");
            let component = kdl_file::parse_with(&origin, text, Some(tree), kdl_file::Manifest::Shipped(&find))?;
            catalog.insert(component)?;
        }
        catalog.check()?;
        Ok(catalog)
    }

    /// A catalog from component files given as `(origin, text)` and a shipped lock; each
    /// manifest's text comes from `load_manifest` by name now, and is parsed when first used.
    /// The edge that reads a `--stdlib` directory (`component_files`) supplies all three.
    pub fn from_texts<'t>(
        shipped: crate::images::Lock,
        files: impl IntoIterator<Item = (String, &'t str)>,
        load_manifest: &dyn Fn(&str) -> Result<String, ManifestUnreadable>,
    ) -> Result<Catalog, Box<CatalogError>> {
        let mut catalog = Catalog { images: crate::images::Locks { user: None, shipped }, ..Catalog::default() };
        for (origin, text) in files {
            let component = kdl_file::parse_with(&origin, text, None, kdl_file::Manifest::Later(load_manifest))?;
            catalog.insert(component)?;
        }
        catalog.check()?;
        Ok(catalog)
    }

    /// Adds one of the config's own components (`[[components]]`), its manifest parsed now
    /// from what `load_manifest` returns for its name.
    pub fn add_user_component(
        &mut self,
        origin: &str,
        text: &str,
        load_manifest: &dyn Fn(&str) -> Result<String, ManifestUnreadable>,
    ) -> Result<(), Box<CatalogError>> {
        let mut component = parse_component(origin, text, load_manifest)?;
        component.user = true;
        self.insert(component)
    }

    fn insert(&mut self, component: Component) -> Result<(), Box<CatalogError>> {
        if let Some(existing) = self.components.get(&component.name) {
            return Err(Box::new(CatalogError::plain(
                format!("component {} is defined twice ({} and {})", component.name, existing.origin, component.origin),
                Some("rename one of them".into()),
            )));
        }
        self.components.insert(component.name.clone(), component);
        Ok(())
    }

    /// Cross-component checks: `after` names exist and form no cycle.
    pub fn check(&self) -> Result<(), Box<CatalogError>> {
        for c in self.components.values() {
            for dep in &c.after {
                if !self.components.contains_key(dep) {
                    let known: Vec<&str> = self.components.keys().map(String::as_str).collect();
                    let hint = crate::suggest::closest(dep, known.iter().copied());
                    return Err(Box::new(CatalogError::plain(
                        format!("component {} runs after {dep}, which is not in the catalog", c.name),
                        Some(
                            hint.map_or_else(
                                || format!("known: {}", known.join(", ")),
                                |h| format!("did you mean {h}?"),
                            ),
                        ),
                    )));
                }
            }
        }
        if let Some(cycle) = self.after_cycle() {
            return Err(Box::new(CatalogError::plain(
                format!("components depend on each other in a cycle: {}", cycle.join(" → ")),
                Some("remove one of the `after` lines".into()),
            )));
        }
        Ok(())
    }

    fn after_cycle(&self) -> Option<Vec<String>> {
        // Depth-first search with the current path; the first back edge is the cycle.
        fn visit<'a>(
            name: &'a str,
            catalog: &'a Catalog,
            path: &mut Vec<&'a str>,
            done: &mut std::collections::BTreeSet<&'a str>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|p| *p == name) {
                let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(name.to_string());
                return Some(cycle);
            }
            if !done.insert(name) {
                return None;
            }
            path.push(name);
            for dep in &catalog.components[name].after {
                if let Some(c) = visit(dep, catalog, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            None
        }
        let mut done = std::collections::BTreeSet::new();
        for name in self.components.keys() {
            if let Some(c) = visit(name, self, &mut Vec::new(), &mut done) {
                return Some(c);
            }
        }
        None
    }

    /// Digest of everything in the catalog (component files and manifests), for plan inputs:
    /// each component as parsed, and its manifest's objects by their digest
    /// ([`Objects::digest`], the same whether shipped or read from disk).
    pub fn digest(&self) -> String {
        #[derive(Serialize)]
        struct View<'a> {
            component: &'a Component,
            objects: String,
        }
        let all: Vec<View> =
            self.components.values().map(|c| View { component: c, objects: c.objects.digest() }).collect();
        crate::canonical::digest(&all)
    }
}
