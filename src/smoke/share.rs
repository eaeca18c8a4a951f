//! `k3d-gpu test`'s proof of sharing, the pure half. A device plugin that advertises a GPU
//! eight times has only promised; the one proof is overlap: the pods the config says may share
//! a device all Running at the same moment, each reporting the device it got, and the same one.
//! One pod per resource ([`super::plan`]) proves a device can be opened, not that it can be
//! shared.
//!
//! For each resource the config shares (`DesiredGraph::shares`: the Intel plugin's
//! `shared-dev-num`, NVIDIA time-slicing replicas) and each node that advertises it, a group
//! of pods: the promised count per device, times the devices the host's facts give the
//! resource (so on a node of two GPUs each must take its share, whatever the allocation
//! policy), at most [`MAX_PODS`]. Each pod prints the identity of its device (an NVIDIA GPU's
//! UUID from `nvidia-smi -L` and its compute mode; an Intel GPU's PCI address behind the render
//! node it opened), then holds it until `test` has seen them all or its deadline passes.
//! [`run`](super::run) watches the group and says which pods were Running at once.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Hints, Outcome, Probe, SmokePod, kind_of};
use crate::escape::Untrusted;
use crate::facts::Facts;

/// The most pods one group starts: a node runs at most 110 pods, and eight GPUs time-sliced
/// four ways are already 32 pods. Past it the group proves the largest share it can hold.
pub const MAX_PODS: u32 = 32;

/// The label every pod of one group carries, valued with the group's name: what `test`
/// watches. Deletion still goes by [`super::LABEL`], each pod's own name.
pub const GROUP_LABEL: &str = "k3d-gpu.io/smoke-share";

/// What a sharing pod runs on an NVIDIA GPU: its GPUs, then each one's UUID and compute mode
/// (`compute <uuid>, <mode>`), `ready`, and it holds the GPU for `$1` seconds.
/// Under MPS the plugin also hands the pod `CUDA_MPS_PIPE_DIRECTORY`: `mps serving <dir>` when
/// the control daemon's `control` pipe is there, `mps absent <dir>` when it is not.
pub const NVIDIA_SCRIPT: &str = r#"nvidia-smi -L 2>&1
nvidia-smi --query-gpu=uuid,compute_mode --format=csv,noheader 2>&1 | sed 's/^/compute /'
if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
  if [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ]; then echo "mps serving $CUDA_MPS_PIPE_DIRECTORY"
  else echo "mps absent $CUDA_MPS_PIPE_DIRECTORY"; fi
fi
echo ready
exec sleep "$1""#;

/// What a sharing pod runs for a device node: each render node in `$2` (`/dev/dri`) it opens,
/// with the PCI address of the card behind it from `$3` (`/sys/class/drm`): `device <pci>
/// <node>`, or `denied <path>`; then `ready`, and it holds the device for `$1` seconds.
pub const DEVICE_SCRIPT: &str = r#"for f in "$2"/renderD*; do
  [ -e "$f" ] || continue
  n=${f##*/}
  if (exec 3<>"$f") 2>/dev/null; then d=$(readlink -f "$3/$n/device"); echo "device ${d##*/} $n"
  else echo "denied $f"; fi
done
echo ready
exec sleep "$1""#;

/// Where the device script looks inside the pod.
pub const DEVICE_PATHS: [&str; 2] = ["/dev/dri", "/sys/class/drm"];

/// One group: the pods that must share the devices of one resource on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub name: String,
    /// Where its pods run.
    pub namespace: String,
    /// The API server's names, as [`SmokePod`]'s.
    pub resource: Untrusted,
    pub node: Untrusted,
    /// Pods per device the config promises.
    pub promised: u32,
    /// Devices the host's facts hold for the resource (1 when they do not count it).
    pub devices: u32,
    /// What the node advertises.
    pub allocatable: u64,
    /// Units other pods held on the node when the test began (the agent's server among them).
    pub held: u64,
    /// Shared through CUDA MPS: each pod must reach the control daemon, and the GPU's
    /// exclusive compute mode is the daemon's own doing.
    pub mps: bool,
    /// Shown by name in `test --json`.
    #[serde(serialize_with = "pod_names")]
    pub pods: Vec<SmokePod>,
}

fn pod_names<S: serde::Serializer>(pods: &[SmokePod], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(pods.iter().map(|p| &p.pod))
}

/// Units of each resource pods already hold on each node: `(node, resource)` → units.
pub type Held = BTreeMap<(String, String), u64>;

/// The groups for the resources `shares` promises, on each node that advertises them: no more
/// pods than the units other pods leave free (a group larger than that would fail on the
/// agent's own server holding one).
pub fn groups(
    facts: &Facts,
    shares: &BTreeMap<String, u32>,
    allocatable: &BTreeMap<String, BTreeMap<String, String>>,
    held: &Held,
    mps: bool,
    images: &BTreeMap<&str, String>,
) -> Vec<Group> {
    let mut out = Vec::new();
    for (index, (node, resources)) in allocatable.iter().enumerate() {
        for (resource, promised) in shares {
            let Some(kind) = kind_of(resource) else { continue };
            let amount = resources.get(resource).and_then(|q| q.trim().parse::<u64>().ok()).unwrap_or(0);
            if amount == 0 {
                continue;
            }
            let devices = super::facts_count(facts, resource).filter(|n| *n > 0).unwrap_or(1);
            let taken = held.get(&(node.clone(), resource.clone())).copied().unwrap_or(0);
            let free = u32::try_from(amount.saturating_sub(taken)).unwrap_or(u32::MAX);
            let count = promised.saturating_mul(devices).min(MAX_PODS).min(free);
            let slug: String = resource
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
                .collect();
            let name = format!("k3d-gpu-share-{slug}-{index}");
            let (image, groups) = match kind.probe {
                Probe::NvidiaSmi => (super::NVIDIA_IMAGE, Vec::new()),
                Probe::Devices => (super::DEVICE_IMAGE, super::device_groups(facts, kind.vendor).unwrap_or_default()),
            };
            let pods = (0..count)
                .map(|i| SmokePod {
                    resource: resource.as_str().into(),
                    node: node.as_str().into(),
                    pod: format!("{name}-{i}"),
                    image: images.get(image).cloned().unwrap_or_else(|| image.to_string()),
                    probe: kind.probe,
                    requested: 1,
                    expected: 1,
                    groups: groups.clone(),
                })
                .collect();
            out.push(Group {
                name,
                namespace: super::NAMESPACE.to_string(),
                resource: resource.as_str().into(),
                node: node.as_str().into(),
                promised: *promised,
                devices,
                allocatable: amount,
                held: taken,
                mps: mps && kind.probe == Probe::NvidiaSmi,
                pods,
            });
        }
    }
    out
}

/// A sharing pod's manifest: the smoke pod's, running its identity script and holding the
/// device for `deadline_s`, labelled with its group.
pub fn manifest(p: &SmokePod, group: &str, deadline_s: u64) -> Value {
    let mut pod = super::manifest(p, deadline_s);
    let hold = deadline_s.max(1).to_string();
    let command = match p.probe {
        Probe::NvidiaSmi => json!(["sh", "-c", NVIDIA_SCRIPT, "k3d-gpu-test", hold]),
        Probe::Devices => json!(["sh", "-c", DEVICE_SCRIPT, "k3d-gpu-test", hold, DEVICE_PATHS[0], DEVICE_PATHS[1]]),
    };
    pod["spec"]["containers"][0]["command"] = command;
    pod["metadata"]["labels"][GROUP_LABEL] = json!(group);
    pod
}

/// What became of a group's pods, as the API server showed them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Run {
    /// Each pod's outcome, by name (its log read while it held the device).
    pub outcomes: BTreeMap<String, Outcome>,
    /// The most pods seen Running at one moment.
    pub together: Vec<String>,
}

/// A group's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub passed: bool,
    /// Pods that were Running at one moment (all of them when sharing holds).
    pub together: Vec<String>,
    /// Pods that never ran with those.
    pub apart: Vec<String>,
    /// The device each pod reported, by pod.
    pub devices: BTreeMap<String, Untrusted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Each device a probe's log names, as printed: an NVIDIA GPU's UUID (`nvidia-smi -L`), the
/// PCI address of the card behind a render node it opened. As printed: outside text.
pub(super) fn devices_seen(probe: Probe, log: &str) -> Vec<&str> {
    match probe {
        Probe::NvidiaSmi => log
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .filter_map(|l| l.split("(UUID: ").nth(1)?.strip_suffix(')'))
            .collect(),
        Probe::Devices => log.lines().filter_map(|l| l.strip_prefix("device ")?.split(' ').next()).collect(),
    }
}

/// The device a pod reported: an NVIDIA GPU's UUID, an Intel card's PCI address.
fn identity(probe: Probe, log: &str) -> Option<Untrusted> {
    // The set of devices the pod got (one for a plugin's unit; a DRA claim may hold several).
    let mut ids = devices_seen(probe, log);
    ids.sort_unstable();
    ids.dedup();
    (!ids.is_empty()).then(|| Untrusted::new(ids.join("+")))
}

/// NVIDIA compute modes that let one process at a time use the GPU (`nvidia-smi -c`).
fn exclusive_mode(log: &str) -> Option<Untrusted> {
    log.lines()
        .filter_map(|l| l.strip_prefix("compute "))
        .filter_map(|l| l.rsplit(", ").next())
        .find(|mode| mode.starts_with("Exclusive") || *mode == "Prohibited")
        .map(Untrusted::from)
}

/// Why sharing was not tried at all: one pod per device fits, other pods hold the units, a
/// pod was refused, or none of them ran. `None`: they ran; the verdict reads how.
fn not_tried(g: &Group, run: &Run, names: &[String], hints: &Hints, advertised: &str) -> Option<(String, String)> {
    let logs = hints.logs(g.resource.raw());
    if names.len() < 2 && g.held == 0 {
        return Some((
            format!("one pod per device can run, so nothing is shared: {advertised}"),
            format!("check the plugin's sharing setting in its log (`{logs}`)"),
        ));
    }
    if names.len() < 2 {
        return Some((
            format!(
                "other pods hold {} of the {} {} node {} advertises: {} pod(s) could run, and sharing needs two at once to be proven",
                g.held,
                g.allocatable,
                g.resource,
                g.node,
                names.len()
            ),
            format!(
                "stop what holds them for the test (`{}`), then run it again",
                hints.kubectl.clone().lit("get pods -A -o wide")
            ),
        ));
    }
    if let Some((name, why)) =
        names.iter().find_map(|n| Some((n, run.outcomes.get(n).and_then(|o| o.refused.clone())?)))
    {
        return Some((
            format!("pod {name} was not created: {why}"),
            hints.kubectl.clone().lit("get pods -A").to_string(),
        ));
    }
    // Nothing ran at all: not a sharing verdict but why the pods never started.
    if run.together.is_empty() {
        let why: Vec<String> = names
            .iter()
            .filter_map(|n| {
                let o = run.outcomes.get(n)?;
                let said = o.reason.as_ref().or(o.unschedulable.as_ref()).map_or_else(
                    || {
                        let phase = if o.phase.is_empty() { "unknown".to_string() } else { o.phase.to_string() };
                        if o.timed_out { format!("still {phase} at the deadline") } else { format!("phase {phase}") }
                    },
                    Untrusted::to_string,
                );
                Some(format!("{n}: {said}"))
            })
            .take(3)
            .collect();
        return Some((
            format!("none of the {} pods ran, so sharing was not tried ({})", names.len(), why.join("; ")),
            hints.kubectl.clone().opt("-n", &g.namespace).lit("describe pods -l").arg(GROUP_LABEL).to_string(),
        ));
    }
    None
}

/// Reads a group's run. Pure.
pub fn verdict(g: &Group, run: &Run, hints: &Hints) -> Verdict {
    let names: Vec<String> = g.pods.iter().map(|p| p.pod.clone()).collect();
    let apart: Vec<String> = names.iter().filter(|n| !run.together.contains(n)).cloned().collect();
    let log = |name: &str| run.outcomes.get(name).map(|o| o.log.raw()).unwrap_or_default();
    let probe = g.pods.first().map_or(Probe::Devices, |p| p.probe);
    let devices: BTreeMap<String, Untrusted> =
        names.iter().filter_map(|n| Some((n.clone(), identity(probe, log(n))?))).collect();
    let mut out = Verdict {
        passed: false,
        together: run.together.clone(),
        apart: apart.clone(),
        devices: devices.clone(),
        cause: None,
        fix: None,
    };
    let logs = hints.logs(g.resource.raw());
    let per_device = g.allocatable / u64::from(g.devices.max(1));
    let advertised = format!(
        "node {} advertises {} {} for {} device(s), {per_device} per device; the config promises {}",
        g.node, g.allocatable, g.resource, g.devices, g.promised
    );
    let short = per_device < u64::from(g.promised);
    let mut fail = |cause: String, fix: String| {
        out.cause = Some(cause);
        out.fix = Some(fix);
        out.clone()
    };
    if let Some((cause, fix)) = not_tried(g, run, &names, hints, &advertised) {
        return fail(cause, fix);
    }
    if !apart.is_empty() {
        let list = apart.join(", ");
        let unschedulable =
            apart.iter().find_map(|n| run.outcomes.get(n).and_then(|o| o.unschedulable.clone())).unwrap_or_default();
        let cause = if short {
            format!("pods {list} never ran with the others: {advertised}")
        } else if !unschedulable.is_empty() {
            format!(
                "pods {list} never ran with the others: the scheduler found no free {} for them ({}); other pods hold some, or the plugin hands out fewer than it advertises",
                g.resource, unschedulable
            )
        } else if run.together.len() <= 1 {
            format!(
                "the {} pods ran one after another, never together: the device was not shared (pods {list} never ran with the others)",
                names.len()
            )
        } else {
            format!("pods {list} never ran at the same time as {}", run.together.join(", "))
        };
        let fix = format!(
            "check the plugin's sharing setting in its log (`{logs}`) and what holds the device (`{}`)",
            hints.kubectl.clone().lit("get pods -A -o wide")
        );
        return fail(cause, fix);
    }
    if let Some(missing) = names.iter().find(|n| !devices.contains_key(*n)) {
        let said: Vec<String> = log(missing).lines().take(5).map(|l| Untrusted::from(l).to_string()).collect();
        return fail(
            format!("pod {missing} ran with the others but reported no single device ({})", said.join(" | ")),
            format!("read the plugin's log: `{logs}`"),
        );
    }
    if g.mps
        && let Some(missing) = names.iter().find(|n| !log(n).lines().any(|l| l.starts_with("mps serving ")))
    {
        let said = log(missing).lines().find(|l| l.starts_with("mps ")).map(|l| Untrusted::from(l).to_string());
        return fail(
            format!(
                "pod {missing} did not reach the MPS control daemon ({}): its pods run without MPS, or not at all",
                said.unwrap_or_else(|| "no CUDA_MPS_PIPE_DIRECTORY: the plugin did not hand it the MPS pipe".into())
            ),
            format!(
                "read the daemon's log (`{}`) and the plugin's (`{logs}`)",
                hints.k3d_gpu.clone().lit("logs nvidia-mps-control-daemon")
            ),
        );
    }
    // MPS sets EXCLUSIVE_PROCESS itself (one MPS server per GPU); elsewhere it stops sharing.
    if probe == Probe::NvidiaSmi
        && !g.mps
        && let Some(mode) = names.iter().find_map(|n| exclusive_mode(log(n)))
    {
        return fail(
            format!("the GPU's compute mode is {mode}: one process at a time may use it, so the pods cannot share it"),
            "set the default compute mode on the host: `sudo nvidia-smi -c DEFAULT` (for every GPU; not kept across a reboot unless your driver setup sets it)".into(),
        );
    }
    let mut per: BTreeMap<&Untrusted, usize> = BTreeMap::new();
    for d in devices.values() {
        *per.entry(d).or_default() += 1;
    }
    let most = per.values().copied().max().unwrap_or(0);
    // Spread evenly (a balanced policy), each device takes count/devices; packed, one takes
    // the promise. Either proves sharing up to what the group could hold.
    let wanted = (g.promised as usize).min(names.len().div_ceil(g.devices.max(1) as usize)).max(2);
    if most < wanted {
        let spread: Vec<String> = per.iter().map(|(d, n)| format!("{d}: {n}")).collect();
        return fail(
            format!(
                "the {} pods ran together but no device took {wanted} of them ({}): they were spread, not shared",
                names.len(),
                spread.join(", ")
            ),
            format!("read the plugin's log: `{logs}`; {advertised}"),
        );
    }
    out.passed = true;
    out
}

/// One group's result, as `test --json` prints it: the group, and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct GroupResult {
    #[serde(flatten)]
    pub group: Group,
    pub verdict: Verdict,
}

#[cfg(test)]
mod tests {
    use super::super::tests::{facts, hints};
    use super::*;

    fn node(resources: &[(&str, &str)]) -> BTreeMap<String, BTreeMap<String, String>> {
        let r = resources.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        BTreeMap::from([("k3d-gpu-server-0".to_string(), r)])
    }

    fn group(resource: &str, promised: u32, allocatable: &str) -> Group {
        let shares = BTreeMap::from([(resource.to_string(), promised)]);
        let mut g = groups(
            &facts("desktop-rpl-nvidia"),
            &shares,
            &node(&[(resource, allocatable)]),
            &Held::new(),
            false,
            &BTreeMap::new(),
        );
        g.remove(0)
    }

    /// A run where `together` ran at once, each pod's log as given.
    fn run(logs: &[(&str, &str)], together: &[&str]) -> Run {
        Run {
            outcomes: logs
                .iter()
                .map(|(pod, log)| {
                    (pod.to_string(), Outcome { phase: "Running".into(), log: (*log).into(), ..Default::default() })
                })
                .collect(),
            together: together.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_group_holds_the_promised_pods_per_device_the_facts_count() {
        let shares = BTreeMap::from([("gpu.intel.com/i915".to_string(), 8), ("nvidia.com/gpu".to_string(), 4)]);
        let allocatable = node(&[("gpu.intel.com/i915", "8"), ("nvidia.com/gpu", "8"), ("cpu", "32")]);
        let got = groups(&facts("desktop-rpl-nvidia"), &shares, &allocatable, &Held::new(), false, &BTreeMap::new());
        let sizes: Vec<(&str, u32, usize)> = got.iter().map(|g| (g.resource.raw(), g.devices, g.pods.len())).collect();
        assert_eq!(sizes, [("gpu.intel.com/i915", 1, 8), ("nvidia.com/gpu", 2, 8)]);
        let pod = manifest(&got[1].pods[0], &got[1].name, 60);
        assert_eq!(pod["metadata"]["labels"][GROUP_LABEL], "k3d-gpu-share-nvidia-com-gpu-0");
        assert_eq!(pod["metadata"]["labels"][super::super::LABEL], "k3d-gpu-share-nvidia-com-gpu-0-0");
        assert_eq!(pod["spec"]["runtimeClassName"], "nvidia");
        assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
        // Not advertised, not tested; a resource nobody shares is the single pod's alone.
        assert!(
            groups(
                &facts("desktop-rpl-nvidia"),
                &shares,
                &node(&[("cpu", "8")]),
                &Held::new(),
                false,
                &BTreeMap::new()
            )
            .is_empty()
        );
    }

    /// The agent's server holding one unit of a shared iGPU leaves seven: the group is seven
    /// pods (not eight, which would fail on the agent), and one left free cannot prove sharing.
    #[test]
    fn a_group_takes_only_the_units_other_pods_leave_free() {
        let shares = BTreeMap::from([("gpu.intel.com/i915".to_string(), 8)]);
        let allocatable = node(&[("gpu.intel.com/i915", "8")]);
        let key = ("k3d-gpu-server-0".to_string(), "gpu.intel.com/i915".to_string());
        let held = Held::from([(key.clone(), 1)]);
        let got = groups(&facts("desktop-rpl-nvidia"), &shares, &allocatable, &held, false, &BTreeMap::new());
        assert_eq!((got[0].pods.len(), got[0].held), (7, 1));
        let nearly_all = Held::from([(key, 7)]);
        let one =
            groups(&facts("desktop-rpl-nvidia"), &shares, &allocatable, &nearly_all, false, &BTreeMap::new()).remove(0);
        let v = verdict(&one, &Run::default(), &hints());
        assert!(!v.passed && v.cause.as_deref().unwrap().contains("other pods hold 7 of the 8"), "{v:?}");
    }

    /// Under MPS the GPU is EXCLUSIVE_PROCESS by design, and every pod must reach the daemon.
    #[test]
    fn mps_pods_must_reach_the_control_daemon() {
        let shares = BTreeMap::from([("nvidia.com/gpu".to_string(), 2)]);
        let allocatable = node(&[("nvidia.com/gpu", "4")]);
        let g =
            groups(&facts("desktop-rpl-nvidia"), &shares, &allocatable, &Held::new(), true, &BTreeMap::new()).remove(0);
        assert!(g.mps);
        let names: Vec<&str> = g.pods.iter().map(|p| p.pod.as_str()).collect();
        let serving =
            "GPU 0: RTX (UUID: GPU-a)\ncompute GPU-a, Exclusive_Process\nmps serving /mps/nvidia.com/gpu/pipe\nready\n";
        let all: Vec<(&str, &str)> = names.iter().map(|n| (*n, serving)).collect();
        assert!(verdict(&g, &run(&all, &names), &hints()).passed, "exclusive is MPS's own mode");
        let absent =
            "GPU 0: RTX (UUID: GPU-a)\ncompute GPU-a, Exclusive_Process\nmps absent /mps/nvidia.com/gpu/pipe\nready\n";
        let mut one_off = all.clone();
        one_off[1].1 = absent;
        let v = verdict(&g, &run(&one_off, &names), &hints());
        assert!(!v.passed && v.cause.as_deref().unwrap().contains("did not reach the MPS control daemon"), "{v:?}");
        assert!(v.fix.as_deref().unwrap().contains("logs nvidia-mps-control-daemon"), "{v:?}");
    }

    #[test]
    fn the_device_script_names_the_card_behind_each_render_node() {
        let dir = tempfile::tempdir().unwrap();
        let (dri, drm) = (dir.path().join("dri"), dir.path().join("drm"));
        std::fs::create_dir_all(&dri).unwrap();
        std::fs::create_dir_all(drm.join("renderD128")).unwrap();
        std::fs::create_dir_all(dir.path().join("pci/0000:03:00.0")).unwrap();
        std::fs::write(dri.join("renderD128"), "").unwrap();
        std::os::unix::fs::symlink("../../pci/0000:03:00.0", drm.join("renderD128/device")).unwrap();
        std::fs::create_dir(dri.join("renderD129")).unwrap(); // cannot be opened read-write
        let out = std::process::Command::new("sh")
            .args(["-c", DEVICE_SCRIPT, "k3d-gpu-test", "0"])
            .args([&dri, &drm])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("device 0000:03:00.0 renderD128\n"), "{text}");
        assert!(text.contains("denied ") && text.ends_with("ready\n"), "{text}");
        assert_eq!(identity(Probe::Devices, &text).as_ref().map(Untrusted::raw), Some("0000:03:00.0"));
    }

    #[test]
    fn pods_together_on_one_device_prove_sharing() {
        let g = group("gpu.intel.com/i915", 2, "2");
        let names: Vec<&str> = g.pods.iter().map(|p| p.pod.as_str()).collect();
        let log = "device 0000:00:02.0 renderD128\nready\n";
        let v = verdict(&g, &run(&[(names[0], log), (names[1], log)], &names), &hints());
        assert!(v.passed, "{v:?}");
        assert_eq!(v.devices.values().map(Untrusted::raw).collect::<Vec<_>>(), ["0000:00:02.0", "0000:00:02.0"]);
    }

    #[test]
    fn pods_one_after_another_never_prove_sharing() {
        let g = group("gpu.intel.com/i915", 2, "2");
        let names: Vec<&str> = g.pods.iter().map(|p| p.pod.as_str()).collect();
        let log = "device 0000:00:02.0 renderD128\nready\n";
        let v = verdict(&g, &run(&[(names[0], log), (names[1], log)], &names[..1]), &hints());
        assert!(!v.passed);
        assert_eq!(v.apart, [names[1]]);
        assert!(v.cause.as_deref().unwrap().contains("one after another"), "{v:?}");
        assert!(v.fix.as_deref().unwrap().contains("get pods -A -o wide"), "{v:?}");
    }

    #[test]
    fn a_plugin_that_advertises_less_than_promised_is_named() {
        let g = group("gpu.intel.com/i915", 8, "1");
        let names: Vec<&str> = g.pods.iter().map(|p| p.pod.as_str()).collect();
        let v = verdict(&g, &run(&[], &names[..1]), &hints());
        let cause = v.cause.unwrap();
        assert!(
            cause.contains("advertises 1 gpu.intel.com/i915 for 1 device(s), 1 per device; the config promises 8"),
            "{cause}"
        );
    }

    #[test]
    fn pods_spread_over_devices_or_an_exclusive_gpu_fail() {
        let g = group("nvidia.com/gpu", 2, "4");
        let names: Vec<&str> = g.pods.iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(names.len(), 4, "two GPUs, two each");
        let gpu = |uuid: &str, mode: &str| {
            format!("GPU 0: NVIDIA RTX 4000 Ada (UUID: {uuid})\ncompute {uuid}, {mode}\nready\n")
        };
        let (a, b) = (gpu("GPU-a", "Default"), gpu("GPU-b", "Default"));
        let shared = run(&[(names[0], &a), (names[1], &a), (names[2], &b), (names[3], &b)], &names);
        assert!(verdict(&g, &shared, &hints()).passed);
        let c = gpu("GPU-c", "Default");
        let d = gpu("GPU-d", "Default");
        let spread = run(&[(names[0], &a), (names[1], &b), (names[2], &c), (names[3], &d)], &names);
        let v = verdict(&g, &spread, &hints());
        assert!(!v.passed && v.cause.as_deref().unwrap().contains("spread, not shared"), "{v:?}");
        let x = gpu("GPU-a", "Exclusive_Process");
        let exclusive = run(&[(names[0], &x), (names[1], &x), (names[2], &x), (names[3], &x)], &names);
        let v = verdict(&g, &exclusive, &hints());
        assert!(v.cause.as_deref().unwrap().contains("Exclusive_Process"), "{v:?}");
        assert!(v.fix.as_deref().unwrap().contains("nvidia-smi -c DEFAULT"), "{v:?}");
    }
}
