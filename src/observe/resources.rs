//! Which REST resource serves a kind, and whether its objects live in a namespace — never
//! guessed from English (a CRD may declare any plural: Chaos Mesh's `PodChaos` is served as
//! `podchaos`, which no suffix rule gives) nor from whether a manifest happens to name a
//! namespace. Plural and scope always come from the same source:
//!
//! - A built-in kind: k8s-openapi's generated types (`URL_PATH_SEGMENT` and the `Scope` type,
//!   both taken from the API server's own OpenAPI document; k8s-openapi 0.29, feature
//!   `latest`).
//! - A custom kind: what its CRD declares (`spec.names.plural`, `spec.scope`), from the
//!   catalog's CRDs ([`crate::compile::ObjectKinds::plurals`]) or a CRD the caller has seen
//!   (apply learns it from the CRD it applies).
//! - Anything else: the API server's discovery for that group and version (kube-rs's
//!   `discovery::pinned_kind`, one `GET /apis/GROUP/VERSION`, whose APIResource says
//!   `namespaced`); a group or kind the server does not serve is "not installed", not an
//!   error.

use std::collections::BTreeMap;

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};

pub use crate::kube_kinds::{BUILT_IN, built_in, built_in_namespaced};

/// `(group, kind)` → plural and scope, as CRDs declare them.
pub type CrdPlurals = BTreeMap<(String, String), crate::compile::CrdResource>;

/// Where a kind's resource was learned, which says whether the server is known to serve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// A built-in kind: every API server serves it.
    BuiltIn,
    /// A CRD's declaration: served once the CRD is established, which may be a moment after
    /// it is applied.
    Crd,
    /// The server's discovery listed it: served now.
    Discovery,
}

/// The resource serving a kind, its scope, and where that was learned.
#[derive(Debug, Clone)]
pub struct Served {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub known: Known,
}

impl Served {
    /// Whether the server is known to serve the kind now: a 404 is then about the object or
    /// its namespace, never "not served yet", and waiting will not heal it.
    pub fn served_now(&self) -> bool {
        self.known != Known::Crd
    }
}

/// The group of an apiVersion (`""` for the core group's `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// A CRD object's `(group, kind)`, plural and scope, if `object` is one that declares them.
pub fn crd_plural(object: &serde_json::Value) -> Option<((String, String), crate::compile::CrdResource)> {
    let (group, kind, plural, namespaced) =
        crate::catalog::crd_resources(std::slice::from_ref(object)).into_iter().next()?;
    Some(((group, kind), crate::compile::CrdResource { plural, namespaced }))
}

/// The plural and scope known without asking the server: a built-in kind's, or what a CRD
/// in `crds` declares for the kind's group.
pub fn known(api_version: &str, kind: &str, crds: &CrdPlurals) -> Option<(String, bool, Known)> {
    if let Some((_, _, plural, namespaced)) = BUILT_IN.iter().find(|(a, k, _, _)| *a == api_version && *k == kind) {
        return Some((plural.to_string(), *namespaced, Known::BuiltIn));
    }
    let crd = crds.get(&(group_of(api_version).to_string(), kind.to_string()))?;
    Some((crd.plural.clone(), crd.namespaced, Known::Crd))
}

/// The resource serving `kind` of `api_version`, with its scope: [`known`], else the server's
/// discovery. `Ok(None)`: the server does not serve it (its CRD is not installed, or not yet
/// established).
pub async fn resource(
    client: &Client,
    api_version: &str,
    kind: &str,
    crds: &CrdPlurals,
) -> Result<Option<Served>, kube::Error> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    if let Some((plural, namespaced, known)) = known(api_version, kind, crds) {
        return Ok(Some(Served { resource: ApiResource::from_gvk_with_plural(&gvk, &plural), namespaced, known }));
    }
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, caps)) => Ok(Some(Served {
            resource,
            namespaced: caps.scope == kube::discovery::Scope::Namespaced,
            known: Known::Discovery,
        })),
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
        assert_eq!(built_in_namespaced("apps/v1", "Deployment"), Some(true));
        assert_eq!(built_in_namespaced("v1", "PersistentVolume"), Some(false));
        assert_eq!(built_in_namespaced("resource.k8s.io/v1", "ResourceClaim"), Some(true));
        assert_eq!(built_in_namespaced("resource.k8s.io/v1", "DeviceClass"), Some(false));
        assert_eq!(built_in("v1", "NodeFeatureRule"), None, "not a built-in kind");
        assert_eq!(built_in("apps/v1beta1", "DaemonSet"), None, "another version is another resource");
    }

    #[test]
    fn a_custom_kind_is_served_under_the_plural_its_crd_declares() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podchaos.chaos-mesh.org"},
            "spec": {"group": "chaos-mesh.org", "scope": "Namespaced", "names": {"kind": "PodChaos", "plural": "podchaos"}}});
        let crds: CrdPlurals = crd_plural(&crd).into_iter().collect();
        assert_eq!(known("chaos-mesh.org/v1alpha1", "PodChaos", &crds), Some(("podchaos".into(), true, Known::Crd)));
        assert_eq!(known("other.io/v1", "PodChaos", &crds), None, "another group's kind of that name");
        assert_eq!(known("chaos-mesh.org/v1alpha1", "NetworkChaos", &CrdPlurals::new()), None, "never guessed");
        assert_eq!(crd_plural(&json!({"kind": "ConfigMap"})), None);
    }
}
