//! The golden form of a desired graph: small enough to read in a diff. `graph --json` runs to
//! hundreds of kilobytes, almost all of it catalog manifests copied verbatim (CRD schemas);
//! regenerated wholesale, such a golden is unreviewable. Here each resource is one entry: its
//! id, kind, change, component, dependencies and spec. A spec that comes from a catalog
//! manifest is its digest, its document's (share/ file, index, digest) and only what compile
//! changed in it (labels, pinned images, plugin args); any other spec (what k3d-gpu
//! generates: the cluster, the agent, node labels) is printed whole. The digest
//! of the whole `graph --json` document heads the file, so a change to any byte of any body
//! still changes the golden, and says where.

use k3d_gpu::catalog::Catalog;
use serde_json::Value;

/// The golden text of `graph`, compiled with `catalog`.
pub fn of(graph: &k3d_gpu::compile::DesiredGraph, catalog: &Catalog) -> String {
    render(&serde_json::from_slice(&graph.to_json()).expect("graph/v1 is JSON"), catalog)
}

/// The golden text of the graph/v1 document `graph` (as `graph --json` prints it), reading
/// catalog documents from `catalog`.
pub fn render(graph: &Value, catalog: &Catalog) -> String {
    let mut out = String::from(
        "# A desired graph, one entry per resource (tests/support/graph_golden.rs). A spec from a\n\
         # catalog manifest shows its digest, its document's, and what compile changed in it;\n\
         # any other spec is shown whole. Digests are sha256 of canonical JSON; `graph` is the\n\
         # digest of the whole `graph --json` document.\n",
    );
    out += &format!("schema: {}\n", compact(&graph["schema"]));
    out += &format!("graph: {}\n", k3d_gpu::canonical::digest(graph));
    out += &format!("agent: {}\n", indent(&pretty(&graph["agent"]), ""));
    out += "warnings:\n";
    for w in graph["warnings"].as_array().into_iter().flatten() {
        out += &format!("  - {}\n", compact(w));
    }
    for r in graph["resources"].as_array().into_iter().flatten() {
        out += &entry(r, catalog);
    }
    out
}

fn entry(r: &Value, catalog: &Catalog) -> String {
    let id = r["id"].as_str().unwrap_or("?");
    let mut out = format!("\n== {id}\nkind: {}  change: {}", text(&r["kind"]), text(&r["change"]));
    if let Some(c) = r["component"].as_str() {
        out += &format!("  component: {c}");
    }
    out += "\ndepends_on:";
    match r["depends_on"].as_array() {
        Some(deps) if !deps.is_empty() => deps.iter().for_each(|d| out += &format!("\n  {}", text(d))),
        _ => out += " []",
    }
    let spec = &r["spec"];
    match source(r, catalog) {
        Some((manifest, index, doc)) => {
            out += &format!("\nspec: {}\n", k3d_gpu::canonical::digest(spec));
            out += &format!("from: {manifest} document {} {}\n", index + 1, k3d_gpu::canonical::digest(doc));
            let mut changes = Vec::new();
            diff(String::new(), Some(doc), Some(spec), &mut changes);
            if changes.is_empty() {
                out += "  (verbatim)\n";
            }
            changes.iter().for_each(|c| out += &format!("  {c}\n"));
        }
        // Shown whole, the spec needs no digest of its own (the graph's covers it); a short
        // one (a node label, a check) reads best on one line.
        None if compact(spec).len() <= SHORT => out += &format!("\nspec: {}\n", compact(spec)),
        None => out += &format!("\nspec: {}\n", pretty(spec)),
    }
    out
}

/// The longest spec printed on one line.
const SHORT: usize = 120;

/// The catalog document an object resource was made from: its component's manifest, the
/// document's index in it, and the document. Matched by id, as compile names objects; else
/// by kind and namespace where the object's name is the document's with a suffix (a fleet's
/// per-node copy of a DaemonSet, `intel-gpu-plugin-21715201`).
fn source<'a>(r: &Value, catalog: &'a Catalog) -> Option<(String, usize, &'a Value)> {
    let component = catalog.components.get(r["component"].as_str()?)?;
    let id = r["id"].as_str()?;
    let docs = component.objects.get().ok()?;
    let spec = &r["spec"];
    let copy_of = |d: &Value| {
        let name = spec["metadata"]["name"].as_str().unwrap_or_default();
        let base = d["metadata"]["name"].as_str().unwrap_or_default();
        ["apiVersion", "kind"].iter().all(|k| d[k] == spec[k])
            && d["metadata"]["namespace"] == spec["metadata"]["namespace"]
            && name.strip_prefix(base).is_some_and(|rest| rest.starts_with('-'))
    };
    let (index, doc) = docs
        .iter()
        .enumerate()
        .find(|(_, d)| k3d_gpu::compile::object_id(d) == id)
        .or_else(|| docs.iter().enumerate().find(|(_, d)| copy_of(d)))?;
    let manifest = if component.user { component.manifest.clone() } else { format!("share/{}", component.manifest) };
    Some((manifest, index, doc))
}

/// What changed from `old` to `new`, one line per leaf: `+ path: value` added, `- path`
/// removed, `~ path: old -> new` replaced. Paths are JSON pointers. An array that grew at its
/// end lists what was appended; one changed otherwise is compared element by element when its
/// length is the same, and replaced whole when not.
pub fn diff(path: String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<String>) {
    match (old, new) {
        (Some(a), Some(b)) if a == b => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let key = k.replace('~', "~0").replace('/', "~1");
                diff(format!("{path}/{key}"), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() || b.starts_with(a) => {
            for i in 0..b.len() {
                diff(format!("{path}/{i}"), a.get(i), b.get(i), out);
            }
        }
        (None, Some(b)) => out.push(format!("+ {path}: {}", compact(b))),
        (Some(_), None) => out.push(format!("- {path}")),
        (Some(a), Some(b)) => out.push(format!("~ {path}: {} -> {}", compact(a), compact(b))),
        (None, None) => {}
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).expect("a JSON value serialises")
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("a JSON value serialises")
}

fn text(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| compact(v))
}

/// `text` with every line after the first indented by `by`.
fn indent(text: &str, by: &str) -> String {
    text.replace('\n', &format!("\n{by}"))
}
