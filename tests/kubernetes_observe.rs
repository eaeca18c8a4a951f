//! Observe through kube-rs over real HTTP against the fake API server: the k3d-<name>
//! context (never the current one), managed objects by label, O(kinds) LIST requests, and
//! observed/v1 feeding a plan that comes out empty when everything matches.

mod support;

use std::collections::BTreeSet;

use k3d_gpu::observe::kubernetes::{client, observe};
use serde_json::json;
use support::fake_apiserver::{FakeApiServer, State, list_path};

fn node(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"k3d-gpu.io/hybrid-cpu": "true"}, "annotations": {"k3d-gpu.io/managed-labels": "k3d-gpu.io/hybrid-cpu"}},
        "status": {"allocatable": {"cpu": "32", "gpu.intel.com/i915": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn managed(kind: &str, api: &str, name: &str, ns: Option<&str>) -> serde_json::Value {
    let mut o = json!({"apiVersion": api, "kind": kind, "metadata": {"name": name,
        "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}, "managedFields": [
            {"manager": "k3d-gpu", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]}});
    if let Some(ns) = ns {
        o["metadata"]["namespace"] = json!(ns);
    }
    o
}

#[test]
fn observe_lists_each_kind_once_through_the_clusters_own_context() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut objects = Vec::new();
        for i in 0..200 {
            objects.push(managed("ConfigMap", "v1", &format!("cm-{i}"), Some("kube-system")));
        }
        objects.push(managed("DaemonSet", "apps/v1", "intel-gpu-plugin", Some("kube-system")));
        let mut foreign = managed("DaemonSet", "apps/v1", "not-ours", Some("kube-system"));
        foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("helm");
        objects.push(foreign);
        let served: Vec<String> = objects.iter().map(list_path).collect::<BTreeSet<_>>().into_iter().collect();
        let server =
            FakeApiServer::start(State { nodes: vec![node("k3d-t-server-0")], objects, served, ..State::default() })
                .await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = server.kubeconfig("t", dir.path());

        let kinds = k3d_gpu::compile::ObjectKinds {
            kinds: [
                ("v1", "ConfigMap"),
                ("apps/v1", "DaemonSet"),
                ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule"), // CRD not installed: 404, no objects
            ]
            .into_iter()
            .map(|(a, k)| (a.to_string(), k.to_string()))
            .collect(),
            plurals: [(
                ("nfd.k8s-sigs.io".to_string(), "NodeFeatureRule".to_string()),
                k3d_gpu::compile::CrdResource { plural: "nodefeaturerules".to_string(), namespaced: false },
            )]
            .into_iter()
            .collect(),
        };
        let observed = observe(client(&kubeconfig, "t").await.unwrap(), "t", &kinds).await.unwrap();

        assert_eq!(observed.nodes.len(), 1);
        assert!(observed.nodes[0].ready);
        assert_eq!(observed.nodes[0].allocatable["gpu.intel.com/i915"], "8");
        assert_eq!(observed.objects.len(), 201, "managed objects only");
        // Our managedFields entry is kept (the diff reads ownership from it), no one else's.
        assert!(observed.objects.iter().all(|o| {
            let entries = o["metadata"]["managedFields"].as_array().unwrap();
            entries.len() == 1 && entries[0]["manager"] == "k3d-gpu" && entries[0]["fieldsV1"]["f:metadata"].is_object()
        }));
        assert!(observed.objects.iter().all(|o| o["kind"].is_string() && o["apiVersion"].is_string()));
        // One LIST for nodes, one per kind, one for ResourceSlices, one for the pods that hold
        // accelerators: O(kinds), not O(objects).
        let requests = server.requests();
        assert_eq!(requests.len(), 1 + kinds.len() + 2, "{requests:#?}");
        assert!(requests.contains(&"GET /api/v1/configmaps".to_string()));
        assert!(requests.contains(&"GET /apis/apps/v1/daemonsets".to_string()));
    });
}

#[test]
fn an_api_server_that_accepts_and_never_answers_is_an_error_not_a_hang() {
    // Connections are accepted and held open; no byte ever comes back.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, support::fake_apiserver::kubeconfig_text(&url, "t")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // The outer deadline only turns a hang into a failure: what ends the call is observe's own
    // per-call deadline, which the error names.
    let err = runtime
        .block_on(async {
            let observed = async {
                observe(client(&kubeconfig, "t").await?, "t", &k3d_gpu::compile::ObjectKinds::default()).await
            };
            tokio::time::timeout(k3d_gpu::observe::CALL_TIMEOUT * 3, observed).await
        })
        .expect("observe hung past its per-call deadline")
        .expect_err("nobody answers");
    assert!(matches!(err, k3d_gpu::observe::ObserveError::KubernetesUnreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("k3d-t") && err.to_string().contains("list nodes"), "{err}");
}

#[test]
fn a_missing_context_is_a_clear_error() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let server = FakeApiServer::start(State::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = server.kubeconfig("t", dir.path());
        let err = client(&kubeconfig, "other").await.err().expect("no context k3d-other");
        assert!(err.to_string().contains("context k3d-other"), "{err}");
        assert!(err.help().contains("k3d kubeconfig merge"));
    });
}

#[test]
fn verify_watches_and_notices_a_change_without_polling() {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "resourceVersion": "1"}, "status": {"allocatable": {"cpu": "8"}}});
    let server = FakeApiServer::start_in_background(State { nodes: vec![node], ..State::k3s() });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig("t", dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(client(&kubeconfig, "t")).unwrap();
    let spec = json!({"check": "allocatable", "resource": "gpu.intel.com/xe", "min": 1});
    let waiting = runtime.spawn(async move {
        k3d_gpu::apply::verify::wait_for(&client, &spec, "t", std::time::Duration::from_secs(10)).await
    });
    // The list and the watch are both in: verify is waiting on the watch, not done.
    server.wait_until("verify's list and watch", std::time::Duration::from_secs(10), |s| s.requests.len() >= 2);
    assert!(!waiting.is_finished(), "the condition is false so far");
    server.change(|s| s.nodes[0]["status"]["allocatable"]["gpu.intel.com/xe"] = json!("8"));
    runtime.block_on(waiting).unwrap().unwrap();
    // One list and one watch for the whole wait (kube-runtime's watcher): a poll would have
    // made many.
    assert_eq!(server.requests(), ["GET /api/v1/nodes", "GET /api/v1/nodes"]);
}

/// A watch answered with ERROR 410 Gone (its resourceVersion compacted) does not fail verify:
/// the watcher lists again after its backoff and the check holds once the change comes.
/// Before kube-runtime, verify failed on the first ERROR event.
#[test]
fn verify_resumes_after_410_gone() {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "resourceVersion": "1"}, "status": {"allocatable": {"cpu": "8"}}});
    let mut ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "p", "namespace": "kube-system", "resourceVersion": "2", "generation": 1},
        "spec": {}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 1, "numberReady": 0, "updatedNumberScheduled": 1}});
    let mut state = State { nodes: vec![node], expire_watches: 2, ..State::k3s() };
    state.objects.push(ds.clone());
    let server = FakeApiServer::start_in_background(state);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig("t", dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(client(&kubeconfig, "t")).unwrap();
    // A set (any node) and one named object: the watcher's path and await_condition's.
    let checks = [
        json!({"check": "allocatable", "resource": "gpu.intel.com/xe", "min": 1}),
        json!({"check": "rollout", "kind": "DaemonSet", "namespace": "kube-system", "name": "p"}),
    ];
    let waiting: Vec<_> = checks
        .into_iter()
        .map(|spec| {
            let client = client.clone();
            runtime.spawn(async move {
                k3d_gpu::apply::verify::wait_for(&client, &spec, "t", std::time::Duration::from_secs(20)).await
            })
        })
        .collect();
    // Both watches were answered 410 before anything changed.
    server.wait_until("both watches answered 410", std::time::Duration::from_secs(20), |s| s.expire_watches == 0);
    ds["status"]["numberReady"] = json!(1);
    server.change(|s| {
        s.nodes[0]["status"]["allocatable"]["gpu.intel.com/xe"] = json!("1");
        s.objects.retain(|o| o["kind"] != "DaemonSet" || o["metadata"]["name"] != "p");
        s.objects.push(ds);
    });
    for w in waiting {
        runtime.block_on(w).unwrap().unwrap();
    }
}

/// Applies every object of `graph` the way apply does (namespaces and CRDs first, so their
/// kinds are served), with the real provider code; returns the failures.
async fn apply_objects(client: &kube::Client, graph: &k3d_gpu::compile::DesiredGraph) -> Vec<String> {
    let mut objects: Vec<&serde_json::Value> =
        graph.resources().filter(|r| r.kind == k3d_gpu::compile::ResourceKind::Object).map(|r| &r.spec).collect();
    objects.sort_by_key(|o| match o["kind"].as_str() {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    });
    // The plurals apply learns from the CRDs it applies.
    let crds: k3d_gpu::observe::resources::CrdPlurals =
        objects.iter().filter_map(|o| k3d_gpu::observe::resources::crd_plural(o)).collect();
    let mut failures = Vec::new();
    for object in objects {
        if let Err(e) = k3d_gpu::apply::kubernetes::apply(client, object, true, &crds).await {
            failures.push(format!("{} {}: {e}", object["kind"], object["metadata"]["name"]));
        }
    }
    failures
}

/// Issue 9, deviation 1: k3s ships RuntimeClass nvidia. Applied to a fresh k3s, every object of
/// the NVIDIA example is created (none collides with one of k3s's), the next plan wants no
/// object, and the RuntimeClass the plugin runs under is k3s's, which verify finds.
#[test]
fn the_nvidia_example_applies_and_converges_against_a_fresh_k3s() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let graph = k3d_gpu::compile::compile(
        &support::example_config("nvidia-workstation"),
        &support::facts_of("desktop-rpl-nvidia"),
        &catalog,
    )
    .unwrap();
    let (_server, _dir, kubeconfig, name) = fresh_k3s_for(&graph);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = client(&kubeconfig, &name).await.unwrap();
        let failures = apply_objects(&client, &graph).await;
        assert!(failures.is_empty(), "apply refused:\n{}", failures.join("\n"));

        let kinds = k3d_gpu::compile::object_kinds(&catalog);
        let mut observed = support::converged(&graph);
        let seen = observe(client.clone(), &name, &kinds).await.unwrap();
        observed.kubernetes.as_mut().unwrap().objects = seen.objects;
        let plan = k3d_gpu::plan::plan(&graph, &observed, support::placeholder_inputs());
        let objects: Vec<&String> = plan.actions.iter().map(|a| &a.id).filter(|id| id.starts_with("k8s/")).collect();
        assert!(objects.is_empty(), "the second plan still wants {objects:?}");

        let verify = graph.get("verify/runtimeclass/nvidia").expect("the plugin's RuntimeClass is verified");
        k3d_gpu::apply::verify::wait_for(&client, &verify.spec, &name, std::time::Duration::from_secs(5))
            .await
            .unwrap();
    });
}

/// `[sharing.nvidia]` and `[telemetry]` against a fresh k3s: the plugin's ConfigMap, the DCGM
/// exporter and its namespace apply and converge; then a change of replicas is planned as
/// updates of the ConfigMap and the plugin's DaemonSet only, applied in place, and converges.
#[test]
fn nvidia_time_slicing_applies_converges_and_changes_in_place() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let facts = support::facts_of("desktop-rpl-nvidia");
    let text = std::fs::read_to_string(support::repo().join("examples/nvidia-time-slicing.toml")).unwrap();
    let compile = |text: &str| {
        k3d_gpu::compile::compile(&k3d_gpu::config::load_str("k3dgpu.toml", text).unwrap(), &facts, &catalog).unwrap()
    };
    let four = compile(&text);
    assert!(text.contains("replicas = 4"));
    let two = compile(&text.replace("replicas = 4", "replicas = 2"));
    let (_server, _dir, kubeconfig, name) = fresh_k3s_for(&four);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = client(&kubeconfig, &name).await.unwrap();
        let kinds = k3d_gpu::compile::object_kinds(&catalog);
        let plan_against = |graph: &k3d_gpu::compile::DesiredGraph, seen: k3d_gpu::observe::ObservedKubernetes| {
            let mut observed = support::converged(graph);
            observed.kubernetes.as_mut().unwrap().objects = seen.objects;
            k3d_gpu::plan::plan(graph, &observed, support::placeholder_inputs())
        };
        let failures = apply_objects(&client, &four).await;
        assert!(failures.is_empty(), "apply refused:\n{}", failures.join("\n"));
        let p = plan_against(&four, observe(client.clone(), &name, &kinds).await.unwrap());
        let left: Vec<&String> = p.actions.iter().map(|a| &a.id).filter(|id| id.starts_with("k8s/")).collect();
        assert!(left.is_empty(), "the second plan still wants {left:?}");

        let p = plan_against(&two, observe(client.clone(), &name, &kinds).await.unwrap());
        let changes: Vec<(&str, k3d_gpu::plan::ActionKind)> =
            p.actions.iter().filter(|a| a.id.starts_with("k8s/")).map(|a| (a.id.as_str(), a.action)).collect();
        assert_eq!(
            changes,
            [
                ("k8s/apps/DaemonSet/kube-system/nvidia-device-plugin-daemonset", k3d_gpu::plan::ActionKind::Update),
                ("k8s/core/ConfigMap/kube-system/nvidia-device-plugin-config", k3d_gpu::plan::ActionKind::Update),
            ]
        );
        let failures = apply_objects(&client, &two).await;
        assert!(failures.is_empty(), "apply refused:\n{}", failures.join("\n"));
        let p = plan_against(&two, observe(client.clone(), &name, &kinds).await.unwrap());
        let left: Vec<&String> = p.actions.iter().map(|a| &a.id).filter(|id| id.starts_with("k8s/")).collect();
        assert!(left.is_empty(), "after the change the plan still wants {left:?}");
    });
}

/// Without k3s's runtimes manifest (`--disable=runtimes`, or a node image without it) the
/// check fails in time and says why.
#[test]
fn verify_names_a_missing_runtime_class() {
    let server = FakeApiServer::start_in_background(State::empty_k3s());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig("t", dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(client(&kubeconfig, "t")).unwrap();
    let spec = json!({"check": "runtimeclass", "name": "nvidia"});
    let err = runtime
        .block_on(k3d_gpu::apply::verify::wait_for(&client, &spec, "t", std::time::Duration::from_millis(800)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("RuntimeClass nvidia does not exist") && err.contains("--disable=runtimes"), "{err}");
}

/// The agent end to end against a fresh k3s: its objects apply and are observed, and the readiness
/// check waits on the models endpoint through the service proxy (GET only) until the test,
/// playing the model server, answers with a model.
#[test]
fn the_agent_applies_and_waits_for_its_model() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let graph = k3d_gpu::compile::compile(
        &k3d_gpu::config::load_str("k3dgpu.toml", "[agent]\n").unwrap(),
        &support::facts_of("lunar-lake-npu"),
        &catalog,
    )
    .unwrap();
    let (server, _dir, kubeconfig, name) = fresh_k3s_for(&graph);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(client(&kubeconfig, &name)).unwrap();
    let failures = runtime.block_on(apply_objects(&client, &graph));
    assert!(failures.is_empty(), "apply refused:\n{}", failures.join("\n"));
    let kinds = k3d_gpu::compile::object_kinds(&catalog);
    let seen = runtime.block_on(observe(client.clone(), &name, &kinds)).unwrap();
    let seen: Vec<String> = seen
        .objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    for id in [
        "PersistentVolumeClaim/k3d-gpu-agent/ovms-models",
        "Deployment/k3d-gpu-agent/ovms",
        "Service/k3d-gpu-agent/ovms",
    ] {
        assert!(seen.iter().any(|k| k == id), "observe lists {id}: {seen:?}");
    }

    let spec = graph.get("verify/endpoint/k3d-gpu-agent/ovms").expect("a readiness check").spec.clone();
    let waiting = runtime.spawn(async move {
        k3d_gpu::apply::verify::wait_for(&client, &spec, &name, std::time::Duration::from_secs(20)).await
    });
    // Asked through the proxy and answered "no endpoint": still waiting.
    server.wait_until("verify asked the endpoint", std::time::Duration::from_secs(10), |s| {
        s.requests.iter().any(|r| r.contains("/proxy"))
    });
    assert!(!waiting.is_finished(), "no endpoint answers yet");
    server.change(|s| {
        s.proxied.push((
            "ovms:8000/v3/models".into(),
            json!({"object": "list", "data": [{"id": "Qwen3-4B-int4-ov", "object": "model"}]}),
        ))
    });
    runtime.block_on(waiting).unwrap().unwrap();
    let proxied: Vec<String> = server.requests().into_iter().filter(|r| r.contains("/proxy")).collect();
    assert!(proxied.len() >= 2, "{proxied:?}");
    assert!(
        proxied.iter().all(|r| r == "GET /api/v1/namespaces/k3d-gpu-agent/services/ovms:8000/proxy/v3/models"),
        "{proxied:?}"
    );
}

/// The add-ons, the chat UI and the sandbox end to end against a fresh k3s: every object applies
/// (the sandbox's template after its CRDs) and is observed, and the chat UI's readiness waits
/// on its health endpoint through the service proxy (GET only) until the test, playing Open
/// WebUI, answers `{"status": true}`.
#[test]
fn the_add_ons_apply_and_the_chat_ui_waits_for_its_health() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let toml = "[agent]\n[agent.chat]\n[addons.video]\n[addons.embeddings]\n[sandbox]\n";
    let graph = k3d_gpu::compile::compile(
        &k3d_gpu::config::load_str("k3dgpu.toml", toml).unwrap(),
        &support::facts_of("lunar-lake-npu"),
        &catalog,
    )
    .unwrap();
    let (server, _dir, kubeconfig, name) = fresh_k3s_for(&graph);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(client(&kubeconfig, &name)).unwrap();
    let failures = runtime.block_on(apply_objects(&client, &graph));
    assert!(failures.is_empty(), "apply refused:\n{}", failures.join("\n"));
    let kinds = k3d_gpu::compile::object_kinds(&catalog);
    let seen = runtime.block_on(observe(client.clone(), &name, &kinds)).unwrap();
    let seen: Vec<String> = seen
        .objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    for id in [
        "Deployment/k3d-gpu-agent/open-webui",
        "Service/k3d-gpu-agent/open-webui",
        "PersistentVolumeClaim/k3d-gpu-agent/open-webui-data",
        "Deployment/k3d-gpu-agent/video",
        "Deployment/k3d-gpu-agent/embeddings",
        "SandboxTemplate/agent-sandbox/python-ecores",
        "SandboxWarmPool/agent-sandbox/python-ecores",
    ] {
        assert!(seen.iter().any(|k| k == id), "observe lists {id}: {seen:?}");
    }

    let spec = graph.get("verify/endpoint/k3d-gpu-agent/open-webui").expect("a readiness check").spec.clone();
    let waiting = runtime.spawn(async move {
        k3d_gpu::apply::verify::wait_for(&client, &spec, &name, std::time::Duration::from_secs(20)).await
    });
    // Asked through the proxy and answered "no endpoint": still waiting.
    server.wait_until("verify asked the endpoint", std::time::Duration::from_secs(10), |s| {
        s.requests.iter().any(|r| r.contains("/proxy"))
    });
    assert!(!waiting.is_finished(), "no endpoint answers yet");
    server.change(|s| s.proxied.push(("open-webui:8080/health".into(), json!({"status": true}))));
    runtime.block_on(waiting).unwrap().unwrap();
    let proxied: Vec<String> = server.requests().into_iter().filter(|r| r.contains("/proxy")).collect();
    assert!(
        !proxied.is_empty()
            && proxied
                .iter()
                .all(|r| r == "GET /api/v1/namespaces/k3d-gpu-agent/services/open-webui:8080/proxy/health"),
        "{proxied:?}"
    );
}

/// A fake API server that starts like a fresh k3s with the graph's server node registered,
/// and a kubeconfig for it: the server, the directory holding the kubeconfig, its path and
/// the cluster's name.
fn fresh_k3s_for(
    graph: &k3d_gpu::compile::DesiredGraph,
) -> (FakeApiServer, tempfile::TempDir, std::path::PathBuf, String) {
    let cluster = graph.resources().find(|r| r.kind == k3d_gpu::compile::ResourceKind::Cluster).unwrap();
    let name = cluster.spec["name"].as_str().unwrap().to_string();
    let server = FakeApiServer::start_in_background(State {
        nodes: vec![support::fake_apiserver::k3s_node(&format!("k3d-{name}-server-0"), true)],
        ..State::k3s()
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(&name, dir.path());
    (server, dir, kubeconfig, name)
}

/// The Service's ready pod, added to the server; its `name:port`.
fn ready_pod_behind(server: &FakeApiServer, namespace: &str, service: &str, port: u64) -> String {
    let svc = server
        .state
        .lock()
        .unwrap()
        .objects
        .iter()
        .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == service && o["metadata"]["namespace"] == namespace)
        .cloned()
        .expect("the Service was applied");
    let (pod, key) = support::port_forward::ready_pod_behind(&svc, port);
    server.change(|s| s.objects.push(pod));
    key
}

/// The warm-up (issue 36, deviation 5): once the model is listed (a GET through the service
/// proxy), one short chat completion is POSTed the way a client reaches the server, through a
/// port-forward to its ready pod (WebSocket, `v4.channel.k8s.io`), never through the service
/// proxy, which OVMS answers "Mediapipe graph definition … not found". Its reply's first
/// words come back with the time it took; a server that answers only an error (still
/// loading) is asked again.
#[test]
fn the_agent_warm_up_posts_a_chat_completion_and_reads_the_reply() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let graph = k3d_gpu::compile::compile(
        &k3d_gpu::config::load_str("k3dgpu.toml", "[agent]\n").unwrap(),
        &support::facts_of("rtx2000ada-x2"),
        &catalog,
    )
    .unwrap();
    let (server, _dir, kubeconfig, name) = fresh_k3s_for(&graph);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = runtime.block_on(client(&kubeconfig, &name)).unwrap();
    let failures = runtime.block_on(apply_objects(&client, &graph));
    assert!(failures.is_empty(), "apply refused:\n{}", failures.join("\n"));
    let spec = graph.get("verify/endpoint/k3d-gpu-agent/vllm").expect("a readiness check").spec.clone();
    assert_eq!(spec["chat"], json!({"path": "/v1/chat/completions", "model": "Qwen3-4B"}));
    let pod = ready_pod_behind(&server, "k3d-gpu-agent", "vllm", spec["port"].as_u64().unwrap());
    let chat = format!("{pod}/v1/chat/completions");
    server.change(|s| {
        s.proxied.push((
            "vllm:8000/v1/models".into(),
            json!({"object": "list", "data": [{"id": "Qwen3-4B", "object": "model"}]}),
        ));
        // Still loading: an error, not a reply.
        s.forwarded.push((chat.clone(), json!({"error": {"message": "loading"}})));
    });
    let (c, s, n) = (client.clone(), spec.clone(), name.clone());
    let warming = runtime.spawn(async move {
        k3d_gpu::apply::verify::wait_for(&c, &s, &n, std::time::Duration::from_secs(20))
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::timeout(std::time::Duration::from_secs(30), k3d_gpu::apply::verify::warm_up(&c, &s))
            .await
            .map_err(|_| "no reply".to_string())?
            .map_err(|e| e.to_string())
    });
    // Asked while loading, then answered.
    server.wait_until("the chat completion came through a port-forward", std::time::Duration::from_secs(10), |s| {
        !s.forwarded_requests.is_empty()
    });
    assert!(!warming.is_finished(), "an error is not a reply");
    server.change(|s| {
        s.forwarded.retain(|(k, _)| *k != chat);
        s.forwarded.push((
            chat.clone(),
            json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
                "content": "Hello! Nice to meet you."}, "finish_reason": "stop"}]}),
        ));
    });
    let reply = runtime.block_on(warming).unwrap().unwrap();
    assert_eq!(reply.first_words, "Hello! Nice to meet you.");
    let note = k3d_gpu::apply::verify::warm_up_note(&spec, &reply);
    assert!(note.starts_with("svc/vllm replied in ") && note.ends_with(": \"Hello! Nice to meet you.\""), "{note}");
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.starts_with("GET /api/v1/namespaces/k3d-gpu-agent/pods/vllm-0/portforward")),
        "{requests:?}"
    );
    assert!(server.proxied_posts().is_empty(), "no POST went through the service proxy: {:?}", server.proxied_posts());
    let bodies = server.state.lock().unwrap().forwarded_requests.clone();
    assert!(bodies.len() >= 2, "asked again after the error: {bodies:?}");
    assert_eq!((bodies[0].0.as_str(), bodies[0].1.as_str()), (chat.as_str(), "POST"));
    assert_eq!(bodies[0].2["model"], "Qwen3-4B");
    assert_eq!(bodies[0].2["messages"][0]["role"], "user");
}

fn pod(ns: &str, name: &str, node: Option<&str>, phase: &str, limits: serde_json::Value) -> serde_json::Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
        "status": {"phase": phase}});
    if let Some(node) = node {
        p["spec"]["nodeName"] = json!(node);
    }
    p
}

/// Issue 37, defect 5: observe reads which pods hold accelerators as the scheduler counts
/// them (on a node, not finished), and `held` leaves the agent's own namespace out.
#[test]
fn observe_reads_the_pods_that_hold_accelerators() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut gpu_node = node("k3d-t-server-0");
        gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = json!("2");
        let gpu = json!({"nvidia.com/gpu": "1", "memory": "1Gi"});
        let mut with_init = pod("ml", "warmup", Some("k3d-t-server-0"), "Pending", json!({"cpu": "1"}));
        with_init["spec"]["initContainers"] =
            json!([{"name": "init", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]);
        let objects = vec![
            pod("default", "comfyui", Some("k3d-t-server-0"), "Running", gpu.clone()),
            pod("ml", "trainer", Some("k3d-t-server-0"), "Succeeded", gpu.clone()),
            pod("ml", "unscheduled", None, "Pending", gpu.clone()),
            pod("k3d-gpu-agent", "vllm-7c4d", Some("k3d-t-server-0"), "Running", gpu.clone()),
            pod("web", "nginx", Some("k3d-t-server-0"), "Running", json!({"cpu": "1"})),
            with_init,
        ];
        let state = State { nodes: vec![gpu_node], objects, served: vec!["/api/v1/pods".into()], ..State::default() };
        let server = FakeApiServer::start(state).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = server.kubeconfig("t", dir.path());
        let kinds = k3d_gpu::compile::ObjectKinds::default();
        let observed = observe(client(&kubeconfig, "t").await.unwrap(), "t", &kinds).await.unwrap();
        let holders: Vec<String> = observed
            .holders
            .iter()
            .map(|p| format!("{}/{} on {}: {:?}", p.namespace, p.name, p.node, p.resources))
            .collect();
        assert_eq!(
            holders,
            [
                "default/comfyui on k3d-t-server-0: {\"nvidia.com/gpu\": \"1\"}",
                "k3d-gpu-agent/vllm-7c4d on k3d-t-server-0: {\"nvidia.com/gpu\": \"1\"}",
                "ml/warmup on k3d-t-server-0: {\"nvidia.com/gpu\": \"2\"}",
            ]
        );
        let requests = server.requests();
        assert!(requests.iter().any(|r| r.starts_with("GET /api/v1/pods")), "{requests:?}");
        let held = k3d_gpu::compile::held::Held::from_observed(&observed);
        let taken = held.taken("nvidia.com/gpu", 1).expect("comfyui and warmup hold 3 of 2");
        assert_eq!(taken.sentence(), "nvidia.com/gpu: 0 of 2 free, held by default/comfyui (1), ml/warmup (2)");
    });
}
