//! `[telemetry]`: XPU Manager's xpumd with monitor access (gpu.intel.com/monitoring in plugin
//! mode, an admin-access ResourceClaim in DRA mode) and NVIDIA's DCGM exporter, each a
//! DaemonSet whose rollout is verified, on the accelerator node, behind a ClusterIP Service.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{CompileError, DesiredGraph, compile};
use k3d_gpu::config::load_str;
use k3d_gpu::plan::{ActionKind, plan};
use serde_json::{Value, json};
use support::{converged, facts_of, placeholder_inputs};

const XPUMD: &str = "k8s/apps/DaemonSet/k3d-gpu-xpumd/xpumd";
const DCGM: &str = "k8s/apps/DaemonSet/k3d-gpu-dcgm/dcgm-exporter";
const CLAIM: &str = "k8s/resource.k8s.io/ResourceClaimTemplate/k3d-gpu-xpumd/xpumd-monitor";

fn build(toml: &str, host: &str) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, &facts_of(host), &Catalog::embedded().unwrap())
}

fn graph(toml: &str, host: &str) -> DesiredGraph {
    build(toml, host).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn pod(g: &DesiredGraph, id: &str) -> Value {
    g.get(id).unwrap_or_else(|| panic!("{id} is not in the graph")).spec["spec"]["template"]["spec"].clone()
}

fn exporters(g: &DesiredGraph) -> Vec<&str> {
    g.resources()
        .filter(|r| r.component.as_deref().is_some_and(|c| c.contains("xpumd") || c.contains("dcgm")))
        .map(|r| r.id.as_str())
        .collect()
}

/// The metrics stack's resources (Prometheus, node-exporter, Grafana and their checks).
fn stack(g: &DesiredGraph) -> Vec<&str> {
    g.resources().filter(|r| r.component.as_deref() == Some("metrics")).map(|r| r.id.as_str()).collect()
}

const PROMETHEUS: &str = "k8s/apps/Deployment/k3d-gpu-metrics/prometheus";
const NODE_EXPORTER: &str = "k8s/apps/DaemonSet/k3d-gpu-metrics/node-exporter";
const GRAFANA: &str = "k8s/apps/Deployment/k3d-gpu-metrics/grafana";

/// Prometheus's configuration file as the graph deploys it.
fn prometheus_config(g: &DesiredGraph) -> Value {
    let cm = &g.get("k8s/core/ConfigMap/k3d-gpu-metrics/prometheus").expect("the Prometheus config").spec;
    serde_json::from_str(cm["data"]["prometheus.yml"].as_str().unwrap()).unwrap()
}

/// Each scrape job's static targets.
fn targets(config: &Value, job: &str) -> Vec<String> {
    let jobs = config["scrape_configs"].as_array().unwrap();
    let found = jobs.iter().find(|j| j["job_name"] == job);
    found
        .map(|j| {
            j["static_configs"][0]["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

const PLUGIN: &str = "[sharing]\nmonitoring = true\n[telemetry]\n";
const DRA: &str = "[sharing]\nmode = \"dra\"\n[telemetry]\n";

#[test]
fn without_telemetry_no_exporter_is_deployed() {
    for (toml, host) in [("", "desktop-rpl-nvidia"), ("[sharing]\nmonitoring = true\n", "arc-b580-xe-rpl-igpu")] {
        assert!(exporters(&graph(toml, host)).is_empty(), "{host}");
    }
}

#[test]
fn xpumd_in_plugin_mode_reads_the_gpus_through_the_monitoring_resource() {
    let g = graph(PLUGIN, "arc-b580-xe-rpl-igpu");
    let p = pod(&g, XPUMD);
    let c = &p["containers"][0];
    assert_eq!(c["resources"]["limits"]["gpu.intel.com/monitoring"], "1");
    assert_eq!(c["args"], json!(["--config=/etc/xpumd/config.yaml"]));
    assert!(p["resourceClaims"].is_null());
    assert!(g.get(CLAIM).is_none());
    // Its rollout is verified, and the plugin that advertises the resource comes first.
    let rollout = g.get("verify/rollout/DaemonSet/k3d-gpu-xpumd/xpumd").expect("a rollout check");
    assert_eq!(rollout.depends_on, [XPUMD]);
    assert!(g.get(XPUMD).unwrap().depends_on.contains(&"k8s/apps/DaemonSet/kube-system/intel-gpu-plugin".to_string()));
    assert!(g.get("verify/allocatable/gpu.intel.com/monitoring").is_some());
}

#[test]
fn telemetry_turns_on_the_plugins_monitoring_flag_itself_and_says_so() {
    let note = "telemetry-turns-on-monitoring";
    let codes = |g: &DesiredGraph| g.warnings.iter().map(|w| w.code.clone()).collect::<Vec<_>>();
    let plugin_args =
        |g: &DesiredGraph| pod(g, "k8s/apps/DaemonSet/kube-system/intel-gpu-plugin")["containers"][0]["args"].clone();
    for toml in ["[telemetry]\n", "[telemetry]\nintel = true\n"] {
        let g = graph(toml, "arc-b580-xe-rpl-igpu");
        assert!(plugin_args(&g).as_array().unwrap().iter().any(|a| a == "-enable-monitoring"), "{toml}");
        assert_eq!(pod(&g, XPUMD)["containers"][0]["resources"]["limits"]["gpu.intel.com/monitoring"], "1");
        let w = g.warnings.iter().find(|w| w.code == note).unwrap_or_else(|| panic!("{toml}: {:?}", codes(&g)));
        assert_eq!(w.key.as_deref(), Some("telemetry"));
        assert!(w.text.contains("gpu.intel.com/monitoring"), "{}", w.text);
    }
    // Asked for already: nothing to say.
    assert!(!codes(&graph(PLUGIN, "arc-b580-xe-rpl-igpu")).contains(&note.to_string()));
    // The Intel exporter off: the flag stays off.
    let g = graph("[telemetry]\nintel = false\n", "arc-b580-xe-rpl-igpu");
    assert!(exporters(&g).is_empty());
    assert!(!plugin_args(&g).as_array().unwrap().iter().any(|a| a == "-enable-monitoring"));
    assert!(!codes(&g).contains(&note.to_string()));
}

#[test]
fn xpumd_in_dra_mode_gets_an_admin_access_claim_in_a_labelled_namespace() {
    let g = graph(DRA, "arc-b580-xe-rpl-igpu");
    let claim = &g.get(CLAIM).expect("the monitor claim template").spec;
    assert_eq!(
        claim["spec"]["spec"]["devices"]["requests"],
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.intel.com", "adminAccess": true, "allocationMode": "All"}}])
    );
    // Kubernetes refuses adminAccess outside a namespace with this label.
    let ns = &g.get("k8s/core/Namespace/k3d-gpu-xpumd").unwrap().spec;
    assert_eq!(ns["metadata"]["labels"]["resource.kubernetes.io/admin-access"], "true");
    let p = pod(&g, XPUMD);
    assert_eq!(p["resourceClaims"], json!([{"name": "gpus", "resourceClaimTemplateName": "xpumd-monitor"}]));
    assert_eq!(p["containers"][0]["resources"]["claims"], json!([{"name": "gpus"}]));
    assert!(p["containers"][0]["resources"]["limits"].get("gpu.intel.com/monitoring").is_none());
    assert_eq!(p["nodeSelector"]["k3d-gpu.io/intel-gpu-dra"], "true");
    // After the driver that publishes the devices; the claim template after its namespace.
    assert!(g.get(XPUMD).unwrap().depends_on.iter().any(|d| d.contains("intel-gpu-resource-driver")));
    assert!(g.get(CLAIM).unwrap().depends_on.contains(&"k8s/core/Namespace/k3d-gpu-xpumd".to_string()));
    assert!(g.get("verify/rollout/DaemonSet/k3d-gpu-xpumd/xpumd").is_some());
    // DRA mode needs no monitoring flag (the plugin is not there).
    assert!(build("[sharing]\nmode = \"dra\"\nmonitoring = false\n[telemetry]\n", "arc-b580-xe-rpl-igpu").is_ok());
}

#[test]
fn dcgm_exporter_runs_under_the_nvidia_runtime_and_takes_no_gpu() {
    let g = graph("[vendors]\nenable = [\"nvidia\"]\n[telemetry]\n", "desktop-rpl-nvidia");
    let p = pod(&g, DCGM);
    assert_eq!(p["runtimeClassName"], "nvidia");
    let c = &p["containers"][0];
    assert!(c["resources"]["limits"].get("nvidia.com/gpu").is_none());
    let env: Vec<&str> = c["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(env, ["DCGM_EXPORTER_LISTEN", "DCGM_EXPORTER_KUBERNETES", "NODE_NAME"]);
    assert!(c["image"].as_str().unwrap().contains("@sha256:"), "pinned by the confirmed digest");
    assert!(g.get("verify/rollout/DaemonSet/k3d-gpu-dcgm/dcgm-exporter").is_some());
    assert!(g.get("verify/runtimeclass/nvidia").is_some());
    // Only the NVIDIA side here: the iGPU is not enabled, so no xpumd and no monitoring rule.
    assert!(g.get(XPUMD).is_none());
    let off = graph("[vendors]\nenable = [\"nvidia\"]\n[telemetry]\nnvidia = false\n", "desktop-rpl-nvidia");
    assert!(off.get(DCGM).is_none());
}

#[test]
fn both_exporters_on_a_host_with_both_vendors() {
    let g = graph(PLUGIN, "desktop-rpl-nvidia");
    assert!(g.get(XPUMD).is_some() && g.get(DCGM).is_some());
}

#[test]
fn exporters_run_only_on_the_accelerator_node_and_listen_only_in_the_cluster() {
    let g = graph("[cluster]\nagents = 1\n[sharing]\nmonitoring = true\n[telemetry]\n", "desktop-rpl-nvidia");
    for id in [XPUMD, DCGM] {
        let p = pod(&g, id);
        assert_eq!(p["nodeSelector"]["k3d-gpu.io/accelerators"], "true", "{id}");
        assert!(p["hostNetwork"].is_null(), "{id}");
        assert!(p["containers"][0]["ports"].as_array().unwrap().iter().all(|p| p["hostPort"].is_null()), "{id}");
    }
    for svc in ["k8s/core/Service/k3d-gpu-xpumd/xpumd", "k8s/core/Service/k3d-gpu-dcgm/dcgm-exporter"] {
        assert_eq!(g.get(svc).unwrap().spec["spec"]["type"], "ClusterIP", "{svc}");
    }
    // The same node as the device plugins'.
    let plugin = pod(&g, "k8s/apps/DaemonSet/kube-system/nvidia-device-plugin-daemonset");
    assert_eq!(plugin["nodeSelector"]["k3d-gpu.io/accelerators"], "true");
}

#[test]
fn telemetry_that_applies_nowhere_is_a_warning() {
    let codes = |g: &DesiredGraph| g.warnings.iter().map(|w| w.code.clone()).collect::<Vec<_>>();
    let g = graph("[telemetry]\n", "plain-laptop-amd");
    assert!(codes(&g).contains(&"telemetry-nothing".to_string()), "{:?}", codes(&g));
    let g = graph("[vendors]\nenable = [\"nvidia\"]\n[telemetry]\nintel = true\n", "desktop-rpl-nvidia");
    assert!(codes(&g).contains(&"telemetry-without-vendor".to_string()), "{:?}", codes(&g));
}

#[test]
fn turning_telemetry_off_deletes_the_exporters_and_nothing_else() {
    let on = graph(PLUGIN, "desktop-rpl-nvidia");
    let off = graph("[sharing]\nmonitoring = true\n", "desktop-rpl-nvidia");
    let p = plan(&off, &converged(&on), placeholder_inputs());
    let mut deleted: Vec<&str> =
        p.actions.iter().filter(|a| a.action == ActionKind::Delete).map(|a| a.id.as_str()).collect();
    deleted.sort();
    let mut expected = exporters(&on).into_iter().filter(|id| id.starts_with("k8s/")).collect::<Vec<_>>();
    // And the metrics stack, namespace and all.
    expected.extend(stack(&on).into_iter().filter(|id| id.starts_with("k8s/")));
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(p.actions.iter().all(|a| a.action == ActionKind::Delete), "{:#?}", p.actions);
}

#[test]
fn telemetry_deploys_prometheus_node_exporter_and_grafana_listening_in_the_cluster_only() {
    assert!(stack(&graph("[sharing]\nmonitoring = true\n", "arc-b580-xe-rpl-igpu")).is_empty());
    let g = graph(PLUGIN, "arc-b580-xe-rpl-igpu");
    for svc in ["prometheus", "grafana", "node-exporter"] {
        let s = &g.get(&format!("k8s/core/Service/k3d-gpu-metrics/{svc}")).unwrap().spec["spec"];
        assert_eq!(s["type"], "ClusterIP", "{svc}");
    }
    // node-exporter's Service is headless: its A records are every node's pod.
    assert_eq!(g.get("k8s/core/Service/k3d-gpu-metrics/node-exporter").unwrap().spec["spec"]["clusterIP"], "None");
    for id in [PROMETHEUS, NODE_EXPORTER, GRAFANA] {
        let p = pod(&g, id);
        assert!(p["hostNetwork"].is_null() && p["hostPID"].is_null(), "{id}");
        assert!(p["containers"][0]["ports"].as_array().unwrap().iter().all(|p| p["hostPort"].is_null()), "{id}");
        assert_eq!(p["automountServiceAccountToken"], false, "{id}: no API access");
        let kind = if id == NODE_EXPORTER { "DaemonSet" } else { "Deployment" };
        let name = id.rsplit('/').next().unwrap();
        assert!(g.get(&format!("verify/rollout/{kind}/k3d-gpu-metrics/{name}")).is_some(), "{id}");
    }
    // Prometheus and Grafana on the E-cores of this hybrid CPU, as the chat UI.
    for id in [PROMETHEUS, GRAFANA] {
        let labels = &g.get(id).unwrap().spec["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["k3d-gpu.io/cores"], "efficient", "{id}");
    }
    // Retention bounded in time and size, below the volume's size.
    let args = pod(&g, PROMETHEUS)["containers"][0]["args"].clone();
    let args: Vec<&str> = args.as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--storage.tsdb.retention.time=15d"), "{args:?}");
    assert!(args.contains(&"--storage.tsdb.retention.size=4GB"), "{args:?}");
    assert_eq!(
        g.get("k8s/core/PersistentVolumeClaim/k3d-gpu-metrics/prometheus-data").unwrap().spec["spec"]["resources"]["requests"]
            ["storage"],
        "5Gi"
    );
    // Pinned through images.lock like every image.
    for image in [
        "quay.io/prometheus/prometheus:v3.13.2",
        "quay.io/prometheus/node-exporter:v1.12.1",
        "docker.io/grafana/grafana:13.1.3",
    ] {
        assert!(g.images.contains_key(image), "{image}");
    }
}

#[test]
fn prometheus_scrapes_every_exporter_and_the_model_servers() {
    let g = graph(&format!("{PLUGIN}[agent]\n"), "desktop-rpl-nvidia");
    let config = prometheus_config(&g);
    assert_eq!(targets(&config, "xpumd"), ["xpumd.k3d-gpu-xpumd.svc:8080"]);
    assert_eq!(targets(&config, "dcgm-exporter"), ["dcgm-exporter.k3d-gpu-dcgm.svc:9400"]);
    let node = config["scrape_configs"].as_array().unwrap().iter().find(|j| j["job_name"] == "node-exporter").unwrap();
    assert_eq!(
        node["dns_sd_configs"],
        json!([{"names": ["node-exporter.k3d-gpu-metrics.svc"], "type": "A", "port": 9100}])
    );
    let servers = targets(&config, "model-servers");
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert!(servers[0].ends_with(".k3d-gpu-agent.svc:8000"), "{servers:?}");
    // OVMS serves /metrics only with --metrics_enable: the agent and every add-on get it.
    let g = graph("[agent]\n[addons.stt]\n[telemetry]\n", "lunar-lake-npu");
    let servers = targets(&prometheus_config(&g), "model-servers");
    assert!(servers.len() >= 2, "{servers:?}");
    for s in &servers {
        let name = s.split('.').next().unwrap();
        let c = &pod(&g, &format!("k8s/apps/Deployment/k3d-gpu-agent/{name}"))["containers"][0];
        assert!(c["args"].as_array().unwrap().iter().any(|a| a == "--metrics_enable"), "{name}");
    }
    let without = graph("[agent]\n[addons.stt]\n", "lunar-lake-npu");
    let c = &pod(&without, "k8s/apps/Deployment/k3d-gpu-agent/ovms")["containers"][0];
    assert!(!c["args"].as_array().unwrap().iter().any(|a| a == "--metrics_enable"));
    // No exporter on this host: only Prometheus itself and node-exporter.
    let config = prometheus_config(&graph("[telemetry]\n", "plain-laptop-amd"));
    let jobs: Vec<&str> =
        config["scrape_configs"].as_array().unwrap().iter().map(|j| j["job_name"].as_str().unwrap()).collect();
    assert_eq!(jobs, ["prometheus", "node-exporter"]);
}

#[test]
fn node_exporter_reads_rapl_and_cpu_metrics_carry_their_core_type() {
    let g = graph(PLUGIN, "arc-b580-xe-rpl-igpu");
    let p = pod(&g, NODE_EXPORTER);
    let c = &p["containers"][0];
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--collector.rapl"), "{args:?}");
    assert!(args.contains(&"--path.sysfs=/host/sys") && args.contains(&"--path.procfs=/host/proc"), "{args:?}");
    // RAPL's energy counters are root's to read; nothing else is granted.
    assert_eq!(p["securityContext"]["runAsUser"], 0);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert!(c["volumeMounts"].as_array().unwrap().iter().all(|m| m["readOnly"] == true));
    // This host: P-cores 0-11, E-cores 12-19 (its cpu_core and cpu_atom lists).
    let config = prometheus_config(&g);
    let node = config["scrape_configs"].as_array().unwrap().iter().find(|j| j["job_name"] == "node-exporter").unwrap();
    let relabels = node["metric_relabel_configs"].as_array().unwrap();
    let p_cores = (0..12).map(|n| n.to_string()).collect::<Vec<_>>().join("|");
    assert_eq!(
        relabels[0],
        json!({"source_labels": ["__name__", "cpu"], "regex": format!("node_cpu_.+;({p_cores})"), "target_label": "core_type", "replacement": "performance"})
    );
    assert_eq!(relabels[1]["regex"], "node_cpu_.+;(12|13|14|15|16|17|18|19)");
    assert_eq!(relabels[1]["replacement"], "efficient");
    // A CPU of one kind: nothing to label.
    let config = prometheus_config(&graph("[telemetry]\n", "plain-laptop-amd"));
    let node = config["scrape_configs"].as_array().unwrap().iter().find(|j| j["job_name"] == "node-exporter").unwrap();
    assert!(node["metric_relabel_configs"].is_null());
}

#[test]
fn grafana_signs_in_as_the_chat_ui_does_and_shows_the_dashboard() {
    let g = graph(PLUGIN, "arc-b580-xe-rpl-igpu");
    let c = &pod(&g, GRAFANA)["containers"][0];
    let env: std::collections::BTreeMap<&str, &str> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert_eq!(env["GF_AUTH_ANONYMOUS_ENABLED"], "false");
    assert_eq!(env["GF_USERS_ALLOW_SIGN_UP"], "false");
    assert_eq!(env["GF_ANALYTICS_CHECK_FOR_UPDATES"], "false");
    // Nothing fetched from grafana.com: no plugin installs, no plugin-signing key downloads.
    assert_eq!(env["GF_PLUGINS_PREINSTALL_DISABLED"], "true");
    assert_eq!(env["GF_PLUGINS_PUBLIC_KEY_RETRIEVAL_DISABLED"], "true");
    // The password is generated in the pod, never written in the graph.
    assert!(!env.contains_key("GF_SECURITY_ADMIN_PASSWORD"));
    assert_eq!(env["GF_SECURITY_ADMIN_PASSWORD__FILE"], "/var/lib/grafana/.k3d-gpu-admin-password");
    let start = c["command"][2].as_str().unwrap();
    assert!(
        start.contains("umask 077") && start.contains("/dev/urandom") && start.ends_with("exec /run.sh\n"),
        "{start}"
    );
    // Provisioned: the datasource is the Prometheus Service, the dashboard ours.
    let ds = &g.get("k8s/core/ConfigMap/k3d-gpu-metrics/grafana-datasources").unwrap().spec["data"]["datasources.yaml"];
    let ds: Value = serde_json::from_str(ds.as_str().unwrap()).unwrap();
    assert_eq!(ds["datasources"][0]["url"], "http://prometheus.k3d-gpu-metrics.svc:9090");
    assert_eq!(ds["datasources"][0]["uid"], "prometheus");
    let board = &g.get("k8s/core/ConfigMap/k3d-gpu-metrics/grafana-dashboards").unwrap().spec["data"]["k3d-gpu.json"];
    let board: Value = serde_json::from_str(board.as_str().unwrap()).unwrap();
    assert_eq!(board["uid"], "k3d-gpu");
    let titles: Vec<&str> = board["panels"].as_array().unwrap().iter().map(|p| p["title"].as_str().unwrap()).collect();
    for t in [
        "GPU utilisation",
        "GPU memory used",
        "GPU power",
        "GPU temperature",
        "CPU package power (RAPL)",
        "Tokens per second",
        "Time to first token",
    ] {
        assert!(titles.contains(&t), "{t}: {titles:?}");
    }
    for p in board["panels"].as_array().unwrap() {
        assert!(
            p["targets"].as_array().unwrap().iter().all(|t| t["datasource"]["uid"] == "prometheus"),
            "{}",
            p["title"]
        );
    }
}

/// Prometheus's own parser at the version Debian packages (`promtool check config`) reads the
/// configuration the graph deploys, for each shape it takes. Skipped without promtool
/// (.ci/apt.sh installs Debian's prometheus), unless K3D_GPU_TEST_PROMTOOL=1 requires it.
#[test]
fn promtool_accepts_the_scrape_configuration() {
    let found = std::process::Command::new("promtool").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("K3D_GPU_TEST_PROMTOOL").as_deref() != Ok("1"),
            "K3D_GPU_TEST_PROMTOOL=1 and no promtool"
        );
        eprintln!("skipped: no promtool (apt-get install prometheus)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (toml, host) in [
        (format!("{PLUGIN}[agent]\n"), "desktop-rpl-nvidia"),
        ("[agent]\n[addons.stt]\n[telemetry]\n".to_string(), "lunar-lake-npu"),
        ("[telemetry]\n".to_string(), "plain-laptop-amd"),
    ] {
        let g = graph(&toml, host);
        let cm = &g.get("k8s/core/ConfigMap/k3d-gpu-metrics/prometheus").unwrap().spec;
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, cm["data"]["prometheus.yml"].as_str().unwrap()).unwrap();
        let out = std::process::Command::new("promtool")
            .args(["check", "config", "--syntax-only"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{host}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // And a broken one is refused: the check can fail.
        std::fs::write(&file, "scrape_configs:\n  - job_name: x\n    dns_sd_configs: [{names: [a], type: TXT}]\n")
            .unwrap();
        let out = std::process::Command::new("promtool")
            .args(["check", "config", "--syntax-only"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{host}: promtool accepted a bad config");
    }
}
