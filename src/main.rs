//! The `k3d-gpu` binary: parse arguments, run, render any error once, exit with its code.
//!
//! The top of the module graph: it alone names both `commands` and `mcp`, so neither names the
//! other's caller (`docs/ARCHITECTURE.md`, "What may import what").

use std::process::ExitCode;

fn main() -> ExitCode {
    // No wrapping: a wrapped help line breaks the hash or command a user copies from it, and
    // a terminal wraps long lines by itself without inserting newlines.
    let _ = miette::set_hook(Box::new(|_| Box::new(miette::MietteHandlerOpts::new().wrap_lines(false).build())));
    let cli = match k3d_gpu::cli::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let json = cli.command.global().json;
    k3d_gpu::commands::exit_code(k3d_gpu::commands::run(cli, k3d_gpu::mcp::serve), json)
}
