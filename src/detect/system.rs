//! Kernel, OS, memory and WSL2.

use super::Reader;
use crate::facts::{BindSources, Inotify, Kernel, Memory, Os, Wsl};
use crate::hwdb;
use crate::parse;

/// Modules whose presence detection and doctor care about, besides the QAT drivers.
const MODULES: &[&str] = &["habanalabs", "i915", "idxd", "intel_vpu", "nvidia", "vfio_pci", "xe"];

/// Whether `module` is among the loaded modules [`kernel`] found.
pub fn loaded(modules: &[String], module: &str) -> bool {
    modules.iter().any(|m| m == module)
}

pub fn kernel(r: &mut Reader) -> Kernel {
    let release = r.attr("/proc/sys/kernel/osrelease");
    let mut wanted: Vec<&str> = MODULES.iter().copied().chain(hwdb::qat_modules()).collect();
    wanted.sort_unstable();
    let modules = wanted.iter().filter(|m| r.exists(&format!("/sys/module/{m}"))).map(|m| m.to_string()).collect();
    let force_probe = r
        .text("/proc/cmdline")
        .map(|cmdline| {
            cmdline
                .split_whitespace()
                .filter(|p| p.starts_with("xe.force_probe=") || p.starts_with("i915.force_probe="))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let limit = |r: &mut Reader, name: &str| r.parsed(&format!("/proc/sys/fs/inotify/{name}"), parse::parse_u64);
    let inotify =
        Inotify { max_user_instances: limit(r, "max_user_instances"), max_user_watches: limit(r, "max_user_watches") };
    let inotify = (inotify != Inotify::default()).then_some(inotify);
    Kernel { release, modules, force_probe, inotify }
}

pub fn memory(r: &mut Reader) -> Memory {
    let total_kib = r.parsed("/proc/meminfo", |t| parse::parse_meminfo_kib(t, "MemTotal"));
    Memory { total_kib }
}

pub fn os(r: &mut Reader) -> Os {
    let map = r.text("/etc/os-release").map(|t| parse::parse_os_release(&t)).unwrap_or_default();
    Os {
        id: map.get("ID").cloned(),
        version_id: map.get("VERSION_ID").cloned(),
        pretty_name: map.get("PRETTY_NAME").cloned(),
    }
}

pub fn wsl(r: &mut Reader) -> Wsl {
    let microsoft_kernel = r.text("/proc/version").is_some_and(|v| v.to_ascii_lowercase().contains("microsoft"));
    if !microsoft_kernel {
        return Wsl::default();
    }
    let intel_driver_packages =
        r.list("/usr/lib/wsl/drivers").into_iter().filter(|name| name.starts_with("iigd_dch")).collect();
    Wsl {
        microsoft_kernel,
        dxg: r.exists("/dev/dxg"),
        intel_driver_packages,
        nvidia_smi: r.exists("/usr/lib/wsl/lib/nvidia-smi"),
        libdxcore: r.exists("/usr/lib/wsl/lib/libdxcore.so"),
    }
}

/// Which of the host paths the node may bind-mount exist. Only a release that is one path
/// component names a /boot file; anything else is not looked up.
pub fn bind_sources(r: &mut Reader, release: Option<&str>) -> BindSources {
    let boot_config = release
        .filter(|rel| !rel.is_empty() && !rel.contains('/') && *rel != "." && *rel != "..")
        .is_some_and(|rel| r.exists(&format!("/boot/config-{rel}")));
    BindSources {
        boot_config,
        lib_modules: r.exists("/lib/modules"),
        os_release: r.exists("/etc/os-release"),
        dev_char: r.exists("/dev/char"),
        usr_lib_wsl: r.exists("/usr/lib/wsl"),
    }
}

/// The RAPL zones under `/sys/class/powercap` (`intel-rapl:N` and their subzones
/// `intel-rapl:N:M`; the powercap class lists both flat), sorted as listed.
pub fn rapl(r: &mut Reader) -> Vec<crate::facts::RaplZone> {
    let zones: Vec<String> =
        r.list("/sys/class/powercap").into_iter().filter(|z| z.starts_with("intel-rapl:")).collect();
    zones
        .into_iter()
        .map(|zone| {
            let d = format!("/sys/class/powercap/{zone}");
            crate::facts::RaplZone {
                name: r.attr(&format!("{d}/name")),
                max_energy_range_uj: r.attr(&format!("{d}/max_energy_range_uj")).and_then(|v| v.parse().ok()),
                energy_readable: r.text_if_permitted(&format!("{d}/energy_uj")).is_some(),
                zone,
            }
        })
        .collect()
}
