//! The `.k3d-gpu-stat` sidecar parser. Besides never panicking, whatever it accepts must come
//! back unchanged when written in the documented `MODE UID GID PATH` form (octal mode), since
//! `facts capture` writes the file that detection later reads.
#![no_main]

use std::collections::BTreeMap;

use k3d_gpu::host::parse_sidecar;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let table = parse_sidecar(&text);
    assert!(table.len() <= text.lines().count(), "more entries than lines");

    // Formatted here from docs/fixture-hosts.md rather than with the crate's own writer, which
    // is not public: the check is against the documented format.
    let written: String =
        table.iter().map(|(path, s)| format!("{:04o} {} {} {path}\n", s.mode, s.uid, s.gid)).collect();
    let reread: BTreeMap<_, _> = parse_sidecar(&written);
    assert_eq!(reread, table, "sidecar round trip changed the table via {written:?}");
});
