//! The `k3d-gpu` binary: parse arguments, run, render any error once, exit with its code.
//!
//! The top of the module graph: it alone names both `commands` and `mcp`, so neither names the
//! other's caller (`docs/ARCHITECTURE.md`, "What may import what").
//!
//! It is its own C `main` (`#![no_main]`), not std's. Before calling `main`, std finds the
//! main thread's stack guard by parsing `/proc/self/maps` and gives the thread an alternate
//! signal stack, all to name a stack overflow in its message: 0.1 M instructions and a dozen
//! system calls, a twentieth of a `facts` (issue 42, target 2). What of std's start-up and
//! exit this program relies on is done here instead: SIGPIPE ignored, closed standard
//! descriptors opened on `/dev/null`, a panic turned into exit code 101, stdout flushed.
//! The arguments are std's as ever (glibc hands them to std before any `main`). A stack
//! overflow now ends in a plain SIGSEGV, not std's named one: an abnormal end either way.

#![no_main]

use std::ffi::{c_char, c_int};

#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    ignore_sigpipe();
    open_closed_standard_descriptors();
    // As std's start-up: a panic's message is printed by the hook, and the exit code is 101.
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    // std flushes stdout after its `main` returns; C's `exit` knows nothing of Rust's buffer.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    c_int::from(code)
}

fn run() -> u8 {
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

/// A write to a closed pipe fails with EPIPE, which output handles, instead of killing the
/// process with SIGPIPE (std's default too): `k3d-gpu plan | head -1` still exits with the
/// plan's code.
fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN runs no code of ours in a handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Descriptors 0, 1 and 2 that the caller left closed are opened on `/dev/null`, as std's
/// start-up does: otherwise the first file the program opens would take one of those numbers,
/// and what it prints to stdout or stderr would be written into that file.
fn open_closed_standard_descriptors() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: poll reads and writes the three entries of `fds`, and waits for nothing (0 ms).
    while unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } == -1 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        // poll itself refused (a descriptor limit below 3): ask each descriptor instead.
        for pfd in &mut fds {
            // SAFETY: F_GETFD only reads the descriptor's flags.
            let closed = unsafe { libc::fcntl(pfd.fd, libc::F_GETFD) } == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
            pfd.revents = if closed { libc::POLLNVAL } else { 0 };
        }
        break;
    }
    for pfd in fds {
        // In order, so each open takes the lowest free number: the closed one.
        // SAFETY: open of a constant, NUL-terminated path; the descriptor is left open for good.
        if pfd.revents & libc::POLLNVAL != 0 && unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } == -1 {
            std::process::abort();
        }
    }
}
