//! The tools' arguments, defined once, by the CLI. Each tool names a command and the ids of
//! the options of it that a call may give; its input schema is generated from those clap
//! definitions (the name, the JSON type from the option's action, the help text), and a
//! call's arguments are parsed by clap itself, as the words `k3d-gpu COMMAND --OPTION=VALUE…`
//! would be. So `--help`, the completions, the man pages and the tools cannot disagree about
//! what an option is called, what it takes, or what it conflicts with.
//!
//! Environment variables (`K3D_GPU_CONFIG`, …) are not read for a call: the server's own
//! command line and environment are its defaults already (`tools::Defaults`), and a call that
//! leaves an option out must mean "the default", not "whatever the server's environment says"
//! twice over.

use std::ffi::OsString;
use std::sync::Arc;

use clap::{ArgAction, CommandFactory, FromArgMatches};
use serde_json::{Map, Value, json};

use crate::cli::{Cli, Command};

/// A tool's arguments: the command whose options they are, the option ids (as clap knows
/// them: the field names) a call may give, and those it must.
#[derive(Debug, Clone, Copy)]
pub struct ToolArgs {
    /// The command's words: `plan`, or a subcommand's path, `agent status`.
    pub command: &'static str,
    pub options: &'static [&'static str],
    pub required: &'static [&'static str],
}

const HOST: [&str; 3] = ["root", "facts", "vendors"];

pub const FACTS: ToolArgs = ToolArgs { command: "facts", options: &HOST, required: &[] };
pub const VALIDATE: ToolArgs =
    ToolArgs { command: "validate", options: &["config", "root", "facts", "stdlib", "vendors"], required: &[] };
pub const PLAN: ToolArgs = ToolArgs {
    command: "plan",
    options: &["config", "root", "facts", "stdlib", "vendors", "offline", "observed"],
    required: &[],
};
pub const OBSERVE: ToolArgs = ToolArgs { command: "observe", options: &["config", "stdlib"], required: &[] };
pub const AGENT: ToolArgs =
    ToolArgs { command: "agent", options: &["config", "root", "facts", "stdlib", "vendors"], required: &[] };
pub const AUDIT: ToolArgs = ToolArgs { command: "audit", options: &["config", "stdlib", "observed"], required: &[] };
pub const APPLY: ToolArgs = ToolArgs {
    command: "apply",
    options: &["plan_hash", "config", "root", "facts", "stdlib", "vendors", "allow_replace"],
    required: &["plan_hash"],
};

/// How a call's value becomes words: the JSON type each kind of clap option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A flag (`ArgAction::SetTrue`): `true` gives it, `false` leaves it out.
    Flag,
    /// One value (`ArgAction::Set`): a string.
    One,
    /// A repeatable option (`ArgAction::Append`): an array of strings.
    Many,
}

/// One option as a tool shows it: the property name (the long flag, `-` as `_`), the flag
/// itself, its kind and its help.
#[derive(Debug, Clone)]
struct Property {
    id: &'static str,
    name: String,
    long: String,
    kind: Kind,
    help: String,
}

fn subcommand(name: &str) -> clap::Command {
    let mut command = Cli::command();
    for word in name.split(' ') {
        command = command
            .find_subcommand(word)
            .unwrap_or_else(|| panic!("no `{name}` command in the CLI definition"))
            .clone();
    }
    command
}

/// The options of `tool`, in the order it names them, read off the CLI's definition. A
/// tool naming an option its command lacks, or one of a kind no JSON value maps to, is a
/// bug in this file: every tool's definition is checked by a test.
fn properties(tool: &ToolArgs) -> Vec<Property> {
    let command = subcommand(tool.command);
    tool.options
        .iter()
        .map(|&id| {
            let arg = command
                .get_arguments()
                .find(|a| a.get_id().as_str() == id)
                .unwrap_or_else(|| panic!("`{}` has no option `{id}`", tool.command));
            let long = arg.get_long().unwrap_or_else(|| panic!("`{}` option `{id}` has no long flag", tool.command));
            let kind = match arg.get_action() {
                ArgAction::SetTrue => Kind::Flag,
                ArgAction::Set => Kind::One,
                ArgAction::Append => Kind::Many,
                other => panic!("`{}` option `{id}`: no JSON type for {other:?}", tool.command),
            };
            let help = arg.get_long_help().or_else(|| arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
            Property { id, name: long.replace('-', "_"), long: long.to_string(), kind, help: one_paragraph(&help) }
        })
        .collect()
}

/// Help as one line: clap's wrapped text joined, `[default: …]` and `[env: …]` left in.
fn one_paragraph(help: &str) -> String {
    help.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The tool's input schema (JSON Schema 2020-12, an object with no other properties).
pub fn input_schema(tool: &ToolArgs) -> Arc<Map<String, Value>> {
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in properties(tool) {
        let schema = match p.kind {
            Kind::Flag => json!({ "type": "boolean", "default": false, "description": p.help }),
            Kind::One => json!({ "type": "string", "description": p.help }),
            Kind::Many => json!({ "type": "array", "items": { "type": "string" }, "description": p.help }),
        };
        if tool.required.contains(&p.id) {
            required.push(Value::String(p.name.clone()));
        }
        props.insert(p.name, schema);
    }
    let mut schema = Map::new();
    schema.insert("$schema".into(), "https://json-schema.org/draft/2020-12/schema".into());
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), false.into());
    Arc::new(schema)
}

/// Why a call's arguments were not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The arguments do not fit the schema (an unknown name, a value of the wrong JSON type):
    /// a malformed call, answered as JSON-RPC "invalid params".
    Malformed(String),
    /// They fit the schema, but the CLI refuses them as it would the same flags (a conflict,
    /// a value its parser refuses): a usage error (exit 2), answered as a tool result the agent
    /// can correct.
    Usage(String),
}

/// The words a call's arguments stand for: `k3d-gpu COMMAND --LONG=VALUE…`. `=` keeps a
/// value that starts with `-` a value.
fn words(tool: &ToolArgs, arguments: &Map<String, Value>) -> Result<Vec<OsString>, Refusal> {
    let props = properties(tool);
    if let Some(name) = arguments.keys().find(|k| !props.iter().any(|p| &p.name == *k)) {
        let names: Vec<&str> = props.iter().map(|p| p.name.as_str()).collect();
        return Err(Refusal::Malformed(format!(
            "unknown argument {}; this tool takes: {}",
            crate::escape::quoted(name),
            names.join(", ")
        )));
    }
    // In the tool's order, whatever order the call's object has: the same call, the same words.
    let mut words: Vec<OsString> = vec!["k3d-gpu".into()];
    words.extend(tool.command.split(' ').map(OsString::from));
    for p in &props {
        let name = &p.name;
        let value = arguments.get(name).unwrap_or(&Value::Null);
        if value.is_null() && tool.required.contains(&p.id) {
            return Err(Refusal::Malformed(format!("argument `{name}` is required")));
        }
        let wrong = |want: &str| Refusal::Malformed(format!("argument `{name}` must be {want}"));
        match (p.kind, value) {
            // An explicit null is the option left out, as clients send for "no value".
            (_, Value::Null) | (Kind::Flag, Value::Bool(false)) => {}
            (Kind::Flag, Value::Bool(true)) => words.push(format!("--{}", p.long).into()),
            (Kind::Flag, _) => return Err(wrong("a boolean")),
            (Kind::One, Value::String(s)) => words.push(format!("--{}={s}", p.long).into()),
            (Kind::One, _) => return Err(wrong("a string")),
            (Kind::Many, Value::Array(items)) => {
                for item in items {
                    let Value::String(s) = item else { return Err(wrong("an array of strings")) };
                    words.push(format!("--{}={s}", p.long).into());
                }
            }
            (Kind::Many, _) => return Err(wrong("an array of strings")),
        }
    }
    Ok(words)
}

/// A call's arguments parsed as the CLI parses its command line: the command, with every
/// option the call left out at the CLI's default.
pub fn parse(tool: &ToolArgs, arguments: Option<&Map<String, Value>>) -> Result<Command, Refusal> {
    let empty = Map::new();
    let words = words(tool, arguments.unwrap_or(&empty))?;
    let path: Vec<&str> = tool.command.split(' ').collect();
    // The tree of this command alone (what parses its line as the whole tree does): building
    // every command's definition for each call touched pages of code and memory the CLI's
    // own run of the command no longer does, a few percent of a small call's peak.
    let tree = crate::cli::one_command_tree(path[0]).unwrap_or_else(Cli::command);
    let cli = without_env(tree, &path);
    let matches = cli.try_get_matches_from(words).map_err(|e| Refusal::Usage(usage_text(&e)))?;
    let parsed = Cli::from_arg_matches(&matches).map_err(|e| Refusal::Usage(usage_text(&e)))?;
    Ok(parsed.command)
}

/// The CLI with the environment left out of the options of the command at `path` (a call's
/// options are its own and the server's defaults, never the server's environment again).
fn without_env(command: clap::Command, path: &[&str]) -> clap::Command {
    match path {
        [] => command.mut_args(|a| a.env(None)),
        [first, rest @ ..] => command.mut_subcommand(*first, |c| without_env(c, rest)),
    }
}

/// clap's message without its usage block and `--help` hint, which speak of a terminal.
fn usage_text(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("the arguments were refused");
    crate::escape::capped(crate::escape::one_line(first.trim_start_matches("error: ")).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: [ToolArgs; 10] = [
        FACTS,
        VALIDATE,
        PLAN,
        OBSERVE,
        AGENT,
        AUDIT,
        APPLY,
        crate::mcp::questions::AGENT_STATUS,
        crate::mcp::questions::CLUSTER_HEALTH,
        crate::mcp::questions::RECOMMEND_PLACEMENT,
    ];

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn every_tool_option_is_an_option_of_its_command_with_its_help() {
        for tool in TOOLS {
            let schema = input_schema(&tool);
            let props = schema["properties"].as_object().unwrap();
            assert_eq!(props.len(), tool.options.len(), "{tool:?}");
            let command = subcommand(tool.command);
            for (name, prop) in props {
                let arg = command
                    .get_arguments()
                    .find(|a| a.get_long().map(|l| l.replace('-', "_")).as_deref() == Some(name))
                    .unwrap_or_else(|| panic!("{}: {name} is no flag of the command", tool.command));
                let help = arg.get_long_help().or_else(|| arg.get_help()).unwrap().to_string();
                assert_eq!(prop["description"], one_paragraph(&help), "{}: {name}", tool.command);
                assert!(!prop["description"].as_str().unwrap().is_empty(), "{}: {name} has no help", tool.command);
            }
            for required in tool.required {
                assert!(props.contains_key(*required), "{}: required {required} is not an option", tool.command);
            }
        }
    }

    #[test]
    fn the_json_type_follows_the_option() {
        let plan = input_schema(&PLAN);
        assert_eq!(plan["properties"]["offline"]["type"], "boolean");
        assert_eq!(plan["properties"]["root"]["type"], "string");
        // validate checks several hosts: its --root repeats, so the property is an array.
        let validate = input_schema(&VALIDATE);
        assert_eq!(validate["properties"]["root"]["type"], "array");
        assert_eq!(validate["properties"]["facts"]["items"]["type"], "string");
        let apply = input_schema(&APPLY);
        assert_eq!(apply["required"], json!(["plan_hash"]));
        assert_eq!(apply["properties"]["allow_replace"]["type"], "boolean");
    }

    #[test]
    fn calls_become_the_words_a_person_would_type() {
        let cases: &[(ToolArgs, Value, &[&str])] = &[
            (PLAN, json!({}), &["k3d-gpu", "plan"]),
            (PLAN, json!({"offline": true, "config": "a.toml"}), &["k3d-gpu", "plan", "--config=a.toml", "--offline"]),
            (PLAN, json!({"offline": false, "observed": null}), &["k3d-gpu", "plan"]),
            // A value that looks like a flag stays the option's value.
            (PLAN, json!({"config": "--offline"}), &["k3d-gpu", "plan", "--config=--offline"]),
            (VALIDATE, json!({"root": ["a", "b"]}), &["k3d-gpu", "validate", "--root=a", "--root=b"]),
            // A subcommand's tool: its path, then its options.
            (
                crate::mcp::questions::AGENT_STATUS,
                json!({"timeout": "5", "config": "a.toml"}),
                &["k3d-gpu", "agent", "status", "--config=a.toml", "--timeout=5"],
            ),
            (
                APPLY,
                json!({"plan_hash": "sha256:x", "allow_replace": true}),
                &["k3d-gpu", "apply", "--plan-hash=sha256:x", "--allow-replace"],
            ),
        ];
        for (tool, call, want) in cases {
            let got = words(tool, &object(call.clone())).unwrap();
            let want: Vec<OsString> = want.iter().map(OsString::from).collect();
            assert_eq!(got, want, "{call}");
        }
    }

    #[test]
    fn malformed_calls_are_refused_before_clap() {
        let cases: &[(ToolArgs, Value, &str)] = &[
            (FACTS, json!({"rooot": "/"}), "unknown argument \"rooot\""),
            (FACTS, json!({"json": true}), "unknown argument \"json\""),
            (PLAN, json!({"offline": "yes"}), "`offline` must be a boolean"),
            (PLAN, json!({"root": ["a"]}), "`root` must be a string"),
            (VALIDATE, json!({"root": "a"}), "`root` must be an array of strings"),
            (VALIDATE, json!({"root": [1]}), "`root` must be an array of strings"),
            (APPLY, json!({}), "`plan_hash` is required"),
        ];
        for (tool, call, want) in cases {
            match parse(tool, Some(&object(call.clone()))) {
                Err(Refusal::Malformed(m)) => assert!(m.contains(want), "{call}: {m}"),
                other => panic!("{call}: {other:?}"),
            }
        }
    }

    #[test]
    fn what_the_cli_refuses_the_tool_refuses_as_usage() {
        let cases: &[(ToolArgs, Value, &str)] = &[
            (PLAN, json!({"root": "a", "facts": "b"}), "cannot be used with"),
            (PLAN, json!({"offline": true, "observed": "o.json"}), "cannot be used with"),
            (APPLY, json!({"plan_hash": "sha256:abc"}), "plan-hash"),
        ];
        for (tool, call, want) in cases {
            match parse(tool, Some(&object(call.clone()))) {
                Err(Refusal::Usage(m)) => assert!(m.contains(want), "{call}: {m}"),
                other => panic!("{call}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_subcommands_call_is_that_subcommand_with_its_options() {
        let call = object(json!({"config": "lab.toml", "timeout": "7"}));
        let Command::Agent(agent) = parse(&crate::mcp::questions::AGENT_STATUS, Some(&call)).unwrap() else {
            panic!("not agent")
        };
        let Some(crate::cli::AgentCommand::Status(status)) = &agent.command else { panic!("not agent status") };
        assert_eq!(status.timeout, 7);
        assert_eq!(Command::Agent(agent).global().config.as_deref(), Some(std::path::Path::new("lab.toml")));
        // Its own parser's range holds for a call too.
        let zero = object(json!({"timeout": "0"}));
        assert!(matches!(parse(&crate::mcp::questions::AGENT_STATUS, Some(&zero)), Err(Refusal::Usage(_))));
    }

    #[test]
    fn a_parsed_call_is_the_command_the_cli_would_run() {
        let call = object(json!({"config": "lab.toml", "root": "/fx", "offline": true}));
        let Command::Plan(plan) = parse(&PLAN, Some(&call)).unwrap() else { panic!("not plan") };
        assert!(plan.args.offline);
        let global = Command::Plan(plan).global();
        assert_eq!(global.config.as_deref(), Some(std::path::Path::new("lab.toml")));
        assert_eq!(global.root, [std::path::PathBuf::from("/fx")]);
        assert!(!global.json);
    }
}
