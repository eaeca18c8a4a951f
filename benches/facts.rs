//! In-process cost of `detect::facts` + `to_bytes` on the fixture hosts: what `k3d-gpu facts`
//! spends once the process is up. Plain std so the main crate gains no dependency. Timings on
//! shared runners are noisy, so CI does not run it, but a missed target exits 1.
//!
//!     cargo bench --bench facts [-- ITERATIONS]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use k3d_gpu::facts::VendorFilter;
use k3d_gpu::host::HostRoot;

/// The richest host (hybrid CPU, iGPU with GuC/HuC, two NVIDIA GPUs) and the biggest tree.
const HOSTS: [&str; 2] = ["tests/fixtures/hosts/desktop-rpl-nvidia", "tests/fixtures/hosts/xeon-2s-snc2"];
const WARMUP: usize = 20;
const TARGET_MS: f64 = 10.0;

fn one_run(root: &Path) -> usize {
    // Opening the root is part of the run: the CLI does it once per invocation too.
    let host = HostRoot::open(root).expect("fixture host opens");
    let facts = k3d_gpu::detect::facts(&host, &VendorFilter::Auto);
    facts.to_bytes().len()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // `cargo bench` passes `--bench` to harness = false targets; only a bare number is ours.
    let iterations = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(200).max(1);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all_pass = true;

    for rel in HOSTS {
        let root = manifest.join(rel);
        let mut bytes = 0;
        for _ in 0..WARMUP {
            bytes = black_box(one_run(black_box(&root)));
        }
        let mut times: Vec<Duration> = (0..iterations)
            .map(|_| {
                let start = Instant::now();
                black_box(one_run(black_box(&root)));
                start.elapsed()
            })
            .collect();
        times.sort_unstable();
        // Nearest-rank percentiles: no interpolation needed at these sample sizes.
        let pct = |p: f64| times[((p * iterations as f64).ceil() as usize).clamp(1, iterations) - 1];
        let median = ms(pct(0.5));
        all_pass &= median < TARGET_MS;
        println!(
            "{rel}: {iterations} runs, {bytes} bytes out  median {median:.3} ms  p90 {:.3} ms  min {:.3} ms",
            ms(pct(0.9)),
            ms(times[0]),
        );
    }
    println!("target: median < {TARGET_MS} ms -> {}", if all_pass { "PASS" } else { "FAIL" });
    // A missed target exits 1, so a script running the bench notices.
    if !all_pass {
        std::process::exit(1);
    }
}
