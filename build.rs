//! Embeds the component catalog (`stdlib/*.kdl`) and its manifests (`share/*.yml`) in the
//! binary, so an installed k3d-gpu needs no files beside it (`--stdlib DIR` overrides them).

use std::fmt::Write;
use std::path::Path;

fn embed(dir: &str, ext: &str, out: &mut String, name: &str) {
    println!("cargo:rerun-if-changed={dir}");
    // Read when the script runs, not when it was compiled: cargo may reuse one compiled build
    // script for a checkout at another path (a fresh clone sharing CARGO_TARGET_DIR), and the
    // compile-time path would then embed that checkout's catalog, or none when it is gone.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .map(|d| {
            d.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == ext)).collect()
        })
        .unwrap_or_default();
    files.sort();
    writeln!(out, "pub static {name}: &[(&str, &str)] = &[").unwrap();
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let file = path.file_name().unwrap().to_string_lossy();
        writeln!(out, "    ({file:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    writeln!(out, "];").unwrap();
}

fn main() {
    let mut out = String::new();
    embed("stdlib", "kdl", &mut out, "STDLIB");
    embed("share", "yml", &mut out, "SHARE");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("embedded.rs");
    std::fs::write(dest, out).unwrap();
}
