//! Doctor's live checks against the private dockerd (its version, its runtimes: no nvidia
//! runtime there) and a cluster whose server node runs in it and whose API is the fake API
//! server (a device-plugin DaemonSet ready or not, the node image in use).

mod support;

use std::collections::BTreeSet;

use k3d_gpu::doctor::live::{cluster_findings, engine_findings, node_image_findings};
use k3d_gpu::facts::Level;
use k3d_gpu::observe::Target;
use serde_json::json;
use support::fake_apiserver::{FakeApiServer, State, k3s_node};
use support::{docker_ready, import_image, import_image_lacking};

fn code_level(findings: &[k3d_gpu::facts::Finding], code: &str) -> Option<Level> {
    findings.iter().find(|f| f.code == code).map(|f| f.level)
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn the_engine_and_a_running_cluster_are_checked() {
    if !docker_ready() {
        return;
    }
    use bollard::query_parameters::RemoveContainerOptions;
    let ep = k3d_gpu::observe::docker::endpoint(&|k: &str| std::env::var(k).ok(), None);
    let docker = k3d_gpu::observe::docker::connect(&ep).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();

    // The engine: new enough; with an NVIDIA GPU, no nvidia runtime and no CDI spec is a fail.
    let with_gpu = rt.block_on(engine_findings(&ep, true));
    assert_eq!(code_level(&with_gpu, "docker-version-ok"), Some(Level::Info), "{with_gpu:?}");
    assert_eq!(code_level(&with_gpu, "nvidia-runtime-missing"), Some(Level::Fail), "{with_gpu:?}");
    let without = rt.block_on(engine_findings(&ep, false));
    assert!(without.iter().all(|f| !f.code.starts_with("nvidia")), "{without:?}");

    let cluster = format!("dl{}", std::process::id());
    let image = "k3d-gpu-test/doctor:1";
    import_image(image, "1.0.0");
    let name = rt.block_on(support::start_k3d_server(&docker, &cluster, image, None, Some(vec!["server".into()])));
    let daemonset = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "intel-gpu-plugin", "namespace": "kube-system",
            "labels": {"app.kubernetes.io/managed-by": "k3d-gpu", "k3d-gpu.io/component": "intel-gpu-plugin"}},
        "spec": {"selector": {"matchLabels": {"app": "p"}}, "template": {"metadata": {}}},
        "status": {"desiredNumberScheduled": 1, "numberReady": 0}});
    let server = FakeApiServer::start_in_background(State {
        nodes: vec![k3s_node(&name, true)],
        objects: vec![daemonset],
        served: vec!["/apis/apps/v1/daemonsets".into()],
        ..State::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let target = |configured: &str| Target {
        docker: ep.clone(),
        kubeconfig: server.kubeconfig(&cluster, dir.path()),
        cluster: cluster.clone(),
        image: configured.into(),
        kinds: k3d_gpu::compile::ObjectKinds {
            kinds: BTreeSet::from([("apps/v1".to_string(), "DaemonSet".to_string())]),
            ..Default::default()
        },
    };
    let found = rt.block_on(cluster_findings(&target(image), &k3d_gpu::shell::Command::new("k3d-gpu")));
    assert_eq!(code_level(&found, "node-image-ok"), Some(Level::Info), "{found:?}");
    assert_eq!(code_level(&found, "daemonset-not-ready"), Some(Level::Fail), "{found:?}");

    server.change(|s| s.objects[0]["status"]["numberReady"] = json!(1));
    let found = rt.block_on(cluster_findings(&target("k3d-gpu-node:other"), &k3d_gpu::shell::Command::new("k3d-gpu")));
    assert_eq!(code_level(&found, "daemonset-ready"), Some(Level::Info), "{found:?}");
    assert_eq!(code_level(&found, "node-image-other"), Some(Level::Warn), "{found:?}");

    rt.block_on(async {
        let _ =
            docker.remove_container(&name, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
    });
    // No cluster: nothing to say about one.
    let target = Target { cluster: "nosuchcluster".into(), ..target(image) };
    assert!(rt.block_on(cluster_findings(&target, &k3d_gpu::shell::Command::new("k3d-gpu"))).is_empty());
}

/// Issue 22: doctor runs the node image's self-check on the config's image when the engine
/// has it: complete, lacking containerd, lacking the NVIDIA runtime under NVIDIA, and absent.
/// Issue 35: the check runs each binary, so the findings carry what each printed.
#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn doctor_checks_the_node_image_it_finds() {
    if !docker_ready() {
        return;
    }
    let ep = k3d_gpu::observe::docker::endpoint(&|k: &str| std::env::var(k).ok(), None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let complete = format!("k3d-gpu-test/doctor-node:complete-{}", std::process::id());
    let lacking = format!("k3d-gpu-test/doctor-node:lacking-{}", std::process::id());
    import_image(&complete, "1.0.0");
    import_image_lacking(&lacking, "1.0.0", &["containerd"]);

    let ok = rt.block_on(node_image_findings(&ep, &complete, false));
    assert_eq!(code_level(&ok, "node-image-runs"), Some(Level::Info), "{ok:?}");
    assert!(ok[0].evidence.contains("ipset --version: ipset stand-in v0.0.0"), "{ok:?}");
    let nvidia = rt.block_on(node_image_findings(&ep, &complete, true));
    assert_eq!(code_level(&nvidia, "node-image-incomplete"), Some(Level::Fail), "{nvidia:?}");
    assert!(nvidia[0].text.contains("nvidia-container-runtime"), "{nvidia:?}");
    let bad = rt.block_on(node_image_findings(&ep, &lacking, false));
    assert_eq!(code_level(&bad, "node-image-incomplete"), Some(Level::Fail), "{bad:?}");
    assert!(
        bad[0].text.contains("`containerd --version` found no such command") && bad[0].text.contains(&lacking),
        "{bad:?}"
    );
    let absent = rt.block_on(node_image_findings(&ep, "k3d-gpu-test/not-there:1", false));
    assert!(absent.is_empty(), "an image the engine lacks is apply's to check: {absent:?}");
    for image in [&complete, &lacking] {
        let _ = std::process::Command::new("docker").args(["rmi", "-f", image]).output();
    }
}
