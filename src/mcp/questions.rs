//! The tools that answer what an agent asks: is the LLM server answering now
//! (`agent_status`, `k3d-gpu agent status`'s core), are the nodes and their accelerators
//! healthy (`cluster_health`: nodes Ready, taints, what each advertises, and `k3d-gpu test`'s
//! counts against the facts, without its pods), and where would a model of N GiB run, and why
//! (`recommend_placement`, `k3d-gpu agent --model-size`). All only read.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use super::arguments::ToolArgs;
use crate::cli::{AgentCommand, Command, Global};
use crate::commands;
use crate::error::Result;

const DATA: [&str; 5] = ["config", "root", "facts", "stdlib", "vendors"];

/// `agent status`'s options: the inputs and the reply's deadline.
pub const AGENT_STATUS: ToolArgs = ToolArgs {
    command: "agent status",
    options: &["config", "root", "facts", "stdlib", "vendors", "timeout"],
    required: &[],
};

/// `test`'s inputs: the tool is `test` without its pods.
pub const CLUSTER_HEALTH: ToolArgs = ToolArgs { command: "test", options: &DATA, required: &[] };

/// `agent --model-size`'s options; the size is required here.
pub const RECOMMEND_PLACEMENT: ToolArgs = ToolArgs {
    command: "agent",
    options: &["config", "root", "facts", "stdlib", "vendors", "model_size"],
    required: &["model_size"],
};

/// The reply deadline a parsed `agent status` call gives (its CLI default when left out).
pub fn status_timeout(command: &Command) -> Duration {
    match command {
        Command::Agent(a) => match &a.command {
            Some(AgentCommand::Status(s)) => Duration::from_secs(s.timeout),
            None => Duration::from_secs(60),
        },
        _ => Duration::from_secs(60),
    }
}

pub fn agent_status(global: &Global, timeout: Duration) -> Result<commands::agent_status::Status> {
    commands::agent_status::status(global, timeout)
}

pub fn cluster_health(global: &Global) -> Result<commands::cluster_health::Health> {
    commands::cluster_health::health(global)
}

/// The model size a parsed `agent --model-size` call gives.
pub fn model_size(command: &Command) -> f64 {
    match command {
        Command::Agent(a) => a.model_size.unwrap_or_default(),
        _ => 0.0,
    }
}

/// One device a model could run on (`compile::advice::Candidate`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Candidate {
    /// The `[[nodes]]` entry it is on; null: this host.
    pub node: Option<String>,
    /// As `[agent] device` names it: cuda, hpu, gpu, npu, cpu.
    pub device: String,
    pub what: String,
    /// GiB the model may use there; null when the facts do not say.
    pub memory_gib: Option<f64>,
    /// It shares the host's memory (an integrated GPU, the NPU, the CPU: 75% of it counts).
    pub shared_memory: bool,
    /// GPUs the model is split across (`[agent] gpus`).
    pub gpus: u32,
    /// Whether the weights and a fifth more fit; null when the memory is unknown.
    pub fits: Option<bool>,
    /// The placement picks this device for the config as it is.
    pub placed: bool,
    pub why: String,
}

/// `recommend_placement`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PlacementOut {
    pub model_gib: f64,
    /// The weights and the headroom (a fifth more: KV cache, activations, runtime).
    pub needs_gib: f64,
    /// The first candidate, in the placement's order, that holds the model.
    pub recommended: Option<Candidate>,
    /// Why that one, or why none, in a sentence.
    pub reason: String,
    pub candidates: Vec<Candidate>,
}

fn candidate(c: crate::compile::advice::Candidate) -> Candidate {
    Candidate {
        node: c.node,
        device: c.device.to_string(),
        what: c.what,
        memory_gib: c.memory_gib,
        shared_memory: c.shared_memory,
        gpus: c.gpus,
        fits: c.fits,
        placed: c.placed,
        why: c.why,
    }
}

pub fn recommend_placement(global: &Global, model_gib: f64) -> Result<PlacementOut> {
    let a = commands::graph::advice(global, model_gib)?;
    Ok(PlacementOut {
        model_gib: a.model_gib,
        needs_gib: a.needs_gib,
        recommended: a.recommended.map(candidate),
        reason: a.reason,
        candidates: a.candidates.into_iter().map(candidate).collect(),
    })
}
