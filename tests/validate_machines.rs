//! `validate --machines FILE` (issue 25): many configs against their machines in one process,
//! through the real binary. Format errors at their line, exit codes, a row per pair, --json,
//! and the same verdicts as one `validate` per pair.

mod support;

use std::process::Output;

use serde_json::Value;
use support::K3dGpu;
use support::repo;

fn validate_machines(list: &str, extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k3dgpu-machines.txt");
    std::fs::write(&file, list).unwrap();
    K3dGpu::new().arg("validate").arg("--machines").arg(&file).args(extra).cwd(repo()).output()
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out).0))
}

fn examples() -> String {
    let mut list = String::from("# every example on the host it is for\n\n");
    for (example, host) in support::EXAMPLES {
        list.push_str(&format!("examples/{example}.toml   tests/fixtures/hosts/{host}  # {example}\n"));
    }
    list
}

#[test]
fn every_example_passes_on_its_host_with_a_table_per_config() {
    let out = validate_machines(&examples(), &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("1 host(s), 0 failed").count(), support::EXAMPLES.len(), "{stdout}");
    let n = support::EXAMPLES.len();
    assert!(stdout.ends_with(&format!("{n} config(s), {n} host(s), 0 failed\n")), "{stdout}");
    // Each table says which line asked for it (the first example is on line 3).
    assert!(stdout.contains("k3dgpu-machines.txt line 3\nconfig examples/nvidia-workstation.toml"), "{stdout}");
}

#[test]
fn the_same_verdicts_as_one_validate_per_pair() {
    // Each example on two hosts: its own, and one it may not fit.
    let mut list = String::new();
    let mut pairs = Vec::new();
    for (example, host) in support::EXAMPLES {
        for host in [*host, "plain-laptop-amd"] {
            let config = format!("examples/{example}.toml");
            let host = format!("tests/fixtures/hosts/{host}");
            list.push_str(&format!("{config} {host}\n"));
            pairs.push((config, host));
        }
    }
    let doc = json(&validate_machines(&list, &["--json"]));
    assert_eq!(doc["schema"], "k3d-gpu.validate-machines/v1");
    let rows: Vec<&Value> =
        doc["configs"].as_array().unwrap().iter().flat_map(|c| c["hosts"].as_array().unwrap()).collect();
    assert_eq!(rows.len(), pairs.len());
    let mut worst = 0;
    for (i, (config, host)) in pairs.iter().enumerate() {
        let one = K3dGpu::new().args(["validate", "--json", "-c", config, "--root", host]).cwd(repo()).output();
        worst = worst.max(one.status.code().unwrap());
        let single = json(&one);
        let row = rows.iter().find(|r| r["line"] == i + 1).unwrap();
        let mut row = (*row).clone();
        row.as_object_mut().unwrap().remove("line");
        assert_eq!(row, single["hosts"][0], "{config} on {host}");
    }
    assert_eq!(doc["exit_code"], worst);
    assert!(worst == 1, "some example does not fit the plain laptop");
}

#[test]
fn a_line_of_the_wrong_shape_is_named_by_its_line_and_nothing_runs() {
    let list = "examples/wsl2-intel.toml tests/fixtures/hosts/wsl2-intel\n\
                examples/wsl2-intel.toml tests/fixtures/hosts/wsl2-intel extra words\n";
    let out = validate_machines(list, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "nothing validated: {stdout}");
    assert!(stderr.contains("line 2: 4 words; a line is CONFIG [HOST]"), "{stderr}");
    // --json: the error document, with the line and column of the first word too many.
    let out = validate_machines(list, &["--json"]);
    let doc = json(&out);
    assert_eq!(doc["schema"], "k3d-gpu.error/v1");
    let d = &doc["diagnostics"][0];
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(2), Some(58)), "{doc}");
    assert!(d["file"].as_str().unwrap().ends_with("k3dgpu-machines.txt"));
}

#[test]
fn an_unreadable_pair_fails_its_row_and_the_rest_still_run() {
    let list = "examples/wsl2-intel.toml tests/fixtures/hosts/no-such-host\n\
                examples/no-such-config.toml tests/fixtures/hosts/wsl2-intel\n\
                examples/wsl2-intel.toml tests/fixtures/hosts/wsl2-intel\n";
    let out = validate_machines(list, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "unreadable input is the worst: {stdout}\n{stderr}");
    assert!(stdout.contains("tests/fixtures/hosts/no-such-host  FAIL"), "{stdout}");
    assert!(stdout.contains("tests/fixtures/hosts/wsl2-intel    ok"), "{stdout}");
    assert!(stdout.contains("config examples/no-such-config.toml (") && stdout.contains("): FAIL, cannot read config"));
    let doc = json(&validate_machines(list, &["--json"]));
    assert_eq!(doc["exit_code"], 2);
    let configs = doc["configs"].as_array().unwrap();
    assert_eq!(configs[0]["lines"], serde_json::json!([1, 3]), "one config, read once for its lines");
    assert_eq!(configs[0]["hosts"][0]["ok"], false);
    assert_eq!(configs[0]["hosts"][1]["ok"], true);
    assert_eq!(configs[1]["errors"][0]["code"], "input");
    let host_error = &configs[0]["hosts"][0]["errors"][0];
    assert_eq!(host_error["code"], "input", "{host_error}");
    assert!(host_error["message"].as_str().unwrap().contains("cannot read host root"), "{host_error}");
}

#[test]
fn an_existing_clusters_config_stands_alone_and_a_k3d_config_needs_its_host() {
    let out = validate_machines("examples/homelab-fleet.toml\n", &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 host(s), 0 failed"), "{stdout}");
    let out = validate_machines(
        "examples/homelab-fleet.toml tests/fixtures/hosts/wsl2-intel\nexamples/wsl2-intel.toml\n",
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    let texts = doc.to_string();
    assert!(texts.contains("this config is an existing cluster's"), "{texts}");
    assert!(texts.contains("a k3d config is checked against the machine it is for"), "{texts}");
}

#[test]
fn a_facts_file_stands_for_a_host_and_machines_excludes_single_host_options() {
    let dir = tempfile::tempdir().unwrap();
    let facts = dir.path().join("wsl2.json");
    let made = K3dGpu::new()
        .args(["facts", "--root", "tests/fixtures/hosts/wsl2-intel", "--out"])
        .arg(&facts)
        .cwd(repo())
        .output();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let out = validate_machines(&format!("examples/wsl2-intel.toml {}\n", facts.display()), &[]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let out = validate_machines("examples/wsl2-intel.toml tests/fixtures/hosts/wsl2-intel\n", &["-c", "x.toml"]);
    assert_eq!(out.status.code(), Some(2), "clap refuses --machines with -c");
    let missing = K3dGpu::new().args(["validate", "--machines", "no-such-list.txt"]).cwd(repo()).output();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read machines file"));
}
