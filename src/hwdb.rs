//! What k3d-gpu knows about PCI ids: Intel GPU platforms (name, XMX, kernel floor, GuC
//! submission), NPU generations, QAT and Gaudi models.
//!
//! XMX follows Mesa's `has_systolic` per platform; kernel floors follow the reference
//! launcher's support table. An id missing here is "unknown", never guessed.

use serde::{Deserialize, Serialize};

/// yes / no / unknown, from the device-id table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Xmx {
    Yes,
    No,
    Unknown,
}

/// PCI vendor ids.
pub const INTEL: u32 = 0x8086;
pub const NVIDIA: u32 = 0x10de;
pub const HABANA: u32 = 0x1da3;

/// The PCI address an Intel integrated GPU always has.
pub const IGPU_ADDRESS: &str = "0000:00:02.0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    I915,
    Xe,
}

impl Driver {
    pub fn name(self) -> &'static str {
        match self {
            Driver::I915 => "i915",
            Driver::Xe => "xe",
        }
    }
}

#[derive(Debug)]
pub struct GpuPlatform {
    pub name: &'static str,
    pub ids: &'static [u32],
    pub integrated: bool,
    pub xmx: bool,
    /// The driver that supports it without force_probe.
    pub driver: Driver,
    /// First kernel that binds it without `force_probe`; `None` = any kernel we support, and
    /// `Some((u32::MAX, 0))` = no released kernel yet (always needs force_probe).
    pub min_kernel: Option<(u32, u32)>,
    /// i915 submits through the GuC (true from Alder Lake-P and Raptor Lake-S on, and always
    /// with xe); on Alder Lake-S it only authenticates the HuC, so a GuC fault only warns.
    pub guc_submission: bool,
}

const ALWAYS_FORCE_PROBE: Option<(u32, u32)> = Some((u32::MAX, 0));

pub static GPU_PLATFORMS: &[GpuPlatform] = &[
    GpuPlatform {
        name: "Tiger Lake",
        ids: &[0x9a40, 0x9a49, 0x9a60, 0x9a68, 0x9a70, 0x9a78],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: false,
    },
    GpuPlatform {
        name: "Alder Lake-S",
        ids: &[0x4680, 0x4682, 0x4688, 0x468a, 0x468b, 0x4690, 0x4692, 0x4693],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: false,
    },
    GpuPlatform {
        name: "Alder Lake-P",
        ids: &[
            0x4626, 0x4628, 0x462a, 0x46a0, 0x46a1, 0x46a3, 0x46a6, 0x46a8, 0x46aa, 0x46b0, 0x46b1, 0x46b3, 0x46c0,
            0x46c1, 0x46c3,
        ],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: true,
    },
    GpuPlatform {
        name: "Alder Lake-N",
        ids: &[0x46d0, 0x46d1, 0x46d2, 0x46d3, 0x46d4],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: true,
    },
    GpuPlatform {
        name: "Raptor Lake-S",
        ids: &[0xa780, 0xa781, 0xa782, 0xa783, 0xa788, 0xa789, 0xa78a, 0xa78b],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: true,
    },
    GpuPlatform {
        name: "Raptor Lake-P",
        ids: &[0xa720, 0xa721, 0xa7a0, 0xa7a1, 0xa7a8, 0xa7a9, 0xa7aa, 0xa7ab, 0xa7ac, 0xa7ad],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: true,
    },
    GpuPlatform {
        name: "Meteor Lake",
        ids: &[0x7d40, 0x7d45, 0x7d55, 0x7d60, 0x7dd5],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: Some((6, 7)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Arrow Lake-S/U",
        ids: &[0x7d41, 0x7d67],
        integrated: true,
        xmx: false,
        driver: Driver::I915,
        min_kernel: Some((6, 9)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Arrow Lake-H",
        ids: &[0x7d51, 0x7dd1],
        integrated: true,
        xmx: true,
        driver: Driver::I915,
        min_kernel: Some((6, 9)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Lunar Lake",
        ids: &[0x6420, 0x64a0, 0x64b0],
        integrated: true,
        xmx: true,
        driver: Driver::Xe,
        min_kernel: Some((6, 12)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Panther Lake",
        ids: &[0xb080, 0xb081, 0xb082, 0xb083, 0xb084, 0xb085, 0xb086, 0xb087, 0xb08f, 0xb090, 0xb0a0, 0xb0b0],
        integrated: true,
        xmx: true,
        driver: Driver::Xe,
        min_kernel: Some((6, 17)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Wildcat Lake",
        ids: &[0xfd80, 0xfd81],
        integrated: true,
        xmx: true,
        driver: Driver::Xe,
        min_kernel: Some((6, 18)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "DG1 (Iris Xe MAX)",
        ids: &[0x4905, 0x4906, 0x4907, 0x4908, 0x4909],
        integrated: false,
        xmx: false,
        driver: Driver::I915,
        min_kernel: None,
        guc_submission: false,
    },
    GpuPlatform {
        name: "Arc Alchemist (DG2)",
        ids: &[
            0x5690, 0x5691, 0x5692, 0x5693, 0x5694, 0x5695, 0x5696, 0x5697, 0x56a0, 0x56a1, 0x56a2, 0x56a3, 0x56a4,
            0x56a5, 0x56a6, 0x56b0, 0x56b1, 0x56b2, 0x56b3, 0x56ba, 0x56bb, 0x56bc, 0x56bd,
        ],
        integrated: false,
        xmx: true,
        driver: Driver::I915,
        min_kernel: Some((6, 2)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Data Center GPU Flex (ATS-M)",
        ids: &[0x56c0, 0x56c1, 0x56c2],
        integrated: false,
        xmx: true,
        driver: Driver::I915,
        min_kernel: Some((6, 2)),
        guc_submission: true,
    },
    GpuPlatform {
        name: "Data Center GPU Max (Ponte Vecchio)",
        ids: &[0x0bd0, 0x0bd4, 0x0bd5, 0x0bd6, 0x0bd7, 0x0bd8, 0x0bd9, 0x0bda, 0x0bdb],
        integrated: false,
        xmx: true,
        driver: Driver::I915,
        min_kernel: ALWAYS_FORCE_PROBE,
        guc_submission: true,
    },
    GpuPlatform {
        name: "Arc Battlemage (BMG)",
        ids: &[
            0xe202, 0xe209, 0xe20b, 0xe20c, 0xe20d, 0xe210, 0xe211, 0xe212, 0xe215, 0xe216, 0xe220, 0xe221, 0xe222,
            0xe223,
        ],
        integrated: false,
        xmx: true,
        driver: Driver::Xe,
        min_kernel: Some((6, 12)),
        guc_submission: true,
    },
];

pub fn gpu_platform(device_id: u32) -> Option<&'static GpuPlatform> {
    GPU_PLATFORMS.iter().find(|p| p.ids.contains(&device_id))
}

pub fn xmx(device_id: u32) -> Xmx {
    match gpu_platform(device_id) {
        Some(p) if p.xmx => Xmx::Yes,
        Some(_) => Xmx::No,
        None => Xmx::Unknown,
    }
}

/// Whether a GPU is the integrated one: at the iGPU's PCI slot and not a known discrete
/// part (a discrete card passed through to a VM can land at 00:02.0).
pub fn is_integrated(pci_address: &str, device_id: u32) -> bool {
    pci_address == IGPU_ADDRESS && gpu_platform(device_id).is_none_or(|p| p.integrated)
}

/// NPU generation (its firmware family) by PCI device id, with the kernel that first drives it.
pub struct NpuModel {
    pub id: u32,
    pub generation: &'static str,
    pub min_kernel: Option<(u32, u32)>,
}

pub static NPU_MODELS: &[NpuModel] = &[
    NpuModel { id: 0x7d1d, generation: "37xx", min_kernel: Some((6, 3)) },
    NpuModel { id: 0xad1d, generation: "37xx", min_kernel: None },
    NpuModel { id: 0x643e, generation: "40xx", min_kernel: None },
    NpuModel { id: 0xb03e, generation: "50xx", min_kernel: Some((6, 13)) },
    NpuModel { id: 0xfd3e, generation: "50xx", min_kernel: None },
];

pub fn npu_model(device_id: u32) -> Option<&'static NpuModel> {
    NPU_MODELS.iter().find(|m| m.id == device_id)
}

/// The NPU firmware the serving image's user-space driver needs at least (linux-npu-driver
/// v1.35.0, built 2026-06-30; older firmware fails with MAPPED_INFERENCE_VERSION).
pub const NPU_FIRMWARE_MIN_DATE: &str = "2026-06-30";
pub const NPU_FIRMWARE_RELEASE: &str = "v1.35.0";

/// A QAT physical function the kernel has an in-tree driver for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QatModel {
    /// PCI device id of the PF.
    pub id: u32,
    pub model: &'static str,
    /// The name the driver registers under (`/sys/bus/pci/drivers/NAME`): the device
    /// family's name, not the module's.
    pub driver: &'static str,
    /// The module that drives it; 401xx and 402xx are parts of the 4xxx family.
    pub module: &'static str,
}

pub static QAT_MODELS: &[QatModel] = &[
    QatModel { id: 0x37c8, model: "C62x", driver: "c6xx", module: "qat_c62x" },
    QatModel { id: 0x4940, model: "4xxx", driver: "4xxx", module: "qat_4xxx" },
    QatModel { id: 0x4942, model: "401xx", driver: "4xxx", module: "qat_4xxx" },
    QatModel { id: 0x4944, model: "402xx", driver: "4xxx", module: "qat_4xxx" },
    QatModel { id: 0x4946, model: "420xx", driver: "420xx", module: "qat_420xx" },
    QatModel { id: 0x4948, model: "6xxx", driver: "6xxx", module: "qat_6xxx" },
];

pub fn qat_pf(device_id: u32) -> Option<&'static QatModel> {
    QAT_MODELS.iter().find(|m| m.id == device_id)
}

pub fn qat_pf_model(device_id: u32) -> Option<&'static str> {
    qat_pf(device_id).map(|m| m.model)
}

/// Whether a PF's bound driver is a QAT driver (one of the names in [`QAT_MODELS`]).
pub fn is_qat_driver(driver: &str) -> bool {
    QAT_MODELS.iter().any(|m| m.driver == driver)
}

/// The QAT modules, each once.
pub fn qat_modules() -> impl Iterator<Item = &'static str> {
    QAT_MODELS
        .iter()
        .enumerate()
        .filter(|(i, m)| QAT_MODELS[..*i].iter().all(|o| o.module != m.module))
        .map(|(_, m)| m.module)
}

pub const DSA_DEVICE_ID: u32 = 0x0b25;
pub const IAA_DEVICE_ID: u32 = 0x0cfe;

pub fn gaudi_model(device_id: u32) -> Option<&'static str> {
    match device_id {
        0x0001 => Some("Gaudi"),
        0x1020 => Some("Gaudi 2"),
        0x1060..=0x1062 => Some("Gaudi 3"),
        _ => None,
    }
}

/// NVIDIA GPU memory in GiB by PCI device id, for the agent's CUDA choice (a model has to fit).
/// sysfs does not say how much memory an NVIDIA GPU has, so an id missing here is "unknown"
/// and `[agent] device = "auto"` does not pick it (`device = "cuda"` forces it). Names per
/// pci.ids; sizes are the boards' published memory.
const NVIDIA_MEMORY_GIB: &[(u32, u32, &str)] = &[
    (0x1eb8, 16, "Tesla T4"),
    (0x2204, 24, "GeForce RTX 3090"),
    (0x2331, 80, "H100 PCIe"),
    (0x2684, 24, "GeForce RTX 4090"),
    (0x27b2, 20, "RTX 4000 Ada Generation"),
    (0x27b8, 24, "L4"),
];

/// An NVIDIA GPU's memory in GiB, `None` when the id is not in the table.
pub fn nvidia_memory_gib(device_id: u32) -> Option<u32> {
    NVIDIA_MEMORY_GIB.iter().find(|(id, _, _)| *id == device_id).map(|(_, gib, _)| *gib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_id_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for platform in GPU_PLATFORMS {
            for id in platform.ids {
                assert!(seen.insert(*id), "{id:#06x} listed twice");
            }
        }
    }

    #[test]
    fn qat_drivers_and_modules() {
        assert!(is_qat_driver("4xxx") && is_qat_driver("c6xx") && is_qat_driver("420xx") && is_qat_driver("6xxx"));
        assert!(!is_qat_driver("qat_4xxx"), "a module name is not a driver name");
        assert!(!is_qat_driver("vfio-pci"));
        assert_eq!(qat_pf(0x4942).map(|m| m.module), Some("qat_4xxx"));
        assert_eq!(qat_modules().collect::<Vec<_>>(), ["qat_c62x", "qat_4xxx", "qat_420xx", "qat_6xxx"]);
    }

    #[test]
    fn xmx_and_integration() {
        assert_eq!(xmx(0xa780), Xmx::No);
        assert_eq!(xmx(0xe20b), Xmx::Yes);
        assert_eq!(xmx(0x1234), Xmx::Unknown);
        assert!(is_integrated(IGPU_ADDRESS, 0xa780));
        assert!(is_integrated(IGPU_ADDRESS, 0x1234));
        assert!(!is_integrated(IGPU_ADDRESS, 0x56a0), "a discrete card passed through stays discrete");
        assert!(!is_integrated("0000:03:00.0", 0xe20b));
    }
}
