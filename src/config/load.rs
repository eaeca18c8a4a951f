//! Parsing `k3dgpu.toml` into [`Config`], with errors that point at the span and say what
//! would have been right.

use miette::{Diagnostic, NamedSource, SourceSpan};

use super::Config;

/// A config problem, shown with the offending text underlined.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
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
        // The quoted lines may hold a URI with a password (a video stream's): never shown.
        let source =
            if span.is_some() { crate::escape::source(&crate::secrets::blank_passwords(text)) } else { String::new() };
        ConfigError {
            message,
            source_code: NamedSource::new(name, source),
            span: span.map(|r| SourceSpan::from(r.start..r.end)),
            label: label.into(),
            help: help.map(crate::escape::capped),
        }
    }
}

/// At most this many errors from one file: after the first few, the rest are usually echoes.
const MAX_ERRORS: usize = 10;

/// Parses config text. `name` is what diagnostics call the file. On error, every problem
/// found (up to [`MAX_ERRORS`]), in file order.
pub fn load_str(name: &str, text: &str) -> Result<Config, Box<ConfigError>> {
    load_all(name, text).map_err(|mut errors| Box::new(errors.remove(0)))
}

/// Like [`load_str`], with every error: after each one, the lines it is on are blanked and
/// the text parsed again, as long as those lines are whole `key = value` lines (so blanking
/// them cannot create a syntax error of its own).
pub fn load_all(name: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
    // The schema explains an error (which section a misplaced key belongs in): built only
    // then, as building it and parsing it back cost a valid config's load 15-22 % of the
    // instructions of a whole `validate`.
    let mut schema: Option<serde_json::Value> = None;
    let mut errors = Vec::new();
    let mut current = text.to_string();
    loop {
        let e = match toml::from_str::<Config>(&current) {
            Ok(config) if errors.is_empty() => {
                // Which keys fit the provider: known only once the whole file parsed.
                let provider = super::fleet::check(&config, name, text);
                return if provider.is_empty() { Ok(config) } else { Err(provider) };
            }
            Ok(_) => break,
            Err(e) => e,
        };
        let span = e.span();
        let path = span.as_ref().map(|s| super::path_at(&current, s.start)).unwrap_or_default();
        let schema =
            schema.get_or_insert_with(|| serde_json::from_slice(&super::docs::schema_bytes()).unwrap_or_default());
        let (headline, label, help) = explain(e.message().trim(), &path, schema);
        errors.push(ConfigError::at(name, text, span.clone(), headline, label, help));
        let Some(lines) = span.and_then(|s| whole_lines(&current, s)) else { break };
        if errors.len() == MAX_ERRORS {
            break;
        }
        current.replace_range(lines.clone(), &" ".repeat(lines.len()));
    }
    // toml reports in the order of the types' fields; the user reads the file top down.
    errors.sort_by_key(|e| e.span.map_or(usize::MAX, |s| s.offset()));
    Err(errors)
}

/// The byte range of the lines `span` is on, if they are complete `key = value` lines
/// (parse on their own); `None` for a table header or part of a multi-line value.
fn whole_lines(text: &str, span: std::ops::Range<usize>) -> Option<std::ops::Range<usize>> {
    let start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let end = text[span.end.min(text.len())..].find('\n').map_or(text.len(), |i| span.end + i);
    let lines = &text[start..end];
    let first = lines.trim_start();
    (!first.starts_with('[') && lines.contains('=') && toml::from_str::<toml::Table>(lines).is_ok())
        .then_some(start..end)
}

/// Turns serde/toml's message into a headline, a label for the span and a help line: "did
/// you mean" when a known name is close, the section a misplaced key belongs to, and what a
/// value must be in words, never a Rust type.
fn explain(message: &str, path: &[String], schema: &serde_json::Value) -> (String, String, Option<String>) {
    for (prefix, what) in [("unknown field `", "key"), ("unknown variant `", "value")] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let (name, rest) = rest.split_once('`').unwrap_or((rest, ""));
            let allowed: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
            let suggestion = crate::suggest::closest(name, allowed.iter().copied()).or_else(|| {
                SYNONYMS.iter().find(|(from, to)| *from == name && allowed.contains(to)).map(|(_, to)| *to)
            });
            let mut help = String::new();
            let elsewhere = if what == "key" { sections_with_key(schema, name) } else { Vec::new() };
            let here = path.first().map(String::as_str);
            if !elsewhere.is_empty() && suggestion.is_none() {
                let there: Vec<String> = elsewhere.iter().map(|s| format!("[{s}]")).collect();
                help.push_str(&format!(
                    "`{name}` belongs in {}{}; move it there. ",
                    there.join(" or "),
                    here.map(|h| format!(", not [{h}]")).unwrap_or_default()
                ));
            }
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
    let node = schema_at(schema, path);
    for (prefix, headline, label) in
        [("invalid type: ", "wrong type", "wrong type"), ("invalid value: ", "invalid value", "here")]
    {
        if let Some(rest) = message.strip_prefix(prefix) {
            let (found, expected) = rest.rsplit_once(", expected ").unwrap_or((rest, ""));
            // An element of a list is about the list's items, not the list.
            let node = match node {
                Some(n) if n["type"] == "array" && !found.starts_with("map") && !found.starts_with("string") => {
                    Some(&n["items"])
                }
                other => other,
            };
            let expected = node.map(|n| expected_words(n, schema)).unwrap_or_else(|| rust_words(expected));
            let mut help = "see `k3d-gpu schema` or docs/config.md".to_string();
            if expected == "a list" && found.starts_with("map") {
                let key = path.last().map(String::as_str).unwrap_or("it");
                help = format!(
                    "`{key}` is a list: write `[[{key}]]` (double brackets) once per entry, or `{key} = [...]`"
                );
            }
            let key = if path.is_empty() { String::new() } else { format!("{}: ", path.join(".")) };
            return (
                format!("{headline}: {key}found {}, expected {expected}", found_words(found)),
                label.into(),
                Some(help),
            );
        }
    }
    // toml's own terse messages ("wanted string or table") are still about one key's value;
    // our deserializers' messages (selection.rs) already say what was expected.
    if let Some(node) = node.filter(|_| message.starts_with("wanted ")) {
        return (
            format!("invalid value: {}: expected {}", path.join("."), expected_words(node, schema)),
            "here".into(),
            Some("see `k3d-gpu schema` or docs/config.md".into()),
        );
    }
    (message.to_string(), "here".into(), None)
}

/// Names people use for a value the config spells otherwise, when "did you mean" (which
/// goes by spelling) cannot see the link.
const SYNONYMS: &[(&str, &str)] = &[("gaudi", "hpu"), ("hpu", "gaudi")];

/// The sections whose tables have a key `name`.
fn sections_with_key(schema: &serde_json::Value, name: &str) -> Vec<String> {
    let defs = &schema["$defs"];
    super::docs::SECTIONS
        .iter()
        .filter(|section| {
            let prop = &schema["properties"][*section];
            super::docs::Shape::of(prop, defs).body(prop, defs).is_some_and(|b| b["properties"].get(name).is_some())
        })
        .map(|s| s.to_string())
        .collect()
}

/// The schema of the value at `path`, following sections' shapes.
fn schema_at<'a>(schema: &'a serde_json::Value, path: &[String]) -> Option<&'a serde_json::Value> {
    let defs = &schema["$defs"];
    let (section, rest) = path.split_first()?;
    let prop = schema["properties"].get(section)?;
    let shape = super::docs::Shape::of(prop, defs);
    if rest.is_empty() {
        return Some(prop);
    }
    let mut node = shape.body(prop, defs)?;
    // A table of tables' first key is the entry's name, not a key of the entry.
    let keys = if shape == super::docs::Shape::Map { &rest[1..] } else { rest };
    for key in keys {
        let here = super::docs::resolve(node, defs).unwrap_or(node);
        node = match here["properties"].get(key.as_str()) {
            Some(n) => n,
            // A free-form table (`node_labels`): every value has one schema.
            None => here["additionalProperties"].as_object().map(|_| &here["additionalProperties"])?,
        };
    }
    Some(node)
}

/// What a value must be, from its schema, in words.
fn expected_words(node: &serde_json::Value, schema: &serde_json::Value) -> String {
    let defs = &schema["$defs"];
    let node = super::docs::resolve(node, defs).unwrap_or(node);
    let types: Vec<&str> = match &node["type"] {
        serde_json::Value::String(t) => vec![t.as_str()],
        serde_json::Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).filter(|t| *t != "null").collect(),
        _ => Vec::new(),
    };
    if let Some(options) = node["anyOf"].as_array().or_else(|| node["oneOf"].as_array()) {
        let words: Vec<String> =
            options.iter().filter(|o| o["type"] != "null").map(|o| expected_words(o, schema)).collect();
        return words.join(" or ");
    }
    if let Some(values) = node["enum"].as_array() {
        return format!(
            "one of {}",
            values.iter().filter_map(|v| v.as_str()).map(|v| format!("\"{v}\"")).collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(c) = node["const"].as_str() {
        return format!("\"{c}\"");
    }
    match types.first().copied() {
        Some("integer") => {
            let (min, max) = (node["minimum"].as_u64(), node["maximum"].as_u64());
            match (min, max) {
                (Some(a), Some(b)) => format!("a whole number from {a} to {b}"),
                (Some(a), None) => format!("a whole number, at least {a}"),
                (None, Some(b)) => format!("a whole number up to {b}"),
                (None, None) => "a whole number".into(),
            }
        }
        Some("string") => "text in quotes".into(),
        Some("boolean") => "true or false".into(),
        Some("array") => "a list".into(),
        Some("object") => "a table".into(),
        _ => "what docs/config.md shows".into(),
    }
}

/// serde's Rust-flavoured expectations, in words, where the schema has nothing better.
fn rust_words(expected: &str) -> String {
    match expected {
        "u8" => "a whole number from 0 to 255".into(),
        "u16" => "a whole number from 0 to 65535".into(),
        "u32" | "u64" | "usize" => "a whole number, 0 or more".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "a sequence" => "a list".into(),
        "a map" | "struct" => "a table".into(),
        "a boolean" => "true or false".into(),
        other => other.to_string(),
    }
}

/// serde's description of what was found (`string "one"`, `map`, `integer \`5\``) in words.
fn found_words(found: &str) -> String {
    if let Some(rest) = found.strip_prefix("string ") {
        return format!("text {rest}");
    }
    match found {
        "map" => "a table".into(),
        "sequence" => "a list".into(),
        other => other.replace('`', ""),
    }
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
