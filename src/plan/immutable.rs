//! The fields an API server refuses to change once an object exists: an update that touches
//! one is answered 422 Invalid ("field is immutable", or "Forbidden: … updates … are
//! forbidden"), so the plan makes such a change a replace (delete, then create) with the field
//! and its rule as the reason, never an update that would fail halfway through an apply.
//!
//! Read from Kubernetes' validation code (the `Validate…Update` functions), whose rules have
//! held across the releases k3d-gpu targets (k3s v1.37):
//!
//! - `pkg/apis/apps/validation/validation.go`: `ValidateDeploymentUpdate`,
//!   `ValidateDaemonSetUpdate`, `ValidateReplicaSetUpdate` (apps/v1: `spec.selector`);
//!   `ValidateStatefulSetUpdate` (`spec.selector`, `spec.serviceName`,
//!   `spec.podManagementPolicy`, `spec.volumeClaimTemplates`).
//! - `pkg/apis/batch/validation/validation.go`: `ValidateJobSpecUpdate` (`spec.selector`,
//!   `spec.template`, `spec.completionMode`, `spec.podFailurePolicy`,
//!   `spec.backoffLimitPerIndex`, `spec.managedBy`, `spec.successPolicy`).
//! - `pkg/apis/core/validation/validation.go`: `ValidateServiceUpdate` (`spec.clusterIP`,
//!   `spec.clusterIPs` once set), `ValidatePersistentVolumeUpdate` (the volume source,
//!   `spec.volumeMode`, `spec.nodeAffinity`), `ValidatePersistentVolumeClaimUpdate` (all of
//!   `spec` but `resources.requests`, `volumeAttributesClassName` and `volumeName`),
//!   `ValidateSecretUpdate` (`type`; `data` when `immutable: true`),
//!   `ValidateConfigMapUpdate` (`data`, `binaryData` when `immutable: true`).
//! - `pkg/apis/rbac/validation/validation.go`: `ValidateRoleBindingUpdate`,
//!   `ValidateClusterRoleBindingUpdate` (`roleRef`).
//! - `pkg/apis/storage/validation/validation.go`: `ValidateStorageClassUpdate`
//!   (`provisioner`, `parameters`, `reclaimPolicy`, `volumeBindingMode`).
//! - `pkg/apis/resource/validation/validation.go`: `ValidateResourceClaimUpdate`,
//!   `ValidateResourceClaimTemplateUpdate` (`spec`).

use serde_json::Value;

/// When a rule's fields are immutable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// Once the live object has a value there (a Service's cluster IP, assigned at create).
    Set,
    /// When the live object says `immutable: true` (ConfigMap, Secret).
    MarkedImmutable,
}

/// One rule: the kind, its immutable field paths (as the plan's changed paths spell them),
/// the paths under them that stay mutable, when it holds, and the upstream function.
struct Rule {
    api_version: &'static str,
    kind: &'static str,
    paths: &'static [&'static str],
    except: &'static [&'static str],
    when: When,
    source: &'static str,
}

const fn rule(
    api_version: &'static str,
    kind: &'static str,
    paths: &'static [&'static str],
    source: &'static str,
) -> Rule {
    Rule { api_version, kind, paths, except: &[], when: When::Always, source }
}

impl Rule {
    /// The rule, holding only when `when` does.
    const fn when(mut self, when: When) -> Rule {
        self.when = when;
        self
    }

    /// The rule, but not for the paths at or under `except`.
    const fn except(mut self, except: &'static [&'static str]) -> Rule {
        self.except = except;
        self
    }
}

const PV_SOURCES: &[&str] = &[
    "spec.hostPath",
    "spec.local",
    "spec.nfs",
    "spec.csi",
    "spec.iscsi",
    "spec.fc",
    "spec.rbd",
    "spec.cephfs",
    "spec.glusterfs",
    "spec.flexVolume",
    "spec.cinder",
    "spec.azureDisk",
    "spec.azureFile",
    "spec.gcePersistentDisk",
    "spec.awsElasticBlockStore",
    "spec.vsphereVolume",
    "spec.portworxVolume",
    "spec.quobyte",
    "spec.scaleIO",
    "spec.storageos",
    "spec.photonPersistentDisk",
    "spec.flocker",
    "spec.volumeMode",
    "spec.nodeAffinity",
];

const RULES: &[Rule] =
    &[
        rule("apps/v1", "Deployment", &["spec.selector"], "apps validation ValidateDeploymentUpdate"),
        rule("apps/v1", "DaemonSet", &["spec.selector"], "apps validation ValidateDaemonSetUpdate"),
        rule("apps/v1", "ReplicaSet", &["spec.selector"], "apps validation ValidateReplicaSetUpdate"),
        rule(
            "apps/v1",
            "StatefulSet",
            &["spec.selector", "spec.serviceName", "spec.podManagementPolicy", "spec.volumeClaimTemplates"],
            "apps validation ValidateStatefulSetUpdate",
        ),
        rule(
            "batch/v1",
            "Job",
            &[
                "spec.selector",
                "spec.template",
                "spec.completionMode",
                "spec.podFailurePolicy",
                "spec.backoffLimitPerIndex",
                "spec.managedBy",
                "spec.successPolicy",
            ],
            "batch validation ValidateJobSpecUpdate",
        ),
        rule("v1", "Service", &["spec.clusterIP", "spec.clusterIPs"], "core validation ValidateServiceUpdate")
            .when(When::Set),
        rule("v1", "PersistentVolume", PV_SOURCES, "core validation ValidatePersistentVolumeUpdate"),
        rule("v1", "PersistentVolumeClaim", &["spec"], "core validation ValidatePersistentVolumeClaimUpdate")
            .except(&["spec.resources.requests", "spec.volumeAttributesClassName", "spec.volumeName"]),
        rule("v1", "Secret", &["type"], "core validation ValidateSecretUpdate"),
        rule("v1", "Secret", &["data", "stringData"], "core validation ValidateSecretUpdate")
            .when(When::MarkedImmutable),
        rule("v1", "ConfigMap", &["data", "binaryData"], "core validation ValidateConfigMapUpdate")
            .when(When::MarkedImmutable),
        rule("rbac.authorization.k8s.io/v1", "RoleBinding", &["roleRef"], "rbac validation ValidateRoleBindingUpdate"),
        rule(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            &["roleRef"],
            "rbac validation ValidateClusterRoleBindingUpdate",
        ),
        rule(
            "storage.k8s.io/v1",
            "StorageClass",
            &["provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"],
            "storage validation ValidateStorageClassUpdate",
        ),
        rule("resource.k8s.io/v1", "ResourceClaim", &["spec"], "resource validation ValidateResourceClaimUpdate"),
        rule(
            "resource.k8s.io/v1",
            "ResourceClaimTemplate",
            &["spec"],
            "resource validation ValidateResourceClaimTemplateUpdate",
        ),
    ];

/// Whether changed path `path` (`spec.selector.matchLabels.app`) lies at or under `field`.
fn under(path: &str, field: &str) -> bool {
    path.strip_prefix(field).is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// The first changed path the API server would refuse to update on `live`, with the rule
/// that says so (`spec.selector`, `apps validation ValidateDeploymentUpdate`).
pub fn refused_change(live: &Value, changed_paths: &[String]) -> Option<(String, &'static str)> {
    let (api_version, kind) = (live["apiVersion"].as_str()?, live["kind"].as_str()?);
    for rule in RULES.iter().filter(|r| r.api_version == api_version && r.kind == kind) {
        let holds = |field: &str| match rule.when {
            When::Always => true,
            When::Set => live.pointer(&format!("/{}", field.replace('.', "/"))).is_some_and(|v| match v {
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Null => false,
                _ => true,
            }),
            When::MarkedImmutable => live["immutable"] == true,
        };
        for path in changed_paths {
            if rule.except.iter().any(|e| under(path, e)) {
                continue;
            }
            if let Some(field) = rule.paths.iter().find(|f| under(path, f) && holds(f)) {
                return Some((field.to_string(), rule.source));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_selector_change_is_refused_and_a_template_change_is_not() {
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
        let got =
            refused_change(&live, &paths(&["spec.template.spec.containers[0].image", "spec.selector.matchLabels.app"]));
        assert_eq!(got, Some(("spec.selector".into(), "apps validation ValidateDeploymentUpdate")));
        assert_eq!(refused_change(&live, &paths(&["spec.template.metadata.labels.app"])), None);
        assert_eq!(refused_change(&live, &paths(&["spec.selectorish"])), None, "a path, not a prefix of a word");
        let job = json!({"apiVersion": "batch/v1", "kind": "Job"});
        assert!(refused_change(&job, &paths(&["spec.template.spec.containers[0].image"])).is_some());
    }

    #[test]
    fn conditional_rules_hold_only_when_their_condition_does() {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "spec": {"clusterIP": "10.43.0.9"}});
        assert!(refused_change(&svc, &paths(&["spec.clusterIP"])).is_some());
        let headless_unset = json!({"apiVersion": "v1", "kind": "Service", "spec": {}});
        assert_eq!(refused_change(&headless_unset, &paths(&["spec.clusterIP"])), None);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "immutable": true});
        assert!(refused_change(&cm, &paths(&["data.key"])).is_some());
        let mutable = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(refused_change(&mutable, &paths(&["data.key"])), None);
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"});
        assert_eq!(refused_change(&pvc, &paths(&["spec.resources.requests.storage"])), None, "a resize is allowed");
        assert!(refused_change(&pvc, &paths(&["spec.storageClassName"])).is_some());
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume"});
        assert!(refused_change(&pv, &paths(&["spec.hostPath.path"])).is_some());
        assert_eq!(refused_change(&pv, &paths(&["spec.capacity.storage"])), None);
    }
}
