//! The command edge of an existing cluster (`[cluster] provider = "existing"`): each
//! `[[nodes]]` entry's facts read from disk (a facts/v1 file or a fixture host), confined to
//! the config's directory, then the fleet compile (`compile::fleet`).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::cli::Global;
use crate::config::{ConfigError, Provider, span_of_element};
use crate::error::{Error, Result};
use crate::facts::Facts;

/// Whether this config drives an existing cluster.
pub fn is_fleet(inputs: &super::Inputs) -> bool {
    inputs.config.cluster.provider == Provider::Existing
}

/// Refuses a command that reads a k3d cluster (its Docker containers, context `k3d-<name>`)
/// when the config names an existing cluster: it would read another cluster, or fail with a
/// k3d message that does not apply.
pub fn k3d_only(inputs: &super::Inputs, command: &str, instead: &str) -> Result<()> {
    if !is_fleet(inputs) {
        return Ok(());
    }
    let context = crate::shell::word(inputs.config.cluster.context.as_deref().unwrap_or_default());
    Err(Error::Usage {
        message: format!(
            "`k3d-gpu {command}` reads a k3d cluster; this config names an existing one (provider \"existing\")"
        ),
        help: Some(crate::escape::one_line(&instead.replace("{context}", &context)).into_owned()),
    })
}

/// A node's `facts`/`root` as a path to read, or why not: resolved with every link, it must be
/// inside the config's own directory. A config from a pull request must not make `validate`
/// read a file it points at outside the repository (`hosts -> /etc`).
pub fn confine(config_dir: &Path, path: &str) -> std::result::Result<PathBuf, crate::input_file::Unconfined> {
    use crate::input_file::Unconfined;
    if let Some(why) = crate::config::fleet::path_problem(path) {
        return Err(Unconfined::Name(why));
    }
    let boundary = std::fs::canonicalize(config_dir).map_err(|e| Unconfined::ConfigDir(e.kind()))?;
    crate::input_file::resolve_within(&boundary, config_dir, Path::new(path))
}

/// Every node's name and facts, in the config's order. `--root`/`--facts` are refused: the
/// nodes name their own.
pub fn load_nodes(global: &Global, inputs: &super::Inputs) -> Result<Vec<(String, Rc<Facts>)>> {
    if !global.root.is_empty() || !global.facts.is_empty() {
        return Err(Error::Usage {
            message: "with provider \"existing\" each node's facts come from its [[nodes]] entry; --root and --facts are not used".into(),
            help: Some("drop --root/--facts; `k3d-gpu validate -c CONFIG` checks every node".into()),
        });
    }
    let filter = global.vendor_filter()?;
    let mut out = Vec::new();
    // Each file once: a config that points a thousand nodes at one large file must not parse
    // and keep it a thousand times.
    let mut read: std::collections::BTreeMap<PathBuf, Rc<Facts>> = std::collections::BTreeMap::new();
    // And each content once: a fleet of a few machine kinds has one facts file per node, most
    // of them byte for byte alike, and identical bytes are identical facts (the document is
    // rebuilt from its host inventory alone), so they share one `Facts`, which the compile
    // then serialises and digests once (parsing and digesting every node's file was over a
    // third of a converged fleet plan). Keyed by the bytes themselves: no hash to collide.
    let mut by_content: std::collections::HashMap<Vec<u8>, Rc<Facts>> = std::collections::HashMap::new();
    for (i, node) in inputs.config.nodes.iter().enumerate() {
        let (path, is_root) = match (&node.facts, &node.root) {
            (Some(p), _) => (p, false),
            (None, Some(p)) => (p, true),
            (None, None) => continue,
        };
        let bad = |reason: crate::input_file::Unconfined| {
            let span = span_of_element(&inputs.text, &["nodes"], i);
            let label = if span.is_some() { "nodes".to_string() } else { String::new() };
            Error::Invalid(vec![miette::Report::new(ConfigError::at(
                &inputs.name,
                &inputs.text,
                span,
                format!("node {}: {} {reason}", crate::escape::quoted(&node.name), crate::escape::quoted(path)),
                label,
                Some("a node's facts file or fixture host lives beside the config (hosts/<node>.json)".into()),
            ))])
        };
        let resolved = confine(&inputs.dir, path).map_err(bad)?;
        let facts = match read.get(&resolved) {
            Some(facts) => facts.clone(),
            None => {
                // Unreadable here: left to facts_from_file, which says why.
                let bytes = (!is_root).then(|| crate::input_file::read_bytes(&resolved).ok()).flatten();
                let facts = match bytes.as_ref().and_then(|b| by_content.get(b)) {
                    Some(same) => same.clone(),
                    None => {
                        let facts = Rc::new(if is_root {
                            let host = super::open_root(&resolved)?;
                            super::detect_facts(&host, &filter)?
                        } else {
                            super::facts_from_file(&resolved, &filter, global.vendors.is_some())?
                        });
                        if let Some(bytes) = bytes {
                            by_content.insert(bytes, facts.clone());
                        }
                        facts
                    }
                };
                read.insert(resolved, facts.clone());
                facts
            }
        };
        out.push((node.name.clone(), facts));
    }
    Ok(out)
}

/// The fleet's graph; compile errors become diagnostics against the config.
pub fn compile(
    inputs: &super::Inputs,
    nodes: &[(String, Rc<Facts>)],
    catalog: &crate::catalog::Catalog,
) -> Result<crate::compile::DesiredGraph> {
    crate::compile::fleet::compile(&inputs.config, &fleet_nodes(inputs, nodes), catalog)
        .map_err(|errors| Error::Invalid(super::inputs::compile_diagnostics(inputs, errors)))
}

/// The compiler's view of the loaded nodes, with each one's `[nodes.expect]`.
pub fn fleet_nodes<'a>(
    inputs: &'a super::Inputs,
    nodes: &'a [(String, Rc<Facts>)],
) -> Vec<crate::compile::fleet::FleetNode<'a>> {
    // By name once, not a scan of the config's nodes per node.
    let expect: std::collections::HashMap<&str, &crate::config::Expect> =
        inputs.config.nodes.iter().rev().map(|n| (n.name.as_str(), &n.expect)).collect();
    nodes
        .iter()
        .map(|(name, facts)| crate::compile::fleet::FleetNode {
            name,
            facts,
            expect: expect.get(name.as_str()).copied().unwrap_or(&EMPTY),
        })
        .collect()
}

static EMPTY: crate::config::Expect =
    crate::config::Expect { vendors: Vec::new(), devices: std::collections::BTreeMap::new(), fingerprint: None };

/// `plan`/`apply` of an existing cluster: observe through the config's context (no Docker),
/// refuse when a config node is missing from the cluster, note the nodes it does not list.
pub fn compute(
    inputs: super::Inputs,
    compiled: super::inputs::Compiled,
    observation: super::plan::Observation,
) -> Result<super::plan::Computed> {
    let context = inputs.config.cluster.context.clone().unwrap_or_default();
    let observed = match observation {
        super::plan::Observation::Saved(saved) => *saved,
        super::plan::Observation::Live(rt) => {
            let kinds = crate::compile::object_kinds(&compiled.catalog);
            let kubeconfig = super::plan::kubeconfig_path();
            rt.block_on(crate::observe::existing::observe(&kubeconfig, &context, &kinds))
                .map_err(super::observe_failed)?
        }
    };
    let names: Vec<String> = compiled.fleet.iter().map(|(n, _)| n.clone()).collect();
    let missing = crate::plan::fleet::missing_nodes(&names, &observed);
    if !missing.is_empty() {
        return Err(Error::Refused {
            message: format!("the cluster behind context {context} has no node {}", missing.join(", ")),
            help: Some(format!(
                "[[nodes]] names what `{}` does not list: fix the name, or remove the entry",
                crate::shell::kubectl(&context).lit("get nodes")
            )),
        });
    }
    // The agent is placed on what other workloads leave free on its node.
    let mut compiled = compiled;
    if let (Some(_), Some(k)) = (&inputs.config.agent, &observed.kubernetes) {
        let held = crate::compile::held::Held::from_observed(k);
        if !held.is_empty() {
            let nodes = fleet_nodes(&inputs, &compiled.fleet);
            compiled.graph = crate::compile::fleet::compile_against(&inputs.config, &nodes, &compiled.catalog, &held)
                .map_err(|errors| Error::Invalid(super::inputs::compile_diagnostics(&inputs, errors)))?;
        }
    }
    // The facts digest of a fleet: each node's name and the digest of its facts, which the
    // compile already made (serialising every node's facts again cost 44 % of a fleet plan).
    let digests = crate::plan::Inputs::new(
        &inputs.config,
        &compiled.graph.fleet_facts,
        &observed,
        compiled.catalog.digest(),
        &compiled.graph,
    );
    let digests = crate::plan::Inputs { owner: Some(inputs.config.cluster.name.clone()), ..digests };
    let notes = crate::plan::fleet::unlisted_nodes(&names, &observed);
    let mut plan = crate::plan::plan_owned(&compiled.graph, observed, digests);
    if !notes.is_empty() {
        plan.warnings.extend(notes);
        plan.warnings.sort();
    }
    Ok(super::plan::Computed { plan, graph: compiled.graph, inputs })
}

/// `destroy` of an existing cluster: delete every object k3d-gpu manages there and every node
/// label it recorded as its own — the cluster, its nodes and everyone else's objects stay.
/// Needs only the config and the API (no facts, no compile).
pub fn destroy_plan(
    global: &Global,
    inputs: &super::Inputs,
    rt: &tokio::runtime::Runtime,
) -> Result<crate::plan::Plan> {
    let catalog = super::load_catalog(global, inputs)?;
    let context = inputs.config.cluster.context.clone().unwrap_or_default();
    let kinds = crate::compile::object_kinds(&catalog);
    let observed = rt
        .block_on(crate::observe::existing::observe(&super::plan::kubeconfig_path(), &context, &kinds))
        .map_err(super::observe_failed)?;
    let nothing = crate::compile::DesiredGraph::build(Vec::new(), Vec::new(), None)
        .map_err(|e| Error::Usage { message: e.to_string(), help: None })?;
    let digests = crate::plan::Inputs {
        owner: Some(inputs.config.cluster.name.clone()),
        ..crate::plan::Inputs::for_destroy(&inputs.config, &observed)
    };
    Ok(crate::plan::plan(&nothing, &observed, digests))
}

/// A node group's directory: `group-<first node>`. A node name may be 253 characters and a
/// file name only 255, so a long one is cut and told apart by its digest.
fn group_dir(node: &str) -> String {
    if node.len() <= 200 {
        return format!("group-{node}");
    }
    let digest = crate::canonical::sha256(node.as_bytes());
    let hex = digest.trim_start_matches("sha256:");
    format!("group-{}-{}", &node[..200], &hex[..8])
}

/// `render --out DIR` of an existing cluster, what Flux or Argo CD would apply: a directory
/// per node group (nodes that get the same component variants) holding the workloads only
/// that group's nodes run, `shared/` with everything else, and a top kustomization listing
/// them. Every object is in exactly one place, so the top kustomization builds without
/// duplicates. Node labels are not objects to apply (a partial Node in GitOps would be owned,
/// and pruned, by it): each group's kustomization names its nodes and the selector labels its
/// workloads need, which `k3d-gpu apply` sets.
pub fn render_files(graph: &crate::compile::DesiredGraph) -> std::collections::BTreeMap<String, String> {
    use crate::compile::ResourceKind;
    use crate::compile::fleet::COMPONENT_NODE_LABEL;
    use std::collections::{BTreeMap, BTreeSet};

    // Each node's component selector labels: its variant signature.
    let mut signature: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    for r in graph.resources().filter(|r| r.kind == ResourceKind::NodeLabel) {
        let (Some(node), Some(key), Some(value)) =
            (r.spec["node"].as_str(), r.spec["key"].as_str(), r.spec["value"].as_str())
        else {
            continue;
        };
        let entry = signature.entry(node).or_default();
        if key.starts_with(COMPONENT_NODE_LABEL) {
            entry.insert(key, value);
        }
    }
    let mut groups: BTreeMap<&BTreeMap<&str, &str>, Vec<&str>> = BTreeMap::new();
    for (node, labels) in &signature {
        groups.entry(labels).or_default().push(node);
    }
    // A group is named after its first node; its kustomization lists them all.
    let group_of: BTreeMap<&str, String> =
        groups.values().flat_map(|nodes| nodes.iter().map(move |n| (*n, group_dir(nodes[0])))).collect();
    let mut placed: BTreeMap<String, Vec<&crate::compile::Resource>> = BTreeMap::new();
    for r in graph.resources().filter(|r| r.kind == ResourceKind::Object) {
        let selector = r.spec.pointer("/spec/template/spec/nodeSelector").and_then(|s| s.as_object());
        let selected: BTreeSet<&String> = selector
            .map(|sel| {
                sel.iter()
                    .filter(|(k, _)| k.starts_with(COMPONENT_NODE_LABEL))
                    .flat_map(|(k, v)| {
                        signature
                            .iter()
                            .filter(move |(_, labels)| labels.get(k.as_str()).is_some_and(|l| v == *l))
                            .filter_map(|(n, _)| group_of.get(n))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let place = match selected.iter().next() {
            Some(group) if selected.len() == 1 => (*group).clone(),
            _ => "shared".to_string(),
        };
        placed.entry(place).or_default().push(r);
    }
    let mut files = BTreeMap::new();
    for (dir, objects) in &placed {
        let header = match groups.iter().find(|(_, nodes)| group_dir(nodes[0]) == *dir) {
            Some((labels, nodes)) => {
                let mut h = format!("# Node group {dir}: nodes {}.\n", nodes.join(", "));
                h.push_str("# Its workloads select these node labels (`k3d-gpu apply` sets them):\n");
                for (k, v) in labels.iter() {
                    h.push_str(&format!("#   {k}={v}\n"));
                }
                h
            }
            None => "# Objects every node group shares, and workloads of several groups.\n".to_string(),
        };
        for (name, text) in super::graph::files_of(objects.iter().copied(), &header) {
            files.insert(format!("{dir}/{name}"), text);
        }
    }
    let mut top = String::from(
        "# An existing cluster, rendered by k3d-gpu: a directory per node group and shared/.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for dir in placed.keys() {
        top.push_str(&format!("  - {dir}\n"));
    }
    files.insert("kustomization.yaml".into(), top);
    files
}

/// What `observe` sees of an existing cluster: the Kubernetes side through the config's
/// context, or why it could not be read.
pub fn observe_value(
    inputs: &super::Inputs,
    catalog: &crate::catalog::Catalog,
) -> Result<(crate::observe::Observed, Option<crate::observe::ObserveError>)> {
    let context = inputs.config.cluster.context.clone().unwrap_or_default();
    let kinds = crate::compile::object_kinds(catalog);
    let rt = super::runtime()?;
    Ok(match rt.block_on(crate::observe::existing::observe(&super::plan::kubeconfig_path(), &context, &kinds)) {
        Ok(observed) => (observed, None),
        Err(e) => (crate::observe::Observed::nothing(), Some(e)),
    })
}

/// `k3d-gpu observe`'s text for an existing cluster: its nodes, which are the config's, and how
/// many labels k3d-gpu set on each.
pub fn observe_text(inputs: &super::Inputs, observed: &crate::observe::Observed) -> String {
    let context = inputs.config.cluster.context.as_deref().unwrap_or_default();
    let k = observed.kubernetes.clone().unwrap_or_default();
    let listed: Vec<&str> = inputs.config.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut out = format!(
        "cluster behind context {context}: {} node(s), {} managed object(s), {} ResourceSlice(s)\n",
        k.nodes.len(),
        k.objects.len(),
        k.resource_slices.len()
    );
    for n in &k.nodes {
        let ours = n
            .annotations
            .get(crate::observe::MANAGED_LABELS_ANNOTATION)
            .map_or(0, |l| crate::observe::managed_labels(l).len());
        out.push_str(&format!(
            "  {} {:<10} {}{}\n",
            crate::table::pad(&n.name, 28),
            if n.ready { "Ready" } else { "NotReady" },
            if listed.contains(&n.name.as_str()) { "in [[nodes]]" } else { "not in the config" },
            if ours > 0 { format!(", {ours} label(s) set by k3d-gpu") } else { String::new() }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn group_directories_fit_a_file_name() {
        assert_eq!(super::group_dir("arc-01"), "group-arc-01");
        let long = format!("{}.lab", "a".repeat(249));
        let dir = super::group_dir(&long);
        assert!(dir.len() <= 255 && dir.starts_with("group-aaaa"), "{dir}");
        assert_ne!(dir, super::group_dir(&format!("{}.lbb", "a".repeat(249))), "told apart");
    }
}
