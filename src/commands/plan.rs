//! `k3d-gpu plan`: compile, observe (or read a saved observation), diff, print, hash.

use std::io::IsTerminal;

use crate::cli::{Global, PlanArgs};
use crate::error::{EXIT_OK, EXIT_USAGE, Error, Result};
use crate::observe::Observed;
use crate::plan::{self, Inputs, Plan};

/// Everything `plan` and `apply` compute from the inputs.
pub fn compute(global: &Global, args: &PlanArgs) -> Result<Plan> {
    let inputs = super::load_config(global)?;
    let catalog = super::load_catalog(global, &inputs)?;
    let facts = super::load_facts(global)?;
    let graph = crate::compile::compile(&inputs.config, &facts, &catalog)
        .map_err(|errors| Error::Invalid(super::inputs::compile_diagnostics(&inputs, errors)))?;
    let observed = observed(args)?;
    let digests = Inputs {
        config: crate::canonical::digest(&inputs.config),
        facts: crate::canonical::digest(&facts),
        observed: crate::canonical::digest(&observed),
        stdlib: catalog.digest(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    Ok(plan::plan(&graph, &observed, digests))
}

fn observed(args: &PlanArgs) -> Result<Observed> {
    if args.offline {
        return Ok(Observed::nothing());
    }
    let Some(path) = &args.observed else {
        return Err(Error::Usage {
            message: "this build plans against a saved observation or none: live observation of Docker and Kubernetes is not in it yet".into(),
            help: Some("use --offline (nothing exists yet) or --observed FILE (an observed/v1 document)".into()),
        });
    };
    let input = |reason: String| Error::Input {
        what: "observed document",
        path: path.display().to_string(),
        reason,
        help: Some("an observed/v1 JSON document".into()),
    };
    let bytes = std::fs::read(path).map_err(|e| input(e.to_string()))?;
    let observed: Observed = serde_json::from_slice(&bytes).map_err(|e| input(e.to_string()))?;
    if observed.schema != crate::observe::SCHEMA {
        return Err(input(format!("schema is {:?}, expected {:?}", observed.schema, crate::observe::SCHEMA)));
    }
    Ok(observed)
}

pub fn run(global: &Global, args: &PlanArgs) -> Result<u8> {
    let plan = compute(global, args)?;
    let bytes = plan.to_bytes();
    let hash = crate::canonical::sha256(&bytes);
    if let Some(path) = &args.out {
        std::fs::write(path, &bytes)
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
