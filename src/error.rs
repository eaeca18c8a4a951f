//! Errors that reach the user, and the exit codes of the CLI contract.
//!
//! 0 success; 1 a check failed / config invalid / plan refused / apply failed; 2 bad usage or
//! unreadable input — a Docker engine or API server that does not answer is input that cannot
//! be read. Every error is a miette diagnostic with a help line, rendered once by
//! `commands::exit_code`. The exit code and every hint that depends on the kind of failure
//! are chosen by the variant, never by the message's text.

use miette::Diagnostic;

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    #[error("{message}")]
    Usage {
        message: String,
        #[help]
        help: Option<String>,
    },

    #[error("cannot read {what} {path}: {reason}")]
    Input {
        what: &'static str,
        path: String,
        reason: String,
        #[help]
        help: Option<String>,
    },

    #[error("cannot write {path}: {reason}")]
    Output { path: String, reason: String },

    /// Docker or the API server did not answer: the world this command reads is unreachable
    /// (a plan can say how to go on without it: `--offline`).
    #[error("{message}")]
    Unreachable {
        message: String,
        #[help]
        help: Option<String>,
    },

    /// The config or a component is invalid: one diagnostic per problem, each pointing at
    /// its source.
    #[error("{} problem(s) in the configuration", .0.len())]
    Invalid(Vec<miette::Report>),

    /// The gate said no (a stale plan, a replacement without consent, another apply running).
    #[error("{message}")]
    Refused {
        message: String,
        #[help]
        help: Option<String>,
    },

    /// A check the command exists to make failed; the report was already printed.
    #[error("{0}")]
    CheckFailed(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage { .. } | Error::Input { .. } | Error::Unreachable { .. } => EXIT_USAGE,
            Error::Output { .. } | Error::CheckFailed(_) | Error::Invalid(_) | Error::Refused { .. } => EXIT_FAILED,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
