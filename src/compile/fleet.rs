//! An existing cluster's nodes (`[cluster] provider = "existing"`, DESIGN.md §9): each node is
//! compiled on its own facts, as one machine would be, and the results are merged into one
//! graph of Kubernetes objects, per-node labels and checks — no node image, no k3d cluster.
//!
//! How a component reaches only the nodes it fits: every node that wants component C gets the
//! label `component.k3d-gpu.io/C`, and C's workloads select it. When all those nodes compiled C
//! to the same objects, the label is `"true"` and the objects keep their plain names. When they
//! differ (an iGPU node shares its GPU, a discrete one does not; i915 here, xe there), the
//! nodes fall into variants, one per distinct set of C's workloads: the label's value names the
//! variant (8 hex digits of its digest) and each variant's workloads are their own objects,
//! `<name>-<variant>`, selecting only their nodes. So no node runs a plugin configured for
//! another node's hardware. Objects that are not workloads (namespaces, RBAC, CRDs) must come
//! out the same on every node; they are shared.
//!
//! The agent and its add-ons (`[agent] node`) are compiled into one node's compile only, from
//! that node's facts as on one machine; the same label mechanism then pins them there
//! (`component.k3d-gpu.io/agent`, set on that node alone). A label we set by node name, rather
//! than `kubernetes.io/hostname`, whose value the kubelet takes from the host name and which
//! need not equal the node's name.
//!
//! `[sandbox] node` is the same for the sandboxes: the controller, its template and warm pool
//! are compiled on that node's facts alone (the template is sized to its E-cores), and select it.
//!
//! A node's `taints` (`[[nodes]] taints`) are the owner's to set; every workload this merge
//! places on a tainted node tolerates that node's taints, so a GPU box that runs only GPU work
//! still runs the plugins, drivers and agent k3d-gpu puts there, and nothing else of ours.
//!
//! Pure: the same nodes and facts give the same graph, whatever order they are listed in.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Change, CompileError, DesiredGraph, Resource, ResourceKind, Warning};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::facts::{Facts, Vendor};

/// Warnings that a fleet-wide setting has no effect on a machine: said only when it has none on
/// any node (a Xeon without a GPU does not make `[sharing]` pointless for the fleet).
const NOWHERE_ELSE: &[&str] = &["sharing-without-intel", "dra-without-intel", "component-not-wanted"];

/// What a per-node compile's objects depend on instead of a k3d cluster; removed in the merge.
pub const ROOT: &str = "fleet/root";

/// The node label a component's workloads select: `component.k3d-gpu.io/<component>`.
pub const COMPONENT_NODE_LABEL: &str = "component.k3d-gpu.io/";

/// On a variant's object and its pods: which variant it is (also in its pod selector, so two
/// variants of one DaemonSet never select each other's pods).
pub const VARIANT_LABEL: &str = "k3d-gpu.io/variant";

/// One machine of the fleet, with its facts.
pub struct FleetNode<'a> {
    pub name: &'a str,
    pub facts: &'a Facts,
    pub expect: &'a crate::config::Expect,
}

/// The per-node label id, `node-label/<node>/<key>` (and `node-annotation/…`).
pub fn node_metadata_id(prefix: &str, node: &str, key: &str) -> String {
    format!("{prefix}/{node}/{key}")
}

/// Where an object's pod template is: `spec.template` (Deployments, DaemonSets, Jobs), or
/// `spec.podTemplate` (agent-sandbox's SandboxTemplate).
const POD_TEMPLATES: [&str; 2] = ["/spec/template", "/spec/podTemplate"];

/// The object's pod template, if it has one.
fn pod_template(object: &Value) -> Option<&'static str> {
    POD_TEMPLATES.into_iter().find(|t| object.pointer(&format!("{t}/spec")).is_some_and(Value::is_object))
}

/// Whether an object runs pods (has a pod template): those are the ones that select nodes.
fn workload(object: &Value) -> bool {
    pod_template(object).is_some()
}

/// One node's compile, kept apart until the merge: borrowed from its machine kind's compile,
/// which every node of the kind shares (never a copy per node).
struct Compiled<'a> {
    node: &'a str,
    /// Digest of what it was compiled from: nodes with the same one compiled alike.
    key: &'a str,
    resources: &'a [Resource],
}

/// The config that made an object or set a node's labels on an existing cluster: a label on
/// each object, an annotation on each node, valued `[cluster] name`. The plan leaves what
/// another config stamped alone (`plan::Inputs::owner`).
pub const CONFIG_LABEL: &str = "k3d-gpu.io/config";

/// How a fleet warning names the nodes it is about: `… (node a, b)` at its end.
const NODES_OPEN: &str = "(node ";
const NODES_CLOSE: &str = ")";

/// The nodes a fleet warning is about (`None`: the whole fleet), read back from the suffix
/// [`compile`] writes, so the caller never re-parses the wording itself.
pub fn warning_nodes(warning: &Warning) -> Option<Vec<&str>> {
    let list = warning.text.strip_suffix(NODES_CLOSE)?.rsplit_once(NODES_OPEN)?.1;
    Some(list.split(", ").collect())
}

/// Compiles the fleet: every node, then the merge. Errors of one node name it.
pub fn compile(config: &Config, nodes: &[FleetNode], catalog: &Catalog) -> Result<DesiredGraph, Vec<CompileError>> {
    compile_against(config, nodes, catalog, &super::held::Held::default())
}

/// [`compile`] on the cluster as observed: the agent is placed on what other workloads leave
/// free on `[agent] node`.
pub fn compile_against(
    config: &Config,
    nodes: &[FleetNode],
    catalog: &Catalog,
    held: &super::held::Held,
) -> Result<DesiredGraph, Vec<CompileError>> {
    let mut errors = Vec::new();
    let mut warnings: BTreeMap<Warning, Vec<&str>> = BTreeMap::new();
    let mut images = BTreeMap::new();
    let mut agent = None;
    // Machines of one kind compile alike: each distinct (facts, expect, runs the agent) is
    // compiled once, and its nodes share that compile.
    let mut seen: BTreeMap<String, Result<super::Parts, Vec<CompileError>>> = BTreeMap::new();
    let mut keys = Vec::with_capacity(nodes.len());
    // Each node's facts are serialised and digested once, here: the plan's facts digest is
    // made of these (`DesiredGraph::fleet_facts`), not of the facts again. Nodes that share
    // one loaded file (one `Facts` in memory) share its digest.
    let mut fleet_facts = Vec::with_capacity(nodes.len());
    let mut digested: BTreeMap<*const Facts, String> = BTreeMap::new();
    for node in nodes {
        let hosts = Hosts { agent: runs_agent(config, node.name), sandbox: runs_sandbox(config, node.name) };
        let facts_digest = digested
            .entry(std::ptr::from_ref(node.facts))
            .or_insert_with(|| crate::canonical::digest(node.facts))
            .clone();
        let key = crate::canonical::digest(&(&facts_digest, node.expect, hosts.agent, hosts.sandbox));
        fleet_facts.push((node.name.to_string(), facts_digest));
        seen.entry(key.clone()).or_insert_with(|| {
            // Only the agent's node places anything on what is free.
            let held = if hosts.agent { held.only(node.name) } else { Default::default() };
            super::parts(&machine_config(config, node.expect, hosts), node.facts, catalog, None, &held)
        });
        keys.push(key);
    }
    let mut compiled = Vec::with_capacity(nodes.len());
    let mut images_taken = BTreeSet::new();
    for (i, (node, key)) in nodes.iter().zip(&keys).enumerate() {
        let (key, outcome) = seen.get_key_value(key).expect("every key was compiled above");
        match outcome {
            Ok(parts) => {
                for w in &parts.warnings {
                    warnings.entry(w.clone()).or_default().push(node.name);
                }
                if images_taken.insert(key.as_str()) {
                    images.extend(parts.images.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                if runs_agent(config, node.name) {
                    agent = parts.agent.clone().map(|plan| agent_on_node(plan, node.name));
                }
                compiled.push(Compiled { node: node.name, key, resources: &parts.resources });
            }
            Err(es) => {
                for e in es {
                    // About the config, not a node: said once.
                    let once = e.code == "addons-without-agent";
                    if !(once && errors.iter().any(|x: &CompileError| x.code == e.code)) {
                        errors.push(node_error(e, node.name, i));
                    }
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut resources = merge(&compiled, &taints_of(config), &mut errors);
    claims(config, nodes, catalog, &mut resources, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    stamp(&config.cluster.name, nodes, &mut resources);
    let warnings = fleet_warnings(warnings, nodes.len());
    let mut graph = DesiredGraph::build(resources, warnings, agent)
        .map_err(|e| vec![CompileError::new("graph", &["nodes"], e.to_string(), None)])?;
    graph.images = images;
    graph.fleet_facts = fleet_facts;
    Ok(graph)
}

/// What one node runs beyond its own hardware's components.
#[derive(Debug, Clone, Copy)]
struct Hosts {
    /// The agent and its add-ons (`[agent] node`).
    agent: bool,
    /// The sandboxes (`[sandbox] node`).
    sandbox: bool,
}

/// The config one machine of the fleet compiles: its own `[expect]`, no claims (compiled
/// once, against every node they may land on), the agent and its add-ons only on the node
/// `[agent] node` names (they are placed on its facts alone), and `[sandbox]` only on
/// `[sandbox] node`.
fn machine_config(config: &Config, expect: &crate::config::Expect, hosts: Hosts) -> Config {
    let mut one = config.clone();
    one.expect = expect.clone();
    one.claims.clear();
    if !hosts.agent && one.agent.is_some() {
        one.agent = None;
        one.addons.clear();
    }
    if !hosts.sandbox {
        one.sandbox = None;
    }
    one
}

/// Each node's taints, as the config lists them (entries that do not read as taints were
/// refused by the config's checks; a library caller's are skipped, never tolerated wrongly).
fn taints_of(config: &Config) -> BTreeMap<&str, Vec<crate::config::fleet::Taint>> {
    config
        .nodes
        .iter()
        .filter(|n| !n.taints.is_empty())
        .map(|n| (n.name.as_str(), n.taints.iter().filter_map(|t| crate::config::fleet::parse_taint(t).ok()).collect()))
        .collect()
}

/// Makes a workload tolerate every taint of the nodes it runs on, after the tolerations it
/// has (a device plugin's own stay first), each once.
fn tolerate(spec: &mut Value, nodes: &[&str], taints: &BTreeMap<&str, Vec<crate::config::fleet::Taint>>) {
    let wanted: BTreeSet<&crate::config::fleet::Taint> = nodes.iter().filter_map(|n| taints.get(n)).flatten().collect();
    let Some(template) = pod_template(spec) else { return };
    if wanted.is_empty() {
        return;
    }
    let Some(Value::Object(pod)) = spec.pointer_mut(&format!("{template}/spec")) else { return };
    let list = pod.entry("tolerations").or_insert_with(|| json!([]));
    let Value::Array(list) = list else { return };
    for toleration in wanted.into_iter().map(|t| t.toleration()) {
        if !list.contains(&toleration) {
            list.push(toleration);
        }
    }
}

/// A node's compile error, named for the fleet: the node's name first, and `[expect]` (per
/// node, its `[nodes.expect]`) underlined at the node's entry. `addons-without-agent` is
/// about the config and kept as it is.
fn node_error(e: &CompileError, node: &str, index: usize) -> CompileError {
    let mut e = e.clone();
    if e.code == "addons-without-agent" {
        return e;
    }
    e.message = format!("node {node}: {}", e.message);
    if e.key.first() == Some(&"expect") {
        e.key = vec!["nodes"];
        e.element = Some(index);
    }
    e
}

/// What `k3d-gpu agent` shows on a fleet: the label its pods select (added in the merge) and
/// whose facts decided it.
fn agent_on_node(mut plan: super::agent::AgentPlan, node: &str) -> super::agent::AgentPlan {
    plan.node_selector.insert(format!("{COMPONENT_NODE_LABEL}{}", super::workloads::COMPONENT), "true".into());
    plan.reason = format!("{} (node {node})", plan.reason);
    plan
}

/// The nodes' warnings for the fleet: one said on some nodes names them (sorted, whatever
/// order the config lists them in); "this setting does nothing here" is news only when it
/// does nothing on any node; an image is deployed once for the fleet, whichever nodes pulled
/// it in.
fn fleet_warnings(warnings: BTreeMap<Warning, Vec<&str>>, all: usize) -> Vec<Warning> {
    warnings
        .into_iter()
        .filter(|(w, on)| on.len() == all || !NOWHERE_ELSE.contains(&w.code.as_str()))
        .map(|(w, mut on)| {
            on.sort_unstable();
            if on.len() == all || w.code.starts_with("image-") {
                w
            } else {
                Warning { text: format!("{} {NODES_OPEN}{}{NODES_CLOSE}", w.text, on.join(", ")), ..w }
            }
        })
        .collect()
}

/// Marks what this config owns: each object's labels, and each listed node by an annotation
/// (which leaves the node, like every `k3d-gpu.io/` annotation, when the node leaves the config).
fn stamp(owner: &str, nodes: &[FleetNode], resources: &mut Vec<Resource>) {
    for r in resources.iter_mut().filter(|r| r.kind == ResourceKind::Object) {
        if r.spec["metadata"]["labels"].is_null() {
            r.spec["metadata"]["labels"] = json!({});
        }
        r.spec["metadata"]["labels"][CONFIG_LABEL] = json!(owner);
    }
    for node in nodes {
        resources.push(Resource {
            id: node_metadata_id("node-annotation", node.name, CONFIG_LABEL),
            kind: ResourceKind::NodeAnnotation,
            change: Change::InPlace,
            component: None,
            spec: json!({ "node": node.name, "key": CONFIG_LABEL, "value": owner }),
            depends_on: Vec::new(),
        });
    }
}

/// Whether this node runs the agent and its add-ons: the one `[agent] node` names. Config
/// checks make that key required and a listed node under `existing`; a config that reached
/// the compile without it (a library caller) places the agent nowhere rather than everywhere.
fn runs_agent(config: &Config, node: &str) -> bool {
    config.agent.as_ref().and_then(|a| a.node.as_deref()) == Some(node)
}

/// Whether this node runs the sandboxes: the one `[sandbox] node` names (as [`runs_agent`]).
fn runs_sandbox(config: &Config, node: &str) -> bool {
    config.sandbox.as_ref().and_then(|s| s.node.as_deref()) == Some(node)
}

/// Original object id → (node → id in the merged graph).
type Renamed<'a> = BTreeMap<String, BTreeMap<&'a str, String>>;

/// Which node-label keys each node has, to map a `node-label/<key>` dependency.
type LabelsOf<'a> = BTreeMap<&'a str, BTreeSet<String>>;

/// The merge: labels per node, components per variant, shared objects once, checks per node.
fn merge(
    compiled: &[Compiled],
    taints: &BTreeMap<&str, Vec<crate::config::fleet::Taint>>,
    errors: &mut Vec<CompileError>,
) -> Vec<Resource> {
    let (mut out, mut labels_of) = node_metadata(compiled);
    let key_of: BTreeMap<&str, &str> = compiled.iter().map(|c| (c.node, c.key)).collect();
    // Each component's objects, per node.
    let mut components: BTreeMap<&str, BTreeMap<&str, Vec<&Resource>>> = BTreeMap::new();
    for c in compiled {
        for r in c.resources.iter().filter(|r| r.kind == ResourceKind::Object) {
            let component = r.component.as_deref().unwrap_or_default();
            components.entry(component).or_default().entry(c.node).or_default().push(r);
        }
    }
    let mut renamed: Renamed = BTreeMap::new();
    let mut objects: Vec<(Resource, Vec<&str>)> = Vec::new();
    for (component, by_node) in &components {
        // node → variant suffix (`None`: the single variant, plain names).
        let mut variant_of: BTreeMap<&str, Option<String>> = BTreeMap::new();
        for (suffix, nodes) in variants(by_node, &key_of) {
            for node in nodes {
                // The objects without a component (claims' namespaces, the npu-turbo ConfigMap)
                // select no nodes and need no label.
                if !component.is_empty() {
                    let label = component_label(node, component, suffix.as_deref());
                    labels_of.entry(node).or_default().insert(label.spec["key"].as_str().unwrap_or_default().into());
                    out.push(label);
                }
                variant_of.insert(node, suffix.clone());
            }
        }
        component_objects(component, by_node, &variant_of, &key_of, &mut renamed, &mut objects, errors);
    }
    let checks = merged_checks(compiled, &renamed, &labels_of);

    // Dependencies in merged ids: the root is gone, a node label is that node's, a split
    // object is the variant of the same nodes.
    for (mut r, nodes) in objects {
        r.depends_on = merged_dependencies(&r, &nodes, &renamed, &labels_of);
        // Only a workload that selects its nodes (it has a component) is let onto tainted ones.
        if r.component.as_deref().is_some_and(|c| !c.is_empty()) {
            tolerate(&mut r.spec, &nodes, taints);
        }
        out.push(r);
    }
    for (_, (mut r, _)) in checks {
        r.depends_on.sort();
        r.depends_on.dedup();
        out.push(r);
    }
    out
}

/// The node labels and annotations each node's compile sets, under that node's ids, and the
/// label keys of each node.
fn node_metadata<'a>(compiled: &[Compiled<'a>]) -> (Vec<Resource>, LabelsOf<'a>) {
    let mut out = Vec::new();
    let mut labels_of: LabelsOf = BTreeMap::new();
    for c in compiled {
        for r in c.resources {
            let prefix = match r.kind {
                ResourceKind::NodeLabel => "node-label",
                ResourceKind::NodeAnnotation => "node-annotation",
                _ => continue,
            };
            let key = r.spec["key"].as_str().unwrap_or_default();
            if r.kind == ResourceKind::NodeLabel {
                labels_of.entry(c.node).or_default().insert(key.to_string());
            }
            out.push(Resource {
                id: node_metadata_id(prefix, c.node, key),
                kind: r.kind,
                change: Change::InPlace,
                component: None,
                spec: json!({ "node": c.node, "key": key, "value": r.spec["value"] }),
                depends_on: Vec::new(),
            });
        }
    }
    (out, labels_of)
}

/// A component's variants: its nodes grouped by the digest of the component's workloads, in
/// digest order, each with its suffix (8 hex digits of the digest; `None` when there is one).
fn variants<'n>(
    by_node: &BTreeMap<&'n str, Vec<&Resource>>,
    key_of: &BTreeMap<&str, &str>,
) -> Vec<(Option<String>, Vec<&'n str>)> {
    let digest_of = |rs: &[&Resource]| {
        let workloads: Vec<(&str, &Value)> =
            rs.iter().filter(|r| workload(&r.spec)).map(|r| (r.id.as_str(), &r.spec)).collect();
        crate::canonical::digest(&workloads)
    };
    let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    // Nodes compiled alike have the same workloads: one digest per compile.
    let mut digests: BTreeMap<&str, String> = BTreeMap::new();
    for (node, rs) in by_node {
        let digest = digests.entry(key_of[node]).or_insert_with(|| digest_of(rs)).clone();
        groups.entry(digest).or_default().push(node);
    }
    let single = groups.len() == 1;
    groups
        .into_iter()
        .map(|(digest, nodes)| {
            let suffix = (!single).then(|| digest.trim_start_matches("sha256:").chars().take(8).collect::<String>());
            (suffix, nodes)
        })
        .collect()
}

/// The label `component.k3d-gpu.io/<component>` on a node: `"true"`, or its variant's suffix.
fn component_label(node: &str, component: &str, suffix: Option<&str>) -> Resource {
    let key = format!("{COMPONENT_NODE_LABEL}{component}");
    Resource {
        id: node_metadata_id("node-label", node, &key),
        kind: ResourceKind::NodeLabel,
        change: Change::InPlace,
        component: None,
        spec: json!({ "node": node, "key": key, "value": suffix.unwrap_or("true") }),
        depends_on: Vec::new(),
    }
}

/// Every object id of the component, merged: a workload once per variant (recorded in
/// `renamed`), any other object once, when every distinct compile made it alike.
fn component_objects<'a>(
    component: &str,
    by_node: &BTreeMap<&'a str, Vec<&'a Resource>>,
    variant_of: &BTreeMap<&str, Option<String>>,
    key_of: &BTreeMap<&str, &str>,
    renamed: &mut Renamed<'a>,
    objects: &mut Vec<(Resource, Vec<&'a str>)>,
    errors: &mut Vec<CompileError>,
) {
    let mut by_id: BTreeMap<&str, Vec<(&str, &Resource)>> = BTreeMap::new();
    for (node, rs) in by_node {
        for r in rs {
            by_id.entry(r.id.as_str()).or_default().push((node, r));
        }
    }
    for (id, copies) in by_id {
        if workload(&copies[0].1.spec) && !component.is_empty() {
            for (r, nodes) in workload_variants(component, &copies, variant_of) {
                for n in &nodes {
                    renamed.entry(id.to_string()).or_default().insert(n, r.id.clone());
                }
                objects.push((r, nodes));
            }
        } else {
            match shared_object(id, &copies, key_of) {
                Ok(object) => objects.push(object),
                Err(e) => errors.push(e),
            }
        }
    }
}

/// One workload per variant, selecting that variant's nodes, with the nodes it runs on.
fn workload_variants<'a>(
    component: &str,
    copies: &[(&'a str, &Resource)],
    variant_of: &BTreeMap<&str, Option<String>>,
) -> Vec<(Resource, Vec<&'a str>)> {
    let mut per_variant: BTreeMap<Option<String>, Vec<(&str, &Resource)>> = BTreeMap::new();
    for (node, r) in copies {
        per_variant.entry(variant_of[node].clone()).or_default().push((node, r));
    }
    per_variant
        .into_iter()
        .map(|(suffix, members)| {
            let mut spec = members[0].1.spec.clone();
            select(&mut spec, component, suffix.as_deref());
            let nodes: Vec<&str> = members.iter().map(|(n, _)| *n).collect();
            (Resource { id: super::object_id(&spec), spec, ..members[0].1.clone() }, nodes)
        })
        .collect()
}

/// An object that is not a workload is shared: one copy per distinct compile (nodes compiled
/// alike hold the same object), and an error when the compiles disagree.
fn shared_object<'a>(
    id: &str,
    copies: &[(&'a str, &Resource)],
    key_of: &BTreeMap<&str, &str>,
) -> Result<(Resource, Vec<&'a str>), CompileError> {
    let by_compile: BTreeMap<&str, &Resource> = copies.iter().map(|(n, r)| (key_of[n], *r)).collect();
    let distinct: BTreeSet<String> = by_compile.values().map(|r| crate::canonical::digest(&r.spec)).collect();
    let nodes: Vec<&str> = copies.iter().map(|(n, _)| *n).collect();
    if distinct.len() > 1 {
        return Err(CompileError::new(
            "fleet-object-differs",
            &["nodes"],
            format!("{id} comes out differently on nodes {}, and only workloads can have variants", nodes.join(", ")),
            Some("a component's shared objects (namespaces, RBAC, config) must not depend on the host".into()),
        ));
    }
    Ok((copies[0].1.clone(), nodes))
}

/// Checks: rollouts per variant, allocatable per node, ResourceSlices summed; each with the
/// nodes whose compile has it.
fn merged_checks<'a>(
    compiled: &[Compiled<'a>],
    renamed: &Renamed,
    labels_of: &LabelsOf,
) -> BTreeMap<String, (Resource, Vec<&'a str>)> {
    let mut checks: BTreeMap<String, (Resource, Vec<&str>)> = BTreeMap::new();
    for c in compiled {
        for r in c.resources.iter().filter(|r| r.kind == ResourceKind::Verify) {
            let r = check_for_node(r, c.node, renamed);
            let entry = checks.entry(r.id.clone()).or_insert_with(|| (r.clone(), Vec::new()));
            if entry.1.is_empty() {
                entry.0.depends_on.clear();
            } else if r.spec["check"] == "resourceslices" {
                let sum =
                    entry.0.spec["min_devices"].as_u64().unwrap_or(0) + r.spec["min_devices"].as_u64().unwrap_or(0);
                entry.0.spec["min_devices"] = json!(sum);
            }
            entry.1.push(c.node);
            let deps = r.depends_on.iter().flat_map(|d| map_dep(d, c.node, renamed, labels_of)).collect::<Vec<_>>();
            entry.0.depends_on.extend(deps);
        }
    }
    checks
}

/// A node's check under its merged id: a rollout follows its workload's variant, an
/// allocatable check names its node; others are the fleet's as they are.
fn check_for_node(r: &Resource, node: &str, renamed: &Renamed) -> Resource {
    let mut r = r.clone();
    match r.spec["check"].as_str() {
        Some("rollout") => {
            let object = r.depends_on.first().cloned().unwrap_or_default();
            if let Some(new) = renamed.get(&object).and_then(|m| m.get(node)).filter(|n| **n != object) {
                let name = new.rsplit('/').next().unwrap_or_default().to_string();
                r.spec["name"] = json!(name);
                r.id = format!(
                    "verify/rollout/{}/{}/{name}",
                    r.spec["kind"].as_str().unwrap_or_default(),
                    r.spec["namespace"].as_str().unwrap_or_default()
                );
            }
        }
        Some("allocatable") => {
            let resource = r.spec["resource"].as_str().unwrap_or_default().to_string();
            r.id = format!("verify/allocatable/{node}/{resource}");
            r.spec["node"] = json!(node);
        }
        _ => {}
    }
    r
}

/// A merged object's dependencies: each of its nodes' dependencies in merged ids, and a
/// workload's component label on each of its nodes; sorted, once each, never itself.
fn merged_dependencies(r: &Resource, nodes: &[&str], renamed: &Renamed, labels_of: &LabelsOf) -> Vec<String> {
    let deps: Vec<String> = nodes
        .iter()
        .flat_map(|n| r.depends_on.iter().flat_map(|d| map_dep(d, n, renamed, labels_of)).collect::<Vec<_>>())
        .collect();
    let component_label = r.component.as_deref().filter(|_| workload(&r.spec)).map(|c| {
        let key = format!("{COMPONENT_NODE_LABEL}{c}");
        nodes.iter().map(|n| node_metadata_id("node-label", n, &key)).collect::<Vec<_>>()
    });
    let mut deps: Vec<String> =
        deps.into_iter().chain(component_label.into_iter().flatten()).filter(|d| *d != r.id).collect();
    deps.sort();
    deps.dedup();
    deps
}

/// A dependency of a node's resource, in the merged graph's ids.
fn map_dep(dep: &str, node: &str, renamed: &Renamed, labels_of: &LabelsOf) -> Vec<String> {
    if dep == ROOT {
        return Vec::new();
    }
    if let Some(key) = dep.strip_prefix("node-label/") {
        return if labels_of.get(node).is_some_and(|keys| keys.contains(key)) {
            vec![node_metadata_id("node-label", node, key)]
        } else {
            Vec::new()
        };
    }
    if let Some(r) = renamed.get(dep).and_then(|m| m.get(node)) {
        return vec![r.clone()];
    }
    if let Some(rest) = dep.strip_prefix("verify/rollout/") {
        // A rollout check of a split workload follows its variant.
        let object = rest.splitn(3, '/').collect::<Vec<_>>();
        if let [kind, ns, name] = object.as_slice() {
            let id = format!("k8s/apps/{kind}/{ns}/{name}");
            if let Some(new) = renamed.get(&id).and_then(|m| m.get(node)) {
                let name = new.rsplit('/').next().unwrap_or_default();
                return vec![format!("verify/rollout/{kind}/{ns}/{name}")];
            }
        }
    }
    vec![dep.to_string()]
}

/// Makes a workload select the nodes of its component (and variant): a nodeSelector on the
/// component's node label; a variant also gets its own name and pod selector.
fn select(spec: &mut Value, component: &str, suffix: Option<&str>) {
    let key = format!("{COMPONENT_NODE_LABEL}{component}");
    let template = pod_template(spec).unwrap_or(POD_TEMPLATES[0]);
    if let Some(Value::Object(pod)) = spec.pointer_mut(&format!("{template}/spec")) {
        let selector = pod.entry("nodeSelector").or_insert_with(|| json!({}));
        if let Value::Object(selector) = selector {
            selector.insert(key, json!(suffix.unwrap_or("true")));
        }
    }
    let Some(suffix) = suffix else { return };
    let name = spec["metadata"]["name"].as_str().unwrap_or_default();
    // A DNS label: the name is cut so `-<8 hex>` still fits 63.
    let stem: String = name.chars().take(63 - 9).collect();
    spec["metadata"]["name"] = json!(format!("{}-{suffix}", stem.trim_end_matches('-')));
    for pointer in
        ["/metadata/labels".to_string(), format!("{template}/metadata/labels"), "/spec/selector/matchLabels".into()]
    {
        if let Some(Value::Object(labels)) = spec.pointer_mut(&pointer) {
            labels.insert(VARIANT_LABEL.into(), json!(suffix));
        }
    }
}

/// `[[claims]]` once for the fleet, checked against the Intel GPUs of every node the DRA driver
/// runs on (where the claim may land); nodes without one add none.
fn claims(
    config: &Config,
    nodes: &[FleetNode],
    catalog: &Catalog,
    out: &mut Vec<Resource>,
    errors: &mut Vec<CompileError>,
) {
    if config.claims.is_empty() {
        return;
    }
    let intel: Vec<&FleetNode> = nodes
        .iter()
        .filter(|n| super::active_vendors(config, n.facts).iter().any(|d| d.vendor == Vendor::Intel))
        .collect();
    let Some(first) = intel.first().copied().or(nodes.first()) else { return };
    let mut merged = first.facts.clone();
    merged.host.intel_gpus = intel.iter().flat_map(|n| n.facts.host.intel_gpus.iter().cloned()).collect();
    let mut made = Vec::new();
    // The DeviceClass is one of the merged objects: claims depend on it like on one machine.
    let device_class: Vec<Resource> = out.iter().filter(|r| r.id.contains("/DeviceClass/")).cloned().collect();
    let mut scratch = device_class;
    match super::fleet_claims(config, &merged, catalog, &mut scratch) {
        Ok(()) => made.extend(scratch.into_iter().filter(|r| !r.id.contains("/DeviceClass/"))),
        Err(es) => {
            errors.extend(es);
            return;
        }
    }
    // The union of the nodes' GPUs says which GPUs a claim may select; but one claim is
    // allocated on one node, so some single node must have as many matching GPUs as it wants.
    // Nodes with the same GPUs answer alike: each distinct set is tried once (100 nodes of a
    // few kinds are a few compiles per claim, not 100).
    let mut seen = BTreeSet::new();
    let kinds: Vec<&FleetNode> =
        intel.iter().copied().filter(|n| seen.insert(crate::canonical::digest(&n.facts.host.intel_gpus))).collect();
    let device_class: Vec<Resource> = out.iter().filter(|r| r.id.contains("/DeviceClass/")).cloned().collect();
    for (i, claim) in config.claims.iter().enumerate() {
        let one = Config { claims: vec![claim.clone()], ..config.clone() };
        let fits = |n: &&FleetNode| super::fleet_claims(&one, n.facts, catalog, &mut device_class.clone()).is_ok();
        if !kinds.iter().any(fits) {
            let mut e = CompileError::new(
                "claim-split-across-nodes",
                &["claims"],
                format!(
                    "claim {} wants {} GPU(s): the nodes have that many together, and no single node does; a claim \
                     is allocated on one node, so its pods would never be scheduled",
                    crate::escape::quoted(&claim.name),
                    claim.count
                ),
                Some("lower count to what one node has, or narrow the claim to the node that has enough".to_string()),
            );
            e.element = Some(i);
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return;
    }
    let have: BTreeSet<String> = out.iter().map(|r| r.id.clone()).collect();
    for mut r in made {
        r.depends_on.retain(|d| d != ROOT);
        if !have.contains(&r.id) {
            out.push(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(id: &str, component: &str, spec: Value) -> Resource {
        Resource {
            id: id.into(),
            kind: ResourceKind::Object,
            change: Change::InPlace,
            component: Some(component.into()),
            spec,
            depends_on: vec![ROOT.into()],
        }
    }

    fn plugin(shared: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": { "name": "intel-gpu-plugin", "namespace": "kube-system", "labels": { "app": "p" } },
            "spec": {
                "selector": { "matchLabels": { "app": "p" } },
                "template": { "metadata": { "labels": { "app": "p" } }, "spec": { "args": [shared] } },
            },
        })
    }

    const PLUGIN: &str = "k8s/apps/DaemonSet/kube-system/intel-gpu-plugin";

    #[test]
    fn a_machine_compiles_its_own_expect_without_claims_and_the_agent_only_where_it_runs() {
        let config: Config = toml::from_str(
            "[agent]\nnode = \"a\"\n[addons.vlm]\ndevice = \"auto\"\n[[claims]]\nname = \"c\"\n[expect]\nvendors = [\"intel\"]\n",
        )
        .expect("the case is a config");
        let expect = crate::config::Expect { vendors: vec![Vendor::Nvidia], ..Default::default() };
        // (hosts the agent, has [agent], add-ons)
        const CASES: &[(bool, bool, usize)] = &[(true, true, 1), (false, false, 0)];
        for (hosts, agent, addons) in CASES {
            let one = machine_config(&config, &expect, Hosts { agent: *hosts, sandbox: false });
            assert_eq!((one.agent.is_some(), one.addons.len()), (*agent, *addons), "hosts_agent={hosts}");
            assert!(one.claims.is_empty(), "hosts_agent={hosts}");
            assert_eq!(one.expect, expect, "hosts_agent={hosts}");
        }
        // Without an [agent], the add-ons stay for the agent check to refuse them once.
        let no_agent = Config { agent: None, ..config };
        assert_eq!(machine_config(&no_agent, &expect, Hosts { agent: false, sandbox: false }).addons.len(), 1);
    }

    #[test]
    fn the_sandbox_is_compiled_only_on_its_node() {
        let config: Config = toml::from_str("[sandbox]\nnode = \"a\"\nwarm_pool = 2\n").expect("the case is a config");
        let expect = crate::config::Expect::default();
        for (sandbox, wanted) in [(true, true), (false, false)] {
            let one = machine_config(&config, &expect, Hosts { agent: false, sandbox });
            assert_eq!(one.sandbox.is_some(), wanted, "hosts_sandbox={sandbox}");
        }
        let two: Config = toml::from_str("[sandbox]\nnode = \"a\"\n").expect("the case is a config");
        assert!(runs_sandbox(&two, "a") && !runs_sandbox(&two, "b"));
        assert!(!runs_sandbox(&Config::default(), "a"), "no [sandbox]: on no node");
    }

    #[test]
    fn a_workload_tolerates_the_taints_of_its_nodes_only() {
        let taint = |t: &str| crate::config::fleet::parse_taint(t).expect("a taint");
        let taints = BTreeMap::from([
            ("gpu-01", vec![taint("k3d-gpu.io/gpu-only=true:NoSchedule"), taint("dedicated:NoExecute")]),
            ("gpu-02", vec![taint("k3d-gpu.io/gpu-only=true:NoSchedule")]),
        ]);
        let own =
            json!({ "key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule" });
        let gpu_only =
            json!({ "key": "k3d-gpu.io/gpu-only", "operator": "Equal", "value": "true", "effect": "NoSchedule" });
        let dedicated = json!({ "key": "dedicated", "operator": "Equal", "value": "", "effect": "NoExecute" });
        let sandbox = json!({ "kind": "SandboxTemplate", "spec": { "podTemplate": { "spec": {} } } });
        let mut with_own = plugin("1");
        with_own["spec"]["template"]["spec"]["tolerations"] = json!([own.clone()]);
        // (case, object, its nodes, the tolerations after: None when it has no list)
        let cases: Vec<(&str, Value, Vec<&str>, Option<Value>)> = vec![
            ("untainted nodes", plugin("1"), vec!["xeon-01"], None),
            (
                "each taint once, sorted",
                plugin("1"),
                vec!["gpu-02", "gpu-01", "xeon-01"],
                Some(json!([dedicated.clone(), gpu_only.clone()])),
            ),
            ("its own first", with_own, vec!["gpu-02"], Some(json!([own.clone(), gpu_only.clone()]))),
            ("a sandbox template", sandbox, vec!["gpu-02"], Some(json!([gpu_only]))),
        ];
        for (name, mut spec, nodes, want) in cases {
            tolerate(&mut spec, &nodes, &taints);
            let template = pod_template(&spec).expect("a workload");
            let got = spec.pointer(&format!("{template}/spec/tolerations")).cloned();
            assert_eq!(got, want, "{name}");
        }
        let mut namespace = json!({ "kind": "Namespace" });
        tolerate(&mut namespace, &["gpu-01"], &taints);
        assert_eq!(namespace, json!({ "kind": "Namespace" }), "no pods, no tolerations");
    }

    #[test]
    fn a_sandbox_template_selects_its_node() {
        let mut spec = json!({ "kind": "SandboxTemplate", "metadata": { "name": "python-ecores" },
            "spec": { "podTemplate": { "metadata": { "labels": {} }, "spec": {} } } });
        assert!(workload(&spec), "a pod template under spec.podTemplate");
        select(&mut spec, "sandbox", None);
        assert_eq!(
            spec["spec"]["podTemplate"]["spec"]["nodeSelector"][format!("{COMPONENT_NODE_LABEL}sandbox")],
            "true"
        );
        assert!(spec["spec"].get("template").is_none(), "no second template made up");
    }

    #[test]
    fn a_nodes_error_names_the_node() {
        // (code, key, message, key after, element after)
        type Case = (&'static str, &'static [&'static str], &'static str, &'static [&'static str], Option<usize>);
        const CASES: &[Case] = &[
            ("bad-pci-id", &["sharing", "allow_ids"], "node n1: x", &["sharing", "allow_ids"], None),
            ("expect-vendor", &["expect", "vendors"], "node n1: x", &["nodes"], Some(3)),
            ("addons-without-agent", &["addons"], "x", &["addons"], None),
        ];
        for (code, key, message, key_after, element) in CASES {
            let e = node_error(&CompileError::new(code, key, "x", None), "n1", 3);
            assert_eq!((e.message.as_str(), e.key.as_slice(), e.element), (*message, *key_after, *element), "{code}");
        }
    }

    #[test]
    fn fleet_warnings_name_their_nodes_unless_said_everywhere() {
        let w = |code: &str| Warning { code: code.into(), text: "t".into(), key: None };
        // (code, nodes it was said on, of 3: the text, or None when dropped)
        const CASES: &[(&str, &[&str], Option<&str>)] = &[
            ("agent-not-battlemage", &["c", "a"], Some("t (node a, c)")),
            ("agent-not-battlemage", &["a", "b", "c"], Some("t")),
            ("sharing-without-intel", &["a"], None),
            ("sharing-without-intel", &["a", "b", "c"], Some("t")),
            ("image-unlocked", &["b"], Some("t")),
        ];
        for (code, on, want) in CASES {
            let got = fleet_warnings(BTreeMap::from([(w(code), on.to_vec())]), 3);
            assert_eq!(got.first().map(|w| w.text.as_str()), *want, "{code} on {on:?}");
            assert!(got.iter().all(|g| warning_nodes(g).is_none_or(|n| n.len() == on.len())), "{code}");
        }
    }

    #[test]
    fn nodes_fall_into_one_variant_per_distinct_workloads() {
        let (igpu, dgpu) = (object(PLUGIN, "p", plugin("8")), object(PLUGIN, "p", plugin("1")));
        let ns = object("k8s/core/Namespace/x", "p", json!({ "kind": "Namespace" }));
        let ns_other = object("k8s/core/Namespace/x", "p", json!({ "kind": "Namespace", "other": 1 }));
        // (case, node → (compile key, resources), variants as (suffixed, nodes))
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, Vec<&'a Resource>)>, Vec<(bool, Vec<&'a str>)>);
        let cases: Vec<Case> = vec![
            ("one node", vec![("a", "k1", vec![&igpu])], vec![(false, vec!["a"])]),
            ("alike", vec![("a", "k1", vec![&igpu]), ("b", "k2", vec![&igpu])], vec![(false, vec!["a", "b"])]),
            (
                "differ",
                vec![("a", "k1", vec![&igpu]), ("b", "k2", vec![&dgpu])],
                vec![(true, vec!["a"]), (true, vec!["b"])],
            ),
            // Only workloads make variants: a differing Namespace is shared_object's to refuse.
            (
                "not workloads",
                vec![("a", "k1", vec![&ns]), ("b", "k2", vec![&ns_other])],
                vec![(false, vec!["a", "b"])],
            ),
            // One digest per compile: a node of an already-seen compile joins its group.
            ("one compile", vec![("a", "k1", vec![&igpu]), ("b", "k1", vec![&dgpu])], vec![(false, vec!["a", "b"])]),
        ];
        for (name, nodes, want) in cases {
            let by_node: BTreeMap<&str, Vec<&Resource>> = nodes.iter().map(|(n, _, rs)| (*n, rs.clone())).collect();
            let key_of: BTreeMap<&str, &str> = nodes.iter().map(|(n, k, _)| (*n, *k)).collect();
            let got = variants(&by_node, &key_of);
            let mut got: Vec<(bool, Vec<&str>)> = got.iter().map(|(s, n)| (s.is_some(), n.clone())).collect();
            got.sort_by(|a, b| a.1.cmp(&b.1));
            assert_eq!(got, want, "{name}");
        }
        let by_node = BTreeMap::from([("a", vec![&igpu]), ("b", vec![&dgpu])]);
        let got = variants(&by_node, &BTreeMap::from([("a", "k1"), ("b", "k2")]));
        assert!(got.iter().all(|(s, _)| s.as_ref().is_some_and(|s| s.len() == 8)), "{got:?}");
    }

    #[test]
    fn the_component_label_says_true_or_the_variant() {
        const CASES: &[(&str, Option<&str>, &str)] = &[("p", None, "true"), ("p", Some("0123abcd"), "0123abcd")];
        for (component, suffix, value) in CASES {
            let r = component_label("node-1", component, *suffix);
            assert_eq!(r.id, format!("node-label/node-1/{COMPONENT_NODE_LABEL}{component}"), "{suffix:?}");
            assert_eq!(r.spec["value"], *value, "{suffix:?}");
            assert_eq!(r.kind, ResourceKind::NodeLabel);
        }
    }

    #[test]
    fn a_variant_workload_gets_its_name_selector_and_nodes() {
        let (igpu, dgpu) = (object(PLUGIN, "p", plugin("8")), object(PLUGIN, "p", plugin("1")));
        let copies = [("a", &igpu), ("b", &dgpu), ("c", &igpu)];
        // (case, variants of the nodes, (id, nodes) per object)
        type Case<'a> = (&'a str, Vec<(&'a str, Option<&'a str>)>, Vec<(&'a str, Vec<&'a str>)>);
        let cases: Vec<Case> = vec![
            ("single", vec![("a", None), ("b", None), ("c", None)], vec![(PLUGIN, vec!["a", "b", "c"])]),
            (
                "two",
                vec![("a", Some("1111aaaa")), ("b", Some("2222bbbb")), ("c", Some("1111aaaa"))],
                vec![
                    ("k8s/apps/DaemonSet/kube-system/intel-gpu-plugin-1111aaaa", vec!["a", "c"]),
                    ("k8s/apps/DaemonSet/kube-system/intel-gpu-plugin-2222bbbb", vec!["b"]),
                ],
            ),
        ];
        for (name, variant_of, want) in cases {
            let variant_of: BTreeMap<&str, Option<String>> =
                variant_of.into_iter().map(|(n, s)| (n, s.map(str::to_string))).collect();
            let got = workload_variants("p", &copies, &variant_of);
            let ids: Vec<(&str, Vec<&str>)> = got.iter().map(|(r, n)| (r.id.as_str(), n.clone())).collect();
            assert_eq!(ids, want, "{name}");
            for (r, _) in &got {
                let selector = &r.spec["spec"]["template"]["spec"]["nodeSelector"][format!("{COMPONENT_NODE_LABEL}p")];
                let variant = r.spec["metadata"]["labels"].get(VARIANT_LABEL);
                assert_eq!(selector.as_str() == Some("true"), variant.is_none(), "{name}: {}", r.id);
            }
        }
    }

    #[test]
    fn a_shared_object_must_come_out_alike_on_every_compile() {
        let ns = object("k8s/core/Namespace/x", "p", json!({ "kind": "Namespace" }));
        let other = object("k8s/core/Namespace/x", "p", json!({ "kind": "Namespace", "labels": 1 }));
        // (case, copies as (node, compile key, object), Ok(nodes) / Err(code))
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a Resource)>, Result<Vec<&'a str>, &'a str>);
        let cases: Vec<Case> = vec![
            ("alike", vec![("a", "k1", &ns), ("b", "k2", &ns)], Ok(vec!["a", "b"])),
            ("differ", vec![("a", "k1", &ns), ("b", "k2", &other)], Err("fleet-object-differs")),
        ];
        for (name, copies, want) in cases {
            let key_of: BTreeMap<&str, &str> = copies.iter().map(|(n, k, _)| (*n, *k)).collect();
            let copies: Vec<(&str, &Resource)> = copies.iter().map(|(n, _, r)| (*n, *r)).collect();
            let got = shared_object("k8s/core/Namespace/x", &copies, &key_of).map(|(_, n)| n).map_err(|e| e.code);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn checks_follow_their_node_and_variant() {
        let check = |spec: Value, id: &str, deps: &[&str]| Resource {
            id: id.into(),
            kind: ResourceKind::Verify,
            change: Change::InPlace,
            component: None,
            spec,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        };
        let renamed: Renamed = BTreeMap::from([(
            PLUGIN.to_string(),
            BTreeMap::from([("a", format!("{PLUGIN}-1111aaaa")), ("b", PLUGIN.to_string())]),
        )]);
        let rollout = check(
            json!({ "check": "rollout", "kind": "DaemonSet", "namespace": "kube-system", "name": "intel-gpu-plugin" }),
            "verify/rollout/DaemonSet/kube-system/intel-gpu-plugin",
            &[PLUGIN],
        );
        let allocatable = check(
            json!({ "check": "allocatable", "resource": "gpu.intel.com/i915" }),
            "verify/allocatable/gpu.intel.com/i915",
            &[],
        );
        let slices = check(json!({ "check": "resourceslices" }), "verify/resourceslices", &[]);
        // (case, check, node, merged id)
        let cases: Vec<(&str, &Resource, &str, &str)> = vec![
            ("a split rollout", &rollout, "a", "verify/rollout/DaemonSet/kube-system/intel-gpu-plugin-1111aaaa"),
            ("an unsplit rollout", &rollout, "b", "verify/rollout/DaemonSet/kube-system/intel-gpu-plugin"),
            ("a node not renamed", &rollout, "z", "verify/rollout/DaemonSet/kube-system/intel-gpu-plugin"),
            ("allocatable names the node", &allocatable, "a", "verify/allocatable/a/gpu.intel.com/i915"),
            ("others as they are", &slices, "a", "verify/resourceslices"),
        ];
        for (name, r, node, want) in cases {
            let got = check_for_node(r, node, &renamed);
            assert_eq!(got.id, want, "{name}");
            if r.spec["check"] == "allocatable" {
                assert_eq!(got.spec["node"], node, "{name}");
            }
        }
    }

    #[test]
    fn merged_dependencies_are_in_merged_ids() {
        let renamed: Renamed =
            BTreeMap::from([(PLUGIN.to_string(), BTreeMap::from([("a", format!("{PLUGIN}-1111aaaa"))]))]);
        let labels_of: LabelsOf = BTreeMap::from([("a", BTreeSet::from(["gpu.intel.com/xmx".to_string()]))]);
        let mut workload = object("k8s/apps/Deployment/x/agent", "agent", plugin("1"));
        workload.depends_on = vec![ROOT.into(), "node-label/gpu.intel.com/xmx".into(), PLUGIN.into()];
        let mut shared = object("k8s/core/ConfigMap/x/c", "agent", json!({ "kind": "ConfigMap" }));
        shared.depends_on = vec![ROOT.into(), "k8s/core/Namespace/x".into(), "k8s/core/ConfigMap/x/c".into()];
        let agent_label = format!("node-label/a/{COMPONENT_NODE_LABEL}agent");
        // (case, resource, nodes, dependencies)
        let cases: Vec<(&str, &Resource, Vec<&str>, Vec<String>)> = vec![
            (
                "a workload on a",
                &workload,
                vec!["a"],
                vec![format!("{PLUGIN}-1111aaaa"), agent_label.clone(), "node-label/a/gpu.intel.com/xmx".into()],
            ),
            (
                "a workload on b: no such label there, the plugin unsplit",
                &workload,
                vec!["b"],
                vec![PLUGIN.into(), format!("node-label/b/{COMPONENT_NODE_LABEL}agent")],
            ),
            (
                "not a workload: no component label, never itself",
                &shared,
                vec!["a", "b"],
                vec!["k8s/core/Namespace/x".into()],
            ),
        ];
        for (name, r, nodes, mut want) in cases {
            want.sort();
            assert_eq!(merged_dependencies(r, &nodes, &renamed, &labels_of), want, "{name}");
        }
    }
}
