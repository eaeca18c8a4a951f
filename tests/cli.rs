//! The real binary, end to end: exit codes, determinism across processes, --out, --facts,
//! and capture round trips.

mod support;

#[allow(dead_code)]
#[path = "../src/build_commit.rs"]
mod build_commit;

use std::path::Path;
use std::process::{Command, Output};

use support::{K3dGpu, copy_host, hosts_dir, repo};

fn k3d_gpu(args: &[&str]) -> Output {
    K3dGpu::new().args(args).output()
}

fn host(name: &str) -> String {
    hosts_dir().join(name).display().to_string()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// build.rs links the binary as non-PIE on Linux with glibc: a PIE spent most of a short
/// command's start-up relocating itself (36,643 relative relocations, 648 KB copied on
/// write). ELF's `e_type`, at byte 16, is 2 for an executable at a fixed address, 3 for a PIE.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn the_binary_is_linked_at_a_fixed_address() {
    use std::io::Read;
    let mut bytes = [0u8; 18];
    std::fs::File::open(support::run::binary()).unwrap().read_exact(&mut bytes).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    // EI_DATA (byte 5): 2 when the fields are big-endian.
    let e_type = [bytes[16], bytes[17]];
    let e_type = if bytes[5] == 2 { u16::from_be_bytes(e_type) } else { u16::from_le_bytes(e_type) };
    assert_eq!(e_type, 2, "e_type {e_type}: the binary is a PIE again (build.rs's -no-pie was dropped?)");
}

/// The binary is its own C `main` (src/main.rs): what std's start-up did, it does. A reader
/// that goes away makes writes fail with EPIPE, which the output ignores, rather than a
/// SIGPIPE that kills the process: the exit code is still the command's.
#[test]
fn a_reader_gone_is_no_kill() {
    use std::os::unix::process::ExitStatusExt;
    // The reading end is closed before the process starts, so its first write meets no reader.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(support::run::binary())
        .args(["facts", "--root", &host("desktop-rpl-nvidia")])
        .stdout(writer)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), None, "killed by a signal: {status:?}");
    assert_eq!(status.code(), Some(0));
}

/// A standard descriptor the caller left closed is opened on /dev/null before anything else,
/// so no file the program opens takes its number (and what it prints to stderr goes nowhere,
/// not into that file). `mcp` waits on stdin, so its descriptors can be looked at.
#[test]
#[cfg(target_os = "linux")]
fn a_closed_standard_descriptor_is_opened_on_dev_null() {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(support::run::binary());
    command.arg("mcp").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::null());
    // SAFETY: close(2) is async-signal-safe; the child closes its stderr just before exec.
    unsafe {
        command.pre_exec(|| {
            libc::close(2);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let fd2 = format!("/proc/{}/fd/2", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let target = loop {
        if let Ok(target) = std::fs::read_link(&fd2) {
            break Some(target);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert_eq!(target.as_deref(), Some(Path::new("/dev/null")), "descriptor 2 of the server");
    // Closed before any request: the server says so on the descriptor it was given, and exits.
    assert!(status.code().is_some(), "the server ends when its stdin does: {status:?}");
}

#[test]
fn facts_bytes_are_the_golden_bytes_in_every_process() {
    let golden = std::fs::read(repo().join("tests/golden/facts/desktop-rpl-nvidia.json")).unwrap();
    let first = k3d_gpu(&["facts", "--root", &host("desktop-rpl-nvidia")]);
    let second = k3d_gpu(&["facts", "--root", &host("desktop-rpl-nvidia")]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(first.stdout, golden);
    assert_eq!(second.stdout, golden);
}

#[test]
fn facts_do_not_depend_on_where_the_host_lives() {
    let copy = copy_host("xeon-2s-snc2");
    let here = copy.path().display().to_string();
    let out = k3d_gpu(&["facts", "--root", &here]);
    let golden = std::fs::read(repo().join("tests/golden/facts/xeon-2s-snc2.json")).unwrap();
    assert_eq!(out.stdout, golden);
    assert!(!stdout(&out).contains(&here), "facts leak the root path");
}

#[test]
fn facts_out_writes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("facts.json");
    let out = k3d_gpu(&["facts", "--root", &host("lunar-lake-npu"), "--out", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(repo().join("tests/golden/facts/lunar-lake-npu.json")).unwrap()
    );

    // A saved document stands in for the host.
    let table = k3d_gpu(&["detect", "--facts", file.to_str().unwrap()]);
    let golden = std::fs::read_to_string(repo().join("tests/golden/detect/lunar-lake-npu.txt")).unwrap();
    assert_eq!(stdout(&table), golden);
}

#[test]
fn a_saved_document_can_be_narrowed_by_another_vendor_filter() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("facts.json");
    k3d_gpu(&["facts", "--root", &host("desktop-rpl-nvidia"), "--out", file.to_str().unwrap()]);
    let out = k3d_gpu(&["detect", "--json", "--facts", file.to_str().unwrap(), "--vendors", "intel"]);
    let facts: k3d_gpu::facts::Facts = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(facts.detected.len(), 1);
    assert_eq!(facts.vendor_filter.to_string(), "intel");
}

#[test]
fn bad_usage_and_unreadable_input_exit_2() {
    let out = k3d_gpu(&["detect", "--root", &host("desktop-rpl-nvidia"), "--vendors", "nvidai"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean \"nvidia\""), "{}", stderr(&out));

    let out = k3d_gpu(&["detect", "--root", "/nonexistent/k3d-gpu-host"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read host root /nonexistent/k3d-gpu-host"), "{}", stderr(&out));

    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("facts.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let out = k3d_gpu(&["detect", "--facts", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read facts document"), "{}", stderr(&out));

    let out = k3d_gpu(&["detect", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    let out = k3d_gpu(&["detect", "--root", "a", "--facts", "b"]);
    assert_eq!(out.status.code(), Some(2), "--root and --facts conflict");
}

/// A saved document of another kind is named by its schema, whether it happens to parse as
/// the one expected (a facts document has every field an observed document requires) or
/// not (its fields do not fit), and a document that names no schema says so.
#[test]
fn a_document_of_another_kind_is_named_by_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let facts = dir.path().join("facts.json");
    let out = k3d_gpu(&["facts", "--root", &host("desktop-rpl-nvidia"), "--out", facts.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let not_fitting = dir.path().join("not-fitting.json");
    std::fs::write(&not_fitting, r#"{"schema": "k3d-gpu.plan/v1", "kubernetes": 7}"#).unwrap();
    let nameless = dir.path().join("nameless.json");
    std::fs::write(&nameless, r#"{"cluster": null, "kubernetes": null}"#).unwrap();
    let config = repo().join("examples/nvidia-workstation.toml");
    for (document, found) in
        [(&facts, "\"k3d-gpu.facts/v1\""), (&not_fitting, "\"k3d-gpu.plan/v1\""), (&nameless, "null")]
    {
        let out = k3d_gpu(&[
            "plan",
            "--config",
            config.to_str().unwrap(),
            "--root",
            &host("desktop-rpl-nvidia"),
            "--observed",
            document.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let expected = format!("schema is {found}, expected \"k3d-gpu.observed/v1\"");
        assert!(stderr(&out).contains(&expected), "{expected}: {}", stderr(&out));
    }
}

/// `validate` keeps a host open per `--root` until it ends; under the usual limit of 1,024
/// open files the directory descriptors they keep must stay within it (each host kept its
/// own 124 to 256, and the 21 fixture hosts ran out: "Too many open files"). The output is
/// the same as with no limit.
#[test]
fn many_roots_stay_within_the_usual_open_file_limit() {
    let mut args = vec![
        "validate".to_string(),
        "--config".into(),
        repo().join("examples/nvidia-workstation.toml").display().to_string(),
    ];
    let mut hosts: Vec<_> =
        std::fs::read_dir(hosts_dir()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    hosts.sort();
    assert!(hosts.len() >= 20, "{}", hosts.len());
    for host in &hosts {
        args.extend(["--root".to_string(), host.display().to_string()]);
    }
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let limited = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n 1024 && exec \"$0\" {}", quoted.join(" ")))
        .arg(support::run::binary())
        .output()
        .unwrap();
    let unlimited = K3dGpu::new().args(&args).output();
    assert!(!stderr(&limited).contains("Too many open files"), "{}", stderr(&limited));
    assert_eq!((limited.status.code(), stdout(&limited)), (unlimited.status.code(), stdout(&unlimited)));
}

#[test]
fn a_root_that_is_not_a_host_is_an_input_error() {
    // An empty directory (or a typo'd path that exists) used to read as a healthy host with
    // 0 CPUs and exit 0.
    let empty = tempfile::tempdir().unwrap();
    let root = empty.path().to_str().unwrap();
    for command in ["detect", "doctor", "validate", "facts"] {
        let out = k3d_gpu(&[command, "--root", root]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("not a host: it has no /proc/cpuinfo and no /sys/devices/system/cpu"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn out_into_a_missing_directory_is_bad_usage() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("no-such-dir/facts.json");
    for args in [
        vec!["facts", "--root", &host("lunar-lake-npu"), "--out", file.to_str().unwrap()],
        vec!["plan", "--offline", "--root", &host("lunar-lake-npu"), "--out", file.to_str().unwrap()],
    ] {
        let out = k3d_gpu(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("no-such-dir does not exist"), "{}", stderr(&out));
    }
}

/// A shared option a command does not read is not in its definition: not in its help, and
/// refused by the parser (exit 2), before or after the command word.
#[test]
fn a_global_option_the_command_ignores_is_refused() {
    for (args, option) in [
        (vec!["schema", "--root", "/nonexistent"], "--root"),
        (vec!["--root", "/nonexistent", "schema"], "--root"),
        (vec!["render", "--json", "--out", "/nonexistent/x"], "--json"),
        (vec!["detect", "--stdlib", "/nonexistent"], "--stdlib"),
        (vec!["facts", "capture", "--facts", "f.json", "--out", "/nonexistent/x"], "--facts"),
    ] {
        let out = k3d_gpu(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("unexpected argument '{option}'")), "{args:?}: {}", stderr(&out));
    }
    for (command, absent) in [("schema", "--root"), ("render", "--json"), ("detect", "--stdlib"), ("logs", "--root")] {
        let help = stdout(&k3d_gpu(&[command, "--help"]));
        assert!(help.contains("Usage:") && !help.contains(absent), "{command} --help lists {absent}:\n{help}");
    }
    // From the environment, a variable is meant for every command: not refused.
    let out = K3dGpu::new().arg("schema").env("K3D_GPU_ROOT", "/nonexistent").output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `k3d-gpu -c FILE --root DIR plan` still works: the options move behind the command.
#[test]
fn shared_options_may_come_before_the_command() {
    let before =
        k3d_gpu(&["-c", &example("lunar-lake-npu"), "--root", &host("lunar-lake-npu"), "plan", "--offline", "--hash"]);
    let after =
        k3d_gpu(&["plan", "--offline", "--hash", "-c", &example("lunar-lake-npu"), "--root", &host("lunar-lake-npu")]);
    assert_eq!(before.status.code(), Some(0), "{}", stderr(&before));
    assert_eq!(before.stdout, after.stdout);
}

#[test]
fn validate_takes_roots_and_facts_together() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("npu.json");
    k3d_gpu(&["facts", "--root", &host("lunar-lake-npu"), "--out", file.to_str().unwrap()]);
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "").unwrap();
    let out = k3d_gpu(&[
        "validate",
        "-c",
        config.to_str().unwrap(),
        "--facts",
        file.to_str().unwrap(),
        "--root",
        &host("xeon-2s-snc2"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("npu.json") && stdout(&out).contains("xeon-2s-snc2"), "{}", stdout(&out));
}

#[test]
fn a_reference_launcher_variable_names_the_key_that_replaces_it() {
    let out = K3dGpu::new()
        .args(["detect", "--root", &host("lunar-lake-npu")])
        .env("K3D_GPU_CLUSTER", "secret-cluster-name")
        .env("K3D_GPU_INTEL_SHARED", "4")
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("note: K3D_GPU_CLUSTER is set, but k3d-gpu does not read it; instead: `[cluster]` `name`"),
        "{text}"
    );
    assert!(
        text.contains("note: K3D_GPU_INTEL_SHARED is set, but k3d-gpu does not read it; instead: `[sharing]` `shared`"),
        "{text}"
    );
    assert!(!text.contains("secret-cluster-name"), "values are never printed: {text}");
}

#[test]
fn a_bad_id_is_underlined_in_its_list() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[sharing]\ndeny_ids = [\"e20b\", \"zz\", \"a780\"]\n").unwrap();
    let out = k3d_gpu(&["validate", "-c", config.to_str().unwrap(), "--root", &host("arc-b580-xe-rpl-igpu")]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    // "zz" (column 21), not the whole list; and the empty selection is blamed on deny_ids.
    assert!(text.contains("deny_ids: \"zz\" is not a PCI device id [bad-pci-id]\n   ╭─["), "{text}");
    assert!(text.contains("k3dgpu.toml:2:21]"), "{text}");
    assert!(text.contains("leaves no Intel GPU (deny_ids removes the last one"), "{text}");
}

#[test]
fn only_plan_suggests_offline_when_docker_is_unreachable() {
    let root = host("lunar-lake-npu");
    let plan = k3d_gpu(&["plan", "--root", &root]);
    assert_eq!(plan.status.code(), Some(2), "{}", stderr(&plan));
    assert!(stderr(&plan).contains("--offline"), "{}", stderr(&plan));
    let observe = k3d_gpu(&["observe"]);
    assert_eq!(observe.status.code(), Some(2), "{}", stderr(&observe));
    assert!(stderr(&observe).contains("cannot reach Docker"), "{}", stderr(&observe));
    assert!(!stderr(&observe).contains("--offline"), "{}", stderr(&observe));
}

#[test]
fn a_malformed_plan_hash_is_bad_usage() {
    // Refused before anything is read or observed: a typo is not a plan that changed.
    for command in ["apply", "destroy"] {
        for hash in ["sha256:0000", "0".repeat(64).as_str(), &format!("sha256:{}", "A".repeat(64))] {
            let out = k3d_gpu(&[command, "--plan-hash", hash]);
            assert_eq!(out.status.code(), Some(2), "{command} {hash}: {}", stderr(&out));
            assert!(stderr(&out).contains("64 lowercase hex digits"), "{}", stderr(&out));
        }
    }
}

#[test]
fn doctor_exits_1_on_a_fail_finding_and_prints_the_fix() {
    let out = k3d_gpu(&["doctor", "--root", &host("rpl-guc-too-old")]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("fail  Intel Raptor Lake-S (0xa780) at 0000:00:02.0: GuC"), "{text}");
    assert!(text.contains("evidence: /sys/kernel/debug/dri/0/gt0/uc/guc_info"), "{text}");
    assert!(text.contains("fix: install linux-firmware with i915/tgl_guc_70.bin 70.5.1 or newer"), "{text}");

    let out = k3d_gpu(&["doctor", "--root", &host("lunar-lake-npu")]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(!stdout(&out).contains("docker"), "tool checks run only on the real host");

    let out = k3d_gpu(&["doctor", "--json", "--root", &host("gaudi3-no-driver")]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.doctor/v1");
    assert_eq!(doc["findings"][0]["code"], "gaudi-without-driver");
}

#[test]
fn capture_makes_a_fixture_host_that_detects_the_same() {
    // Not broken-inputs: a file that cannot be read cannot be copied either, so its capture
    // lacks that finding by design.
    for name in [
        "desktop-rpl-nvidia",
        "rtx2000ada-x2",
        "arc-b580-x2",
        "xeon-2s-snc2",
        "meteor-lake-old-npu-fw",
        "wsl2-intel",
        "rpl-guc-too-old",
        "gaudi3-server",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("captured");
        let out = k3d_gpu(&["facts", "capture", "--root", &host(name), "--out", out_dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        // The summary counts every file written, placeholders and markers included.
        fn regular_files(dir: &std::path::Path) -> usize {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap())
                .map(|e| match e.file_type().unwrap() {
                    t if t.is_dir() => regular_files(&e.path()),
                    t if t.is_file() => 1,
                    _ => 0,
                })
                .sum()
        }
        let summary = format!("captured {} files into", regular_files(&out_dir));
        assert!(stderr(&out).contains(&summary), "{summary}: {}", stderr(&out));
        let original = k3d_gpu(&["facts", "--root", &host(name)]);
        let captured = k3d_gpu(&["facts", "--root", out_dir.to_str().unwrap()]);
        for (which, run) in [("original", &original), ("captured", &captured)] {
            assert_eq!(run.status.code(), Some(0), "{name} {which}: {}", stderr(run));
            assert!(!stdout(run).trim().is_empty(), "{name} {which}: no facts on stdout");
        }
        if let Some(diff) = support::first_difference(&stdout(&original), &stdout(&captured)) {
            panic!("{name}: the capture does not detect the same: {diff}");
        }
    }
}

#[test]
fn capture_copies_only_what_detection_reads_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("captured");
    k3d_gpu(&["facts", "capture", "--root", &host("desktop-rpl-nvidia"), "--out", out_dir.to_str().unwrap()]);
    // The fixture carries files detection never opens (driver bind/unbind, module refcnt).
    assert!(hosts_dir().join("desktop-rpl-nvidia/sys/module/nvidia/refcnt").exists());
    assert!(!out_dir.join("sys/module/nvidia/refcnt").exists());
    assert!(out_dir.join("proc/cpuinfo").exists());
    let sidecar = std::fs::read_to_string(out_dir.join(".k3d-gpu-stat")).unwrap();
    assert!(sidecar.contains(" /dev/dri/renderD128\n"), "{sidecar}");
    // Only the command line's parameters detection reads: the rest may hold secrets.
    assert!(hosts_dir().join("desktop-rpl-nvidia/proc/cmdline").metadata().unwrap().len() > 1);
    assert_eq!(std::fs::read_to_string(out_dir.join("proc/cmdline")).unwrap(), "\n");

    let again =
        k3d_gpu(&["facts", "capture", "--root", &host("desktop-rpl-nvidia"), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("not an empty directory"), "{}", stderr(&again));
    assert!(stderr(&again).contains("never overwrites"), "{}", stderr(&again));

    // A file is not a directory to capture into, and is left as it was.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let onto_file =
        k3d_gpu(&["facts", "capture", "--root", &host("desktop-rpl-nvidia"), "--out", file.to_str().unwrap()]);
    assert_eq!(onto_file.status.code(), Some(2), "{}", stderr(&onto_file));
    assert!(stderr(&onto_file).contains("not an empty directory"), "{}", stderr(&onto_file));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

/// Every entry under `dir`: path, kind, size, mode, modification time and link target.
fn snapshot(dir: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        let meta = std::fs::symlink_metadata(&at).unwrap();
        let link = if meta.file_type().is_symlink() { std::fs::read_link(&at).ok() } else { None };
        out.push(format!(
            "{} {:?} {} {:o} {}.{} {:?}",
            at.strip_prefix(dir).unwrap().display(),
            meta.file_type(),
            meta.len(),
            meta.mode(),
            meta.mtime(),
            meta.mtime_nsec(),
            link
        ));
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&at).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out.sort();
    out
}

#[test]
fn doctor_changes_nothing_in_the_host_it_reads() {
    for name in ["desktop-rpl-nvidia", "xeon-2s-snc2"] {
        let copy = copy_host(name);
        let before = snapshot(copy.path());
        assert!(before.len() > 50, "{name}: the copy is too small to mean anything");
        for json in [false, true] {
            let mut args = vec!["doctor", "--root", copy.path().to_str().unwrap()];
            if json {
                args.push("--json");
            }
            let out = k3d_gpu(&args);
            assert!(matches!(out.status.code(), Some(0 | 1)), "{name}: {}", stderr(&out));
            assert!(!stdout(&out).trim().is_empty(), "{name}: doctor printed nothing");
        }
        assert_eq!(snapshot(copy.path()), before, "{name}: doctor changed the host tree");
    }
}

fn example(name: &str) -> String {
    repo().join(format!("examples/{name}.toml")).display().to_string()
}

#[test]
fn validate_many_hosts_and_fail_on_any() {
    let out = k3d_gpu(&[
        "validate",
        "-c",
        &example("nvidia-workstation"),
        "--root",
        &host("desktop-rpl-nvidia"),
        "--root",
        &host("plain-laptop-amd"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let table = stdout(&out);
    assert!(table.contains("desktop-rpl-nvidia  ok"), "{table}");
    assert!(table.contains("plain-laptop-amd    FAIL"), "{table}");
    assert!(table.contains("2 host(s), 1 failed"), "{table}");
    // The error points into the config.
    assert!(stderr(&out).contains("enable = [\"nvidia\", \"hybrid\"]"), "{}", stderr(&out));

    let out = k3d_gpu(&["validate", "--json", "-c", &example("wsl2-intel"), "--root", &host("wsl2-intel")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.validate/v1");
    assert_eq!(doc["hosts"][0]["ok"], true);
}

#[test]
fn an_invalid_config_exits_1_and_a_missing_one_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("k3dgpu.toml");
    std::fs::write(&bad, "[cluster]\nnmae = \"x\"\n").unwrap();
    let out = k3d_gpu(&["validate", "-c", bad.to_str().unwrap(), "--root", &host("plain-laptop-amd")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did you mean `name`?"), "{}", stderr(&out));
    let out = k3d_gpu(&["validate", "-c", "/nonexistent/k3dgpu.toml", "--root", &host("plain-laptop-amd")]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn graph_prints_dot_or_json_and_render_writes_a_kustomization() {
    let args = ["-c", &example("lunar-lake-npu"), "--root", &host("lunar-lake-npu")];
    let dot = k3d_gpu(&[&["graph"][..], &args[..]].concat());
    assert_eq!(dot.status.code(), Some(0), "{}", stderr(&dot));
    assert!(stdout(&dot).starts_with("digraph k3d_gpu {"));
    let json = k3d_gpu(&[&["graph", "--json"][..], &args[..]].concat());
    let golden = std::fs::read_to_string(repo().join("tests/golden/graph/lunar-lake-npu--lunar-lake-npu.txt")).unwrap();
    let printed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    if let Some(diff) = support::first_difference(&golden, &support::graph_golden::render(&printed, &catalog)) {
        panic!("graph --json is not the golden graph: {diff}");
    }

    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("rendered");
    let out = k3d_gpu(&[&["render", "--out", out_dir.to_str().unwrap()][..], &args[..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let kustomization = std::fs::read_to_string(out_dir.join("kustomization.yaml")).unwrap();
    assert!(
        kustomization.starts_with("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
    );
    for line in kustomization.lines().filter_map(|l| l.strip_prefix("  - ")) {
        let text = std::fs::read_to_string(out_dir.join(line)).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        for doc in docs.iter().filter(|d| !d.is_null()) {
            assert_eq!(doc["metadata"]["labels"]["app.kubernetes.io/managed-by"], "k3d-gpu", "{line}");
        }
    }
}

/// The image every test component of this file deploys, pinned by digest.
fn component_image() -> String {
    format!("example.invalid/app:1@sha256:{}", "b".repeat(64))
}

/// A component of the user's own in `dir`: `NAME.kdl` (with `extra` lines inside it) naming
/// the manifest `NAME.yml`, which holds `manifest`.
fn own_component(dir: &Path, name: &str, extra: &str, manifest: &str) {
    let kdl = format!(
        "component {name} {{\n    summary \"a test component\"\n    upstream mine version=v1\n    manifest {name}.yml\n    image \"{}\"\n{extra}}}\n",
        component_image()
    );
    std::fs::write(dir.join(format!("{name}.kdl")), kdl).unwrap();
    std::fs::write(dir.join(format!("{name}.yml")), manifest).unwrap();
}

#[test]
fn a_component_of_your_own_joins_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let image = component_image();
    own_component(
        dir.path(),
        "my-exporter",
        "    when vendor=intel\n",
        &format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: my-exporter, namespace: kube-system}}\nspec:\n  selector: {{matchLabels: {{app: x}}}}\n  template:\n    metadata: {{labels: {{app: x}}}}\n    spec:\n      containers: [{{name: x, image: \"{image}\"}}]\n"
        ),
    );
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[[components]]\npath = \"my-exporter.kdl\"\n").unwrap();
    let out = k3d_gpu(&["graph", "--json", "-c", config.to_str().unwrap(), "--root", &host("lunar-lake-npu")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"id\": \"k8s/apps/DaemonSet/kube-system/my-exporter\""));
    // Gated on facts: not on a host without an Intel GPU.
    let out = k3d_gpu(&["graph", "--json", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")]);
    assert!(!stdout(&out).contains("\"id\": \"k8s/apps/DaemonSet/kube-system/my-exporter\""));
    assert!(stderr(&out).contains("your component my-exporter is not used on this host"), "{}", stderr(&out));
}

/// Issue 36, deviation 1: a namespaced object with no namespace is refused at validate,
/// naming its file and line: the API server serves a Deployment only under a namespace's URL,
/// so apply would meet a 404. A cluster-scoped kind needs none; a custom kind takes its scope
/// from its CRD.
#[test]
fn a_namespaced_object_without_a_namespace_is_refused_at_validate_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let image = component_image();
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app}}\nspec:\n  selector: {{matchLabels: {{app: x}}}}\n  template:\n    metadata: {{labels: {{app: x}}}}\n    spec:\n      containers: [{{name: x, image: \"{image}\"}}]\n"
    );
    let cluster_scoped = "# who may read the app\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: app-reader}\nrules: []\n";
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[[components]]\npath = \"app.kdl\"\n").unwrap();
    let validate = || k3d_gpu(&["validate", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")]);
    own_component(dir.path(), "app", "", &format!("{cluster_scoped}---\n\n{deployment}"));
    let out = validate();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("app.yml:8: Deployment app (component app) lives in a namespace"), "{said}");
    assert!(said.contains("set metadata.namespace"), "{said}");
    assert!(!said.contains("ClusterRole app-reader"), "a cluster-scoped kind needs no namespace: {said}");

    let placed = deployment.replace("{name: app}", "{name: app, namespace: default}");
    own_component(dir.path(), "app", "", &format!("{cluster_scoped}---\n{placed}"));
    let out = validate();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A custom kind's scope is its CRD's: a namespaced Widget without a namespace is refused,
    // a cluster-scoped Gadget is not.
    let crd = |kind: &str, plural: &str, scope: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.example.io}}\nspec:\n  group: example.io\n  scope: {scope}\n  names: {{kind: {kind}, plural: {plural}}}\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}]\n"
        )
    };
    let custom = format!(
        "{}---\n{}---\napiVersion: example.io/v1\nkind: Gadget\nmetadata: {{name: g}}\n---\napiVersion: example.io/v1\nkind: Widget\nmetadata: {{name: w}}\n---\n{placed}",
        crd("Widget", "widgets", "Namespaced"),
        crd("Gadget", "gadgets", "Cluster")
    );
    own_component(dir.path(), "app", "", &custom);
    let out = validate();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("Widget w (component app) lives in a namespace"), "{said}");
    assert!(!said.contains("Gadget g"), "{said}");
}

#[test]
fn schema_prints_the_committed_schema() {
    let out = k3d_gpu(&["schema"]);
    assert!(
        out.stdout == std::fs::read(repo().join("k3dgpu.schema.json")).unwrap(),
        "schema output differs from k3dgpu.schema.json"
    );
}

#[test]
fn plan_offline_hash_out_json_and_detailed_exit_codes() {
    let args = ["-c", &example("wsl2-intel"), "--root", &host("wsl2-intel")];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plan.json");
    let out = k3d_gpu(&[&["plan", "--offline", "--out", file.to_str().unwrap()][..], &args[..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Plan: "), "{}", stdout(&out));
    let bytes = std::fs::read(&file).unwrap();
    let hash = k3d_gpu(&[&["plan", "--offline", "--hash"][..], &args[..]].concat());
    assert_eq!(stdout(&hash).trim(), k3d_gpu::canonical::sha256(&bytes), "the hash is of the --out bytes");
    let json = k3d_gpu(&[&["plan", "--offline", "--json"][..], &args[..]].concat());
    assert_eq!(json.stdout, bytes, "--json prints the same bytes");
    let detailed = k3d_gpu(&[&["plan", "--offline", "--detailed-exitcode"][..], &args[..]].concat());
    assert_eq!(detailed.status.code(), Some(2), "changes");

    // Against what apply would leave: nothing to do, exit 0 with --detailed-exitcode.
    let facts = support::facts_of("wsl2-intel");
    let config = k3d_gpu::config::load_str("x", &std::fs::read_to_string(example("wsl2-intel")).unwrap()).unwrap();
    let graph = k3d_gpu::compile::compile(&config, &facts, &k3d_gpu::catalog::Catalog::embedded().unwrap()).unwrap();
    let observed = dir.path().join("observed.json");
    std::fs::write(&observed, support::converged(&graph).to_bytes()).unwrap();
    let none =
        k3d_gpu(&[&["plan", "--detailed-exitcode", "--observed", observed.to_str().unwrap()][..], &args[..]].concat());
    assert_eq!(none.status.code(), Some(0), "{}", stderr(&none));
    assert!(stdout(&none).starts_with("No changes"));

    let live = k3d_gpu(&[&["plan"][..], &args[..]].concat());
    assert_eq!(live.status.code(), Some(2), "Docker unreachable: a clear error naming what to check");
    assert!(stderr(&live).contains("--offline"), "{}", stderr(&live));
}

#[test]
fn devices_and_fifos_given_as_inputs_are_refused_at_once() {
    // Refused by what the file is, before a read: a read of the FIFO (no writer) would wait
    // for ever, which the deadline turns into a failure.
    let deadline = std::time::Duration::from_secs(60);
    for args in [vec!["validate", "-c", "/dev/zero", "--root", "x"], vec!["detect", "--facts", "/dev/zero"]] {
        let out = K3dGpu::new().args(&args).output_within(deadline);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mine.kdl");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[[components]]\npath = \"mine.kdl\"\n").unwrap();
    let out = K3dGpu::new()
        .args(["validate", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")])
        .output_within(deadline);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not a regular file"), "{}", stderr(&out));
}

#[test]
fn validate_applies_vendors_to_a_saved_facts_file_as_to_a_root() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "").unwrap();
    let facts = repo().join("tests/golden/facts/desktop-rpl-nvidia.json");
    let active = |source: &[&str]| {
        let mut args = vec!["validate", "--json", "-c", config.to_str().unwrap(), "--vendors", "nvidia"];
        args.extend_from_slice(source);
        let out = k3d_gpu(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["hosts"][0]["active"].clone()
    };
    assert_eq!(active(&["--facts", facts.to_str().unwrap()]), serde_json::json!(["nvidia"]));
    assert_eq!(active(&["--root", &host("desktop-rpl-nvidia")]), serde_json::json!(["nvidia"]));
}

/// With several nodes, `validate` says which one advertises the accelerators and why.
#[test]
fn validate_explains_which_node_advertises_the_accelerators() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[cluster]\nagents = 2\n").unwrap();
    let out = k3d_gpu(&["validate", "-c", config.to_str().unwrap(), "--root", &host("desktop-rpl-nvidia")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("only server:0 (label k3d-gpu.io/accelerators=true) advertises them"), "{text}");
    std::fs::write(&config, "[cluster]\nagents = 2\naccelerator_node = \"all\"\n").unwrap();
    let out = k3d_gpu(&["validate", "-c", config.to_str().unwrap(), "--root", &host("desktop-rpl-nvidia")]);
    assert!(stdout(&out).contains("the scheduler can give one device to two pods"), "{}", stdout(&out));
}

/// Issue 13: on an empty config the first action is building the node image, from the
/// Dockerfile the tool ships, and the cluster is created from that build.
#[test]
fn plan_offline_on_an_empty_config_builds_the_node_image_first() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "").unwrap();
    let out = k3d_gpu(&["plan", "--offline", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Each action's header and reason (a create's attributes, indented below, left out).
    let mut lines = text.lines().filter(|l| !l.starts_with("        "));
    assert_eq!(lines.next(), Some("  + docker/node-image  (create)"), "{text}");
    assert!(lines.next().unwrap_or_default().ends_with("build from the Dockerfile k3d-gpu ships"), "{text}");
    assert_eq!(lines.next(), Some("  + k3d/cluster/gpu  (create)"), "{text}");
}

/// Issue 13: a prebuilt image's Kubernetes version is its k3s release label, read from the
/// observation (here a saved one); without the label it is unknown and DRA mode says so.
#[test]
fn a_prebuilt_images_k3s_label_is_the_kubernetes_version() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[cluster]\nimage = \"my/node:1\"\n[sharing]\nmode = \"dra\"\n").unwrap();
    let observed = |label: &str| {
        let path = dir.path().join(format!("observed-{}.json", label.len()));
        let image = serde_json::json!({"reference": "my/node:1", "present": true, "id": "sha256:1",
            "build_inputs": null, "k3s_version": if label.is_empty() { None } else { Some(label) }});
        let doc = serde_json::json!({"schema": "k3d-gpu.observed/v1", "cluster": null, "kubernetes": null, "node_image": image});
        std::fs::write(&path, doc.to_string()).unwrap();
        path.display().to_string()
    };
    let plan = |file: String| {
        k3d_gpu(&["plan", "--observed", &file, "-c", config.to_str().unwrap(), "--root", &host("arc-b580-xe-rpl-igpu")])
    };
    let unlabelled = plan(observed(""));
    assert_eq!(unlabelled.status.code(), Some(0), "{}", stderr(&unlabelled));
    assert!(stdout(&unlabelled).contains("[kubernetes-version-unknown]"), "{}", stdout(&unlabelled));
    let old = plan(observed("v1.35.1-k3s1"));
    assert_eq!(old.status.code(), Some(1), "{}", stdout(&old));
    assert!(stderr(&old).contains("and image my/node:1 runs 1.35"), "{}", stderr(&old));
    let new = plan(observed("v1.37.1-k3s1"));
    assert_eq!(new.status.code(), Some(0), "{}", stderr(&new));
    assert!(!stdout(&new).contains("kubernetes-version-unknown"), "{}", stdout(&new));
}

/// Every `--json` output is one object with a `schema` key: the data commands', and a failed
/// command's (`k3d-gpu.error/v1`, each diagnostic with code, message, file, line, column).
#[test]
fn every_json_output_is_one_object_with_a_schema_key() {
    let dir = tempfile::tempdir().unwrap();
    let offline = dir.path().join("offline.json");
    let (c, r) = (example("lunar-lake-npu"), host("lunar-lake-npu"));
    let inputs = ["-c", c.as_str(), "--root", r.as_str()];
    assert!(
        k3d_gpu(&[&["plan", "--offline", "--out", offline.to_str().unwrap()][..], &inputs].concat()).status.success()
    );
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[cluster\nname = 1\n").unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["detect"],
        vec!["facts"],
        vec!["doctor"],
        vec!["host-setup"],
        vec!["validate"],
        vec!["graph"],
        vec!["agent"],
        vec!["plan", "--offline"],
        vec!["images"],
        vec!["images", "check"],
        vec!["report", "--offline"],
        vec!["show", offline.to_str().unwrap()],
        vec!["version"],
        // Failures: no Docker engine here, an offline plan, a config that does not parse.
        vec!["observe"],
        vec!["destroy"],
        vec!["apply", offline.to_str().unwrap()],
        vec!["audit"],
        vec!["logs"],
        vec!["images", "lock"],
        vec!["agent", "status"],
        vec!["test"],
    ];
    // Every command that defines --json is run above (a new one must be added), except the
    // schema, which is a JSON Schema document (`$schema`), not one of ours.
    let mut with_json = Vec::new();
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<String>) {
        if cmd.get_arguments().any(|a| a.get_id() == "json") {
            out.push(path.join(" "));
        }
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    walk(&<k3d_gpu::cli::Cli as clap::CommandFactory>::command(), Vec::new(), &mut with_json);
    for path in with_json.iter().filter(|p| *p != "schema") {
        let words: Vec<&str> = path.split(' ').collect();
        let run = |r: &Vec<&str>| {
            r.len() >= words.len()
                && r[..words.len()] == words[..]
                && r[words.len()..].iter().all(|w| w.starts_with('-') || w.ends_with(".json"))
        };
        assert!(runs.iter().any(run), "`{path} --json` is not run by this test");
    }
    for run in runs {
        let host_only = matches!(run[0], "detect" | "facts" | "host-setup");
        // Commands that read no host.
        let no_host =
            matches!(run[0], "show" | "version" | "audit" | "logs" | "test") || run[..] == ["agent", "status"];
        let args = [
            &run[..],
            &["--json"],
            if no_host {
                if matches!(run[0], "show" | "version") { &[][..] } else { &inputs[..2] }
            } else if host_only {
                &inputs[2..]
            } else {
                &inputs[..]
            },
        ]
        .concat();
        let out = k3d_gpu(&args);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?} (exit {:?}): not one JSON document ({e}): {}{}",
                out.status.code(),
                stdout(&out),
                stderr(&out)
            )
        });
        assert!(
            doc.is_object() && doc["schema"].as_str().is_some_and(|s| s.starts_with("k3d-gpu.")),
            "{args:?}: {doc}"
        );
        if out.status.code() != Some(0) && doc["schema"] == "k3d-gpu.error/v1" {
            assert!(doc["diagnostics"][0]["code"].is_string() && doc["diagnostics"][0]["message"].is_string(), "{doc}");
        }
    }
    // A config that does not parse: the place of the error, as data.
    let out = k3d_gpu(&["validate", "--json", "-c", broken.to_str().unwrap(), "--root", &r]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.error/v1");
    let d = &doc["diagnostics"][0];
    assert_eq!(
        (d["file"].as_str(), d["line"].as_u64(), d["column"].as_u64()),
        (Some(broken.to_str().unwrap()), Some(1), Some(9)),
        "{d}"
    );
    // A config that parses but does not fit the host: a host row with diagnostics, not strings.
    let wrong = dir.path().join("wrong.toml");
    std::fs::write(&wrong, "[expect]\nvendors = [\"nvidia\"]\n").unwrap();
    let out = k3d_gpu(&["validate", "--json", "-c", wrong.to_str().unwrap(), "--root", &r]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &doc["hosts"][0]["errors"][0];
    assert_eq!(
        (e["code"].as_str(), e["line"].as_u64(), e["column"].as_u64()),
        (Some("expect-vendor"), Some(2), Some(11)),
        "{e}"
    );
}

/// A plan file that is not a plan is unreadable input (exit 2), not a plan that "no longer
/// matches"; a plan made offline is refused as such, before anything is observed.
#[test]
fn apply_says_what_is_wrong_with_the_plan_file() {
    let dir = tempfile::tempdir().unwrap();
    let (c, r) = (example("lunar-lake-npu"), host("lunar-lake-npu"));
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "{}").unwrap();
    let out = k3d_gpu(&["apply", empty.to_str().unwrap(), "-c", &c, "--root", &r]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot read plan") && !stderr(&out).contains("no longer matches"),
        "{}",
        stderr(&out)
    );
    let offline = dir.path().join("offline.json");
    assert!(
        k3d_gpu(&["plan", "--offline", "--out", offline.to_str().unwrap(), "-c", &c, "--root", &r]).status.success()
    );
    let out = k3d_gpu(&["apply", offline.to_str().unwrap(), "-c", &c, "--root", &r]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("was made offline"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("observed state"), "{}", stderr(&out));
}

/// Issue 37, defect 5, end to end: `plan` against a cluster where other pods hold both RTX
/// cards places the agent elsewhere and says who holds them; with those pods gone, the same
/// config plans vLLM on CUDA. A device asked for by name is refused, naming the holder.
#[test]
fn plan_places_the_agent_on_what_the_cluster_has_free() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    let observed = |holders: serde_json::Value| {
        let doc = serde_json::json!({"schema": "k3d-gpu.observed/v1", "cluster": null, "kubernetes": {
            "nodes": [{"name": "k3d-gpu-server-0", "labels": {}, "annotations": {}, "ready": true,
                "allocatable": {"cpu": "32", "nvidia.com/gpu": "2"}}],
            "objects": [], "resource_slices": [], "holders": holders}});
        let path = dir.path().join("observed.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        path.display().to_string()
    };
    let held = serde_json::json!([
        {"namespace": "default", "name": "comfyui-6f9", "node": "k3d-gpu-server-0", "resources": {"nvidia.com/gpu": "1"}},
        {"namespace": "ml", "name": "trainer-0", "node": "k3d-gpu-server-0", "resources": {"nvidia.com/gpu": "1"}}]);
    let plan = |toml: &str, holders: serde_json::Value| {
        std::fs::write(&config, toml).unwrap();
        let args = ["plan", "-c", config.to_str().unwrap(), "--root", &host("rtx2000ada-x2"), "--observed"];
        k3d_gpu(&[&args[..], &[observed(holders).as_str()]].concat())
    };
    let moved = plan("[agent]\n", held.clone());
    assert_eq!(moved.status.code(), Some(0), "{}", stderr(&moved));
    let text = stdout(&moved);
    assert!(text.contains("agent-device-held"), "{text}");
    assert!(text.contains("held by default/comfyui-6f9 (1), ml/trainer-0 (1)"), "{text}");
    assert!(!text.contains("k3d-gpu-agent/vllm"), "no vLLM Deployment: {text}");
    let free = plan("[agent]\n", serde_json::json!([]));
    assert!(stdout(&free).contains("k3d-gpu-agent/vllm"), "{}", stdout(&free));
    let refused = plan("[agent]\ndevice = \"cuda\"\n", held);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("default/comfyui-6f9"), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("device = \"auto\""), "{}", stderr(&refused));
}

/// Issue 39: a k3d port spec quoted in an error is shown as written (`8080:80@server:3` was
/// shown as `8080:**@server:3`, read as `user:password@host`), while a URL's password on the
/// line beside it is still blanked.
#[test]
fn an_error_quotes_a_port_as_written_and_still_blanks_a_urls_password() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(
        &config,
        "[cluster]\nports = [\"127.0.0.1:8080:80@server:3\"]\n\n[addons.video]\nsource = \"rtsp://cam:hunter2@10.0.0.5/live\"\n",
    )
    .unwrap();
    let out = k3d_gpu(&["validate", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("ports = [\"127.0.0.1:8080:80@server:3\"]"), "{text}");
    assert!(!text.contains("8080:**"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

/// Issue 39: a command whose stderr (or stdout) cannot be written exits with its own status.
/// std's `eprintln!` panics on a failed write, so a stderr pipe whose reader had gone made
/// every command that wrote a note or an error exit 101. A closed descriptor (`2>&-`) is
/// checked too: std gives the process /dev/null in its place.
#[test]
fn a_command_exits_with_its_own_status_when_stderr_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let bad_port = dir.path().join("bad.toml");
    std::fs::write(&bad_port, "[cluster]\nports = [\"8080:80@server:3\"]\n").unwrap();
    let root = host("plain-laptop-amd");
    let kubeconfig = dir.path().join("no-kubeconfig");
    let cases: [(&[&str], i32); 6] = [
        (&["validate", "--root", &root], 0),
        (&["plan", "--offline", "--root", &root], 0),
        (&["validate", "-c", bad_port.to_str().unwrap(), "--root", &root], 1),
        (&["validate", "-c", "/nonexistent/k3dgpu.toml", "--root", &root], 2),
        (&["no-such-command"], 2),
        (&["test", "--root", &root], 2),
    ];
    for (args, code) in cases {
        let run = || K3dGpu::new().args(args).cwd(dir.path()).env("KUBECONFIG", &kubeconfig);
        let broken = || {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            writer
        };
        let out = run().stderr(broken()).output();
        assert_eq!(out.status.code(), Some(code), "{args:?} with a stderr nobody reads");
        let out = run().stdout(broken()).stderr(broken()).output();
        assert_eq!(out.status.code(), Some(code), "{args:?} with stdout and stderr nobody reads");
        let closed = K3dGpu::program("sh")
            .args(["-c", "exec \"$K3D_GPU_BIN\" \"$@\" 2>&- >&-", "sh"])
            .args(args)
            .env_binary("K3D_GPU_BIN")
            .cwd(dir.path())
            .env("KUBECONFIG", &kubeconfig)
            .output();
        assert_eq!(closed.status.code(), Some(code), "{args:?} with stdout and stderr closed");
    }
}
/// Issue 39: the launcher's test-image variables point at `k3d-gpu test`, which runs the smoke
/// pods and takes both images as options.
#[test]
fn the_test_image_variables_name_the_test_command() {
    use clap::CommandFactory;
    let out = K3dGpu::new()
        .args(["detect", "--root", &host("lunar-lake-npu")])
        .env("K3D_GPU_TEST_IMAGE", "nvidia/cuda:x")
        .env("K3D_GPU_DEVICE_TEST_IMAGE", "busybox:x")
        .output();
    let text = stderr(&out);
    for name in ["K3D_GPU_TEST_IMAGE", "K3D_GPU_DEVICE_TEST_IMAGE"] {
        let note = text.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("no note on {name}: {text}"));
        assert!(note.contains("`k3d-gpu test`") && note.contains("--nvidia-image") && note.contains("--device-image"));
        assert!(!note.contains("without a test pod"), "{note}");
    }
    let cli = k3d_gpu::cli::Cli::command();
    let test = cli.find_subcommand("test").expect("k3d-gpu test exists");
    for flag in ["nvidia-image", "device-image"] {
        assert!(test.get_arguments().any(|a| a.get_long() == Some(flag)), "test --{flag}");
    }
}

// --- version (issue 39) ------------------------------------------------------------------

fn version_json(args: &[&str]) -> serde_json::Value {
    let out = k3d_gpu(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&out)))
}

/// `version --json` reports what the code pins, read here from the same constants and the
/// same catalog, and the commit the checkout is at (or `unknown` outside one).
#[test]
fn version_json_reports_what_the_code_pins() {
    let doc = version_json(&["version", "--json"]);
    assert_eq!(doc["schema"], "k3d-gpu.version/v1");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["k3s"], k3d_gpu::node_image::K3S_TAG);
    assert_eq!(doc["k3d"]["tested"], k3d_gpu::apply::k3d::K3D_TESTED);
    let (major, minor, patch) = k3d_gpu::doctor::live::K3D_FLOOR;
    assert_eq!(doc["k3d"]["minimum"], format!("v{major}.{minor}.{patch}"));
    assert_eq!(doc["nvidia_container_toolkit"], k3d_gpu::node_image::NVIDIA_CONTAINER_TOOLKIT_VERSION);
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let pinned: Vec<serde_json::Value> = catalog
        .components
        .values()
        .map(|c| serde_json::json!({ "name": c.name, "upstream": c.upstream, "version": c.version }))
        .collect();
    assert_eq!(doc["components"], serde_json::Value::Array(pinned));
    // The device plugins are among them, each with the version its component file names.
    for plugin in ["nvidia-device-plugin", "intel-gpu-plugin", "intel-npu-plugin", "gaudi-device-plugin"] {
        let entry = doc["components"].as_array().unwrap().iter().find(|c| c["name"] == plugin).unwrap();
        let file = std::fs::read_to_string(repo().join(format!("stdlib/{plugin}.kdl"))).unwrap();
        let version = entry["version"].as_str().unwrap();
        assert!(file.contains(&format!("version={version}")), "{plugin}: {version}");
    }
    let given = std::env::var(build_commit::ENV).ok();
    assert_eq!(doc["commit"], build_commit::commit(&repo(), given.as_deref()), "the build's commit");
    // docs/version.md names every field.
    let doc_text = std::fs::read_to_string(repo().join("docs/version.md")).unwrap();
    for key in doc.as_object().unwrap().keys().filter(|k| *k != "schema") {
        assert!(doc_text.contains(&format!("| `{key}")), "docs/version.md does not describe {key}");
    }
    assert!(doc_text.contains("`k3d.tested`") && doc_text.contains("`k3d.minimum`"));
    // The same document through the flag.
    assert_eq!(version_json(&["--version", "--json"]), doc);
    assert_eq!(version_json(&["--json", "-V"]), doc);
}

#[test]
fn version_text_names_each_pin_and_the_plain_flag_stays_one_line() {
    let out = k3d_gpu(&["version"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let doc = version_json(&["version", "--json"]);
    assert!(text.starts_with(&format!("k3d-gpu {}\n", env!("CARGO_PKG_VERSION"))), "{text}");
    let line = |key: &str| text.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_default();
    let commit = doc["commit"].as_str().unwrap();
    assert!(line("commit").contains(commit), "{text}");
    assert!(line("k3s").contains(k3d_gpu::node_image::K3S_TAG), "{text}");
    assert!(line("k3d").contains(k3d_gpu::apply::k3d::K3D_TESTED), "{text}");
    assert!(line("nvidia-container-toolkit").contains(k3d_gpu::node_image::NVIDIA_CONTAINER_TOOLKIT_VERSION));
    for c in doc["components"].as_array().unwrap() {
        let words: Vec<&str> = line(c["name"].as_str().unwrap()).split_whitespace().collect();
        assert_eq!(words, [&c["name"], &c["upstream"], &c["version"]].map(|v| v.as_str().unwrap()), "{text}");
    }
    // `--version` alone is clap's one line, which the Homebrew formula's test reads.
    let plain = k3d_gpu(&["--version"]);
    assert_eq!(stdout(&plain), format!("k3d-gpu {}\n", env!("CARGO_PKG_VERSION")));
}

/// The commit a build records: the checkout's, or `unknown` where there is none, never the
/// commit of some other repository a tarball was unpacked in.
#[test]
fn the_build_commit_falls_back_to_unknown_outside_a_checkout() {
    let tarball = tempfile::tempdir().unwrap();
    std::fs::write(tarball.path().join("Cargo.toml"), "[package]\n").unwrap();
    assert_eq!(build_commit::commit(tarball.path(), None), build_commit::UNKNOWN);
    assert!(build_commit::watched(tarball.path()).is_empty(), "nothing to rebuild on");
    // A packager's variable wins, when it is a commit id.
    assert_eq!(build_commit::commit(tarball.path(), Some("0123abc")), "0123abc");
    assert_eq!(build_commit::commit(tarball.path(), Some("main; rm -rf /")), build_commit::UNKNOWN);
    // A crate from crates.io: cargo package's record.
    let sha = "4f".repeat(20);
    let vcs = format!("{{\"git\": {{\"sha1\": \"{sha}\"}}, \"path_in_vcs\": \"\"}}");
    std::fs::write(tarball.path().join(".cargo_vcs_info.json"), vcs).unwrap();
    assert_eq!(build_commit::commit(tarball.path(), None), sha);
    // Unpacked inside another repository, whose commit is not the crate's.
    let git = |dir: &Path, args: &[&str]| {
        Command::new("git").arg("-C").arg(dir).args(args).output().is_ok_and(|o| o.status.success())
    };
    let outer = tempfile::tempdir().unwrap();
    if !git(outer.path(), &["init", "-q"]) {
        return; // no git here: the rest needs it
    }
    std::fs::write(outer.path().join("notes.txt"), "x\n").unwrap();
    let committed = git(outer.path(), &["add", "notes.txt"])
        && git(outer.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"]);
    assert!(committed);
    let crate_dir = outer.path().join("k3d-gpu-0.1.0");
    std::fs::create_dir(&crate_dir).unwrap();
    std::fs::write(crate_dir.join("Cargo.toml"), "[package]\n").unwrap();
    assert_eq!(build_commit::commit(&crate_dir, None), build_commit::UNKNOWN);
    // Once git tracks it there, that checkout's commit is the build's.
    assert!(git(outer.path(), &["add", "k3d-gpu-0.1.0/Cargo.toml"]));
    assert!(git(outer.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "y"]));
    let head = Command::new("git").arg("-C").arg(outer.path()).args(["rev-parse", "HEAD"]).output().unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_string();
    assert_eq!(build_commit::commit(&crate_dir, None), head);
    assert!(!build_commit::watched(&crate_dir).is_empty(), "a commit there rebuilds");
}

/// The one k3d release the tests' upstream files are read from is the one `version` reports.
#[test]
fn the_tested_k3d_is_the_release_the_upstream_files_are_read_from() {
    let entrypoint = std::fs::read_to_string(repo().join("tests/upstream/k3d-entrypoint.txt")).unwrap();
    let tested = k3d_gpu::apply::k3d::K3D_TESTED;
    assert!(entrypoint.contains(&format!("Read from k3d-io/k3d at tag {tested}")), "{tested}");
    let checks = std::fs::read_to_string(repo().join("docs/upstream-checks.md")).unwrap();
    assert!(checks.contains(&format!("k3d {tested}, commit")), "{tested}");
}

/// `config::env::READ_BY_K3D_GPU` is kept in the pure core, which cannot name the CLI; this
/// derives the list from clap's command tree (every option's `env`) and the k3d provider (the
/// one variable read outside an option), so an option that gains or loses an `env` fails here
/// until the table says so.
#[test]
fn the_variables_k3d_gpu_reads_are_the_command_trees() {
    fn walk(cmd: &clap::Command, out: &mut std::collections::BTreeSet<String>) {
        for arg in cmd.get_arguments() {
            out.extend(arg.get_env().and_then(|e| e.to_str()).map(str::to_string));
        }
        cmd.get_subcommands().for_each(|s| walk(s, out));
    }
    let mut derived = std::collections::BTreeSet::new();
    walk(&<k3d_gpu::cli::Cli as clap::CommandFactory>::command(), &mut derived);
    // The k3d binary is no option: `apply::k3d::binary` reads it.
    let k3d = k3d_gpu::apply::k3d::binary(&|k| (k == "K3D_GPU_K3D").then(|| "/opt/k3d".to_string()));
    assert_eq!(k3d, Path::new("/opt/k3d"));
    derived.insert("K3D_GPU_K3D".to_string());
    let listed: std::collections::BTreeSet<String> =
        k3d_gpu::config::env::READ_BY_K3D_GPU.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, derived);
}
