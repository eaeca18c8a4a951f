//! A saved plan carries what it was made from (issue 26, item 8): the options given to
//! `plan --out`, relative to the working directory; `apply PLANFILE` reads them for the ones it
//! is not given; `show PLANFILE` reads a saved plan back (text and --json). Without Docker:
//! the live apply of a recorded plan is in `apply_e2e.rs`.

mod support;

use std::path::Path;

use support::{K3dGpu, hosts_dir, k3d_gpu_in, repo};

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A working directory with a config and a fixture host inside it, as a repository holds them.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    dir
}

fn fill(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(repo().join("examples/nvidia-workstation.toml"), dir.join("lab.toml")).unwrap();
    support::copy_tree(&hosts_dir().join("desktop-rpl-nvidia"), &dir.join("hosts/rtx"));
}

/// An observation of something (not offline): a plan against it can be applied.
fn write_observation(path: &Path) {
    let observed = serde_json::json!({
        "schema": "k3d-gpu.observed/v1",
        "cluster": null,
        "kubernetes": null,
        "node_image": { "reference": "k3d-gpu-node:other", "present": true, "build_inputs": null },
    });
    std::fs::write(path, observed.to_string()).unwrap();
}

fn plan_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_saved_plan_records_its_options_as_given_whatever_the_working_directory() {
    let dir = workdir();
    let absolute_root = dir.path().join("hosts/./rtx");
    let out = k3d_gpu_in(
        dir.path(),
        &[
            "plan",
            "--offline",
            "-c",
            "./lab.toml",
            "--root",
            absolute_root.to_str().unwrap(),
            "--vendors",
            "nvidia,hybrid",
            "--out",
            "p.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = plan_json(&dir.path().join("p.json"));
    assert_eq!(
        plan["inputs"]["made_from"],
        // An absolute path stays absolute (issue 41, defect 14: made relative when inside the
        // working directory, it gave another plan hash from another directory).
        serde_json::json!({ "config": "lab.toml", "root": [dir.path().join("hosts/rtx")], "vendors": "nvidia,hybrid" }),
        "{}",
        plan["inputs"]
    );
    // The defaults leave no record: the plan is what it was before.
    std::fs::copy(dir.path().join("lab.toml"), dir.path().join("k3dgpu.toml")).unwrap();
    let out = k3d_gpu_in(dir.path(), &["plan", "--offline", "--facts", "none.json", "--out", "d.json"]);
    assert_eq!(out.status.code(), Some(2), "a missing facts file is unreadable input: {}", text(&out));
    let facts = k3d_gpu_in(dir.path(), &["facts", "--root", "hosts/rtx", "--out", "f.json"]);
    assert_eq!(facts.status.code(), Some(0), "{}", text(&facts));
    let out = k3d_gpu_in(dir.path(), &["plan", "--offline", "--facts", "f.json", "--out", "d.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        plan_json(&dir.path().join("d.json"))["inputs"]["made_from"],
        serde_json::json!({ "facts": ["f.json"] })
    );
}

#[test]
fn apply_planfile_reads_the_options_it_was_made_with() {
    let dir = workdir();
    let out =
        k3d_gpu_in(dir.path(), &["plan", "--offline", "-c", "lab.toml", "--root", "hosts/rtx", "--out", "p.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // No -c, no --root: the plan's own are used (and said), so the refusal is the offline one,
    // not "host facts changed" against `/`, and its commands carry them.
    let out = k3d_gpu_in(dir.path(), &["apply", "p.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("note: -c, --root from p.json, as it was made: -c lab.toml --root hosts/rtx"), "{all}");
    assert!(all.contains("was made offline"), "{all}");
    assert!(all.contains("k3d-gpu -c lab.toml --root hosts/rtx plan --out plan.json"), "{all}");
    // Given here, they win: nothing is taken from the plan.
    let out = k3d_gpu_in(dir.path(), &["apply", "p.json", "-c", "lab.toml", "--root", "hosts/rtx"]);
    assert!(!text(&out).contains("from p.json"), "{}", text(&out));
}

#[test]
fn show_reads_a_saved_plan_as_text_and_as_json() {
    let dir = workdir();
    let out =
        k3d_gpu_in(dir.path(), &["plan", "--offline", "-c", "lab.toml", "--root", "hosts/rtx", "--out", "p.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let planned = k3d_gpu_in(dir.path(), &["plan", "--offline", "-c", "lab.toml", "--root", "hosts/rtx"]);
    let hash = String::from_utf8_lossy(&planned.stdout).lines().last().unwrap().to_string();
    assert!(hash.starts_with("plan hash: sha256:"), "{hash}");

    let shown = k3d_gpu_in(dir.path(), &["show", "p.json"]);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(stdout.starts_with("plan file p.json\nmade with: -c lab.toml --root hosts/rtx\n"), "{stdout}");
    assert!(stdout.contains("made against nothing"), "{stdout}");
    assert!(stdout.contains("+ k3d/cluster/cuda  (create)"), "{stdout}");
    assert!(stdout.contains(&hash), "the hash `plan` printed: {stdout}");
    assert!(!stdout.contains("to apply it"), "an offline plan cannot be applied: {stdout}");

    let json = k3d_gpu_in(dir.path(), &["show", "--json", "p.json"]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json));
    assert_eq!(json.stdout, std::fs::read(dir.path().join("p.json")).unwrap(), "the plan/v1 bytes");

    // Not a plan: unreadable input, exit 2, with one JSON object under --json.
    std::fs::write(dir.path().join("empty.json"), "{}").unwrap();
    for args in [&["show", "empty.json"][..], &["show", "missing.json"], &["show", "--json", "empty.json"]] {
        let out = k3d_gpu_in(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    let out = k3d_gpu_in(dir.path(), &["show", "--json", "empty.json"]);
    let error: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["schema"], "k3d-gpu.error/v1", "{error}");
}

#[test]
fn show_of_a_live_plan_says_how_to_apply_it() {
    // A plan against a saved observation that is not "nothing": not offline.
    let dir = workdir();
    write_observation(&dir.path().join("o.json"));
    let out = k3d_gpu_in(
        dir.path(),
        &["plan", "--observed", "o.json", "-c", "lab.toml", "--root", "hosts/rtx", "--out", "p.json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let shown = k3d_gpu_in(dir.path(), &["show", "p.json"]);
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(!stdout.contains("made against nothing"), "{stdout}");
    assert!(stdout.ends_with("to apply it: k3d-gpu apply p.json\n"), "{stdout}");
}

/// `plan --out` says where it wrote the plan after the plan, as the README shows: with stdout
/// and stderr in one file, as a terminal shows them, it is the last line, not the first.
#[test]
fn wrote_the_plan_comes_after_the_plan() {
    let dir = workdir();
    let log = dir.path().join("both.log");
    let file = std::fs::File::create(&log).unwrap();
    let status = K3dGpu::new()
        .cwd(dir.path())
        .env("HOME", dir.path())
        .args(["plan", "--offline", "-c", "lab.toml", "--root", "hosts/rtx", "--out", "p.json"])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .command()
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let both = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = both.lines().collect();
    let wrote = lines.iter().position(|l| l.starts_with("wrote the plan to p.json (sha256:")).expect("said");
    let hash = lines.iter().position(|l| l.starts_with("plan hash: sha256:")).expect("the hash");
    assert!(lines[0].starts_with("  + "), "the plan first: {both}");
    assert_eq!((hash, wrote), (lines.len() - 2, lines.len() - 1), "{both}");
}

/// `show` run from another directory than the plan was made in suggests a command that runs
/// from there: the plan's paths are relative to where it was made, so the command goes there
/// first. Run as printed, from that other directory, it reads the plan's config and host (the
/// refusal is Docker's, which this test has none of), not "cannot read lab.toml".
#[test]
fn the_apply_command_show_suggests_runs_from_the_directory_show_ran_in() {
    let top = tempfile::tempdir().unwrap();
    let lab = top.path().join("my lab");
    fill(&lab);
    write_observation(&lab.join("o.json"));
    let made =
        k3d_gpu_in(&lab, &["plan", "--observed", "o.json", "-c", "lab.toml", "--root", "hosts/rtx", "--out", "p.json"]);
    assert_eq!(made.status.code(), Some(0), "{}", text(&made));

    let shown = k3d_gpu_in(top.path(), &["show", "my lab/p.json"]);
    let stdout = String::from_utf8_lossy(&shown.stdout);
    let command = stdout.lines().find_map(|l| l.strip_prefix("to apply it: ")).expect("a command").to_string();
    assert_eq!(command, "cd 'my lab' && k3d-gpu apply p.json", "{stdout}");

    let ran = K3dGpu::program("sh")
        .arg("-c")
        .arg(&command)
        .binary_on_path()
        .cwd(top.path())
        .env("HOME", top.path())
        .env("KUBECONFIG", top.path().join("kubeconfig"))
        .output();
    let all = text(&ran);
    assert!(all.contains("note: -c, --root from p.json, as it was made: -c lab.toml --root hosts/rtx"), "{all}");
    assert!(!all.contains("lab.toml:") && !all.contains("cannot read"), "{all}");
    assert!(all.contains("cannot reach Docker"), "it got as far as observing: {all}");
}
