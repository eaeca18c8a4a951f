//! What k3d-gpu owns on an object: the `metadata.managedFields` entries of field manager
//! [`MANAGER`], as the API server returns them (`fieldsType: FieldsV1`). observe keeps only
//! those entries; the diff reads from them the fields we set before and no longer want, and the
//! plan hash digests the values at those fields, not the whole object.
//!
//! The FieldsV1 encoding is structured-merge-diff's (kubernetes-sigs/structured-merge-diff,
//! `fieldpath/serialize.go` and `serialize-pe.go`): a JSON object whose keys are path elements,
//! `f:<name>` (a field), `k:<json object>` (an element of an associative list, by its keys),
//! `v:<json>` (an element of a set) or `i:<n>` (a list index); `{}` marks a leaf, and `"."` a
//! node that is a member itself as well as holding members.

use serde_json::{Map, Value};

/// Our field manager, as apply sends it and managedFields records it.
pub const MANAGER: &str = "k3d-gpu";

/// Drops every managedFields entry but ours (other managers' bookkeeping is noise in a plan, and
/// large). An object without ours keeps none.
pub fn keep_ours(object: &mut Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let ours: Vec<Value> = meta
        .get("managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == MANAGER)
        .cloned()
        .collect();
    if ours.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(ours));
    }
}

/// The union of our entries' field sets, or `None` when the object carries no entry of ours
/// (a saved document from before this was kept, or an object we never applied).
pub fn owned_set(object: &Value) -> Option<Value> {
    let mut union: Option<Value> = None;
    for entry in object["metadata"]["managedFields"].as_array().into_iter().flatten() {
        if entry["manager"] != MANAGER || entry.get("subresource").is_some_and(|s| s != "" && !s.is_null()) {
            continue;
        }
        let set = entry.get("fieldsV1").cloned().unwrap_or(Value::Object(Map::new()));
        union = Some(match union {
            None => set,
            Some(mut u) => {
                merge_sets(&mut u, &set);
                u
            }
        });
    }
    union
}

fn merge_sets(into: &mut Value, other: &Value) {
    let (Some(into), Some(other)) = (into.as_object_mut(), other.as_object()) else { return };
    for (k, v) in other {
        match into.get_mut(k) {
            Some(existing) => merge_sets(existing, v),
            None => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A path element of a FieldsV1 key.
enum Element<'a> {
    Field(&'a str),
    Key(Map<String, Value>),
    Value(Value),
    Index(usize),
}

fn element(key: &str) -> Option<Element<'_>> {
    let (kind, rest) = key.split_once(':')?;
    match kind {
        "f" => Some(Element::Field(rest)),
        "k" => serde_json::from_str::<Value>(rest).ok()?.as_object().cloned().map(Element::Key),
        "v" => serde_json::from_str(rest).ok().map(Element::Value),
        "i" => rest.parse().ok().map(Element::Index),
        _ => None,
    }
}

/// Whether a list element has every key field of a `k:` element. A key's `protocol` that the
/// element leaves out is `TCP`, the schema's default, as the API server records it
/// (`k:{"containerPort":8080,"protocol":"TCP"}` for a port written without one).
fn matches_key(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| match item.get(k) {
        Some(value) => value == v,
        None => k == "protocol" && v == "TCP",
    })
}

fn is_leaf(set: &Value) -> bool {
    set.as_object().is_none_or(|m| m.keys().all(|k| k == "."))
}

/// `object` cut down to the fields of `set`: what we own, with its values (an associative
/// list's elements keep their key fields, in the object's order).
pub fn owned_values(object: &Value, set: &Value) -> Value {
    let Some(members) = set.as_object() else { return Value::Null };
    match object {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, child) in members {
                if let Some(Element::Field(name)) = element(key)
                    && let Some(value) = fields.get(name)
                {
                    let v = if is_leaf(child) { value.clone() } else { owned_values(value, child) };
                    out.insert(name.to_string(), v);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                for (key, child) in members {
                    let hit = match element(key) {
                        Some(Element::Key(k)) if matches_key(item, &k) => {
                            let mut v = if is_leaf(child) { item.clone() } else { owned_values(item, child) };
                            if let Some(m) = v.as_object_mut() {
                                m.extend(k);
                            }
                            Some(v)
                        }
                        Some(Element::Value(v)) if *item == v => Some(v),
                        Some(Element::Index(n)) if n == i => {
                            Some(if is_leaf(child) { item.clone() } else { owned_values(item, child) })
                        }
                        _ => None,
                    };
                    if let Some(v) = hit {
                        out.push(v);
                        break;
                    }
                }
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}

/// The owned fields present in `observed` that `desired` no longer sets, as paths in the
/// diff's notation (`metadata.labels.tier`, `spec.template.spec.containers[0].args`; an
/// element of an associative list that desired lacks by its keys: `env[name=DEBUG]`).
pub fn owned_not_desired(set: &Value, observed: &Value, desired: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(set, observed, Some(desired), "", &mut out);
    out
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

fn walk(set: &Value, observed: &Value, desired: Option<&Value>, path: &str, out: &mut Vec<String>) {
    let Some(members) = set.as_object() else { return };
    for (key, child) in members {
        match element(key) {
            Some(Element::Field(name)) => {
                let Some(o) = observed.get(name) else { continue };
                let here = join(path, name);
                match desired.and_then(|d| d.get(name)).filter(|d| !d.is_null()) {
                    None => out.push(here),
                    Some(d) if !is_leaf(child) => walk(child, o, Some(d), &here, out),
                    Some(_) => {}
                }
            }
            Some(Element::Key(k)) => {
                let Some(items) = observed.as_array() else { continue };
                let Some((i, o)) = items.iter().enumerate().find(|(_, item)| matches_key(item, &k)) else { continue };
                let wanted = desired.and_then(Value::as_array).and_then(|d| d.iter().find(|d| matches_key(d, &k)));
                match wanted {
                    None => {
                        let keys: Vec<String> = k
                            .iter()
                            .map(|(f, v)| format!("{f}={}", v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                            .collect();
                        out.push(format!("{path}[{}]", keys.join(",")));
                    }
                    Some(d) if !is_leaf(child) => walk(child, o, Some(d), &format!("{path}[{i}]"), out),
                    Some(_) => {}
                }
            }
            Some(Element::Value(v)) => {
                let present = observed.as_array().is_some_and(|items| items.contains(&v));
                let wanted = desired.and_then(Value::as_array).is_some_and(|d| d.contains(&v));
                if present && !wanted {
                    out.push(format!("{path}[{v}]"));
                }
            }
            // An atomic list's index: the list is compared whole by the diff.
            Some(Element::Index(_)) | None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d", "tier": "gpu"}, "managedFields": [
                {"manager": "k3d-gpu", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
                    "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {
                        ".": {}, "f:name": {}, "f:image": {}, "f:env": {
                            "k:{\"name\":\"DEBUG\"}": {".": {}, "f:name": {}, "f:value": {}}}}}}}}}},
                {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x:1",
                "imagePullPolicy": "IfNotPresent", "env": [{"name": "DEBUG", "value": "1"}, {"name": "B", "value": "2"}]}]}}},
            "status": {"readyReplicas": 1}})
    }

    #[test]
    fn only_our_entries_are_kept() {
        let mut d = deployment();
        keep_ours(&mut d);
        assert_eq!(d["metadata"]["managedFields"].as_array().unwrap().len(), 1);
        let mut bare = json!({"metadata": {"managedFields": [{"manager": "kubectl"}]}});
        keep_ours(&mut bare);
        assert!(bare["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn owned_values_are_the_fields_of_our_set() {
        let d = deployment();
        let set = owned_set(&d).unwrap();
        assert_eq!(
            owned_values(&d, &set),
            json!({"metadata": {"labels": {"app": "d", "tier": "gpu"}},
                "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1", "env": [{"name": "DEBUG", "value": "1"}]}]}}}})
        );
    }

    #[test]
    fn fields_we_owned_and_no_longer_set_are_named() {
        let d = deployment();
        let set = owned_set(&d).unwrap();
        let desired = json!({"metadata": {"labels": {"app": "d"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}});
        assert_eq!(
            owned_not_desired(&set, &d, &desired),
            ["metadata.labels.tier", "spec.template.spec.containers[0].env"]
        );
        let desired_env = json!({"metadata": {"labels": {"app": "d", "tier": "gpu"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1", "env": [{"name": "B", "value": "2"}]}]}}}});
        assert_eq!(owned_not_desired(&set, &d, &desired_env), ["spec.template.spec.containers[0].env[name=DEBUG]"]);
        assert!(owned_not_desired(&set, &d, &d).is_empty());
    }
}
