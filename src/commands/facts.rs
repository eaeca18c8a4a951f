//! `k3d-gpu facts` and `facts capture`.

use crate::cli::{FactsArgs, FactsCommand, Global};
use crate::error::{EXIT_OK, Error, Result};

pub fn run(global: &Global, args: &FactsArgs) -> Result<u8> {
    if let Some(FactsCommand::Capture(c)) = &args.command {
        return capture(global, &c.out);
    }
    if let Some(path) = &args.out {
        super::check_out_file(path)?;
    }
    let facts = super::load_facts(global)?;
    let bytes = facts.to_bytes();
    match &args.out {
        Some(path) => super::write_out(path, &bytes, crate::output_file::PUBLIC)?,
        None => super::print_bytes(&bytes),
    }
    Ok(EXIT_OK)
}

fn capture(global: &Global, out: &std::path::Path) -> Result<u8> {
    if !global.facts.is_empty() {
        return Err(Error::Usage {
            message: "facts capture reads a host, not a saved facts document".into(),
            help: Some("drop --facts; use --root DIR to capture from another root".into()),
        });
    }
    // Refused before detecting, and as a usage error of its own: an I/O error met while
    // writing (a link that cannot be made, say) is not this.
    let occupied = match std::fs::symlink_metadata(out) {
        Ok(meta) if meta.is_dir() => std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true),
        Ok(_) => true,
        Err(_) => false,
    };
    if occupied {
        return Err(Error::Usage {
            message: format!("{} exists and is not an empty directory", out.display()),
            help: Some("pick a new directory; capture never overwrites".into()),
        });
    }
    let host = super::open_host(global)?;
    global.vendor_filter()?;
    // Detection reads the same files whatever the filter, so the capture serves any filter.
    let (inventory, _) = crate::detect::inventory(&host);
    // And what `doctor --perf` reads (governors, THP, swappiness, PCIe links).
    let _ = crate::detect::perf::read(&host, &inventory);
    // And the firmware files `doctor` looks for.
    let _ = super::doctor::firmware_findings(&host, &inventory);
    // And what `host-setup` reads (os-release, the vendors' user-space libraries), cut to the
    // symbol versions it scans for.
    let _ = crate::host_setup::probe::read(&host);
    let trail = host.trail();
    let report =
        crate::host::capture::capture_reduced(&host, &trail, out, &crate::host_setup::probe::reduce_for_capture)
            .map_err(|e| Error::Output { path: out.display().to_string(), reason: e.to_string() })?;
    // On the machine itself, nvidia-smi knows each GPU's memory, which sysfs does not: its
    // answer goes beside the tree (a fixture's own capture is copied with the trail).
    let smi = if host.is_real_host() { crate::doctor::nvidia_smi_memory() } else { None };
    if let Some(text) = &smi {
        crate::host::capture::write_sidecar(out, crate::detect::NVIDIA_SMI_SIDECAR, text.as_bytes())
            .map_err(|e| Error::Output { path: out.display().to_string(), reason: e.to_string() })?;
        crate::stderrln!("recorded each NVIDIA GPU's memory from nvidia-smi in {}", crate::detect::NVIDIA_SMI_SIDECAR);
    }
    crate::stderrln!(
        "captured {} files into {}: {} with the content detection read ({} bytes; /proc/cmdline cut to the \
parameters detection uses, libraries to the symbol versions host-setup reads), {} device nodes as empty files, {} empty placeholders for listed entries, {} .keep \
markers{}; {} directories, {} links",
        report.files_written(),
        out.display(),
        report.files,
        report.bytes,
        report.device_nodes,
        report.placeholders,
        report.keeps,
        if report.sidecar { ", the .k3d-gpu-stat sidecar" } else { "" },
        report.dirs,
        report.links,
    );
    crate::stderrln!("check it: k3d-gpu detect --root {}", out.display());
    Ok(EXIT_OK)
}
