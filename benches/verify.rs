//! How soon verify notices a condition becoming true: a watch, not a poll, so it should be
//! the time of one event over HTTP. Sets a node's allocatable on the fake API server and
//! measures until `verify::wait_for` returns. A benchmark: it prints, it never fails.
//!
//!     cargo bench --bench verify [-- RUNS]

#[path = "fake/mod.rs"]
mod fake;

use std::time::{Duration, Instant};

use fake::fake_apiserver::{FakeApiServer, State};
use serde_json::json;

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "resourceVersion": "1"}, "status": {"allocatable": {"cpu": "8"}}});
    let server = FakeApiServer::start_in_background(State { nodes: vec![node], ..State::k3s() });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig("bench", dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(k3d_gpu::observe::kubernetes::client(&kubeconfig, "bench")).unwrap();
    let mut lags = Vec::new();
    for i in 0..runs {
        let resource = format!("example.com/device-{i}");
        let spec = json!({"check": "allocatable", "resource": resource, "min": 1});
        let before = server.requests().len();
        let waiting = {
            let client = client.clone();
            runtime.spawn(async move {
                k3d_gpu::apply::verify::wait_for(&client, &spec, "bench", Duration::from_secs(10))
                    .await
                    .map(|()| Instant::now())
            })
        };
        // The watch has started (its list and its watch are in): it saw the current (false)
        // state first.
        server.wait_until("verify's list and watch", Duration::from_secs(10), |s| s.requests.len() >= before + 2);
        let became_true = Instant::now();
        server.change(|s| s.nodes[0]["status"]["allocatable"][resource.as_str()] = json!("1"));
        let noticed = runtime.block_on(waiting).unwrap().unwrap();
        lags.push(noticed.duration_since(became_true));
    }
    lags.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("verify (watch over HTTP) noticing allocatable > 0, {runs} runs");
    println!(
        "lag from condition true to verify done: median {:.2} ms, max {:.2} ms",
        ms(lags[lags.len() / 2]),
        ms(lags[lags.len() - 1])
    );
}
