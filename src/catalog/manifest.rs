//! A `share/` manifest: multi-document YAML into Kubernetes objects as JSON values.

use super::CatalogError;

/// Parses the documents of a manifest (`name` is how messages call it); empty documents are skipped; each object needs
/// `apiVersion`, `kind` and `metadata.name`.
pub fn parse_manifest(name: &str, text: &str) -> Result<Vec<serde_json::Value>, Box<CatalogError>> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).map_err(|e| {
        // The parser's message can quote the text; a file that is not YAML is never echoed.
        let at = e.location().map(|l| format!(" (line {}, column {})", l.line(), l.column())).unwrap_or_default();
        Box::new(CatalogError::plain(format!("{name} is not valid YAML{at}"), None))
    })?;
    let mut objects = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let field = |path: &[&str]| path.iter().try_fold(&doc, |v, k| v.get(k)).and_then(|v| v.as_str()).is_some();
        if !field(&["apiVersion"]) || !field(&["kind"]) || !field(&["metadata", "name"]) {
            return Err(Box::new(CatalogError::plain(
                format!("{name}, document {}: a Kubernetes object needs apiVersion, kind and metadata.name", i + 1),
                None,
            )));
        }
        for field in ["name", "namespace"] {
            if let Some(value) = doc["metadata"][field].as_str()
                && (value.is_empty() || value.contains('/'))
            {
                return Err(Box::new(CatalogError::plain(
                    format!("{name}, document {}: metadata.{field} {value:?} is not a valid name", i + 1),
                    None,
                )));
            }
        }
        objects.push(doc);
    }
    Ok(objects)
}
