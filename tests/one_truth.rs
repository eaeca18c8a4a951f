//! One truth per number (issue 39, item 9): the commands that check a config against a host
//! count the same things the same way, or say what they leave to the real machine.
//! - Unpinned images: `plan`, `render` and `images` each count a different set (the graph with
//!   the node image's bases; only the rendered manifests; the graph and `test`'s pods), so each
//!   says how many of its count are where, and the parts agree across the three.
//! - `[cluster] volumes`: `validate` (and `validate --machines`) against a fixture host checks
//!   the sources as `plan` does; against a facts document, which records no directories, the
//!   row says they were not checked.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{K3dGpu, repo};

const EXAMPLE: &str = "examples/xeon-numa-accelerators.toml";
const HOST: &str = "tests/fixtures/hosts/xeon-2s-snc2";

/// The parts of an "N images are deployed by tag …: A in the cluster's workloads, B the node
/// image is built from, C in `k3d-gpu test`'s pods, D k3s runs on its own" line: (total,
/// workloads, bases, tests, k3s's own).
fn counts(text: &str) -> (usize, usize, usize, usize, usize) {
    let line = text.lines().find(|l| l.contains("deployed by tag")).unwrap_or_else(|| panic!("no count in {text}"));
    // The number just before a part's words, 0 when the part is not there.
    let number =
        |part: &str| -> usize { line.find(part).and_then(|i| line[..i].rsplit(' ').next()?.parse().ok()).unwrap_or(0) };
    let total = line.split_whitespace().find_map(|w| w.parse().ok()).unwrap();
    (
        total,
        number(" in the cluster's workloads"),
        number(" the node image is built from"),
        number(" in `k3d-gpu test`'s pods"),
        number(" k3s runs on its own"),
    )
}

fn stderr_of(args: &[&str]) -> String {
    let out = K3dGpu::new().args(args).cwd(repo()).output();
    String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
}

#[test]
fn plan_render_and_images_count_unpinned_images_by_the_same_parts() {
    let plan = counts(&stderr_of(&["plan", "--offline", "-c", EXAMPLE, "--root", HOST]));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let render = counts(&stderr_of(&["render", "-c", EXAMPLE, "--root", HOST, "--out", out.to_str().unwrap()]));
    let images = counts(&stderr_of(&["images", "-c", EXAMPLE, "--root", HOST]));
    // Each total is its parts.
    for (name, (total, w, b, t, k)) in [("plan", plan), ("render", render), ("images", images)] {
        assert_eq!(total, w + b + t + k, "{name}: {total} is not {w} + {b} + {t} + {k}");
    }
    assert!(plan.1 > 0 && plan.2 > 0, "the example has both kinds: {plan:?}");
    // The same workloads everywhere; the bases where the command's set holds them.
    assert_eq!((render.1, images.1), (plan.1, plan.1));
    assert_eq!((render.2, images.2), (0, plan.2), "render writes no node image");
    assert_eq!((plan.3, render.3), (0, 0), "only `images` counts test pods");
    assert!(images.3 > 0);
    // `images --json` says where each is used, in the same parts.
    let doc: Value = serde_json::from_slice(
        &K3dGpu::new().args(["images", "--json", "-c", EXAMPLE, "--root", HOST]).cwd(repo()).output().stdout,
    )
    .unwrap();
    let unlocked = |used: &str| {
        doc["images"].as_array().unwrap().iter().filter(|i| i["state"] == "unlocked" && i["use"] == used).count()
    };
    assert_eq!((unlocked("workload"), unlocked("node-image"), unlocked("test-pod")), (images.1, images.2, images.3));
}

fn config_with_volume(dir: &Path) -> std::path::PathBuf {
    let config = dir.join("k3dgpu.toml");
    std::fs::write(&config, "[cluster]\nvolumes = [\"/srv/k3d-gpu-no-such-dir:/models\"]\n").unwrap();
    config
}

#[test]
fn validate_checks_volume_sources_as_plan_does_or_says_it_did_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_volume(dir.path());
    let host = repo().join("tests/fixtures/hosts/plain-laptop-amd");
    // plan refuses the missing source on the fixture host; validate now says the same.
    let plan = K3dGpu::new().args(["plan", "--offline", "-c"]).arg(&config).arg("--root").arg(&host).output();
    assert_eq!(plan.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&plan.stderr).contains("volume-source-missing"));
    let validate = K3dGpu::new().args(["validate", "-c"]).arg(&config).arg("--root").arg(&host).output();
    let text = String::from_utf8_lossy(&validate.stdout).into_owned() + &String::from_utf8_lossy(&validate.stderr);
    assert_eq!(validate.status.code(), Some(1), "{text}");
    assert!(text.contains("volume-source-missing"), "{text}");

    // A facts document has no directories: passes, and says what it left to the machine.
    let facts = repo().join("tests/golden/facts/plain-laptop-amd.json");
    let validate = K3dGpu::new().args(["validate", "--json", "-c"]).arg(&config).arg("--facts").arg(&facts).output();
    assert_eq!(validate.status.code(), Some(0), "{}", String::from_utf8_lossy(&validate.stderr));
    let doc: Value = serde_json::from_slice(&validate.stdout).unwrap();
    let warnings = &doc["hosts"][0]["warnings"];
    assert!(
        warnings.as_array().unwrap().iter().any(|w| w["code"] == "volume-sources-unchecked"
            && w["text"].as_str().unwrap().contains("1 source(s) not checked here")),
        "{doc:#}"
    );

    // validate --machines: the same, per line.
    let list = dir.path().join("k3dgpu-machines.txt");
    std::fs::write(
        &list,
        format!("{} {}\n{} {}\n", config.display(), host.display(), config.display(), facts.display()),
    )
    .unwrap();
    let machines = K3dGpu::new().args(["validate", "--json", "--machines"]).arg(&list).output();
    assert_eq!(machines.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&machines.stdout).unwrap();
    let rows = doc["configs"][0]["hosts"].as_array().unwrap();
    assert_eq!(rows[0]["ok"], false, "{doc:#}");
    assert_eq!(rows[1]["ok"], true, "{doc:#}");
    assert!(rows[1]["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "volume-sources-unchecked"), "{doc:#}");
}
