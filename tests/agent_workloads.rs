//! The agent deployed: `[agent]` compiles to a Namespace, a PVC, the model server's Deployment
//! and its Service, built from the computed placement, on each device path.

mod support;

use std::sync::LazyLock;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{CompileError, DesiredGraph, compile};
use k3d_gpu::config::load_str;
use k3d_gpu::facts::Facts;
use serde_json::Value;
use support::facts_of;

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::embedded().unwrap());

fn compile_on(toml: &str, facts: &Facts, catalog: &Catalog) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, facts, catalog)
}

fn graph(toml: &str, host: &str) -> DesiredGraph {
    compile_on(toml, &facts_of(host), &CATALOG).unwrap_or_else(|e| panic!("{host}: {e:#?}"))
}

fn spec<'a>(g: &'a DesiredGraph, id: &str) -> &'a Value {
    &g.get(id).unwrap_or_else(|| panic!("no {id}; have {:?}", g.resources().map(|r| &r.id).collect::<Vec<_>>())).spec
}

fn args(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).map(|i| args[i + 1].clone())
}

const OVMS: &str = "k8s/apps/Deployment/k3d-gpu-agent/ovms";
const VLLM: &str = "k8s/apps/Deployment/k3d-gpu-agent/vllm";

#[test]
fn lunar_lake_gets_the_ovms_deployment_on_its_gpu() {
    let g = graph("[agent]\n", "lunar-lake-npu");
    let d = spec(&g, OVMS);
    let a = args(d);
    assert_eq!(flag(&a, "--target_device").as_deref(), Some("GPU"));
    assert_eq!(flag(&a, "--source_model").as_deref(), Some("OpenVINO/Qwen3-4B-int4-ov"));
    assert_eq!(flag(&a, "--rest_port").as_deref(), Some("8000"));
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["resources"]["limits"]["gpu.intel.com/xe"], "1");
    assert_eq!(c["resources"]["requests"]["cpu"], "2");
    assert_eq!(pod["securityContext"]["supplementalGroups"], serde_json::json!([992]), "the render group");
    assert_eq!(pod["nodeSelector"]["gpu.intel.com/xmx"], "true");
    assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["claimName"], "ovms-models");
    // The init container pulls the same model for the same device.
    assert_eq!(
        args(&serde_json::json!({"spec":{"template":{"spec":{"containers":[pod["initContainers"][0].clone()]}}}}))[0],
        "--pull"
    );
    assert!(c["image"].as_str().unwrap().starts_with("docker.io/openvino/model_server:2026.2-gpu"));
    let svc = spec(&g, "k8s/core/Service/k3d-gpu-agent/ovms");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["port"], 8000);
    assert!(g.get("k8s/core/PersistentVolumeClaim/k3d-gpu-agent/ovms-models").is_some());
    assert!(g.get("k8s/core/Namespace/k3d-gpu-agent").is_some());
    // Deployed now: no "not deployed" warning for [agent].
    assert!(!g.warnings.iter().any(|w| w.code == "not-deployed" && w.key.as_deref() == Some("agent")));
    // The Deployment waits for its namespace and volume.
    let r = g.get(OVMS).unwrap();
    assert!(r.depends_on.iter().any(|d| d.ends_with("PersistentVolumeClaim/k3d-gpu-agent/ovms-models")));
}

#[test]
fn the_cpu_path_requests_no_device_and_pins_the_p_cores() {
    let g = graph("[agent]\n[vendors]\nexclude = [\"nvidia\"]\n", "desktop-rpl-nvidia");
    let d = spec(&g, OVMS);
    assert_eq!(flag(&args(d), "--target_device").as_deref(), Some("CPU"));
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    let limits = c["resources"]["limits"].as_object().unwrap();
    assert_eq!(limits.keys().collect::<Vec<_>>(), ["memory"], "no device resource on the CPU");
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["k3d-gpu.io/cores"], "performance");
    assert!(d["spec"]["template"]["spec"]["securityContext"].get("supplementalGroups").is_none());
}

#[test]
fn vllm_on_a_gaudi_and_on_arc() {
    let g = graph("[agent]\n", "gaudi3-server");
    let d = spec(&g, VLLM);
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("vault.habana.ai/gaudi-docker/1.24.2/"));
    assert_eq!(c["resources"]["limits"]["habana.ai/gaudi"], "1");
    assert_eq!(flag(&args(d), "--dtype").as_deref(), Some("bfloat16"));
    assert!(c["env"].as_array().unwrap().iter().any(|e| e["name"] == "PT_HPU_LAZY_MODE" && e["value"] == "0"));
    assert_eq!(c["securityContext"]["capabilities"]["add"], serde_json::json!(["SYS_NICE"]));
    assert!(g.get("k8s/core/Service/k3d-gpu-agent/vllm").is_some());
    assert!(g.get("k8s/core/PersistentVolumeClaim/k3d-gpu-agent/vllm-models").is_some());

    let g = graph("[agent]\nbackend = \"llm-scaler\"\n", "arc-b580-xe-rpl-igpu");
    let c = &spec(&g, VLLM)["spec"]["template"]["spec"]["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("docker.io/intel/llm-scaler-vllm:1.4"));
    assert_eq!(c["command"][0], "bash", "the oneAPI environment is sourced first");
    assert_eq!(c["args"][0], "serve");
    let g = graph("[agent]\nbackend = \"vllm\"\n", "arc-b580-xe-rpl-igpu");
    let d = spec(&g, VLLM);
    assert!(d["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().contains("vllm-openai-xpu"));
    assert_eq!(flag(&args(d), "--dtype").as_deref(), Some("float16"));
}

#[test]
fn a_model_change_updates_the_same_deployment() {
    let before = graph("[agent]\n", "lunar-lake-npu");
    let after = graph("[agent]\nmodel = \"OpenVINO/Phi-4-mini-instruct-int4-ov\"\n", "lunar-lake-npu");
    let ids = |g: &DesiredGraph| g.resources().map(|r| r.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&before), ids(&after), "same objects: the model is a field, not a name");
    let a = args(spec(&after, OVMS));
    assert_eq!(flag(&a, "--source_model").as_deref(), Some("OpenVINO/Phi-4-mini-instruct-int4-ov"));
    assert_eq!(flag(&a, "--model_name").as_deref(), Some("Phi-4-mini-instruct-int4-ov"));
    // The reference's parsers belong to the default model only.
    assert_eq!(flag(&a, "--tool_parser"), None);
    assert_ne!(spec(&before, OVMS), spec(&after, OVMS));
}

#[test]
fn an_unknown_render_group_is_said_and_never_becomes_group_0() {
    let mut facts = facts_of("lunar-lake-npu");
    for gpu in &mut facts.host.intel_gpus {
        for node in &mut gpu.device_nodes {
            node.gid = 0;
            node.group = None;
        }
    }
    let g = compile_on("[agent]\n", &facts, &CATALOG).unwrap();
    let pod = &spec(&g, OVMS)["spec"]["template"]["spec"];
    assert!(pod["securityContext"].get("supplementalGroups").is_none(), "{pod}");
    assert!(g.warnings.iter().any(|w| w.code == "agent-group-unknown"), "{:?}", g.warnings);
}

#[test]
fn agent_images_go_through_the_lock() {
    let g = graph("[agent]\n", "lunar-lake-npu");
    let used = &g.images["docker.io/openvino/model_server:2026.2-gpu"];
    assert_eq!(used.source, k3d_gpu::images::Source::Unlocked);
    assert!(g.warnings.iter().any(|w| w.code == "image-unlocked" && w.text.contains("model_server")));

    let digest = format!("sha256:{}", "ab".repeat(32));
    let lock = format!(
        "schema = \"k3d-gpu.images/v1\"\n[images.\"docker.io/openvino/model_server:2026.2-gpu\"]\ndigest = \"{digest}\"\n"
    );
    let mut catalog = CATALOG.clone();
    catalog.images.user = Some(k3d_gpu::images::Lock::parse(&lock).unwrap());
    let g = compile_on("[agent]\n", &facts_of("lunar-lake-npu"), &catalog).unwrap();
    let d = spec(&g, OVMS);
    let want = format!("docker.io/openvino/model_server:2026.2-gpu@{digest}");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], want.as_str());
    assert_eq!(d["spec"]["template"]["spec"]["initContainers"][0]["image"], want.as_str());
}

#[test]
fn the_nvidia_host_gets_the_cuda_backend() {
    let g = graph("[agent]\n", "desktop-rpl-nvidia");
    assert!(g.get(OVMS).is_none());
    let d = spec(&g, VLLM);
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("docker.io/vllm/vllm-openai:"), "{}", c["image"]);
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "1");
    assert_eq!(pod["runtimeClassName"], "nvidia", "k3s's nvidia runtime brings the driver libraries");
    let a = args(d);
    assert_eq!(a[1], "Qwen/Qwen3-4B");
    assert_eq!(flag(&a, "--port").as_deref(), Some("8000"));
    assert!(!a.iter().any(|x| x == "--enforce-eager"), "the Arc work-arounds stay off CUDA: {a:?}");
}

fn plan_from(before: &DesiredGraph, after: &DesiredGraph) -> k3d_gpu::plan::Plan {
    k3d_gpu::plan::plan(after, &support::converged(before), support::placeholder_inputs())
}

fn actions(plan: &k3d_gpu::plan::Plan) -> Vec<(String, String)> {
    plan.actions
        .iter()
        .filter(|a| a.id.contains("k3d-gpu-agent"))
        .map(|a| (a.id.clone(), serde_json::to_value(a.action).unwrap().as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn removing_the_agent_deletes_its_workload_and_keeps_its_data() {
    let with = graph("[agent]\n", "lunar-lake-npu");
    let without = graph("", "lunar-lake-npu");
    let plan = plan_from(&with, &without);
    let a = actions(&plan);
    assert_eq!(
        a,
        [
            ("k8s/apps/Deployment/k3d-gpu-agent/ovms".to_string(), "delete".to_string()),
            ("k8s/core/Service/k3d-gpu-agent/ovms".to_string(), "delete".to_string()),
        ]
    );
    let kept: Vec<&str> = plan.warnings.iter().filter(|w| w.code == "data-kept").map(|w| w.text.as_str()).collect();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(kept.iter().any(|t| t.starts_with("k8s/core/PersistentVolumeClaim/k3d-gpu-agent/ovms-models is")
        && t.contains("its files are on the host in $XDG_DATA_HOME/k3d-gpu/models/gpu/ovms")));
    assert!(kept.iter().any(|t| t.starts_with("k8s/core/PersistentVolume/k3d-gpu-agent-ovms-models is")));
    assert!(kept.iter().any(|t| t.starts_with("k8s/core/Namespace/k3d-gpu-agent is")));

    // keep_models = false: the plan deletes them; the files stay in the host model store, and
    // the plan says which directory to delete.
    let with = graph("[agent]\nkeep_models = false\n", "lunar-lake-npu");
    let plan = plan_from(&with, &without);
    let pvc = plan.actions.iter().find(|a| a.id.ends_with("PersistentVolumeClaim/k3d-gpu-agent/ovms-models")).unwrap();
    assert!(
        pvc.reason
            .text
            .contains("its files stay on the host in $XDG_DATA_HOME/k3d-gpu/models/gpu/ovms: delete that directory"),
        "{}",
        pvc.reason.text
    );
    assert!(!pvc.reason.text.contains("is lost"), "{}", pvc.reason.text);
    assert_eq!(actions(&plan).len(), 5, "{:?}", actions(&plan));
}

#[test]
fn every_model_server_keeps_its_models_in_the_host_model_store() {
    let g = graph("[agent]\n[addons.embeddings]\n", "lunar-lake-npu");
    let cluster = spec(&g, "k3d/cluster/gpu");
    assert_eq!(cluster["model_store"], serde_json::json!({ "dir": null, "node": "/var/lib/k3d-gpu/models" }));
    for server in ["ovms", "embeddings"] {
        let pvc = spec(&g, &format!("k8s/core/PersistentVolumeClaim/k3d-gpu-agent/{server}-models"));
        assert_eq!(pvc["spec"]["storageClassName"], "k3d-gpu-models");
        assert_eq!(pvc["spec"]["volumeName"], format!("k3d-gpu-agent-{server}-models"));
        let pv_id = format!("k8s/core/PersistentVolume/k3d-gpu-agent-{server}-models");
        let pv = spec(&g, &pv_id);
        assert_eq!(pv["spec"]["local"]["path"], format!("/var/lib/k3d-gpu/models/{server}"));
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain", "deleting it never deletes the files");
        assert_eq!(pv["spec"]["storageClassName"], "k3d-gpu-models");
        assert_eq!(pv["spec"]["capacity"]["storage"], pvc["spec"]["resources"]["requests"]["storage"]);
        assert_eq!(pv["metadata"]["labels"]["k3d-gpu.io/keep-on-removal"], "true");
        assert_eq!(
            pv["metadata"]["annotations"]["k3d-gpu.io/model-store"],
            format!("$XDG_DATA_HOME/k3d-gpu/models/gpu/{server}")
        );
        let pvc_id = format!("k8s/core/PersistentVolumeClaim/k3d-gpu-agent/{server}-models");
        assert!(g.get(&pvc_id).unwrap().depends_on.contains(&pv_id), "the PVC is applied after its PV");
    }
    // A configured store: its path is in the cluster spec and the PVs' annotations.
    let g = graph("[agent]\nmodel_dir = \"/srv/models\"\n", "lunar-lake-npu");
    assert_eq!(spec(&g, "k3d/cluster/gpu")["model_store"]["dir"], "/srv/models");
    let pv = spec(&g, "k8s/core/PersistentVolume/k3d-gpu-agent-ovms-models");
    assert_eq!(pv["metadata"]["annotations"]["k3d-gpu.io/model-store"], "/srv/models/ovms");
    // Without [agent] the store is mounted all the same: adding the agent needs no new cluster.
    let bare = graph("", "lunar-lake-npu");
    assert_eq!(spec(&bare, "k3d/cluster/gpu")["model_store"], cluster["model_store"]);
    // A path k3d cannot mount is refused on the key.
    for bad in ["models", "/srv/a:b", "/srv/../etc", "/"] {
        let errors = compile_on(&format!("[agent]\nmodel_dir = {bad:?}\n"), &facts_of("lunar-lake-npu"), &CATALOG)
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(errors.iter().any(|e| e.code == "agent-model-dir"), "{bad}: {errors:?}");
    }
}

#[test]
fn a_model_change_is_an_in_place_update_and_a_backend_change_keeps_the_old_download() {
    let before = graph("[agent]\n", "lunar-lake-npu");
    let after = graph("[agent]\nmodel = \"OpenVINO/Phi-4-mini-instruct-int4-ov\"\n", "lunar-lake-npu");
    let plan = plan_from(&before, &after);
    assert_eq!(actions(&plan), [("k8s/apps/Deployment/k3d-gpu-agent/ovms".to_string(), "update".to_string())]);
    let update = &plan.actions.iter().find(|a| a.id.ends_with("/ovms")).unwrap();
    assert!(update.changed_paths.iter().any(|p| p.contains("args")), "{:?}", update.changed_paths);
    assert!(
        plan.verify.iter().any(|v| v == "verify/endpoint/k3d-gpu-agent/ovms"),
        "the new model is checked: {:?}",
        plan.verify
    );

    let after = graph("[agent]\nbackend = \"vllm\"\n", "arc-b580-xe-rpl-igpu");
    let before = graph("[agent]\ndevice = \"gpu\"\n", "arc-b580-xe-rpl-igpu");
    let plan = plan_from(&before, &after);
    let a = actions(&plan);
    assert!(a.contains(&("k8s/apps/Deployment/k3d-gpu-agent/ovms".into(), "delete".into())), "{a:?}");
    assert!(a.contains(&("k8s/apps/Deployment/k3d-gpu-agent/vllm".into(), "create".into())), "{a:?}");
    assert!(!a.iter().any(|(id, _)| id.ends_with("ovms-models")), "the OVMS download stays: {a:?}");
}

/// Add-ons run where the placement put them (Lunar Lake, the iGPU shared by two: the LLM and
/// the VLM on the GPU, stt on the NPU), each its own OVMS with Service and readiness check.
#[test]
fn add_ons_are_deployed_where_they_were_placed() {
    let g = graph("[agent]\n[addons.vlm]\n[addons.stt]\n[sharing]\nshared = 2\n", "lunar-lake-npu");
    let placed: Vec<(String, &str)> =
        g.agent.as_ref().unwrap().addons.iter().map(|a| (format!("{:?}", a.name), a.device)).collect();
    for (name, device) in &placed {
        let id = format!("k8s/apps/Deployment/k3d-gpu-agent/{}", name.to_lowercase());
        let d = spec(&g, &id);
        let a = args(d);
        assert_eq!(flag(&a, "--target_device").as_deref(), Some(*device), "{name}");
        let pod = &d["spec"]["template"]["spec"];
        let limits = &pod["containers"][0]["resources"]["limits"];
        match *device {
            "NPU" => assert_eq!(limits["npu.intel.com/accel"], "1", "{name}"),
            "GPU" => assert_eq!(limits["gpu.intel.com/xe"], "1", "{name}"),
            _ => assert!(limits.as_object().unwrap().len() == 1, "{name}: {limits}"),
        }
        assert!(g.get(&format!("k8s/core/Service/k3d-gpu-agent/{}", name.to_lowercase())).is_some());
        assert!(g.get(&format!("verify/endpoint/k3d-gpu-agent/{}", name.to_lowercase())).is_some());
    }
    assert_eq!(placed.len(), 2, "{placed:?}");
    let stt = args(spec(&g, "k8s/apps/Deployment/k3d-gpu-agent/stt"));
    assert_eq!(flag(&stt, "--task").as_deref(), Some("speech2text"));
    assert_eq!(flag(&stt, "--source_model").as_deref(), Some("OpenVINO/whisper-large-v3-turbo-fp16-ov"));
    let vlm = args(spec(&g, "k8s/apps/Deployment/k3d-gpu-agent/vlm"));
    assert_eq!(flag(&vlm, "--source_model").as_deref(), Some("OpenVINO/Qwen3-VL-4B-Instruct-int4-ov"));

    // Asked for the NPU, the VLM serves the NPU demo's model with a longer fixed prompt.
    let g = graph("[agent]\n[addons.vlm]\ndevice = \"npu\"\n", "lunar-lake-npu");
    let vlm = args(spec(&g, "k8s/apps/Deployment/k3d-gpu-agent/vlm"));
    assert_eq!(flag(&vlm, "--source_model").as_deref(), Some("OpenVINO/Phi-3.5-vision-instruct-fp16-ov"));
    assert_eq!(flag(&vlm, "--max_prompt_len").as_deref(), Some("4096"));
    let pod = &spec(&g, "k8s/apps/Deployment/k3d-gpu-agent/vlm")["spec"]["template"]["spec"];
    assert!(pod["securityContext"]["supplementalGroups"].as_array().is_some_and(|g| !g.is_empty()), "accel group");
}

const VIDEO: &str = "k8s/apps/Deployment/k3d-gpu-agent/video";

fn script(deployment: &Value) -> String {
    args(deployment).join(" ")
}

#[test]
fn video_runs_dl_streamer_on_the_gpu_media_engines_with_no_service() {
    // Meteor Lake's iGPU has no XMX: the LLM takes the P-cores, video gets the iGPU.
    let g = graph("[agent]\n[addons.video]\n", "meteor-lake-old-npu-fw");
    let d = spec(&g, VIDEO);
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("docker.io/intel/dlstreamer:2026.1.0-ubuntu22"), "{}", c["image"]);
    let s = script(d);
    assert!(s.contains("gvadetect device=GPU pre-process-backend=va-surface-sharing"), "{s}");
    assert!(s.contains("person-vehicle-bike-detection-2004.xml"), "{s}");
    assert!(s.contains("gvametapublish method=file file-path=/dev/stdout file-format=json-lines"), "{s}");
    assert!(c["resources"]["limits"].as_object().unwrap().keys().any(|k| k.starts_with("gpu.intel.com/")), "{c}");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["k3d-gpu.io/cores"], "efficient", "an accelerator: E-cores");
    // The sample clip by default, fetched by the init container with its pinned checksum.
    assert_eq!(c["env"][0]["value"], "file:///models/video/person-bicycle-car-detection.mp4");
    let init = pod["initContainers"][0]["args"].as_array().unwrap();
    assert!(init.iter().any(|a| a.as_str().unwrap().starts_with("gitblob:39bbc1a6")), "{init:?}");
    assert!(init.iter().any(|a| a.as_str().unwrap().starts_with("sha384:19a90672")), "{init:?}");
    // It serves nothing: no Service, no endpoint check; readiness is the rollout.
    assert!(g.get("k8s/core/Service/k3d-gpu-agent/video").is_none());
    assert!(g.get("verify/endpoint/k3d-gpu-agent/video").is_none());
    assert!(g.get("verify/rollout/Deployment/k3d-gpu-agent/video").is_some());
    assert!(g.get("k8s/core/PersistentVolumeClaim/k3d-gpu-agent/video-models").is_some());
}

#[test]
fn video_on_the_cpu_decodes_in_software_and_a_stream_replaces_the_clip() {
    // One XMX GPU (Lunar Lake, exclusive): the LLM keeps it, video decodes on the CPU.
    let g = graph(
        "[sharing]\nshared = 1\n[agent]\n[addons.video]\nsource = \"rtsp://cam.lan:8554/stream\"\n",
        "lunar-lake-npu",
    );
    let d = spec(&g, VIDEO);
    let s = script(d);
    assert!(s.contains("decodebin3 ! videoconvert ! gvadetect device=CPU"), "{s}");
    assert!(!s.contains("va-surface-sharing"), "{s}");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert!(!c["resources"]["limits"].as_object().unwrap().keys().any(|k| k.contains(".intel.com/")), "{c}");
    assert_eq!(c["env"][0]["value"], "rtsp://cam.lan:8554/stream");
    let init = d["spec"]["template"]["spec"]["initContainers"][0]["args"].as_array().unwrap();
    assert!(!init.iter().any(|a| a.as_str().unwrap().starts_with("gitblob:")), "no sample clip for a stream");
}

#[test]
fn a_video_source_cannot_inject_pipeline_syntax_or_credentials() {
    let lnl = facts_of("lunar-lake-npu");
    for (bad, code) in [
        ("rtsp://cam/x ! filesrc location=/etc/shadow", "video-source"),
        ("rtsp://cam/x\"", "video-source"),
        ("rtsp://admin:hunter2@cam/stream", "video-source"),
        ("ftp://cam/x", "video-source"),
        ("rtsp://cam/(a)", "video-source"),
        ("file:///etc/passwd", "video-source-local"),
        ("/home/me/cam.mp4", "video-source-local"),
    ] {
        let toml = format!("[agent]\n[addons.video]\nsource = {}\n", serde_json::to_string(bad).unwrap());
        let errors = compile_on(&toml, &lnl, &CATALOG).unwrap_err();
        assert_eq!(errors[0].code, code, "{bad}: {errors:?}");
        assert_eq!(errors[0].key.join("."), "addons.video.source");
        assert!(!errors[0].message.contains("hunter2"), "a password is never echoed: {}", errors[0].message);
    }
    let errors = compile_on("[agent]\n[addons.vlm]\nsource = \"rtsp://cam/x\"\n", &lnl, &CATALOG).unwrap_err();
    assert_eq!(errors[0].code, "addon-source");
}

/// Loopback only: every Service is ClusterIP with no node port or external address, and the
/// cluster gets no port mapping for the model servers (docs/agent.md).
#[test]
fn nothing_listens_outside_the_cluster() {
    for (toml, host) in [
        ("[agent]\n[addons.vlm]\n[addons.stt]\n[sharing]\nshared = 2\n", "lunar-lake-npu"),
        ("[agent]\n", "desktop-rpl-nvidia"),
        ("[agent]\n", "gaudi3-server"),
    ] {
        let g = graph(toml, host);
        let services: Vec<&Value> = g
            .resources()
            .filter(|r| r.component.as_deref() == Some("agent") && r.spec["kind"] == "Service")
            .map(|r| &r.spec)
            .collect();
        assert!(!services.is_empty());
        for s in services {
            assert_eq!(s["spec"]["type"], "ClusterIP", "{s}");
            assert!(s["spec"].get("externalIPs").is_none() && s["spec"]["ports"][0].get("nodePort").is_none(), "{s}");
        }
        let cluster = g.resources().find(|r| r.kind == k3d_gpu::compile::ResourceKind::Cluster).unwrap();
        assert!(!cluster.spec.to_string().contains("8000"), "no port mapping: {}", cluster.spec);
    }
}

const CHAT: &str = "k8s/apps/Deployment/k3d-gpu-agent/open-webui";

fn env_of(deployment: &Value) -> std::collections::BTreeMap<String, Value> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e.get("value").cloned().unwrap_or(e["valueFrom"].clone())))
        .collect()
}

#[test]
fn the_chat_ui_signs_in_stays_offline_and_talks_to_the_agents_api() {
    let g = graph("[agent]\n[agent.chat]\n", "meteor-lake-old-npu-fw");
    let d = spec(&g, CHAT);
    let env = env_of(d);
    for (k, v) in [
        ("ENABLE_PERSISTENT_CONFIG", "False"),
        ("WEBUI_AUTH", "True"),
        ("ENABLE_SIGNUP", "False"),
        ("DEFAULT_USER_ROLE", "pending"),
        ("OFFLINE_MODE", "True"),
        ("ENABLE_COMMUNITY_SHARING", "False"),
        ("OPENAI_API_BASE_URL", "http://ovms.k3d-gpu-agent.svc:8000/v3"),
        ("DEFAULT_MODELS", "Qwen3-4B-int4-ov"),
        ("WEBUI_ADMIN_EMAIL", "admin@k3d-gpu.local"),
    ] {
        assert_eq!(env[k], v, "{k}");
    }
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("ghcr.io/open-webui/open-webui:v0.12.2"));
    // Generated admin: the password is made in the pod, never a value anywhere in the graph.
    assert!(!env.contains_key("WEBUI_ADMIN_PASSWORD"));
    let start = c["command"][2].as_str().unwrap();
    assert!(
        start.contains("f=/data/.k3d-gpu-admin-password") && start.contains("export WEBUI_ADMIN_PASSWORD"),
        "{start}"
    );
    // Sessions outlive the pod: the key that signs them is kept on the data volume, not in the
    // container's filesystem where Open WebUI's own start script would write it.
    assert!(start.contains("f=/data/.webui-secret-key") && start.contains("export WEBUI_SECRET_KEY"), "{start}");
    assert!(start.ends_with("exec bash start.sh\n"), "{start}");
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["k3d-gpu.io/cores"], "efficient");
    assert_eq!(d["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    let svc = spec(&g, "k8s/core/Service/k3d-gpu-agent/open-webui");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
    let pvc = spec(&g, "k8s/core/PersistentVolumeClaim/k3d-gpu-agent/open-webui-data");
    assert_eq!(pvc["metadata"]["labels"]["k3d-gpu.io/keep-on-removal"], "true");
    // Readiness: its health endpoint through the service proxy (a GET), answering status true.
    let v = &g.get("verify/endpoint/k3d-gpu-agent/open-webui").unwrap().spec;
    assert_eq!(
        (v["path"].as_str(), v["expect"].as_str(), v["port"].as_u64()),
        (Some("/health"), Some("status"), Some(8080))
    );
    // The same config compiles to the same bytes: nothing random in the plan.
    assert_eq!(g.to_json(), graph("[agent]\n[agent.chat]\n", "meteor-lake-old-npu-fw").to_json());

    // vLLM serves /v1, and the chat UI follows it.
    let g = graph("[agent]\n[agent.chat]\n", "gaudi3-server");
    let env = env_of(spec(&g, CHAT));
    assert_eq!(env["OPENAI_API_BASE_URL"], "http://vllm.k3d-gpu-agent.svc:8000/v1");
    assert_eq!(env["DEFAULT_MODELS"], "Qwen3-4B", "vLLM serves it under --served-model-name, as the reference");
}

#[test]
fn a_given_admin_comes_from_a_secret_and_auth_cannot_be_turned_off() {
    let g = graph("[agent]\n[agent.chat]\nadmin_secret = \"open-webui-admin\"\n", "lunar-lake-npu");
    let d = spec(&g, CHAT);
    let env = env_of(d);
    assert_eq!(
        env["WEBUI_ADMIN_PASSWORD"]["secretKeyRef"],
        serde_json::json!({"name": "open-webui-admin", "key": "password"})
    );
    assert_eq!(env["WEBUI_ADMIN_EMAIL"]["secretKeyRef"]["key"], "email");
    // The admin is the Secret's; the start only keeps the session key on the volume.
    let start = d["spec"]["template"]["spec"]["containers"][0]["command"][2].as_str().unwrap();
    assert!(start.contains("/data/.webui-secret-key") && !start.contains("WEBUI_ADMIN_PASSWORD"), "{start}");

    let lnl = facts_of("lunar-lake-npu");
    let e = compile_on("[agent]\n[agent.chat]\nauth = false\n", &lnl, &CATALOG).unwrap_err();
    assert_eq!((e[0].code, e[0].key.join(".")), ("chat-auth", "agent.chat.auth".to_string()));
    assert!(compile_on("[agent]\n[agent.chat]\nauth = true\n", &lnl, &CATALOG).is_ok());
    let e = compile_on("[agent]\n[agent.chat]\nadmin_secret = \"../x\"\n", &lnl, &CATALOG).unwrap_err();
    assert_eq!(e[0].code, "chat-admin-secret");
    // A password is never a key: the config refuses it as unknown.
    assert!(load_str("k3dgpu.toml", "[agent]\n[agent.chat]\nadmin_password = \"hunter2\"\n").is_err());
}

const EMBEDDINGS: &str = "k8s/apps/Deployment/k3d-gpu-agent/embeddings";

#[test]
fn embeddings_serve_on_the_npu_by_default_and_elsewhere_only_when_asked() {
    let g = graph("[agent]\n[addons.embeddings]\n", "lunar-lake-npu");
    let d = spec(&g, EMBEDDINGS);
    let a = args(d);
    assert_eq!(flag(&a, "--source_model").as_deref(), Some("OpenVINO/Qwen3-Embedding-0.6B-int8-ov"));
    assert_eq!(flag(&a, "--task").as_deref(), Some("embeddings"));
    assert_eq!(flag(&a, "--target_device").as_deref(), Some("NPU"));
    assert_eq!(flag(&a, "--pooling").as_deref(), Some("LAST"));
    // The task's own options are those OVMS's embeddings_graph_cli_parser.cpp accepts (any
    // other fails the server's start): what embeddings adds to the flags every OVMS server
    // gets (stt's, from the same builder) must be among them.
    let stt = args(spec(
        &graph("[agent]\n[addons.stt]\ndevice = \"cpu\"\n", "lunar-lake-npu"),
        "k8s/apps/Deployment/k3d-gpu-agent/stt",
    ));
    let flags =
        |a: &[String]| a.iter().filter(|f| f.starts_with("--")).cloned().collect::<std::collections::BTreeSet<_>>();
    let own: Vec<String> = flags(&a).difference(&flags(&stt)).cloned().collect();
    let upstream = ["--num_streams", "--normalize", "--truncate", "--pooling"];
    assert!(!own.is_empty() && own.iter().all(|f| upstream.contains(&f.as_str())), "{own:?}");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["resources"]["limits"]["npu.intel.com/accel"], "1");
    assert!(pod["securityContext"]["supplementalGroups"].as_array().is_some_and(|g| !g.is_empty()), "accel group");
    let svc = spec(&g, "k8s/core/Service/k3d-gpu-agent/embeddings");
    assert_eq!(
        (svc["spec"]["type"].as_str(), svc["spec"]["ports"][0]["port"].as_u64()),
        (Some("ClusterIP"), Some(8000))
    );
    assert_eq!(g.get("verify/endpoint/k3d-gpu-agent/embeddings").unwrap().spec["path"], "/v3/models");

    // No NPU: auto is refused, with the way out; cpu is served.
    let arc = facts_of("arc-b580-xe-rpl-igpu");
    let e = compile_on("[agent]\n[addons.embeddings]\n", &arc, &CATALOG).unwrap_err();
    assert_eq!((e[0].code, e[0].key.join(".")), ("addon-device", "addons.embeddings.device".to_string()));
    assert!(e[0].help.as_deref().unwrap().starts_with("set [addons.embeddings] device = \"cpu\""), "{:?}", e[0].help);
    let g = compile_on("[agent]\n[addons.embeddings]\ndevice = \"cpu\"\n", &arc, &CATALOG).unwrap();
    let a = args(spec(&g, EMBEDDINGS));
    assert_eq!(flag(&a, "--target_device").as_deref(), Some("CPU"));
    // The NPU taken by embeddings, stt falls back to the GPU.
    let p = graph("[agent]\n[addons.embeddings]\n[addons.stt]\n", "lunar-lake-npu").agent.unwrap();
    let placed: Vec<(String, &str)> = p.addons.iter().map(|a| (format!("{:?}", a.name), a.device)).collect();
    assert!(placed.contains(&("Embeddings".into(), "NPU")) && placed.contains(&("Stt".into(), "GPU")), "{placed:?}");
}
