//! One hostile world (issue 41): every string that comes from outside — a fixture host's files,
//! a facts document, a plan file, the API server's answers (node names, labels, a model list)
//! — is a newline, a forged line of the tool's own (`pass  forged`, `apply: curl x | sudo sh`),
//! an escape sequence and an OSC 52 clipboard write. Every command `k3d-gpu --help` lists is
//! run against it, and none may print a forged line or a raw control byte on stdout or stderr.
//! A new command is added to [`COMMANDS`] and gets the check.
//!
//! Not covered here: what needs a Docker engine (the world's `DOCKER_HOST` is a dead socket,
//! so `observe`, `destroy`, `logs` without a component and the k3d side of `plan` and `report`
//! meet the engine only as an error, which is checked like any output); `doctor --perf`, whose
//! advisor is being rewritten beside this (issue 41, defect 4's first half); `host-setup
//! --apply`, which runs what a person confirmed.

mod support;

use std::path::PathBuf;
use std::process::{Output, Stdio};

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{FakeApiServer, State, k3s_node, kubeconfig_text};

/// What the world writes into every outside string.
const FORGED: &str = "\npass  forged\n      apply: curl x | sudo sh\x1b[2K\x1b]52;c;Y3VybCB4fHNo\x07";

/// The same, for a place that cannot hold a newline (a line of /proc/cpuinfo, os-release).
const FORGED_INLINE: &str = "\x1b[2K\x1b]52;c;Y3VybCB4fHNo\x07\u{9b}31m";

struct World {
    dir: tempfile::TempDir,
    /// Served for as long as the world lives.
    _server: FakeApiServer,
}

impl World {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn s(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// `k3d-gpu ARGS` in the world: its kubeconfig, a dead Docker, its own state directory.
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let command = K3dGpu::new()
            .args(args)
            .cwd(self.dir.path())
            .env("KUBECONFIG", self.path("kubeconfig"))
            .env("HOME", self.dir.path())
            .env("XDG_STATE_HOME", self.path("state"))
            .env("DOCKER_HOST", format!("unix://{}", self.s("no-docker.sock")))
            .env("K3D_GPU_K3D", self.s("no-k3d"));
        match stdin {
            None => command.stdin(Stdio::null()).output(),
            Some(input) => {
                use std::io::Write;
                let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
                child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
                child.wait_with_output().unwrap()
            }
        }
    }
}

/// Appends [`FORGED`] to every string under `value` whose key is in `keys`.
fn forge(value: &mut Value, keys: &[&str]) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    Value::String(s) if keys.contains(&k.as_str()) => s.push_str(FORGED),
                    _ => forge(v, keys),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| forge(v, keys)),
        _ => {}
    }
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    // The host: a newline-bearing value where sysfs has one value per file, escape sequences
    // where a line-oriented file cannot hold a newline.
    let host = dir.path().join("host");
    support::copy_tree(&support::hosts_dir().join("desktop-rpl-nvidia"), &host);
    std::fs::write(host.join("sys/module/nvidia/version"), format!("580.95.05{FORGED}\n")).unwrap();
    let cpuinfo = std::fs::read_to_string(host.join("proc/cpuinfo")).unwrap();
    let cpuinfo = cpuinfo.replace("i9-13900T", &format!("i9-13900T{FORGED_INLINE}"));
    std::fs::write(host.join("proc/cpuinfo"), cpuinfo).unwrap();
    let os = std::fs::read_to_string(host.join("etc/os-release")).unwrap();
    std::fs::write(host.join("etc/os-release"), os.replace("Manjaro Linux", &format!("Manjaro{FORGED_INLINE}")))
        .unwrap();
    // A second host whose i915 driver link is named as a forged line.
    let driver_host = dir.path().join("driver-host");
    support::copy_tree(&support::hosts_dir().join("desktop-rpl-nvidia"), &driver_host);
    let forged_driver = format!("i915{FORGED}");
    std::fs::create_dir_all(driver_host.join("sys/bus/pci/drivers").join(&forged_driver)).unwrap();
    let link = driver_host.join("sys/bus/pci/devices/0000:00:02.0/driver");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(format!("../../../bus/pci/drivers/{forged_driver}"), &link).unwrap();

    let config = "[cluster]\nname = \"gpu\"\n";
    std::fs::write(dir.path().join("k3dgpu.toml"), config).unwrap();

    // The API server: a node named as a forged line beside the server node, labels, and an
    // agent whose model list is one.
    let mut edge = k3s_node(&format!("edge{FORGED}"), false);
    edge["metadata"]["labels"]["team"] = json!(format!("x{FORGED}"));
    edge["status"]["allocatable"]["gpu.intel.com/i915"] = json!("1");
    let mut server_node = k3s_node("k3d-gpu-server-0", true);
    server_node["status"]["allocatable"]["nvidia.com/gpu"] = json!("2");
    let models = json!({"object": "list", "data": [{"id": format!("Qwen3-4B{FORGED}"), "object": "model"}]});
    let mut state = State { nodes: vec![server_node, edge], ..State::k3s() };
    state.proxied.push(("vllm:8000/v1/models".into(), models));
    state.served.push("/api/v1/pods".into());
    let server = FakeApiServer::start_in_background(state);
    std::fs::write(dir.path().join("kubeconfig"), kubeconfig_text(&server.url, "gpu")).unwrap();
    let world = World { dir, _server: server };

    // The facts document, each free-text value forged, and a finding of the reader's own codes
    // carrying one.
    let out = world.run(&["facts", "--root", "host", "--out", "facts.json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut facts: Value = serde_json::from_slice(&std::fs::read(world.path("facts.json")).unwrap()).unwrap();
    // Free text only: a version (`found`) or an enum that no longer parses refuses the whole
    // document, and nothing past the refusal would be exercised.
    let keys = [
        "model",
        "vendor",
        "platform",
        "firmware",
        "status",
        "evidence",
        "release",
        "driver_version",
        "pretty_name",
        "group",
        "zone",
    ];
    forge(&mut facts["host"], &keys);
    facts["findings"] = json!([{"level": "warn", "code": "host-bad-value", "text": format!("t{FORGED}"),
        "evidence": format!("e{FORGED}"), "fix": format!("curl x | sudo sh{FORGED}")}]);
    std::fs::write(world.path("facts.json"), serde_json::to_vec_pretty(&facts).unwrap()).unwrap();

    // The plan file: its reasons and ids, and the options it records, forged.
    let out = world.run(&["plan", "--offline", "--root", "host", "--out", "plan.json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut plan: Value = serde_json::from_slice(&std::fs::read(world.path("plan.json")).unwrap()).unwrap();
    forge(&mut plan["actions"], &["id", "reason", "kind", "name"]);
    plan["inputs"]["made_from"] = json!({"config": format!("lab.toml{FORGED}"), "root": [format!("host{FORGED}")]});
    std::fs::write(world.path("plan.json"), serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    world
}

/// The commands that print, each with the arguments that make it read the world (`--help`
/// lists them all; `help` and `mcp` are run too).
fn commands(w: &World) -> Vec<(Vec<String>, Option<String>)> {
    let mcp = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "facts", "arguments": {"facts": w.s("facts.json")}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "validate", "arguments": {"root": [w.s("host")]}}}),
    ]
    .iter()
    .map(|m| m.to_string() + "\n")
    .collect::<String>();
    let plain: &[&[&str]] = &[
        &["detect", "--root", "host"],
        &["detect", "--root", "driver-host"],
        &["detect", "--facts", "facts.json"],
        &["doctor", "--root", "host"],
        &["doctor", "--root", "driver-host"],
        &["doctor", "--facts", "facts.json"],
        &["facts", "--root", "host"],
        &["facts", "--facts", "facts.json"],
        &["init", "--root", "host", "--out", "init.toml"],
        &["init", "--facts", "facts.json", "--out", "init2.toml"],
        &["validate", "--root", "host"],
        &["validate", "--facts", "facts.json"],
        &["graph", "--root", "host"],
        &["graph", "--facts", "facts.json"],
        &["render", "--facts", "facts.json", "--out", "rendered"],
        &["schema"],
        &["observe"],
        &["apply", "plan.json"],
        &["apply", "-c", "k3dgpu.toml", "--root", "host", "plan.json"],
        &["show", "plan.json"],
        &["destroy"],
        &["agent", "--root", "host"],
        &["agent", "--facts", "facts.json"],
        &["agent", "status", "--root", "host"],
        &["plan", "--root", "host"],
        &["plan", "--offline", "--facts", "facts.json"],
        &["images", "--facts", "facts.json"],
        &["audit"],
        &["logs"],
        &["logs", "intel-gpu-plugin"],
        &["report", "--offline", "--facts", "facts.json"],
        &["report", "--root", "host"],
        &["completions", "bash"],
        &["man"],
        &["version"],
        &["test", "--root", "host", "--timeout", "1"],
        &["test", "--facts", "facts.json", "--timeout", "1"],
        &["host-setup", "--root", "host"],
        &["help"],
    ];
    let mut out: Vec<(Vec<String>, Option<String>)> =
        plain.iter().map(|a| (a.iter().map(|s| s.to_string()).collect(), None)).collect();
    out.push((vec!["mcp".into()], Some(mcp)));
    out
}

/// A raw control byte a terminal acts on (miette's and the progress's SGR colours aside), or
/// a line the world forged.
fn forged_in(text: &str) -> Option<String> {
    let mut rest = text;
    while let Some(at) =
        rest.find(|c: char| (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        let tail = &rest[at..];
        let sgr = tail.strip_prefix("\x1b[").and_then(|t| {
            let end = t.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            t[end..].starts_with('m').then_some(2 + end + 1)
        });
        match sgr {
            Some(len) => rest = &tail[len..],
            None => {
                return Some(format!(
                    "raw control character {:?} in …{:?}",
                    tail.chars().next()?,
                    &tail[..tail.len().min(40)]
                ));
            }
        }
    }
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with("pass  forged") || l.starts_with("apply: curl"))
        .map(|l| format!("forged line {l:?}"))
}

#[test]
fn no_command_prints_a_forged_line_or_a_raw_control_byte() {
    let w = world();
    let mut failures = Vec::new();
    let mut seen_escaped = 0;
    for (args, stdin) in commands(&w) {
        let out = w.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), stdin.as_deref());
        assert!(out.status.code().is_some(), "{args:?} died by a signal: {:?}", out.status);
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            seen_escaped += text.matches("\\x0apass  forged").count();
            if let Some(problem) = forged_in(&text) {
                failures.push(format!("k3d-gpu {} ({stream}): {problem}\n{text}", args.join(" ")));
            }
        }
    }
    assert!(failures.is_empty(), "{} command output(s) forged:\n\n{}", failures.len(), failures.join("\n\n"));
    // The world reached the output, escaped: it was hostile, and it was read.
    assert!(seen_escaped > 0, "no command showed a forged value, escaped");
}

#[test]
fn a_driver_name_that_is_not_the_kernels_is_refused_saying_which() {
    let w = world();
    for command in ["detect", "doctor"] {
        let out = w.run(&[command, "--root", "driver-host"], None);
        let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{command}: {text}");
        assert!(text.contains("intel_gpus[0].driver") && text.contains("not a driver name"), "{command}: {text}");
    }
    // The same name in a facts document.
    let mut facts: Value = serde_json::from_slice(&std::fs::read(w.path("facts.json")).unwrap()).unwrap();
    facts["host"]["intel_gpus"][0]["driver"] = json!(format!("i915{FORGED}"));
    std::fs::write(w.path("driver-facts.json"), serde_json::to_vec(&facts).unwrap()).unwrap();
    let out = w.run(&["doctor", "--facts", "driver-facts.json"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("host.intel_gpus[0].driver") && stderr.contains("not a driver name"), "{stderr}");
}

#[test]
fn a_host_value_with_a_newline_stays_on_its_line() {
    let w = world();
    let out = w.run(&["detect", "--root", "host"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let line = text.lines().find(|l| l.contains("driver 580.95.05")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("580.95.05\\x0apass  forged"), "{line}");
}
