//! The built-in Kubernetes kinds k3d-gpu may emit or name: each kind's REST plural and
//! whether its objects live in a namespace, both from k8s-openapi's generated types
//! (`URL_PATH_SEGMENT` and the `Scope` type, generated from the API server's own OpenAPI
//! document; k8s-openapi 0.29, feature `latest`). A leaf: compile refuses a namespaced object
//! without a namespace by it, observe and apply build their URLs by it.

use k8s_openapi::Resource;

/// Whether a k8s-openapi scope type is a namespace's.
trait Namespaced {
    const NAMESPACED: bool;
}

impl Namespaced for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Namespaced for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

macro_rules! built_in {
    ($($t:ty),* $(,)?) => { &[ $( (
        <$t>::API_VERSION,
        <$t>::KIND,
        <$t>::URL_PATH_SEGMENT,
        <<$t as Resource>::Scope as Namespaced>::NAMESPACED,
    ) ),* ] };
}

/// `(apiVersion, kind, plural, namespaced)` of the built-in kinds a plan, verify, audit or
/// logs may name.
pub const BUILT_IN: &[(&str, &str, &str, bool)] = {
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
    BUILT_IN.iter().find(|(a, k, _, _)| *a == api_version && *k == kind).map(|(_, _, p, _)| *p)
}

/// Whether a built-in kind's objects live in a namespace; `None` for a kind not built in.
pub fn built_in_namespaced(api_version: &str, kind: &str) -> Option<bool> {
    BUILT_IN.iter().find(|(a, k, _, _)| *a == api_version && *k == kind).map(|(_, _, _, n)| *n)
}
