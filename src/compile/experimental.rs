//! Experimental features: which are on (auto / off / a list), and what each sets on the
//! cluster side — feature gates, a plugin-config ConfigMap. Features that need a host change
//! only print the command; k3d-gpu never runs it.

use super::{CompileError, Context};
use crate::config::{ExperimentalSelection, Feature};
use crate::facts::Vendor;

/// The Kubernetes minor version of the k3s the default node image ships.
pub const NODE_IMAGE_KUBERNETES: (u32, u32) = (1, 37);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FeaturePlan {
    /// Feature gates to pass to every Kubernetes component (`Name=true`).
    pub gates: Vec<String>,
    pub npu_turbo: bool,
}

struct Spec {
    feature: Feature,
    /// Gates and the Kubernetes version that turned them on by default.
    gates: &'static [(&'static str, (u32, u32))],
    /// Beta or GA (on by default or safe to turn on) from this version.
    beta_since: Option<(u32, u32)>,
    /// A host change the feature needs: (what, command). Never run by k3d-gpu.
    host_change: Option<(&'static str, &'static str)>,
}

const SPECS: &[Spec] = &[
    Spec {
        feature: Feature::Dra,
        gates: &[("DynamicResourceAllocation", (1, 34))],
        beta_since: Some((1, 32)),
        host_change: None,
    },
    Spec {
        feature: Feature::ImageVolume,
        gates: &[("ImageVolume", (1, 35))],
        beta_since: Some((1, 33)),
        host_change: None,
    },
    Spec { feature: Feature::NpuTurbo, gates: &[], beta_since: None, host_change: None },
    Spec {
        feature: Feature::SchedExt,
        gates: &[],
        beta_since: None,
        host_change: Some((
            "a sched_ext scheduler on the host",
            "sudo systemctl start scx  # revert: sudo systemctl stop scx",
        )),
    },
    Spec {
        feature: Feature::XeSriov,
        gates: &[],
        beta_since: None,
        host_change: Some((
            "xe SR-IOV VFs",
            "echo 2 | sudo tee /sys/bus/pci/devices/<addr>/sriov_numvfs  # revert: echo 0 | sudo tee …",
        )),
    },
    Spec {
        feature: Feature::ForceProbe,
        gates: &[],
        beta_since: None,
        host_change: Some((
            "a force_probe boot option",
            "see `k3d-gpu doctor` for the exact option; revert by removing it",
        )),
    },
];

/// The Kubernetes version the cluster will run, read from the node image tag when it says
/// (`rancher/k3s:v1.33.1-k3s1`); the default image ships [`NODE_IMAGE_KUBERNETES`].
pub fn kubernetes_version(image: &str) -> Option<(u32, u32)> {
    if image == crate::config::DEFAULT_IMAGE || image.starts_with("cryptoandcoffee/k3d-gpu:") {
        return Some(NODE_IMAGE_KUBERNETES);
    }
    // `repo:tag@sha256:…`: the tag is before the digest.
    let reference = image.split_once('@').map_or(image, |(r, _)| r);
    let tag = reference.rsplit_once(':')?.1;
    let rest = tag.strip_prefix('v')?;
    let mut parts = rest.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

pub fn plan(cx: &mut Context) -> FeaturePlan {
    let version = kubernetes_version(&cx.config.cluster.image);
    if cx.config.sharing.mode == crate::config::IntelGpuMode::Dra {
        match version {
            Some(v) if v < (1, 36) => cx.error(CompileError::new(
                "dra-kubernetes-too-old",
                &["sharing", "mode"],
                format!("DRA mode needs Kubernetes 1.36+, and image {} runs {}.{}", cx.config.cluster.image, v.0, v.1),
                Some("use the default node image (k3s v1.37), or set [sharing] mode = \"plugin\"".to_string()),
            )),
            None => cx.warn(
                "kubernetes-version-unknown",
                Some("cluster.image"),
                format!("cannot tell which Kubernetes {} runs; DRA mode needs 1.36+", cx.config.cluster.image),
            ),
            Some(_) => {}
        }
    }
    let enabled: Vec<Feature> = match &cx.config.experimental.features {
        ExperimentalSelection::Off => Vec::new(),
        ExperimentalSelection::Auto => SPECS
            .iter()
            .filter(|s| s.host_change.is_none())
            .filter(|s| match s.feature {
                Feature::NpuTurbo => cx.is_active(Vendor::Npu),
                _ => s.beta_since.is_some_and(|b| version.is_some_and(|v| v >= b)),
            })
            .map(|s| s.feature)
            .collect(),
        ExperimentalSelection::Only(list) => {
            for feature in list {
                if *feature == Feature::NpuTurbo && !cx.is_active(Vendor::Npu) {
                    cx.error(CompileError::new(
                        "feature-unsupported",
                        &["experimental", "features"],
                        "npu-turbo needs an active NPU, and this host has none",
                        Some("remove npu-turbo from [experimental] features".to_string()),
                    ));
                }
            }
            list.clone()
        }
    };
    let mut out = FeaturePlan::default();
    for spec in SPECS.iter().filter(|s| enabled.contains(&s.feature)) {
        for (gate, default_since) in spec.gates {
            // A gate already on by default in the cluster's Kubernetes is not passed again.
            if version.is_none_or(|v| v < *default_since) {
                out.gates.push(format!("{gate}=true"));
            }
        }
        if let Some((what, command)) = spec.host_change {
            cx.warn(
                "feature-needs-host-change",
                Some("experimental.features"),
                format!("{} needs {what}; k3d-gpu never changes the host: {command}", spec.feature.key()),
            );
        }
    }
    out.npu_turbo = enabled.contains(&Feature::NpuTurbo);
    out.gates.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_versions_from_image_tags() {
        assert_eq!(kubernetes_version("rancher/k3s:v1.33.1-k3s1"), Some((1, 33)));
        assert_eq!(kubernetes_version(crate::config::DEFAULT_IMAGE), Some(NODE_IMAGE_KUBERNETES));
        assert_eq!(kubernetes_version(&format!("rancher/k3s:v1.33.1-k3s1@sha256:{}", "a".repeat(64))), Some((1, 33)));
        assert_eq!(kubernetes_version("my/image:latest"), None);
        assert_eq!(kubernetes_version("my/image"), None);
    }
}
