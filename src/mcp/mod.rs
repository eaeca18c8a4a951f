//! `k3d-gpu mcp`: a Model Context Protocol server on stdio (DESIGN.md §10), so an AI agent can
//! see the host's engines and plan work on them while only a person can make it write.
//!
//! - `server.rs`: the protocol wiring (rmcp): the tool list, dispatch, per-call timeouts,
//!   cancellation, and errors as tool results that carry the fix.
//! - `arguments.rs`: each tool's arguments as options of a CLI command: its input schema
//!   generated from the clap definitions, a call parsed by clap itself.
//! - `tools.rs`: the read-only tools. Each takes the CLI's inputs and calls the commands'
//!   own cores (`commands::*`), so a tool and its command cannot disagree.
//! - `questions.rs`: the tools that ask the running cluster (`agent_status`, `cluster_health`).
//! - `apply.rs`: the one tool that writes: the plan hash checked, the person asked through
//!   the client (form elicitation), then the CLI's own gate, lock and verify.
//! - `backpressure.rs`: the stdio transport reads no further while 32 answers wait to be
//!   written (a client that never reads cannot make the server queue answers without end).
//! - `stdio.rs`: one message a line; a line that is no message is answered (-32700, -32600)
//!   as JSON-RPC 2.0 says, and the server reads on.
//! - `confirm.rs`: confirmations bound to a plan hash and the call's arguments, which expire
//!   and work once.
//!
//! stdout is the protocol: nothing here prints to it (progress and notes go to stderr).

mod apply;
mod arguments;
pub mod backpressure;
mod confirm;
mod questions;
mod server;
mod stdio;
mod tools;

use crate::cli::{Global, McpArgs};
use crate::error::{EXIT_OK, Error, Result};

/// Serves until the client closes stdin (or the transport fails).
pub fn serve(global: &Global, args: &McpArgs) -> Result<u8> {
    crate::allocator::return_freed_memory_at_once();
    // One worker: the event loop only moves messages (each tool's work runs on a blocking
    // thread), and each thread more is its stack and its allocator's state, resident for the
    // server's life (issue 42: a call's peak within 1.1x of the CLI's doing the same).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Error::Output { path: "tokio runtime".into(), reason: e.to_string() })?;
    let server = server::Server::new(global, args);
    let inner = server.inner.clone();
    runtime.block_on(async move {
        use rmcp::ServiceExt;
        exit_on_signal(inner)?;
        let running = server
            .serve(backpressure::Bounded::new(stdio::Lines::new(tokio::io::stdin(), tokio::io::stdout())))
            .await
            .map_err(|e| Error::Output { path: "MCP stdio".into(), reason: e.to_string() })?;
        running.waiting().await.map_err(|e| Error::Output { path: "MCP stdio".into(), reason: e.to_string() })?;
        Ok(EXIT_OK)
    })
}

/// SIGINT, SIGTERM and SIGHUP end the server, as they end any stdio server; an apply that
/// runs is stopped first (no new action, the running ones finish, the lock is released), so
/// a signal never leaves `k3d cluster create` running with no lock held. Registered once for
/// the server's life: a handler registered per apply would outlive it and swallow the signals.
fn exit_on_signal(inner: std::sync::Arc<server::Inner>) -> Result<()> {
    let mut stops = crate::signals::listen()
        .map_err(|e| Error::Output { path: "signal handlers".into(), reason: e.to_string() })?;
    tokio::spawn(async move {
        let caught = stops.next().await;
        let mut told = false;
        while inner.applies.stop_all() > 0 {
            if !told {
                crate::stderrln!(
                    "note: {}: stopping the running apply; the server exits once its running actions finish",
                    caught.name
                );
                told = true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        std::process::exit(i32::from(caught.code));
    });
    Ok(())
}
