//! `k3d-gpu agent status`: the running agent, asked through the cluster's API server. The
//! config's graph names the LLM server's readiness check (`verify/endpoint/...` with `chat`);
//! this reads the server's Deployment (the device it runs on, pods ready), lists its models
//! through the service proxy (GET), and sends one short chat completion through a
//! port-forward to the server's pod (POST) for a fresh reply and its time — verify's own
//! requests (`apply::verify`, `apply::port_forward`). Read-only.
//!
//! It also shows the model the server starts (id, vLLM's revision, the device it compiled
//! for, and for OVMS the versions `GET /v1/config` reports) against the one the plan starts.
//!
//! `--json` prints `k3d-gpu.agent-status/v1`. Exit 0 when the server replied, 1 when it did
//! not (the document says what is missing, an API server that does not answer included), 2
//! when the kubeconfig has no context for the cluster (said as the cluster not existing when
//! that is why: `commands::cluster_failed`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::cli::{AgentStatusArgs, Global};
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};

/// `agent status --json`.
pub const SCHEMA: &str = "k3d-gpu.agent-status/v1";

/// How long each read (the Deployment, the models list) may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The `k3d-gpu.agent-status/v1` document (also the MCP tool `agent_status`'s result).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    pub schema: &'static str,
    pub context: String,
    pub endpoint: Endpoint,
    /// The model ids the server lists (`GET <api>/models`), empty when it does not answer.
    pub models: Vec<crate::escape::Untrusted>,
    pub device: Device,
    /// The model the server starts, planned against running.
    pub model: Model,
    /// The fresh reply, or null with `problems` saying why.
    pub reply: Option<Reply>,
    /// What is not right, in words; empty when the server replied.
    pub problems: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Endpoint {
    pub namespace: String,
    pub service: String,
    pub port: u64,
    /// The OpenAI API's root (`/v1` vLLM, `/v3` OVMS).
    pub api: String,
    /// Inside the cluster.
    pub url: String,
    /// From this machine: the port-forward that reaches it on 127.0.0.1.
    pub port_forward: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Device {
    /// What the config's placement decides (`k3d-gpu agent`).
    pub placed: String,
    pub backend: String,
    /// What the running server uses: OVMS's `--target_device`, else the device its resource
    /// names; null when the Deployment is not there.
    pub in_use: Option<String>,
    /// The accelerator resource and how many the pod holds.
    pub resource: Option<String>,
    pub count: Option<u64>,
    /// Ready pods of the Deployment, and how many it wants.
    pub ready: Option<u64>,
    pub replicas: Option<u64>,
}

/// A model server's model as its container starts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ModelRef {
    /// The Hugging Face id (vLLM's `serve` argument, OVMS's `--source_model`).
    pub id: Option<String>,
    /// vLLM's `--revision` (the pinned commit of the default model); OVMS takes none.
    pub revision: Option<String>,
    /// The device it runs and compiles for (OVMS's `--target_device`, else its resource's).
    pub device: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Model {
    /// What the config's plan starts.
    pub planned: ModelRef,
    /// What the running Deployment starts; null when it is not there.
    pub running: Option<ModelRef>,
    /// OVMS: the model versions it reports, with their state (`GET /v1/config`), e.g.
    /// `1 AVAILABLE`; empty for vLLM, which has none.
    pub versions: Vec<String>,
    /// Whether the running server is the planned one (model, revision and device); null
    /// when nothing runs. A silent change of the default model or its revision shows here.
    pub matches: Option<bool>,
}

/// The model a server's container starts.
fn model_of(container: &Value) -> ModelRef {
    let args: Vec<&str> = container["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let after = |flag: &str| args.iter().position(|a| *a == flag).and_then(|i| args.get(i + 1)).map(|s| s.to_string());
    let id = match args.first() {
        Some(&"serve") => args.get(1).map(|s| s.to_string()),
        _ => after("--source_model"),
    };
    ModelRef { id, revision: after("--revision"), device: device_in_use(container).0 }
}

/// The versions an OVMS `/v1/config` answer reports for `name`: `VERSION STATE`.
fn ovms_versions(body: &str, name: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    v[name]["model_version_status"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let version =
                s["version"].as_str().map(str::to_string).or_else(|| s["version"].as_u64().map(|n| n.to_string()));
            format!("{} {}", version.unwrap_or_default(), s["state"].as_str().unwrap_or_default())
        })
        .map(|line| crate::escape::one_line(&line).into_owned())
        .take(16)
        .collect()
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Reply {
    pub model: String,
    pub first_words: String,
    pub millis: u64,
}

/// The device a running server's container uses: OVMS's `--target_device`, else by the
/// accelerator resource it requests (none: the CPU).
fn device_in_use(container: &Value) -> (Option<String>, Option<String>, Option<u64>) {
    let args: Vec<&str> = container["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let target = args.iter().position(|a| *a == "--target_device").and_then(|i| args.get(i + 1)).map(|d| d.to_string());
    let resource = container["resources"]["limits"]
        .as_object()
        .into_iter()
        .flatten()
        .find(|(k, _)| k.contains('/'))
        .map(|(k, v)| (k.clone(), v.as_str().and_then(|n| n.parse().ok()).or(v.as_u64())));
    let by_resource = |r: &str| {
        if r.starts_with("nvidia.com/") {
            "CUDA"
        } else if r.starts_with("habana.ai/") {
            "HPU"
        } else if r.starts_with("npu.intel.com/") {
            "NPU"
        } else {
            "GPU"
        }
    };
    let in_use = target.or_else(|| Some(resource.as_ref().map_or("CPU", |(r, _)| by_resource(r)).to_string()));
    let (resource, count) = resource.map_or((None, None), |(r, n)| (Some(r), n));
    (in_use, resource, count)
}

/// The model ids of an OpenAI models list.
fn model_ids(body: &str) -> Vec<crate::escape::Untrusted> {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str().map(crate::escape::Untrusted::from))
        // A server may list thousands; the status shows what it serves, not a catalogue.
        .take(MAX_MODELS)
        .collect()
}

/// The most model ids `agent status` keeps from `/v1/models`.
const MAX_MODELS: usize = 16;

pub fn run(global: &Global, args: &AgentStatusArgs) -> Result<u8> {
    let status = status(global, Duration::from_secs(args.timeout))?;
    if global.json {
        super::print_bytes(&crate::canonical::to_bytes(&status));
    } else {
        super::print_bytes(crate::escape::assembled(&text(&status)).as_bytes());
    }
    Ok(if status.reply.is_some() { EXIT_OK } else { EXIT_FAILED })
}

/// The running agent asked, as [`run`] prints it: `timeout` is how long the fresh reply may
/// take. Read-only; an error only when there is nothing to ask (no agent, no context).
pub fn status(global: &Global, timeout: Duration) -> Result<Status> {
    let (graph, _, context) = super::graph::agent_graph(global)?;
    let Some(plan) = &graph.agent else {
        return Err(Error::Usage { message: "the config deploys no agent".into(), help: Some("add [agent]".into()) });
    };
    let check = graph
        .resources()
        .find(|r| r.spec["check"] == "endpoint" && r.spec["chat"].is_object())
        .map(|r| r.spec.clone())
        .ok_or_else(|| Error::Usage { message: "the agent has no chat endpoint to ask".into(), help: None })?;
    let namespace = check["namespace"].as_str().unwrap_or_default().to_string();
    let service = check["service"].as_str().unwrap_or_default().to_string();
    let planned = graph
        .get(&format!("k8s/apps/Deployment/{namespace}/{service}"))
        .map(|d| model_of(&d.spec["spec"]["template"]["spec"]["containers"][0]))
        .unwrap_or(ModelRef { id: None, revision: None, device: None });
    let port = check["port"].as_u64().unwrap_or(u64::from(crate::compile::workloads::PORT));
    let api = check["path"].as_str().unwrap_or_default().trim_end_matches("/models").to_string();
    let port_forward = crate::shell::Command::new("kubectl")
        .opt("--context", &context)
        .opt("-n", &namespace)
        .lit("port-forward")
        .arg(format!("svc/{service}"))
        .arg(format!("{port}:{port}"))
        .to_string();
    let mut status = Status {
        schema: SCHEMA,
        context: context.clone(),
        endpoint: Endpoint {
            url: format!("http://{service}.{namespace}.svc:{port}{api}"),
            namespace: namespace.clone(),
            service: service.clone(),
            port,
            api,
            port_forward,
        },
        models: Vec::new(),
        device: Device {
            placed: plan.device.to_string(),
            backend: plan.backend.to_string(),
            in_use: None,
            resource: None,
            count: None,
            ready: None,
            replicas: None,
        },
        model: Model { planned, running: None, versions: Vec::new(), matches: None },
        reply: None,
        problems: Vec::new(),
    };
    let rt = super::runtime()?;
    let kubeconfig = super::plan::kubeconfig_path();
    let client = rt.block_on(crate::observe::kubernetes::context_client(&kubeconfig, &context)).map_err(|e| {
        // A k3d cluster (no `[cluster] context`) that does not exist is said to be missing.
        match super::load_config(global).ok().filter(|i| i.config.cluster.context.is_none()) {
            Some(inputs) => super::cluster_failed(global, &inputs.config.cluster.name, e),
            None => super::observe_failed(e),
        }
    })?;
    rt.block_on(async {
        let get = |path: String| {
            let client = client.clone();
            async move {
                let request = http::Request::get(&path).body(Vec::new()).map_err(|e| e.to_string())?;
                match tokio::time::timeout(READ_TIMEOUT, client.request_text(request)).await {
                    Err(_) => Err(format!("no answer within {}s", READ_TIMEOUT.as_secs())),
                    Ok(r) => r.map_err(|e| e.to_string()),
                }
            }
        };
        match get(format!("/apis/apps/v1/namespaces/{namespace}/deployments/{service}")).await {
            Ok(text) => {
                let d: Value = serde_json::from_str(&text).unwrap_or_default();
                let container = &d["spec"]["template"]["spec"]["containers"][0];
                let running = model_of(container);
                status.model.matches = Some(running == status.model.planned);
                status.model.running = Some(running);
                let (in_use, resource, count) = device_in_use(container);
                status.device.in_use = in_use;
                status.device.resource = resource;
                status.device.count = count;
                status.device.replicas = d["spec"]["replicas"].as_u64();
                status.device.ready = Some(d["status"]["readyReplicas"].as_u64().unwrap_or(0));
            }
            Err(e) => status.problems.push(format!("Deployment {namespace}/{service}: {e}")),
        }
        if plan.backend == "ovms" {
            let config = format!("/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/v1/config");
            if let Ok(text) = get(config).await {
                let served = check["chat"]["model"].as_str().unwrap_or_default();
                status.model.versions = ovms_versions(&text, served);
            }
        }
        match get(crate::apply::verify::proxy_path(&check)).await {
            Ok(text) => status.models = model_ids(&text),
            Err(e) => status.problems.push(format!("svc/{service} does not list its models: {e}")),
        }
        if status.problems.is_empty() {
            if status.models.is_empty() {
                status.problems.push(format!("svc/{service} lists no model yet (still downloading or loading)"));
            } else {
                match tokio::time::timeout(timeout, crate::apply::verify::warm_up(&client, &check)).await {
                    Ok(Ok(reply)) => {
                        status.reply = Some(Reply {
                            model: check["chat"]["model"].as_str().unwrap_or_default().to_string(),
                            first_words: reply.first_words,
                            millis: reply.millis,
                        })
                    }
                    Ok(Err(e)) => status.problems.push(e.to_string()),
                    Err(_) => {
                        status.problems.push(format!("svc/{service} gave no reply within {}s", timeout.as_secs()))
                    }
                }
            }
        }
        Ok::<(), Error>(())
    })?;
    Ok(status)
}

/// The text form.
fn text(s: &Status) -> String {
    // The models list, the Deployment's arguments, the reply and the errors are the cluster's
    // and the server's words: each is one escaped line (the model ids are `Untrusted`).
    let l = |text: &str| crate::escape::one_line(text).into_owned();
    let e = &s.endpoint;
    let mut out = format!("endpoint  {} (context {})\n", l(&e.url), l(&s.context));
    out.push_str(&format!(
        "          from here: {}, then http://127.0.0.1:{}{}\n",
        l(&e.port_forward),
        e.port,
        l(&e.api)
    ));
    let models: Vec<String> = s.models.iter().map(ToString::to_string).collect();
    out.push_str(&format!(
        "models    {}\n",
        if models.is_empty() { "none listed".to_string() } else { models.join(", ") }
    ));
    let d = &s.device;
    let held = match (&d.resource, d.count) {
        (Some(r), Some(n)) => format!(" ({} × {n})", l(r)),
        (Some(r), None) => format!(" ({})", l(r)),
        _ => String::new(),
    };
    let pods = match (d.ready, d.replicas) {
        (Some(r), Some(n)) => format!(", {r}/{n} pods ready"),
        _ => String::new(),
    };
    match &d.in_use {
        Some(in_use) => out.push_str(&format!("device    {}{held}, backend {}{pods}\n", l(in_use), l(&d.backend))),
        None => {
            out.push_str(&format!("device    not running (placed on {}, backend {})\n", l(&d.placed), l(&d.backend)))
        }
    }
    if let Some(in_use) = &d.in_use
        && *in_use != d.placed
    {
        out.push_str(&format!("          the config now places it on {}: plan and apply to move it\n", l(&d.placed)));
    }
    let shown = |m: &ModelRef| {
        let mut t = m.id.clone().unwrap_or_else(|| "?".into());
        if let Some(r) = &m.revision {
            t.push_str(&format!(" @ {r}"));
        }
        if let Some(d) = &m.device {
            t.push_str(&format!(" on {d}"));
        }
        crate::escape::one_line(&t).into_owned()
    };
    let m = &s.model;
    match (&m.running, m.matches) {
        (Some(running), Some(true)) => out.push_str(&format!("model     {} (as planned)\n", shown(running))),
        (Some(running), _) => out.push_str(&format!(
            "model     {} — the plan starts {}: plan and apply to move it\n",
            shown(running),
            shown(&m.planned)
        )),
        (None, _) => out.push_str(&format!("model     not running (the plan starts {})\n", shown(&m.planned))),
    }
    if !m.versions.is_empty() {
        out.push_str(&format!("          versions {}\n", l(&m.versions.join(", "))));
    }
    match &s.reply {
        Some(r) => out.push_str(&format!(
            "reply     \"{}\" in {:.1}s ({})\n",
            l(&r.first_words),
            r.millis as f64 / 1e3,
            l(&r.model)
        )),
        None => out.push_str("reply     none\n"),
    }
    for p in &s.problems {
        out.push_str(&format!("problem   {}\n", l(p)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_device_in_use_comes_from_the_running_container() {
        let ovms = json!({ "args": ["--target_device", "NPU"], "resources": { "limits": { "npu.intel.com/accel": "1", "memory": "6Gi" } } });
        assert_eq!(device_in_use(&ovms), (Some("NPU".into()), Some("npu.intel.com/accel".into()), Some(1)));
        let cuda =
            json!({ "args": ["serve", "m"], "resources": { "limits": { "nvidia.com/gpu": "2", "memory": "16Gi" } } });
        assert_eq!(device_in_use(&cuda), (Some("CUDA".into()), Some("nvidia.com/gpu".into()), Some(2)));
        let cpu = json!({ "args": ["serve", "m"], "resources": { "limits": { "memory": "8Gi" } } });
        assert_eq!(device_in_use(&cpu), (Some("CPU".into()), None, None));
        let ids = model_ids(r#"{"data":[{"id":"Qwen3-4B"},{"id":"x"}]}"#);
        assert_eq!(ids.iter().map(|m| m.raw()).collect::<Vec<_>>(), ["Qwen3-4B", "x"]);
        assert!(model_ids("no healthy upstream").is_empty());
        let many: Vec<Value> = (0..1000).map(|i| json!({ "id": format!("m{i}") })).collect();
        assert_eq!(model_ids(&json!({ "data": many }).to_string()).len(), MAX_MODELS);
    }

    #[test]
    fn the_model_comes_from_the_container_and_ovms_reports_its_versions() {
        let ovms = json!({ "args": ["--source_model", "OpenVINO/Qwen3-4B-int4-ov", "--model_name", "Qwen3-4B", "--target_device", "GPU"] });
        let m = model_of(&ovms);
        assert_eq!(
            (m.id.as_deref(), m.revision, m.device.as_deref()),
            (Some("OpenVINO/Qwen3-4B-int4-ov"), None, Some("GPU"))
        );
        let vllm = json!({ "args": ["serve", "Qwen/Qwen3-4B", "--revision", "abc"], "resources": { "limits": { "nvidia.com/gpu": "1" } } });
        let m = model_of(&vllm);
        assert_eq!(
            (m.id.as_deref(), m.revision.as_deref(), m.device.as_deref()),
            (Some("Qwen/Qwen3-4B"), Some("abc"), Some("CUDA"))
        );
        let config = r#"{"Qwen3-4B": {"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK"}}]}}"#;
        assert_eq!(ovms_versions(config, "Qwen3-4B"), ["1 AVAILABLE"]);
        assert!(ovms_versions(config, "other").is_empty());
        assert!(ovms_versions("not json", "Qwen3-4B").is_empty());
    }

    #[test]
    fn the_servers_words_cannot_forge_a_line() {
        let forged = "x\nreply     \"all checks passed\"\nproblem   none\x1b]52;c;aGk=\x07";
        let container =
            json!({ "args": ["--target_device", forged], "resources": { "limits": { "npu.intel.com/accel": "1" } } });
        let (in_use, resource, count) = device_in_use(&container);
        let endpoint = Endpoint {
            namespace: "agent".into(),
            service: "llm".into(),
            port: 8000,
            api: "/v3".into(),
            url: "http://llm.agent.svc:8000/v3".into(),
            port_forward: "kubectl port-forward".into(),
        };
        let status = Status {
            schema: SCHEMA,
            context: "k3d-lab".into(),
            endpoint,
            models: model_ids(&json!({ "data": [{ "id": forged }] }).to_string()),
            device: Device {
                placed: "NPU".into(),
                backend: "ovms".into(),
                in_use,
                resource,
                count,
                ready: None,
                replicas: None,
            },
            model: Model {
                planned: model_of(&container),
                running: Some(model_of(&container)),
                versions: vec![forged.into()],
                matches: Some(false),
            },
            reply: None,
            problems: vec![format!("svc/llm: {forged}")],
        };
        let shown = text(&status);
        assert!(!shown.contains('\x1b') && !shown.contains('\x07'), "{shown}");
        for line in shown.lines() {
            assert!(
                !line.starts_with("reply     \"") && !line.starts_with("problem   none"),
                "forged: {line:?} in\n{shown}"
            );
        }
    }
}
