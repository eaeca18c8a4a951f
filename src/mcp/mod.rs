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
    one_malloc_arena();
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

/// All threads allocate from one glibc arena. By default each thread that allocates gets an
/// arena of its own: a tool's work on a blocking thread then fills a second heap beside the
/// event loop's, and what either frees stays resident for its own thread's reuse (0.9 MB
/// more at the peak of a 10-node plan call). The server's threads seldom allocate at once,
/// so sharing one arena costs no waiting worth measuring. Before any thread starts.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of the allocator, under its own lock; called before
    // the server starts threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Gives the pages of memory a tool's work freed back to the system, once it is done. glibc
/// keeps freed memory resident for reuse, but an answer of several megabytes is given fresh
/// pages of its own (large blocks are mapped, not carved from what was freed): after a plan
/// of 20k objects the freed tree of them stayed resident beside the answer, 113 MB at the
/// peak against the CLI's 93 for the same plan, where 96 MB remain once they are returned.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks; it takes
    // and returns nothing of ours.
    unsafe {
        libc::malloc_trim(0);
    }
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
