//! Columns for text tables. A terminal shows `é` in one column and `日` in two, while
//! `str::len` counts bytes and `format!`'s `{:<N}` counts chars: a table padded with either
//! misaligns as soon as a name is not ASCII. Everything here counts the columns shown.

use unicode_width::UnicodeWidthStr;

/// The columns `text` takes on a terminal.
pub fn width(text: &str) -> usize {
    text.width()
}

/// The widest of `texts`, at least `min` (a header's width).
pub fn column_width<'a>(texts: impl IntoIterator<Item = &'a str>, min: usize) -> usize {
    texts.into_iter().map(width).max().unwrap_or(0).max(min)
}

/// `text` followed by spaces up to `columns`; longer text is left whole.
pub fn pad(text: &str, columns: usize) -> String {
    let mut out = String::with_capacity(text.len() + columns);
    out.push_str(text);
    out.extend(std::iter::repeat_n(' ', columns.saturating_sub(width(text))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_by_the_columns_a_terminal_shows() {
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(pad("é", 3), "é  ", "one column, two bytes");
        assert_eq!(pad("日本", 6), "日本  ", "two columns each, three bytes each");
        assert_eq!(pad("toolong", 3), "toolong");
    }

    #[test]
    fn a_column_is_as_wide_as_its_widest_cell_shown() {
        assert_eq!(column_width(["a", "日本語"], 4), 6);
        assert_eq!(column_width(["a"], 4), 4);
        assert_eq!(column_width([], 5), 5);
    }
}
