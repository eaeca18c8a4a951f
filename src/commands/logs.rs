//! `k3d-gpu logs [COMPONENT]`: the server node's log, or a catalog component's pods' logs.
//! With --json, the same text in one `k3d-gpu.logs/v1` object. Exit 2 for an unknown
//! component, a missing cluster or an unreachable engine or API.

use crate::cli::{Global, LogsArgs};
use crate::error::{EXIT_OK, Error, Result};

/// `logs --json`.
pub const SCHEMA: &str = "k3d-gpu.logs/v1";

pub fn run(global: &Global, args: &LogsArgs) -> Result<u8> {
    if global.json && args.follow {
        return Err(Error::Usage {
            message: "--follow prints the log as it grows; --json prints it once, as one document".into(),
            help: Some("give one of them".into()),
        });
    }
    if !global.json {
        return print(global, args, &mut std::io::stdout().lock());
    }
    let mut text = Vec::new();
    print(global, args, &mut text)?;
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        schema: &'static str,
        /// `null`: the server node's log.
        component: Option<&'a str>,
        /// As the text output prints it (headers per container, escaped).
        text: String,
    }
    let doc = Doc { schema: SCHEMA, component: args.component.as_deref(), text: String::from_utf8_lossy(&text).into() };
    super::print_bytes(&crate::canonical::to_bytes(&doc));
    Ok(EXIT_OK)
}

/// The log(s) written to `stdout`.
fn print(global: &Global, args: &LogsArgs, stdout: &mut dyn std::io::Write) -> Result<u8> {
    let inputs = super::load_config(global)?;
    super::fleet::k3d_only(
        &inputs,
        "logs",
        "read a component's pods with `kubectl --context {context} -n <namespace> logs -l app.kubernetes.io/managed-by=k3d-gpu`",
    )?;
    let cluster = inputs.config.cluster.name.clone();
    let rt = super::runtime()?;
    match &args.component {
        None => {
            let env = |k: &str| std::env::var(k).ok();
            let endpoint = crate::observe::docker::endpoint(&env, None);
            // A followed log is meant to go on: only that stream is read without the cap.
            let cap = if args.follow { None } else { Some(crate::observe::docker_transport::MAX_ANSWER) };
            let docker = crate::observe::docker::connect_capped(&endpoint, cap).map_err(super::observe_failed)?;
            let container = rt
                .block_on(crate::logs::server_container(&docker, &endpoint, &cluster))
                .map_err(super::observe_failed)?
                .ok_or_else(|| Error::Usage {
                    message: format!("cluster {cluster} has no server node: there is no log to show"),
                    help: Some("`k3d-gpu observe` shows what exists".into()),
                })?;
            rt.block_on(crate::logs::container_log(&docker, &endpoint, &container, args.follow, args.tail, stdout))
                .map_err(super::observe_failed)?;
        }
        Some(component) => {
            let catalog = super::load_catalog(global, &inputs)?;
            if !catalog.components.contains_key(component) {
                let near = crate::suggest::closest(component, catalog.components.keys().map(String::as_str));
                return Err(Error::Usage {
                    message: format!("no component {} in the catalog", crate::escape::quoted(component)),
                    help: Some(match near {
                        Some(n) => format!("did you mean {n}? `k3d-gpu graph` lists the components"),
                        None => "`k3d-gpu graph` lists the components".into(),
                    }),
                });
            }
            if args.follow {
                return Err(Error::Usage {
                    message: "--follow follows the server node's log; a component's pods are shown once".into(),
                    help: Some("drop --follow, or use `kubectl logs -f` on one pod".into()),
                });
            }
            let kubeconfig = super::plan::kubeconfig_path();
            let context = crate::observe::kubernetes::context_name(&cluster);
            rt.block_on(async {
                let client = crate::observe::kubernetes::client(&kubeconfig, &cluster).await?;
                let pods = crate::logs::component_pods(client.clone(), &context, component).await?;
                if pods.is_empty() {
                    crate::stderrln!("component {component}: no pods in cluster {cluster}");
                }
                crate::logs::pod_logs(client, &context, &pods, args.tail, stdout).await
            })
            .map_err(super::observe_failed)?;
        }
    }
    Ok(EXIT_OK)
}
