//! `k3d-gpu agent status` through the real binary against the fake API server: the endpoint,
//! the served models (GET through the service proxy), the device the running Deployment uses
//! and a fresh reply (a chat completion POSTed through the proxy), as text and as
//! `k3d-gpu.agent-status/v1`; a server that does not answer exits 1 and says why.

mod support;

use std::process::Output;

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{FakeApiServer, State, kubeconfig_text};
use support::{hosts_dir, repo};

const HOST: &str = "rtx2000ada-x2";

/// The object `id` the config compiles to on [`HOST`].
fn compiled(config: &str, id: &str) -> Value {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let config = k3d_gpu::config::load_str("k3dgpu.toml", config).unwrap();
    let graph = k3d_gpu::compile::compile(&config, &support::facts_of(HOST), &catalog).unwrap();
    graph.get(id).unwrap_or_else(|| panic!("no {id}")).spec.clone()
}

/// The config's vLLM Deployment as compiled, with the status a rolled-out one has.
fn deployment(config: &str) -> Value {
    let mut d = compiled(config, "k8s/apps/Deployment/k3d-gpu-agent/vllm");
    d["metadata"]["uid"] = json!("u-vllm");
    d["metadata"]["resourceVersion"] = json!("7");
    d["status"] = json!({ "replicas": 1, "readyReplicas": 1, "availableReplicas": 1 });
    d
}

/// The vLLM Service the config compiles to, as the server holds it.
fn service(config: &str) -> Value {
    let mut svc = compiled(config, "k8s/core/Service/k3d-gpu-agent/vllm");
    svc["metadata"]["uid"] = json!("u-vllm-svc");
    svc["metadata"]["resourceVersion"] = json!("8");
    svc
}

fn status(server: &FakeApiServer, dir: &tempfile::TempDir, config: &str, extra: &[&str]) -> Output {
    let path = dir.path().join("k3dgpu.toml");
    std::fs::write(&path, config).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_text(&server.url, "gpu")).unwrap();
    K3dGpu::new()
        .args(["agent", "status"])
        .args(extra)
        .args(["-c", path.to_str().unwrap(), "--root", hosts_dir().join(HOST).to_str().unwrap()])
        .env("KUBECONFIG", &kubeconfig)
        .cwd(repo())
        .output()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn agent_status_shows_the_endpoint_models_device_and_a_fresh_reply() {
    let config = "[agent]\ngpus = 2\n";
    let models = json!({"object": "list", "data": [{"id": "Qwen3-4B", "object": "model"}]});
    let reply = json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": "Hello! Nice to meet you, friend."}, "finish_reason": "stop"}]});
    let svc = service(config);
    let (pod, key) = support::port_forward::ready_pod_behind(&svc, 8000);
    let server = FakeApiServer::start_in_background(State {
        objects: vec![deployment(config), svc, pod],
        proxied: vec![("vllm:8000/v1/models".into(), models)],
        forwarded: vec![(format!("{key}/v1/chat/completions"), reply)],
        ..State::k3s()
    });
    let dir = tempfile::tempdir().unwrap();

    let out = status(&server, &dir, config, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(shown.contains("endpoint  http://vllm.k3d-gpu-agent.svc:8000/v1 (context k3d-gpu)"), "{shown}");
    assert!(
        shown.contains(
            "kubectl --context k3d-gpu -n k3d-gpu-agent port-forward svc/vllm 8000:8000, then http://127.0.0.1:8000/v1"
        ),
        "{shown}"
    );
    assert!(shown.contains("models    Qwen3-4B\n"), "{shown}");
    assert!(shown.contains("device    CUDA (nvidia.com/gpu × 2), backend vllm, 1/1 pods ready"), "{shown}");
    assert!(shown.contains("reply     \"Hello! Nice to meet you, friend.\" in "), "{shown}");
    // The reply is fresh: one chat completion POSTed through a port-forward to the server's
    // pod (never the service proxy), naming the served model.
    let posts = server.state.lock().unwrap().forwarded_requests.clone();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!((posts[0].0.as_str(), posts[0].1.as_str()), (format!("{key}/v1/chat/completions").as_str(), "POST"));
    assert_eq!(posts[0].2["model"], "Qwen3-4B");
    assert!(server.proxied_posts().is_empty(), "{:?}", server.proxied_posts());
    // Read-only: nothing written.
    assert!(
        server.requests().iter().all(|r| r.starts_with("GET ") || r.contains("/proxy/")),
        "{:?}",
        server.requests()
    );

    let json_out = status(&server, &dir, config, &["--json"]);
    assert_eq!(json_out.status.code(), Some(0), "{}", text(&json_out));
    let doc: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.agent-status/v1");
    assert_eq!(doc["models"], json!(["Qwen3-4B"]));
    assert_eq!(doc["device"]["in_use"], "CUDA");
    assert_eq!(doc["device"]["placed"], "CUDA");
    assert_eq!(doc["device"]["count"], 2);
    assert_eq!(doc["endpoint"]["url"], "http://vllm.k3d-gpu-agent.svc:8000/v1");
    assert_eq!(doc["reply"]["first_words"], "Hello! Nice to meet you, friend.");
    assert_eq!(doc["reply"]["model"], "Qwen3-4B");
    assert!(doc["reply"]["millis"].is_u64());
    assert_eq!(doc["problems"], json!([]));
    // Issue 37, defect 7: the model's truth, planned against running.
    assert_eq!(doc["model"]["matches"], true, "{:#}", doc["model"]);
    assert_eq!(doc["model"]["running"]["id"], "Qwen/Qwen3-4B");
    assert_eq!(doc["model"]["running"]["revision"], "1cfa9a7208912126459214e8b04321603b3df60c");
    assert_eq!(doc["model"]["running"]["device"], "CUDA");
    assert!(
        shown.contains("model     Qwen/Qwen3-4B @ 1cfa9a7208912126459214e8b04321603b3df60c on CUDA (as planned)"),
        "{shown}"
    );
}

/// Issue 37, defect 7: a running server whose model revision is not the planned one (a
/// silent change of the default model's revision) shows as a mismatch, in the text and in
/// `--json`.
#[test]
fn agent_status_shows_a_model_revision_the_plan_does_not_start() {
    let config = "[agent]\ngpus = 2\n";
    let mut d = deployment(config);
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut().unwrap();
    let at = args.iter().position(|a| a == "--revision").unwrap() + 1;
    args[at] = json!("0000000000000000000000000000000000000000");
    let server = FakeApiServer::start_in_background(State { objects: vec![d], ..State::k3s() });
    let dir = tempfile::tempdir().unwrap();
    let out = status(&server, &dir, config, &["--timeout", "1"]);
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        shown.contains("model     Qwen/Qwen3-4B @ 0000000000000000000000000000000000000000 on CUDA — the plan starts Qwen/Qwen3-4B @ 1cfa9a7208912126459214e8b04321603b3df60c on CUDA"),
        "{shown}"
    );
    let json_out = status(&server, &dir, config, &["--json", "--timeout", "1"]);
    let doc: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(doc["model"]["matches"], false, "{:#}", doc["model"]);
    assert_eq!(doc["model"]["planned"]["revision"], "1cfa9a7208912126459214e8b04321603b3df60c");
}

#[test]
fn agent_status_of_a_server_that_does_not_answer_exits_1_and_says_why() {
    let config = "[agent]\n";
    // The Deployment exists, but no pod behind the Service answers (the proxy says 503).
    let server = FakeApiServer::start_in_background(State { objects: vec![deployment(config)], ..State::k3s() });
    let dir = tempfile::tempdir().unwrap();
    let out = status(&server, &dir, config, &["--json", "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.agent-status/v1");
    assert_eq!(doc["reply"], Value::Null);
    let problems = doc["problems"].to_string();
    assert!(problems.contains("svc/vllm does not list its models"), "{problems}");
    assert!(server.proxied_posts().is_empty(), "no chat completion to a server that lists nothing");

    // No Deployment at all: the device is not running, said in the text.
    let empty = FakeApiServer::start_in_background(State::k3s());
    let out = status(&empty, &dir, config, &["--timeout", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(shown.contains("device    not running (placed on CUDA, backend vllm)"), "{shown}");
    assert!(shown.contains("problem   Deployment k3d-gpu-agent/vllm:"), "{shown}");

    // No cluster to ask: exit 2 with what to check.
    let dead = dir.path().join("dead-kubeconfig");
    std::fs::write(&dead, kubeconfig_text("http://127.0.0.1:9", "gpu")).unwrap();
    let out = K3dGpu::new()
        .args(["agent", "status", "-c", dir.path().join("k3dgpu.toml").to_str().unwrap()])
        .args(["--root", hosts_dir().join(HOST).to_str().unwrap()])
        .env("KUBECONFIG", &dead)
        .output();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("does not exist"), "the context is there: {}", text(&out));

    // Issue 39: no context for the cluster and no engine running its nodes: the cluster does
    // not exist, and that is what is said (with how to create it), not "check your kubeconfig".
    for kubeconfig in [dir.path().join("other-kubeconfig"), dir.path().join("no-kubeconfig")] {
        std::fs::write(dir.path().join("other-kubeconfig"), kubeconfig_text("http://127.0.0.1:9", "other")).unwrap();
        let out = K3dGpu::new()
            .args(["agent", "status", "-c", dir.path().join("k3dgpu.toml").to_str().unwrap()])
            .args(["--root", hosts_dir().join(HOST).to_str().unwrap()])
            .env("KUBECONFIG", &kubeconfig)
            .output();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("cluster gpu does not exist"), "{}", text(&out));
        assert!(text(&out).contains("create it with `k3d-gpu "), "{}", text(&out));
    }
}
