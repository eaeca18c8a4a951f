//! GuC/HuC records from i915/xe debugfs (`gt0/uc/guc_info`, `huc_info`).
//!
//! Both drivers print the firmware path, a status word and `version: wanted X, found Y`;
//! later lines (uCode size, RSA, submission state) are ignored.

use serde::{Deserialize, Serialize};

use super::ParseError;

/// A dotted firmware version; missing parts read as 0 so `70.5` equals `70.5.0`.
/// Serialised as its dotted string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Version::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not a version")))
    }
}

impl Version {
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().trim_end_matches(',').split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        if parts.next().is_some() {
            return None;
        }
        Some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UcInfo {
    pub firmware: Option<String>,
    pub status: Option<String>,
    pub wanted: Option<Version>,
    pub found: Option<Version>,
}

pub fn parse_uc_info(text: &str) -> Result<UcInfo, ParseError> {
    let mut info = UcInfo::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim();
            if key.ends_with("firmware") && info.firmware.is_none() {
                info.firmware = Some(value.to_string());
            } else if key == "status" {
                info.status = Some(value.to_string());
            } else if key == "version" {
                let words: Vec<&str> = value.split_whitespace().collect();
                for pair in words.windows(2) {
                    match pair[0] {
                        "wanted" => info.wanted = Version::parse(pair[1]),
                        "found" => info.found = Version::parse(pair[1]),
                        _ => {}
                    }
                }
            }
        }
    }
    if info.status.is_none() && info.firmware.is_none() {
        return Err(ParseError::new("no firmware or status line"));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i915_guc_record() {
        let text = "GuC firmware: i915/tgl_guc_70.1.1.bin\n\tstatus: RUNNING\n\
\tversion: wanted 70.5.1, found 70.1.1\n\tuCode: 345216 bytes\n";
        let info = parse_uc_info(text).unwrap();
        assert_eq!(info.firmware.as_deref(), Some("i915/tgl_guc_70.1.1.bin"));
        assert_eq!(info.status.as_deref(), Some("RUNNING"));
        assert_eq!(info.wanted, Some(Version(70, 5, 1)));
        assert_eq!(info.found, Some(Version(70, 1, 1)));
        assert!(info.found < info.wanted);
    }

    #[test]
    fn huc_without_wanted() {
        let info =
            parse_uc_info("HuC firmware: i915/tgl_huc.bin\n\tstatus: LOAD FAIL\n\tversion: found 7.9.3\n").unwrap();
        assert_eq!(info.status.as_deref(), Some("LOAD FAIL"));
        assert_eq!(info.wanted, None);
        assert_eq!(info.found, Some(Version(7, 9, 3)));
    }

    #[test]
    fn versions() {
        assert_eq!(Version::parse("70.5"), Some(Version(70, 5, 0)));
        assert_eq!(Version::parse("x.1"), None);
        assert_eq!(Version::parse("1.2.3.4"), None);
        assert!(parse_uc_info("nothing here").is_err());
        // "GuC disabled" style records name the firmware but have no status.
        let disabled = parse_uc_info("GuC firmware: i915/tgl_guc_70.bin\n\tGuC disabled\n").unwrap();
        assert_eq!(disabled.status, None);
    }
}
