//! What each fixture host must detect: the reference launcher's rules, asserted per host.
//! The goldens catch any change; these say which parts of it are the point.

mod support;

use k3d_gpu::facts::targets::TargetKind;
use k3d_gpu::facts::{Facts, Level, Vendor, VendorFilter, Xmx};
use support::{facts_of, facts_with};

fn active(facts: &Facts) -> Vec<Vendor> {
    facts.detected.iter().map(|d| d.vendor).collect()
}

fn resources(facts: &Facts, vendor: Vendor) -> (Vec<String>, u32) {
    let d = facts.detected.iter().find(|d| d.vendor == vendor).unwrap_or_else(|| panic!("{vendor} not active"));
    (d.resources.clone(), d.devices)
}

fn label<'a>(facts: &'a Facts, key: &str) -> Option<&'a str> {
    facts.labels.get(key).map(String::as_str)
}

fn has_finding(facts: &Facts, level: Level, code: &str) -> bool {
    facts.findings.iter().any(|f| f.level == level && f.code == code)
}

fn inactive_reason(facts: &Facts, vendor: Vendor) -> String {
    facts.inactive.iter().find(|i| i.vendor == vendor).map(|i| i.reason.clone()).unwrap_or_default()
}

#[test]
fn desktop_with_igpu_and_two_nvidia_cards() {
    let f = facts_of("desktop-rpl-nvidia");
    assert_eq!(active(&f), [Vendor::Nvidia, Vendor::Intel, Vendor::Hybrid]);
    assert_eq!(resources(&f, Vendor::Nvidia), (vec!["nvidia.com/gpu".into()], 2));
    assert_eq!(resources(&f, Vendor::Intel), (vec!["gpu.intel.com/i915".into()], 1));
    assert_eq!(f.host.nvidia.driver_version.as_deref(), Some("580.95.05"));
    assert_eq!(f.host.nvidia.gpus.len(), 2);
    assert_eq!(f.host.nvidia.gpus[1].model.as_deref(), Some("NVIDIA RTX 4000 Ada Generation"));
    assert_eq!(f.host.nvidia.gpus[1].minor, Some(1));
    let igpu = &f.host.intel_gpus[0];
    assert!(igpu.integrated);
    assert_eq!(igpu.platform.as_deref(), Some("Raptor Lake-S"));
    assert_eq!(igpu.xmx, Xmx::No);
    assert_eq!((f.host.cpu.p_cores.as_str(), f.host.cpu.e_cores.as_str()), ("0-15", "16-31"));
    assert_eq!(label(&f, "gpu.intel.com/xmx"), Some("false"));
    assert_eq!(label(&f, "gpu.intel.com/media-vcs"), Some("2"));
    assert_eq!(label(&f, "gpu.intel.com/media-vecs"), Some("1"));
    assert_eq!(label(&f, "k3d-gpu.io/hybrid-cpu"), Some("true"));
    assert_eq!(label(&f, "feature.node.kubernetes.io/cpu-cpuid.AVXVNNI"), Some("true"));
    assert_eq!(label(&f, "feature.node.kubernetes.io/cpu-cpuid.AVX512F"), None, "13900T has no AVX-512");
    assert_eq!(f.annotations.get("k3d-gpu.io/favored-cpus").map(String::as_str), Some("4-7"));
    let usable: Vec<_> = f.targets.iter().filter(|t| t.usable).map(|t| t.id.as_str()).collect();
    assert_eq!(usable, ["cpu", "intel-gpu/0000:00:02.0", "nvidia-gpu/0000:01:00.0", "nvidia-gpu/0000:02:00.0"]);
}

#[test]
fn discrete_arc_on_xe_beside_an_i915_igpu() {
    let f = facts_of("arc-b580-xe-rpl-igpu");
    assert_eq!(resources(&f, Vendor::Intel), (vec!["gpu.intel.com/i915".into(), "gpu.intel.com/xe".into()], 2));
    let arc = f.host.intel_gpus.iter().find(|g| g.driver.as_deref() == Some("xe")).unwrap();
    assert!(!arc.integrated);
    assert_eq!(arc.xmx, Xmx::Yes);
    assert_eq!(arc.platform.as_deref(), Some("Arc Battlemage (BMG)"));
    assert!(arc.engines.contains(&"vcs".to_string()), "xe engine classes: {:?}", arc.engines);
    // Any XMX GPU makes the node an XMX node; media labels come from the i915 iGPU only.
    assert_eq!(label(&f, "gpu.intel.com/xmx"), Some("true"));
    assert_eq!(label(&f, "gpu.intel.com/media-vcs"), Some("2"));
}

#[test]
fn lunar_lake_npu_and_xe_igpu() {
    let f = facts_of("lunar-lake-npu");
    assert_eq!(resources(&f, Vendor::Npu), (vec!["npu.intel.com/accel".into()], 1));
    assert_eq!(resources(&f, Vendor::Intel).0, ["gpu.intel.com/xe"]);
    assert_eq!(label(&f, "k3d-gpu.io/npu.gen"), Some("40xx"));
    assert_eq!(label(&f, "k3d-gpu.io/npu-render-gid"), Some("992"));
    assert_eq!(label(&f, "intel.feature.node.kubernetes.io/npu"), Some("true"));
    assert_eq!(label(&f, "gpu.intel.com/xmx"), Some("true"));
    assert_eq!(label(&f, "gpu.intel.com/media-vcs"), None, "xe has no per-engine sysfs");
    assert_eq!(f.host.npus[0].firmware.as_ref().unwrap().build_date.as_deref(), Some("2026-07-15"));
    assert!(!f.findings.iter().any(|x| x.code == "npu-firmware"));
    // The render node is 0666 (no finding), the accel node 0660 (non-root pods need its group).
    let access: Vec<_> =
        f.findings.iter().filter(|x| x.code == "device-node-group").map(|x| x.evidence.as_str()).collect();
    assert_eq!(access, ["/dev/accel/accel0"]);
}

#[test]
fn meteor_lake_npu_firmware_too_old_in_xz() {
    let f = facts_of("meteor-lake-old-npu-fw");
    let npu = &f.host.npus[0];
    assert_eq!(npu.generation.as_deref(), Some("37xx"));
    let fw = npu.firmware.as_ref().unwrap();
    assert_eq!(fw.path, "/lib/firmware/intel/vpu/vpu_37xx_v1.bin.xz");
    assert_eq!(fw.build_date.as_deref(), Some("2025-01-15"));
    assert!(has_finding(&f, Level::Warn, "npu-firmware"));
    let target = f.targets.iter().find(|t| t.kind == TargetKind::Npu).unwrap();
    assert!(!target.usable);
    assert!(target.fix.as_deref().unwrap().contains("v1.35.0"));
    assert_eq!(f.host.cpu.lp_e_cores, "20-21");
    assert_eq!(resources(&f, Vendor::Hybrid).1, 0);
}

#[test]
fn two_socket_xeon_with_snc_and_built_in_accelerators() {
    let f = facts_of("xeon-2s-snc2");
    assert_eq!(active(&f), [Vendor::Dsa, Vendor::Iaa, Vendor::Qat, Vendor::Amx, Vendor::Numa]);
    // Only enabled user queues with a /dev node count: wq0.1 is a kernel queue, iax3 is disabled.
    assert_eq!(
        resources(&f, Vendor::Dsa),
        (vec!["dsa.intel.com/wq-user-dedicated".into(), "dsa.intel.com/wq-user-shared".into()], 2)
    );
    assert_eq!(resources(&f, Vendor::Iaa), (vec!["iaa.intel.com/wq-user-dedicated".into()], 1));
    assert_eq!(resources(&f, Vendor::Qat), (vec!["qat.intel.com/cy".into(), "qat.intel.com/dc".into()], 32));
    assert_eq!(f.host.numa.memory_only_nodes, [4]);
    assert_eq!(f.host.numa.snc, Some(2));
    assert_eq!(label(&f, "k3d-gpu.io/snc"), Some("2"));
    assert_eq!(label(&f, "k3d-gpu.io/numa-nodes"), Some("5"));
    for amx in ["AMXTILE", "AMXBF16", "AMXINT8", "AVX512F", "AVX512VNNI", "AVX512BF16"] {
        assert_eq!(label(&f, &format!("feature.node.kubernetes.io/cpu-cpuid.{amx}")), Some("true"), "{amx}");
    }
    for key in ["dsa", "iaa", "qat"] {
        assert_eq!(label(&f, &format!("intel.feature.node.kubernetes.io/{key}")), Some("true"));
    }
    assert!(has_finding(&f, Level::Info, "numa-memory-only"));
}

#[test]
fn gaudi_with_and_without_its_driver() {
    let f = facts_of("gaudi3-server");
    assert_eq!(resources(&f, Vendor::Gaudi), (vec!["habana.ai/gaudi".into()], 8));
    assert!(f.targets.iter().filter(|t| t.kind == TargetKind::Gaudi).all(|t| t.usable));

    let f = facts_of("gaudi3-no-driver");
    assert!(!active(&f).contains(&Vendor::Gaudi));
    assert!(inactive_reason(&f, Vendor::Gaudi).contains("habanalabs driver is not loaded"));
    assert!(has_finding(&f, Level::Fail, "gaudi-without-driver"));
    let gaudi: Vec<_> = f.targets.iter().filter(|t| t.kind == TargetKind::Gaudi).collect();
    assert_eq!(gaudi.len(), 8);
    assert!(gaudi.iter().all(|t| !t.usable && t.fix.as_deref().unwrap().contains("habanalabs")));
    assert_eq!(f.host.gaudi.devices[0].model.as_deref(), Some("Gaudi 3"));
}

#[test]
fn wsl2_with_intel_and_with_nvidia() {
    let f = facts_of("wsl2-intel");
    assert_eq!(active(&f), [Vendor::Wsl]);
    assert_eq!(resources(&f, Vendor::Wsl), (vec!["gpu.intel.com/dxg".into()], 1));
    assert_eq!(label(&f, "k3d-gpu.io/wsl-gpu"), Some("true"));
    assert!(f.host.intel_gpus.is_empty(), "WSL2 has no PCI GPU");

    let f = facts_of("wsl2-nvidia");
    assert_eq!(active(&f), [Vendor::Nvidia]);
    assert_eq!(resources(&f, Vendor::Nvidia), (vec!["nvidia.com/gpu".into()], 1));
    assert!(inactive_reason(&f, Vendor::Wsl).contains("iigd_dch"));
}

#[test]
fn nvidia_module_loaded_without_device_nodes() {
    let f = facts_of("nvidia-module-no-nodes");
    assert_eq!(resources(&f, Vendor::Nvidia), (vec!["nvidia.com/gpu".into()], 1));
    assert!(has_finding(&f, Level::Warn, "nvidia-module-without-nodes"));
    let t = f.targets.iter().find(|t| t.kind == TargetKind::NvidiaGpu).unwrap();
    assert!(!t.usable);
}

#[test]
fn plain_amd_laptop_has_nothing_to_expose() {
    let f = facts_of("plain-laptop-amd");
    assert!(f.detected.is_empty(), "{:?}", f.detected);
    assert!(f.host.intel_gpus.is_empty(), "an AMD DRM card is not an Intel GPU");
    assert_eq!(f.targets.len(), 1);
    // Nothing about accelerators; its inotify limits are the distro's defaults, on purpose
    // (inotify_limits_below_what_a_k3s_node_needs_warn_with_the_sysctl_and_its_undo).
    assert!(!f.findings.iter().any(|x| x.level >= Level::Warn && x.code != "inotify-limits"), "{:?}", f.findings);
}

#[test]
fn panther_lake_on_a_kernel_too_old_names_force_probe() {
    let f = facts_of("panther-lake-old-kernel");
    assert!(!active(&f).contains(&Vendor::Intel));
    let finding = f.findings.iter().find(|x| x.code == "intel-gpu-unbound").unwrap();
    assert_eq!(finding.level, Level::Fail);
    assert!(finding.text.contains("6.17"), "{}", finding.text);
    assert!(finding.fix.as_deref().unwrap().contains("xe.force_probe=b080 i915.force_probe=!b080"));
    let t = f.targets.iter().find(|t| t.kind == TargetKind::IntelGpu).unwrap();
    assert!(!t.usable && t.fix.as_deref().unwrap().contains("xe.force_probe=b080"));
    assert_eq!(label(&f, "k3d-gpu.io/npu.gen"), Some("50xx"));
}

#[test]
fn the_firmware_gatekeeper_refuses_an_old_guc() {
    let f = facts_of("rpl-guc-too-old");
    assert!(active(&f).contains(&Vendor::Intel), "the plugin still advertises it; engines are refused");
    let guc = f.findings.iter().find(|x| x.code == "guc-firmware").unwrap();
    assert_eq!(guc.level, Level::Fail);
    assert!(guc.text.contains("70.1.1 is older than the 70.5.1 i915 wants"), "{}", guc.text);
    assert_eq!(
        guc.fix.as_deref(),
        Some("install linux-firmware with i915/tgl_guc_70.bin 70.5.1 or newer, then reboot")
    );
    assert_eq!(guc.evidence, "/sys/kernel/debug/dri/0/gt0/uc/guc_info");
    assert!(has_finding(&f, Level::Warn, "huc-firmware"));
    let t = f.targets.iter().find(|t| t.kind == TargetKind::IntelGpu).unwrap();
    assert!(!t.usable);
}

#[test]
fn broken_inputs_still_give_facts_and_a_finding_each() {
    let f = facts_of("broken-inputs");
    // The healthy card is still found.
    assert_eq!(resources(&f, Vendor::Intel), (vec!["gpu.intel.com/i915".into()], 1));
    let codes: Vec<(&str, &str)> = f.findings.iter().map(|x| (x.code.as_str(), x.evidence.as_str())).collect();
    for expected in [
        ("host-bad-text", "/proc/cpuinfo"),
        ("host-bad-text", "/etc/os-release"),
        ("host-bad-value", "/sys/devices/system/cpu/online"),
        ("host-unreadable", "/proc/meminfo"),
        ("host-link-loop", "/sys/class/drm/card0/device"),
        ("host-link-escapes", "/sys/class/drm/card1/device"),
        ("host-link-dangling", "/sys/class/accel/accel0/device"),
    ] {
        assert!(codes.contains(&expected), "missing {expected:?} in {codes:#?}");
    }
    assert!(codes.iter().any(|(c, e)| *c == "host-bad-value" && e.ends_with("/vendor")));
    assert_eq!(f.host.cpu.model, None);
    assert_eq!(f.host.memory.total_kib, None);
}

#[test]
fn the_vendor_filter_narrows_what_is_active() {
    let only_nvidia: VendorFilter = "nvidia".parse().unwrap();
    let f = facts_with("desktop-rpl-nvidia", &only_nvidia);
    assert_eq!(active(&f), [Vendor::Nvidia]);
    assert!(inactive_reason(&f, Vendor::Intel).contains("vendor filter"));
    assert_eq!(label(&f, "k3d-gpu.io/hybrid-cpu"), None);
    assert_eq!(label(&f, "gpu.intel.com/xmx"), None);
    // Asking for a vendor the host lacks is a warning, not silence.
    let f = facts_with("desktop-rpl-nvidia", &"nvidia,gaudi".parse().unwrap());
    assert!(has_finding(&f, Level::Warn, "vendor-requested-but-absent"));
}

#[test]
fn facts_round_trip_through_json() {
    for host in support::host_names() {
        let f = facts_of(&host);
        let back: Facts = serde_json::from_slice(&f.to_bytes()).unwrap();
        assert_eq!(back, f, "{host}");
    }
}

#[test]
fn the_fingerprint_covers_hardware_not_software() {
    let base = facts_of("desktop-rpl-nvidia");
    let mut host = base.host.clone();
    host.kernel.release = Some("7.0.0".into());
    host.nvidia.driver_version = Some("600.1".into());
    let rebuilt = k3d_gpu::facts::build(host.clone(), vec![], &VendorFilter::Auto);
    assert_eq!(rebuilt.fingerprint, base.fingerprint);
    host.intel_gpus[0].pci_id = "8086:a788".into();
    let rebuilt = k3d_gpu::facts::build(host, vec![], &VendorFilter::Auto);
    assert_ne!(rebuilt.fingerprint, base.fingerprint);
}

#[test]
fn a_captured_nvidia_smi_answer_gives_each_gpu_its_memory() {
    // The reference's host as `facts capture` writes it where nvidia-smi runs.
    let dir = support::copy_host("rtx2000ada-x2");
    assert!(facts_of("rtx2000ada-x2").host.nvidia.gpus.iter().all(|g| g.memory_mib.is_none()));
    std::fs::write(dir.path().join(".k3d-gpu-nvidia-smi.csv"), "16380, 00000000:01:00.0\n16376, 00000000:02:00.0\n")
        .unwrap();
    let facts = support::facts_at(dir.path(), &VendorFilter::default());
    let memory: Vec<_> = facts.host.nvidia.gpus.iter().map(|g| (g.pci_address.as_str(), g.memory_mib)).collect();
    assert_eq!(memory, [("0000:01:00.0", Some(16380)), ("0000:02:00.0", Some(16376))]);
    assert!(facts.to_bytes().windows(10).any(|w| w == b"memory_mib"));
    // A damaged file is a finding, never a guess.
    std::fs::write(dir.path().join(".k3d-gpu-nvidia-smi.csv"), "lots, 00000000:01:00.0\n").unwrap();
    let facts = support::facts_at(dir.path(), &VendorFilter::default());
    assert!(facts.host.nvidia.gpus.iter().all(|g| g.memory_mib.is_none()));
    assert!(has_finding(&facts, Level::Warn, "host-bad-value"), "{:?}", facts.findings);
}

#[test]
fn two_arc_b580_are_two_usable_xe_gpus() {
    let facts = facts_of("arc-b580-x2");
    let gpus: Vec<_> = facts.host.intel_gpus.iter().map(|g| (g.pci_address.as_str(), g.driver.as_deref())).collect();
    assert_eq!(gpus, [("0000:03:00.0", Some("xe")), ("0000:06:00.0", Some("xe"))]);
    assert!(facts.host.intel_gpus.iter().all(|g| g.usable() && g.xmx == Xmx::Yes));
}

#[test]
fn inotify_limits_below_what_a_k3s_node_needs_warn_with_the_sysctl_and_its_undo() {
    let f = facts_of("plain-laptop-amd");
    let inotify = f.host.kernel.inotify.clone().expect("the host records its inotify limits");
    assert_eq!((inotify.max_user_instances, inotify.max_user_watches), (Some(128), Some(124180)));
    let finding = f.findings.iter().find(|x| x.code == "inotify-limits").expect("a finding");
    assert_eq!(finding.level, Level::Warn);
    assert!(finding.text.contains("fs.inotify.max_user_instances is 128 (below 512)"), "{}", finding.text);
    assert!(finding.text.contains("fs.inotify.max_user_watches is 124180 (below 524288)"), "{}", finding.text);
    let fix = finding.fix.as_deref().unwrap();
    assert!(
        fix.contains("`sudo sysctl -w fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288`"),
        "{fix}"
    );
    assert!(
        fix.contains("to undo: `sudo sysctl -w fs.inotify.max_user_instances=128 fs.inotify.max_user_watches=124180`"),
        "{fix}"
    );
    assert!(finding.evidence.contains("/proc/sys/fs/inotify/max_user_instances"));
    // Raised already: nothing to say. Not recorded (older fixture hosts, documents): nothing either.
    assert!(!has_finding(&facts_of("arc-b580-x2"), Level::Warn, "inotify-limits"));
    assert_eq!(facts_of("arc-b580-x2").host.kernel.inotify.unwrap().max_user_watches, Some(1048576));
    let older = facts_of("desktop-rpl-nvidia");
    assert!(older.host.kernel.inotify.is_none() && !has_finding(&older, Level::Warn, "inotify-limits"));
}
