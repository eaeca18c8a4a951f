//! Where a model of a given size would run, and why (`k3d-gpu agent --model-size`, the MCP
//! tool `recommend_placement`). Each machine's devices are listed in the order the agent's
//! placement prefers them: first the device the placement picks for this config (`agent.rs`,
//! with its reference rules: XMX, the firmware gatekeeper, `[agent] device`), then NVIDIA GPUs
//! (one, or split across several by vLLM), Gaudi, Intel GPUs (discrete, then integrated), the
//! NPU, and the CPU. The first device that holds the model is the recommendation.
//!
//! The rule (k3d-gpu's, not a server's): a model needs its weights and a fifth more
//! ([`HEADROOM`]: the KV cache, activations and the runtime). A device with memory of its own
//! must hold that; a device that shares the host's memory (an integrated GPU, the NPU, the CPU)
//! may use [`SHARED_SHARE`] of it, the rest being the system's and the cluster's. Memory the
//! facts do not know (an Intel discrete card's, a Gaudi's) is said to be unknown, never
//! guessed. Pure.

use serde::Serialize;

use crate::facts::{Facts, Vendor};

/// What a model needs beyond its weights: the KV cache, activations, the runtime.
pub const HEADROOM: f64 = 1.2;

/// The share of the host's memory a device that shares it may take.
pub const SHARED_SHARE: f64 = 0.75;

/// The GPU counts vLLM splits one model across (tensor parallelism: a power of two that
/// divides the attention heads of the common models), at most `agent::MAX_GPUS`.
const SPLITS: [u32; 3] = [2, 4, 8];

/// One device a model could run on.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Candidate {
    /// The `[[nodes]]` entry it is on (an existing cluster), else none: this host.
    pub node: Option<String>,
    /// As `[agent] device` names it: `cuda`, `hpu`, `gpu`, `npu`, `cpu`.
    pub device: &'static str,
    /// The device in words (`NVIDIA GeForce RTX 4070 ×2`, `the integrated Intel GPU`).
    pub what: String,
    /// The memory the model may use there, in GiB; none when the facts do not say.
    pub memory_gib: Option<f64>,
    /// It shares the host's memory (an integrated GPU, the NPU, the CPU: 75% of it counts).
    pub shared_memory: bool,
    /// How many GPUs the model is split across (`[agent] gpus`).
    pub gpus: u32,
    /// Whether the weights and a fifth more fit; none when the memory is unknown.
    pub fits: Option<bool>,
    /// The placement picks this device for the config as it is.
    pub placed: bool,
    pub why: String,
}

/// The advice for one model size.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Advice {
    pub model_gib: f64,
    /// The weights and the headroom.
    pub needs_gib: f64,
    /// The first candidate that holds the model.
    pub recommended: Option<Candidate>,
    /// Why that one, or why none, in a sentence.
    pub reason: String,
    /// The [`SHARED_SHARE`] of each machine's memory, its discrete devices, in preference order.
    pub candidates: Vec<Candidate>,
}

/// One machine to advise on: its node (none: this host), its facts, and the device the
/// placement picks there (`AgentPlan::device`: `CUDA`, `GPU`, ...), when it places the agent.
pub struct Machine<'a> {
    pub node: Option<&'a str>,
    pub facts: &'a Facts,
    /// The config: its `[vendors]` say which of the facts' vendors the cluster uses.
    pub config: &'a crate::config::Config,
    pub placed: Option<&'a str>,
}

fn gib(kib: u64) -> f64 {
    kib as f64 / (1024.0 * 1024.0)
}

/// Rounded to a tenth, for a sentence and a stable document.
fn tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn active(m: &Machine, vendor: Vendor) -> bool {
    super::active_vendors(m.config, m.facts).iter().any(|d| d.vendor == vendor)
}

/// A machine's devices, each judged for `needs` GiB, in preference order (the placed one first).
pub fn candidates(m: &Machine, needs: f64) -> Vec<Candidate> {
    let host = &m.facts.host;
    let node = m.node.map(str::to_string);
    let shared = host.memory.total_kib.map(|k| tenth(gib(k) * SHARED_SHARE));
    let judge = |device: &'static str, what: String, memory: Option<f64>, shared_memory: bool, gpus: u32| {
        let fits = memory.map(|m| m >= needs);
        let why = match (memory, fits) {
            (None, _) => format!("{what}: its memory is not in the facts, so whether {needs} GiB fits is unknown"),
            (Some(m), Some(true)) if shared_memory => {
                format!("{what} shares the host's memory: {m} GiB of it may hold the model's {needs} GiB")
            }
            (Some(m), Some(true)) => format!("{what} has {m} GiB for the model's {needs} GiB"),
            (Some(m), _) if shared_memory => {
                format!("{what} shares the host's memory: {m} GiB of it is less than the model's {needs} GiB")
            }
            (Some(m), _) => format!("{what} has {m} GiB, less than the model's {needs} GiB"),
        };
        Candidate {
            node: node.clone(),
            device,
            what,
            memory_gib: memory,
            shared_memory,
            gpus,
            fits,
            placed: false,
            why,
        }
    };
    let mut out = Vec::new();
    if active(m, Vendor::Nvidia) && !host.nvidia.gpus.is_empty() {
        let gpus = &host.nvidia.gpus;
        // vLLM splits across GPUs of one kind: the smallest one bounds each share.
        let each = gpus.iter().map(|g| super::agent::nvidia_gib(g).map(f64::from)).collect::<Option<Vec<f64>>>();
        let smallest = each.as_ref().and_then(|e| e.iter().copied().reduce(f64::min));
        let model = gpus[0].model.clone().unwrap_or_else(|| "NVIDIA GPU".into());
        let one = judge("cuda", model.clone(), smallest, false, 1);
        let split = SPLITS
            .iter()
            .copied()
            .filter(|k| (*k as usize) <= gpus.len())
            .find(|k| smallest.is_some_and(|s| s * f64::from(*k) >= needs));
        match (one.fits, split) {
            (Some(false), Some(k)) => {
                let total = smallest.map(|s| tenth(s * f64::from(k)));
                let mut c = judge("cuda", format!("{model} ×{k}"), total, false, k);
                c.why = format!("{} (vLLM splits it across {k} GPUs: [agent] gpus = {k})", c.why);
                out.push(c);
            }
            _ => out.push(one),
        }
    }
    if active(m, Vendor::Gaudi) && host.gaudi.devices.iter().any(|g| g.device_node.is_some()) {
        out.push(judge("hpu", "the Gaudi".into(), None, false, 1));
    }
    if active(m, Vendor::Intel) {
        let usable: Vec<_> = host.intel_gpus.iter().filter(|g| g.usable()).collect();
        if usable.iter().any(|g| !g.integrated) {
            out.push(judge("gpu", "the discrete Intel GPU".into(), None, false, 1));
        }
        if usable.iter().any(|g| g.integrated) {
            out.push(judge("gpu", "the integrated Intel GPU".into(), shared, true, 1));
        }
    }
    if active(m, Vendor::Npu) && !host.npus.is_empty() {
        out.push(judge("npu", "the NPU".into(), shared, true, 1));
    }
    out.push(judge("cpu", "the CPU".into(), shared, true, 1));
    // The placement's device first: it carries the reference rules (XMX, firmware, the config).
    if let Some(placed) = m.placed.map(str::to_ascii_lowercase) {
        // Of that device's kind, the first listed (a discrete GPU before an integrated one).
        if let Some(i) = out.iter().position(|c| c.device == placed) {
            out[i].placed = true;
            let c = out.remove(i);
            out.insert(0, c);
        }
    }
    out
}

/// The advice for a model of `model_gib` GiB on these machines (the agent's first).
pub fn advise(model_gib: f64, machines: &[Machine]) -> Advice {
    let needs = tenth(model_gib * HEADROOM);
    let candidates: Vec<Candidate> = machines.iter().flat_map(|m| candidates(m, needs)).collect();
    let recommended = candidates.iter().find(|c| c.fits == Some(true)).cloned();
    let on = |c: &Candidate| c.node.as_deref().map(|n| format!(" on node {n}")).unwrap_or_default();
    let reason = match &recommended {
        Some(c) if c.placed => format!("{}{}: the device the placement picks, and it holds the model", c.what, on(c)),
        Some(c) => {
            let placed = candidates.iter().find(|p| p.placed);
            let passed = placed
                .map(|p| {
                    let verb = if p.fits.is_none() { "is not known to hold it" } else { "does not hold it" };
                    format!(" The placement's device, {}{}, {verb}: {}.", p.what, on(p), p.why)
                })
                .unwrap_or_default();
            format!(
                "{}{} is the first device, in the placement's order, that holds the model; set [agent] device = \"{}\"{}.{passed}",
                c.what,
                on(c),
                c.device,
                if c.gpus > 1 { format!(" and gpus = {}", c.gpus) } else { String::new() }
            )
        }
        None if candidates.iter().any(|c| c.fits.is_none()) => format!(
            "no device is known to hold {needs} GiB; one whose memory the facts do not know might (see the candidates)"
        ),
        None => format!("no device holds {needs} GiB: pick a smaller model, or a lower-bit quantization of it"),
    };
    Advice { model_gib, needs_gib: needs, recommended, reason, candidates }
}
