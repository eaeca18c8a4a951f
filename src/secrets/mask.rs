//! Masking documents: Secret data, sensitive-looking env values and k3s args. In a plan a
//! change shows as a change, not as its value.

use serde_json::{Value, json};

use super::SENSITIVE;
pub const SENSITIVE_CHANGED: &str = "(sensitive, changed)";

/// Masks `after` (and `before`) in place; a masked value that differs reads "(sensitive, changed)".
pub fn mask_pair(before: &mut Option<Value>, after: &mut Option<Value>) {
    for spec in [before.as_mut(), after.as_mut()].into_iter().flatten() {
        mask_cluster_args(spec);
    }
    let kind = after.as_ref().or(before.as_ref()).and_then(|o| o["kind"].as_str()).unwrap_or_default().to_string();
    if kind == "Secret" {
        for field in ["data", "stringData"] {
            let b = before.as_ref().map(|o| o[field].clone()).unwrap_or(Value::Null);
            let a = after.as_ref().map(|o| o[field].clone()).unwrap_or(Value::Null);
            if let Some(o) = after.as_mut() {
                mask_map(&mut o[field], &b);
            }
            if let Some(o) = before.as_mut() {
                mask_map(&mut o[field], &a);
            }
        }
    }
    let b = before.clone();
    let a = after.clone();
    if let Some(o) = after.as_mut() {
        mask_env(o, b.as_ref());
    }
    if let Some(o) = before.as_mut() {
        mask_env(o, a.as_ref());
    }
}

/// Masks one object on its own (an observed one): every secret reads "(sensitive)".
pub fn mask_object(object: &mut Value) {
    let mut same = Some(object.clone());
    let mut masked = Some(object.take());
    mask_pair(&mut same, &mut masked);
    *object = masked.unwrap_or_default();
}

/// A cluster spec's k3s args (`--token=…`, credentials in a datastore URL).
pub fn mask_cluster_args(spec: &mut Value) {
    for arg in spec.get_mut("k3s_args").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(text) = arg.get("arg").and_then(Value::as_str) {
            arg["arg"] = json!(crate::secrets::mask_arg(text));
        }
    }
}

fn mask_map(map: &mut Value, other: &Value) {
    let Some(entries) = map.as_object_mut() else { return };
    for (key, value) in entries.iter_mut() {
        let changed = other.get(key) != Some(value);
        *value = json!(if changed { SENSITIVE_CHANGED } else { SENSITIVE });
    }
}

/// `spec.template.spec.containers[].env[]` entries with sensitive names.
fn mask_env(object: &mut Value, other: Option<&Value>) {
    let path = ["spec", "template", "spec", "containers"];
    let other_containers = other.and_then(|o| path.iter().try_fold(o, |v, k| v.get(k))).cloned();
    let Some(containers) = path.iter().try_fold(&mut *object, |v, k| v.get_mut(k)).and_then(Value::as_array_mut) else {
        return;
    };
    for container in containers.iter_mut() {
        let name = container["name"].clone();
        let other_env = other_containers
            .as_ref()
            .and_then(|cs| cs.as_array())
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .map(|c| c["env"].clone());
        let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) else { continue };
        for var in env.iter_mut() {
            let Some(var_name) = var["name"].as_str() else { continue };
            if !crate::secrets::is_sensitive_name(var_name) || var.get("value").is_none() {
                continue;
            }
            let before = other_env
                .as_ref()
                .and_then(|e| e.as_array())
                .and_then(|e| e.iter().find(|v| v["name"] == var_name))
                .map(|v| v["value"].clone());
            let changed = before.as_ref() != Some(&var["value"]);
            var["value"] = json!(if changed { SENSITIVE_CHANGED } else { SENSITIVE });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
