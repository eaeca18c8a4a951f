//! Runs a plan's actions in dependency order: every action whose dependencies are done
//! starts at once (up to a bound), a failure stops what depends on it while unrelated
//! branches finish, and the outcome lists done / failed / not started.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use serde::Serialize;

use super::error::ApplyError;
use crate::plan::Action;

/// How many actions run at once by default: enough for a plan of device plugins to go out
/// together, few enough not to flood a small API server.
pub const DEFAULT_PARALLEL: usize = 16;

/// Runs one action. Providers implement it; tests use fakes. The error becomes text here,
/// in the outcome and its events: what it is has been decided by then (the providers retry
/// what can heal).
pub trait Runner: Sync {
    fn run<'a>(&'a self, action: &'a Action) -> Pin<Box<dyn Future<Output = Result<(), ApplyError>> + Send + 'a>>;
}

/// Progress events, in the order they happen.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    Started { id: String },
    Done { id: String, elapsed_ms: u64 },
    Failed { id: String, elapsed_ms: u64, error: String },
    Skipped { id: String, because: String },
}

#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub done: Vec<String>,
    pub failed: Vec<(String, String)>,
    pub not_started: Vec<String>,
    pub elapsed_ms: u64,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && self.not_started.is_empty()
    }
}

/// Runs `actions` with at most `parallel` at once, reporting each event to `report`.
pub async fn execute(
    actions: &[Action],
    runner: &dyn Runner,
    parallel: usize,
    report: &mut dyn FnMut(&Event),
) -> Outcome {
    execute_until(actions, runner, parallel, &|| false, report).await
}

/// [`execute`], starting nothing new once `stop` says so (a signal): the actions already
/// running finish, what never started is listed as not started.
pub async fn execute_until(
    actions: &[Action],
    runner: &dyn Runner,
    parallel: usize,
    stop: &(dyn Fn() -> bool + Sync),
    report: &mut dyn FnMut(&Event),
) -> Outcome {
    let start = Instant::now();
    let ids: BTreeSet<&str> = actions.iter().map(|a| a.id.as_str()).collect();
    // Dependencies outside the plan are already satisfied.
    let deps: BTreeMap<&str, Vec<&str>> = actions
        .iter()
        .map(|a| (a.id.as_str(), a.depends_on.iter().map(String::as_str).filter(|d| ids.contains(d)).collect()))
        .collect();
    let by_id: BTreeMap<&str, &Action> = actions.iter().map(|a| (a.id.as_str(), a)).collect();
    let mut pending: BTreeSet<&str> = ids.clone();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut failed: BTreeMap<&str, String> = BTreeMap::new();
    let mut blocked: BTreeMap<&str, String> = BTreeMap::new();
    let mut running = FuturesUnordered::new();
    let parallel = parallel.max(1);

    loop {
        // Anything that depends on a failure will never run, nor what depends on that.
        loop {
            let doomed: Vec<&str> = pending
                .iter()
                .copied()
                .filter(|id| deps[id].iter().any(|d| failed.contains_key(d) || blocked.contains_key(d)))
                .collect();
            if doomed.is_empty() {
                break;
            }
            for id in doomed {
                let because = deps[id]
                    .iter()
                    .find(|d| failed.contains_key(*d) || blocked.contains_key(*d))
                    .copied()
                    .unwrap_or_default();
                pending.remove(id);
                blocked.insert(id, because.to_string());
                report(&Event::Skipped { id: id.to_string(), because: because.to_string() });
            }
        }
        let ready: Vec<&str> = pending
            .iter()
            .copied()
            .filter(|id| deps[id].iter().all(|d| done.contains(d)))
            .take(if stop() { 0 } else { parallel - running.len() })
            .collect();
        for id in ready {
            pending.remove(id);
            report(&Event::Started { id: id.to_string() });
            let action = by_id[id];
            running.push(async move {
                let began = Instant::now();
                let result = runner.run(action).await;
                (action.id.as_str(), result, began.elapsed())
            });
        }
        let Some((id, result, took)) = running.next().await else { break };
        let elapsed_ms = took.as_millis() as u64;
        match result {
            Ok(()) => {
                done.insert(id);
                report(&Event::Done { id: id.to_string(), elapsed_ms });
            }
            Err(error) => {
                let error = error.to_string();
                report(&Event::Failed { id: id.to_string(), elapsed_ms, error: error.clone() });
                failed.insert(id, error);
            }
        }
    }
    // What is left never became ready (a dependency failed, or a cycle, which plans never have).
    let mut not_started: Vec<String> = blocked.keys().chain(pending.iter()).map(|s| s.to_string()).collect();
    not_started.sort();
    Outcome {
        done: done.into_iter().map(str::to_string).collect(),
        failed: failed.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        not_started,
        elapsed_ms: start.elapsed().as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ActionKind, Reason};

    fn action(id: &str, deps: &[&str]) -> Action {
        Action {
            id: id.into(),
            action: ActionKind::Create,
            reason: Reason { code: "t".into(), text: "t".into() },
            replace_paths: vec![],
            changed_paths: vec![],
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            before: None,
            after: None,
        }
    }

    /// Sleeps `ms` per action; fails the ids in `fail`; records the order of starts.
    struct Fake {
        ms: u64,
        fail: Vec<&'static str>,
        log: std::sync::Mutex<Vec<String>>,
        live: std::sync::atomic::AtomicUsize,
        peak: std::sync::atomic::AtomicUsize,
    }

    impl Runner for Fake {
        fn run<'a>(&'a self, action: &'a Action) -> Pin<Box<dyn Future<Output = Result<(), ApplyError>> + Send + 'a>> {
            Box::pin(async move {
                use std::sync::atomic::Ordering::SeqCst;
                let now = self.live.fetch_add(1, SeqCst) + 1;
                self.peak.fetch_max(now, SeqCst);
                self.log.lock().unwrap().push(action.id.clone());
                tokio::time::sleep(std::time::Duration::from_millis(self.ms)).await;
                self.live.fetch_sub(1, SeqCst);
                if self.fail.contains(&action.id.as_str()) { Err("boom".into()) } else { Ok(()) }
            })
        }
    }

    fn fake(ms: u64, fail: &[&'static str]) -> Fake {
        Fake { ms, fail: fail.to_vec(), log: Default::default(), live: Default::default(), peak: Default::default() }
    }

    fn run(actions: &[Action], runner: &Fake, parallel: usize) -> (Outcome, Vec<Event>) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut events = Vec::new();
        let outcome = rt.block_on(execute(actions, runner, parallel, &mut |e| events.push(e.clone())));
        (outcome, events)
    }

    #[test]
    fn dependencies_run_first_and_independent_actions_together() {
        let actions = [action("ns", &[]), action("ds", &["ns"]), action("cm", &["ns"]), action("other", &[])];
        let f = fake(20, &[]);
        let (outcome, _) = run(&actions, &f, 8);
        assert!(outcome.ok());
        let log = f.log.lock().unwrap().clone();
        let pos = |id: &str| log.iter().position(|x| x == id).unwrap();
        assert!(pos("ns") < pos("ds") && pos("ns") < pos("cm"));
        assert_eq!(f.peak.load(std::sync::atomic::Ordering::SeqCst), 2, "ns and other, then ds and cm");
    }

    #[test]
    fn a_failure_stops_its_dependents_and_lets_the_rest_finish() {
        let actions =
            [action("a", &[]), action("b", &["a"]), action("c", &["b"]), action("x", &[]), action("y", &["x"])];
        let (outcome, events) = run(&actions, &fake(5, &["a"]), 4);
        assert_eq!(outcome.failed, [("a".to_string(), "boom".to_string())]);
        assert_eq!(outcome.done, ["x", "y"]);
        assert_eq!(outcome.not_started, ["b", "c"]);
        assert!(events.contains(&Event::Skipped { id: "b".into(), because: "a".into() }));
        assert!(
            events.contains(&Event::Skipped { id: "c".into(), because: "b".into() }),
            "the whole chain is reported"
        );
    }

    #[test]
    fn a_stop_lets_running_actions_finish_and_starts_nothing_new() {
        let actions = [action("a", &[]), action("b", &["a"]), action("x", &[])];
        let f = fake(30, &[]);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Stop as soon as the first action has started.
        let stop = || !f.log.lock().unwrap().is_empty();
        let outcome = rt.block_on(execute_until(&actions, &f, 1, &stop, &mut |_| {}));
        assert_eq!(outcome.done, ["a"], "the running action finished");
        assert_eq!(outcome.not_started, ["b", "x"]);
        assert_eq!(f.live.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing left running");
    }

    #[test]
    fn the_bound_on_parallelism_holds() {
        let actions: Vec<Action> = (0..20).map(|i| action(&format!("a{i}"), &[])).collect();
        let f = fake(10, &[]);
        let (outcome, _) = run(&actions, &f, 3);
        assert!(outcome.ok());
        assert_eq!(f.peak.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
