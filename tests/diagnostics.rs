//! The exact text users see for the common mistakes: config keys, values and types, compile
//! rules, and component files. Rendered as the CLI does, without colour and without wrapping
//! (a wrapped line would break a hash or a command the user copies).

mod support;

use k3d_gpu::catalog::{Catalog, parse_component};
use k3d_gpu::config::load_str;
use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

fn render(diagnostic: &dyn Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(80)
        .with_wrap_lines(false)
        .render_report(&mut out, diagnostic)
        .unwrap();
    out.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

fn config_error(toml: &str) -> String {
    render(&*load_str("k3dgpu.toml", toml).unwrap_err())
}

/// The rendered error of component file `mine.kdl` (`kdl`), whose manifest reads `manifest`.
fn component_error(kdl: &str, manifest: &str) -> String {
    render(&*parse_component("mine.kdl", kdl, &|_| Ok(manifest.to_string())).unwrap_err())
}

#[test]
fn a_misspelt_key() {
    assert_eq!(
        config_error("[sharing]\nallocaton = \"packed\"\n"),
        r#"  × unknown key `allocaton`
   ╭─[k3dgpu.toml:2:1]
 1 │ [sharing]
 2 │ allocaton = "packed"
   · ────┬────
   ·     ╰── unknown key
   ╰────
  help: did you mean `allocation`? allowed: mode, shared, allocation, monitoring, gpus, allow_ids, deny_ids, nvidia"#
    );
}

#[test]
fn a_misspelt_section() {
    let text = config_error("[sharng]\nshared = 4\n");
    assert!(text.contains("× unknown key `sharng`"), "{text}");
    assert!(text.contains("did you mean `sharing`?"), "{text}");
}

#[test]
fn a_value_that_is_not_allowed() {
    assert_eq!(
        config_error("[placement]\nballoons = \"helm\"\n"),
        r#"  × unknown value `helm`
   ╭─[k3dgpu.toml:2:12]
 1 │ [placement]
 2 │ balloons = "helm"
   ·            ───┬──
   ·               ╰── unknown value
   ╰────
  help: allowed: k3s, external"#
    );
}

#[test]
fn a_wrong_type_and_a_bad_word() {
    // Words, not Rust types (`expected u32`), with the bounds the schema states.
    let text = config_error("[cluster]\nservers = \"one\"\n");
    assert!(
        text.contains("× wrong type: cluster.servers: found text \"one\", expected a whole number, at least 1"),
        "{text}"
    );
    let text = config_error("[cluster]\napi_port = 70000\n");
    assert!(text.contains("found integer 70000, expected a whole number from 0 to 65535"), "{text}");
    let text = config_error("[sharing]\nshared = \"lots\"\n");
    assert!(text.contains("expected \"auto\" or a number of pods per GPU, found \"lots\""), "{text}");
    let text = config_error("[vendors]\nenable = [\"nvida\"]\n");
    assert!(text.contains("unknown vendor \"nvida\" (did you mean \"nvidia\"?)"), "{text}");
    let text = config_error("[experimental]\nfeatures = [\"dra\", \"turbo\"]\n");
    assert!(text.contains("unknown experimental feature \"turbo\""), "{text}");
}

#[test]
fn a_component_file_with_an_unknown_node() {
    let kdl = "component mine {\n    summary \"x\"\n    upstream x version=v1\n    manifest m.yml\n    imge \"a\"\n}\n";
    let err = parse_component("stdlib/mine.kdl", kdl, &|_| Ok(String::new())).unwrap_err();
    assert_eq!(
        render(&*err),
        r#"  × unknown node `imge` in component mine
   ╭─[stdlib/mine.kdl:5:5]
 4 │     manifest m.yml
 5 │     imge "a"
   ·     ──┬─
   ·       ╰── unknown node
 6 │ }
   ╰────
  help: did you mean `image`?"#
    );
}

#[test]
fn component_images_need_a_tag_and_must_match_the_manifest() {
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: \"busybox:1.37\"}]\n";
    let kdl = "component mine {\n    summary \"x\"\n    upstream x version=v1\n    manifest m.yml\n    image \"busybox\"\n}\n";
    let text = component_error(kdl, manifest);
    assert!(text.contains("× image \"busybox\": the image has no tag"), "{text}");
    // A tag alone is enough (images.lock pins it); a digest must then match the manifest too.
    let pinned = format!("busybox:1.37@sha256:{}", "a".repeat(64));
    let kdl = format!(
        "component mine {{\n    summary \"x\"\n    upstream x version=v1\n    manifest m.yml\n    image \"{pinned}\"\n}}\n"
    );
    let text = component_error(&kdl, manifest);
    assert!(text.contains("m.yml uses image busybox:1.37, which component mine does not list"), "{text}");
}

#[test]
fn a_cycle_between_user_components() {
    let dir = tempfile::tempdir().unwrap();
    for (name, after) in [("a", "b"), ("b", "a")] {
        let kdl = format!(
            "component {name} {{\n    summary \"x\"\n    upstream x version=v1\n    manifest {name}.yml\n    after {after}\n}}\n"
        );
        std::fs::write(dir.path().join(format!("{name}.kdl")), kdl).unwrap();
        std::fs::write(
            dir.path().join(format!("{name}.yml")),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n"),
        )
        .unwrap();
    }
    let err = k3d_gpu::component_files::from_dir(dir.path()).unwrap_err();
    assert_eq!(err.message, "components depend on each other in a cycle: a → b → a");
}

#[test]
fn the_shipped_catalog_loads() {
    let catalog = Catalog::embedded().unwrap();
    for c in catalog.components.values() {
        // Its manifest was parsed at build time; decoding and the image check run here.
        let objects = c.objects.get().unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert!(!objects.is_empty(), "{} has no objects", c.name);
    }
}

#[test]
fn component_files_are_strict() {
    let base = "component mine {\n    summary \"x\"\n    upstream x version=v1\n    manifest m.yml\n";
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m, namespace: default}\n";
    let cases = [
        ("    upstream y version=v2\n", "`upstream` is given twice"),
        ("    provides resource=\"a/b\" label=\"c\"\n", "`provides` takes"),
        ("    when\n", "an empty `when` would always hold"),
        ("    replaces-baked \"\"\n", "is not a k3s manifest name"),
        ("    rollout DaemonSet \"/\"\n", "must be NAMESPACE/NAME"),
        ("    after other {\n        x\n    }\n", "`after` takes no children"),
        ("    upstream2 y version=v2\n", "unknown node `upstream2`"),
    ];
    for (extra, expected) in cases {
        let kdl = format!("{base}{extra}}}\n");
        let text = component_error(&kdl, manifest);
        assert!(text.contains(expected), "{extra:?}: {text}");
    }
    let version_typo = format!("{}}}\n", base.replace("version=v1", "vesion=v1"));
    let text = component_error(&version_typo, manifest);
    assert!(text.contains("`upstream` has no property `vesion`"), "{text}");
    let outside = base.replace("manifest m.yml", "manifest \"../../etc/passwd\"") + "}\n";
    let text = component_error(&outside, manifest);
    assert!(text.contains("must be a file name beside the component"), "{text}");
    let reserved = base.replace("component mine", "component kustomization") + "}\n";
    let text = component_error(&reserved, manifest);
    assert!(text.contains("is reserved"), "{text}");
    let slashed = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a/b, namespace: default}\n";
    let text = component_error(&format!("{base}}}\n"), slashed);
    assert!(text.contains("metadata.name \"a/b\" is not a valid name"), "{text}");
}

#[test]
fn a_claim_the_host_cannot_satisfy() {
    let toml = "[sharing]\nmode = \"dra\"\n\n[[claims]]\nname = \"tp\"\ncount = 2\ngpus = \"discrete\"\n";
    let config = load_str("k3dgpu.toml", toml).unwrap();
    let errors =
        k3d_gpu::compile::compile(&config, &support::facts_of("arc-b580-xe-rpl-igpu"), &Catalog::embedded().unwrap())
            .unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].message, "claim tp wants 2 GPU(s), and 1 on this host match its selectors");
    assert_eq!(
        errors[0].help.as_deref(),
        Some("this host's Intel GPUs: a780 Raptor Lake-S (integrated), e20b Arc Battlemage (BMG) (discrete)")
    );
}

#[test]
fn a_key_in_the_wrong_section_names_the_section_it_belongs_to() {
    let text = config_error("[cluster]\nshared = 4\n");
    assert!(text.contains("help: `shared` belongs in [sharing], not [cluster]; move it there."), "{text}");
}

#[test]
fn every_config_error_is_reported_in_file_order() {
    let errors = k3d_gpu::config::load_all(
        "k3dgpu.toml",
        "[sharing]\nallocaton = \"packed\"\nshared = \"lots\"\n\n[cluster]\nservers = \"one\"\nagents = -1\n",
    )
    .unwrap_err();
    let headlines: Vec<String> = errors.iter().map(|e| e.message.clone()).collect();
    assert_eq!(headlines.len(), 4, "{headlines:#?}");
    assert_eq!(headlines[0], "unknown key `allocaton`");
    assert!(headlines[1].contains("found \"lots\""), "{headlines:#?}");
    assert!(headlines[2].starts_with("wrong type: cluster.servers"), "{headlines:#?}");
    assert!(headlines[3].starts_with("invalid value: cluster.agents: found integer -1"), "{headlines:#?}");
}

#[test]
fn the_bad_element_is_underlined_not_the_list() {
    let text = config_error("[sharing]\ndeny_ids = [\"e20b\", 5]\n");
    assert!(text.contains("found integer 5, expected text in quotes"), "{text}");
    assert!(text.contains("   ·                     ┬\n"), "the span is the element 5:\n{text}");
}

#[test]
fn an_array_of_tables_written_as_one_table_says_how_to_write_it() {
    let text = config_error("[components]\npath = \"mine.kdl\"\n");
    assert!(text.contains("found a table, expected a list"), "{text}");
    assert!(text.contains("write `[[components]]` (double brackets) once per entry"), "{text}");
}

#[test]
fn one_spelling_per_value_with_the_other_pointed_at() {
    let text = config_error("[agent]\ndevice = \"gaudi\"\n");
    assert!(text.contains("unknown value `gaudi`"), "{text}");
    assert!(text.contains("did you mean `hpu`?"), "{text}");
    // And the other way: a vendor list takes the vendor, not the agent's device name.
    let text = config_error("[vendors]\nenable = [\"hpu\"]\n");
    assert!(text.contains("unknown vendor \"hpu\" (did you mean \"gaudi\"?)"), "{text}");
}
