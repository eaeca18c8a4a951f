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
