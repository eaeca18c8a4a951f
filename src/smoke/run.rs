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
use crate::escape::Untrusted;
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
    let mut o = Outcome { phase: status.phase.clone().unwrap_or_default().into(), ..Outcome::default() };
    o.claims = status
        .resource_claim_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.resource_claim_name.clone().map(Untrusted::from))
        .collect();
    let mut over = matches!(o.phase.raw(), "Succeeded" | "Failed");
    for c in status.conditions.unwrap_or_default() {
        if c.type_ == "PodScheduled" && c.status == "False" {
            let message = c.message.unwrap_or_else(|| c.reason.clone().unwrap_or_default());
            // The scheduler retries, but a device held by another pod stays held.
            over |= message.contains("Insufficient") || message.contains("cannot allocate all claims");
            o.unschedulable = Some(message.into());
        }
    }
    for cs in status.container_statuses.unwrap_or_default() {
        let Some(state) = cs.state else { continue };
        if let Some(w) = state.waiting
            && let Some(reason) = w.reason
        {
            over |= STUCK.contains(&reason.as_str());
            o.reason = Some(Untrusted::new(match w.message {
                Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                _ => reason,
            }));
        }
        if let Some(t) = state.terminated {
            o.exit_code = Some(t.exit_code);
            if let Some(reason) = t.reason.filter(|r| r != "Completed") {
                o.reason = Some(Untrusted::new(match t.message {
                    Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                    _ => reason,
                }));
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
    let namespace = namespace_of(manifest);
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let created = match create(&api, context, manifest).await? {
        Ok(pod) => pod,
        Err(refused) => return Ok(refused),
    };
    let uid = created.metadata.uid.clone();
    // Everything after the pod exists (its watch, its claims, its log) ends by `end`, so the
    // pod is deleted whatever the cluster does.
    let end = tokio::time::Instant::now() + deadline;
    let (mut outcome, mut over) = read(&created);
    if !over {
        let selector = format!("{LABEL}={name}");
        over = watch_until(watcher, namespace, &selector, deadline, |p, deleted| {
            if deleted {
                outcome.reason = Some("the pod was deleted while it ran".into());
                return true;
            }
            let (o, done) = read(&p);
            outcome = o;
            done
        })
        .await;
        outcome.timed_out = !over;
    }
    // A DRA pod's claims: the devices the driver allocated, read before the pod (and with it a
    // claim made from a template) goes.
    for claim in outcome.claims.clone() {
        let read = tokio::time::timeout_at(end + LOG_GRACE, allocation(client, namespace, claim.raw()));
        outcome.allocated.extend(read.await.unwrap_or_default());
    }
    finish(&api, &name, uid, &mut outcome, end).await;
    Ok(outcome)
}

/// How long past the deadline the log of a pod that ended at it may still be read: the
/// watch may use the whole deadline, and a pod that finished at its last moment has a log.
const LOG_GRACE: Duration = Duration::from_secs(2);

/// The namespace a manifest names (the smoke pods' when it names none).
fn namespace_of(manifest: &Value) -> &str {
    manifest["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE)
}

/// The ResourceClaims of `namespace`, as resource.k8s.io/v1 serves them.
fn claims_api(client: &Client, namespace: &str) -> Api<kube::api::DynamicObject> {
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
        "resourceclaims",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The devices the driver allocated to claim `name` (its `status.allocation`); none when the
/// claim cannot be read.
pub async fn allocation(client: &Client, namespace: &str, name: &str) -> Vec<Untrusted> {
    match claims_api(client, namespace).get_opt(name).await {
        Ok(Some(claim)) => super::claims::allocated(&serde_json::to_value(&claim).unwrap_or_default()),
        _ => Vec::new(),
    }
}

/// Creates the test's shared claim; `Ok(Err(why))` when the API server refuses it or a claim
/// of that name is someone else's.
pub async fn create_claim(
    client: &Client,
    context: &str,
    manifest: &Value,
) -> Result<Result<(), Untrusted>, ObserveError> {
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let namespace = namespace_of(manifest).to_string();
    let api = claims_api(client, &namespace);
    if let Some(old) = api.get_opt(&name).await.map_err(|e| unreachable(context, "get resourceclaim", &e))? {
        if old.metadata.labels.as_ref().and_then(|l| l.get(LABEL)) != Some(&name) {
            return Ok(Err(Untrusted::new(format!(
                "a ResourceClaim {namespace}/{name} exists that k3d-gpu test did not create; it is left alone"
            ))));
        }
        // An earlier run's: removed, that very object, and waited for (an allocated claim
        // goes only once the pods that reserved it are gone).
        delete_claim(client, &namespace, &name, old.metadata.uid.clone()).await;
        let gone = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(_)) = api.get_opt(&name).await {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        if gone.is_err() {
            return Ok(Err(Untrusted::new(format!(
                "the ResourceClaim {namespace}/{name} of an earlier run is still being deleted"
            ))));
        }
    }
    let object: kube::api::DynamicObject = match serde_json::from_value(manifest.clone()) {
        Ok(o) => o,
        Err(e) => return Ok(Err(Untrusted::new(format!("the manifest is not a ResourceClaim: {e}")))),
    };
    // Server-side apply, as every object k3d-gpu writes (its own field manager: the test's
    // claim is never the plan's).
    let params = kube::api::PatchParams::apply("k3d-gpu-test").validation_strict();
    match api.patch(&name, &params, &kube::api::Patch::Apply(&object)).await {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(status)) => Ok(Err(status.message.clone().into())),
        Err(e) => Err(unreachable(context, "create resourceclaim", &e)),
    }
}

/// Deletes the test's claim `name` (ours only: the caller created it or checked its label),
/// that very object when `uid` is given.
pub async fn delete_claim(client: &Client, namespace: &str, name: &str, uid: Option<String>) {
    let params =
        DeleteParams { preconditions: Some(Preconditions { uid, resource_version: None }), ..DeleteParams::default() };
    if let Err(e) = claims_api(client, namespace).delete(name, &params).await {
        crate::stderrln!("note: could not delete resourceclaim {namespace}/{name}: {}", said(&e));
    }
}

/// Reads the pod's log into `outcome` when a container ran (a pod that never started has
/// none; a Running one's is what it printed so far), by `end` (and [`LOG_GRACE`]): a
/// container that prints a byte every few seconds never ends its log, and each read's own
/// timeout never fires. Then deletes the pod, whatever the read did.
async fn finish(api: &Api<Pod>, name: &str, uid: Option<String>, outcome: &mut Outcome, end: tokio::time::Instant) {
    let ran = outcome.exit_code.is_some() || matches!(outcome.phase.raw(), "Succeeded" | "Failed" | "Running");
    if ran {
        match tokio::time::timeout_at(end + LOG_GRACE, log_of(api, name)).await {
            Ok(Some((text, cut))) => {
                outcome.log = text.into();
                outcome.log_cut = cut;
            }
            Ok(None) => {}
            Err(_) => outcome.log_cut = true,
        }
    }
    delete(api, name, uid).await;
}

/// The probe container's log so far, capped, and whether it was cut; `None` when it cannot
/// be read.
async fn log_of(api: &Api<Pod>, name: &str) -> Option<(String, bool)> {
    let params = LogParams {
        container: Some("probe".into()),
        limit_bytes: Some(crate::logs::MAX_LOG_BYTES),
        ..LogParams::default()
    };
    let stream = api.log_stream(name, &params).await.ok()?;
    crate::logs::read_capped(stream, crate::logs::MAX_LOG_BYTES as u64).await.ok()
}

/// Creates the pod `manifest` describes, after removing one of an earlier run that did not
/// finish: ours (our label, its own name) is removed; anyone else's is left alone and named.
/// `Ok(Err(outcome))`: not created, and why.
async fn create(api: &Api<Pod>, context: &str, manifest: &Value) -> Result<Result<Pod, Outcome>, ObserveError> {
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let refused = |why: String| Ok(Err(Outcome { refused: Some(why.into()), ..Outcome::default() }));
    if let Some(old) = api.get_opt(&name).await.map_err(|e| unreachable(context, "get pod", &e))? {
        let ours = old.metadata.labels.as_ref().and_then(|l| l.get(LABEL)) == Some(&name);
        if !ours {
            return refused(format!(
                "a pod {}/{name} exists that k3d-gpu test did not create; it is left alone",
                namespace_of(manifest)
            ));
        }
        delete(api, &name, old.metadata.uid.clone()).await;
        let gone = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(_)) = api.get_opt(&name).await {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        if gone.is_err() {
            return refused(format!(
                "the pod {}/{name} of an earlier run is still terminating",
                namespace_of(manifest)
            ));
        }
    }
    let pod: Pod = match serde_json::from_value(manifest.clone()) {
        Ok(p) => p,
        Err(e) => return refused(format!("the manifest is not a Pod: {e}")),
    };
    match api.create(&PostParams::default(), &pod).await {
        Ok(p) => Ok(Ok(p)),
        Err(kube::Error::Api(status)) => refused(status.message.clone()),
        Err(e) => Err(unreachable(context, "create pod", &e)),
    }
}

/// Runs a sharing group ([`super::share`]): every pod created, the group watched until all of
/// them are Running at one moment (or none can still join, or `deadline`), each one's log
/// read while it holds its device, and all deleted. The pods hold their devices by sleeping,
/// so a pod that finishes before the others start never ran with them.
pub async fn run_group(
    client: &Client,
    watcher: &Client,
    context: &str,
    group: &str,
    manifests: &[Value],
    deadline: Duration,
) -> Result<super::share::Run, ObserveError> {
    let namespace = manifests.first().map_or(NAMESPACE, namespace_of);
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let started = tokio::time::Instant::now();
    let mut run = super::share::Run::default();
    let mut uids = BTreeMap::new();
    // A failure to create one pod still ends with the ones created deleted.
    let mut failed = None;
    for manifest in manifests {
        let name = manifest["metadata"]["name"].as_str().unwrap_or_default().to_string();
        match create(&api, context, manifest).await {
            Ok(Ok(pod)) => {
                uids.insert(name.clone(), pod.metadata.uid.clone());
                run.outcomes.insert(name, read(&pod).0);
            }
            Ok(Err(refused)) => {
                run.outcomes.insert(name, refused);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    // Each created pod's latest state: whether it is Running, whether it is over.
    let mut now: BTreeMap<String, (bool, bool)> = uids.keys().map(|n| (n.clone(), (false, false))).collect();
    if failed.is_none() && !uids.is_empty() {
        let selector = format!("{}={group}", super::share::GROUP_LABEL);
        watch_until(watcher, namespace, &selector, deadline, |p, deleted| {
            let name = p.metadata.name.clone().unwrap_or_default();
            if !now.contains_key(&name) {
                return false;
            }
            let (mut o, over) = read(&p);
            if deleted {
                o.reason = Some("the pod was deleted while it ran".into());
            }
            // A deleted pod holds nothing any more: it never counts as Running again.
            let running = o.phase.raw() == "Running" && !over && !deleted;
            now.insert(name.clone(), (running, over || deleted));
            run.outcomes.insert(name, o);
            let running_now: Vec<String> = now.iter().filter(|(_, s)| s.0).map(|(n, _)| n.clone()).collect();
            if running_now.len() > run.together.len() {
                run.together = running_now;
            }
            // Every pod together, or every one that is not Running is done for.
            run.together.len() == now.len() || now.values().all(|(running, over)| *running || *over)
        })
        .await;
        // A pod prints its device before it holds it: wait (within the deadline) until each
        // Running pod has said `ready`, so a slow `nvidia-smi` is not read as silence.
        let left = deadline.saturating_sub(started.elapsed());
        let _ = tokio::time::timeout(left, async {
            let running: Vec<String> = now.iter().filter(|(_, s)| s.0).map(|(n, _)| n.clone()).collect();
            for name in running {
                while !log_of(&api, &name).await.is_some_and(|(text, _)| text.lines().any(|l| l == "ready")) {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        })
        .await;
    }
    let end = started + deadline;
    for (name, uid) in uids {
        finish(&api, &name, uid, run.outcomes.entry(name.clone()).or_default(), end).await;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(run),
    }
}

/// Watches the pods `selector` picks in `namespace` until `seen` says it has what it waits
/// for (`true`) or `deadline` passes; a watch that ends or breaks starts again after a breath.
/// `seen` gets each pod as it is now, and whether it was deleted. Whether it ended in time.
async fn watch_until(
    watcher: &Client,
    namespace: &str,
    selector: &str,
    deadline: Duration,
    mut seen: impl FnMut(Pod, bool) -> bool,
) -> bool {
    let api = Api::<Pod>::namespaced(watcher.clone(), namespace);
    tokio::time::timeout(deadline, async {
        loop {
            let params = WatchParams::default().labels(selector).timeout(290);
            if let Ok(stream) = api.watch(&params, "0").await {
                let mut stream = stream.boxed();
                while let Some(Ok(event)) = stream.next().await {
                    let (pod, deleted) = match event {
                        WatchEvent::Added(p) | WatchEvent::Modified(p) => (p, false),
                        WatchEvent::Deleted(p) => (p, true),
                        _ => continue,
                    };
                    if seen(pod, deleted) {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await
    .is_ok()
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
        crate::stderrln!("note: could not delete pod {}/{name}: {}", api_namespace(api), said(&e));
    }
}

/// The namespace an `Api` was made for, for messages.
fn api_namespace(api: &Api<Pod>) -> String {
    api.resource_url().split('/').skip_while(|p| *p != "namespaces").nth(1).unwrap_or(NAMESPACE).to_string()
}
