//! Intel GPU rules: which GPUs the cluster gets (all, discrete, integrated, allow/deny ids),
//! the plugin's sharing flags by the reference rules, and DRA mode instead of the plugin.

use super::{CompileError, Context};
use crate::config::{Allocation, GpuSet, IntelGpuMode, Shared};
use crate::facts::{IntelGpu, Vendor};

/// The reference default: pods per GPU when every Intel GPU is integrated.
pub const IGPU_SHARED_DEFAULT: u32 = 8;

/// What the Intel side of the cluster looks like.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IntelPlan {
    /// Extra args for the device plugin container (empty in DRA mode).
    pub plugin_args: Vec<String>,
    /// GPUs the cluster gets.
    pub gpus: Vec<String>,
    /// Pods per GPU when shared.
    pub shared: Option<u32>,
}

/// The plugin's flag that adds `gpu.intel.com/monitoring`.
const MONITORING_FLAG: &str = "-enable-monitoring";

impl IntelPlan {
    /// Whether the plugin advertises `gpu.intel.com/monitoring`.
    pub fn monitoring(&self) -> bool {
        self.plugin_args.iter().any(|a| a == MONITORING_FLAG)
    }
}

/// A GPU's PCI device id as four hex digits, the form users write and the plugin takes.
pub(super) fn id_of(gpu: &IntelGpu) -> String {
    format!("{:04x}", gpu.device_id)
}

/// A GPU's PCI device id as the Intel device plugin's `-allow-ids`/`-deny-ids` take it:
/// `0x` and four lowercase hex digits. The plugin (v0.36.0, `validatePCIDeviceIDs`) checks
/// every id against `^0x[0-9a-f]{4}$` and exits on anything else, so the DaemonSet would
/// crash-loop and advertise nothing.
pub(super) fn plugin_id(id: &str) -> String {
    format!("0x{id}")
}

/// The help that lists this host's Intel GPUs: `e20b Arc Battlemage (BMG) (discrete)`.
pub(super) fn host_gpus_help<'g>(gpus: impl IntoIterator<Item = &'g IntelGpu>) -> String {
    let list: Vec<String> = gpus
        .into_iter()
        .map(|g| {
            format!(
                "{} {} ({})",
                id_of(g),
                g.platform.as_deref().unwrap_or("unknown"),
                if g.integrated { "integrated" } else { "discrete" }
            )
        })
        .collect();
    format!("this host's Intel GPUs: {}", list.join(", "))
}

/// Normalises a user's PCI id (`"0xE20B"`, `"e20b"`, `"8086:e20b"`) to four hex digits.
pub(super) fn normalise_id(text: &str) -> Option<String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_prefix("8086:").unwrap_or(&t);
    let t = t.strip_prefix("0x").unwrap_or(t);
    (t.len() == 4 && t.chars().all(|c| c.is_ascii_hexdigit())).then(|| t.to_string())
}

pub fn plan(cx: &mut Context) -> IntelPlan {
    let config = cx.config;
    let sharing = &config.sharing;
    let mut out = IntelPlan::default();
    if !cx.is_active(Vendor::Intel) {
        if sharing.mode == IntelGpuMode::Dra {
            cx.warn(
                "dra-without-intel",
                Some("sharing.mode"),
                "DRA mode is set but no Intel GPU is active: nothing to hand out",
            );
        }
        return out;
    }
    let usable: Vec<&IntelGpu> = cx.facts.host.intel_gpus.iter().filter(|g| g.usable()).collect();

    // DRA mode: the driver publishes every GPU; the plugin's keys do nothing, so they are
    // neither applied nor checked, only named.
    if sharing.mode == IntelGpuMode::Dra {
        out.gpus = usable.iter().map(|g| g.pci_address.clone()).collect();
        let explicitly_set = [
            (sharing.shared != Shared::Auto, "sharing.shared"),
            (sharing.allocation.is_some(), "sharing.allocation"),
            (sharing.monitoring, "sharing.monitoring"),
            (sharing.gpus != GpuSet::All, "sharing.gpus"),
            (!sharing.allow_ids.is_empty(), "sharing.allow_ids"),
            (!sharing.deny_ids.is_empty(), "sharing.deny_ids"),
        ];
        for key in explicitly_set.into_iter().filter(|(set, _)| *set).map(|(_, key)| key) {
            cx.warn(
                "ignored-in-dra-mode",
                Some(key),
                format!("{key} configures the device plugin and is ignored in DRA mode"),
            );
        }
        return out;
    }

    // Which GPUs: the set first, then allow/deny ids, each checked against the facts.
    // One error per key, however many ids are wrong: a long list must not make a long report.
    let mut ids = |list: &[String], key: &'static str| -> Vec<String> {
        let mut good = Vec::new();
        let mut malformed = Vec::new();
        let mut unmatched = Vec::new();
        for raw in list {
            match normalise_id(raw) {
                None => malformed.push(format!("{raw:?}")),
                Some(id) if !usable.iter().any(|g| id_of(g) == id) => unmatched.push(id),
                Some(id) => good.push(id),
            }
        }
        let shown = |items: &[String]| {
            let mut text = items.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
            if items.len() > 5 {
                text.push_str(&format!(" and {} more", items.len() - 5));
            }
            text
        };
        if !malformed.is_empty() {
            cx.error(CompileError::new(
                "bad-pci-id",
                &["sharing", key],
                format!("{key}: {} is not a PCI device id", shown(&malformed)),
                Some("write four hex digits, e.g. \"e20b\"".to_string()),
            ));
        }
        if !unmatched.is_empty() {
            let have: Vec<String> = usable.iter().map(|g| id_of(g)).collect();
            cx.error(CompileError::new(
                "pci-id-matches-nothing",
                &["sharing", key],
                format!("{key} {} matches no Intel GPU on this host", shown(&unmatched)),
                Some(format!("this host's Intel GPU ids: {}", have.join(", "))),
            ));
        }
        good
    };
    let allow = ids(&sharing.allow_ids, "allow_ids");
    let deny = ids(&sharing.deny_ids, "deny_ids");
    if !allow.is_empty() && !deny.is_empty() {
        cx.error(CompileError::new(
            "allow-and-deny",
            &["sharing", "deny_ids"],
            "allow_ids and deny_ids cannot both be set: the plugin takes one or the other",
            None,
        ));
    }
    let selected: Vec<&IntelGpu> = usable
        .iter()
        .filter(|g| sharing.gpus.admits(g.integrated))
        .filter(|g| allow.is_empty() || allow.contains(&id_of(g)))
        .filter(|g| !deny.contains(&id_of(g)))
        .copied()
        .collect();
    if selected.is_empty() {
        cx.error(CompileError::new(
            "no-intel-gpu-selected",
            &["sharing", "gpus"],
            format!(
                "the GPU selection leaves no Intel GPU (gpus = {:?})",
                format!("{:?}", sharing.gpus).to_lowercase()
            ),
            Some(host_gpus_help(usable.iter().copied())),
        ));
        return out;
    }
    out.gpus = selected.iter().map(|g| g.pci_address.clone()).collect();

    // The plugin's id flags: an explicit allow list, else everything outside the set is denied.
    if !allow.is_empty() {
        let ids: Vec<String> = selected
            .iter()
            .map(|g| plugin_id(&id_of(g)))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        out.plugin_args.push(format!("-allow-ids={}", ids.join(",")));
    } else {
        let denied: std::collections::BTreeSet<String> = usable
            .iter()
            .filter(|g| !selected.iter().any(|s| s.pci_address == g.pci_address))
            .map(|g| plugin_id(&id_of(g)))
            .collect();
        if !denied.is_empty() {
            out.plugin_args.push(format!("-deny-ids={}", denied.into_iter().collect::<Vec<_>>().join(",")));
        }
    }

    // Sharing: auto = 8 when every selected GPU is integrated, else exclusive.
    let shared = match sharing.shared {
        Shared::Auto if selected.iter().all(|g| g.integrated) => Some(IGPU_SHARED_DEFAULT),
        Shared::Auto => None,
        Shared::Pods(1) => None,
        Shared::Pods(n) => Some(n),
    };
    match (shared, sharing.allocation) {
        (Some(n), allocation) => {
            out.plugin_args.push(format!("-shared-dev-num={n}"));
            let policy = match allocation.unwrap_or(Allocation::Balanced) {
                Allocation::Balanced => "balanced",
                Allocation::Packed => "packed",
                Allocation::None => "none",
            };
            out.plugin_args.push(format!("-allocation-policy={policy}"));
        }
        (None, Some(Allocation::Balanced | Allocation::Packed)) => cx.error(CompileError::new(
            "allocation-without-sharing",
            &["sharing", "allocation"],
            "an allocation policy needs sharing, but every GPU here is exclusive (one pod per GPU)",
            Some(
                "set [sharing] shared = <n> (2 or more), or remove allocation; Intel's operator rejects this combination too"
                    .to_string(),
            ),
        )),
        (None, _) => {}
    }
    if sharing.monitoring {
        out.plugin_args.push(MONITORING_FLAG.into());
    }
    out.shared = shared;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_ids_are_normalised() {
        assert_eq!(normalise_id("0xE20B").as_deref(), Some("e20b"));
        assert_eq!(normalise_id("8086:a780").as_deref(), Some("a780"));
        assert_eq!(normalise_id("e20").as_deref(), None);
        assert_eq!(normalise_id("zzzz").as_deref(), None);
    }
}
