//! `render --out DIR --flux` (issue 43): a directory Flux's kustomize-controller applies
//! unchanged, for every example (one host and the fleet): the same bytes each time, every
//! kustomization's fields ones kustomize accepts (tests/upstream/kustomize-kustomization-fields.txt)
//! and every file it lists there, every object a whole object, each rendered once, the
//! fleet's node labels in a set of their own, and no secret value, ever: a config that would
//! write one is refused before anything is written.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::{EXAMPLES, FLEET_EXAMPLES, K3dGpu, hosts_dir, repo};

fn render(args: &[&str], out: &Path) -> Output {
    K3dGpu::new().args(["render", "--flux", "--out"]).arg(out).args(args).output()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file under `dir`, relative, with its bytes and mode.
fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
                out.insert(rel, (std::fs::read(&p).unwrap(), mode));
            }
        }
    }
    out
}

/// The fields kustomize accepts at the top of a kustomization.yaml.
fn accepted_fields() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("tests/upstream/kustomize-kustomization-fields.txt")).unwrap();
    text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(str::to_string).collect()
}

/// Checks one kustomization directory and everything it lists, recursively; returns the
/// files it reached (relative to `root`) and adds each object's id to `seen`.
fn walk(root: &Path, dir: &str, seen: &mut BTreeSet<String>, reached: &mut BTreeSet<String>) {
    let at = if dir.is_empty() { root.to_path_buf() } else { root.join(dir) };
    let rel = |name: &str| if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
    let text = std::fs::read_to_string(at.join("kustomization.yaml")).unwrap();
    reached.insert(rel("kustomization.yaml"));
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    let fields: Vec<&String> = doc.as_object().unwrap().keys().collect();
    let accepted = accepted_fields();
    for f in &fields {
        assert!(accepted.contains(f), "{dir}: kustomize refuses the field {f}");
    }
    assert_eq!(doc["apiVersion"], "kustomize.config.k8s.io/v1beta1", "{dir}");
    assert_eq!(doc["kind"], "Kustomization", "{dir}");
    for entry in doc["resources"].as_array().unwrap() {
        let name = entry.as_str().unwrap();
        assert!(!name.contains("..") && !name.starts_with('/'), "{dir}: {name} leaves the directory");
        let path = at.join(name);
        assert!(path.exists(), "{dir}/kustomization.yaml lists {name}, which is not there");
        if path.is_dir() {
            walk(root, &rel(name), seen, reached);
            continue;
        }
        reached.insert(rel(name));
        let yaml = std::fs::read_to_string(&path).unwrap();
        let objects: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert!(!objects.is_empty(), "{}: no object", rel(name));
        for o in objects {
            for field in ["apiVersion", "kind"] {
                assert!(o[field].as_str().is_some_and(|s| !s.is_empty()), "{}: no {field} in {o}", rel(name));
            }
            let name_of = o["metadata"]["name"].as_str().unwrap_or_default();
            assert!(!name_of.is_empty(), "{}: an object without a name: {o}", rel(name));
            let id = format!("{}/{}/{}/{name_of}", o["apiVersion"], o["kind"], o["metadata"]["namespace"]);
            assert!(seen.insert(id.clone()), "{id} is rendered twice: kustomize would refuse the duplicate");
            assert!(o["kind"] != "Secret", "{}: a Secret in a Flux set: {o}", rel(name));
        }
    }
}

/// What every Flux set holds: checked as kustomize reads it, and nothing in the directory
/// that the top kustomization does not reach but the opt-in node label set.
fn check_set(out: &Path) -> BTreeSet<String> {
    let (mut seen, mut reached) = (BTreeSet::new(), BTreeSet::new());
    walk(out, "", &mut seen, &mut reached);
    let files: BTreeSet<String> = tree(out).into_keys().collect();
    let unreached: Vec<&String> = files.difference(&reached).collect();
    for f in &unreached {
        assert!(f.starts_with("node-labels/"), "{f} is in the directory, but no kustomization lists it");
    }
    if !unreached.is_empty() {
        let mut labels = BTreeSet::new();
        walk(out, "node-labels", &mut labels, &mut BTreeSet::new());
        assert!(labels.iter().all(|id| id.contains("\"Node\"")), "{labels:?}");
    }
    seen
}

#[test]
fn every_example_renders_a_flux_set_that_is_the_same_bytes_each_time() {
    let mut runs: Vec<(String, Vec<String>)> = EXAMPLES
        .iter()
        .map(|(e, host)| {
            let config = repo().join(format!("examples/{e}.toml")).display().to_string();
            (e.to_string(), vec!["-c".into(), config, "--root".into(), hosts_dir().join(host).display().to_string()])
        })
        .collect();
    runs.extend(
        FLEET_EXAMPLES.iter().map(|e| {
            (e.to_string(), vec!["-c".into(), repo().join(format!("examples/{e}.toml")).display().to_string()])
        }),
    );
    for (example, args) in runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let first = render(&args, &a);
        assert_eq!(first.status.code(), Some(0), "{example}: {}", stderr(&first));
        assert_eq!(render(&args, &b).status.code(), Some(0));
        let once = tree(&a);
        assert_eq!(once, tree(&b), "{example}: two renders differ");
        // Again over its own output: nothing changes.
        assert_eq!(render(&args, &a).status.code(), Some(0));
        assert_eq!(tree(&a), once, "{example}: a render over the last one changed it");
        assert!(once.values().all(|(_, mode)| *mode == 0o644), "{example}: {once:?}");
        let seen = check_set(&a);
        assert!(!seen.is_empty(), "{example}: no object");
    }
}

#[test]
fn the_fleets_node_labels_are_an_opt_in_set_flux_never_prunes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("flux");
    let config = repo().join("examples/homelab-fleet.toml");
    let rendered = render(&["-c", config.to_str().unwrap()], &out);
    assert_eq!(rendered.status.code(), Some(0), "{}", stderr(&rendered));
    let top = std::fs::read_to_string(out.join("kustomization.yaml")).unwrap();
    assert!(!top.contains("node-labels"), "the top kustomization lists the opt-in set: {top}");
    let nodes: Vec<Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(out.join("node-labels/nodes.yaml")).unwrap()).unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["arc-01", "gpu-01", "xeon-01"]);
    // The labels are the ones `k3d-gpu apply` would set: the graph's, node by node.
    let graph: Value =
        serde_json::from_slice(&K3dGpu::new().args(["graph", "--json", "-c"]).arg(&config).output().stdout).unwrap();
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap();
        let meta = n["metadata"].as_object().unwrap();
        assert_eq!(meta.keys().collect::<Vec<_>>(), ["annotations", "labels", "name"], "{n}");
        assert_eq!(n["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/prune"], "disabled", "{n}");
        assert!(n.get("spec").is_none() && n.get("status").is_none(), "a partial Node: {n}");
        let want: BTreeMap<&str, &str> = graph["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "node-label" && r["spec"]["node"] == name)
            .map(|r| (r["spec"]["key"].as_str().unwrap(), r["spec"]["value"].as_str().unwrap()))
            .collect();
        let got: BTreeMap<&str, &str> = n["metadata"]["labels"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
            .collect();
        assert!(!want.is_empty(), "{name}: no label in the graph");
        assert_eq!(got, want, "{name}");
    }
}

/// A component of the user's own, `app`, whose manifest is `manifest`, beside a config that
/// names it.
fn own_component(dir: &Path, manifest: &str) -> std::path::PathBuf {
    let image = format!("example.invalid/app:1@sha256:{}", "b".repeat(64));
    let kdl = format!(
        "component app {{\n    summary \"a test component\"\n    upstream mine version=v1\n    manifest app.yml\n    image \"{image}\"\n}}\n"
    );
    std::fs::write(dir.join("app.kdl"), kdl).unwrap();
    std::fs::write(dir.join("app.yml"), manifest).unwrap();
    let config = dir.join("k3dgpu.toml");
    std::fs::write(&config, "[[components]]\npath = \"app.kdl\"\n").unwrap();
    config
}

#[test]
fn a_secret_value_is_refused_and_nothing_is_written() {
    let image = format!("example.invalid/app:1@sha256:{}", "b".repeat(64));
    let secret =
        "apiVersion: v1\nkind: Secret\nmetadata: {name: hf, namespace: default}\nstringData: {token: hf_live_value}\n";
    let env = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app, namespace: default}}\nspec:\n  selector: {{matchLabels: {{app: x}}}}\n  template:\n    metadata: {{labels: {{app: x}}}}\n    spec:\n      containers: [{{name: x, image: \"{image}\", env: [{{name: HF_TOKEN, value: hf_live_value}}]}}]\n"
    );
    let by_ref = env.replace("value: hf_live_value", "valueFrom: {secretKeyRef: {name: hf, key: token}}");
    let root = hosts_dir().join("plain-laptop-amd");
    for (manifest, names) in [
        (format!("{secret}---\n{by_ref}"), "Secret default/hf holds one at /stringData/token"),
        (env.clone(), "Deployment default/app holds one at /spec/template/spec/containers/0/env/0/value"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = own_component(dir.path(), &manifest);
        let out = dir.path().join("flux");
        let args = ["-c", config.to_str().unwrap(), "--root", root.to_str().unwrap()];
        let refused = render(&args, &out);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(stderr(&refused).contains(names), "{}", stderr(&refused));
        assert!(!stderr(&refused).contains("hf_live_value"), "{}", stderr(&refused));
        assert!(!out.exists(), "a refused render wrote {:?}", tree(&out).keys());
        // Plain render writes what GitOps of its own applies, the value included.
        let plain = K3dGpu::new().args(["render", "--out"]).arg(&out).args(args).output();
        assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
        assert!(tree(&out).values().any(|(bytes, _)| String::from_utf8_lossy(bytes).contains("hf_live_value")));
    }
    // What a lax reading would take for a path or a number: base64 may start with `/`, a
    // password may be digits, a query string may carry a key.
    for (name, value) in [
        ("API_KEY", "/k3Jx9+Qa0xZ7bL2mN4pQ8rS1tU6vW3yA5cD9eF0gH=="),
        ("ADMIN_PASSWORD", "83920174"),
        ("OPENAI_API_KEY", "/v1?api_key=sk-abc123"),
    ] {
        let manifest =
            env.replace("name: HF_TOKEN, value: hf_live_value", &format!("name: {name}, value: \"{value}\""));
        let dir = tempfile::tempdir().unwrap();
        let config = own_component(dir.path(), &manifest);
        let out = dir.path().join("flux");
        let refused = render(&["-c", config.to_str().unwrap(), "--root", root.to_str().unwrap()], &out);
        assert_eq!(refused.status.code(), Some(2), "{name}={value}: {}", stderr(&refused));
        assert!(stderr(&refused).contains("/spec/template/spec/containers/0/env/0/value"), "{}", stderr(&refused));
        assert!(!stderr(&refused).contains(value), "{}", stderr(&refused));
        assert!(!out.exists(), "a refused render wrote {:?}", tree(&out).keys());
    }
    // A reference to a Secret the cluster holds is no value: the set is written, without it.
    let dir = tempfile::tempdir().unwrap();
    let config = own_component(dir.path(), &by_ref);
    let out = dir.path().join("flux");
    let ok = render(&["-c", config.to_str().unwrap(), "--root", root.to_str().unwrap()], &out);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    check_set(&out);
    assert!(tree(&out).contains_key("app.yaml"), "{:?}", tree(&out).keys());
}
