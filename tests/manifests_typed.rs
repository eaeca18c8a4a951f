//! Every manifest in share/ is a valid Kubernetes object of its kind: each object deserialises
//! into the k8s-openapi type for its kind (v1.37) and serialises back to the same JSON, so a
//! misspelt field (which the typed structs drop) or a wrong type fails here, not at apply.
//! Custom resources (NFD's NodeFeatureRule, the balloons policy) have no typed struct: each must
//! be of a kind and version a CustomResourceDefinition in share/ defines.
//!
//! Types say nothing of what the API server's validation refuses beyond them; the rules of it
//! that our objects can break are checked by `server_rules` (docs/upstream-checks.md).

mod support;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolume, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(object: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Drops nulls and empty maps the typed side omits, so only real differences remain.
fn normal(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), normal(v)))
                .filter(|(_, v)| !matches!(v, Value::Object(m) if m.is_empty()))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normal).collect()),
        // A schema's `minimum` is a float in the typed struct: 0 and 0.0 are the same bound.
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e15) => {
            Value::from(n.as_f64().unwrap_or_default() as i64)
        }
        other => other.clone(),
    }
}

/// The typed round trip for `object`, or `None` for kinds without a typed struct.
fn check(object: &Value) -> Option<Result<Value, String>> {
    Some(match object["kind"].as_str().unwrap_or_default() {
        "Namespace" => round_trip::<Namespace>(object),
        "ServiceAccount" => round_trip::<ServiceAccount>(object),
        "ConfigMap" => round_trip::<ConfigMap>(object),
        "Secret" => round_trip::<Secret>(object),
        "Service" => round_trip::<Service>(object),
        "PersistentVolumeClaim" => round_trip::<PersistentVolumeClaim>(object),
        "PersistentVolume" => round_trip::<PersistentVolume>(object),
        "ClusterRole" => round_trip::<ClusterRole>(object),
        "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(object),
        "Role" => round_trip::<Role>(object),
        "RoleBinding" => round_trip::<RoleBinding>(object),
        "DaemonSet" => round_trip::<DaemonSet>(object),
        "Deployment" => round_trip::<Deployment>(object),
        "RuntimeClass" => round_trip::<RuntimeClass>(object),
        "DeviceClass" => round_trip::<DeviceClass>(object),
        "ResourceClaimTemplate" => round_trip::<ResourceClaimTemplate>(object),
        "ValidatingAdmissionPolicy" => round_trip::<ValidatingAdmissionPolicy>(object),
        "ValidatingAdmissionPolicyBinding" => round_trip::<ValidatingAdmissionPolicyBinding>(object),
        "CustomResourceDefinition" => round_trip::<CustomResourceDefinition>(object),
        _ => return None,
    })
}

/// Rules of the API server's validation (k8s.io/kubernetes pkg/apis/apps/validation and
/// core/validation) that typed deserialisation cannot see: a workload's selector must match
/// its pod template's labels, every container needs a name and an image, and container
/// names are unique DNS labels within the pod.
fn server_rules(object: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if !matches!(object["kind"].as_str(), Some("DaemonSet" | "Deployment" | "StatefulSet" | "Job")) {
        return out;
    }
    let labels = &object["spec"]["template"]["metadata"]["labels"];
    for (k, v) in object["spec"]["selector"]["matchLabels"].as_object().into_iter().flatten() {
        if &labels[k] != v {
            out.push(format!("selector {k}={v} does not match the template's labels"));
        }
    }
    let pod = &object["spec"]["template"]["spec"];
    let mut names = Vec::new();
    for c in ["initContainers", "containers"].iter().flat_map(|k| pod[*k].as_array().into_iter().flatten()) {
        let name = c["name"].as_str().unwrap_or_default();
        if !k3d_gpu::config::dns_label(name) || names.contains(&name) {
            out.push(format!("container name {name:?} is not a unique DNS label"));
        }
        names.push(name);
        if c["image"].as_str().is_none_or(str::is_empty) {
            out.push(format!("container {name} has no image"));
        }
    }
    if pod["containers"].as_array().is_none_or(Vec::is_empty) {
        out.push("the pod template has no containers".into());
    }
    out
}

fn problem(name: &str, object: &Value, back: Result<Value, String>) -> Option<String> {
    let rules = server_rules(object);
    if !rules.is_empty() {
        return Some(format!("{name}: {}", rules.join("; ")));
    }
    match back {
        Err(e) => Some(format!("{name}: {e}")),
        Ok(back) if normal(&back) != normal(object) => {
            let a = serde_json::to_string_pretty(&normal(object)).unwrap();
            let b = serde_json::to_string_pretty(&normal(&back)).unwrap();
            Some(format!(
                "{name}: fields the type does not know:\n{}",
                support::first_difference(&a, &b).unwrap_or_default()
            ))
        }
        Ok(_) => None,
    }
}

/// What the compiler emits (hooks applied, labels added, claims) is valid too.
#[test]
fn every_object_the_examples_compile_to_is_valid() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let mut problems = Vec::new();
    let singles = support::EXAMPLES.iter().map(|(example, host)| {
        let config = support::example_config(example);
        let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{example} on {host}: {e:#?}"));
        (example.to_string(), graph)
    });
    // And an existing cluster's: its plugin variants and their selectors.
    let fleets =
        support::FLEET_EXAMPLES.iter().map(|example| (example.to_string(), support::fleet_graph(example, &catalog)));
    for (example, graph) in singles.chain(fleets) {
        for r in graph.resources().filter(|r| r.kind == k3d_gpu::compile::ResourceKind::Object) {
            if let Some(back) = check(&r.spec) {
                problems.extend(problem(&format!("{example}: {}", r.id), &r.spec, back));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The agent's workload on every device path and backend (the examples cover only some).
#[test]
fn every_agent_workload_is_valid() {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let cases = [
        ("", "lunar-lake-npu"),
        ("device = \"npu\"", "lunar-lake-npu"),
        ("", "desktop-rpl-nvidia"),
        ("[vendors]\nexclude = [\"nvidia\"]", "desktop-rpl-nvidia"),
        ("", "gaudi3-server"),
        ("backend = \"vllm\"", "arc-b580-xe-rpl-igpu"),
        ("backend = \"llm-scaler\"", "arc-b580-xe-rpl-igpu"),
        ("", "xeon-2s-snc2"),
        ("[addons.vlm]\n[addons.stt]\n[sharing]\nshared = 2", "lunar-lake-npu"),
        ("[addons.vlm]\ndevice = \"npu\"", "lunar-lake-npu"),
        // Video on the iGPU's media engines, and on the CPU with a stream.
        ("[addons.video]", "meteor-lake-old-npu-fw"),
        ("[addons.video]\nsource = \"rtsp://cam.lan/s\"\n[sharing]\nshared = 1", "lunar-lake-npu"),
        // The chat UI, generated admin and a given Secret.
        ("[agent.chat]", "meteor-lake-old-npu-fw"),
        ("[agent.chat]\nadmin_secret = \"open-webui-admin\"", "lunar-lake-npu"),
        ("[addons.embeddings]", "lunar-lake-npu"),
    ];
    let mut problems = Vec::new();
    let mut deployments = 0;
    for (keys, host) in cases {
        let config = k3d_gpu::config::load_str("k3dgpu.toml", &format!("[agent]\n{keys}\n")).unwrap();
        let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{keys} on {host}: {e:#?}"));
        for r in graph
            .resources()
            .filter(|r| r.component.as_deref() == Some("agent") && r.kind == k3d_gpu::compile::ResourceKind::Object)
        {
            deployments += usize::from(r.spec["kind"] == "Deployment");
            match check(&r.spec) {
                Some(back) => problems.extend(problem(&format!("{keys} on {host}: {}", r.id), &r.spec, back)),
                None => problems.push(format!("{}: no typed check for its kind", r.id)),
            }
        }
    }
    assert_eq!(deployments, cases.len() + 8, "one model server per case, one per deployed add-on");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn every_share_manifest_is_a_valid_object_of_its_kind() {
    let share = support::repo().join("share");
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&share)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    files.sort();
    let objects: Vec<(String, Value)> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let objects = k3d_gpu::catalog::parse_manifest(&file.display().to_string(), &text)
                .unwrap_or_else(|e| panic!("{e:?}"));
            let file = file.file_name().unwrap().to_string_lossy().into_owned();
            objects.into_iter().map(move |o| (file.clone(), o))
        })
        .collect();
    // (apiVersion, kind) of every custom resource the CRDs in share/ define.
    let defined: Vec<(String, String)> = objects
        .iter()
        .filter(|(_, o)| o["kind"] == "CustomResourceDefinition")
        .flat_map(|(_, crd)| {
            let spec = &crd["spec"];
            let versions = spec["versions"].as_array().cloned().unwrap_or_default();
            versions.into_iter().map(move |v| {
                (
                    format!("{}/{}", spec["group"].as_str().unwrap(), v["name"].as_str().unwrap()),
                    spec["names"]["kind"].as_str().unwrap().to_string(),
                )
            })
        })
        .collect();
    for (file, object) in &objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let name = format!("{file}: {kind} {}", object["metadata"]["name"]);
        let Some(back) = check(object) else {
            let api = object["apiVersion"].as_str().unwrap_or_default().to_string();
            if !defined.contains(&(api.clone(), kind.clone())) {
                problems.push(format!("{name}: {api} {kind} is neither checked here nor defined by a CRD in share/"));
            }
            continue;
        };
        match problem(&name, object, back) {
            Some(p) => problems.push(p),
            None => checked += 1,
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(checked > 30, "only {checked} objects checked");
}

#[test]
fn the_server_rules_catch_what_the_types_cannot() {
    let ds = serde_json::json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "p"},
        "spec": {"selector": {"matchLabels": {"app": "p"}},
            "template": {"metadata": {"labels": {"app": "q"}}, "spec": {"containers": [{"name": "Bad_Name"}]}}}});
    let found = server_rules(&ds);
    assert_eq!(found.len(), 3, "{found:?}");
}
