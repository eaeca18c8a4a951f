//! Key/value text formats: /proc/cpuinfo, /proc/meminfo, per-node meminfo, os-release,
//! NVIDIA's `information` file, and single-value sysfs attributes.

use std::collections::BTreeMap;

use super::ParseError;

/// What k3d-gpu needs from /proc/cpuinfo: the first processor's identity and flags, and how
/// many processor stanzas there are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    pub vendor: Option<String>,
    pub model_name: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub flags: Vec<String>,
    pub processors: usize,
}

pub fn parse_cpuinfo(text: &str) -> Result<CpuInfo, ParseError> {
    let mut info = CpuInfo::default();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        at += line.len();
        let line = line.strip_suffix('\n').map_or(line, |l| l.strip_suffix('\r').unwrap_or(l));
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        if key == "processor" {
            info.processors += 1;
        }
        // Only the first stanza describes "the" CPU; later ones repeat it (or, on hybrid
        // parts, differ only in ways we read from sysfs instead): past it, only the
        // `processor` lines are counted, found by searching for the word (a 256-CPU server's
        // half-megabyte cpuinfo split line by line was a fifth of a `validate`).
        if info.processors > 1 {
            info.processors += processor_lines(&text[at..]);
            break;
        }
        match key {
            "vendor_id" => info.vendor = Some(value.to_string()),
            "model name" => info.model_name = Some(value.to_string()),
            "cpu family" => info.family = value.parse().ok(),
            "model" => info.model = value.parse().ok(),
            "flags" => {
                let mut flags: Vec<String> = value.split_whitespace().map(str::to_string).collect();
                flags.sort();
                flags.dedup();
                info.flags = flags;
            }
            _ => {}
        }
    }
    if info.processors == 0 {
        return Err(ParseError::new("no \"processor\" entries"));
    }
    Ok(info)
}

/// How many lines of `text` have `processor` as their key: the text before the line's first
/// `:` is the word, give or take whitespace (what the line loop of [`parse_cpuinfo`] counts).
fn processor_lines(text: &str) -> usize {
    const WORD: &str = "processor";
    let blank = |s: &str| s.chars().all(char::is_whitespace);
    // memchr's SIMD search: `str::match_indices` walked a 32-CPU cpuinfo at about three
    // instructions a byte, a twentieth of `facts`.
    memchr::memmem::find_iter(text.as_bytes(), WORD)
        .filter(|&i| {
            let start = text[..i].rfind('\n').map_or(0, |n| n + 1);
            let after = &text[i + WORD.len()..];
            let line = &after[..after.find('\n').unwrap_or(after.len())];
            blank(&text[start..i]) && line.split_once(':').is_some_and(|(gap, _)| blank(gap))
        })
        .count()
}

/// `Key: value` lines into a map, values trimmed. Lines without a colon are skipped.
pub fn parse_colon_map(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// /proc/meminfo: the value of `key` in KiB.
pub fn parse_meminfo_kib(text: &str, key: &str) -> Result<u64, ParseError> {
    let map = parse_colon_map(text);
    let value = map.get(key).ok_or_else(|| ParseError::new(format!("no {key} line")))?;
    kib(value)
}

/// /sys/devices/system/node/nodeN/meminfo: `Node 0 MemTotal:  123 kB`.
pub fn parse_node_meminfo_kib(text: &str, key: &str) -> Result<u64, ParseError> {
    for line in text.lines() {
        let Some((left, value)) = line.split_once(':') else {
            continue;
        };
        if left.split_whitespace().last() == Some(key) {
            return kib(value);
        }
    }
    Err(ParseError::new(format!("no {key} line")))
}

fn kib(value: &str) -> Result<u64, ParseError> {
    let number = value.trim().trim_end_matches("kB").trim();
    number.parse().map_err(|_| ParseError::new(format!("{value:?} is not a size in kB")))
}

/// os-release: `KEY=value` or `KEY="value"`, comments and blank lines skipped.
pub fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim();
            let unquoted = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            map.insert(key.trim().to_string(), unquoted.to_string());
        }
    }
    map
}

/// A sysfs id such as `0x8086`.
pub fn parse_hex_id(text: &str) -> Result<u32, ParseError> {
    let trimmed = text.trim();
    let digits = trimmed.strip_prefix("0x").unwrap_or(trimmed);
    u32::from_str_radix(digits, 16).map_err(|_| ParseError::new(format!("{trimmed:?} is not a hex id")))
}

/// A decimal sysfs value such as `16`.
pub fn parse_u64(text: &str) -> Result<u64, ParseError> {
    let trimmed = text.trim();
    trimmed.parse().map_err(|_| ParseError::new(format!("{trimmed:?} is not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 183\n\
model name\t: 13th Gen Intel(R) Core(TM) i9-13900T\nflags\t\t: fpu sse avx2 avx_vnni\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: other\nflags\t\t: fpu\n";

    /// The search past the first stanza counts what a line-by-line count counts: each
    /// fixture host's cpuinfo, and lines where the word is a value, a prefix, spaced or
    /// missing its colon.
    #[test]
    fn processors_are_counted_as_lines_whose_key_is_processor() {
        let by_lines = |text: &str| {
            text.lines().filter_map(|l| l.split_once(':')).filter(|(k, _)| k.trim() == "processor").count()
        };
        let mut texts: Vec<String> = vec![
            CPUINFO.into(),
            "processor: 0\nmodel name: a processor\nprocessors : 2\n  processor\t : 1\nprocessor\nxprocessor: 3\n\
processor\r\n processor \r: 4\r\nprocessor:5"
                .into(),
            "processor: 0\nprocessor: 1\n\nprocessor".into(),
        ];
        let hosts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
        for host in std::fs::read_dir(hosts).unwrap() {
            if let Ok(text) = std::fs::read_to_string(host.unwrap().path().join("proc/cpuinfo")) {
                texts.push(text);
            }
        }
        assert!(texts.len() > 5);
        for text in &texts {
            assert_eq!(parse_cpuinfo(text).map(|i| i.processors).unwrap_or(0), by_lines(text), "{text:.200}");
        }
    }

    #[test]
    fn cpuinfo_reads_the_first_stanza() {
        let info = parse_cpuinfo(CPUINFO).unwrap();
        assert_eq!(info.model_name.as_deref(), Some("13th Gen Intel(R) Core(TM) i9-13900T"));
        assert_eq!(info.family, Some(6));
        assert_eq!(info.model, Some(183));
        assert_eq!(info.flags, ["avx2", "avx_vnni", "fpu", "sse"]);
        assert_eq!(info.processors, 2);
    }

    #[test]
    fn cpuinfo_without_processors_is_an_error() {
        assert!(parse_cpuinfo("\u{0}\u{7f}garbage").is_err());
    }

    #[test]
    fn meminfo_values() {
        let text = "MemTotal:       65536000 kB\nMemAvailable:   1234 kB\n";
        assert_eq!(parse_meminfo_kib(text, "MemTotal").unwrap(), 65_536_000);
        assert_eq!(parse_meminfo_kib(text, "MemAvailable").unwrap(), 1234);
        assert!(parse_meminfo_kib(text, "SwapTotal").is_err());
        assert!(parse_meminfo_kib("MemTotal: lots kB", "MemTotal").is_err());
        let node = "Node 1 MemTotal:       32768000 kB\nNode 1 MemFree: 1 kB\n";
        assert_eq!(parse_node_meminfo_kib(node, "MemTotal").unwrap(), 32_768_000);
    }

    #[test]
    fn os_release_quotes() {
        let map = parse_os_release("# c\nID=ubuntu\nVERSION_ID=\"26.04\"\nPRETTY_NAME='Ubuntu'\n");
        assert_eq!(map["ID"], "ubuntu");
        assert_eq!(map["VERSION_ID"], "26.04");
        assert_eq!(map["PRETTY_NAME"], "Ubuntu");
    }

    #[test]
    fn ids_and_numbers() {
        assert_eq!(parse_hex_id("0x8086\n").unwrap(), 0x8086);
        assert!(parse_hex_id("0xZZZZ").is_err());
        assert_eq!(parse_u64(" 16\n").unwrap(), 16);
        assert!(parse_u64("n/a").is_err());
    }
}
