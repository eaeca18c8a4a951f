//! `k3d-gpu plan`: compile, observe (or read a saved observation), diff, print, hash.

use std::io::IsTerminal;

use crate::cli::{Global, PlanArgs};
use crate::error::{EXIT_OK, EXIT_USAGE, Error, Result};
use crate::observe::Observed;
use crate::plan::{self, Inputs, Plan};

/// Everything `plan` and `apply` compute from the inputs.
pub struct Computed {
    pub plan: Plan,
    pub graph: crate::compile::DesiredGraph,
    pub inputs: super::Inputs,
}

/// Where the plan's picture of the cluster comes from.
pub enum Observation<'a> {
    /// `--observed FILE` or `--offline`.
    Saved(Box<Observed>),
    /// Docker and the Kubernetes API, now.
    Live(&'a tokio::runtime::Runtime),
}

/// The plan these inputs give, recording the options it was made with (`plan::MadeFrom`).
pub fn compute(global: &Global, inputs: super::Inputs, observation: Observation) -> Result<Computed> {
    let compiled = super::inputs::compile(global, &inputs)?;
    let mut computed = compute_compiled(inputs, compiled, observation)?;
    computed.plan.inputs.made_from = super::made_from::record(global);
    Ok(computed)
}

/// [`compute`] from inputs already compiled (a caller that needs the facts or the graph
/// first, as `report` does, reads and compiles them once).
pub fn compute_compiled(
    inputs: super::Inputs,
    compiled: super::inputs::Compiled,
    observation: Observation,
) -> Result<Computed> {
    if !compiled.fleet.is_empty() {
        return super::fleet::compute(inputs, compiled, observation);
    }
    let super::inputs::Compiled { catalog, facts, mut graph, source, .. } = compiled;
    let observed = match observation {
        Observation::Saved(saved) => *saved,
        Observation::Live(rt) => {
            let image = graph.get(crate::compile::NODE_IMAGE_ID).and_then(|r| r.spec["reference"].as_str());
            observe_live(&inputs, &catalog, image.unwrap_or_default(), rt)?
        }
    };
    // Compiled again where the cluster as observed changes what the config gives: a prebuilt
    // image's k3s release label (a build says its own version, from K3S_TAG), and the
    // accelerators other workloads hold, which the agent is placed around.
    let held = match (&inputs.config.agent, &observed.kubernetes) {
        (Some(_), Some(k)) => crate::compile::held::Held::from_observed(k),
        _ => Default::default(),
    };
    if let Some(source) = source {
        let prebuilt = matches!(source, crate::node_image::Source::Prebuilt { .. });
        let labelled = source.with_observed(&observed);
        let relabelled =
            prebuilt && matches!(&labelled, crate::node_image::Source::Prebuilt { k3s_version: Some(_), .. });
        if relabelled || !held.is_empty() {
            graph = crate::compile::compile_against(&inputs.config, &facts, &catalog, &labelled, &held)
                .map_err(|errors| Error::Invalid(super::inputs::compile_diagnostics(&inputs, errors)))?;
        }
    }
    let digests = Inputs::new(&inputs.config, &facts, &observed, catalog.digest(), &graph);
    let plan = plan::plan_owned(&graph, observed, digests);
    Ok(Computed { plan, graph, inputs })
}

/// `--offline` or `--observed FILE`; `None` means observe the live cluster.
/// What a plan compares against when it is not the live cluster: nothing (`offline`), or a
/// saved observed/v1 document. `None`: the live cluster. Shared with the MCP `plan` tool.
pub(crate) fn observed_file(offline: bool, observed: Option<&std::path::Path>) -> Result<Option<Observed>> {
    if offline {
        return Ok(Some(Observed::nothing()));
    }
    let Some(path) = observed else { return Ok(None) };
    let help = "write one with `k3d-gpu observe --json`";
    super::read_document(path, "observed document", crate::observe::SCHEMA, help).map(Some)
}

/// A live plan that cannot reach Docker or the API server says how to plan without them
/// (`how`: `--offline` for the CLI, the MCP tool's argument for it). Only a plan has that way
/// out, so apply's errors do not name it.
pub(crate) fn offline_hint(e: Error, how: &str) -> Error {
    match e {
        Error::Unreachable { message, help } => Error::Unreachable {
            message,
            help: Some(format!("{}; or plan without them: {how}", help.unwrap_or_default())),
        },
        e => e,
    }
}

/// KUBECONFIG's first file, else ~/.kube/config.
pub fn kubeconfig_path() -> std::path::PathBuf {
    let env = |k: &str| std::env::var(k).ok();
    env("KUBECONFIG")
        .and_then(|v| v.split(':').find(|p| !p.is_empty()).map(std::path::PathBuf::from))
        .or_else(|| env("HOME").map(|h| std::path::PathBuf::from(h).join(".kube/config")))
        .unwrap_or_else(|| ".kube/config".into())
}

/// Where to look for this config's cluster: Docker from the environment, the kubeconfig
/// from KUBECONFIG (its first file) or ~/.kube/config, and every kind a plan can hold.
pub fn target(inputs: &super::Inputs, catalog: &crate::catalog::Catalog, image: &str) -> crate::observe::Target {
    let env = |k: &str| std::env::var(k).ok();
    let kubeconfig = kubeconfig_path();
    crate::observe::Target {
        docker: crate::observe::docker::endpoint(&env, None),
        kubeconfig,
        cluster: inputs.config.cluster.name.clone(),
        image: image.to_string(),
        kinds: crate::compile::object_kinds(catalog),
    }
}

fn observe_live(
    inputs: &super::Inputs,
    catalog: &crate::catalog::Catalog,
    image: &str,
    rt: &tokio::runtime::Runtime,
) -> Result<Observed> {
    rt.block_on(crate::observe::observe(&target(inputs, catalog, image))).map_err(super::observe_failed)
}

/// What `observe` sees: Docker's side, and the Kubernetes side or why it could not be read
/// (the Docker side stands on its own: a missing kubeconfig context still shows the nodes).
/// Unmasked; what is printed goes through `Observed::masked`. Shared with the MCP server.
pub(crate) fn observe_value(
    global: &Global,
) -> Result<(super::Inputs, Observed, Option<crate::observe::ObserveError>)> {
    let inputs = super::load_config(global)?;
    let catalog = super::load_catalog(global, &inputs)?;
    if super::fleet::is_fleet(&inputs) {
        // An existing cluster: the Kubernetes side alone, through the config's context.
        let (observed, missing) = super::fleet::observe_value(&inputs, &catalog)?;
        return Ok((inputs, observed, missing));
    }
    let image = super::inputs::node_image_reference(&inputs, &catalog)?;
    let rt = super::runtime()?;
    let target = target(&inputs, &catalog, &image);
    let (cluster, node_image) = rt.block_on(crate::observe::observe_docker(&target)).map_err(super::observe_failed)?;
    let (kubernetes, missing) = match rt.block_on(crate::observe::observe_kubernetes(&target, cluster.as_ref())) {
        Ok(k) => (k, None),
        Err(e) => (None, Some(e)),
    };
    let observed =
        Observed { schema: crate::observe::SCHEMA.into(), cluster, kubernetes, node_image: Some(node_image) };
    Ok((inputs, observed, missing))
}

/// `k3d-gpu observe`.
pub fn observe_command(global: &Global) -> Result<u8> {
    let (inputs, observed, missing) = observe_value(global)?;
    if global.json {
        // A document without its Kubernetes half would read as "no objects" to a later
        // `plan --observed`, so none is printed then.
        if let Some(e) = missing {
            return Err(Error::Refused { help: Some(e.help()), message: format!("not observed: {e}") });
        }
        super::print_bytes(&observed.masked().to_bytes());
        return Ok(EXIT_OK);
    }
    if super::fleet::is_fleet(&inputs) {
        if let Some(e) = missing {
            return Err(Error::Refused { help: Some(e.help()), message: format!("not observed: {e}") });
        }
        super::print_bytes(crate::escape::assembled(&super::fleet::observe_text(&inputs, &observed)).as_bytes());
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    match &observed.cluster {
        None => out.push_str(&format!("cluster {}: does not exist\n", inputs.config.cluster.name)),
        Some(c) => {
            out.push_str(&format!("cluster {}: {} node container(s)\n", c.name, c.nodes.len()));
            for n in &c.nodes {
                out.push_str(&format!(
                    "  {} {:<12} {} ({}){}\n",
                    crate::table::pad(&n.name, 28),
                    n.role,
                    n.image,
                    n.image_version.as_deref().unwrap_or("unversioned"),
                    if n.running { "" } else { "  stopped" }
                ));
            }
        }
    }
    if let Some(i) = &observed.node_image {
        let state = match (i.present, &i.build_inputs) {
            (false, _) => "not in the local engine".to_string(),
            (true, Some(digest)) => format!("present, build inputs {digest}"),
            (true, None) => "present (not built by k3d-gpu)".to_string(),
        };
        out.push_str(&format!("node image {}: {state}\n", i.reference));
    }
    if let Some(k) = &observed.kubernetes {
        out.push_str(&format!(
            "kubernetes: {} node(s), {} managed object(s), {} ResourceSlice(s)\n",
            k.nodes.len(),
            k.objects.len(),
            k.resource_slices.len()
        ));
    }
    if let Some(e) = missing {
        out.push_str("kubernetes: not observed\n");
        super::print_bytes(crate::escape::assembled(&out).as_bytes());
        return Err(Error::Refused { help: Some(e.help()), message: format!("not observed: {e}") });
    }
    super::print_bytes(crate::escape::assembled(&out).as_bytes());
    Ok(EXIT_OK)
}

pub fn run(global: &Global, args: &PlanArgs) -> Result<u8> {
    if let Some(path) = &args.out {
        super::check_out_file(path)?;
    }
    let inputs = super::load_config(global)?;
    let plan = match observed_file(args.offline, args.observed.as_deref())? {
        Some(saved) => compute(global, inputs, Observation::Saved(Box::new(saved)))?,
        None => {
            compute(global, inputs, Observation::Live(&super::runtime()?)).map_err(|e| offline_hint(e, "--offline"))?
        }
    }
    .plan;
    // Written as it is made, never whole in memory (a plan of 100k deletes is 67 MB).
    let mut hash = None;
    if let Some(path) = &args.out {
        hash = Some(super::write_out_with(path, crate::output_file::PUBLIC, |file| plan.write_to(file))?);
    }
    if args.hash {
        super::print_bytes(format!("{}\n", hash.clone().unwrap_or_else(|| plan.hash())).as_bytes());
    } else if global.json {
        super::print_with(|out| plan.print_to(out));
    } else {
        let hash = hash.clone().unwrap_or_else(|| plan.hash());
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        super::print_bytes(plan::render::text(&plan, &hash, plan::render::Style { color }).as_bytes());
    }
    // Said once the plan is printed (stdout is flushed by then), so on a terminal it is the
    // last line, below the hash it repeats.
    if let (Some(path), Some(written)) = (&args.out, &hash) {
        crate::stderrln!("wrote the plan to {} ({written})", path.display());
    }
    let status = if args.detailed_exitcode && !plan.is_empty() { EXIT_USAGE } else { EXIT_OK };
    // The process ends with this command: a plan of 100k objects freed a map node at a time
    // was a tenth of the run, to give memory back to a process about to exit.
    std::mem::forget(plan);
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offline_hint_follows_the_kind_of_error_not_its_words() {
        let unreachable = Error::Unreachable { message: "engine gone".into(), help: Some("start dockerd".into()) };
        let hinted = offline_hint(unreachable, "--offline");
        assert!(
            matches!(&hinted, Error::Unreachable { help: Some(h), .. } if h == "start dockerd; or plan without them: --offline")
        );
        assert_eq!(hinted.exit_code(), crate::error::EXIT_USAGE);
        // A usage error whose text happens to read like one is left alone.
        let usage = Error::Usage { message: "cannot reach the moon".into(), help: None };
        assert!(matches!(offline_hint(usage, "--offline"), Error::Usage { help: None, .. }));
    }
}
