//! The tools that answer what an agent asks: is the LLM server answering now
//! (`agent_status`, `k3d-gpu agent status`'s core), are the nodes and their accelerators
//! healthy (`cluster_health`: nodes Ready, taints, what each advertises, and `k3d-gpu test`'s
//! counts against the facts, without its pods), and where would a model of N GiB run, and why
//! (`recommend_placement`, `k3d-gpu agent --model-size`). All only read.

use std::time::Duration;

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

/// `recommend_placement`'s result: the compiler's advice as it is (`compile::advice`).
pub type PlacementOut = crate::compile::advice::Advice;

pub fn recommend_placement(global: &Global, model_gib: f64) -> Result<PlacementOut> {
    commands::graph::advice(global, model_gib)
}
