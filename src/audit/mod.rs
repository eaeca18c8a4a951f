//! `k3d-gpu audit`: the safety rules for a running cluster, applied to what was read of it
//! (an [`AuditObserved`] document). Pure: the live read is in [`read`], so a saved document
//! (`audit --observed FILE`) gives the same findings as the cluster it was read from.

pub mod read;

use serde::{Deserialize, Serialize};

use crate::images::{ImageRef, Locks, is_digest};

/// The printed result (`audit --json`).
pub const SCHEMA: &str = "k3d-gpu.audit/v1";
/// What was read of the cluster (`audit --observe`, `audit --observed FILE`).
pub const OBSERVED_SCHEMA: &str = "k3d-gpu.audit-observed/v1";

/// The container port of the Kubernetes API: k3s serves it with anonymous auth off, so the
/// one published port the listener rule allows off loopback.
pub const API_PORT: &str = "6443/tcp";

/// How long the API server keeps events by default (kube-apiserver `--event-ttl`): a pull
/// older than this is not seen by the runtime-pull rule.
pub const EVENT_TTL: &str = "1h";

/// What the rules read, as one document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditObserved {
    pub schema: String,
    pub cluster: String,
    /// Every port a node container of the cluster publishes (Docker HostConfig.PortBindings).
    pub listeners: Vec<Listener>,
    /// Every container image the cluster's pods run, with the id containerd resolved.
    pub images: Vec<RunningImage>,
    /// kubelet's `Pulled` events that say an image was pulled (not "already present").
    pub pulls: Vec<Pull>,
    /// The kubeconfig files that hold the cluster's admin key, with their permission bits.
    pub kubeconfigs: Vec<KubeconfigFile>,
    /// Open WebUI containers and their WEBUI_AUTH value (`None`: not set, auth on).
    pub open_webui: Vec<WebUi>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    pub container: String,
    /// `0.0.0.0`, `::`, empty (all addresses) or a specific address.
    pub host_ip: String,
    pub host_port: String,
    /// `PORT/PROTO` inside the container.
    pub container_port: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningImage {
    /// `namespace/pod/container`.
    pub container: String,
    /// The reference the pod asked for.
    pub image: String,
    /// What containerd resolved it to (`repo@sha256:…`), empty when it has no registry digest.
    pub image_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pull {
    /// `namespace/pod` the event is about.
    pub object: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeconfigFile {
    pub path: String,
    /// The permission bits (`0o600` is owner-only).
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebUi {
    pub container: String,
    pub webui_auth: Option<String>,
}

/// The rules, in the order they are reported.
pub const RULES: [&str; 5] = ["listener", "image-digest", "runtime-pull", "kubeconfig-mode", "open-webui-auth"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    /// What it is about (a container, an image, a file).
    pub subject: String,
    pub problem: String,
    pub fix: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleResult {
    pub rule: &'static str,
    pub passed: bool,
}

/// `k3d-gpu.audit/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Audit {
    pub schema: &'static str,
    pub cluster: String,
    pub passed: bool,
    /// Each rule and whether it passed.
    pub rules: Vec<RuleResult>,
    pub findings: Vec<Finding>,
}

/// Applies every rule. Pure.
pub fn audit(observed: &AuditObserved, locks: &Locks) -> Audit {
    let mut findings = Vec::new();
    for l in &observed.listeners {
        let everywhere = matches!(l.host_ip.as_str(), "" | "0.0.0.0" | "::" | "[::]");
        // A specific address other than loopback (a LAN address, `[cluster] ports =
        // ["192.168.1.5:8080:80"]`) is reachable from that network just the same.
        let loopback = l.host_ip.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !loopback && l.container_port != API_PORT {
            let address = if l.host_ip.is_empty() { "0.0.0.0" } else { &l.host_ip };
            findings.push(Finding {
                rule: "listener",
                subject: l.container.clone(),
                problem: format!(
                    "publishes {} on {address}:{}{} with no authentication k3d-gpu can establish",
                    l.container_port,
                    l.host_port,
                    if everywhere { " (all addresses)" } else { ", beyond this machine" },
                ),
                fix: format!(
                    "publish it on loopback only (a [cluster] ports entry without an address, \"{}:…\", is bound to 127.0.0.1) or reach it through `kubectl port-forward`",
                    l.host_port
                ),
            });
        }
    }
    for i in &observed.images {
        if let Some(problem) = image_problem(i, locks) {
            findings.push(Finding {
                rule: "image-digest",
                subject: format!("{} ({})", i.image, i.container),
                problem,
                fix: "pin it: add it to images.lock beside the config (`k3d-gpu images lock`) and re-apply".into(),
            });
        }
    }
    for p in observed.pulls.iter().filter(|p| !pull_pinned(&p.message, locks)) {
        findings.push(Finding {
            rule: "runtime-pull",
            subject: p.object.clone(),
            problem: format!(
                "kubelet pulled an image no digest pins at runtime: {} (events are kept {EVENT_TTL} by default; older pulls are not seen)",
                p.message
            ),
            fix: "pin it (`k3d-gpu images lock`, then re-apply), or bake the image into the node image or import it (`k3d image import`) before the workload starts".into(),
        });
    }
    for k in &observed.kubeconfigs {
        if k.mode & 0o077 != 0 {
            findings.push(Finding {
                rule: "kubeconfig-mode",
                subject: k.path.clone(),
                problem: format!(
                    "mode {:04o}: readable by group or others, and it holds the cluster admin key",
                    k.mode & 0o7777
                ),
                fix: format!("chmod 600 {}", crate::shell::word(&k.path)),
            });
        }
    }
    for w in &observed.open_webui {
        if w.webui_auth
            .as_deref()
            .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "0" | "no" | "off"))
        {
            findings.push(Finding {
                rule: "open-webui-auth",
                subject: w.container.clone(),
                problem: "Open WebUI runs with WEBUI_AUTH off: anyone who reaches it uses the models".into(),
                fix: "remove WEBUI_AUTH=False from its environment (auth is on by default)".into(),
            });
        }
    }
    let rules = RULES.iter().map(|r| RuleResult { rule: r, passed: !findings.iter().any(|f| f.rule == *r) }).collect();
    Audit { schema: SCHEMA, cluster: observed.cluster.clone(), passed: findings.is_empty(), rules, findings }
}

/// Why a running image is not pinned by a lock, or `None` when it is.
fn image_problem(running: &RunningImage, locks: &Locks) -> Option<String> {
    let digest = running.image_id.rsplit_once('@').map(|(_, d)| d).filter(|d| is_digest(d));
    let Some(digest) = digest else {
        return Some("it has no registry digest (built or imported locally, so nothing proves what it is)".into());
    };
    let Ok(image) = ImageRef::parse(&running.image) else {
        // A reference without a tag (`repo@sha256:…` or bare `repo`): its own pin is all there is.
        return match running.image.split_once('@') {
            Some((_, pinned)) if pinned == digest => None,
            _ => Some("its reference has no tag, so no lock entry names it".into()),
        };
    };
    if image.digest.as_deref() == Some(digest) {
        return None;
    }
    // Locks key images as written in the catalog; containerd adds docker.io/ (and library/).
    let candidates = [image.tagged(), short_name(&image)];
    let entry = candidates.iter().find_map(|key| locks.entry(key).map(|(e, _)| e));
    match entry {
        Some(e) if e.digest == digest => None,
        Some(e) => Some(format!("it runs {digest}, but the lock pins {}", e.digest)),
        None => Some(format!("no lock pins {} (it runs {digest})", image.tagged())),
    }
}

/// The part of a kubelet `Pulled` event's message that says it pulled (`Successfully pulled
/// image "REF" …`), or `None` for "already present" and other messages. client-go's event
/// correlator rewrites the 11th and later similar events of one object within ten minutes to
/// `(combined from similar events): MESSAGE`, so a pod with many containers has its later
/// pulls in that form (k8s.io/client-go/tools/record/events_cache.go).
pub fn pulled(message: &str) -> Option<&str> {
    let message = message.strip_prefix("(combined from similar events): ").unwrap_or(message);
    message.starts_with("Successfully pulled").then_some(message)
}

/// Whether a kubelet `Pulled` event's image was pinned: the reference it quotes carries a
/// digest, or a lock pins its `repo:tag`. Such a pull fetches the bytes the lock names (the
/// image-digest rule checks what runs), so it is how a fresh `apply` starts, not drift: every
/// node pulls what its plan deployed, and k3s pulls its own images by tag, which `images lock`
/// pins too. A pull by a tag no lock pins gets whatever the registry serves that day.
/// kubelet's message is `Successfully pulled image "REF" in …`; one it does not quote an image
/// in is not pinned.
fn pull_pinned(message: &str, locks: &Locks) -> bool {
    let message = pulled(message).unwrap_or(message);
    let Some(reference) = message.split('"').nth(1) else { return false };
    match ImageRef::parse(reference) {
        Ok(image) => {
            image.digest.is_some() || [image.tagged(), short_name(&image)].iter().any(|k| locks.entry(k).is_some())
        }
        // `repo@sha256:…` has no tag for a lock to key, and needs none.
        Err(_) => reference.split_once('@').is_some_and(|(name, d)| !name.is_empty() && is_digest(d)),
    }
}

/// `docker.io/library/x:t` → `x:t`, `docker.io/a/b:t` → `a/b:t`.
fn short_name(image: &ImageRef) -> String {
    let name = image.name.strip_prefix("docker.io/").unwrap_or(&image.name);
    let name = name.strip_prefix("library/").unwrap_or(name);
    format!("{name}:{}", image.tag)
}

/// The human-readable result: one line per rule, then each finding with its fix. Every
/// string from the cluster goes through [`crate::escape`].
pub fn render(audit: &Audit) -> String {
    use crate::escape::one_line as esc;
    let mut out = format!("audit of cluster {}\n", esc(&audit.cluster));
    for r in &audit.rules {
        out.push_str(&format!("  {:<16} {}\n", r.rule, if r.passed { "pass" } else { "FAIL" }));
    }
    for f in &audit.findings {
        out.push_str(&format!("\n[{}] {}: {}\n  fix: {}\n", f.rule, esc(&f.subject), esc(&f.problem), esc(&f.fix)));
    }
    out.push_str(if audit.passed { "\naudit passed\n" } else { "\naudit failed\n" });
    out
}

#[cfg(test)]
mod tests;
