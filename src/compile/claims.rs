//! `[[claims]]`: DRA claim templates from a few selectors. Each becomes a
//! `ResourceClaimTemplate` (resource.k8s.io/v1) of its vendor's DeviceClass, whose CEL selects
//! the host's matching GPUs, checked against the facts first: a claim the host cannot satisfy
//! is an error here, not a Pending pod later. Intel GPUs are selected by the Intel driver's
//! `pciId` attribute; NVIDIA GPUs by the standard `resource.kubernetes.io/pciBusID` attribute,
//! which the NVIDIA driver publishes for each GPU (`cmd/gpu-kubelet-plugin/nvlib.go` at v0.4.1,
//! through `deviceattribute.GetPCIBusIDAttribute`), and by its `memory` capacity.

use serde_json::{Value, json};

use super::components::BUILT_IN_NAMESPACES;
use super::components::{COMPONENT_LABEL, MANAGED_BY, object_id};
use super::intel::{host_gpus_help, id_of, normalise_id};
use super::{Change, CompileError, Context, Resource, ResourceKind};
use crate::config::{Claim, ClaimVendor, GpuMode, GpuSet, dns_label};
use crate::facts::Vendor;

/// The Intel GPU DRA driver's DeviceClass and attribute domain.
const INTEL_DRIVER: &str = "gpu.intel.com";
/// The domain of the attributes Kubernetes defines (`resource.kubernetes.io/pciBusID`).
const STANDARD_DOMAIN: &str = "resource.kubernetes.io";

/// A Kubernetes quantity such as `12Gi`, `8G`, `1.5Gi` or `500m`, in the API server's own
/// grammar ([`crate::quantity`]): `8K` is not one (the suffix is `k`).
pub(super) fn quantity(text: &str) -> bool {
    crate::quantity::is_quantity(text)
}

/// One GPU as a claim's selectors see it, whichever the vendor.
#[derive(Debug, Clone)]
struct Gpu {
    pci_address: String,
    /// The PCI device id, four lowercase hex digits.
    id: String,
    /// Intel's platform or NVIDIA's board name.
    name: Option<String>,
    integrated: bool,
    /// Memory as a quantity, where the facts say (NVIDIA, captured by `nvidia-smi`).
    memory: Option<String>,
}

/// The GPUs of one vendor's DRA path and how its templates name them.
struct Path {
    vendor: ClaimVendor,
    driver: &'static str,
    gpus: Vec<Gpu>,
    /// The help that lists the host's GPUs of this vendor.
    help: String,
}

impl Path {
    fn intel(cx: &Context) -> Path {
        let usable: Vec<_> = cx.facts.host.intel_gpus.iter().filter(|g| g.usable()).collect();
        let gpus = usable
            .iter()
            .map(|g| Gpu {
                pci_address: g.pci_address.clone(),
                id: id_of(g),
                name: g.platform.clone(),
                integrated: g.integrated,
                memory: None,
            })
            .collect();
        Path { vendor: ClaimVendor::Intel, driver: INTEL_DRIVER, gpus, help: host_gpus_help(usable) }
    }

    fn nvidia(cx: &Context) -> Path {
        let gpus: Vec<Gpu> = cx
            .facts
            .host
            .nvidia
            .gpus
            .iter()
            .map(|g| Gpu {
                pci_address: g.pci_address.clone(),
                id: g.device_id.map(|id| format!("{id:04x}")).unwrap_or_default(),
                name: g.model.clone(),
                integrated: false,
                memory: g.memory_mib.map(|m| format!("{m}Mi")),
            })
            .collect();
        let list: Vec<String> = gpus
            .iter()
            .map(|g| {
                let memory = g.memory.as_deref().map(|m| format!(", {m}")).unwrap_or_default();
                format!("{} {} at {}{memory}", g.id, g.name.as_deref().unwrap_or("unknown"), g.pci_address)
            })
            .collect();
        let help = format!("this host's NVIDIA GPUs: {}", list.join(", "));
        Path { vendor: ClaimVendor::Nvidia, driver: super::nvidia_dra::DRIVER, gpus, help }
    }
}

pub fn resources(cx: &mut Context, cluster_id: &str, out: &mut Vec<Resource>) {
    let config = cx.config;
    let claims = &config.claims;
    if claims.is_empty() {
        return;
    }
    let intel_dra = cx.is_active(Vendor::Intel) && cx.intel_mode() == GpuMode::Dra;
    let nvidia_dra = super::nvidia_dra::wanted(cx);
    if !intel_dra && !nvidia_dra {
        cx.error(CompileError::new(
            "claims-without-dra",
            &["claims"],
            "[[claims]] are served by a GPU DRA driver, and no GPU goes to one here",
            Some("set [sharing] mode = \"dra\" on a host with an active Intel or NVIDIA GPU".to_string()),
        ));
        return;
    }
    let intel = intel_dra.then(|| Path::intel(cx));
    let nvidia = nvidia_dra.then(|| Path::nvidia(cx));
    let mut seen = std::collections::BTreeSet::new();
    for claim in claims {
        let path = match (claim.vendor, &intel, &nvidia) {
            (Some(ClaimVendor::Intel), Some(path), _) | (Some(ClaimVendor::Nvidia), _, Some(path)) => path,
            (None, Some(path), None) | (None, None, Some(path)) => path,
            (None, Some(_), Some(_)) => {
                cx.error(CompileError::new(
                    "claim-vendor-ambiguous",
                    &["claims"],
                    format!(
                        "claim {}: Intel and NVIDIA GPUs both go to DRA here, so the claim must say whose it wants",
                        claim.name
                    ),
                    Some("set vendor = \"intel\" or vendor = \"nvidia\" in the claim".to_string()),
                ));
                continue;
            }
            (Some(vendor), _, _) => {
                let name = if vendor == ClaimVendor::Intel { "Intel" } else { "NVIDIA" };
                cx.error(CompileError::new(
                    "claim-vendor-not-on-dra",
                    &["claims"],
                    format!("claim {} wants {name} GPUs, and no active {name} GPU goes to DRA here", claim.name),
                    Some(format!("give {name} the DRA path in [sharing] mode, or change the claim's vendor")),
                ));
                continue;
            }
            (None, None, None) => unreachable!("one DRA path at least is on"),
        };
        let device_class = format!("k8s/resource.k8s.io/DeviceClass/{}", path.driver);
        let has_device_class = out.iter().any(|r| r.id == device_class);
        if let Some(resource) = one(cx, claim, path, cluster_id, has_device_class.then_some(device_class.as_str()), out)
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

/// A user's PCI id for `vendor`: Intel's or NVIDIA's vendor prefix allowed.
fn pci_id(vendor: ClaimVendor, raw: &str) -> Option<String> {
    match vendor {
        ClaimVendor::Intel => normalise_id(raw),
        ClaimVendor::Nvidia => {
            let t = raw.trim().to_ascii_lowercase();
            let t = t.strip_prefix("10de:").unwrap_or(&t);
            // Another vendor's prefix (`8086:`) is not an NVIDIA id.
            if t.contains(':') { None } else { normalise_id(t) }
        }
    }
}

fn one(
    cx: &mut Context,
    claim: &Claim,
    path: &Path,
    cluster_id: &str,
    device_class: Option<&str>,
    out: &mut Vec<Resource>,
) -> Option<Resource> {
    let name = &claim.name;
    let driver = path.driver;
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
        match pci_id(path.vendor, raw) {
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
    if let Some(memory) = &claim.min_memory
        && !quantity(memory)
    {
        cx.error(bad(
            "bad-quantity",
            format!("claim {name}: min_memory {memory:?} is not a quantity"),
            Some("e.g. \"12Gi\"".into()),
        ));
        return None;
    }
    let enough_memory = |g: &Gpu| match (&claim.min_memory, &g.memory) {
        (Some(min), Some(has)) => crate::quantity::at_least(has, min).unwrap_or(true),
        _ => true,
    };
    let matching: Vec<&Gpu> = path
        .gpus
        .iter()
        .filter(|g| claim.gpus.admits(g.integrated))
        .filter(|g| {
            claim
                .model
                .as_ref()
                .is_none_or(|m| g.name.as_deref().is_some_and(|p| p.to_lowercase().contains(&m.to_lowercase())))
        })
        .filter(|g| ids.is_empty() || ids.contains(&g.id))
        .filter(|g| enough_memory(g))
        .collect();
    if (matching.len() as u32) < claim.count {
        cx.error(bad(
            "claim-unsatisfiable",
            format!(
                "claim {name} wants {} GPU(s), and {} on this host match its selectors",
                claim.count,
                matching.len()
            ),
            Some(path.help.clone()),
        ));
        return None;
    }
    let mut selectors = Vec::new();
    let narrowed = claim.gpus != GpuSet::All || claim.model.is_some() || !ids.is_empty();
    if narrowed {
        let expression = match path.vendor {
            ClaimVendor::Intel => {
                let mut pci: Vec<String> = matching.iter().map(|g| format!("\"0x{}\"", g.id)).collect();
                pci.sort();
                pci.dedup();
                format!("device.attributes[\"{driver}\"].pciId in [{}]", pci.join(", "))
            }
            ClaimVendor::Nvidia => {
                let mut bus: Vec<String> = matching.iter().map(|g| format!("\"{}\"", g.pci_address)).collect();
                bus.sort();
                format!("device.attributes[\"{STANDARD_DOMAIN}\"].pciBusID in [{}]", bus.join(", "))
            }
        };
        selectors.push(json!({ "cel": { "expression": expression } }));
    }
    if let Some(memory) = &claim.min_memory {
        if matching.iter().any(|g| g.memory.is_none()) {
            cx.warn(
                "claim-memory-unchecked",
                Some("claims"),
                format!("claim {name}: min_memory cannot be checked against the host facts; the driver decides"),
            );
        }
        selectors.push(json!({ "cel": { "expression": format!("device.capacity[\"{driver}\"].memory.compareTo(quantity(\"{memory}\")) >= 0") } }));
    }
    let mut exactly = json!({ "deviceClassName": driver, "allocationMode": "ExactCount", "count": claim.count });
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
    fn a_pci_id_takes_only_its_own_vendors_prefix() {
        assert_eq!(pci_id(ClaimVendor::Nvidia, "10DE:2331").as_deref(), Some("2331"));
        assert_eq!(pci_id(ClaimVendor::Nvidia, "0x2331").as_deref(), Some("2331"));
        assert_eq!(pci_id(ClaimVendor::Nvidia, "8086:2331"), None);
        assert_eq!(pci_id(ClaimVendor::Intel, "8086:e20b").as_deref(), Some("e20b"));
        assert_eq!(pci_id(ClaimVendor::Intel, "10de:e20b"), None);
    }

    #[test]
    fn quantities() {
        assert!(quantity("12Gi") && quantity("8G") && quantity("512"));
        assert!(quantity("1.5Gi") && quantity("500m") && quantity("8k"), "Kubernetes's grammar");
        assert!(!quantity("12 Gi") && !quantity("1.5.5") && !quantity("8K") && !quantity("12GB"));
    }
}
