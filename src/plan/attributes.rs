//! What a create shows of what it creates, for the plan's text: the attributes a person
//! reviews before saying yes (the cluster's image, ports, volumes, registries, k3s arguments
//! and model store; a workload's images, node selector, arguments and resources; a
//! ConfigMap's keys; a Secret's keys and never its values). `plan --json` keeps every field;
//! this is a reading of it, bounded: at most [`MAX_LINES`] lines per resource, then
//! "… N more".
//!
//! It reads the action's `after`, which [`super::assemble`] has masked by the one rule of
//! `crate::secrets` (the same masking an update's diff shows), so a secret is "(sensitive)"
//! here before anything is formatted; a Secret's data is not read at all, only its keys. A
//! long or multi-line value is summarised by its size and digest, as it is in no other place
//! of the text, so a 40 KB CRD schema is one line. Pure; the lines are raw text, escaped by
//! the caller (`render`) like every line of the plan.

use serde_json::{Map, Value};

use crate::secrets::{SENSITIVE, SENSITIVE_CHANGED};

/// The most lines one resource's attributes take; the rest is counted.
pub const MAX_LINES: usize = 30;

/// The longest value shown as it is: a longer one (or one of several lines) is its size and
/// digest.
const LONG: usize = 80;

/// Where packed words (arguments) wrap.
const WIDTH: usize = 100;

/// The attribute lines of a resource created with `after` as its spec (`id` says what it is),
/// cut at [`MAX_LINES`].
pub fn lines(id: &str, after: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if id == crate::compile::NODE_IMAGE_ID {
        // The reason says the reference and whether it is built (from what) or pulled.
        generic(after, &["reference", "source", "context"], &mut out);
    } else if id.starts_with("k3d/cluster/") {
        cluster(after, &mut out);
    } else if id.starts_with("k8s/") {
        object(after, &mut out);
    } else if id.starts_with("node-label/") || id.starts_with("node-annotation/") {
        generic(after, &["key"], &mut out);
    } else {
        generic(after, &[], &mut out);
    }
    cap(out)
}

fn cap(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() > MAX_LINES {
        let more = lines.len() - (MAX_LINES - 1);
        lines.truncate(MAX_LINES - 1);
        lines.push(format!("… {more} more (`plan --json` has every field)"));
    }
    lines
}

/// One shell word of an argument list. A create has no "before", so a masked part reads
/// "(sensitive)" as `value` shows it, not "(sensitive, changed)".
fn word(text: &str) -> String {
    crate::shell::word(&text.replace(SENSITIVE_CHANGED, SENSITIVE))
}

/// A scalar or short value as it reads; a masked secret as "(sensitive)"; a long or
/// multi-line one as its size and digest.
fn value(v: &Value) -> String {
    let text = match v {
        Value::String(s) if s == SENSITIVE || s == SENSITIVE_CHANGED => return SENSITIVE.to_string(),
        Value::String(s) => s.clone(),
        Value::Null => return "(unset)".to_string(),
        other => other.to_string(),
    };
    if is_long(&text) { summary(&text) } else { text }
}

fn is_long(text: &str) -> bool {
    text.chars().count() > LONG || text.contains('\n')
}

/// "(1234 bytes, sha256:0123456789ab)".
fn summary(text: &str) -> String {
    let digest = crate::canonical::sha256(text.as_bytes());
    format!("({} bytes, {})", text.len(), &digest[..digest.len().min(19)])
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn entries(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flat_map(Map::iter)
}

/// `k=v, k=v` of a map of strings (labels, a node selector, resource quantities).
fn pairs(v: &Value) -> String {
    entries(v).map(|(k, v)| format!("{k}={}", value(v))).collect::<Vec<_>>().join(", ")
}

/// `label: w1 w2 …`, wrapped at [`WIDTH`] with the continuation under the first word.
fn packed(label: &str, words: &[String], out: &mut Vec<String>) {
    let indent = " ".repeat(label.len() + 2);
    let mut line = format!("{label}:");
    let mut first = true;
    for word in words {
        if !first && line.len() + 1 + word.len() > WIDTH {
            out.push(std::mem::replace(&mut line, indent.clone() + word));
            continue;
        }
        line.push(' ');
        line.push_str(word);
        first = false;
    }
    out.push(line);
}

/// Every top-level key but `skip`, each on its line (an empty map or list is left out).
fn generic(spec: &Value, skip: &[&str], out: &mut Vec<String>) {
    let Some(map) = spec.as_object() else {
        out.push(format!("value: {}", value(spec)));
        return;
    };
    for (key, v) in map {
        let empty = matches!(v, Value::Object(m) if m.is_empty()) || matches!(v, Value::Array(a) if a.is_empty());
        if skip.contains(&key.as_str()) || empty {
            continue;
        }
        match v {
            // A map of scalars (a node image's build args): one line per entry.
            Value::Object(m) if m.values().all(|e| !e.is_object() && !e.is_array()) => {
                for (k, e) in m {
                    out.push(format!("{key} {k}: {}", value(e)));
                }
            }
            _ => out.push(format!("{key}: {}", value(v))),
        }
    }
}

/// The k3d cluster, in the order a reviewer weighs it; a key not named here is shown as it
/// is, so nothing the spec gains is hidden.
fn cluster(spec: &Value, out: &mut Vec<String>) {
    const SHOWN: &[&str] = &[
        "name",
        "image",
        "node_image_inputs",
        "servers",
        "agents",
        "api_host_ip",
        "api_port",
        "gpus",
        "devices",
        "ports",
        "volumes",
        "user_volumes",
        "model_store",
        "registries",
        "node_labels",
        "k3s_args",
    ];
    let name = str_of(spec, "name");
    out.push(format!("image: {}", value(&spec["image"])));
    out.push(format!("nodes: {} server(s), {} agent(s)", spec["servers"], spec["agents"]));
    let port = match &spec["api_port"] {
        Value::Null => "a free port k3d picks".to_string(),
        p => value(p),
    };
    out.push(format!("API server: {}, {port}", value(&spec["api_host_ip"])));
    if !spec["gpus"].is_null() {
        out.push(format!("gpus: {}", value(&spec["gpus"])));
    }
    for (vendor, d) in entries(&spec["devices"]) {
        let nodes: Vec<String> = items(&d["nodes"]).iter().map(value).collect();
        let drivers: Vec<String> = items(&d["drivers"]).iter().map(value).collect();
        let drivers = if drivers.is_empty() { String::new() } else { format!(" (driver {})", drivers.join(", ")) };
        out.push(format!("devices {vendor}: {}{drivers}", nodes.join(", ")));
    }
    let filters = |v: &Value| {
        let f: Vec<String> = items(&v["nodes"]).iter().map(value).collect();
        if f.is_empty() { String::new() } else { format!(" @{}", f.join(";")) }
    };
    for p in items(&spec["ports"]) {
        out.push(format!(
            "port: {}:{} → {}/{}{}",
            value(&p["host_ip"]),
            p["host_port"],
            p["container_port"],
            value(&p["protocol"]),
            filters(p)
        ));
    }
    for (label, key) in [("volume", "volumes"), ("your volume", "user_volumes")] {
        for v in items(&spec[key]) {
            let mode = if v["read_only"] == true { "ro" } else { "rw" };
            out.push(format!("{label}: {} → {} ({mode}){}", value(&v["host"]), value(&v["node"]), filters(v)));
        }
    }
    if spec["model_store"].is_object() {
        let store = &spec["model_store"];
        let host = crate::compile::models::describe(store, name);
        out.push(format!("model store: {host} → {}", value(&store["node"])));
    }
    let registries = &spec["registries"];
    for (registry, endpoints) in entries(&registries["mirrors"]) {
        let endpoints: Vec<String> = items(endpoints).iter().map(value).collect();
        out.push(format!("registry mirror {registry}: {}", endpoints.join(", ")));
    }
    if registries["credentials"].is_object() {
        // The file's name and the registries it covers; never what it holds.
        let c = &registries["credentials"];
        let covers: Vec<String> = items(&c["registries"]).iter().map(value).collect();
        out.push(format!("registry credentials: {} ({})", value(&c["file"]), covers.join(", ")));
    }
    if registries["create"].is_object() {
        let c = &registries["create"];
        out.push(format!(
            "registry created: {} on {}:{} (image {}{})",
            value(&c["name"]),
            value(&c["host_ip"]),
            c["host_port"],
            value(&c["image"]),
            if c["proxy"].is_null() { String::new() } else { format!(", proxy {}", value(&c["proxy"])) }
        ));
    }
    for l in items(&spec["node_labels"]) {
        out.push(format!("node label: {} @{}", value(&l["label"]), value(&l["nodes"])));
    }
    // k3s arguments by node filter, in the order first given, packed.
    let mut by_filter: Vec<(String, Vec<String>)> = Vec::new();
    for a in items(&spec["k3s_args"]) {
        let filter = value(&a["nodes"]);
        let arg = word(a["arg"].as_str().unwrap_or_default());
        match by_filter.iter_mut().find(|(f, _)| *f == filter) {
            Some((_, args)) => args.push(arg),
            None => by_filter.push((filter, vec![arg])),
        }
    }
    for (filter, args) in by_filter {
        packed(&format!("k3s args @{filter}"), &args, out);
    }
    let rest: Map<String, Value> = spec
        .as_object()
        .into_iter()
        .flat_map(Map::iter)
        .filter(|(k, _)| !SHOWN.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    generic(&Value::Object(rest), &[], out);
}

/// A Kubernetes object, by kind.
fn object(o: &Value, out: &mut Vec<String>) {
    let spec = &o["spec"];
    match str_of(o, "kind") {
        "Secret" => {
            // Keys only: a value, or anything made from one, is never shown.
            if let Some(t) = o["type"].as_str() {
                out.push(format!("type: {t}"));
            }
            let mut keys: Vec<&String> =
                ["data", "stringData"].iter().flat_map(|k| entries(&o[*k])).map(|(k, _)| k).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                out.push(format!("data {key}: {SENSITIVE}"));
            }
        }
        "ConfigMap" => {
            for field in ["data", "binaryData"] {
                for (key, v) in entries(&o[field]) {
                    out.push(format!("{field} {key}: {}", value(v)));
                }
            }
        }
        "CustomResourceDefinition" => {
            let versions: Vec<String> = items(&spec["versions"]).iter().map(|v| value(&v["name"])).collect();
            out.push(format!(
                "defines: {}.{} ({}), versions {}",
                value(&spec["names"]["kind"]),
                value(&spec["group"]),
                value(&spec["scope"]),
                versions.join(", ")
            ));
            out.push(format!("schema: {}", summary(&spec["versions"].to_string())));
        }
        "ClusterRole" | "Role" => {
            for rule in items(&o["rules"]) {
                let list = |k: &str| items(&rule[k]).iter().map(value).collect::<Vec<_>>().join(", ");
                let groups: Vec<String> =
                    items(&rule["apiGroups"]).iter().map(|g| if g == "" { "core".into() } else { value(g) }).collect();
                let what = if rule["nonResourceURLs"].is_array() {
                    list("nonResourceURLs")
                } else {
                    format!("{} ({})", list("resources"), groups.join(", "))
                };
                out.push(format!("may {} on {what}", list("verbs")));
            }
        }
        "ClusterRoleBinding" | "RoleBinding" => {
            out.push(format!("role: {} {}", value(&o["roleRef"]["kind"]), value(&o["roleRef"]["name"])));
            for s in items(&o["subjects"]) {
                let ns = s["namespace"].as_str().map(|n| format!("{n}/")).unwrap_or_default();
                out.push(format!("subject: {} {ns}{}", value(&s["kind"]), value(&s["name"])));
            }
        }
        "Service" => {
            out.push(format!("type: {}", value(&spec["type"])));
            for p in items(&spec["ports"]) {
                let target =
                    if p["targetPort"].is_null() { String::new() } else { format!(" → {}", value(&p["targetPort"])) };
                let name = p["name"].as_str().map(|n| format!(" {n}")).unwrap_or_default();
                let proto = p["protocol"].as_str().unwrap_or("TCP");
                out.push(format!("port{name}: {}/{proto}{target}", p["port"]));
            }
            if spec["selector"].is_object() {
                out.push(format!("selector: {}", pairs(&spec["selector"])));
            }
        }
        "PersistentVolume" => {
            out.push(format!("capacity: {}", pairs(&spec["capacity"])));
            for source in ["local", "hostPath"] {
                if spec[source].is_object() {
                    out.push(format!("{source} path: {}", value(&spec[source]["path"])));
                }
            }
            optional(spec, "storageClassName", "storage class", out);
            optional(spec, "persistentVolumeReclaimPolicy", "reclaim policy", out);
        }
        "PersistentVolumeClaim" => {
            out.push(format!("requests: {}", pairs(&spec["resources"]["requests"])));
            optional(spec, "storageClassName", "storage class", out);
            optional(spec, "volumeName", "volume", out);
        }
        "Namespace" | "ServiceAccount" => {}
        "Pod" => pod(spec, out),
        _ if spec["template"]["spec"].is_object() => {
            optional(spec, "replicas", "replicas", out);
            pod(&spec["template"]["spec"], out);
        }
        // A custom resource that templates pods (a SandboxTemplate): its pod, and the rest.
        _ if spec["podTemplate"]["spec"].is_object() => {
            generic(spec, &["podTemplate"], out);
            pod(&spec["podTemplate"]["spec"], out);
        }
        // A custom resource, or a kind not named here: its spec's top-level fields (or the
        // object's, for a kind without a spec), long ones by digest.
        _ if spec.is_object() => generic(spec, &[], out),
        _ => generic(o, &["apiVersion", "kind", "metadata", "status"], out),
    }
}

fn optional(v: &Value, key: &str, label: &str, out: &mut Vec<String>) {
    if !v[key].is_null() {
        out.push(format!("{label}: {}", value(&v[key])));
    }
}

/// A pod's spec: where it runs, what it runs, what of the host it reaches.
fn pod(spec: &Value, out: &mut Vec<String>) {
    if spec["nodeSelector"].is_object() {
        out.push(format!("node selector: {}", pairs(&spec["nodeSelector"])));
    }
    optional(spec, "runtimeClassName", "runtime class", out);
    optional(spec, "serviceAccountName", "service account", out);
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[host] == true {
            out.push(format!("{host}: true"));
        }
    }
    for (kind, key) in [("init container", "initContainers"), ("container", "containers")] {
        for c in items(&spec[key]) {
            container(kind, c, out);
        }
    }
    for v in items(&spec["volumes"]) {
        let name = value(&v["name"]);
        let Some((source, detail)) = v.as_object().into_iter().flat_map(Map::iter).find(|(k, _)| *k != "name") else {
            continue;
        };
        let what = ["path", "claimName", "name", "secretName"]
            .iter()
            .find_map(|k| detail[*k].as_str())
            .map(|w| format!(" {w}"))
            .unwrap_or_default();
        out.push(format!("volume {name}: {source}{what}"));
    }
}

fn container(kind: &str, c: &Value, out: &mut Vec<String>) {
    out.push(format!("{kind} {}: {}", value(&c["name"]), str_of(c, "image")));
    // Each as one shell word; a long one (a script) by its digest.
    let words = |k: &str| -> Vec<String> {
        items(&c[k])
            .iter()
            .map(|w| {
                let text = w.as_str().map_or_else(|| w.to_string(), str::to_string);
                if is_long(&text) { summary(&text) } else { word(&text) }
            })
            .collect()
    };
    for key in ["command", "args"] {
        let w = words(key);
        if !w.is_empty() {
            packed(&format!("  {key}"), &w, out);
        }
    }
    for e in items(&c["env"]) {
        let name = value(&e["name"]);
        if let Some((source, reference)) = e["valueFrom"].as_object().and_then(|m| m.iter().next()) {
            // Where it comes from (a Secret's name and key, a field's path), never its value.
            let mut from = vec![source.clone()];
            from.extend(
                ["name", "key", "fieldPath", "resource"]
                    .iter()
                    .filter_map(|k| reference[*k].as_str().map(str::to_string)),
            );
            out.push(format!("  env {name}: from {}", from.join(" ")));
        } else {
            out.push(format!("  env {name}: {}", value(&e["value"])));
        }
    }
    let resources = &c["resources"];
    let parts: Vec<String> = ["limits", "requests"]
        .iter()
        .filter(|k| resources[**k].is_object())
        .map(|k| format!("{k} {}", pairs(&resources[*k])))
        .collect();
    if !parts.is_empty() {
        out.push(format!("  resources: {}", parts.join("; ")));
    }
    let security = &c["securityContext"];
    if security["privileged"] == true {
        out.push("  privileged: true".to_string());
    }
    let added: Vec<String> = items(&security["capabilities"]["add"]).iter().map(value).collect();
    if !added.is_empty() {
        out.push(format!("  capabilities added: {}", added.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_or_multi_line_value_is_its_size_and_digest() {
        assert_eq!(value(&json!("short")), "short");
        let long = "x".repeat(81);
        let shown = value(&json!(long));
        assert!(shown.starts_with("(81 bytes, sha256:") && shown.len() < 40, "{shown}");
        assert!(value(&json!("a\nb")).starts_with("(3 bytes, sha256:"));
        assert_eq!(value(&json!(SENSITIVE_CHANGED)), SENSITIVE);
        let masked = word(&format!("--token={SENSITIVE_CHANGED}"));
        assert!(masked.contains(SENSITIVE) && !masked.contains("changed"), "{masked}");
    }

    #[test]
    fn lines_are_capped_with_a_count_of_the_rest() {
        let data: Map<String, Value> = (0..50).map(|i| (format!("k{i:02}"), json!("v"))).collect();
        let lines = lines("k8s/core/ConfigMap/ns/x", &json!({"kind": "ConfigMap", "data": data}));
        assert_eq!(lines.len(), MAX_LINES);
        assert_eq!(lines[MAX_LINES - 1], "… 21 more (`plan --json` has every field)");
    }

    #[test]
    fn a_secret_shows_its_keys_and_never_a_value() {
        // Even a value the masking missed (a plan made by hand) is not read.
        let secret = json!({"kind": "Secret", "type": "Opaque", "data": {"password": "aHVudGVyMg=="},
            "stringData": {"token": "hunter2"}});
        let lines = lines("k8s/core/Secret/ns/s", &secret);
        assert_eq!(lines, ["type: Opaque", "data password: (sensitive)", "data token: (sensitive)"]);
    }

    #[test]
    fn words_are_packed_and_wrapped() {
        let mut out = Vec::new();
        let words: Vec<String> = (0..30).map(|i| format!("--flag-{i:02}")).collect();
        packed("args", &words, &mut out);
        assert!(out.len() > 1 && out.iter().all(|l| l.len() <= WIDTH), "{out:?}");
        assert!(out[1].starts_with("      --flag"), "{out:?}");
        assert_eq!(out.join(" ").split_whitespace().filter(|w| w.starts_with("--")).count(), 30);
    }
}
