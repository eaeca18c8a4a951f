//! `k3d-gpu doctor`: findings with evidence and a fix. Exits 1 when any is `fail`.

use std::fmt::Write;

use serde::Serialize;

use crate::cli::{DoctorArgs, Global};
use crate::error::{EXIT_FAILED, EXIT_OK, Result};
use crate::facts::{Finding, Level};

#[derive(Serialize)]
struct DoctorReport<'a> {
    schema: &'static str,
    fingerprint: &'a str,
    findings: &'a [Finding],
}

pub fn run(global: &Global, args: &DoctorArgs) -> Result<u8> {
    if args.perf {
        return perf(global, args.model_gb);
    }
    let facts = super::load_facts(global)?;
    let mut findings = facts.findings.clone();
    let host = if global.facts.is_empty() { Some(super::open_host(global)?) } else { None };
    if let Some(host) = &host {
        findings.extend(firmware_findings(host, &facts.host));
    }
    let on_real_host = host.as_ref().is_some_and(|h| h.is_real_host());
    if on_real_host && !args.no_tools {
        findings.extend(crate::doctor::tool_findings());
        findings.extend(live_findings(global, &facts)?);
    }
    findings.sort_by(|a, b| b.level.cmp(&a.level).then_with(|| a.code.cmp(&b.code)).then_with(|| a.text.cmp(&b.text)));
    if global.json {
        let report = DoctorReport { schema: "k3d-gpu.doctor/v1", fingerprint: &facts.fingerprint, findings: &findings };
        super::print_bytes(&crate::canonical::to_bytes(&report));
    } else {
        super::print_bytes(crate::escape::assembled(&render(&findings)).as_bytes());
    }
    Ok(if findings.iter().any(|f| f.level == Level::Fail) { EXIT_FAILED } else { EXIT_OK })
}

/// Each Intel GPU's firmware files against what its driver will request
/// (`doctor::firmware`); `facts capture` runs it too, so a capture carries the answer.
pub(crate) fn firmware_findings(host: &crate::host::HostRoot, inventory: &crate::facts::Host) -> Vec<Finding> {
    let mut r = crate::detect::Reader::new(host);
    let release = inventory.kernel.release.as_deref();
    let mut out = Vec::new();
    for g in &inventory.intel_gpus {
        let Some(platform) = g.platform.as_deref() else { continue };
        let found: Vec<_> = crate::doctor::firmware::needs(platform)
            .iter()
            .map(|n| (*n, n.files().find_map(|file| crate::detect::perf_gpu::find_firmware(&mut r, release, file))))
            .collect();
        out.extend(crate::doctor::firmware::findings(&g.pci_address, platform, &found));
    }
    out
}

/// The engine's version floor and NVIDIA path, and with the config's cluster up its node
/// image and device-plugin DaemonSets.
fn live_findings(global: &Global, facts: &crate::facts::Facts) -> Result<Vec<Finding>> {
    let nvidia = facts.detected.iter().any(|d| d.vendor == crate::facts::Vendor::Nvidia);
    let inputs = super::load_config(global)?;
    let catalog = super::load_catalog(global, &inputs)?;
    let image = super::inputs::node_image_reference(&inputs, &catalog)?;
    let target = super::plan::target(&inputs, &catalog, &image);
    let rt = super::runtime()?;
    let mut out = rt.block_on(crate::doctor::live::engine_findings(&target.docker, nvidia));
    out.extend(rt.block_on(crate::doctor::live::node_image_findings(&target.docker, &image, nvidia)));
    out.extend(rt.block_on(crate::doctor::live::cluster_findings(&target, &global.k3d_gpu())));
    Ok(out)
}

pub fn render(findings: &[Finding]) -> String {
    let mut out = String::new();
    if findings.is_empty() {
        out.push_str("no findings: this host looks ready\n");
        return out;
    }
    for f in findings {
        let _ = writeln!(out, "{:<4}  {}  [{}]", f.level, f.text, f.code);
        let _ = writeln!(out, "      evidence: {}", f.evidence);
        if let Some(fix) = &f.fix {
            let _ = writeln!(out, "      fix: {fix}");
        }
    }
    let count = |level| findings.iter().filter(|f| f.level == level).count();
    let _ = writeln!(out, "\n{} fail, {} warn, {} info", count(Level::Fail), count(Level::Warn), count(Level::Info));
    out
}

/// `doctor --perf`: advice from the host's files; never a failure, never a write.
fn perf(global: &Global, model_gb: Option<f64>) -> Result<u8> {
    if !global.facts.is_empty() {
        return Err(crate::error::Error::Usage {
            message: "doctor --perf reads the host's current settings, which a facts document does not hold".into(),
            help: Some("drop --facts; use --root DIR for a fixture host".into()),
        });
    }
    let host = super::open_host(global)?;
    let facts = super::detect_facts(&host, &global.vendor_filter()?)?;
    let tuning = crate::detect::perf::read(&host, &facts.host);
    // `[sandbox]`'s host prerequisites are checked when the config asks for it; without a
    // config (none given, none here) there is nothing to ask for.
    let sandbox = if global.config.is_some() || std::path::Path::new(super::inputs::DEFAULT_CONFIG).exists() {
        super::load_config(global)?.config.sandbox.is_some()
    } else {
        false
    };
    // The engine on this machine belongs to the host only when the host is this machine.
    let engine = if host.is_real_host() {
        let endpoint = crate::observe::docker::endpoint(&|k| std::env::var(k).ok(), None);
        super::runtime()?.block_on(crate::doctor::live::storage(&endpoint))
    } else {
        crate::doctor::perf_engine::Engine::NotAsked
    };
    let input = crate::doctor::perf::PerfInput { facts: &facts, tuning: &tuning, model_gb, sandbox, engine: &engine };
    let findings = crate::doctor::perf::findings(&input);
    if global.json {
        #[derive(Serialize)]
        struct Doc<'a> {
            schema: &'static str,
            fingerprint: &'a str,
            findings: &'a [crate::doctor::perf::PerfFinding],
        }
        let doc = Doc { schema: crate::doctor::perf::SCHEMA, fingerprint: &facts.fingerprint, findings: &findings };
        super::print_bytes(&crate::canonical::to_bytes(&doc));
    } else {
        super::print_bytes(crate::escape::assembled(&crate::doctor::perf::render(&findings)).as_bytes());
    }
    Ok(EXIT_OK)
}
