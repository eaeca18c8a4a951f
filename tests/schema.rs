//! The committed JSON Schema (k3dgpu.schema.json) and config reference (docs/config.md) are
//! what the code generates. Regenerate with `UPDATE_GOLDEN=1 cargo test --test schema`.

mod support;

#[test]
fn committed_schema_and_config_reference_are_current() {
    let mut stale = Vec::new();
    if let Err(e) = support::check_golden("k3dgpu.schema.json", &k3d_gpu::config::docs::schema_bytes()) {
        stale.push(e);
    }
    if let Err(e) = support::check_golden("docs/config.md", k3d_gpu::config::docs::markdown().as_bytes()) {
        stale.push(e);
    }
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}

#[test]
fn the_schema_knows_every_section_and_rejects_unknown_keys() {
    let schema: serde_json::Value = serde_json::from_slice(&k3d_gpu::config::docs::schema_bytes()).unwrap();
    // Every top-level key is a documented section and every documented section a key: a new
    // Config field left out of the reference fails here.
    let keys: std::collections::BTreeSet<&str> =
        schema["properties"].as_object().expect("top-level properties").keys().map(String::as_str).collect();
    let documented: std::collections::BTreeSet<&str> = k3d_gpu::config::docs::SECTIONS.iter().copied().collect();
    assert_eq!(keys, documented, "the schema's sections vs docs::SECTIONS");
    assert_eq!(documented.len(), k3d_gpu::config::docs::SECTIONS.len(), "a section documented twice");
    for section in &keys {
        assert!(schema["properties"][section].is_object(), "{section} is not a schema");
    }
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["$defs"]["Sharing"]["additionalProperties"], false);
}
