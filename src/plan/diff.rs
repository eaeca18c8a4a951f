//! Comparing desired against observed. Objects are compared on the fields k3d-gpu sets, and
//! on those it owns (its `managedFields` entry, [`crate::observed::managed`]): the API server's
//! defaults, status and other managers' fields are not drift, while a field we set before and
//! the config no longer sets is (server-side apply removes it on the next apply). Quantities
//! compare by value (`1024Mi` is `1Gi`), as the API server writes them back canonical.

use serde_json::{Map, Value};

/// Paths (`spec.template.spec.containers[0].args`) where `observed` differs from `desired`
/// on the fields `desired` sets, then the fields `observed` says we own that `desired` no
/// longer sets (none below a path already named).
pub fn owned_differences(desired: &Value, observed: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(desired, observed, "", &mut out);
    if let Some(set) = crate::observed::managed::owned_set(observed) {
        for path in crate::observed::managed::owned_not_desired(&set, observed, desired) {
            let covered = out
                .iter()
                .any(|p| path == *p || path.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with(['.', '['])));
            if !covered {
                out.push(path);
            }
        }
    }
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
        (d, o) if same_scalar(d, o, quantity_path(path)) => {}
        _ => out.push(path.to_string()),
    }
}

/// Whether the field at `path` holds a resource quantity: its key and its parent's, as
/// [`crate::quantity::is_quantity_field`] decides.
fn quantity_path(path: &str) -> bool {
    // A map's value: neither the key nor its parent is a list element (`requests[0]` is a
    // DRA device request, not resource requests).
    let mut keys = path.rsplit('.');
    let (Some(key), parent) = (keys.next(), keys.next().unwrap_or_default()) else { return false };
    !key.contains('[') && !parent.contains('[') && crate::quantity::is_quantity_field(parent, key)
}

/// The API server writes some numbers back as strings; `1` and `"1"` agree. A quantity agrees
/// with any text of the same value (`1024Mi` and `1Gi`, `0.5` and `500m`).
fn same_scalar(a: &Value, b: &Value, quantity: bool) -> bool {
    let text = |v: &Value| match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    };
    if quantity && let (Some(x), Some(y)) = (text(a), text(b)) {
        return x == y || crate::quantity::same_value(&x, &y);
    }
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
    fn quantities_compare_by_value() {
        let limits = |cpu: Value, memory: &str| json!({"resources": {"limits": {"cpu": cpu, "memory": memory}}});
        // What the API server writes back: canonical forms of the same values.
        assert!(owned_differences(&limits(json!("2000m"), "1024Mi"), &limits(json!("2"), "1Gi")).is_empty());
        assert!(owned_differences(&limits(json!(0.5), "1536Mi"), &limits(json!("500m"), "1.5Gi")).is_empty());
        assert_eq!(
            owned_differences(&limits(json!("1"), "1Gi"), &limits(json!("1"), "1G")),
            ["resources.limits.memory"]
        );
        // Not a quantity field: text compares as text.
        assert_eq!(
            owned_differences(&json!({"data": {"size": "1024Mi"}}), &json!({"data": {"size": "1Gi"}})),
            ["data.size"]
        );
    }

    #[test]
    fn an_owned_field_desired_no_longer_sets_is_drift() {
        let observed = json!({"metadata": {"labels": {"app": "a", "old": "x"}, "managedFields": [{
            "manager": "k3d-gpu", "operation": "Apply", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}, "f:old": {}}}}}]}});
        let desired = json!({"metadata": {"labels": {"app": "a"}}});
        assert_eq!(owned_differences(&desired, &observed), ["metadata.labels.old"]);
        // Another manager's field is not ours to remove.
        let theirs = json!({"metadata": {"labels": {"app": "a", "old": "x"}, "managedFields": [{
            "manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:old": {}}}}}]}});
        assert!(owned_differences(&desired, &theirs).is_empty());
    }

    #[test]
    fn projection_keeps_only_desired_fields() {
        let desired = json!({"a": {"b": 1}});
        let observed = json!({"a": {"b": 2, "c": 3}, "d": 4});
        assert_eq!(project(&desired, &observed), json!({"a": {"b": 2}}));
        assert_eq!(changed_keys(&json!({"x": 1, "y": 2}), &json!({"x": 1, "z": 3})), ["y", "z"]);
    }
}
