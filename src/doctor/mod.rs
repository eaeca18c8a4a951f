//! Doctor's checks of the tools on the real host: docker, k3d and kubectl present and
//! reachable. The host rules themselves are pure and live in `facts::rules`; this is the
//! only part of doctor that runs programs, each with a timeout so a hung daemon cannot hang us.

pub mod firmware;
pub mod live;
pub mod perf;
pub mod perf_engine;
pub mod perf_gpu;
pub mod perf_power;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::facts::{Finding, Level};

const TOOL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long output is still collected after a timed-out tool's group was killed.
const GRACE: Duration = Duration::from_millis(500);

/// How one tool check ran: the exit status (None when it could not start or timed out) and
/// its output.
pub struct Ran {
    pub ok: bool,
    pub output: String,
    pub timed_out: bool,
    pub missing: bool,
}

/// Runs `program args` with a deadline. Output is drained by threads while we wait, so a
/// chatty tool cannot fill its pipe and look hung.
///
/// The tool runs in a process group of its own, and a timeout kills the whole group: a tool
/// can leave a child holding its pipes (docker with an `ssh://` DOCKER_HOST runs ssh), and the
/// output would never end. Whatever still holds them after that is not waited for.
pub fn run_with_timeout(program: &str, args: &[&str], timeout: Duration) -> Ran {
    use std::os::unix::process::CommandExt;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return Ran {
                ok: false,
                output: e.to_string(),
                timed_out: false,
                missing: e.kind() == std::io::ErrorKind::NotFound,
            };
        }
    };
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            let _ = tx.send(text);
        });
        rx
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // The group's id is the child's pid (`process_group(0)`).
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // A tool that exited has closed its pipes unless it left a child behind; one that timed
    // out had its group killed. Either way, output still open after a grace period is dropped.
    let grace = if status.is_some() { timeout } else { GRACE };
    let collect = |rx: mpsc::Receiver<String>| rx.recv_timeout(grace).unwrap_or_default();
    let output = collect(stdout) + &collect(stderr);
    match status {
        Some(status) => Ran { ok: status.success(), output, timed_out: false, missing: false },
        None => Ran { ok: false, output, timed_out: true, missing: false },
    }
}

/// The query `facts capture` asks nvidia-smi on the real host: each GPU's memory (MiB) and
/// PCI address, which sysfs does not give.
pub const NVIDIA_SMI_QUERY: [&str; 2] = ["--query-gpu=memory.total,pci.bus_id", "--format=csv,noheader,nounits"];

/// nvidia-smi's answer to [`NVIDIA_SMI_QUERY`], or `None` when it is not installed, fails,
/// times out or prints something that is not that table (checked by the parser detection uses).
pub fn nvidia_smi_memory() -> Option<String> {
    let ran = run_with_timeout("nvidia-smi", &NVIDIA_SMI_QUERY, Duration::from_secs(10));
    let rows = crate::parse::parse_nvidia_smi_memory(&ran.output).ok()?;
    (ran.ok && !rows.is_empty()).then_some(ran.output)
}

/// One tool check: the tool's name, the program run (the name, looked up on PATH), its
/// arguments, the finding code when it fails and the fix.
struct ToolCheck<'a> {
    tool: &'a str,
    program: &'a str,
    args: &'a [&'a str],
    code: &'a str,
    fix: &'a str,
    /// Where to get the tool when it is not on PATH.
    install: &'a str,
}

const TOOLS: [ToolCheck<'static>; 3] = [
    ToolCheck {
        tool: "docker",
        program: "docker",
        args: &["info", "--format", "{{.ServerVersion}}"],
        code: "docker-unreachable",
        fix: "start the Docker daemon (`sudo systemctl start docker`) and check that your user may use it (DOCKER_HOST, the docker group)",
        install: "install Docker Engine (https://docs.docker.com/engine/install/, or your distribution's docker.io package)",
    },
    ToolCheck {
        tool: "k3d",
        program: "k3d",
        args: &["version"],
        code: "k3d-broken",
        fix: "reinstall k3d v5 (https://k3d.io)",
        install: "install k3d v5 (https://k3d.io: `curl -s https://raw.githubusercontent.com/k3d-io/k3d/main/install.sh | bash`)",
    },
    ToolCheck {
        tool: "kubectl",
        program: "kubectl",
        args: &["version", "--client"],
        code: "kubectl-broken",
        fix: "reinstall kubectl",
        install: "install kubectl (https://kubernetes.io/docs/tasks/tools/)",
    },
];

/// docker, k3d and kubectl: present, and docker's daemon reachable.
pub fn tool_findings() -> Vec<Finding> {
    check_tools(&TOOLS, TOOL_TIMEOUT)
}

fn check_tools(checks: &[ToolCheck], timeout: Duration) -> Vec<Finding> {
    let mut out = Vec::new();
    for &ToolCheck { tool, program, args, code, fix, install } in checks {
        let ran = run_with_timeout(program, args, timeout);
        let evidence = format!("{tool} {}", args.join(" "));
        if ran.missing {
            out.push(
                Finding::new(Level::Fail, &format!("{tool}-missing"), format!("{tool} is not on PATH"), evidence)
                    .with_fix(install),
            );
        } else if ran.timed_out {
            out.push(
                Finding::new(
                    Level::Fail,
                    code,
                    format!("`{tool} {}` did not answer within {timeout:?}", args.join(" ")),
                    evidence,
                )
                .with_fix(fix),
            );
        } else if !ran.ok {
            // docker names its DOCKER_HOST in its errors, userinfo and all.
            let first = ran.output.lines().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
            let first = crate::secrets::blank_passwords(first);
            out.push(
                Finding::new(Level::Fail, code, format!("`{tool} {}` failed: {first}", args.join(" ")), evidence)
                    .with_fix(fix),
            );
        } else {
            let first = ran.output.lines().next().unwrap_or_default().trim().to_string();
            out.push(Finding::new(Level::Info, &format!("{tool}-ok"), format!("{tool}: {first}"), evidence));
            // Docker's floor is read from the engine itself (`live::engine_findings`).
            if tool == "k3d" {
                out.push(live::version_floor("k3d", &ran.output, live::K3D_FLOOR));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_reported_as_missing() {
        let ran = run_with_timeout("k3d-gpu-no-such-program", &[], Duration::from_secs(1));
        assert!(ran.missing && !ran.ok);
    }

    #[test]
    fn a_chatty_program_is_not_mistaken_for_a_hung_one() {
        let ran = run_with_timeout("sh", &["-c", "head -c 200000 /dev/zero | tr '\\0' x"], Duration::from_secs(10));
        assert!(ran.ok && !ran.timed_out);
        assert_eq!(ran.output.len(), 200_000);
    }

    #[test]
    fn a_hung_program_is_killed_at_the_deadline() {
        let start = Instant::now();
        let ran = run_with_timeout("sleep", &["30"], Duration::from_millis(200));
        assert!(ran.timed_out);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_timeout_kills_what_the_tool_left_holding_its_pipes() {
        // Like docker with an ssh:// DOCKER_HOST: the tool's own child keeps stdout open.
        let start = Instant::now();
        let ran = run_with_timeout("sh", &["-c", "sleep 30 & sleep 30"], Duration::from_millis(200));
        assert!(ran.timed_out && !ran.ok);
        // A hang detector, not a timing test: a hang would take the 30 s of the sleeps.
        assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    }

    #[test]
    fn each_tool_outcome_is_its_own_finding() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let stub = |name: &str, body: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path.to_str().unwrap().to_string()
        };
        let (ok, failed, hung) = (
            stub("ok", "echo 'v1.2.3'; echo 'more'"),
            stub("failed", "echo; echo 'Cannot connect to the daemon' >&2; exit 1"),
            stub("hung", "sleep 30"),
        );
        let missing = dir.path().join("missing").to_str().unwrap().to_string();
        let check = |tool, program| ToolCheck {
            tool,
            program,
            args: &["version"],
            code: "t-broken",
            fix: "fix it",
            install: "get it from example.org",
        };
        let checks = [
            check("okay", ok.as_str()),
            check("bad", failed.as_str()),
            check("slow", hung.as_str()),
            check("gone", &missing),
        ];
        let findings = check_tools(&checks, Duration::from_millis(300));
        let got: Vec<(Level, &str, &str, Option<&str>)> =
            findings.iter().map(|f| (f.level, f.code.as_str(), f.text.as_str(), f.fix.as_deref())).collect();
        assert_eq!(
            got,
            [
                (Level::Info, "okay-ok", "okay: v1.2.3", None),
                (Level::Fail, "t-broken", "`bad version` failed: Cannot connect to the daemon", Some("fix it")),
                (Level::Fail, "t-broken", "`slow version` did not answer within 300ms", Some("fix it")),
                (Level::Fail, "gone-missing", "gone is not on PATH", Some("get it from example.org")),
            ]
        );
        assert!(findings.iter().all(|f| f.evidence.ends_with(" version")));
    }
}
