//! `k3d-gpu test`, the effects, through kube-rs: the nodes' allocatable, whether a
//! RuntimeClass exists, and one smoke pod's life — created (POST), watched until it finishes
//! (or cannot: unschedulable, an image that does not pull, a container that cannot start),
//! its log read with a cap, and deleted with a uid precondition. It only ever deletes a pod
//! that carries [`super::LABEL`] with its own name.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams, Preconditions, WatchEvent, WatchParams};
use serde_json::Value;

use super::{LABEL, NAMESPACE, Outcome};
use crate::observe::ObserveError;
use crate::observe::kubernetes::said;

fn unreachable(context: &str, what: &str, e: &kube::Error) -> ObserveError {
    ObserveError::KubernetesUnreachable { context: context.into(), reason: format!("{what}: {}", said(e)) }
}

/// Each node's allocatable (name → resource → quantity).
pub async fn allocatable(
    client: &Client,
    context: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, ObserveError> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| unreachable(context, "list nodes", &e))?;
    Ok(nodes
        .items
        .into_iter()
        .map(|n| {
            let alloc = n.status.and_then(|s| s.allocatable).unwrap_or_default();
            (n.metadata.name.unwrap_or_default(), alloc.into_iter().map(|(k, v)| (k, v.0)).collect())
        })
        .collect())
}

/// Whether the cluster has the RuntimeClass `name`.
pub async fn has_runtime_class(client: &Client, context: &str, name: &str) -> Result<bool, ObserveError> {
    Api::<RuntimeClass>::all(client.clone())
        .get_opt(name)
        .await
        .map(|o| o.is_some())
        .map_err(|e| unreachable(context, "get runtimeclass", &e))
}

/// Waiting reasons a pod with restartPolicy Never does not recover from by itself.
const STUCK: [&str; 6] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// What `pod` shows now, and whether it is over (finished, or stuck for good).
fn read(pod: &Pod) -> (Outcome, bool) {
    let status = pod.status.clone().unwrap_or_default();
    let mut o = Outcome { phase: status.phase.clone().unwrap_or_default(), ..Outcome::default() };
    let mut over = matches!(o.phase.as_str(), "Succeeded" | "Failed");
    for c in status.conditions.unwrap_or_default() {
        if c.type_ == "PodScheduled" && c.status == "False" {
            let message = c.message.unwrap_or_else(|| c.reason.clone().unwrap_or_default());
            // The scheduler retries, but a device held by another pod stays held.
            over |= message.contains("Insufficient");
            o.unschedulable = Some(message);
        }
    }
    for cs in status.container_statuses.unwrap_or_default() {
        let Some(state) = cs.state else { continue };
        if let Some(w) = state.waiting
            && let Some(reason) = w.reason
        {
            over |= STUCK.contains(&reason.as_str());
            o.reason = Some(match w.message {
                Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                _ => reason,
            });
        }
        if let Some(t) = state.terminated {
            o.exit_code = Some(t.exit_code);
            if let Some(reason) = t.reason.filter(|r| r != "Completed") {
                o.reason = Some(match t.message {
                    Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                    _ => reason,
                });
            }
        }
    }
    (o, over)
}

/// Runs one smoke pod to its end (or `deadline`) and deletes it.
pub async fn run_pod(
    client: &Client,
    watcher: &Client,
    context: &str,
    manifest: &Value,
    deadline: Duration,
) -> Result<Outcome, ObserveError> {
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    // A pod of an earlier run that did not finish: ours (our label, its own name) is removed;
    // anyone else's is left alone and named.
    if let Some(old) = api.get_opt(&name).await.map_err(|e| unreachable(context, "get pod", &e))? {
        let ours = old.metadata.labels.as_ref().and_then(|l| l.get(LABEL)) == Some(&name);
        if !ours {
            return Ok(Outcome {
                refused: Some(format!(
                    "a pod {NAMESPACE}/{name} exists that k3d-gpu test did not create; it is left alone"
                )),
                ..Outcome::default()
            });
        }
        delete(&api, &name, old.metadata.uid.clone()).await;
        let gone = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(_)) = api.get_opt(&name).await {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        if gone.is_err() {
            return Ok(Outcome {
                refused: Some(format!("the pod {NAMESPACE}/{name} of an earlier run is still terminating")),
                ..Outcome::default()
            });
        }
    }
    let pod: Pod = match serde_json::from_value(manifest.clone()) {
        Ok(p) => p,
        Err(e) => {
            return Ok(Outcome { refused: Some(format!("the manifest is not a Pod: {e}")), ..Outcome::default() });
        }
    };
    let created = match api.create(&PostParams::default(), &pod).await {
        Ok(p) => p,
        Err(kube::Error::Api(status)) => {
            return Ok(Outcome { refused: Some(status.message.clone()), ..Outcome::default() });
        }
        Err(e) => return Err(unreachable(context, "create pod", &e)),
    };
    let uid = created.metadata.uid.clone();
    let (mut outcome, mut over) = read(&created);
    if !over {
        let watch_api = Api::<Pod>::namespaced(watcher.clone(), NAMESPACE);
        let selector = format!("{LABEL}={name}");
        let waited = tokio::time::timeout(deadline, async {
            loop {
                let params = WatchParams::default().labels(&selector).timeout(290);
                let Ok(stream) = watch_api.watch(&params, "0").await else {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                };
                let mut stream = stream.boxed();
                while let Some(Ok(event)) = stream.next().await {
                    match event {
                        WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                            let (o, done) = read(&p);
                            outcome = o;
                            if done {
                                return;
                            }
                        }
                        WatchEvent::Deleted(_) => {
                            outcome.reason = Some("the pod was deleted while it ran".into());
                            return;
                        }
                        _ => {}
                    }
                }
            }
        })
        .await;
        over = waited.is_ok();
        outcome.timed_out = !over;
    }
    // The log, when a container ran (a pod that never started has none).
    let params = LogParams {
        container: Some("probe".into()),
        limit_bytes: Some(crate::logs::MAX_LOG_BYTES),
        ..LogParams::default()
    };
    let ran = outcome.exit_code.is_some() || matches!(outcome.phase.as_str(), "Succeeded" | "Failed" | "Running");
    if ran
        && let Ok(stream) = api.log_stream(&name, &params).await
        && let Ok((text, cut)) = crate::logs::read_capped(stream, crate::logs::MAX_LOG_BYTES as u64).await
    {
        outcome.log = text;
        outcome.log_cut = cut;
    }
    delete(&api, &name, uid).await;
    Ok(outcome)
}

/// Deletes our pod at once, only that very object (uid precondition); a failure is said on
/// stderr and the pod is left for the next run to remove.
async fn delete(api: &Api<Pod>, name: &str, uid: Option<String>) {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions { uid, resource_version: None }),
        ..DeleteParams::default()
    };
    if let Err(e) = api.delete(name, &params).await {
        eprintln!("note: could not delete pod {NAMESPACE}/{name}: {}", said(&e));
    }
}
