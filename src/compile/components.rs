//! Catalog components into Kubernetes object resources: which are wanted, the managed-by
//! label, configure hooks (Rust rules that edit args), and dependencies — namespaces and CRDs
//! first, node labels a workload selects on, and `after` between components.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::experimental::FeaturePlan;
use super::intel::IntelPlan;
use super::nvidia::NvidiaPlan;
use super::{Change, CompileError, Context, Resource, ResourceKind};
use crate::catalog::{
    BALLOONS_HOST_HINTS, Component, INTEL_GPU_PLUGIN_ARGS, NVIDIA_PLUGIN_CONFIG, NVIDIA_VIRTUAL_GPUS,
};

pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "k3d-gpu");
pub const COMPONENT_LABEL: &str = "k3d-gpu.io/component";

/// Namespaces every cluster has; nothing creates them.
pub const BUILT_IN_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// A wanted component and the ids of its resources.
pub struct Wanted<'a> {
    pub component: &'a Component,
    pub object_ids: Vec<String>,
    /// Its rollout checks (`verify/rollout/…`), filled in by the verify stage.
    pub rollout_ids: Vec<String>,
}

/// `k8s/<group|core>/<Kind>/<namespace>/<name>`, or without the namespace when cluster-scoped.
pub fn object_id(object: &Value) -> String {
    let api = object["apiVersion"].as_str().unwrap_or_default();
    let group = api.rsplit_once('/').map_or("core", |(g, _)| g);
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("k8s/{group}/{kind}/{ns}/{name}"),
        None => format!("k8s/{group}/{kind}/{name}"),
    }
}

pub fn resources<'a>(
    cx: &mut Context<'a>,
    cluster_id: &str,
    intel: &IntelPlan,
    nvidia: &NvidiaPlan,
    features: &FeaturePlan,
    out: &mut Vec<Resource>,
) -> Vec<Wanted<'a>> {
    let catalog = cx.catalog;
    let wanted: Vec<&Component> = catalog.components.values().filter(|c| cx.wants(&c.when)).collect();
    // A component of the user's own that this host never wants is worth a word: its gate may
    // be a typo, or the config may be on the wrong machine.
    let unused: Vec<&Component> = catalog.components.values().filter(|c| c.user && !cx.wants(&c.when)).collect();
    for c in unused {
        cx.warn(
            "component-not-wanted",
            Some("components"),
            format!("your component {} is not used on this host: its `when` does not hold", c.name),
        );
    }
    // One node advertises the accelerators (cluster::accelerator_node): the components that
    // advertise devices run only where k3s set the label.
    let one_node = out
        .iter()
        .find(|r| r.kind == ResourceKind::Cluster)
        .is_some_and(|r| r.spec["node_labels"].as_array().is_some_and(|l| !l.is_empty()));
    let mut objects: Vec<(String, &Component, Value)> = Vec::new();
    for c in &wanted {
        let advertises = !c.provides_resources.is_empty()
            || c.provides_labels.iter().any(|l| l == super::DRA_NODE_LABEL)
            || c.accelerator_node;
        let manifest = match c.objects.get() {
            Ok(objects) => objects,
            Err(e) => {
                cx.error(CompileError::new(
                    "component-manifest",
                    &["components"],
                    format!("component {}: {e}", c.name),
                    Some(format!("fix {} ({})", c.manifest, c.origin)),
                ));
                continue;
            }
        };
        for object in manifest {
            let mut object = object.clone();
            let labels = &mut object["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            labels[MANAGED_BY.0] = json!(MANAGED_BY.1);
            labels[COMPONENT_LABEL] = json!(c.name);
            // Only workloads (a pod template); pointer_mut never creates what is missing.
            if one_node
                && advertises
                && let Some(Value::Object(pod)) = object.pointer_mut("/spec/template/spec")
            {
                let selector = pod.entry("nodeSelector").or_insert_with(|| json!({}));
                if let Value::Object(selector) = selector {
                    selector.insert(super::ACCELERATOR_NODE_LABEL.into(), json!("true"));
                }
            }
            for hook in &c.configure {
                if hook.hook == INTEL_GPU_PLUGIN_ARGS && !intel.plugin_args.is_empty() {
                    append_args(&mut object, &hook.container, &intel.plugin_args);
                }
                if hook.hook == NVIDIA_PLUGIN_CONFIG {
                    super::nvidia::configure(&mut object, &hook.container, nvidia);
                }
                if hook.hook == NVIDIA_VIRTUAL_GPUS && nvidia.config.is_some() {
                    set_env(&mut object, &hook.container, "KUBERNETES_VIRTUAL_GPUS", "true");
                }
                if hook.hook == BALLOONS_HOST_HINTS {
                    let hints = super::balloons::HostHints::of(cx.config, &cx.facts.host.cpu);
                    hints.apply(&mut object, &hook.container, set_env);
                }
            }
            crate::images::pin_object(&mut object, &catalog.images, &mut cx.images);
            objects.push((object_id(&object), c, object));
        }
    }
    // unlocked_images runs in compile(), after every workload has pinned its images.

    // The NVIDIA plugin's config file, owned by the component whose hook reads it; the
    // workload waits for it (a pod whose ConfigMap volume is missing does not start).
    let mut nvidia_config = None;
    if nvidia.config.is_some() {
        match wanted.iter().find(|c| c.configure.iter().any(|h| h.hook == NVIDIA_PLUGIN_CONFIG)) {
            Some(c) => {
                let c: &'a Component = c;
                nvidia_config = super::nvidia::config_map(nvidia, &c.name, cluster_id).map(|r| (c.name.as_str(), r))
            }
            None => cx.error(CompileError::new(
                "nvidia-sharing-without-plugin",
                &["sharing", "nvidia"],
                "[sharing.nvidia] is set, but no wanted component reads the NVIDIA plugin's config file",
                Some(format!("a component needs `configure {NVIDIA_PLUGIN_CONFIG} container=…` (docs/stdlib.md)")),
            )),
        }
    }

    // Who provides what, for dependencies: namespaces, CRDs by (group, kind), node labels.
    let namespaces: BTreeMap<String, String> = objects
        .iter()
        .filter(|(_, _, o)| o["kind"] == "Namespace")
        .map(|(id, _, o)| (o["metadata"]["name"].as_str().unwrap_or_default().to_string(), id.clone()))
        .collect();
    let crds: BTreeMap<(String, String), String> = objects
        .iter()
        .filter(|(_, _, o)| o["kind"] == "CustomResourceDefinition")
        .map(|(id, _, o)| {
            let group = o["spec"]["group"].as_str().unwrap_or_default().to_string();
            let kind = o["spec"]["names"]["kind"].as_str().unwrap_or_default().to_string();
            ((group, kind), id.clone())
        })
        .collect();
    let by_component: BTreeMap<&str, Vec<String>> = objects.iter().fold(BTreeMap::new(), |mut map, (id, c, _)| {
        map.entry(c.name.as_str()).or_default().push(id.clone());
        map
    });
    let labels: Vec<String> = out.iter().filter(|r| r.kind == ResourceKind::NodeLabel).map(|r| r.id.clone()).collect();

    let mut seen = BTreeMap::new();
    for (id, c, object) in &objects {
        if let Some(other) = seen.insert(id.clone(), c.name.clone()) {
            cx.error(CompileError::new(
                "object-owned-twice",
                &["components"],
                format!("{id} is in both component {other} and component {}", c.name),
                Some("one object, one owner: drop it from one of the manifests".to_string()),
            ));
        }
        let mut deps = vec![cluster_id.to_string()];
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            match namespaces.get(ns) {
                Some(ns_id) => deps.push(ns_id.clone()),
                None if !BUILT_IN_NAMESPACES.contains(&ns) => {
                    cx.error(CompileError::new(
                        "namespace-missing",
                        &["components"],
                        format!(
                            "{id} (component {}) lives in namespace {ns}, which no wanted component creates",
                            c.name
                        ),
                        Some(format!("add a Namespace {ns} to share/{}", c.manifest)),
                    ));
                }
                None => {}
            }
        }
        let api = object["apiVersion"].as_str().unwrap_or_default();
        if let Some((group, _)) = api.rsplit_once('/')
            && let Some(crd) = crds.get(&(group.to_string(), object["kind"].as_str().unwrap_or_default().to_string()))
        {
            deps.push(crd.clone());
        }
        for key in node_selector_keys(object) {
            let label = format!("node-label/{key}");
            if labels.contains(&label) {
                deps.push(label);
            }
        }
        for before in &c.after {
            if let Some(ids) = by_component.get(before.as_str()) {
                deps.extend(ids.iter().cloned());
            }
        }
        if let Some((owner, config)) = &nvidia_config
            && *owner == c.name.as_str()
            && object.pointer("/spec/template").is_some()
        {
            deps.push(config.id.clone());
        }
        deps.retain(|d| d != id);
        deps.sort();
        deps.dedup();
        out.push(Resource {
            id: id.clone(),
            kind: ResourceKind::Object,
            change: Change::InPlace,
            component: Some(c.name.clone()),
            spec: object.clone(),
            depends_on: deps,
        });
    }
    if features.npu_turbo {
        out.push(npu_turbo_config_map(cluster_id));
    }
    let mut by_component = by_component;
    if let Some((owner, config)) = nvidia_config {
        by_component.entry(owner).or_default().push(config.id.clone());
        out.push(config);
    }
    wanted
        .into_iter()
        .map(|c| Wanted {
            component: c,
            object_ids: by_component.get(c.name.as_str()).cloned().unwrap_or_default(),
            rollout_ids: Vec::new(),
        })
        .collect()
}

/// An image deployed by tag is a warning, or an error under `[policy] images = "pinned"`:
/// a tag can be re-pushed, so what runs would change without the plan changing.
pub(super) fn unlocked_images(cx: &mut Context) {
    let unlocked: Vec<String> = cx
        .images
        .values()
        .filter(|u| u.source == crate::images::Source::Unlocked)
        .map(|u| u.reference.clone())
        .collect();
    for image in unlocked {
        if cx.config.policy.images == crate::config::ImagePolicy::Pinned {
            cx.error(CompileError::new(
                "image-unlocked",
                &["policy", "images"],
                format!("image {image} has no digest, and the policy wants every image pinned"),
                Some("run `k3d-gpu images lock` to pin it in images.lock beside the config".to_string()),
            ));
        } else {
            cx.warn(super::warnings::UNLOCKED, Some("policy.images"), super::warnings::unlocked_text(&image));
        }
    }
}

fn node_selector_keys(object: &Value) -> Vec<String> {
    object["spec"]["template"]["spec"]["nodeSelector"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn append_args(object: &mut Value, container: &str, args: &[String]) {
    let Some(containers) = object["spec"]["template"]["spec"]["containers"].as_array_mut() else { return };
    for c in containers.iter_mut().filter(|c| c["name"] == container) {
        let list = &mut c["args"];
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(items) = list.as_array_mut() {
            items.extend(args.iter().map(|a| json!(a)));
        }
    }
}

/// Sets `name=value` in container `container`'s env (replacing an entry of that name).
fn set_env(object: &mut Value, container: &str, name: &str, value: &str) {
    let Some(containers) = object.pointer_mut("/spec/template/spec/containers").and_then(Value::as_array_mut) else {
        return;
    };
    for c in containers.iter_mut().filter(|c| c["name"] == container) {
        if !c["env"].is_array() {
            c["env"] = json!([]);
        }
        if let Some(env) = c["env"].as_array_mut() {
            env.retain(|e| e["name"] != name);
            env.push(json!({ "name": name, "value": value }));
        }
    }
}

/// The OpenVINO plugin config that turns on the NPU turbo property for workloads that mount
/// it; a cluster-side option only.
fn npu_turbo_config_map(cluster_id: &str) -> Resource {
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "k3d-gpu-openvino-npu",
            "namespace": "kube-system",
            "labels": { MANAGED_BY.0: MANAGED_BY.1, COMPONENT_LABEL: "experimental-npu-turbo" },
        },
        "data": { "plugin_config.json": "{\"NPU\": {\"NPU_TURBO\": \"YES\"}}\n" },
    });
    Resource {
        id: object_id(&object),
        kind: ResourceKind::Object,
        change: Change::InPlace,
        component: None,
        spec: object,
        depends_on: vec![cluster_id.to_string()],
    }
}
