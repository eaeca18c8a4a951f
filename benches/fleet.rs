//! An existing cluster of 100 nodes of 5 hardware kinds (an Arc B580 box, an NVIDIA desktop,
//! a Xeon with DSA/IAA/QAT, a Lunar Lake NPU laptop, a Gaudi 3 server; fixture hosts): the
//! fleet compile, observe over real HTTP against the fake API server holding those nodes and
//! what apply left, and the plan (fresh and converged). Prints times and the request count
//! (target: O(kinds + nodes) requests — in fact O(kinds): nodes come in one LIST; plan under
//! 100 ms). A benchmark: it prints; bench/scale.py reads its figures.
//!
//!     cargo bench --bench fleet [-- RUNS]

#[path = "fake/mod.rs"]
mod fake;

use std::time::{Duration, Instant};

use fake::fake_apiserver::{FakeApiServer, State, k3s_node};
use k3d_gpu::compile::ResourceKind;
use k3d_gpu::compile::fleet::{FleetNode, compile};
use serde_json::json;

const KINDS: [&str; 5] =
    ["arc-b580-xe-rpl-igpu", "desktop-rpl-nvidia", "xeon-2s-snc2", "lunar-lake-npu", "gaudi3-server"];
const NODES: usize = 100;

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20);
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let filter = k3d_gpu::facts::VendorFilter::default();
    let facts: Vec<k3d_gpu::facts::Facts> = KINDS
        .iter()
        .map(|h| {
            let root = k3d_gpu::host::HostRoot::open(&repo.join("tests/fixtures/hosts").join(h)).unwrap();
            k3d_gpu::detect::facts(&root, &filter)
        })
        .collect();
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i:03}")).collect();
    let mut text = String::from("[cluster]\nprovider = \"existing\"\ncontext = \"k3d-bench\"\n");
    for name in &names {
        text.push_str(&format!("\n[[nodes]]\nname = \"{name}\"\nfacts = \"hosts/{name}.json\"\n"));
    }
    let config = k3d_gpu::config::load_str("fleet.toml", &text).unwrap();
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let expect = k3d_gpu::config::Expect::default();
    let nodes: Vec<FleetNode> = names
        .iter()
        .enumerate()
        .map(|(i, name)| FleetNode { name, facts: &facts[i % KINDS.len()], expect: &expect })
        .collect();

    let mut compile_times = Vec::new();
    let mut graph = None;
    for _ in 0..runs {
        let start = Instant::now();
        graph = Some(compile(&config, &nodes, &catalog).unwrap());
        compile_times.push(start.elapsed());
    }
    let graph = graph.unwrap();
    let labels = graph.resources().filter(|r| r.kind == ResourceKind::NodeLabel).count();
    let objects = graph.resources().filter(|r| r.kind == ResourceKind::Object).count();

    // The cluster after an apply: every node with its labels (and the annotation that records
    // them), every object in place.
    let mut k8s_nodes: Vec<serde_json::Value> = names.iter().map(|n| k3s_node(n, false)).collect();
    let mut managed: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for r in graph.resources().filter(|r| matches!(r.kind, ResourceKind::NodeLabel | ResourceKind::NodeAnnotation)) {
        let (node, key, value) = (r.spec["node"].as_str().unwrap(), r.spec["key"].as_str().unwrap(), &r.spec["value"]);
        let n = k8s_nodes.iter_mut().find(|n| n["metadata"]["name"] == node).unwrap();
        let field = if r.kind == ResourceKind::NodeLabel { "labels" } else { "annotations" };
        n["metadata"][field][key] = value.clone();
        if r.kind == ResourceKind::NodeLabel {
            managed.entry(node.to_string()).or_default().push(key.to_string());
        }
    }
    for n in k8s_nodes.iter_mut() {
        let name = n["metadata"]["name"].as_str().unwrap().to_string();
        n["metadata"]["annotations"]["k3d-gpu.io/managed-labels"] = json!(managed[&name].join(","));
    }
    // Every object as the strict fake holds it after apply's forced server-side apply to a
    // fresh k3s (server defaults, quantities, managedFields), never a copy of desired: the
    // converged plan compares what a real cluster serves.
    let mut desired: Vec<serde_json::Value> =
        graph.resources().filter(|r| r.kind == ResourceKind::Object).map(|r| r.spec.clone()).collect();
    desired.sort_by_key(|o| match o["kind"].as_str() {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    });
    let mut cluster = State::k3s();
    for o in &desired {
        if let Err((code, status)) = cluster.apply(o, "k3d-gpu", true) {
            panic!("the API server refuses {}: {code} {}", k3d_gpu::compile::object_id(o), status["message"]);
        }
    }
    let kinds = k3d_gpu::compile::object_kinds(&catalog);
    let mut served = cluster.served.clone();
    served.extend(desired.iter().map(fake::fake_apiserver::list_path));
    served.sort();
    served.dedup();

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (observe_ms, requests, observed) = runtime.block_on(async {
        let server = FakeApiServer::start(State { nodes: k8s_nodes, served, ..cluster }).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = server.kubeconfig("bench", dir.path());
        let mut times = Vec::new();
        let mut requests = 0;
        let mut observed = None;
        for _ in 0..runs {
            let before = server.requests().len();
            let start = Instant::now();
            observed = Some(k3d_gpu::observe::existing::observe(&kubeconfig, "k3d-bench", &kinds).await.unwrap());
            times.push(start.elapsed());
            requests = server.requests().len() - before;
        }
        (median(times), requests, observed.unwrap())
    });

    let inputs = || k3d_gpu::plan::Inputs::new(&config, &graph.fleet_facts, &observed, catalog.digest(), &graph);
    let mut converged_times = Vec::new();
    let mut converged = None;
    for _ in 0..runs {
        let start = Instant::now();
        converged = Some(k3d_gpu::plan::plan(&graph, &observed, inputs()));
        converged_times.push(start.elapsed());
    }
    let nothing = k3d_gpu::observe::Observed::nothing();
    let mut fresh_times = Vec::new();
    let mut fresh = None;
    for _ in 0..runs {
        let start = Instant::now();
        fresh = Some(k3d_gpu::plan::plan(&graph, &nothing, inputs()));
        fresh_times.push(start.elapsed());
    }
    let (converged, fresh) = (converged.unwrap(), fresh.unwrap());

    println!("{NODES} nodes of {} hardware kinds, {runs} runs (medians)", KINDS.len());
    println!("graph: {} resources ({labels} node labels, {objects} objects)", graph.index.len());
    println!("fleet compile: {:.1} ms", median(compile_times));
    println!(
        "observe over HTTP: {observe_ms:.1} ms, {requests} requests (1 nodes + {} kinds + 1 ResourceSlices; none per node)",
        kinds.len()
    );
    println!("plan, converged cluster: {:.1} ms ({} actions)", median(converged_times), converged.actions.len());
    println!("plan, empty cluster: {:.1} ms ({} actions)", median(fresh_times), fresh.actions.len());
}
