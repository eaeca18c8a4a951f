//! Command implementations: the edge that loads inputs, calls the pure stages and prints.
//! stdout carries data (tables, JSON); stderr carries progress and diagnostics.

pub(crate) mod agent_status;
pub(crate) mod apply;
pub(crate) mod audit;
pub(crate) mod cluster_health;
mod completions;
mod detect;
mod doctor;
mod facts;
mod fleet;
mod flux;
pub(crate) mod graph;
mod host_setup;
mod images;
mod init;
pub(crate) mod inputs;
pub mod json;
mod logs;
mod machines;
pub(crate) mod made_from;
mod man_sections;
pub(crate) mod plan;
mod report;
mod schema;
mod show;
mod test;
pub(crate) mod validate;
mod version;

use inputs::{Inputs, load_catalog, load_config};

pub use detect::render as render_detect;

use std::path::Path;

use crate::cli::{Cli, Command, Global};
use crate::error::{Error, Result};
use crate::facts::{Facts, VendorFilter};
use crate::host::HostRoot;

/// Runs the parsed command. `serve_mcp` runs `k3d-gpu mcp`: the server sits above the
/// commands (it calls their cores), so the binary hands it in rather than this module naming
/// it.
pub fn run(cli: Cli, serve_mcp: fn(&Global, &crate::cli::McpArgs) -> Result<u8>) -> Result<u8> {
    let global = cli.command.global();
    let global = &global;
    reference_variable_notes(global.json);
    match &cli.command {
        Command::Detect(_) => detect::run(global),
        Command::Doctor(a) => doctor::run(global, &a.args),
        Command::HostSetup(a) => host_setup::run(global, &a.args),
        Command::Facts(args) => facts::run(global, args),
        Command::Init(a) => init::run(global, &a.args),
        Command::Validate(a) => match &a.machines {
            Some(file) => machines::run(global, file),
            None => validate::run(global),
        },
        Command::Graph(_) => graph::run(global),
        Command::Render(a) => graph::render(global, &a.args),
        Command::Schema(args) => schema::run(args),
        Command::Plan(a) => plan::run(global, &a.args),
        Command::Images(args) => images::run(global, args),
        Command::Audit(a) => audit::run(global, &a.args),
        Command::Logs(a) => logs::run(global, &a.args),
        Command::Report(a) => report::run(global, &a.args),
        Command::Observe(_) => plan::observe_command(global),
        Command::Agent(args) => match &args.command {
            Some(crate::cli::AgentCommand::Status(status)) => agent_status::run(global, status),
            None => graph::agent(global, args.model_size),
        },
        Command::Apply(a) => apply::run(global, &a.args),
        Command::Show(a) => show::run(global, &a.plan_file),
        Command::Destroy(a) => apply::destroy(global, &a.args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
        Command::Version(_) => version::run(global.json),
        Command::Mcp(a) => serve_mcp(global, &a.args),
        Command::Test(a) => test::run(global, &a.args),
    }
}

/// The exit code of a run, after rendering its error once: as text on stderr, and also as one
/// JSON object on stdout when `--json` was asked for.
pub fn exit_code(result: Result<u8>, json: bool) -> u8 {
    match result {
        Ok(code) => code,
        Err(error) => {
            let code = error.exit_code();
            // Asked for JSON: one object on stdout whatever happened (the text still goes to
            // stderr). A failed check has printed its own document already.
            if json && !matches!(error, Error::CheckFailed(_)) {
                print_bytes(&json::error_document(&error));
            }
            match error {
                Error::CheckFailed(_) => {}
                // Diagnostics quote names and lines from untrusted files: escaped on the way out.
                Error::Invalid(reports) => {
                    for report in reports {
                        crate::stderrln!("{}", crate::escape::rendered_diagnostic(&format!("{report:?}")));
                    }
                }
                other => {
                    crate::stderrln!(
                        "{}",
                        crate::escape::rendered_diagnostic(&format!("{:?}", miette::Report::new(other)))
                    )
                }
            }
            code
        }
    }
}

/// A note on stderr for each of the reference launcher's variables that is set: k3d-gpu
/// reads none of them, and without a word a user would think `K3D_GPU_CLUSTER=lab` took
/// effect. Only the name is printed, never the value.
fn reference_variable_notes(json: bool) {
    let mut names: Vec<String> =
        std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).filter(|k| k.starts_with("K3D_GPU_")).collect();
    names.sort();
    for name in names {
        let Some(here) = crate::config::env::replacement(&name) else { continue };
        let text = format!("{name} is set, but k3d-gpu does not read it; instead: {here} (docs/config.md)");
        if json {
            crate::stderrln!("{}", serde_json::json!({ "event": "note", "text": text }));
        } else {
            crate::stderrln!("note: {text}");
        }
    }
}

/// Opens the host root named by `--root` (default `/`).
pub fn open_host(global: &Global) -> Result<HostRoot> {
    if global.root.len() > 1 {
        return Err(Error::Usage {
            message: "this command reads one host; --root was given more than once".into(),
            help: Some("`validate` takes several".into()),
        });
    }
    open_root(global.root.first().map_or(Path::new("/"), |p| p.as_path()))
}

/// What every Linux host has; a root without them is a typo or an empty directory, not a
/// host with 0 CPUs, and reading on would report a healthy, empty machine.
const HOST_BASICS: [&str; 2] = ["/proc/cpuinfo", "/sys/devices/system/cpu"];

pub fn open_root(root: &Path) -> Result<HostRoot> {
    let input = |reason: String| Error::Input {
        what: "host root",
        path: root.display().to_string(),
        reason,
        help: Some("--root takes a fixture host directory (see docs/fixture-hosts.md)".into()),
    };
    let host = HostRoot::open(root).map_err(|e| input(e.to_string()))?;
    let missing: Vec<&str> = HOST_BASICS.into_iter().filter(|p| !host.exists(p).unwrap_or(false)).collect();
    if !missing.is_empty() {
        return Err(input(format!("not a host: it has no {}", missing.join(" and no "))));
    }
    Ok(host)
}

/// The facts for this invocation: a saved document (`--facts`) or a fresh detection.
pub fn load_facts(global: &Global) -> Result<Facts> {
    let filter = global.vendor_filter()?;
    if global.facts.len() > 1 {
        return Err(Error::Usage {
            message: "this command reads one host; --facts was given more than once".into(),
            help: Some("`validate` takes several".into()),
        });
    }
    // Only `validate` checks several hosts; here both would leave one silently unused.
    if !global.facts.is_empty() && !global.root.is_empty() {
        return Err(Error::Usage {
            message: "this command reads one host; give --root or --facts, not both".into(),
            help: Some("`validate` takes both, each more than once".into()),
        });
    }
    if let Some(path) = global.facts.first() {
        return facts_from_file(path, &filter, global.vendors.is_some());
    }
    let host = open_host(global)?;
    detect_facts(&host, &filter)
}

/// Detection on `host`, refused (exit 2) when a device name it found is not in the kernel's
/// format (`facts::ids`): a fixture host's directory named `0000:00:02.0;curl …|sh` is not a
/// PCI device, and its name must not reach a fix.
pub fn detect_facts(host: &crate::host::HostRoot, filter: &VendorFilter) -> Result<Facts> {
    let (inventory, read_findings) = crate::detect::inventory(host);
    let facts = crate::facts::build(one_line_host(inventory), one_line_findings(read_findings), filter);
    match crate::facts::ids::check(&facts.host) {
        None => Ok(facts),
        Some(problem) => Err(Error::Input {
            what: "host",
            path: host.root().display().to_string(),
            reason: format!("{problem}, so it is not a name the kernel gives"),
            help: Some("a fixture host mirrors sysfs: name each device as the kernel does".into()),
        }),
    }
}

/// A saved facts document, with `--vendors` applied when it was given (`vendors_given`) and
/// differs from the filter the document was made with.
pub fn facts_from_file(path: &Path, filter: &VendorFilter, vendors_given: bool) -> Result<Facts> {
    let saved = read_facts_file(path)?;
    // Without --vendors the saved document stands as it was made.
    if !vendors_given || saved.vendor_filter == *filter {
        return Ok(saved);
    }
    // Re-apply a different filter to the saved inventory; only the findings met while
    // reading the host carry over, the rest are derived again.
    let read_findings = saved.findings.into_iter().filter(|f| f.code.starts_with("host-")).collect();
    Ok(crate::facts::build(saved.host, read_findings, filter))
}

/// A saved facts/v1 document: its device names checked against the kernel's formats
/// (`facts::ids`; refused otherwise, exit 2), then the document built again from its host
/// inventory. Everything derived (vendors, labels, targets, findings and their fixes) is
/// computed here, never taken from the file: a `fix` in it (`curl … | sudo sh`) is not ours.
/// Of its findings only those met while reading the host (`host-*`) carry over, with our
/// own fix for their code.
pub fn read_facts_file(path: &Path) -> Result<Facts> {
    const HELP: &str = "write one with `k3d-gpu facts --out FILE`";
    let saved: Facts = read_document(path, "facts document", crate::facts::SCHEMA, HELP)?;
    if let Some(problem) = crate::facts::ids::check(&saved.host) {
        return Err(Error::Input {
            what: "facts document",
            path: path.display().to_string(),
            reason: format!("host.{problem}, so it is not a name the kernel gives"),
            help: Some(HELP.into()),
        });
    }
    let read_findings = saved
        .findings
        .into_iter()
        .filter(|f| f.code.starts_with("host-"))
        .map(|mut f| {
            f.fix = crate::detect::reader::fix_for(&f.code).map(str::to_string);
            f
        })
        .collect();
    Ok(crate::facts::build(one_line_host(saved.host), one_line_findings(read_findings), &saved.vendor_filter))
}

/// A host inventory with every string in it (and every map key) made one escaped line
/// (`escape::one_line`): a host's files and a facts document are outside text, and a value
/// read there (a CPU model, a firmware version, a zone name) is later written into detect's
/// and doctor's lines, a finding, a fix. A kernel attribute is one line without control
/// characters, so a real host reads the same; a newline or an escape sequence in one is shown
/// as `\x0a`, `\x1b` and cannot start a line of its own. Done once here, where the inventory
/// comes in, so no renderer has to remember it.
fn one_line_host(host: crate::facts::Host) -> crate::facts::Host {
    use std::borrow::Cow;
    /// Escapes every string and key of `value` in place; whether any changed. A map is
    /// rebuilt only when one of its keys needs escaping: a real host's inventory is one line
    /// throughout, and rebuilding every map and parsing the result back was a tenth of `facts`.
    fn walk(value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::String(s) => match crate::escape::one_line(s) {
                Cow::Owned(o) => {
                    *s = o;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            serde_json::Value::Array(items) => items.iter_mut().fold(false, |changed, v| walk(v) | changed),
            serde_json::Value::Object(map) => {
                let values_changed = map.values_mut().fold(false, |changed, v| walk(v) | changed);
                let keys_change = map.keys().any(|k| matches!(crate::escape::one_line(k), Cow::Owned(_)));
                if keys_change {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, v)| (crate::escape::one_line(&k).into_owned(), v))
                        .collect();
                }
                values_changed || keys_change
            }
            _ => false,
        }
    }
    let Ok(mut value) = serde_json::to_value(&host) else { return host };
    if !walk(&mut value) {
        return host;
    }
    serde_json::from_value(value).unwrap_or(host)
}

/// The findings met while reading a host, their text and evidence one escaped line each
/// (evidence quotes the host's files).
fn one_line_findings(findings: Vec<crate::facts::Finding>) -> Vec<crate::facts::Finding> {
    findings
        .into_iter()
        .map(|mut f| {
            f.text = crate::escape::one_line(&f.text).into_owned();
            f.evidence = crate::escape::one_line(&f.evidence).into_owned();
            f
        })
        .collect()
}

/// A saved JSON document of ours (facts/v1, observed/v1): read bounded, parsed, and its
/// `schema` checked, with errors that say which file and what to do.
pub fn read_document<T: serde::de::DeserializeOwned + Document>(
    path: &Path,
    what: &'static str,
    schema: &str,
    help: &str,
) -> Result<T> {
    let input =
        |reason: String| Error::Input { what, path: path.display().to_string(), reason, help: Some(help.to_string()) };
    let bytes = crate::input_file::read_bytes(path).map_err(|e| input(e.to_string()))?;
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        // Checked here because serde also reads a struct from an array of its fields.
        return Err(input(format!("not a JSON object with a schema key (expected {schema:?})")));
    }
    // The typed parse straight from the bytes (a `serde_json::Value` of the whole document
    // in between would hold a second, larger copy of it: an observed document of 100k
    // objects is 26 MB of text, ten times that as a tree). A document that parses and says
    // its schema is done: reading the schema key alone first was a second pass over all of
    // it. Anything else is read for its schema before its typed error, so a document of
    // another kind is named as such rather than by its first field that does not fit.
    let parsed = serde_json::from_slice::<T>(&bytes);
    if let Ok(document) = &parsed
        && document.schema() == Some(schema)
    {
        return parsed.map_err(|e| input(e.to_string()));
    }
    let found = serde_json::from_slice::<SchemaOnly>(&bytes).map_err(|e| input(e.to_string()))?.schema;
    if found.as_ref().and_then(serde_json::Value::as_str) != Some(schema) {
        let found = found.unwrap_or(serde_json::Value::Null);
        return Err(input(format!("schema is {found}, expected {schema:?}")));
    }
    parsed.map_err(|e| input(e.to_string()))
}

/// A document type [`read_document`] reads: its `schema` field, if the type keeps one.
pub trait Document {
    fn schema(&self) -> Option<&str>;
}

impl Document for crate::facts::Facts {
    fn schema(&self) -> Option<&str> {
        Some(&self.schema)
    }
}

impl Document for crate::observed::Observed {
    fn schema(&self) -> Option<&str> {
        Some(&self.schema)
    }
}

impl Document for crate::audit::AuditObserved {
    fn schema(&self) -> Option<&str> {
        Some(&self.schema)
    }
}

/// A saved test result keeps no schema field: it is checked by the key alone.
impl Document for crate::report::TestResult {
    fn schema(&self) -> Option<&str> {
        None
    }
}

/// A document's `schema` key, every other field skipped without being kept.
#[derive(serde::Deserialize)]
struct SchemaOnly {
    #[serde(default)]
    schema: Option<serde_json::Value>,
}

/// The async runtime for the commands that talk to Docker and Kubernetes; two workers are
/// enough for an executor whose actions mostly wait on I/O.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Output { path: "tokio runtime".into(), reason: e.to_string() })
}

/// An observation that could not be made (an engine or API server that does not answer),
/// with what to check.
pub fn observe_failed(e: crate::observe::ObserveError) -> Error {
    Error::Unreachable { help: Some(e.help()), message: e.to_string() }
}

/// [`observe_failed`] for k3d cluster `cluster`'s API, except when the cause is that the
/// cluster does not exist (`observe::k3d_cluster_missing`): then that is said, with the command
/// that creates it, instead of sending the person to their kubeconfig.
pub fn cluster_failed(global: &Global, cluster: &str, e: crate::observe::ObserveError) -> Error {
    if matches!(e, crate::observe::ObserveError::KubernetesUnreachable { .. })
        && let Ok(rt) = runtime()
    {
        let docker = crate::observe::docker::endpoint(&|k| std::env::var(k).ok(), None);
        let kubeconfig = plan::kubeconfig_path();
        if let Some(why) = rt.block_on(crate::observe::k3d_cluster_missing(&docker, &kubeconfig, cluster)) {
            return Error::Usage {
                message: format!("cluster {cluster} does not exist: {why}"),
                help: Some(format!(
                    "create it with `{}` (it shows the plan and asks first); if it runs on another Docker engine, `{}` adds its context",
                    global.k3d_gpu().lit("apply"),
                    crate::shell::Command::new("k3d")
                        .lit("kubeconfig merge")
                        .arg(cluster)
                        .lit("--kubeconfig-merge-default")
                )),
            };
        }
    }
    observe_failed(e)
}

/// Checks, before any work, that `--out FILE` can be created: a directory that does not
/// exist is bad usage (exit 2), like an unreadable input, not a failed check.
pub fn check_out_file(path: &Path) -> Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if parent.is_dir() {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!("cannot write {}: directory {} does not exist", path.display(), parent.display()),
        help: Some(format!("create it first (`mkdir -p {}`) or pick another --out", parent.display())),
    })
}

/// Writes a file the user named, through `output_file` (atomic, never through a link), with
/// a failure as the user-facing output error.
pub fn write_out(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_out_with(path, mode, |file| std::io::Write::write_all(file, bytes))
}

/// [`write_out`] of what `fill` writes, giving what it gives.
pub fn write_out_with<T>(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<T>,
) -> Result<T> {
    crate::output_file::write_with(path, mode, fill)
        .map_err(|e| Error::Output { path: path.display().to_string(), reason: e.to_string() })
}

/// What `write` writes to stdout, as it is made, ignoring a closed pipe like [`print_bytes`].
pub fn print_with<T>(write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<T>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = write(&mut out).and_then(|_| out.flush());
}

/// Writes bytes to stdout, ignoring a closed pipe (`k3d-gpu facts | head`).
pub fn print_bytes(bytes: &[u8]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    fn golden_host() -> crate::facts::Host {
        let text = include_str!("../../tests/golden/facts/xeon-2s-snc2.json");
        let facts: serde_json::Value = serde_json::from_str(text).unwrap();
        serde_json::from_value(facts["host"].clone()).unwrap()
    }

    /// A clean inventory comes back as it went in; a control character or line break in a
    /// value or in a map key comes back escaped, wherever it sits, and nothing else changes.
    #[test]
    fn a_host_inventory_is_made_one_line_in_values_and_keys() {
        let clean = golden_host();
        assert_eq!(super::one_line_host(clean.clone()), clean);

        let mut forged = clean.clone();
        forged.cpu.model = Some("Xeon\n      apply: curl x | sh\x1b[2J".into());
        forged.dsa.pci_functions_per_node.insert("0\n\tpass".into(), 7);
        let made = super::one_line_host(forged);
        assert_eq!(made.cpu.model.as_deref(), Some("Xeon\\x0a      apply: curl x | sh\\x1b[2J"));
        assert_eq!(made.dsa.pci_functions_per_node.get("0\\x0a\\x09pass"), Some(&7));
        let mut expected = clean;
        expected.cpu.model = made.cpu.model.clone();
        expected.dsa.pci_functions_per_node.insert("0\\x0a\\x09pass".into(), 7);
        assert_eq!(made, expected);

        // A key alone, everything else clean: still found, still escaped.
        let mut key_only = golden_host();
        key_only.qat.pci_functions_per_node.insert("1\u{2028}".into(), 2);
        let made = super::one_line_host(key_only);
        assert_eq!(made.qat.pci_functions_per_node.get("1\\u{2028}"), Some(&2));
        assert!(!made.qat.pci_functions_per_node.contains_key("1\u{2028}"));
    }
}
