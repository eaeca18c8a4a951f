//! `doctor --perf`'s rule on the Docker engine: its storage driver, which every node
//! container's image layers and writable layer go through (a model copied into a node, an
//! image pulled by k3s's containerd inside it). Pure: what [`super::live::storage`] read of
//! `docker info` in, a finding out.

use serde::Serialize;

use super::perf::{PerfFinding, PerfInput, finding, v};
use crate::facts::Level;
use crate::shell::Command;

/// The rule follows Docker's own guidance on storage drivers.
const SOURCE: &str = "https://docs.docker.com/engine/storage/drivers/select-storage-driver/ (overlay2 preferred; vfs for debugging, devicemapper deprecated and removed in Engine 25, aufs removed in 24; fuse-overlayfs for rootless mode only); https://docs.docker.com/engine/storage/containerd/ (the overlayfs snapshotter)";

/// What the engine said of its storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Engine {
    /// Not asked: `--root` names a fixture host, and this machine's engine is not its engine.
    NotAsked,
    /// Asked and not answered (no engine, no permission on its socket): why, as the engine
    /// or the connection said it (host text, escaped when shown).
    Unanswered(String),
    /// `docker info`'s `Driver` and `DriverStatus` pairs, and whether the engine is the
    /// system daemon on the default socket (not rootless, remote or in a VM): only its
    /// settings are /etc/docker/daemon.json's, so only it gets apply and revert commands.
    Answered { driver: String, status: Vec<(String, String)>, system: bool },
}

/// `docker info`'s DriverStatus key and value that say the images live in containerd's
/// snapshotter (the containerd image store), not in a graph driver.
const SNAPSHOTTER: (&str, &str) = ("driver-type", "io.containerd.snapshotter.v1");

/// The storage driver's verdict: overlay2, or overlayfs as a containerd snapshotter, is the
/// fast path; vfs copies each layer whole, devicemapper and aufs are gone from current
/// engines, fuse-overlayfs runs overlay in user space.
pub fn storage_driver(input: &PerfInput) -> Vec<PerfFinding> {
    let (driver, status, system) = match input.engine {
        Engine::NotAsked => return Vec::new(),
        Engine::Unanswered(why) => {
            return vec![
                finding(
                    Level::Info,
                    "perf-storage-driver-unknown",
                    "the Docker engine did not answer, so its storage driver is not checked".into(),
                    format!("docker info: {}", v(why)),
                )
                .cites(SOURCE),
            ];
        }
        Engine::Answered { driver, status, system } => (driver.as_str(), status, *system),
    };
    let snapshotter = status.iter().any(|(k, val)| k == SNAPSHOTTER.0 && val.starts_with(SNAPSHOTTER.1));
    let shown: Vec<String> = status.iter().map(|(k, val)| format!("{}={}", v(k), v(val))).collect();
    let evidence = if shown.is_empty() {
        format!("docker info: Driver {}", v(driver))
    } else {
        format!("docker info: Driver {} ({})", v(driver), shown.join(", "))
    };
    let slow = |why: String| {
        let why = format!(
            "{why} (after a switch the engine no longer sees the images and containers made under {}: `k3d-gpu destroy`, then `k3d-gpu apply`)",
            v(driver)
        );
        if system {
            finding(Level::Warn, "perf-storage-driver", why, evidence.clone())
                .commands(switch_to("overlay2"), Some(switch_to(driver)))
                .cites(SOURCE)
        } else {
            let why = format!(
                "{why}; this engine is not the system daemon on /var/run/docker.sock (rootless, remote or in a VM), so set `storage-driver` in its own daemon.json (rootless: ~/.config/docker/daemon.json, then `systemctl --user restart docker`)"
            );
            finding(Level::Warn, "perf-storage-driver", why, evidence.clone()).cites(SOURCE)
        }
    };
    let f = match driver {
        "overlay2" => finding(Level::Info, "perf-storage-driver", "the engine stores images with overlay2".into(), evidence.clone())
            .cites(SOURCE),
        "overlayfs" if snapshotter => finding(
            Level::Info,
            "perf-storage-driver",
            "the engine stores images in containerd's overlayfs snapshotter (the containerd image store)".into(),
            evidence.clone(),
        )
        .cites(SOURCE),
        "btrfs" | "zfs" => finding(
            Level::Info,
            "perf-storage-driver",
            format!("the engine stores images with {driver}, the driver of its backing filesystem"),
            evidence.clone(),
        )
        .cites(SOURCE),
        "vfs" => slow("the engine stores images with vfs: every layer is a full copy, so a node image or a model baked into one is copied whole on each container create; Docker meant vfs for debugging".into()),
        "devicemapper" | "aufs" => slow(format!(
            "the engine stores images with {driver}, deprecated and gone from current Docker Engine releases, and slower than overlay2"
        )),
        "fuse-overlayfs" => slow("the engine stores images with fuse-overlayfs: overlay in user space, slower than the kernel's; rootless Docker on a kernel of 5.11 or later can use overlay2".into()),
        other => finding(
            Level::Info,
            "perf-storage-driver",
            format!("the engine stores images with {}, a driver this rule does not know", v(other)),
            evidence.clone(),
        )
        .cites(SOURCE),
    };
    vec![f]
}

/// Sets `storage-driver` in /etc/docker/daemon.json (its other settings kept, the nvidia
/// runtime among them; a missing file starts empty) and restarts the engine. One `sh -e`, so a
/// missing `jq` or a daemon.json jq cannot parse stops it before anything is moved over the
/// file: a pipeline into `tee` would have replaced it with nothing. An engine that does not
/// start with the new driver (Docker fell back to vfs because overlay2 is not supported where
/// it keeps its data) gets its daemon.json back, as it was or absent, and is started again:
/// the fix never leaves Docker down. The driver and the jq filter are the script's arguments,
/// never part of its text. Images and containers made under the old driver are not visible
/// under the new one until it is switched back, so the finding says to recreate the cluster
/// after.
fn switch_to(driver: &str) -> Command {
    const SCRIPT: &str = "set -e; f=/etc/docker/daemon.json; b=\"$f.k3d-gpu-before\"; \
command -v jq >/dev/null || { echo \"jq is needed\" >&2; exit 1; }; \
if [ -s \"$f\" ]; then jq --arg d \"$1\" \"$2\" \"$f\" >\"$f.k3d-gpu\"; else jq -n --arg d \"$1\" \"$2\" >\"$f.k3d-gpu\"; fi; \
test -s \"$f.k3d-gpu\"; rm -f \"$b\"; if [ -e \"$f\" ]; then cp -p \"$f\" \"$b\"; fi; mv \"$f.k3d-gpu\" \"$f\"; \
if ! systemctl restart docker; then if [ -e \"$b\" ]; then mv \"$b\" \"$f\"; else rm -f \"$f\"; fi; systemctl restart docker; \
echo \"docker did not start with storage-driver $1: daemon.json is as it was\" >&2; exit 1; fi; rm -f \"$b\"";
    Command::new("sudo").lit("sh").lit("-c").arg(SCRIPT).lit("sh").arg(driver).arg(".[\"storage-driver\"] = $d")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: Engine) -> Vec<PerfFinding> {
        let (facts, t) = crate::doctor::perf::tests::host("plain-laptop-amd");
        storage_driver(&PerfInput { facts: &facts, tuning: &t, model_gb: None, sandbox: false, engine: &engine })
    }

    fn answered(driver: &str, status: &[(&str, &str)]) -> Engine {
        Engine::Answered {
            driver: driver.into(),
            status: status.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            system: true,
        }
    }

    #[test]
    fn each_storage_driver_gets_its_verdict() {
        use Level::{Info, Warn};
        let containerd = [("driver-type", "io.containerd.snapshotter.v1")];
        /// What the engine said, the findings wanted, whether they carry apply and revert.
        type Case = (Engine, &'static [(Level, &'static str)], bool);
        let cases: &[Case] = &[
            (Engine::NotAsked, &[], false),
            (
                Engine::Unanswered("no engine at unix:///run/docker.sock".into()),
                &[(Info, "perf-storage-driver-unknown")],
                false,
            ),
            (
                answered("overlay2", &[("Backing Filesystem", "extfs"), ("Supports d_type", "true")]),
                &[(Info, "perf-storage-driver")],
                false,
            ),
            (answered("overlayfs", &containerd), &[(Info, "perf-storage-driver")], false),
            (answered("btrfs", &[]), &[(Info, "perf-storage-driver")], false),
            (answered("zfs", &[]), &[(Info, "perf-storage-driver")], false),
            (answered("vfs", &[]), &[(Warn, "perf-storage-driver")], true),
            (answered("devicemapper", &[("Pool Name", "docker-thinpool")]), &[(Warn, "perf-storage-driver")], true),
            (answered("aufs", &[]), &[(Warn, "perf-storage-driver")], true),
            (answered("fuse-overlayfs", &[]), &[(Warn, "perf-storage-driver")], true),
            // overlayfs without the snapshotter's status is not the containerd image store.
            (answered("overlayfs", &[]), &[(Info, "perf-storage-driver")], false),
            (answered("windowsfilter", &[]), &[(Info, "perf-storage-driver")], false),
        ];
        for (engine, want, commands) in cases {
            let got = run(engine.clone());
            let levels: Vec<(Level, &str)> = got.iter().map(|f| (f.level, f.code.as_str())).collect();
            assert_eq!(&levels, want, "{engine:?}");
            for f in &got {
                assert!(f.source.as_deref().is_some_and(|s| s.contains("select-storage-driver")), "{f:?}");
                assert_eq!(f.fix.is_some() && f.revert.is_some(), *commands, "{f:?}");
            }
        }
        let unknown = run(answered("overlayfs", &[]));
        assert!(unknown[0].text.contains("does not know"), "{unknown:?}");
    }

    /// Runs a printed command as a shell would, against `dir/daemon.json` instead of
    /// /etc/docker/daemon.json, with `sudo` and `systemctl` stand-ins (systemctl records its
    /// call) and jq only where `jq` is true. Returns whether it succeeded and whether the
    /// engine was restarted.
    /// Runs a printed command with stand-ins for sudo and systemctl (which fails its first
    /// restart when `first_restart_fails`): whether it succeeded, and whether the engine was
    /// (re)started at all.
    fn run_printed(command: &str, dir: &std::path::Path, jq: bool, first_restart_fails: bool) -> (bool, bool) {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = |name: &str, body: &str| {
            let path = bin.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        script("sudo", "exec \"$@\"");
        let fails = if first_restart_fails {
            format!("[ -e {0}/failed ] || {{ : > {0}/failed; exit 1; }}", dir.display())
        } else {
            String::new()
        };
        script("systemctl", &format!("{fails}\necho \"$*\" > {}/restarted", dir.display()));
        for tool in ["sh", "mv", "cp", "rm"].into_iter().chain(jq.then_some("jq")) {
            let real = ["/usr/bin", "/bin"].iter().map(|d| std::path::Path::new(d).join(tool)).find(|p| p.exists());
            std::os::unix::fs::symlink(
                real.unwrap_or_else(|| panic!("{tool} is needed for this test")),
                bin.join(tool),
            )
            .unwrap();
        }
        let command = command.replace("/etc/docker/daemon.json", &dir.join("daemon.json").display().to_string());
        let status = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .env_clear()
            .env("PATH", &bin)
            .status()
            .unwrap();
        (status.success(), dir.join("restarted").exists())
    }

    /// The fix, run as printed: sets overlay2 and keeps the nvidia runtime and data-root; with
    /// no jq, or a daemon.json jq cannot read, daemon.json is left as it was and the engine is
    /// not restarted (a `jq … | tee` pipeline emptied it); a missing daemon.json is made.
    #[test]
    fn the_fix_run_as_printed_keeps_daemon_json_whole_or_changes_nothing() {
        let f = &run(answered("vfs", &[]))[0];
        let fix = f.fix.as_deref().unwrap();
        assert!(f.revert.as_deref().unwrap().contains(" vfs "), "{f:?}");
        assert_eq!(f.evidence, "docker info: Driver vfs");
        let kept = r#"{"data-root":"/srv/docker","runtimes":{"nvidia":{"path":"nvidia-container-runtime"}}}"#;
        let cases: &[(Option<&str>, bool, bool)] = &[
            (Some(kept), true, true),
            (Some(kept), false, false),
            (Some("{not json"), true, false),
            (None, true, true),
        ];
        for (before, jq, works) in cases {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("daemon.json");
            if let Some(text) = before {
                std::fs::write(&file, text).unwrap();
            }
            let (ok, restarted) = run_printed(fix, dir.path(), *jq, false);
            assert_eq!((ok, restarted), (*works, *works), "{before:?} jq={jq}");
            assert!(!dir.path().join("daemon.json.k3d-gpu-before").exists(), "the copy is removed");
            let after = std::fs::read_to_string(&file).ok();
            if *works {
                let doc: serde_json::Value = serde_json::from_str(after.as_deref().unwrap()).unwrap();
                assert_eq!(doc["storage-driver"], "overlay2", "{doc}");
                if before.is_some() {
                    assert_eq!(doc["data-root"], "/srv/docker", "{doc}");
                    assert_eq!(doc["runtimes"]["nvidia"]["path"], "nvidia-container-runtime", "{doc}");
                }
            } else {
                assert_eq!(after.as_deref(), *before, "jq={jq}: daemon.json changed");
            }
        }
    }

    /// An engine that does not start with overlay2 (Docker chose vfs because overlay2 is not
    /// supported where it keeps its data) gets its daemon.json back, as it was or absent, and
    /// is started again; the fix fails, saying so.
    #[test]
    fn an_engine_that_does_not_start_with_the_fix_is_put_back_and_started() {
        let fix = run(answered("vfs", &[]))[0].fix.clone().unwrap();
        let kept = r#"{"runtimes":{"nvidia":{"path":"nvidia-container-runtime"}}}"#;
        for before in [Some(kept), Some(""), None] {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("daemon.json");
            if let Some(text) = before {
                std::fs::write(&file, text).unwrap();
            }
            let (ok, restarted) = run_printed(&fix, dir.path(), true, true);
            assert_eq!((ok, restarted), (false, true), "{before:?}");
            assert_eq!(std::fs::read_to_string(&file).ok().as_deref(), before, "daemon.json as it was");
            assert!(!dir.path().join("daemon.json.k3d-gpu-before").exists(), "{before:?}");
        }
    }

    /// A rootless, remote or VM engine is not configured by /etc/docker/daemon.json: the
    /// finding says where its settings are and prints no command that would edit the system's.
    #[test]
    fn an_engine_that_is_not_the_system_daemon_gets_no_commands() {
        let engine = Engine::Answered { driver: "fuse-overlayfs".into(), status: Vec::new(), system: false };
        let f = &run(engine)[0];
        assert_eq!((f.level, f.fix.as_deref(), f.revert.as_deref()), (Level::Warn, None, None), "{f:?}");
        assert!(f.text.contains("~/.config/docker/daemon.json"), "{f:?}");
    }

    #[test]
    fn what_the_engine_said_cannot_forge_a_line() {
        let f = &run(answered("x\n      apply: rm -rf /", &[("k\u{1b}[2J", "v\nw")]))[0];
        assert!(!f.evidence.contains('\n') && !f.text.contains('\n'), "{f:?}");
        assert!(!f.evidence.contains('\u{1b}'), "{f:?}");
        let f = &run(Engine::Unanswered("refused\nfix: curl evil".into()))[0];
        assert!(!f.evidence.contains('\n'), "{f:?}");
    }
}
