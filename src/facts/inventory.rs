//! The host inventory: what detection read, before any rule is applied.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::parse::Version;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub cpu: Cpu,
    pub memory: Memory,
    pub numa: Numa,
    pub intel_gpus: Vec<IntelGpu>,
    pub nvidia: Nvidia,
    pub npus: Vec<Npu>,
    pub gaudi: Gaudi,
    pub dsa: Idxd,
    pub iaa: Idxd,
    pub qat: Qat,
    pub wsl: Wsl,
    pub kernel: Kernel,
    pub os: Os,
    /// Which host paths the node container bind-mounts exist. Docker creates a missing bind
    /// source as an empty root-owned directory on the host, so compile mounts only these.
    /// Absent in documents older than this field: nothing is mounted then.
    #[serde(default)]
    pub bind_sources: BindSources,
    /// The RAPL power zones (`/sys/class/powercap/intel-rapl:*`), for energy figures. Left out
    /// when there are none, so documents of hosts without them keep their bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rapl: Vec<RaplZone>,
}

/// One RAPL zone: what it measures and whether its energy counter can be read by whoever
/// ran detection (`energy_uj` is root-only on current kernels). The counter itself changes by
/// the microsecond and is never recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaplZone {
    /// `intel-rapl:0`, `intel-rapl:0:1`.
    pub zone: String,
    /// `package-0`, `core`, `uncore`, `dram`, `psys`.
    pub name: Option<String>,
    /// `max_energy_range_uj`: where the counter wraps.
    pub max_energy_range_uj: Option<u64>,
    pub energy_readable: bool,
}

/// Host paths k3d-gpu may bind into the node, and whether each exists on this host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindSources {
    /// `/boot/config-<release>` (the kernel's config; WSL2 and some distros have only
    /// `/proc/config.gz`).
    pub boot_config: bool,
    /// `/lib/modules` (modules.builtin and the module tree).
    pub lib_modules: bool,
    /// `/etc/os-release`.
    pub os_release: bool,
    /// `/dev/char` (udev's major:minor links; DSA/IAA plugins need them).
    pub dev_char: bool,
    /// `/usr/lib/wsl` (WSL2's GPU user space).
    pub usr_lib_wsl: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub family: Option<u32>,
    pub model_id: Option<u32>,
    /// cpulists, e.g. `0-31`.
    pub online: String,
    pub online_count: u32,
    pub p_cores: String,
    pub e_cores: String,
    pub lp_e_cores: String,
    /// CPUs CPPC ranks above the rest (empty when all rank the same or CPPC is absent).
    pub favored: String,
    /// The AI-relevant ISA flags present (avx*, amx_*, fma, f16c) plus those we label on.
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// MemTotal. MemAvailable is left out on purpose: it changes by the second, and the same
    /// host must give the same bytes.
    pub total_kib: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Numa {
    pub nodes: Vec<NumaNode>,
    /// Sub-NUMA clusters per L3 (the reference rule); `None` with one node or no cache data.
    pub snc: Option<u32>,
    pub memory_only_nodes: Vec<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: String,
    pub cpu_count: u32,
    pub memory_kib: Option<u64>,
}

pub use crate::hwdb::Xmx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceNode {
    pub path: String,
    /// Octal, e.g. `0660`.
    pub mode: String,
    pub uid: u32,
    pub gid: u32,
    pub group: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntelGpu {
    pub pci_address: String,
    /// `8086:a780`.
    pub pci_id: String,
    #[serde(with = "hex_id")]
    pub device_id: u32,
    /// Bound kernel driver (`i915`, `xe`), `None` when no driver claimed the device.
    pub driver: Option<String>,
    pub card: Option<String>,
    pub render_node: Option<String>,
    pub integrated: bool,
    pub platform: Option<String>,
    pub xmx: Xmx,
    pub engines: Vec<String>,
    pub device_nodes: Vec<DeviceNode>,
    pub guc: Option<MicroController>,
    pub huc: Option<MicroController>,
}

impl IntelGpu {
    /// Whether the cluster can use it: bound to i915 or xe, with a render node. The one rule
    /// for the vendor verdict, the node labels and the compiler.
    pub fn usable(&self) -> bool {
        self.render_node.is_some() && matches!(self.driver.as_deref(), Some("i915" | "xe"))
    }
}

/// GuC or HuC state from debugfs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MicroController {
    pub firmware: Option<String>,
    pub status: String,
    pub wanted: Option<Version>,
    pub found: Option<Version>,
    pub evidence: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nvidia {
    pub module_loaded: bool,
    pub driver_version: Option<String>,
    pub gpus: Vec<NvidiaGpu>,
    pub device_nodes: Vec<DeviceNode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvidiaGpu {
    pub pci_address: String,
    #[serde(with = "hex_id::option")]
    pub device_id: Option<u32>,
    pub model: Option<String>,
    pub minor: Option<u32>,
    /// Memory in MiB as `nvidia-smi` reported it when the host was captured (`facts capture`
    /// saves its answer as the fixture's `.k3d-gpu-nvidia-smi.csv`); absent otherwise, since
    /// sysfs does not say: the agent then goes by the board's PCI id (`hwdb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Npu {
    /// `accel0`; `None` when intel_vpu has not bound the device.
    pub accel: Option<String>,
    pub pci_address: String,
    #[serde(with = "hex_id")]
    pub device_id: u32,
    pub driver: Option<String>,
    /// `37xx`, `40xx`, `50xx`, ...
    pub generation: Option<String>,
    pub device_node: Option<DeviceNode>,
    pub firmware: Option<Firmware>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firmware {
    /// The file the kernel would load, as a host path.
    pub path: String,
    pub build_date: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gaudi {
    pub module_loaded: bool,
    pub devices: Vec<GaudiDevice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaudiDevice {
    pub pci_address: String,
    #[serde(with = "hex_id")]
    pub device_id: u32,
    pub model: Option<String>,
    pub driver: Option<String>,
    pub accel: Option<String>,
    pub device_node: Option<DeviceNode>,
}

/// DSA or IAA (both driven by idxd).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idxd {
    pub devices: Vec<String>,
    pub work_queues: Vec<WorkQueue>,
    /// PCI functions by NUMA node (`-1` = unknown), counted by PCI id so a device counts before
    /// its driver loads.
    pub pci_functions_per_node: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkQueue {
    pub name: String,
    pub device: String,
    /// `user` or `kernel`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub mode: Option<String>,
    pub state: Option<String>,
    pub device_node: Option<String>,
}

impl WorkQueue {
    /// A queue a pod can use: user type, enabled, with its /dev node.
    pub fn usable_by_pods(&self) -> bool {
        self.kind.as_deref() == Some("user") && self.state.as_deref() == Some("enabled") && self.device_node.is_some()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qat {
    pub pfs: Vec<QatPf>,
    pub vfio_pci_loaded: bool,
    pub iommu_enabled: bool,
    pub pci_functions_per_node: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QatPf {
    pub pci_address: String,
    #[serde(with = "hex_id")]
    pub device_id: u32,
    pub model: String,
    pub driver: Option<String>,
    pub vfs: u32,
    /// `cfg_services`, e.g. `sym;asym`; absent on C62x.
    pub services: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wsl {
    pub microsoft_kernel: bool,
    pub dxg: bool,
    pub intel_driver_packages: Vec<String>,
    pub nvidia_smi: bool,
    pub libdxcore: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    pub release: Option<String>,
    /// Loaded modules among those detection cares about.
    pub modules: Vec<String>,
    /// `xe.force_probe=` / `i915.force_probe=` already on the kernel command line.
    pub force_probe: Vec<String>,
    /// The inotify limits (`/proc/sys/fs/inotify`), which every k3d node's kubelet,
    /// containerd and device plugins draw on as root. Absent where the host has no such files
    /// (older documents, fixture hosts that do not record them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inotify: Option<Inotify>,
}

/// `fs.inotify.*` sysctls, as the kernel reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inotify {
    pub max_user_instances: Option<u64>,
    pub max_user_watches: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Os {
    pub id: Option<String>,
    pub version_id: Option<String>,
    pub pretty_name: Option<String>,
}

/// The hardware alone — what the fingerprint covers. Drivers, kernel, firmware, free memory
/// and everything else that changes without a screwdriver are left out.
#[derive(Debug, Serialize)]
pub struct Hardware<'a> {
    cpu_model: &'a Option<String>,
    cpus: &'a str,
    p_cores: &'a str,
    e_cores: &'a str,
    lp_e_cores: &'a str,
    numa_nodes: Vec<(u32, &'a str)>,
    pci: Vec<(&'a str, String)>,
    wsl_gpu: bool,
}

impl<'a> Hardware<'a> {
    pub fn of(host: &'a Host) -> Hardware<'a> {
        let mut pci: Vec<(&str, String)> = Vec::new();
        pci.extend(host.intel_gpus.iter().map(|g| (g.pci_address.as_str(), g.pci_id.clone())));
        pci.extend(
            host.nvidia
                .gpus
                .iter()
                .map(|g| (g.pci_address.as_str(), g.device_id.map_or("10de:?".into(), |d| format!("10de:{d:04x}")))),
        );
        pci.extend(host.npus.iter().map(|n| (n.pci_address.as_str(), format!("8086:{:04x}", n.device_id))));
        pci.extend(host.gaudi.devices.iter().map(|g| (g.pci_address.as_str(), format!("1da3:{:04x}", g.device_id))));
        pci.extend(host.qat.pfs.iter().map(|q| (q.pci_address.as_str(), format!("8086:{:04x}", q.device_id))));
        pci.sort();
        Hardware {
            cpu_model: &host.cpu.model,
            cpus: &host.cpu.online,
            p_cores: &host.cpu.p_cores,
            e_cores: &host.cpu.e_cores,
            lp_e_cores: &host.cpu.lp_e_cores,
            numa_nodes: host.numa.nodes.iter().map(|n| (n.id, n.cpus.as_str())).collect(),
            pci,
            wsl_gpu: host.wsl.dxg,
        }
    }

    pub fn fingerprint(&self) -> String {
        crate::canonical::digest(self)
    }
}

/// PCI ids as the kernel prints them (`0xa780`), not as decimals nobody can look up.
mod hex_id {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{id:#06x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let text = String::deserialize(d)?;
        crate::parse::parse_hex_id(&text).map_err(serde::de::Error::custom)
    }

    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(id: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
            match id {
                Some(id) => super::serialize(id, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
            match Option::<String>::deserialize(d)? {
                Some(text) => crate::parse::parse_hex_id(&text).map(Some).map_err(serde::de::Error::custom),
                None => Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usable_intel_gpu_has_i915_or_xe_and_a_render_node() {
        let gpu = |driver: Option<&str>, render: bool| IntelGpu {
            pci_address: "0000:03:00.0".into(),
            pci_id: "8086:e20b".into(),
            device_id: 0xe20b,
            driver: driver.map(str::to_string),
            card: None,
            render_node: render.then(|| "/dev/dri/renderD128".to_string()),
            integrated: false,
            platform: None,
            xmx: Xmx::Yes,
            engines: Vec::new(),
            device_nodes: Vec::new(),
            guc: None,
            huc: None,
        };
        assert!(gpu(Some("xe"), true).usable() && gpu(Some("i915"), true).usable());
        assert!(!gpu(Some("xe"), false).usable(), "no render node");
        assert!(!gpu(Some("vfio-pci"), true).usable() && !gpu(None, true).usable(), "not i915 or xe");
    }
}
