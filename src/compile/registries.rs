//! `[cluster.registries]`: k3s's registry mirrors, the digest of the user's credentials
//! file, and the registry k3d may create (k3d's `registries.config` and `registries.create`).
//!
//! The spec holds no credential: `credentials` is the file's name (relative to the config)
//! with its digest and the registries it configures, as the command edge read it. apply reads
//! the file again, checks it against that digest, and writes the credentials only into the
//! k3d config (mode 0600), which k3d copies into the nodes (`apply::k3d::registries_yaml`).

use serde_json::{Value, json};

use super::{CompileError, Context};

/// The image k3d runs for a registry it creates: k3d v5.9.0's default
/// (`pkg/types/images.go`, DefaultRegistryImageRepo and DefaultRegistryImageTag), written
/// out so it is pinned through images.lock like every image the graph deploys.
pub const REGISTRY_IMAGE: &str = "docker.io/library/registry:2";

/// Why `host` is not a registry name k3s's `mirrors` takes (`host[:port]`, or `*`), or `None`.
fn registry_problem(host: &str) -> Option<&'static str> {
    if host == "*" {
        return None;
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    if port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
        return Some("has a port that is not 1-65535");
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 253 || !name.split('.').all(label) {
        return Some("is not a host name (letters, digits, '-' and '.'), with an optional :port");
    }
    None
}

/// Why `url` is not an endpoint containerd can pull from, or `None`: `http(s)://host[:port][/path]`,
/// no credentials (they go in the credentials file), no spaces or control characters.
fn endpoint_problem(url: &str) -> Option<&'static str> {
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else {
        return Some("is not an http:// or https:// URL");
    };
    if url.len() > 2048 || url.chars().any(|c| c.is_control() || c.is_whitespace() || matches!(c, '"' | '\\')) {
        return Some("holds a space, quote, backslash or control character");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some("carries credentials (user:password@): name a credentials file instead");
    }
    if authority.is_empty() || registry_problem(authority).is_some() {
        return Some("has no valid host[:port]");
    }
    None
}

/// The compiled `[cluster.registries]`, or `None` when the table is absent.
pub(super) fn spec(cx: &mut Context) -> Option<Value> {
    let registries = cx.config.cluster.registries.as_ref()?;
    let mut errors = Vec::new();
    let mut mirrors = serde_json::Map::new();
    for (registry, endpoints) in &registries.mirrors {
        let bad = |message: String| {
            CompileError::new(
                "bad-registry-mirror",
                &["cluster", "registries", "mirrors"],
                crate::escape::capped(format!("mirror of {}: {message}", crate::escape::quoted(registry))),
                Some("e.g. mirrors = { \"docker.io\" = [\"https://mirror.lan:5000\"] }".to_string()),
            )
        };
        if let Some(why) = registry_problem(registry) {
            errors.push(bad(format!("the registry {why}")));
            continue;
        }
        if endpoints.is_empty() {
            errors.push(bad("lists no endpoint".into()));
            continue;
        }
        if let Some((url, why)) = endpoints.iter().find_map(|u| endpoint_problem(u).map(|w| (u, w))) {
            errors.push(bad(format!("endpoint {} {why}", crate::escape::quoted(url))));
            continue;
        }
        mirrors.insert(registry.clone(), json!(endpoints));
    }
    let credentials = match (&registries.credentials, &registries.credentials_read) {
        (None, _) => None,
        (Some(file), _) if crate::config::fleet::path_problem(file).is_some() => {
            let why = crate::config::fleet::path_problem(file).unwrap_or_default();
            errors.push(CompileError::new(
                "bad-registry-credentials",
                &["cluster", "registries", "credentials"],
                format!("credentials file {} {why}", crate::escape::quoted(file)),
                Some("name a file beside this config, e.g. \"registries-auth.yaml\"".to_string()),
            ));
            None
        }
        (Some(file), Some(Ok(read))) => {
            Some(json!({ "file": file, "digest": read.digest, "registries": read.registries }))
        }
        (Some(file), Some(Err(why))) => {
            errors.push(CompileError::new(
                "bad-registry-credentials",
                &["cluster", "registries", "credentials"],
                crate::escape::capped(format!("credentials file {}: {why}", crate::escape::quoted(file))),
                Some("a registries.yaml of k3s's format with only `configs:` (auth and tls per registry)".to_string()),
            ));
            None
        }
        (Some(_), None) => {
            // A compile the command edge did not prepare (a library caller): nothing read,
            // so nothing to digest, and a plan without the digest would miss a change.
            errors.push(CompileError::new(
                "registry-credentials-unread",
                &["cluster", "registries", "credentials"],
                "the credentials file was not read for this compile",
                None,
            ));
            None
        }
    };
    let create = registries.create.as_ref().and_then(|create| {
        let cluster = &cx.config.cluster.name;
        let name = create.name.clone().unwrap_or_else(|| format!("k3d-{cluster}-registry"));
        let at = |key: &'static str| -> Vec<&'static str> { vec!["cluster", "registries", "create", key] };
        if !crate::config::dns_subdomain(&name) || name.len() > 63 {
            errors.push(CompileError::new(
                "bad-registry-create",
                &at("name"),
                format!("registry name {} is not a container host name", crate::escape::quoted(&name)),
                Some("use lowercase letters, digits, '-' and '.'".to_string()),
            ));
            return None;
        }
        let Ok(ip) = create.host_ip.parse::<std::net::Ipv4Addr>() else {
            errors.push(CompileError::new(
                "bad-registry-create",
                &at("host_ip"),
                format!("host_ip {} is not an IPv4 address", crate::escape::quoted(&create.host_ip)),
                None,
            ));
            return None;
        };
        if create.port == Some(0) {
            errors.push(CompileError::new(
                "bad-registry-create",
                &at("port"),
                "port 0 is not a port; leave it unset to let k3d pick",
                None,
            ));
            return None;
        }
        if let Some(why) = create.proxy.as_deref().and_then(endpoint_problem) {
            errors.push(CompileError::new("bad-registry-create", &at("proxy"), format!("proxy {why}"), None));
            return None;
        }
        Some((name, ip, create))
    });
    for e in errors {
        cx.error(e);
    }
    let create = create.map(|(name, ip, create)| {
        if !ip.is_loopback() {
            cx.warn(
                "registry-published-off-loopback",
                Some("cluster.registries.create.host_ip"),
                format!(
                    "the registry {name} is published on {ip}{}: anyone who can reach this machine can push to it",
                    if ip.is_unspecified() { " (every interface)" } else { "" }
                ),
            );
        }
        let reference = crate::images::ImageRef::parse(REGISTRY_IMAGE).expect("a constant, tagged reference");
        let used = cx.catalog.images.resolve(&reference);
        cx.images.insert(REGISTRY_IMAGE.to_string(), used.clone());
        let image = used.reference;
        json!({
            "name": name,
            "host_ip": ip.to_string(),
            "host_port": create.port,
            "proxy": create.proxy,
            "image": image,
        })
    });
    let mut spec = json!({ "mirrors": mirrors });
    if let Some(c) = credentials {
        spec["credentials"] = c;
    }
    if let Some(c) = create {
        spec["create"] = c;
    }
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_and_endpoints() {
        for ok in ["docker.io", "mirror.lan:5000", "*", "ghcr.io", "localhost:5000"] {
            assert_eq!(registry_problem(ok), None, "{ok}");
        }
        for bad in ["", "a b", "x:0", "x:99999", "-x.io", "a/b"] {
            assert!(registry_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(endpoint_problem("https://mirror.lan:5000"), None);
        assert_eq!(endpoint_problem("http://k3d-registry:5000/v2"), None);
        for bad in ["mirror.lan", "ftp://x", "https://u:p@x", "https://", "https://x y", "https://x\"y"] {
            assert!(endpoint_problem(bad).is_some(), "{bad}");
        }
    }
}
