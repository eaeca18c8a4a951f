//! NVIDIA from /proc and /sys only (detection never runs nvidia-smi): module, driver version,
//! GPUs, /dev nodes; on a captured fixture host also each GPU's memory, from the answer of
//! nvidia-smi that `facts capture` saved beside the tree (`NVIDIA_SMI_SIDECAR`).

use std::collections::BTreeMap;

use super::Reader;
use super::pci::PciFunction;
use crate::facts::{Nvidia, NvidiaGpu};
use crate::hwdb;
use crate::parse;

/// Where a fixture host keeps what `nvidia-smi --query-gpu=memory.total,pci.bus_id
/// --format=csv,noheader,nounits` printed on the captured machine.
pub const NVIDIA_SMI_SIDECAR: &str = "/.k3d-gpu-nvidia-smi.csv";

pub fn nvidia(r: &mut Reader, pci: &[PciFunction], modules: &[String]) -> Nvidia {
    let module_loaded = super::system::loaded(modules, "nvidia");
    let driver_version = r.attr("/sys/module/nvidia/version").or_else(|| {
        // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Release Build ..."
        r.text("/proc/driver/nvidia/version").and_then(|t| {
            let line = t.lines().next()?.to_string();
            line.split_whitespace()
                .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
                .map(str::to_string)
        })
    });

    let mut gpus: BTreeMap<String, NvidiaGpu> = BTreeMap::new();
    for f in pci.iter().filter(|f| f.vendor == hwdb::NVIDIA && f.is_display()) {
        gpus.insert(
            f.address.clone(),
            NvidiaGpu {
                pci_address: f.address.clone(),
                device_id: Some(f.device),
                model: None,
                minor: None,
                memory_mib: None,
            },
        );
    }
    for address in r.list("/proc/driver/nvidia/gpus") {
        let path = format!("/proc/driver/nvidia/gpus/{address}/information");
        let Some(text) = r.text(&path) else { continue };
        let info = parse::parse_colon_map(&text);
        let gpu = gpus.entry(address.clone()).or_insert_with(|| NvidiaGpu {
            pci_address: address.clone(),
            device_id: None,
            model: None,
            minor: None,
            memory_mib: None,
        });
        gpu.model = info.get("Model").cloned();
        if let Some(minor) = info.get("Device Minor") {
            match parse::parse_u64(minor) {
                Ok(m) => gpu.minor = u32::try_from(m).ok(),
                Err(e) => r.bad_value(&path, &e),
            }
        }
    }

    // A fixture host's capture of nvidia-smi (the real host has no such file: there the
    // memory is unknown to detection, and the agent reads the PCI id table).
    if !r.real_host()
        && let Some(text) = r.text(NVIDIA_SMI_SIDECAR)
    {
        match parse::parse_nvidia_smi_memory(&text) {
            Ok(rows) => {
                for (address, mib) in rows {
                    if let Some(gpu) = gpus.get_mut(&address) {
                        gpu.memory_mib = Some(mib);
                    }
                }
            }
            Err(e) => r.bad_value(NVIDIA_SMI_SIDECAR, &e),
        }
    }

    let device_nodes = r
        .list("/dev")
        .into_iter()
        .filter(|n| {
            n.strip_prefix("nvidia").is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()))
        })
        .filter_map(|n| r.device_node(&format!("/dev/{n}")))
        .collect();
    Nvidia { module_loaded, driver_version, gpus: gpus.into_values().collect(), device_nodes }
}
