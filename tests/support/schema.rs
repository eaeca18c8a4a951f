//! The fake API server's field validation for the built-in kinds, from upstream's own
//! definitions: `tests/upstream/k8s-v1.37.0-strict-definitions.json` is the JSON Schema form of
//! Kubernetes v1.37.0's OpenAPI definitions in which every object forbids the properties it
//! does not define (PyPI `kubernetes-validate` 1.37.0, `kubernetes-json-schema/
//! v1.37.0-local-strict/_definitions.json`, each schema's description text left out). Each kind's schema is
//! found by the definitions' own `x-kubernetes-group-version-kind`, never by the product's
//! tables.
//!
//! Under `fieldValidation=Strict` the real server refuses an object with a field its schema
//! lacks or a value of the wrong type (400 BadRequest, "strict decoding error"); the fake
//! does the same. Custom resources are the CRD's to check and are not checked here.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

fn definitions() -> &'static Value {
    static DEFS: OnceLock<Value> = OnceLock::new();
    DEFS.get_or_init(|| {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream/k8s-v1.37.0-strict-definitions.json");
        serde_json::from_slice(&std::fs::read(path).expect("the definitions are in the repository")).unwrap()
    })
}

/// The definition id of `apiVersion`/`kind`, by the definitions' own group-version-kind.
fn definition_of(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    definitions()["$defs"].as_object()?.iter().find_map(|(id, d)| {
        d["x-kubernetes-group-version-kind"]
            .as_array()?
            .iter()
            .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
            .then(|| id.clone())
    })
}

/// Why `object` would be refused under strict field validation: each problem with the path
/// it is at. `None` when no built-in definition covers its kind.
pub fn strict_problems(object: &Value) -> Option<Vec<String>> {
    static VALIDATORS: OnceLock<Mutex<HashMap<String, Option<std::sync::Arc<jsonschema::Validator>>>>> =
        OnceLock::new();
    let api_version = object["apiVersion"].as_str()?;
    let kind = object["kind"].as_str()?;
    let key = format!("{api_version}/{kind}");
    let validator = {
        let mut cache = VALIDATORS.get_or_init(Default::default).lock().unwrap();
        cache
            .entry(key)
            .or_insert_with(|| {
                let id = definition_of(api_version, kind)?;
                let schema = json!({
                    "$schema": definitions()["$schema"],
                    "$ref": format!("#/$defs/{id}"),
                    "$defs": definitions()["$defs"],
                });
                Some(std::sync::Arc::new(jsonschema::validator_for(&schema).expect("upstream's definitions compile")))
            })
            .clone()?
    };
    Some(validator.iter_errors(object).map(|e| format!("{} at {}", e, e.instance_path())).collect())
}
