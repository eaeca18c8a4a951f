//! Apply throughput: 1,000 objects (10 Namespaces, then 990 ConfigMaps, each depending on its
//! namespace: two dependency levels) applied through the same providers and executor as `apply`
//! (`--parallel` at its default), over real HTTP against the strict fake API server, then each
//! one checked there: present, with the data it was applied with. Target: <= 10 s wall for
//! the whole (applying 1,000 Deployments to kind takes minutes in published reports). Objects
//! of one level run concurrently up to the bound; nothing waits on a client-side rate limit.
//! A benchmark: it prints, and exits 1 on a missed target or an object missing.
//!
//!     cargo bench --bench apply_many

#[path = "fake/mod.rs"]
mod fake;

use std::time::{Duration, Instant};

use fake::fake_apiserver::{FakeApiServer, State};
use k3d_gpu::apply::executor::{DEFAULT_PARALLEL, execute};
use k3d_gpu::apply::providers::Providers;
use k3d_gpu::plan::{Action, ActionKind, Reason};
use serde_json::json;

const OBJECTS: usize = 1000;
const NAMESPACES: usize = 10;
const TARGET: Duration = Duration::from_secs(10);

fn create(id: String, object: serde_json::Value, deps: Vec<String>) -> Action {
    Action {
        id,
        action: ActionKind::Create,
        reason: Reason { code: "bench".into(), text: "bench".into() },
        replace_paths: vec![],
        changed_paths: vec![],
        depends_on: deps,
        before: None,
        after: Some(object),
    }
}

fn labels() -> serde_json::Value {
    json!({"app.kubernetes.io/managed-by": "k3d-gpu"})
}

fn main() {
    let mut actions = Vec::with_capacity(OBJECTS);
    for n in 0..NAMESPACES {
        let object = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("bench-{n}"), "labels": labels()}});
        actions.push(create(format!("k8s/core/Namespace/bench-{n}"), object, vec![]));
    }
    for i in 0..OBJECTS - NAMESPACES {
        let ns = format!("bench-{}", i % NAMESPACES);
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:04}"), "namespace": ns, "labels": labels()},
            "data": {"value": format!("{i}")}});
        actions.push(create(
            format!("k8s/core/ConfigMap/{ns}/cm-{i:04}"),
            object,
            vec![format!("k8s/core/Namespace/{ns}")],
        ));
    }

    let server = FakeApiServer::start_in_background(State::empty_k3s());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig("bench", dir.path());
    let providers = Providers::new("k3d".into(), dir.path().join("work"), kubeconfig, "bench".into());
    // As `apply` runs: the CLI's runtime (commands::runtime is multi-threaded).
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    let start = Instant::now();
    let outcome = runtime.block_on(execute(&actions, &providers, DEFAULT_PARALLEL, &mut |_| {}));
    let applied = start.elapsed();
    // Verified: every object is on the server as applied.
    let mut missing = Vec::new();
    server.change(|s| {
        for a in &actions {
            let want = a.after.as_ref().unwrap();
            let found = s.objects.iter().any(|o| {
                o["kind"] == want["kind"]
                    && o["metadata"]["name"] == want["metadata"]["name"]
                    && o["metadata"]["namespace"] == want["metadata"]["namespace"]
                    && o["data"] == want["data"]
            });
            if !found {
                missing.push(a.id.clone());
            }
        }
    });
    let wall = start.elapsed();
    let requests = server.requests().len();
    println!(
        "{OBJECTS} objects ({NAMESPACES} Namespaces, then {} ConfigMaps in them), parallel bound {DEFAULT_PARALLEL}",
        OBJECTS - NAMESPACES
    );
    println!(
        "applied in {:.2} s, {requests} requests; {} of {OBJECTS} verified on the server",
        applied.as_secs_f64(),
        OBJECTS - missing.len()
    );
    println!("wall {:.2} s", wall.as_secs_f64());
    let pass = outcome.ok() && missing.is_empty() && wall <= TARGET;
    println!(
        "target: {OBJECTS} objects applied and verified <= {} s -> {}",
        TARGET.as_secs(),
        if pass { "PASS" } else { "FAIL" }
    );
    if !pass {
        if let Some(id) = missing.first() {
            println!("missing on the server: {id} and {} more", missing.len() - 1);
        }
        std::process::exit(1);
    }
}
