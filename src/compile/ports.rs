//! `[cluster] ports`: extra host ports through k3d's load balancer (or on one node), and the
//! k3d node filters that `ports` and `volumes` share.
//!
//! An entry is spelled as k3d's `--port` flag spells it, `[ADDRESS:]HOST:CONTAINER[/PROTO]
//! [@FILTER]`; the compiled spec keeps its parts apart (`host_ip`, `host_port`,
//! `container_port`, `protocol`, `nodes`) and the k3d config joins them again
//! (`apply::k3d::simple_config`). The address defaults to loopback, unlike k3d's and Docker's
//! (every interface).

use serde_json::{Value, json};

use super::{CompileError, Context};

/// Which node filters an entry may carry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum FilterUse {
    /// A port: `loadbalancer` too, and a `:direct` or `:proxy` suffix.
    Port,
    /// A volume: nodes only.
    Volume,
}

/// Why `filter` is not a k3d node filter of this cluster, or `None`. k3d's grammar
/// (k3d-io/k3d v5.9.0, `pkg/util/filter.go` `NodeFilterRegexp`): a group `server(s)`,
/// `agent(s)`, `loadbalancer` or `all`, then optionally `:*`, `:N` or `:N,M`, then
/// optionally `:suffix`. Ranges (`:0-2`) are left out: an index list says the same.
pub(super) fn filter_problem(filter: &str, servers: u32, agents: u32, usage: FilterUse) -> Option<String> {
    let mut parts = filter.split(':');
    let group = parts.next().unwrap_or_default();
    let subset = parts.next();
    let suffix = parts.next();
    if parts.next().is_some() {
        return Some("has more than three ':'-separated parts".into());
    }
    let count = match group {
        "server" | "servers" => Some(servers),
        "agent" | "agents" => Some(agents),
        "loadbalancer" if usage == FilterUse::Port => None,
        "all" => None,
        "loadbalancer" => return Some("names the load balancer, which has no volumes".into()),
        _ => return Some("must start with server, agent, all or loadbalancer".into()),
    };
    match (count, subset) {
        (_, None) | (_, Some("*")) => {}
        (None, Some(_)) => return Some(format!("{group} takes no node index")),
        (Some(count), Some(list)) => {
            for index in list.split(',') {
                match index.parse::<u32>() {
                    Ok(i) if i < count => {}
                    Ok(i) => return Some(format!("{group}:{i} is not a node of this cluster ({count} {group})")),
                    Err(_) => return Some(format!("{index:?} is not a node index (a number, or *)")),
                }
            }
        }
    }
    match (suffix, usage) {
        (None, _) => None,
        (Some("direct" | "proxy"), FilterUse::Port) => None,
        (Some(s), FilterUse::Port) => Some(format!("suffix {s:?} is not direct or proxy")),
        (Some(_), FilterUse::Volume) => Some("a volume's filter takes no suffix".into()),
    }
}

/// One `[cluster] ports` entry, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub host_ip: std::net::Ipv4Addr,
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: &'static str,
    pub nodes: Vec<String>,
}

/// Why an entry is not a k3d port mapping; the text follows the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPort {
    #[error("protocol {0:?} is not tcp or udp")]
    Protocol(String),
    #[error("an IPv6 host address is not supported: write an IPv4 address, or none for 127.0.0.1")]
    Ipv6,
    #[error("is not [ADDRESS:]HOST_PORT:CONTAINER_PORT (a k3d port mapping)")]
    Shape,
    #[error("{which} {text:?}: a port range is not supported; list each port")]
    Range { which: Which, text: String },
    #[error("{which} {text:?} is not a port (1-65535)")]
    Port { which: Which, text: String },
    #[error("host address {0:?} is not an IPv4 address")]
    Address(String),
}

/// Which side of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Host,
    Container,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::Host => "host port",
            Which::Container => "container port",
        })
    }
}

/// Parses `[ADDRESS:]HOST:CONTAINER[/tcp|/udp][@FILTER[;FILTER]]`; filters are checked by the
/// caller, which knows the cluster's shape.
pub fn parse(entry: &str) -> Result<Port, BadPort> {
    let (mapping, filters) = match entry.split_once('@') {
        Some((m, f)) => (m, f.split(';').map(str::to_string).collect()),
        None => (entry, vec!["loadbalancer".to_string()]),
    };
    let (mapping, protocol) = match mapping.rsplit_once('/') {
        Some((m, "tcp")) => (m, "tcp"),
        Some((m, "udp")) => (m, "udp"),
        Some((_, other)) => return Err(BadPort::Protocol(other.into())),
        None => (mapping, "tcp"),
    };
    if mapping.starts_with('[') {
        return Err(BadPort::Ipv6);
    }
    let parts: Vec<&str> = mapping.split(':').collect();
    let (address, host, container) = match parts.as_slice() {
        [host, container] => (None, *host, *container),
        [address, host, container] => (Some(*address), *host, *container),
        _ => return Err(BadPort::Shape),
    };
    let port = |which: Which, text: &str| match text.parse::<u16>() {
        Ok(0) | Err(_) if text.contains('-') => Err(BadPort::Range { which, text: text.into() }),
        Ok(p) if p > 0 => Ok(p),
        _ => Err(BadPort::Port { which, text: text.into() }),
    };
    let host_ip = match address {
        None => crate::config::DEFAULT_API_HOST_IP.parse().expect("the default is an IPv4 address"),
        Some(a) => a.parse().map_err(|_| BadPort::Address(a.into()))?,
    };
    Ok(Port {
        host_ip,
        host_port: port(Which::Host, host)?,
        container_port: port(Which::Container, container)?,
        protocol,
        nodes: filters,
    })
}

impl Port {
    /// The spec entry (what the cluster resource records and the plan compares).
    pub fn spec(&self) -> Value {
        json!({
            "host_ip": self.host_ip.to_string(),
            "host_port": self.host_port,
            "container_port": self.container_port,
            "protocol": self.protocol,
            "nodes": self.nodes,
        })
    }
}

/// k3d's `ports[].port` for a spec entry: `ADDRESS:HOST:CONTAINER/PROTO`, the address always
/// written (Docker's nat.ParsePortSpec binds every interface without one).
pub fn k3d_port(spec: &Value) -> String {
    format!(
        "{}:{}:{}/{}",
        spec["host_ip"].as_str().unwrap_or(crate::config::DEFAULT_API_HOST_IP),
        spec["host_port"],
        spec["container_port"],
        spec["protocol"].as_str().unwrap_or("tcp")
    )
}

/// The compiled `[cluster] ports`, checked against the cluster's shape and the API port.
pub(super) fn ports(cx: &mut Context) -> Vec<Value> {
    let cluster = &cx.config.cluster;
    let (servers, agents) = (cluster.servers, cluster.agents);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut taken: Vec<(std::net::Ipv4Addr, u16, &'static str, usize)> = Vec::new();
    if let (Some(port), Ok(ip)) = (cluster.api_port, cluster.api_host_ip.parse()) {
        taken.push((ip, port, "tcp", usize::MAX));
    }
    for (i, entry) in cluster.ports.iter().enumerate() {
        let bad = |message: String| {
            CompileError::new(
                "bad-port",
                &["cluster", "ports"],
                crate::escape::capped(format!("port {}: {message}", crate::escape::quoted(entry))),
                Some("write it as k3d does, e.g. \"8080:80@loadbalancer\" or \"192.168.1.5:8443:443/tcp\"".to_string()),
            )
            .at_element(Some(i))
        };
        let port = match parse(entry) {
            Ok(p) => p,
            Err(why) => {
                errors.push(bad(why.to_string()));
                continue;
            }
        };
        if let Some(why) = port.nodes.iter().find_map(|f| filter_problem(f, servers, agents, FilterUse::Port)) {
            errors.push(bad(format!("node filter: {why}")));
            continue;
        }
        let direct: Vec<&String> = port.nodes.iter().filter(|f| f.ends_with(":direct")).collect();
        if direct.len() > 1 || direct.iter().any(|f| f.contains('*') || f.contains(',') || f.starts_with("all")) {
            // k3d: "cannot apply a direct port-mapping to more than one node".
            errors.push(bad("a :direct mapping publishes on one node: name it as server:N or agent:N".into()));
            continue;
        }
        // Two bindings of one host address and port: Docker refuses the second at creation,
        // after k3d has made half the cluster. 0.0.0.0 overlaps every address.
        let clash = taken.iter().find(|(ip, p, proto, _)| {
            *p == port.host_port
                && *proto == port.protocol
                && (*ip == port.host_ip || ip.is_unspecified() || port.host_ip.is_unspecified())
        });
        if let Some((_, _, _, other)) = clash {
            let with =
                if *other == usize::MAX { "the API port".to_string() } else { format!("ports entry {}", other + 1) };
            errors.push(bad(format!("host port {} is already published by {with}", port.host_port)));
            continue;
        }
        taken.push((port.host_ip, port.host_port, port.protocol, i));
        if !port.host_ip.is_loopback() {
            warnings.push(format!(
                "port {} is published on {}{}: anyone who can reach this machine can reach what it forwards to",
                crate::escape::quoted(entry),
                port.host_ip,
                if port.host_ip.is_unspecified() { " (every interface)" } else { "" }
            ));
        }
        out.push(port.spec());
    }
    for e in errors {
        cx.error(e);
    }
    for w in warnings {
        cx.warn("port-published-off-loopback", Some("cluster.ports"), w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_as_k3d_spells_them() {
        let p = parse("8080:80@loadbalancer").unwrap();
        assert_eq!(
            (p.host_ip.to_string(), p.host_port, p.container_port, p.protocol),
            ("127.0.0.1".into(), 8080, 80, "tcp")
        );
        assert_eq!(p.nodes, ["loadbalancer"]);
        assert_eq!(parse("8080:80").unwrap().nodes, ["loadbalancer"], "the load balancer unless told");
        let p = parse("0.0.0.0:5353:53/udp@agent:0;server:0").unwrap();
        assert_eq!((p.host_ip.to_string(), p.protocol), ("0.0.0.0".into(), "udp"));
        assert_eq!(p.nodes, ["agent:0", "server:0"]);
        assert_eq!(k3d_port(&p.spec()), "0.0.0.0:5353:53/udp");
        assert_eq!(k3d_port(&parse("8080:80").unwrap().spec()), "127.0.0.1:8080:80/tcp");
        assert_eq!(parse("80-81:80"), Err(BadPort::Range { which: Which::Host, text: "80-81".into() }));
        assert_eq!(parse("80:0").unwrap_err().to_string(), "container port \"0\" is not a port (1-65535)");
        for bad in [
            "80",
            "a:80",
            "8080:0",
            "8080:70000",
            "localhost:8080:80",
            "[::1]:8080:80",
            "8080:80/sctp",
            "8000-8010:80",
            "1:2:3:4",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn node_filters_follow_k3ds_grammar_and_the_cluster_shape() {
        let ok = |f: &str, usage| filter_problem(f, 1, 2, usage).is_none();
        for f in
            ["loadbalancer", "all", "server:0", "servers:*", "agent:1", "agent:0,1", "server:0:direct", "agent:*:proxy"]
        {
            assert!(ok(f, FilterUse::Port), "{f}");
        }
        for f in ["server:1", "agent:2", "node:0", "loadbalancer:0", "server:x", "server:0:bogus", "a:b:c:d"] {
            assert!(!ok(f, FilterUse::Port), "{f}");
        }
        assert!(ok("agent:*", FilterUse::Volume) && ok("all", FilterUse::Volume));
        assert!(!ok("loadbalancer", FilterUse::Volume) && !ok("server:0:direct", FilterUse::Volume));
    }
}
