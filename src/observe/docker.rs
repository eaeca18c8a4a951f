//! The Docker side of observe: the cluster's node containers by k3d's labels, read through
//! bollard. DOCKER_HOST is honoured; otherwise the current Docker context is resolved here
//! (bollard does not read contexts). Every call has a deadline.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::ListContainersOptions;

use super::{CALL_TIMEOUT, CLUSTER_SPEC_LABEL, NodeContainer, ObserveError, ObservedCluster};

/// Where the Docker engine is, and why we think so (for the error message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub source: String,
}

impl Endpoint {
    /// The host as messages show it: a `tcp://user:password@host` DOCKER_HOST's userinfo
    /// masked (crate::secrets), never printed in an error.
    pub fn shown(&self) -> String {
        crate::secrets::mask_arg(&self.host)
    }
}

/// The Docker CLI's config directory: `$DOCKER_CONFIG`, else `~/.docker`.
pub fn config_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("DOCKER_CONFIG")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".docker")))
}

/// The Docker CLI's `config.json` in `dir` (current context, registry logins), read as any
/// user file is: bounded and never blocking. Absent or unreadable is `None`.
pub fn cli_config(dir: &Path) -> Option<serde_json::Value> {
    let text = crate::input_file::read_text(&dir.join("config.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// DOCKER_HOST, else DOCKER_CONTEXT or the config's currentContext (its meta.json), else the
/// default socket.
pub fn endpoint(env: &dyn Fn(&str) -> Option<String>, docker_config_dir: Option<PathBuf>) -> Endpoint {
    if let Some(host) = env("DOCKER_HOST").filter(|h| !h.is_empty()) {
        return Endpoint { host, source: "DOCKER_HOST".into() };
    }
    let dir = docker_config_dir.or_else(|| config_dir(env));
    let context = env("DOCKER_CONTEXT").filter(|c| !c.is_empty()).or_else(|| {
        let config = cli_config(dir.as_ref()?)?;
        config["currentContext"].as_str().map(str::to_string)
    });
    if let (Some(context), Some(dir)) = (context.filter(|c| c != "default"), dir) {
        use sha2::{Digest, Sha256};
        let id: String = Sha256::digest(context.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        let meta = dir.join("contexts/meta").join(id).join("meta.json");
        if let Some(host) = crate::input_file::read_text(&meta)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|m| m["Endpoints"]["docker"]["Host"].as_str().map(str::to_string))
        {
            return Endpoint { host, source: format!("Docker context {context}") };
        }
    }
    Endpoint { host: "unix:///var/run/docker.sock".into(), source: "the default socket".into() }
}

/// A client for the engine, every answer capped while read
/// ([`super::docker_transport::MAX_ANSWER`]).
pub fn connect(endpoint: &Endpoint) -> Result<Docker, ObserveError> {
    connect_capped(endpoint, Some(super::docker_transport::MAX_ANSWER))
}

/// [`connect`] with another cap; `None` only for a stream that is meant to go on (`logs
/// --follow`).
pub fn connect_capped(endpoint: &Endpoint, cap: Option<u64>) -> Result<Docker, ObserveError> {
    super::docker_transport::connect(&endpoint.host, CALL_TIMEOUT.as_secs(), cap)
        .map_err(|e| ObserveError::DockerUnreachable { endpoint: endpoint.clone(), reason: e.to_string() })
}

async fn deadline<T, E: std::error::Error + 'static>(
    endpoint: &Endpoint,
    what: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, ObserveError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            let e = super::docker_transport::why(&e);
            Err(ObserveError::DockerUnreachable { endpoint: endpoint.clone(), reason: format!("{what}: {e}") })
        }
        Err(_) => Err(ObserveError::DockerUnreachable {
            endpoint: endpoint.clone(),
            reason: format!("{what}: no answer within {}s", CALL_TIMEOUT.as_secs()),
        }),
    }
}

/// The node image by reference: whether the engine has it, and its k3d-gpu labels. An image
/// the engine does not have is an answer (absent), not an error.
pub async fn observe_image(
    docker: &Docker,
    endpoint: &Endpoint,
    reference: &str,
) -> Result<super::ObservedImage, ObserveError> {
    let absent = super::ObservedImage { reference: reference.to_string(), ..Default::default() };
    let inspected = match tokio::time::timeout(CALL_TIMEOUT, docker.inspect_image(reference)).await {
        Ok(Ok(image)) => image,
        Ok(Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })) => return Ok(absent),
        Ok(Err(e)) => {
            return Err(ObserveError::DockerUnreachable {
                endpoint: endpoint.clone(),
                reason: format!("inspect image {reference}: {}", super::docker_transport::why(&e)),
            });
        }
        Err(_) => {
            return Err(ObserveError::DockerUnreachable {
                endpoint: endpoint.clone(),
                reason: format!("inspect image: no answer within {}s", CALL_TIMEOUT.as_secs()),
            });
        }
    };
    let labels = inspected.config.and_then(|c| c.labels).unwrap_or_default();
    Ok(super::ObservedImage {
        reference: reference.to_string(),
        present: true,
        id: inspected.id,
        build_inputs: labels.get(crate::node_image::INPUTS_LABEL).cloned(),
        k3s_version: labels.get(crate::node_image::K3S_VERSION_LABEL).cloned(),
    })
}

/// The cluster's node containers, or `None` when no container carries its labels.
pub async fn observe_cluster(
    docker: &Docker,
    endpoint: &Endpoint,
    name: &str,
    configured_image: &str,
) -> Result<Option<ObservedCluster>, ObserveError> {
    let filters: HashMap<String, Vec<String>> =
        HashMap::from([("label".to_string(), vec!["app=k3d".to_string(), format!("k3d.cluster={name}")])]);
    let options = ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
    let summaries = deadline(endpoint, "list containers", docker.list_containers(Some(options))).await?;
    if summaries.is_empty() {
        return Ok(None);
    }
    let mut nodes = Vec::new();
    let mut versions: BTreeMap<String, Option<String>> = BTreeMap::new();
    for summary in summaries {
        let Some(id) = summary.id else { continue };
        let c = deadline(endpoint, "inspect container", docker.inspect_container(&id, None)).await?;
        let config = c.config.unwrap_or_default();
        let host = c.host_config.unwrap_or_default();
        let labels = config.labels.unwrap_or_default();
        let image_id = c.image.unwrap_or_default();
        if !versions.contains_key(&image_id) {
            let version = match deadline(endpoint, "inspect image", docker.inspect_image(&image_id)).await {
                Ok(image) => {
                    image.config.and_then(|c| c.labels).and_then(|l| l.get("org.opencontainers.image.version").cloned())
                }
                Err(_) => None,
            };
            versions.insert(image_id.clone(), version);
        }
        let mut cmd = config.cmd.unwrap_or_default().into_iter();
        // k3d runs `server …` or `agent …`; the rest are k3s's arguments.
        let _role_word = cmd.next();
        let gpus = host.device_requests.unwrap_or_default().into_iter().find_map(|r| {
            let gpu = r.capabilities.unwrap_or_default().iter().any(|caps| caps.iter().any(|c| c == "gpu"));
            gpu.then(|| if r.count == Some(-1) { "all".to_string() } else { r.count.unwrap_or(0).to_string() })
        });
        nodes.push(NodeContainer {
            name: c.name.unwrap_or_default().trim_start_matches('/').to_string(),
            role: labels.get("k3d.role").cloned().unwrap_or_default(),
            image: config.image.unwrap_or_default(),
            image_version: versions.get(&image_id).cloned().flatten(),
            image_id,
            k3s_args: cmd.collect(),
            mounts: {
                let mut binds = host.binds.unwrap_or_default();
                binds.sort();
                binds
            },
            env: config
                .env
                .unwrap_or_default()
                .into_iter()
                .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                // The cluster token, a datastore URL's password and the like never reach a
                // document, not even the internal one.
                .map(|(k, v)| {
                    if crate::secrets::is_sensitive_name(&k) {
                        (k, crate::secrets::SENSITIVE.to_string())
                    } else {
                        let masked = crate::secrets::mask_arg(&v);
                        (k, masked)
                    }
                })
                .collect(),
            gpus,
            running: c.state.and_then(|s| s.running).unwrap_or(false),
            recorded_spec: labels.get(CLUSTER_SPEC_LABEL).and_then(|t| serde_json::from_str(t).ok()),
        });
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    // An image the engine does not have is no error: the plan then sees no re-pulled tag.
    let configured_image_id =
        deadline(endpoint, "inspect image", docker.inspect_image(configured_image)).await.ok().and_then(|i| i.id);
    Ok(Some(ObservedCluster { name: name.to_string(), nodes, configured_image_id }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn docker_host_wins_then_the_context_then_the_default() {
        assert_eq!(endpoint(&env(&[("DOCKER_HOST", "unix:///tmp/d.sock")]), None).host, "unix:///tmp/d.sock");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), r#"{"currentContext": "colima"}"#).unwrap();
        use sha2::{Digest, Sha256};
        let id: String = Sha256::digest(b"colima").iter().map(|b| format!("{b:02x}")).collect();
        let meta = dir.path().join("contexts/meta").join(id);
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(
            meta.join("meta.json"),
            r#"{"Name":"colima","Endpoints":{"docker":{"Host":"unix:///home/u/.colima/docker.sock"}}}"#,
        )
        .unwrap();
        let e = endpoint(&env(&[]), Some(dir.path().to_path_buf()));
        assert_eq!(e.host, "unix:///home/u/.colima/docker.sock");
        assert_eq!(e.source, "Docker context colima");
        let e = endpoint(&env(&[("DOCKER_CONTEXT", "default")]), Some(dir.path().to_path_buf()));
        assert_eq!(e.host, "unix:///var/run/docker.sock");
    }

    /// The Docker CLI's config is a user file like any other: a FIFO there must not hang
    /// `plan` (it used to be read with no type check and no cap).
    #[test]
    fn a_fifo_as_the_docker_config_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (done, waited) = std::sync::mpsc::channel();
        let config_dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = done.send(endpoint(&|_: &str| None, Some(config_dir)).host);
        });
        let host = waited.recv_timeout(std::time::Duration::from_secs(10)).expect("endpoint blocked on a FIFO");
        assert_eq!(host, "unix:///var/run/docker.sock");
        assert!(cli_config(dir.path()).is_none());
    }
}
