//! `k3d-gpu audit` as a user runs it: the live read against the private dockerd (the
//! cluster's published ports) and the fake API server (pods, their images, kubelet's events,
//! Open WebUI), with a temp kubeconfig whose mode the rule reads; and `--observed FILE`.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, State, k3s_node};
use support::{docker_ready, import_image};

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn write_config(dir: &Path, cluster: &str) -> std::path::PathBuf {
    let config = dir.join("k3dgpu.toml");
    std::fs::write(&config, format!("[cluster]\nname = \"{cluster}\"\n")).unwrap();
    std::fs::write(
        dir.join("images.lock"),
        format!("schema = \"k3d-gpu.images/v1\"\n\n[images.\"example.org/app:1.0\"]\ndigest = \"{D1}\"\n"),
    )
    .unwrap();
    config
}

fn k3d_gpu(dir: &Path, args: &[&str]) -> Output {
    support::k3d_gpu_in(dir, args)
}

fn k3d_gpu_docker(dir: &Path, args: &[&str]) -> Output {
    support::k3d_gpu_docker_in(dir, args)
}

fn failed_rules(out: &Output) -> Vec<String> {
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    assert_eq!(doc["schema"], "k3d-gpu.audit/v1");
    let mut rules: Vec<String> =
        doc["findings"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap().to_string()).collect();
    rules.dedup();
    rules
}

fn pod(name: &str, image: &str, image_id: &str, env: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "apps"},
        "spec": {"containers": [{"name": "main", "image": image, "env": env}]},
        "status": {"containerStatuses": [{"name": "main", "image": image, "imageID": image_id,
            "ready": true, "restartCount": 0}]}})
}

fn event(name: &str, message: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "apps"},
        "involvedObject": {"kind": "Pod", "name": "app", "namespace": "apps"},
        "reason": "Pulled", "message": message})
}

async fn create(docker: &bollard::Docker, name: &str, cluster: &str, image: &str, ports: &[(&str, &str, &str)]) {
    use bollard::models::{ContainerCreateBody, HostConfig, PortBinding};
    use bollard::query_parameters::CreateContainerOptions;
    let bindings = ports
        .iter()
        .map(|(ip, host, inner)| {
            let binding = PortBinding { host_ip: Some(ip.to_string()), host_port: Some(host.to_string()) };
            (inner.to_string(), Some(vec![binding]))
        })
        .collect();
    let labels = [("app", "k3d"), ("k3d.cluster", cluster), ("k3d.role", "loadbalancer")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let body = ContainerCreateBody {
        image: Some(image.into()),
        labels: Some(labels),
        host_config: Some(HostConfig { port_bindings: Some(bindings), ..Default::default() }),
        ..Default::default()
    };
    let options = CreateContainerOptions { name: Some(name.into()), ..Default::default() };
    docker.create_container(Some(options), body).await.unwrap();
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn every_rule_passes_on_a_clean_cluster_and_fails_on_its_own_fault() {
    if !docker_ready() {
        return;
    }
    let cluster = format!("aud{}", std::process::id());
    let image = "k3d-gpu-test/audit:1";
    import_image(image, "1.0.0");
    let ep = k3d_gpu::observe::docker::endpoint(&|k: &str| std::env::var(k).ok(), None);
    let docker = k3d_gpu::observe::docker::connect(&ep).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lb = format!("k3d-{cluster}-serverlb");
    let extra = format!("k3d-{cluster}-extra");
    rt.block_on(create(
        &docker,
        &lb,
        &cluster,
        image,
        &[("0.0.0.0", "6550", "6443/tcp"), ("127.0.0.1", "8000", "8000/tcp")],
    ));

    let server = FakeApiServer::start_in_background(State {
        nodes: vec![k3s_node(&format!("k3d-{cluster}-server-0"), true)],
        objects: vec![
            pod("app", "example.org/app:1.0", &format!("example.org/app@{D1}"), json!([])),
            pod(
                "ui",
                "ghcr.io/open-webui/open-webui:0.6.5",
                &format!("ghcr.io/open-webui/open-webui@{D2}"),
                json!([{"name": "WEBUI_AUTH", "value": "True"}]),
            ),
            event("e1", "Container image \"example.org/app:1.0\" already present on machine"),
        ],
        served: vec!["/api/v1/pods".into(), "/api/v1/events".into()],
        ..State::default()
    });
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &cluster);
    // The Open WebUI image is pinned by the lock as well, so only the faults below fail.
    std::fs::write(
        dir.path().join("images.lock"),
        format!(
            "schema = \"k3d-gpu.images/v1\"\n\n[images.\"example.org/app:1.0\"]\ndigest = \"{D1}\"\n\n\
             [images.\"ghcr.io/open-webui/open-webui:0.6.5\"]\ndigest = \"{D2}\"\n"
        ),
    )
    .unwrap();
    let kubeconfig = server.kubeconfig(&cluster, dir.path());
    std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o600)).unwrap();

    let clean = k3d_gpu_docker(dir.path(), &["--json", "audit"]);
    let report = String::from_utf8_lossy(&clean.stderr).to_string();
    assert_eq!(failed_rules(&clean), Vec::<String>::new(), "{report}");
    assert_eq!(clean.status.code(), Some(0), "{report}");
    let text = k3d_gpu_docker(dir.path(), &["audit"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("audit passed"));

    // Each fault, one per rule.
    rt.block_on(create(&docker, &extra, &cluster, image, &[("0.0.0.0", "8080", "80/tcp")]));
    server.change(|s| {
        s.objects.push(pod("stray", "example.org/stray:2.0", &format!("example.org/stray@{D2}"), json!([])));
        s.objects.push(event("e2", "Successfully pulled image \"example.org/stray:2.0\" in 1.2s"));
        s.objects[1]["spec"]["containers"][0]["env"][0]["value"] = json!("False");
    });
    std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o644)).unwrap();
    let dirty = k3d_gpu_docker(dir.path(), &["--json", "audit"]);
    let mut rules = failed_rules(&dirty);
    rules.sort();
    assert_eq!(rules, ["image-digest", "kubeconfig-mode", "listener", "open-webui-auth", "runtime-pull"]);
    assert_eq!(dirty.status.code(), Some(1));
    let text = String::from_utf8_lossy(&k3d_gpu_docker(dir.path(), &["audit"]).stdout).to_string();
    assert!(
        text.contains("fix: chmod 600") && text.contains("80/tcp") && text.contains("example.org/stray:2.0"),
        "{text}"
    );

    // What was read, saved, audits the same offline.
    let saved = k3d_gpu_docker(dir.path(), &["audit", "--observe"]);
    assert_eq!(saved.status.code(), Some(0));
    std::fs::write(dir.path().join("observed.json"), &saved.stdout).unwrap();
    let offline = k3d_gpu_docker(dir.path(), &["--json", "audit", "--observed", "observed.json"]);
    assert_eq!(offline.stdout, dirty.stdout);

    let rm = bollard::query_parameters::RemoveContainerOptions { force: true, ..Default::default() };
    rt.block_on(async {
        for name in [&lb, &extra] {
            let _ = docker.remove_container(name, Some(rm.clone())).await;
        }
    });
}

#[test]
fn a_saved_observation_is_audited_without_a_cluster_and_bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "lab");
    let observed = json!({"schema": "k3d-gpu.audit-observed/v1", "cluster": "lab",
        "listeners": [{"container": "k3d-lab-serverlb", "host_ip": "0.0.0.0", "host_port": "6550", "container_port": "6443/tcp"}],
        "images": [{"container": "apps/app/main", "image": "example.org/app:1.0", "image_id": format!("example.org/app@{D1}")}],
        "pulls": [], "kubeconfigs": [{"path": "/k", "mode": 384}], "open_webui": []});
    std::fs::write(dir.path().join("ok.json"), observed.to_string()).unwrap();
    let ok = k3d_gpu(dir.path(), &["--json", "audit", "--observed", "ok.json"]);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(failed_rules(&ok).is_empty());

    let mut bad = observed.clone();
    bad["images"][0]["image_id"] = json!(format!("example.org/app@{D2}"));
    std::fs::write(dir.path().join("bad.json"), bad.to_string()).unwrap();
    let out = k3d_gpu(dir.path(), &["--json", "audit", "--observed", "bad.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(failed_rules(&out), ["image-digest"]);

    std::fs::write(dir.path().join("wrong.json"), r#"{"schema": "k3d-gpu.observed/v1"}"#).unwrap();
    for file in ["wrong.json", "missing.json"] {
        let out = k3d_gpu(dir.path(), &["audit", "--observed", file]);
        assert_eq!(out.status.code(), Some(2), "{file}");
    }
}

#[test]
fn no_engine_is_bad_input_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "lab");
    let out = support::K3dGpu::new()
        .args(["audit"])
        .cwd(dir.path())
        .env("DOCKER_HOST", format!("unix://{}/none.sock", dir.path().display()))
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .output();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A cluster `apply` has just made, as `audit --observe` reads it: k3s's own pods and every
/// workload of the plan, each running the digest its registry gave. `images` lists k3s's
/// images beside the config's, so the lock `images lock` writes from that list pins every
/// running image and the image rule passes; a lock of the config's images alone (what
/// `images lock` wrote before) leaves CoreDNS and the rest of k3s's pods unpinned.
#[test]
fn a_fresh_cluster_with_a_fresh_lock_passes_the_image_rule() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "[cluster]\nname = \"lab\"\n\n[telemetry]\n").unwrap();
    let root = support::repo().join("tests/fixtures/hosts/arc-b580-xe-rpl-igpu");
    let root = root.to_str().unwrap();
    let rows = |dir: &Path| -> Vec<Value> {
        let out = k3d_gpu(dir, &["--json", "--root", root, "images"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["images"].as_array().unwrap().clone()
    };
    let listed = rows(dir.path());
    let k3s: Vec<&str> = listed.iter().filter(|r| r["use"] == "k3s").map(|r| r["image"].as_str().unwrap()).collect();
    assert!(k3s.contains(&"docker.io/rancher/mirrored-coredns-coredns:1.14.7"), "{k3s:?}");
    assert!(
        k3s.iter().any(|i| i.contains("local-path-provisioner")) && k3s.iter().any(|i| i.contains("metrics-server"))
    );
    // What `images lock` resolves: each listed image to the digest its registry reports.
    let digest = |i: usize| format!("sha256:{:064x}", i + 1);
    let lock_of = |rows: &[&Value]| {
        let mut text = String::from("schema = \"k3d-gpu.images/v1\"\n");
        for (i, r) in rows.iter().enumerate() {
            text.push_str(&format!("\n[images.\"{}\"]\ndigest = \"{}\"\n", r["image"].as_str().unwrap(), digest(i)));
        }
        text
    };
    let all: Vec<&Value> = listed.iter().collect();
    std::fs::write(dir.path().join("images.lock"), lock_of(&all)).unwrap();
    // The cluster runs the workloads as the plan pins them, and k3s's images by tag, as k3s
    // names them; containerd resolves each to the digest the lock recorded.
    let locked = rows(dir.path());
    let running: Vec<Value> = locked
        .iter()
        .enumerate()
        .filter(|(_, r)| r["use"] == "workload" || r["use"] == "k3s")
        .map(|(i, r)| {
            let name = r["image"].as_str().unwrap();
            let repo = name.rsplit_once(':').unwrap().0;
            let reference = if r["use"] == "k3s" { name } else { r["reference"].as_str().unwrap() };
            json!({"container": format!("ns/pod{i}/c"), "image": reference, "image_id": format!("{repo}@{}", digest(i))})
        })
        .collect();
    assert!(running.len() > k3s.len(), "the workloads run too");
    let observed = json!({"schema": "k3d-gpu.audit-observed/v1", "cluster": "lab",
        "listeners": [{"container": "k3d-lab-serverlb", "host_ip": "0.0.0.0", "host_port": "6550", "container_port": "6443/tcp"}],
        "images": running, "pulls": [], "kubeconfigs": [{"path": "/k", "mode": 384}], "open_webui": []});
    std::fs::write(dir.path().join("fresh.json"), observed.to_string()).unwrap();
    let out = k3d_gpu(dir.path(), &["--json", "audit", "--observed", "fresh.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(failed_rules(&out).is_empty());

    // The lock as it was before k3s's images were listed: k3s's pods fail the image rule.
    let config_only: Vec<&Value> = listed.iter().filter(|r| r["use"] != "k3s").collect();
    std::fs::write(dir.path().join("images.lock"), lock_of(&config_only)).unwrap();
    let out = k3d_gpu(dir.path(), &["--json", "audit", "--observed", "fresh.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(failed_rules(&out), ["image-digest"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("mirrored-coredns-coredns:1.14.7"));
}
