//! Doctor's checks of the tools on the real host: docker, k3d and kubectl present and
//! reachable. The host rules themselves are pure and live in `facts::rules`; this is the
//! only part of doctor that runs programs, each with a timeout so a hung daemon cannot hang us.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::facts::{Finding, Level};

const TOOL_TIMEOUT: Duration = Duration::from_secs(5);

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
pub fn run_with_timeout(program: &str, args: &[&str], timeout: Duration) -> Ran {
    let child =
        Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
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
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let output = stdout.join().unwrap_or_default() + &stderr.join().unwrap_or_default();
    match status {
        Some(status) => Ran { ok: status.success(), output, timed_out: false, missing: false },
        None => Ran { ok: false, output, timed_out: true, missing: false },
    }
}

/// docker, k3d and kubectl: present, and docker's daemon reachable.
pub fn tool_findings() -> Vec<Finding> {
    let mut out = Vec::new();
    let checks: [(&str, &[&str], &str, &str); 3] = [
        (
            "docker",
            &["info", "--format", "{{.ServerVersion}}"],
            "docker-unreachable",
            "start the Docker daemon (`sudo systemctl start docker`) and check that your user may use it (DOCKER_HOST, the docker group)",
        ),
        ("k3d", &["version"], "k3d-broken", "reinstall k3d v5 (https://k3d.io)"),
        ("kubectl", &["version", "--client"], "kubectl-broken", "reinstall kubectl"),
    ];
    for (tool, args, code, fix) in checks {
        let ran = run_with_timeout(tool, args, TOOL_TIMEOUT);
        let evidence = format!("{tool} {}", args.join(" "));
        if ran.missing {
            out.push(
                Finding::new(Level::Fail, &format!("{tool}-missing"), format!("{tool} is not on PATH"), evidence)
                    .with_fix(format!("install {tool}")),
            );
        } else if ran.timed_out {
            out.push(
                Finding::new(
                    Level::Fail,
                    code,
                    format!("`{tool} {}` did not answer within {}s", args.join(" "), TOOL_TIMEOUT.as_secs()),
                    evidence,
                )
                .with_fix(fix),
            );
        } else if !ran.ok {
            let first = ran.output.lines().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim().to_string();
            out.push(
                Finding::new(Level::Fail, code, format!("`{tool} {}` failed: {first}", args.join(" ")), evidence)
                    .with_fix(fix),
            );
        } else {
            let first = ran.output.lines().next().unwrap_or_default().trim().to_string();
            out.push(Finding::new(Level::Info, &format!("{tool}-ok"), format!("{tool}: {first}"), evidence));
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
}
