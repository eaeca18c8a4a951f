//! Targets: every place an inference engine could run on this host, usable or not, and why.

use serde::{Deserialize, Serialize};

use super::rules::{self, GucVerdict};
use super::{Finding, Host, Level};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// `cpu`, `intel-gpu/0000:00:02.0`, `nvidia-gpu/0000:01:00.0`, `npu/accel0`, `gaudi/…`.
    pub id: String,
    pub kind: TargetKind,
    pub name: Option<String>,
    pub usable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    Cpu,
    IntelGpu,
    NvidiaGpu,
    Npu,
    Gaudi,
}

fn target(id: String, kind: TargetKind, name: Option<String>) -> Target {
    Target { id, kind, name, usable: true, reason: None, fix: None }
}

fn refuse(mut t: Target, reason: impl Into<String>, fix: Option<String>) -> Target {
    t.usable = false;
    t.reason = Some(reason.into());
    t.fix = fix;
    t
}

pub fn targets(host: &Host, findings: &[Finding]) -> Vec<Target> {
    let mut out = vec![target("cpu".into(), TargetKind::Cpu, host.cpu.model.clone())];

    for gpu in &host.intel_gpus {
        let t = target(format!("intel-gpu/{}", gpu.pci_address), TargetKind::IntelGpu, gpu.platform.clone());
        let t = if gpu.render_node.is_none() {
            let fix = findings
                .iter()
                .find(|f| f.level == Level::Fail && f.evidence.contains(&gpu.pci_address))
                .and_then(|f| f.fix.clone());
            refuse(t, "no driver bound: no render node", fix)
        } else {
            match rules::guc_verdict(gpu) {
                Some(GucVerdict { level: Level::Fail, text, fix }) => refuse(t, text, Some(fix)),
                _ => t,
            }
        };
        out.push(t);
    }
    if host.wsl.dxg && !host.wsl.intel_driver_packages.is_empty() {
        out.push(target("intel-gpu/dxg".into(), TargetKind::IntelGpu, Some("Intel GPU through WSL2 /dev/dxg".into())));
    }

    for gpu in &host.nvidia.gpus {
        let t = target(format!("nvidia-gpu/{}", gpu.pci_address), TargetKind::NvidiaGpu, gpu.model.clone());
        out.push(if host.nvidia.device_nodes.is_empty() {
            refuse(
                t,
                "no /dev/nvidiaN device node",
                Some("run `nvidia-modprobe -c 0 -u`, then recreate the cluster".into()),
            )
        } else {
            t
        });
    }
    if host.nvidia.gpus.is_empty() && host.wsl.dxg && host.wsl.nvidia_smi {
        out.push(target(
            "nvidia-gpu/dxg".into(),
            TargetKind::NvidiaGpu,
            Some("NVIDIA GPU through WSL2 /dev/dxg".into()),
        ));
    }

    for npu in &host.npus {
        let id = format!("npu/{}", npu.accel.clone().unwrap_or_else(|| npu.pci_address.clone()));
        let t = target(id, TargetKind::Npu, npu.generation.as_ref().map(|g| format!("Intel NPU {g}")));
        let t = match rules::npu_firmware_problem(npu) {
            _ if npu.device_node.is_none() => refuse(
                t,
                "no /dev/accel node (intel_vpu not bound)",
                Some("load intel_vpu (kernel 6.3+ for Meteor Lake, 6.13+ for Panther Lake)".into()),
            ),
            Some((_, text, fix)) => refuse(t, text, Some(fix)),
            None => t,
        };
        out.push(t);
    }

    for dev in &host.gaudi.devices {
        let t = target(format!("gaudi/{}", dev.pci_address), TargetKind::Gaudi, dev.model.clone());
        out.push(if dev.device_node.is_none() {
            refuse(t, "no habanalabs driver bound (no /dev/accel node)", Some(rules::GAUDI_DRIVER_FIX.into()))
        } else {
            t
        });
    }
    out
}
