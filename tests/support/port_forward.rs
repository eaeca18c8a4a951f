//! The fake API server's `pods/NAME/portforward` subresource, as a real API server (through
//! the kubelet) speaks it to kube-rs: a GET with `ports=N` that upgrades to WebSocket under
//! the `v4.channel.k8s.io` protocol (Kubernetes' kubelet `portforward/websocket.go`), binary
//! frames whose first byte is the channel (data `0`, error `1` for the first port), and a
//! first frame on each channel that holds only the port number, little-endian. The pod must
//! exist and be Running; anything else is refused before the upgrade, as a real server does.
//!
//! Behind the stream the test plays the pod's server: each HTTP request that arrives on the
//! data channel is answered from [`State::forwarded`] by `pod:port` + path (404 when absent)
//! and recorded in [`State::forwarded_requests`].

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::fake_apiserver::State;

/// The channel protocol the fake answers with, as a v1.37 kubelet does for kube-rs.
pub const PROTOCOL: &str = "v4.channel.k8s.io";

/// A port-forward the server agreed to.
pub struct Accepted {
    pod: String,
    port: u16,
    accept: String,
}

fn refused(code: u16, reason: &str, message: String) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

/// Checks a port-forward request: the path, one port, a WebSocket upgrade offering v4, and a
/// Running pod.
pub fn accept(
    state: &Mutex<State>,
    target: &str,
    upgrade: &str,
    key: &str,
    protocols: &str,
) -> Result<Accepted, (u16, Value)> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let rest = path.strip_prefix("/api/v1/namespaces/").and_then(|r| r.strip_suffix("/portforward"));
    let Some((namespace, pod)) = rest.and_then(|r| r.split_once("/pods/")) else {
        return Err(refused(404, "NotFound", format!("no route {path}")));
    };
    let ports: Vec<&str> = query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("ports="))
        .flat_map(|v| v.split("%2C").flat_map(|p| p.split(',')))
        .collect();
    let [port] = ports.as_slice() else {
        return Err(refused(400, "BadRequest", format!("this server forwards exactly one port, asked {ports:?}")));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(refused(400, "BadRequest", format!("invalid port {port:?}")));
    };
    if !upgrade.eq_ignore_ascii_case("websocket") || key.is_empty() {
        return Err(refused(400, "BadRequest", "Upgrade request required".into()));
    }
    if !protocols.split(',').any(|p| p.trim() == PROTOCOL) {
        return Err(refused(400, "BadRequest", format!("no protocol this server speaks among {protocols:?}")));
    }
    let state = state.lock().unwrap();
    let found = state
        .objects
        .iter()
        .find(|o| o["kind"] == "Pod" && o["metadata"]["namespace"] == namespace && o["metadata"]["name"] == pod);
    match found {
        None => Err(refused(404, "NotFound", format!("pods \"{pod}\" not found"))),
        Some(p) if p["status"]["phase"] != "Running" => {
            Err(refused(400, "BadRequest", format!("unable to upgrade connection: pod {pod} is not running")))
        }
        Some(_) => Ok(Accepted {
            pod: pod.to_string(),
            port,
            accept: tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        }),
    }
}

impl Accepted {
    /// `Sec-WebSocket-Accept` for the client's key.
    pub fn accept_key(&self) -> &str {
        &self.accept
    }
}

/// Serves the forwarded port over the upgraded connection (the 101 answer already sent) until
/// the client closes.
pub async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: S,
    accepted: Accepted,
    state: Arc<Mutex<State>>,
    changed: Arc<tokio::sync::Notify>,
) {
    let mut ws = WebSocketStream::from_raw_socket(stream, Role::Server, None).await;
    let [lo, hi] = accepted.port.to_le_bytes();
    for channel in [0u8, 1] {
        if ws.send(Message::Binary(vec![channel, lo, hi].into())).await.is_err() {
            return;
        }
    }
    let key = format!("{}:{}", accepted.pod, accepted.port);
    let mut incoming: Vec<u8> = Vec::new();
    while let Some(Ok(message)) = ws.next().await {
        let data = match message {
            Message::Binary(data) => data,
            Message::Close(_) => break,
            _ => continue,
        };
        match data.first() {
            Some(0) => incoming.extend_from_slice(&data[1..]),
            _ => continue,
        }
        while let Some((method, path, body, used)) = one_request(&incoming) {
            incoming.drain(..used);
            let answer = {
                let mut s = state.lock().unwrap();
                let posted: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                s.forwarded_requests.push((format!("{key}{path}"), method.clone(), posted));
                s.forwarded.iter().find(|(k, _)| *k == format!("{key}{path}")).map(|(_, v)| v.clone())
            };
            // A test may wait for the request it records (`FakeApiServer::wait_until`).
            changed.notify_waiters();
            let (code, body) = match answer {
                Some(v) => (200, v.to_string()),
                None => (404, json!({"error": format!("no route {path}")}).to_string()),
            };
            let response = format!(
                "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                if code == 200 { "OK" } else { "Not Found" },
                body.len()
            );
            let mut frame = vec![0u8];
            frame.extend_from_slice(response.as_bytes());
            if ws.send(Message::Binary(frame.into())).await.is_err() {
                return;
            }
        }
    }
    let _ = ws.close(None).await;
}

/// One complete HTTP/1.1 request at the start of `bytes`: method, path, body, bytes used.
fn one_request(bytes: &[u8]) -> Option<(String, String, Vec<u8>, usize)> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = head.lines();
    let mut first = lines.next()?.split_whitespace();
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if bytes.len() < end + length {
        return None;
    }
    Some((method, path, bytes[end..end + length].to_vec(), end + length))
}

/// A Running, Ready pod behind Service `svc` (its selector's labels), serving on the port the
/// Service's `port` routes to (a named targetPort becomes that container port's name): what
/// the scheduler and the kubelet would have made. Returns the pod and its `name:port`, the
/// key of [`State::forwarded`].
pub fn ready_pod_behind(svc: &Value, port: u64) -> (Value, String) {
    let entry =
        svc["spec"]["ports"].as_array().into_iter().flatten().find(|p| p["port"] == port).cloned().unwrap_or_default();
    let (container_port, port_name) = match &entry["targetPort"] {
        Value::Number(n) => (n.as_u64().unwrap_or(port), "http".to_string()),
        Value::String(named) => (port, named.clone()),
        _ => (port, "http".to_string()),
    };
    let service = svc["metadata"]["name"].as_str().unwrap_or_default();
    let name = format!("{service}-0");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": svc["metadata"]["namespace"], "labels": svc["spec"]["selector"],
            "uid": format!("pod-{service}"), "resourceVersion": "1"},
        "spec": {"containers": [{"name": "server", "image": "x", "ports": [{"name": port_name, "containerPort": container_port}]}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    (pod, format!("{name}:{container_port}"))
}
