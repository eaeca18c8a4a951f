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
            warnings: vec![],
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
        test: None,
        dashboard: None,
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

fn node(id: &str, deps: &[&str]) -> GraphNode {
    GraphNode { id: id.into(), depends_on: deps.iter().map(|d| d.to_string()).collect() }
}

/// A fleet's shape: per node a few labels, an annotation and a check, shared objects once.
fn fleet_graph(nodes: usize) -> Vec<GraphNode> {
    let mut g =
        vec![node("k8s/core/Namespace/gpu", &[]), node("k8s/apps/DaemonSet/gpu/plugin", &["k8s/core/Namespace/gpu"])];
    for i in 0..nodes {
        let n = format!("node-{i:04}");
        for key in ["component.k3d-gpu.io/plugin", "k3d-gpu.io/hybrid-cpu", "intel.feature.node.kubernetes.io/gpu"] {
            g.push(node(&format!("node-label/{n}/{key}"), &[]));
        }
        g.push(node(&format!("node-annotation/{n}/k3d-gpu.io/config"), &[]));
        let label = format!("node-label/{n}/component.k3d-gpu.io/plugin");
        g[1].depends_on.push(label);
        g.push(node(&format!("verify/allocatable/{n}/gpu.intel.com/i915"), &["k8s/apps/DaemonSet/gpu/plugin"]));
    }
    g
}

#[test]
fn what_repeats_is_one_box() {
    let boxes = layout::boxes(&fleet_graph(1000));
    let labels: Vec<String> = boxes.iter().map(layout::text).collect();
    assert!(labels.contains(&"node-label/*/component.k3d-gpu.io/plugin ×1000".to_string()), "{labels:#?}");
    assert!(labels.contains(&"verify/allocatable/*/gpu.intel.com/i915 ×1000".to_string()), "{labels:#?}");
    assert!(labels.contains(&"k8s/apps/DaemonSet/gpu/plugin".to_string()), "{labels:#?}");
    assert_eq!(boxes.len(), 7, "{labels:#?}");
    // Edges between groups are merged: the DaemonSet depends on its namespace and one group.
    let ds = boxes.iter().find(|b| b.label == "k8s/apps/DaemonSet/gpu/plugin").unwrap();
    assert_eq!(ds.depends_on.len(), 2);
    // The page holds a box per group, not per resource.
    let page = svg(&fleet_graph(1000));
    assert_eq!(page.matches("<rect").count(), page.matches("×").count() + 2, "every box but two is a group");
    assert!(page.matches("<rect").count() < 20);
    // A small graph is drawn a box per resource, as before.
    assert_eq!(layout::boxes(&report().graph).len(), 3);
}

#[test]
fn claims_group_per_namespace() {
    let mut g = Vec::new();
    for i in 0..1000 {
        g.push(node(&format!("k8s/resource.k8s.io/ResourceClaimTemplate/ns-{}/claim-{i:04}", i % 10), &[]));
    }
    let labels: Vec<String> = layout::boxes(&g).iter().map(layout::text).collect();
    assert_eq!(labels.len(), 10, "{labels:?}");
    assert!(labels.contains(&"k8s/resource.k8s.io/ResourceClaimTemplate/ns-3/* ×100".to_string()), "{labels:?}");
}

/// Boxes that do not group (every id its own) are laid out in columns by depth, whatever their
/// number; cycles between groups end; the same graph gives the same bytes.
#[test]
fn a_graph_that_does_not_group_is_laid_out_in_columns() {
    let mut g = Vec::new();
    for i in 0..3000 {
        let deps: Vec<String> = if i == 0 { vec![] } else { vec![format!("r{}", i / 2)] };
        g.push(GraphNode { id: format!("r{i}"), depends_on: deps });
    }
    let boxes = layout::boxes(&g);
    assert_eq!(boxes.len(), 3000);
    let depth = layout::columns(&boxes);
    assert_eq!(depth[0], 0);
    assert_eq!(depth[2999], 12, "r2999 → r1499 → 749 → 374 → 187 → 93 → 46 → 23 → 11 → 5 → 2 → 1 → r0");
    let page = svg(&g);
    assert_eq!(page.matches("<rect").count(), 3000);
    assert_eq!(page, svg(&g));
    let cycle = vec![
        layout::Box { label: "a".into(), count: 1, depends_on: vec![1] },
        layout::Box { label: "b".into(), count: 1, depends_on: vec![0] },
    ];
    assert_eq!(layout::columns(&cycle).len(), 2);
}

/// A saved `k3d-gpu test --json` document, as `smoke` writes it, is what `report --test` reads.
fn saved_test_result(passed: bool) -> TestResult {
    use crate::smoke::{Count, Outcome, PodResult, Probe, Report as TestReport, SmokePod, Verdict};
    let pod = SmokePod {
        resource: "gpu.intel.com/xe".into(),
        node: "k3d-lab-server-0".into(),
        pod: "k3d-gpu-test-xe-0".into(),
        image: "busybox:1.37".into(),
        probe: Probe::Devices,
        requested: 1,
        expected: 1,
        groups: vec![],
    };
    let verdict = Verdict {
        passed,
        seen: u32::from(passed),
        evidence: vec!["/dev/dri/renderD128 opened".into()],
        cause: (!passed).then(|| "the device node is not in the pod \u{1b}[2J".into()),
        fix: (!passed).then(|| "k3d-gpu logs intel-gpu-plugin".into()),
    };
    let counts = vec![Count { resource: pod.resource.clone(), node: pod.node.clone(), facts: Some(1), allocatable: 1 }];
    let pods = vec![PodResult { pod, outcome: Outcome::default(), verdict }];
    let saved = crate::canonical::to_bytes(&TestReport::new(
        "lab",
        crate::smoke::Found { pods, shares: vec![], claims: vec![], counts, problems: vec![] },
    ));
    serde_json::from_slice(&saved).expect("report reads what test writes")
}

#[test]
fn a_saved_test_result_is_in_each_form() {
    let mut r = report();
    r.test = Some(saved_test_result(true));
    let text = text(&r);
    assert!(text.contains("test: passed, 1 pod(s), 0 failure(s)"), "{text}");
    assert!(text.contains("pass gpu.intel.com/xe on k3d-lab-server-0: 1 of 1 usable"), "{text}");
    let json: serde_json::Value = serde_json::from_slice(&crate::canonical::to_bytes(&r)).unwrap();
    assert_eq!(json["test"]["pods"][0]["verdict"]["passed"], true);
    assert!(html(&r).contains("<h2>Test: passed (1 pod(s))</h2>"));
    // Without one, no section and no key.
    assert!(!super::text(&report()).contains("test:"));
    assert!(json_of(&report()).get("test").is_none());
}

#[test]
fn a_failed_test_shows_its_cause_and_fix_escaped() {
    let mut r = report();
    r.test = Some(saved_test_result(false));
    let text = text(&r);
    assert!(text.contains("test: FAILED, 1 pod(s), 1 failure(s)"), "{text}");
    assert!(text.contains("FAIL gpu.intel.com/xe on k3d-lab-server-0: 0 of 1 usable"), "{text}");
    assert!(text.contains("fix: k3d-gpu logs intel-gpu-plugin"), "{text}");
    let page = html(&r);
    for shown in [&text, &page] {
        assert!(!shown.contains('\u{1b}'), "a raw escape: {shown}");
    }
}

fn json_of(r: &Report) -> serde_json::Value {
    serde_json::from_slice(&crate::canonical::to_bytes(r)).unwrap()
}

/// Issue 41: a saved test result is a file from outside; its names are `Untrusted` as read, so
/// a forged line in a node's name is one escaped line in every form, and kept as it came in JSON.
#[test]
fn a_forged_line_in_a_saved_results_names_is_shown_escaped() {
    const FORGED: &str = "k3d-lab-server-0\npass gpu.intel.com/xe on x: 1 of 1 usable\u{1b}]52;c;eA==\u{7}";
    let saved = serde_json::json!({
        "cluster": "lab", "passed": false,
        "pods": [{"resource": "gpu.intel.com/xe", "node": FORGED, "expected": 1,
            "verdict": {"passed": false, "seen": 0}}],
        "shares": [{"resource": FORGED, "node": FORGED, "pods": [], "verdict": {"passed": false, "together": []}}],
        "claims": [{"namespace": FORGED, "template": "t", "verdict": {"passed": false}}],
        "problems": [{"text": FORGED, "fix": "rerun"}]
    });
    let result: TestResult = serde_json::from_value(saved).unwrap();
    assert_eq!(result.pods[0].node, FORGED);
    assert!(!result.pods[0].node.to_string().contains('\n'));
    let mut r = report();
    r.test = Some(result);
    for shown in [text(&r), html(&r)] {
        assert!(!shown.contains(['\u{1b}', '\u{7}']), "{shown}");
        assert!(shown.lines().all(|l| !l.trim_start().starts_with("pass gpu.intel.com/xe on x")), "{shown}");
    }
    assert_eq!(json_of(&r)["test"]["pods"][0]["node"], FORGED);
}
