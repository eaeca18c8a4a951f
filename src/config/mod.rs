//! `k3dgpu.toml`: the types, their defaults (the reference launcher's behaviour), and loading
//! with diagnostics that point at the offending span.
//!
//! Every key has a default, so an empty file is a valid config. Unknown keys and wrong types
//! are errors, never ignored. Each reference environment variable that configures behaviour
//! maps to one key here; `docs/config.md` lists the mapping.

pub mod docs;
pub mod env;
pub mod fleet;
mod load;
mod selection;
mod span;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use load::{ConfigError, load_all, load_str};
pub use selection::{ExperimentalSelection, Feature, Shared, SharingMode, VendorSelection};
pub use span::{path_at, span_of, span_of_element};

/// The longest cluster name: k3d names containers `k3d-<name>-server-0` and the hostname
/// they get must stay a DNS label.
pub const MAX_CLUSTER_NAME: usize = 32;

/// A cluster name k3d accepts and that is safe as a file name: a DNS label of at most
/// [`MAX_CLUSTER_NAME`] characters (so never `/`, `.` or `..`).
pub fn cluster_name(name: &str) -> bool {
    dns_label(name) && name.len() <= MAX_CLUSTER_NAME
}

/// Where the Kubernetes API is published by default: loopback only. k3d's own default is every
/// interface, which puts the API server of a developer's laptop on the network.
pub const DEFAULT_API_HOST_IP: &str = "127.0.0.1";

/// A DNS-1123 subdomain, the rule for Kubernetes node names: at most 253 characters, dot-separated
/// DNS labels.
pub fn dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(dns_label)
}

/// A DNS label (RFC 1123), the rule Kubernetes names follow: 1-63 lowercase letters, digits
/// and '-', not starting or ending with '-'. Cluster, claim, namespace and component names.
pub fn dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The longest model id `[agent] model` takes: Hugging Face's own limit on a repo id.
pub const MAX_MODEL_ID: usize = 96;

/// Why `id` is not a Hugging Face model id of the `org/name` shape the model servers take
/// (`--source_model`, `vllm serve`), or `None` when it is one. The id becomes an argument of
/// the server, so the rule is strict: two parts of ASCII letters, digits, `-`, `_` and `.`,
/// neither starting nor ending with `-` or `.` (so never a flag, `.` or `..`), no `--` or
/// `..` inside (Hugging Face refuses both), at most [`MAX_MODEL_ID`] characters.
pub fn model_id_problem(id: &str) -> Option<&'static str> {
    if id.len() > MAX_MODEL_ID {
        return Some("is longer than 96 characters");
    }
    let Some((org, name)) = id.split_once('/') else {
        return Some("is not of the form org/name");
    };
    for part in [org, name] {
        if part.is_empty() {
            return Some("has an empty org or name");
        }
        if !part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Some("may hold only ASCII letters, digits, '-', '_' and '.' around one '/'");
        }
        if part.starts_with(['-', '.']) || part.ends_with(['-', '.']) {
            return Some("has a part that starts or ends with '-' or '.'");
        }
        if part.contains("--") || part.contains("..") {
            return Some("holds '--' or '..'");
        }
    }
    None
}

/// Why `value` is not a word that may reach a server's argv (a served model name, a parser,
/// a revision), or `None` when it is: 1 to `max` characters of ASCII letters, digits and
/// `extra`, not starting with `-` or `.` (never a flag or a hidden path) and without `..`.
pub fn word_problem(value: &str, max: usize, extra: &[char]) -> Option<String> {
    if value.is_empty() || value.len() > max {
        return Some(format!("must be 1 to {max} characters"));
    }
    if !value.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(&c)) {
        let extra: Vec<String> = extra.iter().map(|c| format!("'{c}'")).collect();
        return Some(format!("may hold only ASCII letters, digits and {}", extra.join(", ")));
    }
    if value.starts_with(['-', '.']) {
        return Some("must not start with '-' or '.'".into());
    }
    if value.contains("..") {
        return Some("must not hold '..'".into());
    }
    None
}

/// The stream schemes `[addons.video] source` takes.
pub const VIDEO_SCHEMES: [&str; 4] = ["rtsp", "rtsps", "http", "https"];

/// Why `source` is not a stream URI the video add-on takes, or `None` when it is. It reaches
/// gst-launch's pipeline parser, so beyond the scheme only URI characters that parser reads as
/// text are allowed (no space, quote, `!`, parenthesis or backslash), and no userinfo: a
/// password would sit in the TOML, and in git.
pub fn video_source_problem(source: &str) -> Option<String> {
    if source.len() > 2048 {
        return Some("is longer than 2048 characters".into());
    }
    let Some((scheme, rest)) = source.split_once("://") else {
        return Some("is not a URI (scheme://…)".into());
    };
    if !VIDEO_SCHEMES.contains(&scheme) {
        return Some(format!("has scheme {scheme:?}; the video add-on takes {}", VIDEO_SCHEMES.join(", ")));
    }
    if let Some(bad) = source.chars().find(|c| !(c.is_ascii_alphanumeric() || "-._~:/?#%&=+;,@".contains(*c))) {
        return Some(format!("holds {bad:?}, which a stream URI never needs unescaped (write it %-encoded)"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some("carries credentials (user:password@): they would sit in the config, in git".into());
    }
    if authority.is_empty() {
        return Some("has no host".into());
    }
    None
}

/// A k3d-gpu configuration (`k3dgpu.toml`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(title = "k3dgpu.toml")]
pub struct Config {
    pub cluster: Cluster,
    pub vendors: Vendors,
    pub sharing: Sharing,
    pub placement: Placement,
    pub experimental: Experimental,
    pub expect: Expect,
    /// Rules for what the cluster may run.
    pub policy: Policy,
    /// The OpenAI-compatible LLM agent; present means wanted. `k3d-gpu agent` explains where it
    /// runs and why.
    pub agent: Option<Agent>,
    /// Add-ons beside the agent: `[addons.vlm]`, `[addons.stt]`, `[addons.video]`,
    /// `[addons.embeddings]` are placed on the engines the LLM leaves free (`k3d-gpu agent`
    /// shows where). vlm, stt and embeddings are deployed as OVMS servers (svc/vlm, svc/stt,
    /// svc/embeddings on port 8000, API under /v3); video runs DL Streamer and writes its
    /// detections as JSON lines to its log (no Service).
    pub addons: BTreeMap<AddonName, Addon>,
    /// GPU telemetry, opt-in: a Prometheus exporter per GPU vendor, each a DaemonSet on the
    /// node that advertises the GPUs behind a ClusterIP Service (no port on the host): XPU
    /// Manager's `xpumd` (svc `xpumd` in namespace `k3d-gpu-xpumd`, port 8080) and NVIDIA's
    /// DCGM exporter (svc `dcgm-exporter` in `k3d-gpu-dcgm`, port 9400), both at `/metrics`.
    /// Under k3d it also deploys, in namespace `k3d-gpu-metrics`: Prometheus (svc
    /// `prometheus`, port 9090; 15 days or 4 GB kept) scraping every exporter, node-exporter
    /// and the model servers' `/metrics` (OVMS gets `--metrics_enable`); node-exporter on every
    /// node with its RAPL collector, CPU metrics labelled `core_type` (performance, efficient,
    /// low-power) from the host's P/E-core lists; Grafana (svc `grafana`, port 3000) with the
    /// k3d-gpu dashboard (GPU utilisation, memory, power, temperature, RAPL package power,
    /// tokens/s, time to first token). Prometheus and Grafana run on the E-cores; Grafana
    /// asks for sign-in as the chat UI does (user `admin`, a password generated in the pod;
    /// `k3d-gpu report` prints how to reach it and read it). Apply verifies each rollout;
    /// removing the table deletes them.
    pub telemetry: Option<Telemetry>,
    /// Agent sandboxes (kubernetes-sigs/agent-sandbox): present means wanted. The controller
    /// and its CRDs, an E-core SandboxTemplate `python-ecores` in namespace `agent-sandbox`
    /// with its network policy and hardening, and a warm pool of it.
    pub sandbox: Option<Sandbox>,
    /// Extra component files that join the catalog like built-in ones.
    pub components: Vec<ComponentRef>,
    /// DRA claim templates: pods reference them by name to get Intel or NVIDIA GPUs through
    /// that vendor's DRA driver (`[sharing] mode` gives the vendor `"dra"`).
    pub claims: Vec<Claim>,
    /// The machines of an existing cluster (`[cluster] provider = "existing"` only): each
    /// node's Kubernetes name and the facts captured on it. Labels, plugin settings and
    /// checks are compiled per node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// Set by the command edge: the host paths this config mounts, links resolved.
    #[serde(skip)]
    #[schemars(skip)]
    pub host_paths: HostPaths,
}

/// What the command edge found the config's host paths to be with every link resolved, on the
/// machine that mounts them (never serialised, never in the schema): compile is pure, so it
/// judges the directory a mount would really hand out (a `model_dir` that is a link to `/` is
/// `/`) from these values. Empty when no edge resolved them (a library caller): compile then
/// judges the paths as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPaths {
    /// The host model store's directory (`[agent] model_dir`, or the default under the user's
    /// data directory) resolved, or why it cannot be. `None`: not resolved (no edge, no data
    /// directory, or an existing cluster, which has no store).
    pub model_store: Option<Result<String, Unresolved>>,
    /// `[cluster] volumes` sources (as `user_volumes::parse` records them) that resolve to
    /// another path, and that path.
    pub volumes: BTreeMap<String, String>,
}

/// Why the edge could not resolve a host path's links. The text completes "cannot be
/// resolved: …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    #[error("a link on its way leads nowhere")]
    Dangling,
    #[error("holds a `..` component")]
    DotDot,
    #[error("its resolved path is not UTF-8")]
    NotUtf8,
    #[error("cannot resolve it: {0}")]
    Io(std::io::ErrorKind),
}

/// Where the cluster lives (DESIGN.md §9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// A k3d cluster on this machine, which k3d-gpu creates from its own node image.
    #[default]
    K3d,
    /// A cluster k3d-gpu does not create (k3s on several machines), reached through
    /// `[cluster] context`; its machines are the `[[nodes]]`.
    Existing,
}

impl Provider {
    fn is_k3d(&self) -> bool {
        *self == Provider::K3d
    }
}

/// One machine of an existing cluster. Give exactly one of `facts` and `root`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// The node's Kubernetes name (`kubectl get nodes`), a DNS-1123 subdomain.
    pub name: String,
    /// A facts/v1 document captured on that machine (`k3d-gpu facts --out FILE`), relative
    /// to this file and inside its directory.
    pub facts: Option<String>,
    /// A fixture host captured on that machine (`k3d-gpu facts capture --out DIR`), relative
    /// to this file and inside its directory.
    pub root: Option<String>,
    /// What this machine must have, as `[expect]` says for a single machine.
    #[serde(default)]
    pub expect: Expect,
    /// The node's taints, as `kubectl taint` writes them: `key[=value]:effect`, the effect one
    /// of `NoSchedule`, `PreferNoSchedule`, `NoExecute` (e.g.
    /// `"k3d-gpu.io/gpu-only=true:NoSchedule"`: a GPU box that runs only GPU work). k3d-gpu
    /// does not set them (the node's owner does, with k3s's `node-taint` or `kubectl taint`):
    /// every workload it deploys on this node tolerates them, and `k3d-gpu test`'s pods too.
    #[serde(default)]
    pub taints: Vec<String>,
}

/// The LLM server. Its device follows what the cluster will advertise, by the reference rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Agent {
    /// `auto` (OpenVINO Model Server; vLLM on a Gaudi or an NVIDIA GPU), `ovms`, `vllm` or
    /// `llm-scaler`.
    /// (K3D_GPU_AGENT_BACKEND)
    pub backend: AgentBackend,
    /// `auto` (a Gaudi, else an NVIDIA GPU with at least 12 GiB, else an Intel GPU only on
    /// an XMX node, else CPU), or force `cpu`, `gpu` (Intel), `npu`, `hpu` (a Gaudi) or `cuda`
    /// (an NVIDIA GPU, vLLM only). (K3D_GPU_AGENT_DEVICE)
    pub device: AgentDevice,
    /// Model to serve: a Hugging Face id `org/name` (letters, digits, `-`, `_`, `.`; at most
    /// 96 characters); unset: `OpenVINO/Qwen3-4B-int4-ov` on OVMS, `Qwen/Qwen3-4B` on vLLM.
    /// A change updates the server's Deployment in place.
    /// (K3D_GPU_AGENT_MODEL)
    pub model: Option<String>,
    /// CPU request, which sizes the P-core balloon on hybrid nodes. (K3D_GPU_AGENT_CPUS)
    pub cpus: Option<u32>,
    /// Memory request, e.g. `"6Gi"`. (K3D_GPU_AGENT_MEMORY)
    pub memory: Option<String>,
    /// The name clients send as `model` (vLLM `--served-model-name`, OVMS `--model_name`):
    /// letters, digits, `-`, `_`, `.`, at most 64 characters, not starting with `-` or `.`;
    /// unset: the last part of the model id. (K3D_GPU_AGENT_MODEL_NAME)
    pub model_name: Option<String>,
    /// The model's Hugging Face revision vLLM downloads (`--revision`): a 40-hex commit sha
    /// pins the bytes a re-download gets, a branch or tag name follows it. Unset: the default
    /// model's pinned commit, a model of your own its default branch. OVMS cannot pin one
    /// (`--pull` clones the default branch and has no revision option), so it is refused
    /// there. (K3D_GPU_AGENT_REVISION)
    pub revision: Option<String>,
    /// GPUs of one node the model is split across by tensor parallelism (vLLM
    /// `--tensor-parallel-size`), 1-8, default 1. More than 1 needs vLLM (NVIDIA or Intel GPUs,
    /// or Gaudis), that many of them on the node and no GPU sharing; OVMS, the NPU and the CPU
    /// serve on one. (K3D_GPU_AGENT_GPUS)
    #[schemars(range(min = 1, max = 8))]
    pub gpus: Option<u32>,
    /// The longest context in tokens (vLLM `--max-model-len`, default 8192; OVMS on the NPU
    /// `--max_prompt_len`), 256-1048576. OVMS on the GPU or CPU has no such option: refused
    /// there. (K3D_GPU_AGENT_MAX_LEN)
    #[schemars(range(min = 256, max = 1048576))]
    pub max_len: Option<u32>,
    /// The tool-call parser (vLLM `--tool-call-parser` with `--enable-auto-tool-choice`, OVMS
    /// `--tool_parser`): a parser name (letters, digits, `_`, `-`, `.`); unset: `hermes` (vLLM)
    /// or `hermes3` (OVMS) for the default model, none for another; `""` turns it off.
    /// (K3D_GPU_AGENT_TOOL_PARSER)
    pub tool_parser: Option<String>,
    /// The reasoning parser (vLLM `--reasoning-parser`, OVMS `--reasoning_parser`); unset:
    /// `qwen3` for the default model, none for another; `""` turns it off.
    /// (K3D_GPU_AGENT_REASONING_PARSER)
    pub reasoning_parser: Option<String>,
    /// The server image instead of the backend's (`repo:tag`, optionally `@sha256:…`); pinned
    /// through images.lock like every image. (K3D_GPU_AGENT_IMAGE)
    pub image: Option<String>,
    /// The server's log level (OVMS `--log_level`, vLLM `VLLM_LOGGING_LEVEL`); unset: the
    /// server's default, INFO. DEBUG also logs the device OVMS compiled the model for.
    /// (K3D_GPU_AGENT_LOG_LEVEL)
    pub log_level: Option<LogLevel>,
    /// Size of the model volume, a Kubernetes quantity (default `"20Gi"`). (K3D_GPU_AGENT_STORAGE)
    pub storage: Option<String>,
    /// Seconds apply waits for the model's download and load (default 1800), 60-86400.
    /// (K3D_GPU_AGENT_TIMEOUT)
    #[schemars(range(min = 60, max = 86400))]
    pub timeout: Option<u64>,
    /// Keep the model PVC (and its namespace) when the agent, or this backend, leaves the
    /// config: `true` (default) keeps them and the plan says so; `false` lets the plan delete
    /// them. Under provider `k3d` the model files are in the host model store (`model_dir`)
    /// and stay there either way: the plan says which directory to delete. Takes effect once
    /// applied.
    pub keep_models: Option<bool>,
    /// The host model store (provider `k3d`): an absolute directory on this machine that every
    /// node mounts at `/var/lib/k3d-gpu/models`, where every model server (the agent, its
    /// add-ons) keeps its models, one subdirectory each, so a recreated cluster finds them in
    /// place. Unset: `$XDG_DATA_HOME/k3d-gpu/models/<cluster name>`
    /// (`~/.local/share/k3d-gpu/models/<cluster name>`). apply creates it; nothing k3d-gpu does
    /// deletes it. A change recreates the cluster (k3d fixes mounts at creation). It is judged
    /// with every link resolved on this machine, the default too: the plan's cluster names the
    /// directory the nodes mount, `/` (or a link to it) is refused, and a system or credentials
    /// directory (`/etc`, `~/.ssh`, …), mounted read-write into every node, is planned with the
    /// warning `model-dir-sensitive-path`. The model volumes name it as written, so rendered
    /// objects are the same on every machine; a plan of a `--root` fixture host names it as
    /// written too.
    pub model_dir: Option<String>,
    /// The chat UI (Open WebUI) in front of the model server; present means wanted. Sign-in
    /// is always on, the Service is ClusterIP only, and its data PVC is kept on removal like
    /// the model's.
    pub chat: Option<Chat>,
    /// With `[cluster] provider = "existing"`: the `[[nodes]]` entry (its `name`) that runs
    /// the agent and its add-ons; required there. The backend, device and resources are
    /// decided from that node's facts as on one machine, and the pods select only that node.
    /// Refused under provider `k3d` (the accelerator node is `[cluster] accelerator_node`).
    pub node: Option<String>,
}

/// `[sandbox]`: where untrusted agent tool code runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Sandbox {
    /// Sandboxes kept started and ready for a claim (the SandboxWarmPool's replicas), 0-16.
    #[schemars(range(max = 16))]
    pub warm_pool: u32,
    /// With `[cluster] provider = "existing"`: the `[[nodes]]` entry (its `name`) that runs
    /// the sandboxes; required there. The template is sized to that node's E-cores, and the
    /// controller and the sandboxes select only that node. Refused under provider `k3d`.
    pub node: Option<String>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox { warm_pool: 1, node: None }
    }
}

/// `[agent.chat]`: Open WebUI, talking to the agent's server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Chat {
    /// Sign-in (WEBUI_AUTH). Always on: `false` is refused, since anyone who reaches the UI
    /// would use the models; unset or `true` is the same.
    pub auth: Option<bool>,
    /// A Secret in namespace `k3d-gpu-agent`, created by you, with keys `email` and
    /// `password`: the admin account Open WebUI creates on its first start. Unset: the pod
    /// generates a random password on its first start into its data volume
    /// (`/data/.k3d-gpu-admin-password`, admin `admin@k3d-gpu.local`); it is never in the
    /// config, the plan or the graph. A password is never a value in this file.
    pub admin_secret: Option<String>,
}

/// A model server's log level, as both servers spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "DEBUG",
            LogLevel::Info => "INFO",
            LogLevel::Warning => "WARNING",
            LogLevel::Error => "ERROR",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AgentBackend {
    #[default]
    Auto,
    Ovms,
    Vllm,
    LlmScaler,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentDevice {
    #[default]
    Auto,
    Cpu,
    Gpu,
    Npu,
    // A Gaudi. Only this spelling: the schema, the docs and the parser agree on one (an
    // alias the schema did not show made editors and the tool disagree).
    Hpu,
    // An NVIDIA GPU (nvidia.com/gpu), served by vLLM's CUDA build. Not `gpu`: that key has
    // always meant the Intel GPU, and a config written for it must not move.
    Cuda,
}

/// The add-ons k3d-gpu places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AddonName {
    /// Vision-language model (OVMS, Qwen3-VL).
    Vlm,
    /// Speech to text (OVMS, Whisper).
    Stt,
    /// Video analytics (DL Streamer).
    Video,
    /// Text embeddings (OVMS, Qwen3-Embedding-0.6B): the NPU unless `device` says `cpu` or
    /// `gpu`.
    Embeddings,
}

/// One add-on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Addon {
    /// `auto` or an explicit `gpu`, `npu` or `cpu`; explicit requests are served first and
    /// fail when nothing is free. For `embeddings`, `auto` means the NPU (an error without a
    /// free one). (K3D_GPU_AGENT_<NAME>_DEVICE)
    pub device: AddonDevice,
    /// Video only: a stream URI (`rtsp://`, `rtsps://`, `http://` or `https://`); unset loops
    /// DL Streamer's sample clip. Host paths, `file://`, credentials in the URI and characters
    /// a URI does not need unescaped (space, quotes, `!`, parentheses) are refused.
    /// (K3D_GPU_AGENT_VIDEO_SOURCE)
    pub source: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AddonDevice {
    #[default]
    Auto,
    Gpu,
    Npu,
    Cpu,
}

/// `[telemetry]`: which GPU exporters to deploy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Telemetry {
    /// XPU Manager's `xpumd` on the Intel GPUs. Unset: where an Intel GPU is active. It reads
    /// every GPU without taking one from workloads: in plugin mode through
    /// `gpu.intel.com/monitoring` (telemetry turns the plugin's `[sharing] monitoring` on
    /// itself, and the plan says so), in DRA mode through an admin-access ResourceClaim.
    /// `false`: never.
    pub intel: Option<bool>,
    /// NVIDIA's DCGM exporter on the NVIDIA GPUs (it reads them through the nvidia runtime
    /// and requests no `nvidia.com/gpu`). Unset: where an NVIDIA GPU is active. `false`: never.
    pub nvidia: Option<bool>,
}

/// The exporters `[telemetry]` can deploy, as a component's `when telemetry=…` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TelemetryExporter {
    Intel,
    Nvidia,
}

/// A `ResourceClaimTemplate` compiled from a few selectors into CEL, checked against the
/// host's GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// The template's name (pods use it as `resourceClaimTemplateName`).
    pub name: String,
    /// Namespace of the template; created when it is not a built-in one.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// How many GPUs one claim gets (tensor parallelism across GPUs).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub count: u32,
    /// Which GPUs may serve it.
    #[serde(default)]
    pub gpus: GpuSet,
    /// Only GPUs whose name contains this, any case: an Intel GPU's platform (`"Battlemage"`,
    /// `"Arc"`), an NVIDIA GPU's board (`"H100"`, `"L40S"`).
    pub model: Option<String>,
    /// Only these PCI device ids (hex, e.g. `"e20b"`, or `"2331"` for an H100 PCIe).
    #[serde(default)]
    pub pci_ids: Vec<String>,
    /// Only devices with at least this much memory (a Kubernetes quantity, e.g. `"12Gi"`).
    pub min_memory: Option<String>,
    /// Whose GPUs: `intel` or `nvidia`. Unset: the one vendor whose GPUs go to DRA
    /// (`[sharing] mode`); needed when both do.
    pub vendor: Option<ClaimVendor>,
}

/// The GPU vendors with a DRA driver k3d-gpu deploys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ClaimVendor {
    Intel,
    Nvidia,
}

fn default_namespace() -> String {
    "default".into()
}

fn one() -> u32 {
    1
}

/// The k3d cluster. Everything here is fixed when k3d creates the cluster: changing it means
/// recreating the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Cluster {
    /// `k3d` (default): a k3d cluster on this machine. `existing`: a cluster k3d-gpu does not
    /// create (k3s on several real machines), reached through `context`, its machines listed
    /// in `[[nodes]]`; no Docker, no k3d, no node image, and the k3d-only keys of this table
    /// (image, build_context, build_args, servers, agents, k3s_args, api_port, api_host_ip,
    /// accelerator_node, ports, volumes, registries) are refused.
    // Left out of the serialised config when k3d, so a k3d config's digest (a plan input) is
    // what it was before providers existed; the schema still states the default.
    #[serde(skip_serializing_if = "Provider::is_k3d")]
    #[schemars(extend("default" = "k3d"))]
    pub provider: Provider,
    /// The kubeconfig context of an existing cluster (`provider = "existing"`, where it is
    /// required). Never the current context: a config names its cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Cluster name; kubectl uses context `k3d-<name>`. With `provider = "existing"` it names
    /// the apply lock and this config: what it creates carries `k3d-gpu.io/config=<name>`, and
    /// a plan leaves what another name stamped alone. (K3D_GPU_CLUSTER)
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$"))]
    pub name: String,
    /// A prebuilt node image (`repo:tag`, `@sha256:…` allowed), pulled when missing and never
    /// built. Unset: k3d-gpu builds the node image itself, from the Dockerfile it ships or
    /// from `build_context`. (K3D_GPU_IMAGE)
    pub image: Option<String>,
    /// Your own node image build context: a directory (relative to this file) with a
    /// `Dockerfile`, built instead of the shipped one. Every `FROM` of it takes its tag and
    /// digest from build args (`FROM repo:${X_TAG}${X_DIGEST:+@}${X_DIGEST}`), so images.lock
    /// pins it.
    pub build_context: Option<String>,
    /// Build args of the node image, e.g. `{ UBUNTU_TAG = "24.04" }` or `{ K3S_TAG =
    /// "v1.37.1-k3s1" }`. Each must be an `ARG` of the Dockerfile; a change rebuilds the image
    /// and recreates the cluster.
    pub build_args: BTreeMap<String, String>,
    /// Number of server nodes.
    #[schemars(range(min = 1))]
    pub servers: u32,
    /// Number of agent nodes.
    pub agents: u32,
    /// Extra k3s server flags, e.g. `--disable=servicelb`. (K3D_GPU_K3S_ARGS)
    pub k3s_args: Vec<String>,
    /// Extra node labels, e.g. `{ "ei-infra-eligible" = "true" }`. (K3D_GPU_NODE_LABELS)
    pub node_labels: BTreeMap<String, String>,
    /// Host port for the Kubernetes API; unset lets k3d pick a free one.
    pub api_port: Option<u16>,
    /// Host IPv4 address the Kubernetes API is published on (k3d's `kubeAPI.hostIP`). The
    /// default, `127.0.0.1`, keeps it on this machine; `"0.0.0.0"` publishes it on every
    /// interface, and the plan says so. With a Docker engine on another machine, the address
    /// is on that machine: use one of its addresses this machine can reach.
    pub api_host_ip: String,
    /// The node that advertises the host's accelerators: `"server:0"` (default) or
    /// `"agent:N"`. Every k3d node container sees every device of the host, so with more than
    /// one node each node's plugin would advertise the same GPUs and the scheduler could give
    /// one GPU to two pods. k3s labels this node `k3d-gpu.io/accelerators=true` and the device
    /// plugins run only there. `"all"` runs them on every node (`validate` warns).
    pub accelerator_node: String,
    /// The Kubernetes minor version the node image runs, e.g. `"1.37"`. Feature gates, DRA
    /// and the experimental defaults depend on it. Unset: the `K3S_TAG` of the node image
    /// k3d-gpu builds, else a prebuilt image's `io.k3d-gpu.k3s-version` label, else a
    /// `rancher/k3s:vX.Y.Z-k3sN` image tag, else unknown (never guessed from another image's
    /// tag). Needed for a prebuilt image without that label.
    #[schemars(regex(pattern = r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?$"))]
    pub kubernetes_version: Option<String>,
    /// Extra ports published on the host, spelled as k3d spells them:
    /// `"[ADDRESS:]HOST_PORT:CONTAINER_PORT[/PROTOCOL][@NODE_FILTER]"` (PROTOCOL `tcp`, the
    /// default, or `udp`), e.g. `"8080:80@loadbalancer"` (a chat UI or an OpenAI endpoint
    /// behind the ingress). The
    /// filter defaults to `loadbalancer` (k3d's load balancer forwards to every server and
    /// agent); `server:N`, `agent:N`, `server:*`, `agent:*` or `all` route through it to
    /// those nodes, and a `:direct` suffix publishes on one node itself. Each is bound to
    /// `127.0.0.1` unless an IPv4 address is written in front; any other address is published
    /// beyond this machine, and the plan says so (`audit` reports it on a running cluster).
    // Left out of the serialised config when empty, like every key added after the first
    // release, so an older config's digest (a plan input) is unchanged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
    /// Your host directories (or files) in the nodes: `"/host/dir:/node/dir[:MODE][@NODE_FILTER]"`,
    /// both paths absolute, MODE `ro` (the default) or `rw`. Read-only unless `:rw` is written; on every node unless a filter
    /// (`server:N`, `agent:N`, `server:*`, `agent:*`, `all`; several joined by `;`) says
    /// which. A source that does not exist is an error when the config is planned (on the
    /// host `--root` names, else this machine) and again before k3d runs: Docker would
    /// otherwise create it as an empty root-owned directory. A source that hands out more than
    /// files (a container engine's socket, `~/.ssh` or another credentials directory, `/etc`
    /// and the host's other system directories; a link is judged by its target), or a node path over the node's own k3s
    /// configuration (`/etc`, `/etc/rancher`, `/var/lib/rancher`), is planned with the warning
    /// `volume-sensitive-path`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// Registry mirrors and credentials for k3s (its `registries.yaml`, passed as k3d's
    /// `registries.config`), and optionally a local registry k3d creates for the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registries: Option<Registries>,
}

/// `[cluster.registries]`: how the nodes' containerd pulls. Everything here is written into
/// the nodes when k3d creates the cluster: a change recreates it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Registries {
    /// Mirrors per registry, k3s's `mirrors.<registry>.endpoint`: e.g. `{ "docker.io" =
    /// ["https://mirror.lan:5000"] }`. A registry is a host name (`"*"`: every registry);
    /// each endpoint an `http://` or `https://` URL without credentials. containerd tries
    /// them in order, then the registry itself.
    pub mirrors: BTreeMap<String, Vec<String>>,
    /// A file of your own, relative to this config, holding the registries' credentials and
    /// TLS settings in k3s's format (a `registries.yaml` with only `configs:`). It is read
    /// when the config is planned and applied, and only its digest reaches the plan: the
    /// credentials are never in this config, the plan or anything printed, only in the k3d
    /// config apply writes (mode 0600) and in the nodes.
    pub credentials: Option<String>,
    /// A local registry k3d creates beside the cluster (k3d's `registries.create`), which
    /// the nodes reach as `http://<name>:5000` and this machine at `127.0.0.1:<port>`.
    pub create: Option<RegistryCreate>,
    /// Set by the command edge: what it read of `credentials`.
    #[serde(skip)]
    #[schemars(skip)]
    pub credentials_read: Option<Result<CredentialsRead, CredentialsUnread>>,
}

/// `[cluster.registries.create]`: a registry container k3d creates with the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryCreate {
    /// Its container name, which the nodes reach it by (`http://<name>:5000`): a DNS label;
    /// unset: k3d's `k3d-<cluster>-registry`.
    pub name: Option<String>,
    /// Host port it is published on; unset lets k3d pick a free one.
    pub port: Option<u16>,
    /// Host IPv4 address it is published on: `127.0.0.1` unless set (k3d's own default is
    /// every interface); any other address is published beyond this machine, and the plan
    /// says so.
    pub host_ip: String,
    /// Make it a pull-through cache of this registry (e.g. `"https://registry-1.docker.io"`),
    /// anonymous: credentials belong in `credentials`. Add the registry to `mirrors` with
    /// endpoint `http://<name>:5000` to pull through it.
    pub proxy: Option<String>,
}

impl Default for RegistryCreate {
    fn default() -> Self {
        RegistryCreate { name: None, port: None, host_ip: DEFAULT_API_HOST_IP.into(), proxy: None }
    }
}

/// What the command edge read of `[cluster.registries] credentials` (never serialised, never
/// in the schema): the file's digest and the registries it configures, or why it could not
/// be read. The credentials themselves stay in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", step.prefix())]
pub struct CredentialsUnread {
    pub step: CredentialsStep,
    /// The edge's sentence (the file's confinement, the OS, the parser, the key store).
    pub reason: String,
}

/// Where reading the credentials file stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialsStep {
    /// It may not be read: outside the repository, missing.
    Confine,
    Read,
    Parse,
    /// The machine's digest key could not be kept in the state directory.
    Key,
}

impl CredentialsStep {
    fn prefix(self) -> &'static str {
        match self {
            CredentialsStep::Key => "cannot keep the digest key in the state directory: ",
            _ => "",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsRead {
    pub digest: String,
    pub registries: Vec<String>,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            provider: Provider::K3d,
            context: None,
            name: "gpu".into(),
            image: None,
            build_context: None,
            build_args: BTreeMap::new(),
            servers: 1,
            agents: 0,
            k3s_args: Vec::new(),
            node_labels: BTreeMap::new(),
            api_port: None,
            api_host_ip: DEFAULT_API_HOST_IP.into(),
            accelerator_node: "server:0".into(),
            kubernetes_version: None,
            ports: Vec::new(),
            volumes: Vec::new(),
            registries: None,
        }
    }
}

/// Which accelerator vendors the cluster exposes. (K3D_GPU_VENDORS)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Vendors {
    /// `"auto"` (every vendor the host has) or a list; a listed vendor the host lacks is an error.
    pub enable: VendorSelection,
    /// Vendors to leave out even when detected.
    pub exclude: Vec<crate::facts::Vendor>,
}

impl Vendors {
    /// Whether the cluster gets `vendor` where the host has it: not excluded, and listed when
    /// `enable` is a list.
    pub fn allows(&self, vendor: crate::facts::Vendor) -> bool {
        !self.exclude.contains(&vendor)
            && match &self.enable {
                VendorSelection::Auto => true,
                VendorSelection::Only(list) => list.contains(&vendor),
            }
    }
}

/// How GPUs reach pods: each vendor's device plugin, or its DRA driver (ResourceSlices, and
/// pods that ask through ResourceClaims, `[[claims]]`). `mode` picks the path, for every
/// vendor or per vendor, so a host with Intel and NVIDIA GPUs can put each on its own path in
/// one config: `mode = { intel = "dra", nvidia = "plugin" }` gives the Intel GPUs to DRA claims
/// and the NVIDIA GPUs to the device plugin (time-sliced or through MPS, `[sharing.nvidia]`);
/// `mode = { intel = "plugin", nvidia = "dra" }` is the other way round. The keys below
/// `mode` are the Intel plugin's; NVIDIA's plugin sharing lives in `[sharing.nvidia]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Sharing {
    /// `"plugin"` (default) or `"dra"` for every vendor, or `{ intel = …, nvidia = … }` (a
    /// vendor left out takes the plugin). Intel's DRA driver needs Kubernetes 1.36+.
    /// NVIDIA's (kubernetes-sigs/dra-driver-nvidia-gpu) needs Kubernetes 1.34.2+, driver 565+,
    /// a data-center GPU for whole-GPU claims, and replaces the NVIDIA device plugin, so
    /// `[sharing.nvidia]` does not apply to it. (K3D_GPU_DRA)
    pub mode: SharingMode,
    /// Pods that may share one Intel GPU: `"auto"` (8 when every Intel GPU the cluster gets is
    /// integrated, else exclusive) or a number. (K3D_GPU_INTEL_SHARED)
    pub shared: Shared,
    /// Which GPU a shared pod lands on; only meaningful when shared. Default balanced.
    /// (K3D_GPU_INTEL_ALLOCATION)
    pub allocation: Option<Allocation>,
    /// Add `gpu.intel.com/monitoring` for exporters such as XPU Manager. (K3D_GPU_INTEL_MONITORING)
    pub monitoring: bool,
    /// Which Intel GPUs the cluster gets.
    pub gpus: GpuSet,
    /// Only these PCI device ids (hex, `"e20b"` or `"0xe20b"`), passed as the plugin's
    /// -allow-ids in its own spelling (`0xe20b`).
    pub allow_ids: Vec<String>,
    /// Never these PCI device ids (either spelling), passed as the plugin's -deny-ids (`0xa780`).
    pub deny_ids: Vec<String>,
    /// NVIDIA GPU sharing through the NVIDIA device plugin's config file; absent: one pod per
    /// GPU. The keys above are Intel's; NVIDIA's live here.
    pub nvidia: Option<NvidiaSharing>,
}

/// `[sharing.nvidia]`: several pods on one NVIDIA GPU. The device plugin advertises each GPU
/// `replicas` times as `nvidia.com/gpu` (the name stays, so the agent and `[expect] devices`
/// keep working); the pods share the GPU with no memory or fault isolation between them (the
/// agent's vLLM alone takes 90% of its GPU's memory; the plan warns). A change is an in-place
/// update of the plugin's ConfigMap, and its pods restart to read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NvidiaSharing {
    /// `time-slicing` (default): pods take turns on the whole GPU. `mps`: CUDA MPS, the
    /// plugin's MPS control daemon beside it: each pod gets its share of the GPU's threads
    /// and memory (100/replicas %, memory/replicas), at most 48 per GPU (16 before compute
    /// capability 7.5). Not under WSL2. Experimental upstream. While the daemon runs the
    /// host's GPUs are in EXCLUSIVE_PROCESS compute mode, so CUDA programs outside the cluster
    /// cannot use them; a clean stop sets DEFAULT back (after a crash, `sudo nvidia-smi -c
    /// DEFAULT`).
    #[serde(default)]
    pub strategy: NvidiaStrategy,
    /// Pods per GPU, 2 to 110 (the plugin refuses fewer than 2; a node runs at most 110 pods,
    /// k3s's kubelet default, so more replicas could never be used).
    #[schemars(range(min = 2, max = 110))]
    pub replicas: u32,
    /// Refuse a pod that asks for more than one `nvidia.com/gpu` (the plugin's
    /// `failRequestsGreaterThanOne`): with sharing, two replicas may be the same GPU, so such
    /// a request would not get more compute. Unset: the plugin's default (allowed with
    /// time-slicing).
    pub fail_requests_greater_than_one: Option<bool>,
}

/// How pods share an NVIDIA GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NvidiaStrategy {
    #[default]
    TimeSlicing,
    Mps,
}

/// The path one vendor's GPUs take to pods: its device plugin or its DRA driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GpuMode {
    #[default]
    Plugin,
    Dra,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Allocation {
    Balanced,
    Packed,
    None,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GpuSet {
    #[default]
    All,
    Discrete,
    Integrated,
}

impl GpuSet {
    /// Whether a GPU, integrated or discrete, is in the set.
    pub fn admits(self, integrated: bool) -> bool {
        match self {
            GpuSet::All => true,
            GpuSet::Discrete => !integrated,
            GpuSet::Integrated => integrated,
        }
    }
}

/// CPU placement on hybrid and NUMA hosts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Placement {
    /// `k3s`: k3d-gpu applies the NRI balloons policy; `external`: a Helm release owns it.
    /// (K3D_GPU_BALLOONS)
    pub balloons: Balloons,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Balloons {
    #[default]
    K3s,
    External,
}

/// Alpha/beta upstream features. (K3D_GPU_EXPERIMENTAL)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Experimental {
    /// `"auto"` (what this host supports and the shipped k3s has as beta or GA), `"off"`, or
    /// exactly this list.
    pub features: ExperimentalSelection,
}

/// Rules for what the cluster may run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// `tags` (default): an image without a digest in images.lock is deployed by its tag, and
    /// the plan warns. `pinned`: every image must be pinned by digest (the catalog or
    /// images.lock), or the config does not compile. `k3d-gpu images lock` pins them.
    pub images: ImagePolicy,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImagePolicy {
    #[default]
    Tags,
    Pinned,
}

/// What the machine must have. `validate` and `apply` fail when the facts do not satisfy it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// Vendors that must be active.
    pub vendors: Vec<crate::facts::Vendor>,
    /// Minimum device counts per Kubernetes resource, e.g. `{ "nvidia.com/gpu" = 2 }`.
    pub devices: BTreeMap<String, u32>,
    /// The hardware fingerprint of the machine this config is for (`k3d-gpu facts`).
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub fingerprint: Option<String>,
}

/// A component file of the user's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentRef {
    /// Path to a component `.kdl` file, relative to the config file, in the repository that holds it.
    pub path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(dns_label("tp-2") && dns_label("a") && dns_label(&"a".repeat(63)));
        assert!(!dns_label("TP") && !dns_label("-x") && !dns_label("x-") && !dns_label("") && !dns_label("a_b"));
        assert!(!dns_label(&"a".repeat(64)));
    }

    #[test]
    fn gpu_sets() {
        assert!(GpuSet::All.admits(true) && GpuSet::All.admits(false));
        assert!(GpuSet::Integrated.admits(true) && !GpuSet::Integrated.admits(false));
        assert!(GpuSet::Discrete.admits(false) && !GpuSet::Discrete.admits(true));
    }
}
