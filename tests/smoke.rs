//! `k3d-gpu test` through the real binary against the fake API server: the smoke pods are
//! created (POST), watched and read (log) and deleted through the real API paths. A thread
//! plays the scheduler and the kubelet: it runs each pod's own command with the host's `sh`,
//! its device paths mapped into a temporary /dev the test lays out, so the verdict reads what
//! the product's probe really printed.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{State, k3s_node};
use support::world::World;

const HOST: &str = "desktop-rpl-nvidia";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The sharing group of `resource` in a `test --json` document.
fn share(doc: &Value, resource: &str) -> Value {
    let shares = doc["shares"].as_array().unwrap_or_else(|| panic!("no shares in {doc:#}"));
    shares.iter().find(|s| s["resource"] == resource).cloned().unwrap_or_else(|| panic!("no {resource} in {doc:#}"))
}

/// How the kubelet treats the pods.
#[derive(Clone, Copy, PartialEq)]
enum Kubelet {
    /// Every pod runs; the devices open; the pods of a sharing group run at once.
    Healthy,
    /// The render node is there but the pod cannot open it; GPUs are held by another pod.
    Broken,
    /// As healthy, but the pods of a sharing group run one after the other: each one ends
    /// before the next starts (a device handed out exclusively, whatever was advertised).
    OneAtATime,
    /// As healthy, with CUDA MPS serving: the plugin hands each NVIDIA pod the daemon's pipe
    /// directory, where its control pipe is, and the GPU is EXCLUSIVE_PROCESS (MPS sets it).
    MpsServing,
    /// As healthy, with nvidia as containerd's default runtime: a pod whose environment does
    /// not set NVIDIA_VISIBLE_DEVICES=void gets every GPU, as its CUDA image asks (`all`),
    /// whatever its DRA claim gives it.
    NvidiaDefaultRuntime,
    /// Every pod stays Running and its log trickles, a byte a second, without end.
    Trickle,
    /// A hostile cluster: the node's name and the container's waiting message each hold a
    /// newline, a forged line, an escape sequence and an OSC 52 clipboard write.
    Hostile,
}

/// What a hostile cluster writes into every string it answers with.
const FORGED: &str = "\npass  forged\n1 pod(s), 0 failure(s)\x1b[2K\x1b]52;c;Y3VybCB4fHNo\x07";

/// The GPUs of the stand-in's NVIDIA DRA node (two H100s, as fixture h100-pcie-x2).
const H100S: [&str; 2] = ["GPU-5e2b7c1a", "GPU-9d04f3e6"];

/// The label a sharing group's pods carry (`smoke::share::GROUP_LABEL`).
const GROUP: &str = "k3d-gpu.io/smoke-share";

/// The cluster: the fake API server with one node, the node's `/dev` and `/sys` in the
/// scratch directory, and a stand-in kubelet (`support::world`) that runs each pod's command.
type Cluster = World;

/// Runs a pod's command as the kubelet would, with `/dev/…` and `/sys/…` paths under `root`.
/// A sharing pod's hold (its first argument) is cut to 0: the stand-in keeps it Running itself.
fn run_container(pod: &Value, root: &Path, kubelet: Kubelet) -> (String, i32) {
    let c = &pod["spec"]["containers"][0];
    let argv: Vec<String> = c["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let share = pod["metadata"]["labels"][GROUP].is_string();
    // An NVIDIA DRA pod: CDI gives it the claim's GPU (the first), the default runtime every
    // GPU unless the pod says `void`.
    if pod["spec"]["resourceClaims"].is_array() && argv.get(2).is_some_and(|s| s.starts_with("nvidia-smi -L")) {
        let void = c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["name"] == "NVIDIA_VISIBLE_DEVICES" && e["value"] == "void");
        let seen = if kubelet == Kubelet::NvidiaDefaultRuntime && !void { &H100S[..] } else { &H100S[..1] };
        let mut log: String =
            seen.iter().enumerate().map(|(i, u)| format!("GPU {i}: NVIDIA H100 PCIe (UUID: {u})\n")).collect();
        log.push_str(&format!("compute {}, Default\nready\n", H100S[0]));
        return (log, 0);
    }
    if argv[0] == "nvidia-smi" {
        return ("GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-6f1d2a9e)\n".into(), 0);
    }
    if share && c["resources"]["limits"]["nvidia.com/gpu"].is_string() {
        let gpu = "GPU 0: NVIDIA RTX 4000 Ada Generation (UUID: GPU-6f1d2a9e)\n";
        return match kubelet {
            Kubelet::MpsServing => (
                format!("{gpu}compute GPU-6f1d2a9e, Exclusive_Process\nmps serving /mps/nvidia.com/gpu/pipe\nready\n"),
                0,
            ),
            _ => (format!("{gpu}compute GPU-6f1d2a9e, Default\nready\n"), 0),
        };
    }
    let mapped: Vec<String> = argv[3..]
        .iter()
        .enumerate()
        .map(|(i, a)| if share && i == 1 { "0".to_string() } else { a.clone() })
        .map(|a| if a.starts_with("/dev") || a.starts_with("/sys") { format!("{}{a}", root.display()) } else { a })
        .collect();
    let out = Command::new(&argv[0]).args(&argv[1..3]).args(&mapped).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap().replace(&root.display().to_string(), "");
    (text, out.status.code().unwrap_or(1))
}

/// A pod's status once its container ran: finished with `code`, or (a sharing pod, `hold`)
/// Running and holding its device.
fn ran(code: i32, hold: bool) -> Value {
    if hold {
        return json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "probe", "ready": true, "restartCount": 0, "image": "", "imageID": "",
                "state": {"running": {"startedAt": "2026-12-05T00:00:00Z"}}}]});
    }
    json!({
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "probe", "ready": false, "restartCount": 0, "image": "", "imageID": "",
            "state": {"terminated": {"exitCode": code, "reason": "Completed"}}}],
    })
}

fn cluster(kubelet: Kubelet, allocatable: &[(&str, &str)]) -> Cluster {
    let node_name =
        if kubelet == Kubelet::Hostile { format!("k3d-gpu-server-0{FORGED}") } else { "k3d-gpu-server-0".into() };
    let mut node = k3s_node(&node_name, true);
    for (r, n) in allocatable {
        node["status"]["allocatable"][*r] = json!(n);
    }
    let mut state = State { nodes: vec![node], ..State::k3s() };
    state.served.push("/api/v1/pods".into());
    if kubelet == Kubelet::Broken {
        // A node image without the NVIDIA runtime: k3s made no `nvidia` RuntimeClass.
        state.objects.retain(|o| !(o["kind"] == "RuntimeClass" && o["metadata"]["name"] == "nvidia"));
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    let dev = root.join("dev");
    std::fs::create_dir_all(dev.join("dri")).unwrap();
    std::fs::write(dev.join("dri/card0"), "").unwrap();
    match kubelet {
        Kubelet::Healthy
        | Kubelet::OneAtATime
        | Kubelet::MpsServing
        | Kubelet::NvidiaDefaultRuntime
        | Kubelet::Trickle
        | Kubelet::Hostile => std::fs::write(dev.join("dri/renderD128"), "").unwrap(),
        // What the pod cannot open (a directory fails a read-write open, as EACCES would).
        Kubelet::Broken => std::fs::create_dir(dev.join("dri/renderD128")).unwrap(),
    }
    // The card behind the render node, as sysfs shows it in the pod.
    std::fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:02.0")).unwrap();
    std::fs::create_dir_all(root.join("sys/class/drm/renderD128")).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:02.0",
        root.join("sys/class/drm/renderD128/device"),
    )
    .unwrap();
    let w = World::start_in(dir, state, move |s| {
        let mut started: Vec<String> = Vec::new();
        let mut claimed: Vec<(String, String, bool, bool)> = Vec::new();
        for pod in s.objects.iter_mut().filter(|o| o["kind"] == "Pod" && o["status"]["phase"] == "Pending") {
            if pod["metadata"]["annotations"]["test.k3d-gpu.io/seen"] == "1" {
                continue;
            }
            let group = pod["metadata"]["labels"][GROUP].as_str().map(str::to_string);
            // One of a group at a time: the next waits for a later round.
            if kubelet == Kubelet::OneAtATime && group.is_some() && !started.is_empty() {
                continue;
            }
            pod["metadata"]["annotations"]["test.k3d-gpu.io/seen"] = json!("1");
            let wants_nvidia = pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].is_string();
            if kubelet == Kubelet::Broken && wants_nvidia {
                pod["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]);
                continue;
            }
            if kubelet == Kubelet::Trickle {
                pod["spec"]["nodeName"] = json!("k3d-gpu-server-0");
                pod["metadata"]["annotations"]["fake.k3d-gpu.io/log"] = json!("x");
                pod["metadata"]["annotations"]["fake.k3d-gpu.io/log-trickle-ms"] = json!("1000");
                pod["status"] = ran(0, true);
                continue;
            }
            if kubelet == Kubelet::Hostile {
                pod["spec"]["nodeName"] = json!(node_name.as_str());
                pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                    "containerStatuses": [{"name": "probe", "ready": false, "restartCount": 0, "image": "", "imageID": "",
                        "state": {"waiting": {"reason": "ErrImagePull", "message": format!("pull refused{FORGED}")}}}]});
                continue;
            }
            let (log, code) = run_container(pod, &root, kubelet);
            pod["spec"]["nodeName"] = json!("k3d-gpu-server-0");
            pod["metadata"]["annotations"]["fake.k3d-gpu.io/log"] = json!(log);
            pod["status"] = ran(code, group.is_some());
            // DRA: the claim controller's and the scheduler's part, done later in this
            // round (the claims are other objects).
            if let Some(claim) = pod["spec"]["resourceClaims"][0].as_object().cloned() {
                let ns = pod["metadata"]["namespace"].as_str().unwrap().to_string();
                let name = match claim.get("resourceClaimName").and_then(Value::as_str) {
                    Some(shared) => shared.to_string(),
                    None => format!("{}-gpu", pod["metadata"]["name"].as_str().unwrap()),
                };
                pod["status"]["resourceClaimStatuses"] = json!([{"name": "gpu", "resourceClaimName": name}]);
                let nvidia =
                    pod["spec"]["containers"][0]["command"][2].as_str().is_some_and(|s| s.starts_with("nvidia-smi"));
                claimed.push((ns, name, claim.contains_key("resourceClaimTemplateName"), nvidia));
            }
            if let Some(g) = group {
                started.push(g);
                started.push(pod["metadata"]["name"].as_str().unwrap().to_string());
            }
        }
        // Each claim a pod used is allocated the iGPU, or the first H100 for an NVIDIA
        // pod (a template's claim made first).
        for (ns, name, from_template, nvidia) in claimed {
            let (driver, device) =
                if nvidia { ("gpu.nvidia.com", "gpu-0") } else { ("gpu.intel.com", "0000-00-02-0-0xa780") };
            let allocation = json!({"devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": "k3d-gpu-server-0", "device": device}]}});
            if from_template {
                s.objects.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": name, "namespace": ns}, "spec": {}}));
            }
            if let Some(claim) = s.objects.iter_mut().find(|o| {
                o["kind"] == "ResourceClaim"
                    && o["metadata"]["name"] == name.as_str()
                    && o["metadata"]["namespace"] == ns.as_str()
            }) {
                claim["status"]["allocation"] = allocation.clone();
            }
        }
        // One at a time: the pod that ran before this round's ends as it starts.
        if kubelet == Kubelet::OneAtATime
            && let [group, name] = &started[..]
        {
            for pod in
                s.objects.iter_mut().filter(|o| o["kind"] == "Pod" && o["metadata"]["labels"][GROUP] == group.as_str())
            {
                if pod["metadata"]["name"] != name.as_str() && pod["status"]["phase"] == "Running" {
                    pod["status"] = ran(0, false);
                }
            }
        }
    });
    std::fs::write(w.join("k3dgpu.toml"), "").unwrap();
    w.server.kubeconfig("gpu", w.dir());
    w
}

impl Cluster {
    fn test(&self, extra: &[&str]) -> Output {
        self.test_on(HOST, extra)
    }

    /// `test` with the facts of fixture host `host`.
    fn test_on(&self, host: &str, extra: &[&str]) -> Output {
        K3dGpu::new()
            .arg("test")
            .args(["-c", self.dir.path().join("k3dgpu.toml").to_str().unwrap()])
            .args(["--root", repo().join("tests/fixtures/hosts").join(host).to_str().unwrap()])
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

    /// `test --json` with `config` as the cluster's k3dgpu.toml: its exit code and document.
    fn test_config(&self, config: &str) -> (Option<i32>, Value) {
        self.test_config_on(HOST, config)
    }

    /// `test --json` as [`Cluster::test_config`], with the facts of fixture host `host`.
    fn test_config_on(&self, host: &str, config: &str) -> (Option<i32>, Value) {
        std::fs::write(self.dir.path().join("k3dgpu.toml"), config).unwrap();
        let out = self.test_on(host, &["--json"]);
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        });
        (out.status.code(), doc)
    }

    fn pods_left(&self) -> usize {
        self.server.state.lock().unwrap().objects.iter().filter(|o| o["kind"] == "Pod").count()
    }
}

#[test]
fn each_advertised_resource_gets_a_pod_that_proves_its_device_usable() {
    // The iGPU is shared eight ways (`shared = "auto"` on an all-integrated host): its plugin
    // advertises eight.
    let c = cluster(Kubelet::Healthy, &[("nvidia.com/gpu", "2"), ("gpu.intel.com/i915", "8")]);
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
    // The iGPU is shared eight ways by default: its sharing group fails too (nothing opens).
    assert!(text.contains("test: FAILED, 2 pod(s), 4 failure(s)"), "{text}");
    assert!(text.contains("FAIL gpu.intel.com/i915 on k3d-gpu-server-0: 0 of 1 usable"), "{text}");
    // A saved file's causes and fixes are not copied (it may say anything): the report sends
    // the reader to run the test again, which says them.
    assert!(!text.contains("the cluster has no RuntimeClass nvidia"), "{text}");
    assert!(text.contains("fix: run `k3d-gpu test` (cluster gpu) again"), "{text}");
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

/// Issue 38, item 1: with `[sharing]` the test runs the promised pods at once and passes only
/// when they were all Running together on one device: Intel's `shared = 2` on the iGPU, and
/// NVIDIA time-slicing's two replicas on each of two GPUs (four pods).
#[test]
fn shared_devices_are_proven_by_pods_running_together_on_one_device() {
    let c = cluster(Kubelet::Healthy, &[("nvidia.com/gpu", "4"), ("gpu.intel.com/i915", "2")]);
    std::fs::write(c.dir.path().join("k3dgpu.toml"), "[sharing]\nshared = 2\n[sharing.nvidia]\nreplicas = 2\n")
        .unwrap();
    let out = c.test(&["--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let shares = doc["shares"].as_array().unwrap();
    let by = |r: &str| shares.iter().find(|s| s["resource"] == r).unwrap_or_else(|| panic!("no {r} in {doc:#}"));
    let intel = by("gpu.intel.com/i915");
    assert_eq!((intel["promised"].as_u64(), intel["pods"].as_array().unwrap().len()), (Some(2), 2));
    assert_eq!(intel["verdict"]["passed"], true, "{intel:#}");
    assert_eq!(intel["verdict"]["together"].as_array().unwrap().len(), 2);
    assert!(intel["verdict"]["devices"].as_object().unwrap().values().all(|d| d == "0000:00:02.0"), "{intel:#}");
    let nvidia = by("nvidia.com/gpu");
    assert_eq!(nvidia["pods"].as_array().unwrap().len(), 4, "two per GPU, two GPUs: {nvidia:#}");
    assert_eq!(nvidia["verdict"]["passed"], true, "{nvidia:#}");
    assert_eq!(c.pods_left(), 0, "every pod of every group deleted");
    let requests = c.server.requests();
    for want in [
        "GET /api/v1/namespaces/default/pods/k3d-gpu-share-nvidia-com-gpu-0-3/log",
        "DELETE /api/v1/namespaces/default/pods/k3d-gpu-share-gpu-intel-com-i915-0-1",
    ] {
        assert!(requests.iter().any(|r| r == want), "no {want} in {requests:#?}");
    }
}

/// The same, on a kubelet that runs the group's pods one after the other: each pod opened
/// the device and reported it, but they never ran together, so sharing is not proven.
#[test]
fn pods_that_ran_one_after_another_fail_the_sharing_proof() {
    let c = cluster(Kubelet::OneAtATime, &[("gpu.intel.com/i915", "2")]);
    std::fs::write(c.dir.path().join("k3dgpu.toml"), "[sharing]\nshared = 2\n").unwrap();
    let out = c.test(&["--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let share = &doc["shares"][0];
    assert_eq!(share["verdict"]["passed"], false, "{share:#}");
    assert_eq!(share["verdict"]["apart"].as_array().unwrap().len(), 1, "{share:#}");
    assert!(share["verdict"]["cause"].as_str().unwrap().contains("one after another"), "{share:#}");
    assert_eq!(doc["pods"][0]["verdict"]["passed"], true, "the single pod still opens the device");
    assert_eq!(c.pods_left(), 0);
    // `report --test` carries the sharing verdict.
    let saved = c.dir.path().join("test.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let report = c.report(&saved, "k3dgpu.toml");
    let page = String::from_utf8_lossy(&report.stdout);
    assert!(page.contains("test: FAILED, 1 pod(s), 2 failure(s)"), "{page}");
    assert!(page.contains("FAIL gpu.intel.com/i915 on k3d-gpu-server-0 shared: 1 of 2 pods together"), "{page}");
    assert!(!page.contains("one after another") && page.contains("run `k3d-gpu test` (cluster gpu) again"), "{page}");
    let text = c.test(&[]);
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(said.contains("FAIL  gpu.intel.com/i915 on k3d-gpu-server-0 shared: 2 pod(s)"), "{said}");
    assert!(said.contains("never together: k3d-gpu-share-gpu-intel-com-i915-0-"), "{said}");
}

/// MPS: the pods run together and each reaches the control daemon's pipe; the GPU's
/// EXCLUSIVE_PROCESS mode is MPS's own. Where the daemon does not serve, the same pods fail.
#[test]
fn mps_sharing_is_proven_through_the_control_daemon() {
    let config = "[sharing]\nshared = 1\n[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = 2\n";
    let serving = cluster(Kubelet::MpsServing, &[("nvidia.com/gpu", "4")]);
    let (_, doc) = serving.test_config(config);
    let nvidia = share(&doc, "nvidia.com/gpu");
    assert_eq!(nvidia["verdict"]["passed"], true, "{nvidia:#}");
    let idle = cluster(Kubelet::Healthy, &[("nvidia.com/gpu", "4")]);
    let (code, doc) = idle.test_config(config);
    assert_eq!(code, Some(1));
    let share = share(&doc, "nvidia.com/gpu");
    assert!(share["verdict"]["cause"].as_str().unwrap().contains("did not reach the MPS control daemon"), "{share:#}");
    assert_eq!(idle.pods_left(), 0);
}

/// DRA (`[[claims]]`): the template's pod gets its device and the claim's allocation is shown;
/// one claim shared by two pods proves DRA sharing by overlap, and fails when the pods ran one
/// after the other.
#[test]
fn dra_claims_are_proven_by_a_pod_each_and_a_shared_claim_by_overlap() {
    let config = "[sharing]\nmode = { intel = \"dra\" }\n[[claims]]\nname = \"igpu\"\n";
    let together = cluster(Kubelet::Healthy, &[]);
    let (_, doc) = together.test_config(config);
    let claim = &doc["claims"][0];
    assert_eq!(claim["template"], "igpu", "{doc:#}");
    assert_eq!(claim["verdict"]["passed"], true, "{claim:#}");
    assert_eq!(claim["verdict"]["seen"], json!(["0000:00:02.0"]));
    assert_eq!(claim["verdict"]["allocated"], json!(["0000-00-02-0-0xa780"]));
    let shared = share(&doc, "claim default/k3d-gpu-shared-igpu");
    assert_eq!(shared["verdict"]["passed"], true, "{shared:#}");
    assert_eq!(together.pods_left(), 0);
    let claims_left = together
        .server
        .state
        .lock()
        .unwrap()
        .objects
        .iter()
        .filter(|o| o["kind"] == "ResourceClaim" && o["metadata"]["name"] == "k3d-gpu-shared-igpu")
        .count();
    assert_eq!(claims_left, 0, "the shared claim is deleted");

    let apart = cluster(Kubelet::OneAtATime, &[]);
    let (_, doc) = apart.test_config(config);
    let shared = share(&doc, "claim default/k3d-gpu-shared-igpu");
    assert_eq!(shared["verdict"]["passed"], false, "{shared:#}");
    assert!(shared["verdict"]["cause"].as_str().unwrap().contains("one after another"), "{shared:#}");
    // `report --test` shows both: the template's pod and the shared claim.
    let saved = apart.dir.path().join("test.json");
    std::fs::write(&saved, doc.to_string()).unwrap();
    let page = String::from_utf8_lossy(&apart.report(&saved, "k3dgpu.toml").stdout).into_owned();
    assert!(page.contains("pass claim template default/igpu"), "{page}");
    assert!(
        page.contains("FAIL claim default/k3d-gpu-shared-igpu on (the scheduler's choice) shared: 1 of 2"),
        "{page}"
    );
}

/// NVIDIA DRA (`mode = "dra"` on a data-center host): the template's pod reports the UUID of
/// the one GPU its claim gives it, the shared claim's two pods report the same UUID at once,
/// and pods that ran one after the other fail. Under an nvidia default runtime, the pods' own
/// `NVIDIA_VISIBLE_DEVICES=void` keeps them to their claim's GPU.
#[test]
fn nvidia_dra_claims_are_proven_by_uuid_and_overlap() {
    let config = "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"h100\"\nmodel = \"H100\"\n";
    for kubelet in [Kubelet::Healthy, Kubelet::NvidiaDefaultRuntime] {
        let c = cluster(kubelet, &[]);
        let (code, doc) = c.test_config_on("h100-pcie-x2", config);
        assert_eq!(
            (code, &doc["passed"]),
            (Some(0), &json!(true)),
            "nothing advertises nvidia.com/gpu, and that is right: {doc:#}"
        );
        let claim = &doc["claims"][0];
        assert_eq!(claim["verdict"]["passed"], true, "{claim:#}");
        assert_eq!(claim["verdict"]["seen"], json!([H100S[0]]), "{claim:#}");
        assert_eq!(claim["verdict"]["allocated"], json!(["gpu-0"]));
        let shared = share(&doc, "claim default/k3d-gpu-shared-h100");
        assert_eq!(shared["verdict"]["passed"], true, "{shared:#}");
        assert_eq!(shared["verdict"]["devices"]["k3d-gpu-shared-h100-0"], H100S[0], "{shared:#}");
        assert_eq!(c.pods_left(), 0);
    }
    let apart = cluster(Kubelet::OneAtATime, &[]);
    let (_, doc) = apart.test_config_on("h100-pcie-x2", config);
    let shared = share(&doc, "claim default/k3d-gpu-shared-h100");
    assert_eq!(shared["verdict"]["passed"], false, "{shared:#}");
    assert!(shared["verdict"]["cause"].as_str().unwrap().contains("one after another"), "{shared:#}");
}

/// A ResourceClaim of the shared claim's name that the test did not create is left alone, and
/// the sharing check says so instead of taking it over.
#[test]
fn someone_elses_claim_of_that_name_is_left_alone() {
    let c = cluster(Kubelet::Healthy, &[]);
    c.server.change(|s| {
        s.objects.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "k3d-gpu-shared-igpu", "namespace": "default", "uid": "theirs", "labels": {"team": "ml"}},
            "spec": {}}));
    });
    let (_, doc) = c.test_config("[sharing]\nmode = { intel = \"dra\" }\n[[claims]]\nname = \"igpu\"\n");
    let cause = share(&doc, "claim default/k3d-gpu-shared-igpu")["verdict"]["cause"].as_str().unwrap().to_string();
    assert!(cause.contains("k3d-gpu test did not create; it is left alone"), "{cause}");
    let theirs = c.server.state.lock().unwrap().objects.iter().any(|o| {
        o["kind"] == "ResourceClaim"
            && o["metadata"]["name"] == "k3d-gpu-shared-igpu"
            && o["metadata"]["labels"]["team"] == "ml"
    });
    assert!(theirs, "their claim is still there, unchanged");
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
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    // The kubeconfig has the cluster's context: it exists, and its API is what fails.
    assert!(!said.contains("does not exist"), "{said}");
}

/// Issue 39: with no context for the cluster in the kubeconfig (k3d writes it when it creates
/// the cluster) and no Docker engine that runs its nodes, `test` says the cluster does not
/// exist and how to create it, instead of sending the person to their kubeconfig.
#[test]
fn a_cluster_that_does_not_exist_is_said_to_be_missing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "").unwrap();
    std::fs::write(
        dir.path().join("kubeconfig"),
        support::fake_apiserver::kubeconfig_text("http://127.0.0.1:9", "other"),
    )
    .unwrap();
    for kubeconfig in [dir.path().join("kubeconfig"), dir.path().join("none")] {
        let out = K3dGpu::new()
            .args(["test", "-c", dir.path().join("k3dgpu.toml").to_str().unwrap()])
            .args(["--root", repo().join("tests/fixtures/hosts").join(HOST).to_str().unwrap()])
            .env("KUBECONFIG", &kubeconfig)
            .output();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains("cluster gpu does not exist"), "{said}");
        assert!(said.contains("has no context k3d-gpu"), "{said}");
        assert!(said.contains("create it with `k3d-gpu "), "how to create it: {said}");
    }
}

/// Issue 43, item 6: `test --node` on an existing cluster: that node's pods, judged against its
/// own facts (a `[[nodes]]` entry's `root`), through the config's context; `--node` is required
/// there, and one the config does not list is refused, naming the ones it does.
#[test]
fn a_node_of_an_existing_cluster_is_tested_against_its_own_facts() {
    let c = cluster(Kubelet::Healthy, &[("nvidia.com/gpu", "2"), ("gpu.intel.com/i915", "8")]);
    support::copy_tree(&repo().join("tests/fixtures/hosts").join(HOST), &c.dir.path().join("host"));
    let config = "[cluster]\nprovider = \"existing\"\ncontext = \"k3d-gpu\"\n\n[[nodes]]\nname = \"k3d-gpu-server-0\"\n\
                  root = \"host\"\ntaints = [\"k3d-gpu.io/gpu-only=true:NoSchedule\"]\n";
    std::fs::write(c.dir.path().join("k3dgpu.toml"), config).unwrap();
    let run = |extra: &[&str]| {
        K3dGpu::new()
            .arg("test")
            .args(["-c", c.dir.path().join("k3dgpu.toml").to_str().unwrap()])
            .args(["--timeout", "60"])
            .args(extra)
            .env("KUBECONFIG", c.dir.path().join("kubeconfig"))
            .output()
    };
    let out = run(&["--node", "k3d-gpu-server-0", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["passed"], true, "{doc:#}");
    let pods = doc["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2, "{doc:#}");
    assert!(pods.iter().all(|p| p["node"] == "k3d-gpu-server-0"), "{doc:#}");
    let counts = doc["counts"].as_array().unwrap();
    assert!(counts.iter().any(|c| c["resource"] == "nvidia.com/gpu" && c["facts"] == 2), "the node's facts: {doc:#}");
    assert_eq!(c.pods_left(), 0);

    // (arguments, what stderr names)
    const REFUSED: &[(&[&str], &str)] =
        &[(&[], "name it with --node"), (&["--node", "gpu-09"], "--node \"gpu-09\" is not one of the [[nodes]]")];
    for (args, want) in REFUSED {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want) && stderr.contains("k3d-gpu-server-0"), "{args:?}: {stderr}");
    }
}

/// `test --node` on a k3d cluster: a node the cluster does not have is refused, naming its nodes.
#[test]
fn a_node_the_cluster_lacks_is_refused_naming_its_nodes() {
    let c = cluster(Kubelet::Healthy, &[("nvidia.com/gpu", "2")]);
    let out = c.test(&["--node", "k3d-gpu-agent-7"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no node \"k3d-gpu-agent-7\"") && stderr.contains("k3d-gpu-server-0"), "{stderr}");
    assert_eq!(c.pods_left(), 0, "nothing was created");
}

/// Whether `text` holds a line the cluster forged or a control byte a terminal acts on.
fn forged_in(text: &str) -> Option<String> {
    if let Some(c) = text.chars().find(|c| (c.is_control() && *c != '\n' && *c != '\t') || *c == '\u{2028}') {
        return Some(format!("control character {c:?}"));
    }
    text.lines().find(|l| l.starts_with("pass  forged") || *l == "1 pod(s), 0 failure(s)").map(str::to_string)
}

#[test]
fn a_hostile_clusters_names_and_messages_stay_on_their_line() {
    let c = cluster(Kubelet::Hostile, &[("gpu.intel.com/i915", "1")]);
    let out = c.test(&[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("FAIL  gpu.intel.com/i915 on k3d-gpu-server-0\\x0apass  forged"), "{stdout}");
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert_eq!(forged_in(text), None, "{name}:\n{text}");
    }
    assert_eq!(c.pods_left(), 0);
}

#[test]
fn a_log_that_never_ends_is_read_within_the_deadline_and_the_pod_deleted() {
    let c = cluster(Kubelet::Trickle, &[("gpu.intel.com/i915", "1")]);
    let mut child = K3dGpu::new()
        .arg("test")
        .args(["-c", c.dir.path().join("k3dgpu.toml").to_str().unwrap()])
        .args(["--root", repo().join("tests/fixtures/hosts").join(HOST).to_str().unwrap()])
        .args(["--timeout", "2"])
        .env("KUBECONFIG", c.dir.path().join("kubeconfig"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    // Not a timing assertion: a bound on a hang. Before the fix the log read never ended, and
    // the pod was never deleted; this waits far longer than the deadline before giving up.
    let mut ended = None;
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            ended = Some(status);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if ended.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(ended.is_some(), "`test --timeout 2` was still reading a never-ending log after 120 s");
    let requests = c.server.requests();
    assert!(
        requests.iter().any(|r| r == "DELETE /api/v1/namespaces/default/pods/k3d-gpu-test-gpu-intel-com-i915"),
        "the pod was not deleted: {requests:#?}"
    );
    assert_eq!(c.pods_left(), 0);
}
