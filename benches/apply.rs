//! The executor on a synthetic plan: 50 independent 100 ms actions plus a chain of 5.
//! Critical path: 5 x 100 ms. Target: wall time within 1.1x of it, at the default bound on
//! parallel actions. A benchmark: it prints, and exits 1 on a missed target.
//!
//!     cargo bench --bench apply

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use k3d_gpu::apply::error::ApplyError;
use k3d_gpu::apply::executor::{DEFAULT_PARALLEL, Runner, execute};
use k3d_gpu::plan::{Action, ActionKind, Reason};

struct Sleep(Duration);

impl Runner for Sleep {
    fn run<'a>(&'a self, _: &'a Action) -> Pin<Box<dyn Future<Output = Result<(), ApplyError>> + Send + 'a>> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            Ok(())
        })
    }
}

fn action(id: String, deps: Vec<String>) -> Action {
    Action {
        id,
        action: ActionKind::Create,
        reason: Reason { code: "bench".into(), text: "bench".into() },
        replace_paths: vec![],
        changed_paths: vec![],
        depends_on: deps,
        before: None,
        after: None,
    }
}

fn main() {
    let step = Duration::from_millis(100);
    let mut actions: Vec<Action> = (0..50).map(|i| action(format!("independent-{i:02}"), vec![])).collect();
    for i in 0..5 {
        let deps = if i == 0 { vec![] } else { vec![format!("chain-{}", i - 1)] };
        actions.push(action(format!("chain-{i}"), deps));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut walls = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let outcome = runtime.block_on(execute(&actions, &Sleep(step), DEFAULT_PARALLEL, &mut |_| {}));
        assert!(outcome.ok());
        walls.push(start.elapsed());
    }
    walls.sort();
    let wall = walls[walls.len() / 2];
    let critical = step * 5;
    let ratio = wall.as_secs_f64() / critical.as_secs_f64();
    println!("55 actions (50 independent + chain of 5) x 100 ms, parallel bound {DEFAULT_PARALLEL}");
    println!(
        "median wall {:.0} ms, critical path {:.0} ms, ratio {ratio:.2}x",
        wall.as_secs_f64() * 1e3,
        critical.as_secs_f64() * 1e3
    );
    println!("target: ratio <= 1.1x -> {}", if ratio <= 1.1 { "PASS" } else { "FAIL" });
    // A missed target exits 1, so a script running the bench notices.
    if ratio > 1.1 {
        std::process::exit(1);
    }
}
