//! Parsing `k3dgpu.toml` into [`Config`], with errors that point at the span and say what
//! would have been right.

use miette::{Diagnostic, NamedSource, SourceSpan};

use super::Config;

/// A config problem, shown with the offending text underlined.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(k3d_gpu::config))]
pub struct ConfigError {
    pub message: String,
    #[source_code]
    pub source_code: NamedSource<String>,
    #[label("{label}")]
    pub span: Option<SourceSpan>,
    pub label: String,
    #[help]
    pub help: Option<String>,
}

impl ConfigError {
    pub fn at(
        name: &str,
        text: &str,
        span: Option<std::ops::Range<usize>>,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> ConfigError {
        let mut message = crate::escape::capped(message.into());
        // A span on a huge line (a 30 MiB value) is named by line and column, not quoted.
        let span = match span {
            Some(r) if !crate::escape::snippet_fits(text, &r) => {
                let (line, column) = crate::escape::line_column(text, r.start);
                message.push_str(&format!(" (line {line}, column {column})"));
                None
            }
            other => other,
        };
        let source = if span.is_some() { crate::escape::source(text) } else { String::new() };
        ConfigError {
            message,
            source_code: NamedSource::new(name, source),
            span: span.map(|r| SourceSpan::from(r.start..r.end)),
            label: label.into(),
            help: help.map(crate::escape::capped),
        }
    }
}

/// Parses config text. `name` is what diagnostics call the file.
pub fn load_str(name: &str, text: &str) -> Result<Config, Box<ConfigError>> {
    toml::from_str::<Config>(text).map_err(|e| {
        let message = e.message().trim().to_string();
        let (headline, label, help) = explain(&message);
        Box::new(ConfigError::at(name, text, e.span(), headline, label, help))
    })
}

/// Turns serde/toml's message into a headline, a label for the span and a help line with
/// "did you mean" when a known name is close.
fn explain(message: &str) -> (String, String, Option<String>) {
    for (prefix, what) in [("unknown field `", "key"), ("unknown variant `", "value")] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let (name, rest) = rest.split_once('`').unwrap_or((rest, ""));
            let allowed: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
            let suggestion = crate::suggest::closest(name, allowed.iter().copied());
            let mut help = String::new();
            if let Some(s) = suggestion {
                help.push_str(&format!("did you mean `{s}`? "));
            }
            if allowed.is_empty() {
                help.push_str(&format!("this table takes no `{name}`"));
            } else {
                help.push_str(&format!("allowed: {}", allowed.join(", ")));
            }
            return (format!("unknown {what} `{name}`"), format!("unknown {what}"), Some(help));
        }
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        return (
            format!("wrong type: {rest}"),
            "wrong type".into(),
            Some("see `k3d-gpu schema` or docs/config.md".into()),
        );
    }
    (message.to_string(), "here".into(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_the_default_config() {
        assert_eq!(load_str("k3dgpu.toml", "").unwrap(), Config::default());
    }

    #[test]
    fn unknown_keys_suggest_the_closest() {
        let err = load_str("k3dgpu.toml", "[sharing]\nallocaton = \"packed\"\n").unwrap_err();
        assert_eq!(err.message, "unknown key `allocaton`");
        assert!(err.help.as_deref().unwrap().starts_with("did you mean `allocation`?"), "{:?}", err.help);
        assert_eq!(err.span, Some(SourceSpan::from(10..19)));
    }

    #[test]
    fn unknown_values_list_the_allowed_ones() {
        let err = load_str("k3dgpu.toml", "[sharing]\nallocation = \"packd\"\n").unwrap_err();
        assert_eq!(err.message, "unknown value `packd`");
        assert_eq!(err.help.as_deref(), Some("did you mean `packed`? allowed: balanced, packed, none"));
    }
}
