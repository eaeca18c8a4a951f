//! observed/v1: what exists now — the cluster's node containers (Docker) and its nodes and
//! managed objects (Kubernetes). The diff compares the desired graph against this document
//! only, so every later stage runs on a saved one (`plan --observed FILE`) or on nothing
//! (`plan --offline`).

pub mod docker;
pub mod docker_transport;
pub mod existing;
pub mod kubernetes;
pub mod managed;
pub mod registry;
pub mod resources;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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

pub const SCHEMA: &str = "k3d-gpu.observed/v1";

/// How long one Docker or Kubernetes call may take before the engine or API server counts
/// as unreachable: a hung daemon must not hang `plan`.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The container label where apply records the cluster's creation spec, so a later plan
/// knows exactly what the cluster was created with (k3d adds arguments of its own).
pub const CLUSTER_SPEC_LABEL: &str = "k3d-gpu.io/cluster-spec";

/// The node annotation listing the labels k3d-gpu set, so it deletes only its own.
pub const MANAGED_LABELS_ANNOTATION: &str = "k3d-gpu.io/managed-labels";

/// The label keys a [`MANAGED_LABELS_ANNOTATION`] value lists (comma-separated), read the same
/// way by the plan that decides deletes and by apply that updates the list.
pub fn managed_labels(annotation: &str) -> std::collections::BTreeSet<String> {
    annotation.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_string).collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub schema: String,
    /// `None`: no cluster of that name exists.
    pub cluster: Option<ObservedCluster>,
    /// `None`: not reachable or not asked (offline); objects then count as absent.
    pub kubernetes: Option<ObservedKubernetes>,
    /// The node image the config names, in the local engine. `None`: not observed (offline,
    /// or a document from before k3d-gpu built its image), so the plan builds or pulls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_image: Option<ObservedImage>,
}

/// The node image in the local Docker engine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedImage {
    pub reference: String,
    /// Whether the engine has an image by that reference.
    pub present: bool,
    /// Its local id, when present.
    pub id: Option<String>,
    /// Its build-inputs digest label ([`crate::node_image::INPUTS_LABEL`]).
    pub build_inputs: Option<String>,
    /// Its k3s release label ([`crate::node_image::K3S_VERSION_LABEL`]).
    pub k3s_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedCluster {
    pub name: String,
    pub nodes: Vec<NodeContainer>,
    /// The local image id the configured node image reference names now (after a re-pull
    /// it can differ from what the nodes run).
    pub configured_image_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeContainer {
    pub name: String,
    /// `server`, `agent` or `loadbalancer` (k3d's `k3d.role` label).
    pub role: String,
    /// The image reference the container was created from.
    pub image: String,
    /// The local image id it runs.
    pub image_id: String,
    /// The image's `org.opencontainers.image.version` label; `None` = unversioned.
    pub image_version: Option<String>,
    /// Arguments after `server`/`agent`.
    pub k3s_args: Vec<String>,
    /// Bind mounts as `host:node[:ro]`.
    pub mounts: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// What `--gpus` became (`all`), from HostConfig.DeviceRequests.
    pub gpus: Option<String>,
    pub running: bool,
    /// The creation spec apply recorded ([`CLUSTER_SPEC_LABEL`]), if this node has one.
    pub recorded_spec: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObservedKubernetes {
    pub nodes: Vec<ObservedNode>,
    /// Every object labelled `app.kubernetes.io/managed-by: k3d-gpu`, of the kinds the catalog
    /// uses, as the API server returned it, with only the `metadata.managedFields` entries of
    /// field manager `k3d-gpu` kept ([`managed`]).
    pub objects: Vec<serde_json::Value>,
    /// ResourceSlices (DRA mode).
    pub resource_slices: Vec<serde_json::Value>,
    /// Pods that hold accelerator resources now, whoever made them: the agent is placed on
    /// what they leave free ([`ObservedKubernetes::held`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<HoldingPod>,
}

/// A pod that holds extended resources as the scheduler counts them: assigned to a node and
/// not finished. Only what placement reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldingPod {
    pub namespace: String,
    pub name: String,
    pub node: String,
    /// Extended resource → the quantity the pod holds (its effective request).
    pub resources: BTreeMap<String, String>,
}

impl ObservedKubernetes {
    /// What other workloads hold of each accelerator resource, per node. The agent's own
    /// namespace is the plan's to decide, so its pods never count.
    pub fn held(&self) -> crate::compile::held::Held {
        use crate::compile::held::{Held, PodUse, units};
        let pods: Vec<PodUse> = self
            .holders
            .iter()
            .map(|p| PodUse {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                node: p.node.clone(),
                units: p.resources.iter().filter_map(|(k, v)| Some((k.clone(), units(v)?))).collect(),
            })
            .collect();
        let nodes = self.nodes.iter().map(|n| (n.name.as_str(), &n.allocatable));
        Held::from_pods(nodes, &pods, crate::compile::workloads::NAMESPACE)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObservedNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub allocatable: BTreeMap<String, String>,
    pub ready: bool,
}

impl Observed {
    /// Nothing exists (`plan --offline`).
    pub fn nothing() -> Observed {
        Observed { schema: SCHEMA.into(), cluster: None, kubernetes: None, node_image: None }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        crate::canonical::to_bytes(self)
    }

    /// The document as printed: secrets in k3s args (also in the recorded spec), Secret data
    /// and sensitive env values of objects masked. The unmasked one stays internal, where the
    /// plan compares it.
    pub fn masked(&self) -> Observed {
        let Ok(mut document) = serde_json::to_value(self) else { return self.clone() };
        crate::secrets::mask_document(&mut document);
        // Masking only replaces strings with strings: the shape still reads back.
        serde_json::from_value(document).unwrap_or_else(|_| self.clone())
    }

    /// The first server node, whose labels and containers stand for the cluster.
    pub fn server(&self) -> Option<&NodeContainer> {
        self.cluster.as_ref()?.nodes.iter().find(|n| n.role == "server")
    }
}

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
