//! The registries.yaml k3d writes into the nodes (k3d's `registries.config`): the mirrors of
//! the cluster spec and the credentials of the user's file, read again at apply and checked
//! against the digest the plan recorded.
//!
//! The credentials file is k3s's own format (k3s-io/k3s docs, "Private Registry
//! Configuration"; parsed by rancher/wharfie `pkg/registries` `Registry.Configs`, which k3d
//! v5.9.0 unmarshals `registries.config` into): a `configs:` map from registry to its `auth`
//! (username, password, auth, identity_token) and `tls` (ca_file, cert_file, key_file,
//! insecure_skip_verify). Nothing else is accepted, so a file with `mirrors:` (which belong in
//! k3dgpu.toml) or a misspelt key is refused. Errors never quote the file: it holds passwords.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One registry's settings in the credentials file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_token: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
}

/// wharfie's JSON name of k3s's `identity_token`, the one k3d reads.
const K3D_IDENTITY_TOKEN: &str = "identitytoken";

/// The credentials file, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    pub configs: BTreeMap<String, RegistryConfig>,
}

/// What the file's problem is, in words that quote none of it.
pub const FORMAT: &str = "is not a k3s registries.yaml with only `configs:` (per registry: auth with username, password, auth or identity_token; tls with ca_file, cert_file, key_file or insecure_skip_verify)";

/// Why a credentials file is refused; none of them quotes the file (it holds passwords).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("{FORMAT}")]
    Format,
    #[error("configures no registry (`configs:` is empty)")]
    NoRegistry,
    #[error("names a registry that is empty or holds a space or control character")]
    BadRegistryName,
}

impl Credentials {
    /// Parses the file's text. The parser's own message is dropped: it can quote a value.
    pub fn parse(text: &str) -> Result<Credentials, CredentialsError> {
        let parsed: Credentials = serde_saphyr::from_str(text).map_err(|_| CredentialsError::Format)?;
        if parsed.configs.is_empty() {
            return Err(CredentialsError::NoRegistry);
        }
        if parsed.configs.keys().any(|k| k.is_empty() || k.chars().any(|c| c.is_control() || c.is_whitespace())) {
            return Err(CredentialsError::BadRegistryName);
        }
        Ok(parsed)
    }

    /// The digest the plan records: of the parsed settings in canonical form, so comments and
    /// layout do not count, every credential does. Keyed (HMAC-SHA256) with `key`, this
    /// machine's [`machine_key`]: a plan, a graph and `plan --json` are shared for review, and
    /// a plain hash of a user name and a password is a verifier a dictionary recovers both
    /// from in a millisecond. Without the key the digest says nothing of the credentials.
    pub fn digest(&self, key: &[u8; 32]) -> String {
        let mac = hmac_sha256(key, &crate::canonical::to_bytes(self));
        format!("hmac-sha256:{}", mac.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// The registries it configures (their names are not secret).
    pub fn registries(&self) -> Vec<String> {
        self.configs.keys().cloned().collect()
    }
}

/// HMAC-SHA256 (RFC 2104 over FIPS 180-4's SHA-256, 64-byte blocks) of `message` under `key`
/// (at most one block). Written here on `sha2`, which the crate has, rather than adding the
/// `hmac` crate (and its `digest`-trait plumbing) for the one call.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    assert!(key.len() <= BLOCK, "a key of at most one block");
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let inner = Sha256::new().chain_update(padded.map(|b| b ^ 0x36)).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(padded.map(|b| b ^ 0x5c)).chain_update(inner).finalize();
    outer.into()
}

/// The file in the state directory holding the key of [`Credentials::digest`].
pub const KEY_FILE: &str = "credentials-digest.key";

/// This machine's key for credential digests: 32 random bytes in `state_dir`'s
/// [`KEY_FILE`], made on first use (0600, in a 0700 directory, never through a link), and
/// refused when it is not a regular file of this user that only they can read. It never
/// leaves the machine, so a plan made here is applied here (another machine's digest reads
/// as "changed since the plan").
pub fn machine_key(state_dir: &std::path::Path) -> std::io::Result<[u8; 32]> {
    use std::os::unix::fs::DirBuilderExt;
    let path = state_dir.join(KEY_FILE);
    for _ in 0..2 {
        match read_key(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            read => return read,
        }
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state_dir)?;
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
        match crate::output_file::write_new(&path, &key, crate::output_file::PRIVATE) {
            // Another run made it first: read theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
            Ok(()) => return Ok(key),
        }
    }
    read_key(&path)
}

fn read_key(path: &std::path::Path) -> std::io::Result<[u8; 32]> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(meta.uid());
    if !meta.file_type().is_file() || meta.mode() & 0o077 != 0 || meta.uid() != me {
        return Err(std::io::Error::other(format!(
            "{} is not a file of this user that only they can read (0600)",
            path.display()
        )));
    }
    let bytes = std::fs::read(path)?;
    bytes.try_into().map_err(|_| std::io::Error::other(format!("{} does not hold a 32-byte key", path.display())))
}

/// The registries.yaml for k3d's `registries.config`, from a cluster spec's `registries`, with
/// `credentials` when the spec names a file; `None` when there is nothing to write. JSON is
/// YAML, and pretty-printed it spans lines, which is how k3d v5.9.0 tells an embedded config
/// from a path (`pkg/config/transform.go`: a `\n` in `registries.config`).
///
/// k3d reads it by wharfie's JSON names, not k3s's YAML ones, and drops unknown keys without a
/// word (tests/upstream/wharfie-v0.7.0-registry-json.txt): k3s's `identity_token` is written
/// `identitytoken` here, which k3d turns back into `identity_token` in the node's file.
pub fn registries_yaml(registries: &Value, credentials: Option<&Credentials>) -> Option<String> {
    let mirrors: serde_json::Map<String, Value> = registries["mirrors"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(registry, endpoints)| (registry.clone(), json!({ "endpoint": endpoints })))
        .collect();
    if mirrors.is_empty() && credentials.is_none() {
        return None;
    }
    let mut yaml = json!({ "mirrors": mirrors });
    if let Some(c) = credentials {
        let mut configs = serde_json::to_value(&c.configs).expect("plain strings and booleans serialise");
        for config in configs.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
            if let Some(auth) = config.get_mut("auth").and_then(Value::as_object_mut)
                && let Some(token) = auth.remove("identity_token")
            {
                auth.insert(K3D_IDENTITY_TOKEN.into(), token);
            }
        }
        yaml["configs"] = configs;
    }
    Some(serde_json::to_string_pretty(&yaml).expect("a JSON value serialises") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_keyed_and_the_key_stays_private_on_this_machine() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let c = Credentials::parse(FILE).unwrap();
        // Not the plain hash of the credentials a dictionary is run against.
        let plain = crate::canonical::digest(&c);
        let (a, b) = (c.digest(&[1; 32]), c.digest(&[2; 32]));
        assert!(a.starts_with("hmac-sha256:") && a != b && !a.contains(plain.trim_start_matches("sha256:")), "{a}");
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("k3d-gpu");
        let key = machine_key(&dir).unwrap();
        assert_eq!(machine_key(&dir).unwrap(), key, "made once, then read");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(KEY_FILE)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(dir.join(KEY_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(machine_key(&dir).is_err(), "a key others can read is refused");
    }

    const FILE: &str = "# the lab's mirror\nconfigs:\n  \"mirror.lan:5000\":\n    auth:\n      username: lab\n      password: hunter2\n    tls:\n      insecure_skip_verify: true\n";

    #[test]
    fn the_file_is_k3s_format_and_its_errors_quote_nothing() {
        let c = Credentials::parse(FILE).unwrap();
        assert_eq!(c.registries(), ["mirror.lan:5000"]);
        assert_eq!(c.configs["mirror.lan:5000"].auth.as_ref().unwrap().password.as_deref(), Some("hunter2"));
        let relaid = "configs:\n  mirror.lan:5000: {auth: {username: lab, password: hunter2}, tls: {insecure_skip_verify: true}}\n";
        let key = [7u8; 32];
        assert_eq!(
            Credentials::parse(relaid).unwrap().digest(&key),
            c.digest(&key),
            "layout and comments do not count"
        );
        let other = FILE.replace("hunter2", "hunter3");
        assert_ne!(Credentials::parse(&other).unwrap().digest(&key), c.digest(&key), "a password does");
        for bad in [
            "configs:\n  x:\n    auth:\n      passwrd: hunter2\n",
            "mirrors:\n  docker.io:\n    endpoint: [\"https://m\"]\nconfigs: {}\n",
            "configs:\n  x:\n    tls:\n      insecure_skip_verify: hunter2\n",
            "configs: {}\n",
            "- hunter2\n",
        ] {
            let e = Credentials::parse(bad).unwrap_err().to_string();
            assert!(!e.contains("hunter2") && !e.contains("passwrd"), "{e}");
        }
    }

    #[test]
    fn the_yaml_joins_mirrors_and_credentials() {
        let spec = json!({ "mirrors": { "docker.io": ["https://mirror.lan:5000"] } });
        let text = registries_yaml(&spec, None).unwrap();
        assert!(text.contains('\n'), "k3d reads a one-line value as a path");
        let yaml: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(yaml, json!({ "mirrors": { "docker.io": { "endpoint": ["https://mirror.lan:5000"] } } }));
        let c = Credentials::parse(FILE).unwrap();
        let yaml: Value = serde_json::from_str(&registries_yaml(&spec, Some(&c)).unwrap()).unwrap();
        assert_eq!(yaml["configs"]["mirror.lan:5000"]["auth"]["password"], "hunter2");
        assert_eq!(registries_yaml(&json!({ "mirrors": {} }), None), None);
    }

    #[test]
    fn an_identity_token_reaches_k3d_by_the_name_it_reads() {
        let c = Credentials::parse("configs:\n  quay.io:\n    auth:\n      identity_token: t0k\n").unwrap();
        let yaml: Value = serde_json::from_str(&registries_yaml(&json!({}), Some(&c)).unwrap()).unwrap();
        assert_eq!(yaml["configs"]["quay.io"]["auth"], json!({ "identitytoken": "t0k" }));
    }
}
