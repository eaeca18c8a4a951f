//! `k3d-gpu mcp`: a Model Context Protocol server on stdio (DESIGN.md §10), so an AI agent can
//! see the host's engines and plan work on them while only a person can make it write.
//!
//! - `server.rs`: the protocol wiring (rmcp): the tool list, dispatch, per-call timeouts,
//!   cancellation, and errors as tool results that carry the fix.
//! - `tools.rs`: the read-only tools. Each takes the CLI's inputs and calls the commands'
//!   own cores (`commands::*`), so a tool and its command cannot disagree.
//! - `apply.rs`: the one tool that writes: the plan hash checked, the person asked through
//!   the client (form elicitation), then the CLI's own gate, lock and verify.
//! - `confirm.rs`: confirmations bound to a plan hash and the call's arguments, which expire
//!   and work once.
//!
//! stdout is the protocol: nothing here prints to it (progress and notes go to stderr).

mod apply;
mod confirm;
mod server;
mod tools;

use crate::cli::{Global, McpArgs};
use crate::error::{EXIT_OK, Error, Result};

/// Serves until the client closes stdin (or the transport fails).
pub fn serve(global: &Global, args: &McpArgs) -> Result<u8> {
    let runtime = crate::commands::runtime()?;
    let server = server::Server::new(global, args);
    runtime.block_on(async move {
        use rmcp::ServiceExt;
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::Output { path: "MCP stdio".into(), reason: e.to_string() })?;
        running.waiting().await.map_err(|e| Error::Output { path: "MCP stdio".into(), reason: e.to_string() })?;
        Ok(EXIT_OK)
    })
}
