//! A POST to a model server the way a client reaches it: through a port-forward to one ready
//! pod behind its Service (kube-rs `Api::portforward`, the API server's
//! `pods/NAME/portforward` subresource over WebSocket), not through the API server's service
//! proxy. OVMS answers a POST that came through the proxy with "Mediapipe graph definition
//! with requested name is not found"; the port-forward hands the server the request as the
//! client wrote it. GETs (the models list) still go through the proxy, which serves them.
//!
//! The pod and port are resolved as a Service routes: the Service's selector picks the pods,
//! a Running pod whose Ready condition is True is taken (the first by name, so a run is
//! repeatable), and the Service port's `targetPort` (a number, or a container port's name)
//! is the pod's port.

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Client;
use kube::api::{Api, ListParams};

use super::error::ApplyError;

/// The most of a reply read: a chat completion of 32 tokens is a few KiB.
const MAX_REPLY: usize = 1 << 20;

/// The pod and container port a Service's `port` routes to.
pub async fn target(client: &Client, namespace: &str, service: &str, port: u16) -> Result<(String, u16), ApplyError> {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let svc = services.get(service).await.map_err(|e| ApplyError::kube(format!("get svc/{service}"), e))?;
    let spec = svc.spec.unwrap_or_default();
    let selector = spec.selector.unwrap_or_default();
    if selector.is_empty() {
        return Err(ApplyError::Malformed(format!("svc/{service} selects no pods (no selector)")));
    }
    let target_port = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.port == i32::from(port))
        .ok_or_else(|| ApplyError::Malformed(format!("svc/{service} has no port {port}")))?
        .target_port;
    let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels(&labels.join(",")))
        .await
        .map_err(|e| ApplyError::kube(format!("list the pods of svc/{service}"), e))?;
    let mut ready: Vec<Pod> = list.items.into_iter().filter(is_ready).collect();
    ready.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let pod =
        ready.into_iter().next().ok_or_else(|| ApplyError::Malformed(format!("svc/{service} has no ready pod")))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let port = match target_port {
        None => port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => {
            u16::try_from(n).map_err(|_| ApplyError::Malformed(format!("svc/{service}: targetPort {n}")))?
        }
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(named)) => pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(named.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| {
                let said = format!("pod {name} has no port named {}", crate::escape::quoted(&named));
                ApplyError::Malformed(crate::escape::one_line(&said).into_owned())
            })?,
    };
    Ok((name, port))
}

fn is_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else { return false };
    status.phase.as_deref() == Some("Running")
        && status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

/// POSTs `body` as JSON to `path` on the pod behind `service:port`; the reply's status and
/// text (at most [`MAX_REPLY`] bytes).
pub async fn post_json(
    client: &Client,
    namespace: &str,
    service: &str,
    port: u16,
    path: &str,
    body: Vec<u8>,
) -> Result<(u16, String), ApplyError> {
    let (pod, pod_port) = target(client, namespace, service, port).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    // The pod's name and the transport's error come from the cluster: one escaped line.
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        let said = crate::escape::one_line(&format!("{what} pod {pod} port {pod_port}: {e}")).into_owned();
        ApplyError::Malformed(crate::escape::capped(said))
    };
    let mut forwarder = pods
        .portforward(&pod, &[pod_port])
        .await
        .map_err(|e| ApplyError::kube(format!("port-forward to pod {pod}"), e))?;
    let stream = forwarder.take_stream(pod_port).ok_or_else(|| failed("no stream to", &"kube-rs gave none"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| failed("HTTP to", &e))?;
    let driver = tokio::spawn(connection);
    let request = http::Request::post(path)
        .header(http::header::HOST, format!("{service}.{namespace}.svc:{port}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CONNECTION, "close")
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        .map_err(|e| ApplyError::Malformed(format!("{}: {e}", crate::escape::quoted(path))))?;
    let response = sender.send_request(request).await.map_err(|e| failed("POST to", &e))?;
    let status = response.status().as_u16();
    let limited = http_body_util::Limited::new(response.into_body(), MAX_REPLY);
    let text = match limited.collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(e) => return Err(failed("reading the reply of", &e)),
    };
    drop(sender);
    let _ = driver.await;
    forwarder.abort();
    Ok((status, text))
}
