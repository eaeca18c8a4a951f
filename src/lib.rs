//! k3d-gpu: a declarative compiler for GPU-ready local Kubernetes (k3d).
//!
//! The pipeline and where each stage lives are in `docs/ARCHITECTURE.md`. In short:
//! [`host`] and [`detect`] read a machine, [`facts`] turns what was read into the facts/v1
//! document (pure), [`parse`] holds the pure text parsers, [`cli`] and [`commands`] are the
//! edge that prints and exits.

/// `eprintln!` that cannot panic: the line is written to stderr, and a failed write is
/// dropped. std's `eprintln!` panics when the write fails (stderr a pipe whose reader has
/// gone, or a full or failing file), and the command would then exit 101 instead of with its
/// own status. The crate writes to stderr only through this and [`stderr!`]
/// (`tests/house_rules.rs`).
#[macro_export]
macro_rules! stderrln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}

/// `eprint!` that cannot panic, as [`stderrln!`].
#[macro_export]
macro_rules! stderr {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::write!(::std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod allocator;
pub mod apply;
pub mod audit;
pub mod canonical;
pub mod catalog;
pub mod cli;
pub mod commands;
pub mod compile;
pub mod component_files;
pub mod config;
pub mod detect;
pub mod doctor;
pub mod error;
pub mod escape;
pub mod facts;
pub mod host;
pub mod host_setup;
pub mod hwdb;
pub mod images;
pub mod input_file;
pub mod kube_kinds;
pub mod logs;
pub mod mcp;
pub mod node_check;
pub mod node_image;
pub mod observe;
pub mod observed;
pub mod output_file;
pub mod parse;
pub mod plan;
pub mod quantity;
pub mod report;
pub mod secrets;
pub mod shell;
mod signals;
pub mod smoke;
pub mod suggest;
pub mod table;
