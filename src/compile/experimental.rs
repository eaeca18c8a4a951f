//! Experimental features: which are on (auto / off / a list), and what each sets on the
//! cluster side — feature gates, a plugin-config ConfigMap. Features that need a host change
//! only print the command; k3d-gpu never runs it.

use super::{CompileError, Context};
use crate::config::{ExperimentalSelection, Feature};
use crate::facts::Vendor;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FeaturePlan {
    /// Feature gates to pass to every Kubernetes component (`Name=true`).
    pub gates: Vec<String>,
    /// API group versions the API server must serve (`--runtime-config`): beta APIs are off
    /// by default, so DRA on Kubernetes 1.32/1.33 needs `resource.k8s.io/v1beta1` (and
    /// v1beta2 on 1.33) turned on.
    pub runtime_config: Vec<String>,
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

/// The Kubernetes version the cluster will run, never guessed: the config's
/// `[cluster] kubernetes_version`, else the k3s release of the node image (`K3S_TAG` of the
/// image k3d-gpu builds), else the tag of an upstream k3s image (`rancher/k3s:v1.33.1-k3s1`,
/// whose tag is the k3s release), else unknown. Another prebuilt image's own tag says nothing:
/// builds of one tag have carried different k3s releases.
pub fn kubernetes_version(cluster: &crate::config::Cluster, k3s_tag: Option<&str>) -> Option<(u32, u32)> {
    if let Some(text) = &cluster.kubernetes_version {
        return parse_version(text);
    }
    image_version(cluster, k3s_tag)
}

/// What the node image itself says: its build's K3S_TAG, or a rancher/k3s tag.
fn image_version(cluster: &crate::config::Cluster, k3s_tag: Option<&str>) -> Option<(u32, u32)> {
    match k3s_tag {
        Some(tag) => k3s_tag_version(tag),
        None => cluster.image.as_deref().and_then(k3s_image_version),
    }
}

/// The node image as a sentence's subject.
fn image_name(cluster: &crate::config::Cluster, k3s_tag: Option<&str>) -> String {
    match (&cluster.image, k3s_tag) {
        (Some(image), _) => format!("image {image}"),
        (None, Some(tag)) => format!("the node image (k3s {tag})"),
        (None, None) => "the node image".into(),
    }
}

/// `1.37` or `1.37.1` (a leading `v` allowed) → (1, 37).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let rest = text.trim().strip_prefix('v').unwrap_or(text.trim());
    let mut parts = rest.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    if parts.next().is_some_and(|p| p.parse::<u32>().is_err()) || parts.next().is_some() {
        return None;
    }
    Some((major, minor))
}

/// The version in the tag of `rancher/k3s` (Docker Hub) only.
fn k3s_image_version(image: &str) -> Option<(u32, u32)> {
    // `repo:tag@sha256:…`: the tag is before the digest.
    let reference = image.split_once('@').map_or(image, |(r, _)| r);
    let (repo, tag) = reference.rsplit_once(':')?;
    if !matches!(repo, "rancher/k3s" | "docker.io/rancher/k3s" | "index.docker.io/rancher/k3s") {
        return None;
    }
    k3s_tag_version(tag)
}

/// `v1.33.1-k3s1` → (1, 33).
fn k3s_tag_version(tag: &str) -> Option<(u32, u32)> {
    let rest = tag.strip_prefix('v')?;
    let mut parts = rest.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

pub fn plan(cx: &mut Context) -> FeaturePlan {
    let cluster = &cx.config.cluster;
    let k3s_tag = cx.node_image.as_ref().and_then(|n| n.k3s_tag.clone());
    let k3s_tag = k3s_tag.as_deref();
    if let Some(text) = &cluster.kubernetes_version
        && parse_version(text).is_none()
    {
        cx.error(CompileError::new(
            "bad-kubernetes-version",
            &["cluster", "kubernetes_version"],
            format!("kubernetes_version {text:?} is not a version such as \"1.37\""),
            None,
        ));
    }
    if let (Some(set), Some(tagged)) =
        (cluster.kubernetes_version.as_deref().and_then(parse_version), image_version(cluster, k3s_tag))
        && set != tagged
    {
        cx.error(CompileError::new(
            "kubernetes-version-mismatch",
            &["cluster", "kubernetes_version"],
            format!(
                "kubernetes_version is {}.{}, but {} is k3s {}.{}",
                set.0,
                set.1,
                image_name(cluster, k3s_tag),
                tagged.0,
                tagged.1
            ),
            Some("remove kubernetes_version: the node image's k3s release says it".to_string()),
        ));
    }
    let version = kubernetes_version(cluster, k3s_tag);
    let image = image_name(cluster, k3s_tag);
    if cx.intel_mode() == crate::config::GpuMode::Dra && cx.is_active(Vendor::Intel) {
        match version {
            Some(v) if v < (1, 36) => cx.error(CompileError::new(
                "dra-kubernetes-too-old",
                &["sharing", "mode"],
                format!("DRA mode needs Kubernetes 1.36+, and {image} runs {}.{}", v.0, v.1),
                Some("use a node image with k3s 1.36 or newer, or set [sharing] mode = \"plugin\"".to_string()),
            )),
            None => cx.warn(
                "kubernetes-version-unknown",
                Some("cluster.kubernetes_version"),
                format!(
                    "cannot tell which Kubernetes {image} runs; DRA mode needs 1.36+: set [cluster] kubernetes_version"
                ),
            ),
            Some(_) => {}
        }
    }
    if super::nvidia_dra::wanted(cx) {
        let at_least = "the NVIDIA DRA driver needs Kubernetes 1.34.2 or later";
        match version {
            Some(v) if v < (1, 34) => cx.error(CompileError::new(
                "nvidia-dra-kubernetes-too-old",
                &["sharing", "mode"],
                format!("{at_least}, and {image} runs {}.{}", v.0, v.1),
                Some("use a node image with a newer k3s, or give NVIDIA the plugin path: [sharing] mode = { nvidia = \"plugin\" }".to_string()),
            )),
            Some((1, 34)) => cx.warn(
                "nvidia-dra-kubernetes-patch",
                Some("sharing.mode"),
                format!("{at_least}; {image} runs 1.34, and 1.34.0 and 1.34.1 are too old (check its patch release)"),
            ),
            None => cx.warn(
                "kubernetes-version-unknown",
                Some("cluster.kubernetes_version"),
                format!("cannot tell which Kubernetes {image} runs; {at_least}: set [cluster] kubernetes_version"),
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
                if *feature == Feature::Dra {
                    match version {
                        // Alpha (v1alpha3) before 1.32: nothing k3d-gpu emits is served there.
                        Some(v) if v < (1, 32) => cx.error(CompileError::new(
                            "feature-unsupported",
                            &["experimental", "features"],
                            format!("dra needs Kubernetes 1.32+ (beta), and the cluster runs {}.{}", v.0, v.1),
                            Some("remove dra from [experimental] features, or use a newer k3s".to_string()),
                        )),
                        None => cx.warn(
                            "kubernetes-version-unknown",
                            Some("cluster.kubernetes_version"),
                            "dra: on Kubernetes 1.32/1.33 the beta API must be turned on with runtime-config, which k3d-gpu adds only when it knows the version: set [cluster] kubernetes_version",
                        ),
                        Some(_) => {}
                    }
                }
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
    // Beta API versions are off by default (KEP-3136): DRA's are served only when asked for,
    // until resource.k8s.io/v1 in 1.34.
    if enabled.contains(&Feature::Dra) {
        match version {
            Some((1, 32)) => out.runtime_config.push("resource.k8s.io/v1beta1=true".into()),
            Some((1, 33)) => {
                out.runtime_config.push("resource.k8s.io/v1beta1=true".into());
                out.runtime_config.push("resource.k8s.io/v1beta2=true".into());
            }
            _ => {}
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
    fn kubernetes_versions_are_never_guessed() {
        let cluster = |image: &str, version: Option<&str>| crate::config::Cluster {
            image: Some(image.into()),
            kubernetes_version: version.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(kubernetes_version(&cluster("rancher/k3s:v1.33.1-k3s1", None), None), Some((1, 33)));
        let digest = format!("docker.io/rancher/k3s:v1.33.1-k3s1@sha256:{}", "a".repeat(64));
        assert_eq!(kubernetes_version(&cluster(&digest, None), None), Some((1, 33)));
        // The node image's tag is its own release, not k3s's.
        assert_eq!(kubernetes_version(&cluster("cryptoandcoffee/k3d-gpu:0.1.0", None), None), None);
        assert_eq!(kubernetes_version(&cluster("cryptoandcoffee/k3d-gpu:v1.37.1", None), None), None);
        assert_eq!(kubernetes_version(&cluster("my/image:latest", None), None), None);
        assert_eq!(kubernetes_version(&cluster("cryptoandcoffee/k3d-gpu:0.1.0", Some("1.35")), None), Some((1, 35)));
        // The node image k3d-gpu builds: its K3S_TAG.
        let ours = crate::config::Cluster::default();
        assert_eq!(kubernetes_version(&ours, Some("v1.36.2-k3s1")), Some((1, 36)));
        assert_eq!(kubernetes_version(&ours, None), None);
        assert_eq!(parse_version("v1.37.1"), Some((1, 37)));
        assert_eq!(parse_version("1.37.x"), None);
        assert_eq!(parse_version("latest"), None);
    }
}
