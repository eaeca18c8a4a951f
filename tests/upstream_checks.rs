//! Our output held to upstream's own definitions, each stored under `tests/upstream/` with the
//! release and commit it was read from (docs/upstream-checks.md says what covers what):
//! - the k3d SimpleConfig apply writes, against k3d's v1alpha5 JSON schema;
//! - every device plugin container's args (and env), against the flags that plugin release
//!   defines and the values its own validation accepts;
//! - the NVIDIA plugin's config file (`[sharing.nvidia]`), against the fields and rules of
//!   its api/config/v1 at the release the image is built from.
//!
//! Both run over every example on its fixture host and over variations that exercise the
//! rules a plain example leaves off (id lists, sharing, several nodes, an API port).

mod support;

use std::collections::BTreeMap;

use k3d_gpu::compile::{DesiredGraph, ResourceKind};
use serde::Deserialize;
use serde_json::Value;

/// Each example, plus configs that reach the rules the examples do not.
fn cases() -> Vec<(String, DesiredGraph)> {
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let mut out = Vec::new();
    for (example, host) in support::EXAMPLES {
        let config = support::example_config(example);
        let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{example} on {host}: {e:#?}"));
        out.push((format!("{example} on {host}"), graph));
    }
    let variations = [
        ("[sharing]\ngpus = \"discrete\"\n", "arc-b580-xe-rpl-igpu"),
        ("[sharing]\nallow_ids = [\"e20b\"]\nshared = 2\nallocation = \"packed\"\n", "arc-b580-xe-rpl-igpu"),
        ("[sharing]\ndeny_ids = [\"0xA780\"]\nmonitoring = true\n", "arc-b580-xe-rpl-igpu"),
        ("[cluster]\nagents = 2\napi_port = 6443\n", "desktop-rpl-nvidia"),
        ("[cluster]\nagents = 1\napi_host_ip = \"0.0.0.0\"\n", "meteor-lake-old-npu-fw"),
        // The balloons policy with this host's CPU hints (favoured CPUs, OVERRIDE_SYS_ATOM_CPUS).
        ("", "arrow-lake-h"),
        ("[cluster]\nagents = 1\naccelerator_node = \"agent:0\"\n", "xeon-2s-snc2"),
        ("[sharing.nvidia]\nreplicas = 2\nfail_requests_greater_than_one = false\n", "wsl2-nvidia"),
        ("[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = 4\n", "rtx2000ada-x2"),
        ("[sharing]\nmonitoring = true\n[telemetry]\n", "desktop-rpl-nvidia"),
        ("[sharing]\nmode = \"dra\"\n[telemetry]\n", "arc-b580-xe-rpl-igpu"),
        (
            "[cluster]\nimage = \"my/node:1\"\nkubernetes_version = \"1.33\"\n[experimental]\nfeatures = [\"dra\"]\n",
            "wsl2-intel",
        ),
        (
            "[cluster]\nagents = 1\nports = [\"8080:80@loadbalancer\", \"0.0.0.0:5353:53/udp@agent:0:direct\"]\nvolumes = [\"/srv/models:/models\", \"/srv/data:/data:rw@agent:0;server:0\"]\n",
            "desktop-rpl-nvidia",
        ),
        (
            "[cluster.registries]\nmirrors = { \"docker.io\" = [\"http://k3d-gpu-registry:5000\"], \"*\" = [\"https://mirror.lan\"] }\n[cluster.registries.create]\nport = 5001\nproxy = \"https://registry-1.docker.io\"\n",
            "arc-b580-xe-rpl-igpu",
        ),
    ];
    for (text, host) in variations {
        let config = k3d_gpu::config::load_str("k3dgpu.toml", text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{text} on {host}: {e:#?}"));
        out.push((format!("{text:?} on {host}"), graph));
    }
    // An existing cluster's graph: per-node plugin variants, their selectors, the agent on one
    // node. No k3d config (there is no k3d cluster); everything else is checked alike.
    for example in support::FLEET_EXAMPLES {
        out.push((format!("{example} (existing cluster)"), support::fleet_graph(example, &catalog)));
    }
    out
}

// ---- k3d's SimpleConfig schema --------------------------------------------------------------

fn k3d_schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/k3d-v1alpha5.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    // Formats are part of k3d's rules (kubeAPI.hostIP is an ipv4).
    jsonschema::options().should_validate_formats(true).build(&schema).unwrap()
}

fn schema_errors(validator: &jsonschema::Validator, config: &Value) -> Vec<String> {
    validator.iter_errors(config).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn every_generated_k3d_config_is_valid_against_k3ds_v1alpha5_schema() {
    let validator = k3d_schema();
    let mut problems = Vec::new();
    for (name, graph) in cases() {
        let Some(cluster) = graph.resources().find(|r| r.kind == ResourceKind::Cluster) else {
            assert!(k3d_gpu::plan::fleet::is_fleet(&graph), "{name}: no k3d cluster in the graph");
            continue;
        };
        let config = k3d_gpu::apply::k3d::simple_config(&cluster.spec);
        for e in schema_errors(&validator, &config) {
            problems.push(format!("{name}: {e}"));
        }
        // What apply writes when a credentials file is named: the same config with them.
        if cluster.spec["registries"].is_object() {
            let credentials = k3d_gpu::apply::registries::Credentials::parse(
                "configs:\n  mirror.lan:\n    auth: {username: lab, password: pw}\n    tls: {insecure_skip_verify: true}\n",
            )
            .unwrap();
            let written = k3d_gpu::apply::k3d::with_credentials(config.clone(), &cluster.spec, &credentials);
            for e in schema_errors(&validator, &written) {
                problems.push(format!("{name} (with credentials): {e}"));
            }
        }
        // Valid to k3d, but k3d v5.9.0 fills a missing kubeAPI.hostIP with DefaultAPIHost,
        // 0.0.0.0 (pkg/types/defaults.go): the API on every interface. Always say where.
        if !config["kubeAPI"]["hostIP"].is_string() {
            problems.push(format!("{name}: kubeAPI.hostIP is unset, so k3d publishes the API on 0.0.0.0"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_k3d_schema_check_catches_what_k3d_refuses() {
    let validator = k3d_schema();
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let graph =
        k3d_gpu::compile::compile(&Default::default(), &support::facts_of("desktop-rpl-nvidia"), &catalog).unwrap();
    let cluster = graph.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap();
    let good = k3d_gpu::apply::k3d::simple_config(&cluster.spec);
    assert!(schema_errors(&validator, &good).is_empty());
    for (pointer, bad) in [
        ("/kubeAPI/hostIP", serde_json::json!("localhost:6443")),
        ("/kubeAPI/hostPort", serde_json::json!(6443)),
        ("/options/runtime/gpuRequest", serde_json::json!(true)),
    ] {
        let mut config = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        config.pointer_mut(parent).unwrap()[key] = bad.clone();
        assert!(!schema_errors(&validator, &config).is_empty(), "{pointer} = {bad} passed the schema");
    }
    let mut config = good.clone();
    config["kubeAPI"]["hostAddress"] = serde_json::json!("127.0.0.1");
    assert!(!schema_errors(&validator, &config).is_empty(), "an unknown kubeAPI key passed the schema");
}

#[test]
fn the_k3d_schema_check_catches_bad_ports_volumes_and_registries() {
    let validator = k3d_schema();
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let text = "[cluster]\nports = [\"8080:80\"]\nvolumes = [\"/srv:/srv\"]\n[cluster.registries]\nmirrors = { \"docker.io\" = [\"https://m.lan\"] }\n[cluster.registries.create]\nport = 5001\n";
    let config = k3d_gpu::config::load_str("k3dgpu.toml", text).unwrap();
    let graph = k3d_gpu::compile::compile(&config, &support::facts_of("desktop-rpl-nvidia"), &catalog).unwrap();
    let cluster = graph.resources().find(|r| r.kind == ResourceKind::Cluster).unwrap();
    let good = k3d_gpu::apply::k3d::simple_config(&cluster.spec);
    assert!(schema_errors(&validator, &good).is_empty(), "{:?}", schema_errors(&validator, &good));
    for (pointer, bad) in [
        ("/ports/0/port", serde_json::json!(8080)),
        ("/ports/0/hostIP", serde_json::json!("127.0.0.1")),
        ("/volumes/0/readOnly", serde_json::json!(true)),
        ("/registries/create/hostPort", serde_json::json!(5001)),
        ("/registries/config", serde_json::json!({ "mirrors": {} })),
        ("/registries/create/proxy", serde_json::json!({ "remoteUrl": "https://x" })),
    ] {
        // (An unknown key directly under `registries` passes: k3d v5.9.0's schema lists its
        // `"additionalProperties": false` among the properties, so it refuses nothing there.)
        let mut config = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        config.pointer_mut(parent).unwrap()[key] = bad.clone();
        assert!(!schema_errors(&validator, &config).is_empty(), "{pointer} = {bad} passed the schema");
    }
}

// ---- device plugin flags --------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlagData {
    schema: String,
    repos: Vec<String>,
    klog: Klog,
    plugin: Vec<Plugin>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Klog {
    #[allow(dead_code)]
    source: String,
    flags: BTreeMap<String, FlagKind>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Plugin {
    images: Vec<String>,
    source: String,
    release: String,
    commit: String,
    files: Vec<String>,
    syntax: String,
    #[serde(default)]
    klog: bool,
    #[serde(default)]
    exclusive: Vec<Vec<String>>,
    #[serde(default)]
    env: Vec<String>,
    flags: BTreeMap<String, FlagKind>,
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum FlagKind {
    Simple(String),
    Rule {
        kind: Option<String>,
        min: Option<i64>,
        #[serde(rename = "enum")]
        one_of: Option<Vec<String>>,
        list: Option<String>,
        pattern: Option<String>,
    },
}

fn flag_data() -> FlagData {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/plugin-flags.toml")).unwrap();
    let data: FlagData = toml::from_str(&text).unwrap();
    assert_eq!(data.schema, "k3d-gpu.upstream-flags/v1");
    for p in &data.plugin {
        assert!(
            p.commit.len() == 40 && p.commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{:?}: every entry names the commit it was read from",
            p.images
        );
        assert!(!p.source.is_empty() && !p.release.is_empty() && !p.files.is_empty());
    }
    data
}

/// Checks one value against a flag's kind; `Err` says why the plugin would refuse it.
fn check_value(kind: &FlagKind, value: Option<&str>) -> Result<(), String> {
    let (kind, min, one_of, list, pattern) = match kind {
        FlagKind::Simple(k) => (k.as_str(), None, None, None, None),
        FlagKind::Rule { kind, min, one_of, list, pattern } => {
            (kind.as_deref().unwrap_or("string"), *min, one_of.as_ref(), list.as_deref(), pattern.as_deref())
        }
    };
    if kind == "bool" {
        return match value {
            None | Some("true" | "false" | "1" | "0" | "t" | "f" | "TRUE" | "FALSE" | "True" | "False") => Ok(()),
            Some(v) => Err(format!("{v:?} is not a bool")),
        };
    }
    let Some(value) = value else { return Err("needs a value".into()) };
    if kind == "int" {
        let n: i64 = value.parse().map_err(|_| format!("{value:?} is not an int"))?;
        if let Some(min) = min
            && n < min
        {
            return Err(format!("{n} is below {min}"));
        }
        return Ok(());
    }
    let items: Vec<&str> = match list {
        Some(sep) => value.split(sep).map(str::trim).collect(),
        None => vec![value],
    };
    for item in items {
        if let Some(one_of) = one_of
            && !one_of.iter().any(|v| v == item)
        {
            return Err(format!("{item:?} is not one of {one_of:?}"));
        }
        if let Some(pattern) = pattern
            && !regex::Regex::new(pattern).unwrap().is_match(item)
        {
            return Err(format!("{item:?} does not match {pattern}"));
        }
    }
    Ok(())
}

/// What is wrong with one container's args and env for `plugin`.
fn check_container(data: &FlagData, plugin: &Plugin, container: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let args: Vec<String> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a.as_str().unwrap_or_default().to_string())
        .collect();
    let flag_of = |name: &str| {
        plugin.flags.get(name).or_else(|| if plugin.klog { data.klog.flags.get(name) } else { None }).cloned()
    };
    let mut seen = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if plugin.syntax == "none" {
            problems.push(format!("{arg:?}: this plugin parses no flags"));
            continue;
        }
        let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            problems.push(format!("{arg:?} is not a flag"));
            continue;
        };
        // pflag (cobra): a single dash is a run of one-letter shorthands, never a long name.
        if plugin.syntax == "pflag" && !arg.starts_with("--") {
            problems.push(format!("{arg:?}: {} takes long flags with two dashes", plugin.source));
            continue;
        }
        let (name, mut value) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        let Some(kind) = flag_of(&name) else {
            problems.push(format!("{arg:?}: {} {} defines no flag {name:?}", plugin.source, plugin.release));
            continue;
        };
        // `-flag value`: a non-bool flag takes the next arg.
        let is_bool = matches!(&kind, FlagKind::Simple(k) if k == "bool");
        if value.is_none() && !is_bool && i < args.len() {
            value = Some(args[i].clone());
            i += 1;
        }
        if let Err(why) = check_value(&kind, value.as_deref()) {
            problems.push(format!("{arg:?}: {why} ({} {} exits on it)", plugin.source, plugin.release));
        }
        seen.push(name);
    }
    for group in &plugin.exclusive {
        if group.iter().filter(|f| seen.contains(f)).count() > 1 {
            problems.push(format!("{group:?} cannot be used together"));
        }
    }
    if !plugin.env.is_empty() || plugin.syntax == "urfave-cli" {
        for env in container["env"].as_array().into_iter().flatten() {
            let name = env["name"].as_str().unwrap_or_default();
            // Downward-API values (the pod's node, namespace, IP) describe the pod; whether
            // the binary reads them is not a flag.
            if env["valueFrom"]["fieldRef"].is_object() {
                continue;
            }
            if !plugin.env.iter().any(|e| e == name) {
                problems.push(format!("env {name}: {} {} reads no such variable", plugin.source, plugin.release));
            }
        }
    }
    problems
}

/// `repo:tag` of an image reference, without a digest.
fn repo_tag(image: &str) -> (&str, &str) {
    let reference = image.split_once('@').map_or(image, |(r, _)| r);
    reference.rsplit_once(':').unwrap_or((reference, ""))
}

/// Every container of a workload object.
fn containers(object: &Value) -> Vec<&Value> {
    let spec = &object["spec"]["template"]["spec"];
    ["initContainers", "containers"].iter().flat_map(|k| spec[*k].as_array().into_iter().flatten()).collect()
}

/// Problems of every container in `objects` whose image has a flag set; `strict`: an image
/// of a covered repository without an entry is a problem too.
fn check_objects<'a>(data: &FlagData, objects: impl Iterator<Item = &'a Value>, strict: bool) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut problems = Vec::new();
    for object in objects {
        for c in containers(object) {
            let image = c["image"].as_str().unwrap_or_default();
            let (repo, tag) = repo_tag(image);
            let key = format!("{repo}:{tag}");
            let where_ = format!("{} {} container {}", object["kind"], object["metadata"]["name"], c["name"]);
            match data.plugin.iter().find(|p| p.images.contains(&key)) {
                Some(plugin) => {
                    checked += 1;
                    problems.extend(check_container(data, plugin, c).into_iter().map(|p| format!("{where_}: {p}")));
                }
                None if strict && data.repos.iter().any(|r| r == repo) => problems.push(format!(
                    "{where_}: no flag set recorded for {key} in tests/upstream/plugin-flags.toml (read it at that release)"
                )),
                None => {}
            }
        }
    }
    (checked, problems)
}

#[test]
fn every_plugin_container_the_examples_compile_to_passes_its_flag_set() {
    let data = flag_data();
    let mut checked = 0;
    let mut problems = Vec::new();
    for (name, graph) in cases() {
        let objects = graph.resources().filter(|r| r.kind == ResourceKind::Object).map(|r| &r.spec);
        let (n, p) = check_objects(&data, objects, true);
        checked += n;
        problems.extend(p.into_iter().map(|p| format!("{name}: {p}")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 8, "only {checked} plugin containers checked");
}

#[test]
fn every_share_manifest_with_a_recorded_flag_set_passes_it() {
    let data = flag_data();
    let mut objects = Vec::new();
    for entry in std::fs::read_dir(support::repo().join("share")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "yml") {
            let text = std::fs::read_to_string(&path).unwrap();
            objects.extend(k3d_gpu::catalog::parse_manifest(&path.display().to_string(), &text).unwrap());
        }
    }
    let (checked, problems) = check_objects(&data, objects.iter(), false);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 3, "only {checked} containers checked");
}

#[test]
fn the_flag_check_catches_what_the_plugins_exit_on() {
    let data = flag_data();
    let gpu =
        data.plugin.iter().find(|p| p.images.iter().any(|i| i == "docker.io/intel/intel-gpu-plugin:0.36.0")).unwrap();
    let with = |args: &[&str]| check_container(&data, gpu, &serde_json::json!({ "args": args }));
    assert!(with(&["-v=2", "-deny-ids=0xa780", "-shared-dev-num=8", "-allocation-policy=balanced"]).is_empty());
    // The spelling k3d-gpu rendered before: the plugin exits with "invalid PCI ID".
    assert_eq!(with(&["-deny-ids=a780"]).len(), 1);
    assert_eq!(with(&["-allow-ids=0xE20B"]).len(), 1, "upper case is refused too");
    assert_eq!(with(&["-allow-ids=0xe20b", "-deny-ids=0xa780"]).len(), 1);
    assert_eq!(with(&["-shared-dev-num=0"]).len(), 1);
    assert_eq!(with(&["-allocation-policy=spread"]).len(), 1);
    assert_eq!(with(&["-no-such-flag"]).len(), 1);
    let xpumd = data.plugin.iter().find(|p| p.syntax == "pflag").unwrap();
    let args = |args: &[&str]| check_container(&data, xpumd, &serde_json::json!({ "args": args }));
    assert!(args(&["--config=/etc/xpumd/config.yaml", "--config", "/etc/xpumd/more.yaml"]).is_empty());
    assert_eq!(args(&["-config=/etc/xpumd/config.yaml"]).len(), 1, "one dash is a shorthand to pflag");
    assert_eq!(args(&["--configs=/etc/xpumd/config.yaml"]).len(), 1);
    let nvidia = data.plugin.iter().find(|p| p.syntax == "urfave-cli").unwrap();
    let env =
        serde_json::json!({ "env": [{ "name": "FAIL_ON_INIT_ERROR", "value": "false" }, { "name": "FAIL_ON_ERR" }] });
    assert_eq!(check_container(&data, nvidia, &env).len(), 1);
}

// ---- the NVIDIA plugin's config file --------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigRules {
    schema: String,
    images: Vec<String>,
    source: String,
    release: String,
    commit: String,
    files: Vec<String>,
    versions: Vec<String>,
    fields: BTreeMap<String, Vec<String>>,
    rules: ConfigRuleValues,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigRuleValues {
    resources_required: bool,
    min_replicas: i64,
    devices_string: String,
    resource_prefix: String,
    max_resource_name: usize,
    mps_requires_env: String,
    mps_refuses_mig_strategy: String,
}

fn config_rules() -> ConfigRules {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/nvidia-plugin-config.toml")).unwrap();
    let rules: ConfigRules = toml::from_str(&text).unwrap();
    assert_eq!(rules.schema, "k3d-gpu.upstream-config/v1");
    assert!(
        rules.commit.len() == 40 && !rules.source.is_empty() && !rules.release.is_empty() && !rules.files.is_empty()
    );
    rules
}

/// A DNS subdomain (RFC 1123), what `NewResourceName` requires after the prefix.
fn dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// What the plugin would refuse in its config file `text`, or silently ignore (an unknown
/// field), given the container's env.
fn check_plugin_config(r: &ConfigRules, text: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    let config: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("not JSON (we write JSON, which the plugin's YAML parser reads): {e}")],
    };
    let known = |value: &Value, fields: &str, at: &str, problems: &mut Vec<String>| {
        let Some(map) = value.as_object() else {
            problems.push(format!("{at}: not an object"));
            return;
        };
        for key in map.keys() {
            if !r.fields[fields].contains(key) {
                problems.push(format!("{at}.{key}: no such field (the plugin would ignore it)"));
            }
        }
    };
    known(&config, "config", "", &mut problems);
    match config.get("version").and_then(Value::as_str) {
        None | Some("") => {}
        Some(v) if r.versions.iter().any(|x| x == v) => {}
        Some(v) => problems.push(format!("version {v:?}: unknown version")),
    }
    let sharing = &config["sharing"];
    if sharing.is_null() {
        return problems;
    }
    known(sharing, "sharing", "sharing", &mut problems);
    let mut mps_replicated = false;
    for strategy in ["timeSlicing", "mps"] {
        let rr = &sharing[strategy];
        if rr.is_null() {
            continue;
        }
        let at = format!("sharing.{strategy}");
        known(rr, "replicated_resources", &at, &mut problems);
        for flag in ["renameByDefault", "failRequestsGreaterThanOne"] {
            if !rr[flag].is_null() && !rr[flag].is_boolean() {
                problems.push(format!("{at}.{flag}: not a bool"));
            }
        }
        let resources = rr["resources"].as_array().cloned().unwrap_or_default();
        if r.rules.resources_required && resources.is_empty() {
            problems.push(format!("{at}: no resources specified"));
        }
        for (i, res) in resources.iter().enumerate() {
            let at = format!("{at}.resources[{i}]");
            known(res, "replicated_resource", &at, &mut problems);
            match res["name"].as_str() {
                None => problems.push(format!("{at}: no resource name specified")),
                Some(name) => {
                    let full = if name.starts_with(&r.rules.resource_prefix) {
                        name.to_string()
                    } else {
                        format!("{}{name}", r.rules.resource_prefix)
                    };
                    if full.len() > r.rules.max_resource_name {
                        problems.push(format!("{at}.name: longer than {} characters", r.rules.max_resource_name));
                    }
                    if !dns_subdomain(&full[r.rules.resource_prefix.len()..]) {
                        problems.push(format!("{at}.name {name:?}: not a DNS subdomain"));
                    }
                }
            }
            match res["replicas"].as_i64() {
                None => problems.push(format!("{at}: no replicas specified")),
                Some(n) if n < r.rules.min_replicas => {
                    problems.push(format!("{at}.replicas {n}: must be >= {}", r.rules.min_replicas))
                }
                Some(_) if strategy == "mps" => mps_replicated = true,
                Some(_) => {}
            }
            match &res["devices"] {
                Value::Null => {}
                Value::String(s) if *s == r.rules.devices_string => {}
                Value::Number(n) if n.as_i64().is_some_and(|n| n > 0) => {}
                Value::Array(_) => {}
                other => problems.push(format!("{at}.devices {other}: not \"all\", a count > 0 or a list")),
            }
        }
    }
    if mps_replicated {
        if env.get(&r.rules.mps_requires_env).is_none_or(|v| v.is_empty()) {
            problems.push(format!("MPS needs {} (--mps-root)", r.rules.mps_requires_env));
        }
        if env.get("MIG_STRATEGY").is_some_and(|v| *v == r.rules.mps_refuses_mig_strategy) {
            problems.push("MPS with MIG_STRATEGY=mixed is refused".into());
        }
    }
    problems
}

/// Where a container is, its env, and its config file's text (or why it cannot be found).
type ConfigFile = (String, BTreeMap<String, String>, Result<String, String>);

/// Each NVIDIA plugin container in `graph` that reads a config file: where, its env, and the
/// file's text as the container would see it (CONFIG_FILE → mount → ConfigMap key).
fn plugin_config_files(r: &ConfigRules, graph: &DesiredGraph) -> Vec<ConfigFile> {
    let objects: Vec<&Value> = graph.resources().filter(|x| x.kind == ResourceKind::Object).map(|x| &x.spec).collect();
    let mut out = Vec::new();
    for object in &objects {
        let pod = &object["spec"]["template"]["spec"];
        for c in containers(object) {
            let (repo, tag) = repo_tag(c["image"].as_str().unwrap_or_default());
            if !r.images.contains(&format!("{repo}:{tag}")) {
                continue;
            }
            let mut env: BTreeMap<String, String> = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["value"].as_str()?.to_string())))
                .collect();
            let Some(path) = env.get("CONFIG_FILE").cloned() else { continue };
            // The MPS control daemon reads the same file but takes no --mps-root: its root is
            // /mps in its own container (cmd/mps-control-daemon/mps/root.go, ContainerRoot);
            // validateFlags' MPS_ROOT rule is the plugin binary's.
            if c["command"][0] == "mps-control-daemon" {
                env.entry("MPS_ROOT".to_string()).or_insert_with(|| "/mps".to_string());
            }
            let where_ = format!("{} {} container {}", object["kind"], object["metadata"]["name"], c["name"]);
            let file = (|| {
                let (dir, key) = path.rsplit_once('/').ok_or("CONFIG_FILE is not a path")?;
                let mount = c["volumeMounts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|m| m["mountPath"] == dir)
                    .ok_or(format!("nothing is mounted at {dir}"))?;
                let volume = pod["volumes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|v| v["name"] == mount["name"])
                    .ok_or("the mount names no volume")?;
                let name = volume["configMap"]["name"].as_str().ok_or("the volume is not a ConfigMap")?;
                let cm = objects
                    .iter()
                    .find(|o| {
                        o["kind"] == "ConfigMap"
                            && o["metadata"]["name"] == name
                            && o["metadata"]["namespace"] == object["metadata"]["namespace"]
                    })
                    .ok_or(format!("no ConfigMap {name} in the graph"))?;
                cm["data"][key].as_str().map(str::to_string).ok_or(format!("ConfigMap {name} has no key {key}"))
            })();
            out.push((where_, env, file));
        }
    }
    out
}

#[test]
fn every_nvidia_plugin_config_file_passes_upstreams_rules() {
    let r = config_rules();
    let mut checked = 0;
    let mut problems = Vec::new();
    for (name, graph) in cases() {
        for (where_, env, file) in plugin_config_files(&r, &graph) {
            checked += 1;
            match file {
                Err(e) => problems.push(format!("{name}: {where_}: {e}")),
                Ok(text) => problems
                    .extend(check_plugin_config(&r, &text, &env).into_iter().map(|p| format!("{name}: {where_}: {p}"))),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The time-slicing example and the WSL2 variation.
    assert!(checked >= 2, "only {checked} config files checked");
}

#[test]
fn the_config_check_catches_what_the_plugin_refuses_or_ignores() {
    let r = config_rules();
    let env = BTreeMap::new();
    let check = |text: &str| check_plugin_config(&r, text, &env);
    let good = r#"{"version": "v1", "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": true, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}"#;
    assert!(check(good).is_empty(), "{:?}", check(good));
    for bad in [
        r#"{"version": "v2"}"#,
        r#"{"sharing": {"timeslicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}"#,
        r#"{"sharing": {"timeSlicing": {"resources": []}}}"#,
        r#"{"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}"#,
        r#"{"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu"}]}}}"#,
        r#"{"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "devices": "some"}]}}}"#,
        r#"{"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/GPU", "replicas": 2}]}}}"#,
        r#"{"sharing": {"timeSlicing": {"renameByDefault": "yes", "resources": [{"name": "gpu", "replicas": 2}]}}}"#,
        r#"{"sharing": {"mps": {"resources": [{"name": "gpu", "replicas": 2}]}}}"#,
    ] {
        assert_eq!(check(bad).len(), 1, "{bad}: {:?}", check(bad));
    }
    let long = format!(
        r#"{{"sharing": {{"timeSlicing": {{"resources": [{{"name": "{}", "replicas": 2}}]}}}}}}"#,
        "g".repeat(60)
    );
    assert_eq!(check(&long).len(), 1);
}

// ---- what k3s makes itself ------------------------------------------------------------------

/// An object k3s deploys from its packaged manifests (or the API server makes) is k3s's:
/// apply refuses to take it over and observe never sees it, so emitting one never converges.
#[test]
fn no_object_we_emit_is_one_k3s_makes_itself() {
    let key = |o: &Value| {
        let api = o["apiVersion"].as_str().unwrap_or_default();
        let group = api.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        (
            group,
            o["kind"].as_str().unwrap_or_default().to_string(),
            o["metadata"]["namespace"].clone(),
            o["metadata"]["name"].clone(),
        )
    };
    let k3s: Vec<_> =
        support::fake_apiserver::fresh_k3s_objects().iter().filter(|o| o["kind"] != "Namespace").map(key).collect();
    let mut problems = Vec::new();
    for (name, graph) in cases() {
        for r in graph.resources().filter(|r| r.kind == ResourceKind::Object) {
            if k3s.contains(&key(&r.spec)) {
                problems.push(format!("{name}: {} is made by k3s itself", r.id));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// k3s's package as rancher/k3s's image holds it in /bin, `tests/upstream/k3s-package-bin.txt`:
/// (kind, name, link target).
fn k3s_package() -> Vec<(String, String, Option<String>)> {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/k3s-package-bin.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words[0].to_string(), words[1].to_string(), words.get(2).map(|t| t.to_string()))
        })
        .collect()
}

/// k3s-root's part of rancher/k3s's /bin, `tests/upstream/k3s-root-bin.txt`: (kind, name,
/// whether the node image check runs it).
fn k3s_root_bin() -> Vec<(String, String, bool)> {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/k3s-root-bin.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let name = words[1].rsplit('/').next().unwrap().to_string();
            (words[0].to_string(), name, l.ends_with("# run"))
        })
        .collect()
}

/// The sources of a Dockerfile's `COPY --from=k3s` lines, with their destination.
fn copies_from_k3s(dockerfile: &str) -> Vec<(Vec<String>, String)> {
    let joined = dockerfile.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|line| line.trim().strip_prefix("COPY --from=k3s "))
        .map(|rest| {
            let mut words: Vec<String> = rest.split_whitespace().map(String::from).collect();
            let dest = words.pop().unwrap_or_default();
            (words, dest)
        })
        .collect()
}

/// Issue 35: the shipped node image takes all of rancher/k3s's /bin (k3s's package and
/// k3s-root's tools, busybox's `sh` among them), as k3d's CUDA guide does, not a list of
/// files; and what the node image check runs is exactly what those lists hold (plus the
/// NVIDIA toolkit's runtime). That the image then runs is tests/node_start.rs's to show.
#[test]
fn the_node_image_takes_all_of_k3s_bin_and_the_check_runs_upstreams_tools() {
    let whole_bin = |copies: &[(Vec<String>, String)]| {
        copies.iter().any(|(sources, dest)| {
            sources.len() == 1
                && matches!(sources[0].as_str(), "/bin" | "/bin/")
                && matches!(dest.as_str(), "/usr/bin/" | "/usr/bin" | "/bin" | "/bin/")
        })
    };
    let copies = copies_from_k3s(k3d_gpu::node_image::SHIPPED_DOCKERFILE);
    assert!(whole_bin(&copies), "the Dockerfile does not copy k3s's whole /bin: {copies:?}");
    // The old layout (named files, then aux/) is caught.
    let old = "COPY --from=k3s /bin/k3s /bin/containerd /usr/bin/\nCOPY --from=k3s /bin/aux /usr/bin/aux\n";
    assert!(!whole_bin(&copies_from_k3s(old)));

    let package = k3s_package();
    let root = k3s_root_bin();
    assert!(root.iter().any(|(_, n, _)| n == "ipset") && package.iter().any(|(_, n, _)| n == "containerd"));
    let upstream_has = |name: &str| package.iter().any(|(_, n, _)| n == name) || root.iter().any(|(_, n, _)| n == name);
    let required = k3d_gpu::node_check::required(true);
    let binary = |c: &k3d_gpu::node_check::Check| c.label().split_whitespace().next().unwrap().to_string();
    for check in &required {
        let name = binary(check);
        // date is a busybox applet (a link per applet, not listed one by one).
        assert!(
            name == "nvidia-container-runtime" || name == "date" || upstream_has(&name),
            "the check runs {name}, which neither k3s's package nor k3s-root ships"
        );
    }
    for (_, name, _) in root.iter().filter(|(_, _, run)| *run) {
        assert!(
            required.iter().any(|c| binary(c) == *name),
            "k3s-root-bin.txt marks {name} as run, but the node image check does not run it"
        );
    }
}

/// Issue 35: the constructs of k3d's node entrypoint (`tests/upstream/k3d-entrypoint.txt`)
/// are in the probe the node image check runs and in our stand-in entrypoint, so neither can
/// drift to something gentler than upstream.
#[test]
fn the_probe_and_the_stand_in_entrypoint_hold_k3ds_constructs() {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/k3d-entrypoint.txt")).unwrap();
    let dir = support::repo().join("tests/fixtures/k3d-node");
    let script = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut constructs = 0;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (kind, rest) = line.split_once(' ').unwrap();
        let (place, what) = rest.split_once(' ').unwrap();
        let file = place.split(':').next().unwrap();
        match kind {
            "construct" => {
                constructs += 1;
                // The trap's handler is upstream's name; what must match is the signal list.
                let needle = what.strip_prefix("trap cleanup").map_or(what.to_string(), |s| s.to_string());
                assert!(script(file).contains(&needle), "our {file} lacks {what:?}");
                if needle != "#!/bin/sh" {
                    assert!(k3d_gpu::node_check::PROBE.contains(&needle), "the probe lacks {what:?}");
                }
            }
            "command" => {
                let body = script(file);
                let runs = body
                    .lines()
                    .filter(|l| !l.trim_start().starts_with('#'))
                    .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')))
                    .any(|w| w == what);
                assert!(runs, "our {file} never runs {what}");
            }
            other => panic!("unknown entry {other}"),
        }
    }
    assert_eq!(constructs, 4, "the list was read");
}

// ---- how the workloads start -----------------------------------------------------------------

#[derive(Deserialize)]
struct LlmScaler {
    image: String,
    prefix: String,
}

/// Why a container of the llm-scaler image would start without its oneAPI environment: its
/// command replaces the image's entrypoint, so it must be a shell that runs upstream's prefix
/// first and then vllm with the container's args.
fn llm_scaler_start_problems(upstream: &LlmScaler, container: &Value) -> Vec<String> {
    let command: Vec<&str> = container["command"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = Vec::new();
    if command.is_empty() {
        return out; // the image's own entrypoint, which sources nothing but drops the args
    }
    match command.as_slice() {
        [shell, "-c", script, ..] if shell.ends_with("bash") || shell.ends_with("sh") => {
            if !script.starts_with(&upstream.prefix) {
                out.push(format!("the script {script:?} does not start with {:?}", upstream.prefix));
            }
            if !script.contains("vllm \"$@\"") {
                out.push(format!("the script {script:?} does not run vllm with the container's args"));
            }
        }
        other => out.push(format!("command {other:?} replaces the entrypoint without {:?}", upstream.prefix)),
    }
    if container["args"][0] != "serve" {
        out.push("the args do not start with `serve`".into());
    }
    out
}

/// Issue 22, deviation 3: llm-scaler's vLLM starts with its oneAPI environment, as
/// intel/llm-scaler's README says a replaced entrypoint must; and the image is the release
/// that README was read at.
#[test]
fn llm_scaler_starts_the_way_its_readme_says() {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/llm-scaler-vllm.toml")).unwrap();
    let upstream: LlmScaler = toml::from_str(&text).unwrap();
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let config = k3d_gpu::config::load_str("k3dgpu.toml", "[agent]\nbackend = \"llm-scaler\"\n").unwrap();
    let graph = k3d_gpu::compile::compile(&config, &support::facts_of("arc-b580-xe-rpl-igpu"), &catalog).unwrap();
    let mut seen = 0;
    for r in graph.resources() {
        for c in containers(&r.spec) {
            let image = c["image"].as_str().unwrap_or_default();
            if !image.starts_with("docker.io/intel/llm-scaler-vllm:") {
                continue;
            }
            seen += 1;
            assert_eq!(image.split('@').next(), Some(upstream.image.as_str()), "{}", r.id);
            let problems = llm_scaler_start_problems(&upstream, c);
            assert!(problems.is_empty(), "{}: {problems:?}", r.id);
        }
    }
    assert_eq!(seen, 1, "one llm-scaler container");
    // The check catches the old start: `vllm` as the command, no environment.
    let old = serde_json::json!({ "command": ["vllm"], "args": ["serve", "m"] });
    assert!(!llm_scaler_start_problems(&upstream, &old).is_empty());
}

/// Issue 22, deviation 4: with `[sharing.nvidia]` on, the DCGM exporter maps each shared GPU
/// to every pod holding a replica (`KUBERNETES_VIRTUAL_GPUS`, a bool flag of dcgm-exporter
/// 4.5.3-4.8.2's `pkg/cmd/app.go`, recorded in plugin-flags.toml; used by
/// `internal/pkg/transformation/kubernetes.go`), and without sharing it is left at its default.
#[test]
fn dcgm_exporter_names_every_pod_on_a_shared_gpu() {
    let flags = std::fs::read_to_string(support::repo().join("tests/upstream/plugin-flags.toml")).unwrap();
    assert!(flags.contains("\"KUBERNETES_VIRTUAL_GPUS\"") && flags.contains("kubernetes-virtual-gpus = \"bool\""));
    let mut shared_seen = 0;
    for (name, graph) in cases() {
        let shared = graph
            .resources()
            .any(|r| r.spec["kind"] == "ConfigMap" && r.spec["metadata"]["name"] == "nvidia-device-plugin-config");
        for r in graph.resources().filter(|r| r.spec["kind"] == "DaemonSet") {
            for c in containers(&r.spec).into_iter().filter(|c| c["name"] == "dcgm-exporter") {
                let value = c["env"].as_array().into_iter().flatten().find(|e| e["name"] == "KUBERNETES_VIRTUAL_GPUS");
                if shared {
                    shared_seen += 1;
                    assert_eq!(value.map(|e| &e["value"]), Some(&Value::from("true")), "{name}: {}", r.id);
                } else {
                    assert!(value.is_none(), "{name}: {}: set without sharing", r.id);
                }
            }
        }
    }
    assert!(shared_seen > 0, "a case with [sharing.nvidia] and the exporter");
}

// ---- custom resources against upstream's CRDs -------------------------------------------------

/// Every CRD the catalog ships (upstream's own, share/README.md says from where), by
/// (group, kind, version): its schema made strict the way the API server is: a field a
/// structural schema does not name is pruned (silently lost), so here it is an error.
fn shipped_crd_schemas() -> BTreeMap<(String, String, String), Value> {
    fn strict(schema: &mut Value) {
        if let Value::Object(map) = schema {
            let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if map.contains_key("properties") && !map.contains_key("additionalProperties") && !preserve {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(strict);
        } else if let Value::Array(items) = schema {
            items.iter_mut().for_each(strict);
        }
    }
    let mut out = BTreeMap::new();
    for (name, object) in share_objects() {
        if object["kind"] != "CustomResourceDefinition" {
            continue;
        }
        let group = object["spec"]["group"].as_str().unwrap().to_string();
        let kind = object["spec"]["names"]["kind"].as_str().unwrap().to_string();
        for v in object["spec"]["versions"].as_array().unwrap() {
            let mut schema = v["schema"]["openAPIV3Schema"].clone();
            assert!(schema.is_object(), "{name}: {kind} {} has a schema", v["name"]);
            strict(&mut schema);
            out.insert((group.clone(), kind.clone(), v["name"].as_str().unwrap().to_string()), schema);
        }
    }
    out
}

/// Every object of every manifest in share/, with its file name.
fn share_objects() -> Vec<(String, Value)> {
    support::manifests_in("share", ".yml")
}

/// The errors of `object` against the CRD schema of its group, kind and version; `None` when
/// no shipped CRD defines it.
fn custom_resource_errors(
    validators: &BTreeMap<(String, String, String), jsonschema::Validator>,
    object: &Value,
) -> Option<Vec<String>> {
    let api = object["apiVersion"].as_str()?;
    let (group, version) = api.split_once('/')?;
    let key = (group.to_string(), object["kind"].as_str()?.to_string(), version.to_string());
    let validator = validators.get(&key)?;
    Some(validator.iter_errors(object).map(|e| format!("{e} at {}", e.instance_path())).collect())
}

/// Issue 22, deviation 5: the CRDs are upstream's (BalloonsPolicy from nri-plugins v0.14.0,
/// NFD's three from v0.19.0, not a few properties with unknown fields kept), and every custom
/// resource the catalog ships or the compiler writes is valid against them.
#[test]
fn every_custom_resource_we_emit_is_valid_against_upstreams_crd() {
    let schemas = shipped_crd_schemas();
    let count = |group: &str, kind: &str| {
        let key = (group.to_string(), kind.to_string(), "v1alpha1".to_string());
        let mut n = 0;
        fn walk(v: &Value, n: &mut usize) {
            if let Value::Object(m) = v {
                if let Some(Value::Object(p)) = m.get("properties") {
                    *n += p.len();
                }
                m.values().for_each(|v| walk(v, n));
            } else if let Value::Array(a) = v {
                a.iter().for_each(|v| walk(v, n));
            }
        }
        walk(&schemas[&key], &mut n);
        n
    };
    // Upstream's sizes (schema properties, counted the same way): a minimal CRD has a handful.
    let sizes = [
        count("config.nri", "BalloonsPolicy"),
        count("nfd.k8s-sigs.io", "NodeFeatureRule"),
        count("nfd.k8s-sigs.io", "NodeFeatureGroup"),
        count("nfd.k8s-sigs.io", "NodeFeature"),
    ];
    assert_eq!(sizes, [168, 38, 32, 13], "upstream's schemas at the pinned releases (the minimal ones had 5, 5, 4, 4)");

    let schemas: BTreeMap<_, _> =
        schemas.into_iter().map(|(key, schema)| (key, jsonschema::validator_for(&schema).unwrap())).collect();
    let mut checked = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (name, object) in share_objects() {
        if let Some(errors) = custom_resource_errors(&schemas, &object) {
            checked.insert(object["kind"].as_str().unwrap().to_string());
            if !errors.is_empty() {
                problems.push(format!("share/{name}: {} {}: {errors:?}", object["kind"], object["metadata"]["name"]));
            }
        }
    }
    for (case, graph) in cases() {
        for r in graph.resources() {
            if let Some(errors) = custom_resource_errors(&schemas, &r.spec) {
                checked.insert(r.spec["kind"].as_str().unwrap().to_string());
                if !errors.is_empty() {
                    problems.push(format!("{case}: {}: {errors:?}", r.id));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    for kind in ["BalloonsPolicy", "NodeFeatureRule"] {
        assert!(checked.contains(kind), "no {kind} was checked: {checked:?}");
    }

    // The check sees what the API server would now refuse (or prune): a misspelt field of the
    // balloons policy, and a wrong type in a NodeFeatureRule.
    let (_, policy) = share_objects().into_iter().find(|(_, o)| o["kind"] == "BalloonsPolicy").unwrap();
    let mut bad = policy.clone();
    bad["spec"]["reservedResourcez"] = serde_json::json!({ "cpu": "1" });
    assert!(!custom_resource_errors(&schemas, &bad).unwrap().is_empty(), "a misspelt field");
    let (_, rule) = share_objects().into_iter().find(|(_, o)| o["kind"] == "NodeFeatureRule").unwrap();
    let mut bad = rule.clone();
    bad["spec"]["rules"] = serde_json::json!("not a list");
    assert!(!custom_resource_errors(&schemas, &bad).unwrap().is_empty(), "a wrong type");
}

/// The custom resources of the example directories (KServe's InferenceService, KubeRay's
/// RayCluster) against the OpenAPI v3 schema of upstream's own CRD at the release each
/// example names, vendored in tests/upstream/ (descriptions left out; tests/upstream/README.md),
/// strict as the API server prunes.
#[test]
fn example_custom_resources_are_valid_against_upstreams_crds() {
    fn strict(schema: &mut Value) {
        if let Value::Object(map) = schema {
            let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if map.contains_key("properties") && !map.contains_key("additionalProperties") && !preserve {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(strict);
        } else if let Value::Array(items) = schema {
            items.iter_mut().for_each(strict);
        }
    }
    let vendored = [
        ("serving.kserve.io", "InferenceService", "v1beta1", "kserve-v0.20.0-inferenceservice-v1beta1.schema.json"),
        ("ray.io", "RayCluster", "v1", "kuberay-v1.7.0-raycluster-v1.schema.json"),
    ];
    let mut validators = BTreeMap::new();
    for (group, kind, version, file) in vendored {
        let text = std::fs::read_to_string(support::repo().join("tests/upstream").join(file)).unwrap();
        let mut schema: Value = serde_json::from_str(&text).unwrap();
        strict(&mut schema);
        validators.insert(
            (group.to_string(), kind.to_string(), version.to_string()),
            jsonschema::validator_for(&schema).unwrap(),
        );
    }
    let mut checked = Vec::new();
    for (example, file) in [("kserve-ovms-igpu", "inferenceservice.yaml"), ("kuberay-hybrid", "raycluster.yaml")] {
        let text = std::fs::read_to_string(support::repo().join("examples").join(example).join(file)).unwrap();
        for object in k3d_gpu::catalog::parse_manifest(file, &text).unwrap() {
            let errors = custom_resource_errors(&validators, &object)
                .unwrap_or_else(|| panic!("{example}/{file}: no vendored CRD for {}", object["kind"]));
            assert!(errors.is_empty(), "{example}/{file}: {errors:#?}");
            checked.push(object["kind"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(checked, ["InferenceService", "RayCluster"]);

    // The schemas are strict where upstream's are: a misspelt field and a wrong type fail.
    let mut bad: Value = serde_json::json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": []}}},
                 "workerGroupSpecs": [{"groupName": "w", "replica": 1, "template": {}}]}
    });
    assert!(!custom_resource_errors(&validators, &bad).unwrap().is_empty(), "replica (for replicas)");
    bad["spec"]["workerGroupSpecs"][0] = serde_json::json!({"groupName": "w", "replicas": "two", "template": {}});
    assert!(!custom_resource_errors(&validators, &bad).unwrap().is_empty(), "replicas as a string");
}

/// Issue 36, deviation 6: every key of the registries.yaml apply embeds in k3d's
/// `registries.config` is a JSON name rancher/wharfie v0.7.0 reads at that place
/// (`tests/upstream/wharfie-v0.7.0-registry-json.txt`). k3d decodes it with encoding/json and
/// drops an unknown key without a word, so `identity_token` (k3s's YAML name) would never
/// reach the node.
#[test]
fn the_embedded_registries_config_uses_the_names_k3d_reads() {
    let text =
        std::fs::read_to_string(support::repo().join("tests/upstream/wharfie-v0.7.0-registry-json.txt")).unwrap();
    let known: BTreeMap<String, String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words[0].to_string(), words[1].to_string())
        })
        .collect();
    assert_eq!(known["configs.*.auth.identitytoken"], "identitytoken", "the list was read");
    let file = "configs:\n  quay.io:\n    auth:\n      username: u\n      password: p\n      auth: a\n      identity_token: t\n    tls:\n      ca_file: /c\n      cert_file: /d\n      key_file: /k\n      insecure_skip_verify: true\n";
    let credentials = k3d_gpu::apply::registries::Credentials::parse(file).unwrap();
    let spec = serde_json::json!({ "mirrors": { "docker.io": ["https://mirror.lan:5000"] } });
    let written = k3d_gpu::apply::registries::registries_yaml(&spec, Some(&credentials)).unwrap();
    let doc: Value = serde_json::from_str(&written).unwrap();
    fn walk(value: &Value, path: &str, known: &BTreeMap<String, String>, out: &mut Vec<String>) {
        let Some(map) = value.as_object() else { return };
        for (key, child) in map {
            let exact = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            let any = if path.is_empty() { "*".to_string() } else { format!("{path}.*") };
            let place = if known.get(&exact).is_some_and(|tag| tag == key) {
                exact
            } else if known.contains_key(&any) {
                any
            } else {
                out.push(format!("{exact} is no JSON name wharfie reads there"));
                continue;
            };
            walk(child, &place, known, out);
        }
    }
    let mut problems = Vec::new();
    walk(&doc, "", &known, &mut problems);
    assert!(problems.is_empty(), "{problems:?}\n{written}");
    assert_eq!(doc["configs"]["quay.io"]["auth"]["identitytoken"], "t", "the token is there, by k3d's name");
}

/// The quantity cases of apimachinery's own tests (`tests/upstream/apimachinery-quantity-cases.tsv`):
/// (input, expected String() or None for ERROR, test function).
fn quantity_cases() -> Vec<(String, Option<String>, String)> {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/apimachinery-quantity-cases.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "{l:?}");
            let expected = (cols[1] != "ERROR").then(|| cols[1].to_string());
            (cols[0].to_string(), expected, cols[2].to_string())
        })
        .collect()
}

/// Issue 36, deviation 4: the product's quantities and the fake API server's agree with
/// upstream's own test table, each on its own (the fake does not call the product's code).
#[test]
fn quantities_match_apimachinerys_test_table() {
    let cases = quantity_cases();
    assert!(cases.len() > 140, "the table was read");
    let mut problems = Vec::new();
    for (input, expected, from) in &cases {
        let product = k3d_gpu::quantity::canonical(input);
        if product != *expected {
            problems.push(format!("product: {input:?} gives {product:?}, {from} says {expected:?}"));
        }
        let fake = support::quantity::canonical(input);
        if fake != *expected {
            problems.push(format!("fake: {input:?} gives {fake:?}, {from} says {expected:?}"));
        }
    }
    assert!(problems.is_empty(), "{} of {} cases differ:\n{}", problems.len(), cases.len(), problems.join("\n"));
}

/// Issue 37, defect 1: the parser names validate checks against
/// (`src/compile/workloads/parsers.rs`) are the ones recorded from upstream
/// (`tests/upstream/server-parsers.toml`), at the versions the catalog's images pin: bumping
/// OVMS's or vLLM's image without reading its parsers again fails here.
#[test]
fn the_parser_lists_are_upstreams_at_the_pinned_images() {
    use k3d_gpu::compile::workloads::{self, parsers};
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/server-parsers.toml")).unwrap();
    let recorded: toml::Table = toml::from_str(&text).unwrap();
    let names = |table: &str, key: &str| -> Vec<String> {
        recorded[table][key].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    for (table, list) in [("vllm", &parsers::VLLM), ("ovms", &parsers::OVMS)] {
        assert_eq!(recorded[table]["version"].as_str(), Some(list.version), "{table}");
        assert_eq!(names(table, "tool_parsers"), list.tool, "{table} tool parsers");
        assert_eq!(names(table, "reasoning_parsers"), list.reasoning, "{table} reasoning parsers");
    }
    let tag = |image: &str| image.rsplit_once(':').unwrap().1.to_string();
    assert_eq!(tag(workloads::VLLM_CUDA_IMAGE), parsers::VLLM.version);
    assert_eq!(tag(workloads::VLLM_XPU_IMAGE), parsers::VLLM.version);
    let ovms = tag(workloads::OVMS_IMAGE);
    assert_eq!(ovms.split('-').next(), parsers::OVMS.version.strip_prefix('v'), "{ovms}");
}

/// What `tests/upstream/server-flags.toml` records of one server: where each flag is defined
/// upstream, and the values upstream's parsing accepts where it restricts them.
struct ServerFlags {
    version: String,
    flags: BTreeMap<String, String>,
    choices: BTreeMap<String, Vec<String>>,
}

fn server_flags() -> BTreeMap<String, ServerFlags> {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/server-flags.toml")).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let strings = |v: &toml::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
    };
    table
        .iter()
        .map(|(server, t)| {
            let flags = t["flags"].as_table().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().into()));
            let choices = t.get("choices").and_then(|c| c.as_table()).into_iter().flatten();
            let recorded = ServerFlags {
                version: t["version"].as_str().unwrap().to_string(),
                flags: flags.collect(),
                choices: choices.map(|(k, v)| (k.clone(), strings(v))).collect(),
            };
            (server.clone(), recorded)
        })
        .collect()
}

/// The model server a container runs, by its image at the version the flags were read for:
/// `vllm` for vLLM's own images at that release, `ovms` for OpenVINO Model Server's.
/// Intel's llm-scaler and the Gaudi build carry vLLM forks of other versions, not read here.
fn server_of(image: &str, recorded: &BTreeMap<String, ServerFlags>) -> Option<&'static str> {
    let (repo, tag) = repo_tag(image);
    let vllm = &recorded["vllm"].version;
    let ovms = recorded["ovms"].version.trim_start_matches('v');
    match repo {
        "docker.io/vllm/vllm-openai" | "docker.io/vllm/vllm-openai-xpu" if tag == vllm => Some("vllm"),
        "docker.io/openvino/model_server" if tag.split('-').next() == Some(ovms) => Some("ovms"),
        _ => None,
    }
}

/// Problems of one server container's arguments: a flag the server does not define, a value
/// its parser refuses, or (OVMS) a task option given to another task, which OVMS's per-task
/// parser rejects at start.
fn check_server_args(server: &str, recorded: &ServerFlags, args: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let task = args.iter().position(|a| a == "--task").and_then(|i| args.get(i + 1));
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if !arg.starts_with("--") {
            continue;
        }
        let value = args.get(i).filter(|v| !v.starts_with("--"));
        let Some(defined) = recorded.flags.get(arg) else {
            problems.push(format!("{server} {}: {arg} is not a flag it defines", recorded.version));
            continue;
        };
        if let (Some(allowed), Some(value)) = (recorded.choices.get(arg), value)
            && !allowed.contains(value)
        {
            problems.push(format!("{server}: {arg} {value} is not one of {allowed:?}"));
        }
        if let Some(only) = defined.split("task ").nth(1).and_then(|rest| rest.strip_suffix(" only)"))
            && task.map(String::as_str) != Some(only)
        {
            problems.push(format!("{server}: {arg} belongs to --task {only}, given with --task {task:?}"));
        }
    }
    problems
}

/// Every server container's arguments in `graph`, with its server and where it is.
fn server_containers(
    graph: &DesiredGraph,
    recorded: &BTreeMap<String, ServerFlags>,
) -> Vec<(&'static str, String, Vec<String>)> {
    let mut out = Vec::new();
    for r in graph.resources().filter(|r| r.kind == ResourceKind::Object) {
        for c in containers(&r.spec) {
            let Some(server) = server_of(c["image"].as_str().unwrap_or_default(), recorded) else { continue };
            let args: Vec<String> =
                c["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
            out.push((server, format!("{} container {}", r.id, c["name"]), args));
        }
    }
    out
}

/// Issue 37: every flag and value we hand vLLM and OVMS is one that server defines and accepts
/// at the version the catalog pins, over the examples and agent configs that reach each
/// server, device and add-on.
#[test]
fn every_model_server_flag_is_one_upstream_defines() {
    let recorded = server_flags();
    assert_eq!(recorded["vllm"].version, k3d_gpu::compile::workloads::parsers::VLLM.version, "read again on a bump");
    assert_eq!(recorded["ovms"].version, k3d_gpu::compile::workloads::parsers::OVMS.version, "read again on a bump");
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let agents = [
        ("[agent]\n", "rtx2000ada-x2"),
        ("[agent]\ngpus = 2\nlog_level = \"DEBUG\"\nrevision = \"main\"\nmax_len = 8192\n", "rtx2000ada-x2"),
        (
            "[agent]\nbackend = \"vllm\"\ngpus = 2\ntool_parser = \"hermes\"\nreasoning_parser = \"qwen3\"\n",
            "arc-b580-x2",
        ),
        ("[agent]\nlog_level = \"WARNING\"\n[addons.embeddings]\n[addons.stt]\n[addons.vlm]\n", "lunar-lake-npu"),
        ("[agent]\ndevice = \"npu\"\nmax_len = 4096\nlog_level = \"ERROR\"\n", "lunar-lake-npu"),
        ("[agent]\ndevice = \"cpu\"\ntool_parser = \"\"\nreasoning_parser = \"\"\n", "plain-laptop-amd"),
        // [telemetry]: OVMS serves its /metrics (--metrics_enable) for Prometheus.
        ("[agent]\n[addons.stt]\n[telemetry]\n", "lunar-lake-npu"),
    ];
    let mut graphs: Vec<(String, DesiredGraph)> = cases();
    for (text, host) in agents {
        let config = k3d_gpu::config::load_str("k3dgpu.toml", text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog)
            .unwrap_or_else(|e| panic!("{text} on {host}: {e:#?}"));
        graphs.push((format!("{text:?} on {host}"), graph));
    }
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, graph) in &graphs {
        for (server, container, args) in server_containers(graph, &recorded) {
            *checked.entry(server).or_default() += 1;
            let found = check_server_args(server, &recorded[server], &args);
            problems.extend(found.into_iter().map(|p| format!("{name}: {container}: {p}")));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked.get("vllm").is_some_and(|n| *n >= 3), "{checked:?}");
    assert!(checked.get("ovms").is_some_and(|n| *n >= 8), "{checked:?}");
}

/// The check above fails on what each server refuses at start: a flag of the other server's
/// spelling, a value outside the choices, a task option given to another task.
#[test]
fn the_model_server_check_catches_what_the_servers_refuse() {
    let recorded = server_flags();
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let vllm = &recorded["vllm"];
    assert!(
        check_server_args("vllm", vllm, &args(&["serve", "m", "--max-model-len", "4096", "--enforce-eager"]))
            .is_empty()
    );
    assert_eq!(check_server_args("vllm", vllm, &args(&["serve", "m", "--max_model_len", "4096"])).len(), 1);
    assert_eq!(check_server_args("vllm", vllm, &args(&["serve", "m", "--dtype", "fp16"])).len(), 1);
    let ovms = &recorded["ovms"];
    let good = ["--task", "embeddings", "--pooling", "LAST", "--target_device", "NPU"];
    assert!(check_server_args("ovms", ovms, &args(&good)).is_empty());
    assert_eq!(check_server_args("ovms", ovms, &args(&["--task", "embeddings", "--tool_parser", "hermes3"])).len(), 1);
    assert_eq!(check_server_args("ovms", ovms, &args(&["--task", "text_generation", "--pooling", "LAST"])).len(), 1);
    assert_eq!(check_server_args("ovms", ovms, &args(&["--log_level", "VERBOSE"])).len(), 1);
    assert_eq!(check_server_args("ovms", ovms, &args(&["--max-model-len", "4096"])).len(), 1);
}

/// The container named `name` in a workload's pod (or init) containers, and the pod.
fn pod_container<'a>(object: &'a Value, key: &str, name: &str) -> &'a Value {
    let list = object["spec"]["template"]["spec"][key].as_array().unwrap_or_else(|| panic!("no {key}"));
    list.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no container {name}"))
}

/// The host path (and its type, "" for none) behind each mount of `container` in `object`.
/// A facts file's list of strings.
fn toml_strings(v: &toml::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// A facts file's table of two-string lists (`"/mps" = ["/run/nvidia/mps", "DirectoryOrCreate"]`).
fn toml_pairs(v: &toml::Value) -> BTreeMap<String, (String, String)> {
    v.as_table()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let pair = toml_strings(v);
            (k.clone(), (pair[0].clone(), pair[1].clone()))
        })
        .collect()
}

fn host_paths(object: &Value, container: &Value) -> BTreeMap<String, (String, String)> {
    let volumes = object["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let v = volumes.iter().find(|v| v["name"] == m["name"])?;
            let host = v["hostPath"].as_object()?;
            let (path, kind) = (host["path"].as_str()?, host.get("type").and_then(Value::as_str).unwrap_or(""));
            Some((m["mountPath"].as_str()?.to_string(), (path.to_string(), kind.to_string())))
        })
        .collect()
}

/// Issue 38, item 2: the MPS control daemon and the plugin k3d-gpu compiles for
/// `strategy = "mps"` are upstream's, as its Helm chart renders them at the release the image
/// pins (tests/upstream/nvidia-mps.toml): the daemon's init and main commands, privilege, host
/// PID namespace, mounts and host paths, and the plugin's MPS_ROOT and mounts.
#[test]
fn mps_is_deployed_as_upstreams_chart_deploys_it() {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/nvidia-mps.toml")).unwrap();
    let up: toml::Table = toml::from_str(&text).unwrap();
    let strings = toml_strings;
    let paths = toml_pairs;
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let config =
        k3d_gpu::config::load_str("k3dgpu.toml", "[sharing.nvidia]\nstrategy = \"mps\"\nreplicas = 4\n").unwrap();
    let graph = k3d_gpu::compile::compile(&config, &support::facts_of("rtx2000ada-x2"), &catalog).unwrap();
    let daemon = &graph.get("k8s/apps/DaemonSet/kube-system/nvidia-mps-control-daemon").unwrap().spec;
    let image = pod_container(daemon, "containers", "mps-control-daemon-ctr")["image"].as_str().unwrap();
    let (repo, tag) = repo_tag(image);
    assert!(strings(&up["images"]).contains(&format!("{repo}:{tag}")), "{image} is not the release read");
    let d = &up["daemon"];
    assert_eq!(daemon["spec"]["template"]["spec"]["hostPID"].as_bool(), d["host_pid"].as_bool());
    let init = pod_container(daemon, "initContainers", "mps-control-daemon-mounts");
    assert_eq!(
        strings(&d["init_command"]),
        init["command"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect::<Vec<_>>()
    );
    assert_eq!(init["securityContext"]["privileged"].as_bool(), d["init_privileged"].as_bool());
    for pair in d["init_mounts"].as_array().unwrap() {
        let pair = strings(pair);
        let mount =
            init["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == pair[0].as_str()).unwrap();
        assert_eq!(mount["mountPropagation"], pair[1].as_str());
    }
    let ctr = pod_container(daemon, "containers", "mps-control-daemon-ctr");
    assert_eq!(
        strings(&d["command"]),
        ctr["command"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect::<Vec<_>>()
    );
    assert_eq!(ctr["securityContext"]["privileged"].as_bool(), d["privileged"].as_bool());
    let env: Vec<&str> = ctr["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    for want in strings(&d["env_required"]) {
        assert!(env.contains(&want.as_str()), "the daemon lacks {want}: {env:?}");
    }
    for absent in strings(&d["env_absent"]) {
        assert!(!env.contains(&absent.as_str()), "the daemon has {absent}");
    }
    assert_eq!(host_paths(daemon, ctr), paths(&d["host_paths"]));
    let plugin_ds = &graph.get("k8s/apps/DaemonSet/kube-system/nvidia-device-plugin-daemonset").unwrap().spec;
    let plugin = pod_container(plugin_ds, "containers", "nvidia-device-plugin-ctr");
    for (name, value) in up["plugin"]["env"].as_table().unwrap() {
        let found = plugin["env"].as_array().unwrap().iter().find(|e| e["name"] == name.as_str());
        assert_eq!(found.map(|e| e["value"].clone()), Some(serde_json::json!(value.as_str().unwrap())), "{name}");
    }
    let wanted = paths(&up["plugin"]["host_paths"]);
    let mut got = host_paths(plugin_ds, plugin);
    got.retain(|mount, _| wanted.contains_key(mount));
    assert_eq!(got, wanted, "the plugin's MPS mounts");
}

/// The NVIDIA DRA driver k3d-gpu compiles for `[sharing] mode = "dra"` on an NVIDIA host is
/// upstream's, as its Helm chart renders it at the release the image pins (GPUs on,
/// ComputeDomains off; tests/upstream/nvidia-dra-driver.toml): the DeviceClasses, the kubelet
/// plugin's containers, commands, env, privilege, mounts, host paths, probes, affinity and
/// tolerations, its ClusterRole and the ResourceSlice admission policy; never beside the
/// device plugin; and the affinity's NFD labels are the ones NFD's default PCI config gives
/// this host's GPUs (our NFD leaves that config alone).
#[test]
fn nvidia_dra_driver_is_deployed_as_upstreams_chart_deploys_it() {
    let host = "h100-pcie-x2";
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/nvidia-dra-driver.toml")).unwrap();
    let up: toml::Table = toml::from_str(&text).unwrap();
    let text_of = |v: &toml::Value| v.as_str().unwrap().to_string();
    let strings = toml_strings;
    let table = |v: &toml::Value| -> BTreeMap<String, String> {
        v.as_table().unwrap().iter().map(|(k, v)| (k.clone(), text_of(v))).collect()
    };
    let pairs = toml_pairs;
    let json_strings =
        |v: &Value| -> Vec<String> { v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect() };
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let config = k3d_gpu::config::load_str("k3dgpu.toml", "[sharing]\nmode = \"dra\"\n").unwrap();
    let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog)
        .unwrap_or_else(|e| panic!("[sharing] mode = \"dra\" on {host}: {e:#?}"));
    let get = |id: &str| &graph.get(id).unwrap_or_else(|| panic!("the graph has no {id}")).spec;
    let ns = up["namespace"].as_str().unwrap();
    let driver = up["driver"].as_str().unwrap();
    let images = strings(&up["images"]);

    // DeviceClasses: exactly the chart's for the driver, their selectors, and the extended
    // resource name only where the chart gives one.
    let classes = table(&up["device_classes"]);
    let extended = table(&up["extended_resource_name"]);
    for (name, cel) in &classes {
        let class = get(&format!("k8s/resource.k8s.io/DeviceClass/{name}"));
        assert_eq!(class["apiVersion"], "resource.k8s.io/v1", "{name}");
        let selectors = class["spec"]["selectors"].as_array().unwrap();
        assert_eq!(selectors.len(), 1, "{name}");
        assert_eq!(selectors[0]["cel"]["expression"], cel.as_str(), "{name}");
        assert_eq!(class["spec"]["extendedResourceName"].as_str(), extended.get(name).map(String::as_str), "{name}");
    }
    let ours: Vec<String> = graph
        .resources()
        .filter(|r| r.spec["kind"] == "DeviceClass")
        .filter(|r| r.spec.to_string().contains(&format!("'{driver}'")))
        .map(|r| r.spec["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ours, classes.keys().cloned().collect::<Vec<_>>(), "DeviceClasses of driver {driver}");

    // The kubelet plugin DaemonSet.
    let k = &up["kubelet_plugin"];
    let ds_id = format!("k8s/apps/DaemonSet/{ns}/{}", k["daemonset"].as_str().unwrap());
    let ds = get(&ds_id);
    let pod = &ds["spec"]["template"]["spec"];
    for (key, value) in table(&k["selector"]) {
        assert_eq!(ds["spec"]["selector"]["matchLabels"][&key], value.as_str(), "selector {key}");
        assert_eq!(ds["spec"]["template"]["metadata"]["labels"][&key], value.as_str(), "pod label {key}");
    }
    assert_eq!(pod["serviceAccountName"], k["service_account"].as_str().unwrap());
    assert_eq!(pod["priorityClassName"], k["priority_class"].as_str().unwrap());
    assert_eq!(ds["spec"]["updateStrategy"]["type"], k["update_strategy"].as_str().unwrap());
    assert_eq!(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], k["max_unavailable"].as_str().unwrap());
    let names = |key: &str| -> Vec<String> {
        pod[key].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names("initContainers"), strings(&k["init_containers"]));
    assert_eq!(names("containers"), strings(&k["containers"]), "the gpus container only: ComputeDomains are off");
    for c in containers(ds) {
        let image = c["image"].as_str().unwrap();
        let (repo, tag) = repo_tag(image);
        assert!(images.contains(&format!("{repo}:{tag}")), "{image} is not the release read");
    }
    // The value of each env variable ("" when it has none) or its downward-API field.
    let env_of = |c: &Value| -> BTreeMap<String, String> {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                    Some(field) => format!("fieldRef:{field}"),
                    None => e["value"].as_str().unwrap_or_default().to_string(),
                };
                (e["name"].as_str().unwrap().to_string(), value)
            })
            .collect()
    };
    let mount = |c: &Value, path: &str| -> Value {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("{} does not mount {path}", c["name"]))
            .clone()
    };

    let i = &k["init"];
    let init = pod_container(ds, "initContainers", "init-container");
    assert_eq!(json_strings(&init["command"]), strings(&i["command"]));
    assert_eq!(init["securityContext"]["privileged"].as_bool(), i["privileged"].as_bool());
    let env = env_of(init);
    for (name, value) in table(&i["env"]) {
        assert_eq!(env.get(&name), Some(&value), "init-container env {name}");
    }
    for (path, flags) in i["mounts"].as_table().unwrap() {
        let flags = strings(flags);
        let m = mount(init, path);
        assert_eq!(m["readOnly"].as_bool().unwrap_or(false).to_string(), flags[0], "{path} readOnly");
        assert_eq!(m["mountPropagation"].as_str().unwrap_or_default(), flags[1], "{path} propagation");
    }
    assert_eq!(host_paths(ds, init), pairs(&i["host_paths"]), "init-container host paths");

    let g = &k["gpus"];
    let gpus = pod_container(ds, "containers", "gpus");
    assert_eq!(json_strings(&gpus["command"]), strings(&g["command"]));
    let args = json_strings(&gpus["args"]);
    assert_eq!(args.len(), 1, "one bash -c script");
    assert_eq!(args[0].lines().last().map(str::trim), g["args_line"].as_str(), "the script's last line");
    assert_eq!(gpus["securityContext"]["privileged"].as_bool(), g["privileged"].as_bool());
    assert_eq!(gpus["imagePullPolicy"], g["image_pull_policy"].as_str().unwrap());
    let env = env_of(gpus);
    for (name, value) in table(&g["env"]) {
        assert_eq!(env.get(&name), Some(&value), "gpus env {name}");
    }
    for (name, field) in table(&g["env_field_refs"]) {
        assert_eq!(env.get(&name), Some(&format!("fieldRef:{field}")), "gpus env {name}");
    }
    let known: Vec<String> = strings(&g["binary_env"]).into_iter().chain(strings(&g["other_env"])).collect();
    for name in env.keys() {
        assert!(known.contains(name), "gpus env {name}: neither the binary nor its script reads it");
    }
    for (path, propagation) in table(&g["mounts"]) {
        let m = mount(gpus, &path);
        assert_eq!(m["mountPropagation"].as_str().unwrap_or_default(), propagation, "{path} propagation");
        assert!(!m["readOnly"].as_bool().unwrap_or(false), "{path} is read-only");
    }
    assert_eq!(gpus["volumeMounts"].as_array().unwrap().len(), g["mounts"].as_table().unwrap().len(), "gpus mounts");
    assert_eq!(host_paths(ds, gpus), pairs(&g["host_paths"]), "gpus host paths");
    let port = g["probe_port"].as_integer().unwrap();
    assert_eq!(env.get("HEALTHCHECK_PORT"), Some(&port.to_string()), "the health service listens where the probes ask");
    for (probe, key) in [("startupProbe", "startup"), ("livenessProbe", "liveness")] {
        let p = &gpus[probe];
        assert_eq!(p["grpc"]["port"].as_i64(), Some(port), "{probe}");
        assert_eq!(p["grpc"]["service"], g["probe_service"].as_str().unwrap(), "{probe}");
        for (field, value) in g[key].as_table().unwrap() {
            assert_eq!(p[field].as_i64(), value.as_integer(), "{probe}.{field}");
        }
    }

    // Upstream's node affinity as it is (one label per term), beside k3d-gpu's own selector.
    let terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()
        .unwrap();
    let affinity: BTreeMap<String, String> = terms
        .iter()
        .map(|t| {
            let exprs = t["matchExpressions"].as_array().unwrap();
            assert_eq!(exprs.len(), 1, "one label per term: {t}");
            assert_eq!(exprs[0]["operator"], "In");
            let values = json_strings(&exprs[0]["values"]);
            assert_eq!(values.len(), 1, "{t}");
            (exprs[0]["key"].as_str().unwrap().to_string(), values[0].clone())
        })
        .collect();
    assert_eq!(affinity, table(&k["affinity"]), "the node affinity");
    assert!(pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].is_null());
    let tolerations: BTreeMap<String, (String, String)> = pod["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let field = |f: &str| t[f].as_str().unwrap_or_default().to_string();
            (field("key"), (field("operator"), field("effect")))
        })
        .collect();
    assert_eq!(tolerations, pairs(&k["tolerations"]), "tolerations");
    // k3d-gpu's own selector: the label the cluster sets on this path.
    let label = "k3d-gpu.io/nvidia-gpu-dra";
    assert_eq!(pod["nodeSelector"][label], "true", "the DaemonSet selects {label}");
    let node_label = get(&format!("node-label/{label}"));
    assert_eq!(node_label["value"], "true", "the cluster sets {label}");

    // NFD's default PCI labels for this host's NVIDIA GPUs are among the affinity's terms, and
    // the NFD k3d-gpu deploys keeps that default (its worker config has no pci source).
    let nfd = table(&up["nfd_default_labels"]);
    let devices = support::hosts_dir().join(host).join("sys/bus/pci/devices");
    let mut gpu_classes = Vec::new();
    for entry in std::fs::read_dir(&devices).unwrap() {
        let dir = entry.unwrap().path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default().trim().to_string();
        if read("vendor") == "0x10de" && read("class").starts_with("0x03") {
            gpu_classes.push(read("class")[2..6].to_string());
        }
    }
    assert!(!gpu_classes.is_empty(), "{host} has NVIDIA display devices");
    for class in &gpu_classes {
        let label = nfd.get(class).unwrap_or_else(|| panic!("no NFD label recorded for class {class}"));
        assert_eq!(affinity.get(label).map(String::as_str), Some("true"), "NFD's {label} is not in the affinity");
    }
    let worker = get("k8s/core/ConfigMap/node-feature-discovery/nfd-worker-conf");
    let conf: Value = serde_saphyr::from_str(worker["data"]["nfd-worker.conf"].as_str().unwrap()).unwrap();
    assert!(conf["sources"]["pci"].is_null(), "NFD's pci source is configured: {}", conf["sources"]["pci"]);

    // The ClusterRole bound to the plugin's account.
    let cr = &up["cluster_role"];
    let role_name = cr["name"].as_str().unwrap();
    let role = get(&format!("k8s/rbac.authorization.k8s.io/ClusterRole/{role_name}"));
    let rules = |list: Vec<[Vec<String>; 3]>| list;
    let got = rules(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| [json_strings(&r["apiGroups"]), json_strings(&r["resources"]), json_strings(&r["verbs"])])
            .collect(),
    );
    let want = rules(
        cr["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| [strings(&r["api_groups"]), strings(&r["resources"]), strings(&r["verbs"])])
            .collect(),
    );
    assert_eq!(got, want, "ClusterRole {role_name}");
    let binding = get(&format!("k8s/rbac.authorization.k8s.io/ClusterRoleBinding/{}", cr["binding"].as_str().unwrap()));
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], role_name);
    let subjects = binding["subjects"].as_array().unwrap();
    assert!(
        subjects.iter().any(|s| s["kind"] == "ServiceAccount"
            && s["name"] == k["service_account"].as_str().unwrap()
            && s["namespace"] == ns),
        "{subjects:?}"
    );
    get(&format!("k8s/core/ServiceAccount/{ns}/{}", k["service_account"].as_str().unwrap()));

    // The ResourceSlice admission policy, as rendered.
    let ap = &up["admission_policy"];
    let policy_name = ap["name"].as_str().unwrap();
    let policy = get(&format!("k8s/admissionregistration.k8s.io/ValidatingAdmissionPolicy/{policy_name}"));
    let condition = policy["spec"]["matchConditions"][0]["expression"].as_str().unwrap();
    assert_eq!(condition.trim(), format!("request.userInfo.username == \"{}\"", ap["username"].as_str().unwrap()));
    let policy_binding =
        get(&format!("k8s/admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding/{policy_name}"));
    assert_eq!(policy_binding["spec"]["policyName"], policy_name);

    // Never beside the NVIDIA device plugin (validation.yaml).
    let beside = strings(&up["not_beside"]);
    for r in graph.resources().filter(|r| r.kind == ResourceKind::Object) {
        for c in containers(&r.spec) {
            let (repo, _) = repo_tag(c["image"].as_str().unwrap_or_default());
            assert!(!beside.iter().any(|b| b == repo), "{} runs {repo} beside the DRA driver", r.id);
        }
    }
}

/// Issue 43: every metric the dashboard queries is one its exporter defines
/// (tests/upstream/dashboard-metrics.toml names the upstream files), and each recorded name
/// is still used.
#[test]
fn the_dashboard_queries_only_metrics_the_exporters_define() {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/dashboard-metrics.toml")).unwrap();
    let recorded: toml::Table = toml::from_str(&text).unwrap();
    let names = recorded["metrics"].as_table().unwrap();
    let patterns = recorded["patterns"].as_table().unwrap();
    let board: Value = serde_json::from_str(k3d_gpu::compile::metrics::DASHBOARD).unwrap();
    let mut used = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    let exporters = ["hw_", "DCGM_FI_", "node_", "vllm:", "ovms_"];
    for panel in board["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            // Quoted strings are label values or name patterns, never metric names.
            let mut bare = String::new();
            for (i, part) in expr.split('"').enumerate() {
                if i % 2 == 0 {
                    bare.push_str(part);
                    bare.push(' ');
                } else if exporters.iter().any(|p| part.starts_with(p)) {
                    used.insert(part.to_string());
                    if !patterns.contains_key(part) {
                        problems.push(format!("{}: pattern {part} is not recorded", panel["title"]));
                    }
                }
            }
            let words = bare.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
            for word in words.filter(|w| exporters.iter().any(|p| w.starts_with(p))) {
                used.insert(word.to_string());
                if !names.contains_key(word) {
                    problems.push(format!("{}: {word} is not recorded", panel["title"]));
                }
            }
        }
    }
    for name in names.keys().chain(patterns.keys()) {
        if !used.contains(name) {
            problems.push(format!("{name} is recorded but the dashboard no longer queries it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(used.len() >= 15, "{used:?}");
}

/// Where a name `up` (tests/upstream/telemetry-stack.toml) does not know is used by the
/// metrics stack among `objects`: node-exporter's and Prometheus's flags, Prometheus's
/// configuration file (followed from `--config.file` through its mount to the ConfigMap),
/// Grafana's GF_* variables, provisioning files and paths. Upstream's YAML readers drop an
/// unknown field silently and Grafana ignores a GF_* variable that names no key of its ini
/// files, so a misspelt name would deploy cleanly and do nothing.
fn metrics_stack_problems(up: &toml::Table, objects: &[Value]) -> Vec<String> {
    let strings = |t: &toml::Value, k: &str| -> Vec<String> { toml_strings(&t[k]) };
    let mut out = Vec::new();
    let containers_of = |image: &str| -> Vec<(&Value, &Value)> {
        objects
            .iter()
            .flat_map(|o| {
                let list = o["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
                let n = list.len();
                (0..n).map(move |i| (o, i))
            })
            .filter_map(|(o, i)| {
                let c = &o["spec"]["template"]["spec"]["containers"][i];
                c["image"].as_str().is_some_and(|s| s.starts_with(image)).then_some((o, c))
            })
            .collect()
    };
    let args = |c: &Value| -> Vec<(String, Option<String>)> {
        c["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str()?.strip_prefix("--"))
            .map(|a| match a.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (a.to_string(), None),
            })
            .collect()
    };
    let mount_of = |o: &Value, c: &Value, path: &str| -> Option<Value> {
        let m = c["volumeMounts"].as_array()?.iter().find(|m| m["mountPath"] == path)?;
        let vols = o["spec"]["template"]["spec"]["volumes"].as_array()?;
        vols.iter().find(|v| v["name"] == m["name"]).cloned()
    };
    let run_as = |o: &Value, c: &Value| {
        c["securityContext"]["runAsUser"]
            .as_i64()
            .or(o["spec"]["template"]["spec"]["securityContext"]["runAsUser"].as_i64())
    };

    // node-exporter.
    let ne = &up["node_exporter"];
    let (flags, bools, collectors) = (strings(ne, "flags"), strings(ne, "bool_flags"), strings(ne, "collectors"));
    let found = containers_of(ne["image"].as_str().unwrap());
    if found.is_empty() {
        out.push("no node-exporter container".into());
    }
    for (o, c) in found {
        let mut rapl = strings(ne, "default_enabled").contains(&"rapl".to_string());
        let mut sysfs = "/sys".to_string();
        for (name, value) in args(c) {
            let negated = name.strip_prefix("no-");
            let collector = |n: &str| n.strip_prefix("collector.").is_some_and(|c| collectors.iter().any(|k| k == c));
            let known = match (negated, &value) {
                (Some(n), None) => bools.iter().any(|b| b == n) || collector(n),
                (Some(_), Some(_)) => false,
                (None, _) => flags.contains(&name) || collector(&name),
            };
            if !known {
                out.push(format!("node-exporter: --{name} is not a flag of {}", ne["image"]));
            }
            match (name.as_str(), &value) {
                ("collector.rapl", None) => rapl = true,
                ("no-collector.rapl", None) | ("collector.disable-defaults", None) => rapl = false,
                ("path.sysfs", Some(v)) => sysfs = v.clone(),
                _ => {}
            }
        }
        if rapl {
            // energy_uj is root's only: RAPL needs the host's sysfs at path.sysfs, read as root.
            let host = mount_of(o, c, &sysfs).and_then(|v| v["hostPath"]["path"].as_str().map(String::from));
            if host.as_deref() != Some("/sys") {
                out.push(format!("node-exporter: RAPL on but --path.sysfs={sysfs} is not the host's /sys"));
            }
            if run_as(o, c) != Some(0) {
                out.push("node-exporter: RAPL on but not run as root (energy_uj is mode 0400 root)".into());
            }
        }
    }

    // Prometheus: flags, then its configuration file.
    let pr = &up["prometheus"];
    let pconf = pr["config"].as_table().unwrap();
    let found = containers_of(pr["image"].as_str().unwrap());
    if found.is_empty() {
        out.push("no Prometheus container".into());
    }
    for (o, c) in found {
        let mut file = None;
        for (name, value) in args(c) {
            if !strings(pr, "flags").contains(&name) {
                out.push(format!("prometheus: --{name} is not a flag of {}", pr["image"]));
            }
            if name == "config.file" {
                file = value;
            }
        }
        if c["readinessProbe"]["httpGet"]["path"].as_str() != pr["ready_path"].as_str() {
            out.push(format!("prometheus: readiness path {}", c["readinessProbe"]["httpGet"]["path"]));
        }
        let Some(file) = file else {
            out.push("prometheus: no --config.file".into());
            continue;
        };
        let (dir, key) = file.rsplit_once('/').unwrap();
        let cm = mount_of(o, c, dir).and_then(|v| v["configMap"]["name"].as_str().map(String::from));
        let text = objects
            .iter()
            .find(|m| m["kind"] == "ConfigMap" && cm.as_deref().is_some_and(|n| m["metadata"]["name"] == n))
            .and_then(|m| m["data"][key].as_str());
        let Some(config) = text.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
            out.push(format!("prometheus: {file} is not a ConfigMap key mounted there"));
            continue;
        };
        let fields = |v: &Value, allowed: &[String], at: &str, out: &mut Vec<String>| {
            for k in v.as_object().into_iter().flat_map(|m| m.keys()) {
                if !allowed.contains(k) {
                    out.push(format!("prometheus config: {at}.{k} is not a field Prometheus reads"));
                }
            }
        };
        let list = |k: &str| toml_strings(&pconf[k]);
        fields(&config, &list("top"), "", &mut out);
        fields(&config["global"], &list("global"), "global", &mut out);
        let mut job_fields = list("scrape_config");
        job_fields.extend(list("sd_mechanisms").iter().map(|m| format!("{m}_sd_configs")));
        job_fields.push("static_configs".into());
        for job in config["scrape_configs"].as_array().into_iter().flatten() {
            let at = format!("scrape_configs[{}]", job["job_name"]);
            fields(job, &job_fields, &at, &mut out);
            for s in job["static_configs"].as_array().into_iter().flatten() {
                fields(s, &list("static_config"), &format!("{at}.static_configs"), &mut out);
            }
            for d in job["dns_sd_configs"].as_array().into_iter().flatten() {
                fields(d, &list("dns_sd_config"), &format!("{at}.dns_sd_configs"), &mut out);
                let kind = d["type"].as_str().unwrap_or("SRV").to_uppercase();
                if !list("dns_sd_types").contains(&kind) {
                    out.push(format!("prometheus config: {at}: DNS-SD type {kind}"));
                }
                if kind != "SRV" && d["port"].as_u64().unwrap_or(0) == 0 {
                    out.push(format!("prometheus config: {at}: a {kind} lookup needs a port"));
                }
            }
            for key in ["relabel_configs", "metric_relabel_configs"] {
                for r in job[key].as_array().into_iter().flatten() {
                    fields(r, &list("relabel_config"), &format!("{at}.{key}"), &mut out);
                }
            }
        }
    }

    // Grafana: GF_* variables, paths, provisioning files.
    let gr = &up["grafana"];
    let sections = gr["config"].as_table().unwrap();
    let env_keys: Vec<String> = sections
        .iter()
        .flat_map(|(s, keys)| {
            toml_strings(keys).into_iter().map(move |k| {
                format!("GF_{}_{}", s.replace(['.', '-'], "_"), k.replace(['.', '-'], "_")).to_uppercase()
            })
        })
        .collect();
    let found = containers_of(gr["image"].as_str().unwrap());
    if found.is_empty() {
        out.push("no Grafana container".into());
    }
    let data = gr["data"].as_str().unwrap();
    let provisioning = gr["provisioning"].as_str().unwrap();
    for (o, c) in found {
        let mounts: Vec<&str> =
            c["volumeMounts"].as_array().into_iter().flatten().filter_map(|m| m["mountPath"].as_str()).collect();
        let under_mount = |p: &str| mounts.iter().any(|m| p.starts_with(&format!("{m}/")));
        for e in c["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap();
            let Some(key) = name.strip_prefix("GF_").map(|_| name.trim_end_matches("__FILE")) else { continue };
            if !env_keys.iter().any(|k| k == key) {
                out.push(format!("grafana: {name} names no key of conf/defaults.ini"));
            }
            let value = e["value"].as_str().unwrap_or("");
            if (name.ends_with("__FILE") || name.ends_with("_PATH")) && !under_mount(value) {
                out.push(format!("grafana: {name}={value} is on no volume of the pod"));
            }
        }
        let start = c["command"].as_array().and_then(|a| a.last()).and_then(|s| s.as_str()).unwrap_or("");
        if !start.trim_end().ends_with(&format!("exec {}", gr["entrypoint"].as_str().unwrap())) {
            out.push("grafana: the start does not end in the image's entrypoint (GF_*__FILE is read there)".into());
        }
        if run_as(o, c) != gr["uid"].as_integer() {
            out.push(format!("grafana: runs as {:?}, the image's user is {}", run_as(o, c), gr["uid"]));
        }
        if mount_of(o, c, data).is_none_or(|v| v.get("persistentVolumeClaim").is_none()) {
            out.push(format!("grafana: {data} is not its data volume"));
        }
        for (dir, kind) in [("datasources", "datasource"), ("dashboards", "provider")] {
            let path = format!("{provisioning}/{dir}");
            let Some(cm) = mount_of(o, c, &path).and_then(|v| v["configMap"]["name"].as_str().map(String::from)) else {
                out.push(format!("grafana: nothing mounted at {path}"));
                continue;
            };
            let map = objects.iter().find(|m| m["kind"] == "ConfigMap" && m["metadata"]["name"] == cm.as_str());
            for text in map.and_then(|m| m["data"].as_object()).into_iter().flat_map(|d| d.values()) {
                let file: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
                let (top, list) =
                    if kind == "datasource" { ("datasources", "datasources") } else { ("providers", "providers") };
                let allowed = strings(gr, &format!("{top}_file"));
                for k in file.as_object().unwrap().keys().filter(|k| !allowed.contains(k)) {
                    out.push(format!("grafana {dir}: {k} is not a field of the provisioning file"));
                }
                if file["apiVersion"] != 1 {
                    out.push(format!("grafana {dir}: apiVersion {}", file["apiVersion"]));
                }
                for item in file[list].as_array().into_iter().flatten() {
                    for k in item.as_object().unwrap().keys().filter(|k| !strings(gr, kind).contains(k)) {
                        out.push(format!("grafana {dir}: {kind} field {k} is not one Grafana reads"));
                    }
                    if kind == "datasource" {
                        let access = item["access"].as_str().unwrap_or("proxy").to_string();
                        if !strings(gr, "datasource_access").contains(&access) {
                            out.push(format!("grafana {dir}: access {access}"));
                        }
                    } else {
                        for (k, v) in item["options"].as_object().into_iter().flatten() {
                            if !strings(gr, "provider_options").contains(k) {
                                out.push(format!("grafana {dir}: option {k} is not one the file provider reads"));
                            }
                            if k == "path" && !mounts.contains(&v.as_str().unwrap_or("")) {
                                out.push(format!("grafana {dir}: path {v} is no mount of the pod"));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn telemetry_facts() -> toml::Table {
    let text = std::fs::read_to_string(support::repo().join("tests/upstream/telemetry-stack.toml")).unwrap();
    toml::from_str(&text).unwrap()
}

fn telemetry_objects(toml_text: &str, host: &str) -> Vec<Value> {
    let config = k3d_gpu::config::load_str("k3dgpu.toml", toml_text).unwrap();
    let catalog = k3d_gpu::catalog::Catalog::embedded().unwrap();
    let graph = k3d_gpu::compile::compile(&config, &support::facts_of(host), &catalog).unwrap();
    graph.resources().filter(|r| r.kind == ResourceKind::Object).map(|r| r.spec.clone()).collect()
}

/// Issue 43: the metrics stack's flags, configuration fields, GF_* variables and paths are
/// names Prometheus v3.13.2, node-exporter v1.12.1 and Grafana (13.1.3, as stored) define
/// (tests/upstream/telemetry-stack.toml).
#[test]
fn the_metrics_stack_uses_only_names_its_upstreams_define() {
    let up = telemetry_facts();
    for (toml_text, host) in [
        ("[sharing]\nmonitoring = true\n[telemetry]\n[agent]\n", "desktop-rpl-nvidia"),
        ("[sharing]\nmonitoring = true\n[telemetry]\n", "arc-b580-xe-rpl-igpu"),
        ("[agent]\n[addons.stt]\n[telemetry]\n", "lunar-lake-npu"),
        ("[telemetry]\n", "plain-laptop-amd"),
    ] {
        let objects = telemetry_objects(toml_text, host);
        let problems = metrics_stack_problems(&up, &objects);
        assert!(problems.is_empty(), "{host}:\n{}", problems.join("\n"));
    }
}

#[test]
fn the_metrics_stack_check_catches_names_upstream_does_not_define() {
    let up = telemetry_facts();
    let objects = telemetry_objects("[sharing]\nmonitoring = true\n[telemetry]\n", "arc-b580-xe-rpl-igpu");
    let find = |objects: &mut Vec<Value>, kind: &str, name: &str| -> usize {
        objects.iter().position(|o| o["kind"] == kind && o["metadata"]["name"] == name).unwrap()
    };
    type Mutation<'a> = Box<dyn Fn(&mut Vec<Value>) + 'a>;
    let cases: Vec<(&str, Mutation)> = vec![
        (
            "--collector.rapl.zones",
            Box::new(|o| {
                let i = find(o, "DaemonSet", "node-exporter");
                o[i]["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array_mut()
                    .unwrap()
                    .push("--collector.rapl.zones=all".into());
            }),
        ),
        (
            "--no-path.sysfs",
            Box::new(|o| {
                let i = find(o, "DaemonSet", "node-exporter");
                o[i]["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array_mut()
                    .unwrap()
                    .push("--no-path.sysfs".into());
            }),
        ),
        (
            "not run as root",
            Box::new(|o| {
                let i = find(o, "DaemonSet", "node-exporter");
                o[i]["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 65534.into();
            }),
        ),
        (
            "--storage.tsdb.retention",
            Box::new(|o| {
                let i = find(o, "Deployment", "prometheus");
                o[i]["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array_mut()
                    .unwrap()
                    .push("--storage.tsdb.retention=15d".into());
            }),
        ),
        (
            "targetLabel",
            Box::new(|o| {
                let i = find(o, "ConfigMap", "prometheus");
                let text =
                    o[i]["data"]["prometheus.yml"].as_str().unwrap().replace("\"target_label\"", "\"targetLabel\"");
                o[i]["data"]["prometheus.yml"] = text.into();
            }),
        ),
        (
            "a A lookup needs a port",
            Box::new(|o| {
                let i = find(o, "ConfigMap", "prometheus");
                let text = o[i]["data"]["prometheus.yml"]
                    .as_str()
                    .unwrap()
                    .replace("\"port\": 9100", "\"refresh_interval\": \"30s\"");
                o[i]["data"]["prometheus.yml"] = text.into();
            }),
        ),
        (
            "GF_AUTH_ANONYMOUS names no key",
            Box::new(|o| {
                let i = find(o, "Deployment", "grafana");
                o[i]["spec"]["template"]["spec"]["containers"][0]["env"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"name": "GF_AUTH_ANONYMOUS", "value": "false"}));
            }),
        ),
        (
            "field is_default",
            Box::new(|o| {
                let i = find(o, "ConfigMap", "grafana-datasources");
                let text =
                    o[i]["data"]["datasources.yaml"].as_str().unwrap().replace("\"isDefault\"", "\"is_default\"");
                o[i]["data"]["datasources.yaml"] = text.into();
            }),
        ),
        (
            "option folder",
            Box::new(|o| {
                let i = find(o, "ConfigMap", "grafana-dashboard-provider");
                let text = o[i]["data"]["dashboards.yaml"].as_str().unwrap().replace("\"path\"", "\"folder\"");
                o[i]["data"]["dashboards.yaml"] = text.into();
            }),
        ),
        (
            "nothing mounted at /etc/grafana/provisioning/datasources",
            Box::new(|o| {
                let i = find(o, "Deployment", "grafana");
                for m in o[i]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"].as_array_mut().unwrap() {
                    if m["name"] == "datasources" {
                        m["mountPath"] = "/etc/grafana/datasources".into();
                    }
                }
            }),
        ),
    ];
    for (expect, mutate) in cases {
        let mut changed = objects.clone();
        mutate(&mut changed);
        let problems = metrics_stack_problems(&up, &changed);
        assert!(problems.iter().any(|p| p.contains(expect)), "{expect}: {problems:#?}");
    }
}
