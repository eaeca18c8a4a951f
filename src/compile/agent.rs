//! The agent's placement by the reference rules: which backend and device the LLM server gets
//! from what the cluster will advertise (not from the host alone), the firmware gatekeeper's
//! verdict, and the P-core/AMX/group details of its pod. Pure: the decision is data in the
//! graph (`agent`), and `k3d-gpu agent` explains it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::intel::IntelPlan;
use super::{CompileError, Context};
use crate::config::{AddonDevice, AddonName, AgentBackend, AgentDevice, IntelGpuMode};
use crate::facts::targets::TargetKind;
use crate::facts::{IntelGpu, Vendor, Xmx};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentPlan {
    pub backend: &'static str,
    pub device: &'static str,
    /// Why this device, in a sentence (the measured reason when the GPU is passed over).
    pub reason: String,
    /// The extended resource the pod requests (none on the CPU).
    pub resource: Option<String>,
    /// How many of that resource: the tensor-parallel size (`[agent] gpus`), 1 unless set.
    #[serde(skip_serializing_if = "is_one")]
    pub gpus: u32,
    /// In-cluster OpenAI-compatible base URL.
    pub api: String,
    pub cpu_request: u32,
    pub memory: String,
    pub pod_labels: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
    pub supplemental_groups: Vec<u32>,
    /// The add-ons, placed on what the LLM leaves free.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addons: Vec<AddonPlan>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddonPlan {
    pub name: AddonName,
    pub device: &'static str,
    pub resource: Option<String>,
    /// `k3d-gpu.io/cores` on hybrid nodes: E-cores beside an accelerator, P-cores on the CPU.
    pub cores: Option<&'static str>,
    pub reason: String,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The most GPUs one model is split across (`[agent] gpus`).
pub const MAX_GPUS: u32 = 8;

/// GPU memory auto wants before it serves on an NVIDIA GPU: Qwen3-4B in 16-bit is about 8 GB
/// of weights, plus the KV cache (the reference sizes it for a 12 GB card).
pub const CUDA_MIN_GIB: u32 = 12;

const XMX_REASON: &str = "the Intel GPU has no XMX matrix engines, and the P-cores are faster for an LLM without them (Qwen3-4B int4 on a UHD 770: 15.7 vs 9.9 tokens/s decode, 172 vs 66 tokens/s prefill)";

fn device_error(cx: &mut Context, key: &'static str, message: String, fix: String) {
    cx.error(CompileError::new("agent-device", &["agent", key], message, Some(fix)));
}

pub fn plan(cx: &mut Context, intel: &IntelPlan) -> Option<AgentPlan> {
    let config = cx.config;
    let Some(agent) = &config.agent else {
        if !cx.config.addons.is_empty() {
            cx.error(CompileError::new(
                "addons-without-agent",
                &["addons"],
                "add-ons run beside the agent, and the config has no [agent]",
                Some("add an [agent] table (an empty one takes the defaults)".to_string()),
            ));
        }
        return None;
    };
    if !valid_inputs(cx, agent) {
        return None;
    }
    let gaudi = cx.is_active(Vendor::Gaudi) && cx.facts.targets.iter().any(|t| t.kind == TargetKind::Gaudi && t.usable);
    let npu = cx.is_active(Vendor::Npu) && cx.facts.targets.iter().any(|t| t.kind == TargetKind::Npu && t.usable);
    let npu_refusal = cx.facts.targets.iter().find(|t| t.kind == TargetKind::Npu && !t.usable).cloned();
    // Intel GPUs the cluster advertises as gpu.intel.com/xe|i915: the plugin path only, and
    // only the GPUs the [sharing] selection gives the plugin.
    let dra = cx.intel_mode() == IntelGpuMode::Dra;
    let advertised: Vec<IntelGpu> = if cx.is_active(Vendor::Intel) && !dra {
        cx.facts.host.intel_gpus.iter().filter(|g| intel.gpus.contains(&g.pci_address)).cloned().collect()
    } else {
        Vec::new()
    };
    let refusal = |g: &IntelGpu| {
        cx.facts.targets.iter().find(|t| t.id == format!("intel-gpu/{}", g.pci_address) && !t.usable).cloned()
    };
    let usable: Vec<&IntelGpu> = advertised.iter().filter(|g| refusal(g).is_none()).collect();
    let xmx_node = usable.iter().any(|g| g.xmx == Xmx::Yes);

    // NVIDIA GPUs the cluster advertises as nvidia.com/gpu, and the largest one's memory:
    // what nvidia-smi reported at capture, else what the board's PCI id is sold with. Auto
    // wants room for the default model.
    let nvidia = cx.is_active(Vendor::Nvidia) && !cx.facts.host.nvidia.gpus.is_empty();
    let cuda_gib = cx.facts.host.nvidia.gpus.iter().filter_map(nvidia_gib).max().filter(|_| nvidia);
    let cuda_auto = cuda_gib.is_some_and(|gib| gib >= CUDA_MIN_GIB);
    if nvidia && cuda_gib.is_none() && agent.device == AgentDevice::Auto {
        let boards: Vec<String> = cx
            .facts
            .host
            .nvidia
            .gpus
            .iter()
            .filter_map(|g| g.device_id.and_then(crate::hwdb::nvidia_board))
            .map(|(name, sizes)| {
                let sizes: Vec<String> = sizes.iter().map(|g| format!("{g} GB")).collect();
                format!("the {name} is sold with {}", sizes.join(" or "))
            })
            .collect();
        let why = if boards.is_empty() {
            "the NVIDIA GPU's memory is not known for its PCI id".to_string()
        } else {
            format!("the NVIDIA GPU's memory is not known ({}, and its PCI id does not say which)", boards.join("; "))
        };
        cx.warn(
            "agent-cuda-memory-unknown",
            Some("agent.device"),
            format!(
                "{why}, so auto does not serve the model on it; set device = \"cuda\" to use it, or capture the \
                 host with `k3d-gpu facts capture` where nvidia-smi runs"
            ),
        );
    }

    let backend = match (agent.backend, agent.device) {
        (AgentBackend::Auto, AgentDevice::Hpu | AgentDevice::Cuda) => "vllm",
        (AgentBackend::Auto, AgentDevice::Auto) if gaudi || cuda_auto => "vllm",
        (AgentBackend::Auto | AgentBackend::Ovms, _) => "ovms",
        (AgentBackend::Vllm, _) => "vllm",
        (AgentBackend::LlmScaler, _) => "llm-scaler",
    };
    let gpu_only = backend != "ovms";
    // vLLM and llm-scaler serve from a GPU (or a Gaudi, handled first); OVMS only when forced.
    let wants_gpu = agent.device == AgentDevice::Gpu || (agent.device == AgentDevice::Auto && gpu_only && !gaudi);
    let reason;
    let device = match agent.device {
        AgentDevice::Hpu if backend != "vllm" => {
            device_error(
                cx,
                "device",
                format!("{backend} does not run on a Gaudi"),
                "use backend = \"vllm\" (or \"auto\") for the HPU".into(),
            );
            return None;
        }
        AgentDevice::Cpu | AgentDevice::Npu if gpu_only => {
            device_error(
                cx,
                "device",
                format!("{backend} runs on an Intel GPU, a Gaudi or (vllm) an NVIDIA GPU only"),
                "use backend = \"ovms\" for the CPU or the NPU".into(),
            );
            return None;
        }
        AgentDevice::Cuda if backend != "vllm" => {
            device_error(
                cx,
                "device",
                format!("{backend} does not run on an NVIDIA GPU"),
                "use backend = \"vllm\" (or \"auto\") for CUDA".into(),
            );
            return None;
        }
        AgentDevice::Cuda if nvidia => {
            reason = "forced: vLLM (CUDA) on an NVIDIA GPU".into();
            "CUDA"
        }
        AgentDevice::Cuda => {
            device_error(
                cx,
                "device",
                "device = \"cuda\" but the cluster will advertise no NVIDIA GPU".into(),
                "check `k3d-gpu detect` (the nvidia vendor must be active)".into(),
            );
            return None;
        }
        AgentDevice::Auto if backend == "vllm" && !gaudi && cuda_auto => {
            reason = format!(
                "the cluster advertises nvidia.com/gpu and the GPU has {} GiB (the default model wants {CUDA_MIN_GIB}): vLLM on CUDA",
                cuda_gib.unwrap_or_default()
            );
            "CUDA"
        }
        // backend = "vllm" asked for by name on an NVIDIA host without an Intel GPU for it:
        // CUDA is the only place it can run, memory known or not.
        AgentDevice::Auto if backend == "vllm" && !gaudi && nvidia && usable.is_empty() => {
            reason = "vLLM on the NVIDIA GPU: the cluster advertises no Intel GPU for it".into();
            "CUDA"
        }
        AgentDevice::Hpu | AgentDevice::Auto if backend == "vllm" && gaudi => {
            reason = "the cluster advertises habana.ai/gaudi: vLLM on the Gaudi".into();
            "HPU"
        }
        AgentDevice::Hpu => {
            device_error(
                cx,
                "device",
                "device = \"hpu\" but the cluster will advertise no usable Gaudi".into(),
                "load Intel's habanalabs driver (`k3d-gpu doctor`), or use device = \"auto\"".into(),
            );
            return None;
        }
        AgentDevice::Npu if npu => {
            reason = "forced: OVMS on the NPU (stateful pipeline, static prompt shapes)".into();
            "NPU"
        }
        AgentDevice::Npu => {
            let fix = npu_refusal
                .and_then(|t| t.fix)
                .unwrap_or_else(|| "load intel_vpu on a kernel that supports the NPU".into());
            device_error(cx, "device", "device = \"npu\" but the cluster will advertise no usable NPU".into(), fix);
            return None;
        }
        _ if wants_gpu => {
            if let Some(_gpu) = usable.first() {
                reason = if agent.device == AgentDevice::Gpu {
                    "forced: any allocatable Intel GPU, XMX or not".into()
                } else {
                    format!("{backend} runs on the Intel GPU")
                };
                "GPU"
            } else {
                let refused = advertised.iter().find_map(&refusal);
                let (message, fix) = match (refused, dra, advertised.is_empty()) {
                    (Some(t), _, _) => (
                        format!("the Intel GPU is refused: {}", t.reason.unwrap_or_default()),
                        t.fix.unwrap_or_default(),
                    ),
                    (None, true, _) => (
                        "DRA mode does not advertise gpu.intel.com/xe or i915, which the agent requests".to_string(),
                        "use [sharing] mode = \"plugin\" for the agent's GPU".to_string(),
                    ),
                    _ => ("the cluster will advertise no Intel GPU".to_string(), "check `k3d-gpu detect`".to_string()),
                };
                device_error(cx, if agent.device == AgentDevice::Gpu { "device" } else { "backend" }, message, fix);
                return None;
            }
        }
        AgentDevice::Auto if !usable.is_empty() && xmx_node => {
            reason = "an Intel GPU with XMX on the node: the model runs there".into();
            "GPU"
        }
        _ => {
            reason = if agent.device == AgentDevice::Cpu {
                "forced: the CPU".into()
            } else if let Some(t) = advertised.iter().find_map(&refusal) {
                let why = format!(
                    "the Intel GPU is refused by the firmware gatekeeper ({}); fix: {}",
                    t.reason.unwrap_or_default(),
                    t.fix.unwrap_or_default()
                );
                cx.warn("agent-gpu-refused", Some("agent.device"), format!("the agent runs on the CPU because {why}"));
                why
            } else if dra && cx.is_active(Vendor::Intel) {
                "DRA mode does not advertise gpu.intel.com/xe or i915, which the agent requests".into()
            } else if !advertised.is_empty() {
                XMX_REASON.into()
            } else {
                "no accelerator the agent can use is advertised".into()
            };
            "CPU"
        }
    };

    let gpus = agent.gpus.unwrap_or(1);
    if gpus > 1 && !tensor_parallel_fits(cx, backend, device, gpus, usable.len(), intel.shared.unwrap_or(1)) {
        return None;
    }
    if backend == "ovms" && agent.revision.is_some() {
        cx.error(CompileError::new(
            "agent-revision",
            &["agent", "revision"],
            "OVMS cannot pin a model revision: its --pull clones the repository's default branch".to_string(),
            Some("drop revision, or use backend = \"vllm\", which downloads the revision named".to_string()),
        ));
        return None;
    }
    if backend == "ovms" && agent.max_len.is_some() && device != "NPU" {
        cx.error(CompileError::new(
            "agent-max-len",
            &["agent", "max_len"],
            format!("OVMS on the {device} has no context-length option (only the NPU's --max_prompt_len)"),
            Some("drop max_len, or use backend = \"vllm\" (--max-model-len)".to_string()),
        ));
        return None;
    }
    let resource = match device {
        "GPU" => intel_resource(&usable),
        "NPU" => Some("npu.intel.com/accel".to_string()),
        "HPU" => Some("habana.ai/gaudi".to_string()),
        "CUDA" => Some("nvidia.com/gpu".to_string()),
        _ => None,
    };
    if gpu_only
        && device == "GPU"
        && !usable.iter().any(|g| g.platform.as_deref().is_some_and(|p| p.contains("Battlemage")))
    {
        cx.warn(
            "agent-not-battlemage",
            Some("agent.backend"),
            format!("{backend} is validated on Arc Battlemage; this Intel GPU is not one"),
        );
    }
    let hybrid = cx.is_active(Vendor::Hybrid);
    let cpu_request = agent.cpus.unwrap_or_else(|| match device {
        "CPU" if hybrid => crate::parse::parse_cpulist(&cx.facts.host.cpu.p_cores).map_or(1, |c| c.len() as u32).max(1),
        "CPU" => (cx.facts.host.cpu.online_count / 2).max(1),
        _ => 2,
    });
    let mut pod_labels = BTreeMap::new();
    if hybrid {
        pod_labels.insert("k3d-gpu.io/cores".into(), "performance".into());
    }
    let mut node_selector = BTreeMap::new();
    if device == "GPU" && agent.device == AgentDevice::Auto && !gpu_only {
        node_selector.insert("gpu.intel.com/xmx".into(), "true".into());
    }
    if device == "CPU" && cx.is_active(Vendor::Amx) {
        node_selector.insert("feature.node.kubernetes.io/cpu-cpuid.AMXTILE".into(), "true".into());
    }
    let nodes: Vec<crate::facts::DeviceNode> = match device {
        "GPU" => {
            usable.iter().flat_map(|g| g.device_nodes.iter().filter(|n| n.path.contains("/renderD")).cloned()).collect()
        }
        "NPU" => cx.facts.host.npus.iter().filter_map(|n| n.device_node.clone()).collect(),
        _ => Vec::new(),
    };
    let mut supplemental_groups = Vec::new();
    for node in &nodes {
        // gid 0 is what an unknown owner reads as (a fixture without stat data, a node we
        // could not stat): adding root's group would be wrong and a privilege, so say so.
        if node.gid == 0 {
            cx.warn(
                "agent-group-unknown",
                Some("agent.device"),
                format!(
                    "the group of {} is unknown (gid 0 is never added): the pod gets no supplemental group for it, \
                     and a non-root server reaches it only through the device plugin's CDI injection",
                    node.path
                ),
            );
        } else if node.group.is_none() {
            cx.warn(
                "agent-group-unnamed",
                Some("agent.device"),
                format!(
                    "{} belongs to gid {}, which the host's /etc/group does not name; the pod gets gid {} as is",
                    node.path, node.gid, node.gid
                ),
            );
            supplemental_groups.push(node.gid);
        } else {
            supplemental_groups.push(node.gid);
        }
    }
    supplemental_groups.sort_unstable();
    supplemental_groups.dedup();
    let (service, path) = if backend == "ovms" { ("ovms", "v3") } else { ("vllm", "v1") };
    let memory = agent.memory.clone().unwrap_or_else(|| match (backend, device) {
        // Tensor-parallel workers share tensors through a memory-backed /dev/shm, which the
        // pod's memory limit counts.
        _ if gpus > 1 => "16Gi".into(),
        ("vllm", "HPU") => "16Gi".into(),
        ("ovms", _) => "6Gi".into(),
        _ => "8Gi".into(),
    });
    let gpu_resource = intel_resource(&usable);
    let addons = place_addons(cx, intel, device, usable.len(), gpu_resource, npu, hybrid);
    Some(AgentPlan {
        addons,
        backend,
        device,
        reason,
        resource,
        gpus,
        api: format!("http://{service}.k3d-gpu-agent.svc:8000/{path}"),
        cpu_request,
        memory,
        pod_labels,
        node_selector,
        supplemental_groups,
    })
}

/// A key whose value becomes one argument: its name, the value, the longest it may be, the
/// characters it may hold beside letters and digits, and an example for the help.
type WordKey<'a> = (&'static str, &'a Option<String>, usize, &'static [char], &'static str);

/// The `[agent]` values that become a server's arguments or resources: a model id that could
/// read as a flag (`-…`), a path (`..`) or hold a control character or space is refused
/// before it reaches an argv, and so is a memory request Kubernetes would not parse.
fn valid_inputs(cx: &mut Context, agent: &crate::config::Agent) -> bool {
    let mut ok = true;
    if let Some(model) = &agent.model
        && let Some(problem) = crate::config::model_id_problem(model)
    {
        cx.error(CompileError::new(
            "agent-model",
            &["agent", "model"],
            format!("model {} {problem}", crate::escape::quoted(model)),
            Some("give a Hugging Face model id such as \"OpenVINO/Qwen3-4B-int4-ov\"".to_string()),
        ));
        ok = false;
    }
    let words: [WordKey; 4] = [
        ("model_name", &agent.model_name, 64, &['-', '_', '.'], "\"Qwen3-4B\""),
        ("revision", &agent.revision, 64, &['-', '_', '.', '/'], "a 40-hex commit sha"),
        ("tool_parser", &agent.tool_parser, 64, &['-', '_', '.'], "\"hermes\", or \"\" for none"),
        ("reasoning_parser", &agent.reasoning_parser, 64, &['-', '_', '.'], "\"qwen3\", or \"\" for none"),
    ];
    for (key, value, max, extra, example) in words {
        let Some(value) = value else { continue };
        // An empty parser turns it off; an empty name or revision means nothing.
        if value.is_empty() && key.ends_with("_parser") {
            continue;
        }
        if let Some(problem) = crate::config::word_problem(value, max, extra) {
            cx.error(CompileError::new(
                "agent-value",
                &["agent", key],
                format!("{key} {} {problem}", crate::escape::quoted(value)),
                Some(format!("write it like {example}")),
            ));
            ok = false;
        }
    }
    let ranges: [(&str, Option<u64>, u64, u64); 3] = [
        ("gpus", agent.gpus.map(u64::from), 1, u64::from(MAX_GPUS)),
        ("max_len", agent.max_len.map(u64::from), 256, 1_048_576),
        ("timeout", agent.timeout, 60, 86_400),
    ];
    for (key, value, min, max) in ranges {
        if let Some(v) = value
            && !(min..=max).contains(&v)
        {
            cx.error(CompileError::new(
                "agent-value",
                &["agent", key],
                format!("{key} = {v} is out of range"),
                Some(format!("give a whole number from {min} to {max}")),
            ));
            ok = false;
        }
    }
    if let Some(image) = &agent.image
        && let Err(problem) = crate::images::ImageRef::parse(image)
    {
        cx.error(CompileError::new(
            "agent-image",
            &["agent", "image"],
            format!("image {}: {problem}", crate::escape::quoted(image)),
            Some("name an image as registry/repo:tag (optionally @sha256:…)".to_string()),
        ));
        ok = false;
    }
    if let Some(storage) = &agent.storage
        && !super::claims::quantity(storage)
    {
        cx.error(CompileError::new(
            "agent-storage",
            &["agent", "storage"],
            format!("storage {} is not a Kubernetes quantity", crate::escape::quoted(storage)),
            Some("write it like \"20Gi\"".to_string()),
        ));
        ok = false;
    }
    if let Some(memory) = &agent.memory
        && !super::claims::quantity(memory)
    {
        cx.error(CompileError::new(
            "agent-memory",
            &["agent", "memory"],
            format!("memory {} is not a Kubernetes quantity", crate::escape::quoted(memory)),
            Some("write it like \"6Gi\" or \"8G\"".to_string()),
        ));
        ok = false;
    }
    ok
}

/// An NVIDIA GPU's memory in GiB: nvidia-smi's MiB from a capture, rounded to the nearest
/// GiB (a "16 GB" board reports a little less), else the PCI id table.
fn nvidia_gib(gpu: &crate::facts::NvidiaGpu) -> Option<u32> {
    match gpu.memory_mib {
        Some(mib) => u32::try_from(mib.saturating_add(512) / 1024).ok(),
        None => gpu.device_id.and_then(crate::hwdb::nvidia_memory_gib),
    }
}

/// Whether `gpus` > 1 can serve here: vLLM (or llm-scaler) splits a model across GPUs of one
/// node; OVMS, the NPU and the CPU cannot, and neither can a node with fewer usable GPUs of
/// the placed kind, or GPUs shared by time-slicing (two "GPUs" could be one).
fn tensor_parallel_fits(cx: &mut Context, backend: &str, device: &str, gpus: u32, intel: usize, shared: u32) -> bool {
    let refuse = |cx: &mut Context, message: String, fix: &str| {
        cx.error(CompileError::new("agent-gpus", &["agent", "gpus"], message, Some(fix.to_string())));
        false
    };
    if backend == "ovms" {
        return refuse(
            cx,
            format!("gpus = {gpus}, and OVMS serves a model on one device: it cannot split one across GPUs"),
            "use backend = \"vllm\" for tensor parallelism, or gpus = 1",
        );
    }
    let have = match device {
        "CUDA" => cx.facts.host.nvidia.gpus.len(),
        "GPU" => intel,
        "HPU" => cx.facts.host.gaudi.devices.iter().filter(|g| g.device_node.is_some()).count(),
        other => {
            return refuse(
                cx,
                format!("gpus = {gpus}, and the model runs on the {other}, which cannot split it across GPUs"),
                "tensor parallelism needs vLLM on NVIDIA or Intel GPUs: set gpus = 1",
            );
        }
    };
    let kind = match device {
        "CUDA" => "NVIDIA GPU",
        "HPU" => "Gaudi",
        _ => "usable Intel GPU",
    };
    if (have as u32) < gpus {
        return refuse(
            cx,
            format!("gpus = {gpus}, and this node has {have} {kind}{}", if have == 1 { "" } else { "s" }),
            "set gpus to at most the GPUs one node has (`k3d-gpu detect` lists them)",
        );
    }
    let shared = match device {
        "CUDA" => cx.config.sharing.nvidia.is_some(),
        "GPU" => shared > 1,
        _ => false,
    };
    if shared {
        return refuse(
            cx,
            format!("gpus = {gpus} with the GPUs shared: the device plugin may hand out {gpus} slices of one GPU"),
            "turn GPU sharing off ([sharing] shared = 1, no [sharing.nvidia]) for a tensor-parallel model",
        );
    }
    true
}

/// The resource a pod requests for one of these Intel GPUs: `xe` when any is bound to xe,
/// else `i915`; none without a GPU.
fn intel_resource(gpus: &[&IntelGpu]) -> Option<String> {
    let driver = if gpus.iter().any(|g| g.driver.as_deref() == Some("xe")) { "xe" } else { "i915" };
    (!gpus.is_empty()).then(|| format!("gpu.intel.com/{driver}"))
}

/// Free units per engine after the LLM: each Intel GPU gives its sharing count (1 when
/// exclusive), each NPU one. Explicit requests first, then auto in the reference's order.
fn place_addons(
    cx: &mut Context,
    intel: &IntelPlan,
    llm: &str,
    gpus: usize,
    gpu_resource: Option<String>,
    npu: bool,
    hybrid: bool,
) -> Vec<AddonPlan> {
    let config = cx.config;
    let addons = &config.addons;
    if addons.is_empty() {
        return Vec::new();
    }
    let mut free_gpu = gpus as u32 * intel.shared.unwrap_or(1);
    let mut free_npu = u32::from(npu) * cx.facts.host.npus.iter().filter(|n| n.device_node.is_some()).count() as u32;
    // How many units each engine had before the LLM took one: the help differs between "none
    // here" and "all taken".
    let (gpu_units, npu_units) = (free_gpu, free_npu);
    match llm {
        "GPU" => free_gpu = free_gpu.saturating_sub(1),
        "NPU" => free_npu = free_npu.saturating_sub(1),
        _ => {}
    }
    if let Some(video) = addons.get(&AddonName::Video)
        && let Some(source) = &video.source
    {
        // A URI with userinfo is never echoed: its password would reach the terminal and CI logs.
        let credentials = crate::secrets::blank_passwords(source) != *source
            || source
                .split_once("://")
                .is_some_and(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default().contains('@'));
        let shown = if credentials { "(a URI with credentials)".to_string() } else { crate::escape::quoted(source) };
        let help = Some("give a stream URI (rtsp://…, https://…), or leave it unset for the sample clip".to_string());
        if source.starts_with("file:") || !source.contains("://") {
            cx.error(CompileError::new(
                "video-source-local",
                &["addons", "video", "source"],
                format!("video source {shown} is a host path: the pod cannot see the host's files"),
                help,
            ));
        } else if let Some(problem) = crate::config::video_source_problem(source) {
            cx.error(CompileError::new(
                "video-source",
                &["addons", "video", "source"],
                format!("video source {shown} {problem}"),
                help,
            ));
        }
    }
    for (name, addon) in addons {
        if addon.source.is_some() && *name != AddonName::Video {
            cx.error(CompileError::new(
                "addon-source",
                &["addons", name_of(*name), "source"],
                format!("source is a key of [addons.video] only, not of [addons.{}]", name_of(*name)),
                None,
            ));
        }
    }
    let preferences = |name: AddonName| -> &'static [&'static str] {
        match name {
            AddonName::Video => &["GPU", "CPU"],
            AddonName::Vlm => &["GPU", "CPU"],
            AddonName::Stt => &["NPU", "GPU", "CPU"],
            // Never auto-placed: auto means the NPU (below, with the explicit requests).
            AddonName::Embeddings => &["NPU"],
        }
    };
    let mut placed: Vec<AddonPlan> = Vec::new();
    let take = |device: &str, free_gpu: &mut u32, free_npu: &mut u32| -> bool {
        match device {
            "GPU" if *free_gpu > 0 => {
                *free_gpu -= 1;
                true
            }
            "NPU" if *free_npu > 0 => {
                *free_npu -= 1;
                true
            }
            "CPU" => true,
            _ => false,
        }
    };
    let explicit: Vec<(AddonName, &'static str)> = addons
        .iter()
        .filter_map(|(name, a)| match a.device {
            // Embeddings are an NPU recipe: auto asks for the NPU like an explicit request.
            AddonDevice::Auto if *name == AddonName::Embeddings => Some((*name, "NPU")),
            AddonDevice::Auto => None,
            AddonDevice::Gpu => Some((*name, "GPU")),
            AddonDevice::Npu => Some((*name, "NPU")),
            AddonDevice::Cpu => Some((*name, "CPU")),
        })
        .collect();
    for (name, device) in explicit {
        if name == AddonName::Video && device == "NPU" {
            cx.error(CompileError::new(
                "addon-device",
                &["addons", "video", "device"],
                "video never runs on the NPU: only the GPU has media engines".to_string(),
                None,
            ));
            continue;
        }
        if !take(device, &mut free_gpu, &mut free_npu) {
            let units = if device == "NPU" { npu_units } else { gpu_units };
            let auto = addons.get(&name).is_some_and(|a| a.device == AddonDevice::Auto);
            let (problem, help) = match (device, units) {
                (_, 0) if auto => (
                    format!(
                        "{} run on the NPU unless told otherwise, and the cluster gets no usable NPU here",
                        name_of(name)
                    ),
                    format!(
                        "set [addons.{}] device = \"cpu\" or \"gpu\", or fix the NPU (`k3d-gpu doctor`)",
                        name_of(name)
                    ),
                ),
                (_, 0) => (
                    format!("{} asks for the {device}, and the cluster gets no usable {device} here", name_of(name)),
                    "`k3d-gpu detect` shows what this host has; let the add-on choose (device = \"auto\") or ask for \
                     another device"
                        .to_string(),
                ),
                ("NPU", _) => (
                    format!("{} asks for the NPU, and no NPU unit is free (the LLM runs on the {llm})", name_of(name)),
                    "an NPU serves one engine at a time: let the add-on choose (device = \"auto\") or ask for \
                     another device"
                        .to_string(),
                ),
                _ => (
                    format!("{} asks for the GPU, and no GPU unit is free (the LLM runs on the {llm})", name_of(name)),
                    "set [sharing] shared = <n> to share the GPU, or let the add-on choose (device = \"auto\")"
                        .to_string(),
                ),
            };
            cx.error(CompileError::new("addon-device", &["addons", name_of(name), "device"], problem, Some(help)));
            continue;
        }
        let reason = if addons.get(&name).is_some_and(|a| a.device == AddonDevice::Auto) {
            format!("the {device}, the default for {}", name_of(name))
        } else {
            format!("asked for the {device}")
        };
        placed.push(AddonPlan { name, device, resource: None, cores: None, reason });
    }
    for name in [AddonName::Video, AddonName::Vlm, AddonName::Stt] {
        let Some(a) = addons.get(&name) else { continue };
        if a.device != AddonDevice::Auto {
            continue;
        }
        let wants = preferences(name);
        let device = wants.iter().copied().find(|d| take(d, &mut free_gpu, &mut free_npu)).unwrap_or("CPU");
        let reason = if device == wants[0] {
            format!("the {device} suits it best and has a free unit")
        } else {
            let why = format!("{} falls back to the {device}: no free {} unit", name_of(name), wants[0]);
            cx.warn("addon-fallback", Some("addons"), why.clone());
            why
        };
        placed.push(AddonPlan { name, device, resource: None, cores: None, reason });
    }
    for p in &mut placed {
        p.resource = match p.device {
            "GPU" => gpu_resource.clone(),
            "NPU" => Some("npu.intel.com/accel".to_string()),
            _ => None,
        };
        if hybrid {
            p.cores = Some(if p.device == "CPU" { "performance" } else { "efficient" });
        }
    }
    placed.sort_by_key(|p| p.name);
    placed
}

pub(super) fn name_of(name: AddonName) -> &'static str {
    match name {
        AddonName::Vlm => "vlm",
        AddonName::Stt => "stt",
        AddonName::Video => "video",
        AddonName::Embeddings => "embeddings",
    }
}
