//! Each live rule passing and failing.

use super::*;
use crate::observe::NodeContainer;
use serde_json::json;

#[test]
fn versions_are_read_from_what_the_tools_print() {
    assert_eq!(parse_version("k3d version v5.8.3\nk3s version v1.31.5-k3s1 (default)"), Some((5, 8, 3)));
    assert_eq!(parse_version("20.10.24+dfsg1"), Some((20, 10, 24)));
    assert_eq!(parse_version("28.1"), Some((28, 1, 0)));
    assert_eq!(parse_version("dev"), None);
}

#[test]
fn a_tool_below_its_floor_fails_and_one_at_or_above_passes() {
    assert_eq!(version_floor("docker", "19.03.15", DOCKER_FLOOR).level, Level::Fail);
    assert_eq!(version_floor("docker", "20.10.0", DOCKER_FLOOR).level, Level::Info);
    assert_eq!(version_floor("k3d", "k3d version v4.4.8", K3D_FLOOR).level, Level::Fail);
    assert_eq!(version_floor("k3d", "k3d version v5.0.0", K3D_FLOOR).level, Level::Info);
    assert_eq!(version_floor("k3d", "k3d version dev", K3D_FLOOR).level, Level::Warn);
}

#[test]
fn an_nvidia_gpu_needs_the_nvidia_runtime_or_a_cdi_spec() {
    let runc = vec!["io.containerd.runc.v2".to_string(), "runc".to_string()];
    assert!(nvidia_path(false, &runc, &[]).is_none(), "no NVIDIA GPU, nothing to check");
    let missing = nvidia_path(true, &runc, &[]).unwrap();
    assert_eq!((missing.level, missing.code.as_str()), (Level::Fail, "nvidia-runtime-missing"));
    assert!(missing.fix.unwrap().contains("nvidia-ctk"));
    let with_runtime = [runc.clone(), vec!["nvidia".into()]].concat();
    assert_eq!(nvidia_path(true, &with_runtime, &[]).unwrap().level, Level::Info);
    let spec = vec![("/etc/cdi/nvidia.yaml".to_string(), "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n".to_string())];
    assert_eq!(nvidia_path(true, &runc, &spec).unwrap().code, "nvidia-cdi-ok");
    let other = vec![("/etc/cdi/intel.yaml".to_string(), "kind: gpu.intel.com/i915\n".to_string())];
    assert_eq!(nvidia_path(true, &runc, &other).unwrap().level, Level::Fail);
}

fn ds(desired: i64, ready: i64) -> Value {
    json!({"kind": "DaemonSet", "metadata": {"name": "intel-gpu-plugin", "namespace": "kube-system",
        "labels": {"k3d-gpu.io/component": "intel-gpu-plugin"}},
        "status": {"desiredNumberScheduled": desired, "numberReady": ready}})
}

#[test]
fn a_device_plugin_daemonset_must_be_ready_where_it_is_scheduled() {
    let k3d_gpu = crate::shell::Command::new("k3d-gpu").opt("-c", "lab.toml");
    let daemonsets = |objects: &[Value]| daemonsets(objects, &k3d_gpu, "k3d-lab");
    assert_eq!(daemonsets(&[ds(1, 1)])[0].level, Level::Info);
    let not_ready = &daemonsets(&[ds(2, 1)])[0];
    assert_eq!(not_ready.level, Level::Fail);
    assert!(not_ready.fix.as_deref().unwrap().contains("`k3d-gpu -c lab.toml logs intel-gpu-plugin`"));
    let unscheduled = &daemonsets(&[ds(0, 0)])[0];
    assert_eq!(unscheduled.level, Level::Warn);
    let fix = unscheduled.fix.as_deref().unwrap();
    assert!(fix.contains("`kubectl --context k3d-lab -n kube-system describe daemonset intel-gpu-plugin`"), "{fix}");
    assert!(daemonsets(&[json!({"kind": "ConfigMap"})]).is_empty());
}

#[test]
fn a_hostile_daemonset_is_named_in_one_shell_word_each() {
    let k3d_gpu = crate::shell::Command::new("k3d-gpu");
    let mut hostile = ds(0, 0);
    hostile["metadata"]["namespace"] = json!("ns;touch pwned");
    let fix = daemonsets(&[hostile.clone()], &k3d_gpu, "k3d-lab")[0].fix.clone().unwrap();
    assert!(fix.contains("-n 'ns;touch pwned' describe"), "{fix}");
    hostile["status"]["desiredNumberScheduled"] = json!(2);
    hostile["metadata"]["labels"]["k3d-gpu.io/component"] = json!("$(touch pwned)");
    let fix = daemonsets(&[hostile], &k3d_gpu, "k3d-lab")[0].fix.clone().unwrap();
    assert!(fix.contains("`k3d-gpu logs '$(touch pwned)'`"), "{fix}");
}

fn cluster(image: &str, id: &str, configured_id: &str) -> ObservedCluster {
    ObservedCluster {
        name: "lab".into(),
        nodes: vec![NodeContainer {
            name: "k3d-lab-server-0".into(),
            role: "server".into(),
            image: image.into(),
            image_id: id.into(),
            image_version: Some("1.2.3".into()),
            k3s_args: vec![],
            mounts: vec![],
            env: Default::default(),
            gpus: None,
            running: true,
            recorded_spec: None,
        }],
        configured_image_id: Some(configured_id.into()),
    }
}

#[test]
fn the_node_image_in_use_is_compared_with_the_configs() {
    assert_eq!(
        node_image(&cluster("k3d-gpu-node:a", "sha256:1", "sha256:1"), "k3d-gpu-node:a").unwrap().code,
        "node-image-ok"
    );
    assert_eq!(
        node_image(&cluster("rancher/k3s:v1", "sha256:1", "sha256:1"), "k3d-gpu-node:a").unwrap().code,
        "node-image-other"
    );
    assert_eq!(
        node_image(&cluster("k3d-gpu-node:a", "sha256:1", "sha256:2"), "k3d-gpu-node:a").unwrap().code,
        "node-image-stale"
    );
}

#[test]
fn the_node_image_check_fails_doctor_on_a_failing_command_or_an_image_that_cannot_run() {
    use crate::node_check::{required, verdict};
    let required = required(true);
    let mut all = "shell ok\n".to_string();
    for c in &required {
        all.push_str(&format!("ran 0 {}\n| {} 1.0\n", c.label(), c.label()));
    }
    let ok = node_image_runs("k3d-gpu-node:x", &Ok(verdict(&required, &all, "")));
    assert_eq!((ok.level, ok.code.as_str()), (Level::Info, "node-image-runs"));
    assert!(ok.evidence.contains("ipset --version: ipset --version 1.0"), "{}", ok.evidence);
    let lacking = all.replace("ran 0 nvidia-container-runtime --version", "ran 127 nvidia-container-runtime --version");
    let f = node_image_runs("k3d-gpu-node:x", &Ok(verdict(&required, &lacking, "")));
    assert_eq!((f.level, f.code.as_str()), (Level::Fail, "node-image-incomplete"));
    assert!(f.text.contains("nvidia-container-runtime") && f.text.contains("k3d-gpu-node:x"), "{}", f.text);
    assert!(f.fix.is_some());
    let dash = node_image_runs("k3d-gpu-node:x", &Ok(verdict(&required, "", "sh: 4: trap: SIGTERM: bad trap")));
    assert_eq!((dash.level, dash.code.as_str()), (Level::Fail, "node-image-incomplete"));
    assert!(dash.text.contains("bad trap"), "{}", dash.text);
    let f = node_image_runs("img", &Err("no /bin/sh".into()));
    assert_eq!((f.level, f.code.as_str()), (Level::Fail, "node-image-unusable"));
}
