//! `k3d-gpu logs` as a user runs it: the server node's log from the private dockerd, and a
//! catalog component's pods' logs from the fake API server (found through the workload's
//! selector, not-ready pods first, control characters escaped).

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, State, k3s_node};
use support::{docker_ready, import_image};

fn k3d_gpu(dir: &Path, args: &[&str]) -> Output {
    support::k3d_gpu_in(dir, args)
}

fn k3d_gpu_docker(dir: &Path, args: &[&str]) -> Output {
    support::k3d_gpu_docker_in(dir, args)
}

fn config(dir: &Path, cluster: &str) {
    std::fs::write(dir.join("k3dgpu.toml"), format!("[cluster]\nname = \"{cluster}\"\n")).unwrap();
}

fn pod(name: &str, app: &str, ready: bool, log: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {"app": app},
            "annotations": {"fake.k3d-gpu.io/log": log}},
        "spec": {"containers": [{"name": "plugin", "image": "x:1"}]},
        "status": {"containerStatuses": [{"name": "plugin", "image": "x:1", "imageID": "", "ready": ready, "restartCount": 0}]}})
}

#[test]
fn a_components_pods_logs_come_not_ready_first_and_escaped() {
    let daemonset = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "intel-gpu-plugin", "namespace": "kube-system",
            "labels": {"k3d-gpu.io/component": "intel-gpu-plugin", "app.kubernetes.io/managed-by": "k3d-gpu"}},
        "spec": {"selector": {"matchLabels": {"app": "intel-gpu-plugin"}}, "template": {"metadata": {}}}});
    let server = FakeApiServer::start_in_background(State {
        nodes: vec![k3s_node("k3d-lg-server-0", true)],
        objects: vec![
            daemonset,
            pod("a-ready", "intel-gpu-plugin", true, "old line\nregistered gpu.intel.com/i915\n"),
            pod("b-broken", "intel-gpu-plugin", false, "error: no /dev/dri\u{1b}[2J\n"),
            pod("other", "coredns", true, "not this one\n"),
        ],
        served: vec![
            "/api/v1/pods".into(),
            "/apis/apps/v1/daemonsets".into(),
            "/apis/apps/v1/deployments".into(),
            "/apis/apps/v1/statefulsets".into(),
        ],
        ..State::default()
    });
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "lg");
    server.kubeconfig("lg", dir.path());
    let out = k3d_gpu(dir.path(), &["logs", "intel-gpu-plugin", "--tail", "1"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let broken = text.find("kube-system/b-broken/plugin (not ready)").expect(&text);
    let ready = text.find("kube-system/a-ready/plugin").expect(&text);
    assert!(broken < ready, "the pod that is not ready comes first:\n{text}");
    assert!(text.contains("registered gpu.intel.com/i915") && !text.contains("old line"), "--tail 1:\n{text}");
    assert!(text.contains("\\x1b[2J") && !text.contains('\u{1b}'), "escaped:\n{text}");
    assert!(!text.contains("not this one"), "{text}");
    // --json: the same text in one object with a schema key.
    let out = k3d_gpu(dir.path(), &["logs", "intel-gpu-plugin", "--tail", "1", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["schema"].as_str(), doc["component"].as_str()),
        (Some("k3d-gpu.logs/v1"), Some("intel-gpu-plugin"))
    );
    assert_eq!(doc["text"].as_str(), Some(text.as_str()), "{doc}");
    let follow = k3d_gpu(dir.path(), &["logs", "--follow", "--json"]);
    assert_eq!(follow.status.code(), Some(2), "{}", String::from_utf8_lossy(&follow.stderr));

    // One endless line: the API server is asked to stop at the cap, whatever the tail says.
    server.change(|s| s.objects.push(pod("c-chatty", "intel-gpu-plugin", true, &"x".repeat(3 << 20))));
    let out = k3d_gpu(dir.path(), &["logs", "intel-gpu-plugin", "--tail", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let cap = usize::try_from(k3d_gpu::logs::MAX_LOG_BYTES).unwrap();
    assert!(out.stdout.len() < cap + 4096, "{} bytes printed for a 3 MiB line", out.stdout.len());

    let unknown = k3d_gpu(dir.path(), &["logs", "intel-gpu-plugn"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("intel-gpu-plugin"), "a suggestion");
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn the_server_nodes_log_comes_from_docker() {
    if !docker_ready() {
        return;
    }
    use bollard::query_parameters::{RemoveContainerOptions, WaitContainerOptions};
    use futures_util::StreamExt;
    let cluster = format!("lg{}", std::process::id());
    let image = "k3d-gpu-test/logs:1";
    import_image(image, "1.0.0");
    let ep = k3d_gpu::observe::docker::endpoint(&|k: &str| std::env::var(k).ok(), None);
    let docker = k3d_gpu::observe::docker::connect(&ep).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let name = rt.block_on(async {
        let entrypoint = ["/bin/sh", "-c", "echo k3s is up; echo 'bad \x1b[31m' >&2"].map(String::from).to_vec();
        let name = support::start_k3d_server(&docker, &cluster, image, Some(entrypoint), None).await;
        let _ = docker.wait_container(&name, None::<WaitContainerOptions>).next().await;
        name
    });
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &cluster);
    let out = k3d_gpu_docker(dir.path(), &["logs"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("k3s is up") && text.contains("bad \\x1b[31m") && !text.contains('\u{1b}'), "{text}");
    rt.block_on(async {
        let _ =
            docker.remove_container(&name, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
    });
    // No server node: bad input, not an empty success.
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "nosuchcluster");
    assert_eq!(k3d_gpu_docker(dir.path(), &["logs"]).status.code(), Some(2));
}
