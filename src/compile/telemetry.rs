//! `[telemetry]`: which exporters the config wants, and the rules that refuse what would not
//! run. The exporters themselves are catalog components (`intel-xpumd`, `intel-xpumd-dra`,
//! `nvidia-dcgm-exporter`), gated by `when … telemetry=intel|nvidia`.

use super::intel::IntelPlan;
use super::{CompileError, Context};
use crate::config::{Config, GpuMode, TelemetryExporter};
use crate::facts::Vendor;

/// Whether the config wants `exporter` (the vendor's activity is the component's own
/// `when vendor=…`).
pub fn wants(config: &Config, exporter: TelemetryExporter) -> bool {
    let Some(t) = &config.telemetry else { return false };
    let flag = match exporter {
        TelemetryExporter::Intel => t.intel,
        TelemetryExporter::Nvidia => t.nvidia,
    };
    flag != Some(false)
}

pub fn check(cx: &mut Context, intel: &IntelPlan) {
    let Some(t) = cx.config.telemetry.clone() else { return };
    let intel_active = cx.is_active(Vendor::Intel);
    let nvidia_active = cx.is_active(Vendor::Nvidia);
    for (set, active, key, vendor) in
        [(t.intel, intel_active, "telemetry.intel", "Intel"), (t.nvidia, nvidia_active, "telemetry.nvidia", "NVIDIA")]
    {
        if set == Some(true) && !active {
            cx.warn(
                "telemetry-without-vendor",
                Some(key),
                format!(
                    "{key} = true exports {vendor} GPU metrics, and no {vendor} GPU is active here: it has no effect"
                ),
            );
        }
    }
    let intel_wanted = wants(cx.config, TelemetryExporter::Intel) && intel_active;
    let nvidia_wanted = wants(cx.config, TelemetryExporter::Nvidia) && nvidia_active;
    if !intel_wanted && !nvidia_wanted {
        cx.warn(
            "telemetry-nothing",
            Some("telemetry"),
            "[telemetry] is set, and no exporter applies here (no active Intel or NVIDIA GPU it is on for)",
        );
        return;
    }
    // Plugin mode: xpumd requests gpu.intel.com/monitoring, which exists only with the
    // plugin's -enable-monitoring; without it the pod would stay Pending.
    if intel_wanted && cx.intel_mode() == GpuMode::Plugin && !intel.monitoring() {
        let key: &[&'static str] = if t.intel == Some(true) { &["telemetry", "intel"] } else { &["telemetry"] };
        cx.error(CompileError::new(
            "telemetry-needs-monitoring",
            key,
            "XPU Manager reads the Intel GPUs through gpu.intel.com/monitoring, which the Intel GPU plugin advertises only with monitoring on",
            Some("add `monitoring = true` to [sharing], or set [telemetry] intel = false".to_string()),
        ));
    }
}
