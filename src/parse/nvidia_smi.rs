//! `nvidia-smi --query-gpu=memory.total,pci.bus_id --format=csv,noheader,nounits`, as
//! `facts capture` saves it into a fixture host: one line per GPU, `16380, 00000000:01:00.0`
//! (MiB, then the PCI address with nvidia-smi's eight-digit domain, hex in upper case).

use super::ParseError;

/// `(PCI address as sysfs writes it, memory in MiB)` per line. A line that does not parse is
/// an error naming it: the file is test data or a capture, never something to guess at.
pub fn parse_nvidia_smi_memory(text: &str) -> Result<Vec<(String, u64)>, ParseError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || ParseError::new(format!("line {}: not \"<MiB>, <PCI bus id>\"", n + 1));
        let (mib, bus) = line.split_once(',').ok_or_else(bad)?;
        let mib: u64 = mib.trim().parse().map_err(|_| bad())?;
        let address = pci_address(bus.trim()).ok_or_else(bad)?;
        out.push((address, mib));
    }
    Ok(out)
}

/// `00000000:0A:00.0` → `0000:0a:00.0` (sysfs's form: a four-digit domain, lower case).
fn pci_address(bus_id: &str) -> Option<String> {
    let (domain, rest) = bus_id.split_once(':')?;
    let (bus, slot) = rest.split_once(':')?;
    let (device, function) = slot.split_once('.')?;
    let hex = |s: &str, max: usize| {
        (!s.is_empty() && s.len() <= max && s.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    let (domain, bus, device, function) = (hex(domain, 8)?, hex(bus, 2)?, hex(device, 2)?, hex(function, 1)?);
    (domain <= 0xffff && device < 32 && function < 8).then(|| format!("{domain:04x}:{bus:02x}:{device:02x}.{function}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cards_as_nvidia_smi_prints_them() {
        let text = "16380, 00000000:01:00.0\n16380, 00000000:0A:00.0\n";
        assert_eq!(
            parse_nvidia_smi_memory(text).unwrap(),
            [("0000:01:00.0".to_string(), 16380), ("0000:0a:00.0".to_string(), 16380)]
        );
        assert_eq!(parse_nvidia_smi_memory("").unwrap(), []);
    }

    #[test]
    fn anything_else_is_an_error() {
        for bad in ["16380", "[N/A], 00000000:01:00.0", "16380, 01:00.0", "1, 00000000:01:00.9", "-1, 0000:01:00.0"] {
            assert!(parse_nvidia_smi_memory(bad).is_err(), "{bad:?}");
        }
    }
}
