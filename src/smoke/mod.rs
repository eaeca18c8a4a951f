//! `k3d-gpu test`, the pure half: which smoke pod proves each accelerator resource the cluster
//! advertises usable from inside a pod, the pod's manifest, and the verdict on what it printed.
//!
//! "Allocatable" only says a plugin counted a device; the common failure is a pod that gets
//! the resource and still cannot use it (the NVIDIA runtime missing from containerd, the
//! driver library not injected, a device node whose group the pod lacks). So each pod does
//! what a workload does: NVIDIA pods run under the `nvidia` RuntimeClass and print
//! `nvidia-smi -L`; every other resource gets a busybox pod that opens (read-write) each
//! device node the plugin handed over, as a non-root user with the node's group where the
//! host's facts name it (the agent's servers run that way), and lists Level Zero / OpenCL
//! devices when the image has `clinfo`. The verdict counts what the pod saw against what it
//! requested, and the node's allocatable against the host's facts.
//!
//! The effects (create, watch, log, delete) are in [`run`]; `commands/test.rs` is the edge.

pub mod claims;
pub mod run;
pub mod share;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::escape::Untrusted;
use crate::facts::{Facts, Vendor};

/// `test --json`.
pub const SCHEMA: &str = "k3d-gpu.test/v1";
/// Where the smoke pods run: a namespace every cluster has, so the test creates nothing else.
pub const NAMESPACE: &str = "default";
/// Seconds a smoke pod may take, its image pull included, unless `test --timeout` says otherwise.
pub const DEFAULT_TIMEOUT_S: u64 = 300;
/// On every smoke pod, its own name as the value: what the test watches and what it may
/// delete (never a pod without it). Not the managed-by label: a plan must never own them.
pub const LABEL: &str = "k3d-gpu.io/smoke-test";
/// The image of the NVIDIA pod: the reference launcher's default test image
/// (K3D_GPU_TEST_IMAGE in the reference README's environment table). By tag; the digest comes
/// from images.lock like every image's.
pub const NVIDIA_IMAGE: &str = "nvidia/cuda:13.4.2-base-ubuntu26.04";
/// The image of the device-node pods (the reference's K3D_GPU_DEVICE_TEST_IMAGE).
pub const DEVICE_IMAGE: &str = "busybox:1.37";
/// The uid the device-node pods run as when the facts name the nodes' group: `nobody`, so
/// only the group can open the node (root would open any mode and prove nothing about it).
pub const PROBE_UID: u32 = 65534;

/// The shell the device-node pods run: `sh -c PROBE_SCRIPT k3d-gpu-test PATH…`, each PATH a
/// directory whose entries are probed or a device node itself. One line per entry:
/// `open PATH`, `denied PATH: <the shell's reason>`, `none DIR` for an empty or missing
/// directory; then `id …` (who the pod ran as, for the group diagnosis) and `clinfo …` lines
/// when the image has clinfo. Always exits 0: the verdict reads the lines.
pub const PROBE_SCRIPT: &str = r#"for p in "$@"; do
  if [ -d "$p" ]; then found=0
    for f in "$p"/*; do [ -e "$f" ] || continue; found=1
      if err=$( (exec 3<>"$f") 2>&1 ); then echo "open $f"; else echo "denied $f: $err"; fi
    done
    [ "$found" = 1 ] || echo "none $p"
  elif [ -e "$p" ]; then
    if err=$( (exec 3<>"$p") 2>&1 ); then echo "open $p"; else echo "denied $p: $err"; fi
  else echo "none $p"; fi
done
echo "id $(id)"
if command -v clinfo >/dev/null 2>&1; then clinfo -l 2>&1 | sed 's/^/clinfo /'; fi
exit 0"#;

/// How a resource's pod proves its device usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    /// `nvidia-smi -L` under RuntimeClass `nvidia`: one `GPU n: …` line per GPU it can use.
    NvidiaSmi,
    /// Open every device node in these paths; count the ones named `prefix` + digits.
    Devices,
}

/// What one accelerator resource is and how its pod probes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    pub vendor: Vendor,
    pub probe: Probe,
    /// The paths the pod probes (device-node probes).
    pub paths: &'static [&'static str],
    /// The node names that count: this prefix, then digits (and dots: `wq0.1`); or exactly it.
    pub prefix: &'static str,
}

/// The accelerator resources `test` knows, by their Kubernetes name. Anything else a node
/// advertises (cpu, memory, hugepages, a plugin's millicores or memory accounting) is not a
/// device to open.
pub fn kind_of(resource: &str) -> Option<Kind> {
    let devices = |vendor, paths, prefix| Some(Kind { vendor, probe: Probe::Devices, paths, prefix });
    match resource {
        "nvidia.com/gpu" => Some(Kind { vendor: Vendor::Nvidia, probe: Probe::NvidiaSmi, paths: &[], prefix: "GPU" }),
        "gpu.intel.com/i915" | "gpu.intel.com/xe" | "gpu.intel.com/monitoring" => {
            devices(Vendor::Intel, &["/dev/dri"], "renderD")
        }
        "gpu.intel.com/dxg" => devices(Vendor::Wsl, &["/dev/dxg"], "dxg"),
        "npu.intel.com/accel" => devices(Vendor::Npu, &["/dev/accel"], "accel"),
        "habana.ai/gaudi" => devices(Vendor::Gaudi, &["/dev/accel"], "accel"),
        r if r.starts_with("dsa.intel.com/wq-user-") => devices(Vendor::Dsa, &["/dev/dsa"], "wq"),
        r if r.starts_with("iaa.intel.com/wq-user-") => devices(Vendor::Iaa, &["/dev/iax"], "wq"),
        // The QAT plugin hands over a VF's VFIO group (`/dev/vfio/<n>`) and the container node.
        r if r.starts_with("qat.intel.com/") => devices(Vendor::Qat, &["/dev/vfio"], ""),
        _ => None,
    }
}

/// Whether a device node's file name counts for `prefix`.
fn counts(name: &str, prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else { return false };
    if prefix.is_empty() || !rest.is_empty() {
        return !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '.');
    }
    true
}

/// One smoke pod to run: a resource on a node. The resource and node are the API server's
/// names (a plugin's resource suffix, a node's name); the pod's name is ours ([`pod_name`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SmokePod {
    pub resource: Untrusted,
    pub node: Untrusted,
    pub pod: String,
    /// As the pod carries it (`repo:tag@sha256:…` when locked).
    pub image: String,
    pub probe: Probe,
    /// How many of the resource it requests, and so how many devices it must see.
    pub requested: u32,
    /// Devices it must see: `requested`, or every GPU for `gpu.intel.com/monitoring`.
    pub expected: u32,
    /// Run as [`PROBE_UID`] with these supplementary groups; empty: as the image's user (root).
    pub groups: Vec<u32>,
}

/// A resource the node advertises, against the host's facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Count {
    pub resource: Untrusted,
    pub node: Untrusted,
    /// Devices the host's facts hold for this resource (`None`: the facts do not count it).
    pub facts: Option<u32>,
    pub allocatable: u64,
}

/// A pod name from a resource and a node index: DNS-1123, at most 63 characters.
pub fn pod_name(resource: &str, index: usize) -> String {
    let slug: String =
        resource.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let mut name = format!("k3d-gpu-test-{slug}");
    if index > 0 {
        name.push_str(&format!("-{index}"));
    }
    name.truncate(63);
    name.trim_end_matches('-').to_string()
}

/// The devices the facts hold for `resource` (what the node should advertise at least).
pub fn facts_count(facts: &Facts, resource: &str) -> Option<u32> {
    let host = &facts.host;
    let n = |x: usize| Some(x as u32);
    let detected = |v: Vendor| facts.detected.iter().find(|d| d.vendor == v).map(|d| d.devices);
    match resource {
        "nvidia.com/gpu" => detected(Vendor::Nvidia),
        r if r.starts_with("gpu.intel.com/") && r != "gpu.intel.com/monitoring" && r != "gpu.intel.com/dxg" => {
            let driver = &r["gpu.intel.com/".len()..];
            n(host.intel_gpus.iter().filter(|g| g.usable() && g.driver.as_deref() == Some(driver)).count())
        }
        "npu.intel.com/accel" => detected(Vendor::Npu),
        "habana.ai/gaudi" => detected(Vendor::Gaudi),
        r if r.starts_with("dsa.intel.com/wq-user-") || r.starts_with("iaa.intel.com/wq-user-") => {
            let (idxd, mode) = if r.starts_with("dsa") { (&host.dsa, &r[22..]) } else { (&host.iaa, &r[22..]) };
            n(idxd
                .work_queues
                .iter()
                .filter(|q| q.usable_by_pods() && q.mode.as_deref().unwrap_or("dedicated") == mode)
                .count())
        }
        _ => None,
    }
}

/// The groups a non-root pod needs for `vendor`'s device nodes, from the facts: `None` when
/// a node's group is unknown (gid 0 is root's, never a render group), so the pod runs as root.
fn device_groups(facts: &Facts, vendor: Vendor) -> Option<Vec<u32>> {
    let host = &facts.host;
    let gids: Vec<u32> = match vendor {
        Vendor::Intel => host
            .intel_gpus
            .iter()
            .filter(|g| g.usable())
            .flat_map(|g| g.device_nodes.iter().filter(|d| d.path.contains("/renderD")).map(|d| d.gid))
            .collect(),
        Vendor::Npu => host.npus.iter().filter_map(|n| n.device_node.as_ref().map(|d| d.gid)).collect(),
        _ => return None,
    };
    if gids.is_empty() || gids.contains(&0) {
        return None;
    }
    let mut gids = gids;
    gids.sort_unstable();
    gids.dedup();
    Some(gids)
}

/// The images the smoke pods of `facts`' active vendors use, by their catalog name (for
/// `images`, `images lock` and `images check`).
pub fn images_for(facts: &Facts) -> Vec<&'static str> {
    let mut out = Vec::new();
    if facts.is_active(Vendor::Nvidia) {
        out.push(NVIDIA_IMAGE);
    }
    if facts.detected.iter().any(|d| d.vendor != Vendor::Nvidia && d.resources.iter().any(|r| kind_of(r).is_some())) {
        out.push(DEVICE_IMAGE);
    }
    out
}

/// The pods to run and the counts to check: one pod per accelerator resource each node
/// advertises (allocatable > 0), and a count for each. `allocatable` is each node's
/// allocatable as the API server gives it; `images` maps a catalog image name to the
/// reference the pod carries.
pub fn plan(
    facts: &Facts,
    allocatable: &BTreeMap<String, BTreeMap<String, String>>,
    images: &BTreeMap<&str, String>,
) -> (Vec<SmokePod>, Vec<Count>) {
    let mut pods = Vec::new();
    let mut counts = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (node, resources) in allocatable {
        for (resource, quantity) in resources {
            let Some(kind) = kind_of(resource) else { continue };
            // Device plugins advertise whole devices: a plain integer.
            let amount = quantity.trim().parse::<u64>().unwrap_or(0);
            if amount == 0 {
                continue;
            }
            counts.push(Count {
                resource: resource.as_str().into(),
                node: node.as_str().into(),
                facts: facts_count(facts, resource),
                allocatable: amount,
            });
            let index = seen.entry(resource.clone()).or_default();
            let pod = pod_name(resource, *index);
            *index += 1;
            let (image, groups) = match kind.probe {
                Probe::NvidiaSmi => (NVIDIA_IMAGE, Vec::new()),
                Probe::Devices => (DEVICE_IMAGE, device_groups(facts, kind.vendor).unwrap_or_default()),
            };
            let expected = if resource == "gpu.intel.com/monitoring" {
                facts.host.intel_gpus.iter().filter(|g| g.usable()).count().max(1) as u32
            } else {
                1
            };
            pods.push(SmokePod {
                resource: resource.as_str().into(),
                node: node.as_str().into(),
                pod,
                image: images.get(image).cloned().unwrap_or_else(|| image.to_string()),
                probe: kind.probe,
                requested: 1,
                expected,
                groups,
            });
        }
    }
    (pods, counts)
}

/// The pod's manifest: restartPolicy Never, on its node, one container requesting the
/// resource, our label with its own name, a deadline of its own.
pub fn manifest(p: &SmokePod, deadline_s: u64) -> Value {
    let kind = kind_of(p.resource.raw());
    let (command, runtime_class): (Vec<String>, Option<&str>) = match p.probe {
        Probe::NvidiaSmi => (vec!["nvidia-smi".into(), "-L".into()], Some("nvidia")),
        Probe::Devices => {
            let mut c = vec!["sh".to_string(), "-c".into(), PROBE_SCRIPT.into(), "k3d-gpu-test".into()];
            c.extend(kind.map(|k| k.paths).unwrap_or_default().iter().map(|s| s.to_string()));
            (c, None)
        }
    };
    let mut spec = json!({
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline_s.max(1),
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": false,
        "nodeSelector": { "kubernetes.io/hostname": p.node },
        "containers": [{
            "name": "probe",
            "image": p.image,
            "command": command,
            "resources": { "limits": { p.resource.raw(): p.requested.to_string() } },
            "securityContext": { "allowPrivilegeEscalation": false },
        }],
    });
    if let Some(rc) = runtime_class {
        spec["runtimeClassName"] = json!(rc);
    }
    if !p.groups.is_empty() {
        spec["securityContext"] =
            json!({ "runAsUser": PROBE_UID, "runAsGroup": PROBE_UID, "supplementalGroups": p.groups });
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": p.pod,
            "namespace": NAMESPACE,
            "labels": { LABEL: p.pod, "app.kubernetes.io/name": "k3d-gpu-test" },
        },
        "spec": spec,
    })
}

/// What became of a pod, as the API server showed it: every text here is the cluster's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// `Succeeded`, `Failed`, `Pending`, `Running` or `Unknown`.
    pub phase: Untrusted,
    /// The container's log.
    pub log: Untrusted,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub log_cut: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The container's waiting or terminated reason and message (`ImagePullBackOff: …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Untrusted>,
    /// The scheduler's message when it could not place the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<Untrusted>,
    /// It had not finished by the deadline.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// It could not be created (the API server's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<Untrusted>,
    /// The ResourceClaims the pod's status names (a DRA pod's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<Untrusted>,
    /// The devices the driver allocated to those claims.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocated: Vec<Untrusted>,
}

/// A pod's verdict. `cause` and `fix` are this tool's sentences: every outside value in them
/// went in through `Untrusted`'s `Display` (one escaped line), every command through `shell`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub passed: bool,
    /// Devices the pod could use (GPUs listed, device nodes opened).
    pub seen: u32,
    /// The lines it printed that the verdict read.
    pub evidence: Vec<Untrusted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The commands a fix names, built for this run's cluster (see [`crate::shell`]).
pub struct Hints {
    /// `kubectl --context …`.
    pub kubectl: crate::shell::Command,
    /// `k3d-gpu` with the options given.
    pub k3d_gpu: crate::shell::Command,
    /// The catalog component that advertises each resource.
    pub component: BTreeMap<String, String>,
    /// The cluster's name, for the commands that take it (`k3d image import … -c NAME`).
    pub cluster: String,
}

impl Hints {
    fn logs(&self, resource: &str) -> String {
        match self.component.get(resource) {
            Some(c) => self.k3d_gpu.clone().lit("logs").arg(c).to_string(),
            None => self.kubectl.clone().lit("get pods -A").to_string(),
        }
    }
}

/// Reads what the pod printed. Pure.
pub fn verdict(p: &SmokePod, o: &Outcome, facts: &Facts, hints: &Hints) -> Verdict {
    if let Some(verdict) = not_run(p, o, hints) {
        return verdict;
    }
    let lines: Vec<&str> = o.log.raw().lines().collect();
    match p.probe {
        Probe::NvidiaSmi => nvidia_smi_verdict(p, &lines, hints),
        Probe::Devices => devices_verdict(p, &lines, hints, firmware_note(facts, p)),
    }
}

fn failed(seen: u32, evidence: Vec<Untrusted>, cause: String, fix: String) -> Verdict {
    Verdict { passed: false, seen, evidence, cause: Some(cause), fix: Some(fix) }
}

/// The verdict of a pod that printed nothing to judge: refused, never scheduled, a container
/// that did not start, or out of time. `None`: it ran; its output decides.
fn not_run(p: &SmokePod, o: &Outcome, hints: &Hints) -> Option<Verdict> {
    let fail =
        |seen: u32, evidence: Vec<Untrusted>, cause: String, fix: String| Some(failed(seen, evidence, cause, fix));
    let printed = o.log.raw().lines().next().is_some();
    let describe = hints.kubectl.clone().opt("-n", NAMESPACE).lit("describe pod").arg(&p.pod).to_string();
    if let Some(why) = &o.refused {
        let (cause, fix) = if why.raw().contains("RuntimeClass") || why.raw().contains("runtimeclass") {
            (
                format!(
                    "the API server refused the pod: {why} (the node's k3s found no NVIDIA runtime, so it has no `nvidia` RuntimeClass)"
                ),
                format!(
                    "use a node image with the NVIDIA container toolkit (`{}`)",
                    hints.k3d_gpu.clone().lit("doctor")
                ),
            )
        } else {
            (format!("the API server refused the pod: {why}"), describe)
        };
        return fail(0, Vec::new(), cause, fix);
    }
    if let Some(message) = &o.unschedulable {
        let busy = message.raw().contains("Insufficient");
        let cause = if busy {
            format!(
                "the pod could not be scheduled: {message} — every {} is in use (an Intel GPU is handed out exclusively, so the agent holding it blocks this pod)",
                p.resource
            )
        } else {
            format!("the pod could not be scheduled: {message}")
        };
        let fix = format!("see what holds it: `{}`", hints.kubectl.clone().lit("get pods -A -o wide"));
        return fail(0, Vec::new(), cause, fix);
    }
    if let Some(reason) = &o.reason
        && !printed
    {
        let r = reason.raw();
        let (cause, fix) = if r.contains("ImagePull") || r.contains("ErrImage") || r.contains("InvalidImageName") {
            (
                format!("the node could not pull {}: {reason}", p.image),
                format!(
                    "check the node's network and registry access, or load the image into the cluster (`{}`); `{}`",
                    crate::shell::Command::new("k3d").lit("image import").arg(&p.image).opt("-c", &hints.cluster),
                    describe
                ),
            )
        } else if p.probe == Probe::NvidiaSmi
            && (r.contains("nvidia") || r.contains("runtime") || r.contains("libnvidia") || r.contains("NVML"))
        {
            (
                format!(
                    "the container could not start with the NVIDIA runtime: {reason} (containerd's nvidia runtime or the driver libraries are missing in the node)"
                ),
                format!(
                    "check the node image and its NVIDIA runtime (`{}`), and the host driver (`nvidia-smi` on the host)",
                    hints.k3d_gpu.clone().lit("doctor")
                ),
            )
        } else {
            (format!("the container did not run: {reason}"), describe)
        };
        return fail(0, Vec::new(), cause, fix);
    }
    if o.timed_out && !printed {
        return fail(
            0,
            Vec::new(),
            format!(
                "the pod did not finish before the deadline (phase {})",
                if o.phase.is_empty() { "unknown".to_string() } else { o.phase.to_string() }
            ),
            describe,
        );
    }
    None
}

/// `nvidia-smi -L`: one line per GPU the container was given.
fn nvidia_smi_verdict(p: &SmokePod, lines: &[&str], hints: &Hints) -> Verdict {
    let fail = failed;
    let gpus: Vec<Untrusted> =
        lines.iter().filter(|l| l.starts_with("GPU ") && l.contains(':')).map(|l| Untrusted::from(*l)).collect();
    let seen = gpus.len() as u32;
    let evidence = if gpus.is_empty() { lines.iter().take(10).map(|l| Untrusted::from(*l)).collect() } else { gpus };
    if seen == p.expected {
        return Verdict { passed: true, seen, evidence, cause: None, fix: None };
    }
    let text = lines.join(" ");
    let (cause, fix) = if text.contains("NVML") || text.contains("result=") {
        (
            "nvidia-smi could not initialise NVML: the test image's CUDA is newer than the host driver, or the driver's libraries in the pod do not match the kernel module".to_string(),
            format!(
                "run the test with an image your driver supports (`{}`; the CUDA/driver compatibility table), or update the host driver",
                hints.k3d_gpu.clone().lit("test --nvidia-image").arg("nvidia/cuda:<older>-base-ubuntu24.04")
            ),
        )
    } else if text.contains("not found") || text.contains("executable file") {
        (
            "nvidia-smi is not in the pod: the NVIDIA runtime did not inject the driver's tools and libraries (the pod did not run under the nvidia runtime, or CDI is not set up)".to_string(),
            format!("check the node image's NVIDIA runtime (`{}`)", hints.k3d_gpu.clone().lit("doctor")),
        )
    } else {
        (
            format!(
                "nvidia-smi listed {seen} GPU(s), the pod requested {}: the device plugin's allocation did not reach the container",
                p.expected
            ),
            format!("read the plugin's log: `{}`", hints.logs(p.resource.raw())),
        )
    };
    fail(seen, evidence, cause, fix)
}

/// The device probe: which device nodes the container could open.
fn devices_verdict(p: &SmokePod, lines: &[&str], hints: &Hints, firmware: Option<String>) -> Verdict {
    let fail = failed;
    let prefix = kind_of(p.resource.raw()).map_or("", |k| k.prefix);
    let name_of = |path: &str| path.rsplit('/').next().unwrap_or_default().to_string();
    let mut opened = 0u32;
    let mut denied = Vec::new();
    let mut evidence = Vec::new();
    for l in lines {
        let (word, rest) = l.split_once(' ').unwrap_or((l, ""));
        let path = rest.split(": ").next().unwrap_or_default();
        match word {
            "open" | "denied" | "none" | "id" | "clinfo" => evidence.push(Untrusted::from(*l)),
            _ => continue,
        }
        let counted = counts(&name_of(path), prefix);
        if word == "open" && counted {
            opened += 1;
        } else if word == "denied" && counted {
            denied.push(Untrusted::from(path));
        }
    }
    if opened >= p.expected && denied.is_empty() {
        return Verdict { passed: true, seen: opened, evidence, cause: None, fix: None };
    }
    let (cause, fix) = if !denied.is_empty() {
        let who = if p.groups.is_empty() {
            "as root".to_string()
        } else {
            format!(
                "as uid {PROBE_UID} with group(s) {}",
                p.groups.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            )
        };
        (
            format!(
                "the pod got {} but could not open it ({who}): the device node's group or mode does not let the pod in",
                shown(&denied)
            ),
            "compare the node's owner and mode on the host (`ls -ln /dev/dri /dev/accel`) with the group in `k3d-gpu detect`; a workload that runs as non-root needs that gid in securityContext.supplementalGroups (or a udev rule giving the node mode 0666)".to_string(),
        )
    } else {
        (
            format!(
                "the pod saw {opened} of {} device node(s) it should have been given: the plugin advertised {} but did not hand the node over",
                p.expected, p.resource
            ),
            format!("read the plugin's log: `{}`", hints.logs(p.resource.raw())),
        )
    };
    let cause = match firmware {
        Some(note) => format!("{cause}; also: {note}"),
        None => cause,
    };
    fail(opened, evidence, cause, fix)
}

/// A firmware finding of the host for this pod's vendor (the reference's third failure mode:
/// a device that opens but whose firmware the driver or runtime refuses).
fn firmware_note(facts: &Facts, p: &SmokePod) -> Option<String> {
    let vendor = kind_of(p.resource.raw())?.vendor;
    let key = match vendor {
        Vendor::Intel => "guc",
        Vendor::Npu => "npu",
        _ => return None,
    };
    facts
        .findings
        .iter()
        .find(|f| {
            f.level != crate::facts::Level::Info && f.code.contains(key) && f.code.contains("firmware")
                || f.level != crate::facts::Level::Info && f.code.starts_with(key) && f.text.contains("firmware")
        })
        .map(|f| format!("the host's facts say: {} [{}]", f.text, f.code))
}

/// The resources a DRA driver serves instead of a device plugin, by the DeviceClasses the
/// graph deploys: no node advertises them, and their claims are tested instead.
pub fn dra_served<'a>(device_classes: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    let mut out = Vec::new();
    for class in device_classes {
        match class {
            "gpu.intel.com" => out.extend(["gpu.intel.com/i915", "gpu.intel.com/xe", "gpu.intel.com/monitoring"]),
            "gpu.nvidia.com" => out.push("nvidia.com/gpu"),
            _ => {}
        }
    }
    out
}

/// The counts' verdicts: a node that advertises fewer devices than the facts hold, and a
/// resource the facts say the host has that no node advertises (unless a DRA driver, `dra`,
/// serves it).
pub fn count_problems(facts: &Facts, counts: &[Count], dra: &[&str], hints: &Hints) -> Vec<Problem> {
    let mut out = Vec::new();
    for c in counts {
        if let Some(want) = c.facts
            && c.allocatable < u64::from(want)
        {
            out.push(Problem {
                resource: c.resource.clone(),
                text: format!(
                    "node {} advertises {} {}, the host's facts hold {want}",
                    c.node, c.allocatable, c.resource
                ),
                fix: format!("read the plugin's log: `{}`", hints.logs(c.resource.raw())),
            });
        }
    }
    for d in &facts.detected {
        for r in &d.resources {
            if kind_of(r).is_none() || counts.iter().any(|c| c.resource.raw() == r) || dra.contains(&r.as_str()) {
                continue;
            }
            out.push(Problem {
                resource: r.as_str().into(),
                text: format!(
                    "the host has {} ({} device(s) in its facts) but no node advertises {r}: its device plugin is not running or found nothing",
                    d.vendor, d.devices
                ),
                fix: format!(
                    "`{}` shows whether the plugin is deployed; then `{}`",
                    hints.k3d_gpu.clone().lit("plan"),
                    hints.logs(r)
                ),
            });
        }
    }
    out
}

/// A count that does not hold. `text` and `fix` are this tool's sentences, as a verdict's are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub resource: Untrusted,
    pub text: String,
    pub fix: String,
}

/// One pod's result, as `test --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct PodResult {
    #[serde(flatten)]
    pub pod: SmokePod,
    pub outcome: Outcome,
    pub verdict: Verdict,
}

/// `test --json`: `k3d-gpu.test/v1`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub cluster: String,
    pub passed: bool,
    pub pods: Vec<PodResult>,
    /// The sharing proofs: one group per shared resource and node ([`share`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<share::GroupResult>,
    /// Each `[[claims]]` template's pod ([`claims`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<claims::ClaimResult>,
    pub counts: Vec<Count>,
    pub problems: Vec<Problem>,
}

/// What `test` found, before it is judged as a whole.
pub struct Found {
    pub pods: Vec<PodResult>,
    pub shares: Vec<share::GroupResult>,
    pub claims: Vec<claims::ClaimResult>,
    pub counts: Vec<Count>,
    pub problems: Vec<Problem>,
}

impl Report {
    pub fn new(cluster: &str, found: Found) -> Report {
        let Found { pods, shares, claims, counts, problems } = found;
        let passed = pods.iter().all(|p| p.verdict.passed)
            && shares.iter().all(|s| s.verdict.passed)
            && claims.iter().all(|c| c.verdict.passed)
            && problems.is_empty();
        Report { schema: SCHEMA, cluster: cluster.to_string(), passed, pods, shares, claims, counts, problems }
    }
}

/// Outside values, each one escaped line, in a list.
fn shown(values: &[Untrusted]) -> String {
    values.iter().map(Untrusted::to_string).collect::<Vec<_>>().join(", ")
}

/// The report as text (the caller passes it through `escape::assembled` as a last guard).
/// The cluster's names, messages and log lines are `Untrusted`, shown as one escaped line
/// each, so none can start a `pass …` or `N pod(s), 0 failure(s)` line of its own; causes,
/// fixes and problems are sentences made of those. What is a `String` here is ours or the
/// config's (pod names, a claim's namespace and template, the cluster), escaped all the same.
pub fn text(r: &Report) -> String {
    use std::fmt::Write;
    let l = |text: &str| crate::escape::one_line(text).into_owned();
    let mut out = String::new();
    if r.pods.is_empty() && r.problems.is_empty() {
        let _ = writeln!(out, "cluster {}: no node advertises an accelerator resource; nothing to test", l(&r.cluster));
    }
    for p in &r.pods {
        let word = if p.verdict.passed { "pass" } else { "FAIL" };
        let _ = writeln!(
            out,
            "{word}  {} on {} (pod {}): {} of {} expected",
            p.pod.resource,
            p.pod.node,
            l(&p.pod.pod),
            p.verdict.seen,
            p.pod.expected
        );
        for e in &p.verdict.evidence {
            let _ = writeln!(out, "      | {e}");
        }
        notes(&mut out, &p.verdict.cause, &p.verdict.fix);
    }
    for s in &r.shares {
        let word = if s.verdict.passed { "pass" } else { "FAIL" };
        let _ = writeln!(
            out,
            "{word}  {} on {} shared: {} pod(s) for {} device(s), {} together",
            s.group.resource,
            s.group.node,
            s.group.pods.len(),
            s.group.devices,
            s.verdict.together.len()
        );
        for (pod, device) in &s.verdict.devices {
            let _ = writeln!(out, "      | {}: {device}", l(pod));
        }
        if !s.verdict.apart.is_empty() {
            let _ = writeln!(out, "      never together: {}", l(&s.verdict.apart.join(", ")));
        }
        notes(&mut out, &s.verdict.cause, &s.verdict.fix);
    }
    for c in &r.claims {
        let word = if c.verdict.passed { "pass" } else { "FAIL" };
        let _ = writeln!(
            out,
            "{word}  claim template {}/{} (pod {}): saw {}, allocated {}",
            l(&c.namespace),
            l(&c.template),
            l(&c.pod),
            if c.verdict.seen.is_empty() { "nothing".to_string() } else { shown(&c.verdict.seen) },
            if c.verdict.allocated.is_empty() { "nothing".to_string() } else { shown(&c.verdict.allocated) }
        );
        notes(&mut out, &c.verdict.cause, &c.verdict.fix);
    }
    for c in &r.counts {
        let facts = c.facts.map_or("not counted".to_string(), |n| n.to_string());
        let _ = writeln!(out, "count {} on {}: allocatable {}, host facts {facts}", c.resource, c.node, c.allocatable);
    }
    for p in &r.problems {
        let _ = writeln!(out, "FAIL  {}\n      fix: {}", p.text, p.fix);
    }
    let failed = r.pods.iter().filter(|p| !p.verdict.passed).count()
        + r.shares.iter().filter(|s| !s.verdict.passed).count()
        + r.claims.iter().filter(|c| !c.verdict.passed).count()
        + r.problems.len();
    let pods = r.pods.len() + r.shares.iter().map(|s| s.group.pods.len()).sum::<usize>() + r.claims.len();
    let _ = writeln!(out, "\n{pods} pod(s), {failed} failure(s)");
    out
}

/// A failed verdict's cause and fix, those it has, indented under its line: sentences whose
/// outside values are already one line each.
fn notes(out: &mut String, cause: &Option<String>, fix: &Option<String>) {
    use std::fmt::Write;
    for (label, line) in [("cause", cause), ("fix", fix)] {
        if let Some(line) = line {
            let _ = writeln!(out, "      {label}: {line}");
        }
    }
}

#[cfg(test)]
mod tests;
