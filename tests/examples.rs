//! Every example config against its fixture hosts: it validates, and its graph matches the
//! golden one (`tests/golden/graph/<example>--<host>.txt`, in the reviewable form of
//! `support::graph_golden`; regenerate with `UPDATE_GOLDEN=1 cargo test --test examples`).

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{Change, ResourceKind, compile};
use support::{
    EXAMPLES, FLEET_EXAMPLES, check_golden, example_config as config, facts_of, fleet_graph, graph_golden, repo,
};

#[test]
fn every_example_is_listed_here() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".toml").map(str::to_string))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> =
        EXAMPLES.iter().map(|(e, _)| e.to_string()).chain(FLEET_EXAMPLES.iter().map(|e| e.to_string())).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn fleet_examples_compile_per_node_and_match_the_golden_graphs() {
    let catalog = Catalog::embedded().unwrap();
    let mut stale = Vec::new();
    for example in FLEET_EXAMPLES {
        let graph = fleet_graph(example, &catalog);
        assert!(
            graph.resources().all(|r| r.change != Change::Replace),
            "an existing cluster has no node image and no k3d cluster"
        );
        if let Err(e) =
            check_golden(&format!("tests/golden/graph/{example}.txt"), graph_golden::of(&graph, &catalog).as_bytes())
        {
            stale.push(e);
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}

#[test]
fn the_fleet_example_validates_through_the_cli() {
    let out = support::K3dGpu::new().args(["validate", "-c"]).arg(repo().join("examples/homelab-fleet.toml")).output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for node in ["arc-01", "gpu-01", "xeon-01"] {
        assert!(stdout.lines().any(|l| l.starts_with(node) && l.contains(" ok ")), "{node} in {stdout}");
    }
}

#[test]
fn examples_compile_for_their_hosts_and_match_the_golden_graphs() {
    let catalog = Catalog::embedded().unwrap();
    let mut stale = Vec::new();
    for (example, host) in EXAMPLES {
        let graph = compile(&config(example), &facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{example} on {host}: {e:#?}"));
        if let Err(e) = check_golden(
            &format!("tests/golden/graph/{example}--{host}.txt"),
            graph_golden::of(&graph, &catalog).as_bytes(),
        ) {
            stale.push(e);
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}

#[test]
fn an_example_on_the_wrong_machine_fails_its_expectations() {
    let catalog = Catalog::embedded().unwrap();
    let errors = compile(&config("nvidia-workstation"), &facts_of("plain-laptop-amd"), &catalog).unwrap_err();
    let codes: Vec<&str> = errors.iter().map(|e| e.code).collect();
    assert_eq!(codes, ["vendor-absent", "vendor-absent", "expect-vendor", "expect-devices"]);
}

#[test]
fn the_cluster_and_its_node_image_are_the_only_resources_that_force_replacement() {
    let catalog = Catalog::embedded().unwrap();
    let graph = compile(&config("nvidia-workstation"), &facts_of("desktop-rpl-nvidia"), &catalog).unwrap();
    let replace: Vec<&str> = graph.resources().filter(|r| r.change == Change::Replace).map(|r| r.id.as_str()).collect();
    assert_eq!(replace, ["docker/node-image", "k3d/cluster/cuda"]);
    let cluster = graph.get("k3d/cluster/cuda").unwrap();
    assert_eq!(cluster.depends_on, ["docker/node-image"], "the cluster is created from the image built first");
    assert_eq!(cluster.spec["image"], graph.get("docker/node-image").unwrap().spec["reference"]);
    assert_eq!(cluster.spec["gpus"], "all");
    let args: Vec<&str> =
        cluster.spec["k3s_args"].as_array().unwrap().iter().map(|a| a["arg"].as_str().unwrap()).collect();
    assert!(args.contains(&"--default-runtime=nvidia"));
    assert!(args.contains(&"--disable=traefik"));
}

#[test]
fn the_balloons_component_replaces_the_baked_policy_where_hybrid_or_numa_wants_it() {
    // The catalog applies its own balloons policy, so k3s always skips the baked copy; the
    // component's objects are there exactly where the reference rule wants a policy.
    let catalog = Catalog::embedded().unwrap();
    let outcome = |toml: &str, host: &str| {
        let config = k3d_gpu::config::load_str("k3dgpu.toml", toml).unwrap();
        let graph = compile(&config, &facts_of(host), &catalog).unwrap();
        let cluster = graph.resources().find(|r| r.id.starts_with("k3d/cluster/")).unwrap();
        let baked_off =
            cluster.spec["k3s_args"].as_array().unwrap().iter().any(|a| a["arg"] == "--disable=nri-balloons");
        let applied = graph.get("k8s/apps/DaemonSet/kube-system/nri-resource-policy-balloons").is_some()
            && graph.get("k8s/config.nri/BalloonsPolicy/kube-system/default").is_some();
        (baked_off, applied)
    };
    assert_eq!(outcome("", "desktop-rpl-nvidia"), (true, true), "hybrid");
    assert_eq!(outcome("", "xeon-2s-snc2"), (true, true), "numa");
    assert_eq!(outcome("", "plain-laptop-amd"), (true, false), "neither");
    assert_eq!(outcome("[placement]\nballoons = \"external\"\n", "desktop-rpl-nvidia"), (true, false), "Helm owns it");
    assert_eq!(outcome("[vendors]\nexclude = [\"hybrid\"]\n", "desktop-rpl-nvidia"), (true, false), "excluded");
}

/// The lines of `after` that are not in `before`, in order.
fn new_lines<'a>(before: &str, after: &'a str) -> Vec<&'a str> {
    let before: std::collections::HashSet<&str> = before.lines().collect();
    after.lines().filter(|l| !before.contains(l)).collect()
}

/// The entry of resource `id` in a graph golden: its lines, up to the next entry.
fn golden_entry<'a>(golden: &'a str, id: &str) -> Vec<&'a str> {
    let head = format!("== {id}");
    golden.lines().skip_while(|l| *l != head).take_while(|l| !l.is_empty()).collect()
}

const BALLOONS_CRD: &str = "k8s/apiextensions.k8s.io/CustomResourceDefinition/balloonspolicies.config.nri";

#[test]
fn a_one_byte_change_to_a_vendored_manifest_changes_the_graph_goldens_digest_lines() {
    let catalog = Catalog::embedded().unwrap();
    let (example, host) = ("nvidia-workstation", "desktop-rpl-nvidia");
    let before = graph_golden::of(&compile(&config(example), &facts_of(host), &catalog).unwrap(), &catalog);
    // The CRD's schema is shown only by its digest: the golden does not copy it.
    let entry = golden_entry(&before, BALLOONS_CRD);
    assert!(entry.iter().any(|l| l.starts_with("from: share/nri-balloons.yml document ")), "{entry:#?}");
    assert!(!before.contains("openAPIV3Schema"), "a verbatim schema was copied into the golden");

    // One byte of one description in the vendored CRD, as if share/nri-balloons.yml changed.
    let mut edited = catalog.clone();
    let component = edited.components.get_mut("nri-balloons").unwrap();
    let mut docs = component.objects.get().unwrap().to_vec();
    let crd = docs.iter_mut().find(|d| k3d_gpu::compile::object_id(d) == BALLOONS_CRD).unwrap();
    let description = crd.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/description").unwrap();
    let text = description.as_str().unwrap().to_string();
    *description = serde_json::json!(format!("{}!", &text[..text.len() - 1]));
    component.objects = k3d_gpu::catalog::Objects::parsed(docs);
    let after = graph_golden::of(&compile(&config(example), &facts_of(host), &edited).unwrap(), &edited);

    let changed = new_lines(&before, &after);
    let entry = golden_entry(&after, BALLOONS_CRD);
    let spec = entry.iter().find(|l| l.starts_with("spec: ")).unwrap();
    let from = entry.iter().find(|l| l.starts_with("from: ")).unwrap();
    assert!(changed.contains(spec) && changed.contains(from), "{changed:#?}");
    assert!(changed.iter().any(|l| l.starts_with("graph: ")), "{changed:#?}");
    assert!(changed.len() < 10, "one byte of a manifest became a large diff: {changed:#?}");
}

#[test]
fn a_change_compile_makes_to_a_catalog_object_is_listed_in_its_graph_golden_entry() {
    let catalog = Catalog::embedded().unwrap();
    let graph = compile(&config("nvidia-workstation"), &facts_of("desktop-rpl-nvidia"), &catalog).unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&graph.to_json()).unwrap();
    let before = graph_golden::render(&json, &catalog);
    // Every catalog object carries the managed-by label compile adds: listed, not hidden.
    let entry = golden_entry(&before, BALLOONS_CRD);
    let labels = entry.iter().find(|l| l.starts_with("  + /metadata/labels")).unwrap_or_else(|| panic!("{entry:#?}"));
    assert!(labels.contains(r#""app.kubernetes.io/managed-by":"k3d-gpu""#), "{entry:#?}");

    let resources = json["resources"].as_array_mut().unwrap();
    let crd = resources.iter_mut().find(|r| r["id"] == BALLOONS_CRD).unwrap();
    crd["spec"]["spec"]["group"] = serde_json::json!("config.nrj");
    let after = graph_golden::render(&json, &catalog);
    let changed = new_lines(&before, &after);
    assert!(changed.contains(&"  ~ /spec/group: \"config.nri\" -> \"config.nrj\""), "{changed:#?}");
    assert_eq!(changed.iter().filter(|l| l.starts_with("spec: ")).count(), 1, "{changed:#?}");
}

#[test]
fn the_balloons_policy_carries_this_hosts_cpu_hints() {
    // The CPPC-favoured CPUs on the latency balloon, OVERRIDE_SYS_ATOM_CPUS where the kernel
    // lists low-power E-cores apart (Arrow Lake-H), and nothing of either on other hosts.
    let catalog = Catalog::embedded().unwrap();
    let hints = |toml: &str, host: &str| {
        let config = k3d_gpu::config::load_str("k3dgpu.toml", toml).unwrap();
        let graph = compile(&config, &facts_of(host), &catalog).unwrap();
        let policy = &graph.get("k8s/config.nri/BalloonsPolicy/kube-system/default").unwrap().spec;
        let mut favoured = Vec::new();
        for t in policy["spec"]["balloonTypes"].as_array().unwrap() {
            let devices: Vec<String> = t["preferCloseToDevices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d.as_str().unwrap().to_string())
                .filter(|d| d.starts_with("/sys/devices/system/cpu/"))
                .collect();
            if t["name"] == "latency" {
                favoured = devices;
            } else {
                assert!(devices.is_empty(), "{host}: only the latency type is told of favoured CPUs: {t}");
            }
        }
        let daemonset = &graph.get("k8s/apps/DaemonSet/kube-system/nri-resource-policy-balloons").unwrap().spec;
        let env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
        let atom = env.iter().find(|e| e["name"] == "OVERRIDE_SYS_ATOM_CPUS").map(|e| e["value"].as_str().unwrap());
        (favoured, atom.map(str::to_string))
    };
    let cpus = |list: &[u32]| -> Vec<String> {
        list.iter().map(|n| format!("/sys/devices/system/cpu/cpu{n}/cache/index0")).collect()
    };
    assert_eq!(hints("", "desktop-rpl-nvidia"), (cpus(&[4, 5, 6, 7]), None));
    assert_eq!(hints("", "arc-b580-xe-rpl-igpu"), (cpus(&[2, 3, 8, 9]), None));
    assert_eq!(hints("", "arrow-lake-h"), (cpus(&[2, 3]), Some("6-15".to_string())));
    assert_eq!(hints("", "meteor-lake-old-npu-fw"), (vec![], Some("12-21".to_string())), "cpu_lowpower 20-21");
    assert_eq!(hints("", "lunar-lake-npu"), (vec![], None), "no CPPC ranking, no low-power E-cores");
    assert_eq!(hints("[agent]\n", "arrow-lake-h"), (cpus(&[2, 3]), Some("6-15".to_string())));

    // Handed to a Helm release, k3d-gpu edits nothing of the policy: it applies none.
    let config = k3d_gpu::config::load_str("k3dgpu.toml", "[placement]\nballoons = \"external\"\n").unwrap();
    let graph = compile(&config, &facts_of("arrow-lake-h"), &catalog).unwrap();
    assert!(graph.resources().all(|r| r.component.as_deref() != Some("nri-balloons")));
}

#[test]
fn the_balloons_objects_carry_the_helm_release_a_chart_install_would_give_them() {
    // So a Helm release of the same chart (Intel's Enterprise Agent Toolkit installs it as
    // nri-resource-policy-balloons in kube-system) finds its own release name on them. The CRD
    // is left out: Helm installs a chart's crds/ outside the release.
    let catalog = Catalog::embedded().unwrap();
    let graph = compile(&config("hybrid-igpu-sharing"), &facts_of("meteor-lake-old-npu-fw"), &catalog).unwrap();
    let objects: Vec<_> = graph
        .resources()
        .filter(|r| r.kind == ResourceKind::Object && r.component.as_deref() == Some("nri-balloons"))
        .collect();
    assert_eq!(objects.len(), 8, "CRD, ServiceAccount, 2 RBAC pairs, policy, DaemonSet");
    for r in objects {
        let annotations = &r.spec["metadata"]["annotations"];
        if r.spec["kind"] == "CustomResourceDefinition" {
            assert!(annotations.get("meta.helm.sh/release-name").is_none(), "{}", r.id);
            continue;
        }
        assert_eq!(annotations["meta.helm.sh/release-name"], "nri-resource-policy-balloons", "{}", r.id);
        assert_eq!(annotations["meta.helm.sh/release-namespace"], "kube-system", "{}", r.id);
        // k3d-gpu owns them until they are handed over: observe and delete go by this label.
        assert_eq!(r.spec["metadata"]["labels"]["app.kubernetes.io/managed-by"], "k3d-gpu", "{}", r.id);
    }
}

/// Examples in a directory of their own: a `k3dgpu.toml` for a fixture host, beside what runs
/// on that cluster (manifests for an operator you install, or a script against the agent).
const DIR_EXAMPLES: &[(&str, &str)] = &[
    ("kserve-ovms-igpu", "arrow-lake-h"),
    ("kuberay-hybrid", "meteor-lake-old-npu-fw"),
    ("agents-openai-sdk", "arrow-lake-h"),
    ("agents-langgraph", "arrow-lake-h"),
];

fn dir_example(example: &str, host: &str) -> k3d_gpu::compile::DesiredGraph {
    let path = repo().join(format!("examples/{example}/k3dgpu.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let config = k3d_gpu::config::load_str(&path.display().to_string(), &text).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, &facts_of(host), &Catalog::embedded().unwrap())
        .unwrap_or_else(|e| panic!("{example} on {host}: {e:#?}"))
}

/// The YAML objects of an example directory, with their file names.
fn dir_manifests(example: &str) -> Vec<(String, serde_json::Value)> {
    support::manifests_in(&format!("examples/{example}"), ".yaml")
}

#[test]
fn every_example_directory_is_listed_and_validates_on_its_host() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("k3dgpu.toml").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = DIR_EXAMPLES.iter().map(|(e, _)| e.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    for (example, host) in DIR_EXAMPLES {
        let out = support::K3dGpu::new()
            .args(["validate", "-c"])
            .arg(repo().join(format!("examples/{example}/k3dgpu.toml")))
            .arg("--root")
            .arg(repo().join(format!("tests/fixtures/hosts/{host}")))
            .output();
        assert!(out.status.success(), "{example} on {host}: {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn example_manifests_ask_only_for_what_their_cluster_has() {
    // Every extended resource a pod asks for is one the cluster advertises (its allocatable
    // check), every nodeSelector is a label the node gets, every k3d-gpu.io/cores value is a
    // balloon type of the policy the cluster runs.
    fn walk<'v>(v: &'v serde_json::Value, key: &str, out: &mut Vec<&'v serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if k == key {
                        out.push(v);
                    }
                    walk(v, key, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, key, out)),
            _ => {}
        }
    }
    for (example, host) in DIR_EXAMPLES {
        let manifests = dir_manifests(example);
        if manifests.is_empty() {
            continue;
        }
        let graph = dir_example(example, host);
        let advertised: Vec<String> =
            graph.resources().filter_map(|r| r.id.strip_prefix("verify/allocatable/").map(str::to_string)).collect();
        let labels: Vec<(String, String)> = graph
            .resources()
            .filter(|r| r.id.starts_with("node-label/"))
            .map(|r| (r.spec["key"].as_str().unwrap().to_string(), r.spec["value"].as_str().unwrap().to_string()))
            .collect();
        let policy = &graph.get("k8s/config.nri/BalloonsPolicy/kube-system/default").unwrap().spec;
        let balloons: Vec<&str> =
            policy["spec"]["balloonTypes"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        let (mut resources, mut selectors, mut cores) = (0, 0, 0);
        for (file, object) in &manifests {
            let mut found = Vec::new();
            walk(object, "resources", &mut found);
            for limits in found.iter().flat_map(|r| ["limits", "requests"].map(|k| &r[k])) {
                for name in limits.as_object().into_iter().flat_map(|m| m.keys()).filter(|k| k.contains('/')) {
                    assert!(advertised.contains(name), "{example}/{file}: {name} is not advertised: {advertised:?}");
                    resources += 1;
                }
            }
            let mut found = Vec::new();
            walk(object, "nodeSelector", &mut found);
            for (k, v) in found.iter().flat_map(|s| s.as_object().unwrap()) {
                let pair = (k.clone(), v.as_str().unwrap().to_string());
                assert!(labels.contains(&pair), "{example}/{file}: node label {pair:?} is not set: {labels:?}");
                selectors += 1;
            }
            let mut found = Vec::new();
            walk(object, "labels", &mut found);
            for value in found.iter().filter_map(|l| l.get("k3d-gpu.io/cores")) {
                let value = value.as_str().unwrap();
                assert!(balloons.contains(&value), "{example}/{file}: no balloon type {value}: {balloons:?}");
                cores += 1;
            }
        }
        assert!(resources > 0 && cores > 0, "{example}: its manifests use the cluster's devices and core types");
        // A non-root pod opens the render node through its group: the one this host has.
        let render: Vec<u64> = facts_of(host)
            .host
            .intel_gpus
            .iter()
            .flat_map(|g| g.device_nodes.iter().filter(|n| n.path.contains("/renderD")).map(|n| u64::from(n.gid)))
            .collect();
        for (file, object) in &manifests {
            let mut found = Vec::new();
            walk(object, "supplementalGroups", &mut found);
            let groups: Vec<u64> =
                found.iter().flat_map(|g| g.as_array().unwrap()).map(|g| g.as_u64().unwrap()).collect();
            assert!(
                !groups.is_empty() && groups.iter().all(|g| render.contains(g)),
                "{example}/{file}: {groups:?} {render:?}"
            );
        }
        if *example == "kuberay-hybrid" {
            assert_eq!((resources, selectors, cores), (1, 2, 3), "the head and two groups of workers");
        }
    }
}

#[test]
fn example_manifests_pin_the_images_they_name() {
    // KServe's runtime image is a placeholder until its install sets one: the example names
    // the agent's own OVMS build, so both move together. Ray's images are the rayVersion.
    let isvc = &dir_manifests("kserve-ovms-igpu")[0].1;
    assert_eq!(isvc["spec"]["predictor"]["model"]["image"], k3d_gpu::compile::workloads::OVMS_IMAGE);
    let ray = &dir_manifests("kuberay-hybrid")[0].1;
    let version = ray["spec"]["rayVersion"].as_str().unwrap();
    let templates = std::iter::once(&ray["spec"]["headGroupSpec"])
        .chain(ray["spec"]["workerGroupSpecs"].as_array().unwrap())
        .map(|g| &g["template"]["spec"]["containers"]);
    let images: Vec<&str> =
        templates.flat_map(|c| c.as_array().unwrap()).map(|c| c["image"].as_str().unwrap()).collect();
    assert_eq!(images.len(), 3);
    assert!(images.iter().all(|i| *i == format!("docker.io/rayproject/ray:{version}")), "{images:?}");
}

#[test]
fn the_agent_quickstarts_talk_to_the_server_their_config_deploys_with_pinned_packages() {
    let dir = tempfile::tempdir().unwrap();
    for (example, host) in DIR_EXAMPLES.iter().filter(|(e, _)| e.starts_with("agents-")) {
        let graph = dir_example(example, host);
        // The server the config deploys and the name it serves the model under.
        let deployment = &graph.get("k8s/apps/Deployment/k3d-gpu-agent/ovms").expect("OVMS on the iGPU").spec;
        let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let served = args[args.iter().position(|a| *a == "--model_name").unwrap() + 1];
        assert!(graph.get("k8s/core/Service/k3d-gpu-agent/ovms").is_some());

        let root = repo().join(format!("examples/{example}"));
        let scripts: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "py"))
            .collect();
        assert_eq!(scripts.len(), 1, "{example}: one script");
        let script = std::fs::read_to_string(&scripts[0]).unwrap();
        assert!(script.contains(&format!("\"{served}\"")), "{example}: the served model {served}");
        assert!(script.contains("\"http://127.0.0.1:8000/v3\"") && script.contains("port-forward svc/ovms 8000:8000"));
        if *example == "agents-openai-sdk" {
            assert!(script.contains(r#""args": ["mcp""#), "the agent sees the cluster through k3d-gpu mcp");
        }
        // It compiles (no packages needed for that), written outside the repository.
        let out = std::process::Command::new("python3")
            .args(["-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)"])
            .arg(&scripts[0])
            .arg(dir.path().join(format!("{example}.pyc")))
            .output()
            .expect("python3");
        assert!(out.status.success(), "{example}: {}", String::from_utf8_lossy(&out.stderr));
        // Every requirement pinned to one version.
        let requirements = std::fs::read_to_string(root.join("requirements.txt")).unwrap();
        let pins: Vec<&str> =
            requirements.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
        assert!(!pins.is_empty());
        for pin in pins {
            let (name, version) = pin.split_once("==").unwrap_or_else(|| panic!("{example}: {pin} is not pinned"));
            assert!(
                !name.is_empty() && version.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())),
                "{example}: {pin}"
            );
        }
    }
}
