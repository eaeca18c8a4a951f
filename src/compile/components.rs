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
    let meta = &object["metadata"];
    object_id_of(
        object["apiVersion"].as_str(),
        object["kind"].as_str(),
        meta["namespace"].as_str(),
        meta["name"].as_str(),
    )
}

/// [`object_id`] from the fields it is made of, for a reader that has looked them up already.
pub fn object_id_of(
    api_version: Option<&str>,
    kind: Option<&str>,
    namespace: Option<&str>,
    name: Option<&str>,
) -> String {
    let group = api_version.unwrap_or_default().rsplit_once('/').map_or("core", |(g, _)| g);
    let kind = kind.unwrap_or_default();
    let name = name.unwrap_or_default();
    match namespace {
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
    let objects = deployed_objects(cx, &wanted, one_accelerator_node(out), intel, nvidia);
    // unlocked_images runs in compile(), after every workload has pinned its images.
    let nvidia_config = nvidia_config(cx, &wanted, nvidia, cluster_id);
    let providers = Providers::of(&objects, out);
    let mut seen = BTreeMap::new();
    // By value: each object moves into its resource (a copy of every manifest object was a
    // sixth of a `validate`).
    for (id, c, object) in objects {
        if let Some(other) = seen.insert(id.clone(), c.name.clone()) {
            cx.error(CompileError::new(
                "object-owned-twice",
                &["components"],
                format!("{id} is in both component {other} and component {}", c.name),
                Some("one object, one owner: drop it from one of the manifests".to_string()),
            ));
        }
        let mut deps = vec![cluster_id.to_string()];
        match providers.namespace(&id, c, &object) {
            Ok(ns) => deps.extend(ns),
            Err(e) => cx.error(e),
        }
        deps.extend(providers.crd(&object));
        deps.extend(providers.node_labels(&object));
        deps.extend(providers.after(c));
        // Every workload that reads the config file waits for it (the plugin owns it; the MPS
        // control daemon reads it too).
        if let Some((_, config)) = &nvidia_config
            && c.configure.iter().any(|h| h.hook == NVIDIA_PLUGIN_CONFIG)
            && object.pointer("/spec/template").is_some()
        {
            deps.push(config.id.clone());
        }
        deps.retain(|d| *d != id);
        deps.sort();
        deps.dedup();
        out.push(Resource {
            id,
            kind: ResourceKind::Object,
            change: Change::InPlace,
            component: Some(c.name.clone()),
            spec: object,
            depends_on: deps,
        });
    }
    if features.npu_turbo {
        out.push(npu_turbo_config_map(cluster_id));
    }
    let mut by_component = providers.by_component;
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

/// Every wanted component's manifest objects as deployed: labelled, configured by its hooks,
/// images pinned; with their ids. A manifest that does not parse is an error.
fn deployed_objects<'a>(
    cx: &mut Context,
    wanted: &[&'a Component],
    one_node: bool,
    intel: &IntelPlan,
    nvidia: &NvidiaPlan,
) -> Vec<(String, &'a Component, Value)> {
    let mut objects = Vec::new();
    let hints = super::balloons::HostHints::of(cx.config, &cx.facts.host.cpu);
    // The wanted components' CRDs only: another component's manifest stays unparsed.
    let crd_scopes: BTreeMap<(String, String), bool> = wanted
        .iter()
        .flat_map(|c| c.objects.plurals())
        .map(|(group, kind, _, namespaced)| ((group, kind), namespaced))
        .collect();
    for c in wanted {
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
        for (index, object) in manifest.iter().enumerate() {
            if let Some(e) = namespace_missing(c, index, object, &crd_scopes) {
                cx.error(e);
                continue;
            }
            // One node advertises the accelerators (cluster::accelerator_node): the components
            // that advertise devices run only where k3s set the label.
            let mut object = labelled(object, &c.name, one_node && advertises(c));
            configure(&mut object, &c.configure, intel, nvidia, &hints);
            crate::images::pin_object(&mut object, &cx.catalog.images, &mut cx.images);
            objects.push((object_id(&object), *c, object));
        }
    }
    objects
}

/// A namespaced object that names no namespace: the real API server serves it only under a
/// namespace's URL, so apply would meet a 404 halfway. Refused at compile (so `validate`
/// says it), naming the file and line. A kind whose scope neither k8s-openapi nor a CRD of
/// the catalog says is left to apply, which asks discovery.
fn namespace_missing(
    c: &Component,
    index: usize,
    object: &Value,
    crd_scopes: &BTreeMap<(String, String), bool>,
) -> Option<CompileError> {
    if object["metadata"]["namespace"].is_string() {
        return None;
    }
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let namespaced = crate::kube_kinds::built_in_namespaced(api_version, kind)
        .or_else(|| crd_scopes.get(&(group.to_string(), kind.to_string())).copied())?;
    if !namespaced {
        return None;
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    // A user's manifest path reaches the message: one line.
    let place = c.objects.place(index).unwrap_or_else(|| format!("{}, object {}", c.manifest, index + 1));
    let place = crate::escape::one_line(&place).into_owned();
    Some(CompileError::new(
        "namespace-unset",
        &["components"],
        crate::escape::capped(format!(
            "{place}: {kind} {name} (component {}) lives in a namespace, and the object names none: the API server serves it only under a namespace",
            c.name
        )),
        Some("set metadata.namespace (kubectl would put it in `default`; k3d-gpu does not guess)".to_string()),
    ))
}

/// The NVIDIA plugin's config file, owned by the component whose hook reads it; the
/// workload waits for it (a pod whose ConfigMap volume is missing does not start). Sharing
/// without such a component is an error.
fn nvidia_config<'a>(
    cx: &mut Context,
    wanted: &[&'a Component],
    nvidia: &NvidiaPlan,
    cluster_id: &str,
) -> Option<(&'a str, Resource)> {
    nvidia.config.as_ref()?;
    let Some(c) = wanted.iter().find(|c| c.configure.iter().any(|h| h.hook == NVIDIA_PLUGIN_CONFIG)) else {
        cx.error(CompileError::new(
            "nvidia-sharing-without-plugin",
            &["sharing", "nvidia"],
            "[sharing.nvidia] is set, but no wanted component reads the NVIDIA plugin's config file",
            Some(format!("a component needs `configure {NVIDIA_PLUGIN_CONFIG} container=…` (docs/stdlib.md)")),
        ));
        return None;
    };
    super::nvidia::config_map(nvidia, &c.name, cluster_id).map(|r| (c.name.as_str(), r))
}

/// Whether one node advertises the accelerators (cluster::accelerator_node): the cluster
/// resource sets node labels.
fn one_accelerator_node(out: &[Resource]) -> bool {
    out.iter()
        .find(|r| r.kind == ResourceKind::Cluster)
        .is_some_and(|r| r.spec["node_labels"].as_array().is_some_and(|l| !l.is_empty()))
}

/// Whether a component advertises devices (resources, the DRA node label, or it reads the
/// devices): on a cluster with one accelerator node, its pods run only there.
fn advertises(c: &Component) -> bool {
    !c.provides_resources.is_empty()
        || c.provides_labels.iter().any(|l| l == super::DRA_NODE_LABEL || l == super::NVIDIA_DRA_NODE_LABEL)
        || c.accelerator_node
}

/// A manifest object as we deploy it: our managed-by and component labels, and, when
/// `accelerator_node`, its pods pinned to the node that advertises the accelerators.
fn labelled(object: &Value, component: &str, accelerator_node: bool) -> Value {
    let mut object = object.clone();
    let labels = &mut object["metadata"]["labels"];
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[MANAGED_BY.0] = json!(MANAGED_BY.1);
    labels[COMPONENT_LABEL] = json!(component);
    // Only workloads (a pod template); pointer_mut never creates what is missing.
    if accelerator_node && let Some(Value::Object(pod)) = object.pointer_mut("/spec/template/spec") {
        let selector = pod.entry("nodeSelector").or_insert_with(|| json!({}));
        if let Value::Object(selector) = selector {
            selector.insert(super::ACCELERATOR_NODE_LABEL.into(), json!("true"));
        }
    }
    object
}

/// The component's `configure` hooks: the Intel plugin's args, the NVIDIA plugin's config
/// file, its virtual-GPU switch when NVIDIA sharing is on, and the balloons policy's host hints.
fn configure(
    object: &mut Value,
    hooks: &[crate::catalog::Configure],
    intel: &IntelPlan,
    nvidia: &NvidiaPlan,
    hints: &super::balloons::HostHints,
) {
    for hook in hooks {
        if hook.hook == INTEL_GPU_PLUGIN_ARGS && !intel.plugin_args.is_empty() {
            append_args(object, &hook.container, &intel.plugin_args);
        }
        if hook.hook == NVIDIA_PLUGIN_CONFIG {
            super::nvidia::configure(object, &hook.container, nvidia);
        }
        if hook.hook == NVIDIA_VIRTUAL_GPUS && nvidia.config.is_some() {
            set_env(object, &hook.container, "KUBERNETES_VIRTUAL_GPUS", "true");
        }
        if hook.hook == BALLOONS_HOST_HINTS {
            hints.apply(object, &hook.container, set_env);
        }
    }
}

/// Who provides what, for dependencies: namespaces by name, CRDs by (group, kind), each
/// component's objects, and the node labels the cluster sets.
struct Providers<'a> {
    namespaces: BTreeMap<String, String>,
    crds: BTreeMap<(String, String), String>,
    by_component: BTreeMap<&'a str, Vec<String>>,
    labels: Vec<String>,
}

impl<'a> Providers<'a> {
    fn of(objects: &[(String, &'a Component, Value)], out: &[Resource]) -> Providers<'a> {
        let namespaces = objects
            .iter()
            .filter(|(_, _, o)| o["kind"] == "Namespace")
            .map(|(id, _, o)| (o["metadata"]["name"].as_str().unwrap_or_default().to_string(), id.clone()))
            .collect();
        let crds = objects
            .iter()
            .filter(|(_, _, o)| o["kind"] == "CustomResourceDefinition")
            .map(|(id, _, o)| {
                let group = o["spec"]["group"].as_str().unwrap_or_default().to_string();
                let kind = o["spec"]["names"]["kind"].as_str().unwrap_or_default().to_string();
                ((group, kind), id.clone())
            })
            .collect();
        let by_component = objects.iter().fold(BTreeMap::new(), |mut map: BTreeMap<&str, Vec<String>>, (id, c, _)| {
            map.entry(c.name.as_str()).or_default().push(id.clone());
            map
        });
        let labels = out.iter().filter(|r| r.kind == ResourceKind::NodeLabel).map(|r| r.id.clone()).collect();
        Providers { namespaces, crds, by_component, labels }
    }

    /// The Namespace the object lives in, when a wanted component creates it; a namespace
    /// nothing creates (and the cluster lacks) is an error.
    fn namespace(&self, id: &str, c: &Component, object: &Value) -> Result<Option<String>, CompileError> {
        let Some(ns) = object["metadata"]["namespace"].as_str() else { return Ok(None) };
        match self.namespaces.get(ns) {
            Some(ns_id) => Ok(Some(ns_id.clone())),
            None if !BUILT_IN_NAMESPACES.contains(&ns) => Err(CompileError::new(
                "namespace-missing",
                &["components"],
                format!("{id} (component {}) lives in namespace {ns}, which no wanted component creates", c.name),
                Some(format!("add a Namespace {ns} to share/{}", c.manifest)),
            )),
            None => Ok(None),
        }
    }

    /// The CRD that defines the object's kind, when a wanted component has it.
    fn crd(&self, object: &Value) -> Option<String> {
        let api = object["apiVersion"].as_str().unwrap_or_default();
        let (group, _) = api.rsplit_once('/')?;
        self.crds.get(&(group.to_string(), object["kind"].as_str().unwrap_or_default().to_string())).cloned()
    }

    /// The node labels the workload selects on, where the cluster sets them.
    fn node_labels(&self, object: &Value) -> Vec<String> {
        node_selector_keys(object)
            .into_iter()
            .map(|key| format!("node-label/{key}"))
            .filter(|label| self.labels.contains(label))
            .collect()
    }

    /// Every object of the components this one comes `after`.
    fn after(&self, c: &Component) -> Vec<String> {
        c.after.iter().filter_map(|before| self.by_component.get(before.as_str())).flatten().cloned().collect()
    }
}

/// An image deployed by tag is a warning, or an error under `[policy] images = "pinned"`:
/// a tag can be re-pushed, so what runs would change without the plan changing.
pub(super) fn unlocked_images(cx: &mut Context) {
    let bases: Vec<&String> = cx.node_image.as_ref().map(|n| n.bases.keys().collect()).unwrap_or_default();
    let unlocked: Vec<(String, bool)> = cx
        .images
        .iter()
        .filter(|(_, u)| u.source == crate::images::Source::Unlocked)
        .map(|(name, u)| (u.reference.clone(), bases.contains(&name)))
        .collect();
    for (image, base) in unlocked {
        if cx.config.policy.images == crate::config::ImagePolicy::Pinned {
            cx.error(CompileError::new(
                "image-unlocked",
                &["policy", "images"],
                format!("image {image} has no digest, and the policy wants every image pinned"),
                Some("run `k3d-gpu images lock` to pin it in images.lock beside the config".to_string()),
            ));
        } else {
            let text =
                if base { super::warnings::unlocked_base_text(&image) } else { super::warnings::unlocked_text(&image) };
            cx.warn(super::warnings::UNLOCKED, Some("policy.images"), text);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Configure;

    fn component(name: &str) -> Component {
        Component {
            name: name.into(),
            summary: String::new(),
            upstream: String::new(),
            version: String::new(),
            manifest: format!("{name}.yaml"),
            images: Vec::new(),
            when: Vec::new(),
            after: Vec::new(),
            provides_resources: Vec::new(),
            provides_labels: Vec::new(),
            rollouts: Vec::new(),
            configure: Vec::new(),
            replaces_baked: None,
            accelerator_node: false,
            objects: crate::catalog::Objects::parsed(Vec::new()),
            origin: format!("stdlib/{name}.kdl"),
            user: false,
        }
    }

    fn resource(id: &str, kind: ResourceKind, spec: Value) -> Resource {
        Resource { id: id.into(), kind, change: Change::InPlace, component: None, spec, depends_on: Vec::new() }
    }

    fn daemonset(ns: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": { "name": "plugin", "namespace": ns },
            "spec": { "template": { "spec": { "containers": [{ "name": "plugin" }] } } },
        })
    }

    #[test]
    fn one_node_advertises_when_the_cluster_sets_node_labels() {
        let cases: Vec<(&str, Vec<Resource>, bool)> = vec![
            ("no cluster", vec![], false),
            ("no labels", vec![resource("cluster", ResourceKind::Cluster, json!({}))], false),
            ("empty labels", vec![resource("cluster", ResourceKind::Cluster, json!({ "node_labels": [] }))], false),
            ("labels", vec![resource("cluster", ResourceKind::Cluster, json!({ "node_labels": ["a=b"] }))], true),
            (
                "labels not on the cluster",
                vec![resource("x", ResourceKind::Object, json!({ "node_labels": ["a"] }))],
                false,
            ),
        ];
        for (name, out, want) in cases {
            assert_eq!(one_accelerator_node(&out), want, "{name}");
        }
    }

    #[test]
    fn components_that_advertise_devices() {
        let plain = component("a");
        let resources = Component { provides_resources: vec!["gpu.intel.com/i915".into()], ..component("b") };
        let dra = Component { provides_labels: vec![super::super::DRA_NODE_LABEL.into()], ..component("c") };
        let other_label = Component { provides_labels: vec!["feature.node.kubernetes.io/x".into()], ..component("d") };
        let exporter = Component { accelerator_node: true, ..component("e") };
        for (c, want) in [(&plain, false), (&resources, true), (&dra, true), (&other_label, false), (&exporter, true)] {
            assert_eq!(advertises(c), want, "{}", c.name);
        }
    }

    #[test]
    fn objects_are_labelled_and_workloads_pinned_to_the_accelerator_node() {
        let config_map =
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x", "labels": "odd" } });
        let selector = "/spec/template/spec/nodeSelector";
        // (case, object, pin, has a nodeSelector afterwards)
        let cases: Vec<(&str, Value, bool, bool)> = vec![
            ("a workload, pinned", daemonset("kube-system"), true, true),
            ("a workload, not pinned", daemonset("kube-system"), false, false),
            ("not a workload: nothing to pin", config_map, true, false),
        ];
        for (name, object, pin, selected) in cases {
            let got = labelled(&object, "intel-gpu-plugin", pin);
            assert_eq!(got["metadata"]["labels"][MANAGED_BY.0], MANAGED_BY.1, "{name}");
            assert_eq!(got["metadata"]["labels"][COMPONENT_LABEL], "intel-gpu-plugin", "{name}");
            let pinned = got.pointer(selector).map(|s| s[super::super::ACCELERATOR_NODE_LABEL] == "true");
            assert_eq!(pinned.unwrap_or(false), selected, "{name}");
        }
    }

    #[test]
    fn hooks_edit_only_their_container_and_only_when_there_is_something_to_say() {
        let hook = |name: &str| Configure { hook: name.into(), container: "plugin".into() };
        let intel = IntelPlan { plugin_args: vec!["-shared-dev-num=8".into()], ..Default::default() };
        let nvidia_shared = NvidiaPlan { config: Some("{}".into()), replicas: 2, mps: false };
        let nvidia_off = NvidiaPlan { config: None, replicas: 1, mps: false };
        let args = "/spec/template/spec/containers/0/args";
        let env = "/spec/template/spec/containers/0/env";
        // (case, hook, intel plan, nvidia plan, pointer, expected at it)
        type Case<'a> = (&'a str, Configure, IntelPlan, &'a NvidiaPlan, &'a str, Option<Value>);
        let cases: Vec<Case> = vec![
            (
                "intel args",
                hook(INTEL_GPU_PLUGIN_ARGS),
                intel.clone(),
                &nvidia_off,
                args,
                Some(json!(["-shared-dev-num=8"])),
            ),
            ("no intel args", hook(INTEL_GPU_PLUGIN_ARGS), IntelPlan::default(), &nvidia_off, args, None),
            (
                "virtual GPUs when shared",
                hook(NVIDIA_VIRTUAL_GPUS),
                IntelPlan::default(),
                &nvidia_shared,
                env,
                Some(json!([{ "name": "KUBERNETES_VIRTUAL_GPUS", "value": "true" }])),
            ),
            ("no virtual GPUs unshared", hook(NVIDIA_VIRTUAL_GPUS), IntelPlan::default(), &nvidia_off, env, None),
            (
                "another container",
                Configure { container: "sidecar".into(), ..hook(INTEL_GPU_PLUGIN_ARGS) },
                intel,
                &nvidia_off,
                args,
                None,
            ),
        ];
        for (name, hook, intel, nvidia, pointer, want) in cases {
            let mut object = daemonset("kube-system");
            configure(&mut object, &[hook], &intel, nvidia, &super::super::balloons::HostHints::default());
            assert_eq!(object.pointer(pointer).cloned(), want, "{name}");
        }
    }

    #[test]
    fn dependencies_on_namespaces_crds_labels_and_after() {
        let ns = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "gpu" } });
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": { "name": "x" },
            "spec": { "group": "nfd.k8s-sigs.io", "names": { "kind": "NodeFeatureRule" } },
        });
        let (base, after) =
            (component("base"), Component { after: vec!["base".into(), "absent".into()], ..component("user") });
        let objects = vec![(object_id(&ns), &base, ns), (object_id(&crd), &base, crd)];
        let label = resource("node-label/gpu.intel.com/xmx", ResourceKind::NodeLabel, json!({}));
        let p = Providers::of(&objects, &[label]);

        // (case, object, namespace dep Ok / Err(code))
        type Case<'a> = (&'a str, Value, Result<Option<&'a str>, &'a str>);
        let cases: Vec<Case> = vec![
            ("created by a component", daemonset("gpu"), Ok(Some("k8s/core/Namespace/gpu"))),
            ("built in", daemonset("kube-system"), Ok(None)),
            ("cluster-scoped", json!({ "kind": "ClusterRole", "metadata": { "name": "r" } }), Ok(None)),
            ("nobody makes it", daemonset("nowhere"), Err("namespace-missing")),
        ];
        for (name, object, want) in cases {
            let got = p.namespace("k8s/apps/DaemonSet/x/plugin", &after, &object);
            assert_eq!(got.as_ref().map(|n| n.as_deref()).map_err(|e| e.code), want, "{name}");
        }

        // (object, CRD dependency)
        let rule =
            json!({ "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule", "metadata": { "name": "r" } });
        let other =
            json!({ "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature", "metadata": { "name": "r" } });
        let core = json!({ "apiVersion": "v1", "kind": "NodeFeatureRule", "metadata": { "name": "r" } });
        for (object, want) in
            [(rule, Some("k8s/apiextensions.k8s.io/CustomResourceDefinition/x")), (other, None), (core, None)]
        {
            assert_eq!(p.crd(&object).as_deref(), want, "{object}");
        }

        let mut selecting = daemonset("gpu");
        selecting["spec"]["template"]["spec"]["nodeSelector"] = json!({ "gpu.intel.com/xmx": "true", "other": "x" });
        assert_eq!(p.node_labels(&selecting), ["node-label/gpu.intel.com/xmx"]);
        assert!(p.node_labels(&daemonset("gpu")).is_empty());

        assert_eq!(p.after(&after), ["k8s/core/Namespace/gpu", "k8s/apiextensions.k8s.io/CustomResourceDefinition/x"]);
        assert!(p.after(&base).is_empty());
    }
}
