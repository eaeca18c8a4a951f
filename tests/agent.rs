//! The agent's device by the reference rules, on the fixture hosts: each device path, each
//! refusal with its diagnostic, and the pod's placement details.

mod support;

use std::sync::LazyLock;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::agent::AgentPlan;
use k3d_gpu::compile::{CompileError, DesiredGraph, compile};
use k3d_gpu::config::load_str;
use k3d_gpu::facts::Facts;
use support::facts_of;

/// The shipped catalog, parsed once for the whole test binary.
static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::embedded().unwrap());

/// `toml` as a whole k3dgpu.toml, compiled for `facts`.
fn compile_toml(toml: &str, facts: &Facts) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, facts, &CATALOG)
}

/// `toml` (more keys of `[agent]`, then any other sections) on fixture host `host`: the agent's
/// plan and its warnings.
fn decide(toml: &str, host: &str) -> Result<(AgentPlan, Vec<String>), Vec<CompileError>> {
    let graph = compile_toml(&format!("[agent]\n{toml}"), &facts_of(host))?;
    let warnings = graph.warnings.iter().filter(|w| w.code.starts_with("agent")).map(|w| w.code.clone()).collect();
    Ok((graph.agent.expect("an [agent] table gives a plan"), warnings))
}

fn ok(toml: &str, host: &str) -> (AgentPlan, Vec<String>) {
    decide(toml, host).unwrap_or_else(|e| panic!("{host}: {e:#?}"))
}

fn refused(toml: &str, host: &str) -> CompileError {
    match decide(toml, host) {
        Ok((plan, _)) => panic!("{host}: expected a refusal, got {plan:?}"),
        Err(mut errors) => errors.remove(0),
    }
}

#[test]
fn auto_picks_a_gaudi_then_an_xmx_gpu_then_the_cpu() {
    let (p, _) = ok("", "gaudi3-server");
    assert_eq!((p.backend, p.device, p.resource.as_deref()), ("vllm", "HPU", Some("habana.ai/gaudi")));
    assert_eq!(p.api, "http://vllm.k3d-gpu-agent.svc:8000/v1");
    assert_eq!(p.memory, "16Gi");

    let (p, _) = ok("", "lunar-lake-npu");
    assert_eq!((p.backend, p.device, p.resource.as_deref()), ("ovms", "GPU", Some("gpu.intel.com/xe")));
    assert_eq!(p.node_selector.get("gpu.intel.com/xmx").map(String::as_str), Some("true"));
    assert_eq!(p.supplemental_groups, [992], "the render node's group");
    assert_eq!(p.cpu_request, 2);
    assert_eq!(p.api, "http://ovms.k3d-gpu-agent.svc:8000/v3");

    // A UHD 770 has no XMX: the P-cores serve, all of them (its NVIDIA GPUs left out).
    let (p, _) = ok("[vendors]\nexclude = [\"nvidia\"]\n", "desktop-rpl-nvidia");
    assert_eq!((p.device, p.cpu_request), ("CPU", 16));
    assert!(p.reason.contains("15.7 vs 9.9 tokens/s"), "{}", p.reason);
    assert_eq!(p.pod_labels.get("k3d-gpu.io/cores").map(String::as_str), Some("performance"));

    // No GPU, AMX: half the CPUs, pinned to the AMX node.
    let (p, _) = ok("", "xeon-2s-snc2");
    assert_eq!((p.device, p.cpu_request), ("CPU", 112));
    assert_eq!(p.node_selector.get("feature.node.kubernetes.io/cpu-cpuid.AMXTILE").map(String::as_str), Some("true"));
    assert!(p.pod_labels.is_empty(), "not hybrid");
}

#[test]
fn the_gatekeeper_sends_auto_to_the_cpu_and_refuses_a_forced_gpu() {
    let (p, warnings) = ok("", "rpl-guc-too-old");
    assert_eq!(p.device, "CPU");
    assert!(p.reason.contains("refused by the firmware gatekeeper"), "{}", p.reason);
    assert!(p.reason.contains("install linux-firmware with i915/tgl_guc_70.bin 70.5.1 or newer"));
    assert_eq!(warnings, ["agent-gpu-refused"]);
    let e = refused("device = \"gpu\"\n", "rpl-guc-too-old");
    assert!(e.message.starts_with("the Intel GPU is refused: "), "{}", e.message);
    assert_eq!(e.key, ["agent", "device"]);
}

#[test]
fn forced_devices_must_exist() {
    let (p, _) = ok("device = \"gpu\"\n", "desktop-rpl-nvidia");
    assert_eq!((p.device, p.resource.as_deref()), ("GPU", Some("gpu.intel.com/i915")));
    assert!(p.node_selector.is_empty(), "forced GPU: XMX or not");
    let (p, _) = ok("device = \"npu\"\n", "lunar-lake-npu");
    assert_eq!(
        (p.device, p.resource.as_deref(), p.supplemental_groups.as_slice()),
        ("NPU", Some("npu.intel.com/accel"), &[992][..])
    );
    let e = refused("device = \"npu\"\n", "meteor-lake-old-npu-fw");
    assert!(e.help.unwrap().contains("v1.35.0"), "the firmware fix");
    let e = refused("device = \"hpu\"\n", "gaudi3-no-driver");
    assert!(e.message.contains("no usable Gaudi"));
    let e = refused("device = \"gpu\"\n", "xeon-2s-snc2");
    assert_eq!(e.message, "the cluster will advertise no Intel GPU");
}

#[test]
fn backend_and_device_combinations_the_reference_refuses() {
    for (toml, host, message) in [
        ("backend = \"ovms\"\ndevice = \"hpu\"\n", "gaudi3-server", "ovms does not run on a Gaudi"),
        ("backend = \"llm-scaler\"\ndevice = \"hpu\"\n", "gaudi3-server", "llm-scaler does not run on a Gaudi"),
        (
            "backend = \"vllm\"\ndevice = \"cpu\"\n",
            "arc-b580-xe-rpl-igpu",
            "vllm runs on an Intel GPU, a Gaudi or (vllm) an NVIDIA GPU only",
        ),
        (
            "backend = \"vllm\"\ndevice = \"npu\"\n",
            "lunar-lake-npu",
            "vllm runs on an Intel GPU, a Gaudi or (vllm) an NVIDIA GPU only",
        ),
    ] {
        assert_eq!(refused(toml, host).message, message, "{toml:?} on {host}");
    }
    // An explicit ovms never picks the Gaudi.
    let (p, _) = ok("backend = \"ovms\"\n", "gaudi3-server");
    assert_eq!((p.backend, p.device), ("ovms", "CPU"));
    // vLLM takes the Intel GPU with no XMX gate; off Battlemage it warns.
    let (p, w) = ok("backend = \"vllm\"\n", "arc-b580-xe-rpl-igpu");
    assert_eq!((p.device, p.resource.as_deref(), w.len()), ("GPU", Some("gpu.intel.com/xe"), 0));
    let (p, w) = ok("backend = \"llm-scaler\"\n", "desktop-rpl-nvidia");
    assert_eq!((p.device, w.as_slice()), ("GPU", &["agent-not-battlemage".to_string()][..]));
}

#[test]
fn dra_mode_advertises_no_gpu_resource_for_the_agent() {
    let (p, _) = ok("", "lunar-lake-npu");
    assert_eq!(p.device, "GPU");
    let (p, _) = ok("[sharing]\nmode = \"dra\"\n", "lunar-lake-npu");
    assert_eq!(p.device, "CPU");
    assert!(p.reason.starts_with("DRA mode does not advertise"), "{}", p.reason);
    let e = refused("device = \"gpu\"\n[sharing]\nmode = \"dra\"\n", "lunar-lake-npu");
    assert!(e.message.starts_with("DRA mode does not advertise"), "{}", e.message);
}

#[test]
fn explicit_cpus_and_memory_win() {
    let (p, _) = ok("cpus = 4\nmemory = \"10Gi\"\n", "desktop-rpl-nvidia");
    assert_eq!((p.cpu_request, p.memory.as_str()), (4, "10Gi"));
}

fn with_addons(toml: &str, facts: &Facts) -> Result<AgentPlan, Vec<CompileError>> {
    Ok(compile_toml(toml, facts)?.agent.unwrap())
}

fn placement(p: &AgentPlan) -> Vec<(String, &'static str)> {
    p.addons.iter().map(|a| (format!("{:?}", a.name).to_lowercase(), a.device)).collect()
}

const ALL_THREE: &str = "[agent]\n[addons.vlm]\n[addons.stt]\n[addons.video]\n";

#[test]
fn add_ons_without_xmx_and_with_an_npu_follow_the_reference() {
    // Meteor Lake: iGPU without XMX, and (with current firmware) a usable NPU; one pod per GPU.
    let f = facts_of("meteor-lake-old-npu-fw");
    let mut host = f.host.clone();
    host.npus[0].firmware.as_mut().unwrap().build_date = Some("2026-07-01".into());
    let facts = k3d_gpu::facts::build(host, vec![], &k3d_gpu::facts::VendorFilter::Auto);
    let p = with_addons(&format!("[sharing]\nshared = 1\n{ALL_THREE}"), &facts).unwrap();
    assert_eq!(p.device, "CPU", "the LLM on the P-cores");
    assert_eq!(placement(&p), [("vlm".into(), "CPU"), ("stt".into(), "NPU"), ("video".into(), "GPU")]);
    let vlm = &p.addons[0];
    assert!(vlm.reason.contains("vlm falls back to the CPU: no free GPU unit"), "{}", vlm.reason);
    assert_eq!(vlm.cores, Some("performance"), "CPU add-ons on P-cores");
    assert_eq!(p.addons[2].cores, Some("efficient"), "accelerator add-ons on E-cores");
    assert_eq!(p.addons[2].resource.as_deref(), Some("gpu.intel.com/i915"));
}

#[test]
fn one_xmx_gpu_stays_with_the_llm_and_video_decodes_on_the_cpu() {
    let p = with_addons(&format!("[sharing]\nshared = 1\n{ALL_THREE}"), &facts_of("lunar-lake-npu")).unwrap();
    assert_eq!(p.device, "GPU");
    assert_eq!(placement(&p), [("vlm".into(), "CPU"), ("stt".into(), "NPU"), ("video".into(), "CPU")]);
    // With the iGPU's sharing default (8 pods) there is room for all of them on it.
    let p = with_addons(ALL_THREE, &facts_of("lunar-lake-npu")).unwrap();
    assert_eq!(placement(&p), [("vlm".into(), "GPU"), ("stt".into(), "NPU"), ("video".into(), "GPU")]);
}

#[test]
fn add_on_refusals() {
    let lnl = facts_of("lunar-lake-npu");
    let err = |toml: &str| with_addons(toml, &lnl).unwrap_err().remove(0);
    let e = err("[sharing]\nshared = 1\n[agent]\n[addons.vlm]\ndevice = \"gpu\"\n");
    assert_eq!(e.message, "vlm asks for the GPU, and no GPU unit is free (the LLM runs on the GPU)");
    let e = err("[agent]\n[addons.video]\nsource = \"/home/me/cam.mp4\"\n");
    assert_eq!(e.code, "video-source-local");
    assert_eq!(err("[agent]\n[addons.video]\nsource = \"file:///cam.mp4\"\n").code, "video-source-local");
    assert_eq!(
        err("[agent]\n[addons.video]\ndevice = \"npu\"\n").message,
        "video never runs on the NPU: only the GPU has media engines"
    );
    assert_eq!(err("[addons.stt]\n").code, "addons-without-agent");
    // The error points at the add-on's device, and its help fits the device asked for: GPU
    // sharing only helps a GPU request.
    assert_eq!(e_key(&err("[sharing]\nshared = 1\n[agent]\n[addons.vlm]\ndevice = \"gpu\"\n")), "addons.vlm.device");
    let arc = facts_of("arc-b580-xe-rpl-igpu");
    let no_npu = with_addons("[agent]\n[addons.stt]\ndevice = \"npu\"\n", &arc).unwrap_err().remove(0);
    assert_eq!(no_npu.message, "stt asks for the NPU, and the cluster gets no usable NPU here");
    assert!(!no_npu.help.as_deref().unwrap().contains("shared"), "{:?}", no_npu.help);
    let taken = err("[agent]\ndevice = \"npu\"\n[addons.stt]\ndevice = \"npu\"\n");
    assert!(taken.message.contains("no NPU unit is free"), "{}", taken.message);
    assert!(!taken.help.as_deref().unwrap().contains("shared"), "{:?}", taken.help);
    assert!(with_addons("[agent]\n[addons.video]\nsource = \"rtsp://cam.local/stream\"\n", &lnl).is_ok());
}

fn e_key(e: &CompileError) -> String {
    e.key.join(".")
}

#[test]
fn auto_serves_vllm_on_an_nvidia_gpu_with_enough_memory() {
    // Two RTX 4000 Ada (20 GiB each, by PCI id 27b2): vLLM's CUDA build on nvidia.com/gpu.
    let (p, w) = ok("", "desktop-rpl-nvidia");
    assert_eq!((p.backend, p.device, p.resource.as_deref()), ("vllm", "CUDA", Some("nvidia.com/gpu")));
    assert_eq!(p.api, "http://vllm.k3d-gpu-agent.svc:8000/v1");
    assert!(p.reason.contains("20 GiB"), "{}", p.reason);
    assert!(w.is_empty(), "{w:?}");
    assert!(p.supplemental_groups.is_empty(), "the NVIDIA nodes are 0666");
    // Forced spellings.
    let (p, _) = ok("device = \"cuda\"\n", "desktop-rpl-nvidia");
    assert_eq!((p.backend, p.device), ("vllm", "CUDA"));
    let (p, _) = ok("backend = \"vllm\"\n", "desktop-rpl-nvidia");
    assert_eq!(p.device, "CUDA");
    // An explicit OVMS stays with the Intel rules (UHD 770, no XMX: the CPU).
    let (p, _) = ok("backend = \"ovms\"\n", "desktop-rpl-nvidia");
    assert_eq!((p.backend, p.device), ("ovms", "CPU"));
    for (toml, host, message) in [
        ("backend = \"ovms\"\ndevice = \"cuda\"\n", "desktop-rpl-nvidia", "ovms does not run on an NVIDIA GPU"),
        ("device = \"cuda\"\n", "lunar-lake-npu", "device = \"cuda\" but the cluster will advertise no NVIDIA GPU"),
    ] {
        assert_eq!(refused(toml, host).message, message, "{toml:?} on {host}");
    }
}

#[test]
fn an_nvidia_gpu_of_unknown_memory_is_not_picked_by_auto() {
    let mut facts = facts_of("desktop-rpl-nvidia");
    for gpu in &mut facts.host.nvidia.gpus {
        gpu.device_id = Some(0x1234);
    }
    let g = compile_toml("[agent]\n", &facts).unwrap();
    assert_eq!(g.agent.as_ref().unwrap().device, "CPU");
    assert!(g.warnings.iter().any(|w| w.code == "agent-cuda-memory-unknown"), "{:?}", g.warnings);
    let g = compile_toml("[agent]\ndevice = \"cuda\"\n", &facts).unwrap();
    assert_eq!(g.agent.as_ref().unwrap().device, "CUDA");
}

#[test]
fn the_reference_host_with_two_rtx_2000_ada_serves_vllm_on_cuda() {
    // 10de:28b0 was not in the old six-entry table: the agent fell back to the CPU.
    let (p, w) = ok("", "rtx2000ada-x2");
    assert_eq!((p.backend, p.device, p.resource.as_deref()), ("vllm", "CUDA", Some("nvidia.com/gpu")));
    assert!(p.reason.contains("16 GiB"), "{}", p.reason);
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn nvidia_smi_memory_from_a_capture_wins_over_the_pci_id_table() {
    // An id no table knows, but the capture recorded 16 GB (nvidia-smi reports a little less).
    let mut facts = facts_of("desktop-rpl-nvidia");
    for gpu in &mut facts.host.nvidia.gpus {
        gpu.device_id = Some(0x1234);
        gpu.memory_mib = Some(16_376);
    }
    let g = compile_toml("[agent]\n", &facts).unwrap();
    let agent = g.agent.as_ref().unwrap();
    assert_eq!(agent.device, "CUDA");
    assert!(agent.reason.contains("16 GiB"), "{}", agent.reason);
    // And a small card it measured stays off auto, even where the table says more.
    for gpu in &mut facts.host.nvidia.gpus {
        gpu.device_id = Some(0x27b2);
        gpu.memory_mib = Some(8_192);
    }
    assert_ne!(compile_toml("[agent]\n", &facts).unwrap().agent.unwrap().device, "CUDA");
}

#[test]
fn a_board_sold_with_two_memory_sizes_is_unknown_and_the_warning_says_why() {
    // GeForce RTX 3060 (10de:2503): 8 or 12 GB under one id.
    let mut facts = facts_of("desktop-rpl-nvidia");
    for gpu in &mut facts.host.nvidia.gpus {
        gpu.device_id = Some(0x2503);
    }
    let g = compile_toml("[agent]\n", &facts).unwrap();
    assert_ne!(g.agent.as_ref().unwrap().device, "CUDA");
    let w = g.warnings.iter().find(|w| w.code == "agent-cuda-memory-unknown").expect("the warning");
    assert!(w.text.contains("GeForce RTX 3060 is sold with 8 GB or 12 GB"), "{}", w.text);
    assert!(w.text.contains("facts capture"), "{}", w.text);
}

#[test]
fn the_model_must_be_a_hugging_face_id_never_a_flag_or_a_path() {
    // Each of these would reach the server's argv: a flag, a path, a second argument, a
    // terminal escape.
    for bad in [
        "--trust-remote-code",
        "-x/y",
        "org/-flag",
        "../etc/passwd",
        "org/..",
        "org/name/extra",
        "gpt2",
        "org/na me",
        "org/name\u{1b}[2J",
        "org/a--b",
        "org/.hidden",
        "/abs",
    ] {
        // JSON's string escapes are TOML's.
        let e = refused(&format!("model = {}\n", serde_json::to_string(bad).unwrap()), "lunar-lake-npu");
        assert_eq!((e.code, e_key(&e).as_str()), ("agent-model", "agent.model"), "{bad:?}: {e:?}");
        assert!(!e.message.contains('\u{1b}'), "the message escapes it: {}", e.message);
    }
    let long = format!("org/{}", "a".repeat(93));
    assert_eq!(refused(&format!("model = {long:?}\n"), "lunar-lake-npu").code, "agent-model");
    // The ids people use are accepted, at the length limit too.
    for good in ["OpenVINO/Qwen3-4B-int4-ov", "Qwen/Qwen3-4B", "meta-llama/Llama-3.1-8B_v2.0", &long[..96]] {
        ok(&format!("model = {good:?}\n"), "lunar-lake-npu");
    }
    let e = refused("memory = \"6Gi --oops\"\n", "lunar-lake-npu");
    assert_eq!((e.code, e_key(&e).as_str()), ("agent-memory", "agent.memory"));
}

/// Issue 37, defect 4: every add-on device refusal leads its help with a setting that makes
/// the config valid, never the one it has (embeddings with `device = "auto"` on a busy NPU
/// were told to set `device = "auto"`). Each hint is applied and the config compiled again.
#[test]
fn every_add_on_device_hint_names_a_setting_that_validates() {
    let hint = regex::Regex::new(r#"\[addons\.(\w+)\] device = "(\w+)""#).unwrap();
    let cases = [
        ("[agent]\ndevice = \"npu\"\n[addons.embeddings]\n", "lunar-lake-npu"),
        ("[agent]\ndevice = \"npu\"\n[addons.stt]\ndevice = \"npu\"\n", "lunar-lake-npu"),
        ("[sharing]\nshared = 1\n[agent]\n[addons.vlm]\ndevice = \"gpu\"\n", "lunar-lake-npu"),
        ("[agent]\n[addons.stt]\ndevice = \"npu\"\n", "arc-b580-xe-rpl-igpu"),
        ("[agent]\n[addons.embeddings]\n", "arc-b580-xe-rpl-igpu"),
    ];
    for (toml, host) in cases {
        let facts = facts_of(host);
        let errors = compile_toml(toml, &facts).err().unwrap_or_default();
        let e =
            errors.iter().find(|e| e.code == "addon-device").unwrap_or_else(|| panic!("{toml} on {host}: {errors:?}"));
        let help = e.help.clone().unwrap_or_default();
        let caps = hint.captures(&help).unwrap_or_else(|| panic!("the help names no setting: {help}"));
        let (addon, device) = (&caps[1], &caps[2]);
        let current =
            toml.split(&format!("[addons.{addon}]\n")).nth(1).and_then(|rest| rest.lines().next()).unwrap_or("");
        assert_ne!(current, format!("device = \"{device}\""), "the hint repeats the setting: {help}");
        let mut fixed = String::new();
        let mut in_section = false;
        for line in toml.lines() {
            if line.starts_with('[') {
                in_section = line == format!("[addons.{addon}]");
            }
            if in_section && line.starts_with("device") {
                continue;
            }
            fixed.push_str(line);
            fixed.push('\n');
            if line == format!("[addons.{addon}]") {
                fixed.push_str(&format!("device = \"{device}\"\n"));
            }
        }
        let again = compile_toml(&fixed, &facts).err().unwrap_or_default();
        assert!(
            !again.iter().any(|e| e.code == "addon-device"),
            "{toml} on {host}: the hint ({help}) gave\n{fixed}\nwhich still fails: {again:?}"
        );
    }
}

/// Issue 37, defect 1: a parser name is checked against the server placement chose, at its
/// pinned version: vLLM's `hermes` on an Intel host (OVMS, whose name is `hermes3`) and
/// OVMS's `hermes3` on an NVIDIA host (vLLM) are refused at validate, naming the server, its
/// list and the closest name; the defaults and `""` pass.
#[test]
fn a_parser_the_chosen_server_lacks_is_refused_with_the_closest_name() {
    let refused = |toml: &str, host: &str| {
        let errors = compile_toml(toml, &facts_of(host)).err().unwrap_or_default();
        errors
            .into_iter()
            .find(|e| e.code == "agent-parser")
            .unwrap_or_else(|| panic!("{toml} on {host} was not refused"))
    };
    let intel = refused("[agent]\ntool_parser = \"hermes\"\n", "arc-b580-xe-rpl-igpu");
    assert!(
        intel.message.contains("not one of OVMS v2026.2's") && intel.message.contains("hermes3, lfm2"),
        "{}",
        intel.message
    );
    assert_eq!(intel.key.join("."), "agent.tool_parser");
    assert!(intel.help.as_deref().unwrap().contains("tool_parser = \"hermes3\""), "{:?}", intel.help);
    let nvidia = refused("[agent]\ntool_parser = \"hermes3\"\n", "rtx2000ada-x2");
    assert!(nvidia.message.contains("not one of vLLM v0.31.0's"), "{}", nvidia.message);
    assert!(nvidia.help.as_deref().unwrap().contains("tool_parser = \"hermes\""), "{:?}", nvidia.help);
    let reasoning = refused("[agent]\nreasoning_parser = \"deepseek_r1\"\n", "arc-b580-xe-rpl-igpu");
    assert_eq!(reasoning.key.join("."), "agent.reasoning_parser");
    for (toml, host) in [
        ("[agent]\n", "arc-b580-xe-rpl-igpu"),
        ("[agent]\n", "rtx2000ada-x2"),
        ("[agent]\ntool_parser = \"\"\n", "arc-b580-xe-rpl-igpu"),
        ("[agent]\ntool_parser = \"qwen3_coder\"\n", "rtx2000ada-x2"),
    ] {
        let errors = compile_toml(toml, &facts_of(host)).err().unwrap_or_default();
        assert!(!errors.iter().any(|e| e.code == "agent-parser"), "{toml} on {host}: {errors:?}");
    }
}

/// Issue 37, defect 3: `device = "gpu"` is the Intel GPU (a config written for it must not
/// move), so on a host with an Intel iGPU and two RTX cards the plan warns that the RTX cards
/// sit idle and names `device = "cuda"`; a refusal of a forced Intel GPU there names it too.
/// Without NVIDIA, nothing is said.
#[test]
fn device_gpu_on_an_nvidia_box_names_the_value_that_reaches_the_nvidia_gpu() {
    let (plan, warnings) = ok("device = \"gpu\"\n", "rtx2000ada-x2");
    assert_eq!(plan.device, "GPU", "{plan:?}");
    assert!(warnings.contains(&"agent-gpu-is-intel".to_string()), "{warnings:?}");
    let graph = compile_toml("[agent]\ndevice = \"gpu\"\n", &facts_of("rtx2000ada-x2")).unwrap();
    let text = &graph.warnings.iter().find(|w| w.code == "agent-gpu-is-intel").unwrap().text;
    assert!(text.contains("device = \"cuda\" runs vLLM on the NVIDIA GPU"), "{text}");
    let (_, warnings) = ok("device = \"gpu\"\n", "arc-b580-xe-rpl-igpu");
    assert!(!warnings.contains(&"agent-gpu-is-intel".to_string()), "{warnings:?}");
    // A forced Intel GPU that is not there, on an NVIDIA host: the way out names "cuda".
    let e = refused(
        "device = \"gpu\"\n[sharing]\nmode = { intel = \"dra\" }\n[experimental]\nfeatures = [\"dra\"]\n",
        "desktop-rpl-nvidia",
    );
    assert!(e.help.as_deref().unwrap_or_default().contains("device = \"cuda\""), "{e:?}");
}

/// The cluster `rtx2000ada-x2`'s k3d node would be, with `holders` holding accelerators:
/// (namespace, pod, resource, units). The node advertises what the host's plugins would.
fn held_on(host_allocatable: &[(&str, &str)], holders: &[Holder]) -> k3d_gpu::compile::held::Held {
    use k3d_gpu::compile::held::{Held, PodUse};
    let allocatable: std::collections::BTreeMap<String, String> =
        host_allocatable.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let pods: Vec<PodUse> = holders
        .iter()
        .map(|(ns, name, resource, n)| PodUse {
            namespace: ns.to_string(),
            name: name.to_string(),
            node: "k3d-lab-server-0".into(),
            units: [(resource.to_string(), *n)].into(),
        })
        .collect();
    Held::from_pods([("k3d-lab-server-0", &allocatable)], &pods, "k3d-gpu-agent")
}

/// `toml` on `host`, placed on what `held` leaves.
fn compile_held(
    toml: &str,
    host: &str,
    held: &k3d_gpu::compile::held::Held,
) -> Result<DesiredGraph, Vec<CompileError>> {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    let source = k3d_gpu::node_image::Source::shipped();
    k3d_gpu::compile::compile_against(&config, &facts_of(host), &CATALOG, &source, held)
}

/// Issue 37, defect 5: on a cluster that exists, the agent is placed on what other workloads
/// leave free. Both RTX cards held by someone else: auto serves elsewhere and says who holds
/// them; one of two held: CUDA still, and nothing said; the agent's own server holding its GPU
/// never moves it.
#[test]
fn the_agent_is_placed_on_what_other_workloads_leave_free() {
    let nvidia = [("nvidia.com/gpu", "2"), ("gpu.intel.com/i915", "1")];
    let agent = |held| {
        let g = compile_held("[agent]\n", "rtx2000ada-x2", &held).unwrap_or_else(|e| panic!("{e:#?}"));
        (g.agent.clone().unwrap(), g.warnings)
    };
    let (free, warnings) = agent(held_on(&nvidia, &[]));
    assert_eq!((free.backend, free.device), ("vllm", "CUDA"), "nothing held: the facts decide");
    assert!(!warnings.iter().any(|w| w.code == "agent-device-held"));

    let both = [("default", "comfyui-6f9", "nvidia.com/gpu", 1), ("ml", "trainer-0", "nvidia.com/gpu", 1)];
    let (moved, warnings) = agent(held_on(&nvidia, &both));
    assert_ne!(moved.device, "CUDA", "{moved:?}");
    assert_ne!(moved.resource.as_deref(), Some("nvidia.com/gpu"));
    let said = warnings.iter().find(|w| w.code == "agent-device-held").expect("the plan says why");
    assert!(
        said.text.contains("nvidia.com/gpu: 0 of 2 free, held by default/comfyui-6f9 (1), ml/trainer-0 (1)"),
        "{}",
        said.text
    );
    assert!(moved.reason.contains("instead of the NVIDIA GPU"), "{}", moved.reason);

    let (kept, _) = agent(held_on(&nvidia, &both[..1]));
    assert_eq!(kept.device, "CUDA", "one RTX card is still free");

    let ours = [("k3d-gpu-agent", "vllm-7c4d", "nvidia.com/gpu", 1), ("k3d-gpu-agent", "x", "nvidia.com/gpu", 1)];
    let (own, _) = agent(held_on(&nvidia, &ours));
    assert_eq!(own.device, "CUDA", "the agent's namespace is the plan's own");

    // Tensor parallelism needs two free: one held is enough to move it.
    let g = compile_held("[agent]\ndevice = \"cuda\"\ngpus = 2\n", "rtx2000ada-x2", &held_on(&nvidia, &both[..1]));
    let e = g.expect_err("two GPUs asked, one free").remove(0);
    assert!(e.message.contains("the agent needs 2 nvidia.com/gpu"), "{}", e.message);
}

/// A config, its host, the node's allocatable, the holders, and the holder the refusal names.
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [Holder<'a>], &'a str);
/// A pod that holds an accelerator: namespace, name, resource, units.
type Holder<'a> = (&'a str, &'a str, &'a str, u64);

/// A device asked for by name that others hold is refused, naming the holders, with a help
/// whose setting validates when applied (issue 37, defects 4 and 5).
#[test]
fn a_held_device_asked_for_by_name_is_refused_with_a_setting_that_places_it() {
    let nvidia = [("nvidia.com/gpu", "2")];
    let both = [("default", "comfyui-6f9", "nvidia.com/gpu", 1), ("ml", "trainer-0", "nvidia.com/gpu", 1)];
    let npu = [("npu.intel.com/accel", "1"), ("gpu.intel.com/xe", "1")];
    let npu_held = [("video", "detector-0", "npu.intel.com/accel", 1)];
    let setting = regex::Regex::new(r#"set (\[[a-z.]+\]) device = "(\w+)""#).unwrap();
    let cases: [Case; 4] = [
        ("[agent]\ndevice = \"cuda\"\n", "rtx2000ada-x2", &nvidia, &both, "default/comfyui-6f9 (1)"),
        ("[agent]\ndevice = \"npu\"\n", "lunar-lake-npu", &npu, &npu_held, "video/detector-0 (1)"),
        ("[agent]\n[addons.embeddings]\n", "lunar-lake-npu", &npu, &npu_held, "video/detector-0 (1)"),
        ("[agent]\n[addons.stt]\ndevice = \"npu\"\n", "lunar-lake-npu", &npu, &npu_held, "video/detector-0 (1)"),
    ];
    for (toml, host, allocatable, holders, holder) in cases {
        let held = held_on(allocatable, holders);
        let errors = compile_held(toml, host, &held).err().unwrap_or_else(|| panic!("{toml}: not refused"));
        let e = &errors[0];
        assert!(e.message.contains(holder), "{toml}: {}", e.message);
        let help = e.help.clone().unwrap_or_default();
        let caps = setting.captures(&help).unwrap_or_else(|| panic!("{toml}: the help names no setting: {help}"));
        let (section, device) = (&caps[1], &caps[2]);
        // The setting applied: that section's device line replaced.
        let mut fixed = String::new();
        let mut here = false;
        for line in toml.lines() {
            if line.starts_with('[') {
                here = line == section;
            }
            if here && line.starts_with("device") {
                continue;
            }
            fixed.push_str(line);
            fixed.push('\n');
            if line == section {
                fixed.push_str(&format!("device = \"{device}\"\n"));
            }
        }
        assert_ne!(fixed, toml, "{toml}: the help repeats the setting: {help}");
        let again = compile_held(&fixed, host, &held);
        assert!(again.is_ok(), "{toml}: the help ({help}) gave\n{fixed}\nwhich still fails: {again:?}");
    }
}

/// Issue 43, item 7: where a model of N GiB would run (`agent --model-size`, the MCP tool
/// `recommend_placement`): the placement's device first, the first that holds the weights and
/// a fifth more recommended, split across NVIDIA GPUs when one is too small.
#[test]
fn a_models_size_decides_which_device_holds_it_in_the_placements_order() {
    use k3d_gpu::compile::advice::{Machine, advise};
    let on = |host: &str, gib: f64| {
        let facts = facts_of(host);
        let (plan, _) = ok("", host);
        advise(gib, &[Machine { node: None, facts: &facts, config: &Default::default(), placed: Some(plan.device) }])
    };
    // Lunar Lake: the placement's integrated Xe2 GPU shares the host's memory and holds 4 GiB.
    let small = on("lunar-lake-npu", 4.0);
    assert_eq!(small.needs_gib, 4.8);
    let first = &small.candidates[0];
    assert_eq!((first.device, first.placed, first.shared_memory), ("gpu", true, true), "{small:#?}");
    let pick = small.recommended.as_ref().expect("the iGPU holds 4 GiB");
    assert_eq!((pick.device, pick.placed), ("gpu", true));
    assert!(small.reason.contains("the device the placement picks"), "{}", small.reason);
    let devices: Vec<&str> = small.candidates.iter().map(|c| c.device).collect();
    assert_eq!(devices, ["gpu", "npu", "cpu"], "the NPU and the CPU after it");
    // More than the host's memory: nothing holds it, and the advice says what to do.
    let huge = on("lunar-lake-npu", 400.0);
    assert!(huge.recommended.is_none(), "{huge:#?}");
    assert!(huge.reason.contains("smaller model"), "{}", huge.reason);
    assert!(huge.candidates.iter().all(|c| c.fits == Some(false)));

    // Two NVIDIA GPUs: one holds a small model; a model too big for one is split across both.
    let host = "rtx2000ada-x2";
    let one_gpu = on(host, 4.0).recommended.expect("one GPU holds 4 GiB");
    assert_eq!((one_gpu.device, one_gpu.gpus, one_gpu.placed), ("cuda", 1, true));
    let each = one_gpu.memory_gib.expect("the board's memory is known");
    let split = on(host, each * 1.5 / 1.2).recommended.expect("two GPUs hold it");
    assert_eq!((split.device, split.gpus), ("cuda", 2), "{split:#?}");
    assert!(split.why.contains("[agent] gpus = 2"), "{}", split.why);
}

/// A GPU whose memory the facts do not know is said to be unknown, never recommended on a
/// guess; and when the placement's device is too small the advice names it and the fix.
#[test]
fn unknown_memory_is_never_a_recommendation_and_a_passed_placement_is_named() {
    use k3d_gpu::compile::advice::{Machine, advise};
    let facts = facts_of("arc-b580-x2");
    let (plan, _) = ok("", "arc-b580-x2");
    let config = Default::default();
    let advice = advise(8.0, &[Machine { node: None, facts: &facts, config: &config, placed: Some(plan.device) }]);
    let arc = advice.candidates.iter().find(|c| c.what.contains("discrete")).expect("the B580s");
    assert_eq!((arc.fits, arc.memory_gib, arc.placed), (None, None, true), "{advice:#?}");
    let pick = advice.recommended.as_ref().expect("the CPU holds 8 GiB");
    assert_eq!(pick.device, "cpu");
    assert!(advice.reason.contains("set [agent] device = \"cpu\""), "{}", advice.reason);
    assert!(
        advice.reason.contains("The placement's device, the discrete Intel GPU, is not known to hold it"),
        "{}",
        advice.reason
    );
}
