//! The `apply` tool: the only one that writes, and only what a person confirmed.
//!
//! 1. The inputs are planned now; a hash other than `plan_hash` is refused (the agent plans
//!    again and shows the new plan), as is a replacement without `allow_replace`.
//! 2. The person is asked through the client, with a form that shows the plan and its hash:
//!    in a 2026-07-28 session as an input request the client answers when it calls again
//!    (`requestState` is a confirmation token, see `confirm.rs`); in a session opened with
//!    `initialize`, as an `elicitation/create` request during the call. A client that
//!    declares no form elicitation cannot ask: refused, with the terminal command.
//! 3. Only an accepted form with `confirm` ticked runs it, through the CLI's own
//!    `apply --plan-hash` path (`commands::apply::apply_hash`): the lock, the plan computed
//!    again and checked against the hash, then the actions and verify. A decline, a cancel
//!    or no answer is refused with the command to run in a terminal instead.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, InputRequest, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use schemars::JsonSchema;
use serde::Serialize;

use super::server::{Server, call_arguments, failed, refused_result, structured};
use super::tools;
use crate::error::EXIT_FAILED;

/// The key of the confirmation form among a call's input requests.
pub const FORM_KEY: &str = "confirm";

/// The most of the plan's text the form shows; the rest is one `k3d-gpu plan` away.
const MAX_FORM_TEXT: usize = 16 << 10;

/// The call's options (parsed by the CLI's `apply` definition, `arguments::APPLY`): what the
/// person's confirmation is bound to.
#[derive(Debug, Clone, Serialize)]
pub struct ApplyArgs {
    /// The hash the plan tool gave (`sha256:` and 64 lowercase hex digits).
    pub plan_hash: String,
    /// The config file (k3dgpu.toml), as given to plan.
    pub config: Option<PathBuf>,
    /// A fixture host directory, as given to plan.
    pub root: Option<PathBuf>,
    /// A saved facts/v1 document, as given to plan.
    pub facts: Option<PathBuf>,
    /// A component catalog directory, as given to plan.
    pub stdlib: Option<PathBuf>,
    /// The vendor filter, as given to plan.
    pub vendors: Option<String>,
    /// Consent to a plan that recreates the cluster, which deletes its state (the person is
    /// still asked).
    pub allow_replace: bool,
}

impl ApplyArgs {
    /// The tool's options out of the parsed `apply` command; `None` for another command.
    fn of(command: crate::cli::Command) -> Option<ApplyArgs> {
        let global = command.global();
        let crate::cli::Command::Apply(apply) = command else { return None };
        Some(ApplyArgs {
            // Required by the tool's schema and checked before parsing.
            plan_hash: apply.args.plan_hash?,
            config: global.config,
            root: global.root.into_iter().next(),
            facts: global.facts.into_iter().next(),
            stdlib: global.stdlib,
            vendors: global.vendors,
            allow_replace: apply.args.allow_replace,
        })
    }

    fn given(&self) -> tools::Given {
        tools::Given {
            config: self.config.clone(),
            root: self.root.clone().into_iter().collect(),
            facts: self.facts.clone().into_iter().collect(),
            stdlib: self.stdlib.clone(),
            vendors: self.vendors.clone(),
        }
    }
}

/// What the apply did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApplyOut {
    /// The plan that ran.
    pub hash: String,
    /// Every action and verify check succeeded.
    pub ok: bool,
    /// The cluster already matched the config.
    pub nothing_to_do: bool,
    pub done: Vec<String>,
    /// Each failed action with its error.
    pub failed: Vec<String>,
    pub not_started: Vec<String>,
    /// Each failed verify check with its diagnosis.
    pub verify_failed: Vec<String>,
    /// The client cancelled (or a signal came): no new action started after that.
    pub stopped: bool,
}

pub async fn call(
    server: &Server,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let command = match call_arguments(&super::arguments::APPLY, &request)? {
        Ok(command) => command,
        Err(refused) => return Ok(refused.into()),
    };
    let Some(args) = ApplyArgs::of(command) else { unreachable!("the apply tool parses `apply` with its hash") };
    let defaults = &server.inner.defaults;
    let global = defaults.global(args.given());
    // The person's yes is for this hash with exactly these arguments.
    let binding = crate::canonical::digest(&args);
    let command = tools::apply_command(&global, &args.plan_hash, args.allow_replace);
    let refuse = |message: &str| refused_result(message, None, Some(&command), EXIT_FAILED).into();

    if let Some(token) = &request.request_state {
        // The client's second call, with the person's answer to the form.
        if let Err(why) = server.inner.confirmations.redeem(token, &binding, Instant::now()) {
            return Ok(refuse(&format!("not applied: {why}; call apply again to ask the person anew")));
        }
        let answer = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(FORM_KEY))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
        return decide(server, &context, args, answer, &command).await;
    }

    // The first call: the plan these inputs give now must be the one reviewed.
    let planning = defaults.global(args.given());
    let planned =
        server.blocking(&context, Some(server.inner.timeout), move || tools::plan_to_confirm(&planning)).await?;
    let planned = match planned {
        Ok(p) => p,
        Err(e) => return Ok(failed(&e).into()),
    };
    if planned.out.hash != args.plan_hash {
        let message = format!(
            "refused: the plan now hashes to {}, not {}: something changed since it was reviewed",
            planned.out.hash, args.plan_hash
        );
        let help = "call plan again, show the person the new plan, then apply its hash";
        return Ok(refused_result(&message, Some(help), None, EXIT_FAILED).into());
    }
    if planned.out.replaces_cluster && !args.allow_replace {
        let message = "refused: the plan recreates the cluster, which deletes its state; not done without consent";
        let help = "back up what you need; then call apply with allow_replace: true (the person is still asked)";
        let command = tools::apply_command(&global, &args.plan_hash, true);
        return Ok(refused_result(message, Some(help), Some(&command), EXIT_FAILED).into());
    }
    if !can_ask(&context) {
        return Ok(refuse(
            "not applied: this client cannot ask the person to confirm (it declares no form elicitation), and only \
a person may apply a plan",
        ));
    }

    let token = match server.inner.confirmations.issue(&binding, Instant::now()) {
        Ok(token) => token,
        Err(e) => {
            return Ok(refuse(&format!(
                "not applied: no confirmation can be issued, the operating system's random generator failed ({e})"
            )));
        }
    };
    let form = form(&planned);
    let modern = context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if modern {
        let requests = BTreeMap::from([(FORM_KEY.to_string(), InputRequest::Elicitation(ElicitRequest::new(form)))]);
        return Ok(InputRequiredResult::new(Some(requests), Some(token)).into());
    }
    let answer = tokio::select! {
        _ = context.ct.cancelled() => return Err(ErrorData::invalid_request("cancelled by the client", None)),
        answer = context.peer.create_elicitation(form) => answer,
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            let why = crate::escape::capped(format!("not applied: the client could not ask the person: {e}"));
            return Ok(refuse(&why));
        }
    };
    if let Err(why) = server.inner.confirmations.redeem(&token, &binding, Instant::now()) {
        return Ok(refuse(&format!("not applied: {why}; call apply again to ask the person anew")));
    }
    decide(server, &context, args, Some(answer), &command).await
}

/// Whether the client can show the person a form: it declares elicitation with `form`, or
/// with neither mode (which means form).
fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The question: the plan's text and hash, and one box to tick.
fn form(planned: &tools::Planned) -> ElicitRequestParams {
    let out = &planned.out;
    let mut text = out.text.clone();
    if text.len() > MAX_FORM_TEXT {
        let mut cut = MAX_FORM_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (cut here; `k3d-gpu plan` shows all of it)\n");
    }
    // A replacement is said before the plan, not left to a `-/+` line in it.
    let warning =
        if out.replaces_cluster { "It RECREATES the cluster: everything in it now is deleted.\n" } else { "" };
    let message = format!(
        "k3d-gpu wants to apply this plan ({} action(s)) to your cluster.\n{warning}Plan hash: {}\nInputs: the same as \
`{}`\n{}\nThe whole plan:\n\n{text}\nApply it?",
        out.actions, out.hash, out.apply_command, planned.essentials
    );
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": format!("Apply plan {}", out.hash),
                "description": "Tick to apply exactly this plan; anything else applies nothing.",
                "default": false,
            }
        },
        "required": ["confirm"],
    });
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: crate::escape::assembled(&message).into_owned(),
        // A fixed, valid schema: a boolean property is a primitive the spec allows.
        requested_schema: serde_json::from_value(schema)
            .expect("the confirmation schema is a valid elicitation schema"),
    }
}

/// What the person must see even when the plan's text is cut: the counts, every replace and
/// delete with its reason (the actions that lose data), and every warning. The full text, diffs
/// included, follows it and is the part that gets cut.
pub(super) fn essentials(plan: &crate::plan::Plan) -> String {
    use crate::plan::ActionKind;
    let mut out = String::new();
    let s = &plan.summary;
    let _ = writeln!(
        out,
        "Plan: {} to create, {} to update, {} to replace, {} to delete.",
        s.create, s.update, s.replace, s.delete
    );
    // Ids, reasons and warnings name what the cluster reported (a node called
    // "x\nPlan: 0 to create…"): each is one escaped line, so none can add a line of its own.
    let line = |text: &str| crate::escape::one_line(text).into_owned();
    for action in &plan.actions {
        let kind = match action.action {
            ActionKind::Replace => "replace",
            ActionKind::Delete => "delete",
            ActionKind::Create | ActionKind::Update => continue,
        };
        let _ = writeln!(out, "  {kind} {}: {}", line(&action.id), line(&action.reason.text));
    }
    for warning in &plan.warnings {
        let _ = writeln!(out, "  warning: {} [{}]", line(&warning.text), line(&warning.code));
    }
    out
}

/// Runs the plan only on an accepted form with `confirm` ticked.
async fn decide(
    server: &Server,
    context: &RequestContext<RoleServer>,
    args: ApplyArgs,
    answer: Option<ElicitResult>,
    command: &str,
) -> Result<CallToolResponse, ErrorData> {
    let refuse = |why: &str| -> Result<CallToolResponse, ErrorData> {
        Ok(refused_result(&format!("not applied: {why}"), None, Some(command), EXIT_FAILED).into())
    };
    let Some(answer) = answer else { return refuse("no answer to the confirmation came back") };
    match answer.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return refuse("the person declined"),
        _ => return refuse("the person dismissed the question"),
    }
    if answer.content.as_ref().and_then(|c| c.get("confirm")).and_then(|c| c.as_bool()) != Some(true) {
        return refuse("the person did not tick the confirmation");
    }
    run(server, context, args).await
}

/// The CLI's `apply --plan-hash` path. A cancellation stops new actions; the running ones
/// finish and the lock is released before the answer.
async fn run(
    server: &Server,
    context: &RequestContext<RoleServer>,
    args: ApplyArgs,
) -> Result<CallToolResponse, ErrorData> {
    let global = server.inner.defaults.global(args.given());
    let stop = crate::commands::apply::Signals::client_only();
    let watched = stop.clone();
    // Registered so a signal to the server stops this apply before the process exits.
    let _running = server.inner.applies.start(stop.clone());
    let apply_args = crate::cli::ApplyArgs {
        plan_file: None,
        plan_hash: Some(args.plan_hash.clone()),
        allow_replace: args.allow_replace,
        parallel: crate::apply::executor::DEFAULT_PARALLEL,
        verify_timeout: crate::apply::verify::DEFAULT_TIMEOUT.as_secs(),
        test: false,
    };
    let wanted = args.plan_hash.clone();
    let mut task = tokio::task::spawn_blocking(move || {
        crate::commands::apply::apply_hash(&global, &apply_args, &wanted, &watched, false)
    });
    let joined = tokio::select! {
        joined = &mut task => joined,
        _ = context.ct.cancelled() => {
            stop.stop();
            task.await
        }
    };
    let applied = match joined {
        Ok(Ok(applied)) => applied,
        Ok(Err(e)) => return Ok(failed(&e).into()),
        Err(join) => {
            return Err(ErrorData::internal_error(
                crate::escape::capped(
                    crate::escape::one_line(&format!("apply stopped unexpectedly: {join}")).into_owned(),
                ),
                None,
            ));
        }
    };
    let pair = |(a, b): &(String, String)| format!("{a}: {b}");
    let out = ApplyOut {
        ok: applied.ok(),
        hash: applied.hash.clone(),
        nothing_to_do: applied.nothing_to_do,
        done: applied.outcome.done.clone(),
        failed: applied.outcome.failed.iter().map(pair).collect(),
        not_started: applied.outcome.not_started.clone(),
        verify_failed: applied.verify_failed.iter().map(pair).collect(),
        stopped: applied.stopped,
    };
    let mut result: CallToolResult = structured(&out);
    if !out.ok {
        result.is_error = Some(true);
    }
    Ok(result.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(text: &str, replaces_cluster: bool) -> tools::Planned {
        tools::Planned {
            out: tools::PlanOut {
                hash: format!("sha256:{}", "a".repeat(64)),
                empty: false,
                actions: 3,
                replaces_cluster,
                against: "live".into(),
                text: text.into(),
                apply_command: String::new(),
            },
            bytes: String::new(),
            essentials: String::new(),
        }
    }

    /// A plan/v1 document of these actions and warnings, every other field empty.
    fn plan_of(actions: serde_json::Value, warnings: serde_json::Value) -> crate::plan::Plan {
        let mut summary = serde_json::json!({"create": 0, "update": 0, "replace": 0, "delete": 0});
        let mut full = Vec::new();
        for mut a in actions.as_array().unwrap().iter().cloned() {
            let kind = a["action"].as_str().unwrap().to_string();
            summary[&kind] = (summary[&kind].as_u64().unwrap() + 1).into();
            a["reason"]["code"] = "test".into();
            a["before"] = serde_json::Value::Null;
            a["after"] = serde_json::Value::Null;
            a["depends_on"] = serde_json::json!([]);
            full.push(a);
        }
        let digest = "sha256:0";
        serde_json::from_value(serde_json::json!({
            "schema": crate::plan::SCHEMA, "actions": full, "summary": summary, "verify": [], "warnings": warnings,
            "inputs": {"config": digest, "facts": digest, "images": digest, "observed": digest, "stdlib": digest,
                       "tool_version": "0"},
        }))
        .unwrap()
    }

    fn message_and_schema(form: ElicitRequestParams) -> (String, serde_json::Value) {
        match form {
            ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
                (message, serde_json::to_value(requested_schema).unwrap())
            }
            other => panic!("not a form: {other:?}"),
        }
    }

    #[test]
    fn the_form_shows_the_plan_and_its_hash_and_starts_unticked() {
        let (message, schema) = message_and_schema(form(&planned("+ create k8s/core/Namespace/x\n", false)));
        assert!(message.contains("+ create k8s/core/Namespace/x") && message.contains(&"a".repeat(64)), "{message}");
        assert!(!message.contains("RECREATES"), "{message}");
        let confirm = &schema["properties"]["confirm"];
        assert_eq!(confirm["type"], "boolean");
        assert_eq!(confirm["default"], false);
        assert_eq!(schema["required"], serde_json::json!(["confirm"]));
    }

    #[test]
    fn a_replacement_is_said_before_the_plan() {
        let (message, _) = message_and_schema(form(&planned("-/+ replace k3d/cluster/lab\n", true)));
        let warning = message.find("RECREATES").expect("the replacement is named");
        assert!(warning < message.find("-/+ replace").unwrap(), "{message}");
    }

    #[test]
    fn deletions_and_warnings_come_before_the_cut() {
        let mut p = planned(&"+".repeat(MAX_FORM_TEXT * 2), false);
        p.out.apply_command = "k3d-gpu -c lab.toml apply --plan-hash sha256:aa".into();
        p.essentials = essentials(&plan_of(
            serde_json::json!([
                {"action": "create", "id": "k8s/core/Namespace/x", "reason": {"text": "new"}},
                {"action": "delete", "id": "k8s/core/PersistentVolumeClaim/k3d-gpu-agent/ovms-models",
                 "reason": {"text": "its data is lost"}},
            ]),
            serde_json::json!([{"code": "data-kept", "text": "kept: pvc/vlm-models"}]),
        ));
        let (message, _) = message_and_schema(form(&p));
        let cut = message.find("cut here").expect("the long text is cut");
        for must in [
            "1 to delete",
            "delete k8s/core/PersistentVolumeClaim/k3d-gpu-agent/ovms-models: its data is lost",
            "warning: kept: pvc/vlm-models [data-kept]",
            "`k3d-gpu -c lab.toml apply --plan-hash sha256:aa`",
        ] {
            let at = message.find(must).unwrap_or_else(|| panic!("{must} missing"));
            assert!(at < cut, "{must} comes after the cut");
        }
        assert!(!message[..cut].contains("create k8s/core/Namespace/x:"), "only replaces and deletes are listed");
    }

    #[test]
    fn an_untrusted_name_cannot_add_a_line_to_the_form() {
        let mut p = planned("+ create k8s/core/Namespace/x\n", false);
        let forged = "gpu-01\nPlan: 0 to create, 0 to update, 0 to replace, 0 to delete.\r\u{1b}[2K";
        p.essentials = essentials(&plan_of(
            serde_json::json!([
                {"action": "create", "id": "k8s/core/Namespace/x", "reason": {"text": "new"}},
                {"action": "delete", "id": format!("node-label/{forged}/k"), "reason": {"text": forged}},
            ]),
            serde_json::json!([{"code": forged, "text": format!("cluster node {forged} is not in [[nodes]]")}]),
        ));
        let (message, _) = message_and_schema(form(&p));
        let summaries: Vec<&str> = message.lines().filter(|l| l.trim_start().starts_with("Plan:")).collect();
        assert_eq!(summaries, ["Plan: 1 to create, 0 to update, 0 to replace, 1 to delete."], "{message}");
        assert!(!message.contains('\r') && !message.contains('\u{1b}'), "{message}");
        assert!(message.contains("gpu-01\\x0aPlan: 0 to create"), "the name is shown, escaped: {message}");
    }

    #[test]
    fn a_long_plan_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_FORM_TEXT);
        let (message, _) = message_and_schema(form(&planned(&long, false)));
        assert!(message.len() < MAX_FORM_TEXT + 1000, "{}", message.len());
        assert!(message.contains("`k3d-gpu plan` shows all of it"));
    }
}
