//! Where a key sits in the config text, for diagnostics raised after parsing (by the compiler
//! or validation) that should still point at the line the user wrote.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

/// The byte span of the value at `path` (e.g. `["sharing", "allocation"]`), or of the closest
/// table on the way when the key is absent; `None` when nothing matches or the text does not
/// parse.
pub fn span_of(source: &str, path: &[&str]) -> Option<Range<usize>> {
    let doc = DeTable::parse(source).ok()?;
    let mut table = doc.get_ref();
    let mut best: Option<Range<usize>> = None;
    for (i, key) in path.iter().enumerate() {
        // An absent key points at the closest table on the way (e.g. its [section] header).
        let Some((k, value)) = table.iter().find(|(k, _)| k.get_ref().as_ref() == *key) else {
            return best;
        };
        best = Some(if i + 1 == path.len() { value.span() } else { k.span() });
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => return best,
        }
    }
    best
}

/// The span of element `index` of the list at `path`, or the list's own span when it is not
/// a list or has no such element.
pub fn span_of_element(source: &str, path: &[&str], index: usize) -> Option<Range<usize>> {
    let doc = DeTable::parse(source).ok()?;
    let (last, tables) = path.split_last()?;
    let mut table = doc.get_ref();
    for key in tables {
        match table.iter().find(|(k, _)| k.get_ref().as_ref() == *key)?.1.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => return None,
        }
    }
    let value = table.iter().find(|(k, _)| k.get_ref().as_ref() == *last)?.1;
    match value.get_ref() {
        DeValue::Array(items) => items.get(index).map(|i| i.span()).or_else(|| Some(value.span())),
        _ => Some(value.span()),
    }
}

/// The key path whose value holds byte `pos` (e.g. `["cluster", "servers"]`), deepest first
/// match; `[]` when `pos` is in no value or the text does not parse.
pub fn path_at(source: &str, pos: usize) -> Vec<String> {
    // A table's own span need not cover its keys (a `[section]` header's is the header), so
    // every table is searched.
    fn walk(table: &DeTable, pos: usize) -> Option<Vec<String>> {
        for (k, value) in table.iter() {
            let key = k.get_ref().to_string();
            if k.span().contains(&pos) {
                return Some(vec![key]);
            }
            let inner: Vec<&DeTable> = match value.get_ref() {
                DeValue::Table(t) => vec![t],
                // [[claims]]: the path names the array, not the entry's index.
                DeValue::Array(items) => items
                    .iter()
                    .filter_map(|i| match i.get_ref() {
                        DeValue::Table(t) => Some(t),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            if let Some(mut rest) = inner.into_iter().find_map(|t| walk(t, pos)) {
                rest.insert(0, key);
                return Some(rest);
            }
            let span = value.span();
            if span.start <= pos && pos < span.end.max(span.start + 1) {
                return Some(vec![key]);
            }
        }
        None
    }
    DeTable::parse(source).ok().and_then(|doc| walk(doc.get_ref(), pos)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_key_a_position_is_in() {
        let text = "[cluster]\nservers = \"one\"\n\n[sharing]\ndeny_ids = [\"a\", 5]\n";
        assert_eq!(path_at(text, text.find("one").unwrap()), ["cluster", "servers"]);
        assert_eq!(path_at(text, text.find('5').unwrap()), ["sharing", "deny_ids"]);
        assert_eq!(path_at(text, text.find("deny_ids").unwrap()), ["sharing", "deny_ids"]);
        let claims = "[[claims]]\nname = \"a\"\n[[claims]]\nname = \"b\"\ncount = \"x\"\n";
        assert_eq!(path_at(claims, claims.find("\"x\"").unwrap()), ["claims", "count"]);
    }

    #[test]
    fn finds_values_in_tables() {
        let text = "[cluster]\nname = \"gpu\"\n\n[sharing]\nallocation = \"packed\"\n";
        let span = span_of(text, &["sharing", "allocation"]).unwrap();
        assert_eq!(&text[span], "\"packed\"");
        let closest = span_of(text, &["sharing", "nothing"]).unwrap();
        assert_eq!(&text[closest], "sharing");
        assert!(span_of(text, &["placement", "balloons"]).is_none());
        assert!(span_of("not = [toml", &["a"]).is_none());
        let ids = "[sharing]\ndeny_ids = [\"e20b\", \"zz\"]\n";
        assert_eq!(&ids[span_of_element(ids, &["sharing", "deny_ids"], 1).unwrap()], "\"zz\"");
    }
}
