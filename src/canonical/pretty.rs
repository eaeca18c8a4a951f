//! serde_json's pretty layout (two-space indent) with each line break and its indent written
//! as one slice. `PrettyFormatter` writes the indent two bytes at a time, one `write_all` per
//! level, for every key and element: printing a plan of 100k deletes (67 MB) made about
//! 30 million of those calls. The bytes are the same (`the_bytes_are_serde_jsons`).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// Levels whose break is one slice of [`BREAK`]; deeper ones (no document of ours nests so
/// far) add the rest two bytes at a time, as serde_json does.
const FAST_LEVELS: usize = 48;

/// `,\n` and the indent of [`FAST_LEVELS`] levels: a break is a prefix of it, with or
/// without the comma.
static BREAK: [u8; 2 + 2 * FAST_LEVELS] = {
    let mut bytes = [b' '; 2 + 2 * FAST_LEVELS];
    bytes[0] = b',';
    bytes[1] = b'\n';
    bytes
};

/// Writes `value` as `serde_json::to_writer_pretty` does.
pub fn write<W: Write, T: Serialize + ?Sized>(out: W, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(out, Pretty::default()))
}

#[derive(Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

/// A line break (after a comma when `comma`) and the indent of `depth`: `stream.rs` writes
/// its lines with it too.
pub(super) fn line_break<W: ?Sized + Write>(out: &mut W, depth: usize, comma: bool) -> io::Result<()> {
    let start = if comma { 0 } else { 1 };
    if depth <= FAST_LEVELS {
        return out.write_all(&BREAK[start..2 + 2 * depth]);
    }
    out.write_all(&BREAK[start..2 + 2 * FAST_LEVELS])?;
    for _ in FAST_LEVELS..depth {
        out.write_all(b"  ")?;
    }
    Ok(())
}

impl Pretty {
    /// `[` or `{`: one level deeper, nothing in it yet.
    fn open<W: ?Sized + Write>(&mut self, out: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        out.write_all(bracket)
    }

    /// `]` or `}`, on a line of its own unless the array or object is empty.
    fn close<W: ?Sized + Write>(&mut self, out: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            line_break(out, self.depth, false)?;
        }
        out.write_all(bracket)
    }
}

impl Formatter for Pretty {
    #[inline]
    fn begin_array<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.open(out, b"[")
    }

    #[inline]
    fn end_array<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.close(out, b"]")
    }

    #[inline]
    fn begin_array_value<W: ?Sized + Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        line_break(out, self.depth, !first)
    }

    #[inline]
    fn end_array_value<W: ?Sized + Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    #[inline]
    fn begin_object<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.open(out, b"{")
    }

    #[inline]
    fn end_object<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.close(out, b"}")
    }

    #[inline]
    fn begin_object_key<W: ?Sized + Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        line_break(out, self.depth, !first)
    }

    #[inline]
    fn begin_object_value<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        out.write_all(b": ")
    }

    #[inline]
    fn end_object_value<W: ?Sized + Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!({"leaf": [1, "two", null, {}, []], "empty": {}}), |inner, i| {
            if i % 2 == 0 { json!({"k": inner, "n": i, "s": "a\"b\\c\u{1}é"}) } else { json!([inner, [], {"x": []}]) }
        })
    }

    #[test]
    fn the_bytes_are_serde_jsons() {
        // Beyond the levels of one slice too, and every empty and one-element shape.
        for levels in [0, 1, 2, 5, super::FAST_LEVELS - 1, super::FAST_LEVELS, super::FAST_LEVELS + 7] {
            let value = nested(levels);
            let mut ours = Vec::new();
            super::write(&mut ours, &value).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string_pretty(&value).unwrap(),
                "{levels} levels"
            );
        }
        for scalar in [json!(null), json!([]), json!({}), json!([[]]), json!({"a": {}}), json!(1.5), json!("x")] {
            let mut ours = Vec::new();
            super::write(&mut ours, &scalar).unwrap();
            assert_eq!(ours, serde_json::to_vec_pretty(&scalar).unwrap());
        }
    }
}
