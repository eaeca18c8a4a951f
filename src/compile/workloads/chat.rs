//! The chat UI (`[agent.chat]`): Open WebUI in front of the agent's model server, through the
//! server's in-cluster OpenAI base URL (`/v3` for OVMS, `/v1` for vLLM).
//!
//! What never changes, whatever the config says: sign-in on (`WEBUI_AUTH`; `auth = false` is
//! refused), self sign-up off with later accounts pending an admin, a ClusterIP Service only
//! (no listener outside the cluster), offline (no downloads, no version checks), community
//! sharing off. The admin account's password is never in the config, the plan or the graph:
//! either a Secret the user created (`admin_secret`, read by the pod through `secretKeyRef`),
//! or a random one the pod generates on its first start into its own data volume. So the plan
//! holds no secret value and the same config plans the same bytes every time.

use std::collections::BTreeMap;

use serde_json::json;

use super::{NAMESPACE, Scope, data_pvc, hardened, labels, push_service, push_workload, rollout, verify};
use crate::compile::agent::AgentPlan;
use crate::compile::{CompileError, Context, Resource};
use crate::config::Chat;
use crate::facts::Vendor;

/// Open WebUI by tag; the digest comes from images.lock.
pub const OPEN_WEBUI_IMAGE: &str = "ghcr.io/open-webui/open-webui:v0.12.2";
pub const NAME: &str = "open-webui";
pub const PORT: u16 = 8080;
const DATA: &str = "/data";
const STORAGE: &str = "2Gi";
/// The generated admin account's login (its password is in [`PASSWORD_FILE`]).
pub const ADMIN_EMAIL: &str = "admin@k3d-gpu.local";
pub const PASSWORD_FILE: &str = "/data/.k3d-gpu-admin-password";
/// How long the first start may take (database migrations on an empty volume).
const START_TIMEOUT_S: u64 = 600;

/// Where the key that signs sessions is kept: on the data volume, so a new pod (an apply, a
/// node restart) does not sign everyone out. Open WebUI's own start script would write it
/// into the container's filesystem, which a new pod does not have.
pub const SESSION_KEY_FILE: &str = "/data/.webui-secret-key";

/// The start: a random secret kept in a file of the data volume the first time (umask 077,
/// written whole), the same one after.
fn keep_secret(file: &str, variable: &str) -> String {
    format!(
        r#"f={file}
if [ ! -s "$f" ]; then
  (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > "$f.tmp")
  mv "$f.tmp" "$f"
fi
{variable}="$(cat "$f")"
export {variable}
"#
    )
}

/// The session key always; with no `admin_secret`, the admin's password too (handed to Open
/// WebUI's own start script as WEBUI_ADMIN_PASSWORD). Then that script.
fn start(generate_admin: bool) -> String {
    let mut script = String::from("set -eu\n");
    script.push_str(&keep_secret(SESSION_KEY_FILE, "WEBUI_SECRET_KEY"));
    if generate_admin {
        script.push_str(&keep_secret(PASSWORD_FILE, "WEBUI_ADMIN_PASSWORD"));
    }
    script.push_str("cd /app/backend\nexec bash start.sh\n");
    script
}

/// Refuses what would open the UI, and a Secret name Kubernetes would not take.
pub(super) fn valid(cx: &mut Context, chat: &Chat) -> bool {
    let mut ok = true;
    if chat.auth == Some(false) {
        cx.error(CompileError::new(
            "chat-auth",
            &["agent", "chat", "auth"],
            "the chat UI always asks for sign-in: without it anyone who reaches it uses the models",
            Some("remove `auth = false`; accounts after the admin wait for the admin's approval".to_string()),
        ));
        ok = false;
    }
    if let Some(name) = &chat.admin_secret
        && !crate::config::dns_label(name)
    {
        cx.error(CompileError::new(
            "chat-admin-secret",
            &["agent", "chat", "admin_secret"],
            format!("admin_secret {} is not a Secret name", crate::escape::quoted(name)),
            Some(
                "name a Secret in namespace k3d-gpu-agent (lowercase letters, digits and '-') that holds keys \
                 email and password"
                    .to_string(),
            ),
        ));
        ok = false;
    }
    ok
}

/// Open WebUI's PVC, Deployment and Service, and its readiness (rollout, then `/health`).
pub(super) fn resources(
    cx: &mut Context,
    chat: &Chat,
    plan: &AgentPlan,
    served_model: &str,
    scope: &Scope,
    out: &mut Vec<Resource>,
) {
    let Scope { cluster_id, ns_id, keep, .. } = *scope;
    let env_value = |name: &str, value: &str| json!({ "name": name, "value": value });
    let mut env = vec![
        // Open WebUI copies these into its database on the first start and reads them from
        // there after: without this a backend change would leave the UI calling a Service the
        // plan deleted, and sign-up could be turned on in the UI. The environment wins, always.
        env_value("ENABLE_PERSISTENT_CONFIG", "False"),
        env_value("WEBUI_AUTH", "True"),
        env_value("ENABLE_SIGNUP", "False"),
        env_value("DEFAULT_USER_ROLE", "pending"),
        env_value("OFFLINE_MODE", "True"),
        env_value("ENABLE_COMMUNITY_SHARING", "False"),
        env_value("ENABLE_OLLAMA_API", "False"),
        env_value("OPENAI_API_BASE_URL", &plan.api),
        env_value("DEFAULT_MODELS", served_model),
        env_value("DATA_DIR", DATA),
    ];
    let mut main = json!({
        "name": NAME,
        "image": OPEN_WEBUI_IMAGE,
        "ports": [{ "name": "http", "containerPort": PORT, "protocol": "TCP" }],
        "readinessProbe": { "httpGet": { "path": "/health", "port": "http" }, "periodSeconds": 10 },
        "resources": { "requests": { "cpu": "1", "memory": "1Gi" }, "limits": { "memory": "2Gi" } },
        "volumeMounts": [{ "name": "data", "mountPath": DATA }],
        // The image runs as root (it writes under /app/backend); no privilege beyond that.
        "securityContext": hardened(),
    });
    match &chat.admin_secret {
        Some(secret) => {
            let from = |key: &str| json!({ "secretKeyRef": { "name": secret, "key": key } });
            env.push(json!({ "name": "WEBUI_ADMIN_EMAIL", "valueFrom": from("email") }));
            env.push(json!({ "name": "WEBUI_ADMIN_PASSWORD", "valueFrom": from("password") }));
        }
        None => env.push(env_value("WEBUI_ADMIN_EMAIL", ADMIN_EMAIL)),
    }
    main["command"] = json!(["bash", "-c", start(chat.admin_secret.is_none())]);
    main["env"] = json!(env);

    let mut pod_labels: BTreeMap<String, String> = BTreeMap::from([("app.kubernetes.io/name".into(), NAME.into())]);
    if cx.is_active(Vendor::Hybrid) {
        // A UI, not inference: the E-cores, leaving the P-cores to the model.
        pod_labels.insert("k3d-gpu.io/cores".into(), "efficient".into());
    }
    let pvc_name = format!("{NAME}-data");
    let pvc = data_pvc(&pvc_name, keep, STORAGE, Some("the chat UI's accounts, chats and settings"));
    let mut deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": NAME, "namespace": NAMESPACE, "labels": labels(&[("app.kubernetes.io/name", NAME)]) },
        "spec": {
            "replicas": 1,
            // SQLite on a ReadWriteOnce volume: one writer at a time.
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": { "app.kubernetes.io/name": NAME } },
            "template": { "metadata": { "labels": pod_labels }, "spec": {
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "securityContext": { "seccompProfile": { "type": "RuntimeDefault" } },
                "containers": [main],
                "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": pvc_name } }],
            } },
        } });
    crate::images::pin_object(&mut deployment, &cx.catalog.images, &mut cx.images);
    let service = json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": NAME, "namespace": NAMESPACE, "labels": labels(&[]) },
        "spec": { "type": "ClusterIP", "selector": { "app.kubernetes.io/name": NAME },
            "ports": [{ "name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP" }] } });
    let deployment_id = push_workload(out, (cluster_id, ns_id), pvc, deployment);
    let service_id = push_service(out, (cluster_id, ns_id), service, &deployment_id);
    out.push(rollout(NAME, deployment_id));
    out.push(verify(
        format!("verify/endpoint/{NAMESPACE}/{NAME}"),
        json!({ "check": "endpoint", "namespace": NAMESPACE, "service": NAME, "port": PORT, "path": "/health",
                "expect": "status", "timeout_s": START_TIMEOUT_S }),
        vec![service_id],
    ));
}
