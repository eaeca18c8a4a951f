//! Canonical JSON bytes and their SHA-256 digests.
//!
//! Every document k3d-gpu hashes (facts fingerprints, plans) goes through here so the bytes are
//! the same on every machine: keys sorted (serde_json's map is a BTreeMap without the
//! `preserve_order` feature), two-space indentation, one trailing newline. `stream.rs` writes
//! those bytes without building a JSON tree first.

mod pretty;
mod stream;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Serialises `value` canonically. Only non-string map keys can fail here, and no type of ours
/// has them, so a failure is a bug and says so.
pub fn to_bytes<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut bytes = Vec::new();
    stream::write(&mut bytes, value).expect("k3d-gpu documents serialise to JSON");
    bytes.push(b'\n');
    bytes
}

/// Writes the canonical bytes of `value` (with the trailing newline) into `out`, as they are
/// made: a document printed this way is never whole in memory.
pub fn write<W: std::io::Write, T: Serialize + ?Sized>(out: &mut W, value: &T) -> std::io::Result<()> {
    stream::write(out, value).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// `sha256:` digest of the canonical bytes of `value`.
pub fn digest<T: Serialize + ?Sized>(value: &T) -> String {
    let mut hashing = Tee { out: std::io::sink(), hash: Some(Sha256::new()) };
    write(&mut hashing, value).expect("k3d-gpu documents serialise to JSON");
    hex(&hashing.hash.expect("a hasher was given").finalize())
}

/// Writes `value` as serde_json prints it pretty, and a newline, into `out`, and gives the
/// `sha256:` of those bytes: the document is never whole in memory, and nothing is sorted.
/// They are the canonical bytes only for a value whose maps are sorted (`BTreeMap`, a
/// `serde_json::Value`) and whose structs declare their fields in sorted order; a type
/// written this way has a test saying so (the plan's `plan_bytes_are_canonical`, the
/// observed digest's `projection_bytes_are_canonical`).
pub fn write_presorted<W: std::io::Write, T: Serialize + ?Sized>(out: W, value: &T) -> std::io::Result<String> {
    let hash = presorted(out, Some(Sha256::new()), value)?.expect("a hasher was given");
    Ok(hex(&hash.finalize()))
}

/// [`write_presorted`] without the hash, for bytes only printed.
pub fn print_presorted<W: std::io::Write, T: Serialize + ?Sized>(out: W, value: &T) -> std::io::Result<()> {
    presorted(out, None, value).map(drop)
}

/// `sha256:` of [`write_presorted`]'s bytes (the same as [`digest`] for a value it fits).
pub fn digest_presorted<T: Serialize + ?Sized>(value: &T) -> String {
    write_presorted(std::io::sink(), value).expect("k3d-gpu documents serialise to JSON")
}

fn presorted<W: std::io::Write, T: Serialize + ?Sized>(
    out: W,
    hash: Option<Sha256>,
    value: &T,
) -> std::io::Result<Option<Sha256>> {
    use std::io::Write;
    // serde_json writes a few bytes at a time: gathered here before they reach `out`.
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, Tee { out, hash });
    pretty::write(&mut buffered, value).map_err(std::io::Error::other)?;
    buffered.write_all(b"\n")?;
    let mut tee = buffered.into_inner().map_err(std::io::IntoInnerError::into_error)?;
    tee.out.flush()?;
    Ok(tee.hash)
}

/// A writer that passes its bytes on, and hashes them if it has a hasher.
struct Tee<W> {
    out: W,
    hash: Option<Sha256>,
}

impl<W: std::io::Write> std::io::Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write_all(buf)?;
        if let Some(hash) = &mut self.hash {
            hash.update(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn map_order_does_not_change_the_bytes() {
        let mut a = HashMap::new();
        let mut b = HashMap::new();
        for key in ["zeta", "alpha", "mid"] {
            a.insert(key, 1);
        }
        for key in ["mid", "zeta", "alpha"] {
            b.insert(key, 1);
        }
        assert_eq!(to_bytes(&a), to_bytes(&b));
        assert_eq!(String::from_utf8(to_bytes(&a)).unwrap(), "{\n  \"alpha\": 1,\n  \"mid\": 1,\n  \"zeta\": 1\n}\n");
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(sha256(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    /// What the bytes were before they were streamed: a whole `Value` tree, printed pretty.
    fn through_a_tree<T: Serialize>(value: &T) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(&serde_json::to_value(value).unwrap()).unwrap();
        bytes.push(b'\n');
        bytes
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(Vec<u8>),
        Tuple(i8, String),
        Struct { zed: f32, alpha: Option<f64> },
    }

    #[derive(Serialize)]
    struct Inner {
        z: (),
        a: Option<u32>,
    }

    #[derive(Serialize)]
    struct Every {
        zeta: Vec<Shape>,
        beta: std::collections::BTreeMap<u16, bool>,
        #[serde(flatten)]
        flat: Inner,
        empty_list: Vec<u8>,
        empty_map: HashMap<String, u8>,
        text: &'static str,
        big: u128,
        neg: i64,
        floats: [f64; 4],
        ch: char,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        unit_struct: Marker,
    }

    #[derive(Serialize)]
    struct Marker;

    /// The streamed bytes are the bytes a tree gave, for every shape serde has (so no digest
    /// or golden file changes), and the digest is the sha256 of those bytes.
    #[test]
    fn streamed_bytes_are_the_trees_bytes() {
        let every = Every {
            zeta: vec![
                Shape::Unit,
                Shape::Newtype(vec![1, 2]),
                Shape::Newtype(vec![]),
                Shape::Tuple(-3, "t\u{1}\"q\u{2028}".into()),
                Shape::Struct { zed: 0.1, alpha: None },
                Shape::Struct { zed: f32::NAN, alpha: Some(1e300) },
            ],
            beta: [(10, true), (2, false)].into_iter().collect(),
            flat: Inner { z: (), a: Some(7) },
            empty_list: vec![],
            empty_map: HashMap::new(),
            text: "caf\u{e9} \t tab",
            big: u128::from(u64::MAX),
            neg: i64::MIN,
            floats: [0.5, -0.0, f64::INFINITY, 123456789.125],
            ch: '\u{1F600}',
            skipped: None,
            unit_struct: Marker,
        };
        assert_eq!(String::from_utf8(to_bytes(&every)).unwrap(), String::from_utf8(through_a_tree(&every)).unwrap());
        assert_eq!(digest(&every), sha256(&through_a_tree(&every)));
        let nested = serde_json::json!({"b": [{"y": {}, "x": []}, [[1, {"k": null}]]], "a": {"": "empty key"}});
        assert_eq!(to_bytes(&nested), through_a_tree(&nested));
        let mut written = Vec::new();
        write(&mut written, &nested).unwrap();
        assert_eq!(written, to_bytes(&nested));
    }

    /// Real documents: every fixture host's facts, and a compiled graph.
    #[test]
    fn streamed_documents_match_the_tree() {
        let hosts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
        let mut checked = 0;
        for entry in std::fs::read_dir(hosts).unwrap() {
            let path = entry.unwrap().path();
            if !path.is_dir() {
                continue;
            }
            let root = crate::host::HostRoot::open(&path).unwrap();
            let facts = crate::detect::facts(&root, &crate::facts::VendorFilter::Auto);
            assert_eq!(to_bytes(&facts), through_a_tree(&facts));
            let catalog = crate::catalog::Catalog::embedded().unwrap();
            if let Ok(graph) = crate::compile::compile(&crate::config::Config::default(), &facts, &catalog) {
                assert_eq!(
                    graph.to_json(),
                    through_a_tree(&serde_json::from_slice::<serde_json::Value>(&graph.to_json()).unwrap())
                );
                checked += 1;
            }
        }
        assert!(checked > 3, "{checked} graphs");
    }
}
