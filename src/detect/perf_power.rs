//! The power and memory half of what `doctor --perf` reads: thermal throttle counters and the
//! TCC offset, each RAPL package's power limits against its thermal spec power, turbo and
//! per-CPU frequency caps, idle-state exit latencies, hugetlb and KSM, and what `[sandbox]`
//! needs from the host (/dev/kvm, IOMMU groups, split-lock handling). Read through the same
//! [`Reader`] as the rest of detection, so `facts capture` copies these files.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Reader;

pub const THROTTLE: &str = "/sys/devices/system/cpu/cpuN/thermal_throttle/{core,package}_throttle_count";
/// intel_pstate's global turbo switch (Documentation/admin-guide/pm/intel_pstate.rst).
pub const NO_TURBO: &str = "/sys/devices/system/cpu/intel_pstate/no_turbo";
/// The generic boost switch of acpi-cpufreq and amd-pstate (Documentation/admin-guide/pm/cpufreq.rst).
pub const BOOST: &str = "/sys/devices/system/cpu/cpufreq/boost";
/// The processor thermal device's TCC offset (Documentation/driver-api/thermal/intel_dptf.rst).
pub const TCC_OFFSET: &str = "/sys/bus/pci/devices/0000:00:04.0/tcc_offset_degree_celsius";
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
pub const KSM_RUN: &str = "/sys/kernel/mm/ksm/run";
pub const KVM: &str = "/dev/kvm";
pub const IOMMU_GROUPS: &str = "/sys/kernel/iommu_groups";
pub const SPLIT_LOCK_MITIGATE: &str = "/proc/sys/kernel/split_lock_mitigate";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PowerTuning {
    /// Summed over CPUs: core and package throttle events, and the CPUs with any.
    pub throttle: Option<Throttle>,
    pub tcc_offset: Option<u32>,
    pub rapl: Vec<RaplLimits>,
    pub no_turbo: Option<u32>,
    pub boost: Option<u32>,
    /// `(scaling_max_freq, cpuinfo_max_freq)` in kHz → the CPUs held below their maximum.
    pub capped: BTreeMap<(u64, u64), Vec<u32>>,
    /// CPU 0's idle states.
    pub idle: Vec<IdleState>,
    pub nr_hugepages: Option<u64>,
    pub hugepages_free: Option<u64>,
    pub hugepage_kib: Option<u64>,
    pub ksm_run: Option<u32>,
    pub kvm: bool,
    pub iommu_groups: usize,
    /// `split_lock_detect` among /proc/cpuinfo's flags.
    pub split_lock_flag: bool,
    /// `split_lock_detect=` on the kernel command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_lock_cmdline: Option<String>,
    pub split_lock_mitigate: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Throttle {
    pub core: u64,
    pub package: u64,
    pub cpus: u32,
}

/// A RAPL package zone's limits, in µW (Documentation/power/powercap/powercap.rst).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RaplLimits {
    pub zone: String,
    pub name: Option<String>,
    /// `constraint_0_power_limit_uw` (long term, PL1).
    pub pl1: Option<u64>,
    /// `constraint_1_power_limit_uw` (short term, PL2).
    pub pl2: Option<u64>,
    /// `constraint_0_max_power_uw`: the thermal spec power (TDP) the package reports.
    pub tdp: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleState {
    pub state: String,
    pub name: String,
    pub latency_us: u64,
    pub disabled: bool,
}

fn number<T: std::str::FromStr>(r: &mut Reader, path: &str) -> Option<T> {
    r.attr(path).and_then(|v| v.parse().ok())
}

fn cpus(r: &mut Reader) -> Vec<u32> {
    let mut cpus: Vec<u32> = r
        .list("/sys/devices/system/cpu")
        .iter()
        .filter_map(|n| n.strip_prefix("cpu").and_then(|d| d.parse().ok()))
        .collect();
    cpus.sort_unstable();
    cpus
}

pub(super) fn read(r: &mut Reader) -> PowerTuning {
    let mut t = PowerTuning::default();
    let mut throttle = Throttle::default();
    let mut any = false;
    for cpu in cpus(r) {
        let d = format!("/sys/devices/system/cpu/cpu{cpu}");
        let core: Option<u64> = number(r, &format!("{d}/thermal_throttle/core_throttle_count"));
        let package: Option<u64> = number(r, &format!("{d}/thermal_throttle/package_throttle_count"));
        any |= core.is_some() || package.is_some();
        throttle.core += core.unwrap_or(0);
        throttle.package += package.unwrap_or(0);
        if core.unwrap_or(0) + package.unwrap_or(0) > 0 {
            throttle.cpus += 1;
        }
        let scaling: Option<u64> = number(r, &format!("{d}/cpufreq/scaling_max_freq"));
        let top: Option<u64> = number(r, &format!("{d}/cpufreq/cpuinfo_max_freq"));
        if let (Some(s), Some(m)) = (scaling, top)
            && s < m
        {
            t.capped.entry((s, m)).or_default().push(cpu);
        }
    }
    t.throttle = any.then_some(throttle);
    t.tcc_offset = number(r, TCC_OFFSET);
    for zone in r.list("/sys/class/powercap") {
        // Package zones only (`intel-rapl:0`), not their subzones (`intel-rapl:0:0`).
        if !zone.starts_with("intel-rapl:") || zone.matches(':').count() != 1 {
            continue;
        }
        let d = format!("/sys/class/powercap/{zone}");
        let name = r.attr(&format!("{d}/name"));
        let pl1 = number(r, &format!("{d}/constraint_0_power_limit_uw"));
        let pl2 = number(r, &format!("{d}/constraint_1_power_limit_uw"));
        let tdp = number(r, &format!("{d}/constraint_0_max_power_uw"));
        if pl1.is_some() || pl2.is_some() {
            t.rapl.push(RaplLimits { zone, name, pl1, pl2, tdp });
        }
    }
    t.no_turbo = number(r, NO_TURBO);
    t.boost = number(r, BOOST);
    let idle = "/sys/devices/system/cpu/cpu0/cpuidle";
    for state in r.list(idle) {
        let d = format!("{idle}/{state}");
        let (Some(name), Some(latency_us)) = (r.attr(&format!("{d}/name")), number(r, &format!("{d}/latency"))) else {
            continue;
        };
        let disabled = number::<u32>(r, &format!("{d}/disable")) == Some(1);
        t.idle.push(IdleState { state, name, latency_us, disabled });
    }
    t.nr_hugepages = number(r, NR_HUGEPAGES);
    if let Some(text) = r.text(super::perf::MEMINFO) {
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        };
        t.hugepages_free = value("HugePages_Free");
        t.hugepage_kib = value("Hugepagesize");
    }
    t.ksm_run = number(r, KSM_RUN);
    t.kvm = r.exists(KVM);
    t.iommu_groups = r.list(IOMMU_GROUPS).len();
    t.split_lock_flag = r.text("/proc/cpuinfo").is_some_and(|c| {
        c.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.split_whitespace().any(|f| f == "split_lock_detect"))
    });
    t.split_lock_cmdline = r
        .attr("/proc/cmdline")
        .and_then(|c| c.split_whitespace().find_map(|p| p.strip_prefix("split_lock_detect=").map(str::to_string)));
    t.split_lock_mitigate = number(r, SPLIT_LOCK_MITIGATE);
    t
}
