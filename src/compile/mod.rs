//! The compiler: config + facts + catalog → [`DesiredGraph`]. Pure: no I/O, no clock.
//!
//! Every problem is collected, not just the first, so `validate` reports them all at once.
//! Errors name the config key they are about; the command edge turns that into a span.

pub mod advice;
pub mod agent;
mod balloons;
mod claims;
mod cluster;
mod components;

pub use cluster::NODE_IMAGE_ID;
pub use components::{COMPONENT_LABEL, MANAGED_BY, object_id, object_id_of};
mod experimental;
pub mod fleet;
mod graph;
pub mod held;
mod intel;
pub mod metrics;
pub mod models;
pub mod nvidia;
pub mod nvidia_dra;
pub mod ports;
mod registries;
mod telemetry;
pub mod user_volumes;
mod verify;
pub mod warnings;
pub mod workloads;

use crate::catalog::{Catalog, Condition};
use crate::config::{Config, GpuMode, VendorSelection};
use crate::facts::{Detected, Facts, Vendor};

pub use graph::{Change, DesiredGraph, GRAPH_SCHEMA, Resource, ResourceKind, Warning};

/// Enough to fix a config; more would only bury the first.
const MAX_ERRORS: usize = 50;

/// A reason the config cannot be compiled for these facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
    /// The config key it is about, as a path (`["sharing", "allocation"]`).
    pub key: Vec<&'static str>,
    /// The element of that key's list it is about, so the diagnostic underlines the element
    /// rather than the whole list.
    pub element: Option<usize>,
}

impl CompileError {
    fn new(
        code: &'static str,
        key: &[&'static str],
        message: impl Into<String>,
        help: impl Into<Option<String>>,
    ) -> Self {
        CompileError { code, message: message.into(), help: help.into(), key: key.to_vec(), element: None }
    }

    /// About element `index` of the key's list.
    fn at_element(mut self, index: Option<usize>) -> Self {
        self.element = index;
        self
    }
}

/// What every part of the compiler needs to know, decided once.
pub struct Context<'a> {
    pub config: &'a Config,
    pub facts: &'a Facts,
    pub catalog: &'a Catalog,
    /// Active vendors after the config's selection, with their resources.
    pub active: Vec<Detected>,
    pub errors: Vec<CompileError>,
    pub warnings: Vec<Warning>,
    /// Every image the wanted components deploy, by its catalog name, as it is deployed.
    pub images: std::collections::BTreeMap<String, crate::images::Use>,
    /// The node image, resolved against the locks (`None` when its source is unusable).
    pub node_image: Option<crate::node_image::Resolved>,
    /// What other workloads hold of the cluster's accelerators (empty without a cluster).
    pub held: held::Held,
}

impl<'a> Context<'a> {
    /// A compile of `config` on `facts` that has found nothing yet.
    fn new(config: &'a Config, facts: &'a Facts, catalog: &'a Catalog) -> Context<'a> {
        Context {
            config,
            facts,
            catalog,
            active: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            images: Default::default(),
            node_image: None,
            held: held::Held::default(),
        }
    }

    pub fn is_active(&self, vendor: Vendor) -> bool {
        self.active.iter().any(|d| d.vendor == vendor)
    }

    pub fn intel_mode(&self) -> GpuMode {
        self.config.sharing.mode.intel()
    }

    pub fn nvidia_mode(&self) -> GpuMode {
        self.config.sharing.mode.nvidia()
    }

    fn warn(&mut self, code: &str, key: Option<&str>, text: impl Into<String>) {
        self.warnings.push(Warning { code: code.into(), text: text.into(), key: key.map(str::to_string) });
    }

    fn error(&mut self, error: CompileError) {
        self.errors.push(error);
    }

    /// Whether a component's `when` lines hold.
    pub fn wants(&self, when: &[Vec<Condition>]) -> bool {
        when.is_empty()
            || when.iter().any(|line| {
                line.iter().all(|c| match c {
                    Condition::Vendor(v) => self.is_active(*v),
                    Condition::IntelGpuMode(m) => self.intel_mode() == *m,
                    Condition::NvidiaGpuMode(m) => self.nvidia_mode() == *m,
                    Condition::Balloons(b) => self.config.placement.balloons == *b,
                    Condition::Telemetry(e) => telemetry::wants(self.config, *e),
                    Condition::Sandbox(wanted) => self.config.sandbox.is_some() == *wanted,
                    Condition::NvidiaSharing(strategy) => {
                        self.config.sharing.nvidia.as_ref().is_some_and(|n| n.strategy == *strategy)
                    }
                })
            })
    }
}

/// Compiles, with the node image the config names without reading a build context: a
/// prebuilt `[cluster] image`, or the shipped Dockerfile. A config with `build_context` goes
/// through [`compile_with`] and the files the command edge read.
pub fn compile(config: &Config, facts: &Facts, catalog: &Catalog) -> Result<DesiredGraph, Vec<CompileError>> {
    let source = match (&config.cluster.image, &config.cluster.build_context) {
        (Some(image), _) => crate::node_image::Source::prebuilt(image),
        (None, Some(dir)) => crate::node_image::Source::Build { context: dir.clone(), files: Default::default() },
        (None, None) => crate::node_image::Source::shipped(),
    };
    compile_with(config, facts, catalog, &source)
}

/// Compiles. `Ok` may still carry warnings; `Err` carries every error found.
pub fn compile_with(
    config: &Config,
    facts: &Facts,
    catalog: &Catalog,
    node_image: &crate::node_image::Source,
) -> Result<DesiredGraph, Vec<CompileError>> {
    compile_against(config, facts, catalog, node_image, &held::Held::default())
}

/// [`compile_with`] on a cluster that exists: the agent and its add-ons are placed on what
/// other workloads leave free (`held`, read from the observed cluster).
pub fn compile_against(
    config: &Config,
    facts: &Facts,
    catalog: &Catalog,
    node_image: &crate::node_image::Source,
    held: &held::Held,
) -> Result<DesiredGraph, Vec<CompileError>> {
    let parts = parts(config, facts, catalog, Some(node_image), held)?;
    let mut graph = DesiredGraph::build(parts.resources, parts.warnings, parts.agent).map_err(|text| {
        vec![CompileError::new(
            "graph",
            &["components"],
            text.to_string(),
            Some("check the `after` lines of your own components".into()),
        )]
    })?;
    graph.images = parts.images;
    graph.shares = parts.shares;
    graph.mps = parts.mps;
    Ok(graph)
}

/// What one machine's compile gives before it becomes a graph: `fleet` merges these per node.
#[derive(Clone)]
pub(crate) struct Parts {
    pub resources: Vec<Resource>,
    pub warnings: Vec<Warning>,
    pub agent: Option<agent::AgentPlan>,
    pub images: std::collections::BTreeMap<String, crate::images::Use>,
    /// Pods per device the config promises, by resource ([`DesiredGraph::shares`]).
    pub shares: std::collections::BTreeMap<String, u32>,
    /// [`DesiredGraph::mps`].
    pub mps: bool,
}

/// The resources of one machine. Without a node image (`None`: an existing cluster, DESIGN.md
/// §9) there is no node image and no k3d cluster; what would depend on the cluster depends on
/// [`fleet::ROOT`] instead, which the fleet merge removes.
pub(crate) fn parts(
    config: &Config,
    facts: &Facts,
    catalog: &Catalog,
    node_image: Option<&crate::node_image::Source>,
    held: &held::Held,
) -> Result<Parts, Vec<CompileError>> {
    let mut cx = Context::new(config, facts, catalog);
    cx.held = held.clone();
    let mut resources = Vec::new();
    if let Some(source) = node_image {
        cluster::node_image(&mut cx, source, &mut resources);
    }
    select_vendors(&mut cx);
    expect(&mut cx);
    let intel = intel::plan(&mut cx);
    let nvidia = nvidia::plan(&mut cx);
    nvidia_dra::check(&mut cx);
    telemetry::check(&mut cx, &intel);
    let features = experimental::plan(&mut cx);
    let cluster_id = match node_image {
        Some(_) => cluster::resource(&mut cx, &features, &mut resources),
        None => fleet::ROOT.to_string(),
    };
    cluster::node_labels(&mut cx, &cluster_id, &mut resources);
    let mut wanted = components::resources(&mut cx, &cluster_id, &intel, &nvidia, &features, &mut resources);
    claims::resources(&mut cx, &cluster_id, &mut resources);
    workloads::sandbox::resources(&mut cx, &cluster_id, &mut resources);
    let agent = agent::plan(&mut cx, &intel);
    nvidia::agent_on_shared_gpu(&mut cx, &nvidia, agent.as_ref());
    if let Some(plan) = &agent {
        workloads::resources(&mut cx, plan, &cluster_id, &mut resources);
    }
    match node_image {
        Some(_) => metrics::resources(&mut cx, &cluster_id, &mut resources),
        None if config.telemetry.is_some() => cx.warn(
            "telemetry-stack-k3d-only",
            Some("telemetry"),
            "[telemetry]'s Prometheus, node-exporter and Grafana are deployed on k3d clusters only; on an existing cluster only the GPU exporters are",
        ),
        None => {}
    }
    components::unlocked_images(&mut cx);
    verify::resources(&mut cx, &mut wanted, &intel, &nvidia, &mut resources);
    if !cx.errors.is_empty() {
        let mut errors = cx.errors;
        if errors.len() > MAX_ERRORS {
            let more = errors.len() - MAX_ERRORS;
            errors.truncate(MAX_ERRORS);
            errors.push(CompileError::new("more-errors", &[], format!("… and {more} more errors"), None));
        }
        return Err(errors);
    }
    let shares = shares(&cx, &intel, &nvidia);
    Ok(Parts { resources, warnings: cx.warnings, agent, images: cx.images, shares, mps: nvidia.mps })
}

/// The resources whose devices the config shares among several pods, with how many: the
/// Intel GPU plugin's `-shared-dev-num` on its GPU resources (plugin mode), the NVIDIA
/// plugin's time-slicing replicas on `nvidia.com/gpu`.
fn shares(
    cx: &Context,
    intel: &intel::IntelPlan,
    nvidia: &nvidia::NvidiaPlan,
) -> std::collections::BTreeMap<String, u32> {
    let mut out = std::collections::BTreeMap::new();
    if let Some(n) = intel.shared.filter(|n| *n > 1)
        && cx.intel_mode() == GpuMode::Plugin
    {
        let gpus = cx.active.iter().filter(|d| d.vendor == Vendor::Intel).flat_map(|d| d.resources.iter());
        for resource in gpus.filter(|r| r.starts_with("gpu.intel.com/") && *r != "gpu.intel.com/monitoring") {
            out.insert(resource.clone(), n);
        }
    }
    if nvidia.replicas > 1 {
        out.insert("nvidia.com/gpu".to_string(), nvidia.replicas);
    }
    out
}

/// The claim templates of a fleet, against `facts` whose Intel GPUs are those of every node a
/// claim may land on (the DRA nodes).
pub(crate) fn fleet_claims(
    config: &Config,
    facts: &Facts,
    catalog: &Catalog,
    out: &mut Vec<Resource>,
) -> Result<(), Vec<CompileError>> {
    let mut cx = Context::new(config, facts, catalog);
    cx.active = active_vendors(config, facts);
    claims::resources(&mut cx, fleet::ROOT, out);
    if cx.errors.is_empty() { Ok(()) } else { Err(cx.errors) }
}

/// The vendors the cluster gets: the host's active ones, less `[vendors] exclude`, and only
/// those `[vendors] enable` lists when it is a list.
pub fn active_vendors(config: &Config, facts: &Facts) -> Vec<Detected> {
    facts.detected.iter().filter(|d| config.vendors.allows(d.vendor)).cloned().collect()
}

/// The config's vendor selection applied to what the host has, with a word on each
/// selection that cannot hold.
fn select_vendors(cx: &mut Context) {
    let config = cx.config;
    let excluded = &config.vendors.exclude;
    if let VendorSelection::Only(list) = &config.vendors.enable
        && let Some(both) = list.iter().find(|v| excluded.contains(v))
    {
        cx.warn(
            "enabled-and-excluded",
            Some("vendors.exclude"),
            format!("vendor {both} is both enabled and excluded; exclude wins"),
        );
    }
    if let VendorSelection::Only(list) = &config.vendors.enable {
        for vendor in list {
            if !cx.facts.is_active(*vendor) {
                let reason = cx
                    .facts
                    .inactive
                    .iter()
                    .find(|i| i.vendor == *vendor)
                    .map(|i| i.reason.clone())
                    .unwrap_or_default();
                cx.error(CompileError::new(
                    "vendor-absent",
                    &["vendors", "enable"],
                    format!("vendor {vendor} is enabled but this host does not have it: {reason}"),
                    Some("remove it from [vendors] enable, or fix the host (`k3d-gpu doctor`)".to_string()),
                ));
            }
        }
    }
    cx.active = active_vendors(config, cx.facts);
}

/// `[expect]`: assertions about the machine, checked against the facts.
fn expect(cx: &mut Context) {
    let expect = &cx.config.expect;
    let mut errors = Vec::new();
    for vendor in &expect.vendors {
        if !cx.facts.is_active(*vendor) {
            errors.push(CompileError::new(
                "expect-vendor",
                &["expect", "vendors"],
                format!("[expect] wants vendor {vendor}, which this host does not have"),
                Some("is this the machine the config is for? `k3d-gpu detect` shows what it has".to_string()),
            ));
        }
    }
    for (resource, min) in &expect.devices {
        let have: u32 = cx.facts.detected.iter().filter(|d| d.resources.contains(resource)).map(|d| d.devices).sum();
        if have < *min {
            errors.push(CompileError::new(
                "expect-devices",
                &["expect", "devices"],
                format!("[expect] wants at least {min} {resource}, this host has {have}"),
                None,
            ));
        }
    }
    if let Some(want) = &expect.fingerprint
        && *want != cx.facts.fingerprint
    {
        errors.push(CompileError::new(
            "expect-fingerprint",
            &["expect", "fingerprint"],
            format!("[expect] fingerprint {want} is not this host's ({})", cx.facts.fingerprint),
            Some("the hardware changed, or the config is for another machine".to_string()),
        ));
    }
    cx.errors.extend(errors);
}

/// On a managed object that holds data (the agent's model PVC and its namespace): when the
/// config no longer wants it, the plan keeps it and says so instead of deleting it.
pub const KEEP_LABEL: &str = "k3d-gpu.io/keep-on-removal";

/// On such an object, what its data is, in words the plan quotes when it keeps or deletes it
/// (absent: a downloaded model).
pub const DATA_ANNOTATION: &str = "k3d-gpu.io/data";

/// A label the balloons policy or the DRA driver needs, owned by the compiler.
pub const DRA_NODE_LABEL: &str = "k3d-gpu.io/intel-gpu-dra";

/// The node label the NVIDIA DRA driver's kubelet plugin selects, owned by the compiler: set
/// only where NVIDIA GPUs take the DRA path.
pub const NVIDIA_DRA_NODE_LABEL: &str = "k3d-gpu.io/nvidia-gpu-dra";

/// The node label k3s sets at registration on the one node that advertises the host's
/// accelerators (`[cluster] accelerator_node`); device plugins and the DRA driver select it.
pub const ACCELERATOR_NODE_LABEL: &str = "k3d-gpu.io/accelerators";

/// Every `(apiVersion, kind)` a graph compiled with this catalog can hold: the kinds the
/// components define, and those the compiler writes itself (claim templates and their
/// namespaces, the npu-turbo ConfigMap, the agent's workload). Observe lists exactly these, so an object of any of
/// them that the config no longer wants is still seen, and deleted. With them, the plural
/// each custom kind is served under, from the catalog's CRDs (`spec.names.plural`).
pub fn object_kinds(catalog: &Catalog) -> ObjectKinds {
    const WRITTEN_BY_THE_COMPILER: [(&str, &str); 9] = [
        ("v1", "ConfigMap"),
        ("v1", "Namespace"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
        // The agent's objects (workloads/).
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("v1", "PersistentVolumeClaim"),
        // The host model store's volumes (models.rs).
        ("v1", "PersistentVolume"),
        // [sandbox]'s (workloads/sandbox.rs).
        ("extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate"),
        ("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool"),
    ];
    let from_components = catalog.components.values().flat_map(|c| c.objects.kinds());
    let kinds =
        WRITTEN_BY_THE_COMPILER.iter().map(|(a, k)| (a.to_string(), k.to_string())).chain(from_components).collect();
    let plurals = catalog
        .components
        .values()
        .flat_map(|c| c.objects.plurals())
        .map(|(g, k, plural, namespaced)| ((g, k), CrdResource { plural, namespaced }))
        .collect();
    ObjectKinds { kinds, plurals }
}

/// How a CRD serves its custom resources: the plural it declares (`spec.names.plural`) and
/// whether they live in a namespace (`spec.scope`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdResource {
    pub plural: String,
    pub namespaced: bool,
}

/// The kinds observe lists ([`object_kinds`]) and the plurals the catalog's CRDs declare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectKinds {
    /// `(apiVersion, kind)`, sorted.
    pub kinds: std::collections::BTreeSet<(String, String)>,
    /// `(group, kind)` → the plural and scope its CRD declares.
    pub plurals: std::collections::BTreeMap<(String, String), CrdResource>,
}

impl ObjectKinds {
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    pub fn contains(&self, kind: &(String, String)) -> bool {
        self.kinds.contains(kind)
    }

    pub fn iter(&self) -> impl Iterator<Item = &(String, String)> {
        self.kinds.iter()
    }
}
