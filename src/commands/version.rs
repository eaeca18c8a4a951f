//! `k3d-gpu version` (and `k3d-gpu --version --json`): this build and what it pins. Every
//! value is read from the constant or catalog entry the rest of the tool uses, never restated:
//! the commit `build.rs` recorded (src/build_commit.rs), the node image's k3s tag and NVIDIA
//! container toolkit (`node_image`, whose tests hold them to the shipped Dockerfile), the k3d
//! release the tool is tested against (`apply::k3d::K3D_TESTED`) and doctor's k3d floor, and
//! each built-in catalog component's `upstream NAME version=…` line.

use serde::Serialize;

use crate::error::{EXIT_OK, Error, Result};
use crate::table::{column_width, pad};

/// `version --json`.
pub const SCHEMA: &str = "k3d-gpu.version/v1";

/// The commit this binary was built from, or `unknown` (src/build_commit.rs; also when a build
/// script other than ours ran, which sets nothing).
pub const COMMIT: &str = match option_env!("K3D_GPU_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// k3d-gpu.version/v1. The field names are a contract (docs/version.md).
#[derive(Debug, Serialize)]
pub struct Versions {
    pub schema: &'static str,
    /// The crate's version (`Cargo.toml`).
    pub version: &'static str,
    /// The git commit of the build, or `unknown`.
    pub commit: &'static str,
    /// The k3s release of the node image (a `rancher/k3s` tag).
    pub k3s: &'static str,
    pub k3d: K3d,
    /// The NVIDIA container toolkit the node image installs (its apt version).
    pub nvidia_container_toolkit: &'static str,
    /// Each built-in catalog component and the upstream release it deploys, by name.
    pub components: Vec<ComponentVersion>,
}

#[derive(Debug, Serialize)]
pub struct K3d {
    /// The release k3d-gpu is tested against.
    pub tested: &'static str,
    /// The oldest release `doctor` accepts.
    pub minimum: String,
}

#[derive(Debug, Serialize)]
pub struct ComponentVersion {
    pub name: String,
    pub upstream: String,
    pub version: String,
}

/// What this build pins.
pub fn versions() -> Result<Versions> {
    let catalog = crate::catalog::Catalog::embedded().map_err(|e| Error::Invalid(vec![miette::Report::new(*e)]))?;
    let components = catalog
        .components
        .values()
        .map(|c| ComponentVersion { name: c.name.clone(), upstream: c.upstream.clone(), version: c.version.clone() })
        .collect();
    let (major, minor, patch) = crate::doctor::live::K3D_FLOOR;
    Ok(Versions {
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        commit: COMMIT,
        k3s: crate::node_image::K3S_TAG,
        k3d: K3d { tested: crate::apply::k3d::K3D_TESTED, minimum: format!("v{major}.{minor}.{patch}") },
        nvidia_container_toolkit: crate::node_image::NVIDIA_CONTAINER_TOOLKIT_VERSION,
        components,
    })
}

/// The human text.
pub fn render(v: &Versions) -> String {
    let mut out = format!("k3d-gpu {}\n", v.version);
    let commit = if v.commit == "unknown" {
        "unknown (not built from a git checkout)".to_string()
    } else {
        v.commit.to_string()
    };
    let rows = [
        ("commit", commit),
        ("k3s", format!("{} (the node image's)", v.k3s)),
        ("k3d", format!("{} (tested; doctor accepts {} or newer)", v.k3d.tested, v.k3d.minimum)),
        ("nvidia-container-toolkit", format!("{} (in the node image)", v.nvidia_container_toolkit)),
    ];
    let key = column_width(rows.iter().map(|(k, _)| *k), 0);
    for (k, value) in &rows {
        out.push_str(&format!("{}  {value}\n", pad(k, key)));
    }
    out.push_str("\ncomponents (the built-in catalog: component, upstream, version)\n");
    let name = column_width(v.components.iter().map(|c| c.name.as_str()), 0);
    let upstream = column_width(v.components.iter().map(|c| c.upstream.as_str()), 0);
    for c in &v.components {
        out.push_str(&format!("  {}  {}  {}\n", pad(&c.name, name), pad(&c.upstream, upstream), c.version));
    }
    out
}

pub fn run(json: bool) -> Result<u8> {
    let v = versions()?;
    if json {
        super::print_bytes(&crate::canonical::to_bytes(&v));
    } else {
        super::print_bytes(crate::escape::assembled(&render(&v)).as_bytes());
    }
    Ok(EXIT_OK)
}
