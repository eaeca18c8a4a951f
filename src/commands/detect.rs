//! `k3d-gpu detect`: what was found, what it becomes in Kubernetes, and why not.

use std::fmt::Write;

use crate::cli::Global;
use crate::error::{EXIT_OK, Result};
use crate::facts::{Facts, Level, Xmx};

pub fn run(global: &Global) -> Result<u8> {
    let facts = super::load_facts(global)?;
    if global.json {
        super::print_bytes(&facts.to_bytes());
    } else {
        super::print_bytes(crate::escape::assembled(&render(&facts)).as_bytes());
    }
    Ok(EXIT_OK)
}

pub(crate) fn gib(kib: Option<u64>) -> String {
    kib.map_or("? GiB".into(), |k| format!("{:.1} GiB", k as f64 / 1024.0 / 1024.0))
}

/// The human table. Plain text: readable without colour, stable for snapshot tests.
pub fn render(facts: &Facts) -> String {
    let h = &facts.host;
    let mut out = String::new();
    let cores = if h.cpu.p_cores.is_empty() {
        String::new()
    } else {
        let mut s = format!(" (P {}", h.cpu.p_cores);
        if !h.cpu.e_cores.is_empty() {
            let _ = write!(s, ", E {}", h.cpu.e_cores);
        }
        if !h.cpu.lp_e_cores.is_empty() {
            let _ = write!(s, ", LP-E {}", h.cpu.lp_e_cores);
        }
        s.push(')');
        s
    };
    let _ = writeln!(out, "host     {}", h.cpu.model.as_deref().unwrap_or("unknown CPU"));
    let _ = writeln!(out, "cpus     {}{cores}", h.cpu.online_count);
    let _ = writeln!(out, "memory   {}", gib(h.memory.total_kib));
    let _ = writeln!(
        out,
        "os       {} · kernel {}",
        h.os.pretty_name.as_deref().unwrap_or("unknown"),
        h.kernel.release.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(out, "print    {}", facts.fingerprint);
    let _ = writeln!(out, "filter   {}", facts.vendor_filter);
    out.push('\n');

    let _ = writeln!(out, "{:<8} {:<8} {:>7}  resources / reason", "VENDOR", "STATE", "DEVICES");
    for d in &facts.detected {
        let resources = if d.resources.is_empty() { "(node labels)".to_string() } else { d.resources.join(", ") };
        let _ = writeln!(out, "{:<8} {:<8} {:>7}  {}", d.vendor, "active", d.devices, resources);
    }
    for i in &facts.inactive {
        let _ = writeln!(out, "{:<8} {:<8} {:>7}  {}", i.vendor, "inactive", "-", i.reason);
    }

    let devices = device_lines(facts);
    if !devices.is_empty() {
        out.push_str("\ndevices\n");
        for line in devices {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !facts.labels.is_empty() || !facts.annotations.is_empty() {
        out.push_str("\nnode labels\n");
        for (k, v) in &facts.labels {
            let _ = writeln!(out, "  {k}={v}");
        }
        for (k, v) in &facts.annotations {
            let _ = writeln!(out, "  {k}={v} (annotation)");
        }
    }
    let count = |level| facts.findings.iter().filter(|f| f.level == level).count();
    let (fail, warn) = (count(Level::Fail), count(Level::Warn));
    if fail + warn > 0 {
        let _ = writeln!(out, "\n{fail} fail, {warn} warn finding(s): run `k3d-gpu doctor` for evidence and fixes");
    }
    out
}

pub(crate) fn device_lines(facts: &Facts) -> Vec<String> {
    let h = &facts.host;
    let mut lines = Vec::new();
    for g in &h.intel_gpus {
        let xmx = match g.xmx {
            Xmx::Yes => "xmx",
            Xmx::No => "no xmx",
            Xmx::Unknown => "xmx unknown",
        };
        let kind = if g.integrated { "integrated" } else { "discrete" };
        let nodes = [g.card.as_deref(), g.render_node.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        lines.push(format!(
            "intel-gpu  {}  {} ({})  {}  {kind}, {xmx}  {}{}",
            g.pci_address,
            g.platform.as_deref().unwrap_or("unknown platform"),
            g.pci_id,
            g.driver.as_deref().unwrap_or("no driver"),
            nodes,
            if g.engines.is_empty() { String::new() } else { format!("  engines {}", g.engines.join(",")) }
        ));
    }
    for g in &h.nvidia.gpus {
        lines.push(format!(
            "nvidia     {}  {}  driver {}{}",
            g.pci_address,
            g.model.as_deref().unwrap_or("unknown model"),
            h.nvidia.driver_version.as_deref().unwrap_or("?"),
            g.minor.map(|m| format!("  /dev/nvidia{m}")).unwrap_or_default()
        ));
    }
    for n in &h.npus {
        lines.push(format!(
            "npu        {}  {} {}  firmware {}",
            n.pci_address,
            n.generation.as_deref().unwrap_or("unknown generation"),
            n.accel.as_deref().unwrap_or("(unbound)"),
            n.firmware
                .as_ref()
                .map_or("missing".to_string(), |f| f.build_date.clone().unwrap_or_else(|| "undated".into()))
        ));
    }
    for g in &h.gaudi.devices {
        lines.push(format!(
            "gaudi      {}  {}  {}",
            g.pci_address,
            g.model.as_deref().unwrap_or("unknown model"),
            g.driver.as_deref().unwrap_or("no driver")
        ));
    }
    for (name, idxd) in [("dsa", &h.dsa), ("iaa", &h.iaa)] {
        for q in &idxd.work_queues {
            lines.push(format!(
                "{name:<10} {}  {} {} {}",
                q.name,
                q.kind.as_deref().unwrap_or("?"),
                q.mode.as_deref().unwrap_or("?"),
                q.state.as_deref().unwrap_or("?")
            ));
        }
    }
    for pf in &h.qat.pfs {
        lines.push(format!(
            "qat        {}  {}  {}  {} VFs  {}",
            pf.pci_address,
            pf.model,
            pf.driver.as_deref().unwrap_or("no driver"),
            pf.vfs,
            pf.services.as_deref().unwrap_or("")
        ));
    }
    if h.wsl.microsoft_kernel {
        lines.push(format!(
            "wsl        /dev/dxg {}  intel driver {}  nvidia-smi {}",
            if h.wsl.dxg { "yes" } else { "no" },
            if h.wsl.intel_driver_packages.is_empty() { "no" } else { "yes" },
            if h.wsl.nvidia_smi { "yes" } else { "no" }
        ));
    }
    lines
}
