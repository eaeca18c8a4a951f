//! The node image's self-check, its pure half: which files a node image must have on its PATH
//! for k3s to start a cluster, the probe that lists them, and the verdict on what the probe
//! printed. `apply/node_check.rs` runs the probe in the image (Docker, no cluster); `apply`
//! refuses before its first k3d call, and `doctor` reports, when one is missing.
//!
//! Why these files: rancher/k3s's `/bin/k3s` is the server build, which unpacks no data dir,
//! so its agent runs containerd, the runc shim, runc and the CNI plugins through PATH
//! (k3s-io/k3s `scripts/build-*.sh`, `scripts/package-cli`; the layout is recorded in
//! `tests/upstream/k3s-package-bin.txt`). With NVIDIA, k3s adds the nvidia runtime to its
//! containerd config only when it finds `nvidia-container-runtime`.
//!
//! The probe is a POSIX `sh -c` script: k3d starts every node through its own
//! `/bin/k3d-entrypoint.sh`, a `#!/bin/sh` script, so an image without `/bin/sh` cannot be a
//! k3d node either, and the probe failing to start says so.

use serde_json::Value;

/// One file the node image must have on its PATH, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Required {
    pub name: &'static str,
    pub why: &'static str,
}

const CNI_WHY: &str = "a CNI plugin link to `cni` that k3s's flannel network config runs";

/// What every k3s node image needs, in the order the probe lists them.
const ALWAYS: &[Required] = &[
    Required { name: "k3s", why: "the k3s binary k3d's entrypoint runs" },
    Required { name: "containerd", why: "the container runtime k3s's agent starts through PATH" },
    Required { name: "containerd-shim-runc-v2", why: "containerd's runc shim, found through PATH" },
    Required { name: "runc", why: "the OCI runtime the shim runs" },
    Required { name: "cni", why: "the multicall CNI plugin binary" },
    Required { name: "bridge", why: CNI_WHY },
    Required { name: "flannel", why: CNI_WHY },
    Required { name: "host-local", why: CNI_WHY },
    Required { name: "loopback", why: CNI_WHY },
    Required { name: "portmap", why: CNI_WHY },
    Required { name: "bandwidth", why: CNI_WHY },
    Required { name: "firewall", why: CNI_WHY },
];

const NVIDIA: Required = Required {
    name: "nvidia-container-runtime",
    why: "k3s adds the nvidia runtime to containerd only when it finds this (NVIDIA is active)",
};

/// The files a node image must have: k3s's package, and the NVIDIA runtime when NVIDIA is
/// active.
pub fn required(nvidia: bool) -> Vec<Required> {
    let mut out = ALWAYS.to_vec();
    if nvidia {
        out.push(NVIDIA);
    }
    out
}

/// Whether a cluster spec (the graph's `k3d/cluster/…` resource) gives its nodes NVIDIA GPUs:
/// the compiler sets `gpus` exactly when NVIDIA is active.
pub fn nvidia_in(cluster_spec: &Value) -> bool {
    cluster_spec["gpus"].is_string()
}

/// The probe: for each name given, `found NAME PATH` when it resolves to an executable on
/// the image's PATH, else `missing NAME`. Run as `/bin/sh -c PROBE k3d-gpu-node-check NAME…`.
pub const PROBE: &str =
    r#"for f in "$@"; do if p=$(command -v "$f"); then echo "found $f $p"; else echo "missing $f"; fi; done"#;

/// The entrypoint (`/bin/sh -c PROBE $0`) and the command (the names) that run the probe.
pub fn probe_command(required: &[Required]) -> (Vec<String>, Vec<String>) {
    let entrypoint = ["/bin/sh", "-c", PROBE, "k3d-gpu-node-check"].map(String::from).to_vec();
    (entrypoint, required.iter().map(|r| r.name.to_string()).collect())
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    /// Each required file with where it resolved.
    pub found: Vec<(String, String)>,
    /// The required files that did not resolve (or that the probe never answered for).
    pub missing: Vec<Required>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.missing.is_empty()
    }

    /// The sentence that names what is missing from `image`.
    pub fn refusal(&self, image: &str) -> String {
        let names: Vec<String> = self.missing.iter().map(|r| format!("{} ({})", r.name, r.why)).collect();
        format!(
            "the node image {image} lacks {} on its PATH: {}; a cluster from it would not start",
            if self.missing.len() == 1 { "a file k3s needs" } else { "files k3s needs" },
            names.join("; ")
        )
    }
}

/// The verdict on the probe's output. Only lines the probe writes count: anything else the
/// image prints is ignored, and a name with no answer is missing.
pub fn verdict(required: &[Required], output: &str) -> Verdict {
    let mut out = Verdict::default();
    for r in required {
        let found = output.lines().find_map(|line| {
            let rest = line.trim_end().strip_prefix("found ")?;
            let (name, path) = rest.split_once(' ')?;
            (name == r.name && path.starts_with('/')).then(|| path.to_string())
        });
        match found {
            Some(path) => out.found.push((r.name.to_string(), path)),
            None => out.missing.push(*r),
        }
    }
    out
}

/// The fix for a refused image: the shipped Dockerfile's layout, or the user's own image.
pub const FIX: &str = "copy every file of rancher/k3s's /bin into the image (k3s, containerd, containerd-shim-runc-v2, runc, cni and its plugin links, aux/), as the shipped Dockerfile does; with NVIDIA, install the NVIDIA container toolkit in it";

#[cfg(test)]
mod tests {
    use super::*;

    fn names(r: &[Required]) -> Vec<&str> {
        r.iter().map(|r| r.name).collect()
    }

    #[test]
    fn nvidia_adds_its_runtime() {
        let plain = required(false);
        assert!(names(&plain).contains(&"containerd") && !names(&plain).contains(&"nvidia-container-runtime"));
        let with = required(true);
        assert_eq!(with.len(), plain.len() + 1);
        assert_eq!(with.last().unwrap().name, "nvidia-container-runtime");
        assert!(nvidia_in(&serde_json::json!({"gpus": "all"})));
        assert!(!nvidia_in(&serde_json::json!({"image": "x"})));
    }

    #[test]
    fn the_verdict_names_what_is_missing_and_ignores_other_output() {
        let required = required(false);
        let mut output: String = required
            .iter()
            .filter(|r| r.name != "containerd")
            .map(|r| format!("found {} /usr/bin/{}\n", r.name, r.name))
            .collect();
        output.push_str("missing containerd\nfound containerd relative/path\nsomething else the image printed\n");
        let v = verdict(&required, &output);
        assert!(!v.ok());
        assert_eq!(names(&v.missing), ["containerd"], "a relative path is not a resolution");
        assert_eq!(v.found.len(), required.len() - 1);
        let text = v.refusal("img:1");
        assert!(text.contains("img:1") && text.contains("containerd (the container runtime"), "{text}");
        // No answer at all (the probe did not run): everything is missing.
        assert_eq!(verdict(&required, "").missing.len(), required.len());
        // Every name answered: ok.
        let all: String = required.iter().map(|r| format!("found {} /bin/{}\n", r.name, r.name)).collect();
        assert!(verdict(&required, &all).ok());
    }

    #[test]
    fn the_probe_takes_the_names_as_arguments() {
        let (entrypoint, cmd) = probe_command(&required(true));
        assert_eq!(entrypoint[..2], ["/bin/sh", "-c"]);
        assert_eq!(entrypoint[2], PROBE);
        assert_eq!(cmd.last().map(String::as_str), Some("nvidia-container-runtime"));
    }
}
