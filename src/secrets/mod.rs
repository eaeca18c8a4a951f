//! Which names hold secrets. Their values never reach a document k3d-gpu prints: observed/v1
//! masks them at the source, plan/v1 masks them again in case a manifest carries one.

mod mask;

pub use mask::{mask_cluster_args, mask_object, mask_pair};

/// The mask written in place of a secret value.
pub const SENSITIVE: &str = "(sensitive)";

/// Environment variable and key names whose values are secrets (`K3S_TOKEN`, `DB_PASSWORD`,
/// `WEBUI_SECRET_KEY`, …).
pub fn is_sensitive_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["PASSWORD", "PASSWD", "TOKEN", "SECRET", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"]
        .iter()
        .any(|w| upper.contains(w))
}

/// A command-line flag with its secret masked: `--token=abc` → `--token=(sensitive)`,
/// `--datastore-endpoint=postgres://u:p@db/k3s` → `…//(sensitive)@db/k3s`.
pub fn mask_arg(arg: &str) -> String {
    let Some((flag, value)) = arg.split_once('=') else { return arg.to_string() };
    if is_sensitive_name(flag.trim_start_matches('-')) {
        return format!("{flag}={SENSITIVE}");
    }
    if let Some((scheme, rest)) = value.split_once("://")
        && let Some((_userinfo, host)) = rest.split_once('@')
    {
        return format!("{flag}={scheme}://{SENSITIVE}@{host}");
    }
    arg.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_flags() {
        assert_eq!(mask_arg("--token=abc"), "--token=(sensitive)");
        assert_eq!(mask_arg("--agent-token=abc"), "--agent-token=(sensitive)");
        assert_eq!(
            mask_arg("--datastore-endpoint=postgres://u:p@db:5432/k3s"),
            "--datastore-endpoint=postgres://(sensitive)@db:5432/k3s"
        );
        assert_eq!(mask_arg("--disable=traefik"), "--disable=traefik");
        assert_eq!(mask_arg("--tls-san"), "--tls-san");
    }

    #[test]
    fn secret_names() {
        for name in ["K3S_TOKEN", "db_password", "WEBUI_SECRET_KEY", "OPENAI_API_KEY"] {
            assert!(is_sensitive_name(name), "{name}");
        }
        for name in ["PATH", "PORT", "K3S_KUBECONFIG_OUTPUT"] {
            assert!(!is_sensitive_name(name), "{name}");
        }
    }
}
