//! A KDL document reduced to what the component reader checks: node names, arguments and
//! properties (string values), children, and the spans diagnostics underline. `build.rs`
//! includes this file to parse the shipped `stdlib/*.kdl` once at build time (a file that is
//! not KDL fails the build) and embeds the tree as JSON; a component file read from disk is
//! parsed by the same [`parse`] at run time. Either way `kdl_file.rs` reads the same tree.

use serde::{Deserialize, Serialize};

/// `(offset, length)` in the file's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span(pub usize, pub usize);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub name_span: Span,
    pub span: Span,
    pub entries: Vec<Entry>,
    /// `None`: no `{ … }` block.
    pub children: Option<Vec<Node>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// A property's name and its span; `None` for an argument.
    pub name: Option<(String, Span)>,
    /// The value when it is a string (the reader takes strings only).
    pub value: Option<String>,
    pub span: Span,
}

impl Node {
    /// The value of property `key` (the last one given, as KDL reads it).
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().rev().find(|e| e.name.as_ref().is_some_and(|(n, _)| n == key))
    }

    /// The arguments (entries without a name), in order.
    pub fn args(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.name.is_none())
    }
}

/// A kdl (miette) span as ours; a macro, so build.rs need not name miette's type.
macro_rules! span {
    ($s:expr) => {{
        let s = $s;
        Span(s.offset(), s.len())
    }};
}

fn node(n: &kdl::KdlNode) -> Node {
    Node {
        name: n.name().value().to_string(),
        name_span: span!(n.name().span()),
        span: span!(n.span()),
        entries: n
            .entries()
            .iter()
            .map(|e| Entry {
                name: e.name().map(|k| (k.value().to_string(), span!(k.span()))),
                value: e.value().as_string().map(str::to_string),
                span: span!(e.span()),
            })
            .collect(),
        children: n.children().map(|d| d.nodes().iter().map(node).collect()),
    }
}

/// Parses KDL v2 text; the error is the span of the first problem.
pub fn parse(text: &str) -> Result<Vec<Node>, Span> {
    let doc: kdl::KdlDocument =
        text.parse().map_err(|e: kdl::KdlError| e.diagnostics.first().map(|d| span!(d.span)).unwrap_or(Span(0, 0)))?;
    Ok(doc.nodes().iter().map(node).collect())
}
