//! CPU identity, flags, hybrid core lists, CPPC ranking, and NUMA/SNC topology.

use super::Reader;
use super::reader::cpulist;
use crate::facts::{Cpu, Numa, NumaNode};
use crate::parse::{self, format_cpulist};

/// Flags worth keeping in facts: the AI ISA extensions, the ones we label on, and RDT.
fn keep_flag(flag: &str) -> bool {
    flag.starts_with("avx")
        || flag.starts_with("amx")
        || matches!(flag, "fma" | "f16c" | "vaes" | "gfni" | "sha_ni" | "ibt" | "user_shstk" | "rdt_a")
}

pub fn cpu(r: &mut Reader) -> Cpu {
    let info = r.parsed("/proc/cpuinfo", parse::parse_cpuinfo).unwrap_or_default();
    let online = cpulist(r, "/sys/devices/system/cpu/online").unwrap_or_default();
    let only_online =
        |cpus: Vec<u32>| -> Vec<u32> { cpus.into_iter().filter(|c| online.binary_search(c).is_ok()).collect() };
    let p_cores = only_online(cpulist(r, "/sys/devices/cpu_core/cpus").unwrap_or_default());
    let e_cores = only_online(cpulist(r, "/sys/devices/cpu_atom/cpus").unwrap_or_default());
    let lp_e_cores = only_online(cpulist(r, "/sys/devices/cpu_lowpower/cpus").unwrap_or_default());
    let favored = if p_cores.is_empty() { Vec::new() } else { favored_cpus(r, &online) };
    Cpu {
        vendor: info.vendor,
        model: info.model_name,
        family: info.family,
        model_id: info.model,
        online: format_cpulist(&online),
        online_count: online.len() as u32,
        p_cores: format_cpulist(&p_cores),
        e_cores: format_cpulist(&e_cores),
        lp_e_cores: format_cpulist(&lp_e_cores),
        favored: format_cpulist(&favored),
        flags: info.flags.into_iter().filter(|f| keep_flag(f)).collect(),
    }
}

/// CPUs whose CPPC highest_perf is the top value, when CPPC ranks some above the rest.
fn favored_cpus(r: &mut Reader, online: &[u32]) -> Vec<u32> {
    let mut perf = Vec::new();
    for &cpu in online {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/acpi_cppc/highest_perf");
        if let Some(value) = r.text(&path) {
            match parse::parse_u64(&value) {
                Ok(v) => perf.push((cpu, v)),
                Err(e) => r.bad_value(&path, &e),
            }
        }
    }
    let Some(top) = perf.iter().map(|(_, v)| *v).max() else {
        return Vec::new();
    };
    if perf.iter().all(|(_, v)| *v == top) {
        return Vec::new();
    }
    perf.into_iter().filter(|(_, v)| *v == top).map(|(c, _)| c).collect()
}

pub fn numa(r: &mut Reader) -> Numa {
    let mut nodes = Vec::new();
    for name in r.list("/sys/devices/system/node") {
        let Some(id) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let base = format!("/sys/devices/system/node/{name}");
        let cpus = cpulist(r, &format!("{base}/cpulist")).unwrap_or_default();
        let memory_kib = r.parsed(&format!("{base}/meminfo"), |t| parse::parse_node_meminfo_kib(t, "MemTotal"));
        nodes.push(NumaNode { id, cpus: format_cpulist(&cpus), cpu_count: cpus.len() as u32, memory_kib });
    }
    nodes.sort_by_key(|n| n.id);
    let memory_only_nodes = nodes.iter().filter(|n| n.cpu_count == 0).map(|n| n.id).collect();
    let snc = if nodes.len() > 1 { snc(r, &nodes) } else { None };
    Numa { nodes, snc, memory_only_nodes }
}

/// CPUs sharing CPU 0's L3 divided by the CPUs of CPU 0's node (Linux's snc_get_config()
/// through 6.19), so memory-only nodes never count.
fn snc(r: &mut Reader, nodes: &[NumaNode]) -> Option<u32> {
    let l3 = cpulist(r, "/sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list")?;
    let node0 = nodes.iter().find(|n| parse::parse_cpulist(&n.cpus).is_ok_and(|c| c.contains(&0)))?;
    if node0.cpu_count == 0 || l3.is_empty() {
        return None;
    }
    Some((l3.len() as u32 / node0.cpu_count).max(1))
}
