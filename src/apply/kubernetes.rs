//! The Kubernetes provider: server-side apply with field manager `k3d-gpu`, deletes of
//! objects that carry our managed-by label only, and node labels/annotations on every node
//! (with the annotation that records which labels are ours).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::compile::MANAGED_BY;
use crate::observe::MANAGED_LABELS_ANNOTATION;
use crate::observe::kubernetes::plural;

pub const FIELD_MANAGER: &str = "k3d-gpu";

/// How long to wait for a just-created cluster's API server to answer.
const API_READY: Duration = Duration::from_secs(120);

fn api_for(client: &Client, object: &Value) -> Result<(Api<DynamicObject>, String), String> {
    let api_version = object["apiVersion"].as_str().ok_or("object without apiVersion")?;
    let kind = object["kind"].as_str().ok_or("object without kind")?;
    let name = object["metadata"]["name"].as_str().ok_or("object without metadata.name")?.to_string();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural(kind));
    let api = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    Ok((api, name))
}

/// Retries calls that fail because the API server is not up yet (a cluster just created).
async fn patient<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let start = Instant::now();
    let mut wait = Duration::from_millis(200);
    loop {
        match call().await {
            Err(kube::Error::Api(status)) => return Err(kube::Error::Api(status)),
            Err(e) if start.elapsed() < API_READY => {
                let _ = e;
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

/// Server-side apply of one object, forcing ownership of the fields we set.
pub async fn apply(client: &Client, object: &Value) -> Result<(), String> {
    let (api, name) = api_for(client, object)?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(object);
    patient(|| api.patch(&name, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("server-side apply of {name}: {e}"))
}

/// Deletes an object — only if what we observed carries our managed-by label.
pub async fn delete(client: &Client, observed: &Value) -> Result<(), String> {
    if observed["metadata"]["labels"][MANAGED_BY.0] != MANAGED_BY.1 {
        return Err("refusing to delete an object that k3d-gpu does not manage".into());
    }
    let (api, name) = api_for(client, observed)?;
    let params = DeleteParams::default();
    match patient(|| api.delete(&name, &params)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(format!("delete {name}: {e}")),
    }
}

/// Sets (`Some`) or removes (`None`) a label or annotation on every node. Labels k3d-gpu sets
/// are recorded in an annotation, so a later plan deletes only its own.
pub async fn node_metadata(client: &Client, label: bool, key: &str, value: Option<&str>) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let all = ListParams::default();
    let list = patient(|| nodes.list(&all)).await.map_err(|e| format!("list nodes: {e}"))?;
    if list.items.is_empty() {
        return Err("the cluster has no nodes yet".into());
    }
    for node in list.items {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut patch = json!({ "metadata": {} });
        let field = if label { "labels" } else { "annotations" };
        patch["metadata"][field] = json!({ key: value });
        if label {
            let mut ours: BTreeSet<String> = node
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MANAGED_LABELS_ANNOTATION))
                .map(|v| v.split(',').filter(|k| !k.is_empty()).map(str::to_string).collect())
                .unwrap_or_default();
            match value {
                Some(_) => ours.insert(key.to_string()),
                None => ours.remove(key),
            };
            patch["metadata"]["annotations"] =
                json!({ MANAGED_LABELS_ANNOTATION: ours.into_iter().collect::<Vec<_>>().join(",") });
        }
        let params = PatchParams::default();
        let merge = Patch::Merge(&patch);
        patient(|| nodes.patch(&name, &params, &merge)).await.map_err(|e| format!("patch node {name}: {e}"))?;
    }
    Ok(())
}
