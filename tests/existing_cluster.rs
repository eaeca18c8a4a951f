//! An existing cluster (`[cluster] provider = "existing"`, DESIGN.md §9) end to end through the
//! real binary, against the fake API server started like a fresh k3s with three machines of
//! different hardware (an Arc B580 box, an NVIDIA desktop with an iGPU, a Xeon with
//! DSA/IAA/QAT) and one more node the config does not list. No Docker and no k3d: the test
//! runs everywhere, and a call to either would fail it (the k3d binary is a path that does not
//! exist, DOCKER_HOST a dead socket).

mod support;

use std::path::PathBuf;
use std::process::Output;

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{State, k3s_node};
use support::repo;
use support::world::{World, roll_out};

const CONTEXT: &str = "homelab";
const NODES: [&str; 3] = ["arc-01", "gpu-01", "xeon-01"];

/// The fleet: the fake API server, the scratch directory with the example's config, and the
/// kubelets and controllers (`support::world`).
type Fleet = World;

/// The kubeconfig: context `homelab` points at the fake server; the current context at a dead
/// port, so a client that used the current context would fail.
fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: fake\n    user: nobody\n- name: elsewhere\n  context:\n    cluster: dead\n    user: nobody\nusers:\n- name: nobody\n  user: {{}}\n"
    )
}

/// Three config nodes and `edge-01`, which carries a label of someone else's; a thread plays
/// the kubelets and controllers: workloads roll out, and each node advertises what its
/// plugin would once the plugin's DaemonSet exists.
fn fleet() -> Fleet {
    fleet_with(true)
}

/// [`fleet`], whose plugins advertise their devices only when `advertise` is set.
fn fleet_with(advertise: bool) -> Fleet {
    let mut nodes: Vec<Value> = NODES.iter().map(|n| k3s_node(n, *n == "arc-01")).collect();
    let mut edge = k3s_node("edge-01", false);
    edge["metadata"]["labels"]["team"] = json!("storage");
    nodes.push(edge);
    // The example's agent (vLLM on gpu-01) answers its model list through the service proxy.
    // It serves the model under its short name, and answers the warm-up's chat completion.
    let models = json!({"object": "list", "data": [{"id": "Qwen3-4B", "object": "model"}]});
    let reply = json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": "Hello from the fleet."}, "finish_reason": "stop"}]});
    // The warm-up reaches the server through a port-forward to its pod, which the thread
    // below starts once the Service exists (as the Deployment's ReplicaSet would).
    let proxied = vec![("vllm:8000/v1/models".to_string(), models)];
    let state = State { nodes, proxied, ..State::k3s() };
    let f = World::start(state, move |s| {
        let vllm = s.objects.iter().find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "vllm").cloned();
        if let Some(svc) = vllm
            && !s.objects.iter().any(|o| o["kind"] == "Pod" && o["metadata"]["name"] == "vllm-0")
        {
            let (pod, key) = support::port_forward::ready_pod_behind(&svc, 8000);
            s.objects.push(pod);
            s.forwarded.retain(|(k, _)| !k.starts_with("vllm-0:"));
            s.forwarded.push((format!("{key}/v1/chat/completions"), reply.clone()));
        }
        roll_out(s);
        if !advertise {
            return;
        }
        let advertised = [
            ("arc-01", &["gpu.intel.com/xe", "gpu.intel.com/monitoring"][..]),
            ("gpu-01", &["nvidia.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/monitoring"][..]),
            (
                "xeon-01",
                &[
                    "dsa.intel.com/wq-user-dedicated",
                    "dsa.intel.com/wq-user-shared",
                    "iaa.intel.com/wq-user-dedicated",
                    "qat.intel.com/cy",
                    "qat.intel.com/dc",
                ][..],
            ),
            // arc-01's facts also have the iGPU, exclusive like the B580.
            ("arc-01", &["gpu.intel.com/i915"][..]),
        ];
        for (node, resources) in advertised {
            for r in resources {
                support::world::advertise(s, |n| n == node, r, "1");
            }
        }
    });
    support::copy_tree(&repo().join("examples/homelab-fleet"), &f.join("homelab-fleet"));
    std::fs::copy(repo().join("examples/homelab-fleet.toml"), f.join("k3dgpu.toml")).unwrap();
    std::fs::write(f.join("kubeconfig"), kubeconfig(&f.server.url)).unwrap();
    f
}

impl Fleet {
    fn config(&self) -> PathBuf {
        self.dir.path().join("k3dgpu.toml")
    }

    fn run(&self, args: &[&str]) -> Output {
        K3dGpu::new()
            .args(args)
            .args(["-c", self.config().to_str().unwrap()])
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("K3D_GPU_K3D", self.dir.path().join("no-k3d-here"))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .output()
    }

    fn node(&self, name: &str) -> Value {
        let state = self.server.state.lock().unwrap();
        state.nodes.iter().find(|n| n["metadata"]["name"] == name).cloned().unwrap()
    }

    fn daemonsets(&self) -> Vec<Value> {
        let state = self.server.state.lock().unwrap();
        state.objects.iter().filter(|o| o["kind"] == "DaemonSet").cloned().collect()
    }

    fn edit_config(&self, edit: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(self.config()).unwrap();
        std::fs::write(self.config(), edit(text)).unwrap();
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn hash_of(out: &Output) -> String {
    text(out).lines().find_map(|l| l.strip_prefix("plan hash: ")).expect("a plan hash").to_string()
}

fn labels(node: &Value) -> serde_json::Map<String, Value> {
    node["metadata"]["labels"].as_object().cloned().unwrap_or_default()
}

fn apply(f: &Fleet) -> Output {
    let planned = f.run(&["plan"]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    f.run(&["apply", "--plan-hash", &hash_of(&planned), "--verify-timeout", "30"])
}

/// Drops `[[nodes]]` entry `name` (and its `[nodes.expect]`) from the example's text.
fn without_node(text: &str, name: &str) -> String {
    let blocks: Vec<&str> = text.split("[[nodes]]").collect();
    let mut out = blocks[0].to_string();
    for block in &blocks[1..] {
        if !block.contains(&format!("name = \"{name}\"")) {
            out.push_str("[[nodes]]");
            out.push_str(block);
        }
    }
    out
}

#[test]
fn plan_apply_plan_converges_with_per_node_labels_and_plugin_variants() {
    let f = fleet();
    let planned = f.run(&["plan"]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    assert!(
        text(&planned)
            .contains("1 cluster node(s) not in [[nodes]] get nothing from k3d-gpu (no labels, no plugins): edge-01"),
        "the plan says which nodes it leaves alone:\n{}",
        text(&planned)
    );
    let before = f.server.requests().len();
    let applied = f.run(&["apply", "--plan-hash", &hash_of(&planned), "--verify-timeout", "30"]);
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    assert!(text(&applied).contains("done   verify/allocatable/gpu-01/nvidia.com/gpu"), "{}", text(&applied));
    // Each node's labels and annotations in one GET and one PATCH, however many there are.
    let node_requests: Vec<String> = f.server.requests()[before..]
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/nodes/") || r.starts_with("PATCH /api/v1/nodes/"))
        .cloned()
        .collect();
    let label_actions = text(&planned).lines().filter(|l| l.contains("node-label/")).count();
    assert!(label_actions > 6, "the plan sets many labels: {label_actions}");
    assert_eq!(node_requests.len(), 2 * 3, "{node_requests:#?}");

    // Labels per node, from each node's own facts.
    let arc = labels(&f.node("arc-01"));
    let gpu = labels(&f.node("gpu-01"));
    let xeon = labels(&f.node("xeon-01"));
    assert_eq!(arc["gpu.intel.com/xmx"], "true", "the B580 has XMX");
    assert_eq!(gpu["gpu.intel.com/xmx"], "false", "a Raptor Lake iGPU has none");
    assert_eq!(xeon["intel.feature.node.kubernetes.io/qat"], "true");
    assert!(!arc.contains_key("intel.feature.node.kubernetes.io/qat"));
    assert_eq!(gpu["component.k3d-gpu.io/nvidia-device-plugin"], "true");
    assert!(!arc.contains_key("component.k3d-gpu.io/nvidia-device-plugin"), "no NVIDIA plugin on the Arc box");
    assert!(!xeon.contains_key("component.k3d-gpu.io/intel-gpu-plugin"), "no GPU plugin on the Xeon");
    // The node the config does not list gets nothing.
    let edge = labels(&f.node("edge-01"));
    assert!(edge.keys().all(|k| !k.contains("k3d-gpu")), "{edge:?}");
    assert!(f.node("edge-01")["metadata"]["annotations"].get("k3d-gpu.io/managed-labels").is_none());

    // Two Intel GPU plugin variants: the iGPU-only desktop shares its GPU, the Arc box does
    // not; each selects only its own node's variant label.
    let variants: Vec<Value> = f
        .daemonsets()
        .into_iter()
        .filter(|d| d["metadata"]["name"].as_str().unwrap().starts_with("intel-gpu-plugin-"))
        .collect();
    assert_eq!(variants.len(), 2, "{variants:#?}");
    for (node, node_labels, shared) in [("arc-01", &arc, false), ("gpu-01", &gpu, true)] {
        let variant = node_labels["component.k3d-gpu.io/intel-gpu-plugin"].as_str().unwrap();
        let ds = variants.iter().find(|d| d["metadata"]["name"] == format!("intel-gpu-plugin-{variant}")).unwrap();
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["component.k3d-gpu.io/intel-gpu-plugin"], variant, "{node}");
        assert_eq!(ds["spec"]["selector"]["matchLabels"]["k3d-gpu.io/variant"], variant);
        let args = pod["containers"][0]["args"].as_array().unwrap();
        assert_eq!(args.iter().any(|a| a == "-shared-dev-num=8"), shared, "{node}: {args:?}");
    }
    // A plugin one node needs keeps its plain name and selects that node's label.
    let nvidia =
        f.daemonsets().into_iter().find(|d| d["metadata"]["name"] == "nvidia-device-plugin-daemonset").unwrap();
    assert_eq!(nvidia["spec"]["template"]["spec"]["nodeSelector"]["component.k3d-gpu.io/nvidia-device-plugin"], "true");

    // The agent ([agent] node = "gpu-01"): vLLM on CUDA, pinned to gpu-01 by a label that
    // node alone carries, and ready once it lists its model.
    assert!(text(&applied).contains("done   verify/endpoint/k3d-gpu-agent/vllm"), "{}", text(&applied));
    assert_eq!(gpu["component.k3d-gpu.io/agent"], "true");
    assert!(!arc.contains_key("component.k3d-gpu.io/agent") && !xeon.contains_key("component.k3d-gpu.io/agent"));
    let vllm = {
        let state = f.server.state.lock().unwrap();
        state.objects.iter().find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "vllm").cloned()
    }
    .expect("the agent's Deployment");
    let pod = &vllm["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["component.k3d-gpu.io/agent"], "true", "{pod:#}");
    assert_eq!(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");

    let again = f.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(again.status.code(), Some(0), "plan after apply is a no-op:\n{}", text(&again));
}

#[test]
fn a_node_removed_from_the_config_loses_only_our_labels() {
    let f = fleet();
    assert_eq!(apply(&f).status.code(), Some(0));
    // Someone else labels the Xeon after k3d-gpu did.
    f.server.change(|s| {
        let xeon = s.nodes.iter_mut().find(|n| n["metadata"]["name"] == "xeon-01").unwrap();
        xeon["metadata"]["labels"]["team"] = json!("storage");
    });
    f.edit_config(|t| without_node(&t, "xeon-01"));
    let planned = f.run(&["plan", "--json"]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    let plan: Value = serde_json::from_slice(&planned.stdout).unwrap();
    let actions = plan["actions"].as_array().unwrap();
    assert!(actions.iter().all(|a| a["action"] == "delete"), "only deletes: {actions:#?}");
    let ids: Vec<&str> = actions.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"node-label/xeon-01/intel.feature.node.kubernetes.io/qat"), "{ids:?}");
    assert!(ids.contains(&"k8s/apps/DaemonSet/kube-system/intel-qat-plugin"), "its plugins go too: {ids:?}");
    assert!(ids.iter().all(|id| !id.contains("arc-01") && !id.contains("gpu-01")), "{ids:?}");
    assert!(ids.iter().all(|id| !id.ends_with("/team")), "{ids:?}");

    assert_eq!(apply(&f).status.code(), Some(0));
    let xeon = f.node("xeon-01");
    let left = labels(&xeon);
    assert_eq!(left["team"], "storage", "someone else's label stays");
    assert_eq!(left["kubernetes.io/hostname"], "xeon-01", "k3s's labels stay");
    assert!(left.keys().all(|k| !k.contains("k3d-gpu") && !k.starts_with("intel.feature")), "{left:?}");
    assert!(xeon["metadata"]["annotations"].get("k3d-gpu.io/managed-labels").is_none_or(Value::is_null));
    assert!(labels(&f.node("arc-01")).contains_key("component.k3d-gpu.io/intel-gpu-plugin"), "the others keep theirs");
    assert_eq!(f.run(&["plan", "--detailed-exitcode"]).status.code(), Some(0));
}

#[test]
fn a_node_missing_from_the_cluster_is_a_clear_error() {
    let f = fleet();
    f.edit_config(|t| {
        t.replace("name = \"gpu-01\"", "name = \"gpu-02\"").replace("node = \"gpu-01\"", "node = \"gpu-02\"")
    });
    let out = f.run(&["plan"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("has no node gpu-02") && said.contains("--context homelab"), "{said}");
    assert!(f.server.requests().iter().all(|r| r.starts_with("GET ")), "a refused plan writes nothing");
}

#[test]
fn observe_costs_one_list_of_nodes_and_one_per_kind() {
    let f = fleet();
    let before = f.server.requests().len();
    let out = f.run(&["plan"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let requests: Vec<String> = f.server.requests()[before..].to_vec();
    let nodes = requests.iter().filter(|r| r.starts_with("GET /api/v1/nodes")).count();
    assert_eq!(nodes, 1, "{requests:#?}");
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    // Nodes, each kind, ResourceSlices, the pods that hold accelerators (one page here):
    // independent of the node count.
    assert_eq!(requests.len(), 1 + k3d_gpu::compile::object_kinds(&catalog).len() + 2, "{requests:#?}");

    // `observe` reads the same way, and says which nodes are the config's.
    let observed = f.run(&["observe"]);
    assert_eq!(observed.status.code(), Some(0), "{}", text(&observed));
    let said = text(&observed);
    assert!(said.lines().any(|l| l.contains("edge-01") && l.contains("not in the config")), "{said}");
    assert!(said.lines().any(|l| l.contains("arc-01") && l.contains("in [[nodes]]")), "{said}");
}

#[test]
fn destroy_removes_only_what_k3d_gpu_manages() {
    let f = fleet();
    assert_eq!(apply(&f).status.code(), Some(0));
    let shown = f.run(&["destroy"]);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    let hash = text(&shown)
        .lines()
        // The command carries the options given (`-c …`) before `destroy`.
        .find_map(|l| l.strip_prefix("to run it: k3d-gpu ")?.split_once("destroy --plan-hash ").map(|(_, h)| h))
        .expect("destroy prints its hash")
        .to_string();
    let out = f.run(&["destroy", "--plan-hash", &hash]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let state = f.server.state.lock().unwrap();
    // Ours is gone but for the agent's downloaded model, kept on removal (`keep_models`), and
    // what would cascade: a Namespace (everything in it) or a CRD (every object of its kind)
    // may hold users' objects on a cluster we did not create.
    let left: Vec<String> = state
        .objects
        .iter()
        .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k3d-gpu")
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
        .collect();
    assert!(
        left.iter().all(|o| o.starts_with("Namespace/")
            || o.starts_with("CustomResourceDefinition/")
            || o == "PersistentVolumeClaim/vllm-models"),
        "{left:?}"
    );
    assert!(left.contains(&"PersistentVolumeClaim/vllm-models".to_string()), "{left:?}");
    assert!(left.contains(&"Namespace/k3d-gpu-agent".to_string()), "{left:?}");
    assert!(text(&shown).contains("[cascade-kept]"), "destroy says what it keeps: {}", text(&shown));
    assert!(state.objects.iter().any(|o| o["metadata"]["name"] == "coredns"), "k3s's own objects stay");
    for n in &state.nodes {
        let l = labels(n);
        assert!(l.keys().all(|k| !k.contains("k3d-gpu")), "{l:?}");
        assert!(l.contains_key("kubernetes.io/hostname"));
    }
    drop(state);
    let again = f.run(&["destroy"]);
    assert!(text(&again).contains("Nothing to destroy: the cluster behind context homelab"), "{}", text(&again));
}

#[test]
fn a_nodes_path_that_leaves_the_config_directory_is_refused() {
    let f = fleet();
    // A link inside the directory that points outside it.
    let outside = tempfile::tempdir().unwrap();
    std::fs::copy(repo().join("examples/homelab-fleet/arc-01.json"), outside.path().join("arc-01.json")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.dir.path().join("elsewhere")).unwrap();
    f.edit_config(|t| t.replace("homelab-fleet/arc-01.json", "elsewhere/arc-01.json"));
    let out = f.run(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("leads outside"), "{}", text(&out));
    // And `..` is refused before anything is resolved.
    f.edit_config(|t| t.replace("elsewhere/arc-01.json", "../arc-01.json"));
    let out = f.run(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("`..`"), "{}", text(&out));
}

/// The top-level keys of a kustomization.yaml (its comment lines skipped).
fn top_level_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with(' ') && !l.is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn render_writes_a_directory_per_node_group_that_kustomize_accepts() {
    let f = fleet();
    let out = f.dir.path().join("rendered");
    let rendered = f.run(&["render", "--out", out.to_str().unwrap()]);
    assert_eq!(rendered.status.code(), Some(0), "{}", text(&rendered));
    let upstream = std::fs::read_to_string(repo().join("tests/upstream/kustomize-kustomization-fields.txt")).unwrap();
    let accepted: Vec<&str> = upstream.lines().filter(|l| !l.starts_with('#')).collect();
    let top = std::fs::read_to_string(out.join("kustomization.yaml")).unwrap();
    let dirs: Vec<&str> = top.lines().filter_map(|l| l.strip_prefix("  - ")).collect();
    assert_eq!(dirs, ["group-arc-01", "group-gpu-01", "group-xeon-01", "shared"]);
    let graph: Value = serde_json::from_slice(&f.run(&["graph", "--json"]).stdout).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for dir in std::iter::once(".").chain(dirs.iter().copied()) {
        let kustomization = std::fs::read_to_string(out.join(dir).join("kustomization.yaml")).unwrap();
        for key in top_level_keys(&kustomization) {
            assert!(accepted.contains(&key.as_str()), "{dir}: kustomize refuses the field {key}");
        }
        if dir == "." {
            continue;
        }
        for file in kustomization.lines().filter_map(|l| l.strip_prefix("  - ")) {
            let yaml = std::fs::read_to_string(out.join(dir).join(file)).unwrap();
            for doc in yaml.split("\n---\n").skip(1) {
                let object: Value = serde_saphyr::from_str(doc).unwrap();
                let id =
                    format!("{}/{}/{}", object["kind"], object["metadata"]["namespace"], object["metadata"]["name"]);
                assert!(seen.insert(id.clone()), "{id} is rendered twice: kustomize would refuse the duplicate");
                // A group's workloads select that group's node only.
                if dir.starts_with("group-") {
                    let selector = object["spec"]["template"]["spec"]["nodeSelector"].as_object().unwrap();
                    let name = dir.strip_prefix("group-").unwrap();
                    for (k, v) in selector.iter().filter(|(k, _)| k.starts_with("component.k3d-gpu.io/")) {
                        let id = format!("node-label/{name}/{k}");
                        let label = graph["resources"].as_array().unwrap().iter().find(|r| r["id"] == id.as_str());
                        assert_eq!(label.map(|l| &l["spec"]["value"]), Some(v), "{dir}/{file}: {k}");
                    }
                }
            }
        }
    }
    assert!(seen.iter().any(|id| id.contains("intel-gpu-plugin-")), "{seen:?}");
}

#[test]
fn a_check_that_never_holds_names_its_node_and_the_configs_context() {
    // The plugins roll out, and none advertises a device.
    let f = fleet_with(false);
    let planned = f.run(&["plan"]);
    let out = f.run(&["apply", "--plan-hash", &hash_of(&planned), "--verify-timeout", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.lines().any(|l| l.contains("verify/allocatable/gpu-01/nvidia.com/gpu")
            && l.contains("node gpu-01 does not advertise nvidia.com/gpu")
            && l.contains("kubectl --context homelab")),
        "{said}"
    );
    assert!(!said.contains("k3d-gpu-server-0"), "no k3d container to look in: {said}");
}

#[test]
fn a_node_may_name_a_fixture_host_instead_of_a_facts_file() {
    let f = fleet();
    let before = f.run(&["graph", "--json"]);
    assert_eq!(before.status.code(), Some(0), "{}", text(&before));
    // The Xeon's captured facts came from this fixture host: the same graph either way.
    support::copy_tree(&repo().join("tests/fixtures/hosts/xeon-2s-snc2"), &f.dir.path().join("hosts/xeon-01"));
    f.edit_config(|t| t.replace("facts = \"homelab-fleet/xeon-01.json\"", "root = \"hosts/xeon-01\""));
    let after = f.run(&["graph", "--json"]);
    assert_eq!(after.status.code(), Some(0), "{}", text(&after));
    assert_eq!(String::from_utf8_lossy(&before.stdout), String::from_utf8_lossy(&after.stdout));
    // Both at once is refused, naming the node.
    f.edit_config(|t| {
        t.replace("root = \"hosts/xeon-01\"", "root = \"hosts/xeon-01\"\nfacts = \"homelab-fleet/xeon-01.json\"")
    });
    let both = f.run(&["validate"]);
    assert_eq!(both.status.code(), Some(1), "{}", text(&both));
    assert!(text(&both).contains("node \"xeon-01\": give exactly one of facts and root"), "{}", text(&both));
}

#[test]
fn keys_of_the_other_provider_are_errors_that_point_at_them() {
    let f = fleet();
    f.edit_config(|t| t.replace("context = \"homelab\"\n", "context = \"homelab\"\nagents = 2\n"));
    let out = f.run(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("[cluster] agents is k3d-only") && said.contains("agents = 2"), "{said}");
    // And [[nodes]] without provider = "existing".
    f.edit_config(|t| t.replace("provider = \"existing\"\n", "").replace("agents = 2\n", ""));
    let out = f.run(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("context names an existing cluster, but provider is k3d"), "{said}");
    assert!(said.contains("[[nodes]] lists the machines of an existing cluster"), "{said}");
}

#[test]
fn logs_and_audit_refuse_a_cluster_they_cannot_read() {
    // Both read a k3d cluster (its containers, context k3d-<name>): on an existing cluster
    // they would read another one, so they refuse and say what to run instead.
    let f = fleet();
    let hash = format!("sha256:{}", "0".repeat(64));
    for (args, instead) in [
        (&["logs"][..], "kubectl --context homelab"),
        (&["audit"][..], "--observed FILE"),
        // `apply --test` would apply, then find no k3d cluster to test: refused before either.
        (&["apply", "--test", "--plan-hash", &hash][..], "apply without --test"),
    ] {
        let out = f.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains("this config names an existing one") && said.contains(instead), "{said}");
    }
    assert!(f.server.requests().is_empty(), "nothing was read from the cluster");
}

#[test]
fn a_second_config_on_the_cluster_leaves_the_first_ones_nodes_and_objects_alone() {
    let f = fleet();
    assert_eq!(apply(&f).status.code(), Some(0));
    let state_of = |f: &Fleet| {
        let s = f.server.state.lock().unwrap();
        (s.objects.len(), s.nodes.iter().map(labels).collect::<Vec<_>>())
    };
    let before = state_of(&f);
    // Another config, named apart, for the Xeon alone: without the stamps it planned every
    // label on arc-01 and gpu-01, and every object of the first config, as "no longer wanted".
    f.edit_config(|t| {
        let t = without_node(&without_node(&t, "arc-01"), "gpu-01").replace("[agent]\nnode = \"gpu-01\"\n", "");
        t.replace("[cluster]\n", "[cluster]\nname = \"storage\"\n")
    });
    // The Xeon is the first config's too (its annotation says so): the second one may not
    // take it over, so it plans nothing, and says why for each node and object.
    let planned = f.run(&["plan", "--json"]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    let plan: Value = serde_json::from_slice(&planned.stdout).unwrap();
    assert_eq!(plan["actions"], json!([]), "{:#}", plan["actions"]);
    let left_alone = |what: &str| {
        plan["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "other-config" && w["text"].as_str().unwrap().contains(what))
    };
    assert!(left_alone("node xeon-01 belongs to config \"gpu\""), "{:#}", plan["warnings"]);
    assert!(left_alone("DaemonSet"), "its objects too: {:#}", plan["warnings"]);
    // Nor does its destroy touch anything of the first config's.
    let shown = f.run(&["destroy"]);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    assert!(text(&shown).contains("Nothing to destroy"), "{}", text(&shown));
    assert_eq!(state_of(&f), before, "the first config's cluster is as it was");
}

#[test]
fn validate_puts_a_warning_about_several_nodes_on_each_of_their_rows() {
    // Two Xeons of one kind share one warning, `… (node xeon-01, xeon-02)`: it belongs on
    // both rows and not on the Arc box's (it was on none when matched as text per node).
    let dir = tempfile::tempdir().unwrap();
    for machine in ["arc-01", "xeon-01"] {
        let from = repo().join(format!("examples/homelab-fleet/{machine}.json"));
        std::fs::copy(from, dir.path().join(format!("{machine}.json"))).unwrap();
    }
    let config = dir.path().join("k3dgpu.toml");
    let mut toml = String::from("[cluster]\nprovider = \"existing\"\ncontext = \"lab\"\n");
    for (name, facts) in [("arc-01", "arc-01"), ("xeon-01", "xeon-01"), ("xeon-02", "xeon-01")] {
        toml.push_str(&format!("\n[[nodes]]\nname = \"{name}\"\nfacts = \"{facts}.json\"\n"));
    }
    std::fs::write(&config, toml).unwrap();
    // The small test catalog has no DSA/IAA/QAT plugin: each Xeon gets a warning about it.
    let out = K3dGpu::new()
        .args(["validate", "--json", "-c", config.to_str().unwrap()])
        .args(["--stdlib", repo().join("tests/fixtures/catalog").to_str().unwrap()])
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes = |host: &str| -> Vec<String> {
        let row = v["hosts"].as_array().unwrap().iter().find(|h| h["host"] == host).unwrap();
        row["warnings"].as_array().unwrap().iter().map(|w| w["code"].as_str().unwrap().to_string()).collect()
    };
    assert!(codes("xeon-01").contains(&"resource-without-component".to_string()), "{v:#}");
    assert_eq!(codes("xeon-01"), codes("xeon-02"));
    assert!(!codes("arc-01").contains(&"resource-without-component".to_string()), "{v:#}");
}

/// `k3d-gpu apply` (no plan file, no hash) on a terminal, which `script` gives it, with
/// `answer` typed to its question; None when `script` (util-linux) is not installed.
fn apply_typing(f: &Fleet, answer: &str) -> Option<Output> {
    if std::process::Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: script(1) is not installed, so apply's question is not answered on a terminal");
        return None;
    }
    let apply = format!(
        "\"$K3D_GPU_BIN\" apply -c '{}' --verify-timeout 30",
        f.config().display().to_string().replace('\'', "'\\''")
    );
    let mut child = K3dGpu::program("script")
        .args(["-qec", &apply, "/dev/null"])
        .env_binary("K3D_GPU_BIN")
        .env("KUBECONFIG", f.dir.path().join("kubeconfig"))
        .env("K3D_GPU_K3D", f.dir.path().join("no-k3d-here"))
        .env("XDG_STATE_HOME", f.dir.path().join("state"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(format!("{answer}\n").as_bytes()).unwrap();
    Some(child.wait_with_output().unwrap())
}

/// Issue 39: `apply` takes `yes` as well as `y` (in any case); any other answer applies
/// nothing, exit 1.
#[test]
fn apply_on_a_terminal_takes_y_or_yes() {
    let f = fleet();
    let Some(no) = apply_typing(&f, "no") else { return };
    assert_eq!(no.status.code(), Some(1), "{}", text(&no));
    assert!(text(&no).contains("Nothing was applied"), "{}", text(&no));
    let writes = || f.server.requests().iter().filter(|r| !r.starts_with("GET ")).count();
    assert_eq!(writes(), 0, "nothing was applied: {:?}", f.server.requests());

    let Some(yes) = apply_typing(&f, "Yes") else { return };
    assert!(text(&yes).contains("Apply this plan? [y/N]"), "{}", text(&yes));
    assert_eq!(yes.status.code(), Some(0), "{}", text(&yes));
    assert!(!text(&yes).contains("Nothing was applied"), "{}", text(&yes));
    assert!(writes() > 0, "the plan was applied");
}
