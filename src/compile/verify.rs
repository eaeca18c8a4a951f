//! Verify nodes: checks after apply that fail loudly — each active vendor's resource
//! allocatable > 0 (ResourceSlices in DRA mode), each component's workloads rolled out, and
//! each RuntimeClass a workload runs under that the cluster itself provides (k3s's `nvidia`).

use serde_json::json;

use super::components::{Wanted, object_id};
use super::intel::IntelPlan;
use super::nvidia::NvidiaPlan;
use super::{Context, Resource, ResourceKind};
use crate::catalog::INTEL_GPU_PLUGIN_ARGS;
use crate::config::GpuMode;
use crate::facts::Vendor;

pub fn resources(
    cx: &mut Context,
    wanted: &mut [Wanted],
    intel: &IntelPlan,
    nvidia: &NvidiaPlan,
    out: &mut Vec<Resource>,
) {
    for w in wanted.iter_mut() {
        for r in &w.component.rollouts {
            let object = object_id(&json!({
                "apiVersion": "apps/v1",
                "kind": r.kind,
                "metadata": { "namespace": r.namespace, "name": r.name },
            }));
            let id = format!("verify/rollout/{}/{}/{}", r.kind, r.namespace, r.name);
            if !w.object_ids.contains(&object) {
                cx.warn(
                    "rollout-not-in-manifest",
                    None,
                    format!(
                        "component {} verifies {} {}/{}, which its manifest does not hold",
                        w.component.name, r.kind, r.namespace, r.name
                    ),
                );
                continue;
            }
            out.push(Resource::verify(
                id.clone(),
                Some(w.component.name.clone()),
                json!({ "check": "rollout", "kind": r.kind, "namespace": r.namespace, "name": r.name }),
                vec![object],
            ));
            w.rollout_ids.push(id);
        }
    }
    let wanted = &*wanted;
    runtime_classes(out);

    let dra = cx.intel_mode() == GpuMode::Dra;
    let nvidia_dra = super::nvidia_dra::wanted(cx);
    let active = cx.active.clone();
    for detected in &active {
        for resource in &detected.resources {
            let intel_gpu = detected.vendor == Vendor::Intel;
            // A DRA driver publishes ResourceSlices: nothing is advertised as allocatable.
            if (intel_gpu && dra) || (detected.vendor == Vendor::Nvidia && nvidia_dra) {
                continue;
            }
            let providers: Vec<&Wanted> =
                wanted.iter().filter(|w| w.component.provides_resources.contains(resource)).collect();
            if providers.is_empty() {
                cx.warn(
                    "resource-without-component",
                    None,
                    format!(
                        "{} is active but no wanted component provides {resource}; nothing will advertise it",
                        detected.vendor
                    ),
                );
                continue;
            }
            let mut check = allocatable(resource, &providers);
            // Shared NVIDIA GPUs: each is advertised `replicas` times, so fewer means the
            // plugin did not read its config.
            if detected.vendor == Vendor::Nvidia && resource == super::nvidia::RESOURCE && nvidia.replicas > 1 {
                check.spec["min"] = json!(detected.devices.max(1).saturating_mul(nvidia.replicas));
            }
            out.push(check);
        }
    }
    if intel.monitoring() {
        let providers: Vec<&Wanted> =
            wanted.iter().filter(|w| w.component.configure.iter().any(|h| h.hook == INTEL_GPU_PLUGIN_ARGS)).collect();
        if !providers.is_empty() {
            out.push(allocatable("gpu.intel.com/monitoring", &providers));
        }
    }
    if dra && cx.is_active(Vendor::Intel) {
        let driver =
            SlicesOf { driver: "gpu.intel.com", label: super::DRA_NODE_LABEL, what: "the Intel GPU DRA driver" };
        slices(cx, wanted, driver, intel.gpus.len(), "use mode = \"plugin\"", out);
    }
    if nvidia_dra {
        let driver = SlicesOf {
            driver: super::nvidia_dra::DRIVER,
            label: super::NVIDIA_DRA_NODE_LABEL,
            what: "the NVIDIA GPU DRA driver",
        };
        let gpus = cx.facts.host.nvidia.gpus.len();
        slices(cx, wanted, driver, gpus, "give NVIDIA the plugin: mode = { nvidia = \"plugin\" }", out);
    }
}

/// A DRA driver as its ResourceSlice check names it: the driver, the node label the component
/// that deploys it provides, and its name in words.
struct SlicesOf {
    driver: &'static str,
    label: &'static str,
    what: &'static str,
}

/// Apply waits until `of`'s driver has published at least `min_devices` devices, after the
/// component that provides its node label; without such a component the config cannot work.
fn slices(
    cx: &mut Context,
    wanted: &[Wanted],
    of: SlicesOf,
    min_devices: usize,
    other_way: &str,
    out: &mut Vec<Resource>,
) {
    let providers: Vec<&Wanted> =
        wanted.iter().filter(|w| w.component.provides_labels.iter().any(|l| l == of.label)).collect();
    if providers.is_empty() {
        cx.error(super::CompileError::new(
            "dra-without-driver",
            &["sharing", "mode"],
            format!("DRA mode is set, but no component in the catalog provides {}", of.what),
            Some(format!("add a component that provides label={} (docs/stdlib.md), or {other_way}", of.label)),
        ));
        return;
    }
    let mut deps = dependencies(&providers);
    deps.push(format!("node-label/{}", of.label));
    deps.sort();
    out.push(Resource::verify(
        format!("verify/resourceslices/{}", of.driver),
        providers.first().map(|w| w.component.name.clone()),
        json!({ "check": "resourceslices", "driver": of.driver, "min_devices": min_devices }),
        deps,
    ));
}

/// A RuntimeClass that a workload names and no object of ours creates is the cluster's: k3s
/// ships `nvidia` (and more) in its packaged `runtimes` manifest. We never create or own it
/// (apply would refuse k3s's copy, and a copy of ours would be a second writer), but a pod
/// under a missing class never starts, so verify checks that it exists.
fn runtime_classes(out: &mut Vec<Resource>) {
    let Some(cluster) = out.iter().find(|r| r.kind == ResourceKind::Cluster).map(|r| r.id.clone()) else { return };
    let objects = || out.iter().filter(|r| r.kind == ResourceKind::Object);
    let ours: Vec<&str> = objects()
        .filter(|r| r.spec["kind"] == "RuntimeClass")
        .filter_map(|r| r.spec["metadata"]["name"].as_str())
        .collect();
    let mut needed: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for r in objects() {
        if let Some(name) = r.spec["spec"]["template"]["spec"]["runtimeClassName"].as_str()
            && !ours.contains(&name)
        {
            needed.entry(name.to_string()).or_default().push(r.id.clone());
        }
    }
    for (name, users) in needed {
        let component = out.iter().find(|r| users.contains(&r.id)).and_then(|r| r.component.clone());
        out.push(Resource::verify(
            format!("verify/runtimeclass/{name}"),
            component,
            json!({ "check": "runtimeclass", "name": name }),
            vec![cluster.clone()],
        ));
    }
}

fn dependencies(providers: &[&Wanted]) -> Vec<String> {
    let mut deps = Vec::new();
    for w in providers {
        // Wait on the rollout when the component has one, else on its objects being applied.
        if w.rollout_ids.is_empty() {
            deps.extend(w.object_ids.iter().cloned());
        } else {
            deps.extend(w.rollout_ids.iter().cloned());
        }
    }
    deps.sort();
    deps.dedup();
    deps
}

fn allocatable(resource: &str, providers: &[&Wanted]) -> Resource {
    Resource::verify(
        format!("verify/allocatable/{resource}"),
        providers.first().map(|w| w.component.name.clone()),
        json!({ "check": "allocatable", "resource": resource, "min": 1 }),
        dependencies(providers),
    )
}
