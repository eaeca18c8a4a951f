//! `[cluster] volumes`: the user's own host directories in the nodes, as k3d's `volumes`
//! with node filters. Kept apart from the mounts k3d-gpu itself needs (`cluster.rs`
//! `volumes`): these are recorded under their own spec key, `user_volumes`, so either list
//! changes without touching the other.
//!
//! Pure: whether a source exists, and what it is with its links resolved
//! (`Config::host_paths`), is the command edge's check (`commands::inputs::volume_sources`) at
//! plan time, and apply's again right before
//! k3d runs (Docker would create a missing source as an empty root-owned directory).

use serde_json::{Value, json};

use super::ports::{FilterUse, filter_problem};
use super::{CompileError, Context};

/// The node directory k3d-gpu's own host mounts live under (`cluster.rs`); a user volume
/// there would shadow or be shadowed by one of them.
const RESERVED: [&str; 4] = ["/k3d-gpu", "/usr/lib/wsl", "/dev/char", "/"];

/// Why mounting the host's `path` into the nodes (and so into any pod that asks for a
/// hostPath there) hands out more than files, or `None`. Not refused: a person may mean it;
/// the plan says so, as it does for a port published on every interface.
pub(crate) fn sensitive(path: &str) -> Option<&'static str> {
    let p = path.trim_end_matches('/');
    let under = |dir: &str| p == dir || p.starts_with(&format!("{dir}/"));
    if p.ends_with("docker.sock") || p.ends_with("containerd.sock") || p.ends_with("podman.sock") {
        return Some("a container engine's socket: whoever can use it is root on the host");
    }
    if p.split('/').any(|part| matches!(part, ".ssh" | ".gnupg" | ".kube" | ".docker" | ".aws" | ".password-store")) {
        return Some("a directory of keys and credentials");
    }
    const SYSTEM: [&str; 14] = [
        "/etc",
        "/root",
        "/boot",
        "/proc",
        "/sys",
        "/dev",
        "/run",
        "/var/run",
        "/var/lib/docker",
        "/var/lib/containerd",
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
    ];
    if p.is_empty() || SYSTEM.iter().any(|d| under(d)) {
        return Some("the host's own system files");
    }
    if p == "/home" {
        return Some("every user's home directory");
    }
    None
}

/// One `[cluster] volumes` entry, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub host: String,
    pub node: String,
    pub read_only: bool,
    /// k3d node filters; empty: every node.
    pub nodes: Vec<String>,
}

/// Why `path` is not an absolute path a bind mount can carry, or `None`.
fn path_problem(path: &str) -> Option<&'static str> {
    let p = std::path::Path::new(path);
    if !p.is_absolute() {
        Some("is not an absolute path")
    } else if p.components().any(|c| matches!(c, std::path::Component::ParentDir | std::path::Component::CurDir)) {
        Some("holds a '.' or '..' component")
    } else if path.chars().any(|c| c.is_control() || matches!(c, ':' | '@' | ';' | ',')) {
        Some("holds a control character or one of : @ ; , (which a k3d volume cannot carry)")
    } else if path.len() > 4096 {
        Some("is longer than 4096 bytes")
    } else {
        None
    }
}

/// Why an entry is not a volume; the text follows the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadVolume {
    #[error("mode {0:?} is not ro or rw")]
    Mode(String),
    #[error("is not /host/path:/node/path[:ro|:rw]")]
    Shape,
    #[error("host path {0}")]
    HostPath(&'static str),
    #[error("node path {0}")]
    NodePath(&'static str),
}

/// Parses `/host:/node[:ro|:rw][@FILTER[;FILTER]]`. Read-only unless `:rw`.
pub fn parse(entry: &str) -> Result<Volume, BadVolume> {
    let (mapping, nodes) = match entry.split_once('@') {
        Some((m, f)) => (m, f.split(';').map(str::to_string).collect()),
        None => (entry, Vec::new()),
    };
    let parts: Vec<&str> = mapping.split(':').collect();
    let (host, node, read_only) = match parts.as_slice() {
        [host, node] => (*host, *node, true),
        [host, node, "ro"] => (*host, *node, true),
        [host, node, "rw"] => (*host, *node, false),
        [_, _, mode] => return Err(BadVolume::Mode(mode.to_string())),
        _ => return Err(BadVolume::Shape),
    };
    if let Some(why) = path_problem(host) {
        return Err(BadVolume::HostPath(why));
    }
    if let Some(why) = path_problem(node) {
        return Err(BadVolume::NodePath(why));
    }
    // Trailing slashes name the same directory; compared and recorded without them.
    let clean = |p: &str| if p.len() > 1 { p.trim_end_matches('/').to_string() } else { p.to_string() };
    Ok(Volume { host: clean(host), node: clean(node), read_only, nodes })
}

impl Volume {
    pub fn spec(&self) -> Value {
        json!({ "host": self.host, "node": self.node, "read_only": self.read_only, "nodes": self.nodes })
    }
}

/// The compiled `[cluster] volumes`.
pub(super) fn volumes(cx: &mut Context) -> Vec<Value> {
    let cluster = &cx.config.cluster;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (i, entry) in cluster.volumes.iter().enumerate() {
        let bad = |message: String| {
            CompileError::new(
                "bad-volume",
                &["cluster", "volumes"],
                crate::escape::capped(format!("volume {}: {message}", crate::escape::quoted(entry))),
                Some(
                    "write it as \"/host/dir:/node/dir\", \":rw\" to make it writable, \"@agent:0\" for one node"
                        .to_string(),
                ),
            )
            .at_element(Some(i))
        };
        let volume = match parse(entry) {
            Ok(v) => v,
            Err(why) => {
                errors.push(bad(why.to_string()));
                continue;
            }
        };
        if let Some(why) =
            volume.nodes.iter().find_map(|f| filter_problem(f, cluster.servers, cluster.agents, FilterUse::Volume))
        {
            errors.push(bad(format!("node filter: {why}")));
            continue;
        }
        let under = |dir: &str| volume.node == dir || (dir != "/" && volume.node.starts_with(&format!("{dir}/")));
        if let Some(dir) = RESERVED.iter().find(|d| under(d)) {
            let place = if *dir == "/" {
                "the node's root".to_string()
            } else {
                format!("under {dir}, where k3d-gpu mounts the host's own files")
            };
            errors.push(bad(format!("node path {} is {place}", volume.node)));
            continue;
        }
        if seen.contains(&volume.node) {
            errors.push(bad(format!("node path {} is mounted twice", volume.node)));
            continue;
        }
        seen.push(volume.node.clone());
        // Judged by what Docker mounts: a link's target, where the edge resolved one.
        let resolved = cx.config.host_paths.volumes.get(&volume.host);
        if let Some(why) = sensitive(resolved.unwrap_or(&volume.host)) {
            let mode = if volume.read_only { "read-only" } else { "read-write" };
            let through = resolved.map(|r| format!(" (a link to {})", crate::escape::quoted(r))).unwrap_or_default();
            warnings.push(format!(
                "volume {}: the host's {}{through} is {why}; it is mounted {mode} into the nodes",
                crate::escape::quoted(entry),
                crate::escape::quoted(&volume.host)
            ));
        }
        if ["/etc/rancher", "/var/lib/rancher", "/etc"].iter().any(|d| under(d)) {
            warnings.push(format!(
                "volume {}: node path {} covers the node's own k3s configuration and state",
                crate::escape::quoted(entry),
                crate::escape::quoted(&volume.node)
            ));
        }
        out.push(volume.spec());
    }
    for e in errors {
        cx.error(e);
    }
    for w in warnings {
        cx.warn("volume-sensitive-path", Some("cluster.volumes"), w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_read_only_unless_asked() {
        let v = parse("/srv/models:/models").unwrap();
        assert_eq!((v.host.as_str(), v.node.as_str(), v.read_only), ("/srv/models", "/models", true));
        assert!(v.nodes.is_empty());
        assert!(!parse("/srv/data/:/data:rw@agent:0;server:0").unwrap().read_only);
        assert_eq!(parse("/srv/data/:/data:rw@agent:0;server:0").unwrap().host, "/srv/data");
        assert_eq!(parse("/a:/b@agent:*").unwrap().nodes, ["agent:*"]);
        assert_eq!(parse("/srv:models"), Err(BadVolume::NodePath("is not an absolute path")));
        assert_eq!(parse("/srv:/m:rx"), Err(BadVolume::Mode("rx".into())));
        for bad in ["srv:/models", "/srv:models", "/srv:/m:rx", "/srv", "/a/../b:/c", "/a:/b:ro:x", "/a\n:/b"] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn sensitive_host_paths_are_named() {
        for (path, said) in [
            ("/var/run/docker.sock", "socket"),
            ("/run/containerd/containerd.sock", "socket"),
            ("/home/me/.ssh", "keys"),
            ("/home/me/.kube/", "keys"),
            ("/etc", "system"),
            ("/etc/rancher/k3s", "system"),
            ("/", "system"),
            ("/home", "home"),
        ] {
            assert!(sensitive(path).is_some_and(|why| why.contains(said)), "{path}: {:?}", sensitive(path));
        }
        for fine in ["/srv/models", "/home/me/datasets", "/data", "/etcetera", "/mnt/usb"] {
            assert_eq!(sensitive(fine), None, "{fine}");
        }
    }
}
