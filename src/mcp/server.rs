//! The protocol side (rmcp): which tools there are, with their input and output schemas;
//! dispatch; a deadline per call; the client's cancellation; and every failure of a command
//! as a tool result marked `isError` whose text says what went wrong and how to fix it (the
//! miette help), so the agent and the person read the fix. Malformed calls (an unknown tool,
//! arguments that do not fit the schema) are JSON-RPC errors.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::common::schema_for_output;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult, MetaObject,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use schemars::JsonSchema;
use serde::Serialize;

use super::arguments::{self, Refusal, ToolArgs};
use super::confirm;
use super::tools::{self, Defaults};
use crate::cli::{Command, Global, McpArgs};
use crate::commands::apply::Signals;

/// The key under which a plan's hash is in a result's `_meta`.
pub const PLAN_HASH_META: &str = "k3d-gpu.io/planHash";

#[derive(Clone)]
pub struct Server {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub defaults: Defaults,
    /// The deadline of a read-only call.
    pub timeout: Duration,
    pub confirmations: confirm::Store,
    pub applies: Applies,
}

/// The applies running now. A signal to the server stops each (no new action starts, the
/// running ones finish, the lock is released) and the server exits once none runs.
#[derive(Default)]
pub(super) struct Applies {
    running: Mutex<BTreeMap<u64, Signals>>,
    next: AtomicU64,
}

/// One running apply; dropping it (however the call ends) takes it off the list.
pub(super) struct Running<'a> {
    applies: &'a Applies,
    id: u64,
}

impl Applies {
    pub fn start(&self, stop: Signals) -> Running<'_> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        self.lock().insert(id, stop);
        Running { applies: self, id }
    }

    /// Stops every running apply; returns how many still run.
    pub fn stop_all(&self) -> usize {
        let running = self.lock();
        running.values().for_each(Signals::stop);
        running.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Signals>> {
        // A panic while holding it cannot leave the map half-changed: every change is one call.
        self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.applies.lock().remove(&self.id);
    }
}

impl Server {
    pub fn new(global: &Global, args: &McpArgs) -> Server {
        Server {
            inner: Arc::new(Inner {
                defaults: Defaults::of(global),
                timeout: Duration::from_secs(args.timeout.max(1)),
                confirmations: confirm::Store::new(Duration::from_secs(args.confirm_ttl.max(1))),
                applies: Applies::default(),
            }),
        }
    }
}

fn tool<O: JsonSchema + 'static>(
    name: &'static str,
    args: &ToolArgs,
    title: &str,
    description: &'static str,
    read_only: bool,
) -> Tool {
    let annotations = ToolAnnotations::with_title(title).read_only(read_only).destructive(!read_only);
    Tool::new(name, description, arguments::input_schema(args))
        .with_title(title)
        .with_raw_output_schema(schema_for_output::<O>())
        .with_annotations(annotations)
}

/// Every tool, in the order a person would use them.
pub fn tools() -> Vec<Tool> {
    vec![
        tool::<tools::FactsOut>(
            "facts",
            &arguments::FACTS,
            "Host accelerators",
            "The host's accelerators: active vendors with the Kubernetes resources they become and how many \
devices, inactive vendors and why, and the whole facts/v1 document (`k3d-gpu facts`). Read-only.",
            true,
        ),
        tool::<tools::ValidateOut>(
            "validate",
            &arguments::VALIDATE,
            "Check the config",
            "Compile k3dgpu.toml for one or more hosts (fixture roots or saved facts; this machine when none is \
given): per host, ok or the errors with their fixes, and warnings (`k3d-gpu validate`). No Docker, no cluster.",
            true,
        ),
        tool::<tools::PlanOut>(
            "plan",
            &arguments::PLAN,
            "Plan the cluster",
            "What `apply` would do to make the cluster match the config: each action with its reason and diff. The \
first text item is the exact plan/v1 bytes `k3d-gpu plan --json` prints, the second the plan hash (sha256 of those \
bytes), also in _meta[\"k3d-gpu.io/planHash\"]. Compares against the live cluster unless offline or observed is \
given; only a live plan's hash can be applied. Read-only.",
            true,
        ),
        tool::<tools::ObserveOut>(
            "observe",
            &arguments::OBSERVE,
            "Observe the cluster",
            "The cluster the config names as it is now: its node containers (Docker) and its nodes and managed \
objects (Kubernetes), secrets masked (`k3d-gpu observe --json`). Read-only.",
            true,
        ),
        tool::<tools::AgentOut>(
            "agent",
            &arguments::AGENT,
            "Agent placement and endpoint",
            "Where the agent (the LLM server) runs on this host and why: backend, device, resource, node \
placement, add-ons; and its OpenAI-compatible endpoint: the in-cluster URL, a port-forward command and the local \
URL (`k3d-gpu agent`). Read-only.",
            true,
        ),
        tool::<crate::commands::agent_status::Status>(
            "agent_status",
            &super::questions::AGENT_STATUS,
            "Is the agent answering",
            "The running LLM server, asked now through the cluster's API server: its endpoint, the models it \
lists, the device it runs on against the one planned, the model it starts against the plan's, and a fresh reply \
to one short chat completion with the time it took; `problems` says what is missing when it does not answer \
(`k3d-gpu agent status`). Read-only.",
            true,
        ),
        tool::<super::questions::PlacementOut>(
            "recommend_placement",
            &super::questions::RECOMMEND_PLACEMENT,
            "Where would a model run",
            "Where a model of model_size GiB (its weights) would run, and why: each device of the host (or of each \
node of an existing cluster, the agent's first) with the memory the model may use, whether the weights and a fifth \
more fit, and the first that holds them in the placement's own order, with the [agent] settings that pick it \
(`k3d-gpu agent --model-size`). No cluster needed. Read-only.",
            true,
        ),
        tool::<crate::commands::cluster_health::Health>(
            "cluster_health",
            &super::questions::CLUSTER_HEALTH,
            "Cluster health",
            "The cluster's nodes as its API server reports them: Ready or why not, their taints, the \
accelerator resources each advertises; and `k3d-gpu test`'s counts against the hosts' facts (a node advertising \
fewer devices than its facts hold, a device no node advertises), each with its fix. Runs no pods: `k3d-gpu test` \
does. Read-only.",
            true,
        ),
        tool::<tools::AuditOut>(
            "audit",
            &arguments::AUDIT,
            "Audit the cluster",
            "Safety rules for the running cluster (or a saved audit observation): ports published off loopback, \
images not pinned by digest, runtime pulls of images no lock or digest pins, a kubeconfig others can read; each finding with its fix \
(`k3d-gpu audit`). Read-only.",
            true,
        ),
        tool::<super::apply::ApplyOut>(
            "apply",
            &arguments::APPLY,
            "Apply a confirmed plan",
            "The only tool that writes. Runs the plan only if the inputs still plan to plan_hash (from the plan \
tool) and the person confirms that hash in the client (a form). Without a client that can ask the person, or \
when the person declines, it refuses and names the `k3d-gpu apply --plan-hash …` command to run in a terminal. \
The CLI's gate, lock and verify apply.",
            false,
        ),
    ]
}

/// A call's arguments, parsed as the CLI parses the same options (`arguments.rs`). Arguments
/// that do not fit the schema are a JSON-RPC "invalid params" error; ones the CLI refuses (a
/// conflict, a malformed hash) are a usage failure the agent reads and corrects (`Err`).
pub(super) fn call_arguments(
    tool: &ToolArgs,
    request: &CallToolRequestParams,
) -> Result<Result<Command, CallToolResult>, ErrorData> {
    match arguments::parse(tool, request.arguments.as_ref()) {
        Ok(command) => Ok(Ok(command)),
        Err(Refusal::Malformed(why)) => Err(ErrorData::invalid_params(
            crate::escape::capped(format!("arguments of {}: {why}", crate::escape::one_line(&request.name))),
            None,
        )),
        Err(Refusal::Usage(why)) => Ok(Err(failed(&crate::error::Error::Usage {
            message: format!("arguments of {}: {why}", crate::escape::one_line(&request.name)),
            help: Some("the arguments are the CLI's options of the same name: see the tool's input schema".into()),
        }))),
    }
}

/// The call's options with the server's defaults for those it leaves out.
fn with_defaults(defaults: &Defaults, command: &Command) -> Global {
    defaults.global(tools::Given::from(&command.global()))
}

/// A successful result: the structured content, and as text the same JSON (for clients that
/// read only text).
pub(super) fn structured<O: Serialize>(out: &O) -> CallToolResult {
    CallToolResult::structured(serde_json::to_value(out).unwrap_or_default())
}

/// A command's failure as a tool result the agent and the person can act on: the message,
/// the fix, and the CLI's exit code.
pub(super) fn failed(error: &crate::error::Error) -> CallToolResult {
    let (message, help) = tools::error_text(error);
    refused_result(&message, help.as_deref(), None, error.exit_code())
}

/// An `isError` result: text for people, the same as structured content.
pub(super) fn refused_result(
    message: &str,
    help: Option<&str>,
    command: Option<&str>,
    exit_code: u8,
) -> CallToolResult {
    // Messages quote paths and names from the call and the cluster: escaped here, in the text
    // and in the structured copy alike.
    let message = crate::escape::assembled(message).into_owned();
    let help = help.map(|h| crate::escape::assembled(h).into_owned());
    let mut text = message.clone();
    if let Some(help) = &help {
        text.push_str(&format!("\nhelp: {help}"));
    }
    if let Some(command) = command {
        text.push_str(&format!("\nTo apply it yourself, review the plan and run in a terminal:\n  {command}"));
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(serde_json::json!({
        "error": message, "help": help, "command": command, "exit_code": exit_code,
    }));
    result
}

impl Server {
    /// Runs blocking work (detection, compile, the engines' clients) off the event loop,
    /// within the call's deadline (`None`: only the work's own deadlines), and gives up
    /// waiting when the client cancels. Work already started runs to its end unseen: every
    /// read it does has a deadline of its own, and nothing read-only leaves anything behind.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        context: &RequestContext<RoleServer>,
        deadline: Option<Duration>,
        work: impl FnOnce() -> crate::error::Result<T> + Send + 'static,
    ) -> Result<crate::error::Result<T>, ErrorData> {
        let task = tokio::task::spawn_blocking(move || {
            let done = work();
            crate::allocator::release_freed_memory();
            done
        });
        let limit = deadline.unwrap_or(Duration::MAX);
        let joined = tokio::select! {
            _ = context.ct.cancelled() => return Err(ErrorData::invalid_request("cancelled by the client", None)),
            joined = tokio::time::timeout(limit, task) => joined,
        };
        match joined {
            Err(_) => Ok(Err(crate::error::Error::Usage {
                message: format!("no answer within {}s", limit.as_secs()),
                help: Some(
                    "Docker or the Kubernetes API may be slow or unreachable (`k3d-gpu doctor`); \
or start the server with a longer --timeout"
                        .into(),
                ),
            })),
            Ok(Err(join)) => Err(ErrorData::internal_error(
                crate::escape::capped(
                    crate::escape::one_line(&format!("the tool stopped unexpectedly: {join}")).into_owned(),
                ),
                None,
            )),
            Ok(Ok(result)) => Ok(result),
        }
    }

    /// A read-only tool: `work` under the server's deadline, its value made a result by `out`.
    async fn read_only<T: Send + 'static>(
        &self,
        context: &RequestContext<RoleServer>,
        work: impl FnOnce() -> crate::error::Result<T> + Send + 'static,
        out: impl FnOnce(T) -> CallToolResult,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(match self.blocking(context, Some(self.inner.timeout), work).await? {
            Ok(value) => out(value).into(),
            Err(e) => failed(&e).into(),
        })
    }
}

fn plain<O: Serialize>(out: O) -> CallToolResult {
    structured(&out)
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("k3d-gpu", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "k3d-gpu plans a k3d cluster for this host's accelerators. Every tool reads, except apply. \
To change the cluster: call plan, show the person its text, then call apply with its hash; the person confirms \
in the client (or runs the printed command in a terminal).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let defaults = self.inner.defaults.clone();
        macro_rules! parsed {
            ($tool:expr) => {
                match call_arguments(&$tool, &request)? {
                    Ok(command) => command,
                    Err(refused) => return Ok(refused.into()),
                }
            };
        }
        match request.name.as_ref() {
            "facts" => {
                let command = parsed!(arguments::FACTS);
                let global = with_defaults(&defaults, &command);
                self.read_only(&context, move || tools::facts(&global), plain).await
            }
            "validate" => {
                let command = parsed!(arguments::VALIDATE);
                let global = with_defaults(&defaults, &command);
                self.read_only(&context, move || tools::validate(&global), plain).await
            }
            "plan" => {
                let command = parsed!(arguments::PLAN);
                let global = with_defaults(&defaults, &command);
                let Command::Plan(plan) = command else { unreachable!("the plan tool parses `plan`") };
                let (offline, observed) = (plan.args.offline, plan.args.observed);
                self.read_only(&context, move || tools::plan(&global, offline, observed), plan_result).await
            }
            "observe" => {
                let command = parsed!(arguments::OBSERVE);
                let global = with_defaults(&defaults, &command);
                self.read_only(&context, move || tools::observe(&global), plain).await
            }
            "agent" => {
                let command = parsed!(arguments::AGENT);
                let global = with_defaults(&defaults, &command);
                self.read_only(&context, move || tools::agent(&global), plain).await
            }
            "agent_status" => {
                let command = parsed!(super::questions::AGENT_STATUS);
                let global = with_defaults(&defaults, &command);
                let timeout = super::questions::status_timeout(&command);
                self.read_only(&context, move || super::questions::agent_status(&global, timeout), plain).await
            }
            "recommend_placement" => {
                let command = parsed!(super::questions::RECOMMEND_PLACEMENT);
                let global = with_defaults(&defaults, &command);
                let size = super::questions::model_size(&command);
                self.read_only(&context, move || super::questions::recommend_placement(&global, size), plain).await
            }
            "cluster_health" => {
                let command = parsed!(super::questions::CLUSTER_HEALTH);
                let global = with_defaults(&defaults, &command);
                self.read_only(&context, move || super::questions::cluster_health(&global), plain).await
            }
            "audit" => {
                let command = parsed!(arguments::AUDIT);
                let global = with_defaults(&defaults, &command);
                let Command::Audit(audit) = command else { unreachable!("the audit tool parses `audit`") };
                let observed = audit.args.observed;
                self.read_only(&context, move || tools::audit(&global, observed), plain).await
            }
            "apply" => super::apply::call(self, request, context).await,
            other => Err(ErrorData::invalid_params(
                format!(
                    "no tool {}; the tools are: {}",
                    crate::escape::quoted(other),
                    tools().iter().map(|t| t.name.to_string()).collect::<Vec<_>>().join(", ")
                ),
                None,
            )),
        }
    }
}

/// The plan's result: the exact plan/v1 bytes first, the hash second, the structured
/// summary, and the hash in `_meta`.
fn plan_result(planned: tools::Planned) -> CallToolResult {
    let mut result = structured(&planned.out);
    // The bytes are moved into the text item, not copied.
    result.content = vec![ContentBlock::text(planned.bytes), ContentBlock::text(planned.out.hash.clone())];
    let mut meta = MetaObject::default();
    meta.0.insert(PLAN_HASH_META.into(), planned.out.hash.clone().into());
    result.with_meta(Some(meta))
}
