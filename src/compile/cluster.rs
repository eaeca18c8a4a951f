//! The k3d cluster (what is fixed at creation) and the node labels and annotations.

use serde_json::json;

use super::experimental::FeaturePlan;
use super::{Change, CompileError, Context, DRA_NODE_LABEL, NVIDIA_DRA_NODE_LABEL, Resource, ResourceKind};
use crate::config::GpuMode;
use crate::facts::Vendor;

/// More nodes than a single machine's k3d cluster sensibly runs is a typo.
const MAX_NODES: u32 = 16;

/// k3d's limit on a cluster name (a DNS label otherwise).
const MAX_CLUSTER_NAME: usize = 32;

/// The name k3s knows the node image's baked balloons policy by (`--disable=<name>`).
const BAKED_BALLOONS: &str = "nri-balloons";

/// k3s's packaged manifest with RuntimeClass `nvidia` (and nvidia-experimental, crun, wasm).
const K3S_RUNTIMES: &str = "runtimes";

/// Whether a k3s arg (`--disable=a,b`, `--disable a`) turns off packaged component `name`.
fn disables(arg: &str, name: &str) -> bool {
    let value = arg.strip_prefix("--disable=").or_else(|| arg.strip_prefix("--disable "));
    value.is_some_and(|v| v.split(',').any(|c| c.trim() == name))
}

/// Where the node reads the host's files for Node Feature Discovery.
const NFD_HOST_DIR: &str = "/k3d-gpu/host";

/// The id of the node image resource; the cluster depends on it.
pub const NODE_IMAGE_ID: &str = "docker/node-image";

/// The node image resource: built from a context (the shipped Dockerfile, or the user's
/// `build_context`) or pulled (`[cluster] image`). Its bases are images the graph deploys, so
/// an unlocked one warns like any other (or is refused under `[policy] images = "pinned"`).
pub fn node_image(cx: &mut Context, source: &crate::node_image::Source, out: &mut Vec<Resource>) {
    let cluster = &cx.config.cluster;
    if let Some(image) = &cluster.image {
        if let Err(why) = crate::images::ImageRef::parse(image) {
            cx.error(CompileError::new(
                "bad-image",
                &["cluster", "image"],
                format!("{image:?} is not an image reference: {why}"),
                None,
            ));
            return;
        }
        if cluster.build_context.is_some() || !cluster.build_args.is_empty() {
            cx.error(CompileError::new(
                "image-and-build",
                &["cluster", "image"],
                "a prebuilt image is pulled, never built: build_context and build_args would be ignored",
                Some("remove image to build, or remove build_context and build_args to use the prebuilt image".into()),
            ));
            return;
        }
    }
    // They reach the plan's text and Docker's build API: no control characters.
    let controls = |t: &str| t.chars().any(char::is_control);
    if cluster.build_context.as_deref().is_some_and(controls)
        || cluster.build_args.iter().any(|(k, v)| controls(k) || controls(v))
    {
        cx.error(CompileError::new(
            "bad-node-image-build",
            &["cluster", "build_args"],
            "build_context and build_args may not hold control characters",
            None,
        ));
        return;
    }
    match crate::node_image::resolve(source, &cluster.build_args, &cx.catalog.images) {
        Err(why) => cx.error(CompileError::new(
            "bad-node-image-build",
            if matches!(why, crate::node_image::Unbuildable::UnknownArg(_)) || cluster.build_context.is_none() {
                &["cluster", "build_args"]
            } else {
                &["cluster", "build_context"]
            },
            format!("the node image cannot be built: {why}"),
            None,
        )),
        Ok(resolved) => {
            for (name, used) in &resolved.bases {
                cx.images.insert(name.clone(), used.clone());
            }
            out.push(Resource {
                id: NODE_IMAGE_ID.into(),
                kind: ResourceKind::NodeImage,
                change: Change::Replace,
                component: None,
                spec: resolved.spec.clone(),
                depends_on: Vec::new(),
            });
            cx.node_image = Some(resolved);
        }
    }
}

/// The `[cluster]` keys k3d would refuse, or that expose the API beyond this machine.
fn check_keys(cx: &mut Context) {
    let cluster = &cx.config.cluster;
    if cluster.servers == 0 || cluster.servers > MAX_NODES {
        cx.error(CompileError::new(
            "bad-servers",
            &["cluster", "servers"],
            format!("servers must be 1 to {MAX_NODES}"),
            None,
        ));
    }
    if cluster.agents > MAX_NODES {
        cx.error(CompileError::new(
            "bad-agents",
            &["cluster", "agents"],
            format!("agents must be 0 to {MAX_NODES}"),
            None,
        ));
    }
    if cluster.api_port == Some(0) {
        cx.error(CompileError::new(
            "bad-api-port",
            &["cluster", "api_port"],
            "api_port 0 is not a port; leave it unset to let k3d pick",
            None,
        ));
    }
    match cluster.api_host_ip.parse::<std::net::Ipv4Addr>() {
        // k3d's schema takes an IPv4 address here (format ipv4).
        Err(_) => cx.error(CompileError::new(
            "bad-api-host-ip",
            &["cluster", "api_host_ip"],
            format!("api_host_ip {:?} is not an IPv4 address", cluster.api_host_ip),
            Some(format!(
                "use {:?} (this machine only) or \"0.0.0.0\" (every interface)",
                crate::config::DEFAULT_API_HOST_IP
            )),
        )),
        Ok(ip) if !ip.is_loopback() => cx.warn(
            "api-published-off-loopback",
            Some("cluster.api_host_ip"),
            format!(
                "the Kubernetes API is published on {ip}{}: anyone who can reach this machine can reach it",
                if ip.is_unspecified() { " (every interface)" } else { "" }
            ),
        ),
        Ok(_) => {}
    }
    if cluster.k3s_args.iter().any(|a| a.trim().is_empty() || !a.starts_with('-')) {
        cx.error(CompileError::new(
            "bad-k3s-arg",
            &["cluster", "k3s_args"],
            "every k3s arg is a flag such as \"--disable=traefik\"",
            None,
        ));
    }
    if !(crate::config::dns_label(&cluster.name) && cluster.name.len() <= MAX_CLUSTER_NAME) {
        cx.error(CompileError::new(
            "bad-cluster-name",
            &["cluster", "name"],
            format!("cluster name {:?} is not a valid k3d name", cluster.name),
            Some(format!(
                "use 1-{MAX_CLUSTER_NAME} lowercase letters, digits and '-', not starting or ending with '-'"
            )),
        ));
    }
}

/// The k3s arguments of every node: the NVIDIA runtime as the default, the baked copies k3s
/// skips, the feature gates and the config's own.
fn k3s_args(cx: &mut Context, features: &FeaturePlan, nvidia: bool) -> Vec<serde_json::Value> {
    let cluster = &cx.config.cluster;
    if nvidia && cluster.k3s_args.iter().any(|a| disables(a, K3S_RUNTIMES)) {
        cx.error(CompileError::new(
            "runtimes-disabled",
            &["cluster", "k3s_args"],
            "--disable=runtimes removes k3s's RuntimeClass nvidia, which the NVIDIA device plugin runs under",
            Some("drop runtimes from --disable; k3d-gpu uses the RuntimeClass k3s ships".to_string()),
        ));
    }
    let mut k3s_args: Vec<serde_json::Value> = Vec::new();
    let mut arg = |arg: String, nodes: &str| k3s_args.push(json!({ "arg": arg, "nodes": nodes }));
    // NVIDIA DRA hands GPUs to pods through CDI, which runc applies; nvidia as the default
    // runtime would also give every pod whose image sets NVIDIA_VISIBLE_DEVICES=all (CUDA's
    // do) every GPU, claim or not. Upstream's own pods set it to `void` for that reason.
    if nvidia && !super::nvidia_dra::wanted(cx) {
        // k3s finds the nvidia runtime but leaves runc the default: pods would start without
        // the driver libraries and the plugin would advertise zero GPUs.
        arg("--default-runtime=nvidia".into(), "server:*");
        arg("--default-runtime=nvidia".into(), "agent:*");
    }
    // k3d-gpu applies every component itself; a copy baked into the node image would be a
    // second writer, so k3s skips it.
    let mut baked: Vec<&str> = cx.catalog.components.values().filter_map(|c| c.replaces_baked.as_deref()).collect();
    // The node image bakes an NRI balloons policy. When k3d-gpu does not apply its own, the
    // reference rule stands: skip the baked one when neither hybrid nor numa is active, or
    // when another owner (a Helm release) runs the policy.
    let balloons_wanted = (cx.is_active(Vendor::Hybrid) || cx.is_active(Vendor::Numa))
        && cx.config.placement.balloons == crate::config::Balloons::K3s;
    if !balloons_wanted {
        baked.push(BAKED_BALLOONS);
    }
    // Never both Intel GPU paths, whatever the catalog holds: k3s skips the baked copy of the
    // one this mode does not use.
    baked.push(match cx.intel_mode() {
        GpuMode::Dra => "intel-gpu-plugin",
        GpuMode::Plugin => "intel-gpu-dra",
    });
    baked.sort_unstable();
    baked.dedup();
    for name in baked {
        arg(format!("--disable={name}"), "server:*");
    }
    if !features.gates.is_empty() {
        let gates = features.gates.join(",");
        for component in ["kube-apiserver", "kube-scheduler", "kube-controller-manager"] {
            arg(format!("--{component}-arg=feature-gates={gates}"), "server:*");
        }
        arg(format!("--kubelet-arg=feature-gates={gates}"), "all");
    }
    if !features.runtime_config.is_empty() {
        arg(format!("--kube-apiserver-arg=runtime-config={}", features.runtime_config.join(",")), "server:*");
    }
    for extra in &cluster.k3s_args {
        arg(extra.clone(), "server:*");
    }
    k3s_args
}

/// The cluster resource; returns its id.
pub fn resource(cx: &mut Context, features: &FeaturePlan, out: &mut Vec<Resource>) -> String {
    check_keys(cx);
    let cluster = &cx.config.cluster;
    let nvidia = cx.is_active(Vendor::Nvidia);
    let k3s_args = k3s_args(cx, features, nvidia);

    let volumes = volumes(cx, nvidia);
    // The host model store (issue 27), its own key beside `volumes`: models.rs.
    let model_store = super::models::cluster_spec(cx);
    // [cluster] ports, volumes and registries: each its own module and its own spec key, set
    // only when the config has it, so a cluster without them records the spec it always did.
    let user_ports = super::ports::ports(cx);
    let user_volumes = super::user_volumes::volumes(cx);
    let registries = super::registries::spec(cx);

    let node_labels = accelerator_node(cx)
        .map(|node| vec![json!({ "label": format!("{}=true", super::ACCELERATOR_NODE_LABEL), "nodes": node })]);

    let id = format!("k3d/cluster/{}", cluster.name);
    let mut spec = json!({
            "name": cluster.name,
            "image": cx.node_image.as_ref().map(|n| n.reference.clone()),
            "node_image_inputs": cx.node_image.as_ref().map(|n| n.inputs.clone()).unwrap_or_default(),
            "servers": cluster.servers,
            "agents": cluster.agents,
            "gpus": if nvidia { Some("all") } else { None },
            "api_port": cluster.api_port,
            "api_host_ip": cluster.api_host_ip,
            "k3s_args": k3s_args,
            "volumes": volumes,
            "model_store": model_store,
            "node_labels": node_labels.unwrap_or_default(),
            "devices": node_devices(cx),
    });
    if !user_ports.is_empty() {
        spec["ports"] = json!(user_ports);
    }
    if !user_volumes.is_empty() {
        spec["user_volumes"] = json!(user_volumes);
    }
    if let Some(registries) = registries {
        spec["registries"] = registries;
    }
    out.push(Resource {
        id: id.clone(),
        kind: ResourceKind::Cluster,
        change: Change::Replace,
        component: None,
        spec,
        depends_on: cx.node_image.as_ref().map(|_| vec![NODE_IMAGE_ID.to_string()]).unwrap_or_default(),
    });
    id
}

/// What Docker fixes when it creates the node containers, per active vendor: the device nodes
/// a node sees (a privileged container's /dev is the host's as it was at creation, and
/// `--gpus` injects the GPUs and driver libraries present then) and the drivers behind them.
/// The plan compares this record with the host's facts, so a driver loaded, a card added or
/// an NVIDIA driver upgraded after the cluster was made replaces the cluster instead of
/// leaving a node whose plugin advertises nothing. Sorted, so the same host gives the same
/// spec.
fn node_devices(cx: &Context) -> serde_json::Value {
    let host = &cx.facts.host;
    let paths = |nodes: &mut dyn Iterator<Item = &crate::facts::DeviceNode>| -> Vec<String> {
        nodes.map(|n| n.path.clone()).collect()
    };
    let mut out = serde_json::Map::new();
    let mut record = |vendor: Vendor, mut drivers: Vec<String>, mut nodes: Vec<String>| {
        if !cx.is_active(vendor) {
            return;
        }
        drivers.sort_unstable();
        drivers.dedup();
        nodes.sort_unstable();
        nodes.dedup();
        out.insert(vendor.key().to_string(), json!({ "drivers": drivers, "nodes": nodes }));
    };
    record(
        Vendor::Intel,
        host.intel_gpus.iter().filter_map(|g| g.driver.clone()).collect(),
        paths(&mut host.intel_gpus.iter().flat_map(|g| &g.device_nodes)),
    );
    record(
        Vendor::Nvidia,
        host.nvidia.driver_version.iter().cloned().collect(),
        paths(&mut host.nvidia.device_nodes.iter()),
    );
    record(
        Vendor::Npu,
        host.npus.iter().filter_map(|n| n.driver.clone()).collect(),
        paths(&mut host.npus.iter().filter_map(|n| n.device_node.as_ref())),
    );
    record(
        Vendor::Gaudi,
        host.gaudi.devices.iter().filter_map(|d| d.driver.clone()).collect(),
        paths(&mut host.gaudi.devices.iter().filter_map(|d| d.device_node.as_ref())),
    );
    for (vendor, idxd) in [(Vendor::Dsa, &host.dsa), (Vendor::Iaa, &host.iaa)] {
        record(vendor, Vec::new(), idxd.work_queues.iter().filter_map(|q| q.device_node.clone()).collect());
    }
    record(Vendor::Qat, host.qat.pfs.iter().filter_map(|p| p.driver.clone()).collect(), Vec::new());
    serde_json::Value::Object(out)
}

/// The k3d node filter (`server:0`, `agent:1`) of the one node that advertises accelerators,
/// or `None` for "all". Checked against the cluster's shape; with several nodes the choice is
/// explained as a warning, which `validate` and the plan print.
pub(super) fn accelerator_node(cx: &mut Context) -> Option<String> {
    let cluster = &cx.config.cluster;
    let nodes = cluster.servers + cluster.agents;
    let choice = cluster.accelerator_node.trim();
    if choice == "all" {
        if nodes > 1 {
            cx.warn(
                "accelerators-on-every-node",
                Some("cluster.accelerator_node"),
                format!(
                    "every one of the {nodes} nodes sees all of this host's devices and advertises them: the scheduler can give one device to two pods on two nodes"
                ),
            );
        }
        return None;
    }
    let parsed = choice.split_once(':').and_then(|(role, index)| {
        let index: u32 = index.parse().ok()?;
        let count = match role {
            "server" => cluster.servers,
            "agent" => cluster.agents,
            _ => return None,
        };
        (index < count).then(|| format!("{role}:{index}"))
    });
    let Some(node) = parsed else {
        cx.error(CompileError::new(
            "bad-accelerator-node",
            &["cluster", "accelerator_node"],
            format!(
                "accelerator_node {:?} is not a node of this cluster ({} servers, {} agents)",
                cluster.accelerator_node, cluster.servers, cluster.agents
            ),
            Some("use \"server:0\", \"agent:<n>\" below the agent count, or \"all\"".to_string()),
        ));
        return None;
    };
    if nodes > 1 {
        cx.warn(
            "accelerators-on-one-node",
            Some("cluster.accelerator_node"),
            format!(
                "all {nodes} nodes see this host's devices; only {node} (label {}=true) advertises them, so no device is handed out twice. Pods that need one run there",
                super::ACCELERATOR_NODE_LABEL
            ),
        );
    }
    Some(node)
}

/// The node's bind mounts: only sources the facts say exist. Docker would create a missing
/// source as an empty root-owned directory on the host, and k3d-gpu never writes to the
/// host. What a missing source costs is a warning, which the plan prints.
fn volumes(cx: &mut Context, nvidia: bool) -> Vec<serde_json::Value> {
    let present = cx.facts.host.bind_sources.clone();
    let mut volumes: Vec<serde_json::Value> = Vec::new();
    let mut mount = |host: String, node: String, read_only: bool| {
        volumes.push(json!({ "host": host, "node": node, "read_only": read_only }));
    };
    let mut missing: Vec<(&str, &str)> = Vec::new();
    if cx.is_active(Vendor::Wsl) || (nvidia && cx.facts.host.wsl.microsoft_kernel) {
        if present.usr_lib_wsl {
            mount("/usr/lib/wsl".into(), "/usr/lib/wsl".into(), true);
        } else {
            missing.push(("/usr/lib/wsl", "pods get no WSL2 GPU user space (libdxcore, the driver store)"));
        }
    }
    if cx.is_active(Vendor::Dsa) || cx.is_active(Vendor::Iaa) {
        // The plugins accept a work queue only if its /dev/char link exists, and a privileged
        // container has no /dev/char of its own.
        if present.dev_char {
            mount("/dev/char".into(), "/dev/char".into(), false);
        } else {
            missing.push(("/dev/char", "the DSA/IAA plugins accept no work queue without its /dev/char link"));
        }
    }
    if present.lib_modules {
        mount("/lib/modules".into(), format!("{NFD_HOST_DIR}/lib/modules"), true);
    } else {
        missing.push((
            "/lib/modules",
            "Node Feature Discovery cannot see built-in modules (modules.builtin): a GPU driver built into the kernel is not seen, so Intel's rule may not set intel.feature.node.kubernetes.io/gpu",
        ));
    }
    match cx.facts.host.kernel.release.as_deref() {
        // A release is one path component; anything else came from a tampered facts document.
        Some(release) if !release.is_empty() && !release.contains('/') && release != ".." && release != "." => {
            if present.boot_config {
                mount(format!("/boot/config-{release}"), format!("{NFD_HOST_DIR}/boot/config-{release}"), true);
            } else {
                missing.push((
                    "/boot/config-<release>",
                    "Node Feature Discovery finds the kernel config only in /proc/config.gz, where the kernel has one (IKCONFIG_PROC); otherwise the node gets no kernel.config labels",
                ));
            }
        }
        Some(release) => cx.warn(
            "bad-kernel-release",
            None,
            format!("kernel release {release:?} is not a file name; /boot/config is not mounted"),
        ),
        None => {}
    }
    if present.os_release {
        mount("/etc/os-release".into(), format!("{NFD_HOST_DIR}/etc/os-release"), true);
    } else {
        missing.push((
            "/etc/os-release",
            "Node Feature Discovery labels the node image's OS (system-os_release), not the host's",
        ));
    }
    for (path, loss) in missing {
        cx.warn(
            "bind-source-missing",
            Some("cluster"),
            format!("{path} does not exist on this host, so it is not mounted: {loss}"),
        );
    }
    volumes
}

/// One resource per node label and annotation: the host's, the config's, and the ones the
/// compiler itself needs (DRA mode).
pub fn node_labels(cx: &mut Context, cluster_id: &str, out: &mut Vec<Resource>) {
    let (mut labels, annotations) = crate::facts::labels::node_labels(&cx.facts.host, &cx.active);
    // A facts document is input too (a captured file from a pull request): a value Kubernetes
    // would refuse stops the compile here, not an apply halfway through setting labels.
    labels.retain(|key, value| match check_label(key, value) {
        Ok(()) => true,
        Err(why) => {
            cx.error(CompileError::new(
                "bad-facts-label",
                &[],
                crate::escape::capped(format!("the host's facts give node label {key}: {why}")),
                Some("capture the facts again on that machine (`k3d-gpu facts --out …`)".to_string()),
            ));
            false
        }
    });
    if cx.is_active(Vendor::Intel) && cx.intel_mode() == GpuMode::Dra {
        labels.insert(DRA_NODE_LABEL.into(), "true".into());
    }
    if super::nvidia_dra::wanted(cx) {
        labels.insert(NVIDIA_DRA_NODE_LABEL.into(), "true".into());
    }
    for (key, value) in &cx.config.cluster.node_labels {
        if let Err(why) = check_label(key, value) {
            cx.error(CompileError::new(
                "bad-node-label",
                &["cluster", "node_labels"],
                format!("node label {key}={value}: {why}"),
                Some("keys are [prefix/]name, values up to 63 of [A-Za-z0-9._-]".to_string()),
            ));
            continue;
        }
        if labels.get(key).is_some_and(|v| v != value) {
            cx.warn(
                "node-label-overridden",
                Some("cluster.node_labels"),
                format!("{key} is set from the host facts; the config's value wins"),
            );
        }
        labels.insert(key.clone(), value.clone());
    }
    for (kind, prefix, map) in [
        (ResourceKind::NodeLabel, "node-label", labels),
        (ResourceKind::NodeAnnotation, "node-annotation", annotations),
    ] {
        for (key, value) in map {
            out.push(Resource {
                id: format!("{prefix}/{key}"),
                kind,
                change: Change::InPlace,
                component: None,
                spec: json!({ "key": key, "value": value }),
                depends_on: vec![cluster_id.to_string()],
            });
        }
    }
}

/// Which part of a label Kubernetes would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadLabel {
    #[error("prefix {0:?} is not a DNS subdomain")]
    Prefix(String),
    #[error("name {0:?} is not a valid label name")]
    Name(String),
    #[error("value {0:?} is not a valid label value")]
    Value(String),
}

/// Kubernetes label syntax: a qualified-name key and a label value, by the same rules taints
/// are read with ([`crate::config::fleet::qualified_name_problem`], `label_value`); the error
/// says which part is wrong.
fn check_label(key: &str, value: &str) -> Result<(), BadLabel> {
    use crate::config::fleet::{label_value, qualified_name_problem};
    if qualified_name_problem(key).is_some() {
        return Err(match key.split_once('/') {
            Some((p, _)) if p.is_empty() || !crate::config::dns_subdomain(p) => BadLabel::Prefix(p.into()),
            Some((_, name)) => BadLabel::Name(name.into()),
            None => BadLabel::Name(key.into()),
        });
    }
    if !value.is_empty() && !label_value(value) {
        return Err(BadLabel::Value(value.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{BadLabel, check_label};

    #[test]
    fn label_syntax() {
        assert!(check_label("ei-infra-eligible", "true").is_ok());
        assert!(check_label("k3d-gpu.io/hybrid-cpu", "true").is_ok());
        assert!(check_label("bad key", "x").is_err());
        assert_eq!(check_label("a/b", "0-7,9"), Err(BadLabel::Value("0-7,9".into())));
        assert!(check_label("Upper.Case/x", "y").is_err());
        // A prefix is a DNS subdomain: no label in it starts with '-'.
        assert_eq!(check_label("-a.example/x", "y"), Err(BadLabel::Prefix("-a.example".into())));
        assert_eq!(check_label("a/b/c", "y"), Err(BadLabel::Name("b/c".into())));
    }
}
