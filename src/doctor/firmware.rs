//! `doctor`: the firmware files an Intel GPU's kernel driver will request, per platform, and
//! whether the host has them. A card whose linux-firmware lacks its GuC passes every other
//! check and fails only when the driver probes it (xe refuses the device without a GuC) or
//! when the first job is submitted. Pure: [`NEEDS`] is data, the host's answer (which files
//! exist, from [`crate::detect::perf_gpu::find_firmware`]) comes in, findings go out.
//!
//! The file names are the drivers' own firmware tables: `drivers/gpu/drm/xe/xe_uc_fw.c`
//! (`XE_GUC_FIRMWARE_DEFS`, `XE_HUC_FIRMWARE_DEFS`, `XE_GSC_FIRMWARE_DEFS`; a GSC file is named
//! after the minor of its compatibility version, hence `_1`),
//! `drivers/gpu/drm/i915/gt/uc/intel_uc_fw.c` (`INTEL_GUC_FIRMWARE_DEFS`,
//! `INTEL_HUC_FIRMWARE_DEFS`, `INTEL_GSC_FIRMWARE_DEFS`) and
//! `drivers/gpu/drm/i915/display/intel_dmc.c` (`*_DMC_PATH`, chosen by display version and
//! shared by xe's display). The only torvalds/linux copies in reach are old:
//! `xe_uc_fw.c` at 26a22952c855 confirms `xe/lnl_guc_70.bin` and the `i915/` names xe uses
//! for Meteor Lake, DG2 and Alder Lake, but predates the Battlemage and Panther Lake rows and
//! the Lunar Lake HuC/GSC; its `intel_uc_fw.c` (013005d961f7) and `intel_dmc.c`
//! (0188be507b97) predate Meteor Lake. Every row was therefore read from mainline copies:
//! gregkh/linux `xe_uc_fw.c` at 42445de17655 and `intel_dmc.c` at 2606dfd97134, and
//! Kingxukai/linux `intel_uc_fw.c` at 0291023e7330. danayer/linux-7.1.5 (2a2e4b12a853), read
//! before, agrees on every row but is a patched fork (its xe table adds a DG2 HuC). The
//! NPU's firmware (`drivers/accel/ivpu/ivpu_fw.c`) is checked by `facts::rules` already
//! (`npu-firmware`).

use crate::facts::{Finding, Level};

/// One file a driver requests at probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Under the firmware root: `xe/bmg_guc_70.bin`.
    pub file: &'static str,
    /// `GuC`, `HuC`, `GSC`, `DMC`.
    pub what: &'static str,
    /// How bad its absence is: without the GuC, xe does not bind the device and i915 runs
    /// no GuC submission; without the HuC, media decode; without the DMC, display power
    /// states (compute is unaffected).
    pub level: Level,
    /// The file the driver requests when `file` is missing (i915's `dmc_fallback_path`:
    /// Alder Lake-P's `adlp_dmc_ver2_16.bin`), if any.
    pub fallback: Option<&'static str>,
}

impl Need {
    /// The names the driver requests, in its order.
    pub fn files(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.file).chain(self.fallback)
    }
}

const fn need(file: &'static str, what: &'static str, level: Level) -> Need {
    Need { file, what, level, fallback: None }
}

/// Alder Lake-P's DMC (Raptor Lake-P is an Alder Lake-P to i915): `adlp_dmc.bin`, else the
/// legacy `adlp_dmc_ver2_16.bin` (intel_dmc.c `ADLP_DMC_FALLBACK_PATH`).
const ADLP_DMC: Need = Need { fallback: Some("i915/adlp_dmc_ver2_16.bin"), ..need("i915/adlp_dmc.bin", "DMC", Info) };

use Level::{Fail, Info, Warn};

/// The files per platform (the names `hwdb::GPU_PLATFORMS` uses), for the driver that
/// platform binds to by default.
pub const NEEDS: &[(&str, &[Need])] = &[
    (
        "Arc Battlemage (BMG)",
        &[
            need("xe/bmg_guc_70.bin", "GuC", Fail),
            need("xe/bmg_huc.bin", "HuC", Warn),
            need("i915/bmg_dmc.bin", "DMC", Info),
        ],
    ),
    (
        "Lunar Lake",
        &[
            need("xe/lnl_guc_70.bin", "GuC", Fail),
            need("xe/lnl_huc.bin", "HuC", Warn),
            need("xe/lnl_gsc_1.bin", "GSC", Warn),
            need("i915/xe2lpd_dmc.bin", "DMC", Info),
        ],
    ),
    (
        "Panther Lake",
        &[
            need("xe/ptl_guc_70.bin", "GuC", Fail),
            need("xe/ptl_huc.bin", "HuC", Warn),
            need("xe/ptl_gsc_1.bin", "GSC", Warn),
            need("i915/xe3lpd_dmc.bin", "DMC", Info),
        ],
    ),
    (
        "Meteor Lake",
        &[
            need("i915/mtl_guc_70.bin", "GuC", Warn),
            need("i915/mtl_huc_gsc.bin", "HuC", Warn),
            need("i915/mtl_gsc_1.bin", "GSC", Warn),
            need("i915/mtl_dmc.bin", "DMC", Info),
        ],
    ),
    (
        "Arrow Lake-S/U",
        &[
            need("i915/mtl_guc_70.bin", "GuC", Warn),
            need("i915/mtl_huc_gsc.bin", "HuC", Warn),
            need("i915/mtl_gsc_1.bin", "GSC", Warn),
            need("i915/mtl_dmc.bin", "DMC", Info),
        ],
    ),
    (
        "Arrow Lake-H",
        &[
            need("i915/mtl_guc_70.bin", "GuC", Warn),
            need("i915/mtl_huc_gsc.bin", "HuC", Warn),
            need("i915/mtl_gsc_1.bin", "GSC", Warn),
            need("i915/mtl_dmc.bin", "DMC", Info),
        ],
    ),
    (
        "Arc Alchemist (DG2)",
        &[
            need("i915/dg2_guc_70.bin", "GuC", Warn),
            need("i915/dg2_huc_gsc.bin", "HuC", Warn),
            need("i915/dg2_dmc_ver2_08.bin", "DMC", Info),
        ],
    ),
    (
        "Data Center GPU Flex (ATS-M)",
        &[need("i915/dg2_guc_70.bin", "GuC", Warn), need("i915/dg2_huc_gsc.bin", "HuC", Warn)],
    ),
    ("Alder Lake-P", &[need("i915/adlp_guc_70.bin", "GuC", Warn), need("i915/tgl_huc.bin", "HuC", Warn), ADLP_DMC]),
    ("Raptor Lake-P", &[need("i915/adlp_guc_70.bin", "GuC", Warn), need("i915/tgl_huc.bin", "HuC", Warn), ADLP_DMC]),
    (
        "Alder Lake-S",
        &[
            need("i915/tgl_guc_70.bin", "GuC", Warn),
            need("i915/tgl_huc.bin", "HuC", Warn),
            need("i915/adls_dmc_ver2_01.bin", "DMC", Info),
        ],
    ),
    (
        "Raptor Lake-S",
        &[
            need("i915/tgl_guc_70.bin", "GuC", Warn),
            need("i915/tgl_huc.bin", "HuC", Warn),
            need("i915/adls_dmc_ver2_01.bin", "DMC", Info),
        ],
    ),
];

/// The files `platform` needs; empty for a platform not in the table.
pub fn needs(platform: &str) -> &'static [Need] {
    NEEDS.iter().find(|(p, _)| *p == platform).map_or(&[], |(_, n)| n)
}

/// Where each distribution ships these files.
const PACKAGES: &str =
    "linux-firmware (Ubuntu), firmware-misc-nonfree (Debian), intel-gpu-firmware (Fedora), linux-firmware-intel (Arch)";

/// The findings for one GPU: `found` holds, for each of its needs, where the file was found
/// (a host path, maybe `.zst`/`.xz`) or `None`.
pub fn findings(pci_address: &str, platform: &str, found: &[(Need, Option<String>)]) -> Vec<Finding> {
    let addr = crate::escape::one_line(pci_address);
    let mut out = Vec::new();
    for (need, at) in found {
        if at.is_some() {
            continue;
        }
        out.push(
            Finding::new(
                need.level,
                "firmware-missing",
                format!(
                    "{platform} at {addr}: the driver will request {} ({} firmware) and /lib/firmware has none (not as .zst or .xz either)",
                    need.file, need.what
                ),
                format!("/lib/firmware/{}{{,.zst,.xz}} (also under updates/ and the kernel's release directory)", need.file),
            )
            .with_fix(format!("install a linux-firmware release that ships {} ({PACKAGES}), then reboot", need.file)),
        );
    }
    if out.is_empty() && !found.is_empty() {
        let files = found.iter().map(|(n, _)| n.file).collect::<Vec<_>>().join(", ");
        out.push(Finding::new(
            Level::Info,
            "firmware-present",
            format!("{platform} at {addr}: every firmware file its driver requests is installed"),
            format!("/lib/firmware: {files}"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_platform_in_the_table_is_a_known_platform() {
        for (platform, needs) in NEEDS {
            assert!(crate::hwdb::GPU_PLATFORMS.iter().any(|p| p.name == *platform), "{platform}");
            assert!(needs.iter().any(|n| n.what == "GuC"), "{platform} has no GuC");
        }
    }

    /// Alder Lake-P and Raptor Lake-P's DMC is found under its legacy name too, as i915
    /// falls back to it; other needs have one name.
    #[test]
    fn the_adlp_dmc_has_its_legacy_fallback() {
        for platform in ["Alder Lake-P", "Raptor Lake-P"] {
            let dmc = needs(platform).iter().find(|n| n.what == "DMC").unwrap();
            assert_eq!(
                dmc.files().collect::<Vec<_>>(),
                ["i915/adlp_dmc.bin", "i915/adlp_dmc_ver2_16.bin"],
                "{platform}"
            );
        }
        let guc = needs("Arc Battlemage (BMG)").iter().find(|n| n.what == "GuC").unwrap();
        assert_eq!(guc.files().count(), 1);
    }

    #[test]
    fn a_missing_guc_on_battlemage_fails_and_a_present_one_passes() {
        let table = [(None, Some(Level::Fail)), (Some("/lib/firmware/xe/bmg_guc_70.bin.zst".to_string()), None)];
        for (at, want) in table {
            let found: Vec<(Need, Option<String>)> = needs("Arc Battlemage (BMG)")
                .iter()
                .map(|n| (*n, if n.what == "GuC" { at.clone() } else { Some(format!("/lib/firmware/{}", n.file)) }))
                .collect();
            let f = findings("0000:03:00.0", "Arc Battlemage (BMG)", &found);
            let missing: Vec<Level> = f.iter().filter(|x| x.code == "firmware-missing").map(|x| x.level).collect();
            assert_eq!(missing.first().copied(), want, "{f:#?}");
        }
        assert!(needs("Tiger Lake").is_empty());
    }
}
