//! `render --out DIR --flux`: the directory Flux's kustomize-controller applies unchanged
//! (docs/flux.md). It is render's set, refused when any object would carry a secret value (a
//! Flux source is a git repository, and git keeps what it is given), plus, for an existing
//! cluster, the node labels as a set of its own in `node-labels/` that the top kustomization
//! does not list: a person opts in by pointing a second Flux Kustomization at it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::compile::{DesiredGraph, ResourceKind};
use crate::error::{Error, Result};

/// The directory of the opt-in node label set.
pub const NODE_LABELS_DIR: &str = "node-labels";

/// Flux's per-object annotation that keeps an object out of its garbage collection: a Node
/// dropped from the set must lose nothing, least of all itself.
const PRUNE_DISABLED: (&str, &str) = ("kustomize.toolkit.fluxcd.io/prune", "disabled");

/// The files of the Flux set: render's, or why there can be none.
pub fn files(graph: &DesiredGraph) -> Result<BTreeMap<String, String>> {
    for r in graph.resources().filter(|r| r.kind == ResourceKind::Object) {
        if let Some(at) = secret_at(&r.spec) {
            return Err(Error::Usage {
                message: format!(
                    "render --flux writes no secret value, and {} holds one at {}",
                    crate::escape::one_line(&object_name(&r.spec)),
                    crate::escape::one_line(&at)
                ),
                help: Some(
                    "keep the value out of git: create the Secret in the cluster yourself (or commit it encrypted with SOPS, which Flux decrypts) and refer to it by name (env valueFrom.secretKeyRef); plain `render --out DIR` writes it in clear"
                        .into(),
                ),
            });
        }
    }
    let mut files = super::graph::render_files(graph);
    if crate::plan::fleet::is_fleet(graph) {
        files.extend(node_label_files(graph));
    }
    Ok(files)
}

/// Where in `object` a secret value is, as a JSON pointer: any value of a Secret's `data` or
/// `stringData`, and elsewhere what the one masking rule (`secrets`) masks (an env var or a
/// ConfigMap key named like a secret, a secret flag's value, URL userinfo) unless the value
/// cannot be one. That rule is made for display and masks by name, so it also masks
/// `GF_AUTH_ANONYMOUS_ENABLED=false` and `GF_SECURITY_ADMIN_PASSWORD__FILE=/path`: a switch,
/// a short number or a path under a name that says path names no secret, and refusing them
/// would refuse every set.
fn secret_at(object: &Value) -> Option<String> {
    if object["kind"] == "Secret" {
        for field in ["data", "stringData"] {
            if let Some((key, _)) = object[field].as_object().and_then(|m| m.iter().next()) {
                return Some(format!("/{field}/{key}"));
            }
        }
    }
    let mut masked = object.clone();
    crate::secrets::mask_document(&mut masked);
    let mut found = Vec::new();
    differences(object, &masked, String::new(), "", &mut found);
    found.into_iter().find(|m| !plainly_no_secret(&m.name, &m.value)).map(|m| m.at)
}

/// A value the masking rule masked: where, the name it is under, and the value.
struct Masked {
    at: String,
    name: String,
    value: String,
}

/// Whether a masked `value` under `name` can be no secret. A path is taken for one only under
/// a name that says it holds a path, and only in a path's plain grammar: base64 may start
/// with `/`, and a query string may carry a key. Digits are a count only under a name that
/// says so (`TOKEN_TTL`, `API_PORT`): under a secret's name, short or long, they are a PIN or
/// a password.
fn plainly_no_secret(name: &str, value: &str) -> bool {
    let upper = name.trim_start_matches('-').to_ascii_uppercase().replace('-', "_");
    let path_name = ["_FILE", "_PATH", "_DIR"].iter().any(|s| upper.ends_with(s));
    let count_name = ["_TTL", "_PORT", "_SECONDS", "_TIMEOUT", "_SIZE", "_COUNT", "_LIMIT", "_MS"]
        .iter()
        .any(|s| upper.ends_with(s));
    let plain_path = value.starts_with('/')
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~' | b'@'));
    matches!(value, "" | "true" | "false" | "True" | "False")
        || (!value.is_empty()
            && value.bytes().all(|b| b.is_ascii_digit())
            && (count_name || !crate::secrets::is_sensitive_name(name)))
        || (path_name && plain_path)
}

/// Each place `a` and its masked copy `b` differ, with the name the value is under (an env
/// entry's `name`, a map key, the secret flag before it or in it) and `a`'s value there.
fn differences(a: &Value, b: &Value, at: String, name: &str, out: &mut Vec<Masked>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let under = match x.get("name").and_then(Value::as_str) {
                    Some(entry) if k == "value" => entry,
                    _ => k,
                };
                // A JSON pointer (RFC 6901): `~` and `/` in a key are escaped, so a key such as
                // `example.com/api-token` reads as one step.
                let step = k.replace('~', "~0").replace('/', "~1");
                differences(v, y.get(k).unwrap_or(&Value::Null), format!("{at}/{step}"), under, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, v) in x.iter().enumerate() {
                // `--token VALUE`: the element after a flag is that flag's.
                let flag = i.checked_sub(1).and_then(|p| x[p].as_str()).filter(|f| f.starts_with('-'));
                differences(v, y.get(i).unwrap_or(&Value::Null), format!("{at}/{i}"), flag.unwrap_or(name), out);
            }
        }
        _ if a != b => {
            let text = a.as_str().map_or_else(|| a.to_string(), str::to_string);
            // `--token=VALUE`: the flag is the name, what follows `=` the value.
            let (name, value) = match text.split_once('=') {
                Some((flag, value)) if flag.starts_with('-') => (flag.to_string(), value.to_string()),
                _ => (name.to_string(), text),
            };
            out.push(Masked { at, name, value });
        }
        _ => {}
    }
}

/// `Kind namespace/name`, as a diagnostic names an object.
fn object_name(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("object");
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// `node-labels/`: one partial Node per node, its labels and annotations only, each kept out
/// of Flux's pruning, and a kustomization listing the file. Server-side apply (Flux's) owns
/// just the fields it names, so the kubelet's own stay the kubelet's.
fn node_label_files(graph: &DesiredGraph) -> BTreeMap<String, String> {
    /// A node's labels and annotations.
    type Metadata<'a> = (BTreeMap<&'a str, &'a str>, BTreeMap<&'a str, &'a str>);
    let mut nodes: BTreeMap<&str, Metadata> = BTreeMap::new();
    for r in graph.resources() {
        let (Some(node), Some(key), Some(value)) =
            (r.spec["node"].as_str(), r.spec["key"].as_str(), r.spec["value"].as_str())
        else {
            continue;
        };
        let entry = nodes.entry(node).or_default();
        match r.kind {
            ResourceKind::NodeLabel => entry.0.insert(key, value),
            ResourceKind::NodeAnnotation => entry.1.insert(key, value),
            _ => continue,
        };
    }
    if nodes.is_empty() {
        return BTreeMap::new();
    }
    let mut text = String::from(
        "# Node labels, rendered by k3d-gpu: an opt-in set, not listed by ../kustomization.yaml.\n# Apply it only to a cluster whose nodes exist (applying a Node that is not there creates one).\n",
    );
    for (node, (labels, annotations)) in &nodes {
        let mut annotations: BTreeMap<&str, &str> = annotations.clone();
        annotations.insert(PRUNE_DISABLED.0, PRUNE_DISABLED.1);
        let object = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": labels, "annotations": annotations},
        });
        text.push_str("---\n");
        text.push_str(&serde_saphyr::to_string(&object).expect("a JSON value serialises as YAML"));
    }
    let kustomization =
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - nodes.yaml\n".to_string();
    BTreeMap::from([
        (format!("{NODE_LABELS_DIR}/nodes.yaml"), text),
        (format!("{NODE_LABELS_DIR}/kustomization.yaml"), kustomization),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_found_where_the_masking_rule_finds_it() {
        let secret = json!({"kind": "Secret", "metadata": {"name": "s", "namespace": "a"}, "data": {"t": "c2VjcmV0"}});
        assert_eq!(secret_at(&secret).as_deref(), Some("/data/t"));
        let env = json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "a", "env": [{"name": "PORT", "value": "1"}, {"name": "HF_TOKEN", "value": "hf_x"}]}]}}}});
        assert_eq!(secret_at(&env).as_deref(), Some("/spec/template/spec/containers/0/env/1/value"));
        let plain = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"port": "8000"}});
        assert_eq!(secret_at(&plain), None);
        // A key with `/` or `~` in it is one step of the pointer (RFC 6901).
        let keyed = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a~b/api-token": "abc"}});
        assert_eq!(secret_at(&keyed).as_deref(), Some("/data/a~0b~1api-token"));
        let by_ref = json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "a", "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]}]}}}});
        assert_eq!(secret_at(&by_ref), None);
        // What the display rule masks by name but cannot be a secret: a switch, a path.
        let switches = json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "a", "env": [{"name": "GF_AUTH_ANONYMOUS_ENABLED", "value": "false"},
                {"name": "GF_SECURITY_ADMIN_PASSWORD__FILE", "value": "/var/lib/grafana/.pw"},
                {"name": "API_KEY", "value": "sk-live"}]}]}}}});
        assert_eq!(secret_at(&switches).as_deref(), Some("/spec/template/spec/containers/0/env/2/value"));
        // Base64 may start with `/`, a password may be digits, a query string may carry a key.
        let env_of = |name: &str, value: &str| {
            json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
                {"name": "a", "env": [{"name": name, "value": value}]}]}}}})
        };
        for (name, value) in [
            ("API_KEY", "/k3Jx9+Qa0xZ7bL2mN4pQ8rS1tU6vW3yA5cD9eF0gH=="),
            ("ADMIN_PASSWORD", "83920174"),
            ("ADMIN_PASSWORD", "1234"),
            ("OPENAI_API_KEY", "/v1?api_key=sk-abc123"),
            ("API_KEY", "/k3Jx9Qa0xZ7bL2mN4pQ8rS1tU6vW3yA5cD9eF0gH"),
            ("API_KEY_FILE", "/k3Jx9+Qa0xZ7bL2mN4pQ8rS1tU6vW3yA5cD9eF0gH=="),
        ] {
            assert_eq!(
                secret_at(&env_of(name, value)).as_deref(),
                Some("/spec/template/spec/containers/0/env/0/value"),
                "{name}={value}"
            );
        }
        for (name, value) in [("TOKEN_TTL", "3600"), ("DB_PASSWORD_FILE", "/run/secrets/db.pw"), ("SSH_KEY_PATH", "")] {
            assert_eq!(secret_at(&env_of(name, value)), None, "{name}={value}");
        }
        let args = |args: Value| json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "a", "args": args}]}}}});
        let at = Some("/spec/template/spec/containers/0/args/1");
        assert_eq!(secret_at(&args(json!(["serve", "--api-key=/k3Jx9+Qa0=="]))).as_deref(), at);
        assert_eq!(secret_at(&args(json!(["--api-key", "/k3Jx9+Qa0=="]))).as_deref(), at);
        assert_eq!(secret_at(&args(json!(["--token", "83920174"]))).as_deref(), at);
        assert_eq!(secret_at(&args(json!(["--token", "1234"]))).as_deref(), at);
        assert_eq!(secret_at(&args(json!(["--auth", "false", "--token-file", "/run/t"]))), None);
        let empty_secret = json!({"kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque"});
        assert_eq!(secret_at(&empty_secret), None);
    }
}
