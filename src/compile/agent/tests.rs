//! The agent's placement rules, each alone: a table of inputs and what the rule decides.

use super::*;
use crate::compile::intel::tests::gpu;
use crate::config::Addon;

fn target(reason: &str, fix: &str) -> Target {
    Target {
        id: "intel-gpu/0000:00:02.0".into(),
        kind: TargetKind::IntelGpu,
        name: None,
        usable: false,
        reason: Some(reason.into()),
        fix: Some(fix.into()),
    }
}

/// An offer with one usable Intel GPU (XMX or not) on the plugin path.
fn intel_offer(xmx: Xmx) -> Offer {
    let mut g = gpu("0000:03:00.0", 0xe20b, false);
    g.xmx = xmx;
    Offer { intel_active: true, advertised: vec![g.clone()], usable: vec![g], ..Default::default() }
}

fn roomy_nvidia() -> Offer {
    Offer { nvidia: true, cuda_gib: Some(16), ..Default::default() }
}

#[test]
fn auto_picks_vllm_where_a_gaudi_or_a_roomy_nvidia_gpu_serves() {
    use AgentBackend as B;
    use AgentDevice as D;
    // (backend, device, gaudi, cuda_auto, server)
    const CASES: &[(B, D, bool, bool, &str)] = &[
        (B::Auto, D::Auto, false, false, "ovms"),
        (B::Auto, D::Auto, true, false, "vllm"),
        (B::Auto, D::Auto, false, true, "vllm"),
        (B::Auto, D::Hpu, false, false, "vllm"),
        (B::Auto, D::Cuda, false, false, "vllm"),
        (B::Auto, D::Gpu, true, true, "ovms"),
        // `gpu` is the Intel GPU even where a roomy NVIDIA GPU serves (issue 37, defect 3:
        // the plan names `cuda` instead).
        (B::Auto, D::Gpu, false, true, "ovms"),
        (B::Auto, D::Npu, false, false, "ovms"),
        (B::Ovms, D::Auto, true, true, "ovms"),
        (B::Vllm, D::Cpu, false, false, "vllm"),
        (B::LlmScaler, D::Auto, true, true, "llm-scaler"),
    ];
    for (b, d, gaudi, cuda, want) in CASES {
        assert_eq!(backend(*b, *d, *gaudi, *cuda), *want, "{b:?} on {d:?}, gaudi={gaudi} cuda_auto={cuda}");
    }
}

#[test]
fn a_backend_is_refused_where_it_never_runs() {
    use AgentDevice as D;
    // (device, backend, the message when refused)
    const CASES: &[(D, &str, Option<&str>)] = &[
        (D::Hpu, "ovms", Some("ovms does not run on a Gaudi")),
        (D::Hpu, "llm-scaler", Some("llm-scaler does not run on a Gaudi")),
        (D::Hpu, "vllm", None),
        (D::Cpu, "vllm", Some("vllm runs on an Intel GPU, a Gaudi or (vllm) an NVIDIA GPU only")),
        (D::Npu, "llm-scaler", Some("llm-scaler runs on an Intel GPU, a Gaudi or (vllm) an NVIDIA GPU only")),
        (D::Cpu, "ovms", None),
        (D::Npu, "ovms", None),
        (D::Cuda, "ovms", Some("ovms does not run on an NVIDIA GPU")),
        (D::Cuda, "vllm", None),
        (D::Gpu, "ovms", None),
        (D::Auto, "llm-scaler", None),
    ];
    for (device, backend, want) in CASES {
        let got = unsupported(*device, backend);
        assert_eq!(got.as_ref().map(|r| r.message.as_str()), *want, "{backend} on {device:?}");
        assert!(got.is_none_or(|r| r.key == "device"), "{backend} on {device:?}");
    }
}

#[test]
fn named_accelerators_are_placed_or_refused() {
    use AgentDevice as D;
    let npu_refused = Offer { npu_fix: Some("update the NPU firmware".into()), ..Default::default() };
    let small_nvidia = Offer { nvidia: true, cuda_gib: Some(8), ..Default::default() };
    let unknown_nvidia = Offer { nvidia: true, ..Default::default() };
    let nvidia_and_intel = Offer { nvidia: true, ..intel_offer(Xmx::Yes) };
    let gaudi = Offer { gaudi: true, ..roomy_nvidia() };
    let (roomy, npu) = (roomy_nvidia(), Offer { npu: true, ..Default::default() });
    // (case, device, backend, offer, Ok(device) / Err(message start); None: not decided here)
    type Case<'a> = (&'a str, D, &'a str, &'a Offer, Option<Result<&'a str, &'a str>>);
    let cases: Vec<Case> = vec![
        ("cuda forced", D::Cuda, "vllm", &unknown_nvidia, Some(Ok("CUDA"))),
        ("cuda without nvidia", D::Cuda, "vllm", &npu_refused, Some(Err("device = \"cuda\""))),
        ("auto on a roomy GPU", D::Auto, "vllm", &roomy, Some(Ok("CUDA"))),
        ("auto on a small GPU, OVMS", D::Auto, "ovms", &small_nvidia, None),
        ("vllm by name, no Intel GPU", D::Auto, "vllm", &unknown_nvidia, Some(Ok("CUDA"))),
        ("vllm by name, an Intel GPU", D::Auto, "vllm", &nvidia_and_intel, None),
        ("a Gaudi before CUDA", D::Auto, "vllm", &gaudi, Some(Ok("HPU"))),
        ("hpu forced", D::Hpu, "vllm", &gaudi, Some(Ok("HPU"))),
        ("hpu without a Gaudi", D::Hpu, "vllm", &roomy, Some(Err("device = \"hpu\""))),
        ("npu", D::Npu, "ovms", &npu, Some(Ok("NPU"))),
        ("npu refused", D::Npu, "ovms", &npu_refused, Some(Err("device = \"npu\""))),
        ("gpu is not an accelerator here", D::Gpu, "ovms", &gaudi, None),
        ("cpu is not an accelerator", D::Cpu, "ovms", &gaudi, None),
    ];
    for (name, device, backend, offer, want) in cases {
        let got = accelerator(device, backend, offer);
        match (got, want) {
            (None, None) => {}
            (Some(Ok(p)), Some(Ok(d))) => assert_eq!(p.device, d, "{name}"),
            (Some(Err(r)), Some(Err(m))) => assert!(r.message.starts_with(m), "{name}: {}", r.message),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
    // The refused NPU's fix is the facts' own; without one, the driver's.
    let Some(Err(r)) = accelerator(D::Npu, "ovms", &npu_refused) else { panic!("npu refused") };
    assert_eq!(r.fix, "update the NPU firmware");
    let Some(Err(r)) = accelerator(D::Npu, "ovms", &Offer::default()) else { panic!("no npu") };
    assert_eq!(r.fix, "load intel_vpu on a kernel that supports the NPU");
    let Some(Ok(p)) = accelerator(D::Auto, "vllm", &roomy_nvidia()) else { panic!("roomy") };
    assert!(p.reason.contains("the GPU has 16 GiB (the default model wants 12)"), "{}", p.reason);
}

#[test]
fn a_wanted_intel_gpu_is_the_first_usable_or_says_why_not() {
    use AgentDevice as D;
    let refused = Offer {
        intel_active: true,
        advertised: vec![gpu("0000:00:02.0", 0xa780, true)],
        refused: Some(target("GuC firmware missing", "install linux-firmware")),
        ..Default::default()
    };
    let dra = Offer { intel_active: true, dra: true, ..Default::default() };
    // (case, device, backend, offer, Ok(reason) / Err((key, message start, fix)))
    type Case<'a> = (&'a str, D, &'a str, Offer, Result<&'a str, (&'a str, &'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("forced", D::Gpu, "ovms", intel_offer(Xmx::No), Ok("forced: any allocatable Intel GPU, XMX or not")),
        ("vllm's GPU", D::Auto, "vllm", intel_offer(Xmx::Yes), Ok("vllm runs on the Intel GPU")),
        (
            "refused, forced",
            D::Gpu,
            "ovms",
            Offer { ..refused },
            Err(("device", "the Intel GPU is refused: GuC firmware missing", "install linux-firmware")),
        ),
        ("dra", D::Auto, "llm-scaler", dra, Err(("backend", "DRA mode does not advertise", "use [sharing] mode"))),
        (
            "none",
            D::Auto,
            "vllm",
            Offer::default(),
            Err(("backend", "the cluster will advertise no Intel GPU", "check `k3d-gpu detect`")),
        ),
    ];
    for (name, device, backend, offer, want) in cases {
        match (intel_gpu(device, backend, &offer), want) {
            (Ok(p), Ok(reason)) => assert_eq!((p.device, p.reason.as_str()), ("GPU", reason), "{name}"),
            (Err(r), Err((key, message, fix))) => {
                assert_eq!(r.key, key, "{name}");
                assert!(r.message.starts_with(message), "{name}: {}", r.message);
                assert!(r.fix.starts_with(fix), "{name}: {}", r.fix);
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn the_cpu_says_why_it_was_chosen() {
    use AgentDevice as D;
    let refused = Offer {
        advertised: vec![gpu("0000:00:02.0", 0xa780, true)],
        refused: Some(target("GuC 70.1 wanted", "update firmware")),
        ..Default::default()
    };
    // (case, device, offer, reason start, warned)
    let cases: Vec<(&str, D, Offer, &str, bool)> = vec![
        ("forced", D::Cpu, Offer { ..intel_offer(Xmx::Yes) }, "forced: the CPU", false),
        ("gatekeeper", D::Auto, refused, "the Intel GPU is refused by the firmware gatekeeper (GuC 70.1 wanted)", true),
        ("dra", D::Auto, Offer { dra: true, intel_active: true, ..Default::default() }, "DRA mode does not", false),
        ("dra without intel", D::Auto, Offer { dra: true, ..Default::default() }, "no accelerator", false),
        ("no XMX", D::Auto, intel_offer(Xmx::No), "the Intel GPU has no XMX", false),
        ("nothing", D::Auto, Offer::default(), "no accelerator the agent can use is advertised", false),
    ];
    for (name, device, offer, reason, warned) in cases {
        let p = on_cpu(device, &offer);
        assert_eq!(p.device, "CPU", "{name}");
        assert!(p.reason.starts_with(reason), "{name}: {}", p.reason);
        assert_eq!(p.warning.is_some(), warned, "{name}");
    }
}

#[test]
fn placement_tries_the_rules_in_the_references_order() {
    use AgentDevice as D;
    // (case, device, backend, offer, device placed or the refusal's key)
    type Case<'a> = (&'a str, D, &'a str, Offer, Result<&'a str, &'a str>);
    let cases: Vec<Case> = vec![
        ("a refused pairing before anything", D::Cpu, "vllm", intel_offer(Xmx::Yes), Err("device")),
        ("an XMX GPU for OVMS", D::Auto, "ovms", intel_offer(Xmx::Yes), Ok("GPU")),
        ("no XMX: OVMS on the CPU", D::Auto, "ovms", intel_offer(Xmx::No), Ok("CPU")),
        ("vllm needs a GPU", D::Auto, "vllm", Offer::default(), Err("backend")),
        ("a Gaudi over the Intel GPU", D::Auto, "vllm", Offer { gaudi: true, ..intel_offer(Xmx::Yes) }, Ok("HPU")),
        (
            "CUDA over the Intel GPU",
            D::Auto,
            "vllm",
            Offer { nvidia: true, cuda_gib: Some(24), ..intel_offer(Xmx::Yes) },
            Ok("CUDA"),
        ),
        ("forced GPU with OVMS", D::Gpu, "ovms", intel_offer(Xmx::No), Ok("GPU")),
        ("forced CPU with OVMS", D::Cpu, "ovms", intel_offer(Xmx::Yes), Ok("CPU")),
    ];
    for (name, device, backend, offer, want) in cases {
        let got = placement(device, backend, &offer).map(|p| p.device).map_err(|r| r.key);
        assert_eq!(got, want, "{name}");
    }
}

const UNKNOWN_TAIL: &str = ", so auto does not serve the model on it; set device = \"cuda\" to use it, or capture the \
     host with `k3d-gpu facts capture` where nvidia-smi runs";

#[test]
fn unknown_nvidia_memory_names_the_boards_sizes() {
    let board = |id: Option<u32>| crate::facts::NvidiaGpu {
        pci_address: "0000:01:00.0".into(),
        device_id: id,
        model: None,
        minor: None,
        memory_mib: None,
    };
    let cases: Vec<(&str, Vec<crate::facts::NvidiaGpu>, &str)> = vec![
        ("no id", vec![board(None)], "the NVIDIA GPU's memory is not known for its PCI id"),
        ("an id not in the table", vec![board(Some(0xffff))], "the NVIDIA GPU's memory is not known for its PCI id"),
        (
            "a board",
            vec![board(Some(0x1d81))],
            "the NVIDIA GPU's memory is not known (the TITAN V is sold with 12 GB, and its PCI id does not say which)",
        ),
    ];
    for (name, gpus, want) in cases {
        let got = cuda_memory_unknown(&gpus);
        assert_eq!(got.strip_suffix(UNKNOWN_TAIL), Some(want), "{name}: {got}");
    }
}

#[test]
fn ovms_takes_no_revision_and_a_context_length_only_on_the_npu() {
    let agent = |revision: bool, max_len: bool| crate::config::Agent {
        revision: revision.then(|| "main".to_string()),
        max_len: max_len.then_some(4096),
        ..Default::default()
    };
    // (backend, device, revision, max_len, error code)
    const CASES: &[(&str, &str, bool, bool, Option<&str>)] = &[
        ("ovms", "GPU", false, false, None),
        ("ovms", "GPU", true, false, Some("agent-revision")),
        ("ovms", "NPU", true, true, Some("agent-revision")),
        ("ovms", "CPU", false, true, Some("agent-max-len")),
        ("ovms", "NPU", false, true, None),
        ("vllm", "GPU", true, true, None),
    ];
    for (backend, device, revision, max_len, want) in CASES {
        let got = ovms_limit(backend, device, &agent(*revision, *max_len)).map(|e| e.code);
        assert_eq!(got, *want, "{backend} on {device}, revision={revision} max_len={max_len}");
    }
}

#[test]
fn each_device_requests_its_resource() {
    let (i915, mut xe) = (gpu("0000:00:02.0", 0xa780, true), gpu("0000:03:00.0", 0xe20b, false));
    xe.driver = Some("xe".into());
    let cases: Vec<(&str, Vec<&IntelGpu>, Option<&str>)> = vec![
        ("GPU", vec![&i915], Some("gpu.intel.com/i915")),
        ("GPU", vec![&i915, &xe], Some("gpu.intel.com/xe")),
        ("GPU", vec![], None),
        ("NPU", vec![], Some("npu.intel.com/accel")),
        ("HPU", vec![], Some("habana.ai/gaudi")),
        ("CUDA", vec![&i915], Some("nvidia.com/gpu")),
        ("CPU", vec![&xe], None),
    ];
    for (device, gpus, want) in cases {
        assert_eq!(resource(device, &gpus).as_deref(), want, "{device} with {} GPUs", gpus.len());
    }
}

#[test]
fn gpu_servers_other_than_ovms_warn_off_battlemage() {
    let (alder, mut bmg) = (gpu("0000:00:02.0", 0xa780, true), gpu("0000:03:00.0", 0xe20b, false));
    bmg.platform = Some("Arc Battlemage (BMG)".into());
    let cases: Vec<(&str, &str, Vec<&IntelGpu>, bool)> = vec![
        ("vllm", "GPU", vec![&alder], true),
        ("llm-scaler", "GPU", vec![&alder, &bmg], false),
        ("vllm", "GPU", vec![&bmg], false),
        ("ovms", "GPU", vec![&alder], false),
        ("vllm", "CUDA", vec![&alder], false),
    ];
    for (backend, device, gpus, warned) in cases {
        assert_eq!(not_battlemage(backend, device, &gpus).is_some(), warned, "{backend} on {device}");
    }
}

#[test]
fn cpus_default_to_the_p_cores_half_the_cpus_or_two() {
    // (device, hybrid, p_cores, online, cpus)
    const CASES: &[(&str, bool, &str, u32, u32)] = &[
        ("CPU", true, "0-15", 24, 16),
        ("CPU", true, "", 24, 1),
        ("CPU", false, "0-15", 24, 12),
        ("CPU", false, "", 1, 1),
        ("GPU", true, "0-15", 24, 2),
        ("NPU", false, "", 8, 2),
    ];
    for (device, hybrid, p_cores, online, want) in CASES {
        assert_eq!(default_cpus(device, *hybrid, p_cores, *online), *want, "{device} hybrid={hybrid} {p_cores:?}");
    }
}

#[test]
fn node_selectors_ask_for_xmx_or_amx() {
    const XMX: &str = "gpu.intel.com/xmx";
    const AMX: &str = "feature.node.kubernetes.io/cpu-cpuid.AMXTILE";
    // (device, asked, gpu_only, amx, keys)
    const CASES: &[(&str, AgentDevice, bool, bool, &[&str])] = &[
        ("GPU", AgentDevice::Auto, false, true, &[XMX]),
        ("GPU", AgentDevice::Gpu, false, false, &[]),
        ("GPU", AgentDevice::Auto, true, false, &[]),
        ("CPU", AgentDevice::Auto, false, true, &[AMX]),
        ("CPU", AgentDevice::Cpu, false, false, &[]),
        ("NPU", AgentDevice::Npu, false, true, &[]),
    ];
    for (device, asked, gpu_only, amx, want) in CASES {
        let got = node_selector(device, *asked, *gpu_only, *amx);
        assert_eq!(got.keys().map(String::as_str).collect::<Vec<_>>(), *want, "{device} {asked:?} amx={amx}");
        assert!(got.values().all(|v| v == "true"));
    }
}

#[test]
fn device_node_groups_are_added_once_never_root() {
    let node = |path: &str, gid: u32, group: Option<&str>| crate::facts::DeviceNode {
        path: path.into(),
        mode: "0660".into(),
        uid: 0,
        gid,
        group: group.map(str::to_string),
    };
    // (nodes, groups, warning codes)
    let cases: Vec<(Vec<crate::facts::DeviceNode>, &[u32], &[&str])> = vec![
        (vec![], &[], &[]),
        (vec![node("/dev/dri/renderD128", 992, Some("render"))], &[992], &[]),
        (vec![node("/dev/dri/renderD128", 0, None)], &[], &["agent-group-unknown"]),
        (vec![node("/dev/accel/accel0", 44, None)], &[44], &["agent-group-unnamed"]),
        (
            vec![
                node("/dev/dri/renderD129", 992, Some("render")),
                node("/dev/dri/renderD128", 44, Some("video")),
                node("/dev/dri/renderD130", 992, Some("render")),
            ],
            &[44, 992],
            &[],
        ),
    ];
    for (nodes, groups, codes) in cases {
        let (got, warnings) = supplemental_groups(&nodes);
        assert_eq!(got, groups, "{nodes:?}");
        assert_eq!(warnings.iter().map(|w| w.code.as_str()).collect::<Vec<_>>(), codes, "{nodes:?}");
    }
}

#[test]
fn api_and_memory_follow_the_server() {
    const APIS: &[(&str, &str)] = &[
        ("ovms", "http://ovms.k3d-gpu-agent.svc:8000/v3"),
        ("vllm", "http://vllm.k3d-gpu-agent.svc:8000/v1"),
        ("llm-scaler", "http://vllm.k3d-gpu-agent.svc:8000/v1"),
    ];
    for (backend, want) in APIS {
        assert_eq!(api(backend), *want, "{backend}");
    }
    // (backend, device, gpus, memory)
    const MEMORY: &[(&str, &str, u32, &str)] = &[
        ("ovms", "GPU", 1, "6Gi"),
        ("ovms", "CPU", 2, "16Gi"),
        ("vllm", "HPU", 1, "16Gi"),
        ("vllm", "CUDA", 1, "8Gi"),
        ("vllm", "CUDA", 2, "16Gi"),
        ("llm-scaler", "GPU", 1, "8Gi"),
    ];
    for (backend, device, gpus, want) in MEMORY {
        assert_eq!(default_memory(backend, device, *gpus), *want, "{backend} on {device} x{gpus}");
    }
}

#[test]
fn agent_inputs_are_refused_before_they_reach_an_argv() {
    use crate::config::Agent;
    type Case<'a> = (&'a str, Agent, &'a [(&'a str, &'a str)]);
    let cases: Vec<Case> = vec![
        ("defaults", Agent::default(), &[]),
        ("a flag as model", Agent { model: Some("-rf".into()), ..Default::default() }, &[("agent-model", "model")]),
        (
            "a spaced name",
            Agent { model_name: Some("a b".into()), ..Default::default() },
            &[("agent-value", "model_name")],
        ),
        ("an empty parser is off", Agent { tool_parser: Some(String::new()), ..Default::default() }, &[]),
        (
            "an empty name is not",
            Agent { model_name: Some(String::new()), ..Default::default() },
            &[("agent-value", "model_name")],
        ),
        ("gpus 0", Agent { gpus: Some(0), ..Default::default() }, &[("agent-value", "gpus")]),
        ("gpus max", Agent { gpus: Some(MAX_GPUS), ..Default::default() }, &[]),
        ("timeout short", Agent { timeout: Some(59), ..Default::default() }, &[("agent-value", "timeout")]),
        ("max_len short", Agent { max_len: Some(255), ..Default::default() }, &[("agent-value", "max_len")]),
        ("a bad image", Agent { image: Some("no tag".into()), ..Default::default() }, &[("agent-image", "image")]),
        (
            "quantities, in key order",
            Agent { memory: Some("lots".into()), storage: Some("20 Gi".into()), ..Default::default() },
            &[("agent-storage", "storage"), ("agent-memory", "memory")],
        ),
        (
            "absurd quantities: a negative size, no memory",
            Agent { memory: Some("0".into()), storage: Some("-1Gi".into()), ..Default::default() },
            &[("agent-storage", "storage"), ("agent-memory", "memory")],
        ),
        (
            "good quantities",
            Agent { memory: Some("8G".into()), storage: Some("20Gi".into()), ..Default::default() },
            &[],
        ),
    ];
    for (name, agent, want) in cases {
        let got: Vec<CompileError> = model_error(&agent)
            .into_iter()
            .chain(word_errors(&agent))
            .chain(range_errors(&agent))
            .chain(image_error(&agent))
            .chain(quantity_errors(&agent))
            .collect();
        let got: Vec<(&str, &str)> = got.iter().map(|e| (e.code, e.key[1])).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_free_unit_is_taken_once_and_the_cpu_never_runs_out() {
    // (free before, device, taken, free after)
    const CASES: &[(Free, &str, bool, Free)] = &[
        (Free { gpu: 1, npu: 0 }, "GPU", true, Free { gpu: 0, npu: 0 }),
        (Free { gpu: 0, npu: 1 }, "GPU", false, Free { gpu: 0, npu: 1 }),
        (Free { gpu: 0, npu: 2 }, "NPU", true, Free { gpu: 0, npu: 1 }),
        (Free { gpu: 3, npu: 0 }, "NPU", false, Free { gpu: 3, npu: 0 }),
        (Free { gpu: 0, npu: 0 }, "CPU", true, Free { gpu: 0, npu: 0 }),
        (Free { gpu: 5, npu: 5 }, "HPU", false, Free { gpu: 5, npu: 5 }),
    ];
    for (before, device, taken, after) in CASES {
        let mut free = *before;
        assert_eq!(free.take(device), *taken, "{device} from {before:?}");
        assert_eq!(free, *after, "{device} from {before:?}");
    }
}

#[test]
fn video_sources_are_streams_and_credentials_are_never_echoed() {
    // (source, error code, the message holds)
    const CASES: &[(&str, Option<&str>, &str)] = &[
        ("rtsp://camera.local/stream", None, ""),
        ("/home/me/clip.mp4", Some("video-source-local"), "\"/home/me/clip.mp4\" is a host path"),
        ("file:///clip.mp4", Some("video-source-local"), "is a host path"),
        ("ftp://host/clip", Some("video-source"), "has scheme"),
        ("rtsp://user:secret@camera/stream", Some("video-source"), "(a URI with credentials) carries credentials"),
        ("rtsp://user@camera/stream", Some("video-source"), "(a URI with credentials)"),
    ];
    for (source, code, holds) in CASES {
        let got = video_source_error(source);
        assert_eq!(got.as_ref().map(|e| e.code), *code, "{source}");
        if let Some(e) = got {
            assert!(e.message.contains(holds), "{source}: {}", e.message);
            assert!(!e.message.contains("secret"), "{source}: {}", e.message);
        }
    }
}

#[test]
fn explicit_requests_and_embeddings_go_first() {
    let addons = |list: &[(AddonName, AddonDevice)]| -> BTreeMap<AddonName, Addon> {
        list.iter().map(|(n, d)| (*n, Addon { device: *d, source: None })).collect()
    };
    use AddonDevice as D;
    use AddonName as N;
    type Case<'a> = (Vec<(N, D)>, Vec<(N, &'a str)>);
    let cases: Vec<Case> = vec![
        (vec![(N::Vlm, D::Auto), (N::Stt, D::Auto)], vec![]),
        (vec![(N::Embeddings, D::Auto)], vec![(N::Embeddings, "NPU")]),
        (vec![(N::Embeddings, D::Cpu)], vec![(N::Embeddings, "CPU")]),
        (
            vec![(N::Video, D::Gpu), (N::Vlm, D::Npu), (N::Stt, D::Cpu)],
            vec![(N::Vlm, "NPU"), (N::Stt, "CPU"), (N::Video, "GPU")],
        ),
    ];
    for (given, want) in cases {
        assert_eq!(explicit_requests(&addons(&given)), want, "{given:?}");
    }
}

#[test]
fn no_free_unit_says_absent_or_taken() {
    // (addon, device, units, auto, problem start, help start)
    const CASES: &[(AddonName, &str, u32, bool, &str, &str)] = &[
        (
            AddonName::Embeddings,
            "NPU",
            0,
            true,
            "embeddings run on the NPU unless told otherwise",
            "set [addons.embeddings] device = \"cpu\"",
        ),
        (
            AddonName::Vlm,
            "GPU",
            0,
            false,
            "vlm asks for the GPU, and the cluster gets no usable GPU",
            "set [addons.vlm] device = \"cpu\", or let it choose",
        ),
        (
            AddonName::Stt,
            "NPU",
            1,
            false,
            "stt asks for the NPU, and no NPU unit is free (the LLM runs on the NPU)",
            "an NPU serves one engine at a time: set [addons.stt] device = \"cpu\"",
        ),
        (
            AddonName::Video,
            "GPU",
            1,
            false,
            "video asks for the GPU, and no GPU unit is free (the LLM runs on the NPU)",
            "set [addons.video] device = \"cpu\"",
        ),
    ];
    for (name, device, units, auto, problem, help) in CASES {
        let (p, h) = no_free_unit(*name, device, *units, *auto, "NPU");
        assert!(p.starts_with(problem), "{name:?} on {device}: {p}");
        assert!(h.starts_with(help), "{name:?} on {device}: {h}");
    }
}

#[test]
fn auto_add_ons_take_their_first_free_preference() {
    // (addon, free before, device, fell back)
    const CASES: &[(AddonName, Free, &str, bool)] = &[
        (AddonName::Vlm, Free { gpu: 1, npu: 1 }, "GPU", false),
        (AddonName::Vlm, Free { gpu: 0, npu: 1 }, "CPU", true),
        (AddonName::Stt, Free { gpu: 1, npu: 1 }, "NPU", false),
        (AddonName::Stt, Free { gpu: 1, npu: 0 }, "GPU", true),
        (AddonName::Stt, Free { gpu: 0, npu: 0 }, "CPU", true),
        (AddonName::Video, Free { gpu: 2, npu: 0 }, "GPU", false),
        (AddonName::Embeddings, Free { gpu: 1, npu: 0 }, "CPU", true),
    ];
    for (name, before, want, fell_back) in CASES {
        let mut free = *before;
        let (device, fallback) = auto_device(*name, &mut free);
        assert_eq!((device, fallback.is_some()), (*want, *fell_back), "{name:?} from {before:?}");
    }
    let (_, why) = auto_device(AddonName::Stt, &mut Free { gpu: 0, npu: 0 });
    assert_eq!(why.as_deref(), Some("stt falls back to the CPU: no free NPU unit"));
}

#[test]
fn add_ons_request_the_gpus_resource_or_the_npus() {
    let xe = Some("gpu.intel.com/xe".to_string());
    const CASES: &[(&str, Option<&str>)] =
        &[("GPU", Some("gpu.intel.com/xe")), ("NPU", Some("npu.intel.com/accel")), ("CPU", None)];
    for (device, want) in CASES {
        assert_eq!(addon_resource(device, &xe).as_deref(), *want, "{device}");
    }
    assert_eq!(addon_resource("GPU", &None), None);
}

#[test]
fn only_video_takes_a_source() {
    let with = |name: AddonName, source: &str| (name, Addon { device: AddonDevice::Auto, source: Some(source.into()) });
    // (add-ons, error codes in order)
    type Case<'a> = (Vec<(AddonName, Addon)>, &'a [&'a str]);
    let cases: Vec<Case> = vec![
        (vec![], &[]),
        (vec![with(AddonName::Video, "rtsp://cam/s")], &[]),
        (vec![with(AddonName::Video, "/clip.mp4")], &["video-source-local"]),
        (vec![with(AddonName::Vlm, "rtsp://cam/s")], &["addon-source"]),
        (
            vec![with(AddonName::Stt, "x"), with(AddonName::Video, "ftp://h/c"), with(AddonName::Vlm, "y")],
            &["video-source", "addon-source", "addon-source"],
        ),
    ];
    for (addons, want) in cases {
        let addons: BTreeMap<AddonName, Addon> = addons.into_iter().collect();
        let got: Vec<&str> = source_errors(&addons).iter().map(|e| e.code).collect();
        assert_eq!(got, want, "{:?}", addons.keys().collect::<Vec<_>>());
    }
}

#[test]
fn the_server_opens_render_nodes_or_the_npus() {
    let node =
        |path: &str| crate::facts::DeviceNode { path: path.into(), mode: "0660".into(), uid: 0, gid: 44, group: None };
    let mut g = gpu("0000:00:02.0", 0xa780, true);
    g.device_nodes = vec![node("/dev/dri/card0"), node("/dev/dri/renderD128")];
    let npu = crate::facts::Npu {
        accel: Some("accel0".into()),
        pci_address: "0000:00:0b.0".into(),
        device_id: 0x7d1d,
        driver: Some("intel_vpu".into()),
        generation: None,
        device_node: Some(node("/dev/accel/accel0")),
        firmware: None,
    };
    let unbound = crate::facts::Npu { device_node: None, ..npu.clone() };
    let npus = [npu, unbound];
    // (device, paths)
    const CASES: &[(&str, &[&str])] =
        &[("GPU", &["/dev/dri/renderD128"]), ("NPU", &["/dev/accel/accel0"]), ("CPU", &[]), ("CUDA", &[])];
    for (device, want) in CASES {
        let got = device_nodes(device, &[&g], &npus);
        assert_eq!(got.iter().map(|n| n.path.as_str()).collect::<Vec<_>>(), *want, "{device}");
    }
}
