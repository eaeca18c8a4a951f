//! The catalog costs what the config uses: a compile decodes only the manifests of the
//! components it wants, and a `--stdlib DIR` manifest is parsed (and checked) when wanted.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::compile;
use k3d_gpu::config::load_str;
use support::facts_of;

#[test]
fn a_compile_decodes_only_the_manifests_it_wants() {
    let catalog = Catalog::embedded().unwrap();
    let graph = compile(&load_str("k3dgpu.toml", "").unwrap(), &facts_of("desktop-rpl-nvidia"), &catalog).unwrap();
    let decoded: Vec<&str> =
        catalog.components.values().filter(|c| c.objects.decoded()).map(|c| c.name.as_str()).collect();
    assert!(decoded.contains(&"nvidia-device-plugin"), "{decoded:?}");
    // The sandbox's CRDs (most of the catalog's bytes) are not read without [sandbox].
    assert!(!decoded.contains(&"agent-sandbox"), "{decoded:?}");
    assert!(!decoded.contains(&"gaudi-device-plugin"), "{decoded:?}");
    // Every component with an object in the graph was decoded, and only those.
    for c in catalog.components.values() {
        let label = format!("\"k3d-gpu.io/component\":\"{}\"", c.name);
        let in_graph = graph.resources().any(|r| r.spec.to_string().contains(&label));
        assert_eq!(c.objects.decoded(), in_graph, "{}", c.name);
    }
}

fn component(dir: &std::path::Path, name: &str, when: &str, manifest: &str) {
    let kdl = format!(
        "component {name} {{\n    summary \"x\"\n    upstream x version=v1\n    manifest {name}.yml\n{when}}}\n"
    );
    std::fs::write(dir.join(format!("{name}.kdl")), kdl).unwrap();
    std::fs::write(dir.join(format!("{name}.yml")), manifest).unwrap();
}

#[test]
fn a_stdlib_dir_manifest_is_parsed_and_checked_when_wanted() {
    let dir = tempfile::tempdir().unwrap();
    component(dir.path(), "always", "", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n");
    component(dir.path(), "broken", "    when vendor=gaudi\n", "apiVersion: v1\nkind: [unclosed\n");
    component(
        dir.path(),
        "unlisted",
        "    when vendor=npu\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: \"busybox:1.37\"}]\n",
    );
    let catalog = k3d_gpu::component_files::from_dir(dir.path()).unwrap();
    let config = load_str("k3dgpu.toml", "").unwrap();
    // A host that wants neither never reads them.
    compile(&config, &facts_of("plain-laptop-amd"), &catalog).unwrap();
    assert!(!catalog.components["broken"].objects.decoded());
    // One that wants the broken one gets its error, as a compile error naming the component.
    let errors = compile(&config, &facts_of("gaudi3-server"), &k3d_gpu::component_files::from_dir(dir.path()).unwrap())
        .unwrap_err();
    let e = errors.iter().find(|e| e.code == "component-manifest").expect("the manifest's error");
    assert!(e.message.starts_with("component broken: ") && e.message.contains("is not valid YAML"), "{}", e.message);
    // The image check holds for a manifest parsed late too.
    let errors =
        compile(&config, &facts_of("lunar-lake-npu"), &k3d_gpu::component_files::from_dir(dir.path()).unwrap());
    let errors = errors.unwrap_err();
    let e = errors.iter().find(|e| e.code == "component-manifest").expect("the image check");
    assert!(e.message.contains("uses image busybox:1.37, which component unlisted does not list"), "{}", e.message);
    // The digest still covers a manifest nobody used: changing it changes the digest.
    let before = k3d_gpu::component_files::from_dir(dir.path()).unwrap().digest();
    std::fs::write(dir.path().join("broken.yml"), "apiVersion: v1\nkind: [still unclosed\n").unwrap();
    assert_ne!(before, k3d_gpu::component_files::from_dir(dir.path()).unwrap().digest());
}
