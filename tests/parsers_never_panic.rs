//! Every parser survives arbitrary input: random bytes and mutated real files from the fixture
//! hosts. The fuzz target in fuzz/ explores further; this keeps the guarantee in CI.

mod support;

use k3d_gpu::parse::*;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn exercise(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(cpus) = parse_cpulist(&text) {
        assert_eq!(parse_cpulist(&format_cpulist(&cpus)).unwrap(), cpus, "cpulist round trip of {text:?}");
    }
    let _ = parse_cpuinfo(&text);
    let _ = parse_colon_map(&text);
    let _ = parse_meminfo_kib(&text, "MemTotal");
    let _ = parse_node_meminfo_kib(&text, "MemTotal");
    let _ = parse_os_release(&text);
    let _ = parse_hex_id(&text);
    let _ = parse_u64(&text);
    let _ = parse_uc_info(&text);
    let _ = k3d_gpu::parse::parse_nvidia_smi_memory(&text);
    let _ = Version::parse(&text);
    let _ = kernel_major_minor(&text);
    let _ = firmware_build_date(data);
    let _ = k3d_gpu::host::parse_sidecar(&text);
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let alphabet = b"0123456789abcdefx-,.:;*= \t\nMemTotalkBprocessorflagsGuCstatuswantedfound";
    for _ in 0..20_000 {
        let len = (rng.next() % 96) as usize;
        let biased = rng.next().is_multiple_of(2);
        let data: Vec<u8> = (0..len)
            .map(|_| {
                let r = rng.next();
                if biased { alphabet[(r % alphabet.len() as u64) as usize] } else { r as u8 }
            })
            .collect();
        exercise(&data);
    }
}

#[test]
fn mutated_fixture_files() {
    let mut rng = Rng(42);
    let host = support::hosts_dir().join("desktop-rpl-nvidia");
    for file in [
        "proc/cpuinfo",
        "proc/meminfo",
        "etc/os-release",
        "sys/devices/system/cpu/online",
        "sys/kernel/debug/dri/0000:00:02.0/gt0/uc/guc_info",
        "proc/driver/nvidia/gpus/0000:01:00.0/information",
    ] {
        let original = std::fs::read(host.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for _ in 0..300 {
            let mut data = original.clone();
            for _ in 0..(1 + rng.next() % 8) {
                if data.is_empty() {
                    break;
                }
                let at = (rng.next() % data.len() as u64) as usize;
                match rng.next() % 3 {
                    0 => data[at] = rng.next() as u8,
                    1 => {
                        data.remove(at);
                    }
                    _ => data.truncate(at),
                }
            }
            exercise(&data);
        }
    }
}
