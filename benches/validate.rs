//! `validate` of every example against every fixture host in one process: detect + parse +
//! compile per pair, with the embedded catalog loaded once (as the CLI does per run).
//! Target: at most 2 ms per pair. A benchmark, not a test, but a missed target exits 1 so a
//! script that runs it notices (`bench/scale.py` does).
//!
//!     cargo bench --bench validate [-- RUNS]

use std::path::Path;
use std::time::{Duration, Instant};

use k3d_gpu::catalog::Catalog;
use k3d_gpu::facts::VendorFilter;
use k3d_gpu::host::HostRoot;

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(30);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalog = Catalog::embedded().expect("the embedded catalog loads");
    let mut examples: Vec<(String, String)> = std::fs::read_dir(repo.join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap()))
        .collect();
    examples.sort();
    let mut hosts: Vec<_> = std::fs::read_dir(repo.join("tests/fixtures/hosts"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.path())
        .collect();
    hosts.sort();

    let mut per_pair = Vec::new();
    let mut ok_pairs = 0;
    for (name, text) in &examples {
        for host in &hosts {
            let mut samples = Vec::with_capacity(runs);
            let mut ok = false;
            for _ in 0..runs {
                let start = Instant::now();
                let root = HostRoot::open(host).unwrap();
                let facts = k3d_gpu::detect::facts(&root, &VendorFilter::Auto);
                let config = k3d_gpu::config::load_str(name, text).unwrap();
                ok = k3d_gpu::compile::compile(&config, &facts, &catalog).is_ok();
                samples.push(start.elapsed());
            }
            samples.sort();
            ok_pairs += usize::from(ok);
            per_pair.push((
                samples[samples.len() / 2],
                name.clone(),
                host.file_name().unwrap().to_string_lossy().into_owned(),
                ok,
            ));
        }
    }
    per_pair.sort_by_key(|p| std::cmp::Reverse(p.0));
    println!(
        "{} examples x {} hosts = {} pairs, {runs} runs each ({ok_pairs} pairs validate)",
        examples.len(),
        hosts.len(),
        per_pair.len()
    );
    println!("slowest pairs (median per run):");
    for (t, example, host, ok) in per_pair.iter().take(5) {
        println!("  {:>8.3} ms  {example} on {host}{}", ms(*t), if *ok { "" } else { " (fails validation)" });
    }
    let mut medians: Vec<Duration> = per_pair.iter().map(|p| p.0).collect();
    medians.sort();
    let median = medians[medians.len() / 2];
    let worst = medians[medians.len() - 1];
    println!("per pair: median {:.3} ms, worst {:.3} ms", ms(median), ms(worst));
    let pass = worst <= Duration::from_millis(2);
    println!("target: worst pair <= 2 ms -> {}", if pass { "PASS" } else { "FAIL" });
    if !pass {
        std::process::exit(1);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
