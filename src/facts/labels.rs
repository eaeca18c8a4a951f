//! Node labels (and annotations) a host earns, per the reference launcher's table.

use std::collections::BTreeMap;

use super::{Detected, Host, Vendor, Xmx};

/// /proc/cpuinfo flag → NFD's cpu-cpuid name. Labelled whenever the flag is present.
const CPUID_LABELS: &[(&str, &str)] = &[
    ("avx_vnni", "AVXVNNI"),
    ("avx512f", "AVX512F"),
    ("avx512_vnni", "AVX512VNNI"),
    ("avx512_bf16", "AVX512BF16"),
    ("vaes", "VAES"),
    ("gfni", "GFNI"),
    ("sha_ni", "SHA"),
    ("ibt", "CETIBT"),
    ("user_shstk", "CETSS"),
];

/// The AMX flags, labelled when the amx vendor is active.
const AMX_LABELS: &[(&str, &str)] = &[("amx_tile", "AMXTILE"), ("amx_bf16", "AMXBF16"), ("amx_int8", "AMXINT8")];

const CPUID_PREFIX: &str = "feature.node.kubernetes.io/cpu-cpuid.";

pub type Labels = BTreeMap<String, String>;

/// Returns `(labels, annotations)`.
pub fn node_labels(host: &Host, detected: &[Detected]) -> (Labels, Labels) {
    let active = |v: Vendor| detected.iter().any(|d| d.vendor == v);
    let mut labels = Labels::new();
    let mut annotations = Labels::new();
    let mut set = |k: &str, v: String| {
        labels.insert(k.to_string(), v);
    };
    let has_flag = |flag: &str| host.cpu.flags.iter().any(|f| f == flag);

    for (flag, name) in CPUID_LABELS {
        if has_flag(flag) {
            set(&format!("{CPUID_PREFIX}{name}"), "true".into());
        }
    }
    if active(Vendor::Amx) {
        for (flag, name) in AMX_LABELS {
            if has_flag(flag) {
                set(&format!("{CPUID_PREFIX}{name}"), "true".into());
            }
        }
    }

    if active(Vendor::Intel) {
        let gpus: Vec<_> = host.intel_gpus.iter().filter(|g| g.usable()).collect();
        if gpus.iter().any(|g| g.xmx == Xmx::Yes) {
            set("gpu.intel.com/xmx", "true".into());
        } else if !gpus.is_empty() && gpus.iter().all(|g| g.xmx == Xmx::No) {
            set("gpu.intel.com/xmx", "false".into());
        }
        let i915: Vec<_> = gpus.iter().filter(|g| g.driver.as_deref() == Some("i915")).collect();
        if !i915.is_empty() {
            // Per GPU, not summed: a pod gets one GPU, so the label says what one offers.
            let count = |prefix: &str| {
                i915.iter().map(|g| g.engines.iter().filter(|e| engine_class(e) == prefix).count()).max().unwrap_or(0)
            };
            set("gpu.intel.com/media-vcs", count("vcs").to_string());
            set("gpu.intel.com/media-vecs", count("vecs").to_string());
        }
    }

    if active(Vendor::Npu) {
        set("intel.feature.node.kubernetes.io/npu", "true".into());
        let npu = host.npus.iter().find(|n| n.device_node.is_some());
        if let Some(generation) = npu.and_then(|n| n.generation.clone()) {
            set("k3d-gpu.io/npu.gen", generation);
        }
        if let Some(node) = npu.and_then(|n| n.device_node.as_ref()) {
            set("k3d-gpu.io/npu-render-gid", node.gid.to_string());
        }
    }
    for (vendor, key) in [(Vendor::Dsa, "dsa"), (Vendor::Iaa, "iaa"), (Vendor::Qat, "qat")] {
        if active(vendor) {
            set(&format!("intel.feature.node.kubernetes.io/{key}"), "true".into());
        }
    }
    if active(Vendor::Hybrid) {
        set("k3d-gpu.io/hybrid-cpu", "true".into());
        if !host.cpu.favored.is_empty() {
            // A cpulist has commas, which a label value cannot hold.
            annotations.insert("k3d-gpu.io/favored-cpus".into(), host.cpu.favored.clone());
        }
    }
    if active(Vendor::Numa) {
        set("k3d-gpu.io/numa-nodes", host.numa.nodes.len().to_string());
        if let Some(snc) = host.numa.snc {
            set("k3d-gpu.io/snc", snc.to_string());
        }
    }
    if active(Vendor::Wsl) {
        set("k3d-gpu.io/wsl-gpu", "true".into());
    }
    (labels, annotations)
}

/// `vcs1` → `vcs`; xe class names come without a number already.
fn engine_class(engine: &str) -> &str {
    engine.trim_end_matches(|c: char| c.is_ascii_digit())
}
