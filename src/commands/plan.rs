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
    Saved(Observed),
    /// Docker and the Kubernetes API, now.
    Live(&'a tokio::runtime::Runtime),
}

pub fn compute(global: &Global, inputs: super::Inputs, observation: Observation) -> Result<Computed> {
    let super::inputs::Compiled { catalog, facts, graph } = super::inputs::compile(global, &inputs)?;
    let observed = match observation {
        Observation::Saved(saved) => saved,
        Observation::Live(rt) => observe_live(&inputs, &catalog, rt)?,
    };
    let digests = Inputs::new(&inputs.config, &facts, &observed, catalog.digest(), &graph.images);
    let plan = plan::plan(&graph, &observed, digests);
    Ok(Computed { plan, graph, inputs })
}

/// `--offline` or `--observed FILE`; `None` means observe the live cluster.
fn observed_file(args: &PlanArgs) -> Result<Option<Observed>> {
    if args.offline {
        return Ok(Some(Observed::nothing()));
    }
    let Some(path) = &args.observed else { return Ok(None) };
    let help = "write one with `k3d-gpu observe --json`";
    super::read_document(path, "observed document", crate::observe::SCHEMA, help).map(Some)
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
pub fn target(inputs: &super::Inputs, catalog: &crate::catalog::Catalog) -> crate::observe::Target {
    let env = |k: &str| std::env::var(k).ok();
    let kubeconfig = kubeconfig_path();
    crate::observe::Target {
        docker: crate::observe::docker::endpoint(&env, None),
        kubeconfig,
        cluster: inputs.config.cluster.name.clone(),
        image: inputs.config.cluster.image.clone(),
        kinds: crate::compile::object_kinds(catalog),
    }
}

fn observe_live(
    inputs: &super::Inputs,
    catalog: &crate::catalog::Catalog,
    rt: &tokio::runtime::Runtime,
) -> Result<Observed> {
    rt.block_on(crate::observe::observe(&target(inputs, catalog))).map_err(super::observe_failed)
}

/// `k3d-gpu observe`.
pub fn observe_command(global: &Global) -> Result<u8> {
    let inputs = super::load_config(global)?;
    let catalog = super::load_catalog(global, &inputs)?;
    let observed = observe_live(&inputs, &catalog, &super::runtime()?)?;
    if global.json {
        super::print_bytes(&observed.masked().to_bytes());
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    match &observed.cluster {
        None => out.push_str(&format!("cluster {}: does not exist\n", inputs.config.cluster.name)),
        Some(c) => {
            out.push_str(&format!("cluster {}: {} node container(s)\n", c.name, c.nodes.len()));
            for n in &c.nodes {
                out.push_str(&format!(
                    "  {:<28} {:<12} {} ({}){}\n",
                    n.name,
                    n.role,
                    n.image,
                    n.image_version.as_deref().unwrap_or("unversioned"),
                    if n.running { "" } else { "  stopped" }
                ));
            }
        }
    }
    if let Some(k) = &observed.kubernetes {
        out.push_str(&format!(
            "kubernetes: {} node(s), {} managed object(s), {} ResourceSlice(s)\n",
            k.nodes.len(),
            k.objects.len(),
            k.resource_slices.len()
        ));
    }
    super::print_bytes(crate::escape::for_terminal(&out).as_bytes());
    Ok(EXIT_OK)
}

pub fn run(global: &Global, args: &PlanArgs) -> Result<u8> {
    let inputs = super::load_config(global)?;
    let plan = match observed_file(args)? {
        Some(saved) => compute(global, inputs, Observation::Saved(saved))?,
        None => compute(global, inputs, Observation::Live(&super::runtime()?))?,
    }
    .plan;
    let bytes = plan.to_bytes();
    let hash = crate::canonical::sha256(&bytes);
    if let Some(path) = &args.out {
        crate::output_file::write(path, &bytes, crate::output_file::PUBLIC)
            .map_err(|e| Error::Output { path: path.display().to_string(), reason: e.to_string() })?;
        eprintln!("wrote the plan to {} ({hash})", path.display());
    }
    if args.hash {
        super::print_bytes(format!("{hash}\n").as_bytes());
    } else if global.json {
        super::print_bytes(&bytes);
    } else {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        super::print_bytes(plan::render::text(&plan, &hash, plan::render::Style { color }).as_bytes());
    }
    Ok(if args.detailed_exitcode && !plan.is_empty() { EXIT_USAGE } else { EXIT_OK })
}
