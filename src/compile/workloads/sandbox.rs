//! Agent sandboxes (`[sandbox]`): the agent-sandbox controller and CRDs come from the catalog
//! (stdlib/agent-sandbox.kdl, `when sandbox=on`); this module writes what is ours on top:
//! namespace `agent-sandbox`, the SandboxTemplate `python-ecores` and a SandboxWarmPool of it.
//!
//! A sandbox runs code an agent wrote, so its pod is locked down as far as runc allows (no VM
//! or gVisor in a k3d node): non-root, no capabilities, no privilege escalation, RuntimeDefault
//! seccomp, no service-account token. The template's network policy (the controller turns it
//! into a NetworkPolicy, which k3s's kube-router enforces) lets in port 8888 only from pods
//! labelled `k3d-gpu.io/sandbox-client=true`, and lets out only cluster DNS and public
//! addresses: RFC 1918, CGNAT (100.64/10, tailnets) and link-local are blocked, so a sandbox
//! cannot reach pods, Services, the k3d network or the host by those addresses. Sandbox pods
//! ask for the E-cores with one CPU, leaving the P-cores to inference.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::compile::components::object_id;
use crate::compile::{CompileError, Context, Resource};

pub const NAMESPACE: &str = "agent-sandbox";
pub const TEMPLATE: &str = "python-ecores";
const COMPONENT: &str = "sandbox";
const API: &str = "extensions.agents.x-k8s.io/v1beta1";
/// The Python runtime upstream's examples pin at this release (registry.k8s.io, by tag).
pub const RUNTIME_IMAGE: &str = "registry.k8s.io/agent-sandbox/python-runtime-sandbox:v0.1.0";
/// The runtime's user (the image has no home for it: HOME is /tmp).
const RUNTIME_UID: i64 = 1000;
const PORT: u16 = 8888;
/// Where a sandbox may not connect: private (RFC 1918), CGNAT (RFC 6598: tailnets) and
/// link-local (RFC 3927: cloud metadata) addresses.
pub const BLOCKED: [&str; 5] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"];
/// The label a pod needs to reach a sandbox.
pub const CLIENT_LABEL: &str = "k3d-gpu.io/sandbox-client";
/// The controller's objects the template needs first (the catalog component's).
const CRDS: [&str; 2] = ["sandboxtemplates.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"];
const CONTROLLER: &str = "k8s/apps/Deployment/agent-sandbox-system/agent-sandbox-controller";

fn labels() -> BTreeMap<String, String> {
    super::labels_of(COMPONENT, &[])
}

fn push(out: &mut Vec<Resource>, spec: Value, depends_on: Vec<String>) {
    super::push_as(out, COMPONENT, spec, depends_on);
}

/// The sandbox pod: the hardening above, one CPU on the E-cores.
fn pod_template() -> Value {
    json!({
        "metadata": { "labels": { "app.kubernetes.io/name": "sandbox", "k3d-gpu.io/cores": "efficient" } },
        "spec": {
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": RUNTIME_UID,
                "runAsGroup": RUNTIME_UID,
                "seccompProfile": { "type": "RuntimeDefault" },
            },
            "containers": [{
                "name": "python-runtime",
                "image": RUNTIME_IMAGE,
                "ports": [{ "name": "http", "containerPort": PORT, "protocol": "TCP" }],
                // pip's user installs land in /tmp/.local: the user has no home directory.
                "env": [{ "name": "HOME", "value": "/tmp" }],
                "readinessProbe": { "httpGet": { "path": "/", "port": PORT }, "periodSeconds": 1 },
                "resources": { "requests": { "cpu": "1", "memory": "512Mi" }, "limits": { "cpu": "1", "memory": "1Gi" } },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": { "drop": ["ALL"] },
                    "runAsNonRoot": true,
                },
            }],
        },
    })
}

/// Ingress on 8888 from sandbox clients only; egress to cluster DNS and public addresses.
fn network_policy() -> Value {
    json!({
        "ingress": [{
            "from": [{ "namespaceSelector": {}, "podSelector": { "matchLabels": { CLIENT_LABEL: "true" } } }],
            "ports": [{ "port": PORT, "protocol": "TCP" }],
        }],
        "egress": [
            {
                "to": [{
                    "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "kube-system" } },
                    "podSelector": { "matchLabels": { "k8s-app": "kube-dns" } },
                }],
                "ports": [{ "port": 53, "protocol": "UDP" }, { "port": 53, "protocol": "TCP" }],
            },
            { "to": [{ "ipBlock": { "cidr": "0.0.0.0/0", "except": BLOCKED } }] },
        ],
    })
}

/// `[sandbox]`'s namespace, template and warm pool, after the controller and its CRDs.
pub fn resources(cx: &mut Context, cluster_id: &str, out: &mut Vec<Resource>) {
    let Some(sandbox) = &cx.config.sandbox else { return };
    let warm_pool = sandbox.warm_pool;
    let crd_ids: Vec<String> = CRDS
        .iter()
        .map(|name| {
            object_id(&json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": { "name": name } }))
        })
        .collect();
    let present = |id: &str| out.iter().any(|r| r.id == id);
    if !crd_ids.iter().all(|id| present(id)) || !present(CONTROLLER) {
        cx.error(CompileError::new(
            "sandbox-without-controller",
            &["sandbox"],
            "[sandbox] needs the agent-sandbox component (its controller and CRDs), and the catalog has none",
            Some("use the shipped catalog, or add a component that provides agent-sandbox".to_string()),
        ));
        return;
    }
    if warm_pool > 16 {
        cx.error(CompileError::new(
            "sandbox-warm-pool",
            &["sandbox", "warm_pool"],
            format!("warm_pool = {warm_pool}: each warm sandbox holds an E-core; at most 16"),
            None,
        ));
        return;
    }
    let namespace =
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE, "labels": labels() } });
    let ns_id = object_id(&namespace);
    push(out, namespace, vec![cluster_id.to_string()]);
    let mut after = crd_ids.clone();
    after.extend([cluster_id.to_string(), ns_id, CONTROLLER.to_string()]);

    let mut template = json!({ "apiVersion": API, "kind": "SandboxTemplate",
        "metadata": { "name": TEMPLATE, "namespace": NAMESPACE, "labels": labels() },
        "spec": {
            "podTemplate": pod_template(),
            "networkPolicyManagement": "Managed",
            "networkPolicy": network_policy(),
        } });
    crate::images::pin_object(&mut template, &cx.catalog.images, &mut cx.images);
    let template_id = object_id(&template);
    push(out, template, after.clone());

    let pool = json!({ "apiVersion": API, "kind": "SandboxWarmPool",
        "metadata": { "name": TEMPLATE, "namespace": NAMESPACE, "labels": labels() },
        "spec": { "replicas": warm_pool, "sandboxTemplateRef": { "name": TEMPLATE } } });
    after.push(template_id);
    push(out, pool, after);
}
