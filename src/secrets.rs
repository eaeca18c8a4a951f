//! Which names hold secrets. Their values never reach a document k3d-gpu prints: observed/v1
//! masks them at the source, plan/v1 masks them again in case a manifest carries one.

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

#[cfg(test)]
mod tests {
    use super::*;

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
