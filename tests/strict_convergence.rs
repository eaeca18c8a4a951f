//! plan → apply → plan against the strict fake's write rules (tests/support/ssa.rs, the code
//! the fake API server runs): a quantity the server writes back canonical plans nothing, and a
//! field k3d-gpu set before and the config no longer sets is planned as an update naming it,
//! then removed by the next server-side apply.

mod support;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{DesiredGraph, ResourceKind, compile};
use k3d_gpu::plan::{ActionKind, plan};
use serde_json::{Value, json};
use support::fake_apiserver::State;
use support::{converged, example_config, facts_of, placeholder_inputs};

fn graph() -> DesiredGraph {
    compile(&example_config("nvidia-workstation"), &facts_of("desktop-rpl-nvidia"), &Catalog::embedded().unwrap())
        .unwrap()
}

/// The graph with one Deployment's desired spec edited.
fn with_deployment(graph: &DesiredGraph, edit: impl Fn(&mut Value)) -> (DesiredGraph, String) {
    let mut resources: Vec<_> = graph.resources().cloned().collect();
    let target = resources
        .iter_mut()
        .find(|r| r.kind == ResourceKind::Object && r.spec["kind"] == "Deployment")
        .expect("the example has a Deployment");
    edit(&mut target.spec);
    let id = target.id.clone();
    let edited = DesiredGraph::build(resources, graph.warnings.clone(), graph.agent.clone()).unwrap();
    (edited, id)
}

#[test]
fn a_quantity_written_back_canonical_plans_nothing() {
    let (graph, id) = with_deployment(&graph(), |spec| {
        spec["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"memory": "1536Mi"}});
    });
    let observed = converged(&graph);
    let live = observed.kubernetes.as_ref().unwrap().objects.iter().find(|o| k3d_gpu::compile::object_id(o) == id);
    let resources = &live.unwrap()["spec"]["template"]["spec"]["containers"][0]["resources"];
    assert_eq!(
        *resources,
        json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1536Mi"}}),
        "the server writes them back canonical"
    );
    let p = plan(&graph, &observed, placeholder_inputs());
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
}

#[test]
fn a_field_the_config_no_longer_sets_is_planned_then_removed() {
    let base = graph();
    let (before, id) = with_deployment(&base, |spec| {
        spec["metadata"]["labels"]["tier"] = json!("gpu");
        let env = &mut spec["spec"]["template"]["spec"]["containers"][0]["env"];
        if !env.is_array() {
            *env = json!([]);
        }
        env.as_array_mut().unwrap().push(json!({"name": "DEBUG", "value": "1"}));
    });
    // Applied once with the label and the env var: that is the cluster now.
    let mut state = State { uid_seed: 1, ..State::k3s() };
    let apply_all = |state: &mut State, graph: &DesiredGraph| {
        let mut objects: Vec<&Value> =
            graph.resources().filter(|r| r.kind == ResourceKind::Object).map(|r| &r.spec).collect();
        objects.sort_by_key(|o| o["kind"] != "Namespace" && o["kind"] != "CustomResourceDefinition");
        for o in objects {
            state.apply(o, "k3d-gpu", true).unwrap_or_else(|(c, s)| panic!("{c}: {s}"));
        }
    };
    apply_all(&mut state, &before);
    let observe = |state: &State| {
        let mut o = converged(&base);
        let (key, value) = k3d_gpu::compile::MANAGED_BY;
        let mut objects: Vec<Value> = state
            .objects
            .iter()
            .filter(|x| x["metadata"]["labels"][key] == value)
            .cloned()
            .map(|mut x| {
                k3d_gpu::observe::managed::keep_ours(&mut x);
                x
            })
            .collect();
        objects.sort_by_key(k3d_gpu::compile::object_id);
        o.kubernetes.as_mut().unwrap().objects = objects;
        o
    };
    // The config drops both: planned as an update that names them.
    let (after, _) = with_deployment(&base, |_| {});
    let p = plan(&after, &observe(&state), placeholder_inputs());
    let update = p.actions.iter().find(|a| a.id == id).unwrap_or_else(|| panic!("{:#?}", p.actions));
    assert_eq!(update.action, ActionKind::Update);
    assert!(update.changed_paths.contains(&"metadata.labels.tier".to_string()), "{:?}", update.changed_paths);
    assert!(
        update.changed_paths.iter().any(|p| p.starts_with("spec.template.spec.containers[0].env")),
        "{:?}",
        update.changed_paths
    );
    assert_eq!(p.actions.len(), 1, "{:#?}", p.actions);
    // The next apply removes them (server-side apply drops what its manager no longer sets),
    // and the plan after it is empty.
    apply_all(&mut state, &after);
    let live = state.objects.iter().find(|o| k3d_gpu::compile::object_id(o) == id).unwrap();
    assert!(live["metadata"]["labels"].get("tier").is_none(), "{live:#}");
    let env = live["spec"]["template"]["spec"]["containers"][0]["env"].as_array().cloned().unwrap_or_default();
    assert!(env.iter().all(|e| e["name"] != "DEBUG"), "{env:#?}");
    let wanted = after.get(&id).unwrap().spec["spec"]["template"]["spec"]["containers"][0]["env"].clone();
    assert_eq!(env.len(), wanted.as_array().map_or(0, Vec::len), "the env vars still wanted stay");
    let again = plan(&after, &observe(&state), placeholder_inputs());
    assert!(again.actions.is_empty(), "{:#?}", again.actions);
}
