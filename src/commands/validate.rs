//! `k3d-gpu validate`: the config against one or many hosts, a row per host, every error
//! rendered against the config. What CI runs.

use std::fmt::Write;

use serde::Serialize;

use super::inputs::compile_diagnostics;
use crate::cli::Global;
use crate::compile::{self, Warning};
use crate::error::{EXIT_FAILED, EXIT_OK, Result};
use crate::facts::Facts;
use crate::host::HostRoot;

#[derive(Serialize)]
pub(crate) struct HostResult {
    pub host: String,
    pub ok: bool,
    pub active: Vec<String>,
    pub resources: usize,
    /// The errors as one line each (the MCP tool's); `validate --json` prints diagnostics.
    #[serde(skip)]
    pub errors: Vec<String>,
    pub warnings: Vec<Warning>,
}

/// The config checked against every host given: a result per host, and each failing host's
/// diagnostics (rendered by the CLI, summarised by the MCP server).
pub(crate) struct Validation {
    pub config: String,
    pub hosts: Vec<HostResult>,
    pub diagnostics: Vec<(String, Vec<miette::Report>)>,
}

pub fn run(global: &Global) -> Result<u8> {
    let Validation { config, hosts: results, diagnostics } = check(global)?;
    let failed = results.iter().any(|r| !r.ok);
    if global.json {
        #[derive(Serialize)]
        struct Doc<'a> {
            schema: &'static str,
            config: &'a str,
            hosts: Vec<HostRow<'a>>,
        }
        let hosts = host_rows(&results, &diagnostics);
        super::print_bytes(&crate::canonical::to_bytes(&Doc { schema: SCHEMA, config: &config, hosts }));
    } else {
        super::print_bytes(crate::escape::assembled(&table(&config, &results)).as_bytes());
        for (host, reports) in diagnostics {
            crate::stderrln!("\n{}:", crate::escape::one_line(&host.to_string()));
            for report in reports {
                crate::stderrln!("{}", crate::escape::rendered_diagnostic(&format!("{report:?}")));
            }
        }
    }
    Ok(if failed { EXIT_FAILED } else { EXIT_OK })
}

pub(crate) const SCHEMA: &str = "k3d-gpu.validate/v1";

/// A host's result with its errors as diagnostics (code, message, file, line, column): an
/// element of `hosts` in validate/v1.
#[derive(Serialize)]
pub(crate) struct HostRow<'a> {
    #[serde(flatten)]
    result: &'a HostResult,
    errors: Vec<super::json::Diagnostic>,
}

/// validate/v1's `hosts`: each result with the diagnostics filed under its name.
pub(crate) fn host_rows<'a>(
    results: &'a [HostResult],
    diagnostics: &'a [(String, Vec<miette::Report>)],
) -> Vec<HostRow<'a>> {
    results
        .iter()
        .map(|result| HostRow {
            result,
            errors: diagnostics
                .iter()
                .filter(|(host, _)| *host == result.host)
                .flat_map(|(_, reports)| reports.iter().map(|r| super::json::diagnostic(r.as_ref(), "compile")))
                .collect(),
        })
        .collect()
}

/// Compiles the config for each host (`--root`/`--facts`, each may repeat; this machine when
/// neither is given). Shared with the MCP server.
pub(crate) fn check(global: &Global) -> Result<Validation> {
    let inputs = super::load_config(global)?;
    let catalog = super::load_catalog(global, &inputs)?;
    if super::fleet::is_fleet(&inputs) {
        return fleet(global, inputs, &catalog);
    }
    let filter = global.vendor_filter()?;
    // Each host's facts, and its file tree where there is one (a saved facts document has none).
    let mut hosts: Vec<(String, Facts, Option<HostRoot>)> = Vec::new();
    for root in &global.root {
        let host = super::open_root(root)?;
        hosts.push((root.display().to_string(), super::detect_facts(&host, &filter)?, Some(host)));
    }
    for file in &global.facts {
        let facts = super::facts_from_file(file, &filter, global.vendors.is_some())?;
        hosts.push((file.display().to_string(), facts, None));
    }
    if hosts.is_empty() {
        let host = super::open_root(std::path::Path::new("/"))?;
        hosts.push(("/ (this machine)".into(), super::detect_facts(&host, &filter)?, Some(host)));
    }

    let mut results = Vec::new();
    let mut diagnostics = Vec::new();
    for (name, facts, root) in &hosts {
        let (result, reports) = against(&inputs, &catalog, name, facts, root.as_ref());
        results.push(result);
        diagnostics.extend(reports.map(|r| (name.clone(), r)));
    }
    Ok(Validation { config: inputs.name, hosts: results, diagnostics })
}

/// The code of the warning that says `[cluster] volumes` could not be checked on this host.
pub const VOLUMES_UNCHECKED: &str = "volume-sources-unchecked";

/// The config compiled for one host: its row, and its diagnostics when it fails. Shared with
/// `validate --machines`. `root` is the host's file tree: with it, `[cluster] volumes` sources
/// are checked as `plan` and `images` check them; without it (a saved facts document, which
/// records no host directories) the row says they were left to the machine.
pub(crate) fn against(
    inputs: &super::Inputs,
    catalog: &crate::catalog::Catalog,
    name: &str,
    facts: &Facts,
    root: Option<&HostRoot>,
) -> (HostResult, Option<Vec<miette::Report>>) {
    let volumes = inputs.config.cluster.volumes.len();
    let (volume_texts, volume_reports, config) = match root {
        Some(host) if volumes > 0 => {
            let (reports, config) = super::inputs::volume_sources(inputs, host);
            (reports.iter().map(|r| r.to_string()).collect::<Vec<String>>(), reports, std::borrow::Cow::Owned(config))
        }
        _ => (Vec::new(), Vec::new(), std::borrow::Cow::Borrowed(&inputs.config)),
    };
    let unchecked = (root.is_none() && volumes > 0).then(|| Warning {
        code: VOLUMES_UNCHECKED.into(),
        text: format!(
            "[cluster] volumes: {volumes} source(s) not checked here: a facts document records no host directories; `k3d-gpu plan` on the machine checks that each exists"
        ),
        key: Some("cluster.volumes".into()),
    });
    match compile::compile(&config, facts, catalog) {
        Ok(graph) if volume_reports.is_empty() => (
            HostResult {
                host: name.to_string(),
                ok: true,
                active: active(facts, &inputs.config),
                resources: graph.index.len(),
                errors: Vec::new(),
                warnings: graph.warnings.iter().cloned().chain(unchecked).collect(),
            },
            None,
        ),
        Ok(_) => (
            HostResult {
                host: name.to_string(),
                ok: false,
                active: active(facts, &inputs.config),
                resources: 0,
                errors: volume_texts,
                warnings: Vec::new(),
            },
            Some(volume_reports),
        ),
        Err(errors) => {
            let texts =
                volume_texts.into_iter().chain(errors.iter().map(|e| format!("{} [{}]", e.message, e.code))).collect();
            let reports = volume_reports.into_iter().chain(compile_diagnostics(inputs, errors)).collect();
            (
                HostResult {
                    host: name.to_string(),
                    ok: false,
                    active: active(facts, &inputs.config),
                    resources: 0,
                    errors: texts,
                    warnings: Vec::new(),
                },
                Some(reports),
            )
        }
    }
}

/// An existing cluster: every node's facts at once, compiled together (one graph), a row per
/// node. An error of one node is on its row; an error of the fleet as a whole is on every row.
pub(crate) fn fleet(global: &Global, inputs: super::Inputs, catalog: &crate::catalog::Catalog) -> Result<Validation> {
    let nodes = super::fleet::load_nodes(global, &inputs)?;
    let outcome = compile::fleet::compile(&inputs.config, &super::fleet::fleet_nodes(&inputs, &nodes), catalog);
    let mut results = Vec::new();
    let mut diagnostics = Vec::new();
    match outcome {
        Ok(graph) => {
            // What the fleet puts on each node: its labels, annotations and checks (one pass
            // over the graph, not one per node).
            let mut per_node: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
            for r in graph.resources() {
                if let Some(node) = r.spec.get("node").and_then(|n| n.as_str()) {
                    *per_node.entry(node).or_default() += 1;
                }
            }
            // A warning about some nodes is on each of their rows; one about the fleet, on all.
            let about: Vec<(&Warning, Option<std::collections::HashSet<&str>>)> = graph
                .warnings
                .iter()
                .map(|w| (w, compile::fleet::warning_nodes(w).map(|on| on.into_iter().collect())))
                .collect();
            for (name, facts) in &nodes {
                let resources = per_node.get(name.as_str()).copied().unwrap_or(0);
                let warnings = about
                    .iter()
                    .filter(|(_, on)| on.as_ref().is_none_or(|on| on.contains(name.as_str())))
                    .map(|(w, _)| (*w).clone())
                    .collect();
                results.push(HostResult {
                    host: name.clone(),
                    ok: true,
                    active: active(facts, &inputs.config),
                    resources,
                    errors: Vec::new(),
                    warnings,
                });
            }
        }
        Err(errors) => {
            // Each error on its node's row (`node NAME: …`); one about the fleet, on every row;
            // in the compile's order. One pass over the errors, not one per node.
            let texts: Vec<String> = errors.iter().map(|e| format!("{} [{}]", e.message, e.code)).collect();
            let mut fleet_wide = Vec::new();
            let mut by_node: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
            for (i, e) in errors.iter().enumerate() {
                match e.message.strip_prefix("node ") {
                    Some(rest) => {
                        if let Some((node, _)) = rest.split_once(": ") {
                            by_node.entry(node).or_default().push(i);
                        }
                    }
                    None => fleet_wide.push(i),
                }
            }
            for (name, facts) in &nodes {
                let own = by_node.get(name.as_str()).map(Vec::as_slice).unwrap_or_default();
                let mut rows: Vec<usize> = own.iter().chain(&fleet_wide).copied().collect();
                rows.sort_unstable();
                let texts: Vec<String> = rows.into_iter().map(|i| texts[i].clone()).collect();
                results.push(HostResult {
                    host: name.clone(),
                    ok: texts.is_empty(),
                    active: active(facts, &inputs.config),
                    resources: 0,
                    errors: texts,
                    warnings: Vec::new(),
                });
            }
            diagnostics.push(("fleet".to_string(), compile_diagnostics(&inputs, errors)));
        }
    }
    Ok(Validation { config: inputs.name, hosts: results, diagnostics })
}

fn active(facts: &Facts, config: &crate::config::Config) -> Vec<String> {
    compile::active_vendors(config, facts).iter().map(|d| d.vendor.to_string()).collect()
}

/// The table: a row per host, each warning once (summarised, `compile::warnings`): on its
/// host's row, or, when every host of several has it, once on a row of its own below them.
pub(crate) fn table(config: &str, results: &[HostResult]) -> String {
    use crate::table::{column_width, pad};
    const EVERY: &str = "(every host)";
    let common: Vec<&Warning> = match results {
        [first, rest @ ..] if !rest.is_empty() && results.iter().all(|r| r.ok) => {
            first.warnings.iter().filter(|w| rest.iter().all(|r| r.warnings.contains(w))).collect()
        }
        _ => Vec::new(),
    };
    let mut width = column_width(results.iter().map(|r| r.host.as_str()), 4);
    if !common.is_empty() {
        width = width.max(EVERY.len());
    }
    let blank = pad("", width);
    let mut out =
        format!("config {config}\n\n{}  {:<6}  {:>9}  active vendors\n", pad("HOST", width), "RESULT", "RESOURCES");
    for r in results {
        let result = if r.ok { "ok" } else { "FAIL" };
        let resources = if r.ok { r.resources.to_string() } else { "-".into() };
        let _ = writeln!(out, "{}  {result:<6}  {resources:>9}  {}", pad(&r.host, width), r.active.join(" "));
        for w in compile::warnings::summarised(r.warnings.iter().filter(|w| !common.contains(w))) {
            let _ = writeln!(out, "{blank}  warn    {}", w.text);
        }
        for e in &r.errors {
            let _ = writeln!(out, "{blank}  error   {e}");
        }
    }
    for w in compile::warnings::summarised(common) {
        let _ = writeln!(out, "{}  warn    {}", pad(EVERY, width), w.text);
    }
    let failed = results.iter().filter(|r| !r.ok).count();
    let _ = writeln!(out, "\n{} host(s), {failed} failed", results.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> HostResult {
        HostResult {
            host: name.into(),
            ok: true,
            active: vec!["intel".into()],
            resources: 7,
            errors: vec![],
            warnings: vec![],
        }
    }

    #[test]
    fn the_result_column_lines_up_under_names_that_are_not_ascii() {
        let text = table("k3dgpu.toml", &[host("desktop"), host("büro-nuc"), host("研究室")]);
        let columns: Vec<usize> = text
            .lines()
            .filter(|l| l.contains(" ok ") || l.contains("RESULT"))
            .map(|l| crate::table::width(&l[..l.find(if l.contains("RESULT") { "RESULT" } else { "ok" }).unwrap()]))
            .collect();
        assert_eq!(columns.len(), 4, "{text}");
        assert!(columns.iter().all(|&c| c == columns[0]), "columns {columns:?} in\n{text}");
    }
}
