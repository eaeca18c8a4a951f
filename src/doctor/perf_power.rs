//! `doctor --perf`, the power and memory rules: thermal throttling and the TCC offset, RAPL
//! PL1/PL2 against the package's thermal spec power, turbo and frequency caps, idle-state
//! exit latencies, hugetlb pages and KSM, and for `[sandbox]` configs /dev/kvm, IOMMU groups
//! and split-lock handling. Pure, like [`super::perf`]: one function per rule.

use crate::detect::perf_power as p;
use crate::facts::Level;
use crate::shell::Command;

use super::perf::{PerfFinding, PerfInput, finding, sysctl, tee, tee_path, v};

/// Thermal throttle events since boot: the CPU lowered its clock to stay under Tjmax.
pub fn thermal_throttle(input: &PerfInput) -> Vec<PerfFinding> {
    let Some(t) = &input.tuning.power.throttle else { return Vec::new() };
    let evidence = format!("{}: core {} and package {} events summed over CPUs", p::THROTTLE, t.core, t.package);
    let f = if t.core + t.package == 0 {
        finding(Level::Info, "perf-thermal-throttle", "no thermal throttling since boot".into(), evidence)
    } else {
        finding(
            Level::Warn,
            "perf-thermal-throttle",
            format!(
                "{} CPU(s) have throttled for heat since boot ({} core, {} package events): sustained inference runs at lower clocks; check cooling and the power limits below",
                t.cpus, t.core, t.package
            ),
            evidence,
        )
    };
    vec![f.cites("Documentation/ABI/testing/sysfs-devices-system-cpu (thermal_throttle)")]
}

/// A TCC offset moves the throttling point below Tjmax (some boards set one for noise).
pub fn tcc_offset(input: &PerfInput) -> Vec<PerfFinding> {
    match input.tuning.power.tcc_offset {
        Some(offset) if offset > 0 => vec![
            finding(
                Level::Info,
                "perf-tcc-offset",
                format!("the TCC activation point is {offset} °C below Tjmax: the CPU throttles that much earlier"),
                format!("{}: {offset}", p::TCC_OFFSET),
            )
            .commands(
                tee("0", "/sys/bus/pci/devices/0000:00:04.0/tcc_offset_degree_celsius"),
                Some(tee_path(&offset.to_string(), p::TCC_OFFSET)),
            )
            .cites("Documentation/driver-api/thermal/intel_dptf.rst (tcc_offset_degree_celsius)"),
        ],
        _ => Vec::new(),
    }
}

fn watts(uw: u64) -> String {
    format!("{} W", uw / 1_000_000)
}

/// RAPL: a long-term limit (PL1) far above the thermal spec power on a package that
/// throttles means the cooler, not the limit, decides the clock, and erratically.
pub fn rapl_limits(input: &PerfInput) -> Vec<PerfFinding> {
    let throttled = input.tuning.power.throttle.as_ref().is_some_and(|t| t.package > 0);
    let mut out = Vec::new();
    for z in &input.tuning.power.rapl {
        let (Some(pl1), Some(tdp)) = (z.pl1, z.tdp) else { continue };
        let zone = v(&z.zone);
        let file = format!("/sys/class/powercap/{}/constraint_0_power_limit_uw", z.zone);
        let evidence = format!(
            "/sys/class/powercap/{zone}/constraint_{{0,1}}_power_limit_uw, constraint_0_max_power_uw: PL1 {}, PL2 {}, TDP {}",
            watts(pl1),
            z.pl2.map_or("?".into(), watts),
            watts(tdp)
        );
        let name = v(z.name.as_deref().unwrap_or("package"));
        let f = if tdp > 0 && pl1 > tdp * 3 / 2 && throttled {
            finding(
                Level::Warn,
                "perf-rapl-pl1",
                format!(
                    "{zone} ({name}) allows {} for ever (PL1) against a thermal spec power of {} and throttles: the package runs into its temperature limit instead; a PL1 at TDP gives steadier clocks",
                    watts(pl1),
                    watts(tdp)
                ),
                evidence,
            )
            .commands(tee_path(&tdp.to_string(), &file), Some(tee_path(&pl1.to_string(), &file)))
        } else {
            finding(
                Level::Info,
                "perf-rapl-pl1",
                format!("{zone} ({name}): PL1 {} against a thermal spec power of {}", watts(pl1), watts(tdp)),
                evidence,
            )
        };
        out.push(f.cites(
            "Documentation/power/powercap/powercap.rst (constraint_X_power_limit_uw, constraint_X_max_power_uw)",
        ));
    }
    out
}

/// Turbo off: every core stays at its base clock.
pub fn turbo(input: &PerfInput) -> Vec<PerfFinding> {
    let t = &input.tuning.power;
    let f = if t.no_turbo == Some(1) {
        finding(
            Level::Warn,
            "perf-turbo",
            "turbo is off (intel_pstate no_turbo): every core stays at its base clock".into(),
            format!("{}: 1", p::NO_TURBO),
        )
        .commands(
            tee("0", "/sys/devices/system/cpu/intel_pstate/no_turbo"),
            Some(tee("1", "/sys/devices/system/cpu/intel_pstate/no_turbo")),
        )
        .cites("Documentation/admin-guide/pm/intel_pstate.rst (no_turbo)")
    } else if t.no_turbo.is_none() && t.boost == Some(0) {
        finding(
            Level::Warn,
            "perf-turbo",
            "frequency boost is off: every core stays at its base clock".into(),
            format!("{}: 0", p::BOOST),
        )
        .commands(
            tee("1", "/sys/devices/system/cpu/cpufreq/boost"),
            Some(tee("0", "/sys/devices/system/cpu/cpufreq/boost")),
        )
        .cites("Documentation/admin-guide/pm/cpufreq.rst (boost)")
    } else {
        return Vec::new();
    };
    vec![f]
}

/// CPUs whose scaling_max_freq sits below cpuinfo_max_freq: a cap someone (or a power
/// profile) set.
pub fn freq_caps(input: &PerfInput) -> Vec<PerfFinding> {
    let capped = &input.tuning.power.capped;
    if capped.is_empty() {
        return Vec::new();
    }
    let groups = capped
        .iter()
        .map(|((s, m), cpus)| format!("{} CPU(s) at {} of {} MHz", cpus.len(), s / 1000, m / 1000))
        .collect::<Vec<_>>()
        .join(", ");
    let fix = Command::new("sudo").lit("sh -c").arg(
        "for d in /sys/devices/system/cpu/cpu*/cpufreq; do cat \"$d/cpuinfo_max_freq\" > \"$d/scaling_max_freq\"; done",
    );
    let mut revert: Option<Command> = None;
    for ((s, _), cpus) in capped {
        let mut tee = Command::new("sudo").lit("tee");
        for cpu in cpus {
            tee = tee.arg(format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_max_freq"));
        }
        let step = Command::new("echo").arg(s.to_string()).pipe(tee);
        revert = Some(match revert {
            None => step,
            Some(r) => r.and(step),
        });
    }
    vec![
        finding(
            Level::Warn,
            "perf-freq-cap",
            format!("CPU frequency is capped below the hardware maximum: {groups}"),
            format!("/sys/devices/system/cpu/cpuN/cpufreq/{{scaling,cpuinfo}}_max_freq: {groups}"),
        )
        .commands(fix, revert)
        .cites("Documentation/admin-guide/pm/cpufreq.rst (scaling_max_freq, cpuinfo_max_freq)"),
    ]
}

/// Deep idle states cost their exit latency on every wake-up (a request arriving, a GPU
/// interrupt); the threshold is where a C-state's wake-up shows in time to first token.
pub fn idle_latency(input: &PerfInput) -> Vec<PerfFinding> {
    const DEEP_US: u64 = 100;
    // Only cpuidle's own `stateN` directories: the commands name a state by its number.
    let deep: Vec<&p::IdleState> = input
        .tuning
        .power
        .idle
        .iter()
        .filter(|s| !s.disabled && s.latency_us > DEEP_US && state_number(s).is_some())
        .collect();
    if deep.is_empty() {
        return Vec::new();
    }
    let list = deep.iter().map(|s| format!("{} {} µs", v(&s.name), s.latency_us)).collect::<Vec<_>>().join(", ");
    vec![
        finding(
            Level::Info,
            "perf-idle-latency",
            format!(
                "enabled idle states wake in more than {DEEP_US} µs ({list}): each request that finds the cores asleep pays it; disabling them costs idle power"
            ),
            format!("/sys/devices/system/cpu/cpu0/cpuidle/stateN/{{name,latency,disable}}: {list}"),
        )
        .commands(idle_set(&deep, "-d"), Some(idle_set(&deep, "-e")))
        .cites("Documentation/admin-guide/pm/cpuidle.rst (latency, disable)"),
    ]
}

/// The cpuidle state's number (`state3` → 3), when its directory name is one.
fn state_number(state: &p::IdleState) -> Option<u32> {
    state.state.strip_prefix("state")?.parse().ok()
}

/// `cpupower idle-set FLAG N` for each of `states`: the fix disables exactly the states the
/// finding lists and the revert enables exactly those, so a state that was already disabled
/// stays so (`idle-set -E` would enable every state, and `-D 100` also takes a state of
/// exactly 100 µs the finding does not list).
fn idle_set(states: &[&p::IdleState], flag: &'static str) -> Command {
    let one = |s: &&p::IdleState| {
        Command::new("sudo").lit("cpupower idle-set").lit(flag).arg(state_number(s).unwrap_or_default().to_string())
    };
    let mut it = states.iter();
    let first = one(it.next().expect("a finding lists at least one state"));
    it.fold(first, |cmd, s| cmd.and(one(s)))
}

/// hugetlb pages reserved and unused are memory no server can have (they leave MemAvailable).
pub fn hugetlb(input: &PerfInput) -> Vec<PerfFinding> {
    let t = &input.tuning.power;
    let Some(n) = t.nr_hugepages.filter(|n| *n > 0) else { return Vec::new() };
    let size_kib = t.hugepage_kib.unwrap_or(2048);
    let free = t.hugepages_free.unwrap_or(0);
    let mib = n * size_kib / 1024;
    let evidence =
        format!("{}: {n}; /proc/meminfo: HugePages_Free {free}, Hugepagesize {size_kib} kB", p::NR_HUGEPAGES);
    let f = if free == n {
        finding(
            Level::Warn,
            "perf-hugetlb",
            format!("{n} huge pages ({mib} MiB) are reserved and none is used: that memory is out of reach of the model servers, which use THP instead"),
            evidence,
        )
        .commands(sysctl("vm.nr_hugepages=0".into()), Some(sysctl(format!("vm.nr_hugepages={n}"))))
    } else {
        finding(Level::Info, "perf-hugetlb", format!("{n} huge pages ({mib} MiB) reserved, {free} free"), evidence)
    };
    vec![f.cites("Documentation/admin-guide/mm/hugetlbpage.rst (nr_hugepages)")]
}

/// KSM scans anonymous memory to merge equal pages: on a model server, CPU spent on pages
/// that rarely match, and copy-on-write faults when they do.
pub fn ksm(input: &PerfInput) -> Vec<PerfFinding> {
    if input.tuning.power.ksm_run != Some(1) {
        return Vec::new();
    }
    vec![
        finding(
            Level::Warn,
            "perf-ksm",
            "KSM is running: ksmd scans the servers' memory for equal pages, taking CPU from inference and adding copy-on-write faults".into(),
            format!("{}: 1", p::KSM_RUN),
        )
        .commands(tee("0", "/sys/kernel/mm/ksm/run"), Some(tee("1", "/sys/kernel/mm/ksm/run")))
        .cites("Documentation/admin-guide/mm/ksm.rst (run)"),
    ]
}

/// `[sandbox]` microVM runtimes need KVM.
pub fn sandbox_kvm(input: &PerfInput) -> Vec<PerfFinding> {
    if !input.sandbox {
        return Vec::new();
    }
    let f = if input.tuning.power.kvm {
        finding(
            Level::Info,
            "perf-sandbox-kvm",
            "/dev/kvm exists: VM-isolated sandboxes can run".into(),
            format!("{}: present", p::KVM),
        )
    } else {
        finding(
            Level::Warn,
            "perf-sandbox-kvm",
            "no /dev/kvm: [sandbox] runtimes that isolate with a VM cannot start; enable virtualisation (VT-x/AMD-V) in the firmware setup and load kvm_intel or kvm_amd".into(),
            format!("{}: absent", p::KVM),
        )
        .check(Command::new("lsmod").pipe(Command::new("grep").lit("-E").arg("^kvm")))
    };
    vec![f.cites("Documentation/virt/kvm/api.rst")]
}

/// IOMMU groups: off means no device can be handed to a sandbox VM on its own.
pub fn sandbox_iommu(input: &PerfInput) -> Vec<PerfFinding> {
    if !input.sandbox {
        return Vec::new();
    }
    let n = input.tuning.power.iommu_groups;
    let f = if n > 0 {
        finding(
            Level::Info,
            "perf-sandbox-iommu",
            format!("the IOMMU is on ({n} groups)"),
            format!("{}: {n} groups", p::IOMMU_GROUPS),
        )
    } else {
        finding(
            Level::Info,
            "perf-sandbox-iommu",
            "the IOMMU is off (no IOMMU groups): sandboxes get no DMA isolation from devices, and no device can be passed to one; boot with intel_iommu=on (or amd_iommu=on) to have it".into(),
            format!("{}: empty", p::IOMMU_GROUPS),
        )
        .check(Command::new("cat").lit("/proc/cmdline"))
    };
    vec![f.cites("Documentation/driver-api/vfio.rst (IOMMU groups)")]
}

/// Split-lock detection: with the default `warn` and `split_lock_mitigate=1`, a sandboxed
/// process that splits a lock across cache lines is slowed on purpose (and it can slow every
/// core without detection).
pub fn sandbox_split_lock(input: &PerfInput) -> Vec<PerfFinding> {
    let t = &input.tuning.power;
    if !input.sandbox || !t.split_lock_flag {
        return Vec::new();
    }
    let mode = t.split_lock_cmdline.as_deref().unwrap_or("warn");
    let evidence = format!(
        "/proc/cpuinfo: split_lock_detect; /proc/cmdline: split_lock_detect={}; {}: {}",
        v(mode),
        p::SPLIT_LOCK_MITIGATE,
        t.split_lock_mitigate.map_or("?".into(), |m| m.to_string())
    );
    let f = if mode == "warn" && t.split_lock_mitigate == Some(1) {
        finding(
            Level::Info,
            "perf-sandbox-split-lock",
            "split-lock detection warns and mitigates: a sandboxed workload that splits locks is slowed to one at a time (the kernel's misery mode), which protects the other tenants; turning the mitigation off favours the workload".into(),
            evidence,
        )
        .commands(sysctl("kernel.split_lock_mitigate=0".into()), Some(sysctl("kernel.split_lock_mitigate=1".into())))
    } else {
        finding(Level::Info, "perf-sandbox-split-lock", format!("split-lock detection: {}", v(mode)), evidence)
    };
    vec![f.cites("Documentation/admin-guide/kernel-parameters.txt (split_lock_detect); Documentation/admin-guide/sysctl/kernel.rst (split_lock_mitigate)")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::perf_power::{IdleState, PowerTuning, RaplLimits, Throttle};
    use crate::doctor::perf::{PerfInput, RULES};

    /// The codes and levels `rule` gives on `power`, with `sandbox` set as given.
    fn run(rule: &str, power: PowerTuning, sandbox: bool) -> Vec<(Level, String)> {
        let (facts, mut t) = crate::doctor::perf::tests::host("plain-laptop-amd");
        t.power = power;
        let (_, f) = RULES.iter().find(|(n, _)| *n == rule).unwrap();
        f(&PerfInput {
            facts: &facts,
            tuning: &t,
            model_gb: None,
            sandbox,
            engine: &crate::doctor::perf_engine::Engine::NotAsked,
        })
        .into_iter()
        .map(|x| (x.level, x.code))
        .collect()
    }

    /// The fix disables exactly the deep states it lists and the revert enables exactly
    /// those: a state already disabled stays disabled, and a 100 µs state is left alone.
    #[test]
    fn the_idle_fix_and_revert_touch_only_the_states_listed() {
        let (facts, mut t) = crate::doctor::perf::tests::host("plain-laptop-amd");
        let state = |n: u32, latency_us: u64, disabled: bool| IdleState {
            state: format!("state{n}"),
            name: format!("C{n}"),
            latency_us,
            disabled,
        };
        t.power.idle = vec![state(2, 100, false), state(3, 150, false), state(4, 1000, true), state(5, 2000, false)];
        let input = PerfInput {
            facts: &facts,
            tuning: &t,
            model_gb: None,
            sandbox: false,
            engine: &crate::doctor::perf_engine::Engine::NotAsked,
        };
        let f = &idle_latency(&input)[0];
        assert_eq!(f.fix.as_deref(), Some("sudo cpupower idle-set -d 3 && sudo cpupower idle-set -d 5"));
        assert_eq!(f.revert.as_deref(), Some("sudo cpupower idle-set -e 3 && sudo cpupower idle-set -e 5"));
    }

    /// A rule, its input, whether `[sandbox]` is on, the findings wanted.
    type Case = (&'static str, PowerTuning, bool, Vec<(Level, &'static str)>);

    #[test]
    fn each_power_and_memory_rule_fires_on_its_input_and_not_otherwise() {
        use Level::{Info, Warn};
        let throttled = Some(Throttle { core: 3, package: 9, cpus: 2 });
        let rapl = |pl1: u64| {
            vec![RaplLimits {
                zone: "intel-rapl:0".into(),
                name: Some("package-0".into()),
                pl1: Some(pl1),
                pl2: None,
                tdp: Some(125_000_000),
            }]
        };
        let idle = |latency_us: u64, disabled: bool| {
            vec![IdleState { state: "state3".into(), name: "C10".into(), latency_us, disabled }]
        };
        let cases: Vec<Case> = vec![
            (
                "thermal-throttle",
                PowerTuning { throttle: throttled.clone(), ..Default::default() },
                false,
                vec![(Warn, "perf-thermal-throttle")],
            ),
            (
                "thermal-throttle",
                PowerTuning { throttle: Some(Throttle::default()), ..Default::default() },
                false,
                vec![(Info, "perf-thermal-throttle")],
            ),
            ("thermal-throttle", PowerTuning::default(), false, vec![]),
            (
                "tcc-offset",
                PowerTuning { tcc_offset: Some(5), ..Default::default() },
                false,
                vec![(Info, "perf-tcc-offset")],
            ),
            ("tcc-offset", PowerTuning { tcc_offset: Some(0), ..Default::default() }, false, vec![]),
            (
                "rapl-limits",
                PowerTuning { rapl: rapl(253_000_000), throttle: throttled.clone(), ..Default::default() },
                false,
                vec![(Warn, "perf-rapl-pl1")],
            ),
            (
                "rapl-limits",
                PowerTuning { rapl: rapl(253_000_000), ..Default::default() },
                false,
                vec![(Info, "perf-rapl-pl1")],
            ),
            (
                "rapl-limits",
                PowerTuning { rapl: rapl(125_000_000), throttle: throttled.clone(), ..Default::default() },
                false,
                vec![(Info, "perf-rapl-pl1")],
            ),
            ("turbo", PowerTuning { no_turbo: Some(1), ..Default::default() }, false, vec![(Warn, "perf-turbo")]),
            ("turbo", PowerTuning { boost: Some(0), ..Default::default() }, false, vec![(Warn, "perf-turbo")]),
            ("turbo", PowerTuning { no_turbo: Some(0), boost: Some(0), ..Default::default() }, false, vec![]),
            (
                "freq-caps",
                PowerTuning { capped: [((3_500_000, 5_300_000), vec![0, 1])].into(), ..Default::default() },
                false,
                vec![(Warn, "perf-freq-cap")],
            ),
            ("freq-caps", PowerTuning::default(), false, vec![]),
            (
                "idle-latency",
                PowerTuning { idle: idle(890, false), ..Default::default() },
                false,
                vec![(Info, "perf-idle-latency")],
            ),
            ("idle-latency", PowerTuning { idle: idle(890, true), ..Default::default() }, false, vec![]),
            ("idle-latency", PowerTuning { idle: idle(80, false), ..Default::default() }, false, vec![]),
            (
                "hugetlb",
                PowerTuning { nr_hugepages: Some(16), hugepages_free: Some(16), ..Default::default() },
                false,
                vec![(Warn, "perf-hugetlb")],
            ),
            (
                "hugetlb",
                PowerTuning { nr_hugepages: Some(16), hugepages_free: Some(2), ..Default::default() },
                false,
                vec![(Info, "perf-hugetlb")],
            ),
            ("hugetlb", PowerTuning { nr_hugepages: Some(0), ..Default::default() }, false, vec![]),
            ("ksm", PowerTuning { ksm_run: Some(1), ..Default::default() }, false, vec![(Warn, "perf-ksm")]),
            ("ksm", PowerTuning { ksm_run: Some(0), ..Default::default() }, false, vec![]),
            ("sandbox-kvm", PowerTuning::default(), true, vec![(Warn, "perf-sandbox-kvm")]),
            ("sandbox-kvm", PowerTuning { kvm: true, ..Default::default() }, true, vec![(Info, "perf-sandbox-kvm")]),
            ("sandbox-kvm", PowerTuning::default(), false, vec![]),
            (
                "sandbox-iommu",
                PowerTuning { iommu_groups: 3, ..Default::default() },
                true,
                vec![(Info, "perf-sandbox-iommu")],
            ),
            ("sandbox-iommu", PowerTuning::default(), false, vec![]),
            (
                "sandbox-split-lock",
                PowerTuning { split_lock_flag: true, split_lock_mitigate: Some(1), ..Default::default() },
                true,
                vec![(Info, "perf-sandbox-split-lock")],
            ),
            ("sandbox-split-lock", PowerTuning { split_lock_flag: false, ..Default::default() }, true, vec![]),
        ];
        for (rule, power, sandbox, want) in cases {
            let want: Vec<(Level, String)> = want.into_iter().map(|(l, c)| (l, c.to_string())).collect();
            assert_eq!(run(rule, power.clone(), sandbox), want, "{rule}: {power:?}");
        }
    }
}
