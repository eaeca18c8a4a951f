//! Vendor keys, the vendor filter, and the activation rules: which vendors a host makes
//! active, what Kubernetes resources each becomes, and why the others are not.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Detected, Finding, Host, Inactive, Level};

/// A vendor key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Intel,
    Npu,
    Gaudi,
    Dsa,
    Iaa,
    Qat,
    Amx,
    Hybrid,
    Numa,
    Wsl,
}

impl Vendor {
    pub const ALL: [Vendor; 11] = [
        Vendor::Nvidia,
        Vendor::Intel,
        Vendor::Npu,
        Vendor::Gaudi,
        Vendor::Dsa,
        Vendor::Iaa,
        Vendor::Qat,
        Vendor::Amx,
        Vendor::Hybrid,
        Vendor::Numa,
        Vendor::Wsl,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Intel => "intel",
            Vendor::Npu => "npu",
            Vendor::Gaudi => "gaudi",
            Vendor::Dsa => "dsa",
            Vendor::Iaa => "iaa",
            Vendor::Qat => "qat",
            Vendor::Amx => "amx",
            Vendor::Hybrid => "hybrid",
            Vendor::Numa => "numa",
            Vendor::Wsl => "wsl",
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.key())
    }
}

/// An unknown vendor name, with the closest known one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown vendor {name:?}{}; known vendors: auto, {}", suggestion.map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default(), Vendor::ALL.map(Vendor::key).join(", "))]
pub struct UnknownVendor {
    pub name: String,
    pub suggestion: Option<&'static str>,
}

impl FromStr for Vendor {
    type Err = UnknownVendor;

    fn from_str(name: &str) -> Result<Vendor, UnknownVendor> {
        let wanted = name.trim().to_ascii_lowercase();
        // The device names the agent's keys use for a Gaudi ("hpu") are not vendor keys, and
        // by spelling alone "hpu" looks like "npu": point at the vendor they mean.
        let synonym = match wanted.as_str() {
            "hpu" | "habana" => Some("gaudi"),
            _ => None,
        };
        Vendor::ALL.into_iter().find(|v| v.key() == wanted).ok_or_else(|| UnknownVendor {
            name: name.to_string(),
            suggestion: synonym.or_else(|| crate::suggest::closest(&wanted, Vendor::ALL.map(Vendor::key))),
        })
    }
}

/// `auto` (every vendor the host has) or an explicit list that narrows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VendorFilter {
    #[default]
    Auto,
    Only(Vec<Vendor>),
}

impl VendorFilter {
    pub fn allows(&self, vendor: Vendor) -> bool {
        match self {
            VendorFilter::Auto => true,
            VendorFilter::Only(list) => list.contains(&vendor),
        }
    }
}

impl FromStr for VendorFilter {
    type Err = UnknownVendor;

    fn from_str(text: &str) -> Result<VendorFilter, UnknownVendor> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(VendorFilter::Auto);
        }
        let mut list = Vec::new();
        for name in text.split(',').filter(|n| !n.trim().is_empty()) {
            list.push(name.parse()?);
        }
        list.sort();
        list.dedup();
        Ok(VendorFilter::Only(list))
    }
}

impl fmt::Display for VendorFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VendorFilter::Auto => f.write_str("auto"),
            VendorFilter::Only(list) => f.write_str(&list.iter().map(|v| v.key()).collect::<Vec<_>>().join(",")),
        }
    }
}

impl Serialize for VendorFilter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for VendorFilter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What the host makes of every vendor.
pub struct Evaluation {
    pub detected: Vec<Detected>,
    pub inactive: Vec<Inactive>,
    pub findings: Vec<Finding>,
}

enum Verdict {
    Active { resources: Vec<String>, devices: u32 },
    Absent(String),
}

pub fn evaluate(host: &Host, filter: &VendorFilter) -> Evaluation {
    let mut out = Evaluation { detected: Vec::new(), inactive: Vec::new(), findings: Vec::new() };
    for vendor in Vendor::ALL {
        let verdict = match vendor {
            Vendor::Nvidia => nvidia(host, &mut out.findings),
            Vendor::Intel => intel(host),
            Vendor::Npu => npu(host),
            Vendor::Gaudi => gaudi(host, &mut out.findings),
            Vendor::Dsa => idxd(&host.dsa, "dsa", "/dev/dsa"),
            Vendor::Iaa => idxd(&host.iaa, "iaa", "/dev/iax"),
            Vendor::Qat => qat(host),
            Vendor::Amx => amx(host),
            Vendor::Hybrid => hybrid(host),
            Vendor::Numa => numa(host),
            Vendor::Wsl => wsl(host),
        };
        match verdict {
            Verdict::Active { .. } if !filter.allows(vendor) => out
                .inactive
                .push(Inactive { vendor, reason: format!("present, but left out by the vendor filter ({filter})") }),
            Verdict::Active { resources, devices } => out.detected.push(Detected { vendor, resources, devices }),
            Verdict::Absent(reason) => {
                if let VendorFilter::Only(list) = filter
                    && list.contains(&vendor)
                {
                    out.findings.push(Finding::new(
                        Level::Warn,
                        "vendor-requested-but-absent",
                        format!("vendor {vendor} is in the vendor filter but not active: {reason}"),
                        "vendor filter",
                    ));
                }
                out.inactive.push(Inactive { vendor, reason });
            }
        }
    }
    out
}

fn nvidia(host: &Host, findings: &mut Vec<Finding>) -> Verdict {
    let nv = &host.nvidia;
    let resources = vec!["nvidia.com/gpu".to_string()];
    if !nv.device_nodes.is_empty() {
        return Verdict::Active { resources, devices: nv.device_nodes.len() as u32 };
    }
    if nv.module_loaded {
        findings.push(
            Finding::new(
                Level::Warn,
                "nvidia-module-without-nodes",
                "the nvidia kernel module is loaded but no /dev/nvidiaN device node exists yet; the cluster would see no GPU",
                "/sys/module/nvidia",
            )
            .with_fix("run `nvidia-modprobe -c 0 -u` (or `nvidia-smi` once) to create the nodes, then recreate the cluster"),
        );
        return Verdict::Active { resources, devices: nv.gpus.len().max(1) as u32 };
    }
    if host.wsl.microsoft_kernel && host.wsl.dxg && host.wsl.nvidia_smi {
        // The NVIDIA device plugin reports one "all" device on WSL2.
        return Verdict::Active { resources, devices: 1 };
    }
    if !nv.gpus.is_empty() {
        return Verdict::Absent("NVIDIA GPU on PCI but the nvidia driver is not loaded".into());
    }
    Verdict::Absent("no /dev/nvidiaN, no nvidia module, no WSL2 NVIDIA driver".into())
}

fn intel(host: &Host) -> Verdict {
    let usable: Vec<_> = host.intel_gpus.iter().filter(|g| g.usable()).collect();
    if usable.is_empty() {
        if host.intel_gpus.is_empty() {
            return Verdict::Absent("no Intel display device on PCI".into());
        }
        return Verdict::Absent("Intel GPU present but not bound to i915 or xe (no render node)".into());
    }
    let mut resources: Vec<String> =
        usable.iter().map(|g| format!("gpu.intel.com/{}", g.driver.as_deref().unwrap_or_default())).collect();
    resources.sort();
    resources.dedup();
    Verdict::Active { resources, devices: usable.len() as u32 }
}

fn npu(host: &Host) -> Verdict {
    let usable = host.npus.iter().filter(|n| n.device_node.is_some()).count();
    if usable > 0 {
        return Verdict::Active { resources: vec!["npu.intel.com/accel".into()], devices: usable as u32 };
    }
    if host.npus.is_empty() {
        Verdict::Absent("no accel node bound to intel_vpu".into())
    } else {
        Verdict::Absent("NPU found in sysfs but /dev/accel/accelN is missing".into())
    }
}

fn gaudi(host: &Host, findings: &mut Vec<Finding>) -> Verdict {
    let g = &host.gaudi;
    let resources = vec!["habana.ai/gaudi".to_string()];
    let with_nodes = g.devices.iter().filter(|d| d.device_node.is_some()).count();
    if with_nodes > 0 {
        return Verdict::Active { resources, devices: with_nodes as u32 };
    }
    if g.module_loaded {
        findings.push(
            Finding::new(
                Level::Warn,
                "habanalabs-module-without-nodes",
                "the habanalabs module is loaded but no Gaudi /dev/accel/accelN node exists yet",
                "/sys/module/habanalabs",
            )
            .with_fix("check `dmesg | grep habanalabs` for a failed probe; recreate the cluster once the nodes exist"),
        );
        return Verdict::Active { resources, devices: g.devices.len().max(1) as u32 };
    }
    if !g.devices.is_empty() {
        return Verdict::Absent("Gaudi on PCI but Intel's habanalabs driver is not loaded".into());
    }
    Verdict::Absent("no Habana (1da3) device".into())
}

fn idxd(idxd: &super::Idxd, key: &str, dev_dir: &str) -> Verdict {
    let usable: Vec<_> = idxd.work_queues.iter().filter(|q| q.usable_by_pods()).collect();
    if usable.is_empty() {
        if idxd.devices.is_empty() {
            return Verdict::Absent(format!("no {} device in /sys/bus/dsa", key.to_uppercase()));
        }
        return Verdict::Absent(format!("no enabled user work queue in {dev_dir} (configure one with accel-config)"));
    }
    let mut resources: Vec<String> = usable
        .iter()
        .map(|q| format!("{key}.intel.com/wq-user-{}", q.mode.as_deref().unwrap_or("dedicated")))
        .collect();
    resources.sort();
    resources.dedup();
    Verdict::Active { resources, devices: usable.len() as u32 }
}

fn qat(host: &Host) -> Verdict {
    let q = &host.qat;
    if q.pfs.is_empty() {
        return Verdict::Absent("no QAT physical function on PCI".into());
    }
    let bound: Vec<_> =
        q.pfs.iter().filter(|pf| pf.driver.as_deref().is_some_and(crate::hwdb::is_qat_driver)).collect();
    if bound.is_empty() {
        return Verdict::Absent("QAT PF not bound to its qat_* driver".into());
    }
    let with_vfs: Vec<_> = bound.iter().filter(|pf| pf.vfs > 0).collect();
    if with_vfs.is_empty() {
        return Verdict::Absent("QAT PF has no SR-IOV VFs (sriov_numvfs is 0)".into());
    }
    if !q.vfio_pci_loaded {
        return Verdict::Absent("vfio-pci is not loaded".into());
    }
    if !q.iommu_enabled {
        return Verdict::Absent("the IOMMU is off (intel_iommu=on)".into());
    }
    let mut resources: Vec<String> =
        with_vfs.iter().map(|pf| format!("qat.intel.com/{}", qat_resource(pf.services.as_deref()))).collect();
    resources.sort();
    resources.dedup();
    Verdict::Active { resources, devices: with_vfs.iter().fold(0u32, |n, pf| n.saturating_add(pf.vfs)) }
}

/// The QAT plugin's resource name for a PF's `cfg_services`.
pub fn qat_resource(services: Option<&str>) -> &'static str {
    let Some(services) = services else {
        return "generic";
    };
    let mut parts: Vec<&str> = services.trim().split(';').map(str::trim).filter(|s| !s.is_empty()).collect();
    parts.sort_unstable();
    match parts.as_slice() {
        ["asym", "sym"] => "cy",
        ["dc"] => "dc",
        ["sym"] => "sym",
        ["asym"] => "asym",
        ["asym", "dc"] => "asym-dc",
        ["dc", "sym"] => "sym-dc",
        _ => "generic",
    }
}

fn amx(host: &Host) -> Verdict {
    if host.cpu.flags.iter().any(|f| f == "amx_tile") {
        Verdict::Active { resources: Vec::new(), devices: 0 }
    } else {
        Verdict::Absent("no amx_tile flag in /proc/cpuinfo".into())
    }
}

fn hybrid(host: &Host) -> Verdict {
    let has_p = !host.cpu.p_cores.is_empty();
    let has_e = !host.cpu.e_cores.is_empty() || !host.cpu.lp_e_cores.is_empty();
    if has_p && has_e {
        Verdict::Active { resources: Vec::new(), devices: 0 }
    } else {
        Verdict::Absent("no online CPUs in both cpu_core and cpu_atom/cpu_lowpower".into())
    }
}

fn numa(host: &Host) -> Verdict {
    let nodes = host.numa.nodes.len();
    if nodes > 1 {
        Verdict::Active { resources: Vec::new(), devices: 0 }
    } else {
        Verdict::Absent(format!("{nodes} NUMA node"))
    }
}

fn wsl(host: &Host) -> Verdict {
    let w = &host.wsl;
    if !w.microsoft_kernel {
        return Verdict::Absent("not a WSL2 kernel".into());
    }
    if !w.dxg {
        return Verdict::Absent("WSL2 without /dev/dxg (GPU paravirtualisation off)".into());
    }
    if w.intel_driver_packages.is_empty() {
        return Verdict::Absent("no Intel graphics driver (iigd_dch*) in /usr/lib/wsl/drivers".into());
    }
    // GPU-PV shows every GPU through the one /dev/dxg, and the driver store keeps old package
    // versions beside the current one, so the packages are evidence, not a count.
    Verdict::Active { resources: vec!["gpu.intel.com/dxg".into()], devices: 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse() {
        assert_eq!("auto".parse::<VendorFilter>().unwrap(), VendorFilter::Auto);
        assert_eq!(
            "intel, nvidia".parse::<VendorFilter>().unwrap(),
            VendorFilter::Only(vec![Vendor::Nvidia, Vendor::Intel])
        );
        let err = "nvidai".parse::<VendorFilter>().unwrap_err();
        assert_eq!(err.suggestion, Some("nvidia"));
        assert!(err.to_string().contains("known vendors: auto, nvidia, intel"), "{err}");
    }

    use crate::facts::{GaudiDevice, QatPf};

    fn verdict_of(host: &Host, vendor: Vendor) -> Result<Detected, String> {
        let e = evaluate(host, &VendorFilter::Auto);
        e.detected
            .into_iter()
            .find(|d| d.vendor == vendor)
            .ok_or_else(|| e.inactive.into_iter().find(|i| i.vendor == vendor).unwrap().reason)
    }

    #[test]
    fn habanalabs_loaded_without_nodes_is_present_with_a_finding() {
        let mut host = Host::default();
        host.gaudi.module_loaded = true;
        host.gaudi.devices.push(GaudiDevice {
            pci_address: "0000:33:00.0".into(),
            device_id: 0x1060,
            model: Some("Gaudi 3".into()),
            driver: Some("habanalabs".into()),
            accel: None,
            device_node: None,
        });
        assert_eq!(verdict_of(&host, Vendor::Gaudi).unwrap().devices, 1);
        let e = evaluate(&host, &VendorFilter::Auto);
        assert!(e.findings.iter().any(|f| f.code == "habanalabs-module-without-nodes"));
    }

    #[test]
    fn qat_needs_vfs_vfio_and_the_iommu() {
        let mut host = Host::default();
        host.qat.pfs.push(QatPf {
            pci_address: "0000:6b:00.0".into(),
            device_id: 0x4940,
            model: "4xxx".into(),
            driver: Some("4xxx".into()),
            vfs: 0,
            services: Some("dc".into()),
        });
        assert!(verdict_of(&host, Vendor::Qat).unwrap_err().contains("no SR-IOV VFs"));
        host.qat.pfs[0].vfs = 16;
        assert!(verdict_of(&host, Vendor::Qat).unwrap_err().contains("vfio-pci"));
        host.qat.vfio_pci_loaded = true;
        assert!(verdict_of(&host, Vendor::Qat).unwrap_err().contains("IOMMU"));
        host.qat.iommu_enabled = true;
        let d = verdict_of(&host, Vendor::Qat).unwrap();
        assert_eq!((d.resources, d.devices), (vec!["qat.intel.com/dc".to_string()], 16));
        host.qat.pfs.push(QatPf { vfs: u32::MAX, ..host.qat.pfs[0].clone() });
        assert_eq!(verdict_of(&host, Vendor::Qat).unwrap().devices, u32::MAX, "saturates, never overflows");
    }

    #[test]
    fn hybrid_counts_low_power_e_cores_too() {
        let mut host = Host::default();
        host.cpu.p_cores = "0-3".into();
        assert!(verdict_of(&host, Vendor::Hybrid).is_err());
        host.cpu.lp_e_cores = "4-5".into();
        assert!(verdict_of(&host, Vendor::Hybrid).is_ok());
    }

    #[test]
    fn qat_resources_follow_cfg_services() {
        assert_eq!(qat_resource(Some("sym;asym")), "cy");
        assert_eq!(qat_resource(Some("asym;sym\n")), "cy");
        assert_eq!(qat_resource(Some("dc")), "dc");
        assert_eq!(qat_resource(Some("dc;sym")), "sym-dc");
        assert_eq!(qat_resource(None), "generic");
    }
}
