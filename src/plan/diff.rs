//! Comparing desired against observed. Objects are compared on the fields k3d-gpu sets only
//! (what server-side apply owns for us): the API server's defaults and status are not drift.

use serde_json::{Map, Value};

/// Paths (`spec.template.spec.containers[0].args`) where `observed` differs from `desired`
/// on the fields `desired` sets.
pub fn owned_differences(desired: &Value, observed: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(desired, observed, "", &mut out);
    out
}

fn walk(desired: &Value, observed: &Value, path: &str, out: &mut Vec<String>) {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => {
            for (key, value) in d {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                walk(value, o.get(key).unwrap_or(&Value::Null), &child, out);
            }
        }
        (Value::Array(d), Value::Array(o)) if d.len() == o.len() => {
            for (i, (dv, ov)) in d.iter().zip(o).enumerate() {
                walk(dv, ov, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Null, _) => {}
        (d, o) if same_scalar(d, o) => {}
        _ => out.push(path.to_string()),
    }
}

/// The API server writes some numbers back as strings (quantities); `1` and `"1"` agree.
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => n.to_string() == *s,
        _ => a == b,
    }
}

/// `observed` cut down to the shape of `desired`, for showing what changed.
pub fn project(desired: &Value, observed: &Value) -> Value {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => {
            let mut out = Map::new();
            for (key, value) in d {
                if let Some(ov) = o.get(key) {
                    out.insert(key.clone(), project(value, ov));
                }
            }
            Value::Object(out)
        }
        (Value::Array(d), Value::Array(o)) if d.len() == o.len() => {
            Value::Array(d.iter().zip(o).map(|(dv, ov)| project(dv, ov)).collect())
        }
        (_, o) => o.clone(),
    }
}

/// Top-level keys whose values differ, both ways (for creation-time specs, where a removed
/// key matters as much as an added one).
pub fn changed_keys(desired: &Value, recorded: &Value) -> Vec<String> {
    let empty = Map::new();
    let d = desired.as_object().unwrap_or(&empty);
    let r = recorded.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = d.keys().chain(r.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| d.get(*k) != r.get(*k)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_defaults_are_not_drift() {
        let desired =
            json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "args": ["-v=2"]}]}}}});
        let observed = json!({"spec": {"replicas": 1, "revisionHistoryLimit": 10, "template": {"spec": {
            "containers": [{"name": "a", "args": ["-v=2"], "imagePullPolicy": "IfNotPresent"}], "dnsPolicy": "ClusterFirst"}}},
            "status": {"ready": 1}});
        assert!(owned_differences(&desired, &observed).is_empty());
    }

    #[test]
    fn hand_edits_to_owned_fields_are_drift() {
        let desired =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["-shared-dev-num=8"]}]}}}});
        let observed =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["-shared-dev-num=2"]}]}}}});
        assert_eq!(owned_differences(&desired, &observed), ["spec.template.spec.containers[0].args[0]"]);
        let removed = json!({"spec": {}});
        assert_eq!(owned_differences(&desired, &removed), ["spec.template"]);
    }

    #[test]
    fn quantities_written_back_as_strings_agree() {
        assert!(owned_differences(&json!({"cpu": 1}), &json!({"cpu": "1"})).is_empty());
        assert_eq!(owned_differences(&json!({"cpu": 1}), &json!({"cpu": "2"})), ["cpu"]);
    }

    #[test]
    fn projection_keeps_only_desired_fields() {
        let desired = json!({"a": {"b": 1}});
        let observed = json!({"a": {"b": 2, "c": 3}, "d": 4});
        assert_eq!(project(&desired, &observed), json!({"a": {"b": 2}}));
        assert_eq!(changed_keys(&json!({"x": 1, "y": 2}), &json!({"x": 1, "z": 3})), ["y", "z"]);
    }
}
