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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_values_in_tables() {
        let text = "[cluster]\nname = \"gpu\"\n\n[sharing]\nallocation = \"packed\"\n";
        let span = span_of(text, &["sharing", "allocation"]).unwrap();
        assert_eq!(&text[span], "\"packed\"");
        let closest = span_of(text, &["sharing", "nothing"]).unwrap();
        assert_eq!(&text[closest], "sharing");
        assert!(span_of(text, &["placement", "balloons"]).is_none());
        assert!(span_of("not = [toml", &["a"]).is_none());
    }
}
