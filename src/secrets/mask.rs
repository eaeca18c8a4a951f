//! Applying the rule of `secrets` to a whole JSON document: every env entry, Secret data,
//! node env map, arg list and string in it. In a plan a masked value that differs between
//! observed and desired reads "(sensitive, changed)", so a change shows without its value; in
//! the Docker label the secret becomes its digest, so the next plan can still compare.

use serde_json::{Map, Value, json};

use super::{SENSITIVE, is_secret_flag, is_sensitive_name, secret_part};

pub const SENSITIVE_CHANGED: &str = "(sensitive, changed)";

/// What a secret becomes: given the secret and the one at the same place in the other
/// document of a pair (if any).
type Replace<'a> = &'a dyn Fn(&str, Option<&str>) -> String;

/// Masks a document printed on its own (observe --json, graph --json): every secret reads
/// "(sensitive)".
pub fn mask_document(document: &mut Value) {
    walk(document, None, &|_, _| SENSITIVE.to_string());
}

/// Masks `before` and `after` of a plan action; a secret that differs between them (or has
/// no counterpart) reads "(sensitive, changed)".
pub fn mask_pair(before: &mut Option<Value>, after: &mut Option<Value>) {
    let changed = |secret: &str, other: Option<&str>| {
        if other == Some(secret) { SENSITIVE.to_string() } else { SENSITIVE_CHANGED.to_string() }
    };
    // Each side is walked against the other as it was; copied only when there is a side to
    // walk against it (a delete has no `after`: its `before`, the whole observed object, is
    // not copied).
    let original_before = if after.is_some() { before.clone() } else { None };
    let original_after = if before.is_some() { after.clone() } else { None };
    if let Some(a) = after.as_mut() {
        walk(a, Some(original_before.as_ref().unwrap_or(&Value::Null)), &changed);
    }
    if let Some(b) = before.as_mut() {
        walk(b, Some(original_after.as_ref().unwrap_or(&Value::Null)), &changed);
    }
}

/// A copy with every secret replaced by its `sha256:` digest (a digest stays as it is, so
/// this can be applied to a spec recorded before). What the cluster's Docker label records:
/// anyone who can list containers reads labels.
pub fn digest_secrets(spec: &Value) -> Value {
    let mut copy = spec.clone();
    walk(&mut copy, None, &|secret, _| {
        let is_digest = secret.len() == 71
            && secret.strip_prefix("sha256:").is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        if is_digest { secret.to_string() } else { crate::canonical::sha256(secret.as_bytes()) }
    });
    copy
}

fn whole(value: &mut Value, other: Option<&Value>, replace: Replace) {
    if let Value::String(text) = value {
        *value = json!(replace(text, other.and_then(Value::as_str)));
    }
}

fn walk(value: &mut Value, other: Option<&Value>, replace: Replace) {
    match value {
        Value::Object(map) => walk_object(map, other, replace),
        Value::Array(items) => {
            // `--token VALUE`: the element after a secret flag is the secret.
            let after_flag: Vec<bool> = std::iter::once(false)
                .chain(items.iter().map(|v| v.as_str().is_some_and(|s| !s.contains('=') && is_secret_flag(s))))
                .collect();
            for (i, item) in items.iter_mut().enumerate() {
                let other_item = other.and_then(|o| o.get(i));
                if after_flag[i] {
                    whole(item, other_item, replace);
                } else {
                    walk(item, other_item, replace);
                }
            }
        }
        Value::String(text) => {
            if let Some((before, secret, after)) = secret_part(text) {
                let other_secret = other.and_then(Value::as_str).and_then(secret_part).map(|(_, s, _)| s);
                *value = json!(format!("{before}{}{after}", replace(secret, other_secret)));
            }
        }
        _ => {}
    }
}

fn walk_object(map: &mut Map<String, Value>, other: Option<&Value>, replace: Replace) {
    let kind = map.get("kind").and_then(Value::as_str);
    let secret_kind = kind == Some("Secret");
    // A ConfigMap is not meant for secrets, but a key named like one (`HF_TOKEN`) holds one.
    let config_map = kind == Some("ConfigMap");
    // An env entry, wherever it is (containers, initContainers, ephemeral containers). Only a
    // map with a value can be one: the name is not looked at otherwise (a plan walks every
    // object's metadata, and each has a name).
    let env_entry = map.contains_key("value") && map.get("name").and_then(Value::as_str).is_some_and(is_sensitive_name);
    for (key, child) in map.iter_mut() {
        let other_child = other.and_then(|o| o.get(key));
        if (secret_kind && (key == "data" || key == "stringData"))
            || (config_map && (key == "data" || key == "binaryData"))
            || ((key == "env" || key == "build_args") && child.is_object())
        {
            // Secret data, ConfigMap data, a node container's env map and the node image's
            // build args: by key (every Secret key; the others' keys named like a secret).
            let Some(entries) = child.as_object_mut() else { continue };
            for (name, entry) in entries.iter_mut() {
                let other_entry = other_child.and_then(|o| o.get(name));
                if secret_kind || is_sensitive_name(name) {
                    whole(entry, other_entry, replace);
                } else {
                    walk(entry, other_entry, replace);
                }
            }
        } else if env_entry && key == "value" {
            whole(child, other_child, replace);
        } else {
            walk(child, other_child, replace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_map_data_named_like_a_secret_is_masked() {
        let mut doc = json!({"kind": "ConfigMap", "data": {"HF_TOKEN": "hf_abc", "MODEL": "qwen", "config.yaml": "a: 1"},
            "binaryData": {"api-key": "c2VjcmV0"}});
        mask_document(&mut doc);
        assert_eq!(doc["data"]["HF_TOKEN"], SENSITIVE);
        assert_eq!(doc["binaryData"]["api-key"], SENSITIVE);
        assert_eq!(doc["data"]["MODEL"], "qwen");
        assert_eq!(doc["data"]["config.yaml"], "a: 1");
    }

    #[test]
    fn secret_data_is_masked_and_changes_show() {
        let mut before = Some(json!({"kind": "Secret", "data": {"password": "b2xk", "user": "YQ=="}}));
        let mut after = Some(json!({"kind": "Secret", "data": {"password": "bmV3", "user": "YQ=="}}));
        mask_pair(&mut before, &mut after);
        let after = after.unwrap();
        assert_eq!(after["data"]["password"], SENSITIVE_CHANGED);
        assert_eq!(after["data"]["user"], SENSITIVE);
        assert!(!after.to_string().contains("bmV3"));
        assert!(!before.unwrap().to_string().contains("b2xk"));
    }

    #[test]
    fn sensitive_env_values_are_masked() {
        let pod = |v: &str| {
            json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
                {"name": "ui", "env": [{"name": "WEBUI_SECRET_KEY", "value": v}, {"name": "PORT", "value": "8080"}]}
            ]}}}})
        };
        let mut before = Some(pod("one"));
        let mut after = Some(pod("two"));
        mask_pair(&mut before, &mut after);
        let env = &after.unwrap()["spec"]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(env[0]["value"], SENSITIVE_CHANGED);
        assert_eq!(env[1]["value"], "8080");
    }

    #[test]
    fn sensitive_build_args_of_the_node_image_are_masked() {
        let mut doc = json!({"id": "docker/node-image", "spec": {"build_args": {"NPM_TOKEN": "npm_s3cret", "UBUNTU_TAG": "24.04"}}});
        mask_document(&mut doc);
        assert_eq!(doc["spec"]["build_args"]["NPM_TOKEN"], SENSITIVE);
        assert_eq!(doc["spec"]["build_args"]["UBUNTU_TAG"], "24.04");
    }

    #[test]
    fn everywhere_in_a_document() {
        let mut doc = json!({
            "initContainers": [{"env": [{"name": "DB_PASS", "value": "p1"}], "args": ["--token", "p2", "-t=p3", "--vpn-auth=p4", "-v", "2"]}],
            "nodes": [{"env": {"K3S_TOKEN": "p5", "K3S_DATASTORE_ENDPOINT": "mysql://root:p6@tcp(db)/k3s", "PATH": "/bin"}}],
            "k3s_args": [{"arg": "--agent-token=p7"}],
            "kind": "ConfigMap", "data": {"url": "https://user:p8@example.com/x"},
        });
        mask_document(&mut doc);
        let text = doc.to_string();
        for p in ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"] {
            assert!(!text.contains(&format!("{p}\"")) && !text.contains(&format!("{p}@")), "{p} in {text}");
        }
        assert_eq!(doc["initContainers"][0]["args"][5], "2", "only what follows a secret flag");
        assert_eq!(doc["nodes"][0]["env"]["PATH"], "/bin");
    }

    #[test]
    fn digests_compare_and_are_stable() {
        let spec = json!({"k3s_args": [{"arg": "--token=abc"}, {"arg": "--disable=traefik"}]});
        let digested = digest_secrets(&spec);
        assert!(!digested.to_string().contains("abc"));
        assert_eq!(digested["k3s_args"][1]["arg"], "--disable=traefik");
        assert_eq!(digest_secrets(&digested), digested, "a recorded digest stays");
        assert_ne!(
            digest_secrets(&json!({"k3s_args": [{"arg": "--token=abd"}]}))["k3s_args"][0],
            digested["k3s_args"][0]
        );
    }
}
