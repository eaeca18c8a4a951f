//! What `doctor --perf` reads besides the facts: the settings that change at runtime and
//! that matter for inference serving — each CPU's cpufreq governor and energy preference,
//! transparent huge pages, swap and `vm.swappiness`, `kernel.numa_balancing`, free memory,
//! each GPU's PCIe link and the port above it, and (in [`super::perf_gpu`] and
//! [`super::perf_power`]) the GPU, power and memory half. Not part of facts/v1 (a governor or free memory changes without
//! a screwdriver, and the same host must give the same facts); read through the same
//! [`Reader`], so `facts capture` copies these files too.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Reader;
use crate::facts::Host;
use crate::host::HostRoot;

/// The files, as host paths (or patterns with `N` / `ADDR`), for docs and findings.
pub const GOVERNOR: &str = "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor";
pub const EPP: &str = "/sys/devices/system/cpu/cpuN/cpufreq/energy_performance_preference";
pub const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
pub const SWAPPINESS: &str = "/proc/sys/vm/swappiness";
pub const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";
pub const MEMINFO: &str = "/proc/meminfo";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tuning {
    /// Governor → the CPUs that run it.
    pub governors: BTreeMap<String, Vec<u32>>,
    /// Energy-performance preference → the CPUs that have it (intel_pstate/amd-pstate in
    /// active mode only).
    pub epp: BTreeMap<String, Vec<u32>>,
    /// The THP mode in brackets (`always`, `madvise`, `never`).
    pub thp: Option<String>,
    pub swappiness: Option<u32>,
    pub swap_total_kib: Option<u64>,
    pub swap_free_kib: Option<u64>,
    pub mem_available_kib: Option<u64>,
    pub numa_balancing: Option<u32>,
    pub links: Vec<Link>,
    /// The GPU half: frequencies, BARs, NVIDIA persistence and peer paths.
    pub gpu: super::perf_gpu::GpuTuning,
    /// The power and memory half: throttling, RAPL limits, turbo, caps, idle states,
    /// hugetlb, KSM, and the sandbox prerequisites.
    pub power: super::perf_power::PowerTuning,
}

/// One GPU's PCIe link, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    pub pci_address: String,
    pub what: String,
    pub current_speed: String,
    pub current_width: Option<u32>,
    pub max_speed: String,
    pub max_width: Option<u32>,
    /// The port the GPU plugs into (the parent bridge in the device tree), when it reports
    /// a link: the slot's capability, which the GPU's own maximum does not show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Port>,
}

/// A bridge's side of a link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Port {
    pub pci_address: String,
    pub current_speed: String,
    pub current_width: Option<u32>,
    pub max_speed: String,
    pub max_width: Option<u32>,
}

/// The PCI address of the bridge above `addr` in the device tree, from where
/// `/sys/bus/pci/devices/ADDR` leads (`…/0000:00:01.0/0000:01:00.0`).
pub(super) fn parent_bridge(r: &mut Reader, addr: &str) -> Option<String> {
    let real = r.canonical(&format!("/sys/bus/pci/devices/{addr}"))?;
    let mut parts = real.rsplit('/');
    parts.next()?;
    parts.next().filter(|p| crate::facts::ids::pci_address(p)).map(str::to_string)
}

fn port(r: &mut Reader, addr: &str) -> Option<Port> {
    let d = format!("/sys/bus/pci/devices/{addr}");
    let current_speed = r.attr(&format!("{d}/current_link_speed"))?;
    let max_speed = r.attr(&format!("{d}/max_link_speed"))?;
    let current_width = r.attr(&format!("{d}/current_link_width")).and_then(|v| v.parse().ok());
    let max_width = r.attr(&format!("{d}/max_link_width")).and_then(|v| v.parse().ok());
    Some(Port { pci_address: addr.to_string(), current_speed, current_width, max_speed, max_width })
}

/// Reads the tuning of `host` (whose facts inventory is `inventory`, for its GPUs).
pub fn read(host: &HostRoot, inventory: &Host) -> Tuning {
    let mut r = Reader::new(host);
    let mut t = Tuning::default();
    let mut cpus: Vec<u32> = r
        .list("/sys/devices/system/cpu")
        .iter()
        .filter_map(|n| n.strip_prefix("cpu").and_then(|d| d.parse().ok()))
        .collect();
    cpus.sort_unstable();
    for cpu in cpus {
        let d = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if let Some(g) = r.attr(&format!("{d}/scaling_governor")).filter(|g| !g.is_empty()) {
            t.governors.entry(g).or_default().push(cpu);
        }
        if let Some(e) = r.attr(&format!("{d}/energy_performance_preference")).filter(|e| !e.is_empty()) {
            t.epp.entry(e).or_default().push(cpu);
        }
    }
    t.thp = r.attr(THP).and_then(|text| {
        text.split_whitespace().find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')).map(str::to_string))
    });
    t.swappiness = r.attr(SWAPPINESS).and_then(|v| v.parse().ok());
    t.numa_balancing = r.attr(NUMA_BALANCING).and_then(|v| v.parse().ok());
    if let Some(text) = r.text(MEMINFO) {
        let kib = |key| crate::parse::parse_meminfo_kib(&text, key).ok();
        t.swap_total_kib = kib("SwapTotal");
        t.swap_free_kib = kib("SwapFree");
        t.mem_available_kib = kib("MemAvailable");
    }
    let mut gpus: Vec<(String, String)> = Vec::new();
    for g in &inventory.intel_gpus {
        gpus.push((g.pci_address.clone(), g.platform.clone().unwrap_or_else(|| format!("Intel GPU {}", g.pci_id))));
    }
    for g in &inventory.nvidia.gpus {
        gpus.push((g.pci_address.clone(), g.model.clone().unwrap_or_else(|| "NVIDIA GPU".into())));
    }
    for g in &inventory.gaudi.devices {
        gpus.push((g.pci_address.clone(), g.model.clone().unwrap_or_else(|| "Gaudi".into())));
    }
    for (addr, what) in gpus {
        // Integrated GPUs have no link of their own: nothing to read.
        let Some(own) = port(&mut r, &addr) else { continue };
        let upstream = parent_bridge(&mut r, &addr).and_then(|p| port(&mut r, &p));
        t.links.push(Link {
            pci_address: addr,
            what,
            current_speed: own.current_speed,
            current_width: own.current_width,
            max_speed: own.max_speed,
            max_width: own.max_width,
            upstream,
        });
    }
    t.gpu = super::perf_gpu::read(&mut r, inventory);
    t.power = super::perf_power::read(&mut r);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VMD domain has five hex digits (`10000:…`): the bridge above is still found, as
    /// `facts::ids::pci_address` reads addresses everywhere else.
    #[test]
    fn the_bridge_above_a_device_in_a_vmd_domain_is_found() {
        let dir = tempfile::tempdir().unwrap();
        for (domain, bridge, device) in
            [("pci0000:00", "0000:00:01.0", "0000:01:00.0"), ("pci10000:00", "10000:00:01.0", "10000:01:00.0")]
        {
            let real = dir.path().join("sys/devices").join(domain).join(bridge).join(device);
            std::fs::create_dir_all(&real).unwrap();
            std::fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
            let link = dir.path().join("sys/bus/pci/devices").join(device);
            std::os::unix::fs::symlink(format!("../../../devices/{domain}/{bridge}/{device}"), link).unwrap();
            let host = HostRoot::open(dir.path()).unwrap();
            let mut r = Reader::new(&host);
            assert_eq!(parent_bridge(&mut r, device).as_deref(), Some(bridge), "{device}");
        }
    }
}
