//! `k3d-gpu mcp` on the wire. `framing`: the real binary spoken to in JSON-RPC over stdio by
//! hand (both protocol eras, a tool call, malformed input answered or ignored as the spec's
//! SDKs do, never a crash). `python_client`: the official MCP Python SDK
//! (`tests/mcp/test_mcp.py`, pinned in `tests/mcp/requirements.txt`) drives every tool and
//! the apply flows against a private Docker engine, the k3d stub and the fake API server,
//! where the plans it accepts really create the cluster and its objects.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{FakeApiServer, State, kubeconfig_text};
use support::world::{World, advertise, daemonset_applied, roll_out};
use support::{docker_ready, hosts_dir, import_image, repo};

const HOST: &str = "lunar-lake-npu";

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn start() -> Session {
        Session::start_with(&[], None)
    }

    /// `k3d-gpu mcp ARGS`, with Docker at `docker` (none by default).
    fn start_with(args: &[&str], docker: Option<&str>) -> Session {
        Session::start_env(args, docker.map(|d| ("DOCKER_HOST", d.to_string())).into_iter().collect())
    }

    /// `k3d-gpu mcp ARGS` with these variables set.
    fn start_env(args: &[&str], env: Vec<(&str, String)>) -> Session {
        let command = K3dGpu::new().arg("mcp").args(args).envs(env);
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Session { child, stdin, stdout }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    /// The next message the server writes: one JSON object per line, nothing else on stdout.
    fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the server closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not one JSON message per line ({e}): {line:?}"))
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let reply = self.receive();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

fn root() -> String {
    hosts_dir().join(HOST).display().to_string()
}

#[test]
fn framing_in_the_initialize_era() {
    let mut s = Session::start();
    let init = s.call(
        1,
        "initialize",
        json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "k3d-gpu");
    s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));

    let list = s.call(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "facts",
            "validate",
            "plan",
            "observe",
            "agent",
            "agent_status",
            "recommend_placement",
            "cluster_health",
            "audit",
            "apply"
        ]
    );
    for t in tools {
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert_eq!(t["inputSchema"]["additionalProperties"], false, "{t}");
        assert_eq!(t["annotations"]["readOnlyHint"], t["name"] != "apply", "{t}");
    }

    let facts = s.call(3, "tools/call", json!({ "name": "facts", "arguments": { "root": root() } }));
    let out = &facts["result"]["structuredContent"];
    assert_eq!(out["document"]["schema"], "k3d-gpu.facts/v1", "{facts}");
    assert_eq!(facts["result"]["isError"], false);

    // The plan's first text item is the exact bytes `plan --json` prints; the hash is theirs.
    let config = repo().join("examples/lunar-lake-npu.toml").display().to_string();
    let args = json!({ "config": config, "root": root(), "offline": true });
    let plan = s.call(4, "tools/call", json!({ "name": "plan", "arguments": args }));
    let cli = K3dGpu::new().args(["plan", "--json", "--offline", "-c", &config, "--root", &root()]).output();
    assert_eq!(plan["result"]["content"][0]["text"].as_str().unwrap().as_bytes(), &cli.stdout[..]);
    let hash = plan["result"]["content"][1]["text"].as_str().unwrap();
    assert_eq!(plan["result"]["_meta"]["k3d-gpu.io/planHash"], hash);
    assert_eq!(plan["result"]["structuredContent"]["hash"], hash);
    // The document is in the result once: its bytes, not again as structured content.
    assert!(plan["result"]["structuredContent"].get("plan").is_none(), "{}", plan["result"]["structuredContent"]);
    assert!(plan["result"]["structuredContent"]["text"].as_str().unwrap().contains(hash));

    // A line that is not JSON is answered as JSON-RPC 2.0 says (rmcp's transport drops it),
    // with id null, in order; the server keeps serving.
    s.send_line("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": ");
    s.send_line("\u{1b}[2J not json at all");
    let parse_error = json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32700, "message": "Parse error" } });
    assert_eq!(s.receive(), parse_error);
    assert_eq!(s.receive(), parse_error);
    // Well-formed JSON that is no message: Invalid Request, with its id where it has one.
    s.send(json!({ "jsonrpc": "2.0", "id": 6, "method": 42 }));
    let invalid = s.receive();
    assert_eq!(
        invalid,
        json!({ "jsonrpc": "2.0", "id": 6, "error": { "code": -32600, "message": "Invalid Request" } })
    );
    s.send_line("[]");
    assert_eq!(s.receive()["error"]["code"], -32600);
    // An object without `method` is a (malformed) response: its id is in the server's own id
    // space, so it is not answered; an error echoing 66 would answer the client's request 66.
    s.send(json!({ "jsonrpc": "2.0", "id": 66, "error": { "code": "not a number" } }));
    s.send(json!({ "jsonrpc": "2.0", "id": 66, "result": 1, "error": {} }));
    let ping = s.call(66, "ping", json!({}));
    assert!(ping.get("error").is_none() && ping["result"].is_object(), "{ping}");

    let unknown = s.call(7, "tools/call", json!({ "name": "rm-rf", "arguments": {} }));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let typo = s.call(8, "tools/call", json!({ "name": "facts", "arguments": { "rooot": "/" } }));
    assert_eq!(typo["error"]["code"], -32602, "{typo}");
    assert!(typo["error"]["message"].as_str().unwrap().contains("rooot"), "{typo}");

    // A command's failure is a tool result with the fix, and the exit code the CLI would give.
    // Names from the call come back escaped: an escape sequence in a path is shown, not run.
    let hostile = "/nonexistent-\u{1b}[2J-\u{202e}host";
    let bad = s.call(9, "tools/call", json!({ "name": "facts", "arguments": { "root": hostile } }));
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert_eq!(bad["result"]["structuredContent"]["exit_code"], 2, "{bad}");
    let text = bad["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\nhelp: "), "{bad}");
    assert!(text.contains("\\x1b[2J") && text.contains("\\u{202e}"), "{text}");
    let error = bad["result"]["structuredContent"]["error"].as_str().unwrap();
    for shown in [text, error] {
        assert!(!shown.chars().any(|c| c == '\u{1b}' || c == '\u{202e}'), "a raw control character: {shown:?}");
    }

    // apply without elicitation is refused before anything is planned when the hash is
    // malformed, and no Docker means it cannot plan: an error with the fix, not a crash.
    let apply = s.call(10, "tools/call", json!({ "name": "apply", "arguments": { "plan_hash": "sha256:abc" } }));
    assert_eq!(apply["result"]["isError"], true, "{apply}");

    let still = s.call(11, "tools/list", json!({}));
    assert!(still["result"]["tools"].is_array(), "{still}");
    assert!(s.close().success(), "the server exits cleanly when the client closes stdin");
}

/// Each tool's arguments are its command's options: the schema the server lists names each
/// option as its flag does, with the flag's help; docs/mcp.md's table says the same; and a call
/// the CLI would refuse (two hosts at once) is refused as the CLI refuses it, exit code 2.
#[test]
fn tool_arguments_are_the_cli_options() {
    let mut s = Session::start();
    s.call(
        1,
        "initialize",
        json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }),
    );
    s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    let list = s.call(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();

    let docs = std::fs::read_to_string(repo().join("docs/mcp.md")).unwrap();
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        let props = tool["inputSchema"]["properties"].as_object().unwrap();
        let listed: Vec<String> = props
            .iter()
            .map(|(p, schema)| if schema["type"] == "array" { format!("`{p}` []") } else { format!("`{p}`") })
            .collect();
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("docs/mcp.md has no row for the {name} tool"));
        let cell = row.split('|').nth(2).unwrap().trim();
        let mut documented: Vec<&str> = cell.split(", ").collect();
        let mut listed_sorted: Vec<&str> = listed.iter().map(String::as_str).collect();
        documented.sort_unstable();
        listed_sorted.sort_unstable();
        assert_eq!(documented, listed_sorted, "docs/mcp.md's arguments of {name}");

        // The description is the flag's own help, as `k3d-gpu COMMAND --help` prints it; the
        // tools that ask the cluster take the options of the command whose core they share.
        let command: Vec<&str> = match name {
            "agent_status" => vec!["agent", "status"],
            "recommend_placement" => vec!["agent"],
            "cluster_health" => vec!["test"],
            other => vec![other],
        };
        let help = K3dGpu::new().args(command).arg("--help").output();
        let help = String::from_utf8(help.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        for (p, schema) in props {
            let flag = format!("--{}", p.replace('_', "-"));
            assert!(help.contains(&flag), "{name} --help has no {flag}");
            let first_words: String =
                schema["description"].as_str().unwrap().split_whitespace().take(6).collect::<Vec<_>>().join(" ");
            assert!(help.contains(&first_words), "{name} {flag}: {first_words:?} is not its help");
        }
    }

    // validate's --root repeats: an array, each a host.
    let two = json!({ "root": [root(), hosts_dir().join("desktop-rpl-nvidia").display().to_string()] });
    let validate = s.call(3, "tools/call", json!({ "name": "validate", "arguments": two }));
    assert_eq!(validate["result"]["structuredContent"]["hosts"].as_array().map(Vec::len), Some(2), "{validate}");
    // Two hosts for plan: clap's conflict, as `plan --root A --facts B` exits 2.
    let both = json!({ "root": root(), "facts": "f.json", "offline": true });
    let plan = s.call(4, "tools/call", json!({ "name": "plan", "arguments": both }));
    assert_eq!(plan["result"]["isError"], true, "{plan}");
    assert_eq!(plan["result"]["structuredContent"]["exit_code"], 2, "{plan}");
    let error = plan["result"]["structuredContent"]["error"].as_str().unwrap();
    assert!(error.contains("cannot be used with"), "{error}");
    // A wrong JSON type is a malformed call.
    let typed = s.call(5, "tools/call", json!({ "name": "plan", "arguments": { "offline": "yes" } }));
    assert_eq!(typed["error"]["code"], -32602, "{typed}");
    assert!(s.close().success());
}

#[test]
fn framing_in_the_2026_era() {
    let mut s = Session::start();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "0" },
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let discover = s.call(1, "server/discover", json!({ "_meta": meta }));
    let versions = discover["result"]["supportedVersions"].as_array().unwrap_or_else(|| panic!("{discover}"));
    assert!(versions.contains(&json!("2026-07-28")), "{discover}");
    let facts = s.call(2, "tools/call", json!({ "_meta": meta, "name": "facts", "arguments": { "root": root() } }));
    assert_eq!(facts["result"]["resultType"], "complete", "{facts}");
    assert_eq!(facts["result"]["structuredContent"]["document"]["schema"], "k3d-gpu.facts/v1");
    assert!(s.close().success());
}

fn initialize(s: &mut Session) {
    let init = s.call(
        1,
        "initialize",
        json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }),
    );
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
    s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
}

#[test]
fn the_servers_options_are_every_calls_defaults() {
    let config = repo().join("examples/lunar-lake-npu.toml").display().to_string();
    let mut s = Session::start_with(&["-c", &config, "--root", &root()], None);
    initialize(&mut s);
    let validate = s.call(2, "tools/call", json!({ "name": "validate", "arguments": {} }));
    let out = &validate["result"]["structuredContent"];
    assert_eq!(out["config"], config, "{validate}");
    assert_eq!(out["hosts"][0]["host"], root(), "{validate}");
    assert_eq!(out["passed"], true, "{validate}");
    // A call's own host replaces the default one.
    let other = hosts_dir().join("plain-laptop-amd").display().to_string();
    let facts = s.call(3, "tools/call", json!({ "name": "facts", "arguments": { "root": other } }));
    assert_eq!(facts["result"]["structuredContent"]["active"].as_array().map(Vec::len), Some(0), "{facts}");
    let plan = s.call(4, "tools/call", json!({ "name": "plan", "arguments": { "offline": true } }));
    let command = plan["result"]["structuredContent"]["apply_command"].as_str().unwrap();
    assert!(
        command.starts_with(&format!("k3d-gpu -c {config} --root {} apply --plan-hash sha256:", root())),
        "{command}"
    );
    // A global option mcp does not use is refused, as for every command.
    let json = K3dGpu::new().args(["mcp", "--json"]).stdin(Stdio::null()).output();
    assert_eq!(json.status.code(), Some(2));
}

#[test]
fn the_agents_port_forward_uses_the_context_that_reaches_its_cluster() {
    let mut s = Session::start();
    initialize(&mut s);
    let forward = |s: &mut Session, id: u64, arguments: Value| {
        let agent = s.call(id, "tools/call", json!({ "name": "agent", "arguments": arguments }));
        agent["result"]["structuredContent"]["endpoint"]["port_forward"].as_str().unwrap_or_default().to_string()
    };
    let config = |name: &str| repo().join(name).display().to_string();
    // k3d's context for a k3d cluster; the config's own for an existing one (k3d-<name>
    // would be another cluster, or none). A fleet's facts come from its nodes: no host given.
    let k3d = forward(&mut s, 2, json!({ "config": config("examples/lunar-lake-npu.toml"), "root": root() }));
    assert!(k3d.starts_with("kubectl --context k3d-"), "{k3d}");
    let fleet = forward(&mut s, 3, json!({ "config": config("examples/homelab-fleet.toml") }));
    assert!(fleet.starts_with("kubectl --context homelab -n k3d-gpu-agent port-forward svc/vllm"), "{fleet}");
}

#[test]
fn a_signal_ends_the_server_with_the_shells_code() {
    // The server owns SIGINT/SIGTERM/SIGHUP for its whole life (a running apply is stopped
    // first): it exits 128 + the signal, and is never left deaf to them.
    for (signal, code) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
        let mut s = Session::start();
        initialize(&mut s);
        let killed = Command::new("kill").arg(format!("-{signal}")).arg(s.child.id().to_string()).status().unwrap();
        assert!(killed.success());
        // stdin stays open: the signal, not the end of input, ends the server.
        let Session { mut child, stdin, stdout: _stdout } = s;
        let pid = child.id();
        let exited =
            support::within(&format!("SIG{signal} ends the server"), std::time::Duration::from_secs(60), move || {
                child.wait().unwrap()
            });
        drop(stdin);
        // Already gone when the test passes; only a server that outlived its deadline is here.
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
        assert_eq!(exited.code(), Some(code), "SIG{signal}: {exited:?}");
    }
}

/// A Docker socket that accepts connections and never answers: every read hangs until its
/// own deadline.
fn silent_docker(dir: &std::path::Path) -> (std::os::unix::net::UnixListener, String) {
    let path = dir.join("docker.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    (listener, format!("unix://{}", path.display()))
}

#[test]
fn a_call_past_its_deadline_answers_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (_listener, docker) = silent_docker(dir.path());
    let mut s = Session::start_with(&["--timeout", "1"], Some(&docker));
    initialize(&mut s);
    // Answered by the per-call deadline, which the answer names (Docker never answers).
    let observe = s.call(2, "tools/call", json!({ "name": "observe", "arguments": {} }));
    assert_eq!(observe["result"]["isError"], true, "{observe}");
    let text = observe["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no answer within 1s") && text.contains("--timeout"), "{text}");
    let list = s.call(3, "tools/list", json!({}));
    assert!(list["result"]["tools"].is_array(), "the server still serves: {list}");
}

#[test]
fn a_cancelled_call_is_not_answered_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (listener, docker) = silent_docker(dir.path());
    // A deadline of 1 s: a call that was not cancelled would be answered (with the timeout)
    // once it passes.
    let mut s = Session::start_with(&["--timeout", "1"], Some(&docker));
    initialize(&mut s);
    s.send(
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "observe", "arguments": {} } }),
    );
    // The call is under way once it has reached Docker (held open, never answered).
    let _held = support::within("the observe call reached Docker", std::time::Duration::from_secs(60), move || {
        let accepted = listener.accept().unwrap();
        (listener, accepted)
    });
    s.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 2 } }));
    // The next message is the answer to the next call: nothing comes for the cancelled one.
    let list = s.call(3, "tools/list", json!({}));
    assert!(list["result"]["tools"].is_array(), "{list}");
    let facts = s.call(4, "tools/call", json!({ "name": "facts", "arguments": { "root": root() } }));
    assert_eq!(facts["result"]["isError"], false, "{facts}");
    // And nothing comes later either: another observe call, started after the cancelled one
    // with the same deadline, is answered when its deadline passes; an answer to the
    // cancelled call would have come first.
    let later = s.call(5, "tools/call", json!({ "name": "observe", "arguments": {} }));
    assert_eq!(later["result"]["isError"], true, "{later}");
    assert!(
        later["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("no answer within 1s")),
        "{later}"
    );
}

/// A private engine with an imported node image, the fake API server starting like k3s (one
/// ready server node), and the controllers and the NPU plugin (`support::world`).
fn world(cluster: &str) -> World {
    let image = format!("k3d-gpu-test/node:{cluster}");
    import_image(&image, "0.1.0");
    let mut node = support::fake_apiserver::k3s_node(&format!("k3d-{cluster}-server-0"), true);
    node["metadata"]["labels"]["k3d-gpu.io/accelerators"] = json!("true");
    let w = World::start(State { nodes: vec![node], ..State::k3s() }, |s| {
        let npu = daemonset_applied(s, "intel-npu-plugin");
        roll_out(s);
        advertise(s, |_| true, "gpu.intel.com/xe", "8");
        if npu {
            advertise(s, |_| true, "npu.intel.com/accel", "1");
        }
    })
    .with_cluster(cluster);
    let config = format!("[cluster]\nname = \"{cluster}\"\nimage = \"{image}\"\n");
    std::fs::write(w.join("k3dgpu.toml"), config).unwrap();
    w
}

#[test]
#[ignore = "needs a Docker engine and the MCP Python SDK: .ci/run runs it (see README, Run the tests)"]
fn python_client() {
    if !docker_ready() {
        return;
    }
    let python = std::env::var("K3D_GPU_MCP_PYTHON")
        .unwrap_or_else(|_| repo().join("target/mcp-venv/bin/python").display().to_string());
    let sdk = Command::new(&python).args(["-c", "import mcp"]).output();
    assert!(
        sdk.is_ok_and(|o| o.status.success()),
        "no MCP Python SDK at {python}: python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install -r tests/mcp/requirements.txt (or set K3D_GPU_MCP_PYTHON)"
    );
    let w = world("mcp-py");
    let state = w.dir.path().join("state");
    let out = K3dGpu::program(&python)
        .docker()
        .arg(repo().join("tests/mcp/test_mcp.py"))
        .env_binary("MCP_TEST_BIN")
        .env("MCP_TEST_ROOT", root())
        .env("MCP_TEST_CONFIG", w.dir.path().join("k3dgpu.toml"))
        .env("KUBECONFIG", w.dir.path().join("kubeconfig"))
        .env("K3D_GPU_K3D", repo().join("tests/support/k3d-stub"))
        .env("K3D_STUB_KUBECONFIG_TEXT", kubeconfig_text(&w.server.url, w.cluster()))
        .env("XDG_STATE_HOME", &state)
        .env("XDG_DATA_HOME", w.dir.path().join("data"))
        .output();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{text}");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("all MCP client checks passed"), "{text}");
    // The applied plans made the cluster: its node containers are there.
    let filter = format!("label=k3d.cluster={}", w.cluster());
    let ps = Command::new("docker").args(["ps", "-aq", "--filter", &filter]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ps.stdout).trim().is_empty(), "no cluster after the accepted apply:\n{text}");
}

/// Issue 37, defect 2: with add-ons and the chat UI configured, the `agent` tool's endpoint
/// is the LLM server's (its API path, its port-forward), and each add-on is listed apart,
/// named: an AI agent that follows the endpoint talks to the model, not to the embeddings
/// server or Open WebUI.
#[test]
fn the_agent_tools_endpoint_is_the_llm_servers_and_the_addons_are_listed_apart() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[agent]\n[agent.chat]\n[addons.embeddings]\n").unwrap();
    let mut s = Session::start();
    initialize(&mut s);
    let arguments = json!({ "config": config.display().to_string(), "root": root() });
    let agent = s.call(2, "tools/call", json!({ "name": "agent", "arguments": arguments }));
    let out = &agent["result"]["structuredContent"];
    let api = out["placement"]["api"].as_str().unwrap_or_default().to_string();
    let endpoint = &out["endpoint"];
    assert_eq!(endpoint["in_cluster_url"], api.as_str(), "{out:#}");
    let service = endpoint["service"].as_str().unwrap_or_default();
    assert!(!["embeddings", "open-webui"].contains(&service), "the LLM server, not an add-on: {out:#}");
    assert!(
        endpoint["port_forward"]
            .as_str()
            .unwrap_or_default()
            .ends_with(&format!("port-forward svc/{service} 8000:8000")),
        "{out:#}"
    );
    let names: Vec<&str> = out["addons"].as_array().unwrap().iter().filter_map(|a| a["name"].as_str()).collect();
    assert!(names.contains(&"embeddings") && names.contains(&"open-webui"), "{names:?}");
    let webui = out["addons"].as_array().unwrap().iter().find(|a| a["name"] == "open-webui").unwrap();
    assert_eq!(webui["endpoint"]["local_url"], "http://127.0.0.1:8080", "{webui:#}");
    assert!(webui["endpoint"]["port_forward"].as_str().unwrap().contains("svc/open-webui 8080:8080"));
}

/// Issue 43, item 7: `cluster_health` reads the nodes (Ready or why not, taints, what each
/// advertises) and judges `k3d-gpu test`'s counts against the host's facts, without a pod.
#[test]
fn cluster_health_says_which_nodes_are_not_ready_and_what_no_node_advertises() {
    use support::fake_apiserver::k3s_node;
    let server = FakeApiServer::start_in_background(State::k3s());
    let mut ready = k3s_node("k3d-health-server-0", true);
    ready["status"]["allocatable"]["gpu.intel.com/xe"] = json!("1");
    let mut sick = k3s_node("k3d-health-agent-0", false);
    sick["spec"]["taints"] = json!([{ "key": "k3d-gpu.io/gpu-only", "value": "true", "effect": "NoSchedule" }]);
    sick["status"]["conditions"] =
        json!([{ "type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "PLEG is not healthy" }]);
    server.change(|s| s.nodes = vec![ready, sick]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[cluster]\nname = \"health\"\n").unwrap();
    let kubeconfig = server.kubeconfig("health", dir.path());
    let mut s = Session::start_env(&[], vec![("KUBECONFIG", kubeconfig.display().to_string())]);
    initialize(&mut s);
    let arguments = json!({ "config": config.display().to_string(), "root": root() });
    let health = s.call(2, "tools/call", json!({ "name": "cluster_health", "arguments": arguments }));
    assert_eq!(health["result"]["isError"], false, "{health:#}");
    let out = &health["result"]["structuredContent"];
    assert_eq!(out["context"], "k3d-health", "{out:#}");
    assert_eq!(out["healthy"], false, "{out:#}");
    let nodes = out["nodes"].as_array().unwrap();
    let node = |name: &str| nodes.iter().find(|n| n["name"] == name).unwrap_or_else(|| panic!("{name}: {out:#}"));
    assert_eq!(node("k3d-health-server-0")["ready"], true);
    assert_eq!(
        node("k3d-health-server-0")["accelerators"],
        json!({ "gpu.intel.com/xe": "1" }),
        "cpu is no accelerator"
    );
    let agent = node("k3d-health-agent-0");
    assert_eq!(agent["ready"], false);
    assert_eq!(agent["not_ready"], "Ready is False: KubeletNotReady PLEG is not healthy");
    assert_eq!(agent["taints"], json!(["k3d-gpu.io/gpu-only=true:NoSchedule"]));
    // The Lunar Lake host has an NPU: no node advertises it, which `test` would fail on too.
    let problems = out["problems"].as_array().unwrap();
    let npu = problems.iter().find(|p| p["resource"] == "npu.intel.com/accel").unwrap_or_else(|| panic!("{out:#}"));
    assert!(npu["problem"].as_str().unwrap().contains("no node advertises npu.intel.com/accel"), "{npu:#}");
    assert!(npu["fix"].as_str().unwrap().contains("k3d-gpu"), "{npu:#}");
    assert!(!problems.iter().any(|p| p["resource"] == "gpu.intel.com/xe"), "the xe GPU is advertised: {out:#}");
    // Only GET requests: the tool never writes, and never creates a smoke pod.
    assert!(server.requests().iter().all(|r| r.starts_with("GET ")), "{:?}", server.requests());
}

/// `cluster_health` judges as `k3d-gpu test` does: under `[sharing] mode = "dra"` the xe GPU
/// is served by the DRA driver, so no node advertising `gpu.intel.com/xe` is no problem (it
/// said "no node advertises" where `test` passes).
#[test]
fn cluster_health_does_not_ask_for_what_dra_serves() {
    use support::fake_apiserver::k3s_node;
    let server = FakeApiServer::start_in_background(State::k3s());
    server.change(|s| s.nodes = vec![k3s_node("k3d-dra-server-0", true)]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[cluster]\nname = \"dra\"\n[sharing]\nmode = \"dra\"\n").unwrap();
    let kubeconfig = server.kubeconfig("dra", dir.path());
    let mut s = Session::start_env(&[], vec![("KUBECONFIG", kubeconfig.display().to_string())]);
    initialize(&mut s);
    let arguments = json!({ "config": config.display().to_string(), "root": root() });
    let health = s.call(2, "tools/call", json!({ "name": "cluster_health", "arguments": arguments }));
    assert_eq!(health["result"]["isError"], false, "{health:#}");
    let problems = health["result"]["structuredContent"]["problems"].as_array().unwrap().clone();
    assert!(!problems.iter().any(|p| p["resource"] == "gpu.intel.com/xe"), "DRA serves xe: {problems:#?}");
    // The NPU has no DRA driver: still asked for, as `test` asks.
    assert!(problems.iter().any(|p| p["resource"] == "npu.intel.com/accel"), "{problems:#?}");
}

/// Issue 43, item 7: `agent_status` is `agent status`'s core as a tool: with no server
/// running it answers, read-only, with the problem, not an error.
#[test]
fn agent_status_says_what_is_missing_when_the_server_is_not_there() {
    let server = FakeApiServer::start_in_background(State::k3s());
    server.change(|s| s.nodes = vec![support::fake_apiserver::k3s_node("k3d-status-server-0", true)]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::write(&config, "[cluster]\nname = \"status\"\n\n[agent]\n").unwrap();
    let kubeconfig = server.kubeconfig("status", dir.path());
    let mut s = Session::start_env(&[], vec![("KUBECONFIG", kubeconfig.display().to_string())]);
    initialize(&mut s);
    let arguments = json!({ "config": config.display().to_string(), "root": root(), "timeout": "5" });
    let status = s.call(2, "tools/call", json!({ "name": "agent_status", "arguments": arguments }));
    assert_eq!(status["result"]["isError"], false, "{status:#}");
    let out = &status["result"]["structuredContent"];
    assert_eq!(out["schema"], "k3d-gpu.agent-status/v1", "{out:#}");
    assert!(out["reply"].is_null(), "{out:#}");
    let problems: Vec<&str> = out["problems"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(problems.iter().any(|p| p.starts_with("Deployment k3d-gpu-agent/")), "{problems:?}");
    assert!(server.requests().iter().all(|r| r.starts_with("GET ")), "{:?}", server.requests());
    // Its own range: a timeout of 0 is refused as the CLI refuses it.
    let zero = json!({ "config": config.display().to_string(), "root": root(), "timeout": "0" });
    let refused = s.call(3, "tools/call", json!({ "name": "agent_status", "arguments": zero }));
    assert_eq!(refused["result"]["isError"], true, "{refused:#}");
    assert_eq!(refused["result"]["structuredContent"]["exit_code"], 2, "{refused:#}");
}

/// Issue 43, item 7: `recommend_placement` is `agent --model-size`: where a model of N GiB
/// would run, and why, with no cluster; the size is required.
#[test]
fn recommend_placement_answers_as_agent_model_size_does() {
    let mut s = Session::start();
    initialize(&mut s);
    let arguments = json!({ "root": root(), "model_size": "4" });
    let advice = s.call(2, "tools/call", json!({ "name": "recommend_placement", "arguments": arguments }));
    assert_eq!(advice["result"]["isError"], false, "{advice:#}");
    let out = &advice["result"]["structuredContent"];
    assert_eq!(out["recommended"]["device"], "gpu", "{out:#}");
    assert_eq!(out["recommended"]["placed"], true, "{out:#}");
    assert_eq!(out["needs_gib"], 4.8);
    // The same advice as the CLI's document.
    let cli = K3dGpu::new().args(["agent", "--json", "--model-size", "4", "--root", &root()]).output();
    let doc: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(doc["advice"]["recommended"], out["recommended"], "{doc:#}");
    assert_eq!(doc["advice"]["reason"], out["reason"]);
    let missing = s.call(3, "tools/call", json!({ "name": "recommend_placement", "arguments": { "root": root() } }));
    assert_eq!(missing["error"]["code"], -32602, "{missing:#}");
    let negative = json!({ "root": root(), "model_size": "-3" });
    let refused = s.call(4, "tools/call", json!({ "name": "recommend_placement", "arguments": negative }));
    assert_eq!(refused["result"]["isError"], true, "{refused:#}");
    assert!(refused["result"]["content"][0]["text"].as_str().unwrap().contains("GiB"), "{refused:#}");
}
