//! Plan against an observed document with 500 managed objects: diff + text render + hash.
//! Target: median at most 50 ms. A benchmark: it prints, it never fails.
//!
//!     cargo bench --bench plan [-- RUNS]

use std::time::{Duration, Instant};

use k3d_gpu::compile::{Change, DesiredGraph, Resource, ResourceKind};
use k3d_gpu::observe::{NodeContainer, Observed, ObservedCluster, ObservedKubernetes, ObservedNode, SCHEMA};
use k3d_gpu::plan::{Inputs, plan, render};
use serde_json::json;

const OBJECTS: usize = 500;

fn deployment(i: usize, image: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("app-{i}"), "namespace": "bench", "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": format!("app-{i}")}},
            "template": {"metadata": {"labels": {"app": format!("app-{i}")}}, "spec": {"containers": [
                {"name": "main", "image": image, "args": ["--port=8080", "--log-level=info"],
                 "env": [{"name": "MODE", "value": "bench"}, {"name": "API_TOKEN", "value": "t0ken"}],
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}
    })
}

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(50);
    let cluster_spec = json!({"name": "bench", "image": "img:1", "servers": 1, "agents": 0, "gpus": null, "api_port": null, "k3s_args": [], "volumes": []});
    let mut resources = vec![Resource {
        id: "k3d/cluster/bench".into(),
        kind: ResourceKind::Cluster,
        change: Change::Replace,
        component: None,
        spec: cluster_spec.clone(),
        depends_on: vec![],
    }];
    let mut live = Vec::new();
    for i in 0..OBJECTS {
        let object = deployment(i, "example.invalid/app:1");
        resources.push(Resource {
            id: k3d_gpu::compile::object_id(&object),
            kind: ResourceKind::Object,
            change: Change::InPlace,
            component: Some("bench".into()),
            spec: object.clone(),
            depends_on: vec!["k3d/cluster/bench".into()],
        });
        // One in ten drifted by hand; the API server's fields on all of them.
        let mut observed = if i % 10 == 0 { deployment(i, "example.invalid/app:hand-edit") } else { object };
        observed["metadata"]["uid"] = json!(format!("uid-{i}"));
        observed["status"] = json!({"readyReplicas": 1});
        live.push(observed);
    }
    let graph = DesiredGraph::build(resources, vec![], None).unwrap();
    let observed = Observed {
        schema: SCHEMA.into(),
        cluster: Some(ObservedCluster {
            name: "bench".into(),
            configured_image_id: Some("sha256:1".into()),
            nodes: vec![NodeContainer {
                name: "k3d-bench-server-0".into(),
                role: "server".into(),
                image: "img:1".into(),
                image_id: "sha256:1".into(),
                image_version: Some("1".into()),
                k3s_args: vec![],
                mounts: vec![],
                env: Default::default(),
                gpus: None,
                running: true,
                recorded_spec: Some(cluster_spec),
            }],
        }),
        kubernetes: Some(ObservedKubernetes {
            nodes: vec![ObservedNode::default()],
            objects: live,
            resource_slices: vec![],
        }),
        node_image: None,
    };
    let inputs = Inputs {
        config: "c".into(),
        facts: "f".into(),
        observed: "o".into(),
        stdlib: "s".into(),
        images: "i".into(),
        tool_version: "v".into(),
    };

    let mut samples = Vec::with_capacity(runs);
    let mut actions = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let p = plan(&graph, &observed, inputs.clone());
        let hash = p.hash();
        let text = render::text(&p, &hash, render::Style { color: false });
        samples.push(start.elapsed());
        actions = p.actions.len();
        std::hint::black_box(text);
    }
    samples.sort();
    let median = samples[samples.len() / 2];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{OBJECTS} managed objects observed, {actions} drifted; {runs} runs of diff + render + hash");
    println!(
        "median {:.2} ms, p90 {:.2} ms, min {:.2} ms",
        ms(median),
        ms(samples[samples.len() * 9 / 10]),
        ms(samples[0])
    );
    println!("target: median <= 50 ms -> {}", if median <= Duration::from_millis(50) { "PASS" } else { "FAIL" });
}
