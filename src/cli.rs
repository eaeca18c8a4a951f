//! Command-line definition (clap) and the top-level run: every flag is defined and documented
//! here once, so `--help` is the reference. Commands live in `commands/`.
//!
//! Each command takes the option groups it reads (`Inputs`, `HostOpts`, `JsonOpt`, …,
//! flattened into its arguments), so its `--help`, the completions, the man pages and the
//! parser all say the same thing: an option a command does not read is not in its help and
//! is refused by clap (exit 2). Commands receive what they read as one [`Global`]
//! (`Command::global`). The options may also come before the command (`k3d-gpu -c lab.toml
//! plan`): [`options_after_command`] moves them behind it before parsing, so the command's
//! own definition still decides.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::{EXIT_USAGE, Error};
use crate::facts::VendorFilter;

#[derive(Debug, Parser)]
#[command(
    name = "k3d-gpu",
    version,
    about = "GPU-ready local Kubernetes (k3d) from a declarative k3dgpu.toml",
    long_about = "k3d-gpu reads the host's accelerators from sysfs, compiles them and k3dgpu.toml into a \
resource graph, and plans and applies the k3d cluster and its device plugins.\n\n\
Each command lists the options it reads (`k3d-gpu plan --help`); -c, --root, --facts, --stdlib, --vendors \
and --json may also come before the command.\n\n\
Exit codes: 0 success; 1 a check failed; 2 bad usage or unreadable input."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What a command read from the options below, in one place: the type every command's code
/// (and the MCP server's tools) receives. An option the command does not define is left at its
/// default here (no config, no host, the built-in catalog, text, `auto`).
#[derive(Debug, Clone, Default)]
pub struct Global {
    pub config: Option<PathBuf>,
    pub root: Vec<PathBuf>,
    pub facts: Vec<PathBuf>,
    pub stdlib: Option<PathBuf>,
    pub json: bool,
    pub vendors: Option<String>,
}

impl Global {
    /// `k3d-gpu` with the options this run was given, before the subcommand that follows: the
    /// config, each host root and facts file, the catalog and the vendor filter. `--json` is not
    /// carried; the command that follows says its own output.
    pub fn k3d_gpu(&self) -> crate::shell::Command {
        let mut c = crate::shell::Command::new("k3d-gpu");
        if let Some(config) = &self.config {
            c = c.lit("-c").path(config);
        }
        for root in &self.root {
            c = c.lit("--root").path(root);
        }
        for facts in &self.facts {
            c = c.lit("--facts").path(facts);
        }
        if let Some(stdlib) = &self.stdlib {
            c = c.lit("--stdlib").path(stdlib);
        }
        if let Some(vendors) = &self.vendors {
            c = c.opt("--vendors", vendors);
        }
        c
    }
}

/// `-c/--config`.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfigOpt {
    /// The config file. Without it, ./k3dgpu.toml if present, else the defaults (an empty
    /// config).
    #[arg(short = 'c', long, value_name = "FILE", env = "K3D_GPU_CONFIG")]
    pub config: Option<PathBuf>,
}

/// `--stdlib`.
#[derive(Debug, Clone, Default, Args)]
pub struct StdlibOpt {
    /// Use this component catalog instead of the one built in: DIR/stdlib/*.kdl with
    /// DIR/share/*.yml (see docs/stdlib.md).
    #[arg(long, value_name = "DIR", env = "K3D_GPU_STDLIB")]
    pub stdlib: Option<PathBuf>,
}

/// `--json`.
#[derive(Debug, Clone, Default, Args)]
pub struct JsonOpt {
    /// Print data as JSON on stdout instead of a table: one object with a `schema` key.
    #[arg(long)]
    pub json: bool,
}

/// `--vendors`.
#[derive(Debug, Clone, Default, Args)]
pub struct VendorsOpt {
    /// Which vendors may be active: `auto` (all the host has) or a comma list of nvidia,
    /// intel, npu, gaudi, dsa, iaa, qat, amx, hybrid, numa, wsl. An unknown name is an error.
    /// [default: auto]
    #[arg(long, value_name = "LIST", env = "K3D_GPU_VENDORS")]
    pub vendors: Option<String>,
}

/// `--root`, one host.
#[derive(Debug, Clone, Default, Args)]
pub struct RootOpt {
    /// Read the host from this directory instead of `/` (a fixture host: DIR/sys, DIR/proc,
    /// DIR/dev, ...; see docs/fixture-hosts.md). Links never lead outside it.
    #[arg(long, value_name = "DIR", env = "K3D_GPU_ROOT")]
    pub root: Option<PathBuf>,
}

/// One host: a root directory or a saved facts document, and the vendor filter.
#[derive(Debug, Clone, Default, Args)]
pub struct HostOpts {
    #[command(flatten)]
    pub root: RootOpt,

    /// Use a saved facts/v1 document instead of reading a host.
    #[arg(long, value_name = "FILE", conflicts_with = "root")]
    pub facts: Option<PathBuf>,

    #[command(flatten)]
    pub vendors: VendorsOpt,
}

/// Several hosts (`validate`): roots and saved facts documents together, each may repeat.
#[derive(Debug, Clone, Default, Args)]
pub struct HostsOpts {
    /// Read a host from this directory instead of `/` (a fixture host, see
    /// docs/fixture-hosts.md); repeat it to check several hosts. Links never lead outside it.
    #[arg(long, value_name = "DIR", env = "K3D_GPU_ROOT")]
    pub root: Vec<PathBuf>,

    /// A saved facts/v1 document to check against; repeat it, and mix it with --root.
    #[arg(long, value_name = "FILE")]
    pub facts: Vec<PathBuf>,

    #[command(flatten)]
    pub vendors: VendorsOpt,
}

/// The config and its catalog: what names the cluster and which components are ours.
#[derive(Debug, Clone, Default, Args)]
pub struct CatalogOpts {
    #[command(flatten)]
    pub config: ConfigOpt,
    #[command(flatten)]
    pub stdlib: StdlibOpt,
}

/// What a compile reads: the config, its catalog and one host.
#[derive(Debug, Clone, Default, Args)]
pub struct Inputs {
    #[command(flatten)]
    pub catalog: CatalogOpts,
    #[command(flatten)]
    pub host: HostOpts,
}

/// A compile's inputs and `--json`: `graph`, `observe`, `agent`.
#[derive(Debug, Clone, Default, Args)]
pub struct DataOpts {
    #[command(flatten)]
    pub inputs: Inputs,
    #[command(flatten)]
    pub json: JsonOpt,
}

impl Global {
    /// The vendor filter given with --vendors (or K3D_GPU_VENDORS); `auto` when neither is.
    pub fn vendor_filter(&self) -> Result<VendorFilter, Error> {
        let Some(text) = &self.vendors else { return Ok(VendorFilter::Auto) };
        text.parse().map_err(|e: crate::facts::vendors::UnknownVendor| Error::Usage {
            message: format!("--vendors: {e}"),
            help: Some("use `auto` or a comma list such as `intel,npu`".into()),
        })
    }

    fn with_catalog(mut self, c: &CatalogOpts) -> Global {
        self.config = c.config.config.clone();
        self.stdlib = c.stdlib.stdlib.clone();
        self
    }

    fn with_stdlib(mut self, s: &StdlibOpt) -> Global {
        self.stdlib = s.stdlib.clone();
        self
    }

    fn with_host(mut self, h: &HostOpts) -> Global {
        self.root = h.root.root.iter().cloned().collect();
        self.facts = h.facts.iter().cloned().collect();
        self.vendors = h.vendors.vendors.clone();
        self
    }

    fn with_inputs(self, i: &Inputs) -> Global {
        self.with_catalog(&i.catalog).with_host(&i.host)
    }

    fn with_json(mut self, j: &JsonOpt) -> Global {
        self.json = j.json;
        self
    }
}

impl From<&Inputs> for Global {
    fn from(i: &Inputs) -> Global {
        Global::default().with_inputs(i)
    }
}

impl From<&DataOpts> for Global {
    fn from(d: &DataOpts) -> Global {
        Global::default().with_inputs(&d.inputs).with_json(&d.json)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the accelerators found, the Kubernetes resources they become, and why any vendor
    /// is inactive.
    Detect(DetectArgs),

    /// Preflight: findings about the host (kernel, firmware, drivers, device access) and, on
    /// the real host, docker, k3d and kubectl — each with the file it read and a fix. Advice
    /// only: it never writes to the host. Exits 1 when a finding is `fail`.
    Doctor(DoctorCmd),

    /// What the host itself needs for each active vendor the config's [vendors] keep (Intel
    /// compute runtime and Level Zero, the media driver and libva, the NPU driver and firmware,
    /// the NVIDIA container toolkit, Gaudi's driver), as a pinned install plan for this distro
    /// (or --distro's), after the diagnoses of a partial upgrade. Prints the commands; --apply
    /// runs them on this machine only after showing them and a typed confirmation. Exits 1 when
    /// a diagnosis fails.
    HostSetup(HostSetupCmd),

    /// Print the facts/v1 document: deterministic bytes, no clock, no machine paths.
    Facts(FactsArgs),

    /// Write a commented k3dgpu.toml for this host (or --root's, --facts'): its active vendors
    /// as `[expect]`, and where the agent would run, in a comment. `validate` accepts what it
    /// writes. It never replaces a file: when --out (default ./k3dgpu.toml) exists, it writes
    /// nothing and exits 1.
    Init(InitCmd),

    /// Check the config against one or more hosts (--root/--facts, each may repeat): a table
    /// per host, every error with the config line it is about. No Docker, no cluster. Exits 1
    /// if any host fails.
    Validate(ValidateCmd),

    /// Print the resource graph the config compiles to for this host: DOT, or JSON with --json.
    Graph(DataOpts),

    /// Write the Kubernetes manifests the config produces, one file per component plus a
    /// kustomization.yaml, ready for Flux or Argo CD.
    Render(RenderCmd),

    /// Print the JSON Schema of k3dgpu.toml (for taplo / Even Better TOML).
    Schema(SchemaArgs),

    /// What exists now: the cluster's node containers (Docker) and its nodes and managed
    /// objects (the Kubernetes API, context k3d-<name>); --json prints observed/v1.
    Observe(DataOpts),

    /// Run a plan: only if it still hashes the same (PLANFILE or --plan-hash), in dependency
    /// order, then verify. A plan that recreates the cluster needs --allow-replace (or a typed
    /// confirmation on a terminal). Exits 1 when refused or when an action or check fails.
    Apply(ApplyCmd),

    /// Read a plan saved with `plan --out`: its actions, reasons and hash, the options it was
    /// made with (which `apply PLANFILE` reads when given none), and how to apply it; --json
    /// prints the plan/v1 document. Reads nothing else.
    Show(ShowArgs),

    /// Delete the cluster this config manages (and with it everything in it), through the same
    /// gate: prints the plan and its hash; runs only with --plan-hash of that plan. Reads only
    /// the config and Docker, so it works when the host no longer fits the config; refuses a
    /// cluster whose nodes k3d-gpu did not create.
    Destroy(DestroyCmd),

    /// Where the agent (the LLM server) would run on this host, and why: backend, device,
    /// resource, placement. Without an [agent] table it explains the defaults. `agent status`
    /// asks the running server instead.
    Agent(AgentArgs),

    /// Compare the config's graph with what exists and print the plan: each action with its
    /// reason and a diff, a summary, and the plan hash that `apply` checks.
    Plan(PlanCmd),

    /// The images this config deploys on this host and how each is pinned: by the catalog,
    /// by images.lock beside the config, by the tool's own lock, or not at all (deployed by
    /// tag). `images lock` and `images check` maintain the lock.
    Images(ImagesArgs),

    /// Safety rules for the running cluster: ports published off loopback (other than the API
    /// server), images no lock pins by digest, images pulled at runtime by a tag no lock pins, a
    /// kubeconfig readable by group or others, Open WebUI with auth off. Each finding has a fix.
    /// Exits 1 on a finding.
    Audit(AuditCmd),

    /// The k3s server node's log (through Docker), or with COMPONENT the logs of that catalog
    /// component's pods (through the Kubernetes API), pods that are not ready first.
    Logs(LogsCmd),

    /// What this host and its cluster have, engine by engine: findings with fixes, the plan
    /// (actions, reasons, hash), the resource graph and the cluster's state. Text on stdout
    /// (JSON k3d-gpu.report/v1 with --json); with DIR, report.txt, report.json and a
    /// self-contained report.html (no script, nothing loaded, the graph as SVG) written there.
    Report(ReportCmd),

    /// Print the shell completion script for SHELL (bash, zsh, fish), generated from these
    /// definitions; packages install it.
    Completions(CompletionsArgs),

    /// Print the man page k3d-gpu(1); with --out, write it and one page per subcommand.
    Man(ManArgs),

    /// This build's version and git commit (`unknown` outside a checkout), and what it pins:
    /// the node image's k3s, the k3d release it is tested against, the NVIDIA container
    /// toolkit, and each catalog component's upstream release. --json prints
    /// k3d-gpu.version/v1, as does `k3d-gpu --version --json`.
    Version(VersionArgs),

    /// Prove each accelerator resource the cluster advertises usable from inside a pod: one
    /// smoke pod per resource and node (NVIDIA: `nvidia-smi -L` under RuntimeClass nvidia;
    /// Intel GPU/NPU, Gaudi, DSA/IAA/QAT: the device nodes the plugin handed over exist and
    /// open), each pod's verdict with the lines it printed, and the node's allocatable against
    /// the host's facts. Pods run in namespace default and are deleted after. Exits 1 on any
    /// failure, with its likely cause and fix.
    Test(TestCmd),

    /// Serve the Model Context Protocol on stdio, for an AI agent (docs/mcp.md): read-only tools
    /// (facts, validate, plan, observe, agent, audit) and apply, which runs only a plan hash the
    /// person confirmed in the client. -c, --root, --facts, --stdlib and --vendors given here are
    /// every tool's defaults. Runs until the client closes stdin.
    Mcp(McpCmd),
}

impl Command {
    /// What this command read of the shared options, as its code receives them.
    pub fn global(&self) -> Global {
        let none = Global::default();
        match self {
            Command::Detect(a) => none.with_host(&a.host).with_json(&a.json),
            Command::Doctor(a) => Global::from(&a.data),
            Command::HostSetup(a) => Global {
                config: a.config.config.clone(),
                root: a.root.root.iter().cloned().collect(),
                vendors: a.vendors.vendors.clone(),
                json: a.json.json,
                ..none
            },
            Command::Facts(a) => a.global(),
            Command::Init(a) => none.with_host(&a.host).with_stdlib(&a.stdlib),
            Command::Validate(a) => a.global(),
            Command::Graph(d) | Command::Observe(d) => Global::from(d),
            Command::Agent(a) => Global::from(a.data()),
            Command::Render(a) => Global::from(&a.inputs),
            Command::Schema(a) => none.with_json(&a.json),
            Command::Apply(a) => Global::from(&a.data),
            Command::Show(a) => none.with_json(&a.json),
            Command::Destroy(a) => Global::from(&a.data),
            Command::Plan(a) => Global::from(&a.data),
            Command::Images(a) => Global::from(a.data()),
            Command::Audit(a) => none.with_catalog(&a.catalog).with_json(&a.json),
            Command::Logs(a) => none.with_catalog(&a.catalog).with_json(&a.json),
            Command::Report(a) => Global::from(&a.data),
            Command::Completions(_) | Command::Man(_) => none,
            Command::Version(a) => none.with_json(&a.json),
            Command::Mcp(a) => Global::from(&a.inputs),
            Command::Test(a) => Global::from(&a.data),
        }
    }
}

/// `detect`: one host.
#[derive(Debug, Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub host: HostOpts,
    #[command(flatten)]
    pub json: JsonOpt,
}

/// `doctor`.
#[derive(Debug, Args)]
pub struct DoctorCmd {
    #[command(flatten)]
    pub data: DataOpts,
    #[command(flatten)]
    pub args: DoctorArgs,
}

/// `host-setup`: one host root (never a facts document: it reads libraries sysfs does not
/// describe), and the config, whose `[vendors]` say which vendors the cluster gets.
#[derive(Debug, Args)]
pub struct HostSetupCmd {
    #[command(flatten)]
    pub config: ConfigOpt,
    #[command(flatten)]
    pub root: RootOpt,
    #[command(flatten)]
    pub vendors: VendorsOpt,
    #[command(flatten)]
    pub json: JsonOpt,
    #[command(flatten)]
    pub args: HostSetupArgs,
}

#[derive(Debug, Clone, Default, Args)]
pub struct HostSetupArgs {
    /// Print the plan for this distro instead of the one /etc/os-release names: ubuntu-22.04,
    /// ubuntu-24.04, ubuntu-26.04, debian-12, debian-13 (Proxmox VE 8 and 9), fedora or arch
    /// (Arch and Manjaro).
    #[arg(long, value_name = "DISTRO")]
    pub distro: Option<String>,

    /// Run the plan's commands and sha256 checks on this machine, after showing them and
    /// asking you to type `apply` on the terminal. Refused with --root, without a terminal, or
    /// with any other answer; a download whose sha256 does not match stops the run; by-hand
    /// steps (Gaudi's installer) are never run.
    #[arg(long, conflicts_with = "json")]
    pub apply: bool,

    /// Where release downloads go (made mode 0700) [default: ${XDG_CACHE_HOME:-~/.cache}/k3d-gpu/host-setup].
    #[arg(long, value_name = "DIR", env = "K3D_GPU_SETUP_DIR")]
    pub download_dir: Option<PathBuf>,
}

/// `init`: one host and the catalog; the config is what it writes.
#[derive(Debug, Args)]
pub struct InitCmd {
    #[command(flatten)]
    pub stdlib: StdlibOpt,
    #[command(flatten)]
    pub host: HostOpts,
    #[command(flatten)]
    pub args: InitArgs,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to write the config; `-` prints it on stdout. A file (or a link, even a dangling
    /// one) already there is never replaced: init writes nothing and exits 1.
    #[arg(long, value_name = "FILE", default_value = "k3dgpu.toml")]
    pub out: PathBuf,
}

/// `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    pub json: JsonOpt,
}

/// `validate`: the config against several hosts.
#[derive(Debug, Args)]
pub struct ValidateCmd {
    #[command(flatten)]
    pub catalog: CatalogOpts,
    #[command(flatten)]
    pub hosts: HostsOpts,
    #[command(flatten)]
    pub json: JsonOpt,
    /// Validate many configs in one run, each against the machines it is for: FILE lists
    /// `CONFIG HOST` a line (HOST a fixture host directory or a facts file; an existing
    /// cluster's config alone, its [[nodes]] name their facts), `#` comments — the CI
    /// recipe's k3dgpu-machines.txt. Exits with the worst pair's code.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "root", "facts"])]
    pub machines: Option<PathBuf>,
}

impl ValidateCmd {
    pub fn global(&self) -> Global {
        Global {
            root: self.hosts.root.clone(),
            facts: self.hosts.facts.clone(),
            vendors: self.hosts.vendors.vendors.clone(),
            ..Global::default().with_catalog(&self.catalog).with_json(&self.json)
        }
    }
}

/// `render`.
#[derive(Debug, Args)]
pub struct RenderCmd {
    #[command(flatten)]
    pub inputs: Inputs,
    #[command(flatten)]
    pub args: RenderArgs,
}

/// `apply`.
#[derive(Debug, Args)]
pub struct ApplyCmd {
    #[command(flatten)]
    pub data: DataOpts,
    #[command(flatten)]
    pub args: ApplyArgs,
}

/// `destroy`: reads the config and Docker; the host options are accepted so that one set of
/// flags serves `plan`, `apply`, `observe` and `destroy`.
#[derive(Debug, Args)]
pub struct DestroyCmd {
    #[command(flatten)]
    pub data: DataOpts,
    #[command(flatten)]
    pub args: DestroyArgs,
}

/// `plan`.
#[derive(Debug, Args)]
pub struct PlanCmd {
    #[command(flatten)]
    pub data: DataOpts,
    #[command(flatten)]
    pub args: PlanArgs,
}

/// `audit`: the cluster the config names; no host.
#[derive(Debug, Args)]
pub struct AuditCmd {
    #[command(flatten)]
    pub catalog: CatalogOpts,
    #[command(flatten)]
    pub json: JsonOpt,
    #[command(flatten)]
    pub args: AuditArgs,
}

/// `logs`: the cluster the config names; no host.
#[derive(Debug, Args)]
pub struct LogsCmd {
    #[command(flatten)]
    pub catalog: CatalogOpts,
    #[command(flatten)]
    pub json: JsonOpt,
    #[command(flatten)]
    pub args: LogsArgs,
}

/// `report`.
#[derive(Debug, Args)]
pub struct ReportCmd {
    #[command(flatten)]
    pub data: DataOpts,
    #[command(flatten)]
    pub args: ReportArgs,
}

/// `test`: the config's cluster, this host's facts.
#[derive(Debug, Args)]
pub struct TestCmd {
    #[command(flatten)]
    pub data: DataOpts,
    #[command(flatten)]
    pub args: TestArgs,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Seconds each smoke pod may take, pulling its image included.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::smoke::DEFAULT_TIMEOUT_S)]
    pub timeout: u64,

    /// The NVIDIA pod's image instead of the default CUDA base image (one your driver
    /// supports); resolved through images.lock like every image.
    #[arg(long, value_name = "IMAGE")]
    pub nvidia_image: Option<String>,

    /// The device-node pods' image instead of busybox (one with clinfo also lists OpenCL
    /// devices); resolved through images.lock like every image.
    #[arg(long, value_name = "IMAGE")]
    pub device_image: Option<String>,

    /// Test this node only: its pods, its sharing groups and its counts. Required on an
    /// existing cluster (`[cluster] provider = "existing"`), where it names a `[[nodes]]`
    /// entry: its facts judge it, and its pods tolerate its `taints`.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
}

/// `mcp`: the tools' default inputs.
#[derive(Debug, Args)]
pub struct McpCmd {
    #[command(flatten)]
    pub inputs: Inputs,
    #[command(flatten)]
    pub args: McpArgs,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Seconds a read-only tool call may take; then it answers with a timeout error (apply has
    /// the deadlines of `k3d-gpu apply` instead).
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,

    /// Seconds a request for the person's confirmation of a plan stays valid.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub confirm_ttl: u64,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Print what was read of the cluster (k3d-gpu.audit-observed/v1) instead of auditing it.
    #[arg(long, conflicts_with = "observed")]
    pub observe: bool,

    /// Audit a saved document (written by `audit --observe`) instead of the live cluster.
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// A catalog component (e.g. intel-gpu-plugin); without it, the server node's log.
    pub component: Option<String>,

    /// Keep printing the server node's log as it grows (until interrupted).
    #[arg(short = 'f', long)]
    pub follow: bool,

    /// How many of the last lines to show of each log.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub tail: u32,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Write report.txt, report.json and report.html into DIR (created if missing).
    pub dir: Option<PathBuf>,

    /// Do not read Docker or the cluster: the plan is against nothing, the cluster unobserved.
    #[arg(long)]
    pub offline: bool,

    /// Add the result of a smoke test saved with `k3d-gpu test --json > FILE`: each
    /// accelerator resource's verdict (usable from a pod or not) with its cause and fix. It
    /// must be of the config's cluster.
    #[arg(long, value_name = "FILE")]
    pub test: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write k3d-gpu.1 and k3d-gpu-<command>.1 for every subcommand into DIR (created if
    /// missing) instead of printing k3d-gpu.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ImagesArgs {
    #[command(flatten)]
    pub data: DataOpts,

    #[command(subcommand)]
    pub command: Option<ImagesCommand>,
}

impl ImagesArgs {
    /// The options of the command that runs: `images lock` and `images check` take their own.
    pub fn data(&self) -> &DataOpts {
        match &self.command {
            Some(ImagesCommand::Lock(d) | ImagesCommand::Check(d)) => d,
            None => &self.data,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Resolve every image the config deploys to its digest through the Docker engine (its
    /// mirrors, proxy and registry settings apply) and write images.lock beside the config:
    /// sorted, no timestamps, all or nothing. A digest the catalog pins still wins.
    Lock(DataOpts),

    /// No network: exit 1 when images.lock misses an image the config deploys, holds one it no
    /// longer deploys, or names another digest than the catalog pins. For CI.
    Check(DataOpts),
}

/// `agent`: the placement; `agent status`: the running server.
#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub data: DataOpts,

    /// Also say where a model of this size would run, and why: its weights in GiB (`14`,
    /// `7.5`), each device with the memory it may use, and the first that holds the weights
    /// and a fifth more, in the placement's order.
    #[arg(long, value_name = "GIB", value_parser = model_size)]
    pub model_size: Option<f64>,

    #[command(subcommand)]
    pub command: Option<AgentCommand>,
}

impl AgentArgs {
    /// The options of the command that runs: `agent status` takes its own.
    pub fn data(&self) -> &DataOpts {
        match &self.command {
            Some(AgentCommand::Status(s)) => &s.data,
            None => &self.data,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// The running agent, asked through the cluster's API server (its service proxy): the
    /// endpoint, the models it serves, the device it runs on, and a fresh reply to one short
    /// chat completion with the time it took. Exits 1 when the server does not answer.
    Status(AgentStatusArgs),
}

#[derive(Debug, Args)]
pub struct AgentStatusArgs {
    #[command(flatten)]
    pub data: DataOpts,

    /// Seconds the fresh reply may take (a cold server compiles on its first request).
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plan saved with `plan --out`; it runs only if a fresh plan has the same bytes. The
    /// -c, --root, --facts, --stdlib and --vendors it was made with (recorded in it) stand
    /// for those not given here.
    #[arg(value_name = "PLANFILE", conflicts_with = "plan_hash")]
    pub plan_file: Option<PathBuf>,

    /// Run only if a fresh plan hashes to this (`sha256:…`, as `plan --hash` prints).
    #[arg(long, value_name = "HASH", value_parser = plan_hash)]
    pub plan_hash: Option<String>,

    /// Consent to recreating the cluster, which deletes its state.
    #[arg(long)]
    pub allow_replace: bool,

    /// At most this many actions at once.
    #[arg(long, value_name = "N", default_value_t = crate::apply::executor::DEFAULT_PARALLEL)]
    pub parallel: usize,

    /// Seconds each verify check may take.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::apply::verify::DEFAULT_TIMEOUT.as_secs())]
    pub verify_timeout: u64,

    /// After an apply that succeeded, run `k3d-gpu test` (its default timeout and images):
    /// each accelerator resource proved usable from a pod. Exits 1 if one is not. With
    /// --json its k3d-gpu.test/v1 document is one `{"event": "test"}` line on stderr.
    #[arg(long)]
    pub test: bool,
}

/// `show`: a saved plan, nothing else.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A plan saved with `plan --out`.
    #[arg(value_name = "PLANFILE")]
    pub plan_file: PathBuf,

    #[command(flatten)]
    pub json: JsonOpt,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// Run only if the destroy plan hashes to this (`destroy` without it prints the hash).
    #[arg(long, value_name = "HASH", value_parser = plan_hash)]
    pub plan_hash: Option<String>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Write the plan/v1 document to FILE (the bytes the hash is of).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Print only the plan hash (`sha256:<hex>`).
    #[arg(long)]
    pub hash: bool,

    /// Exit 0 when there is nothing to do and 2 when there are changes (1 stays an error).
    #[arg(long)]
    pub detailed_exitcode: bool,

    /// Compare against a saved observed/v1 document instead of the live cluster.
    #[arg(long, value_name = "FILE", conflicts_with = "offline")]
    pub observed: Option<PathBuf>,

    /// Plan as if nothing exists yet (no Docker, no cluster needed).
    #[arg(long)]
    pub offline: bool,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The directory to write into (created if missing; files k3d-gpu wrote are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Write a set Flux's kustomize-controller applies unchanged (docs/flux.md): refused when
    /// an object would carry a secret value; an existing cluster's node labels go to
    /// DIR/node-labels/, a set of their own the top kustomization.yaml does not list.
    #[arg(long)]
    pub flux: bool,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    // Accepted and ignored: the schema is JSON anyway.
    #[command(flatten)]
    pub json: JsonOpt,

    /// Print the config reference as Markdown (docs/config.md) instead of the JSON Schema.
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Skip the docker/k3d/kubectl checks on the real host (they run commands with a timeout).
    #[arg(long)]
    pub no_tools: bool,

    /// The read-only tuning advisor for inference instead of the preflight: CPU governor and
    /// energy preference, transparent huge pages, swap and swappiness, NUMA balancing, each
    /// GPU's PCIe link, RAPL counters, the Docker engine's storage driver; each finding with
    /// the command that applies it and the one that reverts it. Changes nothing; exits 0.
    #[arg(long)]
    pub perf: bool,

    /// With --perf: the size of the model to serve, in GiB, held against free memory and swap.
    #[arg(long, value_name = "N", requires = "perf", value_parser = model_gb)]
    pub model_gb: Option<f64>,
}

/// A model size in GiB: a positive number.
fn model_gb(text: &str) -> Result<f64, BadValue> {
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err(BadValue::ModelGb),
    }
}

/// What an option's value should have been; clap prints it after the value it refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadValue {
    #[error("expected a positive number of GiB, such as 8 or 4.5")]
    ModelGb,
    #[error("expected the model's size in GiB, a number above 0 and at most 4096 (e.g. 14 or 7.5)")]
    ModelSize,
    #[error("expected `sha256:` and 64 lowercase hex digits, as `k3d-gpu plan --hash` prints")]
    PlanHash,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct FactsArgs {
    #[command(flatten)]
    pub host: HostOpts,

    // Accepted: facts are JSON anyway.
    #[command(flatten)]
    pub json: JsonOpt,

    /// Write the document to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<FactsCommand>,
}

#[derive(Debug, Subcommand)]
pub enum FactsCommand {
    /// Copy exactly the files, directories and links detection reads into a new fixture host
    /// directory, so this machine can be checked into a repo and tested in CI.
    Capture(CaptureArgs),
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// The directory to create (must not exist or be empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    #[command(flatten)]
    pub root: RootOpt,

    #[command(flatten)]
    pub vendors: VendorsOpt,
}

impl FactsArgs {
    pub fn global(&self) -> Global {
        match &self.command {
            Some(FactsCommand::Capture(c)) => Global {
                root: c.root.root.iter().cloned().collect(),
                vendors: c.vendors.vendors.clone(),
                ..Global::default()
            },
            None => Global::default().with_host(&self.host).with_json(&self.json),
        }
    }
}

/// A model's size in GiB: a number above 0 and at most 4096 (no accelerator holds more).
pub(crate) fn model_size(text: &str) -> Result<f64, BadValue> {
    match text.trim().parse::<f64>() {
        Ok(gib) if gib.is_finite() && gib > 0.0 && gib <= 4096.0 => Ok(gib),
        _ => Err(BadValue::ModelSize),
    }
}

/// A plan hash as `plan --hash` prints it: `sha256:` and 64 lowercase hex digits. Anything
/// else is a typo or a truncated copy (bad usage, exit 2), not a plan that changed.
pub(crate) fn plan_hash(text: &str) -> Result<String, BadValue> {
    let hex = text.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(text.to_string())
    } else {
        Err(BadValue::PlanHash)
    }
}

/// The options that may come before the command, by id: the fields of [`Global`], which every
/// command reads through it. How each is spelled (`-c`, `--config`) and whether it takes a
/// value are read from the command tree ([`leading_spellings`]), not written here again.
pub(crate) const LEADING: [&str; 6] = ["config", "root", "facts", "stdlib", "vendors", "json"];

/// Each leading option's spellings (`--config`, `-c`) and whether it takes a value, as the
/// first (sub)command that defines it declares them (the commands share one definition of
/// each, the option groups above).
fn leading_spellings(cmd: &clap::Command) -> Vec<(String, bool)> {
    fn find<'a>(cmd: &'a clap::Command, id: &str) -> Option<&'a clap::Arg> {
        cmd.get_arguments()
            .find(|a| a.get_id().as_str() == id)
            .or_else(|| cmd.get_subcommands().find_map(|s| find(s, id)))
    }
    let mut out = Vec::new();
    for arg in LEADING.iter().filter_map(|id| find(cmd, id)) {
        let takes_value = arg.get_action().takes_values();
        out.extend(arg.get_long().map(|long| (format!("--{long}"), takes_value)));
        out.extend(arg.get_short().map(|short| (format!("-{short}"), takes_value)));
    }
    out
}

/// `k3d-gpu -c lab.toml --root R images check` → `k3d-gpu images check -c lab.toml --root R`:
/// the shared options given before the command move behind its (sub)command path, where its
/// own definition accepts or refuses them. Anything else before the command (`--help`, a
/// typo) leaves the line as it is, for clap to report.
pub fn options_after_command(args: Vec<OsString>, cmd: &clap::Command) -> Vec<OsString> {
    let leading = leading_spellings(cmd);
    let mut moved = Vec::new();
    let mut i = 1;
    while let Some(word) = args.get(i).and_then(|a| a.to_str()) {
        // `--name`, `--name=value`, `-c`, `-cVALUE` or `-c=VALUE`.
        let (name, inline) = match word.strip_prefix("--") {
            Some(rest) => rest.split_once('=').map_or((word, false), |(n, _)| (&word[..n.len() + 2], true)),
            None => match word.get(..2) {
                Some(short) if short.starts_with('-') => (short, word.len() > 2),
                _ => break,
            },
        };
        let Some(&(_, takes_value)) = leading.iter().find(|(n, _)| n == name) else { break };
        if inline && !takes_value {
            break;
        }
        let take = if takes_value && !inline { 2 } else { 1 };
        if i + take > args.len() {
            break;
        }
        moved.extend_from_slice(&args[i..i + take]);
        i += take;
    }
    if moved.is_empty() {
        return args;
    }
    // The command path: each word a subcommand of the one before.
    let mut end = i;
    let mut level = cmd;
    while let Some(sub) = args.get(end).and_then(|a| a.to_str()).and_then(|w| level.find_subcommand(w)) {
        level = sub;
        end += 1;
    }
    if end == i {
        return args;
    }
    let mut out = args[..1].to_vec();
    out.extend_from_slice(&args[i..end]);
    out.extend(moved);
    out.extend_from_slice(&args[end..]);
    out
}

/// `k3d-gpu --version --json` (or `-V --json`, either order) → `k3d-gpu version --json`: clap's
/// own `--version` prints one line (`k3d-gpu 0.1.0`, which packages test) and takes nothing
/// beside it. Any other line is left as it is.
pub fn version_flag_as_command(args: Vec<OsString>) -> Vec<OsString> {
    let words: Vec<Option<&str>> = args.iter().skip(1).map(|a| a.to_str()).collect();
    let is_version = |w: &Option<&str>| matches!(w, Some("--version" | "-V"));
    match words.as_slice() {
        [a, b] if (is_version(a) && *b == Some("--json")) || (*a == Some("--json") && is_version(b)) => {
            let mut out = args[..1].to_vec();
            out.extend(["version".into(), "--json".into()]);
            out
        }
        _ => args,
    }
}

/// The command line parsed: the options may come before the command, and `--version` reads
/// as the `version` command. `Err` is the exit code after clap has printed its help, version
/// or usage error.
pub fn parse(args: Vec<OsString>) -> Result<Cli, u8> {
    if let Some(cli) = parse_one_command(&args) {
        return Ok(cli);
    }
    let cmd = Cli::command();
    let args = options_after_command(version_flag_as_command(args), &cmd);
    let parsed = cmd.try_get_matches_from(args).and_then(|m| Cli::from_arg_matches(&m));
    parsed.map_err(|e| {
        let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
        let _ = e.print();
        code
    })
}

/// The common line, `k3d-gpu COMMAND ...`, parsed against a tree holding only COMMAND: building
/// every command's definition was about 40% of a `validate`'s instructions, and a run reads
/// one. Anything it does not accept (help, a usage error, a word that is no command) is `None`,
/// and [`parse`] parses the line again against the whole tree, which prints what it always did.
fn parse_one_command(args: &[OsString]) -> Option<Cli> {
    let tree = one_command_tree(args.get(1)?.to_str()?)?;
    tree.try_get_matches_from(args).ok().and_then(|m| Cli::from_arg_matches(&m).ok())
}

/// The tree [`Cli::from_arg_matches`] reads, holding only the command `name`: what parses a
/// line of that command as the whole tree does. No help text of the top level: a line that
/// needs it goes to the whole tree.
pub(crate) fn one_command_tree(name: &str) -> Option<clap::Command> {
    Some(
        clap::Command::new("k3d-gpu")
            .version(env!("CARGO_PKG_VERSION"))
            .subcommand_required(true)
            .arg_required_else_help(true)
            .subcommand(one_command(name)?),
    )
}

/// One command's definition as the derived tree builds it, less the enum's about text (only
/// help shows that, and help goes to the whole tree). `tests::each_command_alone_is_the_one_in_the_tree`
/// keeps this list and the enum the same.
fn one_command(name: &str) -> Option<clap::Command> {
    type Augment = fn(clap::Command) -> clap::Command;
    let (name, augment): (&'static str, Augment) = match name {
        "detect" => ("detect", DetectArgs::augment_args),
        "doctor" => ("doctor", DoctorCmd::augment_args),
        "host-setup" => ("host-setup", HostSetupCmd::augment_args),
        "facts" => ("facts", FactsArgs::augment_args),
        "init" => ("init", InitCmd::augment_args),
        "validate" => ("validate", ValidateCmd::augment_args),
        "graph" => ("graph", DataOpts::augment_args),
        "render" => ("render", RenderCmd::augment_args),
        "schema" => ("schema", SchemaArgs::augment_args),
        "observe" => ("observe", DataOpts::augment_args),
        "apply" => ("apply", ApplyCmd::augment_args),
        "show" => ("show", ShowArgs::augment_args),
        "destroy" => ("destroy", DestroyCmd::augment_args),
        "agent" => ("agent", AgentArgs::augment_args),
        "plan" => ("plan", PlanCmd::augment_args),
        "images" => ("images", ImagesArgs::augment_args),
        "audit" => ("audit", AuditCmd::augment_args),
        "logs" => ("logs", LogsCmd::augment_args),
        "report" => ("report", ReportCmd::augment_args),
        "completions" => ("completions", CompletionsArgs::augment_args),
        "man" => ("man", ManArgs::augment_args),
        "version" => ("version", VersionArgs::augment_args),
        "test" => ("test", TestCmd::augment_args),
        "mcp" => ("mcp", McpCmd::augment_args),
        _ => return None,
    };
    Some(augment(clap::Command::new(name)))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use clap::{CommandFactory, Parser};

    use super::{BadValue, Cli, model_gb, model_size, plan_hash};

    #[test]
    fn a_refused_value_says_what_was_expected_by_its_variant() {
        assert_eq!(plan_hash(&format!("sha256:{}", "A".repeat(64))), Err(BadValue::PlanHash));
        assert_eq!(model_size("0"), Err(BadValue::ModelSize));
        assert_eq!(model_gb("-1"), Err(BadValue::ModelGb));
        assert_eq!(model_gb("4.5"), Ok(4.5));
    }

    /// The fast path's definitions are the tree's: for each command, everything but the about
    /// text (and the display order, which only the parent's help uses).
    #[test]
    fn each_command_alone_is_the_one_in_the_tree() {
        let tree = Cli::command();
        for sub in tree.get_subcommands() {
            let name = sub.get_name();
            let alone = super::one_command(name).unwrap_or_else(|| panic!("{name} is not in one_command"));
            let want = sub.clone().about(None).long_about(None).display_order(0);
            let alone = alone.about(None).long_about(None).display_order(0);
            assert_eq!(format!("{alone:?}"), format!("{want:?}"), "{name}");
        }
        assert_eq!(super::one_command("help").map(|c| c.get_name().to_string()), None);
    }

    /// A line the fast path takes parses as the whole tree parses it; one it refuses (help, a
    /// usage error) is left to the whole tree.
    #[test]
    fn the_fast_path_parses_as_the_whole_tree() {
        for line in [
            "k3d-gpu validate -c lab.toml --root R --root S",
            "k3d-gpu plan --observed o.json --json -c k.toml",
            "k3d-gpu facts capture --out o",
            "k3d-gpu images check --facts F.json",
            "k3d-gpu agent status",
            "k3d-gpu mcp -c x.toml",
            "k3d-gpu version --json",
        ] {
            let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
            let fast = super::parse_one_command(&args).unwrap_or_else(|| panic!("{line}: not taken"));
            let whole = Cli::try_parse_from(&args).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{whole:?}"), "{line}");
        }
        for line in
            ["k3d-gpu validate --help", "k3d-gpu plan --nope", "k3d-gpu help plan", "k3d-gpu --version", "k3d-gpu"]
        {
            let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
            assert!(super::parse_one_command(&args).is_none(), "{line}");
        }
    }

    /// `--help` is the reference, so every flag of every command must say what it does.
    #[test]
    fn every_flag_of_every_command_has_help() {
        fn check(cmd: &clap::Command, path: &str) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                assert!(arg.get_help().is_some(), "{path} --{id} has no help text");
            }
            for sub in cmd.get_subcommands() {
                assert!(sub.get_about().is_some(), "{path} {} has no description", sub.get_name());
                check(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        check(&cmd, "k3d-gpu");
    }

    /// Every command path that runs something: ["detect"], ["facts", "capture"], …
    fn leaves(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            leaves(sub, p, out);
        }
    }

    /// What a command's definition offers reaches its code: for every command, each shared
    /// option it defines, given on the command line, arrives in the `Global` it runs with.
    /// (There is no table of which command reads which option: the definition is the table.)
    #[test]
    fn every_shared_option_a_command_defines_reaches_its_global() {
        let mut paths = Vec::new();
        leaves(&Cli::command(), Vec::new(), &mut paths);
        for path in paths.into_iter().filter(|p| !p.is_empty()) {
            let mut cmd = Cli::command();
            let mut level = &mut cmd;
            for word in &path {
                level = level.find_subcommand_mut(word).unwrap();
            }
            let defined: Vec<String> = level.get_arguments().map(|a| a.get_id().to_string()).collect();
            // A subcommand's parent with its own subcommands (images, facts) runs itself too.
            let mut args: Vec<String> = vec!["k3d-gpu".into()];
            args.extend(path.iter().cloned());
            let has = |id: &str| defined.iter().any(|d| d == id);
            for (id, value) in [("config", "C.toml"), ("root", "R"), ("stdlib", "S"), ("vendors", "intel")] {
                if has(id) {
                    args.extend([format!("--{id}"), value.into()]);
                }
            }
            // --facts conflicts with --root where one host is read: checked on its own below.
            if has("json") {
                args.push("--json".into());
            }
            // Required arguments of the commands that have them.
            let required = |args: &mut Vec<String>| match path.join(" ").as_str() {
                "render" | "facts capture" => args.extend(["--out".into(), "o".into()]),
                "completions" => args.push("bash".into()),
                "show" => args.push("plan.json".into()),
                _ => {}
            };
            required(&mut args);
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let global = cli.command.global();
            let what = path.join(" ");
            assert_eq!(global.config.is_some(), has("config"), "{what}: --config");
            assert_eq!(!global.root.is_empty(), has("root"), "{what}: --root");
            assert_eq!(global.stdlib.is_some(), has("stdlib"), "{what}: --stdlib");
            assert_eq!(global.vendors.is_some(), has("vendors"), "{what}: --vendors");
            assert_eq!(global.json, has("json"), "{what}: --json");
            if has("facts") {
                let mut args: Vec<String> = vec!["k3d-gpu".into()];
                args.extend(path.iter().cloned());
                args.extend(["--facts".into(), "F.json".into()]);
                required(&mut args);
                let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert_eq!(cli.command.global().facts.len(), 1, "{what}: --facts");
            }
        }
    }

    /// The leading options' spellings come from the command tree: the set the help promises
    /// (`-c, --root, --facts, --stdlib, --vendors and --json may also come before the
    /// command`), each found, with whether it takes a value as its definition says.
    #[test]
    fn the_leading_options_are_spelled_as_the_commands_define_them() {
        let mut got = super::leading_spellings(&Cli::command());
        got.sort();
        let want = [
            ("--config", true),
            ("--facts", true),
            ("--json", false),
            ("--root", true),
            ("--stdlib", true),
            ("--vendors", true),
            ("-c", true),
        ];
        assert_eq!(got, want.map(|(n, v)| (n.to_string(), v)));
        let about = Cli::command().get_long_about().map(ToString::to_string).unwrap_or_default();
        for (name, _) in got.iter().filter(|(n, _)| n != "--config") {
            assert!(about.contains(&format!("{name},")) || about.contains(&format!("{name} ")), "{name}: {about}");
        }
    }

    fn moved(line: &str) -> String {
        let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
        let out = super::options_after_command(args, &Cli::command());
        out.iter().map(|a| a.to_str().unwrap()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn options_before_the_command_move_behind_its_path() {
        assert_eq!(moved("k3d-gpu -c lab.toml plan --offline"), "k3d-gpu plan -c lab.toml --offline");
        assert_eq!(
            moved("k3d-gpu --json --root=R -cX images check --facts F"),
            "k3d-gpu images check --json --root=R -cX --facts F"
        );
        assert_eq!(moved("k3d-gpu --root plan detect"), "k3d-gpu detect --root plan");
        // Nothing to move, or no command after them: as it was, for clap to report.
        assert_eq!(moved("k3d-gpu plan --json"), "k3d-gpu plan --json");
        assert_eq!(moved("k3d-gpu --root R"), "k3d-gpu --root R");
        assert_eq!(moved("k3d-gpu --root R --help"), "k3d-gpu --root R --help");
        assert_eq!(moved("k3d-gpu --json=1 plan"), "k3d-gpu --json=1 plan");
    }

    #[test]
    fn version_flag_with_json_is_the_version_command() {
        let rewritten = |line: &str| {
            let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
            let out = super::version_flag_as_command(args);
            out.iter().map(|a| a.to_str().unwrap()).collect::<Vec<_>>().join(" ")
        };
        assert_eq!(rewritten("k3d-gpu --version --json"), "k3d-gpu version --json");
        assert_eq!(rewritten("k3d-gpu --json -V"), "k3d-gpu version --json");
        // Anything else is clap's: `--version` alone prints its one line.
        assert_eq!(rewritten("k3d-gpu --version"), "k3d-gpu --version");
        assert_eq!(rewritten("k3d-gpu --json --json"), "k3d-gpu --json --json");
        assert_eq!(rewritten("k3d-gpu plan --json"), "k3d-gpu plan --json");
    }

    /// The refusal the old hand-kept table gave is clap's own now: the option is not in the
    /// command's definition.
    #[test]
    fn an_option_a_command_does_not_read_is_a_usage_error() {
        for line in ["k3d-gpu schema --root R", "k3d-gpu render --out o --json", "k3d-gpu completions bash -c x"] {
            let err = Cli::try_parse_from(line.split(' ')).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument, "{line}");
        }
        let mut cmd = Cli::command();
        let schema = cmd.find_subcommand_mut("schema").unwrap().render_long_help().to_string();
        assert!(!schema.contains("--root"), "{schema}");
    }

    #[test]
    fn a_k3d_gpu_command_carries_the_options_given() {
        let global = super::Global {
            config: Some("lab dir/k3dgpu.toml".into()),
            root: vec!["~root".into(), "hosts/a".into()],
            facts: vec!["$(touch pwned).json".into()],
            stdlib: Some("cat".into()),
            json: true,
            vendors: Some("intel,npu".into()),
        };
        let c = global.k3d_gpu().lit("apply").opt("--plan-hash", "sha256:ab").to_string();
        assert_eq!(
            c,
            "k3d-gpu -c 'lab dir/k3dgpu.toml' --root '~root' --root hosts/a --facts '$(touch pwned).json' \
--stdlib cat --vendors intel,npu apply --plan-hash sha256:ab"
        );
        let dir = tempfile::tempdir().unwrap();
        let words = crate::shell::tests::sh_words(c.strip_prefix("k3d-gpu ").unwrap(), dir.path());
        assert_eq!(words[1], "lab dir/k3dgpu.toml");
        assert_eq!(words[3], "~root");
        assert_eq!(words.len(), 15);
        assert!(!dir.path().join("pwned").exists());
    }
}
