//! Canonical JSON bytes and their SHA-256 digests.
//!
//! Every document k3d-gpu hashes (facts fingerprints, plans) goes through here so the bytes are
//! the same on every machine: keys sorted (serde_json's map is a BTreeMap without the
//! `preserve_order` feature), two-space indentation, one trailing newline.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Serialises `value` canonically. Only non-string map keys can fail here, and no type of ours
/// has them, so a failure is a bug and says so.
pub fn to_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    let tree = serde_json::to_value(value).expect("k3d-gpu documents serialise to JSON");
    let mut bytes = serde_json::to_vec_pretty(&tree).expect("a JSON value always serialises");
    bytes.push(b'\n');
    bytes
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// `sha256:` digest of the canonical bytes of `value`.
pub fn digest<T: Serialize>(value: &T) -> String {
    sha256(&to_bytes(value))
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
}
