//! `k3d-gpu agent status`: the running agent, asked through the cluster's API server. The
//! config's graph names the LLM server's readiness check (`verify/endpoint/...` with `chat`);
//! this reads the server's Deployment (the device it runs on, pods ready), lists its models
//! through the service proxy (GET), and sends one short chat completion through a
//! port-forward to the server's pod (POST) for a fresh reply and its time — verify's own
//! requests (`apply::verify`, `apply::port_forward`). Read-only.
//!
//! `--json` prints `k3d-gpu.agent-status/v1`. Exit 0 when the server replied, 1 when it did
//! not (the document says what is missing, an API server that does not answer included), 2
//! when the kubeconfig has no context for the cluster.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::cli::{AgentStatusArgs, Global};
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};

/// `agent status --json`.
pub const SCHEMA: &str = "k3d-gpu.agent-status/v1";

/// How long each read (the Deployment, the models list) may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize)]
struct Status {
    schema: &'static str,
    context: String,
    endpoint: Endpoint,
    /// The model ids the server lists (`GET <api>/models`), empty when it does not answer.
    models: Vec<String>,
    device: Device,
    /// The fresh reply, or null with `problems` saying why.
    reply: Option<Reply>,
    /// What is not right, in words; empty when the server replied.
    problems: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Endpoint {
    namespace: String,
    service: String,
    port: u64,
    /// The OpenAI API's root (`/v1` vLLM, `/v3` OVMS).
    api: String,
    /// Inside the cluster.
    url: String,
    /// From this machine: the port-forward that reaches it on 127.0.0.1.
    port_forward: String,
}

#[derive(Debug, Serialize)]
struct Device {
    /// What the config's placement decides (`k3d-gpu agent`).
    placed: String,
    backend: String,
    /// What the running server uses: OVMS's `--target_device`, else the device its resource
    /// names; null when the Deployment is not there.
    in_use: Option<String>,
    /// The accelerator resource and how many the pod holds.
    resource: Option<String>,
    count: Option<u64>,
    /// Ready pods of the Deployment, and how many it wants.
    ready: Option<u64>,
    replicas: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Reply {
    model: String,
    first_words: String,
    millis: u64,
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
fn model_ids(body: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    v["data"].as_array().into_iter().flatten().filter_map(|m| m["id"].as_str().map(str::to_string)).collect()
}

pub fn run(global: &Global, args: &AgentStatusArgs) -> Result<u8> {
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
        reply: None,
        problems: Vec::new(),
    };
    let rt = super::runtime()?;
    let kubeconfig = super::plan::kubeconfig_path();
    rt.block_on(async {
        let client =
            crate::observe::kubernetes::context_client(&kubeconfig, &context).await.map_err(super::observe_failed)?;
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
                let (in_use, resource, count) = device_in_use(&d["spec"]["template"]["spec"]["containers"][0]);
                status.device.in_use = in_use;
                status.device.resource = resource;
                status.device.count = count;
                status.device.replicas = d["spec"]["replicas"].as_u64();
                status.device.ready = Some(d["status"]["readyReplicas"].as_u64().unwrap_or(0));
            }
            Err(e) => status.problems.push(format!("Deployment {namespace}/{service}: {e}")),
        }
        match get(crate::apply::verify::proxy_path(&check)).await {
            Ok(text) => status.models = model_ids(&text),
            Err(e) => status.problems.push(format!("svc/{service} does not list its models: {e}")),
        }
        if status.problems.is_empty() {
            if status.models.is_empty() {
                status.problems.push(format!("svc/{service} lists no model yet (still downloading or loading)"));
            } else {
                let timeout = Duration::from_secs(args.timeout);
                match tokio::time::timeout(timeout, crate::apply::verify::warm_up(&client, &check)).await {
                    Ok(Ok(reply)) => {
                        status.reply = Some(Reply {
                            model: check["chat"]["model"].as_str().unwrap_or_default().to_string(),
                            first_words: reply.first_words,
                            millis: reply.millis,
                        })
                    }
                    Ok(Err(e)) => status.problems.push(e.to_string()),
                    Err(_) => status.problems.push(format!("svc/{service} gave no reply within {}s", args.timeout)),
                }
            }
        }
        Ok::<(), Error>(())
    })?;
    if global.json {
        super::print_bytes(&crate::canonical::to_bytes(&status));
    } else {
        super::print_bytes(crate::escape::for_terminal(&text(&status)).as_bytes());
    }
    Ok(if status.reply.is_some() { EXIT_OK } else { EXIT_FAILED })
}

/// The text form.
fn text(s: &Status) -> String {
    let e = &s.endpoint;
    let mut out = format!("endpoint  {} (context {})\n", e.url, s.context);
    out.push_str(&format!("          from here: {}, then http://127.0.0.1:{}{}\n", e.port_forward, e.port, e.api));
    out.push_str(&format!(
        "models    {}\n",
        if s.models.is_empty() { "none listed".to_string() } else { s.models.join(", ") }
    ));
    let d = &s.device;
    let held = match (&d.resource, d.count) {
        (Some(r), Some(n)) => format!(" ({r} × {n})"),
        (Some(r), None) => format!(" ({r})"),
        _ => String::new(),
    };
    let pods = match (d.ready, d.replicas) {
        (Some(r), Some(n)) => format!(", {r}/{n} pods ready"),
        _ => String::new(),
    };
    match &d.in_use {
        Some(in_use) => out.push_str(&format!("device    {in_use}{held}, backend {}{pods}\n", d.backend)),
        None => out.push_str(&format!("device    not running (placed on {}, backend {})\n", d.placed, d.backend)),
    }
    if let Some(in_use) = &d.in_use
        && *in_use != d.placed
    {
        out.push_str(&format!("          the config now places it on {}: plan and apply to move it\n", d.placed));
    }
    match &s.reply {
        Some(r) => {
            out.push_str(&format!("reply     \"{}\" in {:.1}s ({})\n", r.first_words, r.millis as f64 / 1e3, r.model))
        }
        None => out.push_str("reply     none\n"),
    }
    for p in &s.problems {
        out.push_str(&format!("problem   {p}\n"));
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
        assert_eq!(model_ids(r#"{"data":[{"id":"Qwen3-4B"},{"id":"x"}]}"#), ["Qwen3-4B", "x"]);
        assert!(model_ids("no healthy upstream").is_empty());
    }
}
