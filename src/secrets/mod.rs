//! Which values are secrets, by one rule for every document k3d-gpu prints or writes
//! (observed/v1, plan/v1, graph/v1, the cluster spec recorded in a Docker label):
//!
//! - **by name**: an env var (`{name, value}`, or a node container's env map), a Secret's
//!   `data`/`stringData` entry, or a flag whose name says secret: *TOKEN*, *SECRET*,
//!   *PASSWORD*, *PASSWD*, *PASSPHRASE*, *CREDENTIAL*, *APIKEY*, *PRIVATE_KEY*, or a word
//!   PASS, PAT, AUTH or KEY (`DB_PASS`, `GITHUB_PAT`, `--vpn-auth`, `OPENAI_KEY`; not `PATH`);
//! - **by value**: URL userinfo (`postgres://user:pw@db` → `postgres://(sensitive)@db`),
//!   `--flag=value` and `--flag value` for a secret flag (`-t` and `--token` included).
//!
//! `mask.rs` walks a document and applies it.

mod mask;

pub use mask::{SENSITIVE_CHANGED, digest_secrets, mask_document, mask_pair};

/// The mask written in place of a secret value.
pub const SENSITIVE: &str = "(sensitive)";

/// Whether an env var, data key or flag name (dashes and all) names a secret.
pub fn is_sensitive_name(name: &str) -> bool {
    let upper = name.trim_start_matches('-').to_ascii_uppercase();
    let substring = ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY", "PRIVATE_KEY"];
    let word = ["PASS", "PAT", "AUTH", "KEY", "PWD"];
    substring.iter().any(|w| upper.contains(w))
        || upper.split(|c: char| !c.is_ascii_alphanumeric()).any(|part| word.contains(&part))
}

/// A flag whose value is a secret: `-t` (k3s's `--token`), or a sensitive name that does not
/// name a file or directory holding it (`--token-file` is a path, not a secret).
pub fn is_secret_flag(flag: &str) -> bool {
    if !flag.starts_with('-') {
        return false;
    }
    if flag == "-t" {
        return true;
    }
    let lower = flag.to_ascii_lowercase();
    is_sensitive_name(flag) && !["-file", "-path", "-dir"].iter().any(|s| lower.ends_with(s))
}

/// Where the secret is in a string, if it holds one: `(before, secret, after)`.
/// `--token=abc` → ("--token=", "abc", ""); `postgres://u:p@db/x` → ("postgres://", "u:p", "@db/x").
pub fn secret_part(text: &str) -> Option<(&str, &str, &str)> {
    if text.starts_with('-')
        && let Some((flag, _)) = text.split_once('=')
        && is_secret_flag(flag)
    {
        let at = flag.len() + 1;
        return Some((&text[..at], &text[at..], ""));
    }
    let at = scheme_end(text)? + 3;
    let authority_end = text[at..].find(['/', '?', '#']).map_or(text.len(), |e| at + e);
    let userinfo_end = text[at..authority_end].rfind('@')? + at;
    Some((&text[..at], &text[at..userinfo_end], &text[userinfo_end..]))
}

/// Where the first `://` of `text` starts. A search for `:` (memchr) rather than for the
/// three bytes, whose searcher is set up anew for every string: a plan masks every string
/// of every object it shows, a few million in a plan of 100k deletes.
fn scheme_end(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(':') {
        let at = from + found;
        if text[at + 1..].starts_with("//") {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// A string with its secret masked, if it holds one: `--token=abc` → `--token=(sensitive)`,
/// `--datastore-endpoint=postgres://u:p@db/k3s` → `…//(sensitive)@db/k3s`. `mask` is what
/// replaces the secret part.
pub fn mask_string(text: &str, mask: &dyn Fn(&str) -> String) -> Option<String> {
    let (before, secret, after) = secret_part(text)?;
    Some(format!("{before}{}{after}", mask(secret)))
}

/// [`mask_string`] with the plain mask, or the text unchanged.
pub fn mask_arg(arg: &str) -> String {
    mask_string(arg, &|_| SENSITIVE.to_string()).unwrap_or_else(|| arg.to_string())
}

/// `text` with the password of every `user:password@host` in it (a URI's userinfo, with a
/// scheme or without) turned into `*`, byte for byte, so offsets into it stay valid: a config
/// file is quoted in a diagnostic by span, and the line it quotes may hold a stream URI with
/// credentials. A bare `user@host` (an email address) has no password and stays.
///
/// Without a scheme, `A:B@F` is also how k3d spells a port or volume with its node filter
/// (`8080:80@loadbalancer`, `127.0.0.1:8443:443@server:0`): when `A:B` is nothing but
/// addresses and ports and `F` is a k3d node filter, it is that, and stays. With a scheme
/// (`https://8080:80@loadbalancer`) it is userinfo whatever it looks like.
pub fn blank_passwords(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    let is_break = |b: u8| b.is_ascii_whitespace() || b"\"'`<>(),;[]{}=".contains(&b);
    let mut start = 0;
    while start < out.len() {
        let end = (start..out.len()).find(|&i| is_break(out[i])).unwrap_or(out.len());
        let token = &text[start..end];
        let at_host = token.find("://").map_or(0, |i| i + 3);
        let authority = &token[at_host..];
        let authority = &authority[..authority.find(['/', '?', '#']).unwrap_or(authority.len())];
        if let Some(at) = authority.rfind('@')
            && let Some(colon) = authority[..at].find(':')
            && (at_host > 0 || !is_k3d_mapping(&authority[..at], &token[at_host + at + 1..]))
        {
            let from = start + at_host + colon + 1;
            out[from..start + at_host + at].fill(b'*');
        }
        start = end + 1;
    }
    // Only ASCII bytes of a password were replaced, whole characters at a time… unless the
    // password held multi-byte characters: their bytes became `*` too, which is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// Whether `mapping@filter` (no scheme before it) is a k3d port or volume with its node
/// filter rather than `user:password@host`: the mapping only digits, dots, dashes and colons
/// (`[ADDRESS:]HOST_PORT:CONTAINER_PORT`, ranges included), the filter k3d's grammar (a group,
/// then optionally `:*` or `:N[,M…]`/`:N-M`, then optionally `:suffix`). A password of digits
/// for a host literally named `server` reads as a mapping; any letter in it does not.
fn is_k3d_mapping(mapping: &str, filter: &str) -> bool {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-');
    if !mapping.split(':').all(|part| part.is_empty() || numeric(part)) || !mapping.bytes().any(|b| b.is_ascii_digit())
    {
        return false;
    }
    let mut parts = filter.split(':');
    let group = parts.next().unwrap_or_default();
    if !["server", "servers", "agent", "agents", "loadbalancer", "all"].contains(&group) {
        return false;
    }
    let rest: Vec<&str> = parts.collect();
    let subset = |s: &str| s == "*" || numeric(s);
    let suffix = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic());
    match rest[..] {
        [] => true,
        [one] => subset(one) || suffix(one),
        [one, two] => subset(one) && suffix(two),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_ends_at_the_first_colon_slash_slash() {
        for text in ["", ":", "a:/b", "a://", "x:y://u:p@h", "::://", "é://", "a:é//", "https://h/x://y", "no colon"]
        {
            assert_eq!(scheme_end(text), text.find("://"), "{text:?}");
        }
    }

    #[test]
    fn passwords_are_blanked_in_place() {
        let text = "source = \"rtsp://admin:hunter2@cam/live\"\nx = \"admin:pw@cam:554\"\nmail = \"a@b.c\"\n";
        let blanked = blank_passwords(text);
        assert_eq!(blanked.len(), text.len());
        assert!(!blanked.contains("hunter2") && !blanked.contains(":pw@"), "{blanked}");
        assert!(blanked.contains("rtsp://admin:*******@cam/live") && blanked.contains("admin:**@cam:554"));
        assert!(blanked.contains("a@b.c"));
        let unicode = "u = \"rtsp://u:pä@h\"";
        assert_eq!(blank_passwords(unicode), "u = \"rtsp://u:***@h\"");
    }

    /// k3d's `A:B@FILTER` is not userinfo; a URL's userinfo is, whatever it looks like.
    #[test]
    fn k3d_ports_and_volumes_are_not_passwords() {
        for kept in [
            "ports = [\"8080:80@loadbalancer\"]",
            "ports = [\"127.0.0.1:8080:80@server:0\"]",
            "ports = [\"5353:53@agent:0:direct\"]",
            "ports = [\"8080:80@all:*\"]",
            // These stop at the first '/' before any '@': kept by the authority's cut, not by
            // the mapping rule; a guard that the cut stays.
            "ports = [\"0.0.0.0:5353:53/udp@agent:0:direct\"]",
            "volumes = [\"/srv/data:/data:rw@agent:0;server:0\"]",
            "volumes = [\"models:/models@server:0,1\"]",
            "ports = [\"8443:443@loadbalancer:proxy\", \"9000:9000@agents:*\"]",
            "ports = [\"8000-8010:8000-8010@all\"]",
            "ports = [\"[::1]:8080:80@server:0\"]",
            "--port 8080:80@loadbalancer",
        ] {
            assert_eq!(blank_passwords(kept), kept);
        }
        for (text, blanked) in [
            // With a scheme, userinfo is blanked whatever it looks like.
            ("https://u:p@mirror.lan:5000/v2", "https://u:*@mirror.lan:5000/v2"),
            ("http://8080:80@loadbalancer", "http://8080:**@loadbalancer"),
            ("tcp://admin:hunter2@server:2376", "tcp://admin:*******@server:2376"),
            // Without one: a password with a letter in it, or a host that is no node filter.
            ("\"u:p@mirror.lan:5000\"", "\"u:*@mirror.lan:5000\""),
            ("\"admin:1234@server:0\"", "\"admin:****@server:0\""),
            ("\"admin:pw@loadbalancer\"", "\"admin:**@loadbalancer\""),
            ("\"1234:5678@cam:554\"", "\"1234:****@cam:554\""),
            ("\"1234:5678@server.lan\"", "\"1234:****@server.lan\""),
            ("\"8080:80@server:0:x:y\"", "\"8080:**@server:0:x:y\""),
        ] {
            assert_eq!(blank_passwords(text), blanked, "{text}");
        }
    }

    #[test]
    fn secret_flags() {
        assert_eq!(mask_arg("--token=abc"), "--token=(sensitive)");
        assert_eq!(mask_arg("-t=abc"), "-t=(sensitive)");
        assert_eq!(mask_arg("--agent-token=abc"), "--agent-token=(sensitive)");
        assert_eq!(mask_arg("--vpn-auth=name=tailscale,joinKey=x"), "--vpn-auth=(sensitive)");
        assert_eq!(mask_arg("--etcd-s3-secret-key=x"), "--etcd-s3-secret-key=(sensitive)");
        assert_eq!(
            mask_arg("--datastore-endpoint=postgres://u:p@db:5432/k3s"),
            "--datastore-endpoint=postgres://(sensitive)@db:5432/k3s"
        );
        assert_eq!(mask_arg("https://u:p@host/a@b"), "https://(sensitive)@host/a@b");
        assert_eq!(mask_arg("--token-file=/run/token"), "--token-file=/run/token");
        assert_eq!(mask_arg("--disable=traefik"), "--disable=traefik");
        assert_eq!(mask_arg("-compatible=x"), "-compatible=x");
        assert_eq!(mask_arg("--tls-san"), "--tls-san");
        assert_eq!(mask_arg("docker.io/x@sha256:abc"), "docker.io/x@sha256:abc");
    }

    #[test]
    fn secret_names() {
        for name in [
            "K3S_TOKEN",
            "db_password",
            "WEBUI_SECRET_KEY",
            "OPENAI_API_KEY",
            "DB_PASS",
            "GITHUB_PAT",
            "OPENAI_KEY",
            "HF_TOKEN",
            "AWS_CREDENTIALS",
            "BASIC_AUTH",
        ] {
            assert!(is_sensitive_name(name), "{name}");
        }
        for name in ["PATH", "PORT", "K3S_KUBECONFIG_OUTPUT", "CDIPATH", "MONKEYS", "AUTHOR"] {
            assert!(!is_sensitive_name(name), "{name}");
        }
    }
}
