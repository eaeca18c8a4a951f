//! `[sandbox]`: the agent-sandbox controller and CRDs from the catalog, and our E-core
//! SandboxTemplate and warm pool, checked against the OpenAPI schemas of upstream's own CRDs
//! (share/agent-sandbox.yml, agent-sandbox v0.5.6), with the hardening and network policy
//! the sandbox must carry.

mod support;

use std::sync::LazyLock;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{DesiredGraph, compile};
use k3d_gpu::config::load_str;
use serde_json::{Value, json};
use support::facts_of;

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::embedded().unwrap());

fn graph(toml: &str, host: &str) -> DesiredGraph {
    let config = load_str("k3dgpu.toml", toml).unwrap();
    compile(&config, &facts_of(host), &CATALOG).unwrap_or_else(|e| panic!("{e:#?}"))
}

const TEMPLATE: &str = "k8s/extensions.agents.x-k8s.io/SandboxTemplate/agent-sandbox/python-ecores";
const POOL: &str = "k8s/extensions.agents.x-k8s.io/SandboxWarmPool/agent-sandbox/python-ecores";
const CONTROLLER: &str = "k8s/apps/Deployment/agent-sandbox-system/agent-sandbox-controller";

/// The CRD's schema for `kind` at `version`, made strict the way the API server is: a field a
/// structural schema does not name is pruned (silently lost), so here it is an error.
fn crd_schema(kind: &str, version: &str) -> Value {
    let text = std::fs::read_to_string(support::repo().join("share/agent-sandbox.yml")).unwrap();
    let objects = k3d_gpu::catalog::parse_manifest("agent-sandbox.yml", &text).unwrap();
    let crd = objects
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition" && o["spec"]["names"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"));
    let v = crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == version).unwrap();
    assert_eq!(v["served"], true, "{kind} {version} is served");
    let mut schema = v["schema"]["openAPIV3Schema"].clone();
    strict(&mut schema);
    schema
}

fn strict(schema: &mut Value) {
    if let Value::Object(map) = schema {
        let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
        if map.contains_key("properties") && !map.contains_key("additionalProperties") && !preserve {
            map.insert("additionalProperties".into(), json!(false));
        }
        map.values_mut().for_each(strict);
    } else if let Value::Array(items) = schema {
        items.iter_mut().for_each(strict);
    }
}

fn schema_errors(kind: &str, object: &Value) -> Vec<String> {
    let version = object["apiVersion"].as_str().unwrap().rsplit('/').next().unwrap();
    let validator = jsonschema::validator_for(&crd_schema(kind, version)).unwrap();
    validator.iter_errors(object).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

#[test]
fn the_template_and_warm_pool_are_valid_against_upstreams_crds() {
    let g = graph("[sandbox]\n", "meteor-lake-old-npu-fw");
    for (id, kind) in [(TEMPLATE, "SandboxTemplate"), (POOL, "SandboxWarmPool")] {
        let object = &g.get(id).unwrap_or_else(|| panic!("no {id}")).spec;
        let errors = schema_errors(kind, object);
        assert!(errors.is_empty(), "{id}: {errors:#?}");
    }
    // The check sees a field upstream does not define, and a wrong value.
    let mut bad = g.get(TEMPLATE).unwrap().spec.clone();
    bad["spec"]["networkPolicyManagment"] = json!("Managed");
    assert!(!schema_errors("SandboxTemplate", &bad).is_empty(), "a misspelt field");
    let mut bad = g.get(POOL).unwrap().spec.clone();
    bad["spec"]["replicas"] = json!("one");
    assert!(!schema_errors("SandboxWarmPool", &bad).is_empty(), "a wrong type");
}

#[test]
fn a_sandbox_is_locked_down_on_the_e_cores() {
    let g = graph("[sandbox]\n", "meteor-lake-old-npu-fw");
    let t = &g.get(TEMPLATE).unwrap().spec["spec"];
    let pod = &t["podTemplate"];
    assert_eq!(pod["metadata"]["labels"]["k3d-gpu.io/cores"], "efficient");
    let spec = &pod["spec"];
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let c = &spec["containers"][0];
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(c["resources"]["requests"]["cpu"], "1");
    assert!(c["image"].as_str().unwrap().starts_with("registry.k8s.io/agent-sandbox/python-runtime-sandbox:v0.1.0"));

    // In: 8888 from sandbox clients only. Out: cluster DNS, and public addresses only.
    let np = &t["networkPolicy"];
    assert_eq!(t["networkPolicyManagement"], "Managed");
    assert_eq!(np["ingress"].as_array().unwrap().len(), 1);
    assert_eq!(np["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["k3d-gpu.io/sandbox-client"], "true");
    assert_eq!(np["ingress"][0]["ports"], json!([{ "port": 8888, "protocol": "TCP" }]));
    let egress = np["egress"].as_array().unwrap();
    assert_eq!(egress[0]["ports"][0]["port"], 53);
    assert_eq!(egress[0]["to"][0]["podSelector"]["matchLabels"]["k8s-app"], "kube-dns");
    let block = &egress[1]["to"][0]["ipBlock"];
    assert_eq!(block["cidr"], "0.0.0.0/0");
    for private in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"] {
        assert!(block["except"].as_array().unwrap().contains(&json!(private)), "{private} blocked");
    }
    assert_eq!(egress.len(), 2, "nothing else goes out");

    let pool = &g.get(POOL).unwrap().spec["spec"];
    assert_eq!(pool["replicas"], 1);
    assert_eq!(pool["sandboxTemplateRef"]["name"], "python-ecores");
    assert_eq!(graph("[sandbox]\nwarm_pool = 3\n", "plain-laptop-amd").get(POOL).unwrap().spec["spec"]["replicas"], 3);
}

#[test]
fn the_controller_comes_only_with_a_sandbox_table_and_goes_first() {
    let without = graph("", "meteor-lake-old-npu-fw");
    assert!(without.get(CONTROLLER).is_none());
    assert!(without.resources().all(|r| !r.id.contains("agents.x-k8s.io")));
    let g = graph("[sandbox]\n", "meteor-lake-old-npu-fw");
    let d = &g.get(CONTROLLER).unwrap().spec;
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.6"));
    assert!(c["args"].as_array().unwrap().contains(&json!("--extensions")));
    let deps = &g.get(TEMPLATE).unwrap().depends_on;
    for want in [
        "k8s/apiextensions.k8s.io/CustomResourceDefinition/sandboxtemplates.extensions.agents.x-k8s.io",
        CONTROLLER,
        "k8s/core/Namespace/agent-sandbox",
    ] {
        assert!(deps.iter().any(|d| d == want), "{want} in {deps:?}");
    }
    assert!(g.get(POOL).unwrap().depends_on.iter().any(|d| d == TEMPLATE));
    let config = load_str("k3dgpu.toml", "[sandbox]\nwarm_pool = 17\n").unwrap();
    let e = compile(&config, &facts_of("plain-laptop-amd"), &CATALOG).unwrap_err();
    assert_eq!(e[0].code, "sandbox-warm-pool");
}
