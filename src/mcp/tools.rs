//! The read-only tools: the options a call gives merged with the server's defaults, their
//! structured results, and each one's work, done by the same functions the commands use.
//! Blocking: the server runs them off its event loop, under a deadline. What a call may give
//! is the CLI's definition (`arguments.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::cli::Global;
use crate::commands;
use crate::error::{Error, Result};

/// The inputs a tool call may name; what it leaves out comes from `k3d-gpu mcp`'s own
/// command line (its `-c`, `--root`, `--facts`, `--stdlib`, `--vendors`), then the CLI's
/// defaults. Paths are the server's: relative ones resolve against its working directory.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub config: Option<PathBuf>,
    pub root: Vec<PathBuf>,
    pub facts: Vec<PathBuf>,
    pub stdlib: Option<PathBuf>,
    pub vendors: Option<String>,
}

impl From<&Global> for Given {
    fn from(global: &Global) -> Given {
        Given {
            config: global.config.clone(),
            root: global.root.clone(),
            facts: global.facts.clone(),
            stdlib: global.stdlib.clone(),
            vendors: global.vendors.clone(),
        }
    }
}

/// The server's defaults, copied out of its `Global` once.
#[derive(Debug, Clone, Default)]
pub struct Defaults(pub Given);

impl Defaults {
    pub fn of(global: &Global) -> Defaults {
        Defaults(Given::from(global))
    }

    /// The options one call runs with. A host given in the call (root or facts) replaces both
    /// defaults: they are alternatives, and keeping the other would make two hosts.
    pub fn global(&self, call: Given) -> Global {
        let d = &self.0;
        let host_given = !call.root.is_empty() || !call.facts.is_empty();
        Global {
            config: call.config.or_else(|| d.config.clone()),
            root: if host_given { call.root } else { d.root.clone() },
            facts: if host_given { call.facts } else { d.facts.clone() },
            stdlib: call.stdlib.or_else(|| d.stdlib.clone()),
            // Notes on stderr as JSON lines: the client logs them.
            json: true,
            vendors: call.vendors.or_else(|| d.vendors.clone()),
        }
    }
}

/// An active vendor and what the cluster advertises for it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Vendor {
    pub vendor: String,
    pub resources: Vec<String>,
    pub devices: u32,
}

/// A vendor that is not active, and why.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Inactive {
    pub vendor: String,
    pub reason: String,
}

/// The host's accelerators: a summary, and the whole facts/v1 document (`k3d-gpu facts`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct FactsOut {
    /// `sha256:` of the hardware alone.
    pub fingerprint: String,
    pub active: Vec<Vendor>,
    pub inactive: Vec<Inactive>,
    /// How many findings (doctor's host rules) the document holds.
    pub findings: usize,
    /// The facts/v1 document, as `k3d-gpu facts` prints it.
    pub document: Value,
}

pub fn facts(global: &Global) -> Result<FactsOut> {
    let facts = commands::load_facts(global)?;
    let document: Value = serde_json::from_slice(&facts.to_bytes()).unwrap_or(Value::Null);
    Ok(FactsOut {
        fingerprint: facts.fingerprint.clone(),
        active: facts
            .detected
            .iter()
            .map(|d| Vendor { vendor: d.vendor.to_string(), resources: d.resources.clone(), devices: d.devices })
            .collect(),
        inactive: facts
            .inactive
            .iter()
            .map(|i| Inactive { vendor: i.vendor.to_string(), reason: i.reason.clone() })
            .collect(),
        findings: facts.findings.len(),
        document,
    })
}

/// One host's result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HostOut {
    pub host: String,
    pub ok: bool,
    pub active: Vec<String>,
    /// Resources in the compiled graph (0 when it failed).
    pub resources: usize,
    /// Each error with its code, and its fix where it has one.
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// `k3d-gpu validate`: the config compiled for each host.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ValidateOut {
    pub config: String,
    /// Every host compiled.
    pub passed: bool,
    pub hosts: Vec<HostOut>,
}

pub fn validate(global: &Global) -> Result<ValidateOut> {
    let v = commands::validate::check(global)?;
    let mut fixes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (host, reports) in &v.diagnostics {
        fixes.insert(host.clone(), reports.iter().map(report_line).collect());
    }
    let hosts: Vec<HostOut> = v
        .hosts
        .into_iter()
        .map(|h| HostOut {
            errors: fixes.remove(&h.host).unwrap_or(h.errors),
            warnings: h
                .warnings
                .iter()
                .map(|w| crate::escape::one_line(&format!("{} [{}]", w.text, w.code)).into_owned())
                .collect(),
            host: h.host,
            ok: h.ok,
            active: h.active,
            resources: h.resources,
        })
        .collect();
    Ok(ValidateOut { config: v.config, passed: hosts.iter().all(|h| h.ok), hosts })
}

/// A diagnostic as one line: its message and its help, never the source it quotes.
pub fn report_line(report: &miette::Report) -> String {
    let mut line = report.to_string();
    if let Some(help) = report.help() {
        line.push_str(&format!(" (help: {help})"));
    }
    // The message quotes config values: escaped like every other text a client shows.
    crate::escape::capped(crate::escape::one_line(&line).into_owned())
}

/// `k3d-gpu plan`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PlanOut {
    /// `sha256:` of the plan/v1 bytes: what `apply` takes as `plan_hash`.
    pub hash: String,
    /// Nothing to do: the cluster matches the config.
    pub empty: bool,
    pub actions: usize,
    /// The plan recreates the cluster (apply then needs `allow_replace`).
    pub replaces_cluster: bool,
    /// What it was compared against: `live`, `offline` or `saved`.
    pub against: String,
    /// The plan as `k3d-gpu plan` prints it: actions, reasons, diffs. The plan/v1 document
    /// itself is the result's first text item, its exact bytes (not repeated here: a plan of
    /// 20k deletes would be in the result twice, and in memory three times).
    pub text: String,
    /// The command that applies it from a terminal.
    pub apply_command: String,
}

/// The plan, its exact bytes and its hash.
pub struct Planned {
    pub out: PlanOut,
    /// The plan/v1 bytes.
    pub bytes: String,
    /// What apply's confirmation must show even when the text is cut
    /// (`apply::essentials`); made only for a plan to confirm ([`plan_to_confirm`]).
    pub essentials: String,
}

pub fn plan(global: &Global, offline: bool, observed: Option<PathBuf>) -> Result<Planned> {
    let Some(saved) = commands::plan::observed_file(offline, observed.as_deref())? else {
        return plan_live(global).map_err(|e| commands::plan::offline_hint(e, "call plan with offline: true"));
    };
    let inputs = commands::inputs::load_config(global)?;
    let computed = commands::plan::compute(global, inputs, commands::plan::Observation::Saved(Box::new(saved)))?;
    Ok(planned(global, computed.plan, if offline { "offline" } else { "saved" }, false))
}

/// The plan against the live cluster: what `plan` shows.
pub fn plan_live(global: &Global) -> Result<Planned> {
    live(global, false)
}

/// [`plan_live`] for `apply` to check again and ask the person about, with its essentials.
pub fn plan_to_confirm(global: &Global) -> Result<Planned> {
    live(global, true)
}

fn live(global: &Global, to_confirm: bool) -> Result<Planned> {
    let inputs = commands::inputs::load_config(global)?;
    let rt = commands::runtime()?;
    let computed = commands::plan::compute(global, inputs, commands::plan::Observation::Live(&rt))?;
    Ok(planned(global, computed.plan, "live", to_confirm))
}

/// The result's parts, made from the plan, which is used up: what the answer holds is its
/// bytes and its text, never a second tree of it, and the bytes are written as the tree is
/// freed ([`crate::plan::Plan::into_bytes`]). The hash is streamed first, since the text
/// names it.
pub fn planned(global: &Global, plan: crate::plan::Plan, against: &str, to_confirm: bool) -> Planned {
    let hash = plan.hash();
    let text = crate::plan::render::text(&plan, &hash, crate::plan::render::Style { color: false });
    let out = PlanOut {
        empty: plan.is_empty(),
        actions: plan.actions.len(),
        replaces_cluster: plan.replaces_cluster(),
        against: against.into(),
        text: crate::escape::assembled(&text).into_owned(),
        apply_command: apply_command(global, &hash, plan.replaces_cluster()),
        hash,
    };
    drop(text);
    let essentials = if to_confirm { super::apply::essentials(&plan) } else { String::new() };
    let bytes = String::from_utf8(plan.into_bytes()).expect("serde_json writes UTF-8");
    Planned { out, bytes, essentials }
}

/// `k3d-gpu … apply --plan-hash HASH` with the options this call ran with, each path one
/// shell word: what a person runs in a terminal instead of confirming in the client.
pub fn apply_command(global: &Global, hash: &str, allow_replace: bool) -> String {
    crate::commands::apply::apply_command(global, hash, allow_replace).to_string()
}

/// `k3d-gpu observe`: the cluster now, secrets masked.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ObserveOut {
    pub cluster: String,
    pub exists: bool,
    /// Whether the Kubernetes side was read (it is not when the cluster is absent or stopped,
    /// or its API could not be reached: see `kubernetes_error`).
    pub kubernetes_observed: bool,
    pub kubernetes_error: Option<String>,
    /// The observed/v1 document, masked as `k3d-gpu observe --json` prints it.
    pub document: Value,
}

pub fn observe(global: &Global) -> Result<ObserveOut> {
    let (inputs, observed, missing) = commands::plan::observe_value(global)?;
    let masked = observed.masked();
    Ok(ObserveOut {
        cluster: inputs.config.cluster.name.clone(),
        exists: masked.cluster.is_some(),
        kubernetes_observed: masked.kubernetes.is_some(),
        kubernetes_error: missing.map(|e| format!("{e} (help: {})", e.help())),
        document: serde_json::from_slice(&masked.to_bytes()).unwrap_or(Value::Null),
    })
}

/// How to reach the agent's OpenAI-compatible API.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Endpoint {
    /// The base URL inside the cluster.
    pub in_cluster_url: String,
    pub namespace: String,
    pub service: String,
    pub port: u64,
    /// The models list the server answers on once its model is loaded.
    pub models_path: String,
    /// A command that makes it reachable from this host.
    pub port_forward: String,
    /// The base URL on this host while that command runs.
    pub local_url: String,
}

/// An add-on's server (embeddings, the chat UI) and where to reach it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AddonEndpoint {
    /// The add-on's service name (`embeddings`, `open-webui`).
    pub name: String,
    pub endpoint: Endpoint,
}

/// `k3d-gpu agent`: where the agent runs, and why; and where to reach it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentOut {
    /// The config has no `[agent]`: this is what the defaults would do.
    pub defaults: bool,
    /// backend, device, reason, resource, requests, node selector, add-ons.
    pub placement: Value,
    /// The LLM server's OpenAI-compatible API.
    pub endpoint: Option<Endpoint>,
    /// Each add-on's server, by name: never to be taken for the LLM's.
    pub addons: Vec<AddonEndpoint>,
    pub warnings: Vec<String>,
}

/// How to reach the server an endpoint check names, with `url` its base URL in the cluster.
fn endpoint_of(spec: &Value, url: String, context: &str) -> Option<Endpoint> {
    let (namespace, service, port) = (spec["namespace"].as_str()?, spec["service"].as_str()?, spec["port"].as_u64()?);
    // The base URL's path (`/v3`, `/v1`) after scheme and authority.
    let path = url.splitn(4, '/').nth(3).map(|p| format!("/{p}")).unwrap_or_default();
    Some(Endpoint {
        in_cluster_url: url.clone(),
        namespace: namespace.into(),
        service: service.into(),
        port,
        models_path: spec["path"].as_str().unwrap_or_default().into(),
        port_forward: crate::shell::kubectl(context)
            .opt("-n", namespace)
            .lit("port-forward")
            .arg(format!("svc/{service}"))
            .arg(format!("{port}:{port}"))
            .to_string(),
        local_url: format!("http://127.0.0.1:{port}{path}"),
    })
}

pub fn agent(global: &Global) -> Result<AgentOut> {
    let (graph, defaults, context) = commands::graph::agent_graph(global)?;
    let placement = graph.agent.as_ref().map(|a| serde_json::to_value(a).unwrap_or(Value::Null)).unwrap_or_default();
    let api = graph.agent.as_ref().map(|a| a.api.clone()).unwrap_or_default();
    let checks: Vec<&Value> = graph.resources().filter(|r| r.spec["check"] == "endpoint").map(|r| &r.spec).collect();
    // The LLM server is the one whose check warms it up with a chat completion; the others
    // are add-ons, whose base URL is their own models path's parent (or the root).
    let endpoint = checks.iter().find(|s| s.get("chat").is_some()).and_then(|s| endpoint_of(s, api.clone(), &context));
    let addons = checks
        .iter()
        .filter(|s| s.get("chat").is_none())
        .filter_map(|s| {
            let service = s["service"].as_str()?;
            let base = s["path"].as_str().and_then(|p| p.strip_suffix("/models")).unwrap_or_default();
            let url = format!(
                "http://{service}.{}.svc:{}{base}",
                s["namespace"].as_str().unwrap_or_default(),
                s["port"].as_u64().unwrap_or_default()
            );
            Some(AddonEndpoint { name: service.to_string(), endpoint: endpoint_of(s, url, &context)? })
        })
        .collect();
    let warnings = graph
        .warnings
        .iter()
        .filter(|w| w.code.starts_with("agent") || w.code.starts_with("addon"))
        .map(|w| format!("{} [{}]", w.text, w.code))
        .collect();
    Ok(AgentOut { defaults, placement, endpoint, addons, warnings })
}

/// `k3d-gpu audit`: the running cluster's posture.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AuditOut {
    pub passed: bool,
    /// Each finding with its fix.
    pub findings: Vec<String>,
    /// The audit document, as `k3d-gpu audit --json` prints it.
    pub document: Value,
}

pub fn audit(global: &Global, observed: Option<PathBuf>) -> Result<AuditOut> {
    let (read, catalog) = commands::audit::read(global, observed.as_deref())?;
    let audit = crate::audit::audit(&read, &catalog.images);
    let document: Value = serde_json::from_slice(&crate::canonical::to_bytes(&audit)).unwrap_or(Value::Null);
    let findings =
        audit.findings.iter().map(|f| format!("{} [{}]: {} (fix: {})", f.subject, f.rule, f.problem, f.fix)).collect();
    Ok(AuditOut { passed: audit.passed, findings, document })
}

/// An error of a command as the text a tool result carries: what went wrong, then the fix.
pub fn error_text(error: &Error) -> (String, Option<String>) {
    use miette::Diagnostic;
    match error {
        Error::Invalid(reports) => {
            let lines: Vec<String> = reports.iter().map(report_line).collect();
            (format!("{error}:\n{}", lines.join("\n")), None)
        }
        other => (crate::escape::capped(other.to_string()), other.help().map(|h| h.to_string())),
    }
}
