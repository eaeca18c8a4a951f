//! The Kubernetes side of observe, through kube-rs: always the context `k3d-<cluster>`, never
//! whatever context is current. Nodes, then one LIST per kind the catalog uses (by the
//! managed-by label), then ResourceSlices: O(kinds) requests, never one per object.

use std::path::Path;

use http_body_util::LengthLimitError;
use http_body_util::Limited;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use tower::util::MapResponseLayer;

use super::{CALL_TIMEOUT, ObserveError, ObservedKubernetes, ObservedNode};
use crate::compile::MANAGED_BY;

/// The kubeconfig context for a cluster (k3d's naming).
pub fn context_name(cluster: &str) -> String {
    format!("k3d-{cluster}")
}

/// A client for the cluster's own context in `kubeconfig`; each read answers within
/// [`CALL_TIMEOUT`].
pub async fn client(kubeconfig: &Path, cluster: &str) -> Result<Client, ObserveError> {
    client_with(kubeconfig, &context_name(cluster), Some(CALL_TIMEOUT)).await
}

/// A client for a context named in the config (an existing cluster, `[cluster] context`).
pub async fn context_client(kubeconfig: &Path, context: &str) -> Result<Client, ObserveError> {
    client_with(kubeconfig, context, Some(CALL_TIMEOUT)).await
}

/// [`context_client`] for watches.
pub async fn context_watch_client(kubeconfig: &Path, context: &str) -> Result<Client, ObserveError> {
    client_with(kubeconfig, context, None).await
}

/// The same, for watches: a watch is quiet for as long as nothing changes, so only the caller's
/// own deadline bounds it.
pub async fn watch_client(kubeconfig: &Path, cluster: &str) -> Result<Client, ObserveError> {
    client_with(kubeconfig, &context_name(cluster), None).await
}

async fn client_with(
    kubeconfig: &Path,
    context: &str,
    read_timeout: Option<std::time::Duration>,
) -> Result<Client, ObserveError> {
    let context = context.to_string();
    let unreachable = |reason: String| ObserveError::KubernetesUnreachable { context: context.clone(), reason };
    let file = read_kubeconfig(kubeconfig).map_err(|e| unreachable(format!("{}: {e}", kubeconfig.display())))?;
    // Said plainly: kube-rs's own message for a missing context does not name the file.
    if !file.contexts.iter().any(|c| c.name == context) {
        return Err(unreachable(format!("{} has no context {context}", kubeconfig.display())));
    }
    let options = KubeConfigOptions { context: Some(context.clone()), ..Default::default() };
    let mut config = Config::from_custom_kubeconfig(file, &options).await.map_err(|e| unreachable(e.to_string()))?;
    config.connect_timeout = Some(CALL_TIMEOUT);
    config.read_timeout = read_timeout;
    let builder = ClientBuilder::try_from(config).map_err(|e| unreachable(e.to_string()))?;
    // A watch is one answer that goes on for as long as it is open: only the caller's deadline
    // bounds it. Every other read (a LIST, a GET, a pod's log) is one answer, capped while it
    // is read, so a server that never ends its answer cannot fill memory.
    Ok(match read_timeout {
        Some(_) => builder.with_layer(&MapResponseLayer::new(capped)).build(),
        None => builder.build(),
    })
}

/// The most one answer of the API server may hold (a LIST of 100,000 objects is about 20 MiB).
pub const MAX_ANSWER: usize = 64 << 20;

/// The answer's body, cut with an error once it passes [`MAX_ANSWER`].
fn capped<B>(response: http::Response<B>) -> http::Response<Limited<B>> {
    response.map(|body| Limited::new(body, MAX_ANSWER))
}

/// Whether a kube error is [`capped`]'s cut: said in words, since kube's own text ("length
/// limit exceeded") does not say which limit or whose answer.
pub fn was_cut(error: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// A kube error as the person reads it: the cut named with the cap.
pub fn said(error: &kube::Error) -> String {
    if was_cut(error) {
        format!("the API server's answer passed {} MiB and was cut there", MAX_ANSWER >> 20)
    } else {
        error.to_string()
    }
}

/// Whether `kubeconfig` holds `context`: `Some(false)` when it does not, or when there is no
/// file there at all; `None` when it cannot be read or parsed (then the file is the problem,
/// not the context).
pub fn has_context(kubeconfig: &Path, context: &str) -> Option<bool> {
    if std::fs::symlink_metadata(kubeconfig).is_err() {
        return Some(false);
    }
    let file = read_kubeconfig(kubeconfig).ok()?;
    Some(file.contexts.iter().any(|c| c.name == context))
}

/// Why the kubeconfig could not be read: the file, or its YAML.
#[derive(Debug, thiserror::Error)]
enum KubeconfigUnread {
    #[error(transparent)]
    Read(#[from] crate::input_file::InputError),
    #[error(transparent)]
    Parse(#[from] kube::config::KubeconfigError),
}

/// The kubeconfig, read as every input is (a regular file, bounded, never blocking: not
/// `KUBECONFIG=/dev/zero` or a FIFO while apply holds the lock), with the files it names made
/// absolute against its directory as kube's own reader does.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, KubeconfigUnread> {
    let text = crate::input_file::read_text(path)?;
    let mut config = Kubeconfig::from_yaml(&text)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let absolute = |file: &mut Option<String>| {
        if let Some(f) = file.as_mut()
            && Path::new(f.as_str()).is_relative()
        {
            *f = dir.join(&*f).display().to_string();
        }
    };
    for named in &mut config.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            absolute(&mut cluster.certificate_authority);
        }
    }
    for named in &mut config.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            absolute(&mut auth.client_certificate);
            absolute(&mut auth.client_key);
        }
    }
    Ok(config)
}

async fn timed<T>(
    context: &str,
    what: &str,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, ObserveError> {
    tokio::time::timeout(CALL_TIMEOUT, call).await.map_err(|_| ObserveError::KubernetesUnreachable {
        context: context.to_string(),
        reason: format!("{what}: no answer within {}s", CALL_TIMEOUT.as_secs()),
    })
}

/// Nodes, managed objects of the given kinds (`(apiVersion, kind)`), and ResourceSlices.
pub async fn observe(
    client: Client,
    cluster: &str,
    kinds: &crate::compile::ObjectKinds,
) -> Result<ObservedKubernetes, ObserveError> {
    observe_context(client, &context_name(cluster), kinds).await
}

/// [`observe`] through a named context (the name is for error messages).
pub async fn observe_context(
    client: Client,
    context: &str,
    kinds: &crate::compile::ObjectKinds,
) -> Result<ObservedKubernetes, ObserveError> {
    let context = context.to_string();
    let failed = |what: &str, e: kube::Error| ObserveError::KubernetesUnreachable {
        context: context.clone(),
        reason: format!("{what}: {}", said(&e)),
    };

    let nodes = timed(&context, "list nodes", Api::<Node>::all(client.clone()).list(&ListParams::default()))
        .await?
        .map_err(|e| failed("list nodes", e))?;
    let mut observed = ObservedKubernetes::default();
    for node in nodes.items {
        let meta = node.metadata;
        let status = node.status.unwrap_or_default();
        observed.nodes.push(ObservedNode {
            name: meta.name.unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            annotations: meta.annotations.unwrap_or_default(),
            allocatable: status.allocatable.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect(),
            ready: status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True"),
        });
    }
    observed.nodes.sort_by(|a, b| a.name.cmp(&b.name));

    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    for (api_version, kind) in kinds.iter() {
        // Its plural: built in, or its CRD's, or (a kind no CRD of the catalog declares) the
        // server's discovery; a kind the server does not serve has no objects.
        let found =
            timed(&context, "discovery", super::resources::resource(&client, api_version, kind, &kinds.plurals))
                .await?
                .map_err(|e| failed(&format!("discovery of {kind}"), e))?;
        let Some(served) = found else { continue };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &served.resource);
        match timed(&context, "list", api.list(&ListParams::default().labels(&selector))).await? {
            Ok(list) => {
                for item in list.items {
                    let mut value = serde_json::to_value(&item).unwrap_or_default();
                    value["apiVersion"] = serde_json::json!(api_version);
                    value["kind"] = serde_json::json!(kind);
                    // Server-side apply bookkeeping: ours is what the diff reads ownership
                    // from; everyone else's is noise in a plan, and large.
                    super::managed::keep_ours(&mut value);
                    observed.objects.push(value);
                }
            }
            // A kind whose CRD is not installed yet has no objects.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(failed(&format!("list {kind}"), e)),
        }
    }
    observed.objects.sort_by_key(crate::compile::object_id);

    let slices = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice"),
        "resourceslices",
    );
    match timed(
        &context,
        "list ResourceSlices",
        Api::<DynamicObject>::all_with(client.clone(), &slices).list(&ListParams::default()),
    )
    .await?
    {
        Ok(list) => {
            observed.resource_slices = list.items.iter().map(|s| serde_json::to_value(s).unwrap_or_default()).collect()
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => return Err(failed("list ResourceSlices", e)),
    }
    observed.holders = holders(&client, &context).await?;
    Ok(observed)
}

/// Pages of pods one LIST returns: a cluster of many pods is read in bounded answers.
const POD_PAGE: u32 = 500;
/// The most pages read (100,000 pods): a server that never ends its list cannot hold observe.
const MAX_POD_PAGES: usize = 200;

/// Pods assigned to a node and not finished that request an extended resource (what the
/// scheduler counts as held), in pages. A server that refuses cluster-wide pod reads (403)
/// leaves the list empty: placement then reads the host's facts, as offline.
pub async fn holders(client: &Client, context: &str) -> Result<Vec<super::HoldingPod>, ObserveError> {
    let api = Api::<Pod>::all(client.clone());
    let mut params = ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed").limit(POD_PAGE);
    let mut out = Vec::new();
    for _ in 0..MAX_POD_PAGES {
        let page = match timed(context, "list pods", api.list(&params)).await? {
            Ok(page) => page,
            Err(kube::Error::Api(status)) if matches!(status.code, 403 | 404) => return Ok(Vec::new()),
            Err(e) => {
                return Err(ObserveError::KubernetesUnreachable {
                    context: context.to_string(),
                    reason: format!("list pods: {}", said(&e)),
                });
            }
        };
        out.extend(page.items.iter().filter_map(holding));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// A pod's hold on extended resources: its effective request of each (the containers' sum, or
/// an init container's if larger, as the scheduler takes it); `None` for a pod that holds none
/// or is not on a node.
fn holding(pod: &Pod) -> Option<super::HoldingPod> {
    let spec = pod.spec.as_ref()?;
    let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
    let asked = |c: &k8s_openapi::api::core::v1::Container| -> Vec<(String, u64)> {
        let resources = c.resources.clone().unwrap_or_default();
        let requests = resources.requests.unwrap_or_default();
        let limits = resources.limits.unwrap_or_default();
        // An extended resource's request defaults to its limit.
        let keys: std::collections::BTreeSet<&String> = requests.keys().chain(limits.keys()).collect();
        keys.into_iter()
            .filter(|k| crate::compile::held::extended(k))
            .filter_map(|k| {
                let q = requests.get(k).or_else(|| limits.get(k))?;
                Some((k.clone(), crate::compile::held::units(&q.0)?))
            })
            .collect()
    };
    // The scheduler's sum: the containers and the sidecars (init containers that keep
    // running, `restartPolicy: Always`) together, or an init container with the sidecars
    // started before it, whichever is larger.
    let add = |into: &mut std::collections::BTreeMap<String, u64>, k: String, n: u64| {
        let e = into.entry(k).or_default();
        *e = e.saturating_add(n);
    };
    let mut total: std::collections::BTreeMap<String, u64> = Default::default();
    let mut sidecars: std::collections::BTreeMap<String, u64> = Default::default();
    let mut peak: std::collections::BTreeMap<String, u64> = Default::default();
    for c in spec.init_containers.iter().flatten() {
        for (k, n) in asked(c) {
            if c.restart_policy.as_deref() == Some("Always") {
                add(&mut sidecars, k, n);
            } else {
                let with = n.saturating_add(sidecars.get(&k).copied().unwrap_or(0));
                let e = peak.entry(k).or_default();
                *e = (*e).max(with);
            }
        }
    }
    for c in &spec.containers {
        for (k, n) in asked(c) {
            add(&mut total, k, n);
        }
    }
    for (k, n) in sidecars {
        add(&mut total, k, n);
    }
    for (k, n) in peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(n);
    }
    total.retain(|_, n| *n > 0);
    if total.is_empty() {
        return None;
    }
    Some(super::HoldingPod {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        node,
        resources: total.into_iter().map(|(k, n)| (k, n.to_string())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduler's effective request: containers and sidecars summed, an init container
    /// with the sidecars before it if larger.
    #[test]
    fn a_pods_hold_counts_sidecars_as_the_scheduler_does() {
        let gpu = |n: &str| serde_json::json!({"limits": {"nvidia.com/gpu": n}});
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"nodeName": "n",
                "initContainers": [
                    {"name": "side", "restartPolicy": "Always", "resources": gpu("1")},
                    {"name": "init", "resources": gpu("3")}],
                "containers": [{"name": "main", "resources": gpu("1")}, {"name": "cpu"}]}}))
        .unwrap();
        assert_eq!(holding(&pod).unwrap().resources["nvidia.com/gpu"], "4", "init 3 with the sidecar's 1");
        let mut small = pod.clone();
        small.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[1].resources = None;
        assert_eq!(holding(&small).unwrap().resources["nvidia.com/gpu"], "2", "main 1 and the sidecar's 1");
        let mut unscheduled = pod;
        unscheduled.spec.as_mut().unwrap().node_name = None;
        assert!(holding(&unscheduled).is_none(), "a pod on no node holds nothing");
    }
}
