//! The observed objects as the plan reads them: each object's id and the few labels and
//! annotations its decisions turn on, looked up once. A plan of 100k observed objects used to
//! look each up again in every step (the id, the owner filter, the delete loop, the delete
//! order), each lookup a walk into a tree spread over hundreds of megabytes: a quarter of
//! that plan's time. The steps now read a small record per object, in one array.

use serde_json::Value;

/// One observed object's fields the plan decides by.
pub(super) struct Seen<'a> {
    pub api_version: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    /// `app.kubernetes.io/managed-by: k3d-gpu`.
    pub managed: bool,
    /// The config stamp of an existing cluster's objects (`compile::fleet::CONFIG_LABEL`).
    pub stamp: Option<&'a str>,
    /// `k3d-gpu.io/keep-on-removal: "true"` (`compile::KEEP_LABEL`).
    pub keep: bool,
    /// What the data is, as the compiler described it (`compile::DATA_ANNOTATION`).
    pub data_note: Option<&'a str>,
    /// The host directory of a model store (`compile::models::HOST_DIR_ANNOTATION`).
    pub host_dir: Option<&'a str>,
    /// A CRD's `spec.group` and `spec.names.kind`: the kind whose objects it takes along.
    pub defines: Option<(&'a str, &'a str)>,
}

impl<'a> Seen<'a> {
    pub fn of(object: &'a Value) -> Seen<'a> {
        let field = |name: &str| object.get(name);
        let meta = field("metadata");
        let in_meta = |map: &str, key: &str| meta.and_then(|m| m.get(map)).and_then(|m| m.get(key));
        let text = |v: Option<&'a Value>| v.and_then(Value::as_str);
        let api_version = text(field("apiVersion"));
        let kind = text(field("kind"));
        let namespace = text(meta.and_then(|m| m.get("namespace")));
        let name = text(meta.and_then(|m| m.get("name")));
        let defines = match kind {
            Some("CustomResourceDefinition") => {
                let spec = field("spec");
                let group = text(spec.and_then(|s| s.get("group")));
                let names_kind = text(spec.and_then(|s| s.get("names")).and_then(|n| n.get("kind")));
                group.zip(names_kind)
            }
            _ => None,
        };
        Seen {
            api_version,
            kind,
            namespace,
            name,
            managed: in_meta("labels", crate::compile::MANAGED_BY.0).is_some_and(|v| v == crate::compile::MANAGED_BY.1),
            stamp: text(in_meta("labels", crate::compile::fleet::CONFIG_LABEL)),
            keep: in_meta("labels", crate::compile::KEEP_LABEL).is_some_and(|v| v == "true"),
            data_note: text(in_meta("annotations", crate::compile::DATA_ANNOTATION)),
            host_dir: text(in_meta("annotations", crate::compile::models::HOST_DIR_ANNOTATION)),
            defines,
        }
    }

    /// Its id (`compile::object_id`), from the fields read.
    pub fn id(&self) -> String {
        crate::compile::object_id_of(self.api_version, self.kind, self.namespace, self.name)
    }

    /// Whether deleting it deletes what lives in it (a namespace) or is of its kind (a CRD).
    pub fn cascades(&self) -> bool {
        matches!(self.kind, Some("Namespace" | "CustomResourceDefinition"))
    }
}

/// The observed objects by id, sorted (of two with one id, the later one, as the API's list
/// has no duplicates and a hand-made document's last word wins). A sorted list, not a map: a
/// hundred thousand ids are sorted once rather than inserted one by one.
pub(super) struct Live {
    pub entries: Vec<(String, usize)>,
}

impl Live {
    pub fn new(seen: &[Seen]) -> Live {
        let mut entries: Vec<(String, usize)> = seen.iter().enumerate().map(|(i, s)| (s.id(), i)).collect();
        // Among equal ids the later index first, so that dedup (which keeps the first) keeps it.
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        entries.dedup_by(|a, b| a.0 == b.0);
        Live { entries }
    }

    pub fn get<'a>(&self, id: &str, objects: &'a [Value]) -> Option<&'a Value> {
        let i = self.entries.binary_search_by(|(e, _)| e.as_str().cmp(id)).ok()?;
        Some(&objects[self.entries[i].1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the record holds is what a lookup in the object gives, for odd shapes too.
    #[test]
    fn the_record_reads_what_the_object_says() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "xs.example.io", "labels": {"app.kubernetes.io/managed-by": "k3d-gpu",
                "k3d-gpu.io/config": "gpu", "k3d-gpu.io/keep-on-removal": "true"},
                "annotations": {"k3d-gpu.io/data": "a model"}},
            "spec": {"group": "example.io", "names": {"kind": "X"}}});
        let seen = Seen::of(&crd);
        assert_eq!(seen.id(), crate::compile::object_id(&crd));
        assert_eq!(seen.id(), "k8s/apiextensions.k8s.io/CustomResourceDefinition/xs.example.io");
        assert!(seen.managed && seen.keep && seen.cascades());
        assert_eq!((seen.stamp, seen.data_note, seen.host_dir), (Some("gpu"), Some("a model"), None));
        assert_eq!(seen.defines, Some(("example.io", "X")));

        // Labels that are not the exact strings, metadata that is not a map, no kind at all.
        for odd in [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n",
                "labels": {"app.kubernetes.io/managed-by": "K3D-GPU", "k3d-gpu.io/keep-on-removal": true}}}),
            json!({"kind": "Namespace", "metadata": "not a map"}),
            json!({"metadata": {"labels": ["app.kubernetes.io/managed-by"]}}),
            json!([1, 2]),
            json!(null),
        ] {
            let seen = Seen::of(&odd);
            assert_eq!(seen.id(), crate::compile::object_id(&odd), "{odd}");
            let meta = &odd["metadata"];
            assert_eq!(seen.managed, meta["labels"][crate::compile::MANAGED_BY.0] == crate::compile::MANAGED_BY.1);
            assert_eq!(seen.keep, meta["labels"][crate::compile::KEEP_LABEL] == "true");
            assert_eq!(seen.namespace, meta["namespace"].as_str());
            assert_eq!(seen.cascades(), matches!(odd["kind"].as_str(), Some("Namespace" | "CustomResourceDefinition")));
        }
    }
}
