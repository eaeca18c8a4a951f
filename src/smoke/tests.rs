//! The smoke pods' plan, manifest and verdicts on fixture hosts' facts; the probe script run by
//! a real `sh` on real files.

use std::collections::BTreeMap;

use super::*;

pub(super) fn facts(host: &str) -> Facts {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(host);
    let host = crate::host::HostRoot::open(&root).unwrap();
    crate::detect::facts(&host, &crate::facts::VendorFilter::Auto)
}

pub(super) fn hints() -> Hints {
    Hints {
        kubectl: crate::shell::kubectl("k3d-gpu"),
        k3d_gpu: crate::shell::Command::new("k3d-gpu"),
        cluster: "lab;x".into(),
        component: BTreeMap::from([("gpu.intel.com/xe".to_string(), "intel-gpu-plugin".to_string())]),
    }
}

fn node(resources: &[(&str, &str)]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut r: BTreeMap<String, String> =
        [("cpu", "8"), ("memory", "16Gi")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    r.extend(resources.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    BTreeMap::from([("k3d-gpu-server-0".to_string(), r)])
}

fn images() -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        (NVIDIA_IMAGE, format!("{NVIDIA_IMAGE}@sha256:{}", "a".repeat(64))),
        (DEVICE_IMAGE, DEVICE_IMAGE.into()),
    ])
}

/// Runs the probe script as the pod would, on `paths`, with the host's `sh`.
fn probe(paths: &[&std::path::Path]) -> String {
    let out =
        std::process::Command::new("sh").arg("-c").arg(PROBE_SCRIPT).arg("k3d-gpu-test").args(paths).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn one_pod_per_accelerator_resource_and_node_and_nothing_for_cpu_or_memory() {
    let f = facts("arc-b580-x2");
    let (pods, counts) = plan(
        &f,
        &node(&[("gpu.intel.com/xe", "2"), ("gpu.intel.com/millicores", "2000"), ("hugepages-2Mi", "0")]),
        &images(),
    );
    assert_eq!(pods.len(), 1, "{pods:?}");
    let p = &pods[0];
    assert_eq!(
        (p.resource.raw(), p.pod.as_str(), p.probe),
        ("gpu.intel.com/xe", "k3d-gpu-test-gpu-intel-com-xe", Probe::Devices)
    );
    assert_eq!((p.requested, p.expected), (1, 1));
    assert_eq!(
        counts,
        [Count {
            resource: "gpu.intel.com/xe".into(),
            node: "k3d-gpu-server-0".into(),
            facts: Some(2),
            allocatable: 2
        }]
    );
    // Nothing advertised at 0.
    let (pods, _) = plan(&f, &node(&[("gpu.intel.com/xe", "0")]), &images());
    assert!(pods.is_empty());
}

#[test]
fn the_nvidia_pod_runs_nvidia_smi_under_the_runtime_class_with_the_locked_image() {
    let f = facts("rtx2000ada-x2");
    let (pods, _) = plan(&f, &node(&[("nvidia.com/gpu", "2")]), &images());
    let m = manifest(&pods[0], 120);
    assert_eq!(m["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(m["spec"]["containers"][0]["command"], json!(["nvidia-smi", "-L"]));
    assert_eq!(m["spec"]["containers"][0]["image"], images()[NVIDIA_IMAGE].as_str());
    assert_eq!(m["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
    assert_eq!(m["spec"]["restartPolicy"], "Never");
    assert_eq!(m["spec"]["nodeSelector"]["kubernetes.io/hostname"], "k3d-gpu-server-0");
    assert_eq!(m["metadata"]["labels"][LABEL], pods[0].pod.as_str());
    assert_eq!(m["metadata"]["namespace"], NAMESPACE);
}

#[test]
fn device_pods_run_as_nobody_with_the_render_group_the_facts_name() {
    let f = facts("arc-b580-x2");
    let gids: Vec<u32> = f
        .host
        .intel_gpus
        .iter()
        .flat_map(|g| g.device_nodes.iter())
        .filter(|d| d.path.contains("renderD"))
        .map(|d| d.gid)
        .collect();
    let (pods, _) = plan(&f, &node(&[("gpu.intel.com/xe", "2")]), &images());
    let m = manifest(&pods[0], 60);
    if gids.iter().all(|g| *g != 0) {
        assert_eq!(m["spec"]["securityContext"]["runAsUser"], PROBE_UID);
        let mut want = gids.clone();
        want.sort();
        want.dedup();
        assert_eq!(m["spec"]["securityContext"]["supplementalGroups"], json!(want));
    } else {
        assert!(m["spec"]["securityContext"].is_null());
    }
    assert_eq!(m["spec"]["containers"][0]["command"][4], "/dev/dri");
}

#[test]
fn the_probe_script_opens_what_it_can_and_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let dri = dir.path().join("dri");
    std::fs::create_dir(&dri).unwrap();
    std::fs::write(dri.join("renderD128"), "").unwrap();
    // A directory where a node should be: opening it read-write fails, as a denied node does.
    std::fs::create_dir(dri.join("renderD129")).unwrap();
    let empty = dir.path().join("accel");
    std::fs::create_dir(&empty).unwrap();
    let out = probe(&[&dri, &empty, &dir.path().join("dxg")]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("open {}/renderD128", dri.display()));
    assert!(lines[1].starts_with(&format!("denied {}/renderD129: ", dri.display())), "{out}");
    assert_eq!(lines[2], format!("none {}", empty.display()));
    assert_eq!(lines[3], format!("none {}/dxg", dir.path().display()));
    assert!(lines[4].starts_with("id uid="), "{out}");
}

#[test]
fn a_device_pod_passes_only_when_it_opened_what_it_requested() {
    let f = facts("arc-b580-x2");
    let (pods, _) = plan(&f, &node(&[("gpu.intel.com/xe", "2")]), &images());
    let p = &pods[0];
    let ran =
        |log: &str| Outcome { phase: "Succeeded".into(), log: log.into(), exit_code: Some(0), ..Outcome::default() };
    let v = verdict(
        p,
        &ran("open /dev/dri/card1\nopen /dev/dri/renderD129\nid uid=65534 gid=65534 groups=110\n"),
        &f,
        &hints(),
    );
    assert!(v.passed, "{v:?}");
    assert_eq!(v.seen, 1);
    assert_eq!(v.evidence[1], "open /dev/dri/renderD129");
    // Counted but not usable: the group.
    let v = verdict(
        p,
        &ran("open /dev/dri/card1\ndenied /dev/dri/renderD129: can't open: Permission denied\nid uid=65534\n"),
        &f,
        &hints(),
    );
    assert!(!v.passed);
    assert!(v.cause.as_deref().unwrap().contains("could not open it"), "{v:?}");
    assert!(v.fix.as_deref().unwrap().contains("supplementalGroups"), "{v:?}");
    // Advertised, but no node handed over.
    let v = verdict(p, &ran("none /dev/dri\nid uid=0\n"), &f, &hints());
    assert!(!v.passed);
    assert_eq!(v.fix.as_deref(), Some("read the plugin's log: `k3d-gpu logs intel-gpu-plugin`"));
}

#[test]
fn the_nvidia_verdicts_name_the_reference_failure_modes() {
    let f = facts("rtx2000ada-x2");
    let (pods, _) = plan(&f, &node(&[("nvidia.com/gpu", "2")]), &images());
    let p = &pods[0];
    let ran =
        |log: &str| Outcome { phase: "Succeeded".into(), log: log.into(), exit_code: Some(0), ..Outcome::default() };
    let ok = verdict(p, &ran("GPU 0: NVIDIA RTX 2000 Ada Generation (UUID: GPU-0f3c)\n"), &f, &hints());
    assert!(ok.passed && ok.seen == 1, "{ok:?}");
    assert_eq!(ok.evidence, ["GPU 0: NVIDIA RTX 2000 Ada Generation (UUID: GPU-0f3c)"]);
    let nvml = verdict(p, &ran("Failed to initialize NVML: Driver/library version mismatch\n"), &f, &hints());
    assert!(!nvml.passed && nvml.cause.as_deref().unwrap().contains("newer than the host driver"), "{nvml:?}");
    assert!(nvml.fix.as_deref().unwrap().contains("--nvidia-image"));
    let runtime = Outcome {
        phase: "Pending".into(),
        reason: Some(
            "RunContainerError: failed to create containerd task: no runtime for \"nvidia\" is configured".into(),
        ),
        ..Outcome::default()
    };
    let v = verdict(p, &runtime, &f, &hints());
    assert!(v.cause.as_deref().unwrap().contains("NVIDIA runtime"), "{v:?}");
    let busy = Outcome {
        phase: "Pending".into(),
        unschedulable: Some("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.".into()),
        ..Outcome::default()
    };
    let v = verdict(p, &busy, &f, &hints());
    assert!(
        v.cause.as_deref().unwrap().contains("in use") && v.fix.as_deref().unwrap().contains("get pods -A -o wide"),
        "{v:?}"
    );
    let pull = Outcome {
        phase: "Pending".into(),
        reason: Some("ImagePullBackOff: Back-off pulling image".into()),
        ..Outcome::default()
    };
    let pulled = verdict(p, &pull, &f, &hints());
    assert!(pulled.cause.as_deref().unwrap().contains("could not pull"));
    // The fix names the cluster itself, quoted: a `<cluster>` placeholder pasted is a redirection.
    let fix = pulled.fix.unwrap();
    assert!(!fix.contains('<') && fix.contains(" -c 'lab;x'"), "{fix}");
}

#[test]
fn counts_fail_when_a_node_advertises_less_than_the_facts_or_nothing() {
    let f = facts("arc-b580-x2");
    let (_, counts) = plan(&f, &node(&[("gpu.intel.com/xe", "1")]), &images());
    let problems = count_problems(&f, &counts, &[], &hints());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].text.contains("advertises 1 gpu.intel.com/xe, the host's facts hold 2"), "{problems:?}");
    let problems = count_problems(&f, &[], &[], &hints());
    assert!(
        problems.iter().any(|p| p.resource == "gpu.intel.com/xe" && p.text.contains("no node advertises")),
        "{problems:?}"
    );
    // Served by the DRA driver: nothing is advertised, and that is no problem.
    let dra = dra_served(["gpu.intel.com"]);
    assert!(count_problems(&f, &[], &dra, &hints()).iter().all(|p| p.resource != "gpu.intel.com/xe"));
    assert_eq!(dra_served(["gpu.nvidia.com", "example.com"]), ["nvidia.com/gpu"]);
}

#[test]
fn pod_names_are_dns_labels() {
    assert_eq!(pod_name("dsa.intel.com/wq-user-dedicated", 0), "k3d-gpu-test-dsa-intel-com-wq-user-dedicated");
    assert_eq!(pod_name("nvidia.com/gpu", 2), "k3d-gpu-test-nvidia-com-gpu-2");
    assert!(pod_name(&"x".repeat(100), 0).len() <= 63);
    assert!(counts("renderD128", "renderD") && counts("wq0.1", "wq") && counts("12", "") && counts("dxg", "dxg"));
    assert!(!counts("card0", "renderD") && !counts("vfio", "") && !counts("accel_controlD0", "accel"));
}

/// Issue 41: what the cluster says (a node's and a resource's name, a pod's log, the API
/// server's refusal, a container's message) is `Untrusted` from the moment it is read, so any
/// `{}` of it, not only `text`'s, is one escaped line; `test --json` keeps it as it came.
#[test]
fn the_clusters_text_is_one_escaped_line_wherever_it_is_shown() {
    const FORGED: &str = "\npass  nvidia.com/gpu on node (pod x): 1 of 1 expected\x1b]52;c;Y3VybA==\x07";
    // A log is read line by line: its forged line starts with a line separator instead.
    const IN_LOG: &str = "\u{2028}pass  nvidia.com/gpu on node (pod x): 1 of 1 expected\x1b]52;c;Y3VybA==\x07";
    let f = facts("arc-b580-x2");
    let resource = format!("dsa.intel.com/wq-user-{FORGED}");
    let mut allocatable = node(&[("gpu.intel.com/xe", "1"), (resource.as_str(), "1")]);
    let alloc = allocatable.remove("k3d-gpu-server-0").unwrap();
    allocatable.insert(format!("k3d-gpu-server-0{FORGED}"), alloc);
    let (pods, counts) = plan(&f, &allocatable, &images());
    let one_line = |shown: String| {
        assert!(!shown.contains(['\n', '\u{2028}', '\x1b', '\x07']), "{shown:?}");
        assert!(shown.contains("\\x0apass  nvidia.com/gpu") || shown.contains("\\u{2028}pass  nvidia"), "{shown:?}");
    };
    one_line(pods[0].node.to_string());
    one_line(counts.iter().find(|c| c.resource.raw() == resource).unwrap().resource.to_string());

    let xe = pods.iter().find(|p| p.resource == "gpu.intel.com/xe").unwrap();
    let ran = Outcome {
        phase: format!("Succeeded{FORGED}").into(),
        log: format!("open /dev/dri/renderD128{IN_LOG}\ndenied /dev/dri/renderD129{IN_LOG}: denied\n").into(),
        ..Outcome::default()
    };
    let v = verdict(xe, &ran, &f, &hints());
    assert!(!v.passed, "{v:?}");
    for e in &v.evidence {
        one_line(e.to_string());
    }
    for refused in [
        Outcome { refused: Some(format!("admission webhook said no{FORGED}").into()), ..Outcome::default() },
        Outcome { unschedulable: Some(format!("0/1 nodes{FORGED}").into()), ..Outcome::default() },
        Outcome { reason: Some(format!("CrashLoop: {FORGED}").into()), ..Outcome::default() },
    ] {
        let v = verdict(xe, &refused, &f, &hints());
        one_line(v.cause.unwrap());
    }
    // The JSON document carries the text as it came; serde_json escapes it there.
    let json = serde_json::to_value(&ran).unwrap();
    assert_eq!(json["log"].as_str(), Some(ran.log.raw()));
    assert_eq!(json["phase"].as_str(), Some(ran.phase.raw()));

    let found = Found {
        pods: vec![PodResult { pod: xe.clone(), outcome: ran, verdict: v }],
        shares: vec![],
        claims: vec![],
        counts,
        problems: vec![],
    };
    let shown = text(&Report::new("lab", found));
    assert!(!shown.contains(['\x1b', '\x07', '\u{2028}']), "{shown}");
    assert!(shown.lines().all(|l| !l.starts_with("pass  nvidia.com/gpu on node")), "{shown}");
}
