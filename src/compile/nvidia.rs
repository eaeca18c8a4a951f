//! NVIDIA GPU sharing (`[sharing.nvidia]`): the NVIDIA device plugin's own config file
//! (api/config/v1 of k8s-device-plugin v0.20.0) in a ConfigMap the plugin reads through
//! `CONFIG_FILE`, and the rules that refuse what the plugin would refuse or cannot do here.
//!
//! The plugin reads its config file once, at start (it restarts on SIGHUP, which only the
//! Helm chart's config-manager sidecar sends; it does not watch the file). So the plugin's
//! pod template carries the config's digest: a change of the ConfigMap also changes the
//! DaemonSet, and Kubernetes rolls its pods, which read the new file.

use serde_json::{Value, json};

use super::components::{COMPONENT_LABEL, MANAGED_BY, object_id};
use super::{Change, CompileError, Context, Resource, ResourceKind};
use crate::config::NvidiaStrategy;
use crate::facts::Vendor;

/// The ConfigMap that holds the plugin's config file.
pub const CONFIG_MAP: &str = "nvidia-device-plugin-config";
/// The file's key in the ConfigMap. The plugin parses YAML or JSON whatever the name
/// (`parseConfigFrom`: sigs.k8s.io/yaml); we write canonical JSON.
pub const CONFIG_KEY: &str = "config.json";
/// Where the ConfigMap is mounted in the plugin's container.
pub const MOUNT_DIR: &str = "/etc/k3d-gpu/nvidia-device-plugin";
/// The pod-template annotation with the config's digest, so a new config rolls the pods.
pub const DIGEST_ANNOTATION: &str = "k3d-gpu.io/config-digest";
/// The resource the plugin advertises. `renameByDefault` stays off: the replicas keep this
/// name, which the agent and `[expect] devices` request.
pub const RESOURCE: &str = "nvidia.com/gpu";
/// The fewest replicas the plugin accepts (`ReplicatedResource.UnmarshalJSON`).
pub const MIN_REPLICAS: u32 = 2;
/// The most replicas k3d-gpu writes: k3s's kubelet runs at most 110 pods per node (its
/// default `--max-pods`), so more could never be used, and each replica is one device the
/// plugin lists to the kubelet.
pub const MAX_REPLICAS: u32 = 110;

/// What the NVIDIA side of the cluster looks like.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NvidiaPlan {
    /// The plugin's config file (canonical JSON), when sharing is on.
    pub config: Option<String>,
    /// Devices per GPU the plugin advertises (1 without sharing).
    pub replicas: u32,
    /// The replicas are CUDA MPS clients (`strategy = "mps"`), not time slices.
    pub mps: bool,
}

/// Where MPS lives on the node (the Helm chart's `mps.root`): the per-resource pipe and log
/// directories, and `shm`, the tmpfs the daemon mounts and the plugin hands each MPS pod.
pub const MPS_ROOT: &str = "/run/nvidia/mps";
/// The most MPS clients per GPU the control daemon accepts (`cmd/mps-control-daemon/mps/
/// device.go`): 48 from compute capability 7.5 (Turing) on, 16 before; more makes it exit.
pub const MPS_MAX_CLIENTS: u32 = 48;
pub const MPS_MAX_CLIENTS_BEFORE_TURING: u32 = 16;

/// Whether a board is Turing (compute capability 7.5) or newer, by its pci.ids name: the
/// board table (`hwdb`) starts at Volta (7.0), whose boards are the V100s, TITAN V and Quadro
/// GV100; every other board in it is Turing or newer. A board not in the table may be older.
pub fn turing_or_newer(device_id: Option<u32>) -> bool {
    let volta = |name: &str| name.contains("V100") || name == "TITAN V" || name == "Quadro GV100";
    device_id.and_then(crate::hwdb::nvidia_board).is_some_and(|(name, _)| !volta(name))
}

impl NvidiaPlan {
    /// `sha256:` of the config file.
    pub fn digest(&self) -> Option<String> {
        self.config.as_ref().map(|c| crate::canonical::sha256(c.as_bytes()))
    }
}

pub fn plan(cx: &mut Context) -> NvidiaPlan {
    let mut out = NvidiaPlan { config: None, replicas: 1, mps: false };
    let Some(sharing) = &cx.config.sharing.nvidia else { return out };
    if !cx.is_active(Vendor::Nvidia) {
        cx.error(CompileError::new(
            "nvidia-sharing-without-nvidia",
            &["sharing", "nvidia"],
            "[sharing.nvidia] shares NVIDIA GPUs, and no NVIDIA GPU is active here",
            Some("remove [sharing.nvidia], or check `k3d-gpu detect` (the nvidia vendor must be active)".to_string()),
        ));
        return out;
    }
    if cx.nvidia_mode() == crate::config::GpuMode::Dra {
        let mode = super::nvidia_dra::plugin_mode(cx);
        cx.error(CompileError::new(
            "nvidia-sharing-with-dra",
            &["sharing", "nvidia"],
            "[sharing.nvidia] configures the NVIDIA device plugin, and [sharing] mode gives the NVIDIA GPUs to the DRA driver, which replaces the plugin (its chart refuses to run beside it)",
            Some(format!(
                "to share through the plugin, set [sharing] {mode}; to stay on DRA, remove [sharing.nvidia] (sharing per claim: several pods referencing one ResourceClaim)"
            )),
        ));
        return out;
    }
    let mut ok = true;
    if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&sharing.replicas) {
        ok = false;
        cx.error(CompileError::new(
            "nvidia-replicas",
            &["sharing", "nvidia", "replicas"],
            format!(
                "replicas = {} is out of range: pods per GPU must be {MIN_REPLICAS} to {MAX_REPLICAS}",
                sharing.replicas
            ),
            Some(format!(
                "the device plugin refuses fewer than {MIN_REPLICAS}; for one pod per GPU remove [sharing.nvidia]"
            )),
        ));
    }
    let mps = sharing.strategy == NvidiaStrategy::Mps;
    if mps && cx.facts.host.wsl.microsoft_kernel {
        ok = false;
        cx.error(CompileError::new(
            "nvidia-mps-unsupported",
            &["sharing", "nvidia", "strategy"],
            "MPS cannot run under WSL2: the device plugin sees one device named `all` there, and the MPS control daemon sets each GPU's compute mode by its UUID",
            Some("use strategy = \"time-slicing\"".to_string()),
        ));
    }
    if mps && ok && sharing.replicas > MPS_MAX_CLIENTS {
        ok = false;
        cx.error(CompileError::new(
            "nvidia-mps-replicas",
            &["sharing", "nvidia", "replicas"],
            format!(
                "replicas = {} with MPS: the MPS control daemon (k8s-device-plugin v0.20.0) takes at most {MPS_MAX_CLIENTS} clients per GPU and exits on more",
                sharing.replicas
            ),
            Some(format!("set replicas to at most {MPS_MAX_CLIENTS}, or use strategy = \"time-slicing\"")),
        ));
    }
    let maybe_pre_turing: Vec<String> = cx
        .facts
        .host
        .nvidia
        .gpus
        .iter()
        .filter(|g| !turing_or_newer(g.device_id))
        .map(|g| format!("{} ({})", g.model.as_deref().unwrap_or("unknown board"), g.pci_address))
        .collect();
    if mps && ok && sharing.replicas > MPS_MAX_CLIENTS_BEFORE_TURING && !maybe_pre_turing.is_empty() {
        cx.warn(
            "nvidia-mps-replicas-pre-turing",
            Some("sharing.nvidia.replicas"),
            format!(
                "replicas = {} with MPS: a GPU before compute capability 7.5 (Turing) takes at most {MPS_MAX_CLIENTS_BEFORE_TURING} MPS clients, and the control daemon exits on more; newer GPUs take {MPS_MAX_CLIENTS}. Not known to be Turing or newer: {}",
                sharing.replicas,
                crate::escape::one_line(&maybe_pre_turing.join(", "))
            ),
        );
    }
    if !ok {
        return out;
    }
    let mut slicing = json!({
        "resources": [{ "name": RESOURCE, "replicas": sharing.replicas }],
    });
    if let Some(fail) = sharing.fail_requests_greater_than_one {
        slicing["failRequestsGreaterThanOne"] = json!(fail);
    }
    // The same replicated resources, under the strategy's key (api/config/v1 sharing.go).
    let strategy = if mps { "mps" } else { "timeSlicing" };
    let config = json!({ "version": "v1", "sharing": { strategy: slicing } });
    out.config = Some(String::from_utf8(crate::canonical::to_bytes(&config)).expect("canonical JSON is UTF-8"));
    out.replicas = sharing.replicas;
    out.mps = mps;
    out
}

/// The agent on a shared NVIDIA GPU: vLLM claims 90% of its GPU's memory by default
/// (`--gpu-memory-utilization` 0.9, which the agent's Deployment does not change), so the
/// pods time-sliced onto the same GPU are left the rest. Worth a word, not an error.
pub(super) fn agent_on_shared_gpu(cx: &mut Context, plan: &NvidiaPlan, agent: Option<&super::agent::AgentPlan>) {
    if plan.replicas > 1 && agent.is_some_and(|a| a.resource.as_deref() == Some(RESOURCE)) {
        let text = if plan.mps {
            format!(
                "the agent's vLLM runs as one of {} MPS clients of its GPU: the MPS daemon limits each client's pinned memory to 1/{} of the GPU's, and vLLM asks for 90% of it by default, so the model may not load; fewer replicas or time-slicing leave it more",
                plan.replicas, plan.replicas
            )
        } else {
            "the agent's vLLM runs on a shared NVIDIA GPU and takes 90% of its memory by default: pods time-sliced onto the same GPU get the rest".to_string()
        };
        cx.warn("agent-on-shared-gpu", Some("sharing.nvidia"), text);
    }
}

/// The ConfigMap with the plugin's config file, owned by the plugin's component.
pub(super) fn config_map(plan: &NvidiaPlan, component: &str, cluster_id: &str) -> Option<Resource> {
    let config = plan.config.as_ref()?;
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP,
            "namespace": "kube-system",
            "labels": { MANAGED_BY.0: MANAGED_BY.1, COMPONENT_LABEL: component },
        },
        "data": { CONFIG_KEY: config },
    });
    Some(Resource {
        id: object_id(&object),
        kind: ResourceKind::Object,
        change: Change::InPlace,
        component: Some(component.to_string()),
        spec: object,
        depends_on: vec![cluster_id.to_string()],
    })
}

/// Points the plugin's container at the config file: the ConfigMap as a read-only volume,
/// `CONFIG_FILE` (the plugin's env for `--config-file`), and the digest on the pod template.
pub(super) fn configure(object: &mut Value, container: &str, plan: &NvidiaPlan) {
    let Some(digest) = plan.digest() else { return };
    let Some(Value::Object(template)) = object.pointer_mut("/spec/template") else { return };
    // A manifest is input: index only into what is known to be an object (indexing a
    // string or a number with a key panics).
    let meta = template.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][DIGEST_ANNOTATION] = json!(digest);
    let Some(pod) = template.get_mut("spec").filter(|p| p.is_object()) else { return };
    let volume = "k3d-gpu-nvidia-plugin-config";
    if !pod["volumes"].is_array() {
        pod["volumes"] = json!([]);
    }
    if let Some(volumes) = pod["volumes"].as_array_mut() {
        volumes.push(json!({ "name": volume, "configMap": { "name": CONFIG_MAP } }));
    }
    let Some(containers) = pod["containers"].as_array_mut() else { return };
    // Only objects have a name, so each `c` here is one.
    for c in containers.iter_mut().filter(|c| c["name"] == container) {
        if !c["env"].is_array() {
            c["env"] = json!([]);
        }
        if let Some(env) = c["env"].as_array_mut() {
            env.push(json!({ "name": "CONFIG_FILE", "value": format!("{MOUNT_DIR}/{CONFIG_KEY}") }));
        }
        if !c["volumeMounts"].is_array() {
            c["volumeMounts"] = json!([]);
        }
        if let Some(mounts) = c["volumeMounts"].as_array_mut() {
            mounts.push(json!({ "name": volume, "mountPath": MOUNT_DIR, "readOnly": true }));
        }
    }
    if plan.mps {
        mps_client(pod, container);
    }
}

/// What the Helm chart gives the plugin's container for MPS: `MPS_ROOT` (the plugin refuses
/// MPS without it, `validateFlags`), and the MPS root and its tmpfs mounted where the plugin
/// health-checks the daemon through them. A container that mounts `/mps` itself (the MPS
/// control daemon's manifest) has them already.
fn mps_client(pod: &mut Value, container: &str) {
    let volumes = [
        ("mps-root", json!({ "path": MPS_ROOT, "type": "DirectoryOrCreate" }), "/mps"),
        ("mps-shm", json!({ "path": format!("{MPS_ROOT}/shm") }), "/dev/shm"),
    ];
    let Some(containers) = pod["containers"].as_array_mut() else { return };
    let mut added = false;
    for c in containers.iter_mut().filter(|c| c["name"] == container) {
        let mounts_root = c["volumeMounts"].as_array().is_some_and(|m| m.iter().any(|m| m["mountPath"] == "/mps"));
        if mounts_root {
            continue;
        }
        if let Some(env) = c["env"].as_array_mut() {
            env.push(json!({ "name": "MPS_ROOT", "value": MPS_ROOT }));
        }
        // HostToContainer: the daemon mounts its tmpfs under the root after the plugin may have
        // started, and again when it restarts; the plugin must see the current one.
        if let Some(mounts) = c["volumeMounts"].as_array_mut() {
            mounts.extend(volumes.iter().map(
                |(name, _, path)| json!({ "name": name, "mountPath": path, "mountPropagation": "HostToContainer" }),
            ));
        }
        added = true;
    }
    if added && let Some(list) = pod["volumes"].as_array_mut() {
        for (name, host, _) in volumes {
            if !list.iter().any(|v| v["name"] == name) {
                list.push(json!({ "name": name, "hostPath": host }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> NvidiaPlan {
        NvidiaPlan { config: Some("{}\n".into()), replicas: 2, mps: false }
    }

    #[test]
    fn configure_never_panics_on_odd_manifests() {
        for mut object in [
            json!({"spec": {"template": {"metadata": 5, "spec": "x"}}}),
            json!({"spec": {"template": {"metadata": {"annotations": []}, "spec": {"containers": [1, "c", null]}}}}),
            json!({"spec": {"template": 7}}),
            json!({"spec": {"template": {"spec": {"volumes": {}, "containers": [{"name": "c", "env": 1}]}}}}),
        ] {
            configure(&mut object, "c", &plan());
        }
    }

    #[test]
    fn configure_adds_the_file_the_env_and_the_digest() {
        let mut object = json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}, {"name": "other"}]}}}});
        configure(&mut object, "c", &plan());
        let t = &object["spec"]["template"];
        assert_eq!(t["metadata"]["annotations"][DIGEST_ANNOTATION], json!(crate::canonical::sha256(b"{}\n")));
        assert_eq!(t["spec"]["containers"][0]["env"][0]["name"], "CONFIG_FILE");
        assert!(t["spec"]["containers"][1].get("env").is_none(), "only the named container");
        assert_eq!(t["spec"]["volumes"][0]["configMap"]["name"], CONFIG_MAP);
    }
}
