//! `doctor --perf`: the read-only tuning advisor for inference on this host (the reference
//! launcher's `doctor --perf`, in part): the CPU governor and energy preference, transparent
//! huge pages, swap and swappiness against the model size, automatic NUMA balancing on a
//! multi-node host, each GPU's PCIe link against its maximum, and whether RAPL energy
//! counters can be read. Pure: the facts and what [`crate::detect::perf`] read in, findings
//! out. Each finding says what it read (file and value); where a setting can be changed, the
//! command that applies the fix and the one that restores the value found, both built by
//! [`crate::shell`]. Nothing here writes; the advice is not a failure.

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
    /// The command that applies the advice (runtime only: it does not survive a reboot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The command that puts back the value found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert: Option<String>,
}

fn finding(level: Level, code: &str, text: String, evidence: String) -> PerfFinding {
    PerfFinding { level, code: code.into(), text, evidence, fix: None, revert: None }
}

impl PerfFinding {
    fn commands(mut self, fix: Command, revert: Option<Command>) -> PerfFinding {
        self.fix = Some(fix.to_string());
        self.revert = revert.map(|c| c.to_string());
        self
    }
}

/// `echo VALUE | sudo tee FILES`: FILES a literal of this source (it may hold a glob).
fn tee(value: &str, files: &'static str) -> Command {
    Command::new("echo").arg(value).pipe(Command::new("sudo").lit("tee").lit(files))
}

fn sysctl(key_value: String) -> Command {
    Command::new("sudo").lit("sysctl -w").arg(key_value)
}

/// The value most CPUs have, and how many distinct values there are.
fn majority(map: &std::collections::BTreeMap<String, Vec<u32>>) -> Option<(&str, usize)> {
    map.iter().max_by_key(|(_, cpus)| cpus.len()).map(|(v, _)| (v.as_str(), map.len()))
}

fn groups(map: &std::collections::BTreeMap<String, Vec<u32>>) -> String {
    map.iter().map(|(v, cpus)| format!("{v} on {} CPU(s)", cpus.len())).collect::<Vec<_>>().join(", ")
}

const GIB: u64 = 1024 * 1024;

/// The advice for this host. `model_gb`: the size of the model to serve, in GiB.
pub fn findings(facts: &Facts, t: &Tuning, model_gb: Option<f64>) -> Vec<PerfFinding> {
    let mut out = Vec::new();
    // CPU frequency: the governor, then (under powersave, where it applies) the EPP.
    let governor_files = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor";
    match majority(&t.governors) {
        None => out.push(finding(
            Level::Info,
            "perf-governor-unknown",
            "no cpufreq governor to read (no cpufreq driver, or a VM)".into(),
            perf::GOVERNOR.into(),
        )),
        Some(("performance", 1)) => out.push(finding(
            Level::Info,
            "perf-governor",
            "every CPU runs the performance governor".into(),
            format!("{}: {}", perf::GOVERNOR, groups(&t.governors)),
        )),
        Some((found, _)) => out.push(
            finding(
                Level::Warn,
                "perf-governor",
                format!(
                    "CPUs run the {found} governor: token generation on the CPU and the host side of GPU serving wait for clocks to ramp up"
                ),
                format!("{}: {}", perf::GOVERNOR, groups(&t.governors)),
            )
            .commands(tee("performance", governor_files), Some(tee(found, governor_files))),
        ),
    }
    let epp_files = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference";
    if let Some((found, _)) = majority(&t.epp)
        && found != "performance"
        && !t.governors.contains_key("performance")
    {
        out.push(
            finding(
                Level::Warn,
                "perf-epp",
                format!(
                    "the energy-performance preference is {found}: the hardware favours saving power over latency (power-profiles-daemon may set it back)"
                ),
                format!("{}: {}", perf::EPP, groups(&t.epp)),
            )
            .commands(tee("performance", epp_files), Some(tee(found, epp_files))),
        );
    }
    // Transparent huge pages: `never` makes every model tensor 4 KiB pages.
    match t.thp.as_deref() {
        Some("never") => out.push(
            finding(
                Level::Warn,
                "perf-thp",
                "transparent huge pages are off: model weights in memory are mapped in 4 KiB pages (more TLB misses); madvise lets the servers that ask for them have them".into(),
                format!("{}: [never]", perf::THP),
            )
            .commands(tee("madvise", "/sys/kernel/mm/transparent_hugepage/enabled"), Some(tee("never", "/sys/kernel/mm/transparent_hugepage/enabled"))),
        ),
        Some(mode) => out.push(finding(
            Level::Info,
            "perf-thp",
            format!("transparent huge pages: {mode}"),
            format!("{}: [{mode}]", perf::THP),
        )),
        None => {}
    }
    // Swap against the model.
    let used = t.swap_total_kib.zip(t.swap_free_kib).map(|(total, free)| total.saturating_sub(free));
    if let Some(used) = used.filter(|u| *u > 0) {
        out.push(finding(
            Level::Warn,
            "perf-swap-in-use",
            format!("{} MiB of swap are in use: a model page read back from swap stalls inference", used / 1024),
            format!(
                "{}: SwapTotal {} kB, SwapFree {} kB",
                perf::MEMINFO,
                t.swap_total_kib.unwrap_or(0),
                t.swap_free_kib.unwrap_or(0)
            ),
        ));
    }
    let fits = match (model_gb, t.mem_available_kib) {
        (Some(gb), Some(avail)) => {
            let need = (gb * GIB as f64) as u64;
            let ok = need <= avail;
            out.push(finding(
                if ok { Level::Info } else { Level::Warn },
                "perf-model-fit",
                if ok {
                    format!("a {gb} GiB model fits in MemAvailable ({:.1} GiB)", avail as f64 / GIB as f64)
                } else {
                    format!(
                        "a {gb} GiB model does not fit in MemAvailable ({:.1} GiB): it would be paged out{}",
                        avail as f64 / GIB as f64,
                        if t.swap_total_kib.unwrap_or(0) > 0 { " to swap" } else { ", or the server killed" }
                    )
                },
                format!("{}: MemAvailable {avail} kB", perf::MEMINFO),
            ));
            Some(ok)
        }
        _ => None,
    };
    if let Some(sw) = t.swappiness
        && sw > 10
        && t.swap_total_kib.unwrap_or(0) > 0
    {
        // Without a model size it is advice; with one that barely fits, it matters.
        let level = if fits == Some(false) || model_gb.is_some() { Level::Warn } else { Level::Info };
        out.push(
            finding(
                level,
                "perf-swappiness",
                format!("vm.swappiness is {sw}: the kernel swaps anonymous memory (model weights a server read into RAM) early; 10 keeps them in memory"),
                format!("{}: {sw}", perf::SWAPPINESS),
            )
            .commands(sysctl("vm.swappiness=10".into()), Some(sysctl(format!("vm.swappiness={sw}")))),
        );
    }
    // NUMA balancing moves pages between nodes under a pinned server.
    if facts.host.numa.nodes.len() > 1 && t.numa_balancing == Some(1) {
        out.push(
            finding(
                Level::Warn,
                "perf-numa-balancing",
                format!(
                    "automatic NUMA balancing is on across {} NUMA nodes: it unmaps and migrates the pages of a server pinned to one node, adding latency; pin instead ([placement] numa)",
                    facts.host.numa.nodes.len()
                ),
                format!("{}: 1", perf::NUMA_BALANCING),
            )
            .commands(sysctl("kernel.numa_balancing=0".into()), Some(sysctl("kernel.numa_balancing=1".into()))),
        );
    }
    // PCIe links.
    for l in &t.links {
        let evidence = format!(
            "/sys/bus/pci/devices/{}/{{current,max}}_link_{{speed,width}}: {} x{} of {} x{}",
            l.pci_address,
            l.current_speed,
            l.current_width.map_or("?".into(), |w| w.to_string()),
            l.max_speed,
            l.max_width.map_or("?".into(), |w| w.to_string())
        );
        let check = Command::new("sudo")
            .lit("lspci -vv -s")
            .arg(&l.pci_address)
            .pipe(Command::new("grep").lit("-E").arg("LnkCap:|LnkSta:"));
        let narrow = matches!((l.current_width, l.max_width), (Some(c), Some(m)) if c < m);
        if narrow {
            let mut f = finding(
                Level::Warn,
                "perf-pcie-width",
                format!(
                    "{} at {} runs its PCIe link at x{} of x{}: model uploads and host-device copies get that fraction of the bandwidth; move it to a slot wired x{} (the board's manual says which), or check the link under load",
                    l.what,
                    l.pci_address,
                    l.current_width.unwrap_or(0),
                    l.max_width.unwrap_or(0),
                    l.max_width.unwrap_or(0)
                ),
                evidence,
            );
            f.fix = Some(check.to_string());
            out.push(f);
        } else if l.current_speed != l.max_speed {
            let mut f = finding(
                Level::Info,
                "perf-pcie-speed",
                format!(
                    "{} at {} links at {} of {}: GPUs lower the link speed when idle, so check it while the GPU works",
                    l.what, l.pci_address, l.current_speed, l.max_speed
                ),
                evidence,
            );
            f.fix = Some(check.to_string());
            out.push(f);
        } else {
            out.push(finding(
                Level::Info,
                "perf-pcie",
                format!("{} at {}: PCIe link at its maximum ({})", l.what, l.pci_address, l.max_speed),
                evidence,
            ));
        }
    }
    // RAPL: energy figures (bench energy, exporters) need readable counters.
    let rapl = &facts.host.rapl;
    if rapl.is_empty() {
        out.push(finding(
            Level::Info,
            "perf-rapl-none",
            "no RAPL zone in /sys/class/powercap: no CPU energy figures on this host (not Intel/AMD RAPL, or a VM)"
                .into(),
            "/sys/class/powercap/intel-rapl:*".into(),
        ));
    } else {
        let zones = rapl
            .iter()
            .map(|z| format!("{} ({})", z.zone, z.name.as_deref().unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(", ");
        let closed: Vec<&crate::facts::RaplZone> = rapl.iter().filter(|z| !z.energy_readable).collect();
        if closed.is_empty() {
            out.push(finding(
                Level::Info,
                "perf-rapl",
                format!("RAPL energy counters are readable: {zones}"),
                "/sys/class/powercap/intel-rapl:*/energy_uj".into(),
            ));
        } else {
            let mut f = finding(
                Level::Info,
                "perf-rapl-root-only",
                format!(
                    "RAPL zones {zones}: energy_uj is readable by root only (kernels restrict it since the PLATYPUS side channel, CVE-2020-8694), so energy figures need root; opening it to all users re-opens that channel"
                ),
                "/sys/class/powercap/intel-rapl:*/energy_uj".into(),
            );
            f.fix = Some(Command::new("sudo").lit("chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj").to_string());
            f.revert =
                Some(Command::new("sudo").lit("chmod o-r /sys/class/powercap/intel-rapl:*/energy_uj").to_string());
            out.push(f);
        }
    }
    out.sort_by(|a, b| b.level.cmp(&a.level).then_with(|| a.code.cmp(&b.code)).then_with(|| a.text.cmp(&b.text)));
    out
}

/// The findings as text.
pub fn render(findings: &[PerfFinding]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for f in findings {
        let _ = writeln!(out, "{:<4}  {}  [{}]", f.level, f.text, f.code);
        let _ = writeln!(out, "      read: {}", f.evidence);
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
mod tests {
    use super::*;

    fn host(name: &str) -> (Facts, Tuning) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name);
        let h = crate::host::HostRoot::open(&root).unwrap();
        let facts = crate::detect::facts(&h, &crate::facts::VendorFilter::Auto);
        let t = crate::detect::perf::read(&h, &facts.host);
        (facts, t)
    }

    fn code<'a>(f: &'a [PerfFinding], code: &str) -> &'a PerfFinding {
        f.iter().find(|x| x.code == code).unwrap_or_else(|| panic!("no {code} in {f:#?}"))
    }

    #[test]
    fn a_desktop_at_its_defaults_gets_governor_epp_swappiness_and_link_advice() {
        let (facts, t) = host("desktop-rpl-nvidia");
        assert_eq!(t.governors["powersave"].len(), 32);
        let f = findings(&facts, &t, None);
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
        assert!(width.text.contains("0000:02:00.0") && width.text.contains("x4 of x16"), "{width:?}");
        assert_eq!(width.fix.as_deref(), Some("sudo lspci -vv -s 0000:02:00.0 | grep -E 'LnkCap:|LnkSta:'"));
        assert!(f.iter().any(|x| x.code == "perf-pcie" && x.text.contains("0000:01:00.0")));
        assert_eq!(
            code(&f, "perf-rapl-root-only").revert.as_deref(),
            Some("sudo chmod o-r /sys/class/powercap/intel-rapl:*/energy_uj")
        );
        assert!(f.iter().all(|x| x.code != "perf-numa-balancing"), "one NUMA node");
        assert_eq!(code(&f, "perf-thp").level, Level::Info);
    }

    #[test]
    fn a_tuned_two_socket_server_is_told_only_about_numa_balancing() {
        let (facts, t) = host("xeon-2s-snc2");
        let f = findings(&facts, &t, None);
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
        let small = findings(&facts, &t, Some(8.0));
        assert_eq!(code(&small, "perf-model-fit").level, Level::Info);
        let big = findings(&facts, &t, Some(500.0));
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
        let f = findings(&facts, &t, None);
        assert_eq!(
            code(&f, "perf-governor").revert.as_deref(),
            Some("echo 'x; touch pwned' | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
        );
    }
}
