//! Issue 24: what a hostile endpoint or client can make the tool hold. `k3d-gpu mcp` fed calls
//! by a client that never reads its output stays bounded (it stops reading); Docker and the
//! API server answering without end are cut while reading, and the cut is said.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_k3d-gpu"))
        .arg("mcp")
        .env_remove("DOCKER_HOST")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
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
