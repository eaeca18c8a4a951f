//! Every command output the docs show is the output of a run: each block that follows a
//! marker
//!
//! ```text
//! <!-- output: k3d-gpu detect --root tests/fixtures/hosts/lunar-lake-npu | head 3 tail 2 -->
//! ```
//!
//! is compared with what the real binary prints for that command (stdout; `2>&1` adds
//! stderr after it). The block's first line, `$ k3d-gpu …`, is the command as the reader
//! types it and is kept as written; the rest is the output. The marker's command must be
//! that line, plus only the options that point it at a fixture instead of this machine
//! (`--root DIR`, `--observed FILE`, which the text before the block names). `| head N`
//! keeps the first N lines, `tail M` the last M, with a `…` line between when lines were
//! left out. A block after `<!-- file: NAME -->` is written to NAME first, so a later
//! command reads it (the README's `k3dgpu.toml`).
//!
//! Commands run as a reader runs them after the README's set-up: in bash, in a scratch
//! checkout (`tests/` and `examples/` link to the repository's, `target/debug/k3d-gpu` to
//! the binary under test, which stands for the set-up's build), after the set-up's lines
//! that are not cargo commands (the one that puts `target/debug` on PATH). So `k3d-gpu` is
//! found through PATH, or not at all, as for the reader. No K3D_GPU_* variable is set.
//!
//! Regenerate every block with `UPDATE_GOLDEN=1 cargo test --test docs_output` and review
//! the diff.

mod support;

use std::path::Path;

use support::K3dGpu;
use support::repo;

/// The documents whose blocks are checked.
const DOCS: [&str; 4] = ["README.md", "docs/config.md", "examples/README.md", "docs/host-setup.md"];

struct Marker {
    /// The command's words, `k3d-gpu` first.
    words: Vec<String>,
    head: Option<usize>,
    tail: Option<usize>,
    stderr: bool,
}

fn parse_marker(text: &str) -> Marker {
    let (command, filter) = text.split_once('|').unwrap_or((text, ""));
    let mut words: Vec<String> = command.split_whitespace().map(String::from).collect();
    let stderr = words.last().is_some_and(|w| w == "2>&1");
    if stderr {
        words.pop();
    }
    assert_eq!(words.first().map(String::as_str), Some("k3d-gpu"), "a marker runs k3d-gpu: {text}");
    let filter: Vec<&str> = filter.split_whitespace().collect();
    let number = |key: &str| {
        filter.iter().position(|w| *w == key).map(|i| filter[i + 1].parse::<usize>().expect("a line count"))
    };
    Marker { words, head: number("head"), tail: number("tail"), stderr }
}

/// Whether `shown` (a block's `$ …` line) is the command `run` less the fixture options the
/// text names: `--root DIR` and `--observed FILE` where the shown line has none.
fn shown_as_run(shown: &str, run: &[String]) -> bool {
    let shown: Vec<&str> = shown.split_whitespace().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < run.len() {
        if matches!(run[i].as_str(), "--root" | "--observed") && !shown.contains(&run[i].as_str()) {
            i += 2;
            continue;
        }
        kept.push(run[i].as_str());
        i += 1;
    }
    kept == shown
}

/// The README's set-up lines that are not cargo commands, in order: what a reader types
/// after the build so that the later `k3d-gpu …` lines find the binary.
fn setup_lines() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = text.split("\n## Set up on a fresh machine\n").nth(1).expect("the README's set-up section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("cargo "))
        .map(String::from)
        .collect()
}

/// A scratch checkout after the set-up's build: `tests/` and `examples/` linked to the
/// repository's, `target/debug/k3d-gpu` to the binary under test.
fn scratch_checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for link in ["tests", "examples"] {
        std::os::unix::fs::symlink(repo().join(link), dir.path().join(link)).unwrap();
    }
    K3dGpu::link_binary(&dir.path().join("target/debug/k3d-gpu"));
    dir
}

/// The data directory the docs' commands run with: a plan of this machine would name the
/// model store under it (the docs' plans are of fixture hosts, which name it as written), so
/// nothing shown depends on the machine that runs the check.
const DOCS_DATA_HOME: &str = "/home/me/.local/share";

/// bash running `script` in `dir` after the README's set-up lines, HOME being `dir`.
fn after_setup(script: &str, dir: &Path) -> std::process::Output {
    let mut program = setup_lines().join("\n");
    program.push('\n');
    program.push_str(script);
    K3dGpu::program("bash")
        .arg("-c")
        .arg(program)
        .cwd(dir)
        .env("HOME", dir)
        .env("XDG_DATA_HOME", DOCS_DATA_HOME)
        .output()
}

/// What the command prints, cut as the marker says.
fn run(marker: &Marker, dir: &Path) -> Vec<String> {
    let out = after_setup(&marker.words.join(" "), dir);
    let mut text = String::from_utf8(out.stdout).unwrap();
    if marker.stderr {
        text.push_str(&String::from_utf8(out.stderr).unwrap());
    }
    let lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
    let (head, tail) = (marker.head.unwrap_or(lines.len()), marker.tail.unwrap_or(0));
    if marker.head.is_none() && marker.tail.is_none() || head + tail >= lines.len() {
        return lines;
    }
    let mut cut = lines[..head].to_vec();
    cut.push("…".into());
    cut.extend_from_slice(&lines[lines.len() - tail..]);
    cut
}

/// The indented block after line `at`: (first line, end), skipping blank lines before it.
fn block(lines: &[&str], at: usize) -> (usize, usize) {
    let mut start = at + 1;
    while lines.get(start).is_some_and(|l| l.trim().is_empty()) {
        start += 1;
    }
    let mut end = start;
    while end < lines.len() && (lines[end].starts_with("    ") || lines[end].trim().is_empty()) {
        end += 1;
    }
    // Trailing blank lines belong to the text after the block.
    while end > start && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    (start, end)
}

/// Checks (or with UPDATE_GOLDEN=1 rewrites) one document; returns its mismatches.
fn check(doc: &str) -> Vec<String> {
    let path = repo().join(doc);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let dir = scratch_checkout();
    let update = support::update_golden();
    let mut out: Vec<String> = Vec::new();
    let mut failures = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        out.push(lines[i].to_string());
        if let Some(name) = line.strip_prefix("<!-- file: ").and_then(|r| r.strip_suffix(" -->")) {
            let (start, end) = block(&lines, i);
            let body: String =
                lines[start..end].iter().map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(""))).collect();
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        let Some(marker_text) = line.strip_prefix("<!-- output: ").and_then(|r| r.strip_suffix(" -->")) else {
            i += 1;
            continue;
        };
        let (start, end) = block(&lines, i);
        assert!(
            start < end && lines[start].starts_with("    $ "),
            "{doc}:{}: no `    $ k3d-gpu …` block after the marker",
            i + 1
        );
        let shown: Vec<String> =
            lines[start + 1..end].iter().map(|l| l.strip_prefix("    ").unwrap_or("").trim_end().to_string()).collect();
        let marker = parse_marker(marker_text);
        let typed = lines[start].trim_start().strip_prefix("$ ").unwrap();
        if !shown_as_run(typed, &marker.words) {
            failures.push(format!(
                "{doc}:{}: the block shows `{typed}` but its marker runs `{}`: they may differ only by --root \
and --observed",
                start + 1,
                marker.words.join(" ")
            ));
        }
        let printed = run(&marker, dir.path());
        if shown != printed {
            failures.push(format!(
                "{doc}:{}: `{marker_text}` prints\n{}\nbut the doc shows\n{}",
                start + 1,
                printed.join("\n"),
                shown.join("\n")
            ));
        }
        out.extend(lines[i + 1..=start].iter().map(|l| l.to_string()));
        out.extend(printed.iter().map(|l| if l.is_empty() { String::new() } else { format!("    {l}") }));
        i = end;
    }
    if update {
        let mut new = out.join("\n");
        new.push('\n');
        if new != text {
            std::fs::write(&path, new).unwrap();
        }
        return Vec::new();
    }
    failures
}

#[test]
fn every_output_the_docs_show_is_what_the_command_prints() {
    let mut failures = Vec::new();
    let mut markers = 0;
    for doc in DOCS {
        markers += std::fs::read_to_string(repo().join(doc)).unwrap().matches("<!-- output: ").count();
        failures.extend(check(doc));
    }
    assert!(markers >= 4, "the README's Getting started steps are marked ({markers} markers)");
    assert!(
        failures.is_empty(),
        "{}\n\nregenerate with `UPDATE_GOLDEN=1 cargo test --test docs_output`",
        failures.join("\n\n")
    );
}

/// After the README's two set-up commands (the build, which the binary under test stands
/// for) and its other set-up lines, `k3d-gpu` as typed is the binary that build made: the
/// README once left it off PATH, so Getting started's first command was "command not found".
#[test]
fn after_the_set_up_k3d_gpu_is_the_binary_it_built() {
    let dir = scratch_checkout();
    let out = after_setup("command -v k3d-gpu", dir.path());
    let found = String::from_utf8(out.stdout).unwrap();
    let built = dir.path().join("target/debug/k3d-gpu");
    assert!(
        !found.trim().is_empty()
            && std::fs::canonicalize(found.trim()).ok() == Some(std::fs::canonicalize(&built).unwrap()),
        "after the README's set-up lines {:?}, `k3d-gpu` is {:?}, not the build's {}",
        setup_lines(),
        found.trim(),
        built.display()
    );
    // And Getting started's first command runs as typed there.
    let out = after_setup("k3d-gpu detect --root tests/fixtures/hosts/lunar-lake-npu", dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8(out.stdout).unwrap().contains("Intel(R) Core(TM) Ultra 7 258V"));
}

#[test]
fn a_block_may_leave_out_only_the_fixture_options() {
    let run = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let plan = run("k3d-gpu plan --root tests/h --observed o.json --out plan.json");
    assert!(shown_as_run("k3d-gpu plan --out plan.json", &plan));
    assert!(shown_as_run("k3d-gpu plan --root tests/h --out plan.json", &plan));
    assert!(!shown_as_run("k3d-gpu plan", &plan), "--out is not a fixture option");
    assert!(!shown_as_run("k3d-gpu plan --offline --out plan.json", &plan));
    assert!(!shown_as_run("cargo run -- plan --out plan.json", &plan));
    assert!(!shown_as_run("k3d-gpu validate", &run("k3d-gpu plan --root tests/h")));
}

/// A `$ k3d-gpu …` transcript in a doc without a marker would be text nothing checks.
#[test]
fn every_transcript_in_the_docs_has_a_marker() {
    for doc in DOCS {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("$ k3d-gpu") {
                continue;
            }
            let marked =
                (0..i).rev().find(|j| !lines[*j].trim().is_empty()).is_some_and(|j| lines[j].contains("<!-- output: "));
            assert!(marked, "{doc}:{}: `{}` has no `<!-- output: … -->` marker before it", i + 1, line.trim());
        }
    }
}

/// Every `NAME.md` a doc names is a file of the repository (beside the doc, at its root or in
/// docs/): the docs once cited a DESIGN.md the repository does not have.
#[test]
fn the_docs_cite_only_documents_the_repository_has() {
    let mut docs: Vec<String> =
        ["README.md", "stdlib/README.md", "share/README.md", "packaging/README.md", "examples/README.md"]
            .map(String::from)
            .to_vec();
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        docs.push(format!("docs/{}", entry.unwrap().file_name().to_string_lossy()));
    }
    for doc in docs.iter().filter(|d| d.ends_with(".md")) {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        let beside = repo().join(doc).parent().unwrap().to_path_buf();
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || "._/-".contains(c))) {
            let Some(name) = word.strip_suffix(".md").filter(|n| !n.is_empty()) else { continue };
            let name = format!("{}.md", name.trim_start_matches("./"));
            // Ours: a bare name (DESIGN.md) or docs/NAME.md; deeper paths are upstream's.
            if name.matches('/').count() > usize::from(name.starts_with("docs/")) {
                continue;
            }
            let found =
                [repo().join(&name), beside.join(&name), repo().join("docs").join(&name)].iter().any(|p| p.is_file());
            assert!(found, "{doc} names {name}, which the repository does not have");
        }
    }
}

/// The README's count of example configs is the number in examples/ (the existing cluster's
/// counted apart).
#[test]
fn the_readme_counts_the_examples_there_are() {
    let machines = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| !std::fs::read_to_string(p).unwrap().contains("provider = \"existing\""))
        .count();
    let words =
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap().replace('\n', " ");
    let said = format!("`examples/` has {} real configs", words[machines]);
    assert!(readme.contains(&said), "the README should say {said:?}");
}

/// `UPDATE_GOLDEN=0` compares (it once rewrote every document, since only the variable's
/// presence was read); `1` and the other truthy spellings rewrite.
#[test]
fn update_golden_is_read_as_a_yes_or_no() {
    use std::ffi::OsStr;
    for no in [None, Some(""), Some("0"), Some("false"), Some("no"), Some("off")] {
        assert!(!support::truthy(no.map(OsStr::new)), "{no:?}");
    }
    for yes in ["1", "true", "TRUE", "yes", "on"] {
        assert!(support::truthy(Some(OsStr::new(yes))), "{yes}");
    }
}
