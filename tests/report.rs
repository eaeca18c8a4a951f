//! `k3d-gpu report` on a fixture host with an example config, offline: the three files, the
//! same bytes on a second run, the page self-contained, and the text and JSON a user reads.

mod support;

use std::process::Output;

use support::K3dGpu;
use support::repo;

fn report(args: &[&str]) -> Output {
    K3dGpu::new()
        .cwd(repo())
        .args(["--config", "examples/arc-homelab-dra.toml", "--root", "tests/fixtures/hosts/arc-b580-xe-rpl-igpu"])
        .args(["report", "--offline"])
        .args(args)
        .output()
}

#[test]
fn a_report_directory_holds_text_json_and_a_self_contained_page_with_the_same_bytes_each_run() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [&a, &b] {
        let out = report(&[dir.path().join("r").to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    for name in ["report.txt", "report.json", "report.html"] {
        let first = std::fs::read(a.path().join("r").join(name)).unwrap();
        assert_eq!(first, std::fs::read(b.path().join("r").join(name)).unwrap(), "{name} differs between runs");
    }
    let page = std::fs::read_to_string(a.path().join("r/report.html")).unwrap();
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    assert!(!page.contains("<script") && !page.contains("src="));
    assert!(page.contains("<svg") && page.contains("k3d/cluster/arc") && page.contains("gpu.intel.com"), "{page}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.path().join("r/report.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], "k3d-gpu.report/v1");
    assert!(json["plan"]["hash"].as_str().unwrap().starts_with("sha256:"));
    assert!(json["plan"]["actions"].as_array().unwrap().iter().any(|a| a["id"] == "k3d/cluster/arc"));
    assert!(json["state"].is_null() && json["observed_note"] == "--offline");
}

#[test]
fn without_a_directory_the_text_goes_to_stdout_and_the_plan_hash_matches_plan() {
    let out = report(&[]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0));
    let hash = K3dGpu::new()
        .cwd(repo())
        .args(["--config", "examples/arc-homelab-dra.toml", "--root", "tests/fixtures/hosts/arc-b580-xe-rpl-igpu"])
        .args(["plan", "--offline", "--hash"])
        .output();
    let hash = String::from_utf8_lossy(&hash.stdout).trim().to_string();
    assert!(text.contains(&format!("plan {hash}")), "{hash}\n{text}");
    assert!(text.contains("cluster: not observed (--offline)"), "{text}");
}

/// The plan's warnings are part of what the report says of the plan: each one in report.json,
/// the text and the page as `plan` prints them (three images deployed by tag, one line).
#[test]
fn the_report_carries_the_plans_warnings() {
    let plan = K3dGpu::new()
        .cwd(repo())
        .args(["--config", "examples/arc-homelab-dra.toml", "--root", "tests/fixtures/hosts/arc-b580-xe-rpl-igpu"])
        .args(["plan", "--offline", "--json"])
        .output();
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let warnings = plan["warnings"].as_array().unwrap();
    assert!(warnings.len() > 1, "the example warns of its unlocked images: {warnings:?}");

    let out = report(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&json["plan"]["warnings"], &plan["warnings"], "every warning, as plan/v1 has them");

    let text = String::from_utf8(report(&[]).stdout).unwrap();
    let bases = warnings.iter().filter(|w| w["text"].as_str().unwrap().contains("(a base of the node image)")).count();
    let said = format!(
        "  warning: {} [image-unlocked]\n",
        k3d_gpu::compile::warnings::unlocked_count(warnings.len() - bases, bases, 0, 0)
            + "; `k3d-gpu images` lists them, `k3d-gpu images lock` pins them"
    );
    assert!(text.contains(&said), "{said}\n{text}");

    let dir = tempfile::tempdir().unwrap();
    let out = report(&[dir.path().join("r").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(dir.path().join("r/report.html")).unwrap();
    assert!(page.contains("<strong>warning</strong>") && page.contains("[image-unlocked]"), "{page}");
}

/// With `[telemetry]` the report says where the dashboard is, how to reach it (Grafana
/// listens in the cluster only) and how to read the admin password; without it, nothing.
#[test]
fn the_report_links_to_the_telemetry_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    let root = repo().join("tests/fixtures/hosts/arc-b580-xe-rpl-igpu");
    let run = |text: &str| {
        std::fs::write(&config, text).unwrap();
        let out = K3dGpu::new()
            .args(["--config", config.to_str().unwrap(), "--root", root.to_str().unwrap()])
            .args(["report", "--offline", dir.path().join("r").to_str().unwrap()])
            .output();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let read = |name: &str| std::fs::read_to_string(dir.path().join("r").join(name)).unwrap();
        (read("report.txt"), read("report.json"), read("report.html"))
    };
    let (text, json, page) = run("[cluster]\nname = \"lab\"\n\n[telemetry]\n");
    let forward = "kubectl --context k3d-lab -n k3d-gpu-metrics port-forward svc/grafana 3000:3000";
    assert!(text.contains("dashboard: http://127.0.0.1:3000/d/k3d-gpu\n"), "{text}");
    assert!(text.contains(&format!("reach it: {forward}")), "{text}");
    assert!(text.contains("exec deploy/grafana -- cat /var/lib/grafana/.k3d-gpu-admin-password"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["dashboard"]["url"], "http://127.0.0.1:3000/d/k3d-gpu");
    assert_eq!(json["dashboard"]["port_forward"], forward);
    assert!(page.contains("<a href=\"http://127.0.0.1:3000/d/k3d-gpu\">"), "{page}");
    let (text, json, _) = run("[cluster]\nname = \"lab\"\n");
    assert!(!text.contains("dashboard:"), "{text}");
    assert!(serde_json::from_str::<serde_json::Value>(&json).unwrap().get("dashboard").is_none());
}
