//! Pure parsers for the text formats the kernel exposes (cpulists, /proc/cpuinfo, meminfo,
//! os-release, GuC/HuC debugfs records, NVIDIA's per-GPU information file and nvidia-smi's memory query, firmware headers).
//!
//! They take `&str`/`&[u8]` and return values or a [`ParseError`]; they never panic on any
//! input (the fuzz target in `fuzz/` and `tests/parsers_never_panic.rs` hold them to that) and
//! never touch the filesystem.

mod cpulist;
mod firmware;
mod kv;
mod nvidia_smi;
mod uc_info;

pub use cpulist::{CpuList, format_cpulist, parse_cpulist};
pub use firmware::firmware_build_date;
pub use kv::{
    CpuInfo, parse_colon_map, parse_cpuinfo, parse_hex_id, parse_meminfo_kib, parse_node_meminfo_kib, parse_os_release,
    parse_u64,
};
pub use nvidia_smi::parse_nvidia_smi_memory;
pub use uc_info::{UcInfo, Version, parse_uc_info};

/// Why a value could not be parsed; the caller adds the path it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ParseError(message.into())
    }
}

/// Parses a kernel release such as `6.12.9-arch1-1` into `(major, minor)`.
pub fn kernel_major_minor(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_release_versions() {
        assert_eq!(kernel_major_minor("6.12.9-arch1-1"), Some((6, 12)));
        assert_eq!(kernel_major_minor("7.0.0-15-generic\n"), Some((7, 0)));
        assert_eq!(kernel_major_minor("6.6.87.2-microsoft-standard-WSL2"), Some((6, 6)));
        assert_eq!(kernel_major_minor("banana"), None);
        assert_eq!(kernel_major_minor(""), None);
    }
}
