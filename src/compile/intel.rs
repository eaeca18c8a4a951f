//! Intel GPU rules: which GPUs the cluster gets (all, discrete, integrated, allow/deny ids),
//! the plugin's sharing flags by the reference rules, and DRA mode instead of the plugin.

use super::{CompileError, Context, Warning};
use crate::config::{Allocation, GpuMode, GpuSet, Shared};
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
    let sharing = &cx.config.sharing;
    let mut out = IntelPlan::default();
    let set_keys = plugin_keys_set(sharing);
    if !cx.is_active(Vendor::Intel) {
        // `mode = "dra"` on an NVIDIA host is NVIDIA's DRA: nothing to say about Intel.
        let nvidia_dra = cx.nvidia_mode() == GpuMode::Dra && cx.is_active(Vendor::Nvidia);
        let intel_dra = sharing.mode.intel() == GpuMode::Dra && !nvidia_dra;
        cx.warnings.extend(without_intel(if intel_dra { GpuMode::Dra } else { GpuMode::Plugin }, &set_keys));
        return out;
    }
    let usable: Vec<&IntelGpu> = cx.facts.host.intel_gpus.iter().filter(|g| g.usable()).collect();

    // DRA mode: the driver publishes every GPU; the plugin's keys do nothing, so they are
    // neither applied nor checked, only named.
    if sharing.mode.intel() == GpuMode::Dra {
        out.gpus = usable.iter().map(|g| g.pci_address.clone()).collect();
        cx.warnings.extend(ignored_in_dra(&set_keys));
        return out;
    }

    // Which GPUs: the set first, then allow/deny ids, each checked against the facts.
    let have: Vec<String> = usable.iter().map(|g| id_of(g)).collect();
    let (allow, allow_errors) = checked_ids(&sharing.allow_ids, "allow_ids", &have);
    let (deny, deny_errors) = checked_ids(&sharing.deny_ids, "deny_ids", &have);
    cx.errors.extend(allow_errors.into_iter().chain(deny_errors));
    if !allow.is_empty() && !deny.is_empty() {
        cx.error(CompileError::new(
            "allow-and-deny",
            &["sharing", "deny_ids"],
            "allow_ids and deny_ids cannot both be set: the plugin takes one or the other",
            None,
        ));
    }
    let selected = select(&usable, sharing.gpus, &allow, &deny);
    if selected.is_empty() {
        cx.error(nothing_selected(&usable, sharing.gpus, &allow, &deny));
        return out;
    }
    out.gpus = selected.iter().map(|g| g.pci_address.clone()).collect();
    out.plugin_args.extend(id_flag(&usable, &selected, !allow.is_empty()));

    let shared = shared_count(sharing.shared, selected.iter().all(|g| g.integrated));
    match sharing_flags(shared, sharing.allocation) {
        Ok(flags) => out.plugin_args.extend(flags),
        Err(e) => cx.error(e),
    }
    // `[telemetry]`'s Intel exporter reads the GPUs through gpu.intel.com/monitoring, which
    // the plugin advertises only with this flag: telemetry turns it on itself, and says so
    // (`telemetry::check`).
    if sharing.monitoring || super::telemetry::wants(cx.config, crate::config::TelemetryExporter::Intel) {
        out.plugin_args.push(MONITORING_FLAG.into());
    }
    out.shared = shared;
    out
}

/// The keys that configure the Intel device plugin, where the user set them, in the order
/// their warnings are given.
fn plugin_keys_set(sharing: &crate::config::Sharing) -> Vec<&'static str> {
    let explicitly_set = [
        (sharing.shared != Shared::Auto, "sharing.shared"),
        (sharing.allocation.is_some(), "sharing.allocation"),
        (sharing.monitoring, "sharing.monitoring"),
        (sharing.gpus != GpuSet::All, "sharing.gpus"),
        (!sharing.allow_ids.is_empty(), "sharing.allow_ids"),
        (!sharing.deny_ids.is_empty(), "sharing.deny_ids"),
    ];
    explicitly_set.into_iter().filter(|(set, _)| *set).map(|(_, key)| key).collect()
}

fn warning(code: &str, key: &str, text: String) -> Warning {
    Warning { code: code.into(), text, key: Some(key.into()) }
}

/// `[sharing]` is Intel-only: on an NVIDIA-only host `shared = 4` would otherwise validate
/// "ok" and do nothing, so each key set says it has no effect (and so does DRA mode).
fn without_intel(mode: GpuMode, set_keys: &[&str]) -> Vec<Warning> {
    let mut out: Vec<Warning> = set_keys
        .iter()
        .map(|key| {
            warning(
                "sharing-without-intel",
                key,
                format!("{key} configures the Intel GPU plugin, and no Intel GPU is active here: it has no effect"),
            )
        })
        .collect();
    if mode == GpuMode::Dra {
        out.push(warning(
            "dra-without-intel",
            "sharing.mode",
            "DRA mode is set but no Intel GPU is active: nothing to hand out".into(),
        ));
    }
    out
}

/// In DRA mode the plugin's keys are named as ignored.
fn ignored_in_dra(set_keys: &[&str]) -> Vec<Warning> {
    set_keys
        .iter()
        .map(|key| {
            warning(
                "ignored-in-dra-mode",
                key,
                format!("{key} configures the device plugin and is ignored in DRA mode"),
            )
        })
        .collect()
}

/// At most five items, then how many more: a long list must not make a long report.
pub(super) fn shown(items: &[String]) -> String {
    let mut text = items.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > 5 {
        text.push_str(&format!(" and {} more", items.len() - 5));
    }
    text
}

/// An `allow_ids`/`deny_ids` list checked against the ids of the usable GPUs (`have`): the
/// good ids, and one error per kind of bad element (malformed, matching nothing), each
/// underlining the first such element.
fn checked_ids(list: &[String], key: &'static str, have: &[String]) -> (Vec<String>, Vec<CompileError>) {
    let mut good = Vec::new();
    let mut malformed = Vec::new();
    let mut unmatched = Vec::new();
    let (mut first_malformed, mut first_unmatched) = (None, None);
    for (i, raw) in list.iter().enumerate() {
        match normalise_id(raw) {
            None => {
                first_malformed.get_or_insert(i);
                malformed.push(format!("{raw:?}"))
            }
            Some(id) if !have.contains(&id) => {
                first_unmatched.get_or_insert(i);
                unmatched.push(id)
            }
            Some(id) => good.push(id),
        }
    }
    let mut errors = Vec::new();
    if !malformed.is_empty() {
        errors.push(
            CompileError::new(
                "bad-pci-id",
                &["sharing", key],
                format!("{key}: {} is not a PCI device id", shown(&malformed)),
                Some("write four hex digits, e.g. \"e20b\"".to_string()),
            )
            .at_element(first_malformed),
        );
    }
    if !unmatched.is_empty() {
        errors.push(
            CompileError::new(
                "pci-id-matches-nothing",
                &["sharing", key],
                format!("{key} {} matches no Intel GPU on this host", shown(&unmatched)),
                Some(format!("this host's Intel GPU ids: {}", have.join(", "))),
            )
            .at_element(first_unmatched),
        );
    }
    (good, errors)
}

/// The GPUs the cluster gets: in the set, in `allow` when it is given, not in `deny`.
fn select<'g>(usable: &[&'g IntelGpu], set: GpuSet, allow: &[String], deny: &[String]) -> Vec<&'g IntelGpu> {
    usable
        .iter()
        .filter(|g| set.admits(g.integrated))
        .filter(|g| allow.is_empty() || allow.contains(&id_of(g)))
        .filter(|g| !deny.contains(&id_of(g)))
        .copied()
        .collect()
}

/// An empty selection points at the key that emptied it, not always at `gpus`.
fn nothing_selected(usable: &[&IntelGpu], set: GpuSet, allow: &[String], deny: &[String]) -> CompileError {
    let by_set = usable.iter().any(|g| set.admits(g.integrated));
    let key = match (by_set, allow.is_empty(), deny.is_empty()) {
        (false, _, _) => "gpus",
        (true, false, _) => "allow_ids",
        (true, true, false) => "deny_ids",
        _ => "gpus",
    };
    CompileError::new(
        "no-intel-gpu-selected",
        &["sharing", key],
        format!(
            "the GPU selection leaves no Intel GPU ({key} removes the last one; gpus = {:?})",
            format!("{set:?}").to_lowercase()
        ),
        Some(host_gpus_help(usable.iter().copied())),
    )
}

/// The plugin's id flag: an explicit allow list names the selected ids, else everything
/// outside the selection is denied (no flag when nothing is).
fn id_flag(usable: &[&IntelGpu], selected: &[&IntelGpu], allow_given: bool) -> Option<String> {
    if allow_given {
        let ids: std::collections::BTreeSet<String> = selected.iter().map(|g| plugin_id(&id_of(g))).collect();
        return Some(format!("-allow-ids={}", ids.into_iter().collect::<Vec<_>>().join(",")));
    }
    let denied: std::collections::BTreeSet<String> = usable
        .iter()
        .filter(|g| !selected.iter().any(|s| s.pci_address == g.pci_address))
        .map(|g| plugin_id(&id_of(g)))
        .collect();
    (!denied.is_empty()).then(|| format!("-deny-ids={}", denied.into_iter().collect::<Vec<_>>().join(",")))
}

/// Pods per GPU: auto is 8 when every selected GPU is integrated, else exclusive; 1 is exclusive.
fn shared_count(shared: Shared, all_integrated: bool) -> Option<u32> {
    match shared {
        Shared::Auto if all_integrated => Some(IGPU_SHARED_DEFAULT),
        Shared::Auto => None,
        Shared::Pods(1) => None,
        Shared::Pods(n) => Some(n),
    }
}

/// The plugin's sharing flags: a count and a policy (balanced unless set) when shared; a
/// policy that packs or balances without sharing is refused, as Intel's operator does.
fn sharing_flags(shared: Option<u32>, allocation: Option<Allocation>) -> Result<Vec<String>, CompileError> {
    match (shared, allocation) {
        (Some(n), allocation) => {
            let policy = match allocation.unwrap_or(Allocation::Balanced) {
                Allocation::Balanced => "balanced",
                Allocation::Packed => "packed",
                Allocation::None => "none",
            };
            Ok(vec![format!("-shared-dev-num={n}"), format!("-allocation-policy={policy}")])
        }
        (None, Some(Allocation::Balanced | Allocation::Packed)) => Err(CompileError::new(
            "allocation-without-sharing",
            &["sharing", "allocation"],
            "an allocation policy needs sharing, but every GPU here is exclusive (one pod per GPU)",
            Some(
                "set [sharing] shared = <n> (2 or more), or remove allocation; Intel's operator rejects this combination too"
                    .to_string(),
            ),
        )),
        (None, _) => Ok(Vec::new()),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::Sharing;
    use crate::facts::Xmx;

    /// A usable Intel GPU: `id` is its device id, `integrated` where it sits.
    pub(in crate::compile) fn gpu(address: &str, id: u32, integrated: bool) -> IntelGpu {
        IntelGpu {
            pci_address: address.into(),
            pci_id: format!("8086:{id:04x}"),
            device_id: id,
            driver: Some("i915".into()),
            card: Some("card0".into()),
            render_node: Some("renderD128".into()),
            integrated,
            platform: Some("Alder Lake-S GT1".into()),
            xmx: Xmx::No,
            engines: Vec::new(),
            device_nodes: Vec::new(),
            guc: None,
            huc: None,
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pci_ids_are_normalised() {
        assert_eq!(normalise_id("0xE20B").as_deref(), Some("e20b"));
        assert_eq!(normalise_id("8086:a780").as_deref(), Some("a780"));
        assert_eq!(normalise_id("e20").as_deref(), None);
        assert_eq!(normalise_id("zzzz").as_deref(), None);
    }

    #[test]
    fn the_keys_set_are_the_plugins_own_in_order() {
        let cases: Vec<(&str, Sharing, &[&str])> = vec![
            ("nothing set", Sharing::default(), &[]),
            ("shared", Sharing { shared: Shared::Pods(2), ..Default::default() }, &["sharing.shared"]),
            // `shared = 1` is still set by the user, though it means exclusive.
            ("shared = 1", Sharing { shared: Shared::Pods(1), ..Default::default() }, &["sharing.shared"]),
            (
                "mode is not a plugin key",
                Sharing { mode: crate::config::SharingMode::All(GpuMode::Dra), ..Default::default() },
                &[],
            ),
            (
                "every key",
                Sharing {
                    shared: Shared::Pods(4),
                    allocation: Some(Allocation::None),
                    monitoring: true,
                    gpus: GpuSet::Discrete,
                    allow_ids: strings(&["e20b"]),
                    deny_ids: strings(&["a780"]),
                    ..Default::default()
                },
                &[
                    "sharing.shared",
                    "sharing.allocation",
                    "sharing.monitoring",
                    "sharing.gpus",
                    "sharing.allow_ids",
                    "sharing.deny_ids",
                ],
            ),
        ];
        for (name, sharing, want) in cases {
            assert_eq!(plugin_keys_set(&sharing), want, "{name}");
        }
    }

    #[test]
    fn keys_without_an_intel_gpu_or_in_dra_mode_are_named() {
        type Rule = fn(GpuMode, &[&str]) -> Vec<Warning>;
        let dra: Rule = |_, keys| ignored_in_dra(keys);
        const KEYS: &[&str] = &["sharing.shared", "sharing.gpus"];
        type Case<'a> = (&'a str, Rule, GpuMode, &'a [&'a str], &'a [(&'a str, &'a str)]);
        let cases: [Case; 5] = [
            ("no intel, nothing set", without_intel, GpuMode::Plugin, &[], &[]),
            (
                "no intel, keys set",
                without_intel,
                GpuMode::Plugin,
                KEYS,
                &[("sharing-without-intel", "sharing.shared"), ("sharing-without-intel", "sharing.gpus")],
            ),
            (
                "no intel, dra mode last",
                without_intel,
                GpuMode::Dra,
                &["sharing.gpus"],
                &[("sharing-without-intel", "sharing.gpus"), ("dra-without-intel", "sharing.mode")],
            ),
            ("dra, nothing set", dra, GpuMode::Dra, &[], &[]),
            (
                "dra, keys set",
                dra,
                GpuMode::Dra,
                KEYS,
                &[("ignored-in-dra-mode", "sharing.shared"), ("ignored-in-dra-mode", "sharing.gpus")],
            ),
        ];
        for (name, rule, mode, keys, want) in cases {
            let got = rule(mode, keys);
            let got: Vec<(&str, &str)> = got.iter().map(|w| (w.code.as_str(), w.key.as_deref().unwrap())).collect();
            assert_eq!(got, want, "{name}");
        }
        assert!(without_intel(GpuMode::Plugin, &["sharing.gpus"])[0].text.starts_with("sharing.gpus configures"));
    }

    #[test]
    fn long_lists_are_cut_at_five() {
        const CASES: &[(&[&str], &str)] = &[
            (&[], ""),
            (&["a"], "a"),
            (&["a", "b", "c", "d", "e"], "a, b, c, d, e"),
            (&["a", "b", "c", "d", "e", "f", "g"], "a, b, c, d, e and 2 more"),
        ];
        for (items, want) in CASES {
            assert_eq!(shown(&strings(items)), *want, "{items:?}");
        }
    }

    #[test]
    fn id_lists_are_checked_against_the_host() {
        let have = strings(&["a780", "e20b"]);
        // (list, good ids, errors as (code, element))
        type Case = (&'static [&'static str], &'static [&'static str], &'static [(&'static str, usize)]);
        const CASES: &[Case] = &[
            (&[], &[], &[]),
            (&["0xE20B", "8086:a780"], &["e20b", "a780"], &[]),
            (&["e20b", "nope", "zz"], &["e20b"], &[("bad-pci-id", 1)]),
            (&["e20b", "1234", "5678"], &["e20b"], &[("pci-id-matches-nothing", 1)]),
            // Malformed first, whatever the order in the list; one error per kind.
            (&["1234", "x"], &[], &[("bad-pci-id", 1), ("pci-id-matches-nothing", 0)]),
        ];
        for (list, good, errors) in CASES {
            let (got, es) = checked_ids(&strings(list), "allow_ids", &have);
            assert_eq!(got, *good, "{list:?}");
            let es: Vec<(&str, usize)> = es.iter().map(|e| (e.code, e.element.unwrap())).collect();
            assert_eq!(es, *errors, "{list:?}");
        }
        let (_, es) = checked_ids(&strings(&["1234"]), "deny_ids", &have);
        assert_eq!(es[0].key, ["sharing", "deny_ids"]);
        assert_eq!(es[0].help.as_deref(), Some("this host's Intel GPU ids: a780, e20b"));
    }

    #[test]
    fn the_selection_and_who_emptied_it() {
        let (igpu, dgpu) = (gpu("0000:00:02.0", 0xa780, true), gpu("0000:03:00.0", 0xe20b, false));
        let usable = [&igpu, &dgpu];
        // (set, allow, deny, selected addresses, the key blamed when empty)
        type Case = (GpuSet, &'static [&'static str], &'static [&'static str], &'static [&'static str], &'static str);
        const CASES: &[Case] = &[
            (GpuSet::All, &[], &[], &["0000:00:02.0", "0000:03:00.0"], ""),
            (GpuSet::Discrete, &[], &[], &["0000:03:00.0"], ""),
            (GpuSet::Integrated, &["e20b"], &[], &[], "allow_ids"),
            (GpuSet::All, &["e20b"], &[], &["0000:03:00.0"], ""),
            (GpuSet::All, &[], &["a780", "e20b"], &[], "deny_ids"),
            (GpuSet::Discrete, &[], &["e20b"], &[], "deny_ids"),
        ];
        for (set, allow, deny, want, blamed) in CASES {
            let (allow, deny) = (strings(allow), strings(deny));
            let got: Vec<&str> = select(&usable, *set, &allow, &deny).iter().map(|g| g.pci_address.as_str()).collect();
            assert_eq!(got, *want, "{set:?} {allow:?} {deny:?}");
            if want.is_empty() {
                assert_eq!(nothing_selected(&usable, *set, &allow, &deny).key, ["sharing", blamed], "{set:?}");
            }
        }
        // The set alone admits nothing: `gpus` is blamed even with ids given.
        let e = nothing_selected(&[&igpu], GpuSet::Discrete, &strings(&["a780"]), &[]);
        assert_eq!(e.key, ["sharing", "gpus"]);
        assert!(e.message.ends_with("gpus = \"discrete\")"), "{}", e.message);
    }

    #[test]
    fn the_plugin_is_told_which_ids_by_allow_or_deny() {
        let (a, b, c) =
            (gpu("0000:00:02.0", 0xa780, true), gpu("0000:03:00.0", 0xe20b, false), gpu("0000:04:00.0", 0xe20b, false));
        let usable = [&a, &b, &c];
        let cases: [(&str, &[&IntelGpu], bool, Option<&str>); 4] = [
            ("all selected: no flag", &[&a, &b, &c], false, None),
            ("one left out is denied", &[&b, &c], false, Some("-deny-ids=0xa780")),
            ("allow names each id once", &[&b, &c], true, Some("-allow-ids=0xe20b")),
            ("allow lists sorted", &[&b, &a], true, Some("-allow-ids=0xa780,0xe20b")),
        ];
        for (name, selected, allow, want) in cases {
            assert_eq!(id_flag(&usable, selected, allow).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn sharing_is_eight_on_integrated_gpus_and_exclusive_otherwise() {
        const CASES: &[(Shared, bool, Option<u32>)] = &[
            (Shared::Auto, true, Some(IGPU_SHARED_DEFAULT)),
            (Shared::Auto, false, None),
            (Shared::Pods(1), true, None),
            (Shared::Pods(3), false, Some(3)),
        ];
        for (shared, integrated, want) in CASES {
            assert_eq!(shared_count(*shared, *integrated), *want, "{shared:?} integrated={integrated}");
        }
    }

    #[test]
    fn sharing_flags_and_the_policy_without_sharing() {
        type Case = (Option<u32>, Option<Allocation>, Result<&'static [&'static str], &'static str>);
        const CASES: &[Case] = &[
            (Some(8), None, Ok(&["-shared-dev-num=8", "-allocation-policy=balanced"])),
            (Some(2), Some(Allocation::Packed), Ok(&["-shared-dev-num=2", "-allocation-policy=packed"])),
            (Some(2), Some(Allocation::None), Ok(&["-shared-dev-num=2", "-allocation-policy=none"])),
            (None, None, Ok(&[])),
            (None, Some(Allocation::None), Ok(&[])),
            (None, Some(Allocation::Balanced), Err("allocation-without-sharing")),
            (None, Some(Allocation::Packed), Err("allocation-without-sharing")),
        ];
        for (shared, allocation, want) in CASES {
            let got = sharing_flags(*shared, *allocation);
            let got = got.as_ref().map(|f| f.iter().map(String::as_str).collect::<Vec<_>>()).map_err(|e| e.code);
            assert_eq!(got, want.map(<[&str]>::to_vec), "{shared:?} {allocation:?}");
        }
    }
}
