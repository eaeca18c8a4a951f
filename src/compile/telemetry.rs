//! `[telemetry]`: which exporters the config wants, and the rules that refuse what would not
//! run. The exporters themselves are catalog components (`intel-xpumd`, `intel-xpumd-dra`,
//! `nvidia-dcgm-exporter`), gated by `when … telemetry=intel|nvidia`.

use super::Context;
use super::intel::IntelPlan;
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

/// The note that `[telemetry]` turned the Intel plugin's monitoring on itself.
pub const MONITORING_ON: &str = "telemetry-turns-on-monitoring";

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
    // plugin's -enable-monitoring. `intel::plan` adds the flag for telemetry; the plan says
    // that it did when the user had not asked for it.
    if intel_wanted && cx.intel_mode() == GpuMode::Plugin && intel.monitoring() && !cx.config.sharing.monitoring {
        cx.warn(
            MONITORING_ON,
            Some("telemetry"),
            "[telemetry] turns on the Intel GPU plugin's monitoring resource (gpu.intel.com/monitoring), which XPU Manager reads the GPUs through, as `[sharing] monitoring = true` would",
        );
    }
}
