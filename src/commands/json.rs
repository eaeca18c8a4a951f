//! Diagnostics as JSON: one shape for every `--json` output that reports a problem —
//! `code`, `message`, `file`, `line`, `column` (1-based; null when the problem has no place),
//! `help` — and the document a failed command prints on stdout under `--json`
//! (`k3d-gpu.error/v1`), so a script that asked for JSON always gets one object.

use serde::Serialize;

use crate::error::Error;

pub const ERROR_SCHEMA: &str = "k3d-gpu.error/v1";

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Diagnostic {
    pub code: String,
    pub message: String,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub help: Option<String>,
}

/// A rendered-for-people diagnostic as data. The code is the diagnostic's own, else the
/// `[code]` its message ends with (compile errors), else `fallback`.
pub fn diagnostic(d: &dyn miette::Diagnostic, fallback: &str) -> Diagnostic {
    let mut message = d.to_string();
    let mut code = d.code().map(|c| c.to_string());
    if code.is_none()
        && let Some(open) = message.rfind(" [")
        && message.ends_with(']')
    {
        let inner = &message[open + 2..message.len() - 1];
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            code = Some(inner.to_string());
            message.truncate(open);
        }
    }
    let (mut file, mut line, mut column) = (None, None, None);
    if let (Some(source), Some(label)) = (d.source_code(), d.labels().and_then(|mut l| l.next())) {
        if let Ok(contents) = source.read_span(label.inner(), 0, 0) {
            file = contents.name().map(String::from);
            line = Some(contents.line() + 1);
            column = Some(contents.column() + 1);
        }
    } else if let Some(source) = d.source_code()
        && let Ok(contents) = source.read_span(&(0, 0).into(), 0, 0)
    {
        file = contents.name().map(String::from);
    }
    Diagnostic {
        code: code.unwrap_or_else(|| fallback.to_string()),
        message: crate::escape::capped(message),
        file,
        line,
        column,
        help: d.help().map(|h| crate::escape::capped(h.to_string())),
    }
}

/// The diagnostics of a failed command: each config problem, or the one error.
pub fn diagnostics(error: &Error) -> Vec<Diagnostic> {
    let kind = match error {
        Error::Usage { .. } => "usage",
        Error::Input { .. } => "input",
        Error::Unreachable { .. } => "unreachable",
        Error::Output { .. } => "output",
        Error::Invalid(_) => "config",
        Error::Refused { .. } => "refused",
        Error::CheckFailed(_) => "check-failed",
    };
    match error {
        Error::Invalid(reports) => reports.iter().map(|r| diagnostic(r.as_ref(), kind)).collect(),
        other => vec![diagnostic(other, kind)],
    }
}

/// `{"schema": "k3d-gpu.error/v1", "exit_code": N, "diagnostics": [...]}`.
pub fn error_document(error: &Error) -> Vec<u8> {
    #[derive(Serialize)]
    struct Doc {
        schema: &'static str,
        exit_code: u8,
        diagnostics: Vec<Diagnostic>,
    }
    crate::canonical::to_bytes(&Doc {
        schema: ERROR_SCHEMA,
        exit_code: error.exit_code(),
        diagnostics: diagnostics(error),
    })
}
