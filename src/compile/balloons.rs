//! The host's CPU hints in the NRI balloons policy (the `balloons-host-hints` hook): the
//! CPPC-favoured CPUs as a preference of the `latency` balloon type, and
//! `OVERRIDE_SYS_ATOM_CPUS` on the policy's container where the kernel lists low-power
//! E-cores apart from `cpu_atom` (Arrow Lake-H). Host facts in, edited objects out.

use serde_json::{Value, json};

use crate::config::Config;
use crate::facts::Cpu;
use crate::parse::{format_cpulist, parse_cpulist};

/// The balloon type the favoured CPUs are for (share/nri-balloons.yml).
pub const LATENCY_BALLOON: &str = "latency";

/// The variable nri-plugins v0.14.0 reads in place of `/sys/devices/cpu_atom/cpus`
/// (`pkg/sysfs/system.go`, `coreKindEnvOverrides`). With only the E-core kind given, the
/// policy counts every other online CPU as a P-core.
pub const ATOM_CPUS_ENV: &str = "OVERRIDE_SYS_ATOM_CPUS";

/// What this host adds to the policy; empty fields add nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostHints {
    /// CPPC-favoured CPUs, one sysfs path each, for the latency balloon's
    /// `preferCloseToDevices`.
    pub favored_devices: Vec<String>,
    /// The cpulist for [`ATOM_CPUS_ENV`]: E-cores and low-power E-cores together.
    pub atom_cpus: Option<String>,
}

impl HostHints {
    pub fn of(config: &Config, cpu: &Cpu) -> HostHints {
        let cpus = |list: &str| parse_cpulist(list).unwrap_or_default();
        // nri-plugins resolves a device path to CPUs through a cpulist file at or above it;
        // `cpuN` itself has none, its L1 data cache (`cache/index0`, one per core) does. A
        // fleet shares one policy object among nodes whose favoured CPUs differ, so there
        // the hint is left out (docs/intel.md).
        let favored_devices = if config.nodes.is_empty() {
            cpus(&cpu.favored).iter().map(|n| format!("/sys/devices/system/cpu/cpu{n}/cache/index0")).collect()
        } else {
            Vec::new()
        };
        // nri-plugins reads cpu_core and cpu_atom only; CPUs the kernel lists under
        // cpu_lowpower are then of no kind, and its sanity check refuses the topology.
        let lowpower = cpus(&cpu.lp_e_cores);
        let atom_cpus = (!lowpower.is_empty()).then(|| {
            let mut all = cpus(&cpu.e_cores);
            all.extend(lowpower);
            all.sort_unstable();
            all.dedup();
            format_cpulist(&all)
        });
        HostHints { favored_devices, atom_cpus }
    }

    /// Edits one object of the balloons component: the BalloonsPolicy's latency type, the
    /// env of `container` in a workload. `set_env` replaces a variable of that name.
    pub fn apply(&self, object: &mut Value, container: &str, set_env: impl Fn(&mut Value, &str, &str, &str)) {
        if object["kind"] == "BalloonsPolicy" && !self.favored_devices.is_empty() {
            let types = object.pointer_mut("/spec/balloonTypes").and_then(Value::as_array_mut);
            for t in types.into_iter().flatten().filter(|t| t["name"] == LATENCY_BALLOON) {
                let list = &mut t["preferCloseToDevices"];
                if !list.is_array() {
                    *list = json!([]);
                }
                if let Some(items) = list.as_array_mut() {
                    for device in &self.favored_devices {
                        if !items.iter().any(|i| i == device.as_str()) {
                            items.push(json!(device));
                        }
                    }
                }
            }
        }
        if let Some(cpus) = &self.atom_cpus
            && object.pointer("/spec/template/spec/containers").is_some()
        {
            set_env(object, container, ATOM_CPUS_ENV, cpus);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(favored: &str, e: &str, lp: &str) -> Cpu {
        Cpu { favored: favored.into(), e_cores: e.into(), lp_e_cores: lp.into(), ..Cpu::default() }
    }

    #[test]
    fn favoured_cpus_become_per_core_cache_paths_and_low_power_cores_join_the_atom_list() {
        let hints = HostHints::of(&Config::default(), &facts("2-3", "6-13", "14-15"));
        assert_eq!(
            hints.favored_devices,
            ["/sys/devices/system/cpu/cpu2/cache/index0", "/sys/devices/system/cpu/cpu3/cache/index0"]
        );
        assert_eq!(hints.atom_cpus.as_deref(), Some("6-15"));
        assert_eq!(HostHints::of(&Config::default(), &facts("", "16-31", "")), HostHints::default());
    }

    #[test]
    fn a_fleet_leaves_the_shared_policy_alone_but_keeps_the_per_node_env() {
        let mut config = Config::default();
        config.nodes.push(Default::default());
        let hints = HostHints::of(&config, &facts("4-7", "6-13", "14-15"));
        assert!(hints.favored_devices.is_empty());
        assert_eq!(hints.atom_cpus.as_deref(), Some("6-15"));
    }

    #[test]
    fn only_the_latency_type_gets_the_favoured_cpus_once() {
        let hints = HostHints { favored_devices: vec!["/d/0".into()], atom_cpus: None };
        let mut policy = json!({"kind": "BalloonsPolicy", "spec": {"balloonTypes": [
            {"name": "performance"}, {"name": "latency", "preferCloseToDevices": ["/d/0"]}]}});
        hints.apply(&mut policy, "c", |_, _, _, _| panic!("no env on a policy"));
        assert_eq!(policy["spec"]["balloonTypes"][0].get("preferCloseToDevices"), None);
        assert_eq!(policy["spec"]["balloonTypes"][1]["preferCloseToDevices"], json!(["/d/0"]));
    }
}
