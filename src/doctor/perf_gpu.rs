//! `doctor --perf`, the GPU rules: Intel GPU frequency limits (the maximum against RP0, the
//! floor against RP1, i915's waitboost), Resizable BAR, NVIDIA persistence and the
//! peer-to-peer path between NVIDIA GPUs. Pure, like [`super::perf`]: one function per rule.

use crate::detect::perf_gpu::{FreqLayout, GpuFreq, PERSISTENCED_PID};
use crate::facts::Level;
use crate::shell::Command;

use super::perf::{PerfFinding, PerfInput, finding, tee_path, v};

const I915_FREQ_SRC: &str = "drivers/gpu/drm/i915/gt/intel_gt_sysfs_pm.c (gt_*_freq_mhz; GuC SLPC: intel_guc_slpc.c)";
const XE_FREQ_SRC: &str = "drivers/gpu/drm/xe/xe_gt_freq.c (freq0: min_freq, max_freq, rp0_freq, rpe_freq)";

fn source(layout: FreqLayout) -> &'static str {
    match layout {
        FreqLayout::I915 => I915_FREQ_SRC,
        FreqLayout::Xe => XE_FREQ_SRC,
    }
}

fn mhz(value: Option<u32>) -> String {
    value.map_or("?".into(), |m| m.to_string())
}

fn freq_evidence(f: &GpuFreq) -> String {
    let file = |w: &str| f.layout.file(w).unwrap_or("-");
    let mut parts = vec![
        format!("{} {}", file("min"), mhz(f.min)),
        format!("{} {}", file("max"), mhz(f.max)),
        format!("{} {}", file("rp0"), mhz(f.rp0)),
        format!("{} {}", file("rp1"), mhz(f.rp1)),
        format!("{} {}", file("rpn"), mhz(f.rpn)),
    ];
    if f.layout == FreqLayout::I915 {
        parts.push(format!("{} {}", file("boost"), mhz(f.boost)));
    }
    format!("{}: {}", v(&f.dir), parts.join(", "))
}

/// `echo VALUE | sudo tee DIR/FILE` for one of a GPU's frequency files, and its revert.
fn set(f: &GpuFreq, what: &str, to: u32, was: u32) -> (Command, Option<Command>) {
    let file = format!("{}/{}", f.dir, f.layout.file(what).unwrap_or_default());
    (tee_path(&to.to_string(), &file), Some(tee_path(&was.to_string(), &file)))
}

/// Intel GPU frequency: a maximum held below RP0 caps every kernel; a floor under RP1 (the
/// efficient frequency) lets the GPU sink between the bursts of a decode loop and ramp up
/// again on each; on i915 a waitboost below RP0 boosts a waiting client only part way.
pub fn gpu_freq(input: &PerfInput) -> Vec<PerfFinding> {
    let mut out = Vec::new();
    for f in &input.tuning.gpu.freq {
        let who = format!("{} at {}", v(&f.what), v(&f.pci_address));
        let cite = source(f.layout);
        let before = out.len();
        if let (Some(max), Some(rp0)) = (f.max, f.rp0)
            && max < rp0
        {
            let (fix, revert) = set(f, "max", rp0, max);
            out.push(
                finding(
                    Level::Warn,
                    "perf-gpu-max-freq",
                    format!("{who} is capped at {max} MHz, below its RP0 of {rp0} MHz: every kernel runs slower than the GPU can"),
                    freq_evidence(f),
                )
                .commands(fix, revert)
                .cites(cite),
            );
        }
        if let (Some(min), Some(rp1)) = (f.min, f.rp1)
            && min < rp1
        {
            let (fix, revert) = set(f, "min", rp1, min);
            out.push(
                finding(
                    Level::Info,
                    "perf-gpu-min-freq",
                    format!(
                        "{who} may drop to {min} MHz, under RP1 ({rp1} MHz, the efficient frequency): between the steps of a decode loop it sinks and ramps up again; raising the floor to RP1 costs little power"
                    ),
                    freq_evidence(f),
                )
                .commands(fix, revert)
                .cites(cite),
            );
        }
        if let (Some(boost), Some(rp0)) = (f.boost, f.rp0)
            && boost < rp0
        {
            let (fix, revert) = set(f, "boost", rp0, boost);
            out.push(
                finding(
                    Level::Warn,
                    "perf-gpu-waitboost",
                    format!("{who} waitboosts to {boost} MHz only, below RP0 ({rp0} MHz): a client waiting on the GPU is not raised to full clock"),
                    freq_evidence(f),
                )
                .commands(fix, revert)
                .cites(cite),
            );
        }
        if out.len() == before {
            out.push(
                finding(
                    Level::Info,
                    "perf-gpu-freq",
                    format!("{who}: frequency limits at the hardware's own"),
                    freq_evidence(f),
                )
                .cites(cite),
            );
        }
    }
    out
}

/// Resizable BAR: without it the CPU sees the GPU's memory through a 256 MiB window, and
/// every upload to VRAM is staged through it.
pub fn rebar(input: &PerfInput) -> Vec<PerfFinding> {
    const SMALL: u64 = 256 << 20;
    let mut out = Vec::new();
    for b in &input.tuning.gpu.bars {
        let addr = v(&b.pci_address);
        let who = format!("{} at {addr}", v(&b.what));
        let mib = b.largest_bytes >> 20;
        let vram = b.vram_mib.map(|m| format!(" against {m} MiB of memory")).unwrap_or_default();
        let evidence = format!("/sys/bus/pci/devices/{addr}/resource: largest BAR {mib} MiB{vram}");
        let small = b.largest_bytes <= SMALL || b.vram_mib.is_some_and(|m| mib < m);
        let check = Command::new("sudo")
            .lit("lspci -vv -s")
            .arg(&b.pci_address)
            .pipe(Command::new("grep").lit("-A3").arg("Resizable BAR"));
        let f = if small {
            finding(
                Level::Warn,
                "perf-rebar",
                format!(
                    "{who} exposes {mib} MiB of its memory to the CPU: Resizable BAR is off, so model uploads go through a small window; enable \"Above 4G decoding\" and \"Re-Size BAR support\" in the firmware setup (no command changes it)"
                ),
                evidence,
            )
            .check(check)
        } else {
            finding(Level::Info, "perf-rebar", format!("{who}: Resizable BAR on ({mib} MiB BAR)"), evidence)
        };
        out.push(f.cites("PCI Express Base Specification, Resizable BAR capability; Documentation/ABI/testing/sysfs-bus-pci (resourceN_resize)"));
    }
    out
}

/// Without persistence the driver tears a GPU's state down when its last client exits, so
/// each new pod pays the initialisation again.
pub fn nvidia_persistence(input: &PerfInput) -> Vec<PerfFinding> {
    let f = match input.tuning.gpu.persistenced {
        None => return Vec::new(),
        Some(true) => finding(
            Level::Info,
            "perf-nvidia-persistence",
            "nvidia-persistenced runs: GPU state stays initialised between clients".into(),
            format!("{PERSISTENCED_PID}: present"),
        ),
        Some(false) => finding(
            Level::Warn,
            "perf-nvidia-persistence",
            "nvidia-persistenced is not running: unless the legacy persistence mode is on (the check below says), each pod that opens a GPU first waits for the driver to initialise it".into(),
            format!("{PERSISTENCED_PID}: absent"),
        )
        .commands(
            Command::new("sudo").lit("nvidia-smi -pm 1"),
            Some(Command::new("sudo").lit("nvidia-smi -pm 0")),
        ),
    };
    vec![f.cites("NVIDIA driver README, chapter \"Using the nvidia-persistenced Utility\"")]
}

/// Peer-to-peer between NVIDIA GPUs: when two GPUs share no PCIe switch, their traffic
/// crosses the CPU's root complex (and GeForce boards do not enable P2P at all). Files do
/// not say whether P2P works; the check command does.
pub fn nvidia_p2p(input: &PerfInput) -> Vec<PerfFinding> {
    let paths = &input.tuning.gpu.nvidia_paths;
    if paths.len() < 2 {
        return Vec::new();
    }
    // A shared bridge below the root port: the first bridge of each path's root side.
    let switch = |bridges: &Vec<String>| bridges.iter().rev().nth(1).cloned();
    let shared = paths.windows(2).all(|w| switch(&w[0].1).is_some() && switch(&w[0].1) == switch(&w[1].1));
    let listing = paths
        .iter()
        .map(|(gpu, bridges)| {
            format!(
                "{} under {}",
                v(gpu),
                if bridges.is_empty() { "?".into() } else { v(&bridges.join(" < ")).into_owned() }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let text = if shared {
        format!("{} NVIDIA GPUs share a PCIe switch: peer-to-peer copies stay below the CPU", paths.len())
    } else {
        format!(
            "{} NVIDIA GPUs hang off different root ports: peer-to-peer copies (tensor parallelism) cross the CPU's root complex, or fall back to host memory where P2P is off (GeForce boards); check what the driver allows",
            paths.len()
        )
    };
    vec![
        finding(
            if shared { Level::Info } else { Level::Warn },
            "perf-nvidia-p2p",
            text,
            format!("/sys/bus/pci/devices/ADDR (device tree): {listing}"),
        )
        .check(Command::new("nvidia-smi").lit("topo -p2p r"))
        .cites("NVIDIA nvidia-smi(1), topo -m / -p2p; CUDA Programming Guide, Peer-to-Peer Memory Access"),
    ]
}
