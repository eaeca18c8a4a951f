//! Intel GPUs: display-class PCI functions from vendor 8086, their DRM card and render node,
//! engines, device nodes and GuC/HuC state. Other vendors' DRM devices are ignored.

use std::collections::BTreeMap;

use super::Reader;
use super::pci::PciFunction;
use crate::facts::{IntelGpu, MicroController};
use crate::hwdb;
use crate::parse;

/// DRM nodes by PCI address: `(card, render node)`.
pub type DrmNodes = BTreeMap<String, (Option<String>, Option<String>)>;

pub fn drm_nodes(r: &mut Reader) -> DrmNodes {
    let mut map = DrmNodes::new();
    for name in r.list("/sys/class/drm") {
        let is_card = name.starts_with("card") && name[4..].chars().all(|c| c.is_ascii_digit()) && name.len() > 4;
        let is_render = name.starts_with("renderD") && name.len() > 7 && name[7..].chars().all(|c| c.is_ascii_digit());
        if !is_card && !is_render {
            continue;
        }
        let Some(address) = r.link_name(&format!("/sys/class/drm/{name}/device")) else {
            continue;
        };
        let entry = map.entry(address).or_default();
        if is_card {
            entry.0.get_or_insert(name);
        } else {
            entry.1.get_or_insert(name);
        }
    }
    map
}

pub fn intel_gpus(r: &mut Reader, pci: &[PciFunction]) -> Vec<IntelGpu> {
    let drm = drm_nodes(r);
    let mut out = Vec::new();
    for f in pci.iter().filter(|f| f.vendor == hwdb::INTEL && f.is_display()) {
        let (card, render_node) = drm.get(&f.address).cloned().unwrap_or_default();
        let platform = hwdb::gpu_platform(f.device);
        let engines = match (&card, f.driver.as_deref()) {
            (Some(card), Some("i915")) => r.list(&format!("/sys/class/drm/{card}/engine")),
            (Some(card), Some("xe")) => xe_engines(r, card),
            _ => Vec::new(),
        };
        let mut device_nodes = Vec::new();
        for node in [&card, &render_node].into_iter().flatten() {
            if let Some(n) = r.device_node(&format!("/dev/dri/{node}")) {
                device_nodes.push(n);
            }
        }
        let (guc, huc) = match (&f.driver, &card) {
            (Some(_), Some(card)) => micro_controllers(r, &f.address, card),
            _ => (None, None),
        };
        out.push(IntelGpu {
            pci_address: f.address.clone(),
            pci_id: format!("{:04x}:{:04x}", f.vendor, f.device),
            device_id: f.device,
            driver: f.driver.clone(),
            card,
            render_node: render_node.filter(|_| f.driver.is_some()),
            integrated: hwdb::is_integrated(&f.address, f.device),
            platform: platform.map(|p| p.name.to_string()),
            xmx: hwdb::xmx(f.device),
            engines,
            device_nodes,
            guc,
            huc,
        });
    }
    out
}

/// xe has no per-engine directory on the card; it lists engine classes per GT.
fn xe_engines(r: &mut Reader, card: &str) -> Vec<String> {
    let base = format!("/sys/class/drm/{card}/device");
    let mut classes = Vec::new();
    for tile in r.list(&base).into_iter().filter(|n| n.starts_with("tile")) {
        for gt in r.list(&format!("{base}/{tile}")).into_iter().filter(|n| n.starts_with("gt")) {
            classes.extend(r.list(&format!("{base}/{tile}/{gt}/engines")));
        }
    }
    classes.sort();
    classes.dedup();
    classes
}

/// GuC and HuC from debugfs: `dri/<PCI address>` on current kernels, `dri/<minor>` on older
/// ones; the first GT that has the record. Only root can read debugfs, so a refusal is
/// "not checked", not a finding.
fn micro_controllers(r: &mut Reader, address: &str, card: &str) -> (Option<MicroController>, Option<MicroController>) {
    let minor = card.trim_start_matches("card");
    for dir in [address, minor] {
        let base = format!("/sys/kernel/debug/dri/{dir}");
        let gts = r.list_if_permitted(&base);
        // On xe and Meteor Lake the HuC lives on the media GT, so each record is the first
        // GT that has it.
        let mut guc = None;
        let mut huc = None;
        for gt in gts.iter().filter(|n| n.starts_with("gt")) {
            if guc.is_none() {
                guc = read_uc(r, &format!("{base}/{gt}/uc/guc_info"));
            }
            if huc.is_none() {
                huc = read_uc(r, &format!("{base}/{gt}/uc/huc_info"));
            }
        }
        if guc.is_some() || huc.is_some() {
            return (guc, huc);
        }
    }
    (None, None)
}

fn read_uc(r: &mut Reader, path: &str) -> Option<MicroController> {
    let text = r.text_if_permitted(path)?;
    match parse::parse_uc_info(&text) {
        // No status: the driver does not use this microcontroller (e.g. GuC disabled).
        Ok(info) if info.status.is_none() => None,
        Ok(info) => Some(MicroController {
            firmware: info.firmware,
            status: info.status.unwrap_or_default(),
            wanted: info.wanted,
            found: info.found,
            evidence: path.to_string(),
        }),
        Err(e) => {
            r.bad_value(path, &e);
            None
        }
    }
}
