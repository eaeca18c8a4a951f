//! Golden facts/v1 documents and detect tables, one per fixture host.
//!
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test golden` and review the diff.

mod support;

use support::{check_golden, facts_of, host_names};

#[test]
fn facts_and_detect_output_match_the_goldens() {
    let mut stale = Vec::new();
    let hosts = host_names();
    assert!(hosts.len() >= 12, "expected at least 12 fixture hosts, found {}", hosts.len());
    for host in &hosts {
        let facts = facts_of(host);
        if let Err(e) = check_golden(&format!("tests/golden/facts/{host}.json"), &facts.to_bytes()) {
            stale.push(e);
        }
        let table = k3d_gpu::commands::render_detect(&facts);
        if let Err(e) = check_golden(&format!("tests/golden/detect/{host}.txt"), table.as_bytes()) {
            stale.push(e);
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}
