//! The layers of docs/ARCHITECTURE.md, held by reading every file of `src/` as Rust.
//!
//! Each file is parsed with `syn`. Every path it names is resolved against the file's place in
//! the module tree: `crate::`, `super::` and `self::` alike, in `use` trees, types,
//! expressions and patterns, and in macro arguments (read as tokens). Code under
//! `#[cfg(test)]` or `#[test]` is left out wherever it sits in the file, not only at its end.
//!
//! The rules come from ARCHITECTURE.md's table "What may import what", one row per module or
//! file, with four cells: who, stage, the crate modules it may use, and what it must never
//! name (a `std::` module or a crate). This test then holds:
//!
//! - every edge of a file is allowed by its row (a file's own row when it has one, else its
//!   module's);
//! - every edge goes to the same stage or one below it, so the module graph has no cycle that
//!   spans two stages, whatever a row allows; the closure of every module stays in its stage
//!   or below, and a `core` module's closure holds only `core` and `leaf` modules;
//! - no file names what its row's "never" cell lists, and no `leaf` or `core` file names
//!   `std::fs`, `std::process`, `std::net`, tokio, kube, bollard, hyper, clap or rmcp.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit_mut::VisitMut;

/// The stages, bottom first: a module may use its own stage and those below it.
const STAGES: &[&str] = &["leaf", "core", "edge", "command"];

/// What no `leaf` or `core` file may name: the filesystem, programs, sockets, the environment,
/// the clock, and the frameworks of the edges. A name is refused with everything under it
/// (`std::fs` refuses `std::fs::read`); `std::net::Ipv4Addr`, a value, stays allowed.
const NEVER_IN_CORE: &[&str] = &[
    "std::fs",
    "std::process",
    "std::net::TcpStream",
    "std::net::TcpListener",
    "std::net::UdpSocket",
    "std::env",
    "std::time::SystemTime",
    "std::time::Instant",
    "std::thread",
    "tokio",
    "kube",
    "bollard",
    "hyper",
    "clap",
    "rmcp",
];

/// `name` is `ban` or something under it.
fn is_under(name: &str, ban: &str) -> bool {
    name == ban || name.strip_prefix(ban).is_some_and(|rest| rest.starts_with("::"))
}

/// One path a file names, resolved to the crate's module tree (`["observe", "Observed"]`), or
/// an outside name (`std::fs`, `kube`).
#[derive(Debug, Default, Clone)]
struct Names {
    internal: BTreeSet<Vec<String>>,
    external: BTreeSet<String>,
}

struct Reader<'a> {
    /// The module of the file, and of each inline `mod` the reader is in.
    module: Vec<String>,
    /// The name that stands for the crate: `crate`, or `k3d_gpu` in the binary's main.rs.
    crate_names: &'a [&'a str],
    names: Names,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        if path.is_ident("test") {
            return true;
        }
        if !path.is_ident("cfg") {
            return false;
        }
        // `cfg(test)` and `cfg(all(test, …))`; not `cfg(not(test))`.
        let text = a.meta.require_list().map(|l| l.tokens.to_string()).unwrap_or_default();
        text == "test" || text.starts_with("all (test") || text.contains("all (test ,")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

impl Reader<'_> {
    /// Resolves a path given as segments; `std`/crate names are recorded as outside names.
    fn record(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else { return };
        let resolved: Option<Vec<String>> = if self.crate_names.contains(&first.as_str()) {
            Some(segments[1..].to_vec())
        } else if first == "super" || first == "self" {
            let mut base = self.module.clone();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super" || s == "self") {
                if rest[0] == "super" {
                    base.pop();
                }
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        } else {
            None
        };
        match resolved {
            Some(path) => {
                self.names.internal.insert(path);
            }
            None => {
                let mut outside = segments.to_vec();
                if matches!(first.as_str(), "core" | "alloc") {
                    outside[0] = "std".into();
                }
                self.names.external.insert(outside.join("::"));
            }
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.record(&full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.record(&full);
            }
            syn::UseTree::Glob(_) => {
                let full = prefix.clone();
                self.record(&full);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// A macro's arguments are tokens, not syntax: paths are found as `a :: b :: c` runs.
    fn macro_tokens(&mut self, tokens: &str) {
        let words: Vec<&str> = tokens.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            let starts = self.crate_names.contains(&w) || w == "super" || w == "self";
            let preceded_by_colons = i > 0 && words[i - 1] == "::";
            if starts && !preceded_by_colons && words.get(i + 1) == Some(&"::") {
                let mut segments = vec![w.to_string()];
                let mut j = i + 1;
                while words.get(j) == Some(&"::") {
                    let Some(next) = words.get(j + 1) else { break };
                    if !next.chars().all(|c| c.is_alphanumeric() || c == '_') {
                        break;
                    }
                    segments.push(next.to_string());
                    j += 2;
                }
                self.record(&segments);
                i = j;
            } else {
                if matches!(w, "std" | "core") && !preceded_by_colons && words.get(i + 1) == Some(&"::") {
                    let mut segments = vec!["std".to_string()];
                    let mut j = i + 1;
                    while words.get(j) == Some(&"::")
                        && let Some(next) =
                            words.get(j + 1).filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
                    {
                        segments.push(next.to_string());
                        j += 2;
                    }
                    self.names.external.insert(segments.join("::"));
                    i = j;
                    continue;
                }
                i += 1;
            }
        }
    }
}

impl VisitMut for Reader<'_> {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        syn::visit_mut::visit_item_mut(self, item);
    }

    fn visit_impl_item_fn_mut(&mut self, f: &mut syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit_mut::visit_impl_item_fn_mut(self, f);
        }
    }

    fn visit_stmt_mut(&mut self, stmt: &mut syn::Stmt) {
        if let syn::Stmt::Local(l) = stmt
            && is_test_only(&l.attrs)
        {
            return;
        }
        syn::visit_mut::visit_stmt_mut(self, stmt);
    }

    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        if is_test_only(&m.attrs) {
            return;
        }
        self.module.push(m.ident.to_string());
        syn::visit_mut::visit_item_mod_mut(self, m);
        self.module.pop();
    }

    fn visit_item_use_mut(&mut self, u: &mut syn::ItemUse) {
        // `use ::std::…` names the same as `use std::…`.
        let tree = u.tree.clone();
        self.use_tree(&mut Vec::new(), &tree);
    }

    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 || path.leading_colon.is_some() {
            self.record(&segments);
        }
        syn::visit_mut::visit_path_mut(self, path);
    }

    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        self.macro_tokens(&m.tokens.to_string());
        syn::visit_mut::visit_macro_mut(self, m);
    }
}

/// The module a file is: `src/compile/fleet.rs` is `compile::fleet`, `src/compile/mod.rs` is
/// `compile`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> =
        relative.iter().skip(1).map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// What one file names, tests left out.
fn read_file(relative: &Path, source: &str) -> Result<Names, String> {
    let mut file = syn::parse_file(source).map_err(|e| format!("{}: {e}", relative.display()))?;
    let main = relative == Path::new("src/main.rs");
    let crate_names: &[&str] = if main { &["crate", "k3d_gpu"] } else { &["crate"] };
    let mut reader = Reader { module: module_of(relative), crate_names, names: Names::default() };
    if is_test_only(&file.attrs) {
        return Ok(reader.names);
    }
    reader.visit_file_mut(&mut file);
    Ok(reader.names)
}

/// One row of the table: the stage, the crate modules allowed, and the names never allowed.
#[derive(Debug, Clone)]
struct Row {
    stage: usize,
    may: BTreeSet<String>,
    never: BTreeSet<String>,
}

/// The rows of ARCHITECTURE.md's "What may import what", keyed by a top module (`compile`) or
/// a file (`doctor/live.rs`). Text in parentheses explains and is not read; `everything`
/// allows every module.
fn table(doc: &str, modules: &BTreeSet<String>) -> Result<BTreeMap<String, Row>, String> {
    let section = doc.split("## What may import what").nth(1).ok_or("ARCHITECTURE.md has no import table")?;
    let mut rows = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")).filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let [who, stage, may, never] = cells[..] else { return Err(format!("a row needs four cells: {line}")) };
        let stage =
            STAGES.iter().position(|s| *s == stage).ok_or_else(|| format!("unknown stage {stage:?}: {line}"))?;
        let may = without_parentheses(may);
        let may: BTreeSet<String> = if may.contains("everything") {
            modules.clone()
        } else {
            ticked(&may).map(|m| m.split("::").next().unwrap_or_default().to_string()).collect()
        };
        let never: BTreeSet<String> = ticked(&without_parentheses(never)).map(str::to_string).collect();
        for who in ticked(who) {
            rows.insert(who.to_string(), Row { stage, may: may.clone(), never: never.clone() });
        }
    }
    Ok(rows)
}

fn without_parentheses(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn ticked(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// Every file under `src/`, with its path relative to the crate root.
fn sources(root: &Path) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files);
    files
        .into_iter()
        .map(|p| {
            let source = std::fs::read_to_string(&p).unwrap();
            (p.strip_prefix(root).unwrap().to_path_buf(), source)
        })
        .collect()
}

/// The row that rules a file: its own (`doctor/live.rs`), else its directory's
/// (`doctor/live/`), else its top module's.
fn row_of<'r>(rows: &'r BTreeMap<String, Row>, path: &Path, top: &str) -> Option<&'r Row> {
    let key = path.strip_prefix("src").unwrap_or(path).to_string_lossy().replace('\\', "/");
    if let Some(row) = rows.get(&key) {
        return Some(row);
    }
    let mut dir = key.as_str();
    while let Some(cut) = dir.rfind('/') {
        dir = &dir[..cut];
        if let Some(row) = rows.get(&format!("{dir}/")) {
            return Some(row);
        }
    }
    rows.get(top)
}

/// What the check found wrong, one line each, and the module graph it built.
struct Verdict {
    problems: Vec<String>,
    graph: BTreeMap<String, BTreeSet<String>>,
}

/// The crate's top modules: what src/lib.rs declares.
fn declared_modules(files: &[(PathBuf, String)]) -> BTreeSet<String> {
    let lib = files.iter().find(|(p, _)| p == Path::new("src/lib.rs")).map(|(_, s)| s.as_str()).unwrap_or_default();
    lib.lines()
        .filter_map(|l| l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod ")))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

/// Every file read: its path and what it names (or why it could not be parsed).
type Read = Vec<(PathBuf, Result<Names, String>)>;

fn read_all(files: &[(PathBuf, String)]) -> Read {
    files.iter().map(|(path, source)| (path.clone(), read_file(path, source))).collect()
}

fn judge(read: &Read, modules: &BTreeSet<String>, doc: &str) -> Verdict {
    let mut problems = Vec::new();
    let rows = match table(doc, modules) {
        Ok(rows) => rows,
        Err(e) => return Verdict { problems: vec![e], graph: BTreeMap::new() },
    };
    for m in modules {
        if !rows.contains_key(m) {
            problems.push(format!("{m}: no row in the table"));
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, names) in read {
        let module = module_of(path);
        let Some(top) = module.first().cloned() else { continue }; // lib.rs declares modules
        // main.rs is the binary, above everything; files build.rs includes are not modules.
        if !modules.contains(&top) {
            continue;
        }
        // `tests.rs` files are compiled only under `#[cfg(test)]` (their `mod` line says so).
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let names = match names {
            Ok(names) => names,
            Err(e) => {
                problems.push(e.clone());
                continue;
            }
        };
        let row = row_of(&rows, path, &top);
        let Some(row) = row else { continue };
        let shown = path.display();
        for used in names.internal.iter().filter_map(|p| p.first()).filter(|m| modules.contains(*m)) {
            if *used == top {
                continue;
            }
            graph.entry(top.clone()).or_default().insert(used.clone());
            if !row.may.contains(used) {
                problems.push(format!("{shown}: uses crate::{used}, which its row does not allow"));
            }
            if let Some(theirs) = rows.get(used)
                && theirs.stage > row.stage
            {
                problems.push(format!(
                    "{shown}: uses crate::{used}, a {} module, from a {} one (up the stages)",
                    STAGES[theirs.stage], STAGES[row.stage]
                ));
            }
        }
        let mut never: BTreeSet<&str> = row.never.iter().map(String::as_str).collect();
        if row.stage <= 1 {
            never.extend(NEVER_IN_CORE);
        }
        for outside in &names.external {
            if never.iter().any(|ban| is_under(outside, ban)) {
                problems.push(format!("{shown}: names {outside}, which its row never allows"));
            }
        }
    }
    // The closure: what each module reaches through any chain of edges.
    for (module, row) in rows.iter().filter(|(m, _)| modules.contains(*m)) {
        let mut seen = BTreeSet::new();
        let mut stack = vec![module.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        for reached in &seen {
            let Some(theirs) = rows.get(reached) else { continue };
            if theirs.stage > row.stage || (row.stage == 1 && theirs.stage > 1) {
                problems.push(format!(
                    "{module} ({}) reaches {reached} ({}) through its imports",
                    STAGES[row.stage], STAGES[theirs.stage]
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    Verdict { problems, graph }
}

/// The strongly connected components of the module graph that hold more than one module.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flatten()).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut components: Vec<BTreeSet<String>> = Vec::new();
    for n in &nodes {
        if components.iter().any(|c| c.contains(*n)) {
            continue;
        }
        let component: BTreeSet<String> = nodes
            .iter()
            .filter(|m| reached[*n].contains(**m) && reached[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        if component.len() > 1 {
            components.push(component);
        }
    }
    components
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Today's files, read once for every test of this file (parsing them all takes seconds in a
/// debug build).
fn today() -> &'static (Vec<(PathBuf, String)>, Read) {
    static TODAY: std::sync::OnceLock<(Vec<(PathBuf, String)>, Read)> = std::sync::OnceLock::new();
    TODAY.get_or_init(|| {
        let files = sources(root());
        let read = read_all(&files);
        (files, read)
    })
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap()
}

#[test]
fn every_file_imports_only_what_its_row_allows_and_only_down_the_stages() {
    let (files, read) = today();
    assert!(files.len() > 100, "{} files", files.len());
    let verdict = judge(read, &declared_modules(files), &architecture());
    if std::env::var_os("LAYERS_DUMP").is_some() {
        for (m, uses) in &verdict.graph {
            eprintln!("{m} -> {}", uses.iter().cloned().collect::<Vec<_>>().join(" "));
        }
    }
    assert!(verdict.problems.is_empty(), "the layers do not hold:\n{}", verdict.problems.join("\n"));
}

#[test]
fn the_module_graph_has_no_cycle_across_stages() {
    let (files, read) = today();
    let modules = declared_modules(files);
    let verdict = judge(read, &modules, &architecture());
    let rows = table(&architecture(), &modules).unwrap();
    let across: Vec<String> = cycles(&verdict.graph)
        .into_iter()
        .filter(|c| c.iter().map(|m| rows.get(m).map(|r| r.stage)).collect::<BTreeSet<_>>().len() > 1)
        .map(|c| c.into_iter().collect::<Vec<_>>().join(" ↔ "))
        .collect();
    assert!(across.is_empty(), "cycles that span stages:\n{}", across.join("\n"));
}

// The four edits an independent review made to a copy of the tree, each of which the old,
// line-based rule let through. Each is applied to today's files and must be refused.

fn with_edit(file: &str, edit: impl Fn(&str) -> String) -> Vec<String> {
    let (files, read) = today();
    let source = &files.iter().find(|(p, _)| p == Path::new(file)).expect("the file exists").1;
    let mut read = read.clone();
    let edited = read.iter_mut().find(|(p, _)| p == Path::new(file)).expect("the file was read");
    edited.1 = read_file(Path::new(file), &edit(source));
    judge(&read, &declared_modules(files), &architecture()).problems
}

#[test]
fn refuses_std_fs_added_to_compile() {
    let problems = with_edit("src/compile/mod.rs", |s| {
        format!("{s}\npub fn sneak() -> Vec<u8> {{ std::fs::read(\"/etc/passwd\").unwrap_or_default() }}\n")
    });
    assert!(problems.iter().any(|p| p.contains("src/compile/mod.rs: names std::fs")), "{problems:#?}");
}

#[test]
fn refuses_observe_in_a_doctor_file_whose_row_does_not_allow_it() {
    let problems =
        with_edit("src/doctor/mod.rs", |s| format!("{s}\n#[allow(unused_imports)]\nuse crate::observe::Observed;\n"));
    assert!(problems.iter().any(|p| p.contains("src/doctor/mod.rs: uses crate::observe")), "{problems:#?}");
}

#[test]
fn refuses_a_super_super_path_up_the_stages() {
    let problems =
        with_edit("src/compile/fleet.rs", |s| format!("{s}\npub fn up() {{ let _ = super::super::commands::run; }}\n"));
    assert!(problems.iter().any(|p| p.contains("src/compile/fleet.rs: uses crate::commands")), "{problems:#?}");
}

#[test]
fn refuses_code_after_a_test_helper_in_the_middle_of_a_file() {
    let problems = with_edit("src/facts/mod.rs", |s| {
        format!(
            "{s}\n#[cfg(test)]\nfn helper() {{}}\n\npub fn after() {{ let _ = crate::observe::Observed::default; }}\n"
        )
    });
    assert!(problems.iter().any(|p| p.contains("src/facts/mod.rs: uses crate::observe")), "{problems:#?}");
}

#[test]
fn test_code_is_left_out_wherever_it_sits() {
    let names = read_file(
        Path::new("src/a/b.rs"),
        "#[cfg(test)] mod tests { use crate::x::Y; }\n#[test] fn t() { crate::w::f(); }\nfn f() { super::c::g(); format!(\"{}\", crate::z::h()); }\n",
    )
    .unwrap();
    let paths: Vec<String> = names.internal.iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["a::c::g", "z::h"]);
}

#[test]
fn outside_names_are_read_from_uses_paths_and_macros() {
    let names = read_file(
        Path::new("src/a.rs"),
        "use std::{fs, process::Command};\nfn f() { let _ = tokio::spawn; let _ = format!(\"{:?}\", std::net::Ipv4Addr::LOCALHOST); }\n",
    )
    .unwrap();
    let outside: Vec<&str> = names.external.iter().map(String::as_str).collect();
    assert_eq!(outside, ["std::fs", "std::net::Ipv4Addr::LOCALHOST", "std::process::Command", "tokio::spawn"]);
    assert!(is_under("std::process::Command", "std::process") && !is_under("std::processes", "std::process"));
}

#[test]
fn a_cycle_is_found_through_a_chain() {
    let graph = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
        ("d".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    let found = cycles(&graph);
    assert_eq!(found, [BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()])]);
}

#[test]
fn the_top_is_not_a_knot() {
    // `cli` defines arguments and runs nothing; `commands` does not name the MCP server that
    // calls it. The binary's main.rs is the one place that names both.
    let (files, read) = today();
    let verdict = judge(read, &declared_modules(files), &architecture());
    let knots = cycles(&verdict.graph);
    assert!(knots.is_empty(), "modules that import each other: {knots:?}");
}

/// The most `Result<_, String>` the crate's own code (tests left out) may hold. A `String`
/// error says nothing a caller can act on: the exit code and the hint follow from an error's
/// type (src/error.rs), so new code returns a typed error. Lower this as sites go; never
/// raise it.
const STRING_ERRORS_AT_MOST: usize = 5;

/// Every `Result<…, String>` written in non-test code of `source` (`std::result::Result`
/// included), as `file: item` (the innermost named item or function it is in).
fn string_errors(relative: &Path, source: &str) -> Vec<String> {
    struct Finder<'a> {
        file: &'a Path,
        within: Vec<String>,
        found: Vec<String>,
    }
    fn item_name(item: &syn::Item) -> Option<String> {
        use syn::Item::*;
        match item {
            Const(i) => Some(i.ident.to_string()),
            Enum(i) => Some(i.ident.to_string()),
            Fn(i) => Some(i.sig.ident.to_string()),
            Mod(i) => Some(i.ident.to_string()),
            Static(i) => Some(i.ident.to_string()),
            Struct(i) => Some(i.ident.to_string()),
            Trait(i) => Some(i.ident.to_string()),
            Type(i) => Some(i.ident.to_string()),
            _ => None,
        }
    }
    impl VisitMut for Finder<'_> {
        fn visit_item_mut(&mut self, item: &mut syn::Item) {
            if is_test_only(item_attrs(item)) {
                return;
            }
            let name = item_name(item);
            self.within.extend(name.clone());
            syn::visit_mut::visit_item_mut(self, item);
            if name.is_some() {
                self.within.pop();
            }
        }
        fn visit_impl_item_fn_mut(&mut self, f: &mut syn::ImplItemFn) {
            if !is_test_only(&f.attrs) {
                self.within.push(f.sig.ident.to_string());
                syn::visit_mut::visit_impl_item_fn_mut(self, f);
                self.within.pop();
            }
        }
        fn visit_stmt_mut(&mut self, stmt: &mut syn::Stmt) {
            if let syn::Stmt::Local(l) = stmt
                && is_test_only(&l.attrs)
            {
                return;
            }
            syn::visit_mut::visit_stmt_mut(self, stmt);
        }
        fn visit_type_path_mut(&mut self, t: &mut syn::TypePath) {
            if let Some(last) = t.path.segments.last()
                && last.ident == "Result"
                && let syn::PathArguments::AngleBracketed(args) = &last.arguments
                && args.args.len() == 2
                && let Some(syn::GenericArgument::Type(syn::Type::Path(error))) = args.args.last()
                && error.qself.is_none()
                && error.path.segments.last().is_some_and(|s| s.ident == "String" && s.arguments.is_none())
            {
                let within = self.within.last().map(String::as_str).unwrap_or("(top)");
                self.found.push(format!("{}: {within}", self.file.display()));
            }
            syn::visit_mut::visit_type_path_mut(self, t);
        }
    }
    let Ok(mut file) = syn::parse_file(source) else { return vec![format!("{}: does not parse", relative.display())] };
    if is_test_only(&file.attrs) || relative.file_name().is_some_and(|n| n == "tests.rs") {
        return Vec::new();
    }
    let mut finder = Finder { file: relative, within: Vec::new(), found: Vec::new() };
    finder.visit_file_mut(&mut file);
    finder.found
}

#[test]
fn errors_are_typed_not_strings() {
    let (files, _) = today();
    let found: Vec<String> = files.iter().flat_map(|(path, source)| string_errors(path, source)).collect();
    assert!(
        found.len() <= STRING_ERRORS_AT_MOST,
        "{} `Result<_, String>` in src (at most {STRING_ERRORS_AT_MOST}; return a typed error):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_string_error_rule_sees_every_spelling_and_skips_tests() {
    let source = "fn a() -> Result<u8, String> { Ok(1) }\n\
                  fn b(f: &dyn Fn(&str) -> std::result::Result<Vec<u8>, std::string::String>) {}\n\
                  fn c() -> Result<BTreeMap<&str, String>> { todo!() }\n\
                  fn d() -> io::Result<String> { todo!() }\n\
                  type E = Option<Result<(), String>>;\n\
                  #[cfg(test)]\nmod tests { fn t() -> Result<(), String> { Ok(()) } }\n\
                  #[test]\nfn u() { let _: Result<(), String> = Ok(()); }\n";
    assert_eq!(string_errors(Path::new("src/a.rs"), source), ["src/a.rs: a", "src/a.rs: b", "src/a.rs: E"]);
    assert!(string_errors(Path::new("src/x/tests.rs"), source).is_empty());
}
