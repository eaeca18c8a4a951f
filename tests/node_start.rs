//! Issue 35: the node image runs as a k3d node, shown by running it as k3d runs it.
//!
//! The shipped Dockerfile is built through apply's own build path (the engine's build API)
//! on stand-in bases made here (`support::node_images`): a rancher/k3s whose `/bin` is laid
//! out as upstream's, with busybox as `/bin/sh`, and an Ubuntu whose `/bin/sh` is dash. Only
//! the NVIDIA apt step is skipped (`NVIDIA_CONTAINER_TOOLKIT=skip`: nothing here reaches
//! NVIDIA's repository); every other line is the shipped one. The image is then started the
//! way k3d v5.9.0 starts a server and an agent (`pkg/runtimes/docker/translate.go`,
//! `pkg/client/node.go`): privileged, with docker-init, restart `unless-stopped`, tmpfs on
//! /run and /var/run, k3d's node hooks written into `/bin` before start, and
//! `/bin/k3d-entrypoint.sh` as the entrypoint with the role as the command. The entrypoint
//! and hooks are ours (`tests/fixtures/k3d-node/`), written from what upstream's run
//! (`tests/upstream/k3d-entrypoint.txt`). Both nodes must still be running, never restarted,
//! after 20 s.
//!
//! The control: an image with the layout the Dockerfile had before (k3s's binaries copied
//! onto Ubuntu, so `/bin/sh` stays dash) must die as it did on a real machine
//! (`trap: SIGTERM: bad trap`), and the self-check must refuse it.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use support::{docker_ready, node_images, repo};

/// A deadline for a node to reach k3s or stop: it only turns a hang into a failure.
const DEADLINE: Duration = Duration::from_secs(120);

/// Waits until node `name`'s log has a line containing `marker` (`docker logs --follow`).
fn wait_for_log(name: &str, marker: &str) {
    let (name, marker) = (name.to_string(), marker.to_string());
    let what = format!("{name} logs {marker:?}");
    support::within(&what, DEADLINE, move || {
        use std::io::BufRead;
        let mut follow = Command::new("sh")
            .args(["-c", "exec docker logs --follow \"$1\" 2>&1", "sh", &name])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = follow.stdout.take().unwrap();
        let seen = std::io::BufReader::new(out).lines().map_while(Result::ok).any(|l| l.contains(&marker));
        let _ = follow.kill();
        let _ = follow.wait();
        assert!(seen, "{name}: its log ended without {marker:?}");
    });
}

/// Removes what a test made, whatever happened.
#[derive(Default)]
struct Made {
    containers: Vec<String>,
    images: Vec<String>,
}

impl Drop for Made {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = Command::new("docker").args(["rm", "-f", "-v", c]).output();
        }
        for i in &self.images {
            let _ = Command::new("docker").args(["rmi", "-f", i]).output();
        }
    }
}

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn engine() -> bollard::Docker {
    let ep = k3d_gpu::observe::docker::endpoint(&|k: &str| std::env::var(k).ok(), None);
    k3d_gpu::observe::docker::connect(&ep).unwrap().with_timeout(k3d_gpu::apply::node_image::BUILD_TIMEOUT)
}

/// The shipped Dockerfile built by apply's build action on the stand-in bases tagged `tag`.
fn build_shipped(runtime: &tokio::runtime::Runtime, tag: &str) -> String {
    let args: BTreeMap<String, String> = [("K3S_TAG", tag), ("UBUNTU_TAG", tag), ("NVIDIA_CONTAINER_TOOLKIT", "skip")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let source = k3d_gpu::node_image::Source::shipped();
    let resolved = k3d_gpu::node_image::resolve(&source, &args, &k3d_gpu::images::Locks::default()).unwrap();
    let log = std::sync::Mutex::new(Vec::new());
    let say = |line: &str| log.lock().unwrap().push(line.to_string());
    let built = runtime.block_on(k3d_gpu::apply::node_image::run(&engine(), &resolved.spec, &say));
    assert!(built.is_ok(), "the shipped Dockerfile did not build: {built:?}\n{}", log.lock().unwrap().join("\n"));
    resolved.reference
}

/// The layout the Dockerfile had before issue 35, on the same bases: k3s's binaries and
/// `aux/` copied onto Ubuntu one by one, its links made with `ln`. `/bin/sh` stays dash.
fn build_old_layout(dir: &Path, tag: &str, reference: &str) {
    let context = dir.join("old-layout");
    std::fs::create_dir_all(&context).unwrap();
    let dockerfile = format!(
        "FROM rancher/k3s:{tag} AS k3s\nFROM ubuntu:{tag}\n\
         COPY --from=k3s /bin/k3s /bin/containerd /bin/containerd-shim-runc-v2 /bin/runc /bin/cni /bin/check-config /usr/bin/\n\
         COPY --from=k3s /bin/aux /usr/bin/aux\n\
         RUN for l in kubectl crictl ctr; do ln -s k3s \"/usr/bin/$l\"; done \
          && for l in bandwidth bridge firewall flannel host-local loopback portmap; do ln -s cni \"/usr/bin/$l\"; done\n\
         ENV PATH=\"$PATH:/bin/aux\"\nENTRYPOINT [\"/bin/k3s\"]\nCMD [\"agent\"]\n"
    );
    std::fs::write(context.join("Dockerfile"), dockerfile).unwrap();
    let out = Command::new("docker")
        .env("DOCKER_BUILDKIT", "0")
        .args(["build", "-q", "-t", reference, context.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "the old layout did not build: {}", text(&out));
}

/// k3d's `Privileged: true`, or where this engine cannot grant it (a sandbox whose bounding
/// set lacks a capability: runc then fails with "unable to apply caps"), the nearest it can:
/// every capability it has, no seccomp or AppArmor profile. What the hooks and the
/// entrypoint need of privilege (mount propagation, cgroups) is in that set.
fn privilege(image: &str) -> Vec<String> {
    static CHOSEN: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CHOSEN
        .get_or_init(|| {
            let probe = docker(&[
                "run",
                "--rm",
                "--privileged",
                "--network",
                "none",
                "--entrypoint",
                "/bin/sh",
                image,
                "-c",
                "exit 0",
            ]);
            if probe.status.success() {
                return vec!["--privileged".into()];
            }
            let missing: Vec<String> = missing_capabilities();
            eprintln!(
                "note: this engine cannot run privileged containers ({}); nodes get every capability but {missing:?}",
                text(&probe).trim()
            );
            let mut flags: Vec<String> =
                ["--cap-add", "ALL", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined"]
                    .map(String::from)
                    .to_vec();
            for cap in missing {
                flags.extend(["--cap-drop".to_string(), cap]);
            }
            flags
        })
        .clone()
}

/// The capabilities this process's bounding set lacks, by Docker's names.
fn missing_capabilities() -> Vec<String> {
    // Linux's capability numbers 0..=40 (capability.h), in order.
    const NAMES: [&str; 41] = [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ];
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(u64::MAX);
    NAMES.iter().enumerate().filter(|(bit, _)| bounding & (1 << bit) == 0).map(|(_, n)| n.to_string()).collect()
}

/// Creates a node container of `image` as k3d does for `role`, writes k3d's node hooks into
/// its `/bin` (k3d's pre-start hooks, mode 0744), and starts it.
fn start_as_k3d(dir: &Path, image: &str, name: &str, role: &str) {
    let role_label = format!("k3d.role={role}");
    let privilege = privilege(image);
    let mut cmd = vec!["create"];
    cmd.extend(privilege.iter().map(String::as_str));
    cmd.extend([
        "--name",
        name,
        "--hostname",
        name,
        "--init",
        "--restart",
        "unless-stopped",
        "--tmpfs",
        "/run",
        "--tmpfs",
        "/var/run",
        "--env",
        "K3S_KUBECONFIG_OUTPUT=/output/kubeconfig.yaml",
        "--label",
        "app=k3d",
        "--label",
        &role_label,
        // The test engine has no bridge; k3d's nodes are on its cluster network.
        "--network",
        "none",
        "--entrypoint",
        "/bin/k3d-entrypoint.sh",
        image,
        role,
    ]);
    if role == "server" {
        cmd.extend(["--tls-san", "0.0.0.0"]);
    }
    let created = docker(&cmd);
    assert!(created.status.success(), "create {name}: {}", text(&created));
    let hooks = dir.join(format!("hooks-{name}"));
    std::fs::create_dir_all(&hooks).unwrap();
    for entry in std::fs::read_dir(repo().join("tests/fixtures/k3d-node")).unwrap() {
        use std::os::unix::fs::PermissionsExt;
        let entry = entry.unwrap();
        let to = hooks.join(entry.file_name());
        std::fs::copy(entry.path(), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o744)).unwrap();
    }
    let copied = docker(&["cp", &format!("{}/.", hooks.display()), &format!("{name}:/bin/")]);
    assert!(copied.status.success(), "cp hooks into {name}: {}", text(&copied));
    let started = docker(&["start", name]);
    assert!(started.status.success(), "start {name}: {}", text(&started));
}

/// (running, restart count) and what the node printed, with k3d's hook log when it has one.
fn state(name: &str) -> (bool, u32, String) {
    let inspect = docker(&["inspect", "-f", "{{.State.Running}} {{.RestartCount}}", name]);
    let answer = String::from_utf8_lossy(&inspect.stdout).to_string();
    let mut words = answer.split_whitespace();
    let running = words.next() == Some("true");
    let restarts = words.next().and_then(|w| w.parse().ok()).unwrap_or(u32::MAX);
    let logs = text(&docker(&["logs", name]));
    let hook_log = text(&docker(&["cp", &format!("{name}:/var/log/."), "-"]));
    let hook_lines: String = hook_log.lines().filter(|l| l.contains('[') || l.contains("hook")).take(20).collect();
    (running, restarts, format!("{logs}\nhook log: {hook_lines}"))
}

fn self_check(runtime: &tokio::runtime::Runtime, image: &str, nvidia: bool) -> k3d_gpu::node_check::Verdict {
    let required = k3d_gpu::node_check::required(nvidia);
    runtime.block_on(k3d_gpu::apply::node_check::check(&engine(), image, &required)).unwrap()
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn the_shipped_node_image_runs_as_a_k3d_server_and_agent_and_the_dash_layout_does_not() {
    if !docker_ready() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let id = std::process::id();
    let tag = format!("standin-{id}");
    let mut made = Made::default();
    let (k3s, ubuntu) = (format!("rancher/k3s:{tag}"), format!("ubuntu:{tag}"));
    node_images::import_k3s(dir.path(), &k3s);
    node_images::import_ubuntu(dir.path(), &ubuntu);
    made.images.extend([k3s, ubuntu]);

    let shipped = build_shipped(&runtime, &tag);
    made.images.push(shipped.clone());
    let old = format!("k3d-gpu-test/old-layout:{id}");
    build_old_layout(dir.path(), &tag, &old);
    made.images.push(old.clone());

    let nodes = [
        (shipped.as_str(), format!("k3d-start-{id}-server-0"), "server"),
        (shipped.as_str(), format!("k3d-start-{id}-agent-0"), "agent"),
        (old.as_str(), format!("k3d-old-{id}-server-0"), "server"),
        (old.as_str(), format!("k3d-old-{id}-agent-0"), "agent"),
    ];
    for (image, name, role) in &nodes {
        made.containers.push(name.clone());
        start_as_k3d(dir.path(), image, name, role);
    }
    // Each node reaches its end: the shipped image's entrypoint starts k3s (past its trap);
    // the dash layout's PID 1 exits (`docker wait` returns when the container stops).
    for (image, name, _) in &nodes {
        if *image == shipped {
            wait_for_log(name, "k3s stand-in started as");
        } else {
            let name = name.clone();
            support::within(&format!("{name} stops"), DEADLINE, move || docker(&["wait", &name]));
        }
    }

    for (image, name, role) in &nodes {
        let (running, restarts, said) = state(name);
        if *image == shipped {
            assert!(
                running && restarts == 0,
                "the shipped image as a k3d {role} stopped (restarts {restarts}): {said}"
            );
            assert!(!said.contains("ipset unavailable"), "k3s found no ipset: {said}");
        } else {
            // Point 1: dash rejects the trap, errexit ends PID 1, and the restart policy loops.
            assert!(!running || restarts > 0, "the dash layout kept running as a {role}: {said}");
            assert!(said.contains("trap: SIGTERM: bad trap"), "the {role} died of something else: {said}");
        }
    }

    // The self-check passes the shipped image with every command run, and names why it
    // refuses the dash one (and the shipped one under NVIDIA, whose toolkit was skipped).
    let verdict = self_check(&runtime, &shipped, false);
    assert!(verdict.ok(), "{}", verdict.refusal(&shipped));
    let ran = |label: &str| verdict.outcomes.iter().find(|o| o.check.label() == label).map(|o| o.describe());
    // Point 2: k3s-root's tools are in the image and run.
    for tool in ["ipset", "conntrack", "iptables"] {
        assert_eq!(ran(&format!("{tool} --version")), Some(format!("{tool} --version: {tool} stand-in v0.0.0")));
    }
    let refused = self_check(&runtime, &old, false);
    assert!(!refused.ok() && !refused.shell_ok, "{refused:?}");
    let refusal = refused.refusal(&old);
    assert!(refusal.contains("trap: SIGTERM: bad trap") && refusal.contains(&old), "{refusal}");
    let without_toolkit = self_check(&runtime, &shipped, true);
    assert!(without_toolkit.refusal(&shipped).contains("`nvidia-container-runtime --version` found no such command"));

    // Point 3: aux/mount and aux/modprobe run (they were links to a busybox the image lacked).
    for link in ["/bin/aux/mount", "/bin/aux/modprobe"] {
        let out = docker(&["run", "--rm", "--network", "none", "--entrypoint", link, &shipped, "--help"]);
        assert_ne!(out.status.code(), Some(127), "{link}: {}", text(&out));
        assert!(!text(&out).contains("no such file"), "{link} dangles: {}", text(&out));
    }
    let old_mount = docker(&["run", "--rm", "--network", "none", "--entrypoint", "/bin/aux/mount", &old, "--help"]);
    assert!(!old_mount.status.success(), "the old layout's aux/mount ran: {}", text(&old_mount));
}
