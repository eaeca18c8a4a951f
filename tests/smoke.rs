//! `k3d-gpu test` through the real binary against the fake API server: the smoke pods are
//! created (POST), watched and read (log) and deleted through the real API paths. A thread
//! plays the scheduler and the kubelet: it runs each pod's own command with the host's `sh`,
//! its device paths mapped into a temporary /dev the test lays out, so the verdict reads what
//! the product's probe really printed.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{FakeApiServer, State, k3s_node};

const HOST: &str = "desktop-rpl-nvidia";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// How the kubelet treats the pods.
#[derive(Clone, Copy, PartialEq)]
enum Kubelet {
    /// Every pod runs; the devices open.
    Healthy,
    /// The render node is there but the pod cannot open it; GPUs are held by another pod.
    Broken,
}

struct Cluster {
    dir: tempfile::TempDir,
    server: FakeApiServer,
    stop: Arc<AtomicBool>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Runs a pod's command as the kubelet would, with `/dev/…` paths under `dev`.
fn run_container(pod: &Value, dev: &Path) -> (String, i32) {
    let c = &pod["spec"]["containers"][0];
    let argv: Vec<String> = c["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    if argv[0] == "nvidia-smi" {
        return ("GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-6f1d2a9e)\n".into(), 0);
    }
    let mapped: Vec<String> = argv[3..]
        .iter()
        .map(|a| a.strip_prefix("/dev").map_or(a.clone(), |r| format!("{}{r}", dev.display())))
        .collect();
    let out = Command::new(&argv[0]).args(&argv[1..3]).args(&mapped).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap().replace(&dev.display().to_string(), "/dev");
    (text, out.status.code().unwrap_or(1))
}

fn cluster(kubelet: Kubelet, allocatable: &[(&str, &str)]) -> Cluster {
    let mut node = k3s_node("k3d-gpu-server-0", true);
    for (r, n) in allocatable {
        node["status"]["allocatable"][*r] = json!(n);
    }
    let mut state = State { nodes: vec![node], ..State::k3s() };
    state.served.push("/api/v1/pods".into());
    if kubelet == Kubelet::Broken {
        // A node image without the NVIDIA runtime: k3s made no `nvidia` RuntimeClass.
        state.objects.retain(|o| !(o["kind"] == "RuntimeClass" && o["metadata"]["name"] == "nvidia"));
    }
    let server = FakeApiServer::start_in_background(state);
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::create_dir_all(dev.join("dri")).unwrap();
    std::fs::write(dev.join("dri/card0"), "").unwrap();
    match kubelet {
        Kubelet::Healthy => std::fs::write(dev.join("dri/renderD128"), "").unwrap(),
        // What the pod cannot open (a directory fails a read-write open, as EACCES would).
        Kubelet::Broken => std::fs::create_dir(dev.join("dri/renderD128")).unwrap(),
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let kube = server.handle();
    std::thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            kube.change(|s| {
                for pod in s.objects.iter_mut().filter(|o| o["kind"] == "Pod" && o["status"]["phase"] == "Pending") {
                    if pod["metadata"]["annotations"]["test.k3d-gpu.io/seen"] == "1" {
                        continue;
                    }
                    pod["metadata"]["annotations"]["test.k3d-gpu.io/seen"] = json!("1");
                    let wants_nvidia = pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].is_string();
                    if kubelet == Kubelet::Broken && wants_nvidia {
                        pod["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]);
                        continue;
                    }
                    let (log, code) = run_container(pod, &dev);
                    pod["spec"]["nodeName"] = json!("k3d-gpu-server-0");
                    pod["metadata"]["annotations"]["fake.k3d-gpu.io/log"] = json!(log);
                    pod["status"] = json!({
                        "phase": if code == 0 { "Succeeded" } else { "Failed" },
                        "conditions": [{"type": "PodScheduled", "status": "True"}],
                        "containerStatuses": [{"name": "probe", "ready": false, "restartCount": 0, "image": "", "imageID": "",
                            "state": {"terminated": {"exitCode": code, "reason": "Completed"}}}],
                    });
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    std::fs::write(dir.path().join("k3dgpu.toml"), "").unwrap();
    server.kubeconfig("gpu", dir.path());
    Cluster { dir, server, stop }
}

impl Cluster {
    fn test(&self, extra: &[&str]) -> Output {
        K3dGpu::new()
            .arg("test")
            .args(["-c", self.dir.path().join("k3dgpu.toml").to_str().unwrap()])
            .args(["--root", repo().join("tests/fixtures/hosts").join(HOST).to_str().unwrap()])
            .args(["--timeout", "60"])
            .args(extra)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .output()
    }

    /// `report --offline --test SAVED` with the config CONFIG in the cluster's directory.
    fn report(&self, saved: &Path, config: &str) -> Output {
        K3dGpu::new()
            .arg("report")
            .args(["-c", self.dir.path().join(config).to_str().unwrap()])
            .args(["--root", repo().join("tests/fixtures/hosts").join(HOST).to_str().unwrap()])
            .args(["--offline", "--test", saved.to_str().unwrap()])
            .output()
    }

    fn pods_left(&self) -> usize {
        self.server.state.lock().unwrap().objects.iter().filter(|o| o["kind"] == "Pod").count()
    }
}

#[test]
fn each_advertised_resource_gets_a_pod_that_proves_its_device_usable() {
    let c = cluster(Kubelet::Healthy, &[("nvidia.com/gpu", "2"), ("gpu.intel.com/i915", "1")]);
    let out = c.test(&["--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.test/v1");
    assert_eq!(doc["passed"], true);
    let pods = doc["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2, "{doc:#}");
    let by = |r: &str| pods.iter().find(|p| p["resource"] == r).unwrap();
    let intel = by("gpu.intel.com/i915");
    assert_eq!(intel["verdict"]["seen"], 1);
    assert!(
        intel["verdict"]["evidence"].as_array().unwrap().iter().any(|e| e == "open /dev/dri/renderD128"),
        "{intel:#}"
    );
    let nvidia = by("nvidia.com/gpu");
    assert_eq!(nvidia["verdict"]["evidence"][0], "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-6f1d2a9e)");
    assert_eq!(nvidia["image"], "nvidia/cuda:13.4.2-base-ubuntu26.04");
    let counts = doc["counts"].as_array().unwrap();
    assert!(
        counts.iter().any(|c| c["resource"] == "nvidia.com/gpu" && c["facts"] == 2 && c["allocatable"] == 2),
        "{doc:#}"
    );
    // Through the real paths, and nothing left behind.
    let requests = c.server.requests();
    for want in [
        "POST /api/v1/namespaces/default/pods",
        "GET /api/v1/namespaces/default/pods/k3d-gpu-test-nvidia-com-gpu/log",
        "DELETE /api/v1/namespaces/default/pods/k3d-gpu-test-gpu-intel-com-i915",
        "GET /apis/node.k8s.io/v1/runtimeclasses/nvidia",
    ] {
        assert!(requests.iter().any(|r| r == want), "no {want} in {requests:#?}");
    }
    assert_eq!(c.pods_left(), 0);
    // The text says the same, with the evidence.
    let text = c.test(&[]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("pass  gpu.intel.com/i915 on k3d-gpu-server-0"), "{stdout}");
    assert!(stdout.contains("| open /dev/dri/renderD128"), "{stdout}");
}

#[test]
fn a_pod_that_cannot_use_its_device_fails_with_the_cause_and_fix() {
    // Allocatable 1 NVIDIA GPU where the facts hold 2; no RuntimeClass nvidia; the render
    // node cannot be opened.
    let c = cluster(Kubelet::Broken, &[("nvidia.com/gpu", "1"), ("gpu.intel.com/i915", "1")]);
    let out = c.test(&["--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["passed"], false);
    let pods = doc["pods"].as_array().unwrap();
    let by = |r: &str| pods.iter().find(|p| p["resource"] == r).unwrap();
    let nvidia = &by("nvidia.com/gpu")["verdict"];
    assert_eq!(nvidia["passed"], false);
    assert!(nvidia["cause"].as_str().unwrap().contains("no RuntimeClass nvidia"), "{nvidia:#}");
    assert!(nvidia["fix"].as_str().unwrap().contains("doctor"), "{nvidia:#}");
    let intel = &by("gpu.intel.com/i915")["verdict"];
    assert_eq!(intel["passed"], false);
    assert!(intel["cause"].as_str().unwrap().contains("could not open it"), "{intel:#}");
    assert!(
        intel["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("denied /dev/dri/renderD128"))
    );
    let problems = doc["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p["text"].as_str().unwrap().contains("advertises 1 nvidia.com/gpu, the host's facts hold 2")),
        "{doc:#}"
    );
    assert_eq!(c.pods_left(), 0);

    // The saved result goes into the report: each verdict with its cause and fix.
    let saved = c.dir.path().join("test.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let report = c.report(&saved, "k3dgpu.toml");
    let text = String::from_utf8_lossy(&report.stdout);
    assert_eq!(report.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&report.stderr));
    assert!(text.contains("test: FAILED, 2 pod(s), 3 failure(s)"), "{text}");
    assert!(text.contains("FAIL gpu.intel.com/i915 on k3d-gpu-server-0: 0 of 1 usable"), "{text}");
    assert!(text.contains("the cluster has no RuntimeClass nvidia"), "{text}");
    assert!(text.contains("advertises 1 nvidia.com/gpu, the host's facts hold 2"), "{text}");
    // A result of another cluster is refused, not shown as this one's.
    std::fs::write(c.dir.path().join("other.toml"), "[cluster]\nname = \"other\"\n").unwrap();
    let other = c.report(&saved, "other.toml");
    assert_eq!(other.status.code(), Some(2), "{}", String::from_utf8_lossy(&other.stderr));
    assert!(String::from_utf8_lossy(&other.stderr).contains("is a test of cluster \"gpu\", not of \"other\""));
}

#[test]
fn a_gpu_in_use_is_reported_as_unschedulable_and_its_pod_removed() {
    let c = cluster(Kubelet::Broken, &[("nvidia.com/gpu", "2")]);
    // The RuntimeClass exists here: the pod is created and the scheduler finds no free GPU.
    c.server.change(|s| {
        s.objects.push(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}));
    });
    let out = c.test(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  nvidia.com/gpu on k3d-gpu-server-0"), "{stdout}");
    assert!(stdout.contains("Insufficient nvidia.com/gpu") && stdout.contains("get pods -A -o wide"), "{stdout}");
    assert_eq!(c.pods_left(), 0);
}

#[test]
fn a_cluster_that_cannot_be_reached_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "").unwrap();
    std::fs::write(
        dir.path().join("kubeconfig"),
        support::fake_apiserver::kubeconfig_text("http://127.0.0.1:9", "gpu"),
    )
    .unwrap();
    let out = K3dGpu::new()
        .args(["test", "-c", dir.path().join("k3dgpu.toml").to_str().unwrap()])
        .args(["--root", repo().join("tests/fixtures/hosts").join(HOST).to_str().unwrap()])
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .output();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
