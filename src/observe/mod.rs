//! observed/v1: what exists now — the cluster's node containers (Docker) and its nodes and
//! managed objects (Kubernetes). The diff compares the desired graph against this document
//! only, so every later stage runs on a saved one (`plan --observed FILE`) or on nothing
//! (`plan --offline`).

pub mod docker;
pub mod docker_transport;
pub mod existing;
pub mod kubernetes;
pub mod registry;
pub mod resources;

use std::path::PathBuf;

// The document's types live in `observed`, with the pure core that reads them; this module
// is what fills them from Docker and Kubernetes.
pub use crate::observed::{
    CLUSTER_SPEC_LABEL, HoldingPod, MANAGED_LABELS_ANNOTATION, NodeContainer, Observed, ObservedCluster, ObservedImage,
    ObservedKubernetes, ObservedNode, SCHEMA, managed, managed_labels,
};

/// Why the world could not be observed. Each names what to check.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    // The reason may quote the URL (a connector's error): its passwords are blanked too.
    #[error("cannot reach Docker at {} ({}): {}", endpoint.shown(), endpoint.source, crate::secrets::blank_passwords(reason))]
    DockerUnreachable { endpoint: docker::Endpoint, reason: String },
    #[error("cannot reach the Kubernetes API through context {context}: {reason}")]
    KubernetesUnreachable { context: String, reason: String },
}

impl ObserveError {
    pub fn help(&self) -> String {
        match self {
            ObserveError::DockerUnreachable { .. } => {
                "check that dockerd runs and that DOCKER_HOST / the Docker context point at it".into()
            }
            ObserveError::KubernetesUnreachable { context, .. } => {
                // The context comes from the config (an existing cluster's may start with
                // `k3d-` too): one shell word in each command people paste.
                let look = crate::shell::kubectl(context).lit("get nodes");
                let list = crate::shell::Command::new("kubectl").lit("config get-contexts");
                let k3d = context.strip_prefix("k3d-").filter(|c| crate::config::cluster_name(c));
                match k3d {
                    None => format!(
                        "check that your kubeconfig has context {} (`{list}`) and that its API server answers (`{look}`)",
                        crate::shell::word(context)
                    ),
                    Some(cluster) => format!(
                        "check that the cluster's nodes run (`docker ps`) and that your kubeconfig has context {} \
                         (`{}` adds it)",
                        crate::shell::word(context),
                        crate::shell::Command::new("k3d")
                            .lit("kubeconfig merge")
                            .arg(cluster)
                            .lit("--kubeconfig-merge-default")
                    ),
                }
            }
        }
    }
}

/// Where to look: the Docker endpoint, the kubeconfig, the cluster and its node image, and
/// the kinds of objects the catalog can create.
pub struct Target {
    pub docker: docker::Endpoint,
    pub kubeconfig: PathBuf,
    pub cluster: String,
    pub image: String,
    pub kinds: crate::compile::ObjectKinds,
}

/// Observes Docker, then (when the cluster exists) Kubernetes.
pub async fn observe(target: &Target) -> Result<Observed, ObserveError> {
    let (cluster, node_image) = observe_docker(target).await?;
    let kubernetes = observe_kubernetes(target, cluster.as_ref()).await?;
    Ok(Observed { schema: SCHEMA.into(), cluster, kubernetes, node_image: Some(node_image) })
}

/// The Docker side: the config's node image and the cluster's node containers.
pub async fn observe_docker(target: &Target) -> Result<(Option<ObservedCluster>, ObservedImage), ObserveError> {
    let engine = docker::connect(&target.docker)?;
    let node_image = docker::observe_image(&engine, &target.docker, &target.image).await?;
    let cluster = docker::observe_cluster(&engine, &target.docker, &target.cluster, &target.image).await?;
    Ok((cluster, node_image))
}

/// The Kubernetes side of a cluster Docker showed: `None` when there is no cluster or no
/// running server to answer. Separate, so `observe` can still show the Docker side when this
/// half fails.
pub async fn observe_kubernetes(
    target: &Target,
    cluster: Option<&ObservedCluster>,
) -> Result<Option<ObservedKubernetes>, ObserveError> {
    match cluster {
        None => Ok(None),
        // Stopped nodes serve no API; the plan starts them and re-applies (idempotently).
        Some(c) if !c.nodes.iter().any(|n| n.running && n.role == "server") => Ok(None),
        Some(_) => {
            let client = kubernetes::client(&target.kubeconfig, &target.cluster).await?;
            Ok(Some(kubernetes::observe(client, &target.cluster, &target.kinds).await?))
        }
    }
}

/// The cluster's node containers, from Docker alone (all `destroy` needs).
pub async fn observe_containers(
    endpoint: &docker::Endpoint,
    cluster: &str,
    image: &str,
) -> Result<Option<ObservedCluster>, ObserveError> {
    let engine = docker::connect(endpoint)?;
    docker::observe_cluster(&engine, endpoint, cluster, image).await
}

/// Why k3d cluster `name` does not exist, or `None` when it may (then the caller's own error
/// stands). k3d writes the context `k3d-NAME` into the kubeconfig when it creates a cluster and
/// removes it when it deletes one, so a kubeconfig without it is the first sign; Docker, when
/// it answers, settles it: node containers of the cluster mean it exists and only the context
/// is missing (the kubeconfig is to blame), none mean it does not.
pub async fn k3d_cluster_missing(
    endpoint: &docker::Endpoint,
    kubeconfig: &std::path::Path,
    name: &str,
) -> Option<String> {
    let context = kubernetes::context_name(name);
    if kubernetes::has_context(kubeconfig, &context)? {
        return None;
    }
    let containers = match docker::connect(endpoint) {
        Ok(engine) => docker::observe_cluster(&engine, endpoint, name, "").await.ok(),
        Err(_) => None,
    };
    match containers {
        Some(Some(_)) => None,
        Some(None) => Some(format!(
            "Docker at {} runs no node of it, and {} has no context {context}",
            endpoint.shown(),
            kubeconfig.display()
        )),
        None => Some(format!(
            "{} has no context {context}, which k3d writes when it creates the cluster",
            kubeconfig.display()
        )),
    }
}

/// How long one Docker or Kubernetes call may take before the engine or API server counts
/// as unreachable: a hung daemon must not hang `plan`.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_printed_document_masks_secrets_in_objects() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="}});
        let ui = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ui"},
            "spec": {"template": {"spec": {"containers": [{"name": "ui", "env": [
                {"name": "WEBUI_SECRET_KEY", "value": "hunter2"}, {"name": "PORT", "value": "8080"}]}]}}}});
        let observed = Observed {
            schema: SCHEMA.into(),
            cluster: None,
            kubernetes: Some(ObservedKubernetes { objects: vec![secret, ui], ..Default::default() }),
            node_image: None,
        };
        let printed = String::from_utf8(observed.masked().to_bytes()).unwrap();
        assert!(!printed.contains("aHVudGVyMg==") && !printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("8080"), "only secrets are masked");
        assert!(!printed.contains("sensitive, changed"), "a single document has nothing to compare");
        assert!(String::from_utf8(observed.to_bytes()).unwrap().contains("hunter2"), "the internal copy stays whole");
    }
}
