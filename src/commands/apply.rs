//! `k3d-gpu apply` and `destroy`: the gate (same hash, consent to replace, one apply at a
//! time), then the executor and verify, with one line per event (JSON lines with --json).

use std::io::{BufRead, IsTerminal, Write};
use std::time::Instant;

use crate::apply::executor::{Event, Outcome, execute_until};
use crate::apply::lock::{Lock, LockError, lock_dir, state_dir};
use crate::apply::providers::Providers;
use crate::apply::verify;
use crate::cli::{ApplyArgs, DestroyArgs, Global};
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};
use crate::plan::{Action, ActionKind, Inputs, Plan};

fn refused(message: String, help: String) -> Error {
    Error::Refused { message, help: Some(help) }
}

fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Whether an answer to "Apply this plan? [y/N]" is a yes: `y` or `yes`, in any case, spaces
/// around it ignored. Anything else, an empty line included, is a no.
fn consents(answer: &str) -> bool {
    let answer = answer.trim();
    answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes")
}

fn ask(question: &str) -> String {
    crate::stderr!("{question} ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer.trim().to_string()
}

/// Which inputs differ between a saved plan and a fresh one.
fn changed_inputs(saved: &Inputs, now: &Inputs) -> Vec<String> {
    let mut out = Vec::new();
    for (name, a, b) in [
        ("config", &saved.config, &now.config),
        ("host facts", &saved.facts, &now.facts),
        ("observed state (the cluster or its node containers changed)", &saved.observed, &now.observed),
        ("component catalog", &saved.stdlib, &now.stdlib),
        ("image digests (images.lock)", &saved.images, &now.images),
        ("k3d-gpu version", &saved.tool_version, &now.tool_version),
    ] {
        if a != b {
            out.push(name.to_string());
        }
    }
    if saved.made_from != now.made_from {
        out.push(format!(
            "the options (planned with {}, now {})",
            super::made_from::describe(saved.made_from.as_ref()),
            super::made_from::describe(now.made_from.as_ref())
        ));
    }
    out
}

/// The actions as they run: `after` from the graph, not the plan (whose secrets are masked).
fn executable(plan: &Plan, graph: &crate::compile::DesiredGraph) -> Vec<Action> {
    plan.actions
        .iter()
        .map(|a| {
            let mut a = a.clone();
            if a.action != ActionKind::Delete
                && let Some(r) = graph.get(&a.id)
            {
                a.after = Some(r.spec.clone());
            }
            a
        })
        .collect()
}

/// Progress: JSON lines with --json; on a terminal a live line (indicatif) that counts
/// running and finished actions, with each event printed above it; plain lines otherwise.
struct Reporter {
    json: bool,
    started: Instant,
    live: Option<indicatif::ProgressBar>,
    running: std::sync::Mutex<std::collections::BTreeSet<String>>,
    finished: std::sync::atomic::AtomicUsize,
    total: usize,
    /// Each skipped action and the one it waited for: in text, said once in the summary
    /// (JSON lines keep every event).
    skipped: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl Reporter {
    fn new(json: bool, total: usize) -> Reporter {
        let live = (!json && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        Reporter {
            json,
            started: Instant::now(),
            live,
            running: Default::default(),
            finished: Default::default(),
            total,
            skipped: Default::default(),
        }
    }

    /// The skipped actions and what each waited for.
    fn skipped(&self) -> std::collections::BTreeMap<String, String> {
        self.skipped.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A line of information between the events (the model's first reply).
    fn note(&self, text: &str) {
        if self.json {
            crate::stderrln!("{}", serde_json::json!({ "event": "note", "text": text }));
        } else if let Some(bar) = &self.live {
            bar.println(format!("note: {}", crate::escape::one_line(text)));
        } else {
            crate::stderrln!("note: {}", crate::escape::one_line(text));
        }
    }

    fn event(&self, event: &Event) {
        if self.json {
            crate::stderrln!("{}", serde_json::to_string(event).unwrap_or_default());
            return;
        }
        if let Event::Skipped { id, because } = event {
            self.skipped.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), because.clone());
            if let Some(bar) = &self.live {
                self.finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                bar.tick();
            }
            return;
        }
        let t = self.started.elapsed().as_secs_f64();
        // Ids and errors carry names from manifests and k3d's own output.
        let line = crate::escape::assembled(&match event {
            Event::Started { id } => format!("[{t:7.1}s] start  {id}"),
            Event::Done { id, elapsed_ms } => format!("[{t:7.1}s] done   {id} ({:.1}s)", *elapsed_ms as f64 / 1e3),
            Event::Failed { id, elapsed_ms, error } => {
                format!("[{t:7.1}s] FAILED {id} ({:.1}s): {error}", *elapsed_ms as f64 / 1e3)
            }
            Event::Skipped { id, because } => format!("[{t:7.1}s] skip   {id}: {because} failed"),
        })
        .into_owned();
        let Some(bar) = &self.live else {
            crate::stderrln!("{line}");
            return;
        };
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            Event::Started { id } => {
                running.insert(id.clone());
            }
            Event::Done { id, .. } | Event::Failed { id, .. } => {
                running.remove(id);
                self.finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            Event::Skipped { .. } => {
                self.finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        if !matches!(event, Event::Started { .. }) {
            bar.println(line);
        }
        let now: Vec<&str> = running.iter().map(String::as_str).take(3).collect();
        let more = running.len().saturating_sub(3);
        bar.set_message(format!(
            "{}/{} finished, {} running: {}{}",
            self.finished.load(std::sync::atomic::Ordering::SeqCst),
            self.total,
            running.len(),
            now.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    }

    fn finish(&self) {
        if let Some(bar) = &self.live {
            bar.finish_and_clear();
        }
    }
}

/// SIGINT, SIGTERM or SIGHUP while actions run. By default each kills k3d-gpu alone: the lock
/// goes with it while `k3d cluster create` runs on, re-parented to init, and a second apply
/// could start k3d on the same cluster. Instead, from the first action on, a signal stops new
/// actions from starting; the running ones (and their child processes) finish, verify is
/// cut short, and only then is the lock released.
///
/// The same stop serves the MCP server, whose client cancels a call instead of sending a signal.
#[derive(Clone, Default)]
pub(crate) struct Signals {
    stopped: std::sync::Arc<std::sync::atomic::AtomicBool>,
    notify: std::sync::Arc<tokio::sync::Notify>,
    /// Stopped only through `stop`: the MCP server owns the process's signals for its whole
    /// life (a handler registered per apply would outlive it and swallow every later SIGTERM).
    client_only: bool,
}

impl Signals {
    /// A stop that `watching` leaves off the process's signals.
    pub(crate) fn client_only() -> Signals {
        Signals { client_only: true, ..Signals::default() }
    }

    /// Stops new actions from starting and cuts verify short, as a signal does.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn watch(rt: &tokio::runtime::Runtime, json: bool) -> Result<Signals> {
        Signals::default().watching(rt, json)
    }

    /// This stop, also triggered by SIGINT, SIGTERM or SIGHUP.
    pub(crate) fn watching(self, rt: &tokio::runtime::Runtime, json: bool) -> Result<Signals> {
        if self.client_only {
            return Ok(self);
        }
        let mut stops = {
            let _runtime = rt.enter();
            crate::signals::listen()
        }
        .map_err(|e| Error::Output { path: "signal handlers".into(), reason: e.to_string() })?;
        let (flag, wake) = (self.stopped.clone(), self.notify.clone());
        rt.spawn(async move {
            loop {
                let name = stops.next().await.name;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                wake.notify_waiters();
                let text = format!(
                    "{name}: stopping; no new action starts, the running ones (k3d among them) finish, then the lock is released"
                );
                if json {
                    crate::stderrln!("{}", serde_json::json!({ "event": "note", "text": text }));
                } else {
                    crate::stderrln!("note: {text}");
                }
            }
        });
        Ok(self)
    }

    fn stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn providers(cluster: &str) -> Providers {
    let env = |k: &str| std::env::var(k).ok();
    Providers::new(crate::apply::k3d::binary(&env), state_dir(&env), super::plan::kubeconfig_path(), cluster.into())
}

/// The last line(s) on stderr: a `summary` event with `--json`, else text.
fn print_summary(reporter: &Reporter, outcome: &Outcome, verify_failed: &[(String, String)]) {
    if reporter.json {
        let failed: Vec<_> = verify_failed.iter().map(|(id, e)| serde_json::json!({ "id": id, "error": e })).collect();
        crate::stderrln!("{}", serde_json::json!({ "event": "summary", "outcome": outcome, "verify_failed": failed }));
    } else {
        crate::stderrln!("{}", crate::escape::assembled(&summary(outcome, verify_failed, &reporter.skipped())));
    }
}

/// The actions that did not start, one line per failed action they waited for (an action
/// skipped because another was skipped counts under the failure that began it), and one for
/// those a stop kept from starting: a count and the first few ids, not a line each.
fn not_started_lines(not_started: &[String], skipped: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    const SHOWN: usize = 3;
    let root = |id: &str| {
        let mut at = skipped.get(id)?;
        // Bounded: a chain is at most as long as the plan.
        for _ in 0..skipped.len() {
            match skipped.get(at) {
                Some(next) => at = next,
                None => break,
            }
        }
        Some(at.clone())
    };
    let mut groups: std::collections::BTreeMap<Option<String>, Vec<&str>> = std::collections::BTreeMap::new();
    for id in not_started {
        groups.entry(root(id)).or_default().push(id);
    }
    groups
        .into_iter()
        .map(|(root, ids)| {
            let mut list = ids.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
            if ids.len() > SHOWN {
                list.push_str(&format!(" and {} more", ids.len() - SHOWN));
            }
            let n = ids.len();
            let actions = if n == 1 { "action" } else { "actions" };
            match root {
                Some(failed) => format!("  not started: {n} {actions} waiting on {failed}, which failed: {list}"),
                None => {
                    let they = if n == 1 { "it" } else { "they" };
                    format!("  not started: {n} {actions}, stopped before {they} began: {list}")
                }
            }
        })
        .collect()
}

fn summary(
    outcome: &Outcome,
    verify_failed: &[(String, String)],
    skipped: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut text = format!(
        "\nApply: {} done, {} failed, {} not started.",
        outcome.done.len(),
        outcome.failed.len(),
        outcome.not_started.len()
    );
    for (id, error) in &outcome.failed {
        text.push_str(&format!("\n  failed: {id}: {error}"));
    }
    for line in not_started_lines(&outcome.not_started, skipped) {
        text.push('\n');
        text.push_str(&line);
    }
    for (id, error) in verify_failed {
        text.push_str(&format!("\n  verify failed: {id}: {error}"));
    }
    if !outcome.ok() || !verify_failed.is_empty() {
        text.push_str("\nRe-plan (`k3d-gpu plan`) to see what is left; applying again continues from there.");
    }
    text
}

/// Takes the cluster's apply lock before anything is planned, so nothing can change the
/// cluster between the check of the plan and its actions.
fn lock_cluster(global: &Global, cluster: &str) -> Result<Lock> {
    let env = |k: &str| std::env::var(k).ok();
    let dir = lock_dir(&env);
    let lock = Lock::acquire(&dir, cluster, std::process::id()).map_err(|e| match e {
        LockError::Held { .. } => refused(e.to_string(), "wait for the other apply to finish".into()),
        LockError::Io { .. } => Error::Refused {
            message: e.to_string(),
            help: Some(format!(
                "the lock directory {} must be writable, with space left; or set XDG_STATE_HOME",
                dir.display()
            )),
        },
    })?;
    if let Some(pid) = lock.took_over_from {
        let text =
            format!("took over the lock of pid {pid}, an apply that did not finish; re-planning shows what it left");
        if global.json {
            crate::stderrln!("{}", serde_json::json!({ "event": "note", "text": text }));
        } else {
            crate::stderrln!("note: {text}");
        }
    }
    Ok(lock)
}

/// The cluster locked, and the plan its inputs give now, with its hash: what every gate
/// compares against.
struct Locked {
    lock: Lock,
    rt: tokio::runtime::Runtime,
    computed: super::plan::Computed,
    hash: String,
}

fn locked_plan(global: &Global) -> Result<Locked> {
    let inputs = super::load_config(global)?;
    let lock = lock_cluster(global, &inputs.config.cluster.name)?;
    let rt = super::runtime()?;
    let computed = super::plan::compute(global, inputs, super::plan::Observation::Live(&rt))?;
    let hash = crate::canonical::sha256(&computed.plan.to_bytes());
    Ok(Locked { lock, rt, computed, hash })
}

/// What an apply did: the actions' outcome and the verify checks that failed (none ran when
/// the plan was empty).
#[derive(Debug, serde::Serialize)]
pub(crate) struct Applied {
    pub hash: String,
    pub nothing_to_do: bool,
    pub outcome: Outcome,
    pub verify_failed: Vec<(String, String)>,
    /// A signal (or the MCP client's cancellation) stopped it before the end.
    pub stopped: bool,
}

impl Applied {
    pub(crate) fn ok(&self) -> bool {
        self.outcome.ok() && self.verify_failed.is_empty() && !self.stopped
    }
}

pub fn run(global: &Global, args: &ApplyArgs) -> Result<u8> {
    if let (None, Some(wanted)) = (&args.plan_file, &args.plan_hash) {
        test_possible(global, args)?;
        let applied = apply_hash(global, args, wanted, &Signals::default(), interactive())?;
        return then_test(global, args, &applied);
    }
    // A plan file that is not a plan is unreadable input, and an offline plan can never pass
    // the gate: both are said before anything is observed. The options the plan was made
    // with stand for those not given here.
    let mut filled = global.clone();
    let saved = match &args.plan_file {
        Some(file) => {
            let (plan, bytes) = read_plan_file(file)?;
            if let Some(made) = &plan.inputs.made_from {
                // What the plan records is the plan file's word: a path it names is taken only
                // inside the plan file's directory (links resolved), and said before it is read.
                let plan_dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
                super::made_from::confined(global, made, plan_dir).map_err(|(flag, path, why)| Error::Usage {
                    message: format!(
                        "{} records {flag} {}, which {why}: it is not read from a plan file",
                        file.display(),
                        crate::shell::word(&path)
                    ),
                    help: Some(format!("give {flag} yourself if that is the file you mean")),
                })?;
                let taken;
                (filled, taken) = super::made_from::fill(global, made);
                if !taken.is_empty() {
                    note(
                        global.json,
                        &format!(
                            "{} from {}, as it was made: {}",
                            taken.join(", "),
                            file.display(),
                            super::made_from::describe(super::made_from::record(&filled).as_ref())
                        ),
                    );
                }
            }
            refuse_offline(&filled, file, &plan)?;
            Some((plan, bytes))
        }
        None => None,
    };
    let global = &filled;
    test_possible(global, args)?;
    let locked = locked_plan(global)?;
    let plan = &locked.computed.plan;
    let bytes = plan.to_bytes();
    let hash = &locked.hash;

    // The gate: the plan that runs is the plan that was reviewed.
    match (&args.plan_file, saved) {
        (Some(file), Some((saved, saved_bytes))) => {
            if saved_bytes != bytes {
                let what = Some(saved)
                    .map(|s| changed_inputs(&s.inputs, &plan.inputs))
                    .filter(|c| !c.is_empty())
                    .map(|c| format!("changed since it was made: {}", c.join(", ")))
                    .unwrap_or_else(|| "it is not the plan these inputs give".into());
                return Err(refusal(global, &format!("the plan in {} no longer matches: {what}", file.display())));
            }
        }
        _ => {
            if global.json {
                super::print_bytes(&bytes);
            } else {
                super::print_bytes(
                    crate::plan::render::text(plan, hash, crate::plan::render::Style { color: false }).as_bytes(),
                );
            }
            if plan.is_empty() {
                return Ok(EXIT_OK);
            }
            // What can be known without changing anything is said before consent is asked.
            needs_k3d(plan)?;
            if !interactive() {
                return Err(refused(
                    "apply without a plan file or --plan-hash needs a terminal to confirm".into(),
                    format!("review the plan above, then run: {}", apply_command(global, hash, false)),
                ));
            }
            if !consents(&ask("Apply this plan? [y/N]")) {
                crate::stderrln!("Nothing was applied (the answer was not `y` or `yes`).");
                return Err(Error::CheckFailed("not applied".into()));
            }
        }
    }
    let applied = execute(global, args, locked, &Signals::default(), interactive())?;
    then_test(global, args, &applied)
}

/// `--test` runs smoke pods on a k3d cluster: said before anything is applied, not after.
fn test_possible(global: &Global, args: &ApplyArgs) -> Result<()> {
    if !args.test {
        return Ok(());
    }
    let inputs = super::load_config(global)?;
    super::fleet::k3d_only(
        &inputs,
        "apply --test",
        "apply without --test, then run a pod that requests the resource with `kubectl --context {context} run …`",
    )
}

/// The exit code of an apply, after `--test`'s smoke pods when it asked for them and the
/// apply succeeded (a failed apply says why already; its devices are not worth probing).
fn then_test(global: &Global, args: &ApplyArgs, applied: &Applied) -> Result<u8> {
    if !applied.ok() {
        return Ok(EXIT_FAILED);
    }
    if !args.test {
        return Ok(EXIT_OK);
    }
    note(global.json, "apply --test: a smoke pod for each accelerator resource the cluster advertises");
    let test_args = crate::cli::TestArgs {
        timeout: crate::smoke::DEFAULT_TIMEOUT_S,
        nvidia_image: None,
        device_image: None,
        node: None,
    };
    let report = super::test::smoke_test(global, &test_args)?;
    if global.json {
        let doc: serde_json::Value = serde_json::from_slice(&crate::canonical::to_bytes(&report)).unwrap_or_default();
        crate::stderrln!("{}", serde_json::json!({ "event": "test", "result": doc }));
    } else {
        super::print_bytes(crate::escape::assembled(&crate::smoke::text(&report)).as_bytes());
    }
    if report.passed { Ok(EXIT_OK) } else { Err(Error::CheckFailed("a smoke test after apply failed".into())) }
}

/// A note on stderr (a JSON line with --json).
fn note(json: bool, text: &str) {
    if json {
        crate::stderrln!("{}", serde_json::json!({ "event": "note", "text": text }));
    } else {
        // One line: a note quotes the model's reply, a plan file's name, what it records.
        crate::stderrln!("note: {}", crate::escape::one_line(text));
    }
}

/// A plan file as `plan --out` writes it, with its bytes: anything else (`{}`, another
/// document, not JSON) is unreadable input (exit 2). Shared with `show`.
pub(crate) fn read_plan_file(file: &std::path::Path) -> Result<(Plan, Vec<u8>)> {
    let input = |reason: String| Error::Input {
        what: "plan",
        path: file.display().to_string(),
        reason,
        help: Some("write one with `k3d-gpu plan --out FILE`".into()),
    };
    let bytes = crate::input_file::read_bytes(file).map_err(|e| input(e.to_string()))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| input(e.to_string()))?;
    if value["schema"] != crate::plan::SCHEMA {
        return Err(input(format!("schema is {}, expected {:?}", value["schema"], crate::plan::SCHEMA)));
    }
    let plan: Plan = serde_json::from_value(value).map_err(|e| input(e.to_string()))?;
    // Every action must say what it acts on, consistently with the object it carries.
    if let Some(e) = plan.actions.iter().find_map(|a| a.target().err()) {
        return Err(input(crate::escape::one_line(&e.to_string()).into_owned()));
    }
    Ok((plan, bytes))
}

/// Whether a plan was made with `--offline` (against nothing). The digest of "nothing
/// exists" does not depend on the graph: nothing is projected.
pub(crate) fn made_offline(plan: &Plan) -> bool {
    plan.inputs.observed == crate::plan::digest::observed_digest(None, &crate::observe::Observed::nothing())
}

/// A plan made with `--offline` is refused, saying so: it compares against nothing, so no
/// live plan can match it.
fn refuse_offline(global: &Global, file: &std::path::Path, plan: &Plan) -> Result<()> {
    if made_offline(plan) {
        let replan = global.k3d_gpu().lit("plan").opt("--out", "plan.json");
        let apply = global.k3d_gpu().lit("apply").arg("plan.json");
        return Err(refused(
            format!(
                "refused: the plan in {} was made offline (as if nothing existed), not against this machine's Docker and cluster",
                file.display()
            ),
            format!("plan against what exists: {replan} (without --offline or --observed), review it, then {apply}"),
        ));
    }
    Ok(())
}

/// `apply --plan-hash HASH`, shared by the CLI and the MCP server's `apply` tool: the lock,
/// a fresh plan that must hash to `wanted`, consent to a replacement, then the actions and
/// verify. `stop` is watched along with the signals. `terminal`: a person at a terminal may
/// type consent to a replacement (never for the MCP server, whose stdin is the protocol).
pub(crate) fn apply_hash(
    global: &Global,
    args: &ApplyArgs,
    wanted: &str,
    stop: &Signals,
    terminal: bool,
) -> Result<Applied> {
    let locked = locked_plan(global)?;
    if *wanted != locked.hash {
        return Err(refusal(
            global,
            &format!("the plan now hashes to {}, not {wanted}: something changed since it was reviewed", locked.hash),
        ));
    }
    execute(global, args, locked, stop, terminal)
}

/// After the gate: consent to a replacement, then the actions, verify and the summary.
fn execute(global: &Global, args: &ApplyArgs, locked: Locked, stop: &Signals, terminal: bool) -> Result<Applied> {
    let Locked { lock, rt, computed, hash } = locked;
    let plan = &computed.plan;
    if plan.is_empty() {
        crate::stderrln!("No changes: the cluster matches the config.");
        let outcome = Outcome::default();
        return Ok(Applied { hash, nothing_to_do: true, outcome, verify_failed: Vec::new(), stopped: false });
    }
    let name = &computed.inputs.config.cluster.name;
    // Before any question: a missing k3d refuses whatever the answer would be.
    needs_k3d(plan)?;
    if plan.replaces_cluster() && !args.allow_replace {
        let cluster = plan.actions.iter().any(|a| a.action == ActionKind::Replace && a.id.starts_with("k3d/cluster/"));
        let what = if cluster {
            format!("recreates cluster {name}, which deletes its state")
        } else {
            let ids: Vec<String> = plan
                .actions
                .iter()
                .filter(|a| a.action == ActionKind::Replace)
                .map(|a| crate::escape::one_line(&a.id).into_owned())
                .collect();
            format!(
                "deletes and creates again {} (a field the API server will not change), losing what they hold",
                ids.join(", ")
            )
        };
        let consent = terminal && ask(&format!("This {what}. Type the cluster name {name} to confirm:")) == *name;
        if !consent {
            return Err(refused(
                format!("the plan {what}; not done without consent"),
                "back up what you need, then pass --allow-replace (on a terminal, type the cluster name)".into(),
            ));
        }
    }

    let mut providers = providers(name);
    providers.json = global.json;
    // k3d inherits the lock: it outlives this process while a k3d it started runs.
    providers.lock = lock.for_child().ok();
    // An existing cluster is reached through its own context, never k3d's.
    providers.context = computed.inputs.config.cluster.context.clone();
    providers.config_dir = computed.inputs.dir.clone();
    let actions = executable(plan, &computed.graph);
    check_node_image_first(&rt, &providers, &actions)?;
    providers.batch_nodes(&actions);
    let reporter = Reporter::new(global.json, actions.len() + plan.verify.len());
    let signals = stop.clone().watching(&rt, global.json)?;
    let stop = || signals.stopped();
    let outcome = rt.block_on(execute_until(&actions, &providers, args.parallel, &stop, &mut |e| reporter.event(e)));
    let mut verify_failed = Vec::new();
    if outcome.ok() && !plan.verify.is_empty() && !signals.stopped() {
        let timeout = std::time::Duration::from_secs(args.verify_timeout);
        let results: Vec<(String, std::result::Result<(), String>)> = rt.block_on(async {
            // Registered before the flag is read: `notify_waiters` keeps no permit, so a stop
            // between the check above and a later `notified()` would be lost, and verify would
            // run its whole timeout after a Ctrl-C or an MCP cancel.
            let stopped = signals.notify.notified();
            tokio::pin!(stopped);
            stopped.as_mut().enable();
            let cut_short =
                || plan.verify.iter().map(|id| (id.clone(), Err("stopped by a signal".to_string()))).collect();
            if signals.stopped() {
                return cut_short();
            }
            // The checks' errors become text here, the edge: each is printed and reported.
            let client = &match providers.watch_client().await {
                Ok(c) => c,
                Err(e) => return plan.verify.iter().map(|id| (id.clone(), Err(e.to_string()))).collect(),
            };
            let reporter = &reporter;
            let context = computed.inputs.config.cluster.context.as_deref();
            let checks = plan.verify.iter().map(|id| {
                let spec = computed.graph.get(id).map(|r| r.spec.clone()).unwrap_or_default();
                async move {
                    reporter.event(&Event::Started { id: id.clone() });
                    let began = Instant::now();
                    let mut result = match context {
                        // An existing cluster: its own context, and no node containers to look in.
                        Some(context) => verify::wait_for_in(client, &spec, context, None, timeout).await,
                        None => verify::wait_for(client, &spec, name, timeout).await,
                    }
                    .map_err(|e| e.to_string());
                    if result.is_ok() && verify::chat_request(&spec).is_some() {
                        // The model is listed: one short chat completion, and its reply shown.
                        let deadline =
                            timeout.max(std::time::Duration::from_secs(spec["timeout_s"].as_u64().unwrap_or(0)));
                        let left = deadline.saturating_sub(began.elapsed()).max(std::time::Duration::from_secs(60));
                        result = match tokio::time::timeout(left, verify::warm_up(client, &spec)).await {
                            Ok(Ok(reply)) => {
                                reporter.note(&verify::warm_up_note(&spec, &reply));
                                Ok(())
                            }
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(_) => Err(format!(
                                "svc/{} lists its model but gave no reply to a chat completion within {}s",
                                spec["service"].as_str().unwrap_or_default(),
                                left.as_secs()
                            )),
                        };
                    }
                    let elapsed_ms = began.elapsed().as_millis() as u64;
                    match &result {
                        Ok(()) => reporter.event(&Event::Done { id: id.clone(), elapsed_ms }),
                        Err(error) => {
                            reporter.event(&Event::Failed { id: id.clone(), elapsed_ms, error: error.clone() })
                        }
                    }
                    (id.clone(), result)
                }
            });
            tokio::select! {
                results = futures_util::future::join_all(checks) => results,
                _ = stopped => cut_short(),
            }
        });
        verify_failed = results.into_iter().filter_map(|(id, r)| r.err().map(|e| (id, e))).collect();
    }
    reporter.finish();
    print_summary(&reporter, &outcome, &verify_failed);
    drop(lock);
    let stopped = signals.stopped();
    Ok(Applied { hash, nothing_to_do: false, outcome, verify_failed, stopped })
}

fn refusal(global: &Global, why: &str) -> Error {
    let k3d_gpu = || global.k3d_gpu();
    refused(
        format!("refused: {why}"),
        format!(
            "re-plan: `{}`, review it, then `{}`",
            k3d_gpu().lit("plan --out plan.json"),
            k3d_gpu().lit("apply plan.json")
        ),
    )
}

/// `k3d-gpu … apply --plan-hash HASH [--allow-replace]` with the options this run was given
/// (crate::shell): what a person pastes to apply the plan they reviewed. The MCP server's
/// terminal command is this one too.
pub fn apply_command(global: &Global, hash: &str, allow_replace: bool) -> crate::shell::Command {
    let command = global.k3d_gpu().lit("apply").opt("--plan-hash", hash);
    if allow_replace { command.lit("--allow-replace") } else { command }
}

/// Refuses before any action runs when the plan has a cluster action and the k3d binary is
/// not there: otherwise the first action fails and every other one is skipped.
fn needs_k3d(plan: &Plan) -> Result<()> {
    if !plan.actions.iter().any(|a| a.id.starts_with("k3d/")) {
        return Ok(());
    }
    let binary = crate::apply::k3d::binary(&|k| std::env::var(k).ok());
    if crate::apply::k3d::locate(&binary, std::env::var_os("PATH").as_deref()).is_some() {
        return Ok(());
    }
    Err(refused(
        format!("refused before any action ran: this plan runs k3d, and {} was not found", binary.display()),
        crate::apply::k3d::INSTALL_HINT.into(),
    ))
}

/// The node image's self-check before any action runs, when the plan creates or replaces the
/// cluster from an image the engine already has (no node-image action): a refused image then
/// changes nothing at all. An image the plan builds or pulls is checked by the cluster action
/// itself, after the build and before its first k3d call.
fn check_node_image_first(rt: &tokio::runtime::Runtime, providers: &Providers, actions: &[Action]) -> Result<()> {
    if actions.iter().any(|a| a.id == crate::compile::NODE_IMAGE_ID) {
        return Ok(());
    }
    let creates =
        |a: &&Action| a.id.starts_with("k3d/cluster/") && matches!(a.action, ActionKind::Create | ActionKind::Replace);
    let Some(spec) = actions.iter().find(creates).and_then(|a| a.after.as_ref()) else { return Ok(()) };
    rt.block_on(providers.check_node_image(spec))
        .map_err(|e| refused(format!("refused before any action ran: {e}"), crate::node_check::FIX.into()))
}

/// A destroy hash that is not the destroy plan's: the way back is `destroy` itself, not the
/// apply workflow (`plan --out`, `apply PLANFILE`), which never deletes the cluster.
fn destroy_refusal(global: &Global, hash: &str, wanted: &str) -> Error {
    refused(
        format!("refused: the destroy plan now hashes to {hash}, not {wanted}"),
        format!(
            "run `{}` to review the current destroy plan; it prints the command that runs it",
            global.k3d_gpu().lit("destroy")
        ),
    )
}

/// The destroy plan, from the config's cluster name and Docker alone (no facts, no compile).
fn destroy_plan(inputs: &super::Inputs, rt: &tokio::runtime::Runtime) -> Result<Plan> {
    let name = &inputs.config.cluster.name;
    let env = |k: &str| std::env::var(k).ok();
    let endpoint = crate::observe::docker::endpoint(&env, None);
    let cluster = rt
        .block_on(crate::observe::observe_containers(
            &endpoint,
            name,
            inputs.config.cluster.image.as_deref().unwrap_or_default(),
        ))
        .map_err(super::observe_failed)?;
    let observed =
        crate::observe::Observed { schema: crate::observe::SCHEMA.into(), cluster, kubernetes: None, node_image: None };
    let digests = Inputs::for_destroy(&inputs.config, &observed);
    crate::plan::destroy(&observed, digests).map_err(|crate::plan::NotManaged| {
        refused(
            format!(
                "cluster {name} was not created by k3d-gpu (its nodes carry no {} label)",
                crate::observe::CLUSTER_SPEC_LABEL
            ),
            format!(
                "k3d-gpu deletes only what it manages; delete it yourself with `{}`",
                crate::shell::Command::new("k3d").lit("cluster delete").arg(name)
            ),
        )
    })
}

/// What `destroy` without a hash prints: the plan, or, when there is nothing to delete, that
/// the cluster does not exist (not the plan's "matches the config", which is about apply).
fn destroy_text(plan: &Plan, hash: &str, cluster: &str) -> String {
    if plan.is_empty() {
        return format!("Nothing to destroy: cluster {cluster} does not exist.\nplan hash: {hash}\n");
    }
    crate::plan::render::text(plan, hash, crate::plan::render::Style { color: false })
}

/// Where a destroy plan's cluster keeps its host model store on this machine, and how to
/// delete it: destroy never does (compile/models.rs).
fn model_store_note(plan: &Plan, cluster: &str) -> Option<String> {
    let store = plan.actions.iter().find_map(|a| a.before.as_ref()).map(|b| b["model_store"].clone())?;
    if store.is_null() {
        return None;
    }
    let env = |k: &str| std::env::var(k).ok();
    // The directory the nodes mounted, where the cluster recorded it (links resolved).
    let short = match store["host"].as_str() {
        Some(host) => host.to_string(),
        None => crate::compile::models::short(store["dir"].as_str(), cluster),
    };
    let path = crate::apply::k3d::model_store_path(&short, crate::apply::k3d::data_home(&env).as_deref()).ok()?;
    let path = path.display().to_string();
    Some(format!(
        "note: the host model store {} is kept for the next cluster; to delete its models: {}",
        crate::escape::one_line(&path),
        crate::shell::Command::new("rm").lit("-rf").arg(&path)
    ))
}

pub fn destroy(global: &Global, args: &DestroyArgs) -> Result<u8> {
    let inputs = super::load_config(global)?;
    let lock = lock_cluster(global, &inputs.config.cluster.name)?;
    let rt = super::runtime()?;
    let fleet = super::fleet::is_fleet(&inputs);
    let plan = if fleet { super::fleet::destroy_plan(global, &inputs, &rt)? } else { destroy_plan(&inputs, &rt)? };
    let hash = plan.hash();
    let Some(wanted) = &args.plan_hash else {
        let text = match (&inputs.config.cluster.context, fleet && plan.is_empty()) {
            (Some(context), true) => format!(
                "Nothing to destroy: the cluster behind context {} holds nothing k3d-gpu manages.\nplan hash: {hash}\n",
                crate::escape::one_line(context)
            ),
            _ => destroy_text(&plan, &hash, &inputs.config.cluster.name),
        };
        // --json: the destroy plan itself (plan/v1), as `plan --json` prints a plan.
        super::print_bytes(if global.json { plan.to_bytes() } else { text.into_bytes() }.as_slice());
        if !plan.is_empty() {
            if let Some(note) = model_store_note(&plan, &inputs.config.cluster.name) {
                crate::stderrln!("{note}");
            }
            crate::stderrln!("to run it: {}", global.k3d_gpu().lit("destroy").opt("--plan-hash", &hash));
        }
        return Ok(EXIT_OK);
    };
    if *wanted != hash {
        return Err(destroy_refusal(global, &hash, wanted));
    }
    if plan.is_empty() {
        crate::stderrln!("Nothing to destroy.");
        return Ok(EXIT_OK);
    }
    needs_k3d(&plan)?;
    let mut providers = providers(&inputs.config.cluster.name);
    providers.context = inputs.config.cluster.context.clone();
    providers.lock = lock.for_child().ok();
    let reporter = Reporter::new(global.json, plan.actions.len());
    let signals = Signals::watch(&rt, global.json)?;
    let stop = || signals.stopped();
    providers.batch_nodes(&plan.actions);
    let outcome = rt.block_on(execute_until(&plan.actions, &providers, 1, &stop, &mut |e| reporter.event(e)));
    reporter.finish();
    print_summary(&reporter, &outcome, &[]);
    if outcome.ok()
        && !global.json
        && let Some(note) = model_store_note(&plan, &inputs.config.cluster.name)
    {
        crate::stderrln!("{note}");
    }
    Ok(if outcome.ok() { EXIT_OK } else { EXIT_FAILED })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn y_and_yes_in_any_case_consent_and_nothing_else_does() {
        for yes in ["y", "Y", "yes", "YES", "Yes", " yes ", "y\n"] {
            assert!(consents(yes), "{yes:?}");
        }
        for no in ["", "n", "no", "ye", "yess", "yes please", "sure", "1"] {
            assert!(!consents(no), "{no:?}");
        }
    }

    /// One failed pull and 39 actions behind it: three lines, not 78 (a skip and a "not
    /// started" line each).
    #[test]
    fn what_did_not_start_is_summarised_by_the_failure_it_waited_on() {
        let mut skipped = std::collections::BTreeMap::new();
        skipped.insert("k3d/cluster/lab".to_string(), "docker/node-image".to_string());
        let mut not_started = vec!["k3d/cluster/lab".to_string()];
        for i in 0..38 {
            let id = format!("k8s/v1/ConfigMap/ns/c{i:02}");
            skipped.insert(id.clone(), "k3d/cluster/lab".into());
            not_started.push(id);
        }
        not_started.push("k8s/v1/ConfigMap/other/stopped".into());
        let outcome = Outcome {
            done: vec!["a".into()],
            failed: vec![("docker/node-image".into(), "pull failed".into())],
            not_started,
            elapsed_ms: 0,
        };
        let text = summary(&outcome, &[], &skipped);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "",
                "Apply: 1 done, 1 failed, 40 not started.",
                "  failed: docker/node-image: pull failed",
                "  not started: 1 action, stopped before it began: k8s/v1/ConfigMap/other/stopped",
                "  not started: 39 actions waiting on docker/node-image, which failed: k3d/cluster/lab, k8s/v1/ConfigMap/ns/c00, k8s/v1/ConfigMap/ns/c01 and 36 more",
                "Re-plan (`k3d-gpu plan`) to see what is left; applying again continues from there.",
            ],
            "{text}"
        );
    }

    #[test]
    fn the_commands_after_a_refusal_carry_the_options_given() {
        let global = Global {
            config: Some("my lab/k3dgpu.toml".into()),
            root: vec!["hosts/a b".into()],
            facts: vec![],
            stdlib: Some("cat".into()),
            json: true,
            vendors: Some("npu".into()),
        };
        let given = "-c 'my lab/k3dgpu.toml' --root 'hosts/a b' --stdlib cat --vendors npu";
        let hash = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            apply_command(&global, &hash, true).to_string(),
            format!("k3d-gpu {given} apply --plan-hash {hash} --allow-replace")
        );
        let Error::Refused { help: Some(help), .. } = refusal(&global, "stale") else { panic!("a refusal") };
        assert!(help.contains(&format!("`k3d-gpu {given} plan --out plan.json`")), "{help}");
        assert!(help.contains(&format!("`k3d-gpu {given} apply plan.json`")), "{help}");
        let Error::Refused { help: Some(help), .. } = destroy_refusal(&global, &hash, &hash) else { panic!() };
        assert!(help.contains(&format!("`k3d-gpu {given} destroy`")), "{help}");
    }
}
