//! `k3d-gpu test` for DRA, the pure half: each `[[claims]]` template proved by a pod that asks
//! for it (`resourceClaimTemplateName`), and DRA sharing proved as the plugins' is, by overlap:
//! one ResourceClaim made from the template, two pods that both reference it
//! (`resourceClaimName`), Running at the same moment and reporting the same device. The DRA
//! scheduler lets the pods of one claim share its devices; a driver or cluster that cannot
//! fails here instead of in a user's workload.
//!
//! The pods run the probe of [`super::share`] for their driver: for Intel (`gpu.intel.com`)
//! each render node the driver injected, with the card behind it; for NVIDIA
//! (`gpu.nvidia.com`) `nvidia-smi -L`, each GPU's UUID. The claim's own status names the
//! device the driver allocated (`status.allocation.devices.results[].device`), which the
//! verdict shows beside what the pod saw. NVIDIA pods carry `NVIDIA_VISIBLE_DEVICES=void`, as
//! the NVIDIA driver's own pods do: a CUDA image sets it to `all`, and an nvidia runtime would
//! then hand the pod every GPU whatever its claim, so the GPUs it sees are the claim's, or
//! isolation is broken and the verdict says so.

use serde::Serialize;
use serde_json::{Value, json};

use super::share::{DEVICE_PATHS, DEVICE_SCRIPT, NVIDIA_SCRIPT};
use super::{Hints, LABEL, Outcome, Probe, SmokePod};
use crate::escape::Untrusted;

/// The name a pod or claim of the test gets for template `template`: DNS-1123, at most 63.
fn name(prefix: &str, template: &str, suffix: &str) -> String {
    let n = format!("{prefix}-{template}");
    if n.len() + suffix.len() <= 63 {
        return format!("{n}{suffix}");
    }
    // Cut, with a digest of the whole name so two long templates never share one.
    let digest = crate::canonical::sha256(n.as_bytes());
    let tag = &digest[digest.len() - 8..];
    let mut cut = n;
    cut.truncate(63 - suffix.len() - 9);
    format!("{}-{tag}{suffix}", cut.trim_end_matches('-'))
}

/// One `[[claims]]` template, as the graph holds it, and the test's names for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub namespace: String,
    pub template: String,
    /// GPUs one claim gets (`count`).
    pub count: u32,
    /// The pod that asks for the template.
    pub pod: String,
    /// The shared claim and its pods.
    pub claim: String,
    pub sharers: Vec<String>,
    pub image: String,
    /// How its pods report the devices they got, from the template's DeviceClass.
    #[serde(skip)]
    pub probe: Probe,
    /// The template's `spec` (a claim's spec): the shared claim is made from it.
    #[serde(skip)]
    pub spec: Value,
}

/// The NVIDIA DRA driver's DeviceClass: its pods probe with `nvidia-smi`.
const NVIDIA_CLASS: &str = crate::compile::nvidia_dra::DRIVER;

/// The checks for the ResourceClaimTemplates in `objects` (the graph's objects); an NVIDIA
/// template's pods run `nvidia_image`, the others `device_image`.
pub fn checks<'a>(objects: impl Iterator<Item = &'a Value>, device_image: &str, nvidia_image: &str) -> Vec<Check> {
    objects
        // `[[claims]]`' own templates: not a component's (XPU Manager's admin-access one).
        .filter(|o| {
            o["kind"] == "ResourceClaimTemplate" && o["metadata"]["labels"][crate::compile::COMPONENT_LABEL] == "claims"
        })
        .filter_map(|o| {
            let template = o["metadata"]["name"].as_str()?.to_string();
            let namespace = o["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
            let spec = o["spec"]["spec"].clone();
            let exactly = &spec["devices"]["requests"][0]["exactly"];
            let count = exactly["count"].as_u64().unwrap_or(1) as u32;
            let (probe, image) = if exactly["deviceClassName"] == NVIDIA_CLASS {
                (Probe::NvidiaSmi, nvidia_image)
            } else {
                (Probe::Devices, device_image)
            };
            Some(Check {
                pod: name("k3d-gpu-claim", &template, ""),
                claim: name("k3d-gpu-shared", &template, ""),
                sharers: (0..2).map(|i| name("k3d-gpu-shared", &template, &format!("-{i}"))).collect(),
                namespace,
                template,
                count,
                image: image.to_string(),
                probe,
                spec,
            })
        })
        .collect()
}

/// A probe pod of the test: the device script, held `hold_s` seconds (0: it prints and ends),
/// its claim as `source` (`{"resourceClaimTemplateName": …}` or `{"resourceClaimName": …}`).
fn pod(c: &Check, name: &str, source: Value, hold_s: u64, deadline_s: u64, group: Option<&str>) -> Value {
    let mut claim = json!({ "name": "gpu" });
    if let (Some(map), Some(src)) = (claim.as_object_mut(), source.as_object()) {
        map.extend(src.clone());
    }
    let mut labels = json!({ LABEL: name, "app.kubernetes.io/name": "k3d-gpu-test" });
    if let Some(g) = group {
        labels[super::share::GROUP_LABEL] = json!(g);
    }
    let hold = hold_s.to_string();
    let (command, env) = match c.probe {
        Probe::NvidiaSmi => (
            json!(["sh", "-c", NVIDIA_SCRIPT, "k3d-gpu-test", hold]),
            json!([{ "name": "NVIDIA_VISIBLE_DEVICES", "value": "void" }]),
        ),
        Probe::Devices => {
            (json!(["sh", "-c", DEVICE_SCRIPT, "k3d-gpu-test", hold, DEVICE_PATHS[0], DEVICE_PATHS[1]]), json!([]))
        }
    };
    let mut container = json!({
        "name": "probe",
        "image": c.image,
        "command": command,
        "resources": { "claims": [{ "name": "gpu" }] },
        "securityContext": { "allowPrivilegeEscalation": false },
    });
    if env.as_array().is_some_and(|e| !e.is_empty()) {
        container["env"] = env;
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": c.namespace, "labels": labels },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline_s.max(1),
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": false,
            "resourceClaims": [claim],
            "containers": [container],
        },
    })
}

/// The pod that asks for the template: it prints the devices it got and ends.
pub fn template_pod(c: &Check, deadline_s: u64) -> Value {
    pod(c, &c.pod, json!({ "resourceClaimTemplateName": c.template }), 0, deadline_s, None)
}

/// The claim the sharing pods reference: the template's spec, our label.
pub fn shared_claim(c: &Check) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": { "name": c.claim, "namespace": c.namespace, "labels": { LABEL: c.claim } },
        "spec": c.spec,
    })
}

/// The sharing pods: both reference the one claim and hold its device.
pub fn sharing_pods(c: &Check, deadline_s: u64) -> Vec<Value> {
    c.sharers
        .iter()
        .map(|p| pod(c, p, json!({ "resourceClaimName": c.claim }), deadline_s, deadline_s, Some(&c.claim)))
        .collect()
}

/// The sharing pods as a group [`super::share::verdict`] reads: two pods, one device.
pub fn group(c: &Check) -> super::share::Group {
    super::share::Group {
        name: c.claim.clone(),
        namespace: c.namespace.clone(),
        resource: format!("claim {}/{}", c.namespace, c.claim).into(),
        node: "(the scheduler's choice)".into(),
        promised: 2,
        devices: 1,
        allocatable: 2,
        held: 0,
        mps: false,
        pods: c
            .sharers
            .iter()
            .map(|p| SmokePod {
                resource: format!("claim {}", c.claim).into(),
                node: Untrusted::default(),
                pod: p.clone(),
                image: c.image.clone(),
                probe: c.probe,
                requested: 1,
                expected: 1,
                groups: Vec::new(),
            })
            .collect(),
    }
}

/// The devices a claim's status says the driver allocated.
pub fn allocated(claim: &Value) -> Vec<Untrusted> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some(Untrusted::from(r["device"].as_str()?)))
        .collect()
}

/// The template pod's verdict: it ran and saw as many devices as the claim asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub passed: bool,
    /// The devices the driver allocated to the pod's claim.
    pub allocated: Vec<Untrusted>,
    /// The devices the pod saw: the cards it opened (PCI addresses), or NVIDIA GPUs' UUIDs.
    pub seen: Vec<Untrusted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

pub fn verdict(c: &Check, o: &Outcome, allocated: Vec<Untrusted>, hints: &Hints) -> Verdict {
    let seen: Vec<Untrusted> =
        super::share::devices_seen(c.probe, o.log.raw()).into_iter().map(Untrusted::from).collect();
    let driver_logs = match c.probe {
        Probe::NvidiaSmi => "logs nvidia-gpu-dra",
        Probe::Devices => "logs intel-gpu-dra",
    };
    let describe = hints.kubectl.clone().opt("-n", &c.namespace).lit("describe pod").arg(&c.pod).to_string();
    let cause = if let Some(why) = &o.refused {
        Some((format!("the pod was not created: {why}"), describe.clone()))
    } else if let Some(message) = &o.unschedulable {
        Some((
            format!(
                "no device could be allocated for template {} ({}): no GPU matches its selectors, or every match is taken",
                c.template, message
            ),
            format!(
                "compare the template with what the driver publishes (`{}`)",
                hints.kubectl.clone().lit("get resourceslices -o yaml")
            ),
        ))
    } else if let Some(denied) = o.log.raw().lines().find(|l| l.starts_with("denied ")).map(Untrusted::from) {
        Some((
            format!(
                "the driver injected a device the pod could not open ({denied}): its node's group or mode does not let the pod in"
            ),
            describe.clone(),
        ))
    } else if c.probe == Probe::NvidiaSmi && seen.len() as u32 > c.count {
        Some((
            format!(
                "the pod saw {} GPUs ({}), and its claim gives it {}: the container runtime handed it GPUs outside its claim, so DRA does not isolate pods here",
                seen.len(),
                super::shown(&seen),
                c.count
            ),
            "NVIDIA GPUs through DRA need runc as containerd's default runtime, with the nvidia runtime only by RuntimeClass: drop --default-runtime=nvidia from [cluster] k3s_args".into(),
        ))
    } else if (seen.len() as u32) < c.count {
        Some((
            format!(
                "the pod saw {} of the {} GPU(s) its claim asks for (allocated: {}): the driver did not inject the device nodes",
                seen.len(),
                c.count,
                if allocated.is_empty() { "none".to_string() } else { super::shown(&allocated) }
            ),
            format!("read the DRA driver's log: `{}`", hints.k3d_gpu.clone().lit(driver_logs)),
        ))
    } else {
        None
    };
    match cause {
        Some((cause, fix)) => Verdict { passed: false, allocated, seen, cause: Some(cause), fix: Some(fix) },
        None => Verdict { passed: true, allocated, seen, cause: None, fix: None },
    }
}

/// One template's result, as `test --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimResult {
    pub namespace: String,
    pub template: String,
    pub pod: String,
    pub verdict: Verdict,
}

#[cfg(test)]
mod tests {
    use super::super::tests::hints;
    use super::*;

    fn template() -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "arc-b580", "namespace": "llm", "labels": {"k3d-gpu.io/component": "claims"}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.intel.com", "allocationMode": "ExactCount", "count": 1}}]}}}})
    }

    #[test]
    fn each_template_gets_a_pod_and_a_shared_claim_made_from_it() {
        let t = template();
        let c = checks([&t].into_iter(), "busybox:1.37", "cuda").remove(0);
        assert_eq!((c.pod.as_str(), c.claim.as_str()), ("k3d-gpu-claim-arc-b580", "k3d-gpu-shared-arc-b580"));
        let pod = template_pod(&c, 60);
        assert_eq!(pod["metadata"]["namespace"], "llm");
        assert_eq!(pod["spec"]["resourceClaims"], json!([{"name": "gpu", "resourceClaimTemplateName": "arc-b580"}]));
        assert_eq!(pod["spec"]["containers"][0]["resources"]["claims"], json!([{"name": "gpu"}]));
        assert_eq!(pod["metadata"]["labels"][LABEL], "k3d-gpu-claim-arc-b580", "only ever deletes its own");
        let claim = shared_claim(&c);
        assert_eq!(claim["spec"], t["spec"]["spec"]);
        let sharers = sharing_pods(&c, 60);
        assert_eq!(sharers.len(), 2);
        assert!(
            sharers.iter().all(|p| p["spec"]["resourceClaims"][0]["resourceClaimName"] == "k3d-gpu-shared-arc-b580")
        );
        let long = |n: &str| {
            json!({"kind": "ResourceClaimTemplate", "metadata": {"name": format!("{}{n}", "x".repeat(60)),
                "labels": {"k3d-gpu.io/component": "claims"}}, "spec": {"spec": {}}})
        };
        let (a, b) = (long("a"), long("b"));
        let got = checks([&a, &b].into_iter(), "b", "c");
        assert!(
            got.iter()
                .all(|c| c.pod.len() <= 63 && c.sharers.iter().all(|s| s.len() <= 63 && s.ends_with(char::is_numeric)))
        );
        assert_ne!(got[0].pod, got[1].pod, "two long names cut alike stay apart");
        // A component's template (XPU Manager's admin-access one) is not the user's to test.
        let mut theirs = template();
        theirs["metadata"]["labels"]["k3d-gpu.io/component"] = json!("intel-xpumd-dra");
        assert!(checks([&theirs].into_iter(), "b", "c").is_empty());
    }

    #[test]
    fn the_template_pod_passes_when_it_opens_what_the_claim_asks_for() {
        let t = template();
        let c = checks([&t].into_iter(), "busybox", "cuda").remove(0);
        let ran = Outcome {
            phase: "Succeeded".into(),
            log: "device 0000:03:00.0 renderD129\nready\n".into(),
            ..Default::default()
        };
        let claim = json!({"status": {"allocation": {"devices": {"results": [{"device": "0000-03-00-0-0xe20b"}]}}}});
        let v = verdict(&c, &ran, allocated(&claim), &hints());
        assert!(v.passed, "{v:?}");
        assert_eq!(
            (v.seen.as_slice(), v.allocated.as_slice()),
            (&["0000:03:00.0".into()][..], &["0000-03-00-0-0xe20b".into()][..])
        );
        let empty = Outcome { phase: "Succeeded".into(), log: "ready\n".into(), ..Default::default() };
        let v = verdict(&c, &empty, vec!["gpu-0".into()], &hints());
        assert!(!v.passed && v.cause.as_deref().unwrap().contains("did not inject"), "{v:?}");
        let stuck = Outcome { unschedulable: Some("cannot allocate all claims".into()), ..Default::default() };
        let v = verdict(&c, &stuck, vec![], &hints());
        assert!(v.cause.as_deref().unwrap().contains("no device could be allocated"), "{v:?}");
    }

    #[test]
    fn an_nvidia_template_is_probed_with_nvidia_smi_and_must_see_only_its_claims_gpus() {
        let mut t = template();
        t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = json!("gpu.nvidia.com");
        let c = checks([&t].into_iter(), "busybox", "nvidia/cuda:x").remove(0);
        assert_eq!((c.probe, c.image.as_str()), (Probe::NvidiaSmi, "nvidia/cuda:x"));
        let pod = template_pod(&c, 60);
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["command"][2], NVIDIA_SCRIPT);
        assert_eq!(container["env"], json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]));
        assert!(group(&c).pods.iter().all(|p| p.probe == Probe::NvidiaSmi), "the sharing pods report UUIDs too");
        let one = "GPU 0: NVIDIA H100 PCIe (UUID: GPU-aaaa)\ncompute GPU-aaaa, Default\nready\n";
        let ran = Outcome { phase: "Succeeded".into(), log: one.into(), ..Default::default() };
        let v = verdict(&c, &ran, vec!["gpu-0".into()], &hints());
        assert!(v.passed && v.seen == ["GPU-aaaa"], "{v:?}");
        // Every GPU on the node, claim or not: the runtime broke DRA's isolation.
        let all = format!("{one}GPU 1: NVIDIA H100 PCIe (UUID: GPU-bbbb)\n");
        let leaked = Outcome { phase: "Succeeded".into(), log: all.into(), ..Default::default() };
        let v = verdict(&c, &leaked, vec!["gpu-0".into()], &hints());
        assert!(!v.passed && v.cause.as_deref().unwrap().contains("outside its claim"), "{v:?}");
        let none = Outcome { phase: "Succeeded".into(), log: "ready\n".into(), ..Default::default() };
        let v = verdict(&c, &none, vec!["gpu-0".into()], &hints());
        assert!(v.fix.as_deref().unwrap().contains("logs nvidia-gpu-dra"), "{v:?}");
    }
}
