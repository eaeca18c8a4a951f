//! The kernel's cpulist format (`0-3,8,10-11`), used by sysfs for CPU and node sets.

use super::ParseError;

/// A sorted, de-duplicated set of CPU numbers.
pub type CpuList = Vec<u32>;

/// The largest CPU number we accept; a larger one is garbage, not a machine.
const MAX_CPU: u32 = 1 << 16;

pub fn parse_cpulist(text: &str) -> Result<CpuList, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut ranges = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(part)?;
                (n, n)
            }
        };
        if first > last {
            return Err(ParseError::new(format!("range {part:?} runs backwards")));
        }
        ranges.push((first, last));
    }
    // Merge before expanding, so repeated or overlapping ranges cost nothing extra.
    ranges.sort_unstable();
    let mut cpus: Vec<u32> = Vec::new();
    for (first, last) in ranges {
        let start = match cpus.last() {
            Some(&top) if top >= last => continue,
            Some(&top) if top >= first => top + 1,
            _ => first,
        };
        cpus.extend(start..=last);
    }
    Ok(cpus)
}

fn number(text: &str) -> Result<u32, ParseError> {
    match text.trim().parse::<u32>() {
        Ok(n) if n <= MAX_CPU => Ok(n),
        Ok(n) => Err(ParseError::new(format!("CPU number {n} is out of range"))),
        Err(_) => Err(ParseError::new(format!("{text:?} is not a CPU number"))),
    }
}

/// Formats CPUs back into the compact cpulist form (`0-3,8`).
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_singles() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpulist("5,1-2,2").unwrap(), vec![1, 2, 5]);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_cpulist("banana").is_err());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("0-4294967295").is_err());
        assert!(parse_cpulist("1,,2").is_err());
    }

    #[test]
    fn repeated_ranges_stay_bounded() {
        let text = vec!["0-65536"; 20_000].join(",");
        assert_eq!(parse_cpulist(&text).unwrap().len(), 65537);
    }

    #[test]
    fn round_trips() {
        for text in ["0-3,8,10-11", "0", "0-55,112-167", "1,3,5"] {
            assert_eq!(format_cpulist(&parse_cpulist(text).unwrap()), text);
        }
    }
}
