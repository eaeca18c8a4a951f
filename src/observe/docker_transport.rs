//! How bollard reaches the engine: one HTTP/1.1 connection per request (unix socket or TCP,
//! hyper's own client connection), whose reads are capped while reading. bollard collects a
//! JSON answer whole before parsing it, so an engine (or whatever answers on DOCKER_HOST)
//! that never ends its answer filled memory: `images lock` reached 4.3 GB. Past the cap the
//! connection fails with an error that says what was cut, and bollard's call fails with it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bollard::{BollardRequest, Docker};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most one answer of the engine may hold: a container list or an image inspect of a
/// busy engine is a few MB; a build's progress stream a few tens.
pub const MAX_ANSWER: u64 = 64 << 20;

/// Where to connect.
#[derive(Debug, Clone)]
enum Address {
    Unix(std::path::PathBuf),
    Tcp(String),
}

/// A stream that fails its reads once more than `cap` bytes came through it.
struct Capped<S> {
    inner: S,
    read: u64,
    cap: Option<u64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.read += (buf.filled().len() - before) as u64;
            if let Some(cap) = self.cap
                && self.read > cap
            {
                return Poll::Ready(Err(io::Error::other(format!(
                    "the engine's answer passed {} MiB and was cut there (no answer of Docker is that large)",
                    cap >> 20
                ))));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Sends `request` on a new connection to `address`, its answer capped at `cap` bytes.
async fn send(
    address: Arc<Address>,
    cap: Option<u64>,
    request: BollardRequest,
) -> Result<http::Response<hyper::body::Incoming>, bollard::errors::Error> {
    let (mut parts, body) = request.into_parts();
    // bollard writes an absolute URI (`http://docker/v1.x/…`); on a connection of our own the
    // request line takes the path, and the host goes in its header.
    let host = parts.uri.authority().map(|a| a.to_string()).unwrap_or_else(|| "docker".into());
    let path = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
    parts.uri = path.parse().map_err(|e: http::uri::InvalidUri| io::Error::other(e.to_string()))?;
    if let Ok(value) = http::HeaderValue::from_str(&host) {
        parts.headers.entry(http::header::HOST).or_insert(value);
    }
    let request = http::Request::from_parts(parts, body);
    macro_rules! over {
        ($stream:expr) => {{
            let io = TokioIo::new(Capped { inner: $stream, read: 0, cap });
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(sender.send_request(request).await?)
        }};
    }
    match &*address {
        Address::Unix(path) => over!(tokio::net::UnixStream::connect(path).await?),
        Address::Tcp(authority) => over!(tokio::net::TcpStream::connect(authority.as_str()).await?),
    }
}

/// A bollard client for `host` (`unix:///path`, `tcp://h:p`, `http://h:p`) whose every answer
/// is capped at `cap` bytes (`None`: a stream meant to go on, `logs --follow`).
pub fn connect(host: &str, timeout_s: u64, cap: Option<u64>) -> Result<Docker, ConnectError> {
    let address = if let Some(path) = host.strip_prefix("unix://") {
        // As bollard's own unix client: a socket that is not there fails now, not per call.
        if !std::path::Path::new(path).exists() {
            return Err(ConnectError::NoSocket(path.into()));
        }
        Address::Unix(path.into())
    } else if let Some(rest) = host.strip_prefix("tcp://").or_else(|| host.strip_prefix("http://")) {
        let authority = rest.split('/').next().unwrap_or_default();
        // userinfo is no part of where to connect.
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        Address::Tcp(authority.to_string())
    } else {
        return Err(ConnectError::Scheme);
    };
    let address = Arc::new(address);
    let transport = move |request: BollardRequest| send(address.clone(), cap, request);
    Docker::connect_with_custom_transport(transport, Some("http://docker"), timeout_s, bollard::API_DEFAULT_VERSION)
        .map_err(ConnectError::Client)
}

/// Why no client was made for a Docker host: nothing was sent yet.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no socket at {}", .0.display())]
    NoSocket(std::path::PathBuf),
    #[error("unsupported Docker host (unix:// or tcp://)")]
    Scheme,
    #[error("{0}")]
    Client(bollard::errors::Error),
}

/// An error of a bollard call with its causes: hyper says "error reading a body from
/// connection" and keeps the why (the cut) in its source.
pub fn why(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
