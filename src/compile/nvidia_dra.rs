//! NVIDIA GPUs through DRA (`[sharing] mode` gives NVIDIA `"dra"`): the NVIDIA DRA driver
//! (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, catalog component `nvidia-gpu-dra`) in place
//! of the device plugin, and its prerequisites checked against the facts before anything is
//! deployed. Upstream's prerequisites for that release (`site/content/docs/prerequisites.md`,
//! the documentation of chart 0.4.1): Kubernetes 1.34.2 or later, NVIDIA driver 565 or later,
//! NVIDIA Container Toolkit 1.18.0 or later, CDI in the container runtime (containerd 2.0 on,
//! which k3s 1.34+ ships), NFD's NVIDIA PCI labels (k3d-gpu's NFD sets them), and for whole-GPU
//! allocation a data-center GPU. Its chart refuses to run beside the NVIDIA device plugin
//! (`templates/validation.yaml`), so `[sharing.nvidia]`, which configures that plugin, is
//! refused here (`nvidia::plan`).

use super::{CompileError, Context};
use crate::config::GpuMode;
use crate::facts::{NvidiaGpu, Vendor};

/// The driver's name, its DeviceClass and the domain of its device attributes.
pub const DRIVER: &str = "gpu.nvidia.com";
/// The release whose prerequisites these are.
pub const RELEASE: &str = "dra-driver-nvidia-gpu v0.4.1";
/// The oldest NVIDIA driver branch it supports for GPU allocation.
pub const MIN_DRIVER_BRANCH: u32 = 565;
/// The oldest NVIDIA Container Toolkit it supports.
pub const MIN_TOOLKIT: (u32, u32) = (1, 18);

/// What kind of board an NVIDIA GPU is, as far as upstream's hardware table cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    DataCenter,
    /// Quadro and RTX workstation boards.
    Workstation,
    /// GeForce and TITAN.
    Consumer,
}

/// The segment of a board by its pci.ids name (`hwdb::nvidia_board`): GeForce and TITAN are
/// consumer boards, Quadro and the `RTX …` professional line workstation boards (its
/// `Server Edition` excepted), the rest of the table data-center parts (Tesla, A100, H100,
/// L4, L40S, B200, …).
pub fn segment_of(board: &str) -> Segment {
    if board.starts_with("GeForce") || board.starts_with("TITAN") {
        Segment::Consumer
    } else if board.starts_with("Quadro") || (board.starts_with("RTX ") && !board.contains("Server Edition")) {
        Segment::Workstation
    } else {
        Segment::DataCenter
    }
}

/// A GPU's board name and segment; `None` when its PCI id is not in the table.
fn board(gpu: &NvidiaGpu) -> Option<(&'static str, Segment)> {
    let (name, _) = crate::hwdb::nvidia_board(gpu.device_id?)?;
    Some((name, segment_of(name)))
}

/// The leading number of a driver version (`580.95.05` → 580).
fn driver_branch(version: &str) -> Option<u32> {
    version.trim().split('.').next()?.parse().ok()
}

/// `1.20.0-1` → (1, 20).
fn toolkit_version(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Why the node image's toolkit (`pinned`, its package version) is too old for the driver;
/// `None` when it is new enough.
fn toolkit_refusal(pinned: &str) -> Option<String> {
    toolkit_version(pinned).is_none_or(|v| v < MIN_TOOLKIT).then(|| {
        format!(
            "the node image's NVIDIA Container Toolkit is {pinned}, and the NVIDIA DRA driver needs {}.{} or later",
            MIN_TOOLKIT.0, MIN_TOOLKIT.1
        )
    })
}

/// Whether NVIDIA GPUs go to the DRA driver in this compile.
pub fn wanted(cx: &Context) -> bool {
    cx.nvidia_mode() == GpuMode::Dra && cx.is_active(Vendor::Nvidia)
}

/// `[sharing] mode` as it is, but with NVIDIA on the plugin path, as the user writes it.
pub fn plugin_mode(cx: &Context) -> String {
    crate::config::SharingMode::PerVendor { intel: cx.intel_mode(), nvidia: GpuMode::Plugin }.toml()
}

/// The hint that keeps every other setting and puts NVIDIA back on the plugin path.
fn plugin_path(cx: &Context) -> String {
    format!("set [sharing] {}: the device plugin serves every NVIDIA GPU", plugin_mode(cx))
}

pub fn check(cx: &mut Context) {
    if !wanted(cx) {
        return;
    }
    let key: &[&str] = &["sharing", "mode"];
    match cx.facts.host.nvidia.driver_version.as_deref() {
        Some(version) => match driver_branch(version) {
            Some(branch) if branch >= MIN_DRIVER_BRANCH => {}
            _ => {
                let hint = plugin_path(cx);
                cx.error(CompileError::new(
                    "nvidia-dra-driver-too-old",
                    key,
                    format!(
                        "the NVIDIA DRA driver ({RELEASE}) needs NVIDIA driver {MIN_DRIVER_BRANCH} or later for GPU allocation, and this host runs {}",
                        crate::escape::one_line(version)
                    ),
                    Some(format!("install driver {MIN_DRIVER_BRANCH} or later, or {hint}")),
                ))
            }
        },
        None => cx.warn(
            "nvidia-driver-version-unknown",
            Some("sharing.mode"),
            format!(
                "the facts do not say which NVIDIA driver runs; the NVIDIA DRA driver needs {MIN_DRIVER_BRANCH} or later (`nvidia-smi` on the host says)"
            ),
        ),
    }
    if cx.config.cluster.provider == crate::config::Provider::K3d {
        if let Some(why) = toolkit_refusal(crate::node_image::NVIDIA_CONTAINER_TOOLKIT_VERSION) {
            cx.error(CompileError::new("nvidia-dra-toolkit-too-old", key, why, Some(plugin_path(cx))));
        }
    } else {
        cx.warn(
            "nvidia-dra-toolkit-unchecked",
            Some("sharing.mode"),
            format!(
                "k3d-gpu cannot see the NVIDIA Container Toolkit on an existing cluster's nodes; the NVIDIA DRA driver needs {}.{} or later with CDI on (`nvidia-ctk --version` on each node)",
                MIN_TOOLKIT.0, MIN_TOOLKIT.1
            ),
        );
    }
    let gpus = cx.facts.host.nvidia.gpus.clone();
    let refused: Vec<String> = gpus
        .iter()
        .filter_map(|g| match board(g)? {
            (_, Segment::DataCenter) => None,
            (name, Segment::Workstation) => Some(format!("{name} ({}, a workstation GPU)", g.pci_address)),
            (name, Segment::Consumer) => Some(format!("{name} ({}, a GeForce-class GPU)", g.pci_address)),
        })
        .collect();
    if !refused.is_empty() {
        let hint = plugin_path(cx);
        cx.error(CompileError::new(
            "nvidia-dra-unsupported-gpu",
            key,
            format!(
                "the NVIDIA DRA driver ({RELEASE}) supports whole-GPU allocation on NVIDIA data-center GPUs only (its prerequisites' hardware table), and this host has {}",
                super::intel::shown(&refused)
            ),
            Some(hint),
        ));
    }
    let unknown: Vec<String> = gpus.iter().filter(|g| board(g).is_none()).map(|g| g.pci_address.clone()).collect();
    if !unknown.is_empty() {
        cx.warn(
            "nvidia-dra-gpu-unknown",
            Some("sharing.mode"),
            format!(
                "cannot tell whether the NVIDIA GPU at {} is a data-center GPU, which the NVIDIA DRA driver needs for whole-GPU allocation: its PCI id is not in k3d-gpu's table",
                unknown.join(", ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boards_fall_into_upstreams_segments() {
        for (board, want) in [
            ("H100 PCIe", Segment::DataCenter),
            ("Tesla T4", Segment::DataCenter),
            ("L40S", Segment::DataCenter),
            ("A2 / A16", Segment::DataCenter),
            ("RTX PRO 6000 Blackwell Server Edition", Segment::DataCenter),
            ("RTX PRO 6000 Blackwell Workstation Edition", Segment::Workstation),
            ("RTX 4000 Ada Generation", Segment::Workstation),
            ("RTX A6000", Segment::Workstation),
            ("Quadro RTX 6000", Segment::Workstation),
            ("GeForce RTX 4090", Segment::Consumer),
            ("TITAN RTX", Segment::Consumer),
        ] {
            assert_eq!(segment_of(board), want, "{board}");
        }
    }

    #[test]
    fn versions_are_read_by_their_leading_numbers() {
        assert_eq!(driver_branch("580.95.05"), Some(580));
        assert_eq!(driver_branch("560.35.03"), Some(560));
        assert_eq!(driver_branch("bogus"), None);
        assert_eq!(toolkit_version("1.20.0-1"), Some((1, 20)));
        assert_eq!(toolkit_version("1.17.8-1"), Some((1, 17)));
    }

    #[test]
    fn a_node_image_toolkit_before_1_18_is_refused() {
        assert!(toolkit_refusal("1.17.8-1").unwrap().contains("1.17.8-1, and the NVIDIA DRA driver needs 1.18"));
        assert!(toolkit_refusal("not-a-version").is_some(), "an unreadable pin is not taken as new enough");
        assert_eq!(toolkit_refusal("1.18.0-1"), None);
        assert_eq!(toolkit_refusal(crate::node_image::NVIDIA_CONTAINER_TOOLKIT_VERSION), None, "the pinned one");
    }
}
