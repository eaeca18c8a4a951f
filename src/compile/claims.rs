//! `[[claims]]`: DRA claim templates from a few selectors. Each becomes a
//! `ResourceClaimTemplate` (resource.k8s.io/v1) whose CEL selects the host's matching GPUs by
//! the Intel driver's `pciId` attribute, checked against the facts first: a claim the host
//! cannot satisfy is an error here, not a Pending pod later.

use serde_json::{Value, json};

use super::components::BUILT_IN_NAMESPACES;
use super::components::{COMPONENT_LABEL, MANAGED_BY, object_id};
use super::intel::{host_gpus_help, id_of, normalise_id};
use super::{Change, CompileError, Context, Resource, ResourceKind};
use crate::config::{Claim, GpuSet, IntelGpuMode, dns_label};
use crate::facts::{IntelGpu, Vendor};

/// The Intel GPU DRA driver's DeviceClass and attribute domain.
const DRIVER: &str = "gpu.intel.com";

/// A Kubernetes quantity such as `12Gi`, `8G`, `1.5Gi` or `500m`, in the API server's own
/// grammar ([`crate::quantity`]): `8K` is not one (the suffix is `k`).
pub(super) fn quantity(text: &str) -> bool {
    crate::quantity::is_quantity(text)
}

pub fn resources(cx: &mut Context, cluster_id: &str, out: &mut Vec<Resource>) {
    let config = cx.config;
    let claims = &config.claims;
    if claims.is_empty() {
        return;
    }
    if !cx.is_active(Vendor::Intel) || cx.intel_mode() != IntelGpuMode::Dra {
        cx.error(CompileError::new(
            "claims-without-dra",
            &["claims"],
            "[[claims]] are served by the Intel GPU DRA driver, which is not in use here",
            Some("set [sharing] mode = \"dra\" on a host with an active Intel GPU".to_string()),
        ));
        return;
    }
    let usable: Vec<IntelGpu> = cx.facts.host.intel_gpus.iter().filter(|g| g.usable()).cloned().collect();
    let device_class = format!("k8s/resource.k8s.io/DeviceClass/{DRIVER}");
    let has_device_class = out.iter().any(|r| r.id == device_class);
    let mut seen = std::collections::BTreeSet::new();
    for claim in claims {
        if let Some(resource) =
            one(cx, claim, &usable, cluster_id, has_device_class.then_some(device_class.as_str()), out)
        {
            if !seen.insert(resource.id.clone()) {
                cx.error(CompileError::new(
                    "claim-twice",
                    &["claims"],
                    format!("claim {} in {} is declared twice", claim.name, claim.namespace),
                    None,
                ));
                continue;
            }
            out.push(resource);
        }
    }
}

fn one(
    cx: &mut Context,
    claim: &Claim,
    usable: &[IntelGpu],
    cluster_id: &str,
    device_class: Option<&str>,
    out: &mut Vec<Resource>,
) -> Option<Resource> {
    let name = &claim.name;
    let bad =
        |code: &'static str, message: String, help: Option<String>| CompileError::new(code, &["claims"], message, help);
    if !dns_label(name) || !dns_label(&claim.namespace) {
        cx.error(bad(
            "bad-claim-name",
            format!("claim {name:?} in namespace {:?}: not a valid name", claim.namespace),
            Some("lowercase letters, digits and '-', at most 63".into()),
        ));
        return None;
    }
    if claim.count == 0 {
        cx.error(bad("bad-claim-count", format!("claim {name}: count must be 1 or more"), None));
        return None;
    }
    let mut ids = Vec::new();
    for raw in &claim.pci_ids {
        match normalise_id(raw) {
            Some(id) => ids.push(id),
            None => {
                cx.error(bad(
                    "bad-pci-id",
                    format!("claim {name}: {raw:?} is not a PCI device id"),
                    Some("four hex digits, e.g. \"e20b\"".into()),
                ));
                return None;
            }
        }
    }
    let matching: Vec<&IntelGpu> = usable
        .iter()
        .filter(|g| claim.gpus.admits(g.integrated))
        .filter(|g| {
            claim
                .model
                .as_ref()
                .is_none_or(|m| g.platform.as_deref().is_some_and(|p| p.to_lowercase().contains(&m.to_lowercase())))
        })
        .filter(|g| ids.is_empty() || ids.contains(&id_of(g)))
        .collect();
    if (matching.len() as u32) < claim.count {
        cx.error(bad(
            "claim-unsatisfiable",
            format!(
                "claim {name} wants {} GPU(s), and {} on this host match its selectors",
                claim.count,
                matching.len()
            ),
            Some(host_gpus_help(usable)),
        ));
        return None;
    }
    let mut selectors = Vec::new();
    let narrowed = claim.gpus != GpuSet::All || claim.model.is_some() || !ids.is_empty();
    if narrowed {
        let mut pci: Vec<String> = matching.iter().map(|g| format!("\"0x{}\"", id_of(g))).collect();
        pci.sort();
        pci.dedup();
        selectors.push(json!({ "cel": { "expression": format!("device.attributes[\"{DRIVER}\"].pciId in [{}]", pci.join(", ")) } }));
    }
    if let Some(memory) = &claim.min_memory {
        if !quantity(memory) {
            cx.error(bad(
                "bad-quantity",
                format!("claim {name}: min_memory {memory:?} is not a quantity"),
                Some("e.g. \"12Gi\"".into()),
            ));
            return None;
        }
        cx.warn(
            "claim-memory-unchecked",
            Some("claims"),
            format!("claim {name}: min_memory cannot be checked against the host facts; the driver decides"),
        );
        selectors.push(json!({ "cel": { "expression": format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{memory}\")) >= 0") } }));
    }
    let mut exactly = json!({ "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": claim.count });
    if !selectors.is_empty() {
        exactly["selectors"] = Value::Array(selectors);
    }
    let object = json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "namespace": claim.namespace,
            "labels": { MANAGED_BY.0: MANAGED_BY.1, COMPONENT_LABEL: "claims" },
        },
        "spec": { "spec": { "devices": { "requests": [ { "name": "gpu", "exactly": exactly } ] } } },
    });
    let mut depends_on = vec![cluster_id.to_string()];
    depends_on.extend(device_class.map(str::to_string));
    if !BUILT_IN_NAMESPACES.contains(&claim.namespace.as_str()) {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": claim.namespace, "labels": { MANAGED_BY.0: MANAGED_BY.1, COMPONENT_LABEL: "claims" }}});
        let ns_id = object_id(&ns);
        if !out.iter().any(|r| r.id == ns_id) {
            out.push(Resource {
                id: ns_id.clone(),
                kind: ResourceKind::Object,
                change: Change::InPlace,
                component: Some("claims".into()),
                spec: ns,
                depends_on: vec![cluster_id.to_string()],
            });
        }
        depends_on.push(ns_id);
    }
    depends_on.sort();
    Some(Resource {
        id: object_id(&object),
        kind: ResourceKind::Object,
        change: Change::InPlace,
        component: Some("claims".into()),
        spec: object,
        depends_on,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert!(quantity("12Gi") && quantity("8G") && quantity("512"));
        assert!(quantity("1.5Gi") && quantity("500m") && quantity("8k"), "Kubernetes's grammar");
        assert!(!quantity("12 Gi") && !quantity("1.5.5") && !quantity("8K") && !quantity("12GB"));
    }
}
