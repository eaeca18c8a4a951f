//! The page is self-contained, deterministic and escapes what it shows.

use super::*;
use crate::facts::Level;

fn report() -> Report {
    Report {
        schema: SCHEMA,
        cluster: "lab".into(),
        host: Host {
            fingerprint: "sha256:abc".into(),
            engines: vec![Engine { vendor: "intel".into(), devices: 1, resources: vec!["gpu.intel.com/xe".into()] }],
            inactive: vec![Inactive { vendor: "nvidia".into(), reason: "no /dev/nvidia0".into() }],
        },
        findings: vec![
            Finding::new(Level::Warn, "fw-old", "firmware <script>alert(1)</script> \u{1b}[2J", "/lib/firmware")
                .with_fix("update it"),
        ],
        plan: PlanSummary {
            hash: "sha256:def".into(),
            actions: vec![PlanAction { id: "k3d/cluster".into(), action: "create".into(), reason: "absent".into() }],
            verify: vec![],
        },
        graph: vec![
            GraphNode { id: "docker/node-image".into(), depends_on: vec![] },
            GraphNode { id: "k3d/cluster".into(), depends_on: vec!["docker/node-image".into()] },
            GraphNode {
                id: "k8s/DaemonSet/kube-system/intel-gpu-plugin".into(),
                depends_on: vec!["k3d/cluster".into()],
            },
        ],
        state: None,
        observed_note: Some("offline".into()),
    }
}

#[test]
fn the_page_is_self_contained_and_the_same_every_time() {
    let page = html(&report());
    assert_eq!(page, html(&report()), "same inputs, same bytes");
    assert!(page.contains("content=\"default-src 'none'"), "{page}");
    assert!(!page.to_ascii_lowercase().contains("<script"), "no script, not even an escaped finding's");
    // Nothing to load: no src or @import, and links (the SVG's arrows) only within the page.
    assert!(!page.contains("src=") && !page.contains("@import"));
    for attr in ["href=\"", "url("] {
        for (at, _) in page.match_indices(attr) {
            assert!(page[at + attr.len()..].starts_with('#'), "{}", &page[at..at + 40]);
        }
    }
    assert!(page.contains("&lt;script&gt;") && page.contains("\\x1b[2J") && !page.contains('\u{1b}'));
    assert!(page.contains("<svg") && page.contains("intel-gpu-plugin") && page.contains("sha256:def"));
    assert!(page.contains("update it") && page.contains("gpu.intel.com/xe"));
}

#[test]
fn the_svg_layout_is_deterministic_and_has_a_box_per_resource() {
    let graph = report().graph;
    let first = svg(&graph);
    for _ in 0..5 {
        assert_eq!(svg(&graph), first);
    }
    assert!(first.matches("<rect").count() >= graph.len(), "{first}");
    assert!(svg(&[]).is_empty());
}

#[test]
fn the_text_names_engines_findings_plan_and_cluster() {
    let text = text(&report());
    for needle in [
        "intel",
        "gpu.intel.com/xe",
        "inactive: no /dev/nvidia0",
        "fix: update it",
        "plan sha256:def",
        "create",
        "not observed (offline)",
    ] {
        assert!(text.contains(needle), "{needle}:\n{text}");
    }
    assert!(!text.contains('\u{1b}'));
    let json = crate::canonical::to_bytes(&report());
    assert!(String::from_utf8(json).unwrap().contains("\"schema\": \"k3d-gpu.report/v1\""));
}
