//! Resolving an image tag to its digest through the Docker engine's registry access
//! (`GET /distribution/{name}/json`, bollard's `inspect_registry_image`). The engine does the
//! registry round trip, so its mirrors, proxy and insecure-registry settings apply. Read-only:
//! nothing is pulled. The engine does not read the user's login itself (the docker CLI sends
//! it with each request), so the `auths` of the Docker config are passed along the same way;
//! credential helpers (`credsStore`) are not run.

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

/// Why `images lock` resolved nothing; each but the first names the image.
#[derive(Debug, thiserror::Error)]
pub enum Unresolved {
    /// The engine that resolves for us cannot be reached.
    #[error(transparent)]
    Docker(#[from] super::ObserveError),
    /// The engine did not answer in time.
    #[error("{image}: no answer from Docker within {seconds}s")]
    NoAnswer { image: String, seconds: u64 },
    /// The engine or the registry said no (its text, on one line).
    #[error("{image}: {}", one_line(reason))]
    Refused { image: String, reason: String },
    #[error("{0}: the registry answered without a sha256 digest")]
    NoDigest(String),
}

/// Resolves each `repo:tag` in turn, with the login `docker_config` (the parsed
/// `config.json`) holds for its registry. The error names the image and the reason; on an
/// error nothing else is resolved, so the caller never writes half a lock.
pub async fn resolve_all(
    endpoint: &Endpoint,
    images: &[String],
    docker_config: Option<&serde_json::Value>,
) -> Result<Vec<(String, Resolved)>, Unresolved> {
    let docker = connect(endpoint)?;
    let mut out = Vec::new();
    for image in images {
        let login = docker_config.and_then(|c| credentials(c, &registry_host(image)));
        let call = docker.inspect_registry_image(image, login);
        let inspect = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(i)) => i,
            Ok(Err(e)) => {
                let reason = super::docker_transport::why(&e);
                return Err(Unresolved::Refused { image: image.clone(), reason });
            }
            Err(_) => return Err(Unresolved::NoAnswer { image: image.clone(), seconds: CALL_TIMEOUT.as_secs() }),
        };
        let digest = inspect.descriptor.digest.unwrap_or_default();
        if !crate::images::is_digest(&digest) {
            return Err(Unresolved::NoDigest(image.clone()));
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

/// The registry an image reference names, by Docker's reference grammar
/// (distribution/reference `splitDockerDomain`, normalize.go at 0965666a, v0.6.0-22): the
/// first of several components is the registry when it is exactly `localhost`, holds a `.` or
/// a `:`, or is not all lowercase (a repository path is lowercase, so `Localhost/x` names a
/// host called `Localhost`, not Docker Hub); `index.docker.io` is Docker Hub. Anything else
/// is Docker Hub.
pub fn registry_host(image: &str) -> String {
    match image.split_once('/') {
        Some(("index.docker.io", _)) => "docker.io".to_string(),
        Some((first, _)) if first == "localhost" || first.contains(['.', ':']) || first.to_lowercase() != first => {
            first.to_string()
        }
        _ => "docker.io".to_string(),
    }
}

/// The login the Docker config's `auths` holds for `host`, as the docker CLI would send it.
/// Docker Hub's entry is keyed `https://index.docker.io/v1/`.
pub fn credentials(config: &serde_json::Value, host: &str) -> Option<bollard::auth::DockerCredentials> {
    let auths = config["auths"].as_object()?;
    let keys: Vec<String> = if host == "docker.io" {
        vec!["https://index.docker.io/v1/".into(), "index.docker.io".into(), "docker.io".into()]
    } else {
        vec![host.into(), format!("https://{host}"), format!("http://{host}"), format!("https://{host}/v1/")]
    };
    let entry = keys.iter().find_map(|k| auths.get(k))?;
    let field = |k: &str| entry[k].as_str().filter(|v| !v.is_empty()).map(str::to_string);
    let (mut username, mut password) = (field("username"), field("password"));
    if let Some((u, p)) = field("auth").and_then(|a| base64_decode(&a)).and_then(|d| {
        let text = String::from_utf8(d).ok()?;
        text.split_once(':').map(|(u, p)| (u.to_string(), p.to_string()))
    }) {
        username = Some(u);
        password = Some(p);
    }
    let identitytoken = field("identitytoken");
    if username.is_none() && identitytoken.is_none() {
        return None;
    }
    Some(bollard::auth::DockerCredentials {
        username,
        password,
        identitytoken,
        serveraddress: Some(host.to_string()),
        ..Default::default()
    })
}

/// Standard base64 (padding optional); `None` on anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = text.trim_end_matches('=').bytes().collect();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    Some(out)
}

/// An engine error on one line, escaped like every printed string (it reaches a terminal).
fn one_line(text: &str) -> String {
    crate::escape::one_line(text.trim()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_hosts() {
        assert_eq!(registry_host("docker.io/intel/x:1"), "docker.io");
        assert_eq!(registry_host("intel/x:1"), "docker.io");
        assert_eq!(registry_host("ghcr.io/a/b:1"), "ghcr.io");
        assert_eq!(registry_host("127.0.0.1:5000/a:1"), "127.0.0.1:5000");
        assert_eq!(registry_host("localhost/a:1"), "localhost");
        // Not the reserved `localhost`, and not Docker Hub either: an uppercase first
        // component is a host (no repository path may hold uppercase).
        assert_eq!(registry_host("Localhost/x:1"), "Localhost");
        assert_eq!(registry_host("Registry/x:1"), "Registry");
        assert_eq!(registry_host("index.docker.io/intel/x:1"), "docker.io");
        assert_eq!(registry_host("localhost:5000/a:1"), "localhost:5000");
        assert_eq!(registry_host("ubuntu:24.04"), "docker.io");
    }

    #[test]
    fn logins_come_from_the_docker_config_auths() {
        // "user:pa:ss" in base64.
        let config = serde_json::json!({ "auths": {
            "https://index.docker.io/v1/": { "auth": "dXNlcjpwYTpzcw==" },
            "ghcr.io": { "username": "u", "password": "p" },
            "quay.io": { "identitytoken": "t" },
            "bad.io": { "auth": "***" },
        }});
        let hub = credentials(&config, "docker.io").unwrap();
        assert_eq!((hub.username.as_deref(), hub.password.as_deref()), (Some("user"), Some("pa:ss")));
        let ghcr = credentials(&config, "ghcr.io").unwrap();
        assert_eq!((ghcr.username.as_deref(), ghcr.serveraddress.as_deref()), (Some("u"), Some("ghcr.io")));
        assert_eq!(credentials(&config, "quay.io").unwrap().identitytoken.as_deref(), Some("t"));
        assert!(credentials(&config, "bad.io").is_none());
        assert!(credentials(&config, "nvcr.io").is_none());
        assert_eq!(base64_decode("YQ").unwrap(), b"a");
    }
}
