//! `k3d-gpu validate --machines FILE`: many configs, each against the machines it is for, in
//! one process — what the CI recipe (`examples/ci/k3d-gpu-configs.yml`) runs on its
//! `k3dgpu-machines.txt`.
//!
//! The file: one `CONFIG [HOST]` a line, paths relative to the working directory (as the
//! recipe's shell loop read them); HOST is a fixture host directory or a facts/v1 file; a
//! config of an existing cluster stands alone (its `[[nodes]]` name their facts); blank lines
//! and `#` comments (a line's, or the rest of one after a word starting with `#`) are skipped.
//! A line of another shape is a diagnostic at that line, and nothing is validated (exit 1,
//! like a config that does not parse).
//!
//! Each config is read, and its catalog loaded, once for all its lines; each host is read once
//! for all the configs that name it. Results come per config in the file's order, each host's
//! row with the line that asked for it. A pair that cannot be read (a missing config or host)
//! is a failed row and the others still run; the exit code is the worst pair's: 2 unreadable
//! input, 1 a config failed (or is invalid), 0 every pair passed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Serialize;

use super::validate::{HostResult, HostRow, host_rows, table};
use crate::cli::Global;
use crate::config::ConfigError;
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};
use crate::facts::Facts;

/// `--json`'s schema.
pub const SCHEMA: &str = "k3d-gpu.validate-machines/v1";

/// One line of the file: its number (1-based), the config, the host when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub number: usize,
    pub config: String,
    pub host: Option<String>,
}

/// The lines of a machines file, or a diagnostic for each line that is not `CONFIG [HOST]`.
pub fn parse(name: &str, text: &str) -> std::result::Result<Vec<Line>, Vec<ConfigError>> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut offset = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += raw.len();
        let words: Vec<&str> = raw.split_whitespace().take_while(|w| !w.starts_with('#')).collect();
        match words.as_slice() {
            [] => {}
            [config] => lines.push(Line { number: i + 1, config: config.to_string(), host: None }),
            [config, host] => {
                lines.push(Line { number: i + 1, config: config.to_string(), host: Some(host.to_string()) })
            }
            [_, _, third, ..] => {
                // Underline the first word too many.
                let at = start + word_offset(raw, 2);
                errors.push(ConfigError::at(
                    name,
                    text,
                    Some(at..at + third.len()),
                    format!("line {}: {} words; a line is CONFIG [HOST]", i + 1, words.len()),
                    "not expected here",
                    Some(
                        "one config and the fixture host (or facts file) it is for, separated by spaces; a path \
                         cannot hold a space; `#` starts a comment"
                            .into(),
                    ),
                ));
            }
        }
    }
    if errors.is_empty() { Ok(lines) } else { Err(errors) }
}

/// Byte offset of the `n`th (0-based) whitespace-separated word of `line`.
fn word_offset(line: &str, n: usize) -> usize {
    let mut seen = 0;
    let mut in_word = false;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            in_word = false;
        } else if !in_word {
            if seen == n {
                return i;
            }
            seen += 1;
            in_word = true;
        }
    }
    line.len()
}

/// One config's results: its rows (each host with its line), and what went wrong reading it.
struct ConfigResult {
    config: String,
    rows: Vec<HostResult>,
    /// The line of each row.
    row_lines: Vec<usize>,
    diagnostics: Vec<(String, Vec<miette::Report>)>,
    /// The config itself could not be read or loaded (then there are no rows).
    error: Option<Error>,
    /// Lines of the config, for its heading.
    lines: Vec<usize>,
}

impl ConfigResult {
    fn push(&mut self, line: usize, row: HostResult) {
        self.row_lines.push(line);
        self.rows.push(row);
    }

    /// A pair that was not compiled: a failed row, and its reason as the row's diagnostic
    /// (`code`: `input` for a host that cannot be read, `usage` for a line of the wrong kind).
    fn fail(&mut self, line: usize, host: &str, code: &'static str, text: String) {
        let report = miette::Report::new(miette::MietteDiagnostic::new(text.clone()).with_code(code));
        self.diagnostics.push((host.to_string(), vec![report]));
        self.push(line, failed_row(host, text));
    }
}

/// Facts per host path, each read once.
type HostCache = HashMap<String, std::result::Result<Rc<Facts>, Rc<Error>>>;

fn host_facts(global: &Global, cache: &mut HostCache, host: &str) -> std::result::Result<Rc<Facts>, Rc<Error>> {
    if let Some(found) = cache.get(host) {
        return found.clone();
    }
    let read = || -> Result<Facts> {
        let filter = global.vendor_filter()?;
        let path = Path::new(host);
        if path.is_file() {
            super::facts_from_file(path, &filter, global.vendors.is_some())
        } else {
            super::detect_facts(&super::open_root(path)?, &filter)
        }
    };
    // Kept, shared: the same unreadable host fails each pair that names it, alike.
    let outcome = read().map(Rc::new).map_err(Rc::new);
    cache.insert(host.to_string(), outcome.clone());
    outcome
}

/// An error as the one line a row shows: its message and help.
fn one_line_error(e: &Error) -> String {
    use miette::Diagnostic;
    match e.help() {
        Some(help) => format!("{e} ({help})"),
        None => e.to_string(),
    }
}

fn failed_row(host: &str, text: String) -> HostResult {
    HostResult {
        host: host.to_string(),
        ok: false,
        active: Vec::new(),
        resources: 0,
        errors: vec![text],
        warnings: Vec::new(),
    }
}

/// Validates every pair of the file. `global` carries --stdlib, --vendors and --json.
pub fn run(global: &Global, machines: &Path) -> Result<u8> {
    let text = crate::input_file::read_text(machines).map_err(|reason| Error::Input {
        what: "machines file",
        path: machines.display().to_string(),
        reason: reason.to_string(),
        help: Some("one `CONFIG [HOST]` a line (examples/ci/k3d-gpu-configs.yml)".into()),
    })?;
    let name = machines.display().to_string();
    let lines =
        parse(&name, &text).map_err(|errors| Error::Invalid(errors.into_iter().map(miette::Report::new).collect()))?;

    // Configs in the order the file first names them, each with its lines.
    let mut order: Vec<String> = Vec::new();
    let mut by_config: HashMap<String, Vec<Line>> = HashMap::new();
    for line in lines {
        if !by_config.contains_key(&line.config) {
            order.push(line.config.clone());
        }
        by_config.entry(line.config.clone()).or_default().push(line);
    }
    let mut cache = HostCache::new();
    let mut results = Vec::new();
    let mut exit = EXIT_OK;
    for config in order {
        let lines = by_config.remove(&config).unwrap_or_default();
        let result = one_config(global, &config, &lines, &mut cache);
        exit = exit.max(match &result.error {
            Some(e) => e.exit_code(),
            None if result.rows.iter().any(|r| !r.ok) => EXIT_FAILED,
            None => EXIT_OK,
        });
        results.push(result);
    }
    // A host that could not be read is unreadable input, whatever else passed.
    if cache.values().any(|r| r.is_err()) {
        exit = exit.max(crate::error::EXIT_USAGE);
    }
    print(global, &name, &results, exit);
    Ok(exit)
}

fn one_config(global: &Global, config: &str, lines: &[Line], cache: &mut HostCache) -> ConfigResult {
    let numbers = lines.iter().map(|l| l.number).collect();
    let mut result = ConfigResult {
        config: config.to_string(),
        rows: Vec::new(),
        row_lines: Vec::new(),
        diagnostics: Vec::new(),
        error: None,
        lines: numbers,
    };
    let for_config =
        Global { config: Some(PathBuf::from(config)), root: Vec::new(), facts: Vec::new(), ..global.clone() };
    let loaded = super::load_config(&for_config)
        .and_then(|inputs| super::load_catalog(&for_config, &inputs).map(|catalog| (inputs, catalog)));
    let (inputs, catalog) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            result.error = Some(e);
            return result;
        }
    };
    result.config = inputs.name.clone();
    if super::fleet::is_fleet(&inputs) {
        // Validated at its first line alone; the same fleet on another line, once is enough.
        let mut unvalidated = Some(inputs);
        for line in lines {
            match &line.host {
                Some(host) => result.fail(
                    line.number,
                    host,
                    "usage",
                    "this config is an existing cluster's: its [[nodes]] name each machine's facts; put it on a line \
                     of its own"
                        .into(),
                ),
                None => {
                    let Some(inputs) = unvalidated.take() else { continue };
                    match super::validate::fleet(&for_config, inputs, &catalog) {
                        Ok(v) => {
                            for row in v.hosts {
                                result.push(line.number, row);
                            }
                            result.diagnostics.extend(v.diagnostics);
                        }
                        Err(e) => result.error = Some(e),
                    }
                }
            }
        }
        return result;
    }
    for line in lines {
        let Some(host) = &line.host else {
            result.fail(
                line.number,
                "(no host)",
                "usage",
                "a k3d config is checked against the machine it is for: add its fixture host (`k3d-gpu facts \
                 capture --out DIR`) or facts file after the config"
                    .into(),
            );
            continue;
        };
        match host_facts(global, cache, host) {
            Ok(facts) => {
                // A fixture host's tree, where `[cluster] volumes` sources are checked as `plan`
                // checks them; a facts file has none, and the row says so.
                let path = Path::new(host);
                let root = (!path.is_file()).then(|| super::open_root(path).ok()).flatten();
                let (row, reports) = super::validate::against(&inputs, &catalog, host, &facts, root.as_ref());
                result.push(line.number, row);
                result.diagnostics.extend(reports.map(|r| (host.clone(), r)));
            }
            Err(e) => result.fail(line.number, host, "input", one_line_error(&e)),
        }
    }
    result
}

fn print(global: &Global, name: &str, results: &[ConfigResult], exit: u8) {
    if global.json {
        /// A host's validate/v1 row with the line that asked for it.
        #[derive(Serialize)]
        struct Row<'a> {
            line: usize,
            #[serde(flatten)]
            row: HostRow<'a>,
        }
        #[derive(Serialize)]
        struct Config<'a> {
            config: &'a str,
            lines: &'a [usize],
            hosts: Vec<Row<'a>>,
            /// Why the config itself could not be validated (empty when it was).
            errors: Vec<super::json::Diagnostic>,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            schema: &'static str,
            machines: &'a str,
            exit_code: u8,
            configs: Vec<Config<'a>>,
        }
        let configs = results
            .iter()
            .map(|c| Config {
                config: &c.config,
                lines: &c.lines,
                hosts: c
                    .row_lines
                    .iter()
                    .zip(host_rows(&c.rows, &c.diagnostics))
                    .map(|(line, row)| Row { line: *line, row })
                    .collect(),
                errors: c.error.as_ref().map(super::json::diagnostics).unwrap_or_default(),
            })
            .collect();
        super::print_bytes(&crate::canonical::to_bytes(&Doc {
            schema: SCHEMA,
            machines: name,
            exit_code: exit,
            configs,
        }));
        return;
    }
    let mut out = String::new();
    let mut pairs = 0;
    let mut failed = 0;
    for c in results {
        let lines: Vec<String> = c.lines.iter().map(usize::to_string).collect();
        let at = format!("{name} line {}", lines.join(", "));
        match &c.error {
            Some(e) => {
                out.push_str(&format!("config {} ({at}): FAIL, {}\n\n", c.config, one_line_error(e)));
                pairs += c.lines.len();
                failed += c.lines.len();
            }
            None => {
                out.push_str(&format!("# {at}\n"));
                out.push_str(&table(&c.config, &c.rows));
                out.push('\n');
                pairs += c.rows.len();
                failed += c.rows.iter().filter(|r| !r.ok).count();
            }
        }
    }
    out.push_str(&format!("{} config(s), {pairs} host(s), {failed} failed\n", results.len()));
    super::print_bytes(crate::escape::assembled(&out).as_bytes());
    for c in results {
        if let Some(e) = &c.error {
            crate::stderrln!("\n{}:", crate::escape::one_line(&c.config));
            match e {
                Error::Invalid(reports) => {
                    for report in reports {
                        crate::stderrln!("{}", crate::escape::rendered_diagnostic(&format!("{report:?}")));
                    }
                }
                other => crate::stderrln!("{}", crate::escape::one_line(&one_line_error(other))),
            }
        }
        for (host, reports) in &c.diagnostics {
            crate::stderrln!("\n{} on {}:", crate::escape::one_line(&c.config), crate::escape::one_line(host));
            for report in reports {
                crate::stderrln!("{}", crate::escape::rendered_diagnostic(&format!("{report:?}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_and_blank_lines() {
        let text = "# machines\n\nmachines/a.toml   hosts/a\n  fleet/k3dgpu.toml # the lab\nb.toml h # c d\n";
        let lines = parse("m.txt", text).unwrap();
        assert_eq!(
            lines,
            vec![
                Line { number: 3, config: "machines/a.toml".into(), host: Some("hosts/a".into()) },
                Line { number: 4, config: "fleet/k3dgpu.toml".into(), host: None },
                Line { number: 5, config: "b.toml".into(), host: Some("h".into()) },
            ]
        );
    }

    #[test]
    fn a_line_of_three_words_is_refused_at_its_line() {
        let errors = parse("m.txt", "a.toml h\nb.toml h extra\nc.toml\nd e f g\n").unwrap_err();
        assert_eq!(errors.len(), 2);
        let d = crate::commands::json::diagnostic(&errors[0], "x");
        assert_eq!((d.line, d.column), (Some(2), Some(10)), "{d:?}");
        assert!(d.message.starts_with("line 2: 3 words"), "{}", d.message);
        let d = crate::commands::json::diagnostic(&errors[1], "x");
        assert_eq!((d.line, d.column), (Some(4), Some(5)), "{d:?}");
    }
}
