//! Owner, group and mode of device nodes.
//!
//! Pods get a device node with the host's owner and mode, so a non-root pod needs the node's
//! group. Fixture hosts record these in `.k3d-gpu-stat` (`MODE UID GID PATH` per line) because
//! git stores none of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const SIDECAR: &str = ".k3d-gpu-stat";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStat {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Default for NodeStat {
    fn default() -> Self {
        NodeStat { mode: 0o660, uid: 0, gid: 0 }
    }
}

pub(super) fn from_meta(meta: &super::resolve::Meta) -> NodeStat {
    NodeStat { mode: meta.mode, uid: meta.uid, gid: meta.gid }
}

pub fn parse_sidecar(text: &str) -> BTreeMap<String, NodeStat> {
    let mut table = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let [mode, uid, gid, path] = fields[..]
            && let (Ok(mode), Ok(uid), Ok(gid)) = (u32::from_str_radix(mode, 8), uid.parse(), gid.parse())
        {
            table.insert(path.to_string(), NodeStat { mode, uid, gid });
        }
    }
    table
}

pub fn format_sidecar(table: &BTreeMap<String, NodeStat>) -> String {
    table.iter().map(|(path, s)| format!("{:04o} {} {} {}\n", s.mode, s.uid, s.gid, path)).collect()
}
