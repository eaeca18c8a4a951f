//! Every example config against its fixture hosts: it validates, and its graph matches the
//! golden one (`tests/golden/graph/<example>--<host>.json`; regenerate with
//! `UPDATE_GOLDEN=1 cargo test --test examples`).

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{Change, compile};
use support::{EXAMPLES, check_golden, example_config as config, facts_of, repo};

#[test]
fn every_example_is_listed_here() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".toml").map(str::to_string))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = EXAMPLES.iter().map(|(e, _)| e.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn examples_compile_for_their_hosts_and_match_the_golden_graphs() {
    let catalog = Catalog::embedded().unwrap();
    let mut stale = Vec::new();
    for (example, host) in EXAMPLES {
        let graph = compile(&config(example), &facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{example} on {host}: {e:#?}"));
        if let Err(e) = check_golden(&format!("tests/golden/graph/{example}--{host}.json"), &graph.to_json()) {
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
fn the_cluster_is_the_only_resource_that_forces_replacement() {
    let catalog = Catalog::embedded().unwrap();
    let graph = compile(&config("nvidia-workstation"), &facts_of("desktop-rpl-nvidia"), &catalog).unwrap();
    let replace: Vec<&str> = graph.resources().filter(|r| r.change == Change::Replace).map(|r| r.id.as_str()).collect();
    assert_eq!(replace, ["k3d/cluster/cuda"]);
    let cluster = graph.get("k3d/cluster/cuda").unwrap();
    assert_eq!(cluster.spec["gpus"], "all");
    let args: Vec<&str> =
        cluster.spec["k3s_args"].as_array().unwrap().iter().map(|a| a["arg"].as_str().unwrap()).collect();
    assert!(args.contains(&"--default-runtime=nvidia"));
    assert!(args.contains(&"--disable=traefik"));
}

#[test]
fn the_baked_balloons_policy_is_skipped_unless_hybrid_or_numa_wants_it() {
    // With the shipped catalog (which does not apply a balloons policy of its own), the
    // node image's baked policy serves hybrid and NUMA hosts and is skipped elsewhere.
    let catalog = Catalog::embedded().unwrap();
    let disabled = |toml: &str, host: &str| {
        let config = k3d_gpu::config::load_str("k3dgpu.toml", toml).unwrap();
        let graph = compile(&config, &facts_of(host), &catalog).unwrap();
        let cluster = graph.resources().find(|r| r.id.starts_with("k3d/cluster/")).unwrap();
        cluster.spec["k3s_args"].as_array().unwrap().iter().any(|a| a["arg"] == "--disable=nri-balloons")
    };
    assert!(!disabled("", "desktop-rpl-nvidia"), "hybrid keeps it");
    assert!(!disabled("", "xeon-2s-snc2"), "numa keeps it");
    assert!(disabled("", "plain-laptop-amd"), "neither");
    assert!(disabled("[placement]\nballoons = \"external\"\n", "desktop-rpl-nvidia"), "a Helm release owns it");
    assert!(disabled("[vendors]\nexclude = [\"hybrid\"]\n", "desktop-rpl-nvidia"), "left out of the vendors");
}
