//! `k3d-gpu report`: what this host and its cluster have, engine by engine, as text, JSON
//! (k3d-gpu.report/v1) and one self-contained HTML page. Pure: built from facts, the plan and
//! what was observed; nothing from the clock, so the same inputs give the same bytes.

mod html;
pub mod layout;

use serde::{Deserialize, Serialize};

use crate::compile::DesiredGraph;
use crate::escape::Untrusted;
use crate::facts::{Facts, Finding};
use crate::observed::Observed;
use crate::plan::Plan;

pub use html::{html, svg};

pub const SCHEMA: &str = "k3d-gpu.report/v1";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub cluster: String,
    pub host: Host,
    /// Every doctor finding about the host, each with its fix.
    pub findings: Vec<Finding>,
    pub plan: PlanSummary,
    /// The resource graph: each resource and what it depends on.
    pub graph: Vec<GraphNode>,
    /// What exists: `None` when the cluster was not observed (then `observed_note` says why).
    pub state: Option<ClusterState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_note: Option<String>,
    /// A `k3d-gpu test --json` result given with `report --test FILE`: whether each
    /// accelerator resource was usable from inside a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<TestResult>,
    /// `[telemetry]`'s Grafana dashboard, when the graph deploys it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dashboard: Option<Dashboard>,
}

/// Where `[telemetry]`'s dashboard is, and how to reach it: Grafana listens in the cluster
/// only, so through a port-forward.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dashboard {
    pub url: String,
    /// The command that makes `url` reachable on this machine.
    pub port_forward: String,
    /// The command that prints the generated admin password (user `admin`).
    pub password: String,
}

impl Dashboard {
    /// The dashboard of cluster `cluster` (k3d context `k3d-<cluster>`), when `graph` deploys
    /// Grafana.
    pub fn of(cluster: &str, graph: &DesiredGraph) -> Option<Dashboard> {
        use crate::compile::metrics::{GRAFANA_PORT, NAMESPACE, PASSWORD_FILE, dashboard_url};
        graph.get(&format!("k8s/apps/Deployment/{NAMESPACE}/grafana"))?;
        let kubectl = || crate::shell::kubectl(&format!("k3d-{cluster}")).opt("-n", NAMESPACE);
        Some(Dashboard {
            url: dashboard_url(),
            port_forward: kubectl()
                .lit("port-forward svc/grafana")
                .arg(format!("{GRAFANA_PORT}:{GRAFANA_PORT}"))
                .to_string(),
            password: kubectl().lit("exec deploy/grafana -- cat").arg(PASSWORD_FILE).to_string(),
        })
    }
}

/// What the report shows of a k3d-gpu.test/v1 document: the verdict per pod and the counts
/// that did not hold. Read from the saved document, so only these fields are taken from it,
/// and its names and texts are `Untrusted` (its causes and fixes are replaced by ours; its
/// cluster must be the config's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub cluster: String,
    pub passed: bool,
    pub pods: Vec<TestPod>,
    /// The sharing proofs (`smoke::share`): absent from a result of a config that shares
    /// nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<TestShare>,
    /// Each `[[claims]]` template's pod (`smoke::claims`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<TestClaim>,
    #[serde(default)]
    pub problems: Vec<TestProblem>,
}

/// One `[[claims]]` template's verdict: did its pod get and open what it asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestClaim {
    pub namespace: Untrusted,
    pub template: Untrusted,
    pub verdict: TestClaimVerdict,
}

/// A verdict's pass and, when it failed, its cause and fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestClaimVerdict {
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// One sharing group's verdict: were its pods Running together on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestShare {
    pub resource: Untrusted,
    pub node: Untrusted,
    pub pods: Vec<String>,
    pub verdict: TestShareVerdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestShareVerdict {
    pub passed: bool,
    pub together: Vec<String>,
    #[serde(default)]
    pub apart: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl TestShare {
    fn word(&self) -> &'static str {
        if self.verdict.passed { "pass" } else { "FAIL" }
    }

    /// "2 of 2 pods together".
    fn together(&self) -> String {
        format!("{} of {} pods together", self.verdict.together.len(), self.pods.len())
    }

    fn notes(&self) -> impl Iterator<Item = (&'static str, &str)> {
        notes(&self.verdict.cause, &self.verdict.fix)
    }
}

impl TestClaim {
    fn word(&self) -> &'static str {
        if self.verdict.passed { "pass" } else { "FAIL" }
    }

    fn notes(&self) -> impl Iterator<Item = (&'static str, &str)> {
        notes(&self.verdict.cause, &self.verdict.fix)
    }
}

/// A failed verdict's cause and fix, labelled, those it has (the text and the page both list
/// them).
fn notes<'a>(cause: &'a Option<String>, fix: &'a Option<String>) -> impl Iterator<Item = (&'static str, &'a str)> {
    [("cause", cause), ("fix", fix)].into_iter().filter_map(|(label, line)| line.as_deref().map(|l| (label, l)))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestPod {
    pub resource: Untrusted,
    pub node: Untrusted,
    pub expected: u32,
    pub verdict: TestVerdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestVerdict {
    pub passed: bool,
    pub seen: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestProblem {
    pub text: Untrusted,
    pub fix: String,
}

impl TestResult {
    /// `passed` or `FAILED`, as the text and the page both say it.
    fn verdict(&self) -> &'static str {
        if self.passed { "passed" } else { "FAILED" }
    }

    /// Pods that failed and counts that did not hold.
    fn failures(&self) -> usize {
        self.pods.iter().filter(|p| !p.verdict.passed).count()
            + self.shares.iter().filter(|s| !s.verdict.passed).count()
            + self.claims.iter().filter(|c| !c.verdict.passed).count()
            + self.problems.len()
    }
}

impl TestPod {
    fn word(&self) -> &'static str {
        if self.verdict.passed { "pass" } else { "FAIL" }
    }

    /// The cause and the fix a failed pod's verdict gave, labelled, those it has.
    fn notes(&self) -> impl Iterator<Item = (&'static str, &str)> {
        notes(&self.verdict.cause, &self.verdict.fix)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    pub fingerprint: String,
    pub engines: Vec<Engine>,
    pub inactive: Vec<Inactive>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Engine {
    pub vendor: String,
    pub devices: u32,
    pub resources: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inactive {
    pub vendor: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanSummary {
    pub hash: String,
    pub actions: Vec<PlanAction>,
    /// The checks apply runs after the actions.
    pub verify: Vec<String>,
    /// The plan's warnings, every one (the text and the page say each once, as `plan` does).
    pub warnings: Vec<crate::compile::Warning>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanAction {
    pub id: String,
    pub action: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphNode {
    pub id: String,
    pub depends_on: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterState {
    pub exists: bool,
    pub nodes: Vec<String>,
    /// Kubernetes nodes ready / all, when the API answered.
    pub ready_nodes: Option<(usize, usize)>,
    pub managed_objects: usize,
}

fn word<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// Builds the report. `observed` is `None` when the cluster could not be read (`note` says
/// why); the plan was then computed against nothing.
pub fn build(
    cluster: &str,
    facts: &Facts,
    plan: &Plan,
    graph: &DesiredGraph,
    observed: Option<&Observed>,
    note: Option<String>,
) -> Report {
    let mut findings = facts.findings.clone();
    findings.sort_by(|a, b| b.level.cmp(&a.level).then_with(|| a.code.cmp(&b.code)).then_with(|| a.text.cmp(&b.text)));
    let state = observed.map(|o| ClusterState {
        exists: o.cluster.is_some(),
        nodes: o.cluster.iter().flat_map(|c| &c.nodes).map(|n| format!("{} ({})", n.name, n.role)).collect(),
        ready_nodes: o.kubernetes.as_ref().map(|k| (k.nodes.iter().filter(|n| n.ready).count(), k.nodes.len())),
        managed_objects: o.kubernetes.as_ref().map_or(0, |k| k.objects.len()),
    });
    Report {
        schema: SCHEMA,
        cluster: cluster.into(),
        host: Host {
            fingerprint: facts.fingerprint.clone(),
            engines: facts
                .detected
                .iter()
                .map(|d| Engine { vendor: word(&d.vendor), devices: d.devices, resources: d.resources.clone() })
                .collect(),
            inactive: facts
                .inactive
                .iter()
                .map(|i| Inactive { vendor: word(&i.vendor), reason: i.reason.clone() })
                .collect(),
        },
        findings,
        plan: PlanSummary {
            hash: plan.hash(),
            actions: plan
                .actions
                .iter()
                .map(|a| PlanAction { id: a.id.clone(), action: word(&a.action), reason: a.reason.text.clone() })
                .collect(),
            verify: plan.verify.clone(),
            warnings: plan.warnings.clone(),
        },
        graph: graph.resources().map(|r| GraphNode { id: r.id.clone(), depends_on: r.depends_on.clone() }).collect(),
        state,
        observed_note: note,
        test: None,
        dashboard: Dashboard::of(cluster, graph),
    }
}

/// The text form. Every string from the host or cluster goes through [`crate::escape`].
pub fn text(r: &Report) -> String {
    use crate::escape::one_line as e;
    let mut out = format!("k3d-gpu report: cluster {}\n\nhost {}\n", e(&r.cluster), e(&r.host.fingerprint));
    if r.host.engines.is_empty() {
        out.push_str("  no accelerator engines: CPU only\n");
    }
    for g in &r.host.engines {
        out.push_str(&format!("  {:<8} {} device(s)  {}\n", e(&g.vendor), g.devices, e(&g.resources.join(", "))));
    }
    for i in &r.host.inactive {
        out.push_str(&format!("  {:<8} inactive: {}\n", e(&i.vendor), e(&i.reason)));
    }
    out.push_str(&format!("\nfindings ({})\n", r.findings.len()));
    for f in &r.findings {
        out.push_str(&format!("  {:<4} {} [{}]\n", f.level, e(&f.text), e(&f.code)));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("       fix: {}\n", e(fix)));
        }
    }
    out.push_str(&format!("\nplan {} ({} action(s))\n", r.plan.hash, r.plan.actions.len()));
    for a in &r.plan.actions {
        out.push_str(&format!("  {:<8} {}  ({})\n", a.action, e(&a.id), e(&a.reason)));
    }
    for w in &crate::compile::warnings::summarised(&r.plan.warnings) {
        out.push_str(&format!("  warning: {} [{}]\n", e(&w.text), e(&w.code)));
    }
    out.push_str(&format!("\ngraph: {} resource(s)\n", r.graph.len()));
    out.push_str("\ncluster: ");
    match (&r.state, &r.observed_note) {
        (Some(s), _) if s.exists => {
            out.push_str(&format!("{} node container(s)", s.nodes.len()));
            if let Some((ready, all)) = s.ready_nodes {
                out.push_str(&format!(", {ready}/{all} node(s) ready, {} managed object(s)", s.managed_objects));
            }
            out.push('\n');
        }
        (Some(_), _) => out.push_str("does not exist\n"),
        (None, note) => out.push_str(&format!("not observed ({})\n", e(note.as_deref().unwrap_or("offline")))),
    }
    if let Some(d) = &r.dashboard {
        out.push_str(&format!(
            "\ndashboard: {}\n  reach it: {}\n  sign in as admin, password: {}\n",
            e(&d.url),
            e(&d.port_forward),
            e(&d.password)
        ));
    }
    if let Some(t) = &r.test {
        out.push_str(&test_text(t));
    }
    out
}

/// The test section: one line per pod, its cause and fix when it failed.
fn test_text(t: &TestResult) -> String {
    use crate::escape::one_line as e;
    let mut out = format!("\ntest: {}, {} pod(s), {} failure(s)\n", t.verdict(), t.pods.len(), t.failures());
    for p in &t.pods {
        let (seen, expected) = (p.verdict.seen, p.expected);
        out.push_str(&format!("  {} {} on {}: {seen} of {expected} usable\n", p.word(), p.resource, p.node));
        for (label, line) in p.notes() {
            out.push_str(&format!("       {label}: {}\n", e(line)));
        }
    }
    for s in &t.shares {
        out.push_str(&format!("  {} {} on {} shared: {}\n", s.word(), s.resource, s.node, s.together()));
        for (label, line) in s.notes() {
            out.push_str(&format!("       {label}: {}\n", e(line)));
        }
    }
    for c in &t.claims {
        out.push_str(&format!("  {} claim template {}/{}\n", c.word(), c.namespace, c.template));
        for (label, line) in c.notes() {
            out.push_str(&format!("       {label}: {}\n", e(line)));
        }
    }
    for p in &t.problems {
        out.push_str(&format!("  FAIL {}\n       fix: {}\n", p.text, e(&p.fix)));
    }
    out
}

#[cfg(test)]
mod tests;
