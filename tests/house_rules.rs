//! Rules about the test suite itself, read from its source: what a reviewer would otherwise
//! have to remember.
//!
//! A test that needs a Docker engine must be `#[ignore]`d. Without an engine it returns early
//! (`support::docker_ready()` is false), so a plain `cargo test` would report it as passed
//! although it checked nothing; ignored, it is listed as ignored, and `.ci/run` runs it with
//! `--include-ignored` and `K3D_GPU_TEST_DOCKER=1`, which fails it when no engine answers.
//!
//! Tests run the binary only through `support::K3dGpu` (tests/support/run.rs), which clears
//! the environment: a test that spawned it itself would inherit the developer's `K3D_GPU_*`,
//! `KUBECONFIG` or `DOCKER_HOST`, and pass or fail by the shell it was run from.
//!
//! The import rules of docs/ARCHITECTURE.md are held by tests/layers.rs.

use std::collections::BTreeSet;
use std::path::Path;

/// One `fn` of a test file: its name, the attributes above it, and its text up to the next
/// item at column 0.
struct Item<'a> {
    name: &'a str,
    attributes: Vec<&'a str>,
    body: String,
}

fn items(source: &str) -> Vec<Item<'_>> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("fn ").or_else(|| line.strip_prefix("async fn ")) else { continue };
        let name = rest.split(['(', '<']).next().unwrap_or_default();
        let mut attributes = Vec::new();
        let mut a = i;
        while a > 0 && (lines[a - 1].starts_with("#[") || lines[a - 1].starts_with("///")) {
            a -= 1;
            if lines[a].starts_with("#[") {
                attributes.push(lines[a]);
            }
        }
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].starts_with("fn ") || lines[j].starts_with("#[") || lines[j].starts_with("async fn "))
            .unwrap_or(lines.len());
        out.push(Item { name, attributes, body: lines[i + 1..end].join("\n") });
    }
    out
}

/// The tests in `source` that need an engine (directly or through a helper of the same file
/// or of `support`) and are not ignored.
fn unignored_docker_tests(source: &str, support_gates: &BTreeSet<String>) -> Vec<String> {
    let items = items(source);
    let mut gates = support_gates.clone();
    // Helpers of this file that call a gate are gates too (world(), engine(), registry()).
    loop {
        let before = gates.len();
        for item in &items {
            if gates.iter().any(|g| item.body.contains(&format!("{g}("))) {
                gates.insert(item.name.to_string());
            }
        }
        if gates.len() == before {
            break;
        }
    }
    items
        .iter()
        .filter(|i| i.attributes.iter().any(|a| a.starts_with("#[test]") || a.starts_with("#[tokio::test")))
        .filter(|i| !i.attributes.iter().any(|a| a.starts_with("#[ignore")))
        .filter(|i| gates.iter().any(|g| i.body.contains(&format!("{g}("))))
        .map(|i| i.name.to_string())
        .collect()
}

#[test]
fn every_test_that_needs_docker_is_ignored_so_it_cannot_pass_unseen() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let gates = BTreeSet::from(["docker_ready".to_string()]);
    let mut offenders = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&tests).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") || path.file_name().is_some_and(|n| n == "house_rules.rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        if source.contains("docker_ready(") {
            checked += 1;
        }
        for name in unignored_docker_tests(&source, &gates) {
            offenders.push(format!("{}: {name}", path.file_name().unwrap().to_string_lossy()));
        }
    }
    assert!(checked >= 4, "the rule found only {checked} files that use docker_ready(); is it still the gate?");
    assert!(offenders.is_empty(), "tests that need Docker but are not #[ignore]d: {offenders:#?}");
}

#[test]
fn the_rule_sees_a_gate_called_through_a_helper() {
    let source = "\
fn world() -> Option<u8> {
    if !docker_ready() { return None; }
    Some(1)
}

#[test]
fn hidden() {
    let Some(w) = world() else { return };
}

#[test]
#[ignore = \"needs Docker\"]
fn listed() {
    let Some(w) = world() else { return };
}

#[test]
fn pure() {
    assert_eq!(1, 1);
}
";
    let gates = BTreeSet::from(["docker_ready".to_string()]);
    assert_eq!(unignored_docker_tests(source, &gates), ["hidden"]);
}

fn rust_files(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// Where a test file names the binary's path (the `env!` cargo sets for it) itself, bypassing
/// the hermetic runner: `file:line` for each.
fn binary_outside_the_runner(tests: &Path) -> Vec<String> {
    // Spelled in two halves so this file does not name it.
    let needle = concat!("CARGO_BIN", "_EXE_");
    let runner = tests.join("support/run.rs");
    let mut files = Vec::new();
    test_sources(tests, &mut files);
    let mut found = Vec::new();
    for path in files.iter().filter(|p| **p != runner) {
        let source = std::fs::read_to_string(path).unwrap();
        for (i, _) in source.lines().enumerate().filter(|(_, l)| l.contains(needle)) {
            found.push(format!("{}:{}", path.strip_prefix(tests).unwrap().display(), i + 1));
        }
    }
    found
}

/// The `.rs` files under `dir`, without following links or entering fixtures (the fixture
/// hosts hold links that loop, as a real /sys does).
fn test_sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let path = entry.path();
        if kind.is_dir() && entry.file_name() != "fixtures" && entry.file_name() != "golden" {
            test_sources(&path, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_hermetic_runner_starts_the_binary() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let runner = std::fs::read_to_string(tests.join("support/run.rs")).unwrap();
    assert!(runner.contains(".env_clear()"), "the runner no longer clears the environment");
    let offenders = binary_outside_the_runner(&tests);
    assert!(offenders.is_empty(), "run the binary through support::K3dGpu, not directly: {offenders:#?}");
}

#[test]
fn the_runner_rule_sees_a_test_that_starts_the_binary_itself() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("support")).unwrap();
    let direct = format!("fn run() {{ Command::new(env!(\"{}k3d-gpu\")).output(); }}\n", concat!("CARGO_BIN", "_EXE_"));
    std::fs::write(dir.path().join("support/run.rs"), &direct).unwrap();
    std::fs::write(dir.path().join("fine.rs"), "fn run() { K3dGpu::new().output(); }\n").unwrap();
    std::fs::write(dir.path().join("direct.rs"), format!("\n{direct}")).unwrap();
    assert_eq!(binary_outside_the_runner(dir.path()), ["direct.rs:2"]);
}

/// std's print macros panic when the write fails (a stderr pipe whose reader has gone): the
/// command then exits 101 instead of with its own status. The crate writes stderr through
/// `stderrln!`/`stderr!` and stdout through `commands::print_bytes`, which drop a failed write.
#[test]
fn no_print_macro_that_panics_on_a_failed_write() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        for (n, line) in source.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for banned in ["eprintln!(", "eprint!(", "println!(", "print!("] {
                let hit = code
                    .match_indices(banned)
                    .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':'));
                if hit {
                    found.push(format!("{}:{}: {banned}", file.strip_prefix(root).unwrap().display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "print macros that panic on a failed write:\n{}", found.join("\n"));
}

/// The functions of `src/` longer than `limit` lines, as `file:line name (N lines)`. The code
/// is rustfmt's: a function ends at the first `}` on its own line at the indentation of its
/// `fn`, and one without a body (a trait's declaration) ends at its `;`.
fn long_functions(root: &Path, limit: usize) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = source.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let indent = &line[..line.len() - code.len()];
            let rest = ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "]
                .iter()
                .fold(code, |c, p| c.strip_prefix(p).unwrap_or(c));
            let Some(name) = rest.strip_prefix("fn ") else { continue };
            let name = name.split(['(', '<']).next().unwrap_or_default();
            let Some(open) = (i..lines.len()).find(|&j| lines[j].trim_end().ends_with(['{', ';'])) else { continue };
            if lines[open].trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            let Some(end) = (open + 1..lines.len()).find(|&j| lines[j] == close) else { continue };
            if end - i + 1 > limit {
                let shown = file.strip_prefix(root).unwrap().display();
                found.push(format!("{shown}:{} {name} ({} lines)", i + 1, end - i + 1));
            }
        }
    }
    found
}

#[test]
fn no_function_is_longer_than_150_lines() {
    // A function that long is usually a list of independent rules: one function per rule,
    // each testable alone, reads better (doctor/perf.rs's RULES).
    let found = long_functions(Path::new(env!("CARGO_MANIFEST_DIR")), 150);
    assert!(found.is_empty(), "functions over 150 lines:\n{}", found.join("\n"));
}

#[test]
fn the_length_rule_measures_a_function_from_fn_to_its_brace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    let long = format!("pub fn long(\n    a: u8,\n) -> u8 {{\n{}    a\n}}\n", "    let _ = 1;\n".repeat(10));
    let source = format!("trait T {{\n    fn declared(&self);\n}}\n{long}\nfn short() {{}}\n");
    std::fs::write(dir.path().join("src/a.rs"), source).unwrap();
    assert_eq!(long_functions(dir.path(), 14), ["src/a.rs:4 long (15 lines)"]);
    assert!(long_functions(dir.path(), 15).is_empty());
}
