//! The strict fake API server's own rules (tests/support/fake_apiserver.rs and ssa.rs), each
//! shown over real HTTP through kube-rs, as k3d-gpu talks to it, against what upstream does
//! (the provenance is in those files' doc comments).

mod support;

use futures_util::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, State};

async fn client(server: &FakeApiServer) -> kube::Client {
    let dir = tempfile::tempdir().unwrap();
    let path = server.kubeconfig("t", dir.path());
    k3d_gpu::observe::kubernetes::watch_client(&path, "t").await.unwrap()
}

fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

fn configmaps(client: &kube::Client) -> Api<DynamicObject> {
    api(client, "", "v1", "ConfigMap", "configmaps", Some("default"))
}

fn apply_as(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

async fn value(api: &Api<DynamicObject>, name: &str) -> Value {
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn an_apply_that_omits_a_field_its_manager_owned_removes_it_unless_another_owns_it() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let cm = configmaps(&c);
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1", "y": "1"}},
        "data": {"keep": "1", "drop": "1"}});
    cm.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&first)).await.unwrap();
    // Another manager also applies `y`, with the same value: shared ownership.
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"y": "1"}}});
    cm.patch("a", &apply_as("kubectl"), &Patch::Apply(&theirs)).await.unwrap();
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {}}, "data": {"keep": "1"}});
    cm.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&second)).await.unwrap();
    let now = value(&cm, "a").await;
    assert_eq!(now["data"], json!({"keep": "1"}), "the field we owned and dropped is gone");
    assert!(now["metadata"]["labels"].get("x").is_none(), "ours alone: removed");
    assert_eq!(now["metadata"]["labels"]["y"], "1", "kubectl still owns y: kept");
    let managers: Vec<&str> =
        now["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].as_str().unwrap()).collect();
    assert_eq!(managers, ["kubectl", "k3d-gpu"]);
    let ours = &now["metadata"]["managedFields"][1];
    assert_eq!(ours["operation"], "Apply");
    assert_eq!(ours["fieldsType"], "FieldsV1");
    // An empty map applied is a field of its own (a leaf), as structured-merge-diff records it.
    assert_eq!(ours["fieldsV1"], json!({"f:data": {"f:keep": {}}, "f:metadata": {"f:labels": {}}}));
}

#[tokio::test]
async fn another_managers_field_conflicts_with_409_unless_forced() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let cm = configmaps(&c);
    let object =
        |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": v}});
    cm.patch("a", &apply_as("helm"), &Patch::Apply(&object("1"))).await.unwrap();
    // The same value is no conflict.
    cm.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&object("1"))).await.unwrap();
    let err = cm.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&object("2"))).await.unwrap_err();
    let message = err.to_string();
    assert_eq!(code(err), 409);
    assert!(message.contains("conflict with \"helm\": .data.k"), "{message}");
    cm.patch("a", &apply_as("k3d-gpu").force(), &Patch::Apply(&object("2"))).await.unwrap();
    let now = value(&cm, "a").await;
    assert_eq!(now["data"]["k"], "2");
    let managers: Vec<&str> =
        now["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].as_str().unwrap()).collect();
    assert_eq!(managers, ["k3d-gpu"], "forcing took the field from helm");
    // A merge patch (an update) takes the fields it changes.
    let edit = json!({"data": {"k": "3"}});
    cm.patch(
        "a",
        &PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() },
        &Patch::Merge(&edit),
    )
    .await
    .unwrap();
    let now = value(&cm, "a").await;
    let entry = now["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "kubectl-edit");
    assert_eq!(entry.unwrap()["operation"], "Update");
    assert!(now["metadata"]["managedFields"].as_array().unwrap().iter().all(|e| e["manager"] != "k3d-gpu"));
}

fn daemonset(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "p", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "p"}}, "template": {"metadata": {"labels": {"app": "p"}},
            "spec": {"containers": containers}}}})
}

#[tokio::test]
async fn associative_lists_merge_by_key_and_kinds_are_defaulted_with_canonical_quantities() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let ds = api(&c, "apps", "v1", "DaemonSet", "daemonsets", Some("kube-system"));
    let ours = daemonset(json!([{"name": "plugin", "image": "intel/plugin:0.36.0",
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "ports": [{"containerPort": 8080}],
        "resources": {"limits": {"memory": "1024Mi", "cpu": "0.5"}, "requests": {"cpu": "2000m"}}}]));
    ds.patch("p", &apply_as("k3d-gpu"), &Patch::Apply(&ours)).await.unwrap();
    // A sidecar injector adds a container and an env var of its own, by their names.
    let theirs =
        daemonset(json!([{"name": "plugin", "env": [{"name": "C", "value": "3"}]}, {"name": "sidecar", "image": "s"}]));
    ds.patch("p", &apply_as("injector"), &Patch::Apply(&theirs)).await.unwrap();
    let now = value(&ds, "p").await;
    let containers = now["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2);
    let plugin = &containers[0];
    let env: Vec<&str> = plugin["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(env, ["A", "B", "C"], "env merged by name");
    // pkg/apis/apps/v1 and core/v1 defaults.go.
    assert_eq!(now["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        now["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    let pod = &now["spec"]["template"]["spec"];
    assert_eq!((pod["dnsPolicy"].as_str(), pod["restartPolicy"].as_str()), (Some("ClusterFirst"), Some("Always")));
    assert_eq!((pod["schedulerName"].as_str(), &pod["securityContext"]), (Some("default-scheduler"), &json!({})));
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(plugin["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(plugin["terminationMessagePolicy"], "File");
    assert_eq!(plugin["imagePullPolicy"], "IfNotPresent");
    assert_eq!(containers[1]["imagePullPolicy"], "Always", "an image without a tag is :latest");
    assert_eq!(plugin["ports"], json!([{"containerPort": 8080, "protocol": "TCP"}]));
    // Quantities come back canonical.
    assert_eq!(plugin["resources"], json!({"limits": {"memory": "1Gi", "cpu": "500m"}, "requests": {"cpu": "2"}}));
    // Our field set records the port by its keys, protocol included.
    let entry =
        now["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "k3d-gpu").unwrap();
    let container = &entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"plugin\"}"];
    assert!(container["f:ports"].get("k:{\"containerPort\":8080,\"protocol\":\"TCP\"}").is_some(), "{entry:#}");
    assert!(container.get("f:imagePullPolicy").is_none(), "defaults are owned by no one");

    let svc = api(&c, "", "v1", "Service", "services", Some("default"));
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"selector": {"app": "p"}, "ports": [{"port": 8000}]}});
    svc.patch("s", &apply_as("k3d-gpu"), &Patch::Apply(&service)).await.unwrap();
    let spec = value(&svc, "s").await["spec"].clone();
    assert_eq!((spec["type"].as_str(), spec["sessionAffinity"].as_str()), (Some("ClusterIP"), Some("None")));
    assert_eq!(spec["ports"], json!([{"port": 8000, "protocol": "TCP", "targetPort": 8000}]));
    assert_eq!(
        (spec["ipFamilies"].clone(), spec["internalTrafficPolicy"].as_str()),
        (json!(["IPv4"]), Some("Cluster"))
    );
    assert!(spec["clusterIP"].as_str().is_some_and(|ip| ip.starts_with("10.43.")));
}

#[tokio::test]
async fn preconditions_uids_and_namespaces_are_honoured() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let cm = configmaps(&c);
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "1"}});
    cm.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&object)).await.unwrap();
    let first = value(&cm, "a").await;
    let uid = first["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(uid.len(), 36, "a uuid: {uid}");
    // A stale resourceVersion is a conflict.
    let stale = json!({"metadata": {"resourceVersion": "1"}, "data": {"k": "2"}});
    assert_eq!(code(cm.patch("a", &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap_err()), 409);
    // A delete of another uid is a conflict; of this one it goes.
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions { uid: Some("other".into()), resource_version: None }),
        ..Default::default()
    };
    assert_eq!(code(cm.delete("a", &wrong).await.unwrap_err()), 409);
    let right = DeleteParams {
        preconditions: Some(kube::api::Preconditions { uid: Some(uid.clone()), resource_version: None }),
        ..Default::default()
    };
    cm.delete("a", &right).await.unwrap();
    // Recreated: a new uid.
    cm.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&object)).await.unwrap();
    assert_ne!(value(&cm, "a").await["metadata"]["uid"], json!(uid));
    // A namespaced create in a namespace that does not exist: 404.
    let elsewhere = api(&c, "", "v1", "ConfigMap", "configmaps", Some("nowhere"));
    let lost = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "nowhere"}});
    let err = elsewhere.patch("a", &apply_as("k3d-gpu"), &Patch::Apply(&lost)).await.unwrap_err();
    assert_eq!(code(err), 404);
    let _ = PostParams::default();
}

#[tokio::test]
async fn custom_resources_are_served_once_their_crd_is_established() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let rules = api(&c, "nfd.k8s-sigs.io", "v1alpha1", "NodeFeatureRule", "nodefeaturerules", None);
    assert_eq!(code(rules.list(&ListParams::default()).await.unwrap_err()), 404);
    let crds = api(&c, "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", None);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "nodefeaturerules.nfd.k8s-sigs.io"},
        "spec": {"group": "nfd.k8s-sigs.io", "scope": "Cluster",
            "names": {"kind": "NodeFeatureRule", "plural": "nodefeaturerules", "singular": "nodefeaturerule", "listKind": "NodeFeatureRuleList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    crds.patch("nodefeaturerules.nfd.k8s-sigs.io", &apply_as("k3d-gpu"), &Patch::Apply(&crd)).await.unwrap();
    let status = value(&crds, "nodefeaturerules.nfd.k8s-sigs.io").await["status"].clone();
    assert!(
        status["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    assert!(rules.list(&ListParams::default()).await.unwrap().items.is_empty());
    crds.delete("nodefeaturerules.nfd.k8s-sigs.io", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(rules.list(&ListParams::default()).await.unwrap_err()), 404);
}

#[tokio::test]
async fn unknown_field_selectors_and_bad_label_selectors_are_400() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let cm = configmaps(&c);
    assert_eq!(code(cm.list(&ListParams::default().fields("spec.nothing=1")).await.unwrap_err()), 400);
    assert_eq!(code(cm.list(&ListParams::default().labels("a in (b")).await.unwrap_err()), 400);
    assert_eq!(code(cm.list(&ListParams::default().labels("=x")).await.unwrap_err()), 400);
    let set = cm.list(&ListParams::default().labels("x notin (y),!z").fields("metadata.name=kube-root-ca.crt")).await;
    assert_eq!(set.unwrap().items.len(), 1);
}

type Events = futures_util::stream::BoxStream<'static, Result<WatchEvent<DynamicObject>, kube::Error>>;

/// Reads events up to one of `want`, recording each kind.
async fn until(events: &mut Events, want: &'static str, seen: &mut Vec<&'static str>) {
    loop {
        let kind = match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(e) => panic!("{e:?}"),
        };
        seen.push(kind);
        if kind == want {
            return;
        }
    }
}

#[tokio::test]
async fn watches_send_added_modified_deleted_bookmarks_and_410_for_a_compacted_version() {
    let server = FakeApiServer::start(State::k3s()).await;
    let c = client(&server).await;
    let cm = configmaps(&c);
    let list = cm.list(&ListParams::default()).await.unwrap();
    let from = list.metadata.resource_version.clone().unwrap();
    let mut events: Events = cm.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    let object =
        |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": v}});
    cm.patch("w", &apply_as("k3d-gpu"), &Patch::Apply(&object("1"))).await.unwrap();
    let mut seen = Vec::new();
    until(&mut events, "ADDED", &mut seen).await;
    cm.patch("w", &apply_as("k3d-gpu"), &Patch::Apply(&object("2"))).await.unwrap();
    until(&mut events, "MODIFIED", &mut seen).await;
    cm.delete("w", &DeleteParams::default()).await.unwrap();
    until(&mut events, "DELETED", &mut seen).await;
    assert!(seen.contains(&"BOOKMARK"), "bookmarks were asked for: {seen:?}");
    assert_eq!(seen.iter().filter(|k| **k != "BOOKMARK").collect::<Vec<_>>(), [&"ADDED", &"MODIFIED", &"DELETED"]);

    server.change(|s| s.compacted = s.version);
    let mut gone = cm.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    match gone.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("wanted 410 Gone: {other:?}"),
    }
}
