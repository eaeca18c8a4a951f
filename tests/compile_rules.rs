//! The compiler's rules, one behaviour per test, on fixture hosts and the small test catalog
//! in tests/fixtures/catalog (so they do not depend on the shipped manifests).

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{CompileError, DesiredGraph, ResourceKind, compile};
use k3d_gpu::config::load_str;
use support::{facts_of, repo};

fn catalog() -> Catalog {
    k3d_gpu::component_files::from_dir(&repo().join("tests/fixtures/catalog")).unwrap()
}

fn build(toml: &str, host: &str) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, &facts_of(host), &catalog())
}

fn graph(toml: &str, host: &str) -> DesiredGraph {
    build(toml, host).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn codes(toml: &str, host: &str) -> Vec<&'static str> {
    match build(toml, host) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.code).collect(),
    }
}

fn plugin_args(g: &DesiredGraph) -> Vec<String> {
    let ds = g.get("k8s/apps/DaemonSet/test-system/intel-gpu-plugin").expect("the Intel plugin is in the graph");
    ds.spec["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn k3s_args(g: &DesiredGraph) -> Vec<String> {
    let cluster = g.resources().find(|r| r.id.starts_with("k3d/cluster/")).unwrap();
    cluster.spec["k3s_args"].as_array().unwrap().iter().map(|a| a["arg"].as_str().unwrap().to_string()).collect()
}

/// The warnings' codes, less the two every config has while the shipped images.lock has no
/// entry for the node image's bases (rancher/k3s, ubuntu).
fn warnings(g: &DesiredGraph) -> Vec<String> {
    let base = |text: &str| text.contains(" rancher/k3s:") || text.contains(" ubuntu:");
    g.warnings.iter().filter(|w| !(w.code == "image-unlocked" && base(&w.text))).map(|w| w.code.clone()).collect()
}

#[test]
fn sharing_auto_is_8_when_every_intel_gpu_is_integrated() {
    let g = graph("", "meteor-lake-old-npu-fw");
    assert_eq!(plugin_args(&g), ["-v=2", "-shared-dev-num=8", "-allocation-policy=balanced"]);
}

#[test]
fn sharing_auto_is_exclusive_with_a_discrete_gpu() {
    let g = graph("", "arc-b580-xe-rpl-igpu");
    assert_eq!(plugin_args(&g), ["-v=2"]);
    // An explicit number applies to every GPU on the node.
    let g = graph("[sharing]\nshared = 3\nallocation = \"packed\"\n", "arc-b580-xe-rpl-igpu");
    assert_eq!(plugin_args(&g), ["-v=2", "-shared-dev-num=3", "-allocation-policy=packed"]);
}

#[test]
fn an_allocation_policy_without_sharing_is_an_error() {
    assert_eq!(codes("[sharing]\nallocation = \"packed\"\n", "arc-b580-xe-rpl-igpu"), ["allocation-without-sharing"]);
    assert_eq!(
        codes("[sharing]\nshared = 1\nallocation = \"balanced\"\n", "meteor-lake-old-npu-fw"),
        ["allocation-without-sharing"]
    );
    // `none` is kubelet's order, which needs no sharing.
    assert!(codes("[sharing]\nallocation = \"none\"\n", "arc-b580-xe-rpl-igpu").is_empty());
}

#[test]
fn monitoring_adds_the_flag_and_a_verify_node() {
    let g = graph("[sharing]\nmonitoring = true\n", "meteor-lake-old-npu-fw");
    assert!(plugin_args(&g).contains(&"-enable-monitoring".to_string()));
    assert!(g.get("verify/allocatable/gpu.intel.com/monitoring").is_some());
}

#[test]
fn which_gpus_the_cluster_gets() {
    let g = graph("[sharing]\ngpus = \"discrete\"\n", "arc-b580-xe-rpl-igpu");
    assert_eq!(plugin_args(&g), ["-v=2", "-deny-ids=0xa780"]);
    let g = graph("[sharing]\nallow_ids = [\"0xE20B\"]\n", "arc-b580-xe-rpl-igpu");
    assert_eq!(plugin_args(&g), ["-v=2", "-allow-ids=0xe20b"]);
    // Either spelling in the config; always the plugin's own (`^0x[0-9a-f]{4}$`) on the flag.
    let g = graph("[sharing]\ndeny_ids = [\"A780\"]\n", "arc-b580-xe-rpl-igpu");
    assert_eq!(plugin_args(&g), ["-v=2", "-deny-ids=0xa780"]);
    assert_eq!(codes("[sharing]\ngpus = \"discrete\"\n", "lunar-lake-npu"), ["no-intel-gpu-selected"]);
    assert_eq!(codes("[sharing]\nallow_ids = [\"56a0\"]\n", "arc-b580-xe-rpl-igpu"), ["pci-id-matches-nothing"]);
    assert_eq!(codes("[sharing]\ndeny_ids = [\"xyz\"]\n", "arc-b580-xe-rpl-igpu"), ["bad-pci-id"]);
    assert_eq!(
        codes("[sharing]\nallow_ids = [\"e20b\"]\ndeny_ids = [\"a780\"]\n", "arc-b580-xe-rpl-igpu"),
        ["allow-and-deny"]
    );
}

#[test]
fn dra_mode_replaces_the_plugin_and_ignores_its_keys() {
    let g = graph(
        "[cluster]\nkubernetes_version = \"1.37\"\n[sharing]\nmode = \"dra\"\nshared = 4\n",
        "arc-b580-xe-rpl-igpu",
    );
    assert!(g.get("k8s/apps/DaemonSet/test-system/intel-gpu-plugin").is_none(), "never both");
    assert!(g.get("k8s/apps/DaemonSet/test-system/intel-gpu-dra").is_some());
    assert_eq!(g.get("node-label/k3d-gpu.io/intel-gpu-dra").unwrap().spec["value"], "true");
    let slices = g.get("verify/resourceslices/gpu.intel.com").unwrap();
    assert_eq!(slices.spec["min_devices"], 2);
    assert!(g.get("verify/allocatable/gpu.intel.com/xe").is_none());
    assert_eq!(warnings(&g), ["ignored-in-dra-mode"]);
}

#[test]
fn dra_on_a_kubernetes_too_old_is_an_error() {
    let toml = "[cluster]\nimage = \"rancher/k3s:v1.33.1-k3s1\"\n[sharing]\nmode = \"dra\"\n";
    assert_eq!(codes(toml, "arc-b580-xe-rpl-igpu"), ["dra-kubernetes-too-old"]);
}

#[test]
fn the_balloons_policy_follows_hybrid_numa_and_the_owner() {
    let id = "k8s/apps/DaemonSet/kube-system/nri-resource-policy-balloons";
    assert!(graph("", "desktop-rpl-nvidia").get(id).is_some(), "hybrid");
    assert!(graph("", "xeon-2s-snc2").get(id).is_some(), "numa");
    assert!(graph("", "plain-laptop-amd").get(id).is_none(), "neither");
    assert!(graph("[placement]\nballoons = \"external\"\n", "desktop-rpl-nvidia").get(id).is_none());
    assert!(graph("[vendors]\nexclude = [\"hybrid\"]\n", "desktop-rpl-nvidia").get(id).is_none());
    // k3d-gpu applies its own copy, so a copy baked into the node image is always skipped.
    for host in ["desktop-rpl-nvidia", "plain-laptop-amd"] {
        assert!(k3s_args(&graph("", host)).contains(&"--disable=nri-balloons".to_string()));
    }
}

#[test]
fn a_listed_vendor_the_host_lacks_is_an_error() {
    assert_eq!(codes("[vendors]\nenable = [\"gaudi\"]\n", "desktop-rpl-nvidia"), ["vendor-absent"]);
    let g = graph("[vendors]\nenable = [\"nvidia\"]\n", "desktop-rpl-nvidia");
    assert!(g.get("k8s/apps/DaemonSet/test-system/intel-gpu-plugin").is_none());
    assert!(g.get("node-label/k3d-gpu.io/hybrid-cpu").is_none());
}

#[test]
fn experimental_features() {
    // auto on an NPU host: npu-turbo's ConfigMap; no gates, k3s 1.37 has them on already.
    let g = graph("", "lunar-lake-npu");
    assert!(g.get("k8s/core/ConfigMap/kube-system/k3d-gpu-openvino-npu").is_some());
    assert!(!k3s_args(&g).iter().any(|a| a.contains("feature-gates")));
    // On an older k3s, the beta gates are passed.
    let g = graph("[cluster]\nimage = \"rancher/k3s:v1.33.1-k3s1\"\n", "plain-laptop-amd");
    assert!(
        k3s_args(&g).contains(
            &"--kube-apiserver-arg=feature-gates=DynamicResourceAllocation=true,ImageVolume=true".to_string()
        )
    );
    assert_eq!(codes("[experimental]\nfeatures = [\"npu-turbo\"]\n", "desktop-rpl-nvidia"), ["feature-unsupported"]);
    let g = graph("[experimental]\nfeatures = [\"sched-ext\"]\n", "plain-laptop-amd");
    assert_eq!(warnings(&g), ["feature-needs-host-change"]);
    let g = graph("[experimental]\nfeatures = \"off\"\n", "lunar-lake-npu");
    assert!(g.get("k8s/core/ConfigMap/kube-system/k3d-gpu-openvino-npu").is_none());
}

#[test]
fn host_mounts_follow_the_vendors() {
    let volumes = |g: &DesiredGraph| -> Vec<String> {
        let cluster = g.resources().find(|r| r.id.starts_with("k3d/cluster/")).unwrap();
        cluster.spec["volumes"].as_array().unwrap().iter().map(|v| v["host"].as_str().unwrap().to_string()).collect()
    };
    assert!(volumes(&graph("", "xeon-2s-snc2")).contains(&"/dev/char".to_string()));
    assert!(volumes(&graph("", "wsl2-intel")).contains(&"/usr/lib/wsl".to_string()));
    assert!(volumes(&graph("", "wsl2-nvidia")).contains(&"/usr/lib/wsl".to_string()));
    let nfd = volumes(&graph("", "lunar-lake-npu"));
    assert!(nfd.contains(&"/boot/config-6.17.4-300.fc45.x86_64".to_string()));
    assert!(!nfd.contains(&"/dev/char".to_string()));
}

#[test]
fn dependencies_put_namespaces_components_and_labels_first() {
    let g = graph("", "lunar-lake-npu");
    let ds = g.get("k8s/apps/DaemonSet/test-system/intel-gpu-plugin").unwrap();
    assert!(ds.depends_on.contains(&"k8s/core/Namespace/test-system".to_string()), "namespace first");
    assert!(ds.depends_on.contains(&"node-label/gpu.intel.com/xmx".to_string()), "its node selector's label first");
    assert_eq!(ds.spec["metadata"]["labels"]["app.kubernetes.io/managed-by"], "k3d-gpu");
    let verify = g.get("verify/allocatable/gpu.intel.com/xe").unwrap();
    assert_eq!(verify.depends_on, ["verify/rollout/DaemonSet/test-system/intel-gpu-plugin"]);
}

#[test]
fn config_node_labels_are_checked_and_win() {
    let g = graph(
        "[cluster]\nnode_labels = { \"k3d-gpu.io/hybrid-cpu\" = \"false\", team = \"ml\" }\n",
        "desktop-rpl-nvidia",
    );
    assert_eq!(g.get("node-label/k3d-gpu.io/hybrid-cpu").unwrap().spec["value"], "false");
    assert_eq!(g.get("node-label/team").unwrap().spec["value"], "ml");
    assert!(warnings(&g).contains(&"node-label-overridden".to_string()));
    assert_eq!(codes("[cluster]\nnode_labels = { \"bad key\" = \"x\" }\n", "desktop-rpl-nvidia"), ["bad-node-label"]);
    for name in ["Bad_Name", "-gpu", "gpu-", &"a".repeat(33)] {
        assert_eq!(codes(&format!("[cluster]\nname = \"{name}\"\n"), "desktop-rpl-nvidia"), ["bad-cluster-name"]);
    }
    assert!(codes(&format!("[cluster]\nname = \"{}\"\n", "a".repeat(32)), "desktop-rpl-nvidia").is_empty());
}

#[test]
fn expect_checks_the_machine() {
    let facts = facts_of("desktop-rpl-nvidia");
    let ok = format!(
        "[expect]\nvendors = [\"nvidia\"]\ndevices = {{ \"nvidia.com/gpu\" = 2 }}\nfingerprint = \"{}\"\n",
        facts.fingerprint
    );
    assert!(codes(&ok, "desktop-rpl-nvidia").is_empty());
    assert_eq!(codes(&ok, "arc-b580-xe-rpl-igpu"), ["expect-vendor", "expect-devices", "expect-fingerprint"]);
}

#[test]
fn dra_mode_without_a_driver_in_the_catalog_is_an_error() {
    let mut catalog = catalog();
    catalog.components.remove("intel-gpu-dra");
    let config = load_str("k", "[sharing]\nmode = \"dra\"\n").unwrap();
    let errors = compile(&config, &facts_of("arc-b580-xe-rpl-igpu"), &catalog).unwrap_err();
    assert_eq!(errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["dra-without-driver"]);
}

#[test]
fn never_both_intel_gpu_paths_whatever_the_catalog_holds() {
    let mut catalog = catalog();
    catalog.components.retain(|name, _| name == "base");
    for (toml, skipped) in
        [("", "--disable=intel-gpu-dra"), ("[sharing]\nmode = \"dra\"\n", "--disable=intel-gpu-plugin")]
    {
        let config = load_str("k", toml).unwrap();
        // No Intel GPU on this host, so DRA mode needs no driver here; the flag still goes in.
        let g = compile(&config, &facts_of("plain-laptop-amd"), &catalog).unwrap();
        assert!(k3s_args(&g).contains(&skipped.to_string()), "{toml:?}: {:?}", k3s_args(&g));
    }
}

#[test]
fn dra_mode_ignores_the_plugins_selection_keys() {
    let g = graph(
        "[cluster]\nkubernetes_version = \"1.37\"\n[sharing]\nmode = \"dra\"\ngpus = \"discrete\"\nallow_ids = [\"56a0\"]\n",
        "arc-b580-xe-rpl-igpu",
    );
    assert_eq!(g.get("verify/resourceslices/gpu.intel.com").unwrap().spec["min_devices"], 2, "every GPU");
    let mut w = warnings(&g);
    w.sort();
    assert_eq!(w, ["ignored-in-dra-mode", "ignored-in-dra-mode"]);
}

#[test]
fn a_long_list_of_bad_ids_is_one_error_per_key() {
    let ids: Vec<String> = (0..2000).map(|i| format!("\"{:04x}\"", 0x1000 + i)).collect();
    let toml = format!("[sharing]\ndeny_ids = [{}]\n", ids.join(", "));
    // How fast it is belongs to the benches; here, that 2,000 bad ids are one error.
    let errors = build(&toml, "arc-b580-xe-rpl-igpu").unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.contains("and 1995 more"), "{}", errors[0].message);
}

#[test]
fn cluster_values_are_checked() {
    for (toml, code) in [
        ("[cluster]\nimage = \"\"\n", "bad-image"),
        ("[cluster]\napi_port = 0\n", "bad-api-port"),
        ("[cluster]\nservers = 4000000000\n", "bad-servers"),
        ("[cluster]\nk3s_args = [\"\"]\n", "bad-k3s-arg"),
    ] {
        assert_eq!(codes(toml, "plain-laptop-amd"), [code], "{toml}");
    }
    let g = graph("[vendors]\nenable = [\"nvidia\"]\nexclude = [\"nvidia\"]\n", "desktop-rpl-nvidia");
    assert!(warnings(&g).contains(&"enabled-and-excluded".to_string()));
}

const DRA: &str = "[sharing]\nmode = \"dra\"\n";

fn claim_selectors(g: &DesiredGraph, id: &str) -> Vec<String> {
    let t = g.get(id).unwrap_or_else(|| panic!("{id} not in the graph"));
    let request = &t.spec["spec"]["spec"]["devices"]["requests"][0]["exactly"];
    request["selectors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["cel"]["expression"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn claims_compile_to_resource_claim_templates_with_cel() {
    let g = graph(&format!("{DRA}[[claims]]\nname = \"arc\"\ngpus = \"discrete\"\n"), "arc-b580-xe-rpl-igpu");
    let id = "k8s/resource.k8s.io/ResourceClaimTemplate/default/arc";
    assert_eq!(claim_selectors(&g, id), ["device.attributes[\"gpu.intel.com\"].pciId in [\"0xe20b\"]"]);
    let exactly = &g.get(id).unwrap().spec["spec"]["spec"]["devices"]["requests"][0]["exactly"];
    assert_eq!((exactly["deviceClassName"].as_str(), exactly["count"].as_u64()), (Some("gpu.intel.com"), Some(1)));

    let g = graph(
        &format!(
            "{DRA}[[claims]]\nname = \"bmg\"\nmodel = \"battlemage\"\nmin_memory = \"12Gi\"\nnamespace = \"llm\"\n"
        ),
        "arc-b580-xe-rpl-igpu",
    );
    let id = "k8s/resource.k8s.io/ResourceClaimTemplate/llm/bmg";
    assert_eq!(
        claim_selectors(&g, id),
        [
            "device.attributes[\"gpu.intel.com\"].pciId in [\"0xe20b\"]",
            "device.capacity[\"gpu.intel.com\"].memory.compareTo(quantity(\"12Gi\")) >= 0"
        ]
    );
    assert!(g.get(id).unwrap().depends_on.contains(&"k8s/core/Namespace/llm".to_string()), "its namespace first");
    assert!(warnings(&g).contains(&"claim-memory-unchecked".to_string()));

    // Every GPU, no narrowing: no selector at all.
    let g = graph(&format!("{DRA}[[claims]]\nname = \"any\"\ncount = 2\n"), "arc-b580-xe-rpl-igpu");
    assert!(claim_selectors(&g, "k8s/resource.k8s.io/ResourceClaimTemplate/default/any").is_empty());
}

#[test]
fn claims_are_checked_against_the_facts() {
    assert_eq!(
        codes(&format!("{DRA}[[claims]]\nname = \"tp\"\ncount = 2\ngpus = \"discrete\"\n"), "arc-b580-xe-rpl-igpu"),
        ["claim-unsatisfiable"]
    );
    assert_eq!(
        codes(&format!("{DRA}[[claims]]\nname = \"x\"\nmodel = \"Alchemist\"\n"), "arc-b580-xe-rpl-igpu"),
        ["claim-unsatisfiable"]
    );
    assert_eq!(codes("[[claims]]\nname = \"x\"\n", "arc-b580-xe-rpl-igpu"), ["claims-without-dra"]);
    assert_eq!(
        codes(&format!("{DRA}[[claims]]\nname = \"x\"\nmin_memory = \"12GB\"\n"), "arc-b580-xe-rpl-igpu"),
        ["bad-quantity"]
    );
    assert_eq!(codes(&format!("{DRA}[[claims]]\nname = \"Bad\"\n"), "arc-b580-xe-rpl-igpu"), ["bad-claim-name"]);
    assert_eq!(
        codes(&format!("{DRA}[[claims]]\nname = \"a\"\n[[claims]]\nname = \"a\"\n"), "arc-b580-xe-rpl-igpu"),
        ["claim-twice"]
    );
}

#[test]
fn the_agent_uses_only_the_gpus_the_sharing_selection_gives_the_cluster() {
    let host = "arc-b580-xe-rpl-igpu";
    // Every GPU: the B580 (xe, XMX) takes the LLM.
    let p = graph("[agent]\n", host).agent.unwrap();
    assert_eq!((p.device, p.resource.as_deref()), ("GPU", Some("gpu.intel.com/xe")));
    // Only the iGPU (i915, no XMX): the B580 is denied to the plugin, so neither its XMX nor
    // its resource counts.
    let p = graph("[sharing]\ngpus = \"integrated\"\n[agent]\n", host).agent.unwrap();
    assert_eq!((p.device, p.resource.as_deref()), ("CPU", None), "{}", p.reason);
    let g = graph("[sharing]\ngpus = \"integrated\"\n[agent]\nbackend = \"vllm\"\n", host);
    assert!(warnings(&g).contains(&"agent-not-battlemage".to_string()));
    let p = g.agent.unwrap();
    assert_eq!((p.device, p.resource.as_deref()), ("GPU", Some("gpu.intel.com/i915")));
    // Add-ons count the selected GPUs only: one exclusive B580, and the LLM has it.
    let toml = "[sharing]\ngpus = \"discrete\"\n[agent]\nbackend = \"vllm\"\n[addons.vlm]\ndevice = \"gpu\"\n";
    assert_eq!(codes(toml, host), ["addon-device"]);
}

#[test]
fn the_api_server_is_published_on_loopback_unless_the_config_opts_out() {
    let cluster = |g: &DesiredGraph| g.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap().spec.clone();
    let g = graph("", "plain-laptop-amd");
    assert_eq!(cluster(&g)["api_host_ip"], "127.0.0.1");
    assert_eq!(k3d_gpu::apply::k3d::simple_config(&cluster(&g))["kubeAPI"]["hostIP"], "127.0.0.1");
    assert!(!warnings(&g).contains(&"api-published-off-loopback".to_string()));
    let g = graph("[cluster]\napi_host_ip = \"0.0.0.0\"\n", "plain-laptop-amd");
    assert_eq!(k3d_gpu::apply::k3d::simple_config(&cluster(&g))["kubeAPI"]["hostIP"], "0.0.0.0");
    assert!(
        g.warnings.iter().any(|w| w.code == "api-published-off-loopback" && w.text.contains("every interface")),
        "{:?}",
        warnings(&g)
    );
    assert_eq!(codes("[cluster]\napi_host_ip = \"localhost\"\n", "plain-laptop-amd"), ["bad-api-host-ip"]);
    assert_eq!(codes("[cluster]\napi_host_ip = \"::1\"\n", "plain-laptop-amd"), ["bad-api-host-ip"]);
}

#[test]
fn the_nvidia_runtime_class_is_k3ss_verified_and_never_disabled() {
    let embedded = Catalog::embedded().unwrap();
    let build =
        |toml: &str| compile(&load_str("k3dgpu.toml", toml).unwrap(), &facts_of("desktop-rpl-nvidia"), &embedded);
    let g = build("").unwrap();
    assert!(g.get("k8s/node.k8s.io/RuntimeClass/nvidia").is_none(), "k3s owns RuntimeClass nvidia");
    let check = g.get("verify/runtimeclass/nvidia").expect("a verify node for k3s's RuntimeClass");
    assert_eq!(check.spec, serde_json::json!({"check": "runtimeclass", "name": "nvidia"}));
    let errors = build("[cluster]\nk3s_args = [\"--disable=traefik,runtimes\"]\n").unwrap_err();
    assert_eq!(errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["runtimes-disabled"]);
    // Without NVIDIA nothing runs under it: k3s's runtimes may go.
    let intel = load_str("k3dgpu.toml", "[cluster]\nk3s_args = [\"--disable=runtimes\"]\n").unwrap();
    assert!(compile(&intel, &facts_of("arc-b580-xe-rpl-igpu"), &embedded).is_ok());
}

/// Docker creates a missing bind source as an empty root-owned directory on the host: every
/// source the cluster mounts must exist on the host the facts came from.
#[test]
fn the_node_binds_only_host_paths_that_exist() {
    let embedded = Catalog::embedded().unwrap();
    let mut checked = 0;
    for host in support::host_names() {
        let facts = facts_of(&host);
        let Ok(g) = compile(&load_str("k3dgpu.toml", "").unwrap(), &facts, &embedded) else { continue };
        let cluster = g.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap();
        for v in cluster.spec["volumes"].as_array().unwrap() {
            let source = v["host"].as_str().unwrap();
            let on_disk = support::hosts_dir().join(&host).join(source.trim_start_matches('/'));
            assert!(on_disk.exists(), "{host}: binds {source}, which the host does not have");
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} binds checked");
}

#[test]
fn a_missing_bind_source_is_not_mounted_and_the_plan_says_what_nfd_loses() {
    let embedded = Catalog::embedded().unwrap();
    let g = compile(&load_str("k3dgpu.toml", "").unwrap(), &facts_of("wsl2-intel"), &embedded).unwrap();
    let cluster = g.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap();
    let sources: Vec<&str> =
        cluster.spec["volumes"].as_array().unwrap().iter().map(|v| v["host"].as_str().unwrap()).collect();
    assert_eq!(sources, ["/usr/lib/wsl", "/etc/os-release"], "WSL2 has no /boot/config-<release> and no /lib/modules");
    let texts: Vec<&str> =
        g.warnings.iter().filter(|w| w.code == "bind-source-missing").map(|w| w.text.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts.iter().any(|t| t.starts_with("/boot/config-<release> does not exist") && t.contains("kernel.config"))
    );
    assert!(texts.iter().any(|t| t.starts_with("/lib/modules does not exist") && t.contains("modules.builtin")));

    // A saved facts document says what existed when it was taken; without the field (an older
    // document), nothing is mounted.
    let mut facts = facts_of("desktop-rpl-nvidia");
    facts.host.bind_sources = Default::default();
    let g = compile(&load_str("k3dgpu.toml", "").unwrap(), &facts, &embedded).unwrap();
    let cluster = g.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap();
    assert_eq!(cluster.spec["volumes"], serde_json::json!([]));
}

fn daemonset_selector(g: &DesiredGraph, id: &str) -> serde_json::Value {
    g.get(id).unwrap().spec["spec"]["template"]["spec"]["nodeSelector"].clone()
}

/// Issue 9, deviation 5: every node container sees every device, so one node advertises.
#[test]
fn one_node_advertises_the_accelerators_unless_the_config_says_all() {
    let embedded = Catalog::embedded().unwrap();
    let build =
        |toml: &str| compile(&load_str("k3dgpu.toml", toml).unwrap(), &facts_of("desktop-rpl-nvidia"), &embedded);
    let plugin = "k8s/apps/DaemonSet/kube-system/nvidia-device-plugin-daemonset";
    let cluster = |g: &DesiredGraph| g.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap().spec.clone();

    let g = build("[cluster]\nagents = 2\n").unwrap();
    assert_eq!(
        cluster(&g)["node_labels"],
        serde_json::json!([{"label": "k3d-gpu.io/accelerators=true", "nodes": "server:0"}])
    );
    let config = k3d_gpu::apply::k3d::simple_config(&cluster(&g));
    assert_eq!(
        config["options"]["k3s"]["nodeLabels"],
        serde_json::json!([{"label": "k3d-gpu.io/accelerators=true", "nodeFilters": ["server:0"]}])
    );
    assert_eq!(daemonset_selector(&g, plugin)["k3d-gpu.io/accelerators"], "true");
    assert!(warnings(&g).contains(&"accelerators-on-one-node".to_string()));
    // NFD runs everywhere: it advertises no device.
    assert!(
        daemonset_selector(&g, "k8s/apps/DaemonSet/node-feature-discovery/nfd-worker")["k3d-gpu.io/accelerators"]
            .is_null()
    );

    let g = build("[cluster]\nagents = 2\naccelerator_node = \"agent:1\"\n").unwrap();
    assert_eq!(cluster(&g)["node_labels"][0]["nodes"], "agent:1");

    let g = build("[cluster]\nagents = 2\naccelerator_node = \"all\"\n").unwrap();
    assert_eq!(cluster(&g)["node_labels"], serde_json::json!([]));
    assert!(daemonset_selector(&g, plugin)["k3d-gpu.io/accelerators"].is_null());
    assert!(warnings(&g).contains(&"accelerators-on-every-node".to_string()));

    for bad in ["agent:2", "server:1", "gpu", "agent:-1"] {
        let errors = build(&format!("[cluster]\nagents = 2\naccelerator_node = \"{bad}\"\n")).unwrap_err();
        assert_eq!(errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["bad-accelerator-node"], "{bad}");
    }
    // One node: nothing to explain.
    assert!(!warnings(&build("").unwrap()).iter().any(|w| w.starts_with("accelerators-")));
}

/// Issue 9, deviation 6: the version is the config's or an upstream k3s tag's, never a guess
/// from the node image's own tag; DRA on 1.32/1.33 turns its beta API on, before 1.32 is refused.
#[test]
fn the_kubernetes_version_is_explicit_and_dra_gets_its_beta_api() {
    // A prebuilt image's own tag says nothing: DRA mode warns instead of assuming 1.37.
    assert!(
        warnings(&graph("[cluster]\nimage = \"my/node:1.37\"\n[sharing]\nmode = \"dra\"\n", "arc-b580-xe-rpl-igpu"))
            .contains(&"kubernetes-version-unknown".to_string())
    );
    // The node image k3d-gpu builds says it: its K3S_TAG (issue 13).
    assert!(warnings(&graph("[sharing]\nmode = \"dra\"\n", "arc-b580-xe-rpl-igpu")).is_empty());
    assert_eq!(
        codes(
            "[cluster]\nbuild_args = { K3S_TAG = \"v1.35.4-k3s1\" }\n[sharing]\nmode = \"dra\"\n",
            "arc-b580-xe-rpl-igpu"
        ),
        ["dra-kubernetes-too-old"]
    );
    assert_eq!(
        codes("[cluster]\nkubernetes_version = \"1.36\"\n", "plain-laptop-amd"),
        ["kubernetes-version-mismatch"]
    );
    let g = graph(
        "[cluster]\nimage = \"my/node:1\"\nkubernetes_version = \"1.37\"\n[sharing]\nmode = \"dra\"\n",
        "arc-b580-xe-rpl-igpu",
    );
    assert!(!warnings(&g).contains(&"kubernetes-version-unknown".to_string()));
    assert_eq!(
        codes(
            "[cluster]\nimage = \"my/node:1\"\nkubernetes_version = \"1.35\"\n[sharing]\nmode = \"dra\"\n",
            "arc-b580-xe-rpl-igpu"
        ),
        ["dra-kubernetes-too-old"]
    );
    assert_eq!(
        codes("[cluster]\nimage = \"my/node:1\"\nkubernetes_version = \"latest\"\n", "plain-laptop-amd"),
        ["bad-kubernetes-version"]
    );
    assert_eq!(
        codes("[cluster]\nimage = \"rancher/k3s:v1.33.1-k3s1\"\nkubernetes_version = \"1.37\"\n", "plain-laptop-amd"),
        ["kubernetes-version-mismatch"]
    );

    let dra = |version: &str| {
        graph(
            &format!(
                "[cluster]\nimage = \"my/node:1\"\nkubernetes_version = \"{version}\"\n[experimental]\nfeatures = [\"dra\"]\n"
            ),
            "plain-laptop-amd",
        )
    };
    let runtime_config =
        |g: &DesiredGraph| k3s_args(g).into_iter().filter(|a| a.contains("runtime-config")).collect::<Vec<_>>();
    assert_eq!(runtime_config(&dra("1.32")), ["--kube-apiserver-arg=runtime-config=resource.k8s.io/v1beta1=true"]);
    assert_eq!(
        runtime_config(&dra("1.33")),
        ["--kube-apiserver-arg=runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"]
    );
    assert!(runtime_config(&dra("1.34")).is_empty(), "resource.k8s.io/v1 is served by default");
    assert!(k3s_args(&dra("1.33")).iter().any(|a| a.contains("feature-gates=DynamicResourceAllocation=true")));
    assert_eq!(
        codes(
            "[cluster]\nimage = \"my/node:1\"\nkubernetes_version = \"1.31\"\n[experimental]\nfeatures = [\"dra\"]\n",
            "plain-laptop-amd"
        ),
        ["feature-unsupported"]
    );
}

#[test]
fn sharing_keys_without_an_active_intel_gpu_warn_that_they_have_no_effect() {
    let g = graph("[sharing]\nshared = 4\nallocation = \"packed\"\n", "wsl2-nvidia");
    let ours: Vec<_> = g.warnings.iter().filter(|w| w.code == "sharing-without-intel").collect();
    let keys: Vec<Option<&str>> = ours.iter().map(|w| w.key.as_deref()).collect();
    assert_eq!(keys, [Some("sharing.allocation"), Some("sharing.shared")]);
    assert!(ours[0].text.contains("no Intel GPU is active here: it has no effect"), "{ours:?}");
    assert!(
        !warnings(&graph("", "wsl2-nvidia")).contains(&"sharing-without-intel".to_string()),
        "defaults are not settings"
    );
}

/// Issue 13: the node image's bases are images of the graph (so `images`, `images lock` and
/// the pinned policy cover them), a lock entry pins a base by digest as a build arg and
/// renames the image, and a prebuilt image is pulled, never built.
#[test]
fn the_node_image_bases_are_locked_like_any_image() {
    let g = graph("", "plain-laptop-amd");
    assert!(g.images.contains_key("rancher/k3s:v1.37.1-k3s1") && g.images.contains_key("ubuntu:26.04"));
    let unlocked = g.get("docker/node-image").unwrap().spec.clone();
    assert_eq!(unlocked["source"], "build");
    assert_eq!(unlocked["build_args"], serde_json::json!({}), "nothing pinned, nothing passed");

    let mut cat = catalog();
    let digest = format!("sha256:{}", "b".repeat(64));
    cat.images.user = Some(
        k3d_gpu::images::Lock::parse(&format!(
            "schema = \"k3d-gpu.images/v1\"\n[images.\"rancher/k3s:v1.37.1-k3s1\"]\ndigest = \"{digest}\"\n"
        ))
        .unwrap(),
    );
    let config = load_str("k3dgpu.toml", "").unwrap();
    let locked = compile(&config, &facts_of("plain-laptop-amd"), &cat).unwrap();
    let spec = &locked.get("docker/node-image").unwrap().spec;
    assert_eq!(spec["build_args"]["K3S_DIGEST"], digest.as_str());
    assert_ne!(spec["reference"], unlocked["reference"], "a new base digest is a new image");
    assert_eq!(locked.get("k3d/cluster/gpu").unwrap().spec["image"], spec["reference"]);

    assert_eq!(
        codes("[policy]\nimages = \"pinned\"\n", "plain-laptop-amd"),
        ["image-unlocked", "image-unlocked"],
        "the pinned policy refuses unlocked bases"
    );
    let prebuilt = graph("[cluster]\nimage = \"registry.example/node:1\"\n", "plain-laptop-amd");
    let spec = &prebuilt.get("docker/node-image").unwrap().spec;
    assert_eq!(spec["source"], "pull");
    assert!(!prebuilt.images.keys().any(|k| k.starts_with("ubuntu:")));
    assert_eq!(
        codes(
            "[cluster]\nimage = \"registry.example/node:1\"\nbuild_args = { UBUNTU_TAG = \"24.04\" }\n",
            "plain-laptop-amd"
        ),
        ["image-and-build"]
    );
}

#[test]
fn every_add_on_is_deployed_so_none_says_it_is_not() {
    let g = graph("[agent]\n[addons.stt]\n[addons.vlm]\n[addons.video]\n", "lunar-lake-npu");
    assert!(!g.warnings.iter().any(|w| w.code == "not-deployed"), "{:?}", g.warnings);
    for name in ["stt", "vlm", "video"] {
        assert!(g.get(&format!("k8s/apps/Deployment/k3d-gpu-agent/{name}")).is_some(), "{name}");
    }
}

#[test]
fn node_image_build_inputs_hold_no_control_characters() {
    // An arg that names no base, so only the control-character rule can refuse it.
    let config = "[cluster]\nbuild_args = { NVIDIA_CONTAINER_TOOLKIT_VERSION = \"1.20.1-1\\u001b[2J\" }\n";
    assert_eq!(codes(config, "plain-laptop-amd"), ["bad-node-image-build"]);
    assert!(
        codes("[cluster]\nbuild_args = { NVIDIA_CONTAINER_TOOLKIT_VERSION = \"1.20.0-1\" }\n", "plain-laptop-amd")
            .is_empty()
    );
}

#[test]
fn a_label_value_from_hostile_facts_stops_the_compile() {
    let mut facts = facts_of("lunar-lake-npu");
    assert!(!facts.host.npus.is_empty(), "the fixture has an NPU");
    facts.host.npus[0].generation = Some("x y\u{1b}[2J".into());
    let config = load_str("k3dgpu.toml", "").unwrap();
    let errors = compile(&config, &facts, &catalog()).expect_err("Kubernetes refuses the label value");
    let e = errors.iter().find(|e| e.code == "bad-facts-label").expect("named as a facts problem");
    assert!(e.message.contains("k3d-gpu.io/npu.gen") && !e.message.contains('\u{1b}'), "{}", e.message);
}

fn cluster_spec(g: &DesiredGraph) -> serde_json::Value {
    g.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap().spec.clone()
}

#[test]
fn extra_ports_go_through_the_load_balancer_on_loopback_unless_an_address_is_written() {
    let g = graph("[cluster]\nports = [\"8080:80@loadbalancer\", \"9000:9000\"]\n", "plain-laptop-amd");
    let k3d = k3d_gpu::apply::k3d::simple_config(&cluster_spec(&g));
    assert_eq!(
        k3d["ports"],
        serde_json::json!([
            { "port": "127.0.0.1:8080:80/tcp", "nodeFilters": ["loadbalancer"] },
            { "port": "127.0.0.1:9000:9000/tcp", "nodeFilters": ["loadbalancer"] },
        ])
    );
    assert!(!warnings(&g).iter().any(|w| w == "port-published-off-loopback"), "{:?}", warnings(&g));
    let g = graph("[cluster]\nagents = 1\nports = [\"0.0.0.0:8443:443/tcp@agent:0:direct\"]\n", "plain-laptop-amd");
    let k3d = k3d_gpu::apply::k3d::simple_config(&cluster_spec(&g));
    assert_eq!(
        k3d["ports"][0],
        serde_json::json!({ "port": "0.0.0.0:8443:443/tcp", "nodeFilters": ["agent:0:direct"] })
    );
    assert!(
        g.warnings.iter().any(|w| w.code == "port-published-off-loopback" && w.text.contains("every interface")),
        "{:?}",
        g.warnings
    );
    // No ports: the spec (recorded on the nodes, compared by the next plan) is what it was.
    assert!(cluster_spec(&graph("", "plain-laptop-amd")).get("ports").is_none());
}

#[test]
fn a_bad_port_is_refused_on_its_element() {
    for (toml, why) in [
        ("ports = [\"80\"]", "HOST_PORT:CONTAINER_PORT"),
        ("ports = [\"localhost:8080:80\"]", "IPv4"),
        ("ports = [\"8080:80@agent:0\"]", "not a node of this cluster"),
        ("ports = [\"8080:80@server:*:direct\"]", "one node"),
        ("ports = [\"8080:80\", \"0.0.0.0:8080:81\"]", "already published by ports entry 1"),
        ("api_port = 6443\nports = [\"6443:80\"]", "the API port"),
    ] {
        let errors = build(&format!("[cluster]\n{toml}\n"), "plain-laptop-amd").unwrap_err();
        assert_eq!(errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["bad-port"], "{toml}");
        assert!(errors[0].message.contains(why), "{toml}: {}", errors[0].message);
        assert_eq!(errors[0].key, ["cluster", "ports"]);
        assert!(errors[0].element.is_some());
    }
}

#[test]
fn user_volumes_are_read_only_unless_asked_and_kept_apart_from_k3d_gpus_own_mounts() {
    let toml = "[cluster]\nagents = 1\nvolumes = [\"/srv/models:/models\", \"/srv/data:/data:rw@agent:0\"]\n";
    let g = graph(toml, "plain-laptop-amd");
    let spec = cluster_spec(&g);
    assert_eq!(
        spec["user_volumes"][0],
        serde_json::json!({"host": "/srv/models", "node": "/models", "read_only": true, "nodes": []})
    );
    assert!(
        spec["volumes"].as_array().unwrap().iter().all(|v| v["host"] != "/srv/models"),
        "k3d-gpu's own list is untouched"
    );
    let k3d = k3d_gpu::apply::k3d::simple_config(&spec);
    let volumes = k3d["volumes"].as_array().unwrap();
    assert!(
        volumes
            .contains(&serde_json::json!({"volume": "/srv/models:/models:ro", "nodeFilters": ["server:*", "agent:*"]}))
    );
    assert!(volumes.contains(&serde_json::json!({"volume": "/srv/data:/data", "nodeFilters": ["agent:0"]})));
    assert!(cluster_spec(&graph("", "plain-laptop-amd")).get("user_volumes").is_none());
    for (entry, why) in [
        ("srv:/models", "absolute"),
        ("/srv:/models:rx", "ro or rw"),
        ("/srv:/k3d-gpu/host/x", "k3d-gpu mounts"),
        ("/srv:/m@loadbalancer", "load balancer"),
        ("/srv:/m@agent:0", "not a node"),
        ("/a/../etc:/m", "'..'"),
    ] {
        let errors = build(&format!("[cluster]\nvolumes = [{entry:?}]\n"), "plain-laptop-amd").unwrap_err();
        assert_eq!(errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["bad-volume"], "{entry}");
        assert!(errors[0].message.contains(why), "{entry}: {}", errors[0].message);
    }
    assert_eq!(codes("[cluster]\nvolumes = [\"/a:/m\", \"/b:/m/\"]\n", "plain-laptop-amd"), ["bad-volume"]);
}

#[test]
fn registries_reach_k3d_as_registries_yaml_and_a_created_registry_on_loopback() {
    let toml = "[cluster.registries]\nmirrors = { \"docker.io\" = [\"http://k3d-gpu-registry:5000\", \"https://mirror.lan\"] }\n[cluster.registries.create]\nport = 5001\nproxy = \"https://registry-1.docker.io\"\n";
    let g = graph(toml, "plain-laptop-amd");
    let k3d = k3d_gpu::apply::k3d::simple_config(&cluster_spec(&g));
    let yaml: serde_json::Value = serde_json::from_str(k3d["registries"]["config"].as_str().unwrap()).unwrap();
    assert_eq!(yaml["mirrors"]["docker.io"]["endpoint"][1], "https://mirror.lan");
    let create = &k3d["registries"]["create"];
    assert_eq!(
        (create["name"].as_str(), create["host"].as_str(), create["hostPort"].as_str()),
        (Some("k3d-gpu-registry"), Some("127.0.0.1"), Some("5001"))
    );
    assert_eq!(create["proxy"]["remoteURL"], "https://registry-1.docker.io");
    assert!(create["image"].as_str().unwrap().starts_with("docker.io/library/registry:2"));
    assert!(g.images.contains_key("docker.io/library/registry:2"), "pinned through images.lock like every image");
    assert!(!warnings(&g).iter().any(|w| w == "registry-published-off-loopback"));
    let g = graph("[cluster.registries.create]\nhost_ip = \"0.0.0.0\"\n", "plain-laptop-amd");
    assert!(warnings(&g).iter().any(|w| w == "registry-published-off-loopback"));
    for toml in [
        "[cluster.registries]\nmirrors = { \"docker.io\" = [\"https://user:pw@mirror.lan\"] }\n",
        "[cluster.registries]\nmirrors = { \"docker.io\" = [] }\n",
        "[cluster.registries]\nmirrors = { \"a b\" = [\"https://m\"] }\n",
    ] {
        assert_eq!(codes(toml, "plain-laptop-amd"), ["bad-registry-mirror"], "{toml}");
    }
    assert_eq!(
        codes("[cluster.registries.create]\nname = \"Bad_Name\"\n", "plain-laptop-amd"),
        ["bad-registry-create"]
    );
}

#[test]
fn registry_credentials_reach_the_spec_as_a_digest_only() {
    let toml =
        "[cluster.registries]\nmirrors = { \"docker.io\" = [\"https://mirror.lan\"] }\ncredentials = \"auth.yaml\"\n";
    // Compiled without the command edge having read the file: refused, not planned blind.
    assert_eq!(codes(toml, "plain-laptop-amd"), ["registry-credentials-unread"]);
    let mut config = load_str("k3dgpu.toml", toml).unwrap();
    let read = k3d_gpu::apply::registries::Credentials::parse(
        "configs:\n  mirror.lan:\n    auth:\n      username: lab\n      password: hunter2\n",
    )
    .unwrap();
    config.cluster.registries.as_mut().unwrap().credentials_read =
        Some(Ok(k3d_gpu::config::CredentialsRead { digest: read.digest(&[9; 32]), registries: read.registries() }));
    let g = compile(&config, &facts_of("plain-laptop-amd"), &catalog()).unwrap();
    let spec = cluster_spec(&g);
    assert_eq!(spec["registries"]["credentials"]["file"], "auth.yaml");
    assert_eq!(spec["registries"]["credentials"]["digest"], read.digest(&[9; 32]));
    let k3d = k3d_gpu::apply::k3d::simple_config(&spec);
    for printed in [String::from_utf8(g.to_json()).unwrap(), k3d.to_string()] {
        assert!(!printed.contains("hunter2"), "{printed}");
    }
    let written = k3d_gpu::apply::k3d::with_credentials(k3d, &spec, &read);
    assert!(written["registries"]["config"].as_str().unwrap().contains("hunter2"), "only what apply writes has them");
    config.cluster.registries.as_mut().unwrap().credentials_read = Some(Err(k3d_gpu::config::CredentialsUnread {
        step: k3d_gpu::config::CredentialsStep::Read,
        reason: "no such file".into(),
    }));
    let errors = compile(&config, &facts_of("plain-laptop-amd"), &catalog()).unwrap_err();
    assert_eq!(errors[0].code, "bad-registry-credentials");
    assert_eq!(
        codes("[cluster.registries]\ncredentials = \"/etc/shadow\"\n", "plain-laptop-amd"),
        ["bad-registry-credentials"]
    );
}
