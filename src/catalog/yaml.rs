//! A manifest's YAML into Kubernetes objects, and what the catalog reads off them (images,
//! kinds, the bytes its digest hashes), using serde-saphyr and serde_json and nothing else of
//! the crate: `build.rs` includes this file to turn every shipped `share/*.yml` into compact
//! JSON at build time (a shipped manifest that fails here fails the build), and
//! `manifest.rs` uses it for manifests read from disk, so both read YAML the same way.

use serde_json::Value;

/// Why a manifest's text is not a list of Kubernetes objects. `name` is how messages call
/// the manifest; `document` counts from 1. (A plain enum: build.rs includes this file without
/// the crate's dependencies.)
#[derive(Debug, Clone, PartialEq)]
pub enum Invalid {
    /// The parser's message can quote the text; a file that is not YAML is never echoed, only
    /// where it stopped (line, column).
    NotYaml {
        name: String,
        at: Option<(u64, u64)>,
    },
    MissingFields {
        name: String,
        document: usize,
    },
    BadName {
        name: String,
        document: usize,
        field: &'static str,
        value: String,
    },
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::NotYaml { name, at: None } => write!(f, "{name} is not valid YAML"),
            Invalid::NotYaml { name, at: Some((line, column)) } => {
                write!(f, "{name} is not valid YAML (line {line}, column {column})")
            }
            Invalid::MissingFields { name, document } => {
                write!(f, "{name}, document {document}: a Kubernetes object needs apiVersion, kind and metadata.name")
            }
            Invalid::BadName { name, document, field, value } => {
                write!(f, "{name}, document {document}: metadata.{field} {value:?} is not a valid name")
            }
        }
    }
}

impl std::error::Error for Invalid {}

/// The documents of a manifest (`name` is how messages call it); empty documents are skipped;
/// each object needs `apiVersion`, `kind` and `metadata.name`, and a name or namespace is a
/// single path segment.
pub fn objects(name: &str, text: &str) -> Result<Vec<Value>, Invalid> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| Invalid::NotYaml { name: name.to_string(), at: e.location().map(|l| (l.line(), l.column())) })?;
    let mut objects = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let field = |path: &[&str]| path.iter().try_fold(&doc, |v, k| v.get(k)).and_then(|v| v.as_str()).is_some();
        if !field(&["apiVersion"]) || !field(&["kind"]) || !field(&["metadata", "name"]) {
            return Err(Invalid::MissingFields { name: name.to_string(), document: i + 1 });
        }
        for field in ["name", "namespace"] {
            if let Some(value) = doc["metadata"][field].as_str()
                && (value.is_empty() || value.contains('/'))
            {
                let value = value.to_string();
                return Err(Invalid::BadName { name: name.to_string(), document: i + 1, field, value });
            }
        }
        objects.push(doc);
    }
    Ok(objects)
}

/// The line (1-based) where each non-empty document of a multi-document YAML text starts its
/// content, in order: the place a message about the n-th object points at. `None` when the
/// count disagrees with `objects` (a document that is only `null`, say), rather than a wrong
/// line.
pub fn document_lines(text: &str, objects: usize) -> Option<Vec<usize>> {
    let mut starts = Vec::new();
    let mut current: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed.starts_with("--- ") || trimmed == "..." {
            starts.extend(current.take());
            continue;
        }
        let content = line.trim_start();
        if current.is_none() && !content.is_empty() && !content.starts_with('#') {
            current = Some(i + 1);
        }
    }
    starts.extend(current);
    (starts.len() == objects).then_some(starts)
}

/// The objects as one compact JSON array: what the shipped catalog embeds and what a
/// manifest's digest hashes (serde_json's maps are sorted, so the bytes are canonical).
pub fn encode(objects: &[Value]) -> String {
    serde_json::to_string(objects).expect("a JSON value always serialises")
}

/// Every `image` value in the objects, sorted, once each.
pub fn images(objects: &[Value]) -> Vec<String> {
    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "image" {
                        if let Some(s) = v.as_str() {
                            out.push(s.to_string());
                        }
                    } else {
                        collect(v, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    objects.iter().for_each(|o| collect(o, &mut out));
    out.sort();
    out.dedup();
    out
}

/// `(group, kind, plural, namespaced)` of every CustomResourceDefinition among the objects,
/// sorted, once each: the resource its custom resources are served under
/// (`spec.names.plural`), which no rule of English gives (Chaos Mesh's `PodChaos` is
/// `podchaos`), and whether they live in a namespace (`spec.scope`, `Namespaced` or `Cluster`;
/// a CRD with neither declares no usable resource and is left out).
pub fn plurals(objects: &[Value]) -> Vec<(String, String, String, bool)> {
    let mut out: Vec<(String, String, String, bool)> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| {
            let spec = &o["spec"];
            let text = |v: &Value| v.as_str().map(str::to_string);
            let namespaced = match spec["scope"].as_str()? {
                "Namespaced" => true,
                "Cluster" => false,
                _ => return None,
            };
            Some((text(&spec["group"])?, text(&spec["names"]["kind"])?, text(&spec["names"]["plural"])?, namespaced))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `(apiVersion, kind)` of every object, sorted, once each.
pub fn kinds(objects: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = objects
        .iter()
        .filter_map(|o| Some((o["apiVersion"].as_str()?.to_string(), o["kind"].as_str()?.to_string())))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_bad_manifest_is_its_own_variant() {
        let name = "m.yml".to_string();
        assert_eq!(objects("m.yml", "a: [\n"), Err(Invalid::NotYaml { name: name.clone(), at: Some((1, 4)) }));
        assert_eq!(
            objects("m.yml", "apiVersion: v1\nkind: X\nmetadata: {name: a}\n---\nkind: X\n"),
            Err(Invalid::MissingFields { name: name.clone(), document: 2 })
        );
        let bad = objects("m.yml", "apiVersion: v1\nkind: X\nmetadata: {name: a/b}\n").unwrap_err();
        assert_eq!(bad, Invalid::BadName { name, document: 1, field: "name", value: "a/b".into() });
        assert_eq!(bad.to_string(), "m.yml, document 1: metadata.name \"a/b\" is not a valid name");
    }
}
