//! `[telemetry]`'s metrics stack, in namespace `k3d-gpu-metrics`: Prometheus scraping every
//! exporter the graph runs (XPU Manager's xpumd, NVIDIA's DCGM exporter, node-exporter) and
//! the model servers' own `/metrics`; node-exporter on every node with its RAPL collector and
//! node_cpu_* relabelled by core type (P-, E-, low-power E-cores, from the host's facts); one
//! Grafana with the dashboard we write (`share/grafana-dashboard.json`), provisioned from
//! ConfigMaps.
//!
//! Everything listens in the cluster only (ClusterIP; node-exporter's Service is headless so
//! Prometheus finds every node's pod by DNS, with no API access). Prometheus and Grafana run
//! on the E-cores of a hybrid CPU, as the chat UI does; Prometheus keeps at most
//! [`RETENTION_TIME`] and [`RETENTION_SIZE`]. Grafana's sign-in follows the chat UI's
//! (`workloads/chat.rs`): sign-in always on, no anonymous access, no self sign-up, offline,
//! and the admin password is never in the config, the plan or the graph: the pod generates it
//! on its first start into its own data volume.
//!
//! Images are pinned by tag here and by digest through images.lock (share/README.md). Pure.

use serde_json::{Value, json};

use super::components::{COMPONENT_LABEL, MANAGED_BY, object_id};
use super::{Change, Context, Resource, ResourceKind};
use crate::facts::Vendor;

pub const NAMESPACE: &str = "k3d-gpu-metrics";
pub const COMPONENT: &str = "metrics";

/// The versions prometheus-operator/kube-prometheus pins together (main at 4d719f1d,
/// 2026-08-10, `jsonnet/kube-prometheus/versions.json` and `manifests/`): Prometheus 3.13.2,
/// node-exporter 1.12.1, Grafana 13.1.3.
pub const PROMETHEUS_IMAGE: &str = "quay.io/prometheus/prometheus:v3.13.2";
pub const NODE_EXPORTER_IMAGE: &str = "quay.io/prometheus/node-exporter:v1.12.1";
pub const GRAFANA_IMAGE: &str = "docker.io/grafana/grafana:13.1.3";

pub const PROMETHEUS_PORT: u16 = 9090;
pub const NODE_EXPORTER_PORT: u16 = 9100;
pub const GRAFANA_PORT: u16 = 3000;
/// How long and how much Prometheus keeps (`--storage.tsdb.retention.*`): the size stays
/// below the volume's, so the volume never fills.
pub const RETENTION_TIME: &str = "15d";
pub const RETENTION_SIZE: &str = "4GB";
const PROMETHEUS_STORAGE: &str = "5Gi";
const GRAFANA_STORAGE: &str = "1Gi";
/// How often every target is scraped.
pub const SCRAPE_INTERVAL: &str = "15s";

/// The dashboard's uid: its address is `/d/<uid>`.
pub const DASHBOARD_UID: &str = "k3d-gpu";
/// The dashboard we write (JSON, Grafana's dashboard model).
pub const DASHBOARD: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/share/grafana-dashboard.json"));
/// Where the generated admin password is kept, on Grafana's data volume.
pub const PASSWORD_FILE: &str = "/var/lib/grafana/.k3d-gpu-admin-password";
pub const ADMIN_USER: &str = "admin";

/// Grafana's address through `kubectl port-forward svc/grafana 3000:3000`.
pub fn dashboard_url() -> String {
    format!("http://127.0.0.1:{GRAFANA_PORT}/d/{DASHBOARD_UID}")
}

/// The exporters and servers Prometheus scrapes: (job, `host:port`), in the order written.
fn targets(resources: &[Resource]) -> Vec<(&'static str, String)> {
    let has = |id: &str| resources.iter().any(|r| r.id == id);
    let mut out = Vec::new();
    // Catalog components (share/intel-xpumd*.yml, share/nvidia-dcgm-exporter.yml).
    if has("k8s/core/Service/k3d-gpu-xpumd/xpumd") {
        out.push(("xpumd", "xpumd.k3d-gpu-xpumd.svc:8080".to_string()));
    }
    if has("k8s/core/Service/k3d-gpu-dcgm/dcgm-exporter") {
        out.push(("dcgm-exporter", "dcgm-exporter.k3d-gpu-dcgm.svc:9400".to_string()));
    }
    // The model servers: vLLM serves /metrics on its API port; OVMS does with
    // --metrics_enable (workloads/mod.rs adds it under [telemetry]).
    let agent = super::workloads::NAMESPACE;
    let prefix = format!("k8s/core/Service/{agent}/");
    for r in resources.iter().filter(|r| r.id.starts_with(&prefix)) {
        let served =
            r.spec["spec"]["ports"].as_array().into_iter().flatten().any(|p| p["port"] == super::workloads::PORT);
        if let (true, Some(name)) = (served, r.spec["metadata"]["name"].as_str()) {
            out.push(("model-servers", format!("{name}.{agent}.svc:{}", super::workloads::PORT)));
        }
    }
    out
}

/// node_cpu_* relabelled with `core_type` from the host's hybrid CPU lists: every node of a
/// k3d cluster is a container on this host, so CPU `N` is the same core on each.
fn core_type_relabels(cx: &Context) -> Vec<Value> {
    let cpu = &cx.facts.host.cpu;
    let mut out = Vec::new();
    for (list, kind) in [(&cpu.p_cores, "performance"), (&cpu.e_cores, "efficient"), (&cpu.lp_e_cores, "low-power")] {
        let cpus = crate::parse::parse_cpulist(list).unwrap_or_default();
        if cpus.is_empty() {
            continue;
        }
        let alternatives: Vec<String> = cpus.iter().map(u32::to_string).collect();
        out.push(json!({
            "source_labels": ["__name__", "cpu"],
            "regex": format!("node_cpu_.+;({})", alternatives.join("|")),
            "target_label": "core_type",
            "replacement": kind,
        }));
    }
    out
}

/// Prometheus's configuration file, as JSON (YAML's subset, which Prometheus reads):
/// Prometheus itself, node-exporter on every node (by the headless Service's A records), and
/// each target of [`targets`].
pub fn prometheus_config(cx: &Context, resources: &[Resource]) -> Value {
    let mut node = json!({
        "job_name": "node-exporter",
        "dns_sd_configs": [{
            "names": [format!("node-exporter.{NAMESPACE}.svc")],
            "type": "A",
            "port": NODE_EXPORTER_PORT,
        }],
    });
    let relabels = core_type_relabels(cx);
    if !relabels.is_empty() {
        node["metric_relabel_configs"] = json!(relabels);
    }
    let mut jobs = vec![
        json!({ "job_name": "prometheus", "static_configs": [{ "targets": [format!("localhost:{PROMETHEUS_PORT}")] }] }),
        node,
    ];
    let mut by_job: Vec<(&str, Vec<String>)> = Vec::new();
    for (job, target) in targets(resources) {
        match by_job.iter_mut().find(|(j, _)| *j == job) {
            Some((_, list)) => list.push(target),
            None => by_job.push((job, vec![target])),
        }
    }
    for (job, list) in by_job {
        jobs.push(json!({ "job_name": job, "static_configs": [{ "targets": list }] }));
    }
    json!({
        "global": { "scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL },
        "scrape_configs": jobs,
    })
}

fn labels(extra: &[(&str, &str)]) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(MANAGED_BY.0.into(), json!(MANAGED_BY.1));
    m.insert(COMPONENT_LABEL.into(), json!(COMPONENT));
    for (k, v) in extra {
        m.insert((*k).into(), json!(v));
    }
    Value::Object(m)
}

fn push(out: &mut Vec<Resource>, spec: Value, mut depends_on: Vec<String>) -> String {
    depends_on.sort();
    let id = object_id(&spec);
    out.push(Resource {
        id: id.clone(),
        kind: ResourceKind::Object,
        change: Change::InPlace,
        component: Some(COMPONENT.into()),
        spec,
        depends_on,
    });
    id
}

fn verify(out: &mut Vec<Resource>, id: String, spec: Value, depends_on: Vec<String>) {
    out.push(Resource::verify(id, Some(COMPONENT.into()), spec, depends_on));
}

fn rollout(out: &mut Vec<Resource>, kind: &str, name: &str, id: String) {
    verify(
        out,
        format!("verify/rollout/{kind}/{NAMESPACE}/{name}"),
        json!({ "check": "rollout", "kind": kind, "namespace": NAMESPACE, "name": name }),
        vec![id],
    );
}

fn config_map(name: &str, file: &str, text: String) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": NAMESPACE, "labels": labels(&[]) },
        "data": { file: text } })
}

fn pvc(name: &str, storage: &str, what: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": { "name": name, "namespace": NAMESPACE, "labels": labels(&[]),
            "annotations": { super::DATA_ANNOTATION: what } },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": storage } } } })
}

fn service(name: &str, port: u16, headless: bool) -> Value {
    let mut spec = json!({ "type": "ClusterIP", "selector": { "app.kubernetes.io/name": name },
        "ports": [{ "name": "http", "port": port, "targetPort": "http", "protocol": "TCP" }] });
    if headless {
        spec["clusterIP"] = json!("None");
    }
    json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name, "namespace": NAMESPACE, "labels": labels(&[]) }, "spec": spec })
}

/// What every container gets: no privilege escalation, no capabilities, a read-only root.
fn hardened() -> Value {
    json!({ "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] }, "readOnlyRootFilesystem": true })
}

/// The pod labels of a workload that is not inference: the E-cores of a hybrid CPU.
fn pod_labels(cx: &Context, name: &str) -> Value {
    let mut l = json!({ "app.kubernetes.io/name": name });
    if cx.is_active(Vendor::Hybrid) {
        l["k3d-gpu.io/cores"] = json!("efficient");
    }
    l
}

/// The stack's objects and checks, after everything else of the graph (it scrapes what the
/// graph runs).
pub fn resources(cx: &mut Context, cluster_id: &str, out: &mut Vec<Resource>) {
    if cx.config.telemetry.is_none() {
        return;
    }
    let config_text = match serde_json::to_string_pretty(&prometheus_config(cx, out)) {
        Ok(text) => text + "\n",
        Err(_) => return,
    };
    let namespace = json!({ "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": NAMESPACE, "labels": labels(&[]) } });
    let ns = push(out, namespace, vec![cluster_id.to_string()]);
    let base = || vec![cluster_id.to_string(), ns.clone()];

    // Prometheus. The pod template carries the configuration's digest, so a changed
    // configuration rolls the pod (Prometheus reads its file at start).
    let cm = push(out, config_map("prometheus", "prometheus.yml", config_text.clone()), base());
    let data = push(out, pvc("prometheus-data", PROMETHEUS_STORAGE, "Prometheus's samples"), base());
    let mut prometheus = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "prometheus", "namespace": NAMESPACE, "labels": labels(&[("app.kubernetes.io/name", "prometheus")]) },
        "spec": {
            "replicas": 1,
            // One TSDB on a ReadWriteOnce volume: the old pod lets go of its lock first.
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": { "app.kubernetes.io/name": "prometheus" } },
            "template": {
                "metadata": { "labels": pod_labels(cx, "prometheus"),
                    "annotations": { "k3d-gpu.io/config-sha256": crate::canonical::sha256(config_text.as_bytes()) } },
                "spec": {
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534,
                        "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [{
                        "name": "prometheus",
                        "image": PROMETHEUS_IMAGE,
                        "args": [
                            "--config.file=/etc/prometheus/prometheus.yml",
                            "--storage.tsdb.path=/prometheus",
                            format!("--storage.tsdb.retention.time={RETENTION_TIME}"),
                            format!("--storage.tsdb.retention.size={RETENTION_SIZE}"),
                            format!("--web.listen-address=:{PROMETHEUS_PORT}"),
                        ],
                        "ports": [{ "name": "http", "containerPort": PROMETHEUS_PORT, "protocol": "TCP" }],
                        "readinessProbe": { "httpGet": { "path": "/-/ready", "port": "http" }, "periodSeconds": 10 },
                        "resources": { "requests": { "cpu": "100m", "memory": "256Mi" }, "limits": { "memory": "1Gi" } },
                        "volumeMounts": [
                            { "name": "config", "mountPath": "/etc/prometheus", "readOnly": true },
                            { "name": "data", "mountPath": "/prometheus" },
                        ],
                        "securityContext": hardened(),
                    }],
                    "volumes": [
                        { "name": "config", "configMap": { "name": "prometheus" } },
                        { "name": "data", "persistentVolumeClaim": { "claimName": "prometheus-data" } },
                    ],
                },
            },
        } });
    crate::images::pin_object(&mut prometheus, &cx.catalog.images, &mut cx.images);
    let mut deps = base();
    deps.extend([cm, data]);
    let prometheus_id = push(out, prometheus, deps);
    push(
        out,
        service("prometheus", PROMETHEUS_PORT, false),
        vec![cluster_id.into(), ns.clone(), prometheus_id.clone()],
    );
    rollout(out, "Deployment", "prometheus", prometheus_id);

    // node-exporter on every node: the host's /proc and /sys (a k3d node is a privileged
    // container, so its /sys is the host's), read-only. RAPL's energy counters are readable by
    // root only (since the fix for CVE-2020-8694), so it runs as root, with no capability.
    let mut exporter = json!({ "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": "node-exporter", "namespace": NAMESPACE, "labels": labels(&[("app.kubernetes.io/name", "node-exporter")]) },
        "spec": {
            "selector": { "matchLabels": { "app.kubernetes.io/name": "node-exporter" } },
            "template": { "metadata": { "labels": { "app.kubernetes.io/name": "node-exporter" } }, "spec": {
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "securityContext": { "runAsNonRoot": false, "runAsUser": 0, "seccompProfile": { "type": "RuntimeDefault" } },
                "containers": [{
                    "name": "node-exporter",
                    "image": NODE_EXPORTER_IMAGE,
                    "args": node_exporter_args(),
                    "ports": [{ "name": "http", "containerPort": NODE_EXPORTER_PORT, "protocol": "TCP" }],
                    "resources": { "requests": { "cpu": "50m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } },
                    "volumeMounts": [
                        { "name": "proc", "mountPath": "/host/proc", "readOnly": true },
                        { "name": "sys", "mountPath": "/host/sys", "readOnly": true },
                    ],
                    "securityContext": hardened(),
                }],
                "volumes": [
                    { "name": "proc", "hostPath": { "path": "/proc" } },
                    { "name": "sys", "hostPath": { "path": "/sys" } },
                ],
            } },
        } });
    crate::images::pin_object(&mut exporter, &cx.catalog.images, &mut cx.images);
    let exporter_id = push(out, exporter, base());
    push(
        out,
        service("node-exporter", NODE_EXPORTER_PORT, true),
        vec![cluster_id.into(), ns.clone(), exporter_id.clone()],
    );
    rollout(out, "DaemonSet", "node-exporter", exporter_id);

    grafana(cx, cluster_id, &ns, out);
}

/// node-exporter's flags (node_exporter v1.12.1; tests/upstream/telemetry-stack.toml). RAPL is
/// on by default there; `--collector.rapl` keeps it on should a release change that default,
/// since the dashboard's power panel depends on it. The filesystem collector would see the
/// container's mounts, not the host's: off.
pub fn node_exporter_args() -> Vec<String> {
    [
        "--path.procfs=/host/proc",
        "--path.sysfs=/host/sys",
        "--collector.rapl",
        "--no-collector.filesystem",
        &format!("--web.listen-address=:{NODE_EXPORTER_PORT}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Grafana's start: the admin password generated once into the data volume (umask 077,
/// written whole), then Grafana's own start script, which reads it through
/// `GF_SECURITY_ADMIN_PASSWORD__FILE`.
fn grafana_start() -> String {
    format!(
        r#"set -eu
f={PASSWORD_FILE}
if [ ! -s "$f" ]; then
  (umask 077; head -c 24 /dev/urandom | base64 | tr -d '\n=+/' > "$f.tmp")
  mv "$f.tmp" "$f"
fi
exec /run.sh
"#
    )
}

fn grafana(cx: &mut Context, cluster_id: &str, ns: &str, out: &mut Vec<Resource>) {
    let base = || vec![cluster_id.to_string(), ns.to_string()];
    let datasources = json!({ "apiVersion": 1, "datasources": [{
        "name": "Prometheus", "uid": "prometheus", "type": "prometheus", "access": "proxy",
        "url": format!("http://prometheus.{NAMESPACE}.svc:{PROMETHEUS_PORT}"), "isDefault": true, "editable": false }] });
    let providers = json!({ "apiVersion": 1, "providers": [{
        "name": "k3d-gpu", "type": "file", "disableDeletion": true, "allowUiUpdates": false,
        "options": { "path": "/etc/k3d-gpu/dashboards" } }] });
    let text = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let maps = [
        config_map("grafana-datasources", "datasources.yaml", text(&datasources)),
        config_map("grafana-dashboard-provider", "dashboards.yaml", text(&providers)),
        config_map("grafana-dashboards", "k3d-gpu.json", DASHBOARD.to_string()),
    ];
    let mut deps = base();
    for m in maps {
        deps.push(push(out, m, base()));
    }
    deps.push(push(out, pvc("grafana-data", GRAFANA_STORAGE, "Grafana's accounts and settings"), base()));
    let env = |name: &str, value: &str| json!({ "name": name, "value": value });
    let mut deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "grafana", "namespace": NAMESPACE, "labels": labels(&[("app.kubernetes.io/name", "grafana")]) },
        "spec": {
            "replicas": 1,
            // SQLite on a ReadWriteOnce volume: one writer at a time.
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": { "app.kubernetes.io/name": "grafana" } },
            "template": { "metadata": { "labels": pod_labels(cx, "grafana") }, "spec": {
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "securityContext": { "runAsNonRoot": true, "runAsUser": 472, "runAsGroup": 472, "fsGroup": 472,
                    "seccompProfile": { "type": "RuntimeDefault" } },
                "containers": [{
                    "name": "grafana",
                    "image": GRAFANA_IMAGE,
                    "command": ["sh", "-c", grafana_start()],
                    "env": [
                        // The chat UI's rules: sign-in always, no anonymous viewer, no self
                        // sign-up, nothing fetched from outside.
                        env("GF_AUTH_ANONYMOUS_ENABLED", "false"),
                        env("GF_AUTH_DISABLE_LOGIN_FORM", "false"),
                        env("GF_USERS_ALLOW_SIGN_UP", "false"),
                        env("GF_USERS_ALLOW_ORG_CREATE", "false"),
                        env("GF_ANALYTICS_REPORTING_ENABLED", "false"),
                        env("GF_ANALYTICS_CHECK_FOR_UPDATES", "false"),
                        env("GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES", "false"),
                        env("GF_NEWS_NEWS_FEED_ENABLED", "false"),
                        env("GF_PLUGINS_PREINSTALL_DISABLED", "true"),
                        // Otherwise Grafana fetches plugin-signing keys from grafana.com.
                        env("GF_PLUGINS_PUBLIC_KEY_RETRIEVAL_DISABLED", "true"),
                        env("GF_SECURITY_DISABLE_GRAVATAR", "true"),
                        env("GF_SECURITY_ADMIN_USER", ADMIN_USER),
                        env("GF_SECURITY_ADMIN_PASSWORD__FILE", PASSWORD_FILE),
                        env("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH", "/etc/k3d-gpu/dashboards/k3d-gpu.json"),
                    ],
                    "ports": [{ "name": "http", "containerPort": GRAFANA_PORT, "protocol": "TCP" }],
                    "readinessProbe": { "httpGet": { "path": "/api/health", "port": "http" }, "periodSeconds": 10 },
                    "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "memory": "512Mi" } },
                    "volumeMounts": [
                        { "name": "data", "mountPath": "/var/lib/grafana" },
                        { "name": "datasources", "mountPath": "/etc/grafana/provisioning/datasources", "readOnly": true },
                        { "name": "dashboard-provider", "mountPath": "/etc/grafana/provisioning/dashboards", "readOnly": true },
                        { "name": "dashboards", "mountPath": "/etc/k3d-gpu/dashboards", "readOnly": true },
                        { "name": "tmp", "mountPath": "/tmp" },
                    ],
                    "securityContext": hardened(),
                }],
                "volumes": [
                    { "name": "data", "persistentVolumeClaim": { "claimName": "grafana-data" } },
                    { "name": "datasources", "configMap": { "name": "grafana-datasources" } },
                    { "name": "dashboard-provider", "configMap": { "name": "grafana-dashboard-provider" } },
                    { "name": "dashboards", "configMap": { "name": "grafana-dashboards" } },
                    { "name": "tmp", "emptyDir": {} },
                ],
            } },
        } });
    crate::images::pin_object(&mut deployment, &cx.catalog.images, &mut cx.images);
    let id = push(out, deployment, deps);
    let svc = push(out, service("grafana", GRAFANA_PORT, false), vec![cluster_id.into(), ns.into(), id.clone()]);
    rollout(out, "Deployment", "grafana", id);
    verify(
        out,
        format!("verify/endpoint/{NAMESPACE}/grafana"),
        json!({ "check": "endpoint", "namespace": NAMESPACE, "service": "grafana", "port": GRAFANA_PORT,
                "path": "/api/health", "expect": "status", "timeout_s": 300 }),
        vec![svc],
    );
}
