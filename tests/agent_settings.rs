//! The reference's agent settings (`[agent]` model_name, revision, max_len, tool_parser,
//! reasoning_parser, image, log_level, storage, timeout) reaching the server, each refused
//! where it cannot work or could be read as a flag; and `gpus = N`, tensor parallelism on
//! NVIDIA and on two Arc cards, refused where the node or the backend cannot split a model.

mod support;

use std::sync::LazyLock;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{CompileError, DesiredGraph, compile};
use k3d_gpu::config::load_str;
use serde_json::Value;
use support::facts_of;

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::embedded().unwrap());

const OVMS: &str = "k8s/apps/Deployment/k3d-gpu-agent/ovms";
const VLLM: &str = "k8s/apps/Deployment/k3d-gpu-agent/vllm";

fn compiled(agent: &str, host: &str) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", &format!("[agent]\n{agent}")).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, &facts_of(host), &CATALOG)
}

fn graph(agent: &str, host: &str) -> DesiredGraph {
    compiled(agent, host).unwrap_or_else(|e| panic!("{host}: {e:#?}"))
}

fn refused(agent: &str, host: &str) -> CompileError {
    match compiled(agent, host) {
        Ok(_) => panic!("{agent:?} on {host}: expected a refusal"),
        Err(mut e) => e.remove(0),
    }
}

fn spec<'a>(g: &'a DesiredGraph, id: &str) -> &'a Value {
    &g.get(id).unwrap_or_else(|| panic!("no {id}")).spec
}

fn container(g: &DesiredGraph, id: &str) -> Value {
    spec(g, id)["spec"]["template"]["spec"]["containers"][0].clone()
}

fn args(g: &DesiredGraph, id: &str) -> Vec<String> {
    container(g, id)["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).map(|i| args[i + 1].clone())
}

fn env(g: &DesiredGraph, id: &str, name: &str) -> Option<String> {
    container(g, id)["env"].as_array()?.iter().find(|e| e["name"] == name).map(|e| e["value"].as_str().unwrap().into())
}

#[test]
fn the_default_vllm_model_is_pinned_with_the_references_settings() {
    let g = graph("backend = \"vllm\"\n", "arc-b580-x2");
    let a = args(&g, VLLM);
    assert_eq!(flag(&a, "serve").as_deref(), Some("Qwen/Qwen3-4B"));
    assert_eq!(flag(&a, "--revision").as_deref(), Some("1cfa9a7208912126459214e8b04321603b3df60c"));
    assert_eq!(flag(&a, "--served-model-name").as_deref(), Some("Qwen3-4B"));
    assert_eq!(flag(&a, "--max-model-len").as_deref(), Some("8192"));
    assert_eq!(flag(&a, "--tool-call-parser").as_deref(), Some("hermes"));
    assert!(a.contains(&"--enable-auto-tool-choice".to_string()));
    assert_eq!(flag(&a, "--reasoning-parser").as_deref(), Some("qwen3"));
    assert!(!a.contains(&"--tensor-parallel-size".to_string()), "one GPU unless asked");
    // A model of your own: its default branch, no parsers unless named.
    let a = args(&graph("backend = \"vllm\"\nmodel = \"meta-llama/Llama-3.1-8B\"\n", "arc-b580-x2"), VLLM);
    assert_eq!(flag(&a, "--revision"), None);
    assert_eq!(flag(&a, "--tool-call-parser"), None);
    assert_eq!(flag(&a, "--served-model-name").as_deref(), Some("Llama-3.1-8B"));
}

#[test]
fn each_setting_reaches_the_vllm_server() {
    let g = graph(
        "backend = \"vllm\"\nmodel_name = \"agent\"\nrevision = \"0123456789abcdef0123456789abcdef01234567\"\n\
         max_len = 32768\ntool_parser = \"llama3_json\"\nreasoning_parser = \"\"\nimage = \"registry.local/vllm-xpu:dev\"\n\
         log_level = \"DEBUG\"\nstorage = \"80Gi\"\ntimeout = 3600\n",
        "arc-b580-x2",
    );
    let a = args(&g, VLLM);
    assert_eq!(flag(&a, "--served-model-name").as_deref(), Some("agent"));
    assert_eq!(flag(&a, "--revision").as_deref(), Some("0123456789abcdef0123456789abcdef01234567"));
    assert_eq!(flag(&a, "--max-model-len").as_deref(), Some("32768"));
    assert_eq!(flag(&a, "--tool-call-parser").as_deref(), Some("llama3_json"));
    assert_eq!(flag(&a, "--reasoning-parser"), None, "\"\" turns it off");
    assert!(container(&g, VLLM)["image"].as_str().unwrap().starts_with("registry.local/vllm-xpu:dev"));
    assert_eq!(env(&g, VLLM, "VLLM_LOGGING_LEVEL").as_deref(), Some("DEBUG"));
    let pvc = spec(&g, "k8s/core/PersistentVolumeClaim/k3d-gpu-agent/vllm-models");
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "80Gi");
    assert_eq!(g.get("verify/endpoint/k3d-gpu-agent/vllm").unwrap().spec["timeout_s"], 3600);
}

#[test]
fn each_setting_reaches_the_ovms_server_where_it_has_one() {
    let g = graph(
        "model_name = \"qwen\"\ntool_parser = \"\"\nreasoning_parser = \"qwen3\"\nlog_level = \"DEBUG\"\n",
        "lunar-lake-npu",
    );
    let a = args(&g, OVMS);
    assert_eq!(flag(&a, "--model_name").as_deref(), Some("qwen"));
    assert_eq!(flag(&a, "--tool_parser"), None);
    assert_eq!(flag(&a, "--reasoning_parser").as_deref(), Some("qwen3"));
    assert_eq!(flag(&a, "--log_level").as_deref(), Some("DEBUG"));
    // The default model keeps the reference's parsers.
    let a = args(&graph("", "lunar-lake-npu"), OVMS);
    assert_eq!(
        (flag(&a, "--tool_parser").as_deref(), flag(&a, "--reasoning_parser").as_deref()),
        (Some("hermes3"), Some("qwen3"))
    );
    // On the NPU the context length is the prompt length OVMS compiles for.
    let a = args(&graph("device = \"npu\"\nmax_len = 4096\n", "lunar-lake-npu"), OVMS);
    assert_eq!(flag(&a, "--max_prompt_len").as_deref(), Some("4096"));
    // What OVMS has no option for is refused, not dropped.
    assert_eq!(
        refused("revision = \"0123456789abcdef0123456789abcdef01234567\"\n", "lunar-lake-npu").code,
        "agent-revision"
    );
    assert_eq!(refused("max_len = 4096\n", "lunar-lake-npu").code, "agent-max-len");
}

#[test]
fn hostile_values_never_reach_an_argv() {
    for (toml, key) in [
        ("model_name = \"--trust-remote-code\"\n", "model_name"),
        ("model_name = \"a b\"\n", "model_name"),
        ("revision = \"-x\"\n", "revision"),
        ("revision = \"../../etc\"\n", "revision"),
        ("tool_parser = \"--plugin=/tmp/x.py\"\n", "tool_parser"),
        ("reasoning_parser = \"q\\u001b[2J\"\n", "reasoning_parser"),
        ("max_len = 10\n", "max_len"),
        ("timeout = 5\n", "timeout"),
        ("gpus = 0\n", "gpus"),
        ("gpus = 9\n", "gpus"),
    ] {
        let e = refused(&format!("backend = \"vllm\"\n{toml}"), "arc-b580-x2");
        assert_eq!((e.code, e.key.join(".")), ("agent-value", format!("agent.{key}")), "{toml:?}: {e:?}");
        assert!(!e.message.contains('\u{1b}'), "{}", e.message);
    }
    assert_eq!(refused("image = \"no tag\"\n", "lunar-lake-npu").code, "agent-image");
    assert_eq!(refused("image = \"repo/x\"\n", "lunar-lake-npu").code, "agent-image");
    assert_eq!(refused("storage = \"20Gi; rm\"\n", "lunar-lake-npu").code, "agent-storage");
}

#[test]
fn two_gpus_split_the_model_on_nvidia() {
    let g = graph("gpus = 2\n", "rtx2000ada-x2");
    let a = args(&g, VLLM);
    assert_eq!(flag(&a, "--tensor-parallel-size").as_deref(), Some("2"));
    let c = container(&g, VLLM);
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "2");
    assert_eq!(c["resources"]["requests"]["nvidia.com/gpu"], "2");
    let pod = &spec(&g, VLLM)["spec"]["template"]["spec"];
    assert_eq!(pod["runtimeClassName"], "nvidia");
    assert!(
        pod["volumes"].as_array().unwrap().iter().any(|v| v["name"] == "shm" && v["emptyDir"]["medium"] == "Memory")
    );
    assert_eq!(c["startupProbe"]["failureThreshold"], 180, "1800 s of load at 10 s a probe");
    assert_eq!(pod["terminationGracePeriodSeconds"], 120);
    assert_eq!(env(&g, VLLM, "ZE_AFFINITY_MASK"), None, "Level Zero is Intel's");
}

#[test]
fn two_arc_cards_split_the_model_with_the_oneccl_settings() {
    let g = graph("backend = \"vllm\"\ngpus = 2\ntimeout = 2400\n", "arc-b580-x2");
    let a = args(&g, VLLM);
    assert_eq!(flag(&a, "--tensor-parallel-size").as_deref(), Some("2"));
    let c = container(&g, VLLM);
    assert_eq!(c["resources"]["limits"]["gpu.intel.com/xe"], "2");
    assert_eq!(env(&g, VLLM, "ZE_AFFINITY_MASK").as_deref(), Some("0,1"));
    assert_eq!(env(&g, VLLM, "CCL_ATL_TRANSPORT").as_deref(), Some("ofi"));
    // Issue 37, defect 6: pidfd's pidfd_getfd between sibling workers is a ptrace attach that
    // Yama (ptrace_scope >= 1) refuses without CAP_SYS_PTRACE; sockets needs no capability.
    assert_eq!(env(&g, VLLM, "CCL_ZE_IPC_EXCHANGE").as_deref(), Some("sockets"));
    assert_eq!(c["securityContext"]["capabilities"], serde_json::json!({ "drop": ["ALL"] }), "nothing added");
    let scaler = graph("backend = \"llm-scaler\"\ngpus = 2\n", "arc-b580-x2");
    assert_eq!(env(&scaler, VLLM, "CCL_ZE_IPC_EXCHANGE").as_deref(), Some("sockets"), "llm-scaler's oneCCL too");
    assert_eq!(env(&g, VLLM, "ONEAPI_DEVICE_SELECTOR").as_deref(), Some("level_zero:gpu"));
    let shm = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == "/dev/shm").cloned();
    assert!(shm.is_some(), "a memory-backed /dev/shm");
    assert_eq!(c["startupProbe"]["failureThreshold"], 240);
    assert_eq!(c["resources"]["limits"]["memory"], "16Gi", "the shm counts against the limit");
    let pod = &spec(&g, VLLM)["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 120);
}

#[test]
fn gpus_are_refused_where_the_model_cannot_be_split() {
    // More GPUs than the node has, naming the count.
    let e = refused("gpus = 3\n", "rtx2000ada-x2");
    assert_eq!((e.code, e.message.as_str()), ("agent-gpus", "gpus = 3, and this node has 2 NVIDIA GPUs"));
    let e = refused("backend = \"vllm\"\ngpus = 4\n", "arc-b580-x2");
    assert_eq!(e.message, "gpus = 4, and this node has 2 usable Intel GPUs");
    // A backend that cannot split, named.
    let e = refused("gpus = 2\n", "arc-b580-x2");
    assert!(e.message.contains("OVMS serves a model on one device"), "{}", e.message);
    let e = refused("backend = \"ovms\"\ndevice = \"cpu\"\ngpus = 2\n", "xeon-2s-snc2");
    assert!(e.message.contains("OVMS"), "{}", e.message);
    let e = refused("backend = \"ovms\"\ndevice = \"npu\"\ngpus = 2\n", "lunar-lake-npu");
    assert!(e.message.contains("OVMS"), "{}", e.message);
    // Shared GPUs: two "GPUs" could be one.
    let e = refused("backend = \"vllm\"\ngpus = 2\n[sharing]\nshared = 2\n", "arc-b580-x2");
    assert!(e.message.contains("slices of one GPU"), "{}", e.message);
    // One GPU is always fine and renders as before.
    let g = graph("gpus = 1\n", "rtx2000ada-x2");
    assert_eq!(container(&g, VLLM)["resources"]["limits"]["nvidia.com/gpu"], "1");
}
