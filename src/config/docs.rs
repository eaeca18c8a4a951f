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
    "telemetry",
    "sandbox",
    "components",
    "claims",
    "nodes",
];

/// How a section is written in TOML, read from its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `[section]`, always there (defaults when absent).
    Table,
    /// `[section]`, absent unless written: writing it (even empty) turns it on.
    Optional,
    /// `[section.<name>]`: a table of tables.
    Map,
    /// `[[section]]`: an array of tables, one `[[section]]` per entry.
    Array,
}

impl Shape {
    pub fn of(prop: &Value, defs: &Value) -> Shape {
        if prop["anyOf"].as_array().is_some_and(|o| o.iter().any(|v| v["type"] == "null")) {
            return Shape::Optional;
        }
        let body = resolve(prop, defs).unwrap_or(prop);
        if body["type"] == "array" {
            Shape::Array
        } else if body["additionalProperties"].is_object() && body.get("properties").is_none() {
            Shape::Map
        } else {
            Shape::Table
        }
    }

    /// How the section's header is written.
    pub fn heading(self, section: &str) -> String {
        match self {
            Shape::Table | Shape::Optional => format!("[{section}]"),
            Shape::Map => format!("[{section}.<name>]"),
            Shape::Array => format!("[[{section}]]"),
        }
    }

    /// The schema of one table of the section (an entry, for arrays and maps).
    pub fn body<'a>(self, prop: &'a Value, defs: &'a Value) -> Option<&'a Value> {
        match self {
            Shape::Table => resolve(prop, defs),
            Shape::Optional => {
                prop["anyOf"].as_array()?.iter().find(|v| v["type"] != "null").and_then(|v| resolve(v, defs))
            }
            Shape::Map => resolve(&prop["additionalProperties"], defs),
            Shape::Array => resolve(&prop["items"], defs),
        }
    }

    fn note(self, section: &str) -> String {
        match self {
            Shape::Table => String::new(),
            Shape::Optional => format!(
                "Absent by default. Writing `[{section}]`, even with no keys, turns it on with the defaults below.\n\n"
            ),
            Shape::Map => format!(
                "A table of tables: one `[{section}.<name>]` per entry, where `<name>` is one of {}.\n\n",
                map_names(section).iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ),
            Shape::Array => format!(
                "An array of tables: write `[[{section}]]` (double brackets) once per entry. A single \
                 `[{section}]` table is an error.\n\n"
            ),
        }
    }
}

/// The names a table of tables takes (`[addons.<name>]`).
pub fn map_names(section: &str) -> &'static [&'static str] {
    match section {
        "addons" => &["vlm", "stt", "video", "embeddings"],
        _ => &[],
    }
}

/// A short example per section, shown in docs/config.md. A test parses every one, so an
/// example cannot drift from the types; a section without one gets one built from its
/// defaults.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "cluster",
        "[cluster]\nname = \"lab\"\nagents = 1\nk3s_args = [\"--disable=traefik\"]\nnode_labels = { \"ei-infra-eligible\" = \"true\" }\n",
    ),
    ("vendors", "[vendors]\nenable = [\"intel\", \"npu\"]\nexclude = [\"wsl\"]\n"),
    (
        "sharing",
        "[sharing]\nshared = 4\nallocation = \"packed\"\nmonitoring = true\ndeny_ids = [\"a780\"]\n\n[sharing.nvidia]\nreplicas = 4\n\n# Or, on a host with Intel and NVIDIA GPUs, each on its own path:\n# [sharing]\n# mode = { intel = \"dra\", nvidia = \"plugin\" }   # Intel GPUs to [[claims]], NVIDIA to the plugin\n# mode = { intel = \"plugin\", nvidia = \"dra\" }   # the other way round (data-center NVIDIA GPUs)\n",
    ),
    ("placement", "[placement]\nballoons = \"external\"\n"),
    ("experimental", "[experimental]\nfeatures = [\"dra\"]\n"),
    ("expect", "[expect]\nvendors = [\"intel\"]\ndevices = { \"gpu.intel.com/i915\" = 1 }\n"),
    ("agent", "[agent]\nbackend = \"ovms\"\ndevice = \"gpu\"\ncpus = 4\nmemory = \"6Gi\"\n"),
    ("addons", "[addons.stt]\ndevice = \"npu\"\n\n[addons.video]\nsource = \"rtsp://camera.lan:8554/stream\"\n"),
    ("telemetry", "[telemetry]\nnvidia = false   # xpumd only\n"),
    ("sandbox", "[sandbox]\nwarm_pool = 2\n"),
    ("components", "[[components]]\npath = \"components/my-exporter.kdl\"\n"),
    (
        "claims",
        "[[claims]]\nname = \"arc-12g\"\nmodel = \"Battlemage\"\nmin_memory = \"12Gi\"\n\n[[claims]]\nname = \"two-gpus\"\ncount = 2\n\n# With Intel and NVIDIA GPUs both on DRA, each claim names its vendor:\n[[claims]]\nname = \"h100\"\nvendor = \"nvidia\"\nmodel = \"H100\"\nmin_memory = \"40Gi\"\n",
    ),
    (
        "nodes",
        "[cluster]\nprovider = \"existing\"\ncontext = \"homelab\"\n\n[[nodes]]\nname = \"arc-01\"\nfacts = \"hosts/arc-01.json\"\ntaints = [\"k3d-gpu.io/gpu-only=true:NoSchedule\"]   # GPU work only\n\n[[nodes]]\nname = \"xeon-01\"\nroot = \"hosts/xeon-01\"\n[nodes.expect]\nvendors = [\"qat\"]\n",
    ),
];

/// The example for `section`: the hand-written one, else the section's keys at their defaults.
fn example(section: &str, shape: Shape, body: &Value, defaults: &Value) -> String {
    if let Some((_, text)) = EXAMPLES.iter().find(|(s, _)| *s == section) {
        return text.to_string();
    }
    let mut out = format!("{}\n", shape.heading(section));
    for (key, value) in body["properties"].as_object().into_iter().flatten() {
        let default = value.get("default").unwrap_or(&defaults[section][key]);
        if let Ok(text) = toml::to_string(&serde_json::json!({ key: default })) {
            out.push_str(&text);
        }
    }
    out
}

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
         the reference launcher's environment variable each key replaces; k3d-gpu reads none of\n\
         them, and says which key to use when one is set.\n\n\
         Editors: put `#:schema ./k3dgpu.schema.json` (or the file's URL) on the first line and\n\
         taplo / Even Better TOML complete and check the keys.\n",
    );
    for section in SECTIONS {
        let prop = &schema["properties"][section];
        let shape = Shape::of(prop, defs);
        out.push_str(&format!("\n## `{}`\n\n", shape.heading(section)));
        if let Some(text) = description(prop, defs) {
            out.push_str(&format!("{}\n\n", super::env::env_of(&text.replace('\n', " ")).0));
        }
        out.push_str(&shape.note(section));
        let Some(body) = shape.body(prop, defs) else { continue };
        keys_table(&mut out, body, defs, &defaults[section]);
        out.push_str(&format!("\nExample:\n\n```toml\n{}```\n", example(section, shape, body, &defaults)));
        nested_tables(&mut out, section, body, defs);
    }
    out.push_str(
        "\n## The reference launcher's environment variables\n\n\
         k3d-gpu reads its configuration from `k3dgpu.toml` only. When one of these variables is\n\
         set, every command prints a note naming what replaces it.\n\n\
         | variable | here |\n|---|---|\n",
    );
    for row in super::env::table() {
        let names = row.variables.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
        let mut here = row.here;
        if row.variables.iter().any(|v| v == "K3D_GPU_VENDORS") {
            here.push_str("; k3d-gpu also reads `K3D_GPU_VENDORS` itself, as `--vendors`");
        }
        out.push_str(&format!("| {names} | {here} |\n"));
    }
    out
}

/// Each key of `body` that is itself a table (`[sharing.nvidia]`, `[cluster.registries.create]`)
/// gets its own table of keys, and so on down.
fn nested_tables(out: &mut String, section: &str, body: &Value, defs: &Value) {
    for (key, value) in body["properties"].as_object().into_iter().flatten() {
        let nested = Shape::of(value, defs);
        if !matches!(nested, Shape::Table | Shape::Optional) {
            continue;
        }
        let Some(inner) = nested.body(value, defs).filter(|b| b["properties"].is_object()) else { continue };
        let name = format!("{section}.{key}");
        out.push_str(&format!("\n### `{}`\n\n", nested.heading(&name)));
        if let Some(text) = description(inner, defs) {
            out.push_str(&format!("{}\n\n", text.replace('\n', " ")));
        }
        if nested == Shape::Optional {
            let required = inner["required"].as_array().is_some_and(|r| !r.is_empty());
            out.push_str(&if required {
                format!("Absent by default. Writing `[{name}]` turns it on; the keys marked required must be set.\n\n")
            } else {
                nested.note(&name)
            });
        }
        keys_table(out, inner, defs, &Value::Null);
        nested_tables(out, &name, inner, defs);
    }
}

/// The table of a section's keys: type, default, meaning, the variable it replaces.
fn keys_table(out: &mut String, body: &Value, defs: &Value, defaults: &Value) {
    let Some(props) = body["properties"].as_object() else { return };
    out.push_str("| key | type | default | meaning | replaces |\n|---|---|---|---|---|\n");
    for (key, value) in props {
        let text = description(value, defs).unwrap_or_default().replace('\n', " ");
        let (meaning, env) = super::env::env_of(&text);
        let env = env.unwrap_or_default().iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
        // The schema's own default where it states one (entries of arrays, maps and
        // optional tables), else the config's.
        let default = match value.get("default").unwrap_or(&defaults[key]) {
            Value::Null => "unset".to_string(),
            v => format!("`{}`", serde_json::to_string(v).unwrap_or_default()),
        };
        let required = body["required"].as_array().is_some_and(|r| r.iter().any(|k| k == key));
        let default = if required { "required".to_string() } else { default };
        out.push_str(&format!("| `{key}` | {} | {default} | {meaning} | {env} |\n", type_of(value, defs)));
    }
}

pub(super) fn resolve<'a>(value: &'a Value, defs: &'a Value) -> Option<&'a Value> {
    if let Some(r) = value["$ref"].as_str() {
        return defs.get(r.rsplit('/').next()?);
    }
    if let Some(all) = value["allOf"].as_array() {
        return all.first().and_then(|v| resolve(v, defs));
    }
    Some(value)
}

pub(super) fn description(value: &Value, defs: &Value) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_is_a_valid_config() {
        for (section, text) in EXAMPLES {
            assert!(SECTIONS.contains(section), "{section}");
            if let Err(e) = super::super::load_str("example", text) {
                panic!("the [{section}] example does not load: {e:?}");
            }
        }
    }
}
