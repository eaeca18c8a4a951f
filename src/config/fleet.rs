//! The provider rules of `[cluster]` (DESIGN.md §9): which keys belong to which provider, and
//! the shape of `[[nodes]]`. Checked right after parsing, on the text, so each error
//! underlines the key the user wrote. Pure: whether a node's files exist (and stay inside the
//! config's directory once links are resolved) is the command edge's check.

use std::collections::BTreeSet;

use super::{Config, ConfigError, Provider, dns_subdomain, span_of, span_of_element};

/// `[cluster]` keys that only mean something to k3d: what it fixes when it creates the
/// cluster. An existing cluster was created by someone else.
pub const K3D_ONLY: &[&str] = &[
    "image",
    "build_context",
    "build_args",
    "servers",
    "agents",
    "k3s_args",
    "api_port",
    "api_host_ip",
    "accelerator_node",
    "ports",
    "volumes",
    "registries",
];

/// Sections compiled for one machine that have no per-node meaning yet; under `existing`
/// they are refused rather than silently applied to a node picked at random. (`[agent]` and
/// `[addons.*]` have one: `[agent] node`.)
const SINGLE_MACHINE: &[(&str, &str)] = &[
    ("expect", "give each node its own [nodes.expect]"),
    (
        "sandbox",
        "the sandbox template is sized to one machine's E-cores; it is not supported with provider \"existing\" yet",
    ),
];

/// The most nodes one config may list: a fleet, not a data centre's inventory.
pub const MAX_NODES: usize = 1000;

/// Why a node's `facts`/`root` path is refused before anything is read, or `None`.
pub fn path_problem(path: &str) -> Option<&'static str> {
    let p = std::path::Path::new(path);
    if path.is_empty() {
        Some("is empty")
    } else if p.is_absolute() {
        Some("must be relative to the config's directory")
    } else if p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        Some("may not climb out of the config's directory with `..`")
    } else if path.chars().any(char::is_control) {
        Some("holds a control character")
    } else {
        None
    }
}

/// Every provider error of a parsed config, in file order.
pub fn check(config: &Config, name: &str, text: &str) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let mut at = |path: &[&str], element: Option<usize>, message: String, help: &str| {
        let span = match element {
            Some(i) => span_of_element(text, path, i),
            None => span_of(text, path),
        };
        let label = if span.is_some() { path.join(".") } else { String::new() };
        errors.push(ConfigError::at(name, text, span, message, label, Some(help.to_string())));
    };
    match config.cluster.provider {
        Provider::K3d => {
            if config.cluster.context.is_some() {
                at(
                    &["cluster", "context"],
                    None,
                    "context names an existing cluster, but provider is k3d".into(),
                    "k3d's context is always k3d-<name>; set provider = \"existing\" to drive a cluster k3d-gpu does not create",
                );
            }
            if config.agent.as_ref().is_some_and(|a| a.node.is_some()) {
                at(
                    &["agent", "node"],
                    None,
                    "[agent] node names a node of an existing cluster, but provider is k3d".into(),
                    "k3d's accelerator node is [cluster] accelerator_node; remove node, or set provider = \"existing\"",
                );
            }
            if !config.nodes.is_empty() {
                at(
                    &["nodes"],
                    None,
                    "[[nodes]] lists the machines of an existing cluster, but provider is k3d".into(),
                    "a k3d cluster runs on this machine; set [cluster] provider = \"existing\" and context to use [[nodes]]",
                );
            }
        }
        Provider::Existing => {
            match config.cluster.context.as_deref() {
                None => at(
                    &["cluster"],
                    None,
                    "provider \"existing\" needs [cluster] context".into(),
                    "name the kubeconfig context of the cluster (`kubectl config get-contexts`); the current one is never used implicitly",
                ),
                Some(c) if c.trim().is_empty() || c.chars().any(char::is_control) || c.len() > 253 => at(
                    &["cluster", "context"],
                    None,
                    format!("context {} is not a kubeconfig context name", crate::escape::quoted(c)),
                    "name the context as `kubectl config get-contexts` lists it",
                ),
                Some(_) => {}
            }
            for key in K3D_ONLY {
                if key_present(text, &["cluster", key]) {
                    at(
                        &["cluster", key],
                        None,
                        format!("[cluster] {key} is k3d-only: an existing cluster was not created by k3d-gpu"),
                        "remove it, or set provider = \"k3d\"",
                    );
                }
            }
            for (section, help) in SINGLE_MACHINE {
                if key_present(text, &[section]) {
                    at(&[section], None, format!("[{section}] is not used with provider \"existing\""), help);
                }
            }
            if let Some(agent) = &config.agent {
                let names: Vec<&str> = config.nodes.iter().map(|n| n.name.as_str()).collect();
                // A long fleet is named in part: the help stays one readable line.
                let mut listed = names.iter().take(12).map(|n| crate::escape::quoted(n)).collect::<Vec<_>>().join(", ");
                if names.len() > 12 {
                    listed.push_str(&format!(" and {} more", names.len() - 12));
                }
                match agent.node.as_deref() {
                    None => at(
                        &["agent"],
                        None,
                        "[agent] needs node with provider \"existing\": the node that runs the agent and its add-ons"
                            .into(),
                        &format!("add node = \"<name>\", one of the [[nodes]]: {listed}"),
                    ),
                    Some(n) if !names.contains(&n) => at(
                        &["agent", "node"],
                        None,
                        format!("[agent] node {} is not one of the [[nodes]]", crate::escape::quoted(n)),
                        &format!("name one of: {listed}"),
                    ),
                    Some(_) => {}
                }
            }
            if config.nodes.is_empty() {
                at(
                    &["cluster", "provider"],
                    None,
                    "provider \"existing\" needs at least one [[nodes]]".into(),
                    "add [[nodes]] with name = \"<node>\" and facts = \"hosts/<node>.json\" for each machine",
                );
            }
            if config.nodes.len() > MAX_NODES {
                at(
                    &["nodes"],
                    None,
                    format!("more than {MAX_NODES} [[nodes]]"),
                    "split the fleet into configs with different [cluster] names: each leaves the others' nodes and objects alone",
                );
            }
            let mut seen = BTreeSet::new();
            for (i, node) in config.nodes.iter().enumerate() {
                let shown = crate::escape::quoted(&node.name);
                if !dns_subdomain(&node.name) {
                    at(
                        &["nodes"],
                        Some(i),
                        format!("node name {shown} is not a Kubernetes node name"),
                        "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', at most 253",
                    );
                } else if !seen.insert(node.name.as_str()) {
                    at(&["nodes"], Some(i), format!("node {shown} is listed twice"), "one [[nodes]] per machine");
                }
                match (&node.facts, &node.root) {
                    (Some(_), Some(_)) | (None, None) => at(
                        &["nodes"],
                        Some(i),
                        format!("node {shown}: give exactly one of facts and root"),
                        "facts = \"hosts/<node>.json\" (k3d-gpu facts --out) or root = \"hosts/<node>\" (k3d-gpu facts capture --out)",
                    ),
                    (Some(p), None) | (None, Some(p)) => {
                        if let Some(why) = path_problem(p) {
                            at(
                                &["nodes"],
                                Some(i),
                                format!("node {shown}: path {} {why}", crate::escape::quoted(p)),
                                "name a file or directory beside the config, e.g. hosts/<node>.json",
                            );
                        }
                    }
                }
            }
        }
    }
    errors
}

/// Whether the text sets the key at `path` itself (not just a table around it).
fn key_present(text: &str, path: &[&str]) -> bool {
    let Ok(table) = toml::from_str::<toml::Table>(text) else { return false };
    let mut value: Option<&toml::Value> = None;
    let mut current = &table;
    for (i, key) in path.iter().enumerate() {
        let Some(v) = current.get(*key) else { return false };
        if i + 1 == path.len() {
            value = Some(v);
        } else {
            match v.as_table() {
                Some(t) => current = t,
                None => return false,
            }
        }
    }
    value.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        let config: Config = toml::from_str(text).unwrap();
        check(&config, "k3dgpu.toml", text).into_iter().map(|e| e.message).collect()
    }

    const FLEET: &str = "[cluster]\nprovider = \"existing\"\ncontext = \"lab\"\n\n[[nodes]]\nname = \"arc-01\"\nfacts = \"hosts/arc-01.json\"\n";

    #[test]
    fn a_fleet_config_is_accepted() {
        assert_eq!(errors(FLEET), Vec::<String>::new());
        assert_eq!(errors(""), Vec::<String>::new(), "k3d stays the default");
    }

    #[test]
    fn k3d_only_keys_are_named() {
        let text = FLEET.replace("context = \"lab\"\n", "context = \"lab\"\nservers = 3\nimage = \"x:y\"\n");
        let e = errors(&text);
        assert!(e.iter().any(|m| m.contains("[cluster] servers is k3d-only")), "{e:?}");
        assert!(e.iter().any(|m| m.contains("[cluster] image is k3d-only")), "{e:?}");
    }

    #[test]
    fn existing_needs_a_context_and_nodes() {
        let e = errors("[cluster]\nprovider = \"existing\"\n");
        assert!(e.iter().any(|m| m.contains("needs [cluster] context")), "{e:?}");
        assert!(e.iter().any(|m| m.contains("at least one [[nodes]]")), "{e:?}");
    }

    #[test]
    fn nodes_and_context_under_k3d_are_errors() {
        let e = errors("[cluster]\ncontext = \"lab\"\n\n[[nodes]]\nname = \"a\"\nfacts = \"a.json\"\n");
        assert!(e.iter().any(|m| m.contains("context names an existing cluster")), "{e:?}");
        assert!(e.iter().any(|m| m.contains("[[nodes]] lists the machines")), "{e:?}");
    }

    #[test]
    fn node_names_and_paths() {
        let bad =
            FLEET.replace("arc-01\"\nfacts = \"hosts/arc-01.json\"", "Arc_01\"\nfacts = \"../x.json\"\nroot = \"r\"");
        let e = errors(&bad);
        assert!(e.iter().any(|m| m.contains("not a Kubernetes node name")), "{e:?}");
        assert!(e.iter().any(|m| m.contains("exactly one of facts and root")), "{e:?}");
        let climbing = FLEET.replace("hosts/arc-01.json", "hosts/../../etc/passwd");
        assert!(errors(&climbing).iter().any(|m| m.contains("`..`")));
        let absolute = FLEET.replace("hosts/arc-01.json", "/etc/passwd");
        assert!(errors(&absolute).iter().any(|m| m.contains("must be relative")));
        let twice = format!("{FLEET}\n[[nodes]]\nname = \"arc-01\"\nroot = \"hosts/arc\"\n");
        assert!(errors(&twice).iter().any(|m| m.contains("listed twice")));
    }

    #[test]
    fn single_machine_sections_are_refused() {
        let e = errors(&format!("{FLEET}\n[expect]\nvendors = [\"intel\"]\n"));
        assert!(e.iter().any(|m| m.contains("[expect] is not used")), "{e:?}");
        let e = errors(&format!("{FLEET}\n[sandbox]\n"));
        assert!(e.iter().any(|m| m.contains("[sandbox] is not used")), "{e:?}");
    }

    #[test]
    fn the_agent_names_one_of_the_nodes() {
        assert_eq!(errors(&format!("{FLEET}\n[agent]\nnode = \"arc-01\"\n")), Vec::<String>::new());
        let e = errors(&format!("{FLEET}\n[agent]\n"));
        assert!(e.iter().any(|m| m.contains("[agent] needs node")), "{e:?}");
        let config_text = format!("{FLEET}\n[agent]\nnode = \"gpu-09\"\n");
        let config: Config = toml::from_str(&config_text).unwrap();
        let errors = check(&config, "k3dgpu.toml", &config_text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].message.contains("\"gpu-09\" is not one of the [[nodes]]"), "{}", errors[0].message);
        assert!(
            errors[0].help.as_deref().is_some_and(|h| h.contains("\"arc-01\"")),
            "names the nodes: {:?}",
            errors[0].help
        );
    }

    #[test]
    fn the_agents_node_is_refused_under_k3d() {
        let e = errors("[agent]\nnode = \"gpu-01\"\n");
        assert!(e.iter().any(|m| m.contains("[agent] node names a node of an existing cluster")), "{e:?}");
        assert_eq!(errors("[agent]\n"), Vec::<String>::new());
    }
}
