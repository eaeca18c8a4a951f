//! `k3d-gpu graph` and `k3d-gpu render`: the compiled graph for one host, as DOT/JSON or as
//! manifests for GitOps.

use std::collections::BTreeMap;

use crate::cli::{Global, RenderArgs};
use crate::compile::{DesiredGraph, ResourceKind};
use crate::error::{EXIT_OK, Error, Result};

/// Config + facts + catalog → graph, with warnings on stderr.
pub fn compiled(global: &Global) -> Result<DesiredGraph> {
    let graph = super::inputs::compile(global, &super::load_config(global)?)?.graph;
    print_warnings(&graph.warnings);
    Ok(graph)
}

/// Warnings on stderr, each once, repeats summarised (`compile::warnings`).
fn print_warnings<'a>(warnings: impl IntoIterator<Item = &'a crate::compile::Warning>) {
    for w in crate::compile::warnings::summarised(warnings) {
        crate::stderrln!("warning: {} [{}]", crate::escape::one_line(&w.text), crate::escape::one_line(&w.code));
    }
}

/// The graph with the agent in it: the config's `[agent]`, or the defaults when it has none
/// (then `true`: what is shown is what the defaults would do), and the kubeconfig context that
/// reaches the cluster. Shared with the MCP server.
pub(crate) fn agent_graph(global: &Global) -> Result<(DesiredGraph, bool, String)> {
    let mut inputs = super::load_config(global)?;
    let explained_defaults = inputs.config.agent.is_none();
    inputs.config.agent.get_or_insert_with(Default::default);
    let graph = super::inputs::compile(global, &inputs)?.graph;
    // The kubeconfig context that reaches it: the config's own for an existing cluster, k3d's
    // otherwise.
    let cluster = &inputs.config.cluster;
    let context = cluster.context.clone().unwrap_or_else(|| crate::observe::kubernetes::context_name(&cluster.name));
    Ok((graph, explained_defaults, context))
}

/// `agent --json`.
pub const AGENT_SCHEMA: &str = "k3d-gpu.agent/v1";

/// Where a model of `model_gib` GiB would run (`agent --model-size`, the MCP tool
/// `recommend_placement`): this host's devices, or each `[[nodes]]` entry's (`[agent] node`'s
/// first), judged by `compile::advice` with the placement's own device first.
pub(crate) fn advice(global: &Global, model_gib: f64) -> Result<crate::compile::advice::Advice> {
    let (graph, _, _) = agent_graph(global)?;
    advice_on(global, &graph, model_gib)
}

fn advice_on(global: &Global, graph: &DesiredGraph, model_gib: f64) -> Result<crate::compile::advice::Advice> {
    use crate::compile::advice::{Machine, advise};
    let inputs = super::load_config(global)?;
    let placed = graph.agent.as_ref().map(|a| a.device);
    if super::fleet::is_fleet(&inputs) {
        let mut nodes = super::fleet::load_nodes(global, &inputs)?;
        let agent_node = inputs.config.agent.as_ref().and_then(|a| a.node.clone());
        // The agent's node first: the placement is decided there.
        nodes.sort_by_key(|(name, _)| Some(name) != agent_node.as_ref());
        let machines: Vec<Machine> = nodes
            .iter()
            .map(|(name, facts)| Machine {
                node: Some(name.as_str()),
                facts,
                config: &inputs.config,
                placed: placed.filter(|_| Some(name) == agent_node.as_ref()),
            })
            .collect();
        return Ok(advise(model_gib, &machines));
    }
    let facts = super::load_facts(global)?;
    Ok(advise(model_gib, &[Machine { node: None, facts: &facts, config: &inputs.config, placed }]))
}

/// The advice as text: the recommendation and its reason, then each candidate.
fn advice_text(a: &crate::compile::advice::Advice) -> String {
    let mut out = format!(
        "model     {} GiB of weights: needs {} GiB with its headroom
",
        a.model_gib, a.needs_gib
    );
    out.push_str(&format!(
        "advice    {}
",
        a.reason
    ));
    for c in &a.candidates {
        let verdict = match c.fits {
            Some(true) => "fits",
            Some(false) => "too small",
            None => "unknown",
        };
        let node = c.node.as_deref().map(|n| format!("node {n}: ")).unwrap_or_default();
        out.push_str(&format!(
            "device    {node}{} [{}] {verdict}: {}\n",
            c.device,
            if c.placed { "placed" } else { "-" },
            c.why
        ));
    }
    out
}

/// `k3d-gpu agent`: the agent's placement decision, and with `--model-size` where a model of
/// that size would run.
pub fn agent(global: &Global, model_size: Option<f64>) -> Result<u8> {
    let (graph, explained_defaults, _) = agent_graph(global)?;
    let advice = model_size.map(|gib| advice_on(global, &graph, gib)).transpose()?;
    if global.json {
        /// The placement's fields beside the schema; only the schema when there is no agent.
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            schema: &'static str,
            #[serde(flatten)]
            plan: Option<&'a crate::compile::agent::AgentPlan>,
            #[serde(skip_serializing_if = "Option::is_none")]
            advice: Option<&'a crate::compile::advice::Advice>,
        }
        let doc = Doc { schema: AGENT_SCHEMA, plan: graph.agent.as_ref(), advice: advice.as_ref() };
        super::print_bytes(&crate::canonical::to_bytes(&doc));
        return Ok(EXIT_OK);
    }
    let Some(plan) = &graph.agent else { return Ok(EXIT_OK) };
    let mut out = String::new();
    if explained_defaults {
        out.push_str("(no [agent] in the config: this is what the defaults would do)\n");
    }
    out.push_str(&format!("backend   {}\ndevice    {}\nwhy       {}\n", plan.backend, plan.device, plan.reason));
    out.push_str(&format!("resource  {}\napi       {}\n", plan.resource.as_deref().unwrap_or("none (CPU)"), plan.api));
    out.push_str(&format!("requests  {} CPU, {} memory\n", plan.cpu_request, plan.memory));
    for (k, v) in &plan.pod_labels {
        out.push_str(&format!("pod label {k}={v}\n"));
    }
    for (k, v) in &plan.node_selector {
        out.push_str(&format!("node      {k}={v}\n"));
    }
    if !plan.supplemental_groups.is_empty() {
        let groups: Vec<String> = plan.supplemental_groups.iter().map(u32::to_string).collect();
        out.push_str(&format!("groups    {}\n", groups.join(", ")));
    }
    for a in &plan.addons {
        out.push_str(&format!(
            "add-on    {:?} on the {}{}: {}\n",
            a.name,
            a.device,
            a.cores.map(|c| format!(" ({c} cores)")).unwrap_or_default(),
            a.reason
        ));
    }
    for w in graph.warnings.iter().filter(|w| w.code.starts_with("agent") || w.code.starts_with("addon")) {
        out.push_str(&format!("warning   {}\n", w.text));
    }
    if let Some(advice) = &advice {
        out.push_str(&advice_text(advice));
    }
    super::print_bytes(crate::escape::assembled(&out).as_bytes());
    Ok(EXIT_OK)
}

pub fn run(global: &Global) -> Result<u8> {
    let graph = compiled(global)?;
    if global.json {
        super::print_with(|out| {
            let mut out = std::io::BufWriter::new(out);
            crate::canonical::write(&mut out, &masked(&graph)).and_then(|()| std::io::Write::flush(&mut out))
        });
    } else {
        super::print_bytes(graph.to_dot().as_bytes());
    }
    Ok(EXIT_OK)
}

/// graph/v1 as printed: secrets masked by the rule every printed document follows. Masked a
/// resource at a time (the rule looks inside one object at a time, so the document comes out
/// the same as masked whole) and written as it is made: a 1,000-node fleet's graph is never a
/// JSON tree in memory, let alone three.
fn masked(graph: &DesiredGraph) -> impl serde::Serialize + '_ {
    /// graph/v1's fields (`DesiredGraph::to_json`), each masked.
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        schema: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent: Option<Masked<'a, crate::compile::agent::AgentPlan>>,
        resources: Vec<Masked<'a, crate::compile::Resource>>,
        warnings: Masked<'a, [crate::compile::Warning]>,
    }
    Doc {
        schema: crate::compile::GRAPH_SCHEMA,
        agent: graph.agent.as_ref().map(Masked),
        resources: graph.resources().map(Masked).collect(),
        warnings: Masked(&graph.warnings),
    }
}

/// A part of a document, masked when it is written.
struct Masked<'a, T: ?Sized>(&'a T);

impl<T: serde::Serialize + ?Sized> serde::Serialize for Masked<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(self.0).map_err(serde::ser::Error::custom)?;
        crate::secrets::mask_document(&mut value);
        value.serialize(serializer)
    }
}

/// The objects of each component as one YAML file, and a kustomization listing them.
pub fn render_files(graph: &DesiredGraph) -> BTreeMap<String, String> {
    if crate::plan::fleet::is_fleet(graph) && graph.resources().any(|r| r.spec["node"].is_string()) {
        return super::fleet::render_files(graph);
    }
    files_of(graph.resources().filter(|r| r.kind == ResourceKind::Object), "")
}

/// One YAML file per component of these objects and a kustomization listing them (its
/// `header` lines first, as comments).
pub fn files_of<'a>(
    objects: impl Iterator<Item = &'a crate::compile::Resource>,
    header: &str,
) -> BTreeMap<String, String> {
    let mut by_component: BTreeMap<String, Vec<&serde_json::Value>> = BTreeMap::new();
    for r in objects {
        let name = r.component.clone().unwrap_or_else(|| "k3d-gpu".into());
        by_component.entry(name).or_default().push(&r.spec);
    }
    let mut files = BTreeMap::new();
    for (component, objects) in &by_component {
        let mut text = format!("# {component}: rendered by k3d-gpu; edit k3dgpu.toml, not this file\n");
        for object in objects {
            text.push_str("---\n");
            text.push_str(&serde_saphyr::to_string(object).expect("a JSON value serialises as YAML"));
        }
        files.insert(format!("{component}.yaml"), text);
    }
    let mut kustomization = header.to_string();
    kustomization.push_str("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n");
    for name in files.keys() {
        kustomization.push_str(&format!("  - {name}\n"));
    }
    files.insert("kustomization.yaml".into(), kustomization);
    files
}

/// Whether a rendered file holds a Secret (its data is in clear: `render` writes what
/// GitOps applies).
fn holds_secret(text: &str) -> bool {
    text.lines().any(|l| l.trim_end() == "kind: Secret")
}

pub fn render(global: &Global, args: &RenderArgs) -> Result<u8> {
    let graph = super::inputs::compile(global, &super::load_config(global)?)?.graph;
    let files = if args.flux { super::flux::files(&graph)? } else { render_files(&graph) };
    // Only about what it writes: an image no file deploys (the node image's bases) is not
    // render's to pin.
    let rendered = |image: &str| files.values().any(|text| text.contains(image));
    print_warnings(graph.warnings.iter().filter(|w| crate::compile::warnings::unlocked_image(w).is_none_or(&rendered)));
    let out = &args.out;
    let write_err = |e: std::io::Error| Error::Output { path: out.display().to_string(), reason: e.to_string() };
    std::fs::create_dir_all(out).map_err(write_err)?;
    for (name, text) in &files {
        // An existing cluster's render has a directory per node group.
        if let Some((dir, _)) = name.rsplit_once('/') {
            let dir = out.join(dir);
            // A link where a group's directory goes would take the files elsewhere.
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::Output {
                    path: dir.display().to_string(),
                    reason: "is a symbolic link; render writes only into directories of its own".into(),
                });
            }
            std::fs::create_dir_all(&dir).map_err(write_err)?;
        }
        // A link already at the name is replaced, never written through; a file holding a
        // Secret is its owner's alone.
        let mode = if holds_secret(text) { crate::output_file::PRIVATE } else { crate::output_file::PUBLIC };
        crate::output_file::write(&out.join(name), text.as_bytes(), mode).map_err(write_err)?;
    }
    // Files a previous render wrote for a component that is gone: say so, never delete.
    if let Ok(entries) = std::fs::read_dir(out) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && !files.contains_key(&name) {
                let path = entry.path().display().to_string();
                crate::stderrln!("note: {} is not part of this render (left in place)", crate::escape::one_line(&path));
            }
        }
    }
    crate::stderrln!("wrote {} files to {}", files.len(), out.display());
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    /// Masked a resource at a time is masked as the whole document was, byte for byte, on a
    /// graph with a secret in it.
    #[test]
    fn masking_per_resource_is_masking_the_document() {
        use crate::compile::{Change, DesiredGraph, Resource, ResourceKind, Warning};
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"token": "c2VjcmV0"}});
        let pod = serde_json::json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "a", "args": ["--token", "abc", "--url=https://u:pw@h/x"], "env": [{"name": "HF_TOKEN", "value": "hf"}]}]}}}});
        let resource = |id: &str, spec: serde_json::Value| Resource {
            id: id.into(),
            kind: ResourceKind::Object,
            change: Change::InPlace,
            component: Some("c".into()),
            spec,
            depends_on: Vec::new(),
        };
        let warnings = vec![Warning { code: "w".into(), text: "pull https://user:pw@example.com/x".into(), key: None }];
        let graph =
            DesiredGraph::build(vec![resource("k8s/a", secret), resource("k8s/b", pod)], warnings, None).unwrap();
        let mut whole: serde_json::Value = serde_json::from_slice(&graph.to_json()).unwrap();
        crate::secrets::mask_document(&mut whole);
        let printed = crate::canonical::to_bytes(&super::masked(&graph));
        assert_eq!(String::from_utf8(printed).unwrap(), String::from_utf8(crate::canonical::to_bytes(&whole)).unwrap());
        assert!(!String::from_utf8(crate::canonical::to_bytes(&super::masked(&graph))).unwrap().contains("c2VjcmV0"));
    }
}
