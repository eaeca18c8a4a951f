//! images.lock in the pipeline (DESIGN.md §7): a locked image is deployed as
//! `repo:tag@sha256:…`, an unlocked one by tag with a plan warning, `[policy] images =
//! "pinned"` refuses unlocked ones, and the lock is a plan input. The registry round trip
//! (`images lock` against a real registry) is in `tests/registry.rs`.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{DesiredGraph, compile};
use k3d_gpu::images::{Entry, Lock};
use k3d_gpu::plan::{ActionKind, Inputs, plan};
use support::{converged, example_config, facts_of};

const NPU_IMAGE: &str = "docker.io/intel/intel-npu-plugin:0.36.0";
const BALLOONS_IMAGE: &str = "ghcr.io/containers/nri-plugins/nri-resource-policy-balloons:v0.14.0";
/// The node image's bases (issue 13): images of every graph that builds the node image.
const K3S_BASE: &str = "rancher/k3s:v1.37.1-k3s1";
const UBUNTU_BASE: &str = "ubuntu:26.04";
/// The agent's server (the example has `[agent]`; `compile/workloads.rs`).
const OVMS_IMAGE: &str = "docker.io/openvino/model_server:2026.2-gpu";
const NPU_DS: &str = "k8s/apps/DaemonSet/kube-system/intel-npu-plugin";

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// A lock with `entries`, and the node image's bases always pinned.
fn lock(entries: &[(&str, String)]) -> Lock {
    let mut lock = Lock::default();
    for base in [K3S_BASE, UBUNTU_BASE] {
        lock.images.insert(base.to_string(), Entry { digest: digest('e'), platforms: vec![] });
    }
    for (image, d) in entries {
        lock.images.insert(image.to_string(), Entry { digest: d.clone(), platforms: vec![] });
    }
    lock
}

fn compile_with(config_text: &str, user: Option<Lock>) -> Result<DesiredGraph, Vec<k3d_gpu::compile::CompileError>> {
    let mut catalog = Catalog::embedded().unwrap();
    catalog.images.user = user;
    let config = k3d_gpu::config::load_str("k3dgpu.toml", config_text).unwrap();
    compile(&config, &facts_of("lunar-lake-npu"), &catalog)
}

fn lunar_lake() -> String {
    std::fs::read_to_string(support::repo().join("examples/lunar-lake-npu.toml")).unwrap()
}

fn image_of(graph: &DesiredGraph, id: &str) -> String {
    graph.get(id).unwrap().spec["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().to_string()
}

fn unlocked(graph: &DesiredGraph) -> Vec<String> {
    graph.warnings.iter().filter(|w| w.code == "image-unlocked").map(|w| w.text.clone()).collect()
}

#[test]
fn an_unlocked_image_is_deployed_by_tag_with_a_warning() {
    let graph = compile_with(&lunar_lake(), None).unwrap();
    assert_eq!(image_of(&graph, NPU_DS), NPU_IMAGE);
    let warnings = unlocked(&graph);
    assert_eq!(warnings.len(), 5, "two components' images, the agent's and the node image's two bases: {warnings:?}");
    assert!(warnings.iter().any(|w| w.contains(K3S_BASE)) && warnings.iter().any(|w| w.contains(UBUNTU_BASE)));
    assert!(warnings.iter().any(|w| w.contains(OVMS_IMAGE)), "the agent's image too: {warnings:?}");
    assert!(warnings[0].contains(NPU_IMAGE) || warnings[1].contains(NPU_IMAGE), "{warnings:?}");
    // A catalog pin stays as it is and is no warning.
    let gpu = image_of(&graph, "k8s/apps/DaemonSet/kube-system/intel-gpu-plugin");
    assert!(gpu.starts_with("docker.io/intel/intel-gpu-plugin:0.36.0@sha256:2db679be"), "{gpu}");
}

#[test]
fn a_locked_image_is_deployed_by_digest_and_warns_no_more() {
    let user = lock(&[(NPU_IMAGE, digest('a')), (BALLOONS_IMAGE, digest('b')), (OVMS_IMAGE, digest('e'))]);
    let graph = compile_with(&lunar_lake(), Some(user)).unwrap();
    assert_eq!(image_of(&graph, NPU_DS), format!("{NPU_IMAGE}@{}", digest('a')));
    assert!(unlocked(&graph).is_empty(), "{:?}", unlocked(&graph));
    let p = plan(&graph, &converged(&graph), inputs(&graph));
    assert!(p.warnings.iter().all(|w| w.code != "image-unlocked"));
}

#[test]
fn the_pinned_policy_refuses_an_unlocked_image() {
    let text = format!("{}\n[policy]\nimages = \"pinned\"\n", lunar_lake());
    let errors = compile_with(&text, Some(lock(&[(NPU_IMAGE, digest('a'))]))).unwrap_err();
    let refused: Vec<&str> = errors.iter().filter(|e| e.code == "image-unlocked").map(|e| e.message.as_str()).collect();
    assert_eq!(refused.len(), 2, "{errors:?}");
    assert!(refused.iter().any(|r| r.contains(BALLOONS_IMAGE)), "{refused:?}");
    assert!(refused.iter().any(|r| r.contains(OVMS_IMAGE)), "{refused:?}");
    assert_eq!(errors[0].key, ["policy", "images"]);
    // Everything locked: it compiles.
    let all = lock(&[(NPU_IMAGE, digest('a')), (BALLOONS_IMAGE, digest('b')), (OVMS_IMAGE, digest('e'))]);
    compile_with(&text, Some(all)).unwrap();
}

fn inputs(graph: &DesiredGraph) -> Inputs {
    let config = example_config("lunar-lake-npu");
    let facts = facts_of("lunar-lake-npu");
    Inputs::new(&config, &facts, &k3d_gpu::observe::Observed::nothing(), "sha256:stdlib".into(), graph)
}

#[test]
fn relocking_to_a_new_digest_changes_the_plan_and_updates_the_daemonset() {
    let old = compile_with(&lunar_lake(), Some(lock(&[(NPU_IMAGE, digest('a'))]))).unwrap();
    let new = compile_with(&lunar_lake(), Some(lock(&[(NPU_IMAGE, digest('c'))]))).unwrap();
    // The cluster runs what the old lock said.
    let running = converged(&old);
    let before = plan(&old, &running, inputs(&old));
    let after = plan(&new, &running, inputs(&new));
    assert!(before.is_empty(), "{:?}", before.actions);
    assert_ne!(before.hash(), after.hash());
    assert_ne!(inputs(&old).images, inputs(&new).images, "the lock is a plan input");
    let update = after.actions.iter().find(|a| a.id == NPU_DS).expect("the DaemonSet changes");
    assert_eq!(update.action, ActionKind::Update);
    let text = k3d_gpu::plan::render::text(&after, &after.hash(), k3d_gpu::plan::render::Style { color: false });
    assert!(text.contains(&format!("{NPU_IMAGE}@{}", digest('c'))), "{text}");
    // An entry for an image the graph does not use changes nothing.
    let unrelated = lock(&[(NPU_IMAGE, digest('a')), ("example.invalid/x:1", digest('d'))]);
    let same = compile_with(&lunar_lake(), Some(unrelated)).unwrap();
    assert_eq!(plan(&same, &running, inputs(&same)).hash(), before.hash());
}

fn k3d_gpu(dir: &std::path::Path, host: &str, args: &[&str]) -> std::process::Output {
    let root = support::repo().join("tests/fixtures/hosts").join(host);
    support::K3dGpu::new()
        .args(["-c", dir.join("k3dgpu.toml").to_str().unwrap(), "--root", root.to_str().unwrap()])
        .args(args)
        .output()
}

/// The CLI reads images.lock beside the config: plan and render carry the digests, and
/// `images check` passes; a broken lock is unreadable input (exit 2), never ignored.
#[test]
fn the_lock_beside_the_config_reaches_plan_render_and_check() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), lunar_lake()).unwrap();
    let run = |args: &[&str]| k3d_gpu(dir.path(), "lunar-lake-npu", args);
    let out = run(&["images", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("missing   {NPU_IMAGE}")));

    let partial = lock(&[(NPU_IMAGE, digest('a')), (BALLOONS_IMAGE, digest('b')), (OVMS_IMAGE, digest('e'))]);
    std::fs::write(dir.path().join("images.lock"), partial.to_text()).unwrap();
    // `k3d-gpu test`'s NPU pod image is one the config can deploy too: the check wants it.
    let out = run(&["images", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("missing   {}", k3d_gpu::smoke::DEVICE_IMAGE)));
    let mut entries = vec![
        (NPU_IMAGE, digest('a')),
        (BALLOONS_IMAGE, digest('b')),
        (OVMS_IMAGE, digest('e')),
        (k3d_gpu::smoke::DEVICE_IMAGE, digest('f')),
    ];
    std::fs::write(dir.path().join("images.lock"), lock(&entries).to_text()).unwrap();
    // k3s's own images are the cluster's too (CoreDNS, metrics-server, …): the check wants them.
    let out = run(&["images", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("missing   docker.io/rancher/mirrored-coredns-coredns:"));
    let k3s = k3d_gpu::images::k3s_images();
    entries.extend(k3s.iter().map(|i| (*i, digest('9'))));
    std::fs::write(dir.path().join("images.lock"), lock(&entries).to_text()).unwrap();
    let out = run(&["images", "check"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let out = run(&["plan", "--offline", "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plan["warnings"].as_array().unwrap().iter().all(|w| w["code"] != "image-unlocked"), "{}", plan["warnings"]);
    let rendered = dir.path().join("rendered");
    assert!(run(&["render", "--out", rendered.to_str().unwrap()]).status.success());
    let npu = std::fs::read_to_string(rendered.join("intel-npu-plugin.yaml")).unwrap();
    assert!(npu.contains(&format!("{NPU_IMAGE}@{}", digest('a'))), "{npu}");
    let out = run(&["images", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows["schema"], "k3d-gpu.image-list/v1");
    let npu_row = rows["images"].as_array().unwrap().iter().find(|r| r["image"] == NPU_IMAGE).unwrap();
    assert_eq!(npu_row["state"], "lock");

    std::fs::write(
        dir.path().join("images.lock"),
        "schema = \"k3d-gpu.images/v1\"\n[images.\"x/y\"]\ndigest = \"sha256:0\"\n",
    )
    .unwrap();
    let out = run(&["plan", "--offline"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read image lock") && err.contains("x/y"), "{err}");
}

/// No component is pending: on every fixture host, every resource an active vendor has is
/// advertised by a catalog component, and verified > 0.
#[test]
fn every_active_vendor_resource_has_a_component_and_a_verify_check() {
    let catalog = Catalog::embedded().unwrap();
    for host in support::host_names() {
        let facts = facts_of(&host);
        let Ok(graph) = compile(&k3d_gpu::config::Config::default(), &facts, &catalog) else { continue };
        let orphans: Vec<&str> =
            graph.warnings.iter().filter(|w| w.code == "resource-without-component").map(|w| w.text.as_str()).collect();
        assert!(orphans.is_empty(), "{host}: {orphans:?}");
        for d in &facts.detected {
            if d.vendor == k3d_gpu::facts::Vendor::Intel {
                continue; // checked by the intel rules (plugin or DRA)
            }
            for r in &d.resources {
                let check = graph.get(&format!("verify/allocatable/{r}")).unwrap_or_else(|| panic!("{host}: {r}"));
                assert_eq!(check.spec["min"], 1, "{host}: {r}");
            }
        }
    }
    // The balloons policy's readiness is its DaemonSet's rollout.
    let graph = compile(&k3d_gpu::config::Config::default(), &facts_of("xeon-2s-snc2"), &catalog).unwrap();
    assert!(graph.get("verify/rollout/DaemonSet/kube-system/nri-resource-policy-balloons").is_some());
}
