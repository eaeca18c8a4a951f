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
const SINGLE_MACHINE: &[(&str, &str)] = &[("expect", "give each node its own [nodes.expect]")];

/// A taint's effect, as Kubernetes takes it (core/v1 `TaintEffect`).
pub const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The most taints one node may list: a handful is what a node carries.
pub const MAX_TAINTS: usize = 16;

/// One `[[nodes]] taints` entry, read from `kubectl taint`'s `key[=value]:effect`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Taint {
    pub key: String,
    /// Empty when the entry has none (`key:effect`).
    pub value: String,
    pub effect: String,
}

impl Taint {
    /// The toleration that lets a pod onto a node with this taint: `Equal` on key and value,
    /// the same effect (core/v1 `Toleration`).
    pub fn toleration(&self) -> serde_json::Value {
        serde_json::json!({ "key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect })
    }
}

/// Why an entry is not a taint; the text follows the entry ("taint \"x\" has no `:effect`").
/// What the user wrote is quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotATaint {
    #[error("has no `:effect`")]
    NoEffect,
    #[error("effect {} is not one of {}", crate::escape::quoted(.0), EFFECTS.join(", "))]
    Effect(String),
    #[error("key {} {why}", crate::escape::quoted(key))]
    Key { key: String, why: &'static str },
    #[error(
        "value {} is not a label value (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)",
        crate::escape::quoted(.0)
    )]
    Value(String),
}

/// Reads `key[=value]:effect` by Kubernetes' rules (kubernetes/kubernetes,
/// pkg/apis/core/validation/validation.go `validateNodeTaints`: the key a qualified name, the
/// value a label value, the effect one of [`EFFECTS`]), or why it is not a taint.
pub fn parse_taint(text: &str) -> Result<Taint, NotATaint> {
    let Some((rest, effect)) = text.rsplit_once(':') else {
        return Err(NotATaint::NoEffect);
    };
    if !EFFECTS.contains(&effect) {
        return Err(NotATaint::Effect(effect.into()));
    }
    let (key, value) = rest.split_once('=').unwrap_or((rest, ""));
    if let Some(why) = qualified_name_problem(key) {
        return Err(NotATaint::Key { key: key.into(), why });
    }
    if !value.is_empty() && !label_value(value) {
        return Err(NotATaint::Value(value.into()));
    }
    Ok(Taint { key: key.into(), value: value.into(), effect: effect.into() })
}

/// A label value's rule (apimachinery's `IsValidLabelValue`), non-empty here: at most 63
/// characters, alphanumerics, '-', '_' and '.', beginning and ending alphanumeric.
pub(crate) fn label_value(value: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    value.len() <= 63
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && alnum(value.chars().next())
        && alnum(value.chars().last())
}

/// apimachinery's `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name
/// with a label value's rule, non-empty.
pub(crate) fn qualified_name_problem(key: &str) -> Option<&'static str> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if prefix.is_some_and(|p| p.is_empty() || !dns_subdomain(p)) {
        return Some("has a prefix that is not a DNS subdomain");
    }
    if name.is_empty() || !label_value(name) {
        return Some(
            "is not a qualified name (an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, \
             '-', '_', '.', starting and ending alphanumeric)",
        );
    }
    None
}

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
    let mut errors = Errors { name, text, found: Vec::new() };
    match config.cluster.provider {
        Provider::K3d => k3d_only(config, &mut errors),
        Provider::Existing => {
            existing(config, &mut errors);
            nodes(config, &mut errors);
        }
    }
    errors.found
}

/// The errors found so far, each pointing at its key (or list element) in the text.
struct Errors<'a> {
    name: &'a str,
    text: &'a str,
    found: Vec<ConfigError>,
}

impl Errors<'_> {
    fn at(&mut self, path: &[&str], element: Option<usize>, message: String, help: &str) {
        let span = match element {
            Some(i) => span_of_element(self.text, path, i),
            None => span_of(self.text, path),
        };
        let label = if span.is_some() { path.join(".") } else { String::new() };
        self.found.push(ConfigError::at(self.name, self.text, span, message, label, Some(help.to_string())));
    }
}

/// What a k3d cluster's config may not say: the keys of an existing cluster.
fn k3d_only(config: &Config, e: &mut Errors<'_>) {
    let mut at =
        |path: &[&str], element: Option<usize>, message: String, help: &str| e.at(path, element, message, help);
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
    if config.sandbox.as_ref().is_some_and(|s| s.node.is_some()) {
        at(
            &["sandbox", "node"],
            None,
            "[sandbox] node names a node of an existing cluster, but provider is k3d".into(),
            "a k3d cluster's sandboxes run on its own node; remove node, or set provider = \"existing\"",
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

/// An existing cluster's context, the k3d-only keys it may not have, and where its agent and
/// sandboxes run.
fn existing(config: &Config, e: &mut Errors<'_>) {
    let text = e.text;
    let mut at =
        |path: &[&str], element: Option<usize>, message: String, help: &str| e.at(path, element, message, help);
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
    let names: Vec<&str> = config.nodes.iter().map(|n| n.name.as_str()).collect();
    // A long fleet is named in part: the help stays one readable line.
    let mut listed = names.iter().take(12).map(|n| crate::escape::quoted(n)).collect::<Vec<_>>().join(", ");
    if names.len() > 12 {
        listed.push_str(&format!(" and {} more", names.len() - 12));
    }
    // (section, its node, what runs there)
    let placed = [
        ("agent", config.agent.as_ref().map(|a| a.node.as_deref()), "the agent and its add-ons"),
        ("sandbox", config.sandbox.as_ref().map(|s| s.node.as_deref()), "the sandboxes"),
    ];
    for (section, node, what) in placed {
        match node {
            None => {}
            Some(None) => at(
                &[section],
                None,
                format!("[{section}] needs node with provider \"existing\": the node that runs {what}"),
                &format!("add node = \"<name>\", one of the [[nodes]]: {listed}"),
            ),
            Some(Some(n)) if !names.contains(&n) => at(
                &[section, "node"],
                None,
                format!("[{section}] node {} is not one of the [[nodes]]", crate::escape::quoted(n)),
                &format!("name one of: {listed}"),
            ),
            Some(Some(_)) => {}
        }
    }
}

/// An existing cluster's `[[nodes]]`: how many, their names, facts and taints.
fn nodes(config: &Config, e: &mut Errors<'_>) {
    let mut at =
        |path: &[&str], element: Option<usize>, message: String, help: &str| e.at(path, element, message, help);
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
        if node.taints.len() > MAX_TAINTS {
            at(
                &["nodes"],
                Some(i),
                format!("node {shown}: more than {MAX_TAINTS} taints"),
                "list the taints the node carries",
            );
        }
        let mut pairs = BTreeSet::new();
        for taint in node.taints.iter().take(MAX_TAINTS) {
            match parse_taint(taint) {
                Err(why) => at(
                    &["nodes"],
                    Some(i),
                    format!("node {shown}: taint {} {why}", crate::escape::quoted(taint)),
                    "write it as kubectl taint does: key[=value]:effect, e.g. \"k3d-gpu.io/gpu-only=true:NoSchedule\"",
                ),
                // Kubernetes refuses two taints with one key and effect.
                Ok(t) if !pairs.insert((t.key.clone(), t.effect.clone())) => at(
                    &["nodes"],
                    Some(i),
                    format!(
                        "node {shown}: taint key {} with effect {} is listed twice",
                        crate::escape::quoted(&t.key),
                        t.effect
                    ),
                    "a node has one taint per key and effect",
                ),
                Ok(_) => {}
            }
        }
    }
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
    }

    #[test]
    fn the_sandbox_names_one_of_the_nodes() {
        assert_eq!(errors(&format!("{FLEET}\n[sandbox]\nnode = \"arc-01\"\n")), Vec::<String>::new());
        // (sandbox section, the error)
        const CASES: &[(&str, &str)] = &[
            ("[sandbox]\n", "[sandbox] needs node"),
            ("[sandbox]\nnode = \"gpu-09\"\n", "[sandbox] node \"gpu-09\" is not one of the [[nodes]]"),
        ];
        for (section, want) in CASES {
            let e = errors(&format!("{FLEET}\n{section}"));
            assert!(e.len() == 1 && e[0].contains(want), "{section}: {e:?}");
        }
        let e = errors("[sandbox]\nnode = \"gpu-01\"\n");
        assert!(e.iter().any(|m| m.contains("[sandbox] node names a node of an existing cluster")), "{e:?}");
        assert_eq!(errors("[sandbox]\n"), Vec::<String>::new());
    }

    #[test]
    fn taints_are_read_by_kubernetes_rules() {
        // (entry, Ok((key, value, effect)) or Err(part of why))
        type Case = (&'static str, Result<(&'static str, &'static str, &'static str), &'static str>);
        const CASES: &[Case] = &[
            ("k3d-gpu.io/gpu-only=true:NoSchedule", Ok(("k3d-gpu.io/gpu-only", "true", "NoSchedule"))),
            ("dedicated:NoExecute", Ok(("dedicated", "", "NoExecute"))),
            ("gpu=a.b_c-1:PreferNoSchedule", Ok(("gpu", "a.b_c-1", "PreferNoSchedule"))),
            ("gpu=true", Err("has no `:effect`")),
            ("gpu=true:NoWay", Err("effect \"NoWay\" is not one of")),
            ("gpu=true:noschedule", Err("is not one of")),
            (":NoSchedule", Err("is not a qualified name")),
            ("-gpu:NoSchedule", Err("is not a qualified name")),
            ("Bad_Prefix/gpu:NoSchedule", Err("prefix that is not a DNS subdomain")),
            ("/gpu:NoSchedule", Err("prefix that is not a DNS subdomain")),
            ("a/b/c:NoSchedule", Err("is not a qualified name")),
            ("gpu=bad value:NoSchedule", Err("is not a label value")),
            ("gpu=-x:NoSchedule", Err("is not a label value")),
        ];
        for (entry, want) in CASES {
            let got = parse_taint(entry);
            match want {
                Ok((k, v, e)) => {
                    let t = got.unwrap_or_else(|why| panic!("{entry}: {why}"));
                    assert_eq!((t.key.as_str(), t.value.as_str(), t.effect.as_str()), (*k, *v, *e), "{entry}");
                }
                Err(part) => assert!(got.as_ref().is_err_and(|why| why.to_string().contains(part)), "{entry}: {got:?}"),
            }
        }
        let long = format!("gpu={}:NoSchedule", "a".repeat(64));
        assert_eq!(parse_taint(&long).unwrap_err(), NotATaint::Value("a".repeat(64)), "a value of 64 characters");
        assert_eq!(parse_taint("gpu").unwrap_err(), NotATaint::NoEffect);
    }

    #[test]
    fn a_nodes_taints_are_checked_in_the_config() {
        let with = |taints: &str| {
            errors(&FLEET.replace("hosts/arc-01.json\"", &format!("hosts/arc-01.json\"\ntaints = {taints}")))
        };
        assert_eq!(with("[\"k3d-gpu.io/gpu-only=true:NoSchedule\"]"), Vec::<String>::new());
        let e = with("[\"gpu=true:Never\"]");
        assert!(e.len() == 1 && e[0].starts_with("node \"arc-01\": taint \"gpu=true:Never\" effect"), "{e:?}");
        let e = with("[\"gpu=a:NoSchedule\", \"gpu=b:NoSchedule\", \"gpu=c:NoExecute\"]");
        assert!(e.len() == 1 && e[0].contains("\"gpu\" with effect NoSchedule is listed twice"), "{e:?}");
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
