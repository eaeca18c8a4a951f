//! The detect stage: read a host (through [`HostRoot`]) into a [`Host`] inventory.
//!
//! Detection never fails as a whole: an unreadable file, a value that does not parse or a
//! link that leaves the root becomes a finding and detection goes on with what it has. Rules
//! (which vendor is active, labels, gatekeeper) are not here but in `facts`, which is pure.

mod accel;
mod cpu;
mod intel_gpu;
mod nvidia;
mod pci;
pub mod perf;
pub mod perf_gpu;
pub mod perf_power;
pub mod reader;
mod system;
mod xeon;

use crate::facts::{self, Facts, Finding, Host, VendorFilter};
use crate::host::HostRoot;

pub use nvidia::NVIDIA_SMI_SIDECAR;
pub use reader::Reader;

/// Reads the whole inventory. Findings are problems met while reading.
pub fn inventory(host: &HostRoot) -> (Host, Vec<Finding>) {
    let mut r = Reader::new(host);
    let pci = pci::scan(&mut r);
    let kernel = system::kernel(&mut r);
    let wsl = system::wsl(&mut r);
    let cpu = cpu::cpu(&mut r);
    let numa = cpu::numa(&mut r);
    let memory = system::memory(&mut r);
    let os = system::os(&mut r);
    let intel_gpus = intel_gpu::intel_gpus(&mut r, &pci);
    let nvidia = nvidia::nvidia(&mut r, &pci, &kernel.modules);
    let (npus, gaudi) = accel::accel(&mut r, &pci, &kernel);
    let (dsa, iaa) = xeon::idxd(&mut r, &pci);
    let qat = xeon::qat(&mut r, &pci, &kernel.modules);
    let bind_sources = system::bind_sources(&mut r, kernel.release.as_deref());
    let rapl = system::rapl(&mut r);
    let host =
        Host { cpu, memory, numa, intel_gpus, nvidia, npus, gaudi, dsa, iaa, qat, wsl, kernel, os, bind_sources, rapl };
    (host, r.into_findings())
}

/// Detects and builds the facts document in one go.
pub fn facts(host: &HostRoot, filter: &VendorFilter) -> Facts {
    let (inventory, findings) = inventory(host);
    facts::build(inventory, findings, filter)
}
