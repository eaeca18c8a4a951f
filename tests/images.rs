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
const NPU_DS: &str = "k8s/apps/DaemonSet/kube-system/intel-npu-plugin";

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn lock(entries: &[(&str, String)]) -> Lock {
    let mut lock = Lock::default();
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
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains(NPU_IMAGE) || warnings[1].contains(NPU_IMAGE), "{warnings:?}");
    // A catalog pin stays as it is and is no warning.
    let gpu = image_of(&graph, "k8s/apps/DaemonSet/kube-system/intel-gpu-plugin");
    assert!(gpu.starts_with("docker.io/intel/intel-gpu-plugin:0.36.0@sha256:2db679be"), "{gpu}");
}

#[test]
fn a_locked_image_is_deployed_by_digest_and_warns_no_more() {
    let user = lock(&[(NPU_IMAGE, digest('a')), (BALLOONS_IMAGE, digest('b'))]);
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
    assert_eq!(refused.len(), 1, "{errors:?}");
    assert!(refused[0].contains(BALLOONS_IMAGE), "{refused:?}");
    assert_eq!(errors[0].key, ["policy", "images"]);
    // Everything locked: it compiles.
    let all = lock(&[(NPU_IMAGE, digest('a')), (BALLOONS_IMAGE, digest('b'))]);
    compile_with(&text, Some(all)).unwrap();
}

fn inputs(graph: &DesiredGraph) -> Inputs {
    let config = example_config("lunar-lake-npu");
    let facts = facts_of("lunar-lake-npu");
    Inputs::new(&config, &facts, &k3d_gpu::observe::Observed::nothing(), "sha256:stdlib".into(), &graph.images)
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
