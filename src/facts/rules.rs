//! Host rules: findings that follow from the inventory alone (kernel floors, force_probe,
//! firmware age, the GuC gatekeeper, device-node access, half-configured Xeon accelerators).
//!
//! Pure: the inventory in, findings out. Each finding names the file its evidence came from
//! and the fix; none of them is ever applied by k3d-gpu.

use super::{Finding, Host, IntelGpu, Level, Npu};
use crate::hwdb::{self, Driver};
use crate::parse::kernel_major_minor;

pub const GAUDI_DRIVER_FIX: &str = "install Intel's out-of-tree habanalabs driver from the Gaudi software release (mainline stops at Gaudi 2), then recreate the cluster";

pub fn host_findings(host: &Host) -> Vec<Finding> {
    let mut out = Vec::new();
    let kernel = host.kernel.release.as_deref().and_then(kernel_major_minor);
    for gpu in &host.intel_gpus {
        intel_gpu_support(host, gpu, kernel, &mut out);
        if let Some(verdict) = guc_verdict(gpu) {
            let evidence = gpu.guc.as_ref().map(|g| g.evidence.clone()).unwrap_or_default();
            out.push(Finding::new(verdict.level, "guc-firmware", verdict.text, evidence).with_fix(verdict.fix));
        }
        if let Some(huc) = &gpu.huc
            && huc.status != "RUNNING"
        {
            out.push(
                Finding::new(
                    Level::Warn,
                    "huc-firmware",
                    format!(
                        "{}: HuC is {} — media decode/encode offload is off, inference is unaffected",
                        gpu_name(gpu),
                        huc.status
                    ),
                    huc.evidence.clone(),
                )
                .with_fix("install a current linux-firmware package, then reboot"),
            );
        }
        if gpu.render_node.is_some() && gpu.guc.is_none() {
            out.push(Finding::new(
                Level::Info,
                "guc-not-checked",
                format!("{}: GuC/HuC state not checked (debugfs is readable by root only)", gpu_name(gpu)),
                "/sys/kernel/debug/dri",
            ));
        }
        // Pods compute through the render node; the card node is for display.
        for node in gpu.device_nodes.iter().filter(|n| n.path.contains("/renderD")) {
            device_access(&node.path, node, &mut out);
        }
    }
    for npu in &host.npus {
        npu_rules(npu, kernel, &mut out);
    }
    gaudi_rules(host, &mut out);
    idxd_rules(&host.dsa, "DSA", "dsa", &mut out);
    idxd_rules(&host.iaa, "IAA", "iax", &mut out);
    qat_rules(host, &mut out);
    numa_rules(host, &mut out);
    inotify_rules(host, &mut out);
    if host.wsl.microsoft_kernel && !host.wsl.dxg {
        out.push(
            Finding::new(
                Level::Warn,
                "wsl-no-dxg",
                "WSL2 kernel without /dev/dxg: no GPU reaches this distro",
                "/dev/dxg",
            )
            .with_fix("update WSL (`wsl --update`) and the Windows GPU driver; GPU-PV needs WSL2, not WSL1"),
        );
    }
    out
}

fn gpu_name(gpu: &IntelGpu) -> String {
    format!("Intel {} ({:#06x}) at {}", gpu.platform.as_deref().unwrap_or("GPU"), gpu.device_id, gpu.pci_address)
}

fn fmt_kernel((major, minor): (u32, u32)) -> String {
    format!("{major}.{minor}")
}

/// Boot options that bind a part newer than the kernel's default support.
pub fn force_probe_option(driver: Driver, device_id: u32) -> String {
    match driver {
        Driver::Xe => format!("xe.force_probe={device_id:04x} i915.force_probe=!{device_id:04x}"),
        Driver::I915 => format!("i915.force_probe={device_id:04x}"),
    }
}

fn intel_gpu_support(host: &Host, gpu: &IntelGpu, kernel: Option<(u32, u32)>, out: &mut Vec<Finding>) {
    let evidence = format!("/sys/bus/pci/devices/{}", gpu.pci_address);
    let platform = hwdb::gpu_platform(gpu.device_id);
    if gpu.driver.is_some() && gpu.render_node.is_some() {
        return;
    }
    let Some(platform) = platform else {
        let option = force_probe_option(Driver::Xe, gpu.device_id);
        out.push(
            Finding::new(
                Level::Fail,
                "intel-gpu-unbound",
                format!(
                    "Intel GPU {:#06x} at {} has no driver and is newer than k3d-gpu's table",
                    gpu.device_id, gpu.pci_address
                ),
                evidence,
            )
            .with_fix(format!("boot with `{option}` on a recent kernel (k3d-gpu never changes boot options)")),
        );
        return;
    };
    let option = force_probe_option(platform.driver, gpu.device_id);
    // `i915.force_probe=!b080` blocks the device, so only a plain id (or `*`) counts, and only
    // for the driver that supports the platform: `i915.force_probe=b080` does nothing for an
    // xe-only part.
    let id = format!("{:04x}", gpu.device_id);
    let key = format!("{}.force_probe", platform.driver.name());
    let already = host
        .kernel
        .force_probe
        .iter()
        .any(|p| p.split_once('=').is_some_and(|(k, ids)| k == key && ids.split(',').any(|i| i == id || i == "*")));
    let too_old = match (platform.min_kernel, kernel) {
        (Some(min), Some(have)) => have < min,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let (text, fix) = if already {
        (
            format!("{} has no driver although the kernel command line force-probes it", gpu_name(gpu)),
            format!(
                "check `dmesg | grep -i {}` and that linux-firmware has the {} GuC",
                platform.driver.name(),
                platform.name
            ),
        )
    } else if too_old {
        let need = match platform.min_kernel {
            Some((u32::MAX, _)) => "no released kernel supports it by default".to_string(),
            Some(min) => format!("it needs kernel {}+", fmt_kernel(min)),
            None => String::new(),
        };
        let have = kernel.map(fmt_kernel).unwrap_or_else(|| "unknown".into());
        (
            format!("{} is newer than kernel {have}: {need}", gpu_name(gpu)),
            format!(
                "upgrade the kernel, or boot with `{option}` (add it to GRUB_CMDLINE_LINUX, update-grub, reboot); k3d-gpu never changes boot options"
            ),
        )
    } else {
        (
            format!("{} has no {} driver bound", gpu_name(gpu), platform.driver.name()),
            format!(
                "load the {} module (`modprobe {}`) and check dmesg for firmware errors",
                platform.driver.name(),
                platform.driver.name()
            ),
        )
    };
    out.push(Finding::new(Level::Fail, "intel-gpu-unbound", text, evidence).with_fix(fix));
}

pub struct GucVerdict {
    pub level: Level,
    pub text: String,
    pub fix: String,
}

/// The firmware gatekeeper: a GuC that is not RUNNING or older than the driver wants refuses
/// the GPU's engines — unless the GPU does not submit through the GuC (Alder Lake-S on i915),
/// where it only warns.
pub fn guc_verdict(gpu: &IntelGpu) -> Option<GucVerdict> {
    let guc = gpu.guc.as_ref()?;
    let driver = gpu.driver.as_deref().unwrap_or("i915");
    let firmware = guc.firmware.as_deref().unwrap_or("GuC firmware");
    let problem = if guc.status != "RUNNING" {
        format!("GuC {firmware} is {}", guc.status)
    } else {
        match (guc.found, guc.wanted) {
            (Some(found), Some(wanted)) if found < wanted => {
                format!("GuC {firmware} {found} is older than the {wanted} {driver} wants")
            }
            _ => return None,
        }
    };
    let submits_via_guc = driver == "xe" || hwdb::gpu_platform(gpu.device_id).is_none_or(|p| p.guc_submission);
    let wanted = guc.wanted.map(|w| format!(" {w} or newer")).unwrap_or_default();
    let fix = format!("install linux-firmware with {}{wanted}, then reboot", major_firmware_name(firmware));
    Some(if submits_via_guc {
        GucVerdict { level: Level::Fail, text: format!("{}: {problem}; GPU engines refused", gpu_name(gpu)), fix }
    } else {
        GucVerdict {
            level: Level::Warn,
            text: format!("{}: {problem}; this GPU submits through execlists, so it stays usable", gpu_name(gpu)),
            fix,
        }
    })
}

/// `i915/tgl_guc_70.1.1.bin` → `i915/tgl_guc_70.bin`: the name linux-firmware ships, which
/// the driver loads by major version.
fn major_firmware_name(firmware: &str) -> String {
    let stem = firmware.strip_suffix(".bin").unwrap_or(firmware);
    match stem.rsplit_once('_') {
        Some((head, version)) if version.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{head}_{}.bin", version.split('.').next().unwrap_or(version))
        }
        _ => format!("{stem}.bin"),
    }
}

fn device_access(path: &str, node: &super::DeviceNode, out: &mut Vec<Finding>) {
    let mode = u32::from_str_radix(&node.mode, 8).unwrap_or(0);
    if mode & 0o006 == 0o006 {
        return;
    }
    let group = node.group.clone().unwrap_or_else(|| node.gid.to_string());
    out.push(
        Finding::new(
            Level::Info,
            "device-node-group",
            format!("{path} is mode {} group {group} ({}): a non-root pod needs that group", node.mode, node.gid),
            path.to_string(),
        )
        .with_fix(format!("add {} to the pod's securityContext.supplementalGroups", node.gid)),
    );
}

/// Missing or too-old NPU firmware: `(level, text, fix)`.
pub fn npu_firmware_problem(npu: &Npu) -> Option<(Level, String, String)> {
    let fix = format!(
        "install intel-fw-npu from linux-npu-driver {} (it lands in /lib/firmware/updates/intel/vpu, which the kernel prefers), then reload intel_vpu",
        hwdb::NPU_FIRMWARE_RELEASE
    );
    let generation = npu.generation.as_deref()?;
    match &npu.firmware {
        None => Some((Level::Fail, format!("no firmware intel/vpu/vpu_{generation}_v1.bin for the NPU"), fix)),
        Some(fw) => match fw.build_date.as_deref() {
            Some(date) if date < hwdb::NPU_FIRMWARE_MIN_DATE => Some((
                Level::Warn,
                format!(
                    "NPU firmware {} was built {date}, older than the {} the serving image's driver needs (inference fails with MAPPED_INFERENCE_VERSION is NOT compatible)",
                    fw.path,
                    hwdb::NPU_FIRMWARE_MIN_DATE
                ),
                fix,
            )),
            _ => None,
        },
    }
}

fn npu_rules(npu: &Npu, kernel: Option<(u32, u32)>, out: &mut Vec<Finding>) {
    let evidence =
        npu.firmware.as_ref().map(|f| f.path.clone()).unwrap_or_else(|| {
            format!("/lib/firmware/intel/vpu/vpu_{}_v1.bin", npu.generation.as_deref().unwrap_or("?"))
        });
    if let Some((level, text, fix)) = npu_firmware_problem(npu) {
        out.push(Finding::new(level, "npu-firmware", text, evidence.clone()).with_fix(fix));
    } else if let Some(fw) = &npu.firmware
        && fw.build_date.is_none()
    {
        out.push(Finding::new(
            Level::Info,
            "npu-firmware",
            format!("no build date found in {}", fw.path),
            fw.path.clone(),
        ));
    }
    if npu.generation.is_none() {
        out.push(Finding::new(
            Level::Warn,
            "npu-unknown",
            format!("NPU {:#06x} at {} is not in k3d-gpu's table; no npu.gen label", npu.device_id, npu.pci_address),
            format!("/sys/bus/pci/devices/{}", npu.pci_address),
        ));
    }
    if npu.accel.is_none() {
        let model = hwdb::npu_model(npu.device_id);
        let need = model.and_then(|m| m.min_kernel);
        let text = match (need, kernel) {
            (Some(min), Some(have)) if have < min => format!(
                "NPU at {} needs intel_vpu from kernel {}+ (running {})",
                npu.pci_address,
                fmt_kernel(min),
                fmt_kernel(have)
            ),
            _ => format!("NPU at {} is not bound to intel_vpu", npu.pci_address),
        };
        out.push(
            Finding::new(Level::Fail, "npu-unbound", text, format!("/sys/bus/pci/devices/{}", npu.pci_address))
                .with_fix("`modprobe intel_vpu` on a kernel that supports this NPU"),
        );
    }
    if let Some(node) = &npu.device_node {
        device_access(&node.path, node, out);
    }
}

fn gaudi_rules(host: &Host, out: &mut Vec<Finding>) {
    let unbound: Vec<_> = host.gaudi.devices.iter().filter(|d| d.driver.is_none()).collect();
    if !unbound.is_empty() && !host.gaudi.module_loaded {
        out.push(
            Finding::new(
                Level::Fail,
                "gaudi-without-driver",
                format!("{} Gaudi device(s) on PCI, but the habanalabs driver is not loaded", unbound.len()),
                format!("/sys/bus/pci/devices/{}", unbound[0].pci_address),
            )
            .with_fix(GAUDI_DRIVER_FIX),
        );
    }
    for dev in &host.gaudi.devices {
        if let Some(node) = &dev.device_node {
            device_access(&node.path, node, out);
        }
    }
}

fn idxd_rules(idxd: &super::Idxd, name: &str, dev_dir: &str, out: &mut Vec<Finding>) {
    if idxd.devices.is_empty() || idxd.work_queues.iter().any(|q| q.usable_by_pods()) {
        return;
    }
    out.push(
        Finding::new(
            Level::Info,
            "idxd-no-user-queue",
            format!("{name} device(s) {} have no enabled user work queue in /dev/{dev_dir}", idxd.devices.join(", ")),
            "/sys/bus/dsa/devices",
        )
        .with_fix(format!(
            "configure a user work queue with accel-config (e.g. `{}`, then enable the device and queue)",
            crate::shell::Command::new("accel-config")
                .lit("config-wq")
                .arg(format!("{}/wq0.0", idxd.devices[0]))
                .lit("--type=user --mode=dedicated --name=app --size=16 --priority=10")
        )),
    );
}

fn qat_rules(host: &Host, out: &mut Vec<Finding>) {
    let q = &host.qat;
    for pf in &q.pfs {
        let evidence = format!("/sys/bus/pci/devices/{}", pf.pci_address);
        if !pf.driver.as_deref().is_some_and(crate::hwdb::is_qat_driver) {
            out.push(
                Finding::new(
                    Level::Info,
                    "qat-unbound",
                    format!("QAT {} PF at {} has no qat driver bound", pf.model, pf.pci_address),
                    evidence,
                )
                .with_fix(match crate::hwdb::qat_pf(pf.device_id) {
                    Some(m) => format!("`modprobe {}`", m.module),
                    None => "load the kernel's QAT driver for it".to_string(),
                }),
            );
        } else if pf.vfs == 0 {
            out.push(
                Finding::new(
                    Level::Info,
                    "qat-no-vfs",
                    format!("QAT {} PF at {} has no SR-IOV VFs", pf.model, pf.pci_address),
                    format!("{evidence}/sriov_numvfs"),
                )
                .with_fix(
                    crate::shell::Command::new("echo")
                        .lit("16")
                        .pipe(
                            crate::shell::Command::new("sudo")
                                .lit("tee")
                                .arg(format!("/sys/bus/pci/devices/{}/sriov_numvfs", pf.pci_address)),
                        )
                        .to_string(),
                ),
            );
        }
    }
    if q.pfs.iter().any(|pf| pf.vfs > 0) {
        if !q.vfio_pci_loaded {
            out.push(
                Finding::new(
                    Level::Warn,
                    "qat-no-vfio",
                    "QAT VFs exist but vfio-pci is not loaded",
                    "/sys/module/vfio_pci",
                )
                .with_fix("`sudo modprobe vfio-pci`"),
            );
        }
        if !q.iommu_enabled {
            out.push(
                Finding::new(Level::Warn, "qat-no-iommu", "QAT VFs exist but the IOMMU is off", "/sys/class/iommu")
                    .with_fix("boot with `intel_iommu=on iommu=pt`"),
            );
        }
    }
}

fn numa_rules(host: &Host, out: &mut Vec<Finding>) {
    if !host.numa.memory_only_nodes.is_empty() {
        let names: Vec<String> = host.numa.memory_only_nodes.iter().map(|n| format!("node{n}")).collect();
        out.push(Finding::new(
            Level::Info,
            "numa-memory-only",
            format!(
                "memory-only NUMA node(s) {} (HBM or CXL): not counted for SNC, no CPUs to place pods on",
                names.join(", ")
            ),
            "/sys/devices/system/node",
        ));
    }
    if host.numa.nodes.len() > 1 && host.cpu.flags.iter().any(|f| f == "rdt_a") {
        out.push(
            Finding::new(
                Level::Info,
                "numa-rdt",
                "the CPU has RDT allocation (rdt_a); the balloons policy ships with it off because it rewrites host-wide cache allocation",
                "/proc/cpuinfo",
            )
            .with_fix("mount resctrl (`mount -t resctrl resctrl /sys/fs/resctrl`) and enable the policy's rdt classes in its config if you want them"),
        );
    }
}

/// The inotify limits a k3d cluster needs: every node's kubelet and containerd (a shim per
/// pod) and the device plugins and Node Feature Discovery (which watch the kubelet's socket
/// directory and their config) take instances and watches, all as root, so one user's budget.
/// The floors are kind's for a containerised Kubernetes node (kubernetes-sigs/kind,
/// site/content/docs/user/known-issues.md, "Pod errors due to too many open files":
/// max_user_watches 524288, max_user_instances 512); the common default of 128 instances is
/// the one k3s-io/k3s#10020 runs out of.
pub const INOTIFY_FLOORS: [(&str, u64); 2] = [("max_user_instances", 512), ("max_user_watches", 524288)];

fn inotify_rules(host: &Host, out: &mut Vec<Finding>) {
    let Some(inotify) = &host.kernel.inotify else { return };
    let low: Vec<(&str, u64, u64)> = INOTIFY_FLOORS
        .iter()
        .filter_map(|(name, floor)| {
            let value = match *name {
                "max_user_instances" => inotify.max_user_instances,
                _ => inotify.max_user_watches,
            }?;
            (value < *floor).then_some((*name, value, *floor))
        })
        .collect();
    if low.is_empty() {
        return;
    }
    let sysctl = |pick: fn(&(&str, u64, u64)) -> u64| {
        low.iter().fold(crate::shell::Command::new("sudo").lit("sysctl -w"), |c, l| {
            c.arg(format!("fs.inotify.{}={}", l.0, pick(l)))
        })
    };
    let said: Vec<String> =
        low.iter().map(|(name, value, floor)| format!("fs.inotify.{name} is {value} (below {floor})")).collect();
    out.push(
        Finding::new(
            Level::Warn,
            "inotify-limits",
            format!(
                "{}: the k3s nodes, their containerd shims and the device plugins share root's inotify budget, and pods fail with \"too many open files\" when it runs out",
                said.join(", ")
            ),
            low.iter().map(|(name, _, _)| format!("/proc/sys/fs/inotify/{name}")).collect::<Vec<_>>().join(", "),
        )
        .with_fix(format!(
            "`{}` (until reboot; to keep it, put the same settings in /etc/sysctl.d/); to undo: `{}`",
            sysctl(|l| l.2),
            sysctl(|l| l.1)
        )),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::facts::{IntelGpu, MicroController, Xmx};
    use crate::parse::Version;

    fn gpu(device_id: u32, driver: Option<&str>) -> IntelGpu {
        IntelGpu {
            pci_address: hwdb::IGPU_ADDRESS.into(),
            pci_id: format!("8086:{device_id:04x}"),
            device_id,
            driver: driver.map(str::to_string),
            card: driver.map(|_| "card0".to_string()),
            render_node: driver.map(|_| "renderD128".to_string()),
            integrated: true,
            platform: hwdb::gpu_platform(device_id).map(|p| p.name.to_string()),
            xmx: Xmx::Unknown,
            engines: vec![],
            device_nodes: vec![],
            guc: None,
            huc: None,
        }
    }

    fn guc(status: &str, wanted: Version, found: Version) -> Option<MicroController> {
        Some(MicroController {
            firmware: Some("i915/tgl_guc_70.bin".into()),
            status: status.into(),
            wanted: Some(wanted),
            found: Some(found),
            evidence: "/sys/kernel/debug/dri/0/gt0/uc/guc_info".into(),
        })
    }

    #[test]
    fn an_old_guc_only_warns_where_i915_submits_through_execlists() {
        let mut adl_s = gpu(0x4680, Some("i915"));
        adl_s.guc = guc("RUNNING", Version(70, 5, 1), Version(70, 1, 1));
        assert_eq!(guc_verdict(&adl_s).unwrap().level, Level::Warn);
        let mut rpl_s = gpu(0xa780, Some("i915"));
        rpl_s.guc = adl_s.guc.clone();
        assert_eq!(guc_verdict(&rpl_s).unwrap().level, Level::Fail);
    }

    #[test]
    fn a_guc_that_is_not_running_is_refused_even_at_the_wanted_version() {
        let mut g = gpu(0x64a0, Some("xe"));
        g.guc = guc("LOAD FAIL", Version(70, 49, 4), Version(70, 49, 4));
        let verdict = guc_verdict(&g).unwrap();
        assert_eq!(verdict.level, Level::Fail);
        assert!(verdict.text.contains("is LOAD FAIL"), "{}", verdict.text);
        g.guc = guc("RUNNING", Version(70, 49, 4), Version(70, 50, 0));
        assert!(guc_verdict(&g).is_none(), "newer than wanted is fine");
    }

    #[test]
    fn force_probe_already_on_the_command_line_changes_the_advice() {
        let mut host = Host::default();
        host.kernel.release = Some("6.14.0-29-generic".into());
        host.intel_gpus.push(gpu(0xb080, None));
        let fresh = host_findings(&host);
        assert!(fresh[0].fix.as_deref().unwrap().contains("xe.force_probe=b080 i915.force_probe=!b080"));
        host.kernel.force_probe = vec!["xe.force_probe=b080".into()];
        let set = host_findings(&host);
        assert!(set[0].text.contains("although the kernel command line force-probes it"), "{}", set[0].text);
    }

    #[test]
    fn force_probe_for_the_other_driver_does_not_count() {
        let mut host = Host::default();
        host.kernel.release = Some("6.14.0-29-generic".into());
        host.intel_gpus.push(gpu(0xb080, None));
        host.kernel.force_probe = vec!["i915.force_probe=b080".into(), "i915.force_probe=*".into()];
        let findings = host_findings(&host);
        assert!(!findings[0].text.contains("although the kernel command line"), "{}", findings[0].text);
        assert!(findings[0].fix.as_deref().unwrap().contains("xe.force_probe=b080 i915.force_probe=!b080"));
        host.kernel.force_probe = vec!["xe.force_probe=*".into()];
        assert!(host_findings(&host)[0].text.contains("although the kernel command line force-probes it"));
    }

    #[test]
    fn an_unbound_qat_pf_is_told_the_module_that_drives_it() {
        let mut host = Host::default();
        for (address, device_id, model) in [("0000:6b:00.0", 0x4942, "401xx"), ("0000:e8:00.0", 0x37c8, "C62x")] {
            host.qat.pfs.push(crate::facts::QatPf {
                pci_address: address.into(),
                device_id,
                model: model.into(),
                driver: None,
                vfs: 0,
                services: None,
            });
        }
        let fixes: Vec<_> =
            host_findings(&host).into_iter().filter(|f| f.code == "qat-unbound").filter_map(|f| f.fix).collect();
        assert_eq!(fixes, ["`modprobe qat_4xxx`", "`modprobe qat_c62x`"]);
    }

    #[test]
    fn an_unknown_intel_gpu_gets_xe_force_probe_advice() {
        let mut host = Host::default();
        host.intel_gpus.push(gpu(0x1234, None));
        let findings = host_findings(&host);
        assert!(findings[0].text.contains("newer than k3d-gpu's table"));
        assert!(findings[0].fix.as_deref().unwrap().contains("xe.force_probe=1234"));
    }

    #[test]
    fn firmware_names_by_major_version() {
        assert_eq!(major_firmware_name("i915/tgl_guc_70.1.1.bin"), "i915/tgl_guc_70.bin");
        assert_eq!(major_firmware_name("xe/bmg_guc_70.bin"), "xe/bmg_guc_70.bin");
        assert_eq!(major_firmware_name("i915/tgl_huc.bin"), "i915/tgl_huc.bin");
    }
}
