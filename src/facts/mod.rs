//! facts/v1: everything k3d-gpu knows about one machine, as data.
//!
//! [`Host`] is the raw inventory the detect stage reads; [`build`] turns it into the whole
//! document — which vendors are active and why the rest are not, the node labels the host
//! earns, where an engine can run, findings, and the hardware fingerprint. `build` is pure:
//! the same inventory gives the same bytes.

pub mod ids;
mod inventory;
pub mod labels;
pub mod rules;
pub mod targets;
pub mod vendors;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use inventory::*;
pub use vendors::{Vendor, VendorFilter};

pub const SCHEMA: &str = "k3d-gpu.facts/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub schema: String,
    /// `sha256:` of the hardware facts alone (see [`Hardware`]); a kernel or driver update does
    /// not change it, a different GPU does.
    pub fingerprint: String,
    pub vendor_filter: VendorFilter,
    pub host: Host,
    pub detected: Vec<Detected>,
    pub inactive: Vec<Inactive>,
    /// Node labels `up` sets from these facts.
    pub labels: BTreeMap<String, String>,
    /// Node annotations (values a label cannot hold, such as CPU lists).
    pub annotations: BTreeMap<String, String>,
    pub targets: Vec<targets::Target>,
    pub findings: Vec<Finding>,
}

/// An active vendor: what the cluster will advertise for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    pub vendor: Vendor,
    pub resources: Vec<String>,
    pub devices: u32,
}

/// A vendor that is not active, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inactive {
    pub vendor: Vendor,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
    Fail,
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Fail => "fail",
        })
    }
}

/// One observation about the host, with the file it came from and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    pub level: Level,
    pub code: String,
    pub text: String,
    pub evidence: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    pub fn new(level: Level, code: &str, text: impl Into<String>, evidence: impl Into<String>) -> Finding {
        Finding { level, code: code.to_string(), text: text.into(), evidence: evidence.into(), fix: None }
    }

    pub fn with_fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }
}

/// Builds the facts document from an inventory and the findings met while reading it.
pub fn build(host: Host, read_findings: Vec<Finding>, filter: &VendorFilter) -> Facts {
    let mut findings = read_findings;
    findings.extend(rules::host_findings(&host));
    let evaluation = vendors::evaluate(&host, filter);
    findings.extend(evaluation.findings);
    findings.sort();
    findings.dedup();
    let (labels, annotations) = labels::node_labels(&host, &evaluation.detected);
    let targets = targets::targets(&host, &findings);
    Facts {
        schema: SCHEMA.to_string(),
        fingerprint: Hardware::of(&host).fingerprint(),
        vendor_filter: filter.clone(),
        host,
        detected: evaluation.detected,
        inactive: evaluation.inactive,
        labels,
        annotations,
        targets,
        findings,
    }
}

impl Facts {
    pub fn is_active(&self, vendor: Vendor) -> bool {
        self.detected.iter().any(|d| d.vendor == vendor)
    }

    /// Canonical bytes of the document (what `facts` prints and the goldens hold).
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::canonical::to_bytes(self)
    }
}
