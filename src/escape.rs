//! Text from untrusted places (manifests, observed documents, node labels, os-release, Docker
//! labels, the user's files) on its way to a terminal. A control character there is an
//! instruction to the terminal, not text: an escape sequence in an object name could move the
//! cursor and forge a plan line, and a newline starts a line that reads as the tool's own
//! (`pass …`, `apply: curl … | sudo sh`). JSON output needs nothing, serde_json escapes control
//! characters itself.
//!
//! The rule (docs/ARCHITECTURE.md, "Untrusted input"): a value read from outside is an
//! [`Untrusted`]. Its only `Display` is [`one_line`], and only `crate::shell` turns it into a
//! shell word, so a reader that produces one cannot be printed raw by a command that forgets.
//! A whole document this tool assembled goes through [`assembled`] last, which escapes control
//! characters but keeps the document's own line breaks: it is a guard, never the escaping of
//! a value (a value's newline would survive it).

use std::borrow::Cow;
use std::fmt;

/// Text that came from outside this program: a host file, a facts or plan file, an API or
/// engine answer, a pod's log, a registry's reply. It shows only as one escaped line
/// ([`one_line`]), `{:?}` as [`quoted`]; serialized it is the plain string (JSON escapes).
/// [`Untrusted::raw`] is the text as it came, for comparing and parsing, never for output.
#[derive(
    Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Untrusted(String);

impl Untrusted {
    pub fn new(text: impl Into<String>) -> Untrusted {
        Untrusted(text.into())
    }

    /// The text as it came: to compare, parse or send back (a pod's node name in its spec);
    /// never to print (`Display` is for that), never into a command (`crate::shell` is).
    pub fn raw(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Untrusted {
    fn from(text: String) -> Untrusted {
        Untrusted(text)
    }
}

// Comparing with a literal reads the text without showing it: no `raw()` at every test.
impl PartialEq<str> for Untrusted {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Untrusted {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<&str> for Untrusted {
    fn from(text: &str) -> Untrusted {
        Untrusted(text.to_string())
    }
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&one_line(&self.0))
    }
}

impl fmt::Debug for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&quoted(&self.0))
    }
}

/// A character the terminal would act on rather than show: C0 and C1 controls, DEL, and the
/// bidirectional overrides and isolates that reorder what a reader sees ("Trojan Source").
pub fn is_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character written as a visible escape (`\x1b`, `\u{202e}`);
/// newlines and tabs stay, everything else is unchanged. Borrowed when there is nothing to do.
/// Private: a value is escaped with [`one_line`] (or is an [`Untrusted`]); a document the
/// tool assembled goes through [`assembled`].
fn controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_control(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

/// Printable ASCII only (space to `~`): nothing [`one_line`] escapes, found a byte at a time
/// instead of decoding characters, for the many plain names and numbers read from a host.
fn is_printable_ascii(text: &str) -> bool {
    text.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// A character that starts a line for a reader: a newline, and Unicode's line and paragraph
/// separators, which editors and some terminals show as a line break.
fn breaks_line(c: char) -> bool {
    matches!(c, '\n' | '\u{2028}' | '\u{2029}')
}

/// Like [`assembled`], for one line: a newline, a line or paragraph separator or a tab is
/// escaped too, so a name cannot start a line of its own.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if is_printable_ascii(text) || !text.chars().any(|c| is_control(c) || breaks_line(c) || c == '\t') {
        return Cow::Borrowed(text);
    }
    let escaped: String = text
        .chars()
        .map(|c| match c {
            '\n' | '\t' => format!("\\x{:02x}", c as u32),
            '\u{2028}' | '\u{2029}' => format!("\\u{{{:x}}}", c as u32),
            _ => c.to_string(),
        })
        .collect();
    Cow::Owned(controls(&escaped).into_owned())
}

/// A document this tool assembled line by line (a table, a plan, a report), on its way to the
/// terminal: control characters escaped, its own line breaks kept. Every outside value in it
/// was already made one line ([`Untrusted`]'s `Display`, [`one_line`]); this is the last guard
/// against a control character, not the escaping of a value.
pub fn assembled(document: &str) -> Cow<'_, str> {
    controls(document)
}

/// The most of one value a message quotes, and the most of a message kept: a 30 MiB label
/// value must not become 30 MiB of diagnostics.
pub const MAX_QUOTE: usize = 200;
pub const MAX_MESSAGE: usize = 1000;

/// A value quoted for a message, as Rust's `{:?}` would, which escapes every control
/// character; cut at [`MAX_QUOTE`] characters.
pub fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTE) {
        None => format!("{text:?}"),
        Some((at, _)) => format!("{:?}… ({} bytes)", &text[..at], text.len()),
    }
}

/// A message cut at [`MAX_MESSAGE`] characters.
pub fn capped(message: String) -> String {
    match message.char_indices().nth(MAX_MESSAGE) {
        None => message,
        Some((at, _)) => format!("{}… (cut, {} bytes in all)", &message[..at], message.len()),
    }
}

/// Most bytes of source a diagnostic shows around a span (the lines it touches and one on
/// either side). Past that the diagnostic names the line and column instead of quoting.
pub const MAX_SNIPPET: usize = 8 << 10;

/// Whether the lines miette would show for `span` are small enough to echo.
pub fn snippet_fits(text: &str, span: &std::ops::Range<usize>) -> bool {
    let start = span.start.min(text.len());
    let end = span.end.clamp(start, text.len());
    let bytes = text.as_bytes();
    let line_start = |at: usize| bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line_end = |at: usize| bytes[at..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| at + p);
    let first = line_start(start);
    let from = if first > 0 { line_start(first - 1) } else { 0 };
    let last = line_end(end);
    let to = if last < bytes.len() { line_end(last + 1) } else { last };
    to - from <= MAX_SNIPPET
}

/// 1-based line and column (in characters) of a byte offset, for a diagnostic that does not
/// quote its source.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Source text for a diagnostic snippet: each control character replaced by as many `?` as it
/// has bytes, so the byte offsets of the spans into it stay right.
pub fn source(text: &str) -> String {
    if !text.chars().any(is_control) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_control(c) {
            out.extend(std::iter::repeat_n('?', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

/// A rendered diagnostic: miette's own colours (SGR sequences, `ESC [ digits ; m`) stay, every
/// other control character is escaped. Anything quoted from input was escaped before
/// rendering ([`source`], [`quoted`]); this catches what a message carried through unquoted.
pub fn rendered_diagnostic(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| is_control(c)) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let sgr = tail.strip_prefix("\x1b[").and_then(|t| {
            let params = t.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            (t[params..].starts_with('m')).then_some(2 + params + 1)
        });
        match sgr {
            Some(len) => {
                out.push_str(&tail[..len]);
                rest = &tail[len..];
            }
            None => {
                let c = tail.chars().next().unwrap_or_default();
                out.push_str(&controls(&c.to_string()));
                rest = &tail[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(assembled("plain\ttext\n"), "plain\ttext\n");
        assert!(matches!(assembled("plain"), Cow::Borrowed(_)));
        assert_eq!(assembled("a\x1b[2Kb"), "a\\x1b[2Kb");
        assert_eq!(assembled("\u{9b}\u{7f}\r"), "\\x9b\\x7f\\x0d");
        assert_eq!(assembled("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(one_line("a\nb"), "a\\x0ab");
        assert_eq!(one_line("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c", "line and paragraph separators too");
        assert_eq!(quoted("\x1b"), "\"\\u{1b}\"");
    }

    #[test]
    fn outside_text_shows_as_one_line_only() {
        let forged = Untrusted::new("gpu0\npass forged\x1b]52;c;aGk=\x07\u{2028}x\u{9b}");
        let shown = format!("name {forged}");
        assert_eq!(shown, "name gpu0\\x0apass forged\\x1b]52;c;aGk=\\x07\\u{2028}x\\x9b");
        assert_eq!(shown.lines().count(), 1);
        assert_eq!(format!("{forged:?}"), quoted(forged.raw()));
        assert_eq!(serde_json::to_string(&forged).unwrap(), serde_json::to_string(forged.raw()).unwrap());
        assert_eq!(forged.raw().lines().count(), 2, "raw is the text as it came");
    }

    #[test]
    fn diagnostics_keep_their_colours_only() {
        let text = "\x1b[31merror\x1b[0m: name \x1b[2J\x1b[1A forged\u{9b}";
        assert_eq!(rendered_diagnostic(text), "\x1b[31merror\x1b[0m: name \\x1b[2J\\x1b[1A forged\\x9b");
    }

    #[test]
    fn long_values_and_lines_are_not_echoed_whole() {
        let huge = "x".repeat(MAX_SNIPPET * 4);
        assert!(quoted(&huge).len() < MAX_QUOTE + 40);
        assert!(capped(huge.clone()).len() < MAX_MESSAGE + 40);
        let text = format!("a = 1\nb = \"{huge}\"\nc = 2\n");
        assert!(!snippet_fits(&text, &(0..1)), "line 1 is shown with its neighbour");
        let short = "a = 1\nb = 2\nc = 3\n";
        assert!(snippet_fits(short, &(6..11)));
        assert_eq!(line_column(short, 8), (2, 3));
    }

    #[test]
    fn source_keeps_byte_offsets() {
        for text in ["a\x1b[2Kb", "x\u{9b}y\u{202e}z\r\n", "plain\n"] {
            let clean = source(text);
            assert_eq!(clean.len(), text.len());
            assert!(!clean.chars().any(is_control));
        }
    }
}
