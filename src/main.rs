//! The `k3d-gpu` binary: parse arguments, run, render any error once, exit with its code.

use std::process::ExitCode;

fn main() -> ExitCode {
    k3d_gpu::cli::main()
}
