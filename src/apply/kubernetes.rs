//! The Kubernetes provider: server-side apply with field manager `k3d-gpu`, deletes of
//! objects that carry our managed-by label only, and node labels/annotations on every node
//! (with the annotation that records which labels are ours).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::error::{ApplyError, KubeError};
use crate::compile::MANAGED_BY;
use crate::observe::MANAGED_LABELS_ANNOTATION;
use crate::observe::resources::CrdPlurals;

pub const FIELD_MANAGER: &str = crate::observe::managed::MANAGER;

/// How long to wait for a just-created cluster's API server to answer.
const API_READY: Duration = Duration::from_secs(120);

/// The API of `object`'s kind, its name, and whether the server is known to serve the kind
/// now; `None` for the API when the server does not serve it. The URL's scope is the kind's
/// (`observe::resources`: built in, a CRD's, or discovery, the same source as the plural),
/// never inferred from whether the manifest names a namespace: a namespaced object without
/// one is refused here (compile refuses it first), and a cluster-scoped kind's namespace is
/// ignored, as the API server ignores it.
async fn api_for(
    client: &Client,
    object: &Value,
    crds: &CrdPlurals,
) -> Result<(Option<(Api<DynamicObject>, bool)>, String), ApplyError> {
    let api_version = object["apiVersion"].as_str().ok_or("object without apiVersion")?;
    let kind = object["kind"].as_str().ok_or("object without kind")?;
    let name = object["metadata"]["name"].as_str().ok_or("object without metadata.name")?.to_string();
    let served = patient(|| crate::observe::resources::resource(client, api_version, kind, crds))
        .await
        .map_err(|e| ApplyError::kube(format!("discovery of {kind}"), e))?;
    let Some(served) = served else { return Ok((None, name)) };
    let api = match (served.namespaced, object["metadata"]["namespace"].as_str()) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &served.resource),
        (true, None) => {
            return Err(ApplyError::Malformed(format!(
                "{kind} {name} lives in a namespace, and the object names none"
            )));
        }
        (false, _) => Api::all_with(client.clone(), &served.resource),
    };
    Ok((Some((api, served.served_now())), name))
}

/// Retries calls that fail because the API server is not up yet (a cluster just created) or
/// is busy: only what [`KubeError::is_retryable`] says can heal. Refused credentials, a
/// failed TLS handshake or a request the server rejects return at once.
async fn patient<T, F, Fut>(mut call: F) -> Result<T, KubeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let start = Instant::now();
    let mut wait = Duration::from_millis(200);
    loop {
        match call().await.map_err(KubeError::from) {
            Err(e) if e.is_retryable() && start.elapsed() < API_READY => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

/// How long to wait for a kind to be served (a CRD applied a moment ago is not Established yet).
const KIND_READY: Duration = Duration::from_secs(60);

/// Server-side apply of one object, forcing ownership of the fields we set. A `create` never
/// takes over an object someone else made: if one exists without our label, it fails.
/// `crds`: the plurals of the CRDs this apply has seen, besides the built-in kinds.
pub async fn apply(client: &Client, object: &Value, create: bool, crds: &CrdPlurals) -> Result<(), ApplyError> {
    let start = Instant::now();
    let ((api, served_now), name) = loop {
        match api_for(client, object, crds).await? {
            (Some(api), name) => break (api, name),
            // The kind is not served yet: its CRD was applied a moment ago.
            (None, _) if start.elapsed() < KIND_READY => tokio::time::sleep(Duration::from_millis(500)).await,
            (None, name) => {
                return Err(ApplyError::NotServed {
                    name,
                    api_version: object["apiVersion"].as_str().unwrap_or_default().to_string(),
                    kind: object["kind"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
    };
    if create {
        match patient(|| api.get_opt(&name)).await {
            Ok(Some(existing))
                if existing.metadata.labels.as_ref().and_then(|l| l.get(MANAGED_BY.0)).map(String::as_str)
                    != Some(MANAGED_BY.1) =>
            {
                return Err(ApplyError::NotOurs { name });
            }
            _ => {}
        }
    }
    // Strict: a field the server's schema lacks (a typo in a user's component, a field of a
    // newer Kubernetes) fails the apply, naming it, instead of being dropped with a warning.
    let params = PatchParams::apply(FIELD_MANAGER).force().validation_strict();
    let patch = Patch::Apply(object);
    loop {
        match patient(|| api.patch(&name, &params, &patch)).await {
            Ok(_) => return Ok(()),
            // The kind is not served yet: its CRD was applied a moment ago. A kind the server
            // is known to serve (built in, or listed by discovery) is not waited for: the 404
            // is about the object's URL, and time will not heal it.
            Err(e) if e.code() == Some(404) && !served_now && start.elapsed() < KIND_READY => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(ApplyError::kube(format!("server-side apply of {name}"), e)),
        }
    }
}

/// How long a replaced object may take to go (a finalizer, such as a PVC's while a pod still
/// mounts it).
const GONE: Duration = Duration::from_secs(120);

/// Replaces an object whose immutable fields changed: deletes the live one (ours, by its
/// uid), waits until the server no longer has it, then creates the desired one. The plan's
/// gate already refused a plan whose object was recreated since it was made.
pub async fn replace(client: &Client, object: &Value, crds: &CrdPlurals) -> Result<(), ApplyError> {
    let (Some((api, _)), name) = api_for(client, object, crds).await? else {
        return Err(ApplyError::NotServed {
            name: object["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            api_version: object["apiVersion"].as_str().unwrap_or_default().to_string(),
            kind: object["kind"].as_str().unwrap_or_default().to_string(),
        });
    };
    if let Some(live) = patient(|| api.get_opt(&name)).await.map_err(|e| ApplyError::kube(format!("get {name}"), e))? {
        let mut live = serde_json::to_value(&live).unwrap_or_default();
        live["apiVersion"] = object["apiVersion"].clone();
        live["kind"] = object["kind"].clone();
        delete(client, &live, crds).await?;
        let start = Instant::now();
        while patient(|| api.get_opt(&name)).await.map_err(|e| ApplyError::kube(format!("get {name}"), e))?.is_some() {
            if start.elapsed() > GONE {
                return Err(ApplyError::TimedOut {
                    what: format!("the deletion of {name} before its replacement"),
                    secs: GONE.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    apply(client, object, true, crds).await
}

/// Deletes an object — only if what we observed carries our managed-by label, and only that
/// very object (its uid), not one recreated under the same name since.
pub async fn delete(client: &Client, observed: &Value, crds: &CrdPlurals) -> Result<(), ApplyError> {
    if observed["metadata"]["labels"][MANAGED_BY.0] != MANAGED_BY.1 {
        return Err(ApplyError::NotManaged);
    }
    // A kind the server no longer serves has no objects left to delete.
    let (Some((api, _)), name) = api_for(client, observed, crds).await? else { return Ok(()) };
    let mut params = DeleteParams::default();
    if let Some(uid) = observed["metadata"]["uid"].as_str() {
        params.preconditions = Some(kube::api::Preconditions { uid: Some(uid.to_string()), resource_version: None });
    }
    match patient(|| api.delete(&name, &params)).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(404) => Ok(()),
        Err(e) => Err(ApplyError::kube(format!("delete {name}"), e)),
    }
}

/// How many times a node's patch is computed again after a conflict.
const ATTEMPTS: usize = 5;

/// One change of a node's metadata: a label (or annotation) set to a value or removed, and
/// whether k3d-gpu claims a label it creates (records it as its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeChange {
    pub label: bool,
    pub key: String,
    pub value: Option<String>,
    pub claim: bool,
}

/// Every change of one node in one merge patch, for an existing cluster: one GET and one
/// PATCH per node, however many labels change. The patch carries the resourceVersion it was
/// computed from, so a concurrent edit of the record (another apply, a person) makes it fail
/// with a conflict and it is computed again rather than losing an entry. A label is claimed
/// only when the node still lacks it at patch time: one someone set between plan and apply
/// stays theirs. A label is removed only where it is recorded as ours.
pub async fn node_changes(client: &Client, node: &str, changes: &[NodeChange]) -> Result<(), ApplyError> {
    node_changes_from(client, node, changes, None).await
}

/// [`node_changes`] starting from `listed`, the node as a list just returned it (its
/// resourceVersion is the precondition of the first patch), so a caller that listed the nodes
/// does not read each one again; after a conflict the node is read afresh.
async fn node_changes_from(
    client: &Client,
    node: &str,
    changes: &[NodeChange],
    mut listed: Option<Node>,
) -> Result<(), ApplyError> {
    let nodes: Api<Node> = Api::all(client.clone());
    for _attempt in 0..ATTEMPTS {
        let current = match listed.take() {
            Some(current) => current,
            None => patient(|| nodes.get(node)).await.map_err(|e| match e.code() {
                Some(404) => ApplyError::NoSuchNode(Some(node.to_string())),
                _ => ApplyError::kube(format!("get node {node}"), e),
            })?,
        };
        let labels = current.metadata.labels.clone().unwrap_or_default();
        let annotations = current.metadata.annotations.clone().unwrap_or_default();
        let mut ours: BTreeSet<String> =
            annotations.get(MANAGED_LABELS_ANNOTATION).map(|v| crate::observe::managed_labels(v)).unwrap_or_default();
        let before = ours.clone();
        let mut patch = json!({ "metadata": { "resourceVersion": current.metadata.resource_version } });
        for c in changes {
            let field = if c.label { "labels" } else { "annotations" };
            if c.label {
                match &c.value {
                    None if !ours.contains(&c.key) => continue,
                    None => {
                        ours.remove(&c.key);
                    }
                    Some(_) if c.claim && !labels.contains_key(&c.key) => {
                        ours.insert(c.key.clone());
                    }
                    Some(_) => {}
                }
            }
            patch["metadata"][field][&c.key] = json!(c.value);
        }
        if ours != before {
            let list = (!ours.is_empty()).then(|| ours.iter().cloned().collect::<Vec<_>>().join(","));
            patch["metadata"]["annotations"][MANAGED_LABELS_ANNOTATION] = json!(list);
        }
        let params = PatchParams::default();
        let merge = Patch::Merge(&patch);
        match patient(|| nodes.patch(node, &params, &merge)).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code() == Some(409) => continue,
            Err(e) => return Err(ApplyError::kube(format!("patch node {node}"), e)),
        }
    }
    Err(ApplyError::NodeKeptChanging { node: node.to_string(), attempts: ATTEMPTS })
}

/// Sets (`Some`) or removes (`None`) a label or annotation on every node of a k3d cluster
/// (`only`: on that node alone, for an existing cluster), each node through [`node_changes`]:
/// the same claim rules and the same resourceVersion precondition, so a concurrent edit of a
/// node's record of our labels is read again, never overwritten.
pub async fn node_metadata(
    client: &Client,
    label: bool,
    key: &str,
    value: Option<&str>,
    claim: bool,
    only: Option<&str>,
) -> Result<(), ApplyError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let all = match only {
        Some(name) => ListParams::default().fields(&format!("metadata.name={name}")),
        None => ListParams::default(),
    };
    let list = patient(|| nodes.list(&all)).await.map_err(|e| ApplyError::kube("list nodes", e))?;
    if list.items.is_empty() {
        return Err(ApplyError::NoSuchNode(only.map(str::to_string)));
    }
    let change = NodeChange { label, key: key.to_string(), value: value.map(str::to_string), claim };
    for node in list.items {
        let name = node.metadata.name.clone().unwrap_or_default();
        // The field selector already asked for it; a server that ignores one must not widen it.
        if only.is_some_and(|o| o != name) {
            continue;
        }
        node_changes_from(client, &name, std::slice::from_ref(&change), Some(node)).await?;
    }
    Ok(())
}
