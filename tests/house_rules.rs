//! Rules about the test suite itself, read from its source: what a reviewer would otherwise
//! have to remember.
//!
//! A test that needs a Docker engine must be `#[ignore]`d. Without an engine it returns early
//! (`support::docker_ready()` is false), so a plain `cargo test` would report it as passed
//! although it checked nothing; ignored, it is listed as ignored, and `.ci/run` runs it with
//! `--include-ignored` and `K3D_GPU_TEST_DOCKER=1`, which fails it when no engine answers.

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
