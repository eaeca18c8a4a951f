//! The reference launcher's environment variables, and what stands for each here.
//!
//! k3d-gpu is configured by `k3dgpu.toml`, not by the launcher's variables, so a variable
//! left set from the launcher would otherwise be ignored without a word. One table answers
//! both questions: docs/config.md prints it, and the CLI names the replacement of each
//! variable that is set. The rows for config keys come from the keys' own docs
//! (`(K3D_GPU_X)` in a doc comment), so a key added later joins the table by saying so.

use serde_json::Value;

/// Variables k3d-gpu reads itself (options' `env`), which are therefore never "ignored".
pub const READ_BY_K3D_GPU: &[&str] =
    &["K3D_GPU_CONFIG", "K3D_GPU_ROOT", "K3D_GPU_STDLIB", "K3D_GPU_VENDORS", "K3D_GPU_K3D", "K3D_GPU_SETUP_DIR"];

/// Reference variables that no config key replaces. A name ending in `*` is a prefix.
const NOT_KEYS: &[(&[&str], &str)] = &[
    (
        &[
            "K3D_GPU_SHARE",
            "K3D_GPU_PLUGIN",
            "K3D_GPU_INTEL_PLUGIN",
            "K3D_GPU_GAUDI_PLUGIN",
            "K3D_GPU_NPU_PLUGIN",
            "K3D_GPU_DSA_PLUGIN",
            "K3D_GPU_IAA_PLUGIN",
            "K3D_GPU_QAT_PLUGIN",
            "K3D_GPU_HYBRID_PLUGIN",
            "K3D_GPU_WSL_PLUGIN",
            "K3D_GPU_INTEL_DRA",
        ],
        "the component catalog: `--stdlib DIR` replaces it, `[[components]]` adds to it (docs/stdlib.md)",
    ),
    (
        &["K3D_GPU_AGENT_VLM_MAX_PROMPT_LEN", "K3D_GPU_AGENT_VLM_MEDIA_DOMAINS"],
        "no key yet: the vlm add-on is deployed with the reference's defaults for these (a 4096-token \
         prompt on the NPU, base64 images only)",
    ),
    (
        &["K3D_GPU_SANDBOX*"],
        "`[sandbox]`: the agent-sandbox controller, its CRDs and the E-core template with a warm pool of \
         `warm_pool` (docs/agent.md); the profile is compiled, not a file",
    ),
    (
        &["K3D_GPU_NPU_EMBEDDINGS"],
        "`[addons.embeddings]`: OVMS embeddings on the NPU, deployed by the plan (docs/agent.md)",
    ),
    (
        &["K3D_GPU_TEST_IMAGE", "K3D_GPU_DEVICE_TEST_IMAGE"],
        "no key: `k3d-gpu test` runs the smoke pods, one per accelerator resource a node advertises; \
         `test --nvidia-image IMAGE` and `test --device-image IMAGE` replace their images (`apply --test` runs \
         it after an apply)",
    ),
    (
        &["K3D_GPU_BIN", "K3D_GPU_MCP_TIMEOUT"],
        "no key: `k3d-gpu mcp` is the MCP server itself, with no launcher to find; its per-call deadline is \
         `k3d-gpu mcp --timeout SECONDS` (docs/mcp.md)",
    ),
    (
        &["K3D_GPU_SETUP_DIR"],
        "no key: `k3d-gpu host-setup --download-dir` reads it (where release downloads go); host-setup changes the \
         host only with `--apply` and a typed confirmation",
    ),
    (&["K3D_GPU_AGENT_*"], "`[agent]` and `[addons.*]`: each key names the variable it replaces"),
];

/// One row of the table: the variables and what replaces them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub variables: Vec<String>,
    pub here: String,
}

/// Every reference variable with its replacement: config keys first (in the reference's
/// section order), then the variables no key replaces.
pub fn table() -> Vec<Row> {
    let mut rows = key_rows();
    rows.extend(
        NOT_KEYS.iter().map(|(names, here)| Row {
            variables: names.iter().map(|n| n.to_string()).collect(),
            here: here.to_string(),
        }),
    );
    rows
}

/// What replaces `name`, when it is a reference variable k3d-gpu does not read. Exact names
/// win over `*` prefixes.
pub fn replacement(name: &str) -> Option<String> {
    if READ_BY_K3D_GPU.contains(&name) {
        return None;
    }
    let rows = table();
    let exact = rows.iter().find(|r| r.variables.iter().any(|v| v == name));
    let prefix =
        || rows.iter().find(|r| r.variables.iter().any(|v| v.strip_suffix('*').is_some_and(|p| name.starts_with(p))));
    exact.or_else(prefix).map(|r| r.here.clone())
}

/// The rows the config's own docs give: a key (or a section) whose description ends in
/// `(K3D_GPU_X)`. `<NAME>` in a variable stands for each name of a table of tables.
fn key_rows() -> Vec<Row> {
    let schema: Value = serde_json::from_slice(&super::docs::schema_bytes()).unwrap_or_default();
    let defs = &schema["$defs"];
    let mut rows = Vec::new();
    for section in super::docs::SECTIONS {
        let prop = &schema["properties"][section];
        let shape = super::docs::Shape::of(prop, defs);
        if let Some(text) = super::docs::description(prop, defs)
            && let (_, Some(vars)) = env_of(&text)
        {
            rows.push(Row { variables: vars, here: format!("`{}`", shape.heading(section)) });
        }
        let Some(props) = shape.body(prop, defs).and_then(|b| b["properties"].as_object()) else { continue };
        for (key, value) in props {
            let Some(text) = super::docs::description(value, defs) else { continue };
            let (_, Some(vars)) = env_of(&text) else { continue };
            let variables = match shape {
                super::docs::Shape::Map if vars.iter().any(|v| v.contains("<NAME>")) => vars
                    .iter()
                    .flat_map(|v| {
                        super::docs::map_names(section)
                            .iter()
                            .map(move |n| v.replace("<NAME>", &n.to_ascii_uppercase()))
                    })
                    .collect(),
                _ => vars,
            };
            rows.push(Row { variables, here: format!("`{}` `{key}`", shape.heading(section)) });
        }
    }
    rows
}

/// `"… (K3D_GPU_X, K3D_GPU_Y)"` → `("…", Some([K3D_GPU_X, K3D_GPU_Y]))`.
pub(super) fn env_of(text: &str) -> (String, Option<Vec<String>>) {
    if let Some(start) = text.rfind("(K3D_GPU_")
        && let Some(end) = text[start..].find(')')
    {
        let vars = text[start + 1..start + end].split(',').map(|v| v.trim().to_string()).collect();
        let rest = format!("{}{}", &text[..start], &text[start + end + 1..]);
        return (rest.trim().to_string(), Some(vars));
    }
    (text.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_variable_has_a_replacement() {
        assert_eq!(replacement("K3D_GPU_CLUSTER").as_deref(), Some("`[cluster]` `name`"));
        assert_eq!(replacement("K3D_GPU_INTEL_SHARED").as_deref(), Some("`[sharing]` `shared`"));
        assert_eq!(replacement("K3D_GPU_EXPERIMENTAL").as_deref(), Some("`[experimental]`"));
        assert_eq!(replacement("K3D_GPU_AGENT_STT_DEVICE").as_deref(), Some("`[addons.<name>]` `device`"));
        assert_eq!(replacement("K3D_GPU_AGENT_MODEL").as_deref(), Some("`[agent]` `model`"));
        assert!(replacement("K3D_GPU_AGENT_VLM_MEDIA_DOMAINS").unwrap().starts_with("no key yet"));
        // The agent's settings that were "no key yet" before issue 27.
        for (var, key) in [
            ("K3D_GPU_AGENT_MODEL_NAME", "model_name"),
            ("K3D_GPU_AGENT_REVISION", "revision"),
            ("K3D_GPU_AGENT_GPUS", "gpus"),
            ("K3D_GPU_AGENT_MAX_LEN", "max_len"),
            ("K3D_GPU_AGENT_TOOL_PARSER", "tool_parser"),
            ("K3D_GPU_AGENT_REASONING_PARSER", "reasoning_parser"),
            ("K3D_GPU_AGENT_IMAGE", "image"),
            ("K3D_GPU_AGENT_LOG_LEVEL", "log_level"),
            ("K3D_GPU_AGENT_STORAGE", "storage"),
            ("K3D_GPU_AGENT_TIMEOUT", "timeout"),
        ] {
            assert_eq!(replacement(var), Some(format!("`[agent]` `{key}`")), "{var}");
        }
        assert!(replacement("K3D_GPU_SANDBOX_PROFILE").unwrap().starts_with("`[sandbox]`"));
        assert!(replacement("K3D_GPU_AGENT_SOMETHING_NEW").unwrap().starts_with("`[agent]` and"));
        // Ours, or not the reference's: nothing to say.
        assert_eq!(replacement("K3D_GPU_ROOT"), None);
        assert_eq!(replacement("K3D_GPU_VENDORS"), None);
        assert_eq!(replacement("K3D_GPU_TEST_DOCKER"), None);
        assert_eq!(replacement("PATH"), None);
    }

    #[test]
    fn every_variable_the_reference_readme_names_is_in_the_table() {
        // The reference launcher's variables (its README), less those k3d-gpu reads itself.
        let reference = [
            "K3D_GPU_AGENT_BACKEND",
            "K3D_GPU_AGENT_CPUS",
            "K3D_GPU_AGENT_DEVICE",
            "K3D_GPU_AGENT_GPUS",
            "K3D_GPU_AGENT_IMAGE",
            "K3D_GPU_AGENT_LOG_LEVEL",
            "K3D_GPU_AGENT_MAX_LEN",
            "K3D_GPU_AGENT_MEMORY",
            "K3D_GPU_AGENT_MODEL",
            "K3D_GPU_AGENT_MODEL_NAME",
            "K3D_GPU_AGENT_REVISION",
            "K3D_GPU_AGENT_STORAGE",
            "K3D_GPU_AGENT_TIMEOUT",
            "K3D_GPU_AGENT_TOOL_PARSER",
            "K3D_GPU_AGENT_VIDEO_SOURCE",
            "K3D_GPU_AGENT_VLM_DEVICE",
            "K3D_GPU_AGENT_VLM_MAX_PROMPT_LEN",
            "K3D_GPU_AGENT_VLM_MEDIA_DOMAINS",
            "K3D_GPU_BALLOONS",
            "K3D_GPU_BIN",
            "K3D_GPU_CLUSTER",
            "K3D_GPU_DEVICE_TEST_IMAGE",
            "K3D_GPU_DRA",
            "K3D_GPU_DSA_PLUGIN",
            "K3D_GPU_EXPERIMENTAL",
            "K3D_GPU_GAUDI_PLUGIN",
            "K3D_GPU_HYBRID_PLUGIN",
            "K3D_GPU_IMAGE",
            "K3D_GPU_INTEL_ALLOCATION",
            "K3D_GPU_INTEL_DRA",
            "K3D_GPU_INTEL_MONITORING",
            "K3D_GPU_INTEL_PLUGIN",
            "K3D_GPU_INTEL_SHARED",
            "K3D_GPU_K3S_ARGS",
            "K3D_GPU_MCP_TIMEOUT",
            "K3D_GPU_NODE_LABELS",
            "K3D_GPU_NPU_EMBEDDINGS",
            "K3D_GPU_NPU_PLUGIN",
            "K3D_GPU_PLUGIN",
            "K3D_GPU_SANDBOX",
            "K3D_GPU_SANDBOX_PROFILE",
            "K3D_GPU_SANDBOX_TIMEOUT",
            "K3D_GPU_SETUP_DIR",
            "K3D_GPU_SHARE",
            "K3D_GPU_TEST_IMAGE",
            "K3D_GPU_WSL_PLUGIN",
        ];
        let listed: Vec<String> = table().into_iter().flat_map(|r| r.variables).collect();
        for name in reference {
            assert!(
                listed.iter().any(|v| v == name || v.strip_suffix('*').is_some_and(|p| name.starts_with(p))),
                "{name} is not in the table"
            );
            // A variable k3d-gpu reads itself (K3D_GPU_SETUP_DIR, by host-setup) gets no note.
            assert!(replacement(name).is_some() || READ_BY_K3D_GPU.contains(&name), "{name}");
        }
    }
}
