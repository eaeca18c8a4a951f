//! Every example config against its fixture hosts: it validates, and its graph matches the
//! golden one (`tests/golden/graph/<example>--<host>.txt`, in the reviewable form of
//! `support::graph_golden`; regenerate with `UPDATE_GOLDEN=1 cargo test --test examples`).

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{Change, compile};
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
