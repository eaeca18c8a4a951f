//! What an action acts on, as a type: the node image, the k3d cluster, one node's label or
//! annotation, or a Kubernetes object with its apiVersion, kind, scope and name.
//!
//! An action's `id` is this value written as text (`k3d/cluster/lab`,
//! `node-label/lab-server-0/intel.feature.node.kubernetes.io/gpu`,
//! `k8s/apps/Deployment/ns/name`). Apply routes on the parsed value, never on a prefix of the
//! id, and an object's target is read from the object the action carries, which must give the
//! same id back: a plan file whose `k8s/…` id names a namespaced kind but carries a
//! cluster-scoped object (or another kind) is refused before anything runs.

use serde_json::Value;

use super::{Action, ActionKind};

/// What one action changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The node image (`compile::NODE_IMAGE_ID`): built or pulled into the local engine.
    NodeImage,
    /// The k3d cluster of that name: its node containers.
    Cluster { name: String },
    /// A label k3d-gpu manages on a node (`node` is `*` for every node of a fleet rule).
    NodeLabel { rest: String },
    /// An annotation k3d-gpu manages on a node.
    NodeAnnotation { rest: String },
    /// A Kubernetes object.
    Object(ObjectRef),
}

/// A Kubernetes object as the API server addresses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// `None`: cluster-scoped.
    pub namespace: Option<String>,
    pub name: String,
}

/// Why an action's target could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("no provider for {0}")]
    Unknown(String),
    #[error("{id} carries no object to act on")]
    NoObject { id: String },
    #[error("{id} carries an object without apiVersion, kind or metadata.name")]
    Incomplete { id: String },
    #[error("{id} carries an object whose own id is {carried}")]
    Mismatch { id: String, carried: String },
}

impl Action {
    /// What this action acts on. For an object: its create or update carries the desired
    /// object, its delete the observed one.
    pub fn target(&self) -> Result<Target, TargetError> {
        let id = self.id.as_str();
        if id == crate::compile::NODE_IMAGE_ID {
            return Ok(Target::NodeImage);
        }
        if let Some(name) = id.strip_prefix("k3d/cluster/") {
            return Ok(Target::Cluster { name: name.to_string() });
        }
        if let Some(rest) = id.strip_prefix("node-label/") {
            return Ok(Target::NodeLabel { rest: rest.to_string() });
        }
        if let Some(rest) = id.strip_prefix("node-annotation/") {
            return Ok(Target::NodeAnnotation { rest: rest.to_string() });
        }
        if !id.starts_with("k8s/") {
            return Err(TargetError::Unknown(id.to_string()));
        }
        let carried = match self.action {
            ActionKind::Delete => self.before.as_ref(),
            _ => self.after.as_ref(),
        };
        let object = carried.ok_or_else(|| TargetError::NoObject { id: id.to_string() })?;
        let reference = ObjectRef::of(object).ok_or_else(|| TargetError::Incomplete { id: id.to_string() })?;
        let carried_id = crate::compile::object_id(object);
        if carried_id != id {
            return Err(TargetError::Mismatch { id: id.to_string(), carried: carried_id });
        }
        Ok(Target::Object(reference))
    }
}

impl ObjectRef {
    /// The object's address, when it has one.
    pub fn of(object: &Value) -> Option<ObjectRef> {
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        Some(ObjectRef {
            api_version: text(&object["apiVersion"])?,
            kind: text(&object["kind"])?,
            namespace: text(&object["metadata"]["namespace"]),
            name: text(&object["metadata"]["name"])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Reason;
    use serde_json::json;

    fn action(kind: ActionKind, id: &str, after: Option<Value>, before: Option<Value>) -> Action {
        Action {
            action: kind,
            after,
            before,
            changed_paths: vec![],
            depends_on: vec![],
            id: id.into(),
            reason: Reason { code: "missing".into(), text: String::new() },
            replace_paths: vec![],
        }
    }

    #[test]
    fn each_kind_of_id_reads_as_its_target() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}});
        let cases = [
            (crate::compile::NODE_IMAGE_ID, Target::NodeImage),
            ("k3d/cluster/lab", Target::Cluster { name: "lab".into() }),
            ("node-label/n0/a.b/c", Target::NodeLabel { rest: "n0/a.b/c".into() }),
            ("node-annotation/n0/k", Target::NodeAnnotation { rest: "n0/k".into() }),
            (
                "k8s/core/ConfigMap/ns/c",
                Target::Object(ObjectRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: Some("ns".into()),
                    name: "c".into(),
                }),
            ),
        ];
        for (id, want) in cases {
            assert_eq!(action(ActionKind::Create, id, Some(cm.clone()), None).target(), Ok(want), "{id}");
        }
    }

    #[test]
    fn an_id_that_disagrees_with_its_object_is_refused() {
        let namespaced = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}});
        // The id says cluster-scoped; the object lives in a namespace.
        let wrong = action(ActionKind::Create, "k8s/core/ConfigMap/c", Some(namespaced.clone()), None);
        assert!(matches!(wrong.target(), Err(TargetError::Mismatch { .. })), "{:?}", wrong.target());
        let other_kind = action(ActionKind::Update, "k8s/core/Secret/ns/c", Some(namespaced.clone()), None);
        assert!(matches!(other_kind.target(), Err(TargetError::Mismatch { .. })));
        // A delete reads the observed object, not the (absent) desired one.
        let delete = action(ActionKind::Delete, "k8s/core/ConfigMap/ns/c", None, Some(namespaced));
        assert!(matches!(delete.target(), Ok(Target::Object(ObjectRef { namespace: Some(_), .. }))));
        let bare = action(ActionKind::Delete, "k8s/core/ConfigMap/ns/c", None, None);
        assert_eq!(bare.target(), Err(TargetError::NoObject { id: "k8s/core/ConfigMap/ns/c".into() }));
        assert!(matches!(action(ActionKind::Create, "shell/rm", None, None).target(), Err(TargetError::Unknown(_))));
    }
}
