//! Resolving an image tag to its digest through the Docker engine's registry access
//! (`GET /distribution/{name}/json`, bollard's `inspect_registry_image`). The engine does the
//! registry round trip, so its mirrors, proxy and insecure-registry settings apply. Read-only:
//! nothing is pulled.

use super::CALL_TIMEOUT;
use super::docker::{Endpoint, connect};

/// What a registry says a tag points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `sha256:…` of the manifest (or index) the tag names.
    pub digest: String,
    /// `os/arch[/variant]` the index covers, sorted; empty when the registry did not say.
    pub platforms: Vec<String>,
}

/// Resolves each `repo:tag` in turn. The error names the image and the reason; on an error
/// nothing else is resolved, so the caller never writes half a lock.
pub async fn resolve_all(endpoint: &Endpoint, images: &[String]) -> Result<Vec<(String, Resolved)>, String> {
    let docker = connect(endpoint).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for image in images {
        let call = docker.inspect_registry_image(image, None);
        let inspect = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(i)) => i,
            Ok(Err(e)) => return Err(format!("{image}: {}", one_line(&e.to_string()))),
            Err(_) => return Err(format!("{image}: no answer from Docker within {}s", CALL_TIMEOUT.as_secs())),
        };
        let digest = inspect.descriptor.digest.unwrap_or_default();
        if !crate::images::is_digest(&digest) {
            return Err(format!("{image}: the registry answered without a sha256 digest"));
        }
        let mut platforms: Vec<String> = inspect
            .platforms
            .iter()
            .filter_map(|p| {
                let (os, arch) = (p.os.as_deref()?, p.architecture.as_deref()?);
                let text = match p.variant.as_deref().filter(|v| !v.is_empty()) {
                    Some(v) => format!("{os}/{arch}/{v}"),
                    None => format!("{os}/{arch}"),
                };
                // Registry text reaches the lock file: keep it to what a platform looks like.
                text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')).then_some(text)
            })
            .filter(|p| p != "unknown/unknown")
            .collect();
        platforms.sort();
        platforms.dedup();
        out.push((image.clone(), Resolved { digest, platforms }));
    }
    Ok(out)
}

/// An engine error on one line, without control characters (it is printed to a terminal).
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_string()
}
