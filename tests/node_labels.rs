//! Node labels through the apply path against the fake API server: both ways a label is set
//! (every node of a k3d cluster, or one node of an existing cluster) read the node, write with
//! its resourceVersion, and read again after a conflict, so a concurrent writer's record of
//! the labels it claimed survives.

mod support;

use k3d_gpu::apply::kubernetes::{NodeChange, node_changes, node_metadata};
use k3d_gpu::observe::MANAGED_LABELS_ANNOTATION;
use k3d_gpu::observe::kubernetes::client;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, State, k3s_node};

/// Runs `work` against a fake with nodes `names`, where another writer claims the label
/// `other.example/raced` on each node between our read and our write.
fn raced(names: &[&str], work: impl AsyncFnOnce(kube::Client)) -> Vec<Value> {
    served(names, true, work).0
}

/// The nodes after `work`, and the requests the server saw; `race`: as in [`raced`].
fn served(names: &[&str], race: bool, work: impl AsyncFnOnce(kube::Client)) -> (Vec<Value>, Vec<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let racing = names
            .iter()
            .map(|n| {
                let edit = json!({"metadata": {
                    "labels": {"other.example/raced": "yes"},
                    "annotations": {MANAGED_LABELS_ANNOTATION: "other.example/raced"},
                }});
                (n.to_string(), edit)
            })
            .filter(|_| race)
            .collect();
        let nodes = names.iter().map(|n| k3s_node(n, true)).collect();
        let server = FakeApiServer::start(State { nodes, racing_node_edits: racing, ..State::k3s() }).await;
        let dir = tempfile::tempdir().unwrap();
        let kube = client(&server.kubeconfig("t", dir.path()), "t").await.unwrap();
        work(kube).await;
        let state = server.handle();
        let mut nodes = Vec::new();
        state.change(|s| nodes = s.nodes.clone());
        (nodes, server.requests())
    })
}

fn claimed(node: &Value) -> Vec<String> {
    let list = node["metadata"]["annotations"][MANAGED_LABELS_ANNOTATION].as_str().unwrap_or_default();
    let mut keys: Vec<String> = list.split(',').filter(|k| !k.is_empty()).map(str::to_string).collect();
    keys.sort();
    keys
}

#[test]
fn a_k3d_clusters_label_keeps_a_concurrent_writers_claim() {
    let nodes = raced(&["k3d-t-server-0", "k3d-t-agent-0"], async |kube| {
        node_metadata(&kube, true, "k3d-gpu.io/intel-gpu", Some("true"), true, None).await.unwrap();
    });
    for node in &nodes {
        assert_eq!(node["metadata"]["labels"]["k3d-gpu.io/intel-gpu"], "true");
        assert_eq!(node["metadata"]["labels"]["other.example/raced"], "yes");
        assert_eq!(claimed(node), ["k3d-gpu.io/intel-gpu", "other.example/raced"], "{node:#}");
    }
}

#[test]
fn an_existing_clusters_batch_keeps_a_concurrent_writers_claim() {
    let nodes = raced(&["worker-1"], async |kube| {
        let change = NodeChange { label: true, key: "k3d-gpu.io/npu".into(), value: Some("true".into()), claim: true };
        node_changes(&kube, "worker-1", &[change]).await.unwrap();
    });
    assert_eq!(claimed(&nodes[0]), ["k3d-gpu.io/npu", "other.example/raced"], "{:#}", nodes[0]);
}

#[test]
fn a_k3d_clusters_label_patches_each_listed_node_without_reading_it_again() {
    let (nodes, requests) = served(&["k3d-t-server-0", "k3d-t-agent-0"], false, async |kube| {
        node_metadata(&kube, true, "k3d-gpu.io/intel-gpu", Some("true"), true, None).await.unwrap();
    });
    assert!(nodes.iter().all(|n| claimed(n) == ["k3d-gpu.io/intel-gpu"]), "{nodes:#?}");
    let reads: Vec<&String> = requests.iter().filter(|r| r.starts_with("GET /api/v1/nodes/")).collect();
    assert!(reads.is_empty(), "the list already gave each node's resourceVersion: {requests:?}");
    assert_eq!(requests.iter().filter(|r| r.starts_with("PATCH /api/v1/nodes/")).count(), 2, "{requests:?}");
}
