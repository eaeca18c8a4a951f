//! `doctor --perf` through the real binary, on a read-only copy of a fixture host (nothing
//! may be written, and the tree is byte-for-byte the same after), and `facts capture`
//! carrying the files it reads.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use support::K3dGpu;

fn k3d_gpu(args: &[&str]) -> Output {
    K3dGpu::new().args(args).output()
}

/// Every file, link and directory under `dir` with its bytes, link target and mode.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let bytes = if meta.file_type().is_symlink() {
                std::fs::read_link(e.path()).unwrap().display().to_string().into_bytes()
            } else if meta.is_dir() {
                stack.push(e.path());
                Vec::new()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            out.push((rel, bytes, meta.permissions().mode()));
        }
    }
    out.sort();
    out
}

fn read_only_copy(host: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(&support::hosts_dir().join(host), &dir.path().join("host"));
    let status = Command::new("chmod").args(["-R", "a-w"]).arg(dir.path().join("host")).status().unwrap();
    assert!(status.success());
    dir
}

#[test]
fn doctor_perf_advises_on_a_read_only_host_and_changes_nothing() {
    let dir = read_only_copy("desktop-rpl-nvidia");
    let root = dir.path().join("host");
    let before = snapshot(&root);
    let out = k3d_gpu(&["doctor", "--perf", "--root", root.to_str().unwrap(), "--json", "--model-gb", "500"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.doctor-perf/v1");
    let codes: Vec<&str> = doc["findings"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap()).collect();
    for want in
        ["perf-governor", "perf-epp", "perf-swappiness", "perf-model-fit", "perf-pcie-width", "perf-rapl-root-only"]
    {
        assert!(codes.contains(&want), "{want} missing from {codes:?}");
    }
    let governor = doc["findings"].as_array().unwrap().iter().find(|f| f["code"] == "perf-governor").unwrap();
    assert!(governor["fix"].is_string() && governor["revert"].is_string(), "{governor}");
    let text = k3d_gpu(&["doctor", "--perf", "--root", root.to_str().unwrap()]);
    assert_eq!(text.status.code(), Some(0));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("revert: echo powersave | sudo tee"), "{text}");
    assert!(text.contains("advice only: nothing was changed"), "{text}");
    assert_eq!(snapshot(&root), before, "doctor --perf wrote to the host");
    // Restore write permission so the temporary directory can be removed.
    let _ = Command::new("chmod").args(["-R", "u+w"]).arg(&root).status();
}

#[test]
fn model_gb_needs_perf_and_a_positive_size() {
    let root = support::hosts_dir().join("desktop-rpl-nvidia");
    for args in [
        vec!["doctor", "--model-gb", "8"],
        vec!["doctor", "--perf", "--model-gb", "-1"],
        vec!["doctor", "--perf", "--model-gb", "NaN"],
    ] {
        let mut a = args.clone();
        a.extend(["--root", root.to_str().unwrap()]);
        assert_eq!(k3d_gpu(&a).status.code(), Some(2), "{args:?}");
    }
    let facts = tempfile::NamedTempFile::new().unwrap();
    let out = k3d_gpu(&["doctor", "--perf", "--facts", facts.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn facts_capture_carries_what_doctor_perf_reads() {
    let dir = tempfile::tempdir().unwrap();
    let host = support::hosts_dir().join("xeon-2s-snc2");
    let captured = dir.path().join("captured");
    let out = k3d_gpu(&["facts", "capture", "--root", host.to_str().unwrap(), "--out", captured.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in [
        "proc/sys/kernel/numa_balancing",
        "proc/sys/vm/swappiness",
        "sys/kernel/mm/transparent_hugepage/enabled",
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
    ] {
        assert!(captured.join(f).exists(), "{f} not captured");
    }
    let perf = |root: &Path| k3d_gpu(&["doctor", "--perf", "--json", "--root", root.to_str().unwrap()]).stdout;
    assert_eq!(perf(&captured), perf(&host), "the capture gives the same advice");
    let facts = |root: &Path| k3d_gpu(&["facts", "--root", root.to_str().unwrap()]).stdout;
    let doc: Value = serde_json::from_slice(&facts(&captured)).unwrap();
    assert_eq!(doc["host"]["rapl"].as_array().unwrap().len(), 3, "host.rapl survives the capture");
    assert_eq!(facts(&captured), facts(&host));
}
