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
    /// `docker info`'s `Driver` and `DriverStatus` pairs.
    Answered { driver: String, status: Vec<(String, String)> },
}

/// `docker info`'s DriverStatus key and value that say the images live in containerd's
/// snapshotter (the containerd image store), not in a graph driver.
const SNAPSHOTTER: (&str, &str) = ("driver-type", "io.containerd.snapshotter.v1");

/// The storage driver's verdict: overlay2, or overlayfs as a containerd snapshotter, is the
/// fast path; vfs copies each layer whole, devicemapper and aufs are gone from current
/// engines, fuse-overlayfs runs overlay in user space.
pub fn storage_driver(input: &PerfInput) -> Vec<PerfFinding> {
    let (driver, status) = match input.engine {
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
        Engine::Answered { driver, status } => (driver.as_str(), status),
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
        finding(Level::Warn, "perf-storage-driver", why, evidence.clone())
            .commands(switch_to("overlay2"), Some(switch_to(driver)))
            .cites(SOURCE)
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
/// runtime among them) and restarts the engine. Images and containers made under the old
/// driver are not visible under the new one until it is switched back, so the text of the
/// docs says to recreate the cluster after.
fn switch_to(driver: &str) -> Command {
    const CONFIG: &str = "/etc/docker/daemon.json";
    const NEXT: &str = "/etc/docker/daemon.json.k3d-gpu";
    Command::new("sudo")
        .lit("jq")
        .opt("--arg", "d")
        .arg(driver)
        .arg(".\"storage-driver\" = $d")
        .lit(CONFIG)
        .pipe(Command::new("sudo").lit("tee").lit(NEXT).lit(">").lit("/dev/null"))
        .and(Command::new("sudo").lit("mv").lit(NEXT).lit(CONFIG))
        .and(Command::new("sudo").lit("systemctl restart docker"))
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

    #[test]
    fn the_fix_sets_overlay2_and_the_revert_puts_back_what_was_found() {
        let f = &run(answered("vfs", &[]))[0];
        assert_eq!(
            f.fix.as_deref().unwrap(),
            "sudo jq --arg d overlay2 '.\"storage-driver\" = $d' /etc/docker/daemon.json | sudo tee /etc/docker/daemon.json.k3d-gpu > /dev/null && sudo mv /etc/docker/daemon.json.k3d-gpu /etc/docker/daemon.json && sudo systemctl restart docker"
        );
        assert!(f.revert.as_deref().unwrap().starts_with("sudo jq --arg d vfs "), "{f:?}");
        assert_eq!(f.evidence, "docker info: Driver vfs");
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
