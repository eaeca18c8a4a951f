//! Xeon built-in accelerators: DSA and IAA (idxd devices and work queues) and QAT (PFs with
//! SR-IOV VFs, vfio-pci, IOMMU).

use std::collections::BTreeMap;

use super::Reader;
use super::pci::PciFunction;
use crate::facts::{Idxd, Qat, QatPf, WorkQueue};
use crate::hwdb;
use crate::parse;

pub fn idxd(r: &mut Reader, pci: &[PciFunction]) -> (Idxd, Idxd) {
    let names = r.list("/sys/bus/dsa/devices");
    let mut dsa = Idxd { pci_functions_per_node: per_node(pci, |id| id == hwdb::DSA_DEVICE_ID), ..Idxd::default() };
    let mut iaa = Idxd { pci_functions_per_node: per_node(pci, |id| id == hwdb::IAA_DEVICE_ID), ..Idxd::default() };
    for name in &names {
        if name.starts_with("dsa") {
            dsa.devices.push(name.clone());
        } else if name.starts_with("iax") {
            iaa.devices.push(name.clone());
        }
    }
    for name in names.iter().filter(|n| n.starts_with("wq")) {
        // wqX.Y belongs to device X: dsaX or iaxX, whichever exists.
        let index = name[2..].split('.').next().unwrap_or_default();
        let (target, dev_dir, device) = if dsa.devices.contains(&format!("dsa{index}")) {
            (&mut dsa, "/dev/dsa", format!("dsa{index}"))
        } else if iaa.devices.contains(&format!("iax{index}")) {
            (&mut iaa, "/dev/iax", format!("iax{index}"))
        } else {
            continue;
        };
        let base = format!("/sys/bus/dsa/devices/{name}");
        let node = format!("{dev_dir}/{name}");
        let device_node = r.exists(&node).then_some(node);
        target.work_queues.push(WorkQueue {
            name: name.clone(),
            device,
            kind: r.attr(&format!("{base}/type")),
            mode: r.attr(&format!("{base}/mode")),
            state: r.attr(&format!("{base}/state")),
            device_node,
        });
    }
    (dsa, iaa)
}

pub fn qat(r: &mut Reader, pci: &[PciFunction], modules: &[String]) -> Qat {
    let mut pfs = Vec::new();
    for f in pci.iter().filter(|f| f.vendor == hwdb::INTEL) {
        let Some(model) = hwdb::qat_pf_model(f.device) else {
            continue;
        };
        let vfs = match r.text(&f.path("sriov_numvfs")) {
            Some(text) => match parse::parse_u64(&text).and_then(|n| {
                u32::try_from(n).map_err(|_| parse::ParseError(format!("{n} VFs is more than any device has")))
            }) {
                Ok(n) => n,
                Err(e) => {
                    r.bad_value(&f.path("sriov_numvfs"), &e);
                    0
                }
            },
            None => 0,
        };
        let services = r.attr(&f.path("qat/cfg_services"));
        pfs.push(QatPf {
            pci_address: f.address.clone(),
            device_id: f.device,
            model: model.to_string(),
            driver: f.driver.clone(),
            vfs,
            services,
        });
    }
    if pfs.is_empty() {
        return Qat::default();
    }
    let iommu_enabled = !r.list("/sys/class/iommu").is_empty() || !r.list("/sys/kernel/iommu_groups").is_empty();
    Qat {
        pfs,
        vfio_pci_loaded: super::system::loaded(modules, "vfio_pci"),
        iommu_enabled,
        pci_functions_per_node: per_node(pci, |id| hwdb::qat_pf_model(id).is_some()),
    }
}

fn per_node(pci: &[PciFunction], matches: impl Fn(u32) -> bool) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for f in pci.iter().filter(|f| f.vendor == hwdb::INTEL && matches(f.device)) {
        *counts.entry(f.numa_node.to_string()).or_insert(0) += 1;
    }
    counts
}
