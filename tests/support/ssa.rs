//! The strict fake API server's rules for writes, pure over JSON: server-side apply with
//! `managedFields` per field manager, merge-patch ownership, defaulting of the kinds k3d-gpu
//! emits, and quantities written back canonical. `fake_apiserver.rs` serves them over HTTP;
//! `support::converged` runs them directly, so a "converged" observation is what the server
//! would return after an apply.
//!
//! Provenance (each rule read there; no code copied):
//! - server-side apply: kubernetes-sigs/structured-merge-diff v6.4.2 (`typed/merge.go`:
//!   associative lists merged item by item by their keys, in `visitListItems`' order;
//!   `merge/update.go`: an apply removes
//!   the fields its manager owned before and no longer applies unless another manager owns
//!   them, conflicts are fields another manager owns whose value the apply changes — 409 unless
//!   `force=true`, which takes them over; an update gives the updater the fields it changed
//!   and takes them from everyone else; `fieldpath/serialize-pe.go`: the FieldsV1 keys `f:`,
//!   `k:` (key fields sorted by name), `v:`, `i:`, and `.`), and kubernetes/apiserver
//!   `pkg/endpoints/handlers/fieldmanager` (apiVersion, kind, metadata.name/namespace/uid/
//!   resourceVersion/generation/creationTimestamp/managedFields and status are never owned).
//! - list-map keys: the `x-kubernetes-list-map-keys` / `patchMergeKey` of kubernetes/api
//!   `core/v1/types.go` (containers, initContainers, ephemeralContainers, env, volumes,
//!   imagePullSecrets, resourceClaims, schedulingGates by `name`; container ports by
//!   `containerPort`+`protocol`; Service ports by `port`+`protocol`; volumeMounts by
//!   `mountPath`; volumeDevices by `devicePath`; hostAliases by `ip`; topologySpreadConstraints
//!   by `topologyKey`+`whenUnsatisfiable`; ownerReferences by `uid`; finalizers a set); every
//!   other list is atomic, as a custom resource's lists are without a schema saying otherwise.
//! - defaults: kubernetes/kubernetes `pkg/apis/core/v1/defaults.go` (commit 023f88a3:
//!   Container, PodSpec, Probe, HTTPGetAction, Service, Secret, ConfigMap/Secret/Projected/
//!   DownwardAPI volume modes, HostPath type, ObjectFieldSelector, PVC spec and status,
//!   Namespace label and phase, ResourceList rounded up to milli) and `pkg/apis/apps/v1/
//!   defaults.go` (commit 04791b49: Deployment, DaemonSet); a Namespace's `spec.finalizers`
//!   and a Service's cluster IP and IP families come from their registries, a CRD's
//!   `conversion` and `Established` condition from apiextensions.
//! - quantities: the fake's own reading of apimachinery's `resource.Quantity`
//!   (`support::quantity`), held to upstream's test table, not the product's code.
//!
//! Not modelled: admission, validation beyond the rules above, defaults of kinds outside the
//! list above (ValidatingAdmissionPolicy, DeviceClass, ResourceClaimTemplate, RBAC have
//! none modelled), OpenAPI schemas of custom resources (their lists are atomic), the exact
//! status subresources (tests write status through `FakeApiServer::change`).

use serde_json::{Map, Value, json};

/// Metadata the field manager never records as owned.
const UNOWNED_METADATA: &[&str] =
    &["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"];

/// How a list merges.
enum ListKind {
    /// Associative: items are identified by these key fields.
    Map(&'static [&'static str]),
    /// A set of scalars.
    Set,
    /// Replaced whole.
    Atomic,
}

/// The list-map keys of a list field, by its name and items (see the module's provenance).
fn list_kind(field: &str, items: &[Value]) -> ListKind {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => ListKind::Map(&["name"]),
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => {
            ListKind::Map(&["containerPort", "protocol"])
        }
        "ports" if items.iter().all(|i| i.get("port").is_some()) && !items.is_empty() => {
            ListKind::Map(&["port", "protocol"])
        }
        "volumeMounts" => ListKind::Map(&["mountPath"]),
        "volumeDevices" => ListKind::Map(&["devicePath"]),
        "hostAliases" => ListKind::Map(&["ip"]),
        "topologySpreadConstraints" => ListKind::Map(&["topologyKey", "whenUnsatisfiable"]),
        "ownerReferences" => ListKind::Map(&["uid"]),
        "finalizers" => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

/// An item's key, with `protocol` defaulted to TCP as the schema's key default does.
fn item_key(item: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| match item.get(*k) {
            Some(v) => Some((k.to_string(), v.clone())),
            None if *k == "protocol" => Some((k.to_string(), json!("TCP"))),
            None => None,
        })
        .collect()
}

fn key_element(key: &Map<String, Value>) -> String {
    // serde_json's Map is sorted: the key fields come out by name, as structured-merge-diff's.
    format!("k:{}", Value::Object(key.clone()))
}

/// The FieldsV1 set of an applied (or patched) object: every field it sets.
pub fn fieldset(object: &Value) -> Value {
    let mut set = fields_of(object);
    if let Some(m) = set.as_object_mut() {
        m.remove("f:apiVersion");
        m.remove("f:kind");
        m.remove("f:status");
        if let Some(meta) = m.get_mut("f:metadata").and_then(Value::as_object_mut) {
            for k in UNOWNED_METADATA {
                meta.remove(&format!("f:{k}"));
            }
            if meta.is_empty() {
                m.remove("f:metadata");
            }
        }
    }
    set
}

fn fields_of(value: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(fields) = value {
        for (name, v) in fields {
            if v.is_null() {
                continue;
            }
            out.insert(format!("f:{name}"), field_set(name, v));
        }
    }
    Value::Object(out)
}

fn field_set(name: &str, v: &Value) -> Value {
    match v {
        Value::Object(m) if !m.is_empty() => fields_of(v),
        Value::Array(items) => match list_kind(name, items) {
            ListKind::Atomic => json!({}),
            ListKind::Set => Value::Object(items.iter().map(|i| (format!("v:{i}"), json!({}))).collect()),
            ListKind::Map(keys) => {
                let mut out = Map::new();
                for item in items {
                    let mut child = fields_of(item);
                    child.as_object_mut().map(|c| c.insert(".".into(), json!({})));
                    out.insert(key_element(&item_key(item, keys)), child);
                }
                Value::Object(out)
            }
        },
        _ => json!({}),
    }
}

/// Every member path of a set: its leaves, and the nodes marked `.`.
pub fn paths(set: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    collect(set, &mut Vec::new(), &mut out);
    out
}

fn collect(set: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(m) = set.as_object() else { return };
    for (k, child) in m {
        if k == "." {
            out.push(prefix.clone());
            continue;
        }
        prefix.push(k.clone());
        if child.as_object().is_none_or(Map::is_empty) {
            out.push(prefix.clone());
        } else {
            collect(child, prefix, out);
        }
        prefix.pop();
    }
}

pub fn contains(set: &Value, path: &[String]) -> bool {
    let mut node = set;
    for (i, pe) in path.iter().enumerate() {
        match node.get(pe) {
            Some(child) => node = child,
            None => return false,
        }
        if i + 1 == path.len() {
            // A leaf, or a node that is a member itself.
            return node.as_object().is_none_or(|m| m.is_empty() || m.contains_key("."));
        }
    }
    path.is_empty()
}

/// Whether any member of `set` lies at or below `path`.
fn owns_below(set: &Value, path: &[String]) -> bool {
    let mut node = set;
    for pe in path {
        match node.get(pe) {
            Some(child) => node = child,
            None => return false,
        }
    }
    true
}

/// Removes one member path, pruning what becomes empty.
pub fn remove_path(set: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else { return };
    let Some(m) = set.as_object_mut() else { return };
    if rest.is_empty() {
        match m.get_mut(first).and_then(Value::as_object_mut) {
            Some(child) if child.len() > 1 && child.contains_key(".") => {
                child.remove(".");
            }
            _ => {
                m.remove(first);
            }
        }
        return;
    }
    if let Some(child) = m.get_mut(first) {
        remove_path(child, rest);
        if child.as_object().is_some_and(Map::is_empty) {
            m.remove(first);
        }
    }
}

fn insert_path(set: &mut Value, path: &[String]) {
    let mut node = set;
    for (i, pe) in path.iter().enumerate() {
        if !node.is_object() {
            *node = json!({});
        }
        let m = node.as_object_mut().expect("made an object above");
        let last = i + 1 == path.len();
        let child = m.entry(pe.clone()).or_insert_with(|| json!({}));
        if last && child.as_object().is_some_and(|c| !c.is_empty()) {
            child.as_object_mut().expect("checked").insert(".".into(), json!({}));
        }
        node = child;
    }
}

/// The value at a member path.
pub fn get_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = object;
    for pe in path {
        node = step(node, pe)?;
    }
    Some(node)
}

fn step<'a>(node: &'a Value, pe: &str) -> Option<&'a Value> {
    let (kind, rest) = pe.split_once(':')?;
    match kind {
        "f" => node.get(rest),
        "k" => {
            let key: Map<String, Value> = serde_json::from_str(rest).ok()?;
            node.as_array()?.iter().find(|i| key.iter().all(|(k, v)| item_key(i, &[k.as_str()]).get(k) == Some(v)))
        }
        "v" => {
            let v: Value = serde_json::from_str(rest).ok()?;
            node.as_array()?.iter().find(|i| **i == v)
        }
        "i" => node.as_array()?.get(rest.parse::<usize>().ok()?),
        _ => None,
    }
}

/// Removes the value at a member path from the object.
fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else { return };
    let mut node = object;
    for pe in parent {
        let Some(next) = step_mut(node, pe) else { return };
        node = next;
    }
    let Some((kind, rest)) = last.split_once(':') else { return };
    match kind {
        "f" => {
            node.as_object_mut().map(|m| m.remove(rest));
        }
        "k" | "v" | "i" => {
            let target = get_at(node, std::slice::from_ref(last)).cloned();
            if let (Some(items), Some(t)) = (node.as_array_mut(), target) {
                items.retain(|i| *i != t);
            }
        }
        _ => {}
    }
}

/// After a removal: the lists and maps on `path` that it left empty go too, as nothing of
/// theirs is left to own.
fn prune_empty(object: &mut Value, path: &[String]) {
    for depth in (1..path.len()).rev() {
        let parent = &path[..depth];
        if get_at(object, parent)
            .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty) || v.as_object().is_some_and(Map::is_empty))
        {
            remove_at(object, parent);
        } else {
            return;
        }
    }
}

fn step_mut<'a>(node: &'a mut Value, pe: &str) -> Option<&'a mut Value> {
    let target = get_at(node, &[pe.to_string()])?.clone();
    let (kind, rest) = pe.split_once(':')?;
    match kind {
        "f" => node.get_mut(rest),
        _ => node.as_array_mut()?.iter_mut().find(|i| **i == target),
    }
}

/// Merges an applied object into the live one: maps field by field, associative lists item by
/// item by their keys, everything else replaced.
fn merge(live: &mut Value, applied: &Value, field: &str) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            for (k, v) in a {
                if v.is_null() {
                    continue;
                }
                match l.get_mut(k) {
                    Some(existing) => merge(existing, v, k),
                    None => {
                        l.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(a)) => match list_kind(field, a) {
            ListKind::Atomic => *l = a.clone(),
            ListKind::Set => {
                for v in a {
                    if !l.contains(v) {
                        l.push(v.clone());
                    }
                }
            }
            ListKind::Map(keys) => {
                // structured-merge-diff's `visitListItems` order: live-only items where they
                // were, shared items in the applied order, new items after the one before them.
                let lhs: Vec<Value> = std::mem::take(l);
                let lk: Vec<Map<String, Value>> = lhs.iter().map(|i| item_key(i, keys)).collect();
                let rk: Vec<Map<String, Value>> = a.iter().map(|i| item_key(i, keys)).collect();
                let mut shared = rk.iter().filter(|k| lk.contains(k)).cloned().collect::<Vec<_>>().into_iter();
                let mut next_shared = shared.next();
                let mut merged: Vec<Map<String, Value>> = Vec::new();
                let mut out = Vec::new();
                let (mut li, mut ri) = (0, 0);
                let merge_item = |lhs_item: Option<&Value>, rhs_item: &Value| {
                    let mut item = lhs_item.cloned().unwrap_or_else(|| json!({}));
                    merge(&mut item, rhs_item, field);
                    item
                };
                while li < lhs.len() || ri < a.len() {
                    if li < lhs.len() && ri < a.len() {
                        if lk[li] == rk[ri] {
                            merged.push(rk[ri].clone());
                            out.push(merge_item(Some(&lhs[li]), &a[ri]));
                            li += 1;
                            ri += 1;
                            next_shared = shared.next();
                            continue;
                        }
                        if rk.contains(&lk[li]) && next_shared.as_ref().is_some_and(|n| *n != lk[li]) {
                            li += 1;
                            continue;
                        }
                    }
                    if li < lhs.len() {
                        if !rk.contains(&lk[li]) {
                            out.push(lhs[li].clone());
                            li += 1;
                            continue;
                        } else if merged.contains(&lk[li]) {
                            li += 1;
                        }
                    }
                    if ri < a.len() {
                        let pe = rk[ri].clone();
                        merged.push(pe.clone());
                        let lhs_item = lk.iter().position(|k| *k == pe).map(|i| &lhs[i]);
                        out.push(merge_item(lhs_item, &a[ri]));
                        ri += 1;
                        if next_shared.as_ref() == Some(&pe) {
                            next_shared = shared.next();
                        }
                    }
                }
                *l = out;
            }
        },
        (l, a) => *l = a.clone(),
    }
}

/// A conflict: another manager owns a field the apply changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub path: String,
}

fn path_text(path: &[String]) -> String {
    path.iter().map(|pe| pe.strip_prefix("f:").map_or_else(|| format!("[{pe}]"), |f| format!(".{f}"))).collect()
}

fn entries(object: &Value) -> Vec<Value> {
    object["metadata"]["managedFields"].as_array().cloned().unwrap_or_default()
}

/// Server-side apply of `applied` by `manager` onto `live` (`None`: a create). Returns the
/// stored object (before defaulting), or the conflicts.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, Vec<Conflict>> {
    let mut object = live.cloned().unwrap_or_else(|| json!({}));
    let new_set = fieldset(applied);
    let mut managers = entries(&object);
    // Conflicts: someone else's field whose value this apply changes.
    let mut conflicts = Vec::new();
    for path in paths(&new_set) {
        // An associative list's item as a member (`.`): its fields are compared one by one.
        if path.last().is_some_and(|pe| pe.starts_with("k:")) {
            continue;
        }
        let changes = get_at(&object, &path) != get_at(applied, &path);
        for entry in &mut managers {
            if entry["manager"] == manager && entry["operation"] == "Apply" {
                continue;
            }
            if changes && contains(&entry["fieldsV1"], &path) {
                conflicts.push(Conflict {
                    manager: entry["manager"].as_str().unwrap_or_default().to_string(),
                    path: path_text(&path),
                });
                if force {
                    remove_path(&mut entry["fieldsV1"], &path);
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    // What this manager applied before and applies no more goes, unless someone else owns it.
    let old_set = managers
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == "Apply")
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or_else(|| json!({}));
    let mut gone: Vec<Vec<String>> = paths(&old_set).into_iter().filter(|p| !contains(&new_set, p)).collect();
    // Shallowest first: an item that goes takes its fields along (once they are gone its key
    // could no longer find it).
    gone.sort_by_key(Vec::len);
    for path in gone {
        let kept = managers
            .iter()
            .filter(|e| !(e["manager"] == manager && e["operation"] == "Apply"))
            .any(|e| owns_below(&e["fieldsV1"], &path))
            || owns_below(&new_set, &path);
        if !kept {
            remove_at(&mut object, &path);
            prune_empty(&mut object, &path);
        }
    }
    merge(&mut object, applied, "");
    managers.retain(|e| !(e["manager"] == manager && e["operation"] == "Apply"));
    managers.push(json!({"manager": manager, "operation": "Apply", "apiVersion": applied["apiVersion"],
        "time": now, "fieldsType": "FieldsV1", "fieldsV1": new_set}));
    managers.retain(|e| e["fieldsV1"].as_object().is_some_and(|m| !m.is_empty()));
    object["metadata"]["managedFields"] = Value::Array(managers);
    Ok(object)
}

/// Ownership after a merge patch (an update): the fields it changed become the updater's
/// (operation Update) and no one else's.
pub fn record_update(before: &Value, after: &mut Value, patch: &Value, manager: &str, now: &str) {
    let mut managers = entries(before);
    let changed: Vec<Vec<String>> =
        paths(&fieldset(patch)).into_iter().filter(|p| get_at(before, p) != get_at(after, p)).collect();
    let removed: Vec<Vec<String>> =
        paths(&fieldset(before)).into_iter().filter(|p| get_at(after, p).is_none()).collect();
    for entry in &mut managers {
        for p in changed.iter().chain(&removed) {
            remove_path(&mut entry["fieldsV1"], p);
        }
    }
    if !changed.is_empty() {
        let at = managers.iter().position(|e| e["manager"] == manager && e["operation"] == "Update");
        let mut set = at.map(|i| managers[i]["fieldsV1"].clone()).unwrap_or_else(|| json!({}));
        for p in &changed {
            insert_path(&mut set, p);
        }
        if let Some(i) = at {
            managers.remove(i);
        }
        managers.push(json!({"manager": manager, "operation": "Update", "apiVersion": after["apiVersion"],
            "time": now, "fieldsType": "FieldsV1", "fieldsV1": set}));
    }
    managers.retain(|e| e["fieldsV1"].as_object().is_some_and(|m| !m.is_empty()));
    after["metadata"]["managedFields"] = Value::Array(managers);
}

/// Sets `object[key]` to `value` when it is unset.
fn default(object: &mut Value, key: &str, value: Value) {
    if object.is_null() {
        *object = json!({});
    }
    if let Some(m) = object.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_string(), value);
    }
}

/// The defaults of the kinds k3d-gpu emits (see the module's provenance), then quantities
/// canonical. `cluster_ip` allocates a Service's address.
pub fn apply_defaults(object: &mut Value, cluster_ip: impl FnOnce() -> String) {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    match kind.as_str() {
        "Namespace" => {
            let name = object["metadata"]["name"].clone();
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            default(&mut object["spec"], "finalizers", json!(["kubernetes"]));
            default(&mut object["status"], "phase", json!("Active"));
        }
        "Secret" => default(object, "type", json!("Opaque")),
        "Service" => {
            let spec = &mut object["spec"];
            default(spec, "type", json!("ClusterIP"));
            default(spec, "sessionAffinity", json!("None"));
            for port in spec["ports"].as_array_mut().into_iter().flatten() {
                default(port, "protocol", json!("TCP"));
                let p = port["port"].clone();
                default(port, "targetPort", p);
            }
            if matches!(spec["type"].as_str(), Some("ClusterIP" | "NodePort" | "LoadBalancer")) {
                default(spec, "internalTrafficPolicy", json!("Cluster"));
                if spec["clusterIP"].is_null() {
                    let ip = cluster_ip();
                    spec["clusterIP"] = json!(ip);
                    spec["clusterIPs"] = json!([ip]);
                }
                default(spec, "ipFamilies", json!(["IPv4"]));
                default(spec, "ipFamilyPolicy", json!("SingleStack"));
            }
        }
        "PersistentVolumeClaim" => {
            default(&mut object["spec"], "volumeMode", json!("Filesystem"));
            default(&mut object["status"], "phase", json!("Pending"));
        }
        // k8s.io/kubernetes pkg/apis/core/v1/defaults.go SetDefaults_PersistentVolume: a static
        // PV is Retain and Filesystem unless it says otherwise, and starts Pending.
        "PersistentVolume" => {
            default(&mut object["spec"], "persistentVolumeReclaimPolicy", json!("Retain"));
            default(&mut object["spec"], "volumeMode", json!("Filesystem"));
            default(&mut object["status"], "phase", json!("Pending"));
        }
        "Deployment" => {
            let spec = &mut object["spec"];
            default(spec, "replicas", json!(1));
            default(&mut spec["strategy"], "type", json!("RollingUpdate"));
            if spec["strategy"]["type"] == "RollingUpdate" {
                default(&mut spec["strategy"]["rollingUpdate"], "maxUnavailable", json!("25%"));
                default(&mut spec["strategy"]["rollingUpdate"], "maxSurge", json!("25%"));
            }
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            pod_spec(&mut spec["template"]["spec"]);
        }
        "DaemonSet" => {
            let spec = &mut object["spec"];
            default(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                default(&mut spec["updateStrategy"]["rollingUpdate"], "maxUnavailable", json!(1));
                default(&mut spec["updateStrategy"]["rollingUpdate"], "maxSurge", json!(0));
            }
            default(spec, "revisionHistoryLimit", json!(10));
            pod_spec(&mut spec["template"]["spec"]);
        }
        "CustomResourceDefinition" => {
            default(&mut object["spec"], "conversion", json!({"strategy": "None"}));
            let names = object["spec"]["names"].clone();
            object["status"] = json!({"acceptedNames": names, "storedVersions":
                object["spec"]["versions"].as_array().into_iter().flatten().filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>(),
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}]});
        }
        _ => {}
    }
    canonical_quantities(object, "");
}

fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "securityContext", json!({}));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "schedulerName", json!("default-scheduler"));
    for field in ["containers", "initContainers"] {
        for c in spec[field].as_array_mut().into_iter().flatten() {
            container(c);
        }
    }
    for v in spec["volumes"].as_array_mut().into_iter().flatten() {
        for source in ["configMap", "secret", "projected", "downwardAPI"] {
            if v[source].is_object() {
                default(&mut v[source], "defaultMode", json!(420));
            }
        }
        if v["hostPath"].is_object() {
            default(&mut v["hostPath"], "type", json!(""));
        }
        let sources = v.as_object().map_or(0, |m| m.keys().filter(|k| *k != "name").count());
        if sources == 0 {
            v["emptyDir"] = json!({});
        }
    }
}

/// `parsers.ParseImageName`'s tag: `latest` when the reference names neither tag nor digest.
fn image_tag(image: &str) -> &str {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag,
        None if image.contains('@') => "",
        None => "latest",
    }
}

fn container(c: &mut Value) {
    let policy = if image_tag(c["image"].as_str().unwrap_or_default()) == "latest" { "Always" } else { "IfNotPresent" };
    default(c, "imagePullPolicy", json!(policy));
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    for p in c["ports"].as_array_mut().into_iter().flatten() {
        default(p, "protocol", json!("TCP"));
    }
    for e in c["env"].as_array_mut().into_iter().flatten() {
        if e["valueFrom"]["fieldRef"].is_object() {
            default(&mut e["valueFrom"]["fieldRef"], "apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if c[probe].is_object() {
            let p = &mut c[probe];
            default(p, "timeoutSeconds", json!(1));
            default(p, "periodSeconds", json!(10));
            default(p, "successThreshold", json!(1));
            default(p, "failureThreshold", json!(3));
            if p["httpGet"].is_object() {
                default(&mut p["httpGet"], "path", json!("/"));
                default(&mut p["httpGet"], "scheme", json!("HTTP"));
            }
        }
    }
}

/// Every quantity field written back canonical, a ResourceList's values first rounded up to
/// milli (`SetDefaults_ResourceList`).
fn canonical_quantities(value: &mut Value, parent: &str) {
    match value {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if k_is_quantity(parent, k)
                    && let Some(text) = quantity_text(v)
                {
                    let milli = matches!(parent, "limits" | "requests" | "capacity" | "allocatable" | "hard");
                    if let Some(c) = canonical_rounded(&text, milli) {
                        *v = json!(c);
                    }
                    continue;
                }
                canonical_quantities(v, k);
            }
        }
        Value::Array(items) => {
            for i in items {
                canonical_quantities(i, "");
            }
        }
        _ => {}
    }
}

/// The quantity-typed fields (`resource.Quantity` in the OpenAPI definitions) of the kinds
/// this server stores: `ResourceRequirements.limits`/`requests` (containers, PVCs),
/// `PersistentVolumeSpec.capacity`, `NodeStatus.capacity`/`allocatable`,
/// `ResourceQuotaSpec.hard`, `ResourceQuotaStatus.used`, `Overhead.podFixed`,
/// `EmptyDirVolumeSource.sizeLimit`. Written out here, apart from the product's list.
fn k_is_quantity(parent: &str, key: &str) -> bool {
    key == "sizeLimit"
        || matches!(parent, "limits" | "requests" | "capacity" | "allocatable" | "hard" | "used" | "podFixed")
}

fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The canonical text, rounded up to milli first where the API rounds a ResourceList.
fn canonical_rounded(text: &str, milli: bool) -> Option<String> {
    let canonical = super::quantity::canonical(text)?;
    if !milli {
        return Some(canonical);
    }
    // Rounding up to milli: a value finer than 1m becomes the next milli above it.
    match canonical.strip_suffix('n').or_else(|| canonical.strip_suffix('u')) {
        Some(_) => {
            let nanos_per_unit = if canonical.ends_with('n') { 1u128 } else { 1000 };
            let digits = canonical.trim_end_matches(['n', 'u']);
            let negative = digits.starts_with('-');
            let n: u128 = digits.trim_start_matches('-').parse().ok()?;
            let nanos = n * nanos_per_unit;
            let millis = nanos.div_ceil(1_000_000);
            let sign = if negative { "-" } else { "" };
            super::quantity::canonical(&format!("{sign}{millis}m"))
        }
        None => Some(canonical),
    }
}
