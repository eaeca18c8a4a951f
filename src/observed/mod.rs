//! observed/v1, the document: what exists now — the cluster's node containers (Docker) and
//! its nodes and managed objects (Kubernetes) — as values. `observe` fills it from the world;
//! `plan`, `report` and `node_image` read it here without reaching Docker or Kubernetes, so a
//! saved document (`plan --observed FILE`) and a live one go through the same code.

pub mod managed;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "k3d-gpu.observed/v1";

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
    /// what they leave free (`compile::held::Held::from_observed`).
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
