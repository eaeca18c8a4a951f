//! Embeds the component catalog in the binary, so an installed k3d-gpu needs no files beside
//! it (`--stdlib DIR` overrides them): the component files (`stdlib/*.kdl`) already parsed as
//! KDL (`src/catalog/kdl_tree.rs`; the text is kept for diagnostics), and every manifest
//! (`share/*.yml`) already parsed. The YAML is read here, once, by the same code the
//! binary uses for manifests on disk (`src/catalog/yaml.rs`), and embedded as compact JSON
//! with its digest, images, kinds and CRD plurals, so a run parses only the manifests its config wants,
//! and only as JSON. A shipped component that is not KDL, or a manifest that is not valid
//! YAML or holds something that is not a Kubernetes object, fails the build.

use std::fmt::Write;
use std::path::{Path, PathBuf};

#[allow(dead_code)]
#[path = "src/catalog/yaml.rs"]
mod yaml;

#[allow(dead_code)]
#[path = "src/catalog/kdl_tree.rs"]
mod kdl_tree;

#[allow(dead_code)]
#[path = "src/build_commit.rs"]
mod build_commit;

/// The files of `dir` ending in `.ext`, sorted; the directory and each file are build inputs.
fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
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
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    files
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let mut out = String::from("sha256:");
    for byte in sha2::Sha256::digest(bytes) {
        write!(out, "{byte:02x}").unwrap();
    }
    out
}

/// The commit `k3d-gpu version` reports, as `K3D_GPU_COMMIT` at compile time
/// (src/build_commit.rs says where it comes from).
fn record_commit() {
    println!("cargo:rerun-if-changed=src/build_commit.rs");
    println!("cargo:rerun-if-env-changed={}", build_commit::ENV);
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    for path in build_commit::watched(&manifest_dir) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let given = std::env::var(build_commit::ENV).ok();
    println!("cargo:rustc-env=K3D_GPU_COMMIT={}", build_commit::commit(&manifest_dir, given.as_deref()));
}

/// Links the executable as non-PIE on Linux with glibc.
///
/// A PIE is relocated by the dynamic loader at every start: 36,643 `R_X86_64_RELATIVE`
/// entries (883 KB of `.rela.dyn`), and the 648 KB of `.data.rel.ro` they patch are copied on
/// write. That was most of a short command's cost: `--version` took 1.1 ms and 355 page
/// faults, 0.82 ms and 188 non-PIE; `facts` of a fixture host 2.85 ms, 2.2 ms non-PIE (issue
/// 42, target 2: facts <= 1.3x `cat` of the files it reads). The trade-off: the executable's
/// own code and data are at a fixed address, which ASLR no longer randomises (shared
/// libraries, stack, heap and mmap still are), so an attacker who found a memory-safety bug
/// would know where its code is; safe Rust rules such bugs out outside `unsafe` blocks and C
/// libraries. Lintian reports it as a warning (`hardening-no-pie`), not an error, and
/// packaging/README.md says so.
///
/// Read from cargo's variables, not `cfg!`: a build script runs on the build machine, which
/// is not the target when cross-compiling. Other targets (musl's static-pie, macOS) keep
/// their default.
fn link_args() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    link_order(&os, &env);
}

/// Lays out the functions the short commands run side by side (`scripts/link-order.txt`,
/// written by `scripts/link_order.py`): the binary's code is 21 MB, a short command runs
/// functions from all over it, and each first touch of a code page is a page fault that maps
/// the 16 around it. `facts` of a fixture host took 342 page faults and 2.26 ms of CPU, 247
/// and 1.77 ms laid out (issue 42, target 2). A name no longer in the binary is skipped.
///
/// Only where the linker is rust-lld, which takes `--symbol-ordering-file` (GNU ld does
/// not): rustc's default for x86_64 Linux since 1.90 (Cargo.toml's `rust-version` is above
/// it), unless the build names another linker.
/// Release builds only: a debug build's names differ (other hashes), and its speed is not
/// measured. `K3D_GPU_LINK_ORDER=0` turns it off.
fn link_order(os: &str, env: &str) {
    println!("cargo:rerun-if-env-changed=K3D_GPU_LINK_ORDER");
    println!("cargo:rerun-if-changed=scripts/link-order.txt");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let off = std::env::var("K3D_GPU_LINK_ORDER").is_ok_and(|v| v == "0");
    // A linker of the user's (`-C linker=…`, `target.….linker`, another flavour) may not be lld.
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker =
        flags.contains("linker") || flags.contains("link-self-contained") || std::env::var_os("RUSTC_LINKER").is_some();
    if os != "linux" || env != "gnu" || arch != "x86_64" || !release || off || other_linker {
        return;
    }
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let order = manifest_dir.join("scripts/link-order.txt");
    if order.is_file() {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

fn main() {
    link_args();
    record_commit();
    println!("cargo:rerun-if-changed=src/catalog/yaml.rs");
    println!("cargo:rerun-if-changed=src/catalog/kdl_tree.rs");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut out = String::new();
    let tree_dir = out_dir.join("stdlib");
    std::fs::create_dir_all(&tree_dir).unwrap();
    // (file, its text for diagnostics, its KDL tree as JSON).
    writeln!(out, "pub static STDLIB: &[(&str, &str, &str)] = &[").unwrap();
    for path in files("stdlib", "kdl") {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("stdlib/{file}: {e}"));
        let tree =
            kdl_tree::parse(&text).unwrap_or_else(|at| panic!("stdlib/{file} is not valid KDL (at byte {})", at.0));
        let tree_path = tree_dir.join(format!("{file}.json"));
        std::fs::write(&tree_path, serde_json::to_string(&tree).unwrap()).unwrap();
        writeln!(
            out,
            "    ({file:?}, include_str!({:?}), include_str!({:?})),",
            path.display().to_string(),
            tree_path.display().to_string()
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();

    let json_dir = out_dir.join("share");
    std::fs::create_dir_all(&json_dir).unwrap();
    writeln!(out, "pub static SHARE: &[super::manifest::Shipped] = &[").unwrap();
    for path in files("share", "yml") {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("share/{file}: {e}"));
        let objects = yaml::objects(&format!("share/{file}"), &text).unwrap_or_else(|e| panic!("{e}"));
        let json = yaml::encode(&objects);
        let json_path = json_dir.join(format!("{file}.json"));
        std::fs::write(&json_path, &json).unwrap();
        let kinds: Vec<String> = yaml::kinds(&objects).iter().map(|(a, k)| format!("({a:?}, {k:?})")).collect();
        let plurals: Vec<String> =
            yaml::plurals(&objects).iter().map(|(g, k, p, n)| format!("({g:?}, {k:?}, {p:?}, {n})")).collect();
        writeln!(
            out,
            "    super::manifest::Shipped {{ file: {file:?}, json: include_str!({:?}), digest: {:?}, images: &{:?}, kinds: &[{}], plurals: &[{}] }},",
            json_path.display().to_string(),
            sha256(json.as_bytes()),
            yaml::images(&objects),
            kinds.join(", "),
            plurals.join(", "),
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();
    std::fs::write(out_dir.join("embedded.rs"), out).unwrap();
}
