//! Which REST resource serves a kind — never guessed from English (a CRD may declare any
//! plural: Chaos Mesh's `PodChaos` is served as `podchaos`, which no suffix rule gives).
//!
//! - A built-in kind: its resource from k8s-openapi's generated types (`URL_PATH_SEGMENT`,
//!   taken from the API server's own OpenAPI document; k8s-openapi 0.29, feature `latest`).
//! - A custom kind: the plural its CRD declares (`spec.names.plural`), from the catalog's CRDs
//!   ([`crate::compile::ObjectKinds::plurals`]) or a CRD the caller has seen (apply learns it
//!   from the CRD it applies).
//! - Anything else: the API server's discovery for that group and version (kube-rs's
//!   `discovery::pinned_kind`, one `GET /apis/GROUP/VERSION`); a group or kind the server
//!   does not serve is "not installed", not an error.

use std::collections::BTreeMap;

use k8s_openapi::Resource;
use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};

macro_rules! built_in {
    ($($t:ty),* $(,)?) => { &[ $( (<$t>::API_VERSION, <$t>::KIND, <$t>::URL_PATH_SEGMENT) ),* ] };
}

/// `(apiVersion, kind, plural)` of the built-in kinds a plan, verify, audit or logs may name.
pub const BUILT_IN: &[(&str, &str, &str)] = {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, batch::v1 as batch, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery, networking::v1 as networking, node::v1 as node,
        policy::v1 as policy, rbac::v1 as rbac, resource::v1 as resource, scheduling::v1 as scheduling,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    built_in!(
        core::Namespace,
        core::ConfigMap,
        core::Secret,
        core::ServiceAccount,
        core::Service,
        core::Endpoints,
        core::PersistentVolumeClaim,
        core::PersistentVolume,
        core::Node,
        core::Pod,
        core::Event,
        core::LimitRange,
        core::ResourceQuota,
        apps::DaemonSet,
        apps::Deployment,
        apps::StatefulSet,
        apps::ReplicaSet,
        batch::Job,
        batch::CronJob,
        rbac::ClusterRole,
        rbac::ClusterRoleBinding,
        rbac::Role,
        rbac::RoleBinding,
        node::RuntimeClass,
        resource::DeviceClass,
        resource::ResourceSlice,
        resource::ResourceClaim,
        resource::ResourceClaimTemplate,
        admission::ValidatingAdmissionPolicy,
        admission::ValidatingAdmissionPolicyBinding,
        admission::MutatingWebhookConfiguration,
        admission::ValidatingWebhookConfiguration,
        apiextensions::CustomResourceDefinition,
        networking::NetworkPolicy,
        networking::Ingress,
        networking::IngressClass,
        scheduling::PriorityClass,
        storage::StorageClass,
        storage::CSIDriver,
        policy::PodDisruptionBudget,
        coordination::Lease,
        discovery::EndpointSlice,
    )
};

/// The plural of a built-in kind.
pub fn built_in(api_version: &str, kind: &str) -> Option<&'static str> {
    BUILT_IN.iter().find(|(a, k, _)| *a == api_version && *k == kind).map(|(_, _, p)| *p)
}

/// `(group, kind)` → plural, as CRDs declare them.
pub type CrdPlurals = BTreeMap<(String, String), String>;

/// The group of an apiVersion (`""` for the core group's `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// A CRD object's `(group, kind)` and plural, if `object` is one.
pub fn crd_plural(object: &serde_json::Value) -> Option<((String, String), String)> {
    if object["kind"] != "CustomResourceDefinition" {
        return None;
    }
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let spec = &object["spec"];
    Some(((text(&spec["group"])?, text(&spec["names"]["kind"])?), text(&spec["names"]["plural"])?))
}

/// The plural known without asking the server: a built-in kind's, or the one a CRD in
/// `crds` declares for the kind's group.
pub fn known(api_version: &str, kind: &str, crds: &CrdPlurals) -> Option<String> {
    built_in(api_version, kind)
        .map(str::to_string)
        .or_else(|| crds.get(&(group_of(api_version).to_string(), kind.to_string())).cloned())
}

/// The resource serving `kind` of `api_version`: [`known`], else the server's discovery.
/// `Ok(None)`: the server does not serve it (its CRD is not installed, or not yet established).
pub async fn resource(
    client: &Client,
    api_version: &str,
    kind: &str,
    crds: &CrdPlurals,
) -> Result<Option<ApiResource>, kube::Error> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    if let Some(plural) = known(api_version, kind, crds) {
        return Ok(Some(ApiResource::from_gvk_with_plural(&gvk, &plural)));
    }
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, _)) => Ok(Some(resource)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_in_plurals_are_the_apis_own() {
        for (api_version, kind, want) in [
            ("apps/v1", "DaemonSet", "daemonsets"),
            ("node.k8s.io/v1", "RuntimeClass", "runtimeclasses"),
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions"),
            ("v1", "Namespace", "namespaces"),
            ("v1", "Endpoints", "endpoints"),
            ("resource.k8s.io/v1", "ResourceSlice", "resourceslices"),
        ] {
            assert_eq!(built_in(api_version, kind), Some(want), "{kind}");
        }
        assert_eq!(built_in("v1", "NodeFeatureRule"), None, "not a built-in kind");
        assert_eq!(built_in("apps/v1beta1", "DaemonSet"), None, "another version is another resource");
    }

    #[test]
    fn a_custom_kind_is_served_under_the_plural_its_crd_declares() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podchaos.chaos-mesh.org"},
            "spec": {"group": "chaos-mesh.org", "names": {"kind": "PodChaos", "plural": "podchaos"}}});
        let crds: CrdPlurals = crd_plural(&crd).into_iter().collect();
        assert_eq!(known("chaos-mesh.org/v1alpha1", "PodChaos", &crds).as_deref(), Some("podchaos"));
        assert_eq!(known("other.io/v1", "PodChaos", &crds), None, "another group's kind of that name");
        assert_eq!(known("chaos-mesh.org/v1alpha1", "NetworkChaos", &CrdPlurals::new()), None, "never guessed");
        assert_eq!(crd_plural(&json!({"kind": "ConfigMap"})), None);
    }
}
