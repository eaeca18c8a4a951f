//! Shared helpers for the integration tests: fixture hosts and golden files.
#![allow(dead_code)]

pub mod fake_apiserver;
pub mod graph_golden;
#[allow(dead_code)]
pub mod node_images;
#[allow(dead_code)]
pub mod port_forward;
#[allow(dead_code)]
pub mod quantity;
pub mod run;
#[allow(dead_code)]
pub mod schema;
pub mod ssa;
#[allow(dead_code)]
pub mod world;

use std::path::{Path, PathBuf};

use k3d_gpu::facts::{Facts, VendorFilter};
use k3d_gpu::host::HostRoot;
pub use run::K3dGpu;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every object of every manifest in `dir` (relative to the repo) whose name ends in `ext`,
/// with its file name, files in name order.
pub fn manifests_in(dir: &str, ext: &str) -> Vec<(String, serde_json::Value)> {
    let dir = repo().join(dir);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(ext))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap();
        for o in k3d_gpu::catalog::parse_manifest(&name, &text).unwrap() {
            out.push((name.clone(), o));
        }
    }
    out
}

pub fn hosts_dir() -> PathBuf {
    repo().join("tests/fixtures/hosts")
}

/// Every fixture host, by name, sorted.
pub fn host_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(hosts_dir())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn facts_of(host: &str) -> Facts {
    facts_with(host, &VendorFilter::Auto)
}

pub fn facts_with(host: &str, filter: &VendorFilter) -> Facts {
    facts_at(&hosts_dir().join(host), filter)
}

pub fn facts_at(root: &Path, filter: &VendorFilter) -> Facts {
    let host = HostRoot::open(root).unwrap_or_else(|e| panic!("open {}: {e}", root.display()));
    k3d_gpu::detect::facts(&host, filter)
}

/// `f`'s result, run on its own thread; past `deadline` the test fails naming `what`. For a
/// wait with no deadline of its own (a child's exit, a FIFO, an accept): the deadline only
/// turns a hang into a failure, and nothing is measured.
pub fn within<T: Send + 'static>(
    what: &str,
    deadline: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline).unwrap_or_else(|_| panic!("never happened: {what}"))
}

/// Whether this run rewrites goldens instead of comparing: `UPDATE_GOLDEN` set to a truthy
/// value. `UPDATE_GOLDEN=0` (or `false`, or empty) compares, as an unset variable does.
pub fn update_golden() -> bool {
    truthy(std::env::var_os("UPDATE_GOLDEN").as_deref())
}

/// `1`, `true`, `yes` or `on` (any case); anything else, or nothing, is false.
pub fn truthy(value: Option<&std::ffi::OsStr>) -> bool {
    value
        .and_then(|v| v.to_str())
        .is_some_and(|v| ["1", "true", "yes", "on"].iter().any(|t| v.trim().eq_ignore_ascii_case(t)))
}

/// What a plan golden holds in place of the plan hash. The hash covers every byte of the
/// plan, so a golden that kept it would change with any change to any planned object; the
/// goldens show the plan's text, and `plan.rs`'s `the_plan_hash_is_pinned` pins one hash.
pub const PLAN_HASH_PLACEHOLDER: &str = "plan hash: sha256:[hash]";

/// `text` with each `plan hash: sha256:<64 hex>` line's value replaced by
/// [`PLAN_HASH_PLACEHOLDER`] (written and compared so, as snapshot tools filter what varies).
pub fn without_plan_hash(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let (body, end) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
            match body.strip_prefix("plan hash: sha256:") {
                Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    format!("{PLAN_HASH_PLACEHOLDER}{end}")
                }
                _ => line.to_string(),
            }
        })
        .collect()
}

/// Compares `actual` with the golden file at `path` (relative to the repo), or rewrites it
/// when `UPDATE_GOLDEN=1`. Returns a description of the mismatch instead of panicking so one
/// run reports every stale golden.
pub fn check_golden(path: &str, actual: &[u8]) -> Result<(), String> {
    let full = repo().join(path);
    if update_golden() {
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, actual).unwrap();
        return Ok(());
    }
    let expected = std::fs::read(&full).map_err(|e| format!("{path}: {e} (run UPDATE_GOLDEN=1 cargo test)"))?;
    if expected == actual {
        return Ok(());
    }
    let diff = first_difference(&String::from_utf8_lossy(&expected), &String::from_utf8_lossy(actual))
        .unwrap_or_else(|| "the bytes differ (line endings?)".into());
    Err(format!("{path} is stale: {diff}\n(review, then UPDATE_GOLDEN=1 cargo test)"))
}

/// Where two texts first differ, or `None` when they are equal. A text that is a prefix of
/// the other differs where it ends.
pub fn first_difference(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let line = (0..e.len().max(a.len())).find(|&i| e.get(i) != a.get(i)).unwrap_or(0);
    Some(format!(
        "first difference at line {}:\n  expected: {}\n  actual:   {}",
        line + 1,
        e.get(line).unwrap_or(&"<end>"),
        a.get(line).unwrap_or(&"<end>")
    ))
}

/// Copies a fixture host to a fresh temp dir, links included.
pub fn copy_host(host: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&hosts_dir().join(host), dir.path());
    dir
}

#[allow(dead_code)]
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// What exists right after `apply` of `graph`: node containers that recorded the cluster
/// spec, every label and annotation on the node, and every object as the strict fake API
/// server returns it after k3d-gpu's server-side apply (defaults, canonical quantities, uid,
/// resourceVersion, our managedFields entry — [`ssa`]), of the kinds observe lists, kept as
/// observe keeps them. Never a copy of desired. For plan tests without Docker or a cluster.
pub fn converged(graph: &k3d_gpu::compile::DesiredGraph) -> k3d_gpu::observe::Observed {
    use k3d_gpu::compile::ResourceKind;
    use k3d_gpu::observe::*;
    let cluster = graph.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap();
    let name = cluster.spec["name"].as_str().unwrap().to_string();
    let image = cluster.spec["image"].as_str().unwrap().to_string();
    let mut node = ObservedNode { name: format!("k3d-{name}-server-0"), ready: true, ..ObservedNode::default() };
    let mut managed = Vec::new();
    let mut objects = Vec::new();
    for r in graph.resources() {
        match r.kind {
            ResourceKind::NodeLabel => {
                let key = r.spec["key"].as_str().unwrap().to_string();
                node.labels.insert(key.clone(), r.spec["value"].as_str().unwrap().to_string());
                managed.push(key);
            }
            ResourceKind::NodeAnnotation => {
                node.annotations
                    .insert(r.spec["key"].as_str().unwrap().into(), r.spec["value"].as_str().unwrap().into());
            }
            ResourceKind::Object => objects.push(r.spec.clone()),
            _ => {}
        }
    }
    let objects = served_after_apply(objects);
    node.labels.insert("kubernetes.io/hostname".into(), node.name.clone());
    node.annotations.insert(MANAGED_LABELS_ANNOTATION.into(), managed.join(","));
    Observed {
        schema: SCHEMA.into(),
        cluster: Some(ObservedCluster {
            name: name.clone(),
            configured_image_id: Some("sha256:1111".into()),
            nodes: vec![NodeContainer {
                name: format!("k3d-{name}-server-0"),
                role: "server".into(),
                image: image.clone(),
                image_id: "sha256:1111".into(),
                image_version: Some("0.1.0".into()),
                k3s_args: Vec::new(),
                mounts: Vec::new(),
                env: Default::default(),
                gpus: cluster.spec["gpus"].as_str().map(str::to_string),
                running: true,
                recorded_spec: Some(cluster.spec.clone()),
            }],
        }),
        kubernetes: Some(ObservedKubernetes { nodes: vec![node], objects, ..Default::default() }),
        // The node image as apply leaves it: present, labelled with its build inputs.
        node_image: graph.resources().find(|r| r.kind == ResourceKind::NodeImage).map(|r| ObservedImage {
            reference: r.spec["reference"].as_str().unwrap().into(),
            present: true,
            id: Some("sha256:1111".into()),
            build_inputs: r.spec["digest"].as_str().map(str::to_string),
            k3s_version: None,
        }),
    }
}

/// `objects` applied by k3d-gpu (server-side, forced, as apply does) to the strict fake's
/// state of a fresh k3s, namespaces and CRDs first, then listed and kept as observe does: the
/// managed-by label, the kinds observe lists, only our managedFields entry, sorted by id.
/// uids are seeded, so goldens stay stable.
pub fn served_after_apply(mut objects: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let mut state = fake_apiserver::State { uid_seed: 1, ..fake_apiserver::State::k3s() };
    objects.sort_by_key(|o| match o["kind"].as_str() {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    });
    for o in &objects {
        if let Err((code, status)) = state.apply(o, "k3d-gpu", true) {
            panic!("the API server refuses {}: {code} {}", k3d_gpu::compile::object_id(o), status["message"]);
        }
    }
    let listed = k3d_gpu::compile::object_kinds(&k3d_gpu::catalog::Catalog::embedded().unwrap());
    let (key, value) = k3d_gpu::compile::MANAGED_BY;
    let mut out: Vec<serde_json::Value> = state
        .objects
        .into_iter()
        .filter(|o| o["metadata"]["labels"][key] == value)
        .filter(|o| listed.contains(&(o["apiVersion"].as_str().unwrap().into(), o["kind"].as_str().unwrap().into())))
        .map(|mut o| {
            k3d_gpu::observe::managed::keep_ours(&mut o);
            o
        })
        .collect();
    out.sort_by_key(k3d_gpu::compile::object_id);
    out
}

/// Each example config and the fixture host it is for.
pub const EXAMPLES: &[(&str, &str)] = &[
    ("nvidia-workstation", "desktop-rpl-nvidia"),
    ("nvidia-time-slicing", "desktop-rpl-nvidia"),
    ("arc-homelab-dra", "arc-b580-xe-rpl-igpu"),
    ("lunar-lake-npu", "lunar-lake-npu"),
    ("hybrid-igpu-sharing", "meteor-lake-old-npu-fw"),
    ("xeon-numa-accelerators", "xeon-2s-snc2"),
    ("wsl2-intel", "wsl2-intel"),
    ("gaudi-server", "gaudi3-server"),
];

/// `examples/<example>.toml`, loaded.
pub fn example_config(example: &str) -> k3d_gpu::config::Config {
    let text = std::fs::read_to_string(repo().join(format!("examples/{example}.toml"))).unwrap();
    k3d_gpu::config::load_str(example, &text).unwrap_or_else(|e| panic!("{example}: {e:?}"))
}

/// Examples of an existing cluster: their nodes name their own facts (beside the example).
#[allow(dead_code)]
pub const FLEET_EXAMPLES: &[&str] = &["homelab-fleet"];

/// A fleet example's nodes and the facts each names, read as the CLI reads them.
#[allow(dead_code)]
pub fn fleet_nodes(config: &k3d_gpu::config::Config) -> Vec<(String, Facts)> {
    config
        .nodes
        .iter()
        .map(|n| {
            let path = repo().join("examples").join(n.facts.as_deref().expect("the examples name facts files"));
            (n.name.clone(), serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap())
        })
        .collect()
}

/// A fleet example compiled over its nodes, as `validate` and `plan` compile it.
#[allow(dead_code)]
pub fn fleet_graph(example: &str, catalog: &k3d_gpu::catalog::Catalog) -> k3d_gpu::compile::DesiredGraph {
    let config = example_config(example);
    let nodes = fleet_nodes(&config);
    let fleet: Vec<k3d_gpu::compile::fleet::FleetNode> = nodes
        .iter()
        .zip(&config.nodes)
        .map(|((name, facts), n)| k3d_gpu::compile::fleet::FleetNode { name, facts, expect: &n.expect })
        .collect();
    k3d_gpu::compile::fleet::compile(&config, &fleet, catalog).unwrap_or_else(|e| panic!("{example}: {e:#?}"))
}

/// Whether a Docker engine answers at DOCKER_HOST. Without one the Docker tests skip, unless
/// K3D_GPU_TEST_DOCKER=1 (set by .ci/run) requires it: then this fails the test.
pub fn docker_ready() -> bool {
    let required = std::env::var("K3D_GPU_TEST_DOCKER").is_ok_and(|v| v == "1");
    let ok = std::env::var("DOCKER_HOST").is_ok()
        && std::process::Command::new("docker").arg("version").output().is_ok_and(|o| o.status.success());
    assert!(ok || !required, "K3D_GPU_TEST_DOCKER=1 but no Docker engine answers at DOCKER_HOST");
    if !ok {
        eprintln!("skipped: no Docker engine (run .ci/dockerd.sh, or set K3D_GPU_TEST_DOCKER=1 to require one)");
    }
    ok
}

/// Imports a tiny node image as `reference`: rancher/k3s's `/bin` as the stand-in lays it
/// out (`node_images::k3s_bin`: busybox as `/bin/sh`, a stand-in answering the version flag
/// for each binary the node image check runs), whose entrypoint sleeps (so k3d's `server …`
/// args are just its $0 $@), labelled with release `version`. Returns its image id.
pub fn import_image(reference: &str, version: &str) -> String {
    import_image_lacking(reference, version, &[])
}

/// `import_image` without the entries of `/bin` named in `lacking` (`&["containerd"]`: an
/// image the node image check refuses).
pub fn import_image_lacking(reference: &str, version: &str, lacking: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    node_images::k3s_bin(&rootfs.join("bin"), lacking);
    node_images::import(
        &rootfs,
        reference,
        &[
            r#"ENTRYPOINT ["/bin/sh", "-c", "sleep 3600"]"#,
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/bin/aux",
            &format!("LABEL org.opencontainers.image.version={version}"),
        ],
    )
}

/// Plan inputs with fixed placeholder digests, for tests that plan from values rather than
/// from files (the digests only matter to the hash).
#[allow(dead_code)]
pub fn placeholder_inputs() -> k3d_gpu::plan::Inputs {
    k3d_gpu::plan::Inputs {
        config: "sha256:c".into(),
        facts: "sha256:f".into(),
        observed: "sha256:o".into(),
        made_from: None,
        owner: None,
        stdlib: "sha256:s".into(),
        images: "sha256:i".into(),
        tool_version: "0".into(),
    }
}

/// The real binary, run hermetically ([`run`]) in `dir` with that directory as HOME and
/// `dir/kubeconfig` as the kubeconfig, so nothing of the user's is read.
#[allow(dead_code)]
pub fn k3d_gpu_in(dir: &Path, args: &[&str]) -> std::process::Output {
    K3dGpu::new().args(args).cwd(dir).env("KUBECONFIG", dir.join("kubeconfig")).env("HOME", dir).output()
}

/// [`k3d_gpu_in`] with the test process's Docker engine, for the Docker tests.
#[allow(dead_code)]
pub fn k3d_gpu_docker_in(dir: &Path, args: &[&str]) -> std::process::Output {
    K3dGpu::new().docker().args(args).cwd(dir).env("KUBECONFIG", dir.join("kubeconfig")).env("HOME", dir).output()
}

/// Creates and starts a container shaped like k3d's server node of `cluster` (k3d's labels,
/// no network) from `image`, with that entrypoint and command; returns its name.
#[allow(dead_code)]
pub async fn start_k3d_server(
    docker: &bollard::Docker,
    cluster: &str,
    image: &str,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
) -> String {
    use bollard::query_parameters::{CreateContainerOptions, StartContainerOptions};
    let name = format!("k3d-{cluster}-server-0");
    let labels = [("app", "k3d"), ("k3d.cluster", cluster), ("k3d.role", "server")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let body = bollard::models::ContainerCreateBody {
        image: Some(image.into()),
        entrypoint,
        cmd,
        labels: Some(labels),
        host_config: Some(bollard::models::HostConfig { network_mode: Some("none".into()), ..Default::default() }),
        ..Default::default()
    };
    let options = CreateContainerOptions { name: Some(name.clone()), ..Default::default() };
    docker.create_container(Some(options), body).await.unwrap();
    docker.start_container(&name, None::<StartContainerOptions>).await.unwrap();
    name
}
