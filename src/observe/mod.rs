//! observed/v1: what exists now — the cluster's node containers (Docker) and its nodes and
//! managed objects (Kubernetes). The diff compares the desired graph against this document
//! only, so every later stage runs on a saved one (`plan --observed FILE`) or on nothing
//! (`plan --offline`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "k3d-gpu.observed/v1";

/// The container label where apply records the cluster's creation spec, so a later plan
/// knows exactly what the cluster was created with (k3d adds arguments of its own).
pub const CLUSTER_SPEC_LABEL: &str = "k3d-gpu.io/cluster-spec";

/// The node annotation listing the labels k3d-gpu set, so it deletes only its own.
pub const MANAGED_LABELS_ANNOTATION: &str = "k3d-gpu.io/managed-labels";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub schema: String,
    /// `None`: no cluster of that name exists.
    pub cluster: Option<ObservedCluster>,
    /// `None`: not reachable or not asked (offline); objects then count as absent.
    pub kubernetes: Option<ObservedKubernetes>,
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
    /// uses, as the API server returned it.
    pub objects: Vec<serde_json::Value>,
    /// ResourceSlices (DRA mode).
    pub resource_slices: Vec<serde_json::Value>,
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
        Observed { schema: SCHEMA.into(), cluster: None, kubernetes: None }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        crate::canonical::to_bytes(self)
    }

    /// The first server node, whose labels and containers stand for the cluster.
    pub fn server(&self) -> Option<&NodeContainer> {
        self.cluster.as_ref()?.nodes.iter().find(|n| n.role == "server")
    }
}
