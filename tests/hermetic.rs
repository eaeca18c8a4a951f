//! The test runner (`tests/support/run.rs`) is hermetic: a developer's environment —
//! `K3D_GPU_*`, `KUBECONFIG`, `DOCKER_HOST`, `XDG_*` — never reaches the binary. Proved by
//! running this test binary again with a poisoned environment and checking, inside it, what
//! the runner passes on.

mod support;

use std::collections::BTreeSet;

use support::K3dGpu;
use support::run::{NO_DOCKER, NO_HOME};

/// What a developer's shell may hold that would change what the binary does.
const POISON: &[(&str, &str)] = &[
    ("K3D_GPU_CONFIG", "/nonexistent/poisoned.toml"),
    ("K3D_GPU_ROOT", "/nonexistent/poisoned-root"),
    ("K3D_GPU_VENDORS", "nvidia"),
    ("K3D_GPU_STDLIB", "/nonexistent/poisoned-stdlib"),
    ("KUBECONFIG", "/nonexistent/poisoned-kubeconfig"),
    ("DOCKER_HOST", "tcp://192.0.2.1:1"),
    ("XDG_STATE_HOME", "/nonexistent/poisoned-state"),
    ("XDG_CONFIG_HOME", "/nonexistent/poisoned-config"),
    ("HOME", "/nonexistent/poisoned-home"),
    ("CLICOLOR_FORCE", "1"),
];

/// Set only in the poisoned child: the probe below runs its checks there.
const PROBE: &str = "K3D_GPU_HERMETIC_PROBE";

/// The environment `env` prints, as names.
fn names(env_output: &[u8]) -> BTreeSet<String> {
    String::from_utf8_lossy(env_output).lines().filter_map(|l| l.split_once('=')).map(|(k, _)| k.to_string()).collect()
}

#[test]
fn probe_in_a_poisoned_environment() {
    if std::env::var_os(PROBE).is_none() {
        return; // run by the test below, in the environment it poisons
    }
    for (key, value) in POISON {
        assert_eq!(std::env::var(key).as_deref(), Ok(*value), "the parent set {key}");
    }
    // What the child gets: the allow-list, nothing of the poison, not even the probe's flag.
    let out = K3dGpu::program("env").output();
    assert!(out.status.success());
    let passed = names(&out.stdout);
    let allowed: BTreeSet<String> =
        ["PATH", "HOME", "LANG", "NO_COLOR", "DOCKER_HOST", "RUST_BACKTRACE", "LLVM_PROFILE_FILE"]
            .map(String::from)
            .into();
    assert!(passed.is_subset(&allowed), "{passed:?} is more than {allowed:?}");
    let planned = K3dGpu::new().planned_env();
    assert_eq!(planned.get("HOME").map(String::as_str), Some(NO_HOME));
    assert_eq!(planned.get("DOCKER_HOST").map(String::as_str), Some(NO_DOCKER));
    // The binary behaves as with no such variables: a leaked K3D_GPU_CONFIG, K3D_GPU_STDLIB
    // or K3D_GPU_VENDORS would each fail this validate (a config that is not there, a catalog
    // that is not there, a vendor the host lacks).
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::repo().join("examples/wsl2-intel.toml"), dir.path().join("k3dgpu.toml")).unwrap();
    let root = support::hosts_dir().join("wsl2-intel");
    let out = K3dGpu::new().cwd(dir.path()).arg("validate").arg("--root").arg(&root).output();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // A variable passes only when the test names it.
    let docker = K3dGpu::new().docker().planned_env();
    assert_eq!(docker.get("DOCKER_HOST").map(String::as_str), Some("tcp://192.0.2.1:1"));
    let passed = K3dGpu::new().pass("KUBECONFIG").planned_env();
    assert_eq!(passed.get("KUBECONFIG").map(String::as_str), Some("/nonexistent/poisoned-kubeconfig"));
    let set = K3dGpu::new().env("K3D_GPU_VENDORS", "intel").planned_env();
    assert_eq!(set.get("K3D_GPU_VENDORS").map(String::as_str), Some("intel"));
}

#[test]
fn a_developers_environment_never_reaches_the_binary() {
    let me = std::env::current_exe().unwrap();
    let out = std::process::Command::new(me)
        .args(["--exact", "probe_in_a_poisoned_environment", "--test-threads=1", "--nocapture"])
        .envs(POISON.iter().copied())
        .env(PROBE, "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the probe did not run: {text}");
}

#[test]
fn without_a_test_setting_one_the_child_has_only_the_allow_list() {
    let planned = K3dGpu::new().planned_env();
    let keys: Vec<&str> =
        planned.keys().map(String::as_str).filter(|k| !["RUST_BACKTRACE", "LLVM_PROFILE_FILE"].contains(k)).collect();
    assert_eq!(keys, ["DOCKER_HOST", "HOME", "LANG", "NO_COLOR", "PATH"]);
    let removed = K3dGpu::new().env_remove("HOME").planned_env();
    assert!(!removed.contains_key("HOME"));
    let on_path = K3dGpu::new().binary_on_path().planned_env();
    let first = std::env::split_paths(&on_path["PATH"]).next().unwrap();
    assert!(first.join("k3d-gpu").is_file(), "{on_path:?}");
}
