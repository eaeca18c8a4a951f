//! What apply's Kubernetes calls retry, against the fake API server: refused credentials
//! (401, 403) and a failed TLS handshake end the call at its first answer, while a server
//! that is busy (503) is asked again and the apply succeeds. Counted in requests and
//! connections, never in seconds.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k3d_gpu::apply::error::{ApplyError, KubeError};
use k3d_gpu::apply::kubernetes::apply;
use k3d_gpu::observe::kubernetes::client;
use k3d_gpu::observe::resources::CrdPlurals;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, State};

fn config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "probe", "namespace": "kube-system", "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}},
        "data": {"k": "v"}})
}

/// A fake API server started like a fresh k3s, and a client of it (the directory holds its
/// kubeconfig).
async fn fresh_k3s() -> (FakeApiServer, kube::Client, tempfile::TempDir) {
    let server = FakeApiServer::start(State::k3s()).await;
    let dir = tempfile::tempdir().unwrap();
    let kube = client(&server.kubeconfig("t", dir.path()), "t").await.unwrap();
    (server, kube, dir)
}

/// Applies the ConfigMap `probe` to a fake whose next answers for it are `answers`; the
/// result, the requests that named it, and whether the fake holds it afterwards.
fn applied_after(answers: &[u16]) -> (Result<(), ApplyError>, usize, bool) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let answer_next = answers.iter().map(|c| ("probe".to_string(), *c)).collect();
        let server = FakeApiServer::start(State { answer_next, ..State::k3s() }).await;
        let dir = tempfile::tempdir().unwrap();
        let kube = client(&server.kubeconfig("t", dir.path()), "t").await.unwrap();
        let result = apply(&kube, &config_map(), false, &CrdPlurals::default()).await;
        let asked = server.requests().iter().filter(|r| r.ends_with("/configmaps/probe")).count();
        let held = server.state.lock().unwrap().objects.iter().any(|o| o["metadata"]["name"] == "probe");
        (result, asked, held)
    })
}

#[test]
fn refused_credentials_fail_at_the_first_answer() {
    for code in [401, 403] {
        // Three refusals queued: a retry would meet the next one, and be counted.
        let (result, asked, held) = applied_after(&[code, code, code]);
        let error = result.unwrap_err();
        match (&error, code) {
            (ApplyError::Kubernetes { source: KubeError::Unauthenticated(_), .. }, 401)
            | (ApplyError::Kubernetes { source: KubeError::Forbidden(_), .. }, 403) => {}
            _ => panic!("{code} became {error:?}"),
        }
        assert!(!error.is_retryable(), "{error}");
        assert_eq!(asked, 1, "{code} is not asked again: {error}");
        assert!(!held);
        assert!(error.to_string().starts_with("server-side apply of probe: "), "{error}");
    }
}

#[test]
fn a_busy_server_is_asked_again_and_the_apply_succeeds() {
    let (result, asked, held) = applied_after(&[503]);
    result.unwrap();
    assert_eq!(asked, 2, "one 503, then the patch that succeeded");
    assert!(held);
}

#[test]
fn a_rejected_request_is_not_sent_again() {
    // A 500 InternalError (a webhook's denial) answers the same way every time: the apply
    // fails, and a later apply resumes (apply_e2e's half-way test relies on it).
    let (result, asked, _) = applied_after(&[500, 500]);
    let error = result.unwrap_err();
    assert!(matches!(error, ApplyError::Kubernetes { source: KubeError::Refused(_), .. }), "{error:?}");
    assert_eq!(asked, 1);
}

#[test]
fn a_failed_tls_handshake_fails_at_once() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        // A server that answers plain HTTP where the kubeconfig says https: the handshake can
        // never succeed, however long apply waits.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await;
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: k3d-t\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\n"
        );
        std::fs::write(&kubeconfig, text).unwrap();
        let kube = client(&kubeconfig, "t").await.unwrap();
        let error = apply(&kube, &config_map(), false, &CrdPlurals::default()).await.unwrap_err();
        assert!(matches!(error, ApplyError::Kubernetes { source: KubeError::Tls(_), .. }), "{error:?}");
        assert!(error.to_string().contains("TLS with the API server failed"), "{error}");
        assert_eq!(connections.load(Ordering::SeqCst), 1, "no second handshake: {error}");
    });
}

/// Issue 36, deviation 1: the URL's scope is the kind's, not the manifest's. A Deployment
/// without a namespace is refused before any request (the real server has no cluster-wide
/// URL for one object of a namespaced kind, and this fake answers such a URL 404 as it does);
/// a 404 for a built-in kind the server serves (here: a namespace that does not exist) is
/// answered at once, not waited on for a minute as "kind not served yet"; and a
/// cluster-scoped kind that names a namespace goes to its cluster-wide URL, as the server
/// ignores the namespace.
#[test]
fn the_url_scope_is_the_kinds_and_a_404_for_a_served_kind_is_not_retried() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (server, kube, _dir) = fresh_k3s().await;
        let deployment = |namespace: Option<&str>| {
            let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "app", "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}},
                "spec": {"selector": {"matchLabels": {"app": "x"}},
                    "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "x", "image": "x:1"}]}}}});
            if let Some(ns) = namespace {
                d["metadata"]["namespace"] = json!(ns);
            }
            d
        };
        let unset = apply(&kube, &deployment(None), false, &CrdPlurals::default()).await.unwrap_err();
        assert!(unset.to_string().contains("Deployment app lives in a namespace"), "{unset}");
        assert!(!server.requests().iter().any(|r| r.contains("/deployments/app")), "{:?}", server.requests());

        let missing = apply(&kube, &deployment(Some("nowhere")), false, &CrdPlurals::default()).await.unwrap_err();
        let asked = server.requests().iter().filter(|r| r.contains("/namespaces/nowhere/deployments/app")).count();
        assert_eq!(asked, 1, "a 404 for a served kind is answered, not retried: {missing}");

        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader", "namespace": "kube-system", "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}},
            "rules": []});
        apply(&kube, &role, false, &CrdPlurals::default()).await.unwrap();
        assert!(server.requests().iter().any(|r| r.contains("/apis/rbac.authorization.k8s.io/v1/clusterroles/reader")));
    });
}

/// The fake answers a URL of the wrong scope 404, as a real API server does: a namespaced
/// kind's object on its cluster-wide URL, and a cluster-scoped kind under a namespace.
#[test]
fn the_fake_refuses_a_url_of_the_wrong_scope() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (_server, kube, _dir) = fresh_k3s().await;
        let resource = |api: &str, kind: &str, plural: &str| {
            let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
            kube::core::ApiResource::from_gvk_with_plural(
                &kube::core::GroupVersionKind::gvk(group, version, kind),
                plural,
            )
        };
        let patch =
            kube::api::Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}));
        let params = kube::api::PatchParams::apply("t");
        let cluster_wide: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(kube.clone(), &resource("v1", "ConfigMap", "configmaps"));
        let e = cluster_wide.patch("x", &params, &patch).await.unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 404), "{e:?}");
        let pv = kube::api::Patch::Apply(
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}}),
        );
        let namespaced: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            kube.clone(),
            "default",
            &resource("v1", "PersistentVolume", "persistentvolumes"),
        );
        let e = namespaced.patch("pv", &params, &pv).await.unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 404), "{e:?}");
    });
}

/// Issue 36, deviation 3 (its patch half): a patch type the fake does not implement is 415
/// UnsupportedMediaType, never read as a merge patch.
#[test]
fn the_fake_refuses_a_patch_type_it_does_not_implement() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (_server, kube, _dir) = fresh_k3s().await;
        let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(kube.clone(), "kube-system");
        apply(&kube, &config_map(), false, &CrdPlurals::default()).await.unwrap();
        let params = kube::api::PatchParams::default();
        let strategic = kube::api::Patch::Strategic(json!({"data": {"k": "w"}}));
        let e = config_maps.patch("probe", &params, &strategic).await.unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 415), "{e:?}");
        let merge = kube::api::Patch::Merge(json!({"data": {"k": "w"}}));
        config_maps.patch("probe", &params, &merge).await.unwrap();
    });
}

/// Issue 36, deviation 3 (its schema half): under `fieldValidation=Strict` the fake refuses
/// a field upstream's v1.37.0 schema lacks, as the real server does; apply asks for Strict,
/// so a typo in a manifest fails the apply naming the field instead of being dropped.
#[test]
fn an_unknown_field_fails_a_strict_apply_naming_it() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (server, kube, _dir) = fresh_k3s().await;
        let mut typo = config_map();
        typo["dataa"] = json!({"k": "v"});
        let e = apply(&kube, &typo, false, &CrdPlurals::default()).await.unwrap_err();
        let said = e.to_string();
        assert!(said.contains("strict decoding error") && said.contains("dataa"), "{said}");
        assert!(
            !server.state.lock().unwrap().objects.iter().any(|o| o["metadata"]["name"] == "probe"),
            "nothing stored"
        );
        apply(&kube, &config_map(), false, &CrdPlurals::default()).await.unwrap();
    });
}

/// Issue 36, deviation 1: a kind neither k8s-openapi nor a CRD of ours names (k3s's own
/// `Addon`) takes its scope from the server's discovery, the same answer that gives its
/// plural: namespaced, so without a namespace it is refused before any write.
#[test]
fn a_kind_known_only_by_discovery_takes_its_scope_from_it() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (server, kube, _dir) = fresh_k3s().await;
        let addon = |namespace: Option<&str>| {
            let mut a = json!({"apiVersion": "k3s.cattle.io/v1", "kind": "Addon",
                "metadata": {"name": "mine", "labels": {"app.kubernetes.io/managed-by": "k3d-gpu"}},
                "spec": {"source": "/var/lib/rancher/k3s/server/manifests/mine.yaml"}});
            if let Some(ns) = namespace {
                a["metadata"]["namespace"] = json!(ns);
            }
            a
        };
        let e = apply(&kube, &addon(None), false, &CrdPlurals::default()).await.unwrap_err();
        assert!(e.to_string().contains("Addon mine lives in a namespace"), "{e}");
        assert!(
            server.requests().iter().any(|r| r == "GET /apis/k3s.cattle.io/v1"),
            "asked discovery: {:?}",
            server.requests()
        );
        assert!(!server.requests().iter().any(|r| r.contains("/addons/mine")), "{:?}", server.requests());
        apply(&kube, &addon(Some("kube-system")), false, &CrdPlurals::default()).await.unwrap();
        assert!(server.requests().iter().any(|r| r.ends_with("/namespaces/kube-system/addons/mine")));
    });
}
