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
        // Start the daemon the finding is about; the revert stops exactly it (`nvidia-smi -pm 0`
        // would also switch off a legacy persistence mode that was on before).
        .commands(
            Command::new("sudo").lit("systemctl enable --now nvidia-persistenced"),
            Some(Command::new("sudo").lit("systemctl disable --now nvidia-persistenced")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::perf_gpu::{Bar, GpuTuning};
    use crate::doctor::perf::{PerfInput, RULES};

    fn run(rule: &str, gpu: GpuTuning) -> Vec<(Level, String)> {
        let (facts, mut t) = crate::doctor::perf::tests::host("plain-laptop-amd");
        t.gpu = gpu;
        let (_, f) = RULES.iter().find(|(n, _)| *n == rule).unwrap();
        f(&PerfInput {
            facts: &facts,
            tuning: &t,
            model_gb: None,
            sandbox: false,
            engine: &crate::doctor::perf_engine::Engine::NotAsked,
        })
        .into_iter()
        .map(|x| (x.level, x.code))
        .collect()
    }

    fn freq(layout: FreqLayout, min: u32, max: u32, boost: Option<u32>) -> GpuTuning {
        let f = GpuFreq {
            pci_address: "0000:03:00.0".into(),
            what: "GPU".into(),
            layout,
            dir: "/sys/class/drm/card1".into(),
            min: Some(min),
            max: Some(max),
            boost,
            rp0: Some(2850),
            rp1: Some(2400),
            rpn: Some(400),
        };
        GpuTuning { freq: vec![f], ..Default::default() }
    }

    fn bar(mib: u64, vram_mib: Option<u64>) -> GpuTuning {
        let b = Bar { pci_address: "0000:03:00.0".into(), what: "GPU".into(), largest_bytes: mib << 20, vram_mib };
        GpuTuning { bars: vec![b], ..Default::default() }
    }

    fn paths(p: &[(&str, &[&str])]) -> GpuTuning {
        let nvidia_paths = p.iter().map(|(g, b)| (g.to_string(), b.iter().map(|s| s.to_string()).collect())).collect();
        GpuTuning { nvidia_paths, ..Default::default() }
    }

    /// A rule, its input, the findings wanted.
    type Case = (&'static str, GpuTuning, Vec<(Level, &'static str)>);

    #[test]
    fn each_gpu_rule_fires_on_its_input_and_not_otherwise() {
        use Level::{Info, Warn};
        let cases: Vec<Case> = vec![
            ("gpu-freq", freq(FreqLayout::Xe, 2400, 2000, None), vec![(Warn, "perf-gpu-max-freq")]),
            ("gpu-freq", freq(FreqLayout::Xe, 400, 2850, None), vec![(Info, "perf-gpu-min-freq")]),
            ("gpu-freq", freq(FreqLayout::Xe, 2400, 2850, None), vec![(Info, "perf-gpu-freq")]),
            ("gpu-freq", freq(FreqLayout::I915, 2400, 2850, Some(1200)), vec![(Warn, "perf-gpu-waitboost")]),
            ("gpu-freq", GpuTuning::default(), vec![]),
            ("rebar", bar(256, None), vec![(Warn, "perf-rebar")]),
            ("rebar", bar(8192, Some(16384)), vec![(Warn, "perf-rebar")]),
            ("rebar", bar(16384, Some(12288)), vec![(Info, "perf-rebar")]),
            ("nvidia-persistence", GpuTuning::default(), vec![]),
            (
                "nvidia-persistence",
                GpuTuning { persistenced: Some(false), ..Default::default() },
                vec![(Warn, "perf-nvidia-persistence")],
            ),
            (
                "nvidia-persistence",
                GpuTuning { persistenced: Some(true), ..Default::default() },
                vec![(Info, "perf-nvidia-persistence")],
            ),
            ("nvidia-p2p", paths(&[("0000:01:00.0", &["0000:00:01.0"])]), vec![]),
            (
                "nvidia-p2p",
                paths(&[("0000:01:00.0", &["0000:00:01.0"]), ("0000:02:00.0", &["0000:00:01.1"])]),
                vec![(Warn, "perf-nvidia-p2p")],
            ),
            (
                "nvidia-p2p",
                paths(&[
                    ("0000:03:00.0", &["0000:02:01.0", "0000:01:00.0", "0000:00:01.0"]),
                    ("0000:04:00.0", &["0000:02:02.0", "0000:01:00.0", "0000:00:01.0"]),
                ]),
                vec![(Info, "perf-nvidia-p2p")],
            ),
        ];
        for (rule, gpu, want) in cases {
            let want: Vec<(Level, String)> = want.into_iter().map(|(l, c)| (l, c.to_string())).collect();
            assert_eq!(run(rule, gpu.clone()), want, "{rule}: {gpu:?}");
        }
    }
}
