//! The node image's self-check, its pure half: what the image must *run* for k3d to start a
//! node from it and for k3s to work there, the probe script that runs it, and the verdict on
//! what the probe printed. `apply/node_check.rs` runs the probe in the image (Docker, no
//! cluster); `apply` refuses before its first k3d call, and `doctor` reports, when any of it
//! fails.
//!
//! Proof is by running, never by listing. k3d v5.9.0 starts every node through its own
//! `/bin/k3d-entrypoint.sh` (`pkg/types/fixes/assets/k3d-entrypoint.sh`): a `#!/bin/sh` script
//! under `set -o errexit` that stamps its log with `date` and sets `trap … SIGTERM SIGINT
//! SIGQUIT SIGHUP`. dash (Ubuntu's `/bin/sh`) rejects signal names with the `SIG` prefix, so
//! errexit ends the script, and the node, at once. The probe therefore runs under the image's
//! own `/bin/sh` with those same constructs first, then each binary k3s needs with its version
//! flag, as k3s and its scripts will run them. The constructs and the tools are recorded with
//! their upstream commits in `tests/upstream/k3d-entrypoint.txt` and
//! `tests/upstream/k3s-root-bin.txt`.
//!
//! Why these binaries: rancher/k3s's `/bin/k3s` is the server build, which unpacks no data
//! dir, so its agent runs containerd, the runc shim, runc and the CNI plugins through PATH
//! (`tests/upstream/k3s-package-bin.txt`). k3s-root puts `ipset`, `conntrack` and the
//! iptables wrappers beside them; without `ipset` k3s starts but skips its network policy
//! controller, so no NetworkPolicy is enforced. With NVIDIA, k3s adds the nvidia runtime to
//! containerd only when it finds `nvidia-container-runtime`.

use serde_json::Value;

/// How the probe proves one requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Runs the command line (a binary and its version flag); exit 0 passes.
    Command(&'static str),
    /// Resolves the name on PATH to an executable, which a dangling link does not (CNI
    /// plugins answer only the CNI protocol, and `modprobe` has no version flag that every
    /// build accepts).
    OnPath(&'static str),
}

/// One thing the node image must run, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    pub run: Run,
    pub why: &'static str,
}

impl Check {
    /// The check as the probe's argument and as the text a person reads: `k3s --version`,
    /// or the plugin's name.
    pub fn label(&self) -> &'static str {
        match self.run {
            Run::Command(line) | Run::OnPath(line) => line,
        }
    }

    fn probe_arg(&self) -> String {
        match self.run {
            Run::Command(line) => format!("run:{line}"),
            Run::OnPath(name) => format!("path:{name}"),
        }
    }
}

const CNI_WHY: &str = "a CNI plugin link to `cni` that k3s's flannel network config runs";

const fn command(line: &'static str, why: &'static str) -> Check {
    Check { run: Run::Command(line), why }
}

const fn on_path(name: &'static str, why: &'static str) -> Check {
    Check { run: Run::OnPath(name), why }
}

/// What every k3s node image must run, in the order the probe runs them.
const ALWAYS: &[Check] = &[
    command("date -Iseconds", "k3d's entrypoint stamps every line of its log with it, under errexit"),
    command("k3s --version", "the k3s binary k3d's entrypoint starts"),
    command("containerd --version", "the container runtime k3s's agent starts through PATH"),
    command("containerd-shim-runc-v2 -v", "containerd's runc shim, found through PATH"),
    command("runc --version", "the OCI runtime the shim runs"),
    command(
        "ipset --version",
        "k3s's network policy controller; without it k3s enforces no NetworkPolicy at all (it also asks the kernel for its ipset protocol)",
    ),
    command("iptables --version", "kube-proxy, flannel and k3d's DNS fix program the node's packet filter with it"),
    command("conntrack --version", "kube-proxy clears stale UDP flows with it"),
    on_path(
        "modprobe",
        "k3s loads the kernel modules it needs (overlay, br_netfilter, …) with it; k3s-root links it to its busybox",
    ),
    on_path("bridge", CNI_WHY),
    on_path("flannel", CNI_WHY),
    on_path("host-local", CNI_WHY),
    on_path("loopback", CNI_WHY),
    on_path("portmap", CNI_WHY),
    on_path("bandwidth", CNI_WHY),
    on_path("firewall", CNI_WHY),
];

const NVIDIA: Check = command(
    "nvidia-container-runtime --version",
    "k3s adds the nvidia runtime to containerd only when it finds this (NVIDIA is active)",
);

/// What a node image must run: k3s's package and k3s-root's tools, and the NVIDIA runtime
/// when NVIDIA is active.
pub fn required(nvidia: bool) -> Vec<Check> {
    let mut out = ALWAYS.to_vec();
    if nvidia {
        out.push(NVIDIA);
    }
    out
}

/// Whether a cluster spec (the graph's `k3d/cluster/…` resource) gives its nodes NVIDIA GPUs:
/// the compiler sets `gpus` exactly when NVIDIA is active.
pub fn nvidia_in(cluster_spec: &Value) -> bool {
    cluster_spec["gpus"].is_string()
}

/// The shell constructs of k3d's node entrypoint, as the verdict names them.
pub const SHELL_CONSTRUCTS: &str = "set -o errexit; set -o nounset; trap … SIGTERM SIGINT SIGQUIT SIGHUP";

/// The probe, a POSIX `sh -c` script run as `/bin/sh -c PROBE k3d-gpu-node-check ARG…`. First
/// k3d's entrypoint constructs: a shell that rejects them stops before `shell ok`, as the
/// entrypoint would stop. Then, per argument, `ran RC LABEL` and up to four lines of what the
/// command printed, each behind `| ` so no output can pass for a result line. Only builtins
/// besides the commands checked, so a missing `head` or `sed` cannot fail a good image.
/// Globbing is off: the command lines are split on spaces, never expanded.
pub const PROBE: &str = r#"set -o errexit
set -o nounset
set -f
trap 'exit 143' SIGTERM SIGINT SIGQUIT SIGHUP
echo "shell ok"
for arg in "$@"; do
  label=${arg#*:}
  case $arg in
    run:*) if out=$($label 2>&1 </dev/null); then rc=0; else rc=$?; fi ;;
    path:*) if out=$(command -v "$label"); then rc=0; else rc=127; out="not found on PATH"; fi ;;
    *) continue ;;
  esac
  echo "ran $rc $label"
  n=0
  printf '%s\n' "$out" | while IFS= read -r line; do
    n=$((n + 1))
    [ "$n" -le 4 ] || break
    printf '| %s\n' "$line"
  done
done
echo "probe done"
"#;

/// The entrypoint (`/bin/sh -c PROBE $0`) and the command (one argument per check) that run
/// the probe.
pub fn probe_command(required: &[Check]) -> (Vec<String>, Vec<String>) {
    let entrypoint = ["/bin/sh", "-c", PROBE, "k3d-gpu-node-check"].map(String::from).to_vec();
    (entrypoint, required.iter().map(Check::probe_arg).collect())
}

/// What one check gave: its exit status and the first lines it printed (escaped, one line
/// each: they are the image's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub check: Check,
    pub status: i32,
    pub output: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.status == 0
    }

    /// `k3s --version: k3s version v1.37.1+k3s1 (…)` for a pass, or what failed and how.
    pub fn describe(&self) -> String {
        let printed = if self.output.is_empty() { "no output".to_string() } else { self.output.join(" / ") };
        match (self.passed(), self.status, self.check.run) {
            (true, _, _) => format!("{}: {printed}", self.check.label()),
            (false, _, Run::OnPath(name)) => format!("{name} is not an executable on the image's PATH"),
            (false, 127, Run::Command(line)) => format!("`{line}` found no such command ({printed})"),
            (false, 126, Run::Command(line)) => format!("`{line}` is not executable ({printed})"),
            (false, status, Run::Command(line)) => format!("`{line}` exited {status}: {printed}"),
        }
    }
}

/// What the probe showed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    /// The image's `/bin/sh` ran k3d's entrypoint constructs; when false, nothing else ran.
    pub shell_ok: bool,
    /// What the shell said when it stopped (its stderr, escaped and cut short).
    pub shell_error: String,
    /// Each check the probe answered, in order.
    pub outcomes: Vec<Outcome>,
    /// The checks with no answer (the probe stopped before them).
    pub unanswered: Vec<Check>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.shell_ok && self.unanswered.is_empty() && self.outcomes.iter().all(Outcome::passed)
    }

    /// The checks that passed.
    pub fn passed(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| o.passed())
    }

    /// The sentence that names what failed in `image`: the command, its output, and why k3d
    /// or k3s needs it.
    pub fn refusal(&self, image: &str) -> String {
        if !self.shell_ok {
            let said =
                if self.shell_error.is_empty() { "it printed nothing".to_string() } else { self.shell_error.clone() };
            return crate::escape::capped(format!(
                "the node image {image} cannot be a k3d node: its /bin/sh stops at what k3d's node entrypoint runs first ({SHELL_CONSTRUCTS}): {said}; k3d's entrypoint, PID 1 of every node, would exit at once"
            ));
        }
        let mut failed: Vec<String> = self
            .outcomes
            .iter()
            .filter(|o| !o.passed())
            .map(|o| format!("{} ({})", o.describe(), o.check.why))
            .collect();
        failed
            .extend(self.unanswered.iter().map(|c| format!("`{}` never ran: the probe stopped before it", c.label())));
        // Each check's output is cut already; the whole is cut too (a dozen failures).
        crate::escape::capped(format!(
            "the node image {image} fails {} k3s needs: {}; a cluster from it would not start or would run without it",
            if failed.len() == 1 { "a check" } else { "checks" },
            failed.join("; ")
        ))
    }
}

/// At most this many characters of one line the image printed.
const LINE_CAP: usize = 200;

fn clean(line: &str) -> String {
    let line = crate::escape::one_line(line.trim_end());
    match line.char_indices().nth(LINE_CAP) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.into_owned(),
    }
}

/// The verdict on the probe's stdout and stderr. Only the probe's own lines count: a check
/// is answered by a `ran RC LABEL` line whose label is exactly that check's.
pub fn verdict(required: &[Check], stdout: &str, stderr: &str) -> Verdict {
    let mut lines = stdout.lines().peekable();
    let mut out = Verdict::default();
    while let Some(line) = lines.next() {
        if line.trim_end() == "shell ok" {
            out.shell_ok = true;
            continue;
        }
        let Some((status, label)) = line.strip_prefix("ran ").and_then(|rest| rest.trim_end().split_once(' ')) else {
            continue;
        };
        let Ok(status) = status.parse::<i32>() else { continue };
        let Some(check) = required.iter().find(|c| c.label() == label) else { continue };
        if out.outcomes.iter().any(|o| o.check == *check) {
            continue;
        }
        let mut output = Vec::new();
        while let Some(printed) = lines.peek().and_then(|l| l.strip_prefix("| ")) {
            output.push(clean(printed));
            lines.next();
        }
        out.outcomes.push(Outcome { check: *check, status, output });
    }
    if !out.shell_ok {
        // Only the shell's own stderr explains a stop before `shell ok`.
        let said: Vec<String> = stderr.lines().filter(|l| !l.trim().is_empty()).take(3).map(clean).collect();
        out.shell_error = said.join(" / ");
        out.outcomes.clear();
    }
    out.unanswered = required.iter().filter(|c| !out.outcomes.iter().any(|o| o.check == **c)).copied().collect();
    out
}

/// The fix for a refused image: the shipped Dockerfile's layout, or the user's own image.
pub const FIX: &str = "copy all of rancher/k3s's /bin over the image's /bin, as the shipped Dockerfile and k3d's CUDA guide do: its busybox /bin/sh, k3s, containerd, the runc shim, runc, the CNI plugins and k3s-root's ipset, conntrack and iptables; with NVIDIA, install the NVIDIA container toolkit in it. Rerun `k3d-gpu doctor` to run the check again";

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(check: &Check, status: i32, printed: &[&str]) -> String {
        let mut out = format!("ran {status} {}\n", check.label());
        for line in printed {
            out.push_str(&format!("| {line}\n"));
        }
        out
    }

    fn all_passing(required: &[Check]) -> String {
        let mut out = "shell ok\n".to_string();
        for c in required {
            out.push_str(&answer(c, 0, &[&format!("{} v1", c.label())]));
        }
        out + "probe done\n"
    }

    #[test]
    fn nvidia_adds_its_runtime() {
        let plain = required(false);
        let labels: Vec<&str> = plain.iter().map(Check::label).collect();
        assert!(labels.contains(&"ipset --version") && !labels.contains(&"nvidia-container-runtime --version"));
        let with = required(true);
        assert_eq!(with.len(), plain.len() + 1);
        assert_eq!(with.last().unwrap().label(), "nvidia-container-runtime --version");
        assert!(nvidia_in(&serde_json::json!({"gpus": "all"})));
        assert!(!nvidia_in(&serde_json::json!({"image": "x"})));
    }

    #[test]
    fn every_check_passing_is_ok() {
        let required = required(true);
        let v = verdict(&required, &all_passing(&required), "");
        assert!(v.ok(), "{v:?}");
        assert_eq!(v.passed().count(), required.len());
        assert_eq!(v.outcomes[1].describe(), "k3s --version: k3s --version v1");
    }

    #[test]
    fn a_shell_that_rejects_the_trap_refuses_the_image_with_what_it_said() {
        let required = required(false);
        // dash: errexit ends the script at the trap, before `shell ok`.
        let v = verdict(&required, "", "k3d-gpu-node-check: 4: trap: SIGTERM: bad trap\n");
        assert!(!v.ok() && !v.shell_ok);
        assert_eq!(v.unanswered.len(), required.len());
        let text = v.refusal("img:1");
        assert!(text.contains("img:1") && text.contains("trap: SIGTERM: bad trap"), "{text}");
        assert!(text.contains("SIGTERM SIGINT SIGQUIT SIGHUP"), "{text}");
        // Lines that look like results do not count without the shell's own `shell ok`.
        let v = verdict(&required, &all_passing(&required).replace("shell ok\n", ""), "");
        assert!(!v.ok() && v.outcomes.is_empty());
    }

    #[test]
    fn a_failing_command_is_named_with_its_status_output_and_reason() {
        let required = required(false);
        let ipset = required.iter().find(|c| c.label() == "ipset --version").unwrap();
        let text = all_passing(&required).replace(
            &answer(ipset, 0, &["ipset --version v1"]),
            &answer(ipset, 127, &["k3d-gpu-node-check: 1: ipset: not found"]),
        );
        let v = verdict(&required, &text, "");
        assert!(!v.ok());
        let refusal = v.refusal("img");
        assert!(
            refusal.contains("`ipset --version` found no such command (k3d-gpu-node-check: 1: ipset: not found)"),
            "{refusal}"
        );
        assert!(refusal.contains("enforces no NetworkPolicy"), "{refusal}");
        assert!(!refusal.contains("k3s --version"), "only the failure is named: {refusal}");
    }

    #[test]
    fn output_lines_cannot_forge_a_result_and_are_escaped() {
        let required = required(false);
        let runc = required.iter().find(|c| c.label() == "runc --version").unwrap();
        // A command's output is behind `| `: a forged result inside it stays output.
        let forged = format!("shell ok\n{}", answer(runc, 1, &["ran 0 runc --version", "\u{1b}[2Jboom"]));
        let v = verdict(&required, &forged, "");
        let outcome = v.outcomes.iter().find(|o| o.check == *runc).unwrap();
        assert_eq!(outcome.status, 1);
        assert!(outcome.output[1].ends_with("boom") && !outcome.output[1].contains('\u{1b}'), "{:?}", outcome.output);
        // A check the probe never reached is named as such.
        assert!(v.unanswered.iter().any(|c| c.label() == "k3s --version"));
        assert!(v.refusal("img").contains("`k3s --version` never ran"));
    }

    #[test]
    fn the_probe_takes_one_argument_per_check() {
        let (entrypoint, cmd) = probe_command(&required(true));
        assert_eq!(entrypoint[..2], ["/bin/sh", "-c"]);
        assert_eq!(entrypoint[2], PROBE);
        assert_eq!(cmd.last().map(String::as_str), Some("run:nvidia-container-runtime --version"));
        assert!(cmd.contains(&"path:flannel".to_string()));
        assert!(PROBE.contains("trap 'exit 143' SIGTERM SIGINT SIGQUIT SIGHUP"));
    }
}
