//! Command-line definition (clap) and the top-level run: every flag is defined and documented
//! here once, so `--help` is the reference. Commands live in `commands/`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands;
use crate::error::{EXIT_USAGE, Error};
use crate::facts::VendorFilter;

#[derive(Debug, Parser)]
#[command(
    name = "k3d-gpu",
    version,
    about = "GPU-ready local Kubernetes (k3d) from a declarative k3dgpu.toml",
    long_about = "k3d-gpu reads the host's accelerators from sysfs, compiles them and k3dgpu.toml into a \
resource graph, and plans and applies the k3d cluster and its device plugins.\n\n\
Exit codes: 0 success; 1 a check failed; 2 bad usage or unreadable input."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// The config file. Without it, ./k3dgpu.toml if present, else the defaults (an empty
    /// config).
    #[arg(short = 'c', long, global = true, value_name = "FILE", env = "K3D_GPU_CONFIG")]
    pub config: Option<PathBuf>,

    /// Read the host from this directory instead of `/` (a fixture host: DIR/sys, DIR/proc,
    /// DIR/dev, ...; see docs/fixture-hosts.md). Links never lead outside it. `validate` takes
    /// it more than once, and together with --facts; other commands take one host.
    #[arg(long, global = true, value_name = "DIR", env = "K3D_GPU_ROOT")]
    pub root: Vec<PathBuf>,

    /// Use a saved facts/v1 document instead of reading a host. `validate` takes it more than
    /// once.
    #[arg(long, global = true, value_name = "FILE")]
    pub facts: Vec<PathBuf>,

    /// Use this component catalog instead of the one built in: DIR/stdlib/*.kdl with
    /// DIR/share/*.yml (see docs/stdlib.md).
    #[arg(long, global = true, value_name = "DIR", env = "K3D_GPU_STDLIB")]
    pub stdlib: Option<PathBuf>,

    /// Print data as JSON on stdout instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// Which vendors may be active: `auto` (all the host has) or a comma list of nvidia,
    /// intel, npu, gaudi, dsa, iaa, qat, amx, hybrid, numa, wsl. An unknown name is an error.
    /// [default: auto]
    #[arg(long, global = true, value_name = "LIST", env = "K3D_GPU_VENDORS")]
    pub vendors: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the accelerators found, the Kubernetes resources they become, and why any vendor
    /// is inactive.
    Detect,

    /// Preflight: findings about the host (kernel, firmware, drivers, device access) and, on
    /// the real host, docker, k3d and kubectl — each with the file it read and a fix. Advice
    /// only: it never writes to the host. Exits 1 when a finding is `fail`.
    Doctor(DoctorArgs),

    /// Print the facts/v1 document: deterministic bytes, no clock, no machine paths.
    Facts(FactsArgs),

    /// Check the config against one or more hosts (--root/--facts, each may repeat): a table
    /// per host, every error with the config line it is about. No Docker, no cluster. Exits 1
    /// if any host fails.
    Validate,

    /// Print the resource graph the config compiles to for this host: DOT, or JSON with --json.
    Graph,

    /// Write the Kubernetes manifests the config produces, one file per component plus a
    /// kustomization.yaml, ready for Flux or Argo CD.
    Render(RenderArgs),

    /// Print the JSON Schema of k3dgpu.toml (for taplo / Even Better TOML).
    Schema(SchemaArgs),

    /// What exists now: the cluster's node containers (Docker) and its nodes and managed
    /// objects (the Kubernetes API, context k3d-<name>); --json prints observed/v1.
    Observe,

    /// Run a plan: only if it still hashes the same (PLANFILE or --plan-hash), in dependency
    /// order, then verify. A plan that recreates the cluster needs --allow-replace (or a typed
    /// confirmation on a terminal). Exits 1 when refused or when an action or check fails.
    Apply(ApplyArgs),

    /// Delete the cluster this config manages (and with it everything in it), through the same
    /// gate: prints the plan and its hash; runs only with --plan-hash of that plan. Reads only
    /// the config and Docker, so it works when the host no longer fits the config; refuses a
    /// cluster whose nodes k3d-gpu did not create.
    Destroy(DestroyArgs),

    /// Where the agent (the LLM server) would run on this host, and why: backend, device,
    /// resource, placement. Without an [agent] table it explains the defaults.
    Agent,

    /// Compare the config's graph with what exists and print the plan: each action with its
    /// reason and a diff, a summary, and the plan hash that `apply` checks.
    Plan(PlanArgs),

    /// The images this config deploys on this host and how each is pinned: by the catalog,
    /// by images.lock beside the config, by the tool's own lock, or not at all (deployed by
    /// tag). `images lock` and `images check` maintain the lock.
    Images(ImagesArgs),

    /// Safety rules for the running cluster: ports published off loopback (other than the API
    /// server), images no lock pins by digest, images pulled at runtime, a kubeconfig readable
    /// by group or others, Open WebUI with auth off. Each finding has a fix. Exits 1 on a finding.
    Audit(AuditArgs),

    /// The k3s server node's log (through Docker), or with COMPONENT the logs of that catalog
    /// component's pods (through the Kubernetes API), pods that are not ready first.
    Logs(LogsArgs),

    /// What this host and its cluster have, engine by engine: findings with fixes, the plan
    /// (actions, reasons, hash), the resource graph and the cluster's state. Text on stdout
    /// (JSON k3d-gpu.report/v1 with --json); with DIR, report.txt, report.json and a
    /// self-contained report.html (no script, nothing loaded, the graph as SVG) written there.
    Report(ReportArgs),

    /// Print the shell completion script for SHELL (bash, zsh, fish), generated from these
    /// definitions; packages install it.
    Completions(CompletionsArgs),

    /// Print the man page k3d-gpu(1); with --out, write it and one page per subcommand.
    Man(ManArgs),

    /// Serve the Model Context Protocol on stdio, for an AI agent (docs/mcp.md): read-only tools
    /// (facts, validate, plan, observe, agent, audit) and apply, which runs only a plan hash the
    /// person confirmed in the client. -c, --root, --facts, --stdlib and --vendors given here are
    /// every tool's defaults. Runs until the client closes stdin.
    Mcp(McpArgs),
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
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub shell: crate::commands::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write k3d-gpu.1 and k3d-gpu-<command>.1 for every subcommand into DIR (created if
    /// missing) instead of printing k3d-gpu.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub command: Option<ImagesCommand>,
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Resolve every image the config deploys to its digest through the Docker engine (its
    /// mirrors, proxy and registry settings apply) and write images.lock beside the config:
    /// sorted, no timestamps, all or nothing. A digest the catalog pins still wins.
    Lock,

    /// No network: exit 1 when images.lock misses an image the config deploys, holds one it no
    /// longer deploys, or names another digest than the catalog pins. For CI.
    Check,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plan saved with `plan --out`; it runs only if a fresh plan has the same bytes.
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
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Print the config reference as Markdown (docs/config.md) instead of the JSON Schema.
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Skip the docker/k3d/kubectl checks on the real host (they run commands with a timeout).
    #[arg(long)]
    pub no_tools: bool,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct FactsArgs {
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
    Capture {
        /// The directory to create (must not exist or be empty).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// A plan hash as `plan --hash` prints it: `sha256:` and 64 lowercase hex digits. Anything
/// else is a typo or a truncated copy (bad usage, exit 2), not a plan that changed.
pub(crate) fn plan_hash(text: &str) -> Result<String, String> {
    let hex = text.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(text.to_string())
    } else {
        Err("expected `sha256:` and 64 lowercase hex digits, as `k3d-gpu plan --hash` prints".into())
    }
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
}

/// The global options each command accepts; the others mean nothing to it. Harmless, and so
/// accepted: `--json` on `facts` and `schema` (they print JSON anyway), and the host options
/// on `observe` and `destroy`, which read no host, so that one set of flags works for
/// `plan`, `apply`, `observe` and `destroy` alike. Every command is named: a new one that
/// is not listed here fails `every_command_says_which_globals_it_reads`.
fn globals_used(command: &str) -> Option<&'static [&'static str]> {
    const HOST: &[&str] = &["root", "facts", "json", "vendors"];
    const CONFIG_AND_HOST: &[&str] = &["config", "root", "facts", "stdlib", "json", "vendors"];
    // Read a config and the catalog (which components are ours, which images are pinned),
    // never a host.
    const CONFIG: &[&str] = &["config", "stdlib", "json"];
    Some(match command {
        "detect" | "facts" => HOST,
        // The host's rules, then the engine and the cluster the config names.
        "doctor" => CONFIG_AND_HOST,
        "capture" => &["root", "vendors"],
        "render" => &["config", "root", "facts", "stdlib", "vendors"],
        "schema" => &["json"],
        "mcp" => &["config", "root", "facts", "stdlib", "vendors"],
        "images" | "lock" | "check" => CONFIG_AND_HOST,
        "audit" => CONFIG,
        "logs" => &["config", "stdlib"],
        "completions" | "man" => &[],
        "validate" | "graph" | "observe" | "apply" | "destroy" | "agent" | "plan" | "report" => CONFIG_AND_HOST,
        _ => return None,
    })
}

/// Refuses a global option given on the command line to a command that ignores it
/// (`schema --root DIR`, `render --json`): silently ignoring it would let a typo'd
/// invocation look like it did what was asked. Values from the environment (K3D_GPU_ROOT,
/// ...) are meant for every command and are not checked.
fn unused_globals(matches: &ArgMatches) -> Result<(), Error> {
    let mut names = Vec::new();
    let mut level = matches;
    while let Some((name, sub)) = level.subcommand() {
        names.push(name);
        level = sub;
    }
    let Some(&command) = names.last() else { return Ok(()) };
    // Unlisted (a test keeps that from happening): nothing is refused.
    let used = globals_used(command).unwrap_or(&["config", "root", "facts", "stdlib", "json", "vendors"]);
    let given = |id: &str| {
        level.try_contains_id(id).unwrap_or(false) && level.value_source(id) == Some(ValueSource::CommandLine)
    };
    let ignored: Vec<String> = ["config", "root", "facts", "stdlib", "json", "vendors"]
        .into_iter()
        .filter(|id| !used.contains(id) && given(id))
        .map(|id| format!("--{id}"))
        .collect();
    if ignored.is_empty() {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!("`{}` does not use {}", names.join(" "), ignored.join(", ")),
        help: Some(match used {
            [] => format!("drop {}", ignored.join(", ")),
            _ => format!(
                "drop {}; of the global options it reads only {}",
                ignored.join(", "),
                used.iter().map(|id| format!("--{id}")).collect::<Vec<_>>().join(", ")
            ),
        }),
    })
}

/// Parses arguments, runs the command, renders an error once, and returns the exit code.
pub fn main() -> ExitCode {
    // No wrapping: a wrapped help line breaks the hash or command a user copies from it, and
    // a terminal wraps long lines by itself without inserting newlines.
    let _ = miette::set_hook(Box::new(|_| Box::new(miette::MietteHandlerOpts::new().wrap_lines(false).build())));
    let parsed = Cli::command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((cli, matches)) => {
            if let Err(error) = unused_globals(&matches) {
                eprintln!("{:?}", miette::Report::new(error));
                return ExitCode::from(EXIT_USAGE);
            }
            cli
        }
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let code = error.exit_code();
            match error {
                Error::CheckFailed(_) => {}
                // Diagnostics quote names and lines from untrusted files: escaped on the way out.
                Error::Invalid(reports) => {
                    for report in reports {
                        eprintln!("{}", crate::escape::rendered_diagnostic(&format!("{report:?}")));
                    }
                }
                other => {
                    eprintln!("{}", crate::escape::rendered_diagnostic(&format!("{:?}", miette::Report::new(other))))
                }
            }
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

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

    /// A command that is not listed would accept every global option without a word.
    #[test]
    fn every_command_says_which_globals_it_reads() {
        fn check(cmd: &clap::Command) {
            for sub in cmd.get_subcommands() {
                assert!(super::globals_used(sub.get_name()).is_some(), "{} is not in globals_used", sub.get_name());
                check(sub);
            }
        }
        check(&Cli::command());
        assert_eq!(super::globals_used("man"), Some(&[][..]), "man reads no global option");
    }
}
