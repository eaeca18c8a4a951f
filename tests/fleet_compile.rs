//! The fleet compile (`compile::fleet`) rule by rule, on the homelab example's captured
//! machines: variants only where settings differ, claims against every node they may land on,
//! the same graph whatever the node order, and per-node `[nodes.expect]`.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::fleet::{FleetNode, compile};
use k3d_gpu::config::{Expect, load_str};
use k3d_gpu::facts::Facts;
use support::repo;

fn facts(machine: &str) -> Facts {
    serde_json::from_slice(&std::fs::read(repo().join(format!("examples/homelab-fleet/{machine}.json"))).unwrap())
        .unwrap()
}

/// A fleet config of `extra` and one `[[nodes]]` per name (facts are passed directly).
fn config(extra: &str, names: &[&str]) -> k3d_gpu::config::Config {
    let mut text = format!("[cluster]\nprovider = \"existing\"\ncontext = \"lab\"\n{extra}\n");
    for n in names {
        text.push_str(&format!("\n[[nodes]]\nname = \"{n}\"\nfacts = \"{n}.json\"\n"));
    }
    load_str("k3dgpu.toml", &text).unwrap_or_else(|e| panic!("{e:?}"))
}

fn nodes<'a>(machines: &'a [(&'a str, Facts)], expect: &'a Expect) -> Vec<FleetNode<'a>> {
    machines.iter().map(|(name, facts)| FleetNode { name, facts, expect }).collect()
}

#[test]
fn machines_of_one_kind_share_one_plugin_with_its_plain_name() {
    let machines = [("arc-01", facts("arc-01")), ("arc-02", facts("arc-01"))];
    let expect = Expect::default();
    let graph =
        compile(&config("", &["arc-01", "arc-02"]), &nodes(&machines, &expect), &Catalog::embedded().unwrap()).unwrap();
    let plugin = graph.get("k8s/apps/DaemonSet/kube-system/intel-gpu-plugin").expect("the plain name");
    assert_eq!(
        plugin.spec["spec"]["template"]["spec"]["nodeSelector"]["component.k3d-gpu.io/intel-gpu-plugin"],
        "true"
    );
    assert!(plugin.spec["spec"]["selector"]["matchLabels"].get("k3d-gpu.io/variant").is_none());
    assert!(!graph.resources().any(|r| r.id.contains("intel-gpu-plugin-")), "no variants");
    for n in ["arc-01", "arc-02"] {
        let label = graph.get(&format!("node-label/{n}/component.k3d-gpu.io/intel-gpu-plugin")).unwrap();
        assert_eq!(label.spec["value"], "true");
    }
    // The workload waits for the labels it selects.
    assert!(plugin.depends_on.contains(&"node-label/arc-02/component.k3d-gpu.io/intel-gpu-plugin".to_string()));
}

#[test]
fn claims_see_the_gpus_of_every_node_they_may_land_on() {
    let dra = "kubernetes_version = \"1.36\"\n\n[sharing]\nmode = { intel = \"dra\" }\n\n[[claims]]\nname = \"arc-12g\"\nmodel = \"Battlemage\"\n";
    let catalog = Catalog::embedded().unwrap();
    let expect = Expect::default();
    // The B580 is on arc-01: a fleet with it can serve the claim, though gpu-01 cannot.
    let both = [("arc-01", facts("arc-01")), ("gpu-01", facts("gpu-01"))];
    let graph = compile(&config(dra, &["arc-01", "gpu-01"]), &nodes(&both, &expect), &catalog).unwrap();
    assert!(graph.get("k8s/resource.k8s.io/ResourceClaimTemplate/default/arc-12g").is_some());
    let slices = graph.get("verify/resourceslices/gpu.intel.com").unwrap();
    assert_eq!(slices.spec["min_devices"], 3, "the B580 and the two iGPUs");
    // Without it, no node can: the claim is refused at compile time.
    let desktop = [("gpu-01", facts("gpu-01"))];
    let errors = compile(&config(dra, &["gpu-01"]), &nodes(&desktop, &expect), &catalog).unwrap_err();
    assert!(errors.iter().any(|e| e.key == ["claims"]), "{errors:#?}");
}

#[test]
fn the_graph_does_not_depend_on_the_order_of_the_nodes() {
    // The small test catalog has no DSA/IAA/QAT plugin: each Xeon gets a warning about it,
    // which names both Xeons, whatever order the config lists them in.
    let catalog = k3d_gpu::component_files::from_dir(&repo().join("tests/fixtures/catalog")).unwrap();
    let expect = Expect::default();
    let names = ["arc-01", "xeon-01", "xeon-02"];
    let machines: Vec<(&str, Facts)> =
        names.iter().map(|n| (*n, facts(if *n == "xeon-02" { "xeon-01" } else { n }))).collect();
    let reversed: Vec<(&str, Facts)> = machines.iter().rev().cloned().collect();
    let a = compile(&config("", &names), &nodes(&machines, &expect), &catalog).unwrap();
    let b = compile(&config("", &["xeon-02", "xeon-01", "arc-01"]), &nodes(&reversed, &expect), &catalog).unwrap();
    let both = a.warnings.iter().find(|w| w.text.ends_with("(node xeon-01, xeon-02)")).expect("named once for both");
    // validate puts it on each of their rows, and not on arc-01's.
    assert_eq!(k3d_gpu::compile::fleet::warning_nodes(both), Some(vec!["xeon-01", "xeon-02"]));
    assert_eq!(String::from_utf8(a.to_json()).unwrap(), String::from_utf8(b.to_json()).unwrap());
}

#[test]
fn a_setting_that_does_nothing_on_one_node_is_news_only_when_it_does_nothing_anywhere() {
    let catalog = Catalog::embedded().unwrap();
    let expect = Expect::default();
    let monitoring = "[sharing]\nmonitoring = true\n";
    let fleet = [("arc-01", facts("arc-01")), ("xeon-01", facts("xeon-01"))];
    let graph = compile(&config(monitoring, &["arc-01", "xeon-01"]), &nodes(&fleet, &expect), &catalog).unwrap();
    assert!(!graph.warnings.iter().any(|w| w.code == "sharing-without-intel"), "{:#?}", graph.warnings);
    let xeons = [("xeon-01", facts("xeon-01"))];
    let graph = compile(&config(monitoring, &["xeon-01"]), &nodes(&xeons, &expect), &catalog).unwrap();
    assert!(graph.warnings.iter().any(|w| w.code == "sharing-without-intel"), "{:#?}", graph.warnings);
}

#[test]
fn a_nodes_expectations_are_its_own_and_name_it() {
    let catalog = Catalog::embedded().unwrap();
    let xeon_wants_nvidia = Expect { vendors: vec![k3d_gpu::facts::Vendor::Nvidia], ..Expect::default() };
    let none = Expect::default();
    let gpu = facts("gpu-01");
    let xeon = facts("xeon-01");
    let fleet = [
        FleetNode { name: "gpu-01", facts: &gpu, expect: &none },
        FleetNode { name: "xeon-01", facts: &xeon, expect: &xeon_wants_nvidia },
    ];
    let errors = compile(&config("", &["gpu-01", "xeon-01"]), &fleet, &catalog).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].message.starts_with("node xeon-01: "), "{}", errors[0].message);
    assert_eq!((errors[0].key.clone(), errors[0].element), (vec!["nodes"], Some(1)), "underlines [[nodes]] #2");
}

/// The homelab's three machines with `[agent]` (and `extra`) on `node`.
fn agent_fleet(agent: &str) -> Result<k3d_gpu::compile::DesiredGraph, Vec<k3d_gpu::compile::CompileError>> {
    let machines = [("arc-01", facts("arc-01")), ("gpu-01", facts("gpu-01")), ("xeon-01", facts("xeon-01"))];
    let expect = Expect::default();
    let names = ["arc-01", "gpu-01", "xeon-01"];
    compile(&config(agent, &names), &nodes(&machines, &expect), &Catalog::embedded().unwrap())
}

/// The agent label on each node of the homelab: only the agent's node has it.
fn agent_labels(graph: &k3d_gpu::compile::DesiredGraph) -> Vec<String> {
    ["arc-01", "gpu-01", "xeon-01"]
        .into_iter()
        .filter(|n| graph.get(&format!("node-label/{n}/component.k3d-gpu.io/agent")).is_some())
        .map(String::from)
        .collect()
}

#[test]
fn the_agent_on_the_nvidia_node_serves_with_vllm_on_cuda_there_only() {
    let graph = agent_fleet("[agent]\nnode = \"gpu-01\"\n").unwrap();
    let plan = graph.agent.as_ref().expect("the agent node's plan");
    assert_eq!((plan.backend, plan.device), ("vllm", "CUDA"), "{plan:#?}");
    assert_eq!(plan.node_selector["component.k3d-gpu.io/agent"], "true", "`k3d-gpu agent` shows the selector");
    assert!(plan.reason.ends_with("(node gpu-01)"), "{}", plan.reason);
    let vllm = graph.get("k8s/apps/Deployment/k3d-gpu-agent/vllm").expect("the vLLM server");
    let pod = &vllm.spec["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["component.k3d-gpu.io/agent"], "true", "{pod:#}");
    assert_eq!(pod["runtimeClassName"], "nvidia");
    assert_eq!(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
    assert_eq!(agent_labels(&graph), ["gpu-01"], "the selector's label is on the agent's node alone");
    assert!(vllm.depends_on.contains(&"node-label/gpu-01/component.k3d-gpu.io/agent".to_string()));
    assert!(graph.get("k8s/apps/Deployment/k3d-gpu-agent/ovms").is_none());
}

#[test]
fn the_agent_on_the_arc_node_serves_with_ovms_on_its_gpu_and_addons_follow_it() {
    let graph = agent_fleet("[agent]\nnode = \"arc-01\"\n\n[addons.embeddings]\ndevice = \"cpu\"\n").unwrap();
    let plan = graph.agent.as_ref().unwrap();
    assert_eq!((plan.backend, plan.device), ("ovms", "GPU"), "{plan:#?}");
    let ovms = graph.get("k8s/apps/Deployment/k3d-gpu-agent/ovms").expect("OVMS");
    let pod = &ovms.spec["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["component.k3d-gpu.io/agent"], "true");
    assert_eq!(pod["containers"][0]["resources"]["limits"]["gpu.intel.com/xe"], "1", "the arc box's plugin is xe");
    let embeddings = graph.get("k8s/apps/Deployment/k3d-gpu-agent/embeddings").expect("the add-on");
    assert_eq!(embeddings.spec["spec"]["template"]["spec"]["nodeSelector"]["component.k3d-gpu.io/agent"], "true");
    assert_eq!(agent_labels(&graph), ["arc-01"]);
}

#[test]
fn a_device_the_agents_node_lacks_is_refused_naming_the_node() {
    let errors = agent_fleet("[agent]\nnode = \"xeon-01\"\ndevice = \"cuda\"\n").unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].message.starts_with("node xeon-01: "), "{}", errors[0].message);
    assert_eq!(errors[0].key, ["agent", "device"]);
    // The same device on the node that has it is fine.
    assert!(agent_fleet("[agent]\nnode = \"gpu-01\"\ndevice = \"cuda\"\n").is_ok());
}

#[test]
fn the_agents_node_must_be_listed_and_is_refused_under_k3d() {
    let unknown = "[cluster]\nprovider = \"existing\"\ncontext = \"lab\"\n\n[agent]\nnode = \"gpu-09\"\n\n[[nodes]]\nname = \"gpu-01\"\nfacts = \"gpu-01.json\"\n";
    let e = format!("{:?}", load_str("k3dgpu.toml", unknown).unwrap_err());
    assert!(e.contains("\\\"gpu-09\\\" is not one of the [[nodes]]") && e.contains("\\\"gpu-01\\\""), "{e}");
    let missing = unknown.replace("node = \"gpu-09\"\n", "");
    let e = format!("{:?}", load_str("k3dgpu.toml", &missing).unwrap_err());
    assert!(e.contains("[agent] needs node"), "{e}");
    let k3d = "[agent]\nnode = \"gpu-01\"\n";
    let e = format!("{:?}", load_str("k3dgpu.toml", k3d).unwrap_err());
    assert!(e.contains("[agent] node names a node of an existing cluster"), "{e}");
}

#[test]
fn addons_without_the_agent_are_one_error_about_the_config_not_one_per_node() {
    let errors = agent_fleet("[addons.embeddings]\ndevice = \"cpu\"\n").unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!((errors[0].code, errors[0].key.clone()), ("addons-without-agent", vec!["addons"]));
    assert!(!errors[0].message.starts_with("node "), "{}", errors[0].message);
}

#[test]
fn a_claim_needs_one_node_with_all_the_gpus_it_wants() {
    // Two B580 boxes hold two B580s together; one claim is allocated on one node, so a claim
    // for two would never be scheduled. For one, either node will do.
    let catalog = Catalog::embedded().unwrap();
    let expect = Expect::default();
    let two = [("arc-01", facts("arc-01")), ("arc-02", facts("arc-01"))];
    let claim = |count: u32| {
        format!(
            "kubernetes_version = \"1.36\"\n\n[sharing]\nmode = \"dra\"\n\n[[claims]]\nname = \"b580s\"\nmodel = \"Battlemage\"\ncount = {count}\n"
        )
    };
    let errors = compile(&config(&claim(2), &["arc-01", "arc-02"]), &nodes(&two, &expect), &catalog).unwrap_err();
    let e = errors.iter().find(|e| e.code == "claim-split-across-nodes").unwrap_or_else(|| panic!("{errors:#?}"));
    assert_eq!((e.key.clone(), e.element), (vec!["claims"], Some(0)));
    assert!(compile(&config(&claim(1), &["arc-01", "arc-02"]), &nodes(&two, &expect), &catalog).is_ok());
}

/// The homelab's three machines, `extra` above them, gpu-01 with `taints`.
fn tainted_fleet(extra: &str, taints: &str) -> k3d_gpu::compile::DesiredGraph {
    let machines = [("arc-01", facts("arc-01")), ("gpu-01", facts("gpu-01")), ("xeon-01", facts("xeon-01"))];
    let expect = Expect::default();
    let text = format!(
        "[cluster]\nprovider = \"existing\"\ncontext = \"lab\"\n{extra}\n\n[[nodes]]\nname = \"arc-01\"\nfacts = \"a.json\"\n\n\
         [[nodes]]\nname = \"gpu-01\"\nfacts = \"g.json\"\ntaints = {taints}\n\n[[nodes]]\nname = \"xeon-01\"\nfacts = \"x.json\"\n"
    );
    let config = load_str("k3dgpu.toml", &text).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, &nodes(&machines, &expect), &Catalog::embedded().unwrap()).unwrap()
}

/// The tolerations of a workload's pods (empty when it has none).
fn tolerations(graph: &k3d_gpu::compile::DesiredGraph, id: &str) -> Vec<String> {
    let r = graph.get(id).unwrap_or_else(|| panic!("{id} is in the graph"));
    let pod = r.spec.pointer("/spec/template/spec").or(r.spec.pointer("/spec/podTemplate/spec")).expect("a pod");
    pod["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}={}:{}",
                t["key"].as_str().unwrap_or("*"),
                t["value"].as_str().unwrap_or(""),
                t["effect"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn workloads_on_a_tainted_node_tolerate_its_taints_and_no_others_do() {
    const GPU_ONLY: &str = "k3d-gpu.io/gpu-only=true:NoSchedule";
    let graph = tainted_fleet("[agent]\nnode = \"gpu-01\"\n", &format!("[\"{GPU_ONLY}\"]"));
    // The NVIDIA plugin and the agent run on gpu-01: they tolerate its taint.
    let nvidia = graph
        .resources()
        .find(|r| r.component.as_deref() == Some("nvidia-device-plugin") && r.spec["kind"] == "DaemonSet")
        .expect("the NVIDIA device plugin");
    assert!(tolerations(&graph, &nvidia.id).contains(&GPU_ONLY.to_string()), "{:?}", tolerations(&graph, &nvidia.id));
    assert!(tolerations(&graph, "k8s/apps/Deployment/k3d-gpu-agent/vllm").contains(&GPU_ONLY.to_string()));
    // Workloads only on the untainted nodes do not.
    let untainted: Vec<&str> = graph
        .resources()
        .filter(|r| r.spec.pointer("/spec/template/spec").is_some())
        .filter(|r| !r.depends_on.iter().any(|d| d.starts_with("node-label/gpu-01/")))
        .map(|r| r.id.as_str())
        .collect();
    assert!(!untainted.is_empty(), "the Arc box and the Xeon run workloads of their own");
    for id in untainted {
        assert!(!tolerations(&graph, id).contains(&GPU_ONLY.to_string()), "{id} stays off gpu-01");
    }
    // Without taints, the same graph has none of ours.
    let plain = tainted_fleet("[agent]\nnode = \"gpu-01\"\n", "[]");
    assert!(!tolerations(&plain, "k8s/apps/Deployment/k3d-gpu-agent/vllm").contains(&GPU_ONLY.to_string()));
}

#[test]
fn the_sandbox_runs_on_its_node_alone() {
    let graph = tainted_fleet("[sandbox]\nnode = \"gpu-01\"\n", "[\"dedicated=gpu:NoExecute\"]");
    let labelled: Vec<&str> = ["arc-01", "gpu-01", "xeon-01"]
        .into_iter()
        .filter(|n| graph.get(&format!("node-label/{n}/component.k3d-gpu.io/sandbox")).is_some())
        .collect();
    assert_eq!(labelled, ["gpu-01"]);
    let template = graph
        .get("k8s/extensions.agents.x-k8s.io/SandboxTemplate/agent-sandbox/python-ecores")
        .expect("the sandbox template");
    let pod = &template.spec["spec"]["podTemplate"]["spec"];
    assert_eq!(pod["nodeSelector"]["component.k3d-gpu.io/sandbox"], "true", "{pod:#}");
    assert_eq!(tolerations(&graph, &template.id), ["dedicated=gpu:NoExecute"]);
    assert!(template.depends_on.contains(&"node-label/gpu-01/component.k3d-gpu.io/sandbox".to_string()));
    // Its controller follows it there, and nowhere else.
    let controllers: Vec<&str> = ["arc-01", "gpu-01", "xeon-01"]
        .into_iter()
        .filter(|n| graph.get(&format!("node-label/{n}/component.k3d-gpu.io/agent-sandbox")).is_some())
        .collect();
    assert_eq!(controllers, ["gpu-01"]);
}

/// The graph carries each node's facts digest, in the config's order: what a fleet plan's
/// facts digest is made of (so the plan does not serialise every node's facts again). Equal
/// facts digest alike, whether loaded once or twice, and a change to one node's facts shows.
#[test]
fn the_graph_carries_each_nodes_facts_digest() {
    let arc = facts("arc-01");
    let machines = [("arc-01", arc.clone()), ("arc-02", arc.clone())];
    let expect = Expect::default();
    let catalog = Catalog::embedded().unwrap();
    let graph = compile(&config("", &["arc-01", "arc-02"]), &nodes(&machines, &expect), &catalog).unwrap();
    let digest = k3d_gpu::canonical::digest(&arc);
    assert_eq!(graph.fleet_facts, [("arc-01".to_string(), digest.clone()), ("arc-02".to_string(), digest.clone())]);

    let mut changed = arc.clone();
    changed.annotations.insert("example.com/changed".into(), "yes".into());
    let machines = [("arc-01", arc), ("arc-02", changed.clone())];
    let graph = compile(&config("", &["arc-01", "arc-02"]), &nodes(&machines, &expect), &catalog).unwrap();
    assert_eq!(graph.fleet_facts[0].1, digest);
    assert_eq!(graph.fleet_facts[1].1, k3d_gpu::canonical::digest(&changed));
    assert_ne!(graph.fleet_facts[1].1, digest);
}
