//! The agent's Kubernetes objects, built from its computed placement (`agent.rs`): namespace
//! `k3d-gpu-agent`, a PVC for the model and the compile caches, the model server's Deployment
//! (OVMS, vLLM on XPU, llm-scaler, vLLM on Gaudi, vLLM on CUDA)
//! and its ClusterIP Service. Pure: the placement decides device, resource, labels, groups and
//! sizes; this module only writes them down in the shape each backend's image expects.
//!
//! Names depend on the backend's API family only (`ovms`, `vllm`), never on the model, so a
//! model change is an in-place update of the same Deployment.
//!
//! The add-ons that are not OVMS servers have their own module: `video.rs` (DL Streamer),
//! and so has the chat UI, `chat.rs` (Open WebUI). `sandbox.rs` is `[sandbox]`'s, beside the
//! agent rather than part of it.

mod chat;
pub mod parsers;
pub mod sandbox;
mod video;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::agent::AgentPlan;
use super::components::{COMPONENT_LABEL, MANAGED_BY, object_id};
use super::{Change, Context, Resource, ResourceKind};
use crate::config::AddonName;

/// The agent's namespace (the reference's, so its documented commands keep working).
pub const NAMESPACE: &str = "k3d-gpu-agent";
/// The one port every backend serves its OpenAI-compatible API on.
pub const PORT: u16 = 8000;
pub(crate) const COMPONENT: &str = "agent";
/// PVC size for the model and compile caches (the reference's default).
const STORAGE: &str = "20Gi";
/// Where the PVC is mounted in every backend's pod.
const MODELS: &str = "/models";

/// Images by `repo:tag` (DESIGN.md §7): digests come from images.lock, never from here.
pub const OVMS_IMAGE: &str = "docker.io/openvino/model_server:2026.2-gpu";
pub const VLLM_XPU_IMAGE: &str = "docker.io/vllm/vllm-openai-xpu:v0.31.0";
/// intel/llm-scaler's newest stable vLLM image (README news at vllm-0.21.0-b2, f19b329:
/// `1.4`, 2026-05; the 0.x tags are betas).
pub const LLM_SCALER_IMAGE: &str = "docker.io/intel/llm-scaler-vllm:1.4";
/// How llm-scaler's vLLM starts when its entrypoint is replaced: intel/llm-scaler's vLLM
/// README (vllm-1.4, dec4699) says the oneAPI environment is then not loaded, and the command
/// must be prefixed with `source /opt/intel/oneapi/setvars.sh --force &&`. bash runs it with
/// the container's args as `"$@"` (`--` is its `$0`).
pub const LLM_SCALER_START: [&str; 4] =
    ["bash", "-c", "source /opt/intel/oneapi/setvars.sh --force && exec vllm \"$@\"", "--"];
/// vLLM's own CUDA build, the release of the same number as its XPU image above.
pub const VLLM_CUDA_IMAGE: &str = "docker.io/vllm/vllm-openai:v0.31.0";
pub const VLLM_GAUDI_IMAGE: &str =
    "vault.habana.ai/gaudi-docker/1.24.2/ubuntu24.04/habanalabs/vllm-0.30.0-ptupstream-2.13.0:1.24.2-481";

const OVMS_MODEL: &str = "OpenVINO/Qwen3-4B-int4-ov";
/// The add-ons' models (the reference's): OVMS serves each beside the LLM.
const VLM_MODEL: &str = "OpenVINO/Qwen3-VL-4B-Instruct-int4-ov";
const VLM_NPU_MODEL: &str = "OpenVINO/Phi-3.5-vision-instruct-fp16-ov";
const STT_MODEL: &str = "OpenVINO/whisper-large-v3-turbo-fp16-ov";
const EMBEDDINGS_MODEL: &str = "OpenVINO/Qwen3-Embedding-0.6B-int8-ov";
const ADDON_MEMORY: &str = "4Gi";
const VLLM_MODEL: &str = "Qwen/Qwen3-4B";
/// OVMS runs as this uid (its image's user); the PVC is made writable for it by fsGroup.
const OVMS_UID: i64 = 5000;

/// One model server: its Deployment parts and the placement they run with.
struct Server<'a> {
    name: &'a str,
    parts: Parts,
    device: &'a str,
    resource: Option<String>,
    /// How many of `resource` (the tensor-parallel size).
    count: u32,
    cpu: String,
    memory: String,
    /// The model PVC's size.
    storage: String,
    /// How long readiness may take (download and load).
    timeout_s: u64,
    pod_labels: BTreeMap<String, String>,
    node_selector: BTreeMap<String, String>,
    groups: Vec<u32>,
    /// The OpenAI API's root: `v3` (OVMS) or `v1` (vLLM).
    api: &'a str,
    /// The served model a warm-up chat completion asks, for a chat server (the LLM).
    chat_model: Option<String>,
}

/// Where an add-on's objects hang in the graph: the cluster, the agent's namespace, and whether
/// its data is kept on removal.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    cluster_id: &'a str,
    ns_id: &'a str,
    keep: &'a str,
    /// The host model store's directory (`models::store_dir`) under provider k3d; `None` for an
    /// existing cluster, whose PVCs its own provisioner serves.
    store: Option<&'a str>,
}

pub(super) fn labels(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    labels_of(COMPONENT, extra)
}

/// An object's labels: managed by k3d-gpu, of `component`, and `extra`.
pub(super) fn labels_of(component: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (COMPONENT_LABEL.to_string(), component.to_string()),
    ]);
    m.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    m
}

/// The agent's objects (and the add-ons' that are deployed), each depending on the cluster
/// and on the namespace.
pub fn resources(cx: &mut Context, plan: &AgentPlan, cluster_id: &str, out: &mut Vec<Resource>) {
    let config = cx.config;
    let Some(agent) = &config.agent else { return };
    let server = if plan.backend == "ovms" { "ovms" } else { "vllm" };
    let model = agent.model.clone().unwrap_or_else(|| if server == "ovms" { OVMS_MODEL } else { VLLM_MODEL }.into());
    let default_model = model == OVMS_MODEL || model == VLLM_MODEL;
    let served_name =
        agent.model_name.clone().unwrap_or_else(|| model.rsplit('/').next().unwrap_or(&model).to_string());
    // The namespace holds the PVCs: deleting it would delete the data, so both are kept alike.
    let keep = if agent.keep_models.unwrap_or(true) { "true" } else { "false" };
    let namespace = json!({ "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": NAMESPACE, "labels": labels(&[(super::KEEP_LABEL, keep)]),
            "annotations": { super::DATA_ANNOTATION: "the volumes of the agent and its add-ons" } } });
    let ns_id = object_id(&namespace);
    push(out, namespace, vec![cluster_id.to_string()]);
    // Under k3d every model server's PVC binds to its directory in the host model store.
    let store = cluster_id.starts_with("k3d/cluster/").then(|| super::models::store_dir(config));
    if store.is_none() && agent.model_dir.is_some() {
        cx.error(super::CompileError::new(
            "agent-model-dir",
            &["agent", "model_dir"],
            "model_dir is k3d-only: an existing cluster's nodes keep models where its storage class puts them",
            Some("remove model_dir".into()),
        ));
    }
    let store = store.as_deref();

    // A parser: "" turns it off, unset is the default model's (the reference's), or none.
    let parser = |set: &Option<String>, default: &str| -> Option<String> {
        match set {
            Some(p) if p.is_empty() => None,
            Some(p) => Some(p.clone()),
            None => default_model.then(|| default.to_string()),
        }
    };
    let llm_args = Llm {
        model: &model,
        served: &served_name,
        revision: agent.revision.clone().or_else(|| (model == VLLM_MODEL).then(|| VLLM_REVISION.to_string())),
        max_len: agent.max_len,
        tool_parser: parser(&agent.tool_parser, if server == "ovms" { "hermes3" } else { "hermes" }),
        reasoning_parser: parser(&agent.reasoning_parser, "qwen3"),
        log_level: agent.log_level.map(|l| l.as_str()),
        gpus: plan.gpus,
        timeout_s: agent.timeout.unwrap_or(MODEL_TIMEOUT_S),
    };
    check_parsers(cx, agent, plan, &llm_args);
    let mut parts = match (plan.backend, plan.device) {
        ("ovms", device) => {
            let mut extra: Vec<String> = Vec::new();
            if let Some(t) = &llm_args.tool_parser {
                extra.extend(["--tool_parser".to_string(), t.clone()]);
            }
            if let Some(r) = &llm_args.reasoning_parser {
                extra.extend(["--reasoning_parser".to_string(), r.clone()]);
            }
            if let (Some(len), "NPU") = (llm_args.max_len, device) {
                extra.extend(["--max_prompt_len".to_string(), len.to_string()]);
            }
            if let Some(level) = llm_args.log_level {
                extra.extend(["--log_level".to_string(), level.to_string()]);
            }
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            ovms(device, &model, &served_name, "text_generation", &extra)
        }
        (backend, device) => vllm(backend, device, &llm_args),
    };
    if let Some(image) = &agent.image {
        parts.0 = image.clone();
    }
    let llm = Server {
        name: server,
        parts,
        device: plan.device,
        resource: plan.resource.clone(),
        count: plan.gpus,
        cpu: plan.cpu_request.to_string(),
        memory: plan.memory.clone(),
        storage: agent.storage.clone().unwrap_or_else(|| STORAGE.to_string()),
        timeout_s: llm_args.timeout_s,
        pod_labels: plan.pod_labels.clone(),
        node_selector: plan.node_selector.clone(),
        groups: plan.supplemental_groups.clone(),
        api: if server == "ovms" { "v3" } else { "v1" },
        chat_model: Some(served_name.clone()),
    };
    emit(cx, out, &Scope { cluster_id, ns_id: &ns_id, keep, store }, llm);
    if let Some(ui) = &agent.chat
        && chat::valid(cx, ui)
    {
        // Both servers serve the model under its served name (`--model_name`,
        // `--served-model-name`).
        chat::resources(cx, ui, plan, &served_name, &Scope { cluster_id, ns_id: &ns_id, keep, store }, out);
    }

    let scope = Scope { cluster_id, ns_id: &ns_id, keep, store };
    addons(cx, plan, &scope, out);
}

/// The parser names the server that runs the agent accepts (parsers.rs): the server is
/// placement's choice, so a name valid for one backend reaches the other on another host.
fn check_parsers(cx: &mut Context, agent: &crate::config::Agent, plan: &AgentPlan, llm_args: &Llm<'_>) {
    let known = match (plan.backend, plan.device) {
        _ if agent.image.is_some() => None,
        ("ovms", _) => Some(&parsers::OVMS),
        (_, "HPU") | ("llm-scaler", _) => None,
        _ => Some(&parsers::VLLM),
    };
    if let Some(known) = known {
        for (key, set, names) in [
            ("tool_parser", &llm_args.tool_parser, known.tool),
            ("reasoning_parser", &llm_args.reasoning_parser, known.reasoning),
        ] {
            let Some(name) = set.as_deref().filter(|n| !names.contains(n)) else { continue };
            let closest = crate::suggest::closest(name, names.iter().copied());
            cx.error(super::CompileError::new(
                "agent-parser",
                &["agent", key],
                crate::escape::capped(format!(
                    "{key} {} is not one of {} {}'s, which runs the agent on this host ({} on the {}): {}",
                    crate::escape::quoted(name),
                    known.server,
                    known.version,
                    plan.backend,
                    plan.device,
                    names.join(", ")
                )),
                Some(match closest {
                    Some(c) => format!("did you mean {key} = \"{c}\"? (\"\" turns it off)"),
                    None => format!("use one of {}'s names, or \"\" to turn it off", known.server),
                }),
            ));
        }
    }
}

/// The add-ons placement deployed beside the agent: each an OVMS server, or the video stack.
fn addons(cx: &mut Context, plan: &AgentPlan, scope: &Scope<'_>, out: &mut Vec<Resource>) {
    for addon in &plan.addons {
        let (name, model, task, extra): (&str, &str, &str, &[&str]) = match (addon.name, addon.device) {
            (AddonName::Vlm, "NPU") => ("vlm", VLM_NPU_MODEL, "text_generation", &["--max_prompt_len", "4096"]),
            (AddonName::Vlm, _) => ("vlm", VLM_MODEL, "text_generation", &[]),
            (AddonName::Stt, _) => ("stt", STT_MODEL, "speech2text", &[]),
            // LAST pooling is what OVMS's embeddings demo gives this model. The embeddings task
            // takes only num_streams, normalize, truncate and pooling (OVMS's
            // embeddings_graph_cli_parser.cpp); any other option fails its start, so the
            // reference's `--max_length` for the NPU is not passed.
            (AddonName::Embeddings, _) => ("embeddings", EMBEDDINGS_MODEL, "embeddings", &["--pooling", "LAST"]),
            (AddonName::Video, _) => {
                video::resources(cx, addon, scope, out);
                continue;
            }
        };
        let served = model.rsplit('/').next().unwrap_or(model);
        let mut pod_labels = BTreeMap::new();
        if let Some(cores) = addon.cores {
            pod_labels.insert("k3d-gpu.io/cores".to_string(), cores.to_string());
        }
        let groups = addon_groups(cx, addon.device);
        let server = Server {
            name,
            parts: ovms(addon.device, model, served, task, extra),
            device: addon.device,
            resource: addon.resource.clone(),
            count: 1,
            storage: STORAGE.to_string(),
            timeout_s: MODEL_TIMEOUT_S,
            cpu: if addon.device == "CPU" { "2" } else { "1" }.to_string(),
            memory: ADDON_MEMORY.to_string(),
            pod_labels,
            node_selector: BTreeMap::new(),
            groups,
            api: "v3",
            chat_model: None,
        };
        emit(cx, out, scope, server);
    }
}

/// The render (GPU) or accel (NPU) groups of the host's device nodes; gid 0, which an unknown
/// owner reads as, is never one (the agent's placement warns about it).
pub(super) fn addon_groups(cx: &Context, device: &str) -> Vec<u32> {
    let host = &cx.facts.host;
    let mut gids: Vec<u32> = match device {
        "GPU" => host
            .intel_gpus
            .iter()
            .filter(|g| g.usable())
            .flat_map(|g| g.device_nodes.iter().filter(|n| n.path.contains("/renderD")).map(|n| n.gid))
            .collect(),
        "NPU" => host.npus.iter().filter_map(|n| n.device_node.as_ref().map(|d| d.gid)).collect(),
        _ => Vec::new(),
    };
    gids.retain(|g| *g != 0);
    gids.sort_unstable();
    gids.dedup();
    gids
}

pub(super) fn push(out: &mut Vec<Resource>, spec: Value, depends_on: Vec<String>) {
    push_as(out, COMPONENT, spec, depends_on);
}

/// An object of `component`, applied after `depends_on`.
pub(super) fn push_as(out: &mut Vec<Resource>, component: &str, spec: Value, mut depends_on: Vec<String>) {
    depends_on.sort();
    out.push(Resource {
        id: object_id(&spec),
        kind: ResourceKind::Object,
        change: Change::InPlace,
        component: Some(component.into()),
        spec,
        depends_on,
    });
}

/// A workload's data volume (ReadWriteOnce), kept on removal unless `keep` is "false";
/// `what` is what the plan says it holds.
pub(super) fn data_pvc(name: &str, keep: &str, storage: &str, what: Option<&str>) -> Value {
    let mut pvc = json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": { "name": name, "namespace": NAMESPACE, "labels": labels(&[(super::KEEP_LABEL, keep)]) },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": storage } } } });
    if let Some(what) = what {
        pvc["metadata"]["annotations"] = json!({ super::DATA_ANNOTATION: what });
    }
    pvc
}

/// A model server's PVC `<server>-models`: under k3d bound to its directory in the host model
/// store, whose PersistentVolume is pushed here (the PVC is applied after it).
pub(super) fn model_pvc(
    out: &mut Vec<Resource>,
    scope: &Scope,
    server: &str,
    storage: &str,
    what: Option<&str>,
) -> Value {
    let mut pvc = data_pvc(&format!("{server}-models"), scope.keep, storage, what);
    if let Some(store) = scope.store {
        let pv = super::models::bind(&mut pvc, server, storage, scope.keep, json!(labels(&[])), store);
        push(out, pv, vec![scope.cluster_id.to_string()]);
    }
    pvc
}

/// A workload's PVC and its Deployment (after the PVC), both after the cluster and the
/// namespace (and a model store PV the PVC names); returns the Deployment's id.
pub(super) fn push_workload(out: &mut Vec<Resource>, scope: (&str, &str), pvc: Value, deployment: Value) -> String {
    let (cluster_id, ns_id) = scope;
    let (pvc_id, deployment_id) = (object_id(&pvc), object_id(&deployment));
    let mut pvc_deps = vec![cluster_id.to_string(), ns_id.to_string()];
    if let Some(pv) = pvc["spec"]["volumeName"].as_str() {
        pvc_deps.push(format!("k8s/core/PersistentVolume/{pv}"));
    }
    push(out, pvc, pvc_deps);
    push(out, deployment, vec![cluster_id.to_string(), ns_id.to_string(), pvc_id]);
    deployment_id
}

/// A workload's Service, after its Deployment; returns its id.
pub(super) fn push_service(
    out: &mut Vec<Resource>,
    scope: (&str, &str),
    service: Value,
    deployment_id: &str,
) -> String {
    let id = object_id(&service);
    push(out, service, vec![scope.0.to_string(), scope.1.to_string(), deployment_id.to_string()]);
    id
}

/// A server's PVC, Deployment, Service and readiness checks.
fn emit(cx: &mut Context, out: &mut Vec<Resource>, scope: &Scope, s: Server) {
    let (cluster_id, ns_id) = (scope.cluster_id, scope.ns_id);
    let server = s.name;
    let selector = json!({ "app.kubernetes.io/name": server });
    let pvc_name = format!("{server}-models");
    let pvc = model_pvc(out, scope, server, &s.storage, None);

    let (image, containers, init, volumes_extra, pod_security) = s.parts;
    let mut requests = json!({ "cpu": s.cpu, "memory": s.memory });
    let mut limits = json!({ "memory": s.memory });
    if let Some(resource) = &s.resource {
        requests[resource] = json!(s.count.to_string());
        limits[resource] = json!(s.count.to_string());
    }
    let mut main = containers;
    main["image"] = json!(image);
    if cx.config.telemetry.is_some() && s.api == "v3" {
        // [telemetry]'s Prometheus scrapes the server's /metrics, which OVMS serves on its REST
        // port only with this flag (model_server v2026.2, src/cli_parser.cpp).
        if let Some(args) = main["args"].as_array_mut() {
            args.push(json!("--metrics_enable"));
        }
    }
    let tensor_parallel = s.count > 1;
    if tensor_parallel {
        // Loading a split model is slow (every worker compiles its shard): the readiness
        // timeout sizes a startup probe, so the kubelet does not restart a loading server.
        main["startupProbe"] = json!({ "httpGet": { "path": "/health", "port": "http" }, "periodSeconds": 10,
            "failureThreshold": s.timeout_s.div_ceil(10) });
    }
    main["resources"] = json!({ "requests": requests, "limits": limits });
    let mut pod_labels = s.pod_labels;
    pod_labels.insert("app.kubernetes.io/name".into(), server.into());
    let mut volumes = vec![json!({ "name": "models", "persistentVolumeClaim": { "claimName": pvc_name } })];
    volumes.extend(volumes_extra);
    let mut pod = json!({
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": pod_security,
        "containers": [main],
        "volumes": volumes,
    });
    if tensor_parallel {
        // vLLM's workers finish in-flight requests and free the GPUs on SIGTERM; the lab
        // notes give a split model a long grace period for that.
        pod["terminationGracePeriodSeconds"] = json!(TP_GRACE_S);
    }
    if s.device == "CUDA" {
        // On k3s the NVIDIA libraries reach a pod through the nvidia runtime (RuntimeClass
        // nvidia, k3s's own; verify/runtimeclass/nvidia checks it exists).
        pod["runtimeClassName"] = json!("nvidia");
    }
    if let Some(mut init) = init {
        init["image"] = json!(&image);
        pod["initContainers"] = json!([init]);
    }
    if !s.node_selector.is_empty() {
        pod["nodeSelector"] = json!(s.node_selector);
    }
    if !s.groups.is_empty() {
        pod["securityContext"]["supplementalGroups"] = json!(s.groups);
    }
    let mut deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": server, "namespace": NAMESPACE, "labels": labels(&[("app.kubernetes.io/name", server)]) },
        "spec": {
            "replicas": 1,
            // One accelerator and a ReadWriteOnce volume: the old pod must let go first.
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": selector },
            "template": { "metadata": { "labels": pod_labels }, "spec": pod },
        } });
    crate::images::pin_object(&mut deployment, &cx.catalog.images, &mut cx.images);
    let service = json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": server, "namespace": NAMESPACE, "labels": labels(&[]) },
        "spec": { "type": "ClusterIP", "selector": selector,
            "ports": [ { "name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP" } ] } });

    let deployment_id = push_workload(out, (cluster_id, ns_id), pvc, deployment);
    let service_id = push_service(out, (cluster_id, ns_id), service, &deployment_id);

    // Readiness: the Deployment rolled out, then the server lists its models through the API
    // server's service proxy, then (the LLM) answers a short chat completion through a
    // port-forward to its pod (apply::port_forward).
    out.push(rollout(server, deployment_id));
    let mut check = json!({ "check": "endpoint", "namespace": NAMESPACE, "service": server, "port": PORT,
            "path": format!("/{}/models", s.api), "timeout_s": s.timeout_s });
    if let Some(model) = &s.chat_model {
        // Then one short chat completion through the same proxy: a reply, not only a port.
        check["chat"] = json!({ "path": format!("/{}/chat/completions", s.api), "model": model });
    }
    out.push(verify(format!("verify/endpoint/{NAMESPACE}/{server}"), check, vec![service_id]));
}

/// A verify node.
pub(super) fn verify(id: String, spec: Value, depends_on: Vec<String>) -> Resource {
    Resource::verify(id, Some(COMPONENT.into()), spec, depends_on)
}

/// The Deployment `name` of the agent's namespace rolled out.
pub(super) fn rollout(name: &str, deployment_id: String) -> Resource {
    verify(
        format!("verify/rollout/Deployment/{NAMESPACE}/{name}"),
        json!({ "check": "rollout", "kind": "Deployment", "namespace": NAMESPACE, "name": name }),
        vec![deployment_id],
    )
}

/// How long the first start may take: the model downloads into the PVC, then loads and
/// compiles (the reference's agent timeout). A verify timeout longer than this wins.
pub const MODEL_TIMEOUT_S: u64 = 1800;

/// A server's image, main container, init container, extra volumes and pod security context.
type Parts = (String, Value, Option<Value>, Vec<Value>, Value);

/// The LLM server's settings from `[agent]`, resolved against the defaults.
struct Llm<'a> {
    model: &'a str,
    served: &'a str,
    revision: Option<String>,
    max_len: Option<u32>,
    tool_parser: Option<String>,
    reasoning_parser: Option<String>,
    log_level: Option<&'static str>,
    gpus: u32,
    timeout_s: u64,
}

/// vLLM's context length unless `[agent] max_len` says otherwise (the reference's).
pub const VLLM_MAX_LEN: u32 = 8192;

/// The default vLLM model's Hugging Face commit: the snapshot that `huggingface_hub`
/// downloads of Qwen/Qwen3-4B are stored under (`models--Qwen--Qwen3-4B/snapshots/<sha>`), as
/// recorded by several independent public repositories' scripts; a re-download of this
/// revision gets the same bytes.
pub const VLLM_REVISION: &str = "1cfa9a7208912126459214e8b04321603b3df60c";

/// Grace period of a tensor-parallel server's pod.
const TP_GRACE_S: u64 = 120;

/// The memory-backed /dev/shm a tensor-parallel server's workers exchange tensors through
/// (oneCCL and NCCL both use it); the pod's memory limit counts it.
const TP_SHM: &str = "8Gi";

/// OpenVINO Model Server: an init container pulls the model into the PVC once (later starts
/// find it there), the server loads it for the placed device with its compile cache on the
/// same PVC, and serves the OpenAI API under /v3.
fn ovms(device: &str, model: &str, served_name: &str, task: &str, extra_serve: &[&str]) -> Parts {
    let common = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "--source_model",
            model,
            "--model_repository_path",
            MODELS,
            "--model_name",
            served_name,
            "--task",
            task,
            "--target_device",
            device,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let mut serve = common(&["--rest_port", "8000", "--cache_dir", "/models/.ov-cache"]);
    serve.extend(extra_serve.iter().map(|s| s.to_string()));
    let main = json!({
        "name": "ovms",
        "args": serve,
        "ports": [ { "name": "http", "containerPort": PORT, "protocol": "TCP" } ],
        "readinessProbe": { "httpGet": { "path": "/v2/health/ready", "port": "http" }, "periodSeconds": 10 },
        "volumeMounts": [ { "name": "models", "mountPath": MODELS } ],
        "securityContext": hardened(),
    });
    let mut pull = vec!["--pull".to_string()];
    pull.extend(common(&[]));
    let init = json!({
        "name": "pull",
        "args": pull,
        "volumeMounts": [ { "name": "models", "mountPath": MODELS } ],
        "securityContext": hardened(),
    });
    let pod_security =
        json!({ "runAsNonRoot": true, "runAsUser": OVMS_UID, "runAsGroup": OVMS_UID, "fsGroup": OVMS_UID });
    (OVMS_IMAGE.to_string(), main, Some(init), Vec::new(), pod_security)
}

/// oneCCL's handle exchange between tensor-parallel workers on Intel GPUs: the one that works
/// with every capability dropped (see [`vllm`]).
pub const IPC_EXCHANGE: &str = "sockets";

/// vLLM (XPU, Intel's llm-scaler build, vllm-gaudi or CUDA): the OpenAI API under /v1,
/// weights and kernel caches on the PVC. Flags follow the reference: float16 with eager mode
/// on Arc, bfloat16 on the Gaudi with its eager/torch.compile mode and a memory-backed
/// /dev/shm; the model pinned to a revision, its context length, parsers and served name.
/// With `gpus` > 1 the model is split by tensor parallelism, with the oneCCL settings the lab
/// notes use on two Arc cards (ZE_AFFINITY_MASK over the GPUs the plugin gave the pod, the
/// OFI transport) and oneCCL's socket handle exchange, and a memory-backed /dev/shm.
fn vllm(backend: &str, device: &str, llm: &Llm) -> Parts {
    let gaudi = device == "HPU";
    let cuda = device == "CUDA";
    let image = match (backend, gaudi) {
        (_, true) => VLLM_GAUDI_IMAGE,
        _ if cuda => VLLM_CUDA_IMAGE,
        ("llm-scaler", _) => LLM_SCALER_IMAGE,
        _ => VLLM_XPU_IMAGE,
    };
    let mut args: Vec<String> = [
        "serve",
        llm.model,
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--download-dir",
        MODELS,
        "--served-model-name",
        llm.served,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(revision) = &llm.revision {
        args.extend(["--revision".to_string(), revision.clone()]);
    }
    args.extend(["--max-model-len".to_string(), llm.max_len.unwrap_or(VLLM_MAX_LEN).to_string()]);
    if gaudi {
        args.extend(["--dtype", "bfloat16"].map(String::from));
    } else if cuda {
        // CUDA: vLLM's defaults (the model's dtype, CUDA graphs, prefix caching) are its
        // validated path; the Arc flags below work around XPU limits.
    } else {
        args.extend(
            ["--dtype", "float16", "--block-size", "64", "--enforce-eager", "--no-enable-prefix-caching"]
                .map(String::from),
        );
    }
    if let Some(parser) = &llm.tool_parser {
        args.extend(["--enable-auto-tool-choice".to_string(), "--tool-call-parser".to_string(), parser.clone()]);
    }
    if let Some(parser) = &llm.reasoning_parser {
        args.extend(["--reasoning-parser".to_string(), parser.clone()]);
    }
    let tensor_parallel = llm.gpus > 1;
    if tensor_parallel {
        args.extend(["--tensor-parallel-size".to_string(), llm.gpus.to_string()]);
    }
    let mut env = vec![json!({ "name": "HF_HOME", "value": MODELS })];
    if let Some(level) = llm.log_level {
        env.push(json!({ "name": "VLLM_LOGGING_LEVEL", "value": level }));
    }
    let mut mounts = vec![json!({ "name": "models", "mountPath": MODELS })];
    let mut volumes = Vec::new();
    let mut security = json!({ "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } });
    if gaudi {
        env.push(json!({ "name": "PT_HPU_LAZY_MODE", "value": "0" }));
        security["capabilities"]["add"] = json!(["SYS_NICE"]);
    }
    if tensor_parallel && device == "GPU" {
        // The plugin gives the pod `gpus` cards; inside it Level Zero numbers them 0..n-1.
        let mask: Vec<String> = (0..llm.gpus).map(|i| i.to_string()).collect();
        env.push(json!({ "name": "ZE_AFFINITY_MASK", "value": mask.join(",") }));
        env.push(json!({ "name": "ONEAPI_DEVICE_SELECTOR", "value": "level_zero:gpu" }));
        env.push(json!({ "name": "CCL_ATL_TRANSPORT", "value": "ofi" }));
        // How oneCCL hands one worker's device memory (a dma-buf fd) to another. Its default,
        // pidfd, takes the fd out of the sibling worker with pidfd_getfd(2): a ptrace-mode
        // attach, which Yama's ptrace_scope 1 (Ubuntu's default) refuses between siblings
        // without CAP_SYS_PTRACE, and this container has no capabilities. `sockets` passes
        // the fds over a Unix socket (SCM_RIGHTS), which needs none; it lacks only
        // point-to-point transfers, and tensor parallelism uses collectives. docs/agent.md.
        env.push(json!({ "name": "CCL_ZE_IPC_EXCHANGE", "value": IPC_EXCHANGE }));
    }
    if gaudi || tensor_parallel {
        // Intel runs vllm-gaudi with --ipc=host, and tensor-parallel workers exchange through
        // shared memory: a memory-backed /dev/shm stands in for both.
        let size = if gaudi { "8Gi" } else { TP_SHM };
        mounts.push(json!({ "name": "shm", "mountPath": "/dev/shm" }));
        volumes.push(json!({ "name": "shm", "emptyDir": { "medium": "Memory", "sizeLimit": size } }));
    }
    let command: Vec<&str> = if image == LLM_SCALER_IMAGE { LLM_SCALER_START.to_vec() } else { vec!["vllm"] };
    let main = json!({
        "name": "vllm",
        "command": command,
        "args": args,
        "env": env,
        "ports": [ { "name": "http", "containerPort": PORT, "protocol": "TCP" } ],
        "readinessProbe": { "httpGet": { "path": "/health", "port": "http" }, "periodSeconds": 10 },
        "volumeMounts": mounts,
        "securityContext": security,
    });
    (image.to_string(), main, None, volumes, json!({}))
}

/// What every container gets unless it needs more: no privilege escalation, no capabilities.
pub(super) fn hardened() -> Value {
    json!({ "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } })
}
