//! The cluster's health as an agent asks for it (the MCP tool `cluster_health`): each node,
//! whether it is Ready, its taints, and the accelerators it advertises; and the verdicts of
//! `k3d-gpu test`'s counts (a node that advertises fewer devices than its facts hold, a device
//! the facts hold that no node advertises), judged by `smoke::count_problems`. It only reads:
//! the smoke pods, which create objects, are `k3d-gpu test`'s alone.
//!
//! k3d: one host's facts against every node. An existing cluster (`[[nodes]]`): each listed
//! node against its own facts, and a listed node the cluster lacks is a problem.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::Global;
use crate::error::Result;
use crate::facts::Facts;

/// One node as the API server reports it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NodeHealth {
    pub name: String,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// Why not, from the condition (its reason and message), when it is not.
    pub not_ready: Option<String>,
    /// `kubectl taint`'s form: `key[=value]:effect`.
    pub taints: Vec<String>,
    /// The accelerator resources it advertises (those `k3d-gpu test` knows), by name.
    pub accelerators: BTreeMap<String, String>,
}

/// A count that does not hold, with its fix.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CountProblem {
    pub resource: String,
    pub problem: String,
    pub fix: String,
}

/// The MCP tool `cluster_health`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Health {
    /// The kubeconfig context read.
    pub context: String,
    /// Every node Ready and no count problem.
    pub healthy: bool,
    pub nodes: Vec<NodeHealth>,
    /// `k3d-gpu test`'s counts against the facts; empty when they hold.
    pub problems: Vec<CountProblem>,
    /// What this does not judge: the smoke pods.
    pub note: String,
}

/// What the nodes list says of one node: ready, why not, its taints, and its allocatable
/// keyed by the node's name as the API server gave it (the escaped form is only for showing).
fn node_health(node: &Node) -> (NodeHealth, (String, BTreeMap<String, String>)) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = node.status.clone().unwrap_or_default();
    let ready = status.conditions.iter().flatten().find(|c| c.type_ == "Ready");
    let is_ready = ready.is_some_and(|c| c.status == "True");
    let not_ready = (!is_ready).then(|| match ready {
        None => "no Ready condition reported".to_string(),
        // A kubelet's message may be long: one escaped line, capped.
        Some(c) => crate::escape::capped(
            crate::escape::one_line(&format!(
                "Ready is {}: {} {}",
                c.status,
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default()
            ))
            .trim()
            .to_string(),
        ),
    });
    let taints = node
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .map(|t| {
            let value = t.value.as_deref().filter(|v| !v.is_empty()).map(|v| format!("={v}")).unwrap_or_default();
            crate::escape::one_line(&format!("{}{value}:{}", t.key, t.effect)).into_owned()
        })
        .collect();
    let allocatable: BTreeMap<String, String> =
        status.allocatable.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
    let accelerators = allocatable
        .iter()
        .filter(|(k, _)| crate::smoke::kind_of(k).is_some())
        .map(|(k, v)| (k.clone(), crate::escape::one_line(v).into_owned()))
        .collect();
    (
        NodeHealth {
            name: crate::escape::one_line(&name).into_owned(),
            ready: is_ready,
            not_ready,
            taints,
            accelerators,
        },
        (name, allocatable),
    )
}

/// The cluster's health, read through the config's context.
pub fn health(global: &Global) -> Result<Health> {
    let inputs = super::load_config(global)?;
    let fleet = super::fleet::is_fleet(&inputs);
    // Judged as `k3d-gpu test` judges: the compiled config says which resources DRA serves
    // (no device plugin advertises them) and, for a fleet, each node's own facts.
    let (catalog, facts, dra_classes) = match super::inputs::compile(global, &inputs) {
        Ok(compiled) => {
            let classes = super::test::device_classes(&compiled.graph);
            let facts: Vec<(Option<String>, std::rc::Rc<Facts>)> = if fleet {
                compiled.fleet.into_iter().map(|(n, f)| (Some(n), f)).collect()
            } else {
                vec![(None, std::rc::Rc::new(compiled.facts))]
            };
            (compiled.catalog, facts, classes)
        }
        Err(e) if fleet => return Err(e),
        // A config that does not compile for this host: the host's facts, nothing DRA-served.
        Err(_) => (
            super::load_catalog(global, &inputs)?,
            vec![(None, std::rc::Rc::new(super::load_facts(global)?))],
            Vec::new(),
        ),
    };
    let dra_served = crate::smoke::dra_served(dra_classes.iter().map(String::as_str));
    let (context, hints) = super::test::context_and_hints(global, &inputs, fleet, &catalog);
    let kubeconfig = super::plan::kubeconfig_path();
    let rt = super::runtime()?;
    let listed = rt.block_on(async {
        let client = crate::observe::kubernetes::context_client(&kubeconfig, &context).await?;
        Api::<Node>::all(client).list(&ListParams::default()).await.map_err(|e| {
            crate::observe::ObserveError::KubernetesUnreachable { context: context.clone(), reason: e.to_string() }
        })
    });
    let listed = listed.map_err(|e| {
        if fleet { super::observe_failed(e) } else { super::cluster_failed(global, &inputs.config.cluster.name, e) }
    })?;
    let mut nodes = Vec::new();
    let mut allocatable: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for node in &listed.items {
        let (health, (name, alloc)) = node_health(node);
        allocatable.insert(name, alloc);
        nodes.push(health);
    }
    let mut problems = Vec::new();
    for (node, facts) in &facts {
        let mine: BTreeMap<String, BTreeMap<String, String>> = match node {
            None => allocatable.clone(),
            Some(n) => match allocatable.get(n) {
                Some(a) => BTreeMap::from([(n.clone(), a.clone())]),
                None => {
                    problems.push(CountProblem {
                        resource: String::new(),
                        problem: format!("node {} is in [[nodes]] but not in the cluster", crate::escape::quoted(n)),
                        fix: format!("`{}` lists the cluster's nodes", hints.kubectl.clone().lit("get").lit("nodes")),
                    });
                    continue;
                }
            },
        };
        let (_, counts) = crate::smoke::plan(facts, &mine, &BTreeMap::new());
        for p in crate::smoke::count_problems(facts, &counts, &dra_served, &hints) {
            let problem = match node {
                Some(n) => format!("node {n}: {}", p.text),
                None => p.text,
            };
            // Node names come from the API server: one escaped line, like all outside text.
            let problem = crate::escape::one_line(&problem).into_owned();
            // One escaped line, as every name in this answer is.
            problems.push(CountProblem { resource: p.resource.to_string(), problem, fix: p.fix });
        }
    }
    Ok(Health {
        context,
        healthy: nodes.iter().all(|n| n.ready) && problems.is_empty(),
        nodes,
        problems,
        note: "counts only: `k3d-gpu test` runs a pod per accelerator and judges what it sees".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server's words about a node are shown as one escaped line, capped; its
    /// allocatable is keyed by the name as given, not by the escaped form.
    #[test]
    fn a_nodes_words_are_one_capped_line_and_its_name_keys_its_allocatable() {
        let message = format!("PLEG\nforged: ok{}", "x".repeat(1 << 20));
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "n\u{1b}1" },
            "status": {
                "conditions": [{ "type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": message }],
                "allocatable": { "gpu.intel.com/xe": "1" }
            }
        }))
        .unwrap();
        let (health, (name, alloc)) = node_health(&node);
        let shown = health.not_ready.unwrap();
        assert!(!shown.contains('\n') && shown.len() < 4096, "{} bytes", shown.len());
        assert!(!health.name.contains('\u{1b}'));
        assert_eq!((name.as_str(), alloc["gpu.intel.com/xe"].as_str()), ("n\u{1b}1", "1"));
    }
}
