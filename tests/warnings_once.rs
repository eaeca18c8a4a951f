//! Issue 26, items 4 and 5: each warning said once per run, the unlocked images in one line
//! that says where the list is, `render` silent about images it does not write, the fleet's
//! warnings not repeated per node, every warning still in JSON; and a run without a config
//! saying so on stderr.

mod support;

use support::{hosts_dir, k3d_gpu_in, repo};

fn run(args: &[&str]) -> std::process::Output {
    k3d_gpu_in(&repo(), args)
}

fn host(name: &str) -> String {
    hosts_dir().join(name).display().to_string()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const ONE_LINE: &str = "images are deployed by tag (no digest in images.lock): ";
/// What follows the count's parts.
const LISTS: &str = "; `k3d-gpu images` lists them";

#[test]
fn the_fleet_example_says_its_warnings_once_not_per_node() {
    let out = run(&["validate", "-c", "examples/homelab-fleet.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches(ONE_LINE).count(), 1, "{text}");
    assert!(text.contains(&format!("(every host)  warn    5 {ONE_LINE}5 in the cluster's workloads{LISTS}")), "{text}");
    assert!(!text.contains("is deployed by tag"), "no image on its own: {text}");
    // JSON keeps every warning on every host.
    let out = run(&["validate", "--json", "-c", "examples/homelab-fleet.toml"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts = doc["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3);
    for h in hosts {
        let unlocked = h["warnings"].as_array().unwrap().iter().filter(|w| w["code"] == "image-unlocked").count();
        assert_eq!(unlocked, 5, "{h}");
    }
}

#[test]
fn plan_and_graph_summarise_unlocked_images_and_json_keeps_them() {
    let args = ["-c", "examples/nvidia-workstation.toml", "--root"];
    let root = host("desktop-rpl-nvidia");
    let mut plan = vec!["plan", "--offline"];
    plan.extend(args);
    plan.push(&root);
    let out = run(&plan);
    let text = stdout(&out);
    assert_eq!(text.matches("warning:").count(), 1, "{text}");
    assert!(
        text.contains(&format!(
            "warning: 4 {ONE_LINE}2 in the cluster's workloads, 2 the node image is built from{LISTS}"
        )),
        "{text}"
    );
    plan.push("--json");
    let doc: serde_json::Value = serde_json::from_slice(&run(&plan).stdout).unwrap();
    let unlocked = doc["warnings"].as_array().unwrap().iter().filter(|w| w["code"] == "image-unlocked").count();
    assert_eq!(unlocked, 4, "{}", doc["warnings"]);

    let mut graph = vec!["graph"];
    graph.extend(args);
    graph.push(&root);
    let err = stderr(&run(&graph));
    assert_eq!(err.lines().filter(|l| l.starts_with("warning:")).count(), 1, "{err}");
}

#[test]
fn render_does_not_warn_about_the_node_images_bases() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let root = host("desktop-rpl-nvidia");
    let config = "examples/nvidia-workstation.toml";
    let out = run(&["render", "-c", config, "--root", &root, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    // The shipped Dockerfile's base (ubuntu) is in the plan, which builds it, not in render.
    assert!(!err.contains("ubuntu"), "{err}");
    assert!(err.contains(&format!("warning: 2 {ONE_LINE}2 in the cluster's workloads{LISTS}")), "{err}");
    let planned = stdout(&run(&["plan", "--offline", "--json", "-c", config, "--root", &root]));
    assert!(planned.contains("image ubuntu:"), "the plan still has it: {planned}");
}

#[test]
fn a_run_without_a_config_says_it_uses_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let root = host("desktop-rpl-nvidia");
    let out = k3d_gpu_in(dir.path(), &["validate", "--root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("note: no config found (no -c, and no k3dgpu.toml in this directory): using the defaults").count(),
        1,
        "{err}"
    );
    let out = k3d_gpu_in(dir.path(), &["plan", "--offline", "--json", "--root", &root]);
    let notes: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["event"] == "note")
        .collect();
    assert_eq!(notes.len(), 1, "{}", stderr(&out));
    assert!(notes[0]["text"].as_str().unwrap().starts_with("no config found"), "{}", notes[0]);
    // A config present, or named: no note.
    std::fs::write(dir.path().join("k3dgpu.toml"), "").unwrap();
    let out = k3d_gpu_in(dir.path(), &["validate", "--root", &root]);
    assert!(!stderr(&out).contains("no config found"), "{}", stderr(&out));
}
