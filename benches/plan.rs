//! Plan against an observed document: diff + text render + hash, in two cases.
//! - 500 managed objects, one in ten drifted. Target: median at most 50 ms.
//! - 10,000 observed managed objects: the 500 above plus 9,500 the config no longer wants
//!   (spread over 95 namespaces, which are deleted too), so every delete is ordered against
//!   the others. Target: median at most 100 ms.
//! - 20,000 the same way, to show the time grows linearly (about 2x the 10,000 case).
//!
//! A benchmark: it prints, it never fails. On a shared machine the wall-clock median includes
//! time spent waiting for a CPU; the CPU time per run (from /proc/self/stat) is printed beside
//! it.
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
    let mut missed = 0;
    let mut run = |runs, extra, target| {
        let median = case(runs, extra, target);
        missed += usize::from(median > target);
        median
    };
    run(runs, 0, Duration::from_millis(50));
    let ten = run(runs.min(20), 9_500, Duration::from_millis(100));
    // Linear: twice the objects, about twice the time (quadratic would be four times).
    let twenty = run(runs.min(10), 19_500, Duration::from_millis(200));
    let growth = twenty.as_secs_f64() / ten.as_secs_f64();
    let linear = growth <= 3.0;
    println!(
        "20,000 vs 10,000 objects: {growth:.1}x the time (linear: about 2x; goal <= 3x) -> {}",
        if linear { "PASS" } else { "FAIL" }
    );
    // A missed target fails the bench, as the others do: a FAIL line that exits 0 goes unseen.
    if missed > 0 || !linear {
        std::process::exit(1);
    }
}

/// A managed object the config no longer wants: a ConfigMap in one of 95 namespaces, or the
/// namespace itself.
fn unwanted(i: usize) -> serde_json::Value {
    let labels = json!({"app.kubernetes.io/managed-by": "k3d-gpu"});
    if i.is_multiple_of(100) {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("old-{}", i / 100), "labels": labels, "uid": format!("ns-{i}")}})
    } else {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("old-{i}"), "namespace": format!("old-{}", i / 100), "labels": labels, "uid": format!("cm-{i}")},
            "data": {"k": "v"}})
    }
}

/// Runs one case and returns its median.
fn case(runs: usize, extra: usize, target: Duration) -> Duration {
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
    live.extend((0..extra).map(unwanted));
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
            ..Default::default()
        }),
        node_image: None,
    };
    let inputs = Inputs {
        config: "c".into(),
        facts: "f".into(),
        observed: "o".into(),
        made_from: None,
        owner: None,
        stdlib: "s".into(),
        images: "i".into(),
        tool_version: "v".into(),
    };

    let cpu_before = cpu_ms();
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
    let cpu_per_run = (cpu_ms() - cpu_before) / runs as f64;
    samples.sort();
    let median = samples[samples.len() / 2];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{} managed objects observed ({OBJECTS} wanted, {extra} no longer), {actions} actions; {runs} runs of diff + render + hash",
        OBJECTS + extra
    );
    println!(
        "median {:.2} ms, p90 {:.2} ms, min {:.2} ms",
        ms(median),
        ms(samples[samples.len() * 9 / 10]),
        ms(samples[0])
    );
    println!("CPU time per run {cpu_per_run:.1} ms (user + system, all threads)");
    println!("target: median <= {} ms -> {}", target.as_millis(), if median <= target { "PASS" } else { "FAIL" });
    median
}

/// User + system CPU time of this process so far, in ms (Linux; 0 elsewhere).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the 12th, stime the 13th.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Clock ticks are 100 per second on every Linux Rust targets.
    (ticks(11) + ticks(12)) * 10.0
}
