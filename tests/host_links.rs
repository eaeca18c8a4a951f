//! Host paths the nodes mount are judged by what they are with every link resolved (issue 41,
//! defect 9): a `[agent] model_dir`, the default model store or a `[cluster] volumes` source
//! that is a link to `/`, `/etc` or a credentials directory is refused or warned about as that
//! target is, and the plan names the store's resolved directory. Real links in a temporary
//! directory, through the real binary.

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::{K3dGpu, copy_host, hosts_dir, repo};

const HOST: &str = "lunar-lake-npu";

fn root() -> String {
    hosts_dir().join(HOST).display().to_string()
}

/// The fixture host's facts as a saved document: the store is resolved on this machine for
/// a `--facts` plan, never for a `--root` one (a fixture host is another machine).
fn facts() -> String {
    repo().join(format!("tests/golden/facts/{HOST}.json")).display().to_string()
}

/// `plan --offline --json` of `config` with `host` (`--facts FILE` or `--root DIR`), HOME at
/// `home`.
fn plan(dir: &Path, home: &Path, config: &str, host: [&str; 2]) -> Output {
    std::fs::write(dir.join("k3dgpu.toml"), config).unwrap();
    K3dGpu::new().args(["plan", "--offline", "--json"]).args(host).env("HOME", home).cwd(dir).output()
}

fn all(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn warnings(out: &Output, code: &str) -> Vec<String> {
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", all(out)));
    plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == code)
        .map(|w| w["text"].as_str().unwrap().to_string())
        .collect()
}

fn action<'a>(plan: &'a Value, id: &str) -> &'a Value {
    plan["actions"].as_array().unwrap().iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no {id}"))
}

#[test]
fn a_model_dir_that_links_to_the_root_is_refused_as_the_root_is() {
    let tmp = tempfile::tempdir().unwrap();
    symlink("/", tmp.path().join("models")).unwrap();
    let config = format!("[agent]\nmodel_dir = {:?}\n", tmp.path().join("models").display().to_string());
    let out = plan(tmp.path(), tmp.path(), &config, ["--facts", &facts()]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    let text = all(&out);
    assert!(text.contains("[agent-model-dir]") && text.contains("is a link to the root directory"), "{text}");
}

#[test]
fn a_model_dir_that_links_to_a_system_or_key_directory_is_planned_with_the_warning() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("me/.ssh")).unwrap();
    symlink("/etc", tmp.path().join("etc-models")).unwrap();
    symlink(tmp.path().join("me/.ssh"), tmp.path().join("ssh-models")).unwrap();
    for (link, said) in [("etc-models", "system files"), ("ssh-models", "keys and credentials")] {
        let config = format!("[agent]\nmodel_dir = {:?}\n", tmp.path().join(link).display().to_string());
        let out = plan(tmp.path(), tmp.path(), &config, ["--facts", &facts()]);
        assert_eq!(out.status.code(), Some(0), "{}", all(&out));
        let found = warnings(&out, "model-dir-sensitive-path");
        assert!(found.len() == 1 && found[0].contains(said) && found[0].contains("resolves to"), "{link}: {found:?}");
    }
}

#[test]
fn the_default_store_is_judged_by_where_its_links_lead() {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join(".local/share/k3d-gpu/models");
    std::fs::create_dir_all(&models).unwrap();
    symlink("/", models.join("gpu")).unwrap();
    let out = plan(tmp.path(), tmp.path(), "", ["--facts", &facts()]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    let text = all(&out);
    assert!(text.contains("the default model store") && text.contains("is a link to the root directory"), "{text}");

    std::fs::remove_file(models.join("gpu")).unwrap();
    symlink("/etc", models.join("gpu")).unwrap();
    let out = plan(tmp.path(), tmp.path(), "", ["--facts", &facts()]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let found = warnings(&out, "model-dir-sensitive-path");
    assert!(found.len() == 1 && found[0].contains("the default model store"), "{found:?}");

    // A home whose resolved name k3d's volume syntax would split is refused, not mounted.
    let odd = tmp.path().join("a:b");
    let out = plan(tmp.path(), &odd, "", ["--facts", &facts()]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    assert!(all(&out).contains("which may not hold ':'"), "{}", all(&out));
}

/// The create names the directory the nodes mount, in JSON and text, and the model servers'
/// volumes are in it; apply mounts what the plan names.
#[test]
fn the_plan_names_the_store_it_mounts() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let out = plan(tmp.path(), &home, "[agent]\n", ["--facts", &facts()]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let plan_json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let canonical = tmp.path().canonicalize().unwrap();
    let store = canonical.join("home/.local/share/k3d-gpu/models/gpu").display().to_string();
    let cluster = action(&plan_json, "k3d/cluster/gpu");
    assert_eq!(cluster["after"]["model_store"]["host"], store.as_str(), "{cluster}");
    // The objects name it as written: they are the same on every machine.
    let pv = action(&plan_json, "k8s/core/PersistentVolume/k3d-gpu-agent-ovms-models");
    assert_eq!(
        pv["after"]["metadata"]["annotations"]["k3d-gpu.io/model-store"],
        "$XDG_DATA_HOME/k3d-gpu/models/gpu/ovms"
    );

    // A configured store that is a link: both names, in the text.
    std::fs::create_dir(tmp.path().join("disk")).unwrap();
    symlink(tmp.path().join("disk"), tmp.path().join("models")).unwrap();
    std::fs::write(
        tmp.path().join("k3dgpu.toml"),
        format!("[agent]\nmodel_dir = {:?}\n", tmp.path().join("models").display().to_string()),
    )
    .unwrap();
    let out =
        K3dGpu::new().args(["plan", "--offline", "--facts", &facts()]).env("HOME", &home).cwd(tmp.path()).output();
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let said = format!(
        "model store: {} (resolves to {}) → /var/lib/k3d-gpu/models",
        tmp.path().join("models").display(),
        canonical.join("disk").display()
    );
    assert!(text.contains(&said), "{said}\n{text}");
}

#[test]
fn a_volume_source_that_links_to_the_hosts_root_is_planned_with_the_warning() {
    let host = copy_host(HOST);
    std::fs::create_dir_all(host.path().join("srv")).unwrap();
    // Inside a fixture host an absolute target is the fixture's own root.
    symlink("/", host.path().join("srv/data")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = plan(
        tmp.path(),
        tmp.path(),
        "[cluster]\nvolumes = [\"/srv/data:/data\"]\n",
        ["--root", &host.path().display().to_string()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let found = warnings(&out, "volume-sensitive-path");
    assert!(found.len() == 1 && found[0].contains("a link to \"/\"") && found[0].contains("system files"), "{found:?}");
}

/// A plan of a fixture host (`--root`) describes another machine: this one's home and links
/// are not its store, so the store is named as written and nothing here is judged (a default
/// store that links to `/` on this machine is no refusal of that one).
#[test]
fn a_fixture_host_plan_names_the_store_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join(".local/share/k3d-gpu/models");
    std::fs::create_dir_all(&models).unwrap();
    symlink("/", models.join("gpu")).unwrap();
    let out = plan(tmp.path(), tmp.path(), "", ["--root", &root()]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let plan_json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let store = &action(&plan_json, "k3d/cluster/gpu")["after"]["model_store"];
    assert_eq!(*store, serde_json::json!({ "dir": null, "node": "/var/lib/k3d-gpu/models" }), "{store}");
}

/// The objects are the same bytes wherever they are rendered (`render --flux` commits them):
/// two machines with different homes and data directories differ only in the cluster spec,
/// which names the store each one mounts.
#[test]
fn the_objects_name_the_store_alike_on_every_machine() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("k3dgpu.toml"), "[agent]\n").unwrap();
    let machines = [("alice", None), ("bob", Some(tmp.path().join("bob-data")))];
    let mut seen = Vec::new();
    for (user, data_home) in &machines {
        let home = tmp.path().join("home").join(user);
        let run = |args: &[&str]| {
            let mut command = K3dGpu::new().args(args).args(["--facts", &facts()]).env("HOME", &home).cwd(tmp.path());
            if let Some(data) = data_home {
                command = command.env("XDG_DATA_HOME", data);
            }
            let out = command.output();
            assert_eq!(out.status.code(), Some(0), "{user} {args:?}: {}", all(&out));
            out
        };
        let mut files = Vec::new();
        for flux in [false, true] {
            let dir = tmp.path().join(format!("{user}-{flux}"));
            let dir_arg = dir.display().to_string();
            let args: Vec<&str> = ["render", "--out", &dir_arg].into_iter().chain(flux.then_some("--flux")).collect();
            run(&args);
            let mut tree: Vec<(String, String)> = Vec::new();
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_file() {
                    tree.push((
                        path.file_name().unwrap().to_string_lossy().into(),
                        std::fs::read_to_string(&path).unwrap(),
                    ));
                }
            }
            tree.sort();
            assert!(tree.iter().any(|(_, text)| text.contains("k3d-gpu.io/model-store")), "{user}: {tree:?}");
            files.push(tree);
        }
        let graph: Value = serde_json::from_slice(&run(&["graph", "--json"]).stdout).unwrap();
        let mut cluster = Value::Null;
        let mut rest = Vec::new();
        for r in graph["resources"].as_array().unwrap() {
            if r["id"] == "k3d/cluster/gpu" {
                cluster = r["spec"]["model_store"]["host"].clone();
            } else {
                rest.push(r.clone());
            }
        }
        seen.push((files, rest, cluster));
    }
    let (alice, bob) = (&seen[0], &seen[1]);
    assert_eq!(alice.0, bob.0, "the rendered files differ between two machines");
    assert_eq!(alice.1, bob.1, "the graph's objects differ between two machines");
    assert!(alice.2.as_str().is_some_and(|h| h.contains("/home/alice/")), "{}", alice.2);
    assert!(bob.2.as_str().is_some_and(|h| h.contains("/bob-data/")), "{}", bob.2);
}
