//! `k3d-gpu audit`: reads the running cluster (or a saved `--observed` document), applies the
//! rules of [`crate::audit`] and prints each finding with its fix. Exit 0 pass, 1 fail, 2 bad
//! input (no such cluster, unreadable document, unreachable engine or API).

use crate::audit::{AuditObserved, OBSERVED_SCHEMA};
use crate::cli::{AuditArgs, Global};
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};

pub fn run(global: &Global, args: &AuditArgs) -> Result<u8> {
    let (observed, catalog) = read(global, args.observed.as_deref())?;
    if args.observe {
        super::print_bytes(&crate::canonical::to_bytes(&observed));
        return Ok(EXIT_OK);
    }
    let audit = crate::audit::audit(&observed, &catalog.images);
    if global.json {
        super::print_bytes(&crate::canonical::to_bytes(&audit));
    } else {
        super::print_bytes(crate::audit::render(&audit).as_bytes());
    }
    Ok(if audit.passed { EXIT_OK } else { EXIT_FAILED })
}

/// What the audit reads: the saved document, else the live cluster; and the catalog whose
/// locks say which images are pinned. Shared with the MCP server.
pub(crate) fn read(
    global: &Global,
    saved: Option<&std::path::Path>,
) -> Result<(AuditObserved, crate::catalog::Catalog)> {
    let inputs = super::load_config(global)?;
    if saved.is_none() {
        super::fleet::k3d_only(
            &inputs,
            "audit",
            "audit reads a k3d cluster's containers and ports; on an existing cluster check its nodes yourself, or audit a saved observation with --observed FILE",
        )?;
    }
    let catalog = super::load_catalog(global, &inputs)?;
    let observed: AuditObserved = match saved {
        Some(path) => super::read_document(
            path,
            "audit observation",
            OBSERVED_SCHEMA,
            "write one with `k3d-gpu audit --observe`",
        )?,
        None => {
            let env = |k: &str| std::env::var(k).ok();
            let endpoint = crate::observe::docker::endpoint(&env, None);
            let cluster = inputs.config.cluster.name.clone();
            let rt = super::runtime()?;
            let kubeconfig = super::plan::kubeconfig_path();
            rt.block_on(crate::audit::read::read(&endpoint, &kubeconfig, &cluster))
                .map_err(super::observe_failed)?
                .ok_or_else(|| Error::Usage {
                    message: format!("cluster {cluster} does not exist: there is nothing to audit"),
                    help: Some(
                        "create it with `k3d-gpu plan` and `k3d-gpu apply`, or audit a saved one with --observed FILE"
                            .into(),
                    ),
                })?
        }
    };
    Ok((observed, catalog))
}
