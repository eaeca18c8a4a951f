//! `[sharing.nvidia]`: the NVIDIA device plugin's config file in a ConfigMap, the plugin
//! pointed at it, the rules that refuse what cannot work, and a change of replicas planned as
//! an in-place update (ConfigMap and DaemonSet), never a delete and create.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{CompileError, DesiredGraph, compile};
use k3d_gpu::config::load_str;
use k3d_gpu::plan::{ActionKind, plan};
use serde_json::{Value, json};
use support::{converged, facts_of, placeholder_inputs, repo};

const DS: &str = "k8s/apps/DaemonSet/kube-system/nvidia-device-plugin-daemonset";
const CM: &str = "k8s/core/ConfigMap/kube-system/nvidia-device-plugin-config";

fn build(toml: &str, host: &str) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, &facts_of(host), &Catalog::embedded().unwrap())
}

fn graph(toml: &str, host: &str) -> DesiredGraph {
    build(toml, host).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn errors(toml: &str, host: &str) -> Vec<CompileError> {
    build(toml, host).err().unwrap_or_default()
}

fn shared(replicas: u32) -> String {
    format!("[sharing.nvidia]\nreplicas = {replicas}\n")
}

fn plugin_config(g: &DesiredGraph) -> Value {
    let cm = g.get(CM).expect("the plugin's ConfigMap");
    serde_json::from_str(cm.spec["data"]["config.json"].as_str().unwrap()).unwrap()
}

fn container(g: &DesiredGraph) -> Value {
    g.get(DS).unwrap().spec["spec"]["template"]["spec"]["containers"][0].clone()
}

#[test]
fn time_slicing_writes_the_plugins_config_file_and_points_the_plugin_at_it() {
    let g = graph(&shared(4), "desktop-rpl-nvidia");
    assert_eq!(
        plugin_config(&g),
        json!({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}})
    );
    let c = container(&g);
    let env: Vec<&Value> = c["env"].as_array().unwrap().iter().filter(|e| e["name"] == "CONFIG_FILE").collect();
    assert_eq!(env, [&json!({"name": "CONFIG_FILE", "value": "/etc/k3d-gpu/nvidia-device-plugin/config.json"})]);
    assert!(c["volumeMounts"].as_array().unwrap().contains(&json!({
        "name": "k3d-gpu-nvidia-plugin-config", "mountPath": "/etc/k3d-gpu/nvidia-device-plugin", "readOnly": true
    })));
    let ds = g.get(DS).unwrap();
    let volumes = ds.spec["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.contains(
        &json!({"name": "k3d-gpu-nvidia-plugin-config", "configMap": {"name": "nvidia-device-plugin-config"}})
    ));
    // The plugin starts after its config exists.
    assert!(ds.depends_on.contains(&CM.to_string()), "{:?}", ds.depends_on);
    // Two GPUs, four replicas each: verify wants eight.
    assert_eq!(g.get("verify/allocatable/nvidia.com/gpu").unwrap().spec["min"], 8);
}

#[test]
fn without_sharing_the_plugin_has_no_config_file() {
    let g = graph("", "desktop-rpl-nvidia");
    assert!(g.get(CM).is_none());
    let c = container(&g);
    assert!(!c["env"].as_array().unwrap().iter().any(|e| e["name"] == "CONFIG_FILE"));
    assert!(g.get(DS).unwrap().spec["spec"]["template"]["metadata"]["annotations"].is_null());
    assert_eq!(g.get("verify/allocatable/nvidia.com/gpu").unwrap().spec["min"], 1);
}

#[test]
fn fail_requests_greater_than_one_is_written_only_when_set() {
    let g = graph("[sharing.nvidia]\nreplicas = 2\nfail_requests_greater_than_one = false\n", "desktop-rpl-nvidia");
    assert_eq!(plugin_config(&g)["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"], false);
    let g = graph(&shared(2), "desktop-rpl-nvidia");
    assert!(plugin_config(&g)["sharing"]["timeSlicing"].get("failRequestsGreaterThanOne").is_none());
}

#[test]
fn wsl2_time_slices_its_one_device() {
    let g = graph(&shared(3), "wsl2-nvidia");
    assert_eq!(plugin_config(&g)["sharing"]["timeSlicing"]["resources"][0]["replicas"], 3);
    assert_eq!(g.get("verify/allocatable/nvidia.com/gpu").unwrap().spec["min"], 3);
}

#[test]
fn sharing_without_an_active_nvidia_gpu_is_an_error() {
    for (toml, host) in [
        (shared(4), "meteor-lake-old-npu-fw"),
        // Present but left out by the vendor selection.
        (format!("[vendors]\nexclude = [\"nvidia\"]\n{}", shared(4)), "desktop-rpl-nvidia"),
    ] {
        let e = errors(&toml, host);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_eq!(e[0].code, "nvidia-sharing-without-nvidia");
        assert_eq!(e[0].key, ["sharing", "nvidia"]);
    }
}

#[test]
fn replicas_outside_2_to_110_are_an_error() {
    for n in [0, 1, 111, u32::MAX] {
        let e = errors(&shared(n), "desktop-rpl-nvidia");
        assert_eq!(e.iter().map(|e| e.code).collect::<Vec<_>>(), ["nvidia-replicas"], "{n}");
        assert_eq!(e[0].key, ["sharing", "nvidia", "replicas"]);
    }
    assert!(build(&shared(110), "desktop-rpl-nvidia").is_ok());
}

#[test]
fn replicas_are_required() {
    let e = load_str("k3dgpu.toml", "[sharing.nvidia]\nstrategy = \"time-slicing\"\n").unwrap_err();
    assert!(format!("{e:?}").contains("replicas"), "{e:?}");
}

const MPS: &str = "k8s/apps/DaemonSet/kube-system/nvidia-mps-control-daemon";

/// Issue 38, item 2: MPS as k8s-device-plugin v0.20.0's Helm chart deploys it: the config
/// under `sharing.mps`, the plugin given `MPS_ROOT` and the MPS root and its tmpfs, and the
/// control daemon (privileged, host PID namespace, RuntimeClass nvidia, the same config file).
#[test]
fn mps_deploys_the_control_daemon_and_points_the_plugin_at_it() {
    let toml = "[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = 4\n";
    let g = graph(toml, "rtx2000ada-x2");
    assert_eq!(
        plugin_config(&g),
        json!({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}})
    );
    assert!(g.mps && g.shares["nvidia.com/gpu"] == 4, "test proves the MPS share");
    let plugin = container(&g);
    assert!(plugin["env"].as_array().unwrap().contains(&json!({"name": "MPS_ROOT", "value": "/run/nvidia/mps"})));
    let mounts = plugin["volumeMounts"].as_array().unwrap();
    for (name, path) in [("mps-root", "/mps"), ("mps-shm", "/dev/shm")] {
        let want = json!({"name": name, "mountPath": path, "mountPropagation": "HostToContainer"});
        assert!(mounts.contains(&want), "{mounts:?}");
    }
    let daemon = g.get(MPS).expect("the MPS control daemon");
    assert!(daemon.depends_on.iter().any(|d| d == CM), "it reads the same config file: {:?}", daemon.depends_on);
    let pod = &daemon.spec["spec"]["template"]["spec"];
    assert_eq!((pod["hostPID"].as_bool(), pod["runtimeClassName"].as_str()), (Some(true), Some("nvidia")));
    let ctr = &pod["containers"][0];
    assert_eq!(ctr["command"], json!(["mps-control-daemon"]));
    assert_eq!(ctr["securityContext"]["privileged"], true);
    assert!(ctr["env"].as_array().unwrap().iter().any(|e| e["name"] == "CONFIG_FILE"));
    assert!(!ctr["env"].as_array().unwrap().iter().any(|e| e["name"] == "MPS_ROOT"), "the daemon's root is /mps");
    assert_eq!(pod["initContainers"][0]["command"], json!(["mps-control-daemon", "mount-shm"]));
    // Time-slicing deploys no daemon; MPS and time-slicing differ only under `sharing`.
    assert!(graph(&shared(4), "rtx2000ada-x2").get(MPS).is_none());
}

#[test]
fn mps_is_refused_where_upstream_cannot_run_it() {
    let mps = |n: u32| format!("[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = {n}\n");
    // WSL2: one device named `all`, and the daemon sets compute modes by UUID.
    let e = errors(&mps(4), "wsl2-nvidia");
    assert_eq!(e.iter().map(|e| e.code).collect::<Vec<_>>(), ["nvidia-mps-unsupported"]);
    assert!(e[0].message.contains("WSL2"), "{}", e[0].message);
    // The control daemon takes at most 48 clients per GPU and exits on more.
    let e = errors(&mps(49), "rtx2000ada-x2");
    assert_eq!(e.iter().map(|e| e.code).collect::<Vec<_>>(), ["nvidia-mps-replicas"]);
    assert!(e[0].message.contains("at most 48"), "{}", e[0].message);
    assert!(build(&shared(49), "rtx2000ada-x2").is_ok(), "time-slicing has no such limit");
    // Past 16, GPUs before Turing refuse: said, not refused, and only where a GPU is not known
    // to be Turing or newer (the compute capability is not in the facts; the board is).
    let pre_turing = |facts: &k3d_gpu::facts::Facts| {
        let config = load_str("k3dgpu.toml", &mps(17)).unwrap();
        let g = compile(&config, facts, &Catalog::embedded().unwrap()).unwrap();
        g.warnings.iter().find(|w| w.code == "nvidia-mps-replicas-pre-turing").map(|w| w.text.clone())
    };
    assert_eq!(pre_turing(&facts_of("rtx2000ada-x2")), None, "Ada takes 48");
    let boards = |id: u32| {
        let mut facts = facts_of("rtx2000ada-x2");
        facts.host.nvidia.gpus.iter_mut().for_each(|g| g.device_id = Some(id));
        facts
    };
    let volta = pre_turing(&boards(0x1db1)).expect("a V100 takes 16");
    assert!(
        volta.contains("Not known to be Turing or newer: NVIDIA RTX 2000 Ada Generation (0000:01:00.0)"),
        "{volta}"
    );
    assert!(pre_turing(&boards(0x1fff)).is_some(), "a board k3d-gpu does not know may be older");
}

#[test]
fn a_catalog_without_the_hook_cannot_share() {
    let catalog = k3d_gpu::component_files::from_dir(&repo().join("tests/fixtures/catalog")).unwrap();
    let config = load_str("k3dgpu.toml", &shared(4)).unwrap();
    let e = compile(&config, &facts_of("desktop-rpl-nvidia"), &catalog).unwrap_err();
    assert!(e.iter().any(|e| e.code == "nvidia-sharing-without-plugin"), "{e:#?}");
}

#[test]
fn a_change_of_replicas_updates_the_configmap_and_rolls_the_plugin_in_place() {
    let before = graph(&shared(4), "desktop-rpl-nvidia");
    let after = graph(&shared(2), "desktop-rpl-nvidia");
    let p = plan(&after, &converged(&before), placeholder_inputs());
    let actions: Vec<(&str, ActionKind)> = p.actions.iter().map(|a| (a.id.as_str(), a.action)).collect();
    assert_eq!(actions, [(DS, ActionKind::Update), (CM, ActionKind::Update)], "{:#?}", p.actions);
    // The digest on the pod template changed, so the DaemonSet rolls its pods.
    let digest = |g: &DesiredGraph| g.get(DS).unwrap().spec["spec"]["template"]["metadata"]["annotations"].clone();
    assert_ne!(digest(&before), digest(&after));
    let text = k3d_gpu::plan::render::text(&p, &p.hash(), k3d_gpu::plan::render::Style { color: false });
    assert!(text.contains("\\\"replicas\\\": 2") || text.contains("\"replicas\": 2"), "{text}");
}

#[test]
fn turning_sharing_on_and_off_is_in_place_too() {
    let plain = graph("", "desktop-rpl-nvidia");
    let sharing = graph(&shared(4), "desktop-rpl-nvidia");
    let on = plan(&sharing, &converged(&plain), placeholder_inputs());
    let kinds: Vec<(&str, ActionKind)> = on.actions.iter().map(|a| (a.id.as_str(), a.action)).collect();
    assert_eq!(kinds, [(DS, ActionKind::Update), (CM, ActionKind::Create)], "{:#?}", on.actions);
    let off = plan(&plain, &converged(&sharing), placeholder_inputs());
    let kinds: Vec<(&str, ActionKind)> = off.actions.iter().map(|a| (a.id.as_str(), a.action)).collect();
    assert!(kinds.contains(&(DS, ActionKind::Update)) && kinds.contains(&(CM, ActionKind::Delete)), "{kinds:?}");
    assert!(!kinds.iter().any(|(_, k)| *k == ActionKind::Replace));
}

#[test]
fn the_agent_on_a_shared_gpu_is_a_warning() {
    let codes = |g: &DesiredGraph| g.warnings.iter().map(|w| w.code.clone()).collect::<Vec<_>>();
    let shared_agent = graph(&format!("[agent]\n{}", shared(4)), "desktop-rpl-nvidia");
    assert!(codes(&shared_agent).contains(&"agent-on-shared-gpu".to_string()), "{:?}", codes(&shared_agent));
    // Either alone says nothing.
    assert!(!codes(&graph("[agent]\n", "desktop-rpl-nvidia")).contains(&"agent-on-shared-gpu".to_string()));
    assert!(!codes(&graph(&shared(4), "desktop-rpl-nvidia")).contains(&"agent-on-shared-gpu".to_string()));
}

/// Issue 38, item 4: one config, both vendors, each on its own path: the Intel GPUs through
/// the DRA driver, the NVIDIA GPUs through the device plugin with MPS.
#[test]
fn intel_dra_and_nvidia_mps_combine_in_one_config() {
    let toml = "[sharing]\nmode = { intel = \"dra\", nvidia = \"plugin\" }\n[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = 2\n";
    let g = graph(toml, "desktop-rpl-nvidia");
    for id in [
        "k8s/apps/DaemonSet/intel-gpu-resource-driver/intel-gpu-resource-driver-kubelet-plugin",
        "k8s/resource.k8s.io/DeviceClass/gpu.intel.com",
        DS,
        MPS,
        CM,
    ] {
        assert!(g.get(id).is_some(), "no {id}");
    }
    assert!(g.get("k8s/apps/DaemonSet/kube-system/intel-gpu-plugin").is_none(), "Intel is on DRA, not the plugin");
    assert_eq!(g.shares.keys().collect::<Vec<_>>(), ["nvidia.com/gpu"], "only the NVIDIA GPUs are shared by a plugin");
}

/// The data-centre fixture host (two H100 PCIe, memory from nvidia-smi): the agent serves
/// on CUDA, and MPS takes the daemon's full 48 clients per GPU.
#[test]
fn a_data_centre_host_serves_on_cuda_and_takes_48_mps_clients() {
    let g = graph("[agent]\n[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = 48\n", "h100-pcie-x2");
    let agent = g.agent.as_ref().unwrap();
    assert_eq!((agent.backend, agent.device), ("vllm", "CUDA"), "{agent:?}");
    assert!(agent.reason.contains("80 GiB"), "{}", agent.reason);
    assert_eq!(g.shares["nvidia.com/gpu"], 48);
    assert!(g.get(MPS).is_some());
    // One of 48 MPS clients gets 1/48 of the memory: said.
    let said = g.warnings.iter().find(|w| w.code == "agent-on-shared-gpu").expect("a warning");
    assert!(said.text.contains("1/48"), "{}", said.text);
}
