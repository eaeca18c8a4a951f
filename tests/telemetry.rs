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
fn xpumd_in_plugin_mode_needs_the_plugins_monitoring_flag() {
    let e = build("[telemetry]\n", "arc-b580-xe-rpl-igpu").unwrap_err();
    assert_eq!(e.iter().map(|e| e.code).collect::<Vec<_>>(), ["telemetry-needs-monitoring"]);
    assert_eq!(e[0].key, ["telemetry"]);
    let e = build("[telemetry]\nintel = true\n", "arc-b580-xe-rpl-igpu").unwrap_err();
    assert_eq!(e[0].key, ["telemetry", "intel"]);
    // Turning the Intel exporter off is the other way out.
    let g = graph("[telemetry]\nintel = false\n", "arc-b580-xe-rpl-igpu");
    assert!(exporters(&g).is_empty());
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
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(p.actions.iter().all(|a| a.action == ActionKind::Delete), "{:#?}", p.actions);
}
