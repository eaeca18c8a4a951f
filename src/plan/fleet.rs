//! Planning an existing cluster's nodes (`[cluster] provider = "existing"`): node labels and
//! annotations compared node by node, deletes of only the labels k3d-gpu recorded on each node
//! (its managed-labels annotation), and the nodes the config and the cluster disagree on.
//! Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{Action, ActionKind, reason};
use crate::compile::{DesiredGraph, ResourceKind, Warning};
use crate::observed::{MANAGED_LABELS_ANNOTATION, Observed, ObservedNode};

/// The prefix of the node annotations k3d-gpu sets (`k3d-gpu.io/favored-cpus`, …).
const ANNOTATION_PREFIX: &str = "k3d-gpu.io/";

/// How many unlisted nodes a warning names before it only counts them.
const MAX_NAMED: usize = 20;

/// Whether a graph is an existing cluster's: no k3d cluster and no node image in it.
pub fn is_fleet(graph: &DesiredGraph) -> bool {
    !graph.resources().any(|r| matches!(r.kind, ResourceKind::Cluster | ResourceKind::NodeImage))
}

/// Config nodes the cluster does not have (sorted). Empty when nothing was observed
/// (`--offline`): then nothing is known to be missing.
pub fn missing_nodes(config_nodes: &[String], observed: &Observed) -> Vec<String> {
    let Some(k) = &observed.kubernetes else { return Vec::new() };
    let have: BTreeSet<&str> = k.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut missing: Vec<String> = config_nodes.iter().filter(|n| !have.contains(n.as_str())).cloned().collect();
    missing.sort();
    missing
}

/// A note for each cluster node the config does not list: k3d-gpu places nothing there (its
/// components select nodes by label), and says so rather than staying silent.
pub fn unlisted_nodes(config_nodes: &[String], observed: &Observed) -> Vec<Warning> {
    let listed: BTreeSet<&str> = config_nodes.iter().map(String::as_str).collect();
    let others: Vec<&str> = observed
        .kubernetes
        .iter()
        .flat_map(|k| &k.nodes)
        .map(|n| n.name.as_str())
        .filter(|n| !listed.contains(n))
        .collect();
    if others.is_empty() {
        return Vec::new();
    }
    // A cluster may have thousands of nodes: the first few are named, the rest counted.
    let named: Vec<&str> = others.iter().take(MAX_NAMED).copied().collect();
    let more = others.len() - named.len();
    vec![Warning {
        code: "node-not-in-config".into(),
        text: format!(
            "{} cluster node(s) not in [[nodes]] get nothing from k3d-gpu (no labels, no plugins): {}{}",
            others.len(),
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ),
        key: Some("nodes".into()),
    }]
}

/// Node labels and annotations, per node. A label is created where the node lacks it (and
/// recorded as ours), updated where its value differs, and deleted only where the node's
/// managed-labels annotation says k3d-gpu set it and the config no longer wants it there —
/// which is also how a node dropped from the config loses our labels and keeps everyone else's.
pub fn node_actions(
    graph: &DesiredGraph,
    observed: &Observed,
    owner: Option<&str>,
    actions: &mut BTreeMap<String, Action>,
    warnings: &mut Vec<Warning>,
) {
    let mut nodes: BTreeMap<&str, &ObservedNode> =
        observed.kubernetes.iter().flat_map(|k| &k.nodes).map(|n| (n.name.as_str(), n)).collect();
    // A node another config stamped is that config's: nothing is set or removed on it here.
    let mut others = BTreeSet::new();
    if let Some(owner) = owner {
        nodes.retain(|name, node| {
            let stamp = node.annotations.get(crate::compile::fleet::CONFIG_LABEL).map(String::as_str);
            let Some(warning) = other_config(&format!("node {name}"), stamp, owner, Some("nodes")) else { return true };
            warnings.push(warning);
            others.insert(name.to_string());
            false
        });
    }
    let mut desired: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut desired_annotations: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in graph.resources().filter(|r| matches!(r.kind, ResourceKind::NodeLabel | ResourceKind::NodeAnnotation)) {
        let label = r.kind == ResourceKind::NodeLabel;
        let node = r.spec["node"].as_str().unwrap_or_default();
        if others.contains(node) {
            continue;
        }
        let key = r.spec["key"].as_str().unwrap_or_default();
        let value = r.spec["value"].as_str().unwrap_or_default();
        if label {
            desired.entry(node).or_default().insert(key);
        } else {
            desired_annotations.entry(node).or_default().insert(key);
        }
        let current = nodes.get(node).and_then(|n| if label { n.labels.get(key) } else { n.annotations.get(key) });
        let action = match current {
            None => Some((ActionKind::Create, reason("absent", format!("{key} is not set on {node}")), None)),
            Some(other) if other != value => Some((
                ActionKind::Update,
                reason("value-differs", format!("{key} on {node} is {other:?}, wanted {value:?}")),
                Some(json!({ "node": node, "key": key, "value": other })),
            )),
            Some(_) => None,
        };
        if let Some((kind, why, before)) = action {
            actions.insert(r.id.clone(), Action::new(r.id.clone(), kind, why, before, Some(r.spec.clone())));
        }
    }
    for (name, node) in &nodes {
        // Annotations under k3d-gpu's own prefix are ours by their name (a stale CPU list for
        // the balloons policy must not outlive the hardware or the config that wanted it).
        let wanted_annotations = desired_annotations.get(name);
        for (key, value) in &node.annotations {
            let ours = key.starts_with(ANNOTATION_PREFIX) && key != MANAGED_LABELS_ANNOTATION;
            if !ours || wanted_annotations.is_some_and(|w| w.contains(key.as_str())) {
                continue;
            }
            let id = crate::compile::fleet::node_metadata_id("node-annotation", name, key);
            let why = format!("k3d-gpu set annotation {key} on {name}, and the config no longer asks for it");
            actions.insert(
                id.clone(),
                Action::new(
                    id,
                    ActionKind::Delete,
                    reason("no-longer-wanted", why),
                    Some(json!({ "node": name, "key": key, "value": value })),
                    None,
                ),
            );
        }
        let wanted = desired.get(name);
        // What the record lists, and every key under k3d-gpu's own component prefix: that
        // label selects our plugins, so a node that no longer wants one loses it even when the
        // record was edited away (a restore, `kubectl annotate … managed-labels-`).
        let recorded = node.annotations.get(MANAGED_LABELS_ANNOTATION).map(|l| crate::observed::managed_labels(l));
        let component_keys = node.labels.keys().filter(|k| k.starts_with(crate::compile::fleet::COMPONENT_NODE_LABEL));
        let keys: BTreeSet<String> = recorded.into_iter().flatten().chain(component_keys.cloned()).collect();
        for key in keys {
            if wanted.is_some_and(|w| w.contains(key.as_str())) {
                continue;
            }
            // The record is an annotation anyone who may patch nodes can edit: it never makes
            // k3d-gpu delete what Kubernetes or k3s itself sets on a node.
            if is_system_label(&key) {
                continue;
            }
            let Some(value) = node.labels.get(&key) else { continue };
            let id = crate::compile::fleet::node_metadata_id("node-label", name, &key);
            let why = if wanted.is_none() {
                format!("k3d-gpu set {key} on {name}, which is no longer in [[nodes]]")
            } else {
                format!("k3d-gpu set {key} on {name}, and the config no longer asks for it")
            };
            actions.insert(
                id.clone(),
                Action::new(
                    id,
                    ActionKind::Delete,
                    reason("no-longer-wanted", why),
                    Some(json!({ "node": name, "key": key, "value": value })),
                    None,
                ),
            );
        }
    }
}

/// When `stamp` (what a live object or node says made it) is another config's: the warning
/// that it is left alone. An unstamped one is this config's to manage.
pub fn other_config(subject: &str, stamp: Option<&str>, owner: &str, key: Option<&str>) -> Option<Warning> {
    let other = stamp.filter(|s| *s != owner)?;
    Some(Warning {
        code: "other-config".into(),
        text: format!(
            "{subject} belongs to config {} ({}), not this one ({owner}): left alone. Give each config its own \
             [cluster] name",
            crate::escape::quoted(other),
            crate::compile::fleet::CONFIG_LABEL
        ),
        key: key.map(String::from),
    })
}

/// A label Kubernetes, the kubelet or k3s set on nodes (`kubernetes.io/hostname`,
/// `node-role.kubernetes.io/…`, `node.k3s.io/…`): never one k3d-gpu deletes, whatever a node's
/// record says. NFD's `feature.node.kubernetes.io` labels are not among them.
pub fn is_system_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else { return false };
    let system = ["kubernetes.io", "k8s.io", "k3s.io"];
    let ours = ["feature.node.kubernetes.io"];
    !ours.iter().any(|o| prefix == *o || prefix.ends_with(&format!(".{o}")))
        && system.iter().any(|s| prefix == *s || prefix.ends_with(&format!(".{s}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{ObservedKubernetes, ObservedNode};

    fn cluster(names: &[String]) -> Observed {
        let nodes = names.iter().map(|n| ObservedNode { name: n.clone(), ..ObservedNode::default() }).collect();
        Observed { kubernetes: Some(ObservedKubernetes { nodes, ..Default::default() }), ..Observed::nothing() }
    }

    #[test]
    fn unlisted_nodes_are_named_up_to_a_limit() {
        let names: Vec<String> = (0..1000).map(|i| format!("n{i:04}")).collect();
        let w = unlisted_nodes(&names[..1], &cluster(&names));
        assert!(w[0].text.starts_with("999 cluster node(s)"), "{}", w[0].text);
        assert!(w[0].text.ends_with("and 979 more") && w[0].text.len() < 400, "{}", w[0].text);
        assert!(unlisted_nodes(&names, &cluster(&names)).is_empty());
    }

    #[test]
    fn system_labels_are_never_ours() {
        for key in [
            "kubernetes.io/hostname",
            "node-role.kubernetes.io/control-plane",
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "beta.kubernetes.io/arch",
            "node.k3s.io/instance-type",
            "k3s.io/hostname",
        ] {
            assert!(is_system_label(key), "{key}");
        }
        for key in [
            "feature.node.kubernetes.io/cpu-cpuid.AMX",
            "intel.feature.node.kubernetes.io/gpu",
            "component.k3d-gpu.io/intel-gpu-plugin",
            "gpu.intel.com/xmx",
            "k3d-gpu.io/cores",
            "team",
        ] {
            assert!(!is_system_label(key), "{key}");
        }
    }

    #[test]
    fn an_edited_record_deletes_no_system_label_and_our_component_labels_go_anyway() {
        let node = ObservedNode {
            name: "edge-01".into(),
            labels: [
                ("kubernetes.io/hostname", "edge-01"),
                ("node-role.kubernetes.io/control-plane", "true"),
                ("component.k3d-gpu.io/intel-gpu-plugin", "true"),
                ("team", "ml"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            annotations: [(
                MANAGED_LABELS_ANNOTATION.to_string(),
                "kubernetes.io/hostname,node-role.kubernetes.io/control-plane".to_string(),
            )]
            .into_iter()
            .collect(),
            ..ObservedNode::default()
        };
        let observed = Observed {
            kubernetes: Some(ObservedKubernetes { nodes: vec![node], ..Default::default() }),
            ..Observed::nothing()
        };
        let graph = DesiredGraph::build(Vec::new(), Vec::new(), None).unwrap();
        let mut actions = BTreeMap::new();
        node_actions(&graph, &observed, None, &mut actions, &mut Vec::new());
        let deleted: Vec<&str> = actions.keys().map(String::as_str).collect();
        assert_eq!(deleted, ["node-label/edge-01/component.k3d-gpu.io/intel-gpu-plugin"]);
    }

    #[test]
    fn a_namespace_or_crd_of_ours_is_kept_on_a_cluster_we_did_not_create() {
        let managed = |kind: &str, api: &str, ns: Option<&str>, name: &str| {
            let mut o = json!({
                "apiVersion": api, "kind": kind,
                "metadata": { "name": name, "labels": { crate::compile::MANAGED_BY.0: crate::compile::MANAGED_BY.1 } },
            });
            if let Some(ns) = ns {
                o["metadata"]["namespace"] = json!(ns);
            }
            o
        };
        let objects = vec![
            managed("Namespace", "v1", None, "ml"),
            managed("CustomResourceDefinition", "apiextensions.k8s.io/v1", None, "nodefeaturerules.nfd.k8s-sigs.io"),
            managed("DaemonSet", "apps/v1", Some("kube-system"), "intel-gpu-plugin"),
        ];
        let observed =
            Observed { kubernetes: Some(ObservedKubernetes { objects, ..Default::default() }), ..Observed::nothing() };
        let nothing = DesiredGraph::build(Vec::new(), Vec::new(), None).unwrap();
        let plan =
            crate::plan::plan(&nothing, &observed, crate::plan::Inputs::for_destroy(&Default::default(), &observed));
        let deleted: Vec<&str> = plan.actions.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(deleted.len(), 1, "{deleted:?}");
        assert!(deleted[0].contains("DaemonSet"), "{deleted:?}");
        let kept: Vec<&str> =
            plan.warnings.iter().filter(|w| w.code == "cascade-kept").map(|w| w.text.as_str()).collect();
        assert_eq!(kept.len(), 2, "{:?}", plan.warnings);
    }

    #[test]
    fn our_annotations_go_when_no_longer_wanted_and_others_stay() {
        let node = ObservedNode {
            name: "arc-01".into(),
            annotations: [
                ("k3d-gpu.io/favored-cpus", "0-7"),
                ("node.alpha.kubernetes.io/ttl", "0"),
                (MANAGED_LABELS_ANNOTATION, "gpu.intel.com/xmx"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..ObservedNode::default()
        };
        let observed = Observed {
            kubernetes: Some(ObservedKubernetes { nodes: vec![node], ..Default::default() }),
            ..Observed::nothing()
        };
        let graph = DesiredGraph::build(Vec::new(), Vec::new(), None).unwrap();
        let mut actions = BTreeMap::new();
        node_actions(&graph, &observed, None, &mut actions, &mut Vec::new());
        let ids: Vec<&str> = actions.keys().map(String::as_str).collect();
        assert_eq!(ids, ["node-annotation/arc-01/k3d-gpu.io/favored-cpus"]);
    }

    #[test]
    fn missing_nodes_only_when_the_cluster_was_seen() {
        let config = vec!["a".to_string(), "b".to_string()];
        assert_eq!(missing_nodes(&config, &cluster(&["a".into()])), ["b"]);
        assert!(missing_nodes(&config, &Observed::nothing()).is_empty(), "offline: nothing is known missing");
    }
}
