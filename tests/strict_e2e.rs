//! The real binary against the strict fake API server over HTTP (issue 23): an existing
//! cluster of one node (`gpu-01`'s captured facts) and a user component
//! (`tests/fixtures/strict-e2e/chaos.kdl`) holding a CRD whose plural is irregular
//! (`PodChaos` → `podchaos`), a custom resource of it, and a Deployment with quantities the
//! server writes back canonical (`0.5` → `500m`, `1024Mi` → `1Gi`). No Docker, no k3d.
//!
//! - `plan → apply → plan` converges: the custom resource is applied and observed under its
//!   CRD's plural, and the canonical quantities plan nothing.
//! - Between `plan --out` and `apply PLANFILE`, a rollout (status, resourceVersion,
//!   generation, another manager's annotation, a ResourceSlice) leaves the plan valid and it
//!   applies; a hand edit of a field we own refuses it, naming `observed`.
//! - A field the config no longer sets is planned as an update naming it, then removed.
//! - verify survives a watch answered with 410 Gone.

mod support;

use std::path::PathBuf;
use std::process::Output;

use serde_json::{Value, json};
use support::K3dGpu;
use support::fake_apiserver::{State, k3s_node};
use support::repo;
use support::world::{World, advertise, roll_out};

const CONFIG: &str = "[cluster]\nprovider = \"existing\"\ncontext = \"homelab\"\n\n[[nodes]]\nname = \"gpu-01\"\nfacts = \"gpu-01.json\"\n\n[[components]]\npath = \"chaos.kdl\"\n";

/// A fresh k3s with node gpu-01 (`state` edits it first); the controllers roll workloads out
/// and the device plugins make gpu-01 advertise its devices.
fn world(state: impl FnOnce(&mut State)) -> World {
    let mut s = State { nodes: vec![k3s_node("gpu-01", true)], ..State::k3s() };
    state(&mut s);
    let w = World::start(s, |s| {
        roll_out(s);
        // The plugins advertise only once the watches a test expires were answered
        // 410: verify's allocatable checks are watching by then, not done at their list.
        if s.expire_watches > 0 {
            return;
        }
        for r in ["nvidia.com/gpu", "gpu.intel.com/i915"] {
            advertise(s, |_| true, r, "1");
        }
    });
    std::fs::copy(repo().join("examples/homelab-fleet/gpu-01.json"), w.join("gpu-01.json")).unwrap();
    for file in ["chaos.kdl", "chaos.yml"] {
        std::fs::copy(repo().join("tests/fixtures/strict-e2e").join(file), w.join(file)).unwrap();
    }
    std::fs::write(w.join("k3dgpu.toml"), CONFIG).unwrap();
    let kubeconfig = support::fake_apiserver::kubeconfig_text(&w.server.url, "unused").replace("k3d-unused", "homelab");
    std::fs::write(w.join("kubeconfig"), kubeconfig).unwrap();
    w
}

impl World {
    fn run(&self, args: &[&str]) -> Output {
        let config: PathBuf = self.dir.path().join("k3dgpu.toml");
        K3dGpu::new()
            .args(args)
            .args(["-c", config.to_str().unwrap()])
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("K3D_GPU_K3D", self.dir.path().join("no-k3d-here"))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .output()
    }

    /// `plan`, then `apply --plan-hash` of it; asserts both succeed.
    fn converge(&self) {
        let planned = self.run(&["plan"]);
        assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
        let hash = text(&planned).lines().find_map(|l| l.strip_prefix("plan hash: ")).unwrap().to_string();
        let applied = self.run(&["apply", "--plan-hash", &hash, "--verify-timeout", "30"]);
        assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    }

    /// The live object of that kind and name.
    fn live(&self, kind: &str, name: &str) -> Option<Value> {
        let state = self.server.state.lock().unwrap();
        state.objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).cloned()
    }

    /// Edits the component's manifest (what the config sets).
    fn edit_manifest(&self, edit: impl FnOnce(String) -> String) {
        let path = self.dir.path().join("chaos.yml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, edit(text)).unwrap();
    }

    /// Drops the `tier` label and the `DEBUG` env var from the Deployment's manifest.
    fn drop_tier_and_debug(&self) {
        self.edit_manifest(|t| {
            let t = t.replace("    tier: gpu\n", "");
            t.replace("            - name: DEBUG\n              value: \"1\"\n", "")
        });
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn no_changes(w: &World) {
    let again = w.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(again.status.code(), Some(0), "the plan after apply wants nothing:\n{}", text(&again));
}

#[test]
fn plan_apply_plan_converges_with_an_irregular_plural_and_canonical_quantities() {
    let w = world(|_| {});
    w.converge();
    // The custom resource went to its CRD's plural (a guess would say `podchaoses`).
    let requests = w.server.requests();
    assert!(
        requests.iter().any(|r| r == "PATCH /apis/chaos-mesh.org/v1alpha1/namespaces/default/podchaos/pod-failure"),
        "{requests:#?}"
    );
    assert!(requests.iter().all(|r| !r.contains("podchaoses")), "{requests:#?}");
    assert!(w.live("PodChaos", "pod-failure").is_some(), "the custom resource is in the cluster");
    // The server wrote the quantities back canonical.
    let app = w.live("Deployment", "chaos-app").unwrap();
    let resources = &app["spec"]["template"]["spec"]["containers"][0]["resources"];
    assert_eq!(resources["requests"], json!({"cpu": "500m", "memory": "1Gi"}), "{resources:#}");
    // Both are observed as they are, and nothing is planned: not the custom resource as a
    // create, not the quantities as an update.
    no_changes(&w);
}

#[test]
fn a_rollout_between_plan_and_apply_leaves_the_plan_valid_and_a_dropped_field_is_removed() {
    let w = world(|_| {});
    w.converge();
    // The config drops a label and an env var it set: an update naming both.
    w.drop_tier_and_debug();
    let planned = w.run(&["plan", "--json", "--out", &w.path("p.json")]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    let plan: Value = serde_json::from_slice(&planned.stdout).unwrap();
    let actions = plan["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "{actions:#?}");
    assert_eq!(actions[0]["id"], "k8s/apps/Deployment/default/chaos-app");
    assert_eq!(actions[0]["action"], "update");
    let paths: Vec<&str> = actions[0]["changed_paths"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(paths.contains(&"metadata.labels.tier"), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with("spec.template.spec.containers[0].env")), "{paths:?}");

    // A rollout meanwhile: status, resourceVersion and generation move, another manager
    // annotates the Deployment, the driver publishes a ResourceSlice.
    w.server.change(|s| {
        let app = s.objects.iter_mut().find(|o| o["metadata"]["name"] == "chaos-app").unwrap();
        app["status"]["readyReplicas"] = json!(1);
        app["status"]["conditions"] = json!([{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]);
        app["metadata"]["generation"] = json!(app["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
        app["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("2");
        s.objects.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "gpu-01-gpu.intel.com-x", "uid": "slice-1"},
            "spec": {"driver": "gpu.intel.com", "nodeName": "gpu-01", "pool": {"name": "gpu-01", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "0000-00-02-0"}]}}));
    });
    let applied = w.run(&["apply", &w.path("p.json"), "--verify-timeout", "30"]);
    assert_eq!(applied.status.code(), Some(0), "the reviewed plan still applies:\n{}", text(&applied));

    // Server-side apply removed what k3d-gpu no longer sets; what it still sets stays.
    let app = w.live("Deployment", "chaos-app").unwrap();
    assert!(app["metadata"]["labels"].get("tier").is_none(), "{app:#}");
    let env = app["spec"]["template"]["spec"]["containers"][0]["env"].as_array().cloned().unwrap_or_default();
    assert_eq!(env, vec![json!({"name": "MODE", "value": "steady"})], "{env:#?}");
    assert_eq!(app["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "2", "not ours, kept");
    no_changes(&w);
}

#[test]
fn a_hand_edit_of_an_owned_field_between_plan_and_apply_refuses_naming_observed() {
    let w = world(|_| {});
    w.converge();
    w.drop_tier_and_debug();
    let planned = w.run(&["plan", "--out", &w.path("p.json")]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    // Someone scales the Deployment by hand: `replicas` is a field k3d-gpu owns.
    w.server.change(|s| {
        let app = s.objects.iter_mut().find(|o| o["metadata"]["name"] == "chaos-app").unwrap();
        app["spec"]["replicas"] = json!(3);
    });
    let refused = w.run(&["apply", &w.path("p.json")]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("changed since it was made: observed state"), "{}", text(&refused));
    let app = w.live("Deployment", "chaos-app").unwrap();
    assert_eq!(app["metadata"]["labels"]["tier"], "gpu", "nothing was applied");
}

#[test]
fn verify_resumes_after_a_watch_answered_410_gone() {
    // The first watches find their resourceVersion compacted: each check's watcher lists
    // again after its backoff, and apply verifies as usual.
    let w = world(|s| s.expire_watches = 2);
    let planned = w.run(&["plan"]);
    let hash = text(&planned).lines().find_map(|l| l.strip_prefix("plan hash: ")).unwrap().to_string();
    let applied = w.run(&["apply", "--plan-hash", &hash, "--verify-timeout", "30"]);
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    assert!(text(&applied).contains("done   verify/allocatable/gpu-01/nvidia.com/gpu"), "{}", text(&applied));
    assert_eq!(w.server.state.lock().unwrap().expire_watches, 0, "the 410s were sent");
}

/// Issue 36, deviation 2: a Deployment's `spec.selector` is immutable. The fake refuses an
/// update of it with 422 Invalid, as a real server does, so the plan must not call it an
/// update: it plans a replace naming the field and the upstream rule, apply refuses it
/// without consent, and with `--allow-replace` deletes the old object and creates the new
/// one, after which nothing is planned.
#[test]
fn a_changed_selector_is_planned_as_a_replace_and_applied_by_delete_and_create() {
    let w = world(|_| {});
    w.converge();
    let before = w.live("Deployment", "chaos-app").unwrap();
    // The strict server answers a direct update of the selector 422, naming the field.
    let edit = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "chaos-app", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "chaos-app-2"}}}});
    let refused = w.server.state.lock().unwrap().apply(&edit, "kubectl", true);
    let (code, body) = refused.expect_err("a selector update is refused");
    assert_eq!(code, 422, "{body:#}");
    assert_eq!(body["reason"], "Invalid", "{body:#}");
    assert_eq!(body["details"]["causes"][0]["field"], "spec.selector", "{body:#}");

    w.edit_manifest(|t| t.replace("app: chaos-app\n", "app: chaos-app-2\n"));
    let planned = w.run(&["plan", "--json"]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned));
    let plan: Value = serde_json::from_slice(&planned.stdout).unwrap();
    let action = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "k8s/apps/Deployment/default/chaos-app")
        .unwrap();
    assert_eq!(action["action"], "replace", "{action:#}");
    assert_eq!(action["replace_paths"], json!(["spec.selector"]));
    let why = action["reason"]["text"].as_str().unwrap();
    assert!(why.contains("ValidateDeploymentUpdate"), "{why}");

    let hash = plan_hash(&w);
    let without = w.run(&["apply", "--plan-hash", &hash]);
    assert_eq!(without.status.code(), Some(1), "{}", text(&without));
    assert!(
        text(&without).contains("deletes and creates again k8s/apps/Deployment/default/chaos-app"),
        "{}",
        text(&without)
    );
    assert_eq!(
        w.live("Deployment", "chaos-app").unwrap()["metadata"]["uid"],
        before["metadata"]["uid"],
        "nothing done"
    );

    let applied = w.run(&["apply", "--plan-hash", &hash, "--allow-replace", "--verify-timeout", "30"]);
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    let after = w.live("Deployment", "chaos-app").unwrap();
    assert_ne!(after["metadata"]["uid"], before["metadata"]["uid"], "a new object");
    assert_eq!(after["spec"]["selector"]["matchLabels"]["app"], "chaos-app-2");
    no_changes(&w);
}

fn plan_hash(w: &World) -> String {
    let planned = w.run(&["plan"]);
    text(&planned).lines().find_map(|l| l.strip_prefix("plan hash: ")).unwrap().to_string()
}
