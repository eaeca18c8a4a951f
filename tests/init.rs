//! `k3d-gpu init` (issue 39): on every fixture host it writes a commented k3dgpu.toml that
//! `validate` accepts, with the host's vendors under `[expect]` and the agent's placement in a
//! comment; it never replaces a file; host text cannot break the TOML it writes.

mod support;

use std::path::Path;
use std::process::Output;

use support::{K3dGpu, check_golden, copy_host, facts_of, host_names, hosts_dir, repo};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    K3dGpu::new().args(args).cwd(dir).output()
}

fn host(name: &str) -> String {
    hosts_dir().join(name).display().to_string()
}

/// `[expect] vendors` of a written file.
fn expected_vendors(config: &str) -> Vec<String> {
    let table: toml::Table = toml::from_str(config).unwrap_or_else(|e| panic!("not TOML ({e}):\n{config}"));
    table["expect"]["vendors"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

/// The file with its commented `[agent]` block switched on.
fn with_agent(config: &str) -> String {
    config.replace("\n# [agent]\n# device = ", "\n[agent]\ndevice = ")
}

#[test]
fn every_fixture_host_gets_a_config_that_validate_accepts() {
    let mut problems = Vec::new();
    for name in host_names() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_in(dir.path(), &["init", "--root", &host(&name)]);
        if out.status.code() != Some(0) {
            problems.push(format!("{name}: init exited {:?}: {}", out.status.code(), text(&out.stderr)));
            continue;
        }
        assert!(text(&out.stderr).contains("wrote k3dgpu.toml"), "{name}: {}", text(&out.stderr));
        let config = std::fs::read_to_string(dir.path().join("k3dgpu.toml")).unwrap();
        // Its vendors are the host's active ones, as detection reads them.
        let facts = facts_of(&name);
        let active: Vec<String> = facts.detected.iter().map(|d| d.vendor.key().to_string()).collect();
        assert_eq!(expected_vendors(&config), active, "{name}:\n{config}");
        // `validate` (the config read from the working directory, as a user would) accepts it.
        let validated = run_in(dir.path(), &["validate", "--root", &host(&name)]);
        if validated.status.code() != Some(0) {
            problems.push(format!(
                "{name}: validate exited {:?}: {}",
                validated.status.code(),
                text(&validated.stderr)
            ));
        }
        // The agent's placement: what `k3d-gpu agent` decides with the defaults, and the
        // commented block is a config validate accepts too once switched on.
        let placed = K3dGpu::new().args(["agent", "--json", "--root", &host(&name)]).cwd(repo()).output();
        let placed: serde_json::Value = serde_json::from_slice(&placed.stdout).unwrap();
        let device = placed["device"].as_str().unwrap().to_ascii_lowercase();
        assert!(config.contains(&format!("\n# [agent]\n# device = \"{device}\"\n")), "{name}:\n{config}");
        assert!(config.contains(&format!(
            "{} on {}",
            placed["backend"].as_str().unwrap(),
            placed["device"].as_str().unwrap()
        )));
        std::fs::write(dir.path().join("agent.toml"), with_agent(&config)).unwrap();
        let validated = run_in(dir.path(), &["validate", "-c", "agent.toml", "--root", &host(&name)]);
        if validated.status.code() != Some(0) {
            problems.push(format!(
                "{name}: with [agent], validate exited {:?}: {}",
                validated.status.code(),
                text(&validated.stderr)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_written_file_matches_its_golden_and_the_docs() {
    let out = K3dGpu::new().args(["init", "--root", &host("rtx2000ada-x2"), "--out", "-"]).cwd(repo()).output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    check_golden("tests/golden/init/rtx2000ada-x2.toml", &out.stdout).unwrap();
    // docs/init.md shows this file, as it is.
    let doc = std::fs::read_to_string(repo().join("docs/init.md")).unwrap();
    let block = doc.split("```toml\n").nth(1).and_then(|b| b.split("```").next()).unwrap();
    assert_eq!(block, text(&out.stdout), "docs/init.md's example is stale");
}

#[test]
fn init_never_replaces_a_file_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = host("lunar-lake-npu");
    std::fs::write(dir.path().join("k3dgpu.toml"), "# mine\n").unwrap();
    let out = run_in(dir.path(), &["init", "--root", &root]);
    assert_eq!(out.status.code(), Some(1), "refused, exit 1: {}", text(&out.stderr));
    let message = text(&out.stderr);
    assert!(message.contains("k3dgpu.toml already exists") && message.contains("nothing was written"), "{message}");
    assert!(message.contains("--out"), "it says how to write another: {message}");
    // The check it suggests is of that host, not this machine: the --root is kept.
    assert!(message.contains(&format!("--root {root}")) && message.contains("validate"), "{message}");
    assert_eq!(std::fs::read_to_string(dir.path().join("k3dgpu.toml")).unwrap(), "# mine\n");
    // A link there, even one to nowhere, is not written through or replaced.
    std::os::unix::fs::symlink(dir.path().join("target.toml"), dir.path().join("link.toml")).unwrap();
    let out = run_in(dir.path(), &["init", "--root", &root, "--out", "link.toml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!dir.path().join("target.toml").exists());
    assert!(std::fs::symlink_metadata(dir.path().join("link.toml")).unwrap().file_type().is_symlink());
    // A directory that does not exist is bad usage (exit 2), as for every --out.
    let out = run_in(dir.path(), &["init", "--root", &root, "--out", "no/such/dir/k3dgpu.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // --out elsewhere writes there, and only there.
    let out = run_in(dir.path(), &["init", "--root", &root, "--out", "lab.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("validate"), "it names the check to run: {}", text(&out.stderr));
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["k3dgpu.toml", "lab.toml", "link.toml"]);
}

#[test]
fn a_vendor_filter_becomes_the_configs_vendor_list() {
    let dir = tempfile::tempdir().unwrap();
    let root = host("rtx2000ada-x2");
    let out = run_in(dir.path(), &["init", "--root", &root, "--vendors", "intel"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let config = std::fs::read_to_string(dir.path().join("k3dgpu.toml")).unwrap();
    let table: toml::Table = toml::from_str(&config).unwrap();
    assert_eq!(table["vendors"]["enable"].as_array().unwrap(), &[toml::Value::from("intel")]);
    assert_eq!(expected_vendors(&config), ["intel"]);
    // Checked without the filter, the config still keeps NVIDIA out.
    let out = run_in(dir.path(), &["validate", "--json", "--root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["hosts"][0]["active"], serde_json::json!(["intel"]));
}

/// Names read from the host end up in comments only, each one escaped to a single line: a
/// control character or a line break there cannot end the comment and add a key.
#[test]
fn hostile_host_text_stays_inside_its_comment() {
    let copy = copy_host("rtx2000ada-x2");
    let root = copy.path();
    let evil = "Evil\r[agent]\rdevice = \"cuda\"\u{b}\u{c}\u{1b}[2J\u{7f}\u{202e}\u{2028}'''\"\"\"";
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap();
    let cpuinfo = cpuinfo.replace("13th Gen Intel(R) Core(TM) i9-13900T", evil);
    std::fs::write(root.join("proc/cpuinfo"), cpuinfo).unwrap();
    for gpu in ["0000:01:00.0", "0000:02:00.0"] {
        let path = root.join(format!("proc/driver/nvidia/gpus/{gpu}/information"));
        let info = std::fs::read_to_string(&path).unwrap().replace("NVIDIA RTX 2000 Ada Generation", evil);
        std::fs::write(&path, info).unwrap();
    }
    let os = std::fs::read_to_string(root.join("etc/os-release")).unwrap();
    std::fs::write(root.join("etc/os-release"), os.replace("Ubuntu 26.04 LTS", "Ubuntu\u{1b}]0;x\u{7}\r[vendors]"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = root.display().to_string();
    let out = run_in(dir.path(), &["init", "--root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let config = std::fs::read_to_string(dir.path().join("k3dgpu.toml")).unwrap();
    assert!(config.contains("Evil\\x0d[agent]\\x0ddevice"), "the text is there, escaped:\n{config}");
    for line in config.lines() {
        assert!(!line.chars().any(|c| c.is_control() || ('\u{2028}'..='\u{202e}').contains(&c)), "{line:?}");
        if line.contains("Evil") || line.contains("Ubuntu") {
            assert!(line.starts_with('#'), "host text outside a comment: {line:?}");
        }
    }
    let table: toml::Table = toml::from_str(&config).unwrap_or_else(|e| panic!("not TOML ({e}):\n{config}"));
    assert!(!table.contains_key("agent"), "{config}");
    let keys: Vec<&String> = table.keys().collect();
    assert_eq!(keys, ["cluster", "expect", "vendors"]);
    let validated = run_in(dir.path(), &["validate", "--root", &root]);
    assert_eq!(validated.status.code(), Some(0), "{}", text(&validated.stderr));
}

/// A host whose device names are not the kernel's is refused before anything is written.
#[test]
fn a_host_detection_refuses_is_refused_and_nothing_is_written() {
    let copy = copy_host("xeon-2s-snc2");
    let devices = copy.path().join("sys/bus/pci/devices");
    std::fs::rename(devices.join("0000:6b:00.0"), devices.join("0000:6b:00.0;touch pwned")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["init", "--root", &copy.path().display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not a PCI address"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
}

/// The new commands reach the man pages through clap, like every other, with their examples.
/// (tests/install.rs holds every shell's completions to every command `--help` lists.)
#[test]
fn init_and_version_have_man_pages() {
    let dir = tempfile::tempdir().unwrap();
    let out = K3dGpu::new().args(["man", "--out", &dir.path().display().to_string()]).output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for page in ["k3d-gpu-init.1", "k3d-gpu-version.1"] {
        let roff = std::fs::read_to_string(dir.path().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(roff.contains(".SH EXAMPLES"), "{page}");
    }
}
