//! A small Kubernetes API server over real HTTP for kube-rs tests: the real REST paths and
//! List JSON for the kinds we use, label-selector filtering, 404 Status for kinds whose CRD is
//! not installed. It counts requests so tests can prove O(kinds) LIST calls. It has no
//! behaviour the real API server lacks; it lacks much of what the real one has.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

#[derive(Default)]
pub struct State {
    pub nodes: Vec<Value>,
    pub objects: Vec<Value>,
    /// Resources the server knows, as `/api/v1/<plural>` or `/apis/<group>/<version>/<plural>`.
    pub served: Vec<String>,
    pub requests: Vec<String>,
}

pub struct FakeApiServer {
    pub url: String,
    pub state: Arc<Mutex<State>>,
}

/// `"a%2Fb%3Dc"` → `"a/b=c"`.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches_selector(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| match term.split_once('=') {
        Some((k, v)) => object["metadata"]["labels"][k.trim_end_matches('=')] == v,
        None => object["metadata"]["labels"].get(term).is_some(),
    })
}

/// The path a List of `object` is served at.
pub fn list_path(object: &Value) -> String {
    let api = object["apiVersion"].as_str().unwrap_or_default();
    let plural = k3d_gpu::observe::kubernetes::plural(object["kind"].as_str().unwrap_or_default());
    if api.contains('/') { format!("/apis/{api}/{plural}") } else { format!("/api/{api}/{plural}") }
}

fn respond(state: &Mutex<State>, method: &str, target: &str) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let selector =
        query.split('&').find_map(|kv| kv.strip_prefix("labelSelector=")).map(percent_decode).unwrap_or_default();
    let mut state = state.lock().unwrap();
    state.requests.push(format!("{method} {path}"));
    if method != "GET" {
        return (
            405,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 405, "reason": "MethodNotAllowed"}),
        );
    }
    if path == "/api/v1/nodes" {
        let items: Vec<Value> = state.nodes.iter().filter(|n| matches_selector(n, &selector)).cloned().collect();
        return (
            200,
            json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": items}),
        );
    }
    if !state.served.iter().any(|p| p == path) {
        return (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("the server could not find the requested resource ({path})"), "reason": "NotFound", "code": 404}),
        );
    }
    let items: Vec<Value> =
        state.objects.iter().filter(|o| list_path(o) == path && matches_selector(o, &selector)).cloned().collect();
    (200, json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}))
}

impl FakeApiServer {
    /// Starts on 127.0.0.1 (a free port) in the current tokio runtime.
    pub async fn start(state: State) -> FakeApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(state));
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let state = shared.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut reader = BufReader::new(read);
                    loop {
                        let mut request_line = String::new();
                        if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let mut content_length = 0usize;
                        loop {
                            let mut header = String::new();
                            if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if header == "\r\n" {
                                break;
                            }
                            if let Some((name, value)) = header.split_once(':')
                                && name.eq_ignore_ascii_case("content-length")
                            {
                                content_length = value.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0u8; content_length];
                        use tokio::io::AsyncReadExt;
                        if reader.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        let mut parts = request_line.split_whitespace();
                        let method = parts.next().unwrap_or_default().to_string();
                        let target = parts.next().unwrap_or_default().to_string();
                        let (code, value) = respond(&state, &method, &target);
                        let body = value.to_string();
                        let reason = if code == 200 { "OK" } else { "Error" };
                        let response = format!(
                            "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if write.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeApiServer { url, state }
    }

    /// A kubeconfig whose context `k3d-<cluster>` points here and whose *current* context
    /// points at a dead port, so a client that ignores our context choice fails.
    pub fn kubeconfig(&self, cluster: &str, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\nclusters:\n- name: fake\n  cluster:\n    server: {}\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: k3d-{cluster}\n  context:\n    cluster: fake\n    user: nobody\n- name: elsewhere\n  context:\n    cluster: dead\n    user: nobody\nusers:\n- name: nobody\n  user: {{}}\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }
}
