//! PCI functions from /sys/bus/pci/devices: ids, class, bound driver, NUMA node.

use super::Reader;
use crate::parse;

#[derive(Debug, Clone)]
pub struct PciFunction {
    pub address: String,
    pub vendor: u32,
    pub device: u32,
    pub class: u32,
    pub driver: Option<String>,
    /// `-1` when the platform does not say.
    pub numa_node: i64,
}

impl PciFunction {
    pub fn path(&self, attr: &str) -> String {
        format!("/sys/bus/pci/devices/{}/{attr}", self.address)
    }

    /// Display controllers (VGA 0x0300, 3D 0x0302, other 0x0380).
    pub fn is_display(&self) -> bool {
        self.class >> 16 == 0x03
    }
}

pub fn scan(r: &mut Reader) -> Vec<PciFunction> {
    let mut out = Vec::new();
    for address in r.list("/sys/bus/pci/devices") {
        let base = format!("/sys/bus/pci/devices/{address}");
        let vendor = r.parsed(&format!("{base}/vendor"), parse::parse_hex_id);
        let device = r.parsed(&format!("{base}/device"), parse::parse_hex_id);
        let (Some(vendor), Some(device)) = (vendor, device) else {
            continue;
        };
        // Only the vendors we detect need the rest; skipping others keeps a big server cheap.
        if ![crate::hwdb::INTEL, crate::hwdb::NVIDIA, crate::hwdb::HABANA].contains(&vendor) {
            continue;
        }
        let class = r.parsed(&format!("{base}/class"), parse::parse_hex_id).unwrap_or(0);
        let driver = r.link_name(&format!("{base}/driver"));
        let numa_node = r.attr(&format!("{base}/numa_node")).and_then(|t| t.parse::<i64>().ok()).unwrap_or(-1);
        out.push(PciFunction { address, vendor, device, class, driver, numa_node });
    }
    out
}
