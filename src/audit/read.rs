//! The live read for `audit`: the cluster's published ports (Docker, through bollard), its
//! pods' images and kubelet's pull events (the Kubernetes API, through kube-rs, context
//! `k3d-<cluster>`), and the kubeconfig files' modes. Effects only; the rules are pure.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::ListContainersOptions;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

use super::{AuditObserved, KubeconfigFile, Listener, OBSERVED_SCHEMA, Pull, RunningImage, WebUi};
use crate::observe::docker::Endpoint;
use crate::observe::{CALL_TIMEOUT, ObserveError};

/// Reads everything the rules need. `None` when no container of the cluster exists.
pub async fn read(
    endpoint: &Endpoint,
    kubeconfig: &Path,
    cluster: &str,
) -> Result<Option<AuditObserved>, ObserveError> {
    let docker = crate::observe::docker::connect(endpoint)?;
    let Some(listeners) = listeners(&docker, endpoint, cluster).await? else { return Ok(None) };
    let client = crate::observe::kubernetes::client(kubeconfig, cluster).await?;
    let context = crate::observe::kubernetes::context_name(cluster);
    let (images, open_webui) = pods(client.clone(), &context).await?;
    let pulls = pulls(client, &context).await?;
    Ok(Some(AuditObserved {
        schema: OBSERVED_SCHEMA.into(),
        cluster: cluster.into(),
        listeners,
        images,
        pulls,
        kubeconfigs: kubeconfig_modes(kubeconfig),
        open_webui,
    }))
}

/// Every port binding of the cluster's containers, started or not (HostConfig, not the
/// running state: a stopped node publishes again when it starts). `None`: no such cluster.
pub async fn listeners(
    docker: &Docker,
    endpoint: &Endpoint,
    cluster: &str,
) -> Result<Option<Vec<Listener>>, ObserveError> {
    let unreachable = |what: &str, e: String| ObserveError::DockerUnreachable {
        endpoint: endpoint.clone(),
        reason: format!("{what}: {e}"),
    };
    let filters: HashMap<String, Vec<String>> =
        HashMap::from([("label".to_string(), vec![format!("k3d.cluster={cluster}")])]);
    let options = ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
    let summaries = tokio::time::timeout(CALL_TIMEOUT, docker.list_containers(Some(options)))
        .await
        .map_err(|_| unreachable("list containers", "no answer in time".into()))?
        .map_err(|e| unreachable("list containers", e.to_string()))?;
    if summaries.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for summary in summaries {
        let Some(id) = summary.id else { continue };
        let c = tokio::time::timeout(CALL_TIMEOUT, docker.inspect_container(&id, None))
            .await
            .map_err(|_| unreachable("inspect container", "no answer in time".into()))?
            .map_err(|e| unreachable("inspect container", e.to_string()))?;
        let name = c.name.unwrap_or_default().trim_start_matches('/').to_string();
        let bindings = c.host_config.and_then(|h| h.port_bindings).unwrap_or_default();
        for (container_port, hosts) in bindings {
            for b in hosts.unwrap_or_default() {
                out.push(Listener {
                    container: name.clone(),
                    host_ip: b.host_ip.unwrap_or_default(),
                    host_port: b.host_port.unwrap_or_default(),
                    container_port: container_port.clone(),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.container, &a.container_port, &a.host_ip).cmp(&(&b.container, &b.container_port, &b.host_ip))
    });
    Ok(Some(out))
}

fn api_error(context: &str, what: &str, e: impl std::fmt::Display) -> ObserveError {
    ObserveError::KubernetesUnreachable { context: context.into(), reason: format!("{what}: {e}") }
}

/// Each pod container's image and resolved id, and the Open WebUI containers' WEBUI_AUTH.
async fn pods(client: Client, context: &str) -> Result<(Vec<RunningImage>, Vec<WebUi>), ObserveError> {
    let list =
        Api::<Pod>::all(client).list(&ListParams::default()).await.map_err(|e| api_error(context, "list pods", e))?;
    let (mut images, mut webui) = (Vec::new(), Vec::new());
    for pod in list.items {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = pod.status.unwrap_or_default();
        let statuses = status
            .container_statuses
            .unwrap_or_default()
            .into_iter()
            .chain(status.init_container_statuses.unwrap_or_default());
        for s in statuses {
            images.push(RunningImage {
                container: format!("{ns}/{name}/{}", s.name),
                image: s.image,
                image_id: s.image_id,
            });
        }
        for c in pod.spec.map(|s| s.containers).unwrap_or_default() {
            let is_webui = c.image.as_deref().is_some_and(|i| i.contains("open-webui"));
            if is_webui {
                let auth = c.env.unwrap_or_default().into_iter().find(|e| e.name == "WEBUI_AUTH").and_then(|e| e.value);
                webui.push(WebUi { container: format!("{ns}/{name}/{}", c.name), webui_auth: auth });
            }
        }
    }
    images.sort_by(|a, b| a.container.cmp(&b.container));
    webui.sort_by(|a, b| a.container.cmp(&b.container));
    Ok((images, webui))
}

/// kubelet's Pulled events that pulled ("Successfully pulled image"), not "already present".
async fn pulls(client: Client, context: &str) -> Result<Vec<Pull>, ObserveError> {
    let params = ListParams::default().fields("reason=Pulled");
    let list = Api::<Event>::all(client).list(&params).await.map_err(|e| api_error(context, "list events", e))?;
    let mut out: Vec<Pull> = list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Pulled"))
        .filter_map(|e| {
            let message = e.message?;
            super::pulled(&message).is_some().then(|| Pull {
                object: format!(
                    "{}/{}",
                    e.involved_object.namespace.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default()
                ),
                message,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.object, &a.message).cmp(&(&b.object, &b.message)));
    Ok(out)
}

/// The permission bits of the kubeconfig: `kubeconfig` and every file KUBECONFIG lists, those
/// that exist. (k3d's own per-cluster copy, written only by `k3d kubeconfig write`, is not
/// read.)
pub fn kubeconfig_modes(kubeconfig: &Path) -> Vec<KubeconfigFile> {
    use std::os::unix::fs::PermissionsExt;
    let mut paths = vec![kubeconfig.to_path_buf()];
    if let Ok(list) = std::env::var("KUBECONFIG") {
        paths.extend(list.split(':').filter(|p| !p.is_empty()).map(std::path::PathBuf::from));
    }
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|p| {
            let meta = std::fs::metadata(&p).ok()?;
            Some(KubeconfigFile { path: p.display().to_string(), mode: meta.permissions().mode() & 0o7777 })
        })
        .collect()
}
