//! `inputs.observed`: the digest of the observed state as the plan's decisions read it, not of
//! the whole document. A rollout between `plan` and `apply` (status, resourceVersion,
//! generation, timestamps, other managers' fields, ResourceSlices republished) leaves it alone,
//! so a reviewed plan still applies; a hand edit of a field k3d-gpu owns, a recreated object
//! (new uid) or a new or missing one changes it (DESIGN.md §3, plan/v1).
//!
//! What is digested, exactly (docs/ARCHITECTURE.md says the same):
//! - the document's `schema`, the node image (reference, presence, id, labels) and every node
//!   container as observed (name, role, image, image id and version, k3s args, mounts, env,
//!   `--gpus`, running, the recorded cluster spec): the cluster's replace/start decisions;
//! - per Kubernetes node: its name, and the labels and annotations k3d-gpu manages — keys the
//!   graph sets, keys the node's managed-labels annotation lists, that annotation itself, and
//!   every key under a `k3d-gpu.io` prefix;
//! - per managed object: apiVersion, kind, namespace, name and uid; the labels and annotation
//!   the plan reads (managed-by, the fleet's config stamp, keep-on-removal, the data note); our
//!   managed-field set (the `fieldsV1` of manager `k3d-gpu`, entries merged) and the object's
//!   values at those fields. An object without an entry of ours (a saved document from before
//!   managedFields were kept) is digested whole, less status, resourceVersion, generation,
//!   creationTimestamp and managedFields.
//!
//! Not digested: node allocatable and readiness (verify reads them after apply), ResourceSlices,
//! other managers' fields.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::compile::{DesiredGraph, ResourceKind};
use crate::observed::{MANAGED_LABELS_ANNOTATION, Observed, managed};

/// Metadata the API server changes by itself, never a decision's input.
const VOLATILE_METADATA: &[&str] = &["resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"];

/// `sha256:` of [`project`].
pub fn observed_digest(graph: Option<&DesiredGraph>, observed: &Observed) -> String {
    crate::canonical::digest_presorted(&project(graph, observed))
}

/// The observed state cut down to what the plan reads (see the module's doc), as a value that
/// serialises to it. Each object's projection is a view of the observed object, made as it is
/// written and borrowing what it shows, so a digest of 100k objects streams them through the
/// hasher without building (or freeing) a second tree of them. Every field and map of it is
/// in sorted order, so serde_json's own bytes are the canonical ones
/// (`projection_bytes_are_canonical`).
pub fn project<'a>(graph: Option<&DesiredGraph>, observed: &'a Observed) -> Projection<'a> {
    let desired_keys: BTreeSet<&str> = graph
        .into_iter()
        .flat_map(|g| g.resources())
        .filter(|r| matches!(r.kind, ResourceKind::NodeLabel | ResourceKind::NodeAnnotation))
        .filter_map(|r| r.spec["key"].as_str())
        .collect();
    let kubernetes = observed.kubernetes.as_ref().map(|k| {
        let nodes: Vec<Value> = k
            .nodes
            .iter()
            .map(|n| {
                let listed = n.annotations.get(MANAGED_LABELS_ANNOTATION).map(|l| crate::observed::managed_labels(l));
                let ours = |key: &str| {
                    desired_keys.contains(key)
                        || key == MANAGED_LABELS_ANNOTATION
                        || listed.as_ref().is_some_and(|l| l.contains(key))
                        || key.split_once('/').is_some_and(|(prefix, _)| prefix.ends_with("k3d-gpu.io"))
                };
                let pick = |m: &std::collections::BTreeMap<String, String>| -> Map<String, Value> {
                    m.iter().filter(|(k, _)| ours(k)).map(|(k, v)| (k.clone(), json!(v))).collect()
                };
                json!({ "name": n.name, "labels": pick(&n.labels), "annotations": pick(&n.annotations) })
            })
            .collect();
        KubernetesProjection { nodes, objects: Objects(&k.objects) }
    });
    // The small parts as trees: their structs declare fields in their own order, a tree sorts.
    Projection {
        schema: &observed.schema,
        cluster: serde_json::to_value(&observed.cluster).expect("observed/v1 serialises"),
        node_image: serde_json::to_value(&observed.node_image).expect("observed/v1 serialises"),
        kubernetes,
    }
}

/// What [`project`] gives: the fields in the order their names sort, as canonical JSON has them.
#[derive(Serialize)]
pub struct Projection<'a> {
    cluster: Value,
    kubernetes: Option<KubernetesProjection<'a>>,
    node_image: Value,
    schema: &'a str,
}

#[derive(Serialize)]
pub struct KubernetesProjection<'a> {
    nodes: Vec<Value>,
    objects: Objects<'a>,
}

/// The managed objects, each projected by [`object`] only while it is serialised.
pub struct Objects<'a>(&'a [Value]);

impl Serialize for Objects<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for o in self.0 {
            seq.serialize_element(&object(o))?;
        }
        seq.end()
    }
}

/// One managed object as the plan reads it; fields sorted by name (`annotations` <
/// `apiVersion`: byte order).
#[derive(Serialize)]
struct ObjectView<'a> {
    annotations: Picked<'a>,
    #[serde(rename = "apiVersion")]
    api_version: &'a Value,
    kind: &'a Value,
    labels: Picked<'a>,
    managed_fields: Value,
    name: &'a Value,
    namespace: &'a Value,
    owned: Owned<'a>,
    uid: &'a Value,
}

/// An object's values at our managed fields, or (no entry of ours) the object less its
/// volatile parts; either written as it is.
#[derive(Serialize)]
#[serde(untagged)]
enum Owned<'a> {
    AtFields(Value),
    Whole(WithoutVolatile<'a>),
}

/// The labels (or annotations) of an object that the plan reads, as a map of those present.
/// Written from the object as it is serialised, nothing collected: [`LABELS_READ`] and
/// [`ANNOTATIONS_READ`] are in sorted order, as a map's keys are written.
struct Picked<'a> {
    map: Option<&'a Map<String, Value>>,
    keys: &'static [&'static str],
}

const LABELS_READ: &[&str] =
    &[crate::compile::MANAGED_BY.0, crate::compile::fleet::CONFIG_LABEL, crate::compile::KEEP_LABEL];
const ANNOTATIONS_READ: &[&str] = &[crate::compile::DATA_ANNOTATION];

impl Serialize for Picked<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.keys.iter().filter_map(|k| self.map.and_then(|m| m.get(*k)).map(|v| (*k, v))))
    }
}

fn object(o: &Value) -> ObjectView<'_> {
    let meta = &o["metadata"];
    let labels = Picked { map: meta["labels"].as_object(), keys: LABELS_READ };
    let annotations = Picked { map: meta["annotations"].as_object(), keys: ANNOTATIONS_READ };
    let (managed_fields, owned) = match managed::owned_set(o) {
        Some(set) => {
            let values = managed::owned_values(o, &set);
            (set, Owned::AtFields(values))
        }
        None => (Value::Null, Owned::Whole(WithoutVolatile(o))),
    };
    ObjectView {
        annotations,
        api_version: &o["apiVersion"],
        kind: &o["kind"],
        labels,
        managed_fields,
        name: &meta["name"],
        namespace: &meta["namespace"],
        owned,
        uid: &meta["uid"],
    }
}

/// [`without_volatile`] as a view: the object serialised less status and the volatile
/// metadata, nothing copied.
struct WithoutVolatile<'a>(&'a Value);

impl Serialize for WithoutVolatile<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(map) = self.0 else { return self.0.serialize(serializer) };
        let kept = |(key, _): &(&String, &Value)| key.as_str() != "status";
        let mut out = serializer.serialize_map(Some(map.iter().filter(kept).count()))?;
        for (key, value) in map.iter().filter(kept) {
            match value {
                Value::Object(meta) if key == "metadata" => out.serialize_entry(key, &WithoutVolatileMetadata(meta))?,
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// An object's metadata less [`VOLATILE_METADATA`], written in its own (sorted) order.
struct WithoutVolatileMetadata<'a>(&'a Map<String, Value>);

impl Serialize for WithoutVolatileMetadata<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().filter(|(k, _)| !VOLATILE_METADATA.contains(&k.as_str())))
    }
}

/// The object less what the API server changes by itself: status and the volatile metadata.
pub fn without_volatile(o: &Value) -> Value {
    strip_volatile(o.clone())
}

/// [`without_volatile`] of an object the caller gives up.
pub fn strip_volatile(mut o: Value) -> Value {
    if let Some(map) = o.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        // One pass over the entries, not a search per volatile key.
        meta.retain(|key, _| !VOLATILE_METADATA.contains(&key.as_str()));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{ObservedKubernetes, ObservedNode};

    fn observed(object: Value, slices: Vec<Value>) -> Observed {
        let node = ObservedNode {
            name: "n".into(),
            labels: [("kubernetes.io/hostname".to_string(), "n".to_string())].into(),
            annotations: [("k3d-gpu.io/favored-cpus".to_string(), "0-3".to_string())].into(),
            allocatable: [("cpu".to_string(), "8".to_string())].into(),
            ready: true,
        };
        Observed {
            kubernetes: Some(ObservedKubernetes {
                nodes: vec![node],
                objects: vec![object],
                resource_slices: slices,
                ..Default::default()
            }),
            ..Observed::nothing()
        }
    }

    fn daemonset() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "p", "namespace": "kube-system", "uid": "u1", "resourceVersion": "5", "generation": 1,
                "labels": {"app.kubernetes.io/managed-by": "k3d-gpu", "app": "p"},
                "managedFields": [{"manager": "k3d-gpu", "operation": "Apply", "fieldsType": "FieldsV1",
                    "time": "2026-01-01T00:00:00Z",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}, "f:app.kubernetes.io/managed-by": {}}},
                        "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"p\"}": {".": {}, "f:name": {}, "f:args": {}}}}}}}}]},
            "spec": {"revisionHistoryLimit": 10, "template": {"spec": {"containers": [{"name": "p", "args": ["-v=2"], "terminationMessagePath": "/dev/termination-log"}]}}},
            "status": {"numberReady": 0}})
    }

    /// The digest's bytes are serde_json's own (nothing sorted while hashing): they must be
    /// the canonical bytes of the projection, for every shape an object can take.
    #[test]
    fn projection_bytes_are_canonical() {
        let mut bare = daemonset();
        bare["metadata"].as_object_mut().unwrap().remove("managedFields");
        bare["metadata"]["annotations"] = json!({"k3d-gpu.io/data": "a model", "other": "x"});
        let odd = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "not a map", "status": 1});
        let mut o = observed(daemonset(), vec![]);
        o.kubernetes.as_mut().unwrap().objects.extend([bare.clone(), odd.clone(), json!([1, 2]), json!("x")]);
        o.node_image = Some(crate::observed::ObservedImage {
            reference: "k3d-gpu/node:1".into(),
            present: true,
            id: Some("sha256:1".into()),
            build_inputs: None,
            k3s_version: Some("v1.33.1+k3s1".into()),
        });
        let projection = project(None, &o);
        assert_eq!(crate::canonical::digest_presorted(&projection), crate::canonical::digest(&projection));
        let mut bytes = Vec::new();
        crate::canonical::write_presorted(&mut bytes, &projection).unwrap();
        assert_eq!(bytes, crate::canonical::to_bytes(&projection));
        // The view of an object less its volatile parts shows what the copy less them holds.
        for object in [bare, odd, daemonset(), json!(null)] {
            assert_eq!(
                crate::canonical::to_bytes(&WithoutVolatile(&object)),
                crate::canonical::to_bytes(&without_volatile(&object))
            );
        }
    }

    /// `Picked` writes its keys in the order listed, which must be a map's own.
    #[test]
    fn the_keys_read_are_listed_in_sorted_order() {
        assert!(LABELS_READ.is_sorted() && ANNOTATIONS_READ.is_sorted());
    }

    #[test]
    fn a_rollout_leaves_the_digest_alone() {
        let before = observed_digest(None, &observed(daemonset(), vec![]));
        let mut rolled = daemonset();
        rolled["status"] = json!({"numberReady": 1, "updatedNumberScheduled": 1});
        rolled["metadata"]["resourceVersion"] = json!("9");
        rolled["metadata"]["generation"] = json!(2);
        rolled["metadata"]["managedFields"][0]["time"] = json!("2026-01-01T00:01:00Z");
        // A field nobody of ours owns (a default, another manager's).
        rolled["spec"]["revisionHistoryLimit"] = json!(5);
        let mut changed = observed(rolled, vec![json!({"kind": "ResourceSlice", "metadata": {"name": "s"}})]);
        changed.kubernetes.as_mut().unwrap().nodes[0].allocatable.insert("gpu.intel.com/i915".into(), "1".into());
        changed.kubernetes.as_mut().unwrap().nodes[0].labels.insert("feature.node.kubernetes.io/x".into(), "y".into());
        assert_eq!(observed_digest(None, &changed), before);
    }

    #[test]
    fn owned_fields_identity_and_presence_change_the_digest() {
        let before = observed_digest(None, &observed(daemonset(), vec![]));
        let mut edited = daemonset();
        edited["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-v=4"]);
        assert_ne!(observed_digest(None, &observed(edited, vec![])), before, "owned field");
        let mut recreated = daemonset();
        recreated["metadata"]["uid"] = json!("u2");
        assert_ne!(observed_digest(None, &observed(recreated, vec![])), before, "new uid");
        let mut none = observed(daemonset(), vec![]);
        none.kubernetes.as_mut().unwrap().objects.clear();
        assert_ne!(observed_digest(None, &none), before, "missing object");
        let mut label = observed(daemonset(), vec![]);
        label.kubernetes.as_mut().unwrap().nodes[0].annotations.insert("k3d-gpu.io/favored-cpus".into(), "0-7".into());
        assert_ne!(observed_digest(None, &label), before, "managed node annotation");
    }
}
