//! /dev/accel devices: Intel NPUs (8086 + intel_vpu) and Gaudi (1da3), told apart by PCI
//! vendor and driver; NPU firmware in the kernel's search order.

use std::collections::BTreeMap;

use super::Reader;
use super::pci::PciFunction;
use crate::facts::{Firmware, Gaudi, GaudiDevice, Npu};
use crate::hwdb;
use crate::parse;

pub fn accel(r: &mut Reader, pci: &[PciFunction], kernel_release: Option<&str>) -> (Vec<Npu>, Gaudi) {
    // accel nodes by PCI address
    let mut nodes: BTreeMap<String, String> = BTreeMap::new();
    for name in r.list("/sys/class/accel") {
        if !name.starts_with("accel") || !name[5..].chars().all(|c| c.is_ascii_digit()) || name.len() == 5 {
            continue;
        }
        if let Some(address) = r.link_name(&format!("/sys/class/accel/{name}/device")) {
            nodes.entry(address).or_insert(name);
        }
    }

    let mut npus = Vec::new();
    for f in pci.iter().filter(|f| f.vendor == hwdb::INTEL) {
        let known = hwdb::npu_model(f.device);
        let bound = f.driver.as_deref() == Some("intel_vpu");
        if known.is_none() && !bound {
            continue;
        }
        let accel = if bound { nodes.get(&f.address).cloned() } else { None };
        let generation = known.map(|m| m.generation.to_string());
        let firmware = generation.as_deref().and_then(|g| npu_firmware(r, g, kernel_release));
        let device_node = accel.as_ref().and_then(|a| r.device_node(&format!("/dev/accel/{a}")));
        npus.push(Npu {
            accel,
            pci_address: f.address.clone(),
            device_id: f.device,
            driver: f.driver.clone(),
            generation,
            device_node,
            firmware,
        });
    }

    let module_loaded = r.exists("/sys/module/habanalabs");
    let mut devices = Vec::new();
    for f in pci.iter().filter(|f| f.vendor == hwdb::HABANA) {
        let accel = nodes.get(&f.address).cloned();
        let device_node = accel.as_ref().and_then(|a| r.device_node(&format!("/dev/accel/{a}")));
        devices.push(GaudiDevice {
            pci_address: f.address.clone(),
            device_id: f.device,
            model: hwdb::gaudi_model(f.device).map(str::to_string),
            driver: f.driver.clone(),
            accel,
            device_node,
        });
    }
    (npus, Gaudi { module_loaded, devices })
}

/// The firmware file the kernel would load for an NPU generation, and its build date.
/// Search order as the kernel's: updates/<release>, updates, <release>, base; in each, the
/// plain file before `.zst` and `.xz`.
fn npu_firmware(r: &mut Reader, generation: &str, kernel_release: Option<&str>) -> Option<Firmware> {
    let mut dirs = Vec::new();
    if let Some(release) = kernel_release {
        dirs.push(format!("/lib/firmware/updates/{release}"));
    }
    dirs.push("/lib/firmware/updates".to_string());
    if let Some(release) = kernel_release {
        dirs.push(format!("/lib/firmware/{release}"));
    }
    dirs.push("/lib/firmware".to_string());
    for dir in &dirs {
        for suffix in ["", ".zst", ".xz"] {
            let path = format!("{dir}/intel/vpu/vpu_{generation}_v1.bin{suffix}");
            if !r.exists(&path) {
                continue;
            }
            let build_date = r.bytes(&path).and_then(|raw| match decompress(&raw, suffix) {
                Ok(image) => parse::firmware_build_date(&image),
                Err(e) => {
                    r.bad_value(&path, &parse::ParseError(format!("cannot decompress: {e}")));
                    None
                }
            });
            return Some(Firmware { path, build_date });
        }
    }
    None
}

/// Decompresses a firmware image as the kernel would (`.zst`, `.xz`), or returns it as is.
pub fn decompress(raw: &[u8], suffix: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    match suffix {
        ".zst" => {
            let mut out = Vec::new();
            ruzstd::decoding::StreamingDecoder::new(raw)
                .map_err(|e| e.to_string())?
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            Ok(out)
        }
        ".xz" => {
            let mut out = Vec::new();
            lzma_rs::xz_decompress(&mut std::io::Cursor::new(raw), &mut out).map_err(|e| e.to_string())?;
            Ok(out)
        }
        _ => Ok(raw.to_vec()),
    }
}
