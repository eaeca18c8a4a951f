//! The GPU half of what `doctor --perf` reads: each Intel GPU's frequency limits (i915's
//! `gt_*_freq_mhz` under the DRM card, xe's `device/tile0/gt0/freq0/*`), each discrete GPU's
//! largest PCI BAR (Resizable BAR), whether the NVIDIA persistence daemon runs, and the
//! bridges above each NVIDIA GPU (the peer-to-peer path). Read through the same [`Reader`] as
//! the rest of detection, so `facts capture` copies these files.

use serde::Serialize;

use super::Reader;
use crate::facts::Host;

/// The pid file nvidia-persistenced writes (the unit files NVIDIA ships name it as
/// `PIDFile=`); `/run` is `/var/run` on every distribution we support.
pub const PERSISTENCED_PID: &str = "/run/nvidia-persistenced/nvidia-persistenced.pid";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GpuTuning {
    pub freq: Vec<GpuFreq>,
    pub bars: Vec<Bar>,
    /// Whether nvidia-persistenced runs; `None` on a host without NVIDIA GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistenced: Option<bool>,
    /// Each NVIDIA GPU and the bridges above it, nearest first.
    pub nvidia_paths: Vec<(String, Vec<String>)>,
}

/// Which sysfs layout a GPU's frequency files follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FreqLayout {
    /// i915: `/sys/class/drm/cardN/gt_{min,max,boost,RP0,RP1,RPn}_freq_mhz`
    /// (drivers/gpu/drm/i915/gt/intel_gt_sysfs_pm.c).
    I915,
    /// xe: `/sys/class/drm/cardN/device/tile0/gt0/freq0/{min,max,rp0,rpe,rpn}_freq`
    /// (drivers/gpu/drm/xe/xe_gt_freq.c); no waitboost file.
    Xe,
}

impl FreqLayout {
    /// The file holding `what` (`min`, `max`, `boost`, `rp0`, `rp1`, `rpn`) in this layout.
    pub fn file(self, what: &str) -> Option<&'static str> {
        Some(match (self, what) {
            (FreqLayout::I915, "min") => "gt_min_freq_mhz",
            (FreqLayout::I915, "max") => "gt_max_freq_mhz",
            (FreqLayout::I915, "boost") => "gt_boost_freq_mhz",
            (FreqLayout::I915, "rp0") => "gt_RP0_freq_mhz",
            (FreqLayout::I915, "rp1") => "gt_RP1_freq_mhz",
            (FreqLayout::I915, "rpn") => "gt_RPn_freq_mhz",
            (FreqLayout::Xe, "min") => "min_freq",
            (FreqLayout::Xe, "max") => "max_freq",
            (FreqLayout::Xe, "rp0") => "rp0_freq",
            // xe calls RP1 the efficient frequency, RPe.
            (FreqLayout::Xe, "rp1") => "rpe_freq",
            (FreqLayout::Xe, "rpn") => "rpn_freq",
            _ => return None,
        })
    }
}

/// One Intel GPU's frequency limits, in MHz.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuFreq {
    pub pci_address: String,
    pub what: String,
    pub layout: FreqLayout,
    /// The directory holding the files, as a host path.
    pub dir: String,
    pub min: Option<u32>,
    pub max: Option<u32>,
    pub boost: Option<u32>,
    pub rp0: Option<u32>,
    pub rp1: Option<u32>,
    pub rpn: Option<u32>,
}

/// One discrete GPU's largest memory BAR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    pub pci_address: String,
    pub what: String,
    pub largest_bytes: u64,
    /// The GPU's memory when known (nvidia-smi's answer saved by `facts capture`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vram_mib: Option<u64>,
}

/// The largest region in a PCI `resource` file (`start end flags` per line, hex).
pub fn largest_bar(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
            let (start, end) = (w.next()??, w.next()??);
            (end > start).then(|| end - start + 1)
        })
        .max()
}

pub(super) fn read(r: &mut Reader, inventory: &Host) -> GpuTuning {
    let mut t = GpuTuning::default();
    for g in &inventory.intel_gpus {
        let what = g.platform.clone().unwrap_or_else(|| format!("Intel GPU {}", g.pci_id));
        if let Some(card) = &g.card {
            let layout = match g.driver.as_deref() {
                Some("i915") => Some((FreqLayout::I915, format!("/sys/class/drm/{card}"))),
                Some("xe") => Some((FreqLayout::Xe, format!("/sys/class/drm/{card}/device/tile0/gt0/freq0"))),
                _ => None,
            };
            if let Some((layout, dir)) = layout {
                let mut mhz = |w: &str| layout.file(w).and_then(|f| r.attr(&format!("{dir}/{f}"))?.parse().ok());
                let f = GpuFreq {
                    pci_address: g.pci_address.clone(),
                    what: what.clone(),
                    layout,
                    min: mhz("min"),
                    max: mhz("max"),
                    boost: mhz("boost"),
                    rp0: mhz("rp0"),
                    rp1: mhz("rp1"),
                    rpn: mhz("rpn"),
                    dir,
                };
                if f.max.is_some() || f.rp0.is_some() {
                    t.freq.push(f);
                }
            }
        }
        if !g.integrated {
            bar(r, &mut t, &g.pci_address, what, None);
        }
    }
    for g in &inventory.nvidia.gpus {
        let what = g.model.clone().unwrap_or_else(|| "NVIDIA GPU".into());
        bar(r, &mut t, &g.pci_address, what, g.memory_mib);
        let mut bridges = Vec::new();
        let mut at = g.pci_address.clone();
        while let Some(up) = super::perf::parent_bridge(r, &at) {
            bridges.push(up.clone());
            at = up;
        }
        t.nvidia_paths.push((g.pci_address.clone(), bridges));
    }
    if !inventory.nvidia.gpus.is_empty() {
        t.persistenced =
            Some(r.exists(PERSISTENCED_PID) || r.exists("/var/run/nvidia-persistenced/nvidia-persistenced.pid"));
    }
    t
}

fn bar(r: &mut Reader, t: &mut GpuTuning, addr: &str, what: String, vram_mib: Option<u64>) {
    if let Some(largest_bytes) = r.text(&format!("/sys/bus/pci/devices/{addr}/resource")).and_then(|s| largest_bar(&s))
    {
        t.bars.push(Bar { pci_address: addr.to_string(), what, largest_bytes, vram_mib });
    }
}

/// Where the kernel looks for `file` (a path under the firmware root), in its order
/// (drivers/base/firmware_loader/main.c): `_request_firmware` tries the plain name in every
/// `fw_path` directory (updates/<release>, updates, <release>, base), then `.zst` in each,
/// then `.xz` in each, so a plain file in the base directory wins over a compressed one
/// under updates/.
pub fn firmware_candidates(release: Option<&str>, file: &str) -> Vec<String> {
    let mut dirs = Vec::new();
    if let Some(release) = release {
        dirs.push(format!("/lib/firmware/updates/{release}"));
    }
    dirs.push("/lib/firmware/updates".to_string());
    if let Some(release) = release {
        dirs.push(format!("/lib/firmware/{release}"));
    }
    dirs.push("/lib/firmware".to_string());
    ["", ".zst", ".xz"].iter().flat_map(|suffix| dirs.iter().map(move |d| format!("{d}/{file}{suffix}"))).collect()
}

/// The first of [`firmware_candidates`] that exists on the host: the file the kernel loads.
pub fn find_firmware(r: &mut Reader, release: Option<&str>, file: &str) -> Option<String> {
    firmware_candidates(release, file).into_iter().find(|path| r.exists(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Suffix first, then directory, as `_request_firmware` does.
    #[test]
    fn firmware_is_looked_up_plain_everywhere_before_compressed() {
        let c = firmware_candidates(Some("6.17.0"), "xe/bmg_guc_70.bin");
        assert_eq!(c.len(), 12);
        assert_eq!(c[0], "/lib/firmware/updates/6.17.0/xe/bmg_guc_70.bin");
        assert_eq!(c[3], "/lib/firmware/xe/bmg_guc_70.bin");
        assert_eq!(c[4], "/lib/firmware/updates/6.17.0/xe/bmg_guc_70.bin.zst");
        assert_eq!(c[11], "/lib/firmware/xe/bmg_guc_70.bin.xz");
    }

    #[test]
    fn the_largest_bar_is_read_from_the_resource_table() {
        let text = "0x00000000a0000000 0x00000000a0ffffff 0x0000000000040200\n\
                    0x0000006000000000 0x00000063ffffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
        assert_eq!(largest_bar(text), Some(16 << 30));
        assert_eq!(largest_bar("junk\n0x10 0x0f 0x0\n"), None, "unparsable and empty lines count for nothing");
    }

    #[test]
    fn each_layout_names_its_own_files() {
        assert_eq!(FreqLayout::I915.file("rp1"), Some("gt_RP1_freq_mhz"));
        assert_eq!(FreqLayout::Xe.file("rp1"), Some("rpe_freq"));
        assert_eq!(FreqLayout::Xe.file("boost"), None);
    }
}
