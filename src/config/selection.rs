//! Keys that take either a word or a value: `"auto"` or a list of vendors, `"auto"` or a
//! number of pods per GPU, `"auto"`/`"off"` or a list of experimental features, one GPU path
//! for every vendor or a table of them.
//!
//! Hand-written so a mistake reads like the others ("expected "auto" or a list of …") instead
//! of serde's "data did not match any variant".

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::GpuMode;
use crate::facts::Vendor;

/// `[sharing] mode`: the path GPUs take to pods, `"plugin"` or `"dra"` for every vendor, or a
/// table that gives Intel and NVIDIA each their own (`{ intel = "dra", nvidia = "plugin" }`; a
/// vendor left out of the table takes the plugin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharingMode {
    All(GpuMode),
    PerVendor { intel: GpuMode, nvidia: GpuMode },
}

impl Default for SharingMode {
    fn default() -> Self {
        SharingMode::All(GpuMode::Plugin)
    }
}

impl SharingMode {
    pub fn intel(self) -> GpuMode {
        match self {
            SharingMode::All(mode) | SharingMode::PerVendor { intel: mode, .. } => mode,
        }
    }

    pub fn nvidia(self) -> GpuMode {
        match self {
            SharingMode::All(mode) | SharingMode::PerVendor { nvidia: mode, .. } => mode,
        }
    }

    /// The TOML a user writes for this setting, for hints.
    pub fn toml(self) -> String {
        let word = |m: GpuMode| match m {
            GpuMode::Plugin => "plugin",
            GpuMode::Dra => "dra",
        };
        match self {
            SharingMode::All(mode) => format!("mode = \"{}\"", word(mode)),
            SharingMode::PerVendor { intel, nvidia } => {
                format!("mode = {{ intel = \"{}\", nvidia = \"{}\" }}", word(intel), word(nvidia))
            }
        }
    }
}

/// `"auto"` or an explicit list of vendors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum VendorSelection {
    #[default]
    Auto,
    Only(Vec<Vendor>),
}

/// `"auto"` or a fixed number of pods per Intel GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Shared {
    #[default]
    Auto,
    Pods(u32),
}

/// `"auto"`, `"off"`, or exactly these features.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ExperimentalSelection {
    #[default]
    Auto,
    Off,
    Only(Vec<Feature>),
}

/// Experimental features k3d-gpu knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Feature {
    /// Kubernetes Dynamic Resource Allocation gates.
    Dra,
    /// The ImageVolume gate (OCI images as volumes, e.g. model weights).
    ImageVolume,
    /// The OpenVINO NPU turbo property, through a plugin-config ConfigMap.
    NpuTurbo,
    /// sched_ext schedulers: needs a host kernel change.
    SchedExt,
    /// xe SR-IOV: needs a host kernel change.
    XeSriov,
    /// force_probe for parts newer than the kernel: needs a host boot option.
    ForceProbe,
}

impl Feature {
    pub const ALL: [Feature; 6] = [
        Feature::Dra,
        Feature::ImageVolume,
        Feature::NpuTurbo,
        Feature::SchedExt,
        Feature::XeSriov,
        Feature::ForceProbe,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Feature::Dra => "dra",
            Feature::ImageVolume => "image-volume",
            Feature::NpuTurbo => "npu-turbo",
            Feature::SchedExt => "sched-ext",
            Feature::XeSriov => "xe-sriov",
            Feature::ForceProbe => "force-probe",
        }
    }

    fn parse(name: &str) -> Result<Feature, Refused> {
        Feature::ALL.into_iter().find(|f| f.key() == name).ok_or_else(|| Refused::UnknownFeature {
            name: name.to_string(),
            closest: crate::suggest::closest(name, Feature::ALL.map(Feature::key)).map(|s| s.to_string()),
        })
    }
}

fn vendor(name: &str) -> Result<Vendor, Refused> {
    Ok(name.parse::<Vendor>()?)
}

/// Why a selection's word or list item was refused; serde puts it on the config's line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Refused {
    #[error(transparent)]
    UnknownVendor(#[from] crate::facts::vendors::UnknownVendor),
    #[error(
        "unknown experimental feature {}{}; known: {}",
        crate::escape::quoted(name),
        closest.as_ref().map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default(),
        Feature::ALL.map(Feature::key).join(", ")
    )]
    UnknownFeature { name: String, closest: Option<String> },
    /// A word where only "auto" is: the list it may have meant.
    #[error("expected \"auto\" or a list such as [{}], found {}", crate::escape::quoted(.0), crate::escape::quoted(.0))]
    NotAuto(String),
    /// One known feature given as a word, not a list (a known name: nothing to escape).
    #[error("write a list: [\"{0}\"] (or \"auto\", \"off\")")]
    NotAList(String),
}

/// Visits either a string (a word) or a sequence of names, each parsed into an `I`; the list
/// is sorted and deduplicated before `list` wraps it.
struct WordOrList<T, I> {
    expecting: &'static str,
    word: fn(&str) -> Result<T, Refused>,
    item: fn(&str) -> Result<I, Refused>,
    list: fn(Vec<I>) -> T,
}

impl<'de, T, I: Ord> Visitor<'de> for WordOrList<T, I> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.word)(v).map_err(E::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        let mut items = Vec::new();
        while let Some(name) = seq.next_element::<String>()? {
            items.push((self.item)(&name).map_err(de::Error::custom)?);
        }
        items.sort();
        items.dedup();
        Ok((self.list)(items))
    }
}

impl<'de> Deserialize<'de> for VendorSelection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(WordOrList {
            expecting: "\"auto\" or a list of vendors",
            word: |w| match w {
                "auto" => Ok(VendorSelection::Auto),
                _ => Err(Refused::NotAuto(w.to_string())),
            },
            item: vendor,
            list: VendorSelection::Only,
        })
    }
}

impl<'de> Deserialize<'de> for ExperimentalSelection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(WordOrList {
            expecting: "\"auto\", \"off\" or a list of features",
            word: |w| match w {
                "auto" => Ok(ExperimentalSelection::Auto),
                "off" => Ok(ExperimentalSelection::Off),
                _ => Feature::parse(w).and(Err(Refused::NotAList(w.to_string()))),
            },
            item: Feature::parse,
            list: ExperimentalSelection::Only,
        })
    }
}

impl<'de> Deserialize<'de> for Shared {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SharedVisitor;
        impl<'de> Visitor<'de> for SharedVisitor {
            type Value = Shared;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"auto\" or a number of pods per GPU (1 or more)")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Shared, E> {
                match v {
                    "auto" => Ok(Shared::Auto),
                    _ => Err(E::custom(format!(
                        "expected \"auto\" or a number of pods per GPU, found {}",
                        crate::escape::quoted(v)
                    ))),
                }
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Shared, E> {
                match u32::try_from(v) {
                    Ok(n) if n >= 1 => Ok(Shared::Pods(n)),
                    _ => Err(E::custom(format!("pods per GPU must be 1 or more, found {v}"))),
                }
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Shared, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
        d.deserialize_any(SharedVisitor)
    }
}

/// The table form of [`SharingMode`], read by serde so an unknown vendor key is refused.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct VendorModes {
    #[serde(default)]
    intel: GpuMode,
    #[serde(default)]
    nvidia: GpuMode,
}

impl<'de> Deserialize<'de> for SharingMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ModeVisitor;
        impl<'de> Visitor<'de> for ModeVisitor {
            type Value = SharingMode;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"plugin\", \"dra\", or a table such as { intel = \"dra\", nvidia = \"plugin\" }")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<SharingMode, E> {
                match v {
                    "plugin" => Ok(SharingMode::All(GpuMode::Plugin)),
                    "dra" => Ok(SharingMode::All(GpuMode::Dra)),
                    _ => Err(E::custom(format!(
                        "expected \"plugin\", \"dra\", or a table such as {{ intel = \"dra\", nvidia = \"plugin\" }}, found \"{v}\""
                    ))),
                }
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SharingMode, A::Error> {
                let modes = VendorModes::deserialize(MapAccessDeserializer::new(map))?;
                Ok(SharingMode::PerVendor { intel: modes.intel, nvidia: modes.nvidia })
            }
        }
        d.deserialize_any(ModeVisitor)
    }
}

impl Serialize for SharingMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            SharingMode::All(mode) => mode.serialize(s),
            SharingMode::PerVendor { intel, nvidia } => VendorModes { intel, nvidia }.serialize(s),
        }
    }
}

impl Serialize for VendorSelection {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            VendorSelection::Auto => s.serialize_str("auto"),
            // A vendor serialises as its key (tested below).
            VendorSelection::Only(list) => s.collect_seq(list),
        }
    }
}

impl Serialize for ExperimentalSelection {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ExperimentalSelection::Auto => s.serialize_str("auto"),
            ExperimentalSelection::Off => s.serialize_str("off"),
            // A feature serialises as its key (tested below).
            ExperimentalSelection::Only(list) => s.collect_seq(list),
        }
    }
}

impl Serialize for Shared {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Shared::Auto => s.serialize_str("auto"),
            Shared::Pods(n) => s.serialize_u32(*n),
        }
    }
}

impl JsonSchema for VendorSelection {
    fn schema_name() -> Cow<'static, str> {
        "VendorSelection".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Vendor::ALL.iter().map(|v| v.key()).collect();
        json_schema!({
            "description": "\"auto\" or a list of vendor keys",
            "oneOf": [
                { "const": "auto" },
                { "type": "array", "items": { "enum": names }, "uniqueItems": true }
            ]
        })
    }
}

impl JsonSchema for ExperimentalSelection {
    fn schema_name() -> Cow<'static, str> {
        "ExperimentalSelection".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Feature::ALL.iter().map(|f| f.key()).collect();
        json_schema!({
            "description": "\"auto\", \"off\", or a list of experimental features",
            "oneOf": [
                { "enum": ["auto", "off"] },
                { "type": "array", "items": { "enum": names }, "uniqueItems": true }
            ]
        })
    }
}

impl JsonSchema for Shared {
    fn schema_name() -> Cow<'static, str> {
        "Shared".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "\"auto\" or a number of pods per GPU",
            "oneOf": [ { "const": "auto" }, { "type": "integer", "minimum": 1 } ]
        })
    }
}

impl JsonSchema for SharingMode {
    fn schema_name() -> Cow<'static, str> {
        "SharingMode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let modes = ["plugin", "dra"];
        json_schema!({
            "description": "\"plugin\" or \"dra\" for every vendor's GPUs, or a path per vendor",
            "oneOf": [
                { "enum": modes },
                {
                    "type": "object",
                    "properties": { "intel": { "enum": modes }, "nvidia": { "enum": modes } },
                    "additionalProperties": false
                }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_word_keeps_what_was_written_and_the_closest() {
        let unknown = Feature::parse("dar").unwrap_err();
        assert_eq!(unknown, Refused::UnknownFeature { name: "dar".into(), closest: Some("dra".into()) });
        assert!(
            unknown
                .to_string()
                .starts_with("unknown experimental feature \"dar\" (did you mean \"dra\"?); known: dra,")
        );
        assert!(matches!(vendor("nvdia"), Err(Refused::UnknownVendor(_))));
        // What was written is shown escaped, on the diagnostic's one line.
        let forged = Feature::parse("x\n  fix: rm -rf ~").unwrap_err().to_string();
        assert!(forged.starts_with(r#"unknown experimental feature "x\n  fix: rm -rf ~""#), "{forged}");
        assert!(!Refused::NotAuto("a\nb".into()).to_string().contains('\n'));
    }

    #[test]
    fn a_sharing_mode_is_a_word_or_a_table_per_vendor() {
        let all: SharingMode = serde_json::from_str(r#""dra""#).unwrap();
        assert_eq!((all.intel(), all.nvidia()), (GpuMode::Dra, GpuMode::Dra));
        let split: SharingMode = serde_json::from_str(r#"{"nvidia": "dra"}"#).unwrap();
        assert_eq!(
            (split.intel(), split.nvidia()),
            (GpuMode::Plugin, GpuMode::Dra),
            "a vendor left out takes the plugin"
        );
        assert_eq!(serde_json::to_string(&split).unwrap(), r#"{"intel":"plugin","nvidia":"dra"}"#);
        assert_eq!(serde_json::to_string(&all).unwrap(), r#""dra""#);
        assert_eq!(split.toml(), r#"mode = { intel = "plugin", nvidia = "dra" }"#);
        let e = serde_json::from_str::<SharingMode>(r#""DRA""#).unwrap_err().to_string();
        assert!(e.contains(r#"expected "plugin", "dra", or a table"#), "{e}");
        let e = serde_json::from_str::<SharingMode>(r#"{"amd": "dra"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown field `amd`"), "{e}");
    }

    #[test]
    fn vendors_and_features_serialise_as_their_keys() {
        for v in Vendor::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.key());
        }
        for f in Feature::ALL {
            assert_eq!(serde_json::to_value(f).unwrap(), f.key());
        }
    }

    #[test]
    fn lists_are_sorted_deduplicated_and_round_trip() {
        let vendors: VendorSelection = serde_json::from_str(r#"["npu", "intel", "npu"]"#).unwrap();
        assert_eq!(vendors, VendorSelection::Only(vec![Vendor::Intel, Vendor::Npu]));
        assert_eq!(serde_json::to_string(&vendors).unwrap(), r#"["intel","npu"]"#);
        let features: ExperimentalSelection = serde_json::from_str(r#"["npu-turbo", "dra", "dra"]"#).unwrap();
        assert_eq!(features, ExperimentalSelection::Only(vec![Feature::Dra, Feature::NpuTurbo]));
        assert_eq!(serde_json::to_string(&features).unwrap(), r#"["dra","npu-turbo"]"#);
        assert_eq!(serde_json::from_str::<ExperimentalSelection>(r#""off""#).unwrap(), ExperimentalSelection::Off);
        let e = serde_json::from_str::<ExperimentalSelection>(r#""dra""#).unwrap_err().to_string();
        assert!(e.contains(r#"write a list: ["dra"]"#), "{e}");
        let e = serde_json::from_str::<VendorSelection>(r#"["intle"]"#).unwrap_err().to_string();
        assert!(e.contains("unknown vendor"), "{e}");
    }
}
