//! `k3d-gpu logs`: the k3s server container's log (Docker, through bollard) and the logs of a
//! catalog component's pods (Kubernetes, through kube-rs). Effects only. Every line goes
//! through [`crate::escape::assembled`]: a log is written by whatever runs in the cluster.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptions, LogsOptions};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, LogParams};

use crate::compile::COMPONENT_LABEL;
use crate::observe::ObserveError;
use crate::observe::docker::Endpoint;

/// Most bytes of one container's log `logs COMPONENT` reads: the API server is asked to cut
/// there (`limitBytes`), and what it sends past that is not read.
pub const MAX_LOG_BYTES: i64 = 1 << 20;

/// At most `cap` bytes of `stream` as text, and whether it held more (read one byte past the
/// cap, never more, whatever the server sends).
pub(crate) async fn read_capped(stream: impl futures_util::AsyncBufRead, cap: u64) -> std::io::Result<(String, bool)> {
    use futures_util::AsyncReadExt;
    let mut bytes = Vec::new();
    let mut limited = std::pin::pin!(stream.take(cap + 1));
    limited.read_to_end(&mut bytes).await?;
    let cut = bytes.len() as u64 > cap;
    bytes.truncate(cap as usize);
    Ok((String::from_utf8_lossy(&bytes).into_owned(), cut))
}

/// The server node container of `cluster` (k3d's labels), started or not.
pub async fn server_container(
    docker: &Docker,
    endpoint: &Endpoint,
    cluster: &str,
) -> Result<Option<String>, ObserveError> {
    let filters: HashMap<String, Vec<String>> =
        HashMap::from([("label".to_string(), vec![format!("k3d.cluster={cluster}"), "k3d.role=server".to_string()])]);
    let options = ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
    let list = tokio::time::timeout(crate::observe::CALL_TIMEOUT, docker.list_containers(Some(options)))
        .await
        .map_err(|_| docker_error(endpoint, "no answer in time".into()))?
        .map_err(|e| docker_error(endpoint, e.to_string()))?;
    let mut names: Vec<String> =
        list.into_iter().filter_map(|c| c.names?.first().map(|n| n.trim_start_matches('/').to_string())).collect();
    names.sort();
    Ok(names.into_iter().next())
}

fn docker_error(endpoint: &Endpoint, reason: String) -> ObserveError {
    ObserveError::DockerUnreachable { endpoint: endpoint.clone(), reason: format!("container logs: {reason}") }
}

/// Copies the container's log (stdout and stderr, the last `tail` lines, then new ones while
/// `follow`) to `out`, escaped.
pub async fn container_log(
    docker: &Docker,
    endpoint: &Endpoint,
    container: &str,
    follow: bool,
    tail: u32,
    out: &mut dyn Write,
) -> Result<(), ObserveError> {
    let options = LogsOptions { stdout: true, stderr: true, follow, tail: tail.to_string(), ..Default::default() };
    let mut stream = docker.logs(container, Some(options));
    loop {
        // Without --follow a silent engine must not hang the command.
        let next = if follow {
            stream.next().await
        } else {
            match tokio::time::timeout(crate::observe::CALL_TIMEOUT, stream.next()).await {
                Ok(n) => n,
                Err(_) => return Err(docker_error(endpoint, "no answer in time".into())),
            }
        };
        match next {
            None => return Ok(()),
            Some(Ok(chunk)) => {
                let text = String::from_utf8_lossy(&chunk.into_bytes()).into_owned();
                let _ = out.write_all(crate::escape::assembled(&text).as_bytes());
                let _ = out.flush();
            }
            Some(Err(e)) => return Err(docker_error(endpoint, crate::observe::docker_transport::why(&e))),
        }
    }
}

/// One pod of a component, and whether all its containers are ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentPod {
    pub namespace: String,
    pub name: String,
    pub containers: Vec<String>,
    pub ready: bool,
}

/// The pods of a component's workloads (DaemonSets, Deployments, StatefulSets labelled
/// [`COMPONENT_LABEL`]), found by each workload's own selector; pods that are not ready
/// first, since those are the ones a user is looking for.
pub async fn component_pods(client: Client, context: &str, component: &str) -> Result<Vec<ComponentPod>, ObserveError> {
    let err = |what: &str, e: kube::Error| ObserveError::KubernetesUnreachable {
        context: context.into(),
        reason: format!("{what}: {}", crate::observe::kubernetes::said(&e)),
    };
    let by_label = ListParams::default().labels(&format!("{COMPONENT_LABEL}={component}"));
    let mut selectors: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let ds = Api::<DaemonSet>::all(client.clone()).list(&by_label).await.map_err(|e| err("list daemonsets", e))?;
    for o in ds.items {
        selectors.push((o.metadata.namespace.unwrap_or_default(), o.spec.selector.match_labels.unwrap_or_default()));
    }
    let dep = Api::<Deployment>::all(client.clone()).list(&by_label).await.map_err(|e| err("list deployments", e))?;
    for o in dep.items {
        selectors.push((o.metadata.namespace.unwrap_or_default(), o.spec.selector.match_labels.unwrap_or_default()));
    }
    let sts = Api::<StatefulSet>::all(client.clone()).list(&by_label).await.map_err(|e| err("list statefulsets", e))?;
    for o in sts.items {
        selectors.push((o.metadata.namespace.unwrap_or_default(), o.spec.selector.match_labels.unwrap_or_default()));
    }
    let mut pods = Vec::new();
    for (namespace, labels) in selectors {
        // An empty selector would match every pod in the namespace: not this component's.
        if labels.is_empty() {
            continue;
        }
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let list = Api::<Pod>::namespaced(client.clone(), &namespace)
            .list(&ListParams::default().labels(&selector.join(",")))
            .await
            .map_err(|e| err("list pods", e))?;
        for pod in list.items {
            let containers =
                pod.spec.as_ref().map(|s| s.containers.iter().map(|c| c.name.clone()).collect()).unwrap_or_default();
            let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default();
            let ready = !statuses.is_empty() && statuses.iter().all(|s| s.ready);
            pods.push(ComponentPod {
                namespace: namespace.clone(),
                name: pod.metadata.name.unwrap_or_default(),
                containers,
                ready,
            });
        }
    }
    pods.sort_by(|a, b| (a.ready, &a.namespace, &a.name).cmp(&(b.ready, &b.namespace, &b.name)));
    pods.dedup();
    Ok(pods)
}

/// Each container's last `tail` lines, under a `==> namespace/pod/container <==` header.
pub async fn pod_logs(
    client: Client,
    context: &str,
    pods: &[ComponentPod],
    tail: u32,
    out: &mut dyn Write,
) -> Result<(), ObserveError> {
    for pod in pods {
        let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace);
        for container in &pod.containers {
            let params = LogParams {
                container: Some(container.clone()),
                tail_lines: Some(i64::from(tail)),
                // Lines count, not bytes: one endless line must not fill memory.
                limit_bytes: Some(MAX_LOG_BYTES),
                ..Default::default()
            };
            let failed = |e: String| ObserveError::KubernetesUnreachable {
                context: context.into(),
                reason: format!("log of {}/{}: {e}", pod.namespace, pod.name),
            };
            let stream = api.log_stream(&pod.name, &params).await.map_err(|e| failed(e.to_string()))?;
            let (text, cut) = read_capped(stream, MAX_LOG_BYTES as u64).await.map_err(|e| failed(e.to_string()))?;
            let state = if pod.ready { "" } else { " (not ready)" };
            let header = format!("==> {}/{}/{}{state} <==\n", pod.namespace, pod.name, container);
            let _ = out.write_all(crate::escape::assembled(&header).as_bytes());
            let _ = out.write_all(crate::escape::assembled(&text).as_bytes());
            if !text.is_empty() && !text.ends_with('\n') {
                let _ = out.write_all(b"\n");
            }
            if cut {
                let note = format!(
                    "… (cut at {} KiB: the server sent more, although it was asked for no more; `kubectl logs` shows the rest)\n",
                    MAX_LOG_BYTES >> 10
                );
                let _ = out.write_all(note.as_bytes());
            }
        }
    }
    Ok(())
}
