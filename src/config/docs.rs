//! The config's JSON Schema and the Markdown reference generated from it (docs/config.md),
//! so the docs cannot drift from the types. Both are checked in and tested for staleness.

use serde_json::Value;

use super::Config;

/// Canonical bytes of the JSON Schema.
pub fn schema_bytes() -> Vec<u8> {
    let schema = schemars::schema_for!(Config);
    crate::canonical::to_bytes(&schema)
}

/// The config's sections, in the order the reference lists them.
pub const SECTIONS: &[&str] = &[
    "cluster",
    "vendors",
    "sharing",
    "placement",
    "experimental",
    "expect",
    "policy",
    "agent",
    "addons",
    "components",
    "claims",
];

/// docs/config.md.
pub fn markdown() -> String {
    let schema: Value = serde_json::from_slice(&schema_bytes()).expect("the schema is JSON");
    let defaults = serde_json::to_value(Config::default()).expect("the default config serialises");
    let defs = &schema["$defs"];
    let mut out = String::from(
        "# k3dgpu.toml reference\n\n\
         Generated from the config types by `k3d-gpu schema --markdown`; do not edit by hand\n\
         (`UPDATE_GOLDEN=1 cargo test --test schema` regenerates it).\n\n\
         Every key has a default that reproduces the reference launcher's behaviour, so an empty\n\
         file is a valid config. Unknown keys and wrong types are errors. The last column names\n\
         the reference launcher's environment variable each key replaces.\n\n\
         Editors: put `#:schema ./k3dgpu.schema.json` (or the file's URL) on the first line and\n\
         taplo / Even Better TOML complete and check the keys.\n",
    );
    for section in SECTIONS {
        let prop = &schema["properties"][section];
        out.push_str(&format!("\n## `[{section}]`\n\n"));
        if let Some(text) = description(prop, defs) {
            out.push_str(&format!("{}\n\n", text.replace('\n', " ")));
        }
        let Some(mut body) = resolve(prop, defs) else { continue };
        if body["type"] == "array" {
            // An array of tables ([[components]]): document the table's keys.
            body = resolve(&body["items"], defs).unwrap_or(body);
        }
        let Some(props) = body["properties"].as_object() else {
            continue;
        };
        out.push_str("| key | type | default | meaning | replaces |\n|---|---|---|---|---|\n");
        for (key, value) in props {
            let text = description(value, defs).unwrap_or_default().replace('\n', " ");
            let (meaning, env) = split_env(&text);
            // The schema's own default where it states one (array items), else the config's.
            let default = match value.get("default").unwrap_or(&defaults[section][key]) {
                Value::Null => "unset".to_string(),
                v => format!("`{}`", serde_json::to_string(v).unwrap_or_default()),
            };
            out.push_str(&format!("| `{key}` | {} | {default} | {meaning} | {env} |\n", type_of(value, defs)));
        }
    }
    out.push_str(OTHER_VARIABLES);
    out
}

/// Reference variables that are not config keys, and what replaces them.
const OTHER_VARIABLES: &str = "
## Reference variables that are not keys

| variable | here |
|---|---|
| `K3D_GPU_SHARE`, `K3D_GPU_PLUGIN`, `K3D_GPU_INTEL_PLUGIN`, `K3D_GPU_GAUDI_PLUGIN`, `K3D_GPU_NPU_PLUGIN`, `K3D_GPU_DSA_PLUGIN`, `K3D_GPU_IAA_PLUGIN`, `K3D_GPU_QAT_PLUGIN`, `K3D_GPU_HYBRID_PLUGIN`, `K3D_GPU_WSL_PLUGIN`, `K3D_GPU_INTEL_DRA` | the component catalog: `--stdlib DIR` replaces it, `[[components]]` adds to it (docs/stdlib.md) |
| `K3D_GPU_VENDORS` | `[vendors]`, or `--vendors` for detect/doctor/facts |
| `K3D_GPU_DRA` | `[sharing] mode = \"dra\"` |
| `K3D_GPU_EXPERIMENTAL` | `[experimental] features` |
| `K3D_GPU_AGENT_*` | `[agent]` and `[addons.*]` above, each key naming the variable it replaces; `k3d-gpu agent` shows the placement |
| `K3D_GPU_SANDBOX*`, `K3D_GPU_NPU_EMBEDDINGS` | no key yet: the sandbox and NPU embeddings components wait on pinned image digests (see docs/stdlib.md) |
| `K3D_GPU_TEST_IMAGE`, `K3D_GPU_DEVICE_TEST_IMAGE` | no key: `apply` verifies without a test pod, through the plan's `verify/…` nodes (allocatable resources, rollouts, ResourceSlices) |
";

fn resolve<'a>(value: &'a Value, defs: &'a Value) -> Option<&'a Value> {
    if let Some(r) = value["$ref"].as_str() {
        return defs.get(r.rsplit('/').next()?);
    }
    if let Some(all) = value["allOf"].as_array() {
        return all.first().and_then(|v| resolve(v, defs));
    }
    Some(value)
}

fn description(value: &Value, defs: &Value) -> Option<String> {
    value["description"]
        .as_str()
        .or_else(|| resolve(value, defs).and_then(|v| v["description"].as_str()))
        .map(str::to_string)
}

fn type_of(value: &Value, defs: &Value) -> String {
    let v = resolve(value, defs).unwrap_or(value);
    if let Some(options) = v["enum"].as_array() {
        return options
            .iter()
            .filter_map(Value::as_str)
            .map(|s| format!("`\"{s}\"`"))
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    if let Some(options) = v["oneOf"].as_array().or_else(|| v["anyOf"].as_array()) {
        return options.iter().map(|o| type_of(o, defs)).filter(|t| t != "null").collect::<Vec<_>>().join(" \\| ");
    }
    if let Some(c) = v["const"].as_str() {
        return format!("`\"{c}\"`");
    }
    match &v["type"] {
        Value::String(t) if t == "array" => format!("list of {}", type_of(&v["items"], defs)),
        Value::String(t) if t == "object" => "table".into(),
        Value::String(t) => t.clone(),
        Value::Array(ts) => {
            ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect::<Vec<_>>().join(" \\| ")
        }
        _ => "any".into(),
    }
}

/// `"… (K3D_GPU_X)"` → `("…", "`K3D_GPU_X`")`.
fn split_env(text: &str) -> (String, String) {
    if let Some(start) = text.rfind("(K3D_GPU_")
        && let Some(end) = text[start..].find(')')
    {
        let env = &text[start + 1..start + end];
        let meaning = format!("{}{}", &text[..start], &text[start + end + 1..]);
        return (meaning.trim().to_string(), format!("`{env}`"));
    }
    (text.to_string(), String::new())
}
