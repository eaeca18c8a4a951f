//! Observe + plan against the fake API server (real HTTP, kube-rs) holding 500 managed
//! objects: how many requests, and how long. A benchmark: it prints, it never fails.
//!
//!     cargo bench --bench observe [-- RUNS]

#[path = "fake/mod.rs"]
mod fake;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fake::fake_apiserver::{FakeApiServer, State, list_path};
use serde_json::json;

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(30);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let kinds_used = [
            ("v1", "ConfigMap"),
            ("apps/v1", "DaemonSet"),
            ("apps/v1", "Deployment"),
            ("v1", "ServiceAccount"),
            ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ];
        let mut objects = Vec::new();
        for i in 0..500 {
            let (api, kind) = kinds_used[i % kinds_used.len()];
            let namespaced = kind != "ClusterRole";
            let mut o = json!({"apiVersion": api, "kind": kind, "metadata": {"name": format!("obj-{i}"),
                "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}}, "spec": {"x": i}});
            if namespaced {
                o["metadata"]["namespace"] = json!("bench");
            }
            objects.push(o);
        }
        let served: Vec<String> = objects.iter().map(list_path).collect::<BTreeSet<_>>().into_iter().collect();
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {}});
        let server = FakeApiServer::start(State { nodes: vec![node], objects, served, ..State::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = server.kubeconfig("bench", dir.path());
        let kinds = k3d_gpu::compile::ObjectKinds {
            kinds: kinds_used.iter().map(|(a, k)| (a.to_string(), k.to_string())).collect(),
            ..Default::default()
        };

        let mut samples = Vec::new();
        let mut seen = 0;
        for _ in 0..runs {
            let before = server.requests().len();
            let start = Instant::now();
            let client = k3d_gpu::observe::kubernetes::client(&kubeconfig, "bench").await.unwrap();
            let observed = k3d_gpu::observe::kubernetes::observe(client, "bench", &kinds).await.unwrap();
            samples.push((start.elapsed(), server.requests().len() - before));
            seen = observed.objects.len();
        }
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (median, requests) = samples[samples.len() / 2];
        println!("fake API server with {seen} managed objects of {} kinds, {runs} runs", kinds.len());
        println!("requests per observe: {requests} (1 nodes + {} kinds + 1 ResourceSlices)", kinds.len());
        println!("observe over HTTP: median {:.2} ms, min {:.2} ms", ms(median), ms(samples[0].0));
    });
}
