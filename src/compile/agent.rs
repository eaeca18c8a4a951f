//! The agent's placement by the reference rules: which backend and device the LLM server gets
//! from what the cluster will advertise (not from the host alone), the firmware gatekeeper's
//! verdict, and the P-core/AMX/group details of its pod. Pure: the decision is data in the
//! graph (`agent`), and `k3d-gpu agent` explains it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::held::{Held, Taken};
use super::intel::IntelPlan;
use super::{CompileError, Context, Warning};
use crate::config::{AddonDevice, AddonName, AgentBackend, AgentDevice, GpuMode};
use crate::facts::targets::{Target, TargetKind};
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
    let gpus = agent.gpus.unwrap_or(1);
    // What the host offers, and what of it other workloads leave free on the cluster.
    let full = Offer::read(cx, intel);
    let mut offer = full.clone();
    let withheld = offer.withhold(&cx.held, gpus);
    if offer.nvidia && offer.cuda_gib.is_none() && agent.device == AgentDevice::Auto {
        let why = cuda_memory_unknown(&cx.facts.host.nvidia.gpus);
        cx.warn("agent-cuda-memory-unknown", Some("agent.device"), why);
    }
    let backend = backend(agent.backend, agent.device, offer.gaudi, offer.cuda_auto());
    let gpu_only = backend != "ovms";
    // The device placement would have chosen had nothing been held: the one others took.
    let lost = (!withheld.is_empty())
        .then(|| {
            placement(agent.device, self::backend(agent.backend, agent.device, full.gaudi, full.cuda_auto()), &full)
        })
        .and_then(Result::ok)
        .and_then(|ideal| withheld.iter().find(|w| w.device == ideal.device));
    let placed = placement(agent.device, backend, &offer);
    let Placed { device, reason, warning } = match (placed, lost) {
        (Ok(mut placed), Some(lost)) => {
            let text = format!(
                "the agent runs on the {} instead of the {}, which other workloads hold ({})",
                device_word(placed.device),
                device_word(lost.device),
                lost.taken.sentence()
            );
            cx.warn("agent-device-held", Some("agent.device"), text.clone());
            // The rule that chose the fallback explains it against what is left, which reads
            // as a contradiction beside the held device: this sentence is the reason.
            placed.reason = text;
            placed
        }
        (Err(_), Some(lost)) => {
            let (message, fix) = held_refusal(agent, lost, gpus, &offer);
            device_error(cx, "device", message, fix);
            return None;
        }
        (Ok(placed), None) => placed,
        (Err(Refusal { key, message, fix }), None) => {
            device_error(cx, key, message, fix);
            return None;
        }
    };
    if let Some(why) = warning {
        cx.warn("agent-gpu-refused", Some("agent.device"), format!("the agent runs on the CPU because {why}"));
    }
    // `gpu` is the Intel GPU, always (a config written for it must not move): where the
    // cluster also advertises NVIDIA GPUs, the plan says which value takes those.
    if agent.device == AgentDevice::Gpu && device == "GPU" && offer.nvidia {
        cx.warn(
            "agent-gpu-is-intel",
            Some("agent.device"),
            "device = \"gpu\" is the Intel GPU, and runs the agent there while the cluster also advertises nvidia.com/gpu: device = \"cuda\" runs vLLM on the NVIDIA GPU",
        );
    }
    let usable: Vec<&IntelGpu> = offer.usable.iter().collect();
    if gpus > 1 && !tensor_parallel_fits(cx, backend, device, gpus, usable.len(), intel.shared.unwrap_or(1)) {
        return None;
    }
    if let Some(e) = ovms_limit(backend, device, agent) {
        cx.error(e);
        return None;
    }
    if let Some(text) = not_battlemage(backend, device, &usable) {
        cx.warn("agent-not-battlemage", Some("agent.backend"), text);
    }
    let hybrid = cx.is_active(Vendor::Hybrid);
    let cpu = &cx.facts.host.cpu;
    let cpu_request = agent.cpus.unwrap_or_else(|| default_cpus(device, hybrid, &cpu.p_cores, cpu.online_count));
    let mut pod_labels = BTreeMap::new();
    if hybrid {
        pod_labels.insert("k3d-gpu.io/cores".into(), "performance".into());
    }
    let node_selector = node_selector(device, agent.device, gpu_only, cx.is_active(Vendor::Amx));
    let nodes = device_nodes(device, &usable, &cx.facts.host.npus);
    let (supplemental_groups, group_warnings) = supplemental_groups(&nodes);
    cx.warnings.extend(group_warnings);
    let memory = agent.memory.clone().unwrap_or_else(|| default_memory(backend, device, gpus).into());
    // The add-ons judge the host's devices again, on what the agent and other workloads leave.
    let all_usable: Vec<&IntelGpu> = full.usable.iter().collect();
    let gpu_resource = intel_resource(&all_usable);
    let addons = place_addons(cx, intel, device, all_usable.len(), gpu_resource, full.npu, hybrid);
    Some(AgentPlan {
        addons,
        backend,
        device,
        reason,
        resource: resource(device, &usable),
        gpus,
        api: api(backend),
        cpu_request,
        memory,
        pod_labels,
        node_selector,
        supplemental_groups,
    })
}

/// What the cluster will advertise for the agent, read from the facts once: the rules below
/// decide from this, never from the host alone.
#[derive(Debug, Default, Clone)]
struct Offer {
    /// A usable Gaudi (habana.ai/gaudi).
    gaudi: bool,
    /// A usable NPU (npu.intel.com/accel).
    npu: bool,
    /// The fix the facts give for a refused NPU.
    npu_fix: Option<String>,
    /// `[sharing] mode = "dra"`: no gpu.intel.com/xe|i915 is advertised.
    dra: bool,
    intel_active: bool,
    /// Intel GPUs the cluster advertises as gpu.intel.com/xe|i915: the plugin path only, and
    /// only the GPUs the [sharing] selection gives the plugin.
    advertised: Vec<IntelGpu>,
    /// Those the firmware gatekeeper does not refuse.
    usable: Vec<IntelGpu>,
    /// The first advertised GPU's refusal.
    refused: Option<Target>,
    /// NVIDIA GPUs the cluster advertises as nvidia.com/gpu.
    nvidia: bool,
    /// NVIDIA GPUs are active but go to DRA claims, so nothing advertises nvidia.com/gpu.
    nvidia_dra: bool,
    /// The largest one's memory: what nvidia-smi reported at capture, else what the board's
    /// PCI id is sold with.
    cuda_gib: Option<u32>,
}

impl Offer {
    fn read(cx: &Context, intel: &IntelPlan) -> Offer {
        let targets = &cx.facts.targets;
        let dra = cx.intel_mode() == GpuMode::Dra;
        let advertised: Vec<IntelGpu> = if cx.is_active(Vendor::Intel) && !dra {
            cx.facts.host.intel_gpus.iter().filter(|g| intel.gpus.contains(&g.pci_address)).cloned().collect()
        } else {
            Vec::new()
        };
        let refusal = |g: &IntelGpu| {
            targets.iter().find(|t| t.id == format!("intel-gpu/{}", g.pci_address) && !t.usable).cloned()
        };
        let usable = advertised.iter().filter(|g| refusal(g).is_none()).cloned().collect();
        let refused = advertised.iter().find_map(refusal);
        let nvidia_present = cx.is_active(Vendor::Nvidia) && !cx.facts.host.nvidia.gpus.is_empty();
        let nvidia_dra = nvidia_present && cx.nvidia_mode() == GpuMode::Dra;
        let nvidia = nvidia_present && !nvidia_dra;
        Offer {
            gaudi: cx.is_active(Vendor::Gaudi) && targets.iter().any(|t| t.kind == TargetKind::Gaudi && t.usable),
            npu: cx.is_active(Vendor::Npu) && targets.iter().any(|t| t.kind == TargetKind::Npu && t.usable),
            npu_fix: targets.iter().find(|t| t.kind == TargetKind::Npu && !t.usable).and_then(|t| t.fix.clone()),
            dra,
            intel_active: cx.is_active(Vendor::Intel),
            advertised,
            usable,
            refused,
            nvidia,
            nvidia_dra,
            cuda_gib: cx.facts.host.nvidia.gpus.iter().filter_map(nvidia_gib).max().filter(|_| nvidia),
        }
    }

    /// Takes out each device whose resource other workloads hold so that no node has `gpus`
    /// units of it free (one for the NPU), and says which and why.
    fn withhold(&mut self, held: &Held, gpus: u32) -> Vec<Withheld> {
        let need = u64::from(gpus);
        let mut out = Vec::new();
        if self.nvidia
            && let Some(taken) = held.taken(CUDA_RESOURCE, need)
        {
            self.nvidia = false;
            self.cuda_gib = None;
            out.push(Withheld { device: "CUDA", need, taken });
        }
        if self.gaudi
            && let Some(taken) = held.taken(GAUDI_RESOURCE, need)
        {
            self.gaudi = false;
            out.push(Withheld { device: "HPU", need, taken });
        }
        let usable: Vec<&IntelGpu> = self.usable.iter().collect();
        if let Some(resource) = intel_resource(&usable)
            && let Some(taken) = held.taken(&resource, need)
        {
            self.usable.clear();
            self.advertised.clear();
            self.refused = None;
            out.push(Withheld { device: "GPU", need, taken });
        }
        if self.npu
            && let Some(taken) = held.taken(NPU_RESOURCE, 1)
        {
            self.npu = false;
            self.npu_fix = Some(format!("stop what holds the NPU ({})", taken.sentence()));
            out.push(Withheld { device: "NPU", need: 1, taken });
        }
        out
    }

    /// Auto wants room for the default model before it serves on an NVIDIA GPU.
    fn cuda_auto(&self) -> bool {
        self.cuda_gib.is_some_and(|gib| gib >= CUDA_MIN_GIB)
    }

    fn xmx_node(&self) -> bool {
        self.usable.iter().any(|g| g.xmx == Xmx::Yes)
    }
}

/// A device the host has and the agent could use, which other workloads hold on the cluster.
#[derive(Debug, Clone)]
struct Withheld {
    device: &'static str,
    need: u64,
    taken: Taken,
}

const CUDA_RESOURCE: &str = "nvidia.com/gpu";
const GAUDI_RESOURCE: &str = "habana.ai/gaudi";
const NPU_RESOURCE: &str = "npu.intel.com/accel";

/// The refusal of a device the config asks for by name (or the only one its backend runs on)
/// that other workloads hold: the holders named, and a setting that places the agent now,
/// where one does.
fn held_refusal(agent: &crate::config::Agent, lost: &Withheld, gpus: u32, offer: &Offer) -> (String, String) {
    let Withheld { device, need, taken } = lost;
    let message = format!(
        "the agent needs {need} {} for the {}, and no node has {need} free: {}",
        taken.resource,
        device_word(device),
        taken.sentence()
    );
    let works = |device: AgentDevice| {
        let backend = backend(agent.backend, device, offer.gaudi, offer.cuda_auto());
        placement(device, backend, offer).is_ok()
    };
    let stop = "stop the pods that hold it";
    // A split model (`gpus` > 1) needs as many free GPUs of one kind, which what is left may
    // not have: the way out is the holders, or one GPU.
    let fix = if gpus > 1 {
        format!("{stop}, or serve from one GPU: set [agent] gpus = 1")
    } else if agent.device != AgentDevice::Auto && works(AgentDevice::Auto) {
        format!("set [agent] device = \"auto\" to place the agent on what is free, or {stop}")
    } else if works(AgentDevice::Cpu) {
        format!("set [agent] device = \"cpu\" to serve from the CPU meanwhile, or {stop}")
    } else {
        stop.to_string()
    };
    (message, fix)
}

/// A placed device as a sentence names it.
fn device_word(device: &str) -> &str {
    match device {
        "CUDA" => "NVIDIA GPU",
        "GPU" => "Intel GPU",
        "HPU" => "Gaudi",
        other => other,
    }
}

/// Why auto passes over an NVIDIA GPU whose memory is unknown: what its boards are sold with,
/// when the PCI id names the board.
fn cuda_memory_unknown(gpus: &[crate::facts::NvidiaGpu]) -> String {
    let boards: Vec<String> = gpus
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
    format!(
        "{why}, so auto does not serve the model on it; set device = \"cuda\" to use it, or capture the host with \
         `k3d-gpu facts capture` where nvidia-smi runs"
    )
}

/// The server: auto is vLLM where a Gaudi or a roomy NVIDIA GPU serves (or when one is forced),
/// OVMS elsewhere.
fn backend(backend: AgentBackend, device: AgentDevice, gaudi: bool, cuda_auto: bool) -> &'static str {
    match (backend, device) {
        (AgentBackend::Auto, AgentDevice::Hpu | AgentDevice::Cuda) => "vllm",
        (AgentBackend::Auto, AgentDevice::Auto) if gaudi || cuda_auto => "vllm",
        (AgentBackend::Auto | AgentBackend::Ovms, _) => "ovms",
        (AgentBackend::Vllm, _) => "vllm",
        (AgentBackend::LlmScaler, _) => "llm-scaler",
    }
}

/// Where the server runs, and why in a sentence.
#[derive(Debug, PartialEq, Eq)]
struct Placed {
    device: &'static str,
    reason: String,
    /// Said when the agent runs on the CPU because the gatekeeper refused the Intel GPU.
    warning: Option<String>,
}

/// Why the agent cannot be placed: the `[agent]` key to underline, the message and the fix.
#[derive(Debug, PartialEq, Eq)]
struct Refusal {
    key: &'static str,
    message: String,
    fix: String,
}

fn placed(device: &'static str, reason: impl Into<String>) -> Placed {
    Placed { device, reason: reason.into(), warning: None }
}

fn refusal(key: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Refusal {
    Refusal { key, message: message.into(), fix: fix.into() }
}

/// The device, in the reference's order: a backend that cannot run on the device asked for
/// is refused, then the named accelerators, then an Intel GPU where one is wanted, then an
/// XMX GPU for OVMS, else the CPU.
fn placement(device: AgentDevice, backend: &'static str, offer: &Offer) -> Result<Placed, Refusal> {
    if let Some(refused) = unsupported(device, backend) {
        return Err(refused);
    }
    if let Some(placed) = accelerator(device, backend, offer) {
        return placed;
    }
    // vLLM and llm-scaler serve from a GPU (or a Gaudi, handled first); OVMS only when forced.
    let gpu_only = backend != "ovms";
    if device == AgentDevice::Gpu || (device == AgentDevice::Auto && gpu_only && !offer.gaudi) {
        return intel_gpu(device, backend, offer);
    }
    if device == AgentDevice::Auto && !offer.usable.is_empty() && offer.xmx_node() {
        return Ok(placed("GPU", "an Intel GPU with XMX on the node: the model runs there"));
    }
    Ok(on_cpu(device, offer))
}

/// A backend asked to run where it never does.
fn unsupported(device: AgentDevice, backend: &str) -> Option<Refusal> {
    match device {
        AgentDevice::Hpu if backend != "vllm" => Some(refusal(
            "device",
            format!("{backend} does not run on a Gaudi"),
            "use backend = \"vllm\" (or \"auto\") for the HPU",
        )),
        AgentDevice::Cpu | AgentDevice::Npu if backend != "ovms" => Some(refusal(
            "device",
            format!("{backend} runs on an Intel GPU, a Gaudi or (vllm) an NVIDIA GPU only"),
            "use backend = \"ovms\" for the CPU or the NPU",
        )),
        AgentDevice::Cuda if backend != "vllm" => Some(refusal(
            "device",
            format!("{backend} does not run on an NVIDIA GPU"),
            "use backend = \"vllm\" (or \"auto\") for CUDA",
        )),
        _ => None,
    }
}

/// CUDA, the Gaudi or the NPU: asked for by name (refused when the cluster lacks it), or
/// chosen by auto for vLLM. `None`: the Intel GPU or the CPU decide.
fn accelerator(device: AgentDevice, backend: &str, offer: &Offer) -> Option<Result<Placed, Refusal>> {
    let vllm = backend == "vllm";
    Some(match device {
        AgentDevice::Cuda if offer.nvidia => Ok(placed("CUDA", "forced: vLLM (CUDA) on an NVIDIA GPU")),
        AgentDevice::Cuda if offer.nvidia_dra => Err(refusal(
            "device",
            "device = \"cuda\" but the NVIDIA GPUs go to DRA claims ([sharing] mode), and nothing advertises nvidia.com/gpu, which the agent requests",
            "give NVIDIA the plugin path: [sharing] mode = { nvidia = \"plugin\" } (Intel's path stays as you set it)",
        )),
        AgentDevice::Cuda => Err(refusal(
            "device",
            "device = \"cuda\" but the cluster will advertise no NVIDIA GPU",
            "check `k3d-gpu detect` (the nvidia vendor must be active)",
        )),
        AgentDevice::Auto if vllm && !offer.gaudi && offer.cuda_auto() => Ok(placed(
            "CUDA",
            format!(
                "the cluster advertises nvidia.com/gpu and the GPU has {} GiB (the default model wants {CUDA_MIN_GIB}): vLLM on CUDA",
                offer.cuda_gib.unwrap_or_default()
            ),
        )),
        // backend = "vllm" asked for by name on an NVIDIA host without an Intel GPU for it:
        // CUDA is the only place it can run, memory known or not.
        AgentDevice::Auto if vllm && !offer.gaudi && offer.nvidia && offer.usable.is_empty() => {
            Ok(placed("CUDA", "vLLM on the NVIDIA GPU: the cluster advertises no Intel GPU for it"))
        }
        AgentDevice::Hpu | AgentDevice::Auto if vllm && offer.gaudi => {
            Ok(placed("HPU", "the cluster advertises habana.ai/gaudi: vLLM on the Gaudi"))
        }
        AgentDevice::Hpu => Err(refusal(
            "device",
            "device = \"hpu\" but the cluster will advertise no usable Gaudi",
            "load Intel's habanalabs driver (`k3d-gpu doctor`), or use device = \"auto\"",
        )),
        AgentDevice::Npu if offer.npu => {
            Ok(placed("NPU", "forced: OVMS on the NPU (stateful pipeline, static prompt shapes)"))
        }
        AgentDevice::Npu => Err(refusal(
            "device",
            "device = \"npu\" but the cluster will advertise no usable NPU",
            offer.npu_fix.clone().unwrap_or_else(|| "load intel_vpu on a kernel that supports the NPU".into()),
        )),
        _ => return None,
    })
}

/// An Intel GPU is wanted (forced, or the backend serves only from a GPU): the first usable
/// one, else why there is none.
fn intel_gpu(device: AgentDevice, backend: &str, offer: &Offer) -> Result<Placed, Refusal> {
    let forced = device == AgentDevice::Gpu;
    if !offer.usable.is_empty() {
        let reason = if forced {
            "forced: any allocatable Intel GPU, XMX or not".into()
        } else {
            format!("{backend} runs on the Intel GPU")
        };
        return Ok(placed("GPU", reason));
    }
    let (message, fix) = match (&offer.refused, offer.dra, offer.advertised.is_empty()) {
        (Some(t), _, _) => (
            format!("the Intel GPU is refused: {}", t.reason.clone().unwrap_or_default()),
            t.fix.clone().unwrap_or_default(),
        ),
        (None, true, _) => (
            "DRA mode does not advertise gpu.intel.com/xe or i915, which the agent requests".to_string(),
            "use [sharing] mode = \"plugin\" for the agent's GPU".to_string(),
        ),
        _ => ("the cluster will advertise no Intel GPU".to_string(), "check `k3d-gpu detect`".to_string()),
    };
    // On a host with NVIDIA GPUs, the value that reaches them is part of the way out.
    let fix = if forced && offer.nvidia {
        format!("{fix}; or set device = \"cuda\" for vLLM on the NVIDIA GPU (\"gpu\" is the Intel GPU)")
    } else {
        fix
    };
    Err(refusal(if forced { "device" } else { "backend" }, message, fix))
}

/// The CPU, and why: forced, the gatekeeper refused the GPU (also a warning), DRA mode hides
/// it, the GPU lacks XMX, or there is nothing else.
fn on_cpu(device: AgentDevice, offer: &Offer) -> Placed {
    if device == AgentDevice::Cpu {
        return placed("CPU", "forced: the CPU");
    }
    if let Some(t) = &offer.refused {
        let why = format!(
            "the Intel GPU is refused by the firmware gatekeeper ({}); fix: {}",
            t.reason.clone().unwrap_or_default(),
            t.fix.clone().unwrap_or_default()
        );
        return Placed { device: "CPU", reason: why.clone(), warning: Some(why) };
    }
    let reason = if offer.dra && offer.intel_active {
        "DRA mode does not advertise gpu.intel.com/xe or i915, which the agent requests"
    } else if !offer.advertised.is_empty() {
        XMX_REASON
    } else {
        "no accelerator the agent can use is advertised"
    };
    placed("CPU", reason)
}

/// OVMS cannot pin a revision, and has a context-length option only on the NPU.
fn ovms_limit(backend: &str, device: &str, agent: &crate::config::Agent) -> Option<CompileError> {
    if backend != "ovms" {
        return None;
    }
    if agent.revision.is_some() {
        return Some(CompileError::new(
            "agent-revision",
            &["agent", "revision"],
            "OVMS cannot pin a model revision: its --pull clones the repository's default branch".to_string(),
            Some("drop revision, or use backend = \"vllm\", which downloads the revision named".to_string()),
        ));
    }
    (agent.max_len.is_some() && device != "NPU").then(|| {
        CompileError::new(
            "agent-max-len",
            &["agent", "max_len"],
            format!("OVMS on the {device} has no context-length option (only the NPU's --max_prompt_len)"),
            Some("drop max_len, or use backend = \"vllm\" (--max-model-len)".to_string()),
        )
    })
}

/// The extended resource the pod requests on each device (none on the CPU).
fn resource(device: &str, usable: &[&IntelGpu]) -> Option<String> {
    match device {
        "GPU" => intel_resource(usable),
        "NPU" => Some(NPU_RESOURCE.to_string()),
        "HPU" => Some(GAUDI_RESOURCE.to_string()),
        "CUDA" => Some(CUDA_RESOURCE.to_string()),
        _ => None,
    }
}

/// vLLM and llm-scaler are validated on Arc Battlemage: another Intel GPU is worth a word.
fn not_battlemage(backend: &str, device: &str, usable: &[&IntelGpu]) -> Option<String> {
    let battlemage = usable.iter().any(|g| g.platform.as_deref().is_some_and(|p| p.contains("Battlemage")));
    (backend != "ovms" && device == "GPU" && !battlemage)
        .then(|| format!("{backend} is validated on Arc Battlemage; this Intel GPU is not one"))
}

/// CPUs the server requests unless `[agent] cpus` says: the P-cores on a hybrid CPU, half the
/// online CPUs on another, 2 beside an accelerator.
fn default_cpus(device: &str, hybrid: bool, p_cores: &str, online_count: u32) -> u32 {
    match device {
        "CPU" if hybrid => crate::parse::parse_cpulist(p_cores).map_or(1, |c| c.len() as u32).max(1),
        "CPU" => (online_count / 2).max(1),
        _ => 2,
    }
}

/// Where the pod may land: an XMX node for OVMS on an auto-chosen GPU, an AMX node for the
/// CPU when AMX is active.
fn node_selector(device: &str, asked: AgentDevice, gpu_only: bool, amx: bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if device == "GPU" && asked == AgentDevice::Auto && !gpu_only {
        out.insert("gpu.intel.com/xmx".into(), "true".into());
    }
    if device == "CPU" && amx {
        out.insert("feature.node.kubernetes.io/cpu-cpuid.AMXTILE".into(), "true".into());
    }
    out
}

/// The device nodes the server opens: the Intel GPUs' render nodes, or the NPUs' nodes.
fn device_nodes(device: &str, usable: &[&IntelGpu], npus: &[crate::facts::Npu]) -> Vec<crate::facts::DeviceNode> {
    match device {
        "GPU" => {
            usable.iter().flat_map(|g| g.device_nodes.iter().filter(|n| n.path.contains("/renderD")).cloned()).collect()
        }
        "NPU" => npus.iter().filter_map(|n| n.device_node.clone()).collect(),
        _ => Vec::new(),
    }
}

/// The groups of the device nodes the server opens, sorted once each, and a warning per node
/// whose group is unknown (gid 0 is never added) or unnamed (added as is).
fn supplemental_groups(nodes: &[crate::facts::DeviceNode]) -> (Vec<u32>, Vec<Warning>) {
    let mut groups = Vec::new();
    let mut warnings = Vec::new();
    let warn = |text: String, code: &str| Warning { code: code.into(), text, key: Some("agent.device".into()) };
    for node in nodes {
        // gid 0 is what an unknown owner reads as (a fixture without stat data, a node we
        // could not stat): adding root's group would be wrong and a privilege, so say so.
        if node.gid == 0 {
            warnings.push(warn(
                format!(
                    "the group of {} is unknown (gid 0 is never added): the pod gets no supplemental group for it, \
                     and a non-root server reaches it only through the device plugin's CDI injection",
                    node.path
                ),
                "agent-group-unknown",
            ));
            continue;
        }
        if node.group.is_none() {
            warnings.push(warn(
                format!(
                    "{} belongs to gid {}, which the host's /etc/group does not name; the pod gets gid {} as is",
                    node.path, node.gid, node.gid
                ),
                "agent-group-unnamed",
            ));
        }
        groups.push(node.gid);
    }
    groups.sort_unstable();
    groups.dedup();
    (groups, warnings)
}

/// The server's in-cluster OpenAI-compatible base URL.
fn api(backend: &str) -> String {
    let (service, path) = if backend == "ovms" { ("ovms", "v3") } else { ("vllm", "v1") };
    format!("http://{service}.k3d-gpu-agent.svc:8000/{path}")
}

/// The pod's memory unless `[agent] memory` says.
fn default_memory(backend: &str, device: &str, gpus: u32) -> &'static str {
    match (backend, device) {
        // Tensor-parallel workers share tensors through a memory-backed /dev/shm, which the
        // pod's memory limit counts.
        _ if gpus > 1 => "16Gi",
        ("vllm", "HPU") => "16Gi",
        ("ovms", _) => "6Gi",
        _ => "8Gi",
    }
}

/// A key whose value becomes one argument: its name, the value, the longest it may be, the
/// characters it may hold beside letters and digits, and an example for the help.
type WordKey<'a> = (&'static str, &'a Option<String>, usize, &'static [char], &'static str);

/// The `[agent]` values that become a server's arguments or resources: a model id that could
/// read as a flag (`-…`), a path (`..`) or hold a control character or space is refused
/// before it reaches an argv, and so is a memory request Kubernetes would not parse.
fn valid_inputs(cx: &mut Context, agent: &crate::config::Agent) -> bool {
    let errors: Vec<CompileError> = model_error(agent)
        .into_iter()
        .chain(word_errors(agent))
        .chain(range_errors(agent))
        .chain(image_error(agent))
        .chain(quantity_errors(agent))
        .collect();
    let ok = errors.is_empty();
    cx.errors.extend(errors);
    ok
}

/// `model` is a Hugging Face model id.
fn model_error(agent: &crate::config::Agent) -> Option<CompileError> {
    let model = agent.model.as_ref()?;
    let problem = crate::config::model_id_problem(model)?;
    Some(CompileError::new(
        "agent-model",
        &["agent", "model"],
        format!("model {} {problem}", crate::escape::quoted(model)),
        Some("give a Hugging Face model id such as \"OpenVINO/Qwen3-4B-int4-ov\"".to_string()),
    ))
}

/// The names, revision and parsers are single words of bounded length.
fn word_errors(agent: &crate::config::Agent) -> Vec<CompileError> {
    let words: [WordKey; 4] = [
        ("model_name", &agent.model_name, 64, &['-', '_', '.'], "\"Qwen3-4B\""),
        ("revision", &agent.revision, 64, &['-', '_', '.', '/'], "a 40-hex commit sha"),
        ("tool_parser", &agent.tool_parser, 64, &['-', '_', '.'], "\"hermes\", or \"\" for none"),
        ("reasoning_parser", &agent.reasoning_parser, 64, &['-', '_', '.'], "\"qwen3\", or \"\" for none"),
    ];
    let mut out = Vec::new();
    for (key, value, max, extra, example) in words {
        let Some(value) = value else { continue };
        // An empty parser turns it off; an empty name or revision means nothing.
        if value.is_empty() && key.ends_with("_parser") {
            continue;
        }
        if let Some(problem) = crate::config::word_problem(value, max, extra) {
            out.push(CompileError::new(
                "agent-value",
                &["agent", key],
                format!("{key} {} {problem}", crate::escape::quoted(value)),
                Some(format!("write it like {example}")),
            ));
        }
    }
    out
}

/// The numbers stay within what the servers take.
fn range_errors(agent: &crate::config::Agent) -> Vec<CompileError> {
    let ranges: [(&str, Option<u64>, u64, u64); 3] = [
        ("gpus", agent.gpus.map(u64::from), 1, u64::from(MAX_GPUS)),
        ("max_len", agent.max_len.map(u64::from), 256, 1_048_576),
        ("timeout", agent.timeout, 60, 86_400),
    ];
    ranges
        .into_iter()
        .filter_map(|(key, value, min, max)| {
            let v = value.filter(|v| !(min..=max).contains(v))?;
            Some(CompileError::new(
                "agent-value",
                &["agent", key],
                format!("{key} = {v} is out of range"),
                Some(format!("give a whole number from {min} to {max}")),
            ))
        })
        .collect()
}

/// `image` is an image reference.
fn image_error(agent: &crate::config::Agent) -> Option<CompileError> {
    let image = agent.image.as_ref()?;
    let problem = crate::images::ImageRef::parse(image).err()?;
    Some(CompileError::new(
        "agent-image",
        &["agent", "image"],
        format!("image {}: {problem}", crate::escape::quoted(image)),
        Some("name an image as registry/repo:tag (optionally @sha256:…)".to_string()),
    ))
}

/// `storage` and `memory` are Kubernetes quantities above zero.
fn quantity_errors(agent: &crate::config::Agent) -> Vec<CompileError> {
    let keys = [
        ("agent-storage", "storage", &agent.storage, "write it like \"20Gi\""),
        ("agent-memory", "memory", &agent.memory, "write it like \"6Gi\" or \"8G\""),
    ];
    keys.into_iter()
        .filter_map(|(code, key, value, help)| {
            let value = value.as_ref()?;
            let problem = if !super::claims::quantity(value) {
                "is not a Kubernetes quantity"
            } else if !crate::quantity::is_positive(value) {
                "is not above zero"
            } else {
                return None;
            };
            Some(CompileError::new(
                code,
                &["agent", key],
                format!("{key} {} {problem}", crate::escape::quoted(value)),
                Some(help.to_string()),
            ))
        })
        .collect()
}

/// An NVIDIA GPU's memory in GiB: nvidia-smi's MiB from a capture, rounded to the nearest
/// GiB (a "16 GB" board reports a little less), else the PCI id table.
pub(crate) fn nvidia_gib(gpu: &crate::facts::NvidiaGpu) -> Option<u32> {
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
    let npus = cx.facts.host.npus.iter().filter(|n| n.device_node.is_some()).count() as u32;
    // How many units each engine had before the LLM took one: the help differs between "none
    // here" and "all taken". On a cluster that exists, no more than other workloads leave.
    let mut units = Free { gpu: gpus as u32 * intel.shared.unwrap_or(1), npu: u32::from(npu) * npus };
    let mut gpu_held = gpu_resource.as_deref().and_then(|r| cx.held.free(r));
    let mut npu_held = cx.held.free(NPU_RESOURCE);
    // Only a hold that leaves fewer units than the host has is named in a message: else the
    // LLM or another add-on took the last unit, not the other workloads.
    for (count, held) in [(&mut units.gpu, &mut gpu_held), (&mut units.npu, &mut npu_held)] {
        let free = held.as_ref().map_or(u32::MAX, |t| u32::try_from(t.free).unwrap_or(u32::MAX));
        if free < *count {
            *count = free;
        } else {
            *held = None;
        }
    }
    let held_text = |device: &str| match device {
        "GPU" => gpu_held.as_ref().map(Taken::sentence),
        "NPU" => npu_held.as_ref().map(Taken::sentence),
        _ => None,
    };
    let mut free = units;
    match llm {
        "GPU" => free.gpu = free.gpu.saturating_sub(1),
        "NPU" => free.npu = free.npu.saturating_sub(1),
        _ => {}
    }
    cx.errors.extend(source_errors(addons));
    let mut placed: Vec<AddonPlan> = Vec::new();
    for (name, device) in explicit_requests(addons) {
        if name == AddonName::Video && device == "NPU" {
            cx.error(CompileError::new(
                "addon-device",
                &["addons", "video", "device"],
                "video never runs on the NPU: only the GPU has media engines".to_string(),
                None,
            ));
            continue;
        }
        let auto = addons.get(&name).is_some_and(|a| a.device == AddonDevice::Auto);
        if !free.take(device) {
            let units = if device == "NPU" { units.npu } else { units.gpu };
            let (problem, help) = match held_text(device) {
                Some(held) => held_elsewhere(name, device, auto, &held),
                None => no_free_unit(name, device, units, auto, llm),
            };
            cx.error(CompileError::new("addon-device", &["addons", name_of(name), "device"], problem, Some(help)));
            continue;
        }
        let reason = if auto {
            format!("the {device}, the default for {}", name_of(name))
        } else {
            format!("asked for the {device}")
        };
        placed.push(AddonPlan { name, device, resource: None, cores: None, reason });
    }
    for name in [AddonName::Video, AddonName::Vlm, AddonName::Stt] {
        if addons.get(&name).is_none_or(|a| a.device != AddonDevice::Auto) {
            continue;
        }
        let (device, fallback) = auto_device(name, &mut free);
        let reason = match fallback {
            None => format!("the {device} suits it best and has a free unit"),
            Some(why) => {
                let first = preferences(name)[0];
                let why = match held_text(first) {
                    Some(held) => format!("{why} ({held})"),
                    None => why,
                };
                cx.warn("addon-fallback", Some("addons"), why.clone());
                why
            }
        };
        placed.push(AddonPlan { name, device, resource: None, cores: None, reason });
    }
    for p in &mut placed {
        p.resource = addon_resource(p.device, &gpu_resource);
        p.cores = hybrid.then_some(if p.device == "CPU" { "performance" } else { "efficient" });
    }
    placed.sort_by_key(|p| p.name);
    placed
}

/// Units of each engine left for the add-ons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Free {
    gpu: u32,
    npu: u32,
}

impl Free {
    /// Takes one unit of `device` if one is free; the CPU always has room.
    fn take(&mut self, device: &str) -> bool {
        match device {
            "GPU" if self.gpu > 0 => {
                self.gpu -= 1;
                true
            }
            "NPU" if self.npu > 0 => {
                self.npu -= 1;
                true
            }
            "CPU" => true,
            _ => false,
        }
    }
}

/// `source` is video's key only, and its value a stream the pod can open.
fn source_errors(addons: &BTreeMap<AddonName, crate::config::Addon>) -> Vec<CompileError> {
    let video = addons.get(&AddonName::Video).and_then(|v| v.source.as_deref()).and_then(video_source_error);
    let elsewhere =
        addons.iter().filter(|(name, a)| a.source.is_some() && **name != AddonName::Video).map(|(name, _)| {
            CompileError::new(
                "addon-source",
                &["addons", name_of(*name), "source"],
                format!("source is a key of [addons.video] only, not of [addons.{}]", name_of(*name)),
                None,
            )
        });
    video.into_iter().chain(elsewhere).collect()
}

/// `[addons.video] source` must be a stream the pod can open. A URI with userinfo is never
/// echoed: its password would reach the terminal and CI logs.
fn video_source_error(source: &str) -> Option<CompileError> {
    let credentials = crate::secrets::blank_passwords(source) != source
        || source
            .split_once("://")
            .is_some_and(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default().contains('@'));
    let shown = if credentials { "(a URI with credentials)".to_string() } else { crate::escape::quoted(source) };
    let help = Some("give a stream URI (rtsp://…, https://…), or leave it unset for the sample clip".to_string());
    if source.starts_with("file:") || !source.contains("://") {
        return Some(CompileError::new(
            "video-source-local",
            &["addons", "video", "source"],
            format!("video source {shown} is a host path: the pod cannot see the host's files"),
            help,
        ));
    }
    crate::config::video_source_problem(source).map(|problem| {
        CompileError::new(
            "video-source",
            &["addons", "video", "source"],
            format!("video source {shown} {problem}"),
            help,
        )
    })
}

/// The devices an add-on asked for by name, served first. Embeddings are an NPU recipe: auto
/// asks for the NPU like an explicit request.
fn explicit_requests(addons: &BTreeMap<AddonName, crate::config::Addon>) -> Vec<(AddonName, &'static str)> {
    addons
        .iter()
        .filter_map(|(name, a)| match a.device {
            AddonDevice::Auto if *name == AddonName::Embeddings => Some((*name, "NPU")),
            AddonDevice::Auto => None,
            AddonDevice::Gpu => Some((*name, "GPU")),
            AddonDevice::Npu => Some((*name, "NPU")),
            AddonDevice::Cpu => Some((*name, "CPU")),
        })
        .collect()
}

/// Why a requested device has no unit for the add-on, and the help: the engine is absent
/// (`units` 0) or the LLM and earlier add-ons took it. Every help leads with a setting that
/// makes the config valid, never the one it has: the CPU always has room for an add-on, and
/// `auto` is offered only where it would choose another device (for embeddings, `auto` is the
/// NPU itself).
fn no_free_unit(name: AddonName, device: &str, units: u32, auto: bool, llm: &str) -> (String, String) {
    let addon = name_of(name);
    let cpu = format!("set [addons.{addon}] device = \"cpu\"");
    let or_auto = if auto || name == AddonName::Embeddings {
        String::new()
    } else {
        format!(", or let it choose ([addons.{addon}] device = \"auto\")")
    };
    match (device, units) {
        (_, 0) if auto => (
            format!("{addon} run on the NPU unless told otherwise, and the cluster gets no usable NPU here"),
            format!("{cpu} (or \"gpu\" where there is one), or fix the NPU (`k3d-gpu doctor`)"),
        ),
        (_, 0) => (
            format!("{addon} asks for the {device}, and the cluster gets no usable {device} here"),
            format!("{cpu}{or_auto}; `k3d-gpu detect` shows what this host has"),
        ),
        ("NPU", _) => (
            format!("{addon} asks for the NPU, and no NPU unit is free (the LLM runs on the {llm})"),
            format!("an NPU serves one engine at a time: {cpu}{or_auto}, or move the LLM off the NPU ([agent] device)"),
        ),
        _ => (
            format!("{addon} asks for the GPU, and no GPU unit is free (the LLM runs on the {llm})"),
            format!("{cpu}{or_auto}, or share the GPU ([sharing] shared = <n>)"),
        ),
    }
}

/// Why a requested device has no unit for the add-on when other workloads on the cluster hold
/// it: the holders named, and the CPU (always room) as the setting that validates now.
fn held_elsewhere(name: AddonName, device: &str, auto: bool, held: &str) -> (String, String) {
    let addon = name_of(name);
    let or_auto = if auto || name == AddonName::Embeddings {
        String::new()
    } else {
        format!(", or let it choose ([addons.{addon}] device = \"auto\")")
    };
    (
        format!("{addon} asks for the {device}, and other workloads on the cluster hold it ({held})"),
        format!("set [addons.{addon}] device = \"cpu\"{or_auto}, or stop the pods that hold it"),
    )
}

/// The devices auto tries for an add-on, best first.
fn preferences(name: AddonName) -> &'static [&'static str] {
    match name {
        AddonName::Video => &["GPU", "CPU"],
        AddonName::Vlm => &["GPU", "CPU"],
        AddonName::Stt => &["NPU", "GPU", "CPU"],
        // Never auto-placed: auto means the NPU (with the explicit requests).
        AddonName::Embeddings => &["NPU"],
    }
}

/// Auto's device for an add-on: the first preference with a free unit (taken), else the CPU;
/// with the fallback's sentence when it is not the first preference.
fn auto_device(name: AddonName, free: &mut Free) -> (&'static str, Option<String>) {
    let wants = preferences(name);
    let device = wants.iter().copied().find(|d| free.take(d)).unwrap_or("CPU");
    let fallback = (device != wants[0])
        .then(|| format!("{} falls back to the {device}: no free {} unit", name_of(name), wants[0]));
    (device, fallback)
}

/// The resource an add-on's pod requests on its device.
fn addon_resource(device: &str, gpu_resource: &Option<String>) -> Option<String> {
    match device {
        "GPU" => gpu_resource.clone(),
        "NPU" => Some("npu.intel.com/accel".to_string()),
        _ => None,
    }
}

pub(super) fn name_of(name: AddonName) -> &'static str {
    match name {
        AddonName::Vlm => "vlm",
        AddonName::Stt => "stt",
        AddonName::Video => "video",
        AddonName::Embeddings => "embeddings",
    }
}

#[cfg(test)]
mod tests;
