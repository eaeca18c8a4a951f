//! /dev/accel devices: Intel NPUs (8086 + intel_vpu) and Gaudi (1da3), told apart by PCI
//! vendor and driver; NPU firmware in the kernel's search order.

use std::collections::BTreeMap;

use super::Reader;
use super::pci::PciFunction;
use crate::facts::{Firmware, Gaudi, GaudiDevice, Kernel, Npu};
use crate::hwdb;
use crate::parse;

pub fn accel(r: &mut Reader, pci: &[PciFunction], kernel: &Kernel) -> (Vec<Npu>, Gaudi) {
    let kernel_release = kernel.release.as_deref();
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

    let module_loaded = super::system::loaded(&kernel.modules, "habanalabs");
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

/// The names ivpu requests for a generation, in its order: the `_v1` image, then (except on
/// 60xx) the older `_v0.0` one (`fw_names` in drivers/accel/ivpu/ivpu_fw.c, gregkh/linux
/// 1d0b597f). A host with only the fallback still has an NPU that boots.
fn npu_firmware_names(generation: &str) -> Vec<String> {
    let mut names = vec![format!("intel/vpu/vpu_{generation}_v1.bin")];
    if generation != "60xx" {
        names.push(format!("intel/vpu/vpu_{generation}_v0.0.bin"));
    }
    names
}

/// The firmware file the kernel would load for an NPU generation, and its build date: the
/// first of [`npu_firmware_names`] found where the kernel looks
/// ([`super::perf_gpu::find_firmware`]).
fn npu_firmware(r: &mut Reader, generation: &str, kernel_release: Option<&str>) -> Option<Firmware> {
    let path = npu_firmware_names(generation)
        .iter()
        .find_map(|name| super::perf_gpu::find_firmware(r, kernel_release, name))?;
    let suffix = [".zst", ".xz"].into_iter().find(|s| path.ends_with(s)).unwrap_or("");
    let build_date = r.bytes(&path).and_then(|raw| match decompress(&raw, suffix) {
        Ok(image) => parse::firmware_build_date(&image),
        Err(e) => {
            r.bad_value(&path, &parse::ParseError(format!("cannot decompress: {e}")));
            None
        }
    });
    Some(Firmware { path, build_date })
}

/// The largest firmware image we decompress; real NPU images are a few MiB, and a small
/// hostile file must not expand into gigabytes.
const MAX_IMAGE: u64 = crate::host::MAX_READ;

/// A sink that refuses to grow past [`MAX_IMAGE`], so the decoder stops early.
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() as u64 + buf.len() as u64 > MAX_IMAGE {
            return Err(std::io::Error::other(format!("decompresses to more than {} MiB", MAX_IMAGE >> 20)));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Decompresses a firmware image as the kernel would (`.zst`, `.xz`), or returns it as is.
pub fn decompress(raw: &[u8], suffix: &str) -> Result<Vec<u8>, Undecompressed> {
    let mut out = Capped(Vec::new());
    let failed =
        |format: &'static str| move |e: &dyn std::fmt::Display| Undecompressed { format, reason: e.to_string() };
    match suffix {
        ".zst" => {
            let mut decoder = ruzstd::decoding::StreamingDecoder::new(raw).map_err(|e| failed("zstd")(&e))?;
            std::io::copy(&mut decoder, &mut out).map_err(|e| failed("zstd")(&e))?;
        }
        ".xz" => lzma_rs::xz_decompress(&mut std::io::Cursor::new(raw), &mut out).map_err(|e| failed("xz")(&e))?,
        _ => return Ok(raw.to_vec()),
    }
    Ok(out.0)
}

/// A firmware image that did not decompress: the format it claimed and the decoder's word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Undecompressed {
    pub format: &'static str,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(date: &str) -> Vec<u8> {
        let mut image = vec![0u8; 64];
        image.extend_from_slice(format!("{date}*LNL_CLIENT_SILICON-release*1830*ci_tag").as_bytes());
        image
    }

    #[test]
    fn zst_and_xz_images_decompress_like_the_kernel_would() {
        let raw = image("20260715");
        let zst = ruzstd::encoding::compress_to_vec(&raw[..], ruzstd::encoding::CompressionLevel::Fastest);
        assert_eq!(decompress(&zst, ".zst").unwrap(), raw);
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &raw[..], &mut xz).unwrap();
        assert_eq!(decompress(&xz, ".xz").unwrap(), raw);
        assert_eq!(decompress(b"not zstd", ".zst").unwrap_err().format, "zstd");
    }

    /// The kernel falls back to `_v0.0` where `_v1` is missing (not on 60xx), and prefers
    /// `_v1` in a lower-priority directory to `_v0.0` in `updates/`.
    #[test]
    fn the_npu_firmware_is_found_in_the_kernels_name_order() {
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("37xx", &["lib/firmware/intel/vpu/vpu_37xx_v0.0.bin"], Some("/lib/firmware/intel/vpu/vpu_37xx_v0.0.bin")),
            (
                "40xx",
                &["lib/firmware/updates/intel/vpu/vpu_40xx_v0.0.bin", "lib/firmware/intel/vpu/vpu_40xx_v1.bin.zst"],
                Some("/lib/firmware/intel/vpu/vpu_40xx_v1.bin.zst"),
            ),
            ("60xx", &["lib/firmware/intel/vpu/vpu_60xx_v0.0.bin"], None),
            (
                "37xx",
                &["lib/firmware/updates/intel/vpu/vpu_37xx_v1.bin.zst", "lib/firmware/intel/vpu/vpu_37xx_v1.bin"],
                Some("/lib/firmware/intel/vpu/vpu_37xx_v1.bin"),
            ),
            ("50xx", &[], None),
        ];
        for (generation, files, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            for file in *files {
                let path = dir.path().join(file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                let raw = image("20260715");
                let bytes = if file.ends_with(".zst") {
                    ruzstd::encoding::compress_to_vec(&raw[..], ruzstd::encoding::CompressionLevel::Fastest)
                } else {
                    raw
                };
                std::fs::write(path, bytes).unwrap();
            }
            let host = crate::host::HostRoot::open(dir.path()).unwrap();
            let mut reader = Reader::new(&host);
            let found = npu_firmware(&mut reader, generation, None).map(|f| f.path);
            assert_eq!(found.as_deref(), *expected, "{generation} with {files:?}");
        }
    }

    /// A few KiB of zstd RLE blocks that would expand past the cap: refused, not allocated.
    #[test]
    fn a_decompression_bomb_stops_at_the_cap() {
        const BLOCK: u32 = 128 << 10;
        let mut bomb = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
        let blocks = (MAX_IMAGE / BLOCK as u64) + 2;
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            let header = (BLOCK << 3) | (1 << 1) | last;
            bomb.extend_from_slice(&header.to_le_bytes()[..3]);
            bomb.push(0);
        }
        assert!(bomb.len() < 8 << 10);
        let err = decompress(&bomb, ".zst").unwrap_err();
        assert!(err.reason.contains("more than 64 MiB"), "{err}");
    }
}
