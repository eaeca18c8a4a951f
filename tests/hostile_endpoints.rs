//! Issue 24: what a hostile endpoint or client can make the tool hold. `k3d-gpu mcp` fed calls
//! by a client that never reads its output stays bounded (it stops reading); Docker and the
//! API server answering without end are cut while reading, and the cut is said.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use support::K3dGpu;

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn an_mcp_client_that_never_reads_cannot_grow_the_server() {
    const CALLS: usize = 20_000;
    let mut child = K3dGpu::new().arg("mcp").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn();
    let pid = child.id();
    // Held, never read: the server's answers fill this pipe and then wait.
    let _stdout = child.stdout.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let writer = std::thread::spawn(move || {
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } } });
        let mut lines =
            vec![init.to_string(), json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string()];
        // tools/list: each answer is every tool with its schemas, tens of kB.
        lines.extend((1..=CALLS).map(|id| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" }).to_string()));
        for line in lines {
            if stdin.write_all(format!("{line}\n").as_bytes()).is_err() {
                return;
            }
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    // Until nothing moves: the client's writes and the server's memory the same for 20
    // samples in a row (the server stopped reading, or read and answered everything).
    let (mut peak, mut last, mut still) = (0u64, (0usize, 0u64), 0);
    while still < 20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = (written.load(Ordering::SeqCst), rss_kib(pid).unwrap_or(0));
        peak = peak.max(now.1);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = writer.join();
    eprintln!("peak RSS {peak} KiB; {} of {} lines written", last.0, CALLS + 2);
    // Without back-pressure every answer is held (20,000 answers: over 100 MB).
    assert!(peak < 80 * 1024, "the server held {peak} KiB for a client that never reads");
    assert!(last.0 < CALLS + 2, "the server stopped reading: not every call could be written");
}

/// The request line of the next request on `stream` (its headers read and dropped).
fn request_line(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|n| *n > 0)?;
        if header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(line)
}

/// Writes a chunked answer whose body is `head` then `fill` bytes repeated, up to `total`
/// bytes unless the client goes first; returns how many body bytes the client took.
fn endless(stream: &mut TcpStream, content_type: &str, head: &[u8], total: usize) -> usize {
    let header = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n");
    if stream.write_all(header.as_bytes()).is_err() {
        return 0;
    }
    let chunk = [b'a'; 1 << 16];
    let mut sent = 0;
    let mut write = |data: &[u8]| {
        stream
            .write_all(format!("{:x}\r\n", data.len()).as_bytes())
            .and_then(|_| stream.write_all(data))
            .and_then(|_| stream.write_all(b"\r\n"))
    };
    if write(head).is_err() {
        return 0;
    }
    while sent < total {
        if write(&chunk).is_err() {
            return sent;
        }
        sent += chunk.len();
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    sent
}

fn json_answer(stream: &mut TcpStream, body: &str) {
    let _ = stream.write_all(
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
            .as_bytes(),
    );
}

/// 256 MiB: what a stand-in sends at most, so the old unbounded reads ended too.
const FLOOD: usize = 256 << 20;

#[test]
fn a_docker_engine_that_never_ends_its_answer_is_cut_while_read() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            while let Some(_line) = request_line(&mut reader) {
                // Every answer (the registry's digest for a tag, first) never ends.
                let n = endless(&mut stream, "application/json", b"{\"Descriptor\":{\"mediaType\":\"", FLOOD);
                counter.fetch_add(n, Ordering::SeqCst);
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "").unwrap();
    let out = K3dGpu::new()
        .cwd(dir.path())
        .args(["images", "lock"])
        .env("DOCKER_HOST", format!("tcp://user:hunter2@127.0.0.1:{port}"))
        .env("HOME", dir.path())
        .output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let taken = taken.load(Ordering::SeqCst);
    eprintln!("the engine's answer: {} MiB taken; {stderr}", taken >> 20);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("passed 64 MiB and was cut there"), "the cut is said: {stderr}");
    assert!(taken < 80 << 20, "read {taken} bytes of an answer that never ends");
    assert!(!stderr.contains("hunter2"), "DOCKER_HOST's password is never printed: {stderr}");
    assert!(!dir.path().join("images.lock").exists(), "no lock written");
}

/// `images lock` with no engine to resolve through: the error's kind is `unreachable`, chosen
/// by its type (it was `usage` while the reason was a string), exit 2.
#[test]
fn images_lock_without_an_engine_is_unreachable_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "").unwrap();
    let socket = dir.path().join("no-engine.sock");
    let out = K3dGpu::new()
        .cwd(dir.path())
        .args(["images", "lock", "--json"])
        .env("DOCKER_HOST", format!("unix://{}", socket.display()))
        .env("HOME", dir.path())
        .output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(doc["schema"], "k3d-gpu.error/v1", "{doc}");
    assert_eq!(doc["diagnostics"][0]["code"], "unreachable", "{doc}");
    let message = doc["diagnostics"][0]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("images lock: cannot reach Docker at") && message.contains("no socket at"), "{doc}");
    assert!(!dir.path().join("images.lock").exists(), "no lock written");
}

#[test]
fn a_pod_log_past_limit_bytes_is_cut_while_read() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                while let Some(line) = request_line(&mut reader) {
                    let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                    let list = |kind: &str, items: &str| {
                        format!("{{\"kind\":\"{kind}\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"items\":[{items}]}}")
                    };
                    if path.starts_with("/apis/apps/v1/daemonsets") {
                        let ds = r#"{"metadata":{"name":"intel-gpu-plugin","namespace":"kube-system"},"spec":{"selector":{"matchLabels":{"app":"intel-gpu-plugin"}},"template":{"metadata":{},"spec":{"containers":[]}}}}"#;
                        json_answer(&mut stream, &list("DaemonSetList", ds));
                    } else if path.starts_with("/apis/apps/v1/") {
                        json_answer(&mut stream, &list("List", ""));
                    } else if path.contains("/log") {
                        // limitBytes asked for 1 MiB; this server does not care.
                        let n = endless(&mut stream, "text/plain", b"log line\n", 64 << 20);
                        counter.fetch_add(n, Ordering::SeqCst);
                        return;
                    } else if path.starts_with("/api/v1/namespaces/kube-system/pods") {
                        let pod = r#"{"metadata":{"name":"p","namespace":"kube-system"},"spec":{"containers":[{"name":"c"}]},"status":{"containerStatuses":[]}}"#;
                        json_answer(&mut stream, &list("PodList", pod));
                    } else {
                        json_answer(&mut stream, r#"{"kind":"Status","code":404}"#);
                    }
                }
            });
        }
    });
    let out = logs_against(port);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "printed {} KiB; the server's stream: {} MiB taken",
        stdout.len() >> 10,
        taken.load(Ordering::SeqCst) >> 20
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.starts_with("==> kube-system/p/c (not ready) <==\nlog line\n"),
        "{}",
        &stdout[..stdout.len().min(200)]
    );
    assert!(stdout.len() < (1 << 20) + 4096, "printed {} bytes past limitBytes", stdout.len());
    assert!(stdout.contains("… (cut at 1024 KiB"), "the cut is said");
}

#[test]
fn an_api_server_list_that_never_ends_is_cut_while_read() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if request_line(&mut reader).is_some() {
                    // Every LIST (the component's DaemonSets, first) is an answer without end.
                    let n =
                        endless(&mut stream, "application/json", b"{\"kind\":\"DaemonSetList\",\"items\":[\"", FLOOD);
                    counter.fetch_add(n, Ordering::SeqCst);
                }
            });
        }
    });
    let out = logs_against(port);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let taken = taken.load(Ordering::SeqCst);
    eprintln!("the API server's answer: {} MiB taken; {stderr}", taken >> 20);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(out.status.code().is_some(), "exits with a code, not a signal: {stderr}");
    assert!(stderr.contains("passed 64 MiB and was cut there"), "the cut is said: {stderr}");
    assert!(taken < 96 << 20, "read {taken} bytes of an answer that never ends");
}

/// `k3d-gpu logs intel-gpu-plugin` for cluster `lab`, its context pointing at 127.0.0.1:`port`.
fn logs_against(port: u16) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "[cluster]\nname = \"lab\"\n").unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: k3d-lab\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .unwrap();
    K3dGpu::new()
        .cwd(dir.path())
        .args(["logs", "intel-gpu-plugin"])
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", dir.path())
        .output()
}
