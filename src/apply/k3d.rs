//! The k3d provider: creates, deletes and starts the cluster by running the `k3d` binary with
//! one generated config file (SimpleConfig `k3d.io/v1alpha5`), so what we pass is a single
//! document a person can review. The file is JSON, which is YAML, so k3d reads it as is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::error::ApplyError;
use crate::observe::CLUSTER_SPEC_LABEL;

/// The k3d release k3d-gpu is built and tested against: the SimpleConfig schema, the node
/// entrypoint and the node-filter grammar in `tests/upstream/` are read from this tag, and
/// `k3d-gpu version` reports it. Older k3d v5 releases are accepted (doctor's floor is
/// `doctor::live::K3D_FLOOR`).
pub const K3D_TESTED: &str = "v5.9.0";

/// How long `k3d cluster create` may take: pulling the node image on a slow line is minutes.
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(900);

fn node_filters(nodes: &str) -> Vec<String> {
    match nodes {
        "all" | "" => vec!["server:*".into(), "agent:*".into()],
        // One role, or one node of a role (`server:0`), as k3d's node filters write it.
        one => vec![one.to_string()],
    }
}

/// The k3d SimpleConfig for a cluster spec (the graph's `k3d/cluster/...` resource).
pub fn simple_config(spec: &Value) -> Value {
    let extra_args: Vec<Value> = spec["k3s_args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| json!({ "arg": a["arg"], "nodeFilters": node_filters(a["nodes"].as_str().unwrap_or("all")) }))
        .collect();
    let volumes: Vec<Value> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| json!({ "volume": crate::plan::bind_mount(v), "nodeFilters": ["server:*", "agent:*"] }))
        .collect();
    // [cluster] volumes: the user's own, with their node filters (none: every node).
    let volumes: Vec<Value> = volumes
        .into_iter()
        .chain(spec["user_volumes"].as_array().into_iter().flatten().map(|v| {
            let filters: Vec<String> =
                v["nodes"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).map(str::to_string).collect();
            let filters = if filters.is_empty() { node_filters("all") } else { filters };
            json!({ "volume": crate::plan::bind_mount(v), "nodeFilters": filters })
        }))
        .collect();
    // [cluster] ports, the host address always written.
    let ports: Vec<Value> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| json!({ "port": crate::compile::ports::k3d_port(p), "nodeFilters": p["nodes"] }))
        .collect();
    let node_labels: Vec<Value> = spec["node_labels"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| json!({ "label": l["label"], "nodeFilters": node_filters(l["nodes"].as_str().unwrap_or("all")) }))
        .collect();
    let mut runtime = json!({
        // What apply created, recorded on every node so a later plan compares exactly. One line
        // of sorted keys: serde_json's map is a BTreeMap (see canonical.rs). Anyone who can
        // list containers reads labels: a secret is recorded as its digest, which the plan
        // compares just as well.
        "labels": [{
            "label": format!("{CLUSTER_SPEC_LABEL}={}", crate::secrets::digest_secrets(spec)),
            "nodeFilters": ["server:*", "agent:*"],
        }],
    });
    if let Some(gpus) = spec["gpus"].as_str() {
        runtime["gpuRequest"] = json!(gpus);
    }
    let mut config = json!({
        "apiVersion": "k3d.io/v1alpha5",
        "kind": "Simple",
        "metadata": { "name": spec["name"] },
        "servers": spec["servers"],
        "agents": spec["agents"],
        "image": spec["image"],
        "volumes": volumes,
        "options": {
            "k3s": { "extraArgs": extra_args, "nodeLabels": node_labels },
            "runtime": runtime,
            "kubeconfig": { "updateDefaultKubeconfig": true, "switchCurrentContext": false },
        },
    });
    if !ports.is_empty() {
        config["ports"] = json!(ports);
    }
    if spec["registries"].is_object() {
        config["registries"] = registries(&spec["registries"]);
    }
    // k3d publishes the API on every interface unless told otherwise.
    config["kubeAPI"] = json!({ "hostIP": spec["api_host_ip"].as_str().unwrap_or(crate::config::DEFAULT_API_HOST_IP) });
    if let Some(port) = spec["api_port"].as_u64() {
        config["kubeAPI"]["hostPort"] = json!(port.to_string());
    }
    config
}

// --- The host model store (issue 27; compile/models.rs) -----------------------------------
// Kept apart from `simple_config`'s `volumes` so the two change independently.

/// The user's data directory: `$XDG_DATA_HOME`, else `~/.local/share` (absolute values only).
pub fn data_home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |k: &str| env(k).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_DATA_HOME").or_else(|| absolute("HOME").map(|h| h.join(".local/share")))
}

/// A model store path as the graph writes it (`compile::models::short`: absolute, or under
/// `$XDG_DATA_HOME/`) on this machine.
pub fn model_store_path(short: &str, data_home: Option<&Path>) -> Result<PathBuf, ApplyError> {
    match short.strip_prefix("$XDG_DATA_HOME/") {
        Some(rest) => data_home.map(|d| d.join(rest)).ok_or(ApplyError::NoDataHome),
        None if short.starts_with('/') => Ok(PathBuf::from(short)),
        None => Err(ApplyError::RelativeModelStore(short.to_string())),
    }
}

/// Makes a model store directory (and its parents) if missing: Docker would otherwise make a
/// bind source root-owned, and a local PersistentVolume's path must exist.
pub fn make_model_dir(dir: &Path) -> Result<(), ApplyError> {
    std::fs::create_dir_all(dir).map_err(|e| ApplyError::File {
        what: format!("cannot make the model store {}", dir.display()),
        reason: e.to_string(),
    })
}

/// Adds the cluster spec's model store to a SimpleConfig: `host` (resolved) mounted on every
/// node at the spec's node path. A spec without one (an older recorded spec) adds nothing.
pub fn add_model_store(config: &mut Value, spec: &Value, host: &Path) {
    let Some(node) = spec["model_store"]["node"].as_str() else { return };
    let volume = json!({ "volume": format!("{}:{node}", host.display()), "nodeFilters": ["server:*", "agent:*"] });
    match config["volumes"].as_array_mut() {
        Some(volumes) => volumes.push(volume),
        None => config["volumes"] = json!([volume]),
    }
}

// --- end of the model store -------------------------------------------------------------

/// k3d's `registries` for a spec's: the registry to create, and registries.yaml with the
/// mirrors alone. The credentials are added by [`with_credentials`], at apply only.
fn registries(spec: &Value) -> Value {
    let mut out = json!({});
    if let Some(text) = super::registries::registries_yaml(spec, None) {
        out["config"] = json!(text);
    }
    let create = &spec["create"];
    if create.is_object() {
        // k3d's own default host is every interface: always written.
        let mut c = json!({ "name": create["name"], "host": create["host_ip"], "image": create["image"] });
        if let Some(port) = create["host_port"].as_u64() {
            c["hostPort"] = json!(port.to_string());
        }
        if let Some(url) = create["proxy"].as_str() {
            c["proxy"] = json!({ "remoteURL": url });
        }
        out["create"] = c;
    }
    out
}

/// The k3d config with the credentials of the user's file in its registries.yaml: what apply
/// writes (mode 0600), never printed.
pub fn with_credentials(mut config: Value, spec: &Value, credentials: &super::registries::Credentials) -> Value {
    if let Some(text) = super::registries::registries_yaml(&spec["registries"], Some(credentials)) {
        config["registries"]["config"] = json!(text);
    }
    config
}

/// Runs `k3d` with a deadline; its exit status and last lines (escaped: k3d echoes names
/// and registry replies) become the error. `lock`: the apply lock's
/// descriptor ([`super::lock::Lock::for_child`]), given to k3d as its stdin (k3d reads none),
/// so the lock is held while k3d runs even if k3d-gpu dies first; without it, stdin is empty.
pub async fn run_k3d(
    binary: &Path,
    args: &[&str],
    timeout: Duration,
    lock: Option<std::fs::File>,
) -> Result<(), ApplyError> {
    let mut command = tokio::process::Command::new(binary);
    let stdin = lock.map_or_else(std::process::Stdio::null, std::process::Stdio::from);
    command.args(args).stdin(stdin).kill_on_drop(true);
    let output = match tokio::time::timeout(timeout, command.output()).await {
        Err(_) => {
            return Err(ApplyError::TimedOut { what: format!("`k3d {}`", args.join(" ")), secs: timeout.as_secs() });
        }
        Ok(Err(e)) => return Err(ApplyError::K3dNotRun { binary: binary.to_path_buf(), reason: e.to_string() }),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout);
    let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).rev().take(5).collect();
    let tail = tail.into_iter().rev().map(|l| crate::escape::one_line(l.trim_end()).into_owned()).collect::<Vec<_>>();
    Err(ApplyError::K3dFailed {
        args: args.join(" "),
        status: output.status.to_string(),
        tail: crate::escape::capped(tail.join(" | ")),
    })
}

/// The k3d binary: `K3D_GPU_K3D` if set, else `k3d` on PATH.
pub fn binary(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    env("K3D_GPU_K3D").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("k3d"))
}

/// Where `binary` would run from: itself when it names a path, else the first executable
/// file of that name on `path` (PATH). `None` means an apply would fail at its first k3d
/// action, so apply checks this before any action starts.
pub fn locate(binary: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if binary.components().count() > 1 || binary.is_absolute() {
        return runnable(binary).then(|| binary.to_path_buf());
    }
    std::env::split_paths(path?).map(|dir| dir.join(binary)).find(|p| runnable(p))
}

/// Where to get k3d, for the error when it is missing.
pub const INSTALL_HINT: &str = "install k3d v5 (https://k3d.io: `curl -s https://raw.githubusercontent.com/k3d-io/k3d/main/install.sh | bash`), or name the binary with K3D_GPU_K3D";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_only_runnable_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let k3d = dir.path().join("k3d");
        std::fs::write(&k3d, "#!/bin/sh\n").unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(locate(Path::new("k3d"), Some(&path)), None, "not executable yet");
        std::fs::set_permissions(&k3d, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(locate(Path::new("k3d"), Some(&path)), Some(k3d.clone()));
        assert_eq!(locate(&k3d, None), Some(k3d.clone()), "a path needs no PATH");
        assert_eq!(locate(Path::new("k3d"), None), None);
        assert_eq!(locate(&dir.path().join("missing"), Some(&path)), None);
    }

    #[test]
    fn a_failed_k3d_names_its_exit_status_and_its_last_lines_escaped() {
        // A shell plays k3d (no script file: one just written can be busy when exec'd).
        let script = "for i in 1 2 3 4 5; do echo \"line $i\"; done; printf 'FATA \\033[31mred\\n'; exit 3";
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let error = rt.block_on(run_k3d(Path::new("/bin/sh"), &["-c", script], CREATE_TIMEOUT, None)).unwrap_err();
        let ApplyError::K3dFailed { args, status, tail } = &error else { panic!("{error:?}") };
        assert!(args.starts_with("-c for i in"), "{args}");
        assert!(status.contains('3'), "{status}");
        assert!(!tail.contains('\u{1b}') && tail.ends_with("line 5 | FATA \\x1b[31mred"), "{tail}");
        assert!(tail.starts_with("line 2 | ") && !tail.contains("line 1"), "the last five lines: {tail}");
        assert!(!error.is_retryable());
        let missing =
            rt.block_on(run_k3d(Path::new("/nonexistent/k3d"), &["version"], CREATE_TIMEOUT, None)).unwrap_err();
        assert!(matches!(missing, ApplyError::K3dNotRun { .. }), "{missing:?}");
        assert!(missing.to_string().contains("is k3d installed?"), "{missing}");
    }

    #[test]
    fn the_model_store_is_resolved_and_mounted_on_every_node() {
        let home = |k: &str| (k == "HOME").then(|| "/home/me".to_string());
        let data = data_home(&home);
        assert_eq!(data, Some(PathBuf::from("/home/me/.local/share")));
        let xdg = |k: &str| (k == "XDG_DATA_HOME").then(|| "/d".to_string());
        assert_eq!(data_home(&xdg), Some(PathBuf::from("/d")));
        assert_eq!(
            data_home(&|k: &str| (k == "XDG_DATA_HOME").then(|| "rel".to_string())),
            None,
            "relative is ignored"
        );
        let short = "$XDG_DATA_HOME/k3d-gpu/models/gpu";
        assert_eq!(
            model_store_path(short, data.as_deref()).unwrap(),
            PathBuf::from("/home/me/.local/share/k3d-gpu/models/gpu")
        );
        assert!(model_store_path(short, None).unwrap_err().to_string().contains("model_dir"));
        assert_eq!(model_store_path("/srv/m/vllm", None).unwrap(), PathBuf::from("/srv/m/vllm"));
        let spec =
            json!({ "name": "gpu", "volumes": [], "model_store": { "dir": null, "node": "/var/lib/k3d-gpu/models" } });
        let mut config = simple_config(&spec);
        add_model_store(&mut config, &spec, Path::new("/srv/m"));
        assert_eq!(
            config["volumes"],
            json!([{ "volume": "/srv/m:/var/lib/k3d-gpu/models", "nodeFilters": ["server:*", "agent:*"] }])
        );
        let mut old = simple_config(&json!({ "name": "gpu" }));
        add_model_store(&mut old, &json!({ "name": "gpu" }), Path::new("/srv/m"));
        assert_eq!(old["volumes"], json!([]), "an older spec has no store");
    }

    #[test]
    fn the_config_carries_everything_fixed_at_creation() {
        let spec = json!({
            "name": "gpu", "image": "img:1", "servers": 1, "agents": 1, "gpus": "all", "api_port": 6443, "api_host_ip": "127.0.0.1",
            "k3s_args": [{"arg": "--default-runtime=nvidia", "nodes": "server:*"}, {"arg": "--kubelet-arg=x", "nodes": "all"}],
            "volumes": [{"host": "/usr/lib/wsl", "node": "/usr/lib/wsl", "read_only": true}],
        });
        let config = simple_config(&spec);
        assert_eq!(config["apiVersion"], "k3d.io/v1alpha5");
        assert_eq!(config["options"]["runtime"]["gpuRequest"], "all");
        assert_eq!(
            config["options"]["k3s"]["extraArgs"][0],
            json!({"arg": "--default-runtime=nvidia", "nodeFilters": ["server:*"]})
        );
        assert_eq!(config["options"]["k3s"]["extraArgs"][1]["nodeFilters"], json!(["server:*", "agent:*"]));
        assert_eq!(config["volumes"][0]["volume"], "/usr/lib/wsl:/usr/lib/wsl:ro");
        assert_eq!(config["kubeAPI"]["hostPort"], "6443");
        assert_eq!(config["kubeAPI"]["hostIP"], "127.0.0.1", "the API stays on loopback");
        let label = config["options"]["runtime"]["labels"][0]["label"].as_str().unwrap();
        let recorded: Value = serde_json::from_str(label.strip_prefix("k3d-gpu.io/cluster-spec=").unwrap()).unwrap();
        assert_eq!(recorded, spec, "a later plan reads back exactly the spec");
        let with_token = json!({"name": "gpu", "k3s_args": [{"arg": "--token=hunter2", "nodes": "all"}]});
        let label = simple_config(&with_token)["options"]["runtime"]["labels"][0]["label"].to_string();
        assert!(!label.contains("hunter2") && label.contains("--token=sha256:"), "{label}");
        assert_eq!(config["options"]["kubeconfig"]["switchCurrentContext"], false, "never touch the current context");
    }
}
