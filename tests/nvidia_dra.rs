//! NVIDIA GPUs through the NVIDIA DRA driver (`[sharing] mode` gives NVIDIA `"dra"`), compiled
//! with the shipped catalog: what it deploys in place of the device plugin, each refusal of
//! upstream's prerequisites (dra-driver-nvidia-gpu v0.4.1), NVIDIA `[[claims]]`, and the two
//! vendors on different paths in one config.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{CompileError, DesiredGraph, compile};
use k3d_gpu::config::load_str;
use k3d_gpu::facts::Facts;
use support::facts_of;

const PLUGIN: &str = "k8s/apps/DaemonSet/kube-system/nvidia-device-plugin-daemonset";
const DRA_PLUGIN: &str = "k8s/apps/DaemonSet/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu-kubelet-plugin";
const DEVICE_CLASS: &str = "k8s/resource.k8s.io/DeviceClass/gpu.nvidia.com";
const INTEL_PLUGIN: &str = "k8s/apps/DaemonSet/kube-system/intel-gpu-plugin";
const INTEL_DRA: &str = "k8s/apps/DaemonSet/intel-gpu-resource-driver/intel-gpu-resource-driver-kubelet-plugin";

fn build(toml: &str, facts: &Facts) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, facts, &Catalog::embedded().unwrap())
}

fn graph(toml: &str, facts: &Facts) -> DesiredGraph {
    build(toml, facts).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn refused(toml: &str, facts: &Facts) -> Vec<CompileError> {
    match build(toml, facts) {
        Ok(_) => panic!("{toml} compiled"),
        Err(errors) => errors,
    }
}

fn codes(errors: &[CompileError]) -> Vec<&'static str> {
    errors.iter().map(|e| e.code).collect()
}

fn k3s_args(g: &DesiredGraph) -> Vec<String> {
    let cluster = g.resources().find(|r| r.id.starts_with("k3d/cluster/")).unwrap();
    cluster.spec["k3s_args"].as_array().unwrap().iter().map(|a| a["arg"].as_str().unwrap().to_string()).collect()
}

/// The host's NVIDIA GPUs made boards of PCI id `id` (an H100 PCIe is 0x2331).
fn with_boards(host: &str, id: u32) -> Facts {
    let mut facts = facts_of(host);
    for gpu in &mut facts.host.nvidia.gpus {
        gpu.device_id = Some(id);
    }
    facts
}

#[test]
fn dra_mode_on_a_data_center_host_deploys_the_driver_in_place_of_the_plugin() {
    let g = graph("[sharing]\nmode = \"dra\"\n", &facts_of("h100-pcie-x2"));
    assert!(g.get(DRA_PLUGIN).is_some() && g.get(DEVICE_CLASS).is_some());
    assert!(g.get(PLUGIN).is_none(), "upstream's chart refuses to run beside the device plugin");
    assert_eq!(g.get("node-label/k3d-gpu.io/nvidia-gpu-dra").unwrap().spec["value"], "true");
    let slices = g.get("verify/resourceslices/gpu.nvidia.com").expect("apply waits for the driver's slices");
    assert_eq!(
        (&slices.spec["driver"], &slices.spec["min_devices"]),
        (&serde_json::json!("gpu.nvidia.com"), &serde_json::json!(2))
    );
    let args = k3s_args(&g);
    assert!(!args.iter().any(|a| a == "--default-runtime=nvidia"), "runc stays the default: {args:?}");
    assert!(
        !g.resources().any(|r| r.spec["check"] == "allocatable" && r.spec["resource"] == "nvidia.com/gpu"),
        "nothing advertises nvidia.com/gpu under DRA"
    );
    // The plugin path keeps its default runtime and its plugin.
    let plugin = graph("", &facts_of("h100-pcie-x2"));
    assert!(plugin.get(PLUGIN).is_some() && plugin.get(DRA_PLUGIN).is_none());
    assert!(k3s_args(&plugin).iter().any(|a| a == "--default-runtime=nvidia"));
}

#[test]
fn gpus_outside_upstreams_hardware_table_are_refused_with_the_plugin_path_as_the_way_out() {
    // RTX 4000 Ada: a workstation board; the host also has an Intel iGPU.
    let errors = refused("[sharing]\nmode = \"dra\"\n", &facts_of("desktop-rpl-nvidia"));
    assert_eq!(codes(&errors), ["nvidia-dra-unsupported-gpu"]);
    assert!(errors[0].message.contains("RTX 4000 Ada Generation") && errors[0].message.contains("workstation"));
    let help = errors[0].help.clone().unwrap();
    assert!(help.contains(r#"mode = { intel = "dra", nvidia = "plugin" }"#), "{help}");
    // The way out compiles: Intel on DRA, NVIDIA on the plugin.
    let g = graph("[sharing]\nmode = { intel = \"dra\", nvidia = \"plugin\" }\n", &facts_of("desktop-rpl-nvidia"));
    assert!(g.get(INTEL_DRA).is_some() && g.get(PLUGIN).is_some() && g.get(DRA_PLUGIN).is_none());

    let geforce = with_boards("h100-pcie-x2", 0x2684);
    let errors = refused("[sharing]\nmode = \"dra\"\n", &geforce);
    assert_eq!(codes(&errors), ["nvidia-dra-unsupported-gpu"]);
    assert!(errors[0].message.contains("GeForce RTX 4090") && errors[0].message.contains("data-center"), "{errors:?}");

    // A board k3d-gpu does not know is not refused, only named.
    let g = graph("[sharing]\nmode = \"dra\"\n", &with_boards("h100-pcie-x2", 0x1fff));
    assert!(g.warnings.iter().any(|w| w.code == "nvidia-dra-gpu-unknown"));
}

#[test]
fn an_old_driver_an_old_kubernetes_and_plugin_sharing_are_refused() {
    let mut old = facts_of("h100-pcie-x2");
    old.host.nvidia.driver_version = Some("560.35.03".into());
    let errors = refused("[sharing]\nmode = \"dra\"\n", &old);
    assert_eq!(codes(&errors), ["nvidia-dra-driver-too-old"]);
    assert!(errors[0].message.contains("565") && errors[0].message.contains("560.35.03"));

    let errors = refused(
        "[cluster]\nimage = \"rancher/k3s:v1.33.1-k3s1\"\n[sharing]\nmode = \"dra\"\n",
        &facts_of("h100-pcie-x2"),
    );
    assert_eq!(codes(&errors), ["nvidia-dra-kubernetes-too-old"]);
    let g = graph(
        "[cluster]\nimage = \"rancher/k3s:v1.34.1-k3s1\"\n[sharing]\nmode = \"dra\"\n",
        &facts_of("h100-pcie-x2"),
    );
    assert!(g.warnings.iter().any(|w| w.code == "nvidia-dra-kubernetes-patch"), "1.34 needs its .2 patch");

    let errors = refused("[sharing]\nmode = \"dra\"\n[sharing.nvidia]\nreplicas = 4\n", &facts_of("h100-pcie-x2"));
    assert_eq!(codes(&errors), ["nvidia-sharing-with-dra"]);
    assert!(errors[0].help.as_deref().unwrap().contains(r#"mode = { intel = "dra", nvidia = "plugin" }"#));
}

#[test]
fn nvidia_claims_select_the_hosts_gpus_by_bus_address_and_memory() {
    let config = "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"h100\"\nmodel = \"h100\"\nmin_memory = \"40Gi\"\n";
    let g = graph(config, &facts_of("h100-pcie-x2"));
    let template = g.get("k8s/resource.k8s.io/ResourceClaimTemplate/default/h100").unwrap();
    let exactly = &template.spec["spec"]["spec"]["devices"]["requests"][0]["exactly"];
    assert_eq!(exactly["deviceClassName"], "gpu.nvidia.com");
    let selectors: Vec<&str> =
        exactly["selectors"].as_array().unwrap().iter().map(|s| s["cel"]["expression"].as_str().unwrap()).collect();
    assert_eq!(
        selectors,
        [
            r#"device.attributes["resource.kubernetes.io"].pciBusID in ["0000:01:00.0", "0000:02:00.0"]"#,
            r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
        ]
    );
    assert!(template.depends_on.contains(&DEVICE_CLASS.to_string()));
    assert!(!g.warnings.iter().any(|w| w.code == "claim-memory-unchecked"), "nvidia-smi gave the memory");

    // Checked against the facts: 80 GB boards, two of them.
    let too_big = "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"big\"\nmin_memory = \"100Gi\"\n";
    let errors = refused(too_big, &facts_of("h100-pcie-x2"));
    assert_eq!(codes(&errors), ["claim-unsatisfiable"]);
    assert!(
        errors[0].help.as_deref().unwrap().contains("2331 NVIDIA H100 PCIe at 0000:01:00.0, 81559Mi"),
        "{errors:?}"
    );
    assert_eq!(
        codes(&refused(
            "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"three\"\ncount = 3\n",
            &facts_of("h100-pcie-x2")
        )),
        ["claim-unsatisfiable"]
    );
    assert_eq!(
        codes(&refused(
            "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"x\"\npci_ids = [\"10de:2330\"]\n",
            &facts_of("h100-pcie-x2")
        )),
        ["claim-unsatisfiable"],
        "an H100 SXM id on a PCIe host"
    );
    let g = graph(
        "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"x\"\npci_ids = [\"10de:2331\"]\n",
        &facts_of("h100-pcie-x2"),
    );
    assert!(g.get("k8s/resource.k8s.io/ResourceClaimTemplate/default/x").is_some());
}

#[test]
fn intel_and_nvidia_take_their_own_paths_in_one_config() {
    // An Intel iGPU beside two H100s.
    let both = with_boards("desktop-rpl-nvidia", 0x2331);
    let g = graph("[sharing]\nmode = { intel = \"plugin\", nvidia = \"dra\" }\n", &both);
    assert!(g.get(INTEL_PLUGIN).is_some() && g.get(DRA_PLUGIN).is_some());
    assert!(g.get(INTEL_DRA).is_none() && g.get(PLUGIN).is_none());
    let g =
        graph("[sharing]\nmode = { intel = \"dra\", nvidia = \"plugin\" }\n[sharing.nvidia]\nreplicas = 2\n", &both);
    assert!(g.get(INTEL_DRA).is_some() && g.get(PLUGIN).is_some());
    assert!(g.get(INTEL_PLUGIN).is_none() && g.get(DRA_PLUGIN).is_none());

    // Both on DRA: a claim says whose GPUs it wants.
    let errors = refused("[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"x\"\n", &both);
    assert_eq!(codes(&errors), ["claim-vendor-ambiguous"]);
    let g = graph(
        "[sharing]\nmode = \"dra\"\n[[claims]]\nname = \"igpu\"\nvendor = \"intel\"\n[[claims]]\nname = \"h100\"\nvendor = \"nvidia\"\n",
        &both,
    );
    let class = |name: &str| {
        g.get(&format!("k8s/resource.k8s.io/ResourceClaimTemplate/default/{name}")).unwrap().spec["spec"]["spec"]
            ["devices"]["requests"][0]["exactly"]["deviceClassName"]
            .clone()
    };
    assert_eq!(
        (class("igpu"), class("h100")),
        (serde_json::json!("gpu.intel.com"), serde_json::json!("gpu.nvidia.com"))
    );
    let errors = refused(
        "[sharing]\nmode = { intel = \"dra\", nvidia = \"plugin\" }\n[[claims]]\nname = \"x\"\nvendor = \"nvidia\"\n",
        &both,
    );
    assert_eq!(codes(&errors), ["claim-vendor-not-on-dra"]);
}

#[test]
fn the_agent_is_not_placed_on_gpus_that_go_to_dra_claims() {
    let errors = refused("[sharing]\nmode = \"dra\"\n[agent]\ndevice = \"cuda\"\n", &facts_of("h100-pcie-x2"));
    assert_eq!(codes(&errors), ["agent-device"]);
    assert!(errors[0].message.contains("DRA claims"), "{errors:?}");
    assert!(errors[0].help.as_deref().unwrap().contains(r#"mode = { nvidia = "plugin" }"#));
}
