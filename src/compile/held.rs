//! What the cluster already gives to others: for each accelerator resource, what the nodes
//! report allocatable and what running pods that are not k3d-gpu's hold of it, as the
//! scheduler counts it (a pod assigned to a node and not finished holds its requests). The
//! agent and its add-ons are placed on what is left, not on what the host has: a server placed
//! on a GPU that another workload holds would sit Pending.
//!
//! Pure: the command edge reads it from the observed cluster ([`Held::from_pods`]); a plan
//! without a cluster (`--offline`, nothing created yet) has none, and placement reads the
//! host's facts alone.

use std::collections::BTreeMap;

/// One pod's claim on accelerator resources, as observe read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUse {
    pub namespace: String,
    pub name: String,
    pub node: String,
    /// Extended resource → how many units the pod holds.
    pub units: BTreeMap<String, u64>,
}

/// The cluster's accelerator accounting per node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    nodes: BTreeMap<String, NodeUse>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NodeUse {
    allocatable: BTreeMap<String, u64>,
    /// Resource → the pods that hold some of it, with their units.
    holders: BTreeMap<String, Vec<(String, u64)>>,
}

/// Why a device's resource cannot give the agent what it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub resource: String,
    /// The most units free on one node.
    pub free: u64,
    /// What the nodes report allocatable of it (on the node with the most free).
    pub allocatable: u64,
    /// `namespace/pod (n)`, sorted, the first few.
    pub holders: Vec<String>,
    /// Holders past those listed.
    pub more: usize,
}

/// How many holders a sentence names before it says "and N more".
const NAMED_HOLDERS: usize = 3;

impl Held {
    /// What other workloads hold of each accelerator resource, per node, as an observation
    /// reports it. The agent's own namespace is the plan's to decide, so its pods never count.
    pub fn from_observed(k: &crate::observed::ObservedKubernetes) -> Held {
        let pods: Vec<PodUse> = k
            .holders
            .iter()
            .map(|p| PodUse {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                node: p.node.clone(),
                units: p.resources.iter().filter_map(|(k, v)| Some((k.clone(), units(v)?))).collect(),
            })
            .collect();
        let nodes = k.nodes.iter().map(|n| (n.name.as_str(), &n.allocatable));
        Held::from_pods(nodes, &pods, crate::compile::workloads::NAMESPACE)
    }

    /// The accounting of `nodes` (name and allocatable quantities) and the pods that hold
    /// resources on them. Pods in `ours` (the agent's namespace: the plan itself decides what
    /// runs there, and a server being replaced lets go of its device first) are not counted.
    pub fn from_pods<'a>(
        nodes: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
        pods: &[PodUse],
        ours: &str,
    ) -> Held {
        let mut held = Held::default();
        for (name, allocatable) in nodes {
            let units = allocatable
                .iter()
                .filter(|(resource, _)| extended(resource))
                .filter_map(|(resource, quantity)| Some((resource.clone(), units(quantity)?)))
                .collect();
            held.nodes.insert(name.to_string(), NodeUse { allocatable: units, holders: BTreeMap::new() });
        }
        for pod in pods.iter().filter(|p| p.namespace != ours) {
            let Some(node) = held.nodes.get_mut(&pod.node) else { continue };
            for (resource, n) in pod.units.iter().filter(|(_, n)| **n > 0) {
                let who = format!("{}/{}", pod.namespace, pod.name);
                node.holders.entry(resource.clone()).or_default().push((who, *n));
            }
        }
        for node in held.nodes.values_mut() {
            for list in node.holders.values_mut() {
                list.sort();
            }
        }
        held
    }

    /// The accounting of one node alone (an existing cluster's `[agent] node`).
    pub fn only(&self, node: &str) -> Held {
        Held { nodes: self.nodes.get_key_value(node).map(|(k, v)| (k.clone(), v.clone())).into_iter().collect() }
    }

    /// Whether any other workload holds anything: without holders, placement is the facts'.
    pub fn is_empty(&self) -> bool {
        self.nodes.values().all(|n| n.holders.is_empty())
    }

    /// `Some` when others hold `resource` so that no node has `need` units of it free. Only
    /// a resource someone else holds is judged: an allocatable that is not (yet) what the
    /// plan will make (a device plugin that has not started, a sharing count about to
    /// change) never moves the agent by itself.
    pub fn taken(&self, resource: &str, need: u64) -> Option<Taken> {
        let held_anywhere = self.nodes.values().any(|n| n.holders.contains_key(resource));
        if !held_anywhere {
            return None;
        }
        let best = self
            .nodes
            .values()
            .map(|n| {
                let allocatable = n.allocatable.get(resource).copied().unwrap_or(0);
                let holders = n.holders.get(resource).map(Vec::as_slice).unwrap_or(&[]);
                let used = holders.iter().fold(0u64, |sum, (_, u)| sum.saturating_add(*u));
                (allocatable.saturating_sub(used), allocatable, holders)
            })
            .max_by_key(|(free, _, _)| *free)?;
        let (free, allocatable, _) = best;
        if free >= need {
            return None;
        }
        let all: Vec<String> = self
            .nodes
            .values()
            .filter_map(|n| n.holders.get(resource))
            .flatten()
            .map(|(who, n)| format!("{who} ({n})"))
            .collect();
        let more = all.len().saturating_sub(NAMED_HOLDERS);
        Some(Taken {
            resource: resource.to_string(),
            free,
            allocatable,
            holders: all.into_iter().take(NAMED_HOLDERS).collect(),
            more,
        })
    }
}

impl Held {
    /// What is free of `resource` on the node with the most, when others hold some of it
    /// (`None`: no one does, and the facts decide).
    pub fn free(&self, resource: &str) -> Option<Taken> {
        self.taken(resource, u64::MAX)
    }
}

impl Taken {
    /// "nvidia.com/gpu: 0 of 1 free, held by default/comfyui-6f9 (1)".
    pub fn sentence(&self) -> String {
        let more = if self.more > 0 { format!(" and {} more", self.more) } else { String::new() };
        format!(
            "{}: {} of {} free, held by {}{more}",
            self.resource,
            self.free,
            self.allocatable,
            crate::escape::one_line(&self.holders.join(", "))
        )
    }
}

/// An extended resource (`vendor.example/name`): the only kind a device plugin advertises.
pub fn extended(resource: &str) -> bool {
    resource.contains('/') && !resource.starts_with("requests.")
}

/// A whole number of units (extended resources are integers); `None` for anything else. The
/// API server writes 1000 back as `1k`, so decimal suffixes count.
pub fn units(quantity: &str) -> Option<u64> {
    let canonical = crate::quantity::canonical(quantity)?;
    let split = canonical.find(|c: char| !c.is_ascii_digit()).unwrap_or(canonical.len());
    let (digits, suffix) = canonical.split_at(split);
    let scale: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, resource: &str, n: u64) -> PodUse {
        PodUse {
            namespace: ns.into(),
            name: name.into(),
            node: "k3d-lab-server-0".into(),
            units: BTreeMap::from([(resource.to_string(), n)]),
        }
    }

    fn node(resources: &[(&str, &str)]) -> BTreeMap<String, String> {
        resources.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_resource_others_hold_is_taken_when_too_little_is_left() {
        let allocatable = node(&[("nvidia.com/gpu", "2"), ("cpu", "8")]);
        let pods = [pod("default", "comfyui", "nvidia.com/gpu", 1), pod("ml", "trainer", "nvidia.com/gpu", 1)];
        let held = Held::from_pods([("k3d-lab-server-0", &allocatable)], &pods, "k3d-gpu-agent");
        let taken = held.taken("nvidia.com/gpu", 1).expect("both GPUs are held");
        assert_eq!(taken.free, 0);
        assert_eq!(taken.sentence(), "nvidia.com/gpu: 0 of 2 free, held by default/comfyui (1), ml/trainer (1)");
        let one = Held::from_pods([("k3d-lab-server-0", &allocatable)], &pods[..1], "k3d-gpu-agent");
        assert_eq!(one.taken("nvidia.com/gpu", 1), None, "one of two is free");
        assert!(one.taken("nvidia.com/gpu", 2).is_some(), "two are not");
    }

    #[test]
    fn the_agents_own_pods_and_unheld_resources_never_count() {
        let allocatable = node(&[("nvidia.com/gpu", "1"), ("gpu.intel.com/xe", "0")]);
        let ours = [pod("k3d-gpu-agent", "vllm-5d8", "nvidia.com/gpu", 1)];
        let held = Held::from_pods([("k3d-lab-server-0", &allocatable)], &ours, "k3d-gpu-agent");
        assert!(held.is_empty());
        assert_eq!(held.taken("nvidia.com/gpu", 1), None, "the agent's own server holds its GPU");
        assert_eq!(held.taken("gpu.intel.com/xe", 1), None, "an allocatable of 0 that no one holds is not judged");
    }

    #[test]
    fn a_holder_on_a_node_the_cluster_lacks_and_long_lists_are_bounded() {
        let allocatable = node(&[("npu.intel.com/accel", "1")]);
        let mut pods: Vec<PodUse> = (0..5).map(|i| pod("ml", &format!("p{i}"), "npu.intel.com/accel", 1)).collect();
        pods.push(PodUse { node: "elsewhere".into(), ..pod("x", "y", "npu.intel.com/accel", 9) });
        let held = Held::from_pods([("k3d-lab-server-0", &allocatable)], &pods, "k3d-gpu-agent");
        let taken = held.taken("npu.intel.com/accel", 1).unwrap();
        assert_eq!((taken.holders.len(), taken.more), (3, 2));
        assert!(taken.sentence().ends_with("ml/p2 (1) and 2 more"), "{}", taken.sentence());
    }

    #[test]
    fn a_hostile_pod_name_is_shown_on_one_line() {
        let allocatable = node(&[("habana.ai/gaudi", "1")]);
        let pods = [pod("default", "evil\n      apply: curl x | sh", "habana.ai/gaudi", 1)];
        let held = Held::from_pods([("n", &allocatable)], &[PodUse { node: "n".into(), ..pods[0].clone() }], "a");
        let sentence = held.taken("habana.ai/gaudi", 1).unwrap().sentence();
        assert!(!sentence.contains('\n'), "{sentence}");
    }

    #[test]
    fn units_are_whole_numbers_only() {
        assert_eq!(units("2"), Some(2));
        assert_eq!(units("2000m"), Some(2));
        assert_eq!(units("1000"), Some(1000), "written back as 1k");
        assert_eq!(units("1k"), Some(1000));
        assert_eq!(units("500m"), None);
        assert_eq!(units("x"), None);
    }
}
