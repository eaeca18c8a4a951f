//! Verify: after apply, wait — with watches, not sleep loops — for what the graph says must
//! hold: a resource allocatable on some node, a workload rolled out, ResourceSlices published,
//! a RuntimeClass the cluster provides present, a model server listing its models.
//! Each check has its own deadline; a failure names the likely cause and where to look.
//! The model server is the one check that polls: an HTTP endpoint behind the API server's
//! service proxy has nothing to watch.
//!
//! Watches go through kube-rs's runtime: `await_condition` for one named object (a rollout,
//! a RuntimeClass, one node's allocatable), `watcher` for a set (any node, the ResourceSlices).
//! A watch error — the 410 Gone a server sends once the watch's resourceVersion is compacted,
//! a dropped connection — never fails a check: the watcher lists again and resumes after
//! kube-runtime's `DefaultBackoff` (client-go's reflector parameters: 0.8 s doubling to 30 s,
//! jittered). Only the check's deadline ends it, and its message then names the last error.

use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher::{self, DefaultBackoff, Event};
use serde_json::Value;

use super::error::ApplyError;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);

/// Whether `spec` (a verify resource's spec) holds for one object.
pub fn holds(spec: &Value, object: &Value) -> bool {
    match spec["check"].as_str() {
        Some("allocatable") => {
            let resource = spec["resource"].as_str().unwrap_or_default();
            let quantity = object["status"]["allocatable"][resource].as_str().unwrap_or("0");
            quantity.trim().parse::<f64>().is_ok_and(|n| n >= spec["min"].as_f64().unwrap_or(1.0))
        }
        Some("rollout") => {
            let status = &object["status"];
            let generation_seen = status["observedGeneration"].as_i64().unwrap_or(0)
                >= object["metadata"]["generation"].as_i64().unwrap_or(0);
            match spec["kind"].as_str() {
                Some("DaemonSet") => {
                    let desired = status["desiredNumberScheduled"].as_i64().unwrap_or(0);
                    generation_seen
                        && desired > 0
                        && status["numberReady"].as_i64() == Some(desired)
                        && status["updatedNumberScheduled"].as_i64() == Some(desired)
                }
                _ => {
                    let wanted = object["spec"]["replicas"].as_i64().unwrap_or(1);
                    // kubectl's rule: every replica updated, no old ones left, all available.
                    let updated = status["updatedReplicas"].as_i64().unwrap_or(0);
                    generation_seen
                        && updated >= wanted
                        && status["replicas"].as_i64().unwrap_or(0) <= updated
                        && status["availableReplicas"].as_i64().unwrap_or(0) >= wanted
                }
            }
        }
        // Any object of that name: k3s's packaged classes carry its own handler and labels.
        Some("runtimeclass") => object["metadata"]["name"] == spec["name"],
        _ => false,
    }
}

/// What to tell the user when a check times out.
pub fn diagnosis(spec: &Value, cluster: &str) -> String {
    diagnosis_in(spec, &crate::observe::kubernetes::context_name(cluster), Some(cluster))
}

/// [`diagnosis`] for a cluster reached through `context`; `k3d`: the k3d cluster's name, for
/// the hints that look inside its node containers (none for an existing cluster).
pub fn diagnosis_in(spec: &Value, context: &str, k3d: Option<&str>) -> String {
    // Each "Look:" is a command to paste; every value in it (the context from the config,
    // names from the catalog or the cluster) is one shell word (crate::shell).
    use crate::shell::Command;
    let field = |key: &str| spec[key].as_str().unwrap_or_default().to_string();
    let kubectl = || crate::shell::kubectl(context);
    let look = |commands: &[Command]| commands.iter().map(Command::to_string).collect::<Vec<_>>().join("; ");
    match spec["check"].as_str() {
        Some("allocatable") => {
            let resource = field("resource");
            // An existing cluster's check is per node.
            let node = spec["node"].as_str();
            let who = match node {
                Some(node) => format!("node {node} does not advertise"),
                None => "no node advertises".to_string(),
            };
            let describe = match node {
                Some(node) => kubectl().lit("describe node").arg(node),
                None => kubectl().lit("describe nodes"),
            };
            let mut commands = vec![
                kubectl().lit("get pods -A -l app.kubernetes.io/managed-by=k3d-gpu"),
                describe.pipe(Command::new("grep").lit("-A8 Allocatable")),
            ];
            let mut tail = String::new();
            if resource == "nvidia.com/gpu" {
                commands.push(kubectl().lit("-n kube-system logs ds/nvidia-device-plugin-daemonset"));
                match (k3d, node) {
                    (Some(cluster), _) => commands.push(
                        Command::new("docker").lit("exec").arg(format!("k3d-{cluster}-server-0")).lit("nvidia-smi"),
                    ),
                    (None, Some(node)) => tail = format!("; nvidia-smi on {node}"),
                    (None, None) => {}
                }
            }
            format!(
                "{who} {resource}: the device plugin is not running or cannot see the device. Look: {}{tail}",
                look(&commands)
            )
        }
        Some("rollout") => {
            let (kind, namespace, name) = (field("kind"), field("namespace"), field("name"));
            let short = if kind == "DaemonSet" { "ds" } else { "deploy" };
            format!(
                "{kind} {namespace}/{name} did not roll out. Look: {}",
                look(&[
                    kubectl().opt("-n", &namespace).lit("describe").arg(kind.to_lowercase()).arg(&name),
                    kubectl().opt("-n", &namespace).lit("logs").arg(format!("{short}/{name}")),
                ])
            )
        }
        Some("resourceslices") if field("driver") == crate::compile::nvidia_dra::DRIVER => format!(
            "the NVIDIA GPU DRA driver published no ResourceSlices. Look: {}",
            look(&[
                kubectl().lit("-n dra-driver-nvidia-gpu logs ds/dra-driver-nvidia-gpu-kubelet-plugin --all-containers"),
                kubectl().lit("get resourceslices"),
            ])
        ),
        Some("resourceslices") => format!(
            "the Intel GPU DRA driver published no ResourceSlices. Look: {}",
            look(&[
                kubectl().lit("-n intel-gpu-resource-driver logs ds/intel-gpu-resource-driver-kubelet-plugin"),
                kubectl().lit("get resourceslices"),
            ])
        ),
        Some("endpoint") => {
            let (ns, svc, path) = (field("namespace"), field("service"), field("path"));
            let commands = [
                kubectl().opt("-n", &ns).lit("get pods,pvc"),
                kubectl().opt("-n", &ns).lit("logs").arg(format!("deploy/{svc}")).lit("--all-containers"),
            ];
            if spec["expect"] == "status" {
                return format!("svc/{svc} does not answer {path} with status true. Look: {}", look(&commands));
            }
            format!(
                "the model server svc/{svc} does not list a model at {path}. The first start downloads the model into its PVC, then loads it. Look: {}",
                look(&commands)
            )
        }
        Some("runtimeclass") => {
            let name = field("name");
            format!(
                "RuntimeClass {name} does not exist. k3s creates it from its packaged runtimes manifest unless it runs with --disable=runtimes (check [cluster] k3s_args and the node image). Look: {}",
                look(&[kubectl().lit("get runtimeclass"), kubectl().lit("-n kube-system get addon runtimes")])
            )
        }
        _ => "unknown check".into(),
    }
}

/// Watches until `spec` holds or `timeout` passes.
pub async fn wait_for(client: &Client, spec: &Value, cluster: &str, timeout: Duration) -> Result<(), ApplyError> {
    wait_for_in(client, spec, &crate::observe::kubernetes::context_name(cluster), Some(cluster), timeout).await
}

/// [`wait_for`] on a cluster reached through `context` (`k3d`: as in [`diagnosis_in`]).
pub async fn wait_for_in(
    client: &Client,
    spec: &Value,
    context: &str,
    k3d: Option<&str>,
    timeout: Duration,
) -> Result<(), ApplyError> {
    // A check may need longer than the default (a model download): its own floor wins.
    let timeout = timeout.max(Duration::from_secs(spec["timeout_s"].as_u64().unwrap_or(0)));
    let last_error = Mutex::new(None);
    match tokio::time::timeout(timeout, watch_until(client, spec, &last_error)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ApplyError::CheckFailed { source: Box::new(e), diagnosis: diagnosis_in(spec, context, k3d) }),
        Err(_) => Err(ApplyError::NotTrue {
            secs: timeout.as_secs(),
            last_error: last_error.lock().unwrap_or_else(|p| p.into_inner()).take(),
            diagnosis: diagnosis_in(spec, context, k3d),
        }),
    }
}

/// The last watch error of a check, kept for its timeout message.
type LastError = Mutex<Option<String>>;

async fn watch_until(client: &Client, spec: &Value, last_error: &LastError) -> Result<(), ApplyError> {
    let check = spec["check"].as_str().unwrap_or_default();
    let named = |key: &str| spec[key].as_str().unwrap_or_default().to_string();
    match check {
        "resourceslices" => watch_slices(client, spec, last_error).await,
        "endpoint" => poll_endpoint(client, spec).await,
        "allocatable" => {
            let ar = ApiResource::erase::<Node>(&());
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            match spec["node"].as_str() {
                // An existing cluster's check is per node: that node alone.
                Some(node) => until_named(api, node, spec, last_error).await,
                None => {
                    until_all(api, watcher::Config::default(), last_error, |nodes| {
                        nodes.values().any(|n| holds(spec, n))
                    })
                    .await
                }
            }
        }
        "rollout" => {
            let kind = named("kind");
            let plural = crate::observe::resources::built_in("apps/v1", &kind).ok_or_else(|| {
                ApplyError::Malformed(format!("a rollout of {kind} is not something verify can watch"))
            })?;
            let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", &kind), plural);
            let api = Api::namespaced_with(client.clone(), &named("namespace"), &ar);
            until_named(api, &named("name"), spec, last_error).await
        }
        "runtimeclass" => {
            let ar = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("node.k8s.io", "v1", "RuntimeClass"),
                "runtimeclasses",
            );
            until_named(Api::all_with(client.clone(), &ar), &named("name"), spec, last_error).await
        }
        other => Err(ApplyError::Malformed(format!("unknown check {other}"))),
    }
}

fn to_value(object: &DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or_default()
}

/// Waits until `spec` holds for the object `name`, through kube-runtime's `await_condition`
/// (one watcher on that name: its state first, then its changes). A watch error ends one
/// `await_condition`; the next starts after a backoff.
async fn until_named(
    api: Api<DynamicObject>,
    name: &str,
    spec: &Value,
    last_error: &LastError,
) -> Result<(), ApplyError> {
    let mut backoff = DefaultBackoff::default();
    loop {
        let condition = |o: Option<&DynamicObject>| o.is_some_and(|o| holds(spec, &to_value(o)));
        match await_condition(api.clone(), name, condition).await {
            Ok(_) => return Ok(()),
            Err(e) => {
                *last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                tokio::time::sleep(backoff.next().unwrap_or(Duration::from_secs(30))).await;
            }
        }
    }
}

/// Follows every object of `api` through kube-runtime's `watcher` with its default backoff,
/// keeping each by namespace/name, until `holds` is true of them. After an error the watcher
/// lists again (`Init` … `InitDone`) and the set is that list, so an object deleted while the
/// watch was down does not linger.
async fn until_all(
    api: Api<DynamicObject>,
    config: watcher::Config,
    last_error: &LastError,
    mut holds: impl FnMut(&BTreeMap<String, Value>) -> bool,
) -> Result<(), ApplyError> {
    let key = |o: &DynamicObject| {
        format!("{}/{}", o.metadata.namespace.as_deref().unwrap_or(""), o.metadata.name.as_deref().unwrap_or(""))
    };
    let mut stream = pin!(watcher::watcher(api, config).default_backoff());
    let mut known: BTreeMap<String, Value> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Value>> = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Init) => listing = Some(BTreeMap::new()),
            Ok(Event::InitApply(o)) => {
                listing.get_or_insert_default().insert(key(&o), to_value(&o));
            }
            Ok(Event::InitDone) => known = listing.take().unwrap_or_default(),
            Ok(Event::Apply(o)) => {
                known.insert(key(&o), to_value(&o));
            }
            Ok(Event::Delete(o)) => {
                known.remove(&key(&o));
            }
            Err(e) => {
                *last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                continue;
            }
        }
        if listing.is_none() && holds(&known) {
            return Ok(());
        }
    }
    Err(ApplyError::WatchEnded)
}

/// The API server's service proxy path for an `endpoint` check:
/// `/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH`.
pub fn proxy_path(spec: &Value) -> String {
    format!(
        "/api/v1/namespaces/{}/services/{}:{}/proxy{}",
        spec["namespace"].as_str().unwrap_or_default(),
        spec["service"].as_str().unwrap_or_default(),
        spec["port"].as_u64().unwrap_or(0),
        spec["path"].as_str().unwrap_or_default()
    )
}

/// Whether an endpoint's reply says ready: with `"expect": "status"`, a health reply
/// `{"status": true}` (Open WebUI's `/health`); otherwise an OpenAI models list with a model.
pub fn ready(spec: &Value, body: &str) -> bool {
    if spec["expect"] == "status" {
        return serde_json::from_str::<Value>(body).is_ok_and(|v| v["status"] == true);
    }
    lists_a_model(body)
}

/// Whether an OpenAI-style models reply lists at least one model.
pub fn lists_a_model(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["data"].as_array().map(|a| a.iter().any(|m| m["id"].is_string())))
        .unwrap_or(false)
}

const POLL: Duration = Duration::from_secs(5);

/// GETs the models endpoint through the service proxy until it lists a model. Errors (503
/// while no pod is ready, a 404 while the model loads) mean "not yet"; the caller's deadline
/// ends the wait.
async fn poll_endpoint(client: &Client, spec: &Value) -> Result<(), ApplyError> {
    let path = proxy_path(spec);
    loop {
        let request = http::Request::get(&path).body(Vec::new()).map_err(|e| bad_request(&path, e))?;
        if let Ok(body) = client.request_text(request).await
            && ready(spec, &body)
        {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A model server's first reply: the start of its text and how long the request took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub first_words: String,
    pub millis: u64,
}

/// The prompt of the warm-up request: short, so the reply is quick on any device.
pub const WARM_UP_PROMPT: &str = "Say hello in five words.";

/// The warm-up after a model server lists its model: the endpoint check's `chat` (`path`,
/// `model`) says what to POST (one short chat completion) and to which path of the server;
/// `None` when the check has no `chat`. It is sent through a port-forward to the server's pod
/// ([`super::port_forward`]), never through the service proxy, which OVMS refuses for POSTs.
pub fn chat_request(spec: &Value) -> Option<(String, Value)> {
    let chat = spec.get("chat")?;
    let path = chat["path"].as_str().unwrap_or_default().to_string();
    let body = serde_json::json!({ "model": chat["model"], "max_tokens": 32, "stream": false,
        "messages": [ { "role": "user", "content": WARM_UP_PROMPT } ] });
    Some((path, body))
}

/// The first words (at most 12, at most 120 characters) of an OpenAI chat completion's
/// first choice, or `None` when `body` is not one with text.
pub fn first_words(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let message = &v["choices"][0]["message"];
    // A reasoning model may answer in `reasoning_content` first and say nothing yet.
    let text = message["content"].as_str().filter(|t| !t.trim().is_empty()).or(message["reasoning_content"].as_str())?;
    let words: Vec<&str> = text.split_whitespace().take(12).collect();
    let mut out = words.join(" ");
    if out.is_empty() {
        return None;
    }
    if out.chars().count() > 120 {
        out = out.chars().take(119).collect::<String>() + "…";
    }
    Some(out)
}

/// POSTs the warm-up chat completion until a reply with text comes back (a model still
/// loading answers 503 or an error); the caller's deadline ends the wait.
pub async fn warm_up(client: &Client, spec: &Value) -> Result<Reply, ApplyError> {
    let Some((path, body)) = chat_request(spec) else { return Err("the check has no chat request".into()) };
    // A JSON value always serialises.
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let namespace = spec["namespace"].as_str().unwrap_or_default();
    let service = spec["service"].as_str().unwrap_or_default();
    let port = u16::try_from(spec["port"].as_u64().unwrap_or(0)).map_err(|_| "the check's port is not a port")?;
    loop {
        let began = std::time::Instant::now();
        if let Ok((200, text)) =
            super::port_forward::post_json(client, namespace, service, port, &path, bytes.clone()).await
            && let Some(first_words) = first_words(&text)
        {
            return Ok(Reply { first_words, millis: began.elapsed().as_millis() as u64 });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A request to `path` that cannot be built (a service or path from the catalog that is not
/// a URI path).
fn bad_request(path: &str, e: http::Error) -> ApplyError {
    ApplyError::Malformed(format!("{}: {e}", crate::escape::quoted(path)))
}

/// What apply says after the warm-up: the server, the first words of its reply and the time.
pub fn warm_up_note(spec: &Value, reply: &Reply) -> String {
    format!(
        "svc/{} replied in {:.1}s: \"{}\"",
        spec["service"].as_str().unwrap_or_default(),
        reply.millis as f64 / 1e3,
        reply.first_words
    )
}

/// DRA: enough devices of the driver across ResourceSlices.
async fn watch_slices(client: &Client, spec: &Value, last_error: &LastError) -> Result<(), ApplyError> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice"),
        "resourceslices",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let driver = spec["driver"].as_str().unwrap_or_default();
    let want = spec["min_devices"].as_u64().unwrap_or(1).max(1) as usize;
    until_all(api, watcher::Config::default(), last_error, |slices| {
        let devices: usize = slices
            .values()
            .filter(|v| v["spec"]["driver"] == driver)
            .map(|v| v["spec"]["devices"].as_array().map_or(0, Vec::len))
            .sum();
        devices >= want
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_models_endpoint_check() {
        let spec = json!({"check": "endpoint", "namespace": "k3d-gpu-agent", "service": "ovms", "port": 8000, "path": "/v3/models"});
        assert_eq!(proxy_path(&spec), "/api/v1/namespaces/k3d-gpu-agent/services/ovms:8000/proxy/v3/models");
        assert!(lists_a_model(r#"{"object":"list","data":[{"id":"Qwen3-4B-int4-ov","object":"model"}]}"#));
        assert!(!lists_a_model(r#"{"object":"list","data":[]}"#), "loaded nothing yet");
        assert!(!lists_a_model("no healthy upstream"));
        // A health endpoint (the chat UI's) answers a status instead of a models list.
        let health = json!({"check": "endpoint", "service": "open-webui", "path": "/health", "expect": "status"});
        assert!(ready(&health, r#"{"status":true}"#));
        assert!(!ready(&health, r#"{"status":false}"#));
        assert!(!ready(&health, r#"{"object":"list","data":[{"id":"m"}]}"#), "a models list is not a health reply");
        assert!(!ready(&spec, r#"{"status":true}"#), "nor the other way round");
    }

    #[test]
    fn the_warm_up_request_and_its_reply() {
        let spec = json!({"check": "endpoint", "namespace": "k3d-gpu-agent", "service": "vllm", "port": 8000,
            "path": "/v1/models", "chat": {"path": "/v1/chat/completions", "model": "Qwen3-4B"}});
        let (path, body) = chat_request(&spec).unwrap();
        assert_eq!(path, "/v1/chat/completions", "the server's own path, sent through a port-forward, not the proxy");
        assert_eq!(body["model"], "Qwen3-4B");
        assert_eq!(body["messages"][0]["content"], WARM_UP_PROMPT);
        assert_eq!(chat_request(&json!({"check": "endpoint"})), None);
        let reply = json!({"choices": [{"message": {"role": "assistant",
            "content": "Hello there, friend, nice to meet you today and every other day too!"}}]});
        assert_eq!(
            first_words(&reply.to_string()).as_deref(),
            Some("Hello there, friend, nice to meet you today and every other day")
        );
        assert_eq!(first_words(r#"{"error": {"message": "loading"}}"#), None);
        assert_eq!(first_words(r#"{"choices": [{"message": {"content": "  "}}]}"#), None);
        let thinking = json!({"choices": [{"message": {"content": null, "reasoning_content": "Okay, the user"}}]});
        assert_eq!(first_words(&thinking.to_string()).as_deref(), Some("Okay, the user"));
    }

    #[test]
    fn rollout_and_allocatable_conditions() {
        let spec = json!({"check": "rollout", "kind": "DaemonSet", "namespace": "kube-system", "name": "p"});
        let mut ds = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "desiredNumberScheduled": 1, "numberReady": 0, "updatedNumberScheduled": 1}});
        assert!(!holds(&spec, &ds));
        ds["status"]["numberReady"] = json!(1);
        assert!(holds(&spec, &ds));
        ds["metadata"]["generation"] = json!(3);
        assert!(!holds(&spec, &ds), "an old generation's status does not count");
        let spec = json!({"check": "rollout", "kind": "Deployment", "namespace": "n", "name": "d"});
        let old_pod_left = json!({"metadata": {"generation": 2}, "spec": {"replicas": 1},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}});
        assert!(!holds(&spec, &old_pod_left), "the old pod still serves");
        let mut done = old_pod_left.clone();
        done["status"]["replicas"] = json!(1);
        assert!(holds(&spec, &done));
        let spec = json!({"check": "allocatable", "resource": "nvidia.com/gpu", "min": 1});
        assert!(!holds(&spec, &json!({"status": {"allocatable": {"nvidia.com/gpu": "0"}}})));
        assert!(holds(&spec, &json!({"status": {"allocatable": {"nvidia.com/gpu": "2"}}})));
        assert!(diagnosis(&spec, "gpu").contains("docker exec k3d-gpu-server-0 nvidia-smi"));
        let on_node = json!({"check": "allocatable", "resource": "nvidia.com/gpu", "min": 1, "node": "gpu-01"});
        let text = diagnosis_in(&on_node, "homelab", None);
        assert!(text.starts_with("node gpu-01 does not advertise nvidia.com/gpu"), "{text}");
        assert!(text.contains("kubectl --context homelab describe node gpu-01") && !text.contains("docker"), "{text}");
    }

    #[test]
    fn every_look_command_quotes_the_context_and_the_names() {
        let hostile = "k3d-x;touch pwned";
        for spec in [
            json!({"check": "allocatable", "resource": "nvidia.com/gpu", "min": 1, "node": "n$(id)"}),
            json!({"check": "allocatable", "resource": "gpu.intel.com/i915", "min": 1}),
            json!({"check": "rollout", "kind": "DaemonSet", "namespace": "ns;id", "name": "d`id`"}),
            json!({"check": "resourceslices"}),
            json!({"check": "endpoint", "namespace": "a b", "service": "s|id", "path": "/v1/models"}),
            json!({"check": "runtimeclass", "name": "nvidia"}),
        ] {
            let text = diagnosis_in(&spec, hostile, None);
            let look = text.split("Look: ").nth(1).unwrap_or_else(|| panic!("no Look: in {text}"));
            assert!(look.contains("--context 'k3d-x;touch pwned'"), "{look}");
            for raw in ["n$(id) |", "ns;id ", "d`id`", "a b ", "s|id"] {
                assert!(!look.contains(&format!(" {raw}")), "{raw} unquoted in {look}");
            }
        }
    }
}
