//! A Kubernetes API server over real HTTP for kube-rs tests, as strict as the real one where
//! k3d-gpu depends on it: the real REST paths and object JSON for the kinds we use — list
//! (label and field selectors, parsed as the API server does: an unknown field or a bad
//! selector is 400), get, watch (chunked WatchEvents: ADDED, MODIFIED, DELETED, BOOKMARK when
//! asked, and ERROR 410 Gone for a resourceVersion older than the compaction point,
//! [`State::compacted`], [`State::expire_watches`]), discovery of a group version (the
//! APIResourceList of what it serves), server-side apply with `managedFields` per field manager (an apply
//! that omits a field its manager owned removes it; another manager's field conflicts, 409,
//! unless `force=true`; associative lists merge by their keys), merge patch (the fields it
//! changes become its manager's; any other patch type, JSON patch or strategic merge patch,
//! is 415 UnsupportedMediaType rather than misread), defaulting of every kind we emit, quantities written back
//! canonical, resourceVersion and uid preconditions (409), random uids, 404 for a namespaced
//! create in a missing namespace and for custom resources whose CRD is not established
//! (applying a CRD establishes it; deleting it unserves its kind and deletes its objects);
//! a custom resource is served only under the plural its CRD declares (`spec.names.plural`),
//! built-in kinds under the API's own names ([`KINDS`]), neither ever guessed; a URL of the
//! wrong scope is 404, as on a real server (one object of a namespaced kind has no
//! cluster-wide URL, a cluster-scoped kind has no namespaced ones; the scope is [`KINDS`]'
//! NAMESPACED column or the CRD's `spec.scope`, and discovery reports the same); an update
//! of a field upstream's validation makes immutable ([`IMMUTABLE`]: a workload's selector, a
//! Service's cluster IP, a PV's source, a PVC's spec, a binding's roleRef, a claim's spec, …)
//! is 422 Invalid with the field in `details.causes`;
//! delete of a namespace taking what is in it. The write rules live in [`super::ssa`], with
//! their upstream provenance. It counts requests so tests can prove O(kinds).
//!
//! Under `fieldValidation=Strict`, a server-side apply of a built-in kind is checked against
//! upstream's v1.37.0 definitions (`support::schema`): an unknown field or a wrong type is 400
//! BadRequest, "strict decoding error", as on a real server.
//!
//! Not modelled: controllers (tests play those through [`FakeApiServer::change`]), admission
//! and validation beyond the rules above (without `Strict`, the real server drops an unknown
//! field with a warning; this one keeps it; merge patches are not schema-checked), status subresources, graceful deletion and
//! finalizers (a delete is immediate), discovery beyond one group version's resource list (no
//! `/api`, `/apis` or aggregated discovery),
//! and what [`super::ssa`] lists.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Paths of the built-in kinds a k3s v1.37 API server serves.
pub const BUILT_IN: &[&str] = &[
    "/api/v1/namespaces",
    "/api/v1/configmaps",
    "/api/v1/secrets",
    "/api/v1/serviceaccounts",
    "/api/v1/services",
    "/api/v1/persistentvolumeclaims",
    // Cluster-scoped: the host model store's volumes (issue 27).
    "/api/v1/persistentvolumes",
    "/api/v1/pods",
    "/apis/apps/v1/daemonsets",
    "/apis/apps/v1/deployments",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "/apis/rbac.authorization.k8s.io/v1/roles",
    "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "/apis/node.k8s.io/v1/runtimeclasses",
    "/apis/resource.k8s.io/v1/deviceclasses",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
];

#[derive(Default)]
pub struct State {
    pub nodes: Vec<Value>,
    pub objects: Vec<Value>,
    /// Resources the server knows, as `/api/v1/<plural>` or `/apis/<group>/<version>/<plural>`.
    pub served: Vec<String>,
    pub requests: Vec<String>,
    pub version: u64,
    /// Object names whose next PATCH fails with 500 (an API server hiccup, a killed apply).
    pub fail_once: Vec<String>,
    /// Answers to come for requests naming an object, any method: each entry answers the
    /// next request for that name with that status (a Status body), then is used up. 401 and
    /// 403 play refused credentials, 503 a server still starting.
    pub answer_next: Vec<(String, u16)>,
    /// Milliseconds every PATCH takes (a slow API server, to kill an apply half-way).
    pub patch_delay_ms: u64,
    /// Delayed PATCHes received and not yet applied: a test waits for 0 before it re-plans,
    /// since a real API server also finishes a request whose client went away.
    pub patches_in_flight: usize,
    /// What the pods behind a Service answer through the service proxy, by the path after
    /// `/proxy` (`svc:port` + path, e.g. `ovms:8000/v3/models`): the test plays the workload.
    /// A path not here answers like a Service with no ready endpoints (503).
    pub proxied: Vec<(String, Value)>,
    /// The JSON bodies POSTed through the service proxy (a chat completion), by the same key
    /// as `proxied`; a body that is not JSON is answered 400, as a model server would.
    pub proxied_posts: Vec<(String, Value)>,
    /// What a pod's server answers through a port-forward, by `pod:port` + path (e.g.
    /// `vllm-0:8000/v1/chat/completions`), for any method: the test plays the workload. A path
    /// not here answers 404. See `support::port_forward`.
    pub forwarded: Vec<(String, Value)>,
    /// The requests that came through port-forwards: (`pod:port` + path, method, JSON body).
    pub forwarded_requests: Vec<(String, String, Value)>,
    /// The oldest resourceVersion a watch may resume from: older is 410 Gone (etcd compacted).
    pub compacted: u64,
    /// The next this many watches, whatever their resourceVersion, find it compacted: one
    /// ERROR 410 Gone event and the end, as when etcd compacts between a client's list and its
    /// watch, or the watch cache's window moves past a watch served from it.
    pub expire_watches: usize,
    /// Connections open now (a test waits for a killed client's last request to be read:
    /// its connection ends once every request in its socket has been served).
    pub connections: usize,
    /// Seeds the uids the server hands out (random unless a test fixes it, as for goldens).
    pub uid_seed: u64,
    /// Service cluster IPs handed out.
    pub cluster_ips: u32,
    /// Another writer's merge patches, each applied to a node just before the next PATCH of it
    /// arrives (between the client's read and its write), with a new resourceVersion: a
    /// person's `kubectl label` or a second apply racing this one.
    pub racing_node_edits: Vec<(String, Value)>,
}

impl State {
    /// A server that starts like a fresh k3s (`k3d cluster create` with k3s's defaults): the
    /// built-in kinds served, and the objects k3s itself makes — see [`fresh_k3s_objects`].
    /// Nodes are the test's to add ([`k3s_node`]): k3s registers them as containers start.
    pub fn k3s() -> State {
        let mut served: Vec<String> = BUILT_IN.iter().map(|s| s.to_string()).collect();
        served.push("/apis/k3s.cattle.io/v1/addons".into());
        let mut objects = fresh_k3s_objects();
        for (i, o) in objects.iter_mut().enumerate() {
            o["metadata"]["uid"] = json!(format!("k3s-{i}"));
            o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
            o["metadata"]["generation"] = json!(1);
        }
        State { served, version: objects.len() as u64, objects, ..State::default() }
    }

    /// A server with the built-in kinds served and nothing in it.
    pub fn empty_k3s() -> State {
        State { served: BUILT_IN.iter().map(|s| s.to_string()).collect(), ..State::default() }
    }

    /// The nodes (`/api/v1/nodes`) or every other object.
    fn pool(&self, nodes: bool) -> &Vec<Value> {
        if nodes { &self.nodes } else { &self.objects }
    }

    fn pool_mut(&mut self, nodes: bool) -> &mut Vec<Value> {
        if nodes { &mut self.nodes } else { &mut self.objects }
    }

    /// A fresh uid: random (seeded from the clock unless [`State::uid_seed`] is set), so a
    /// recreated object never has its predecessor's.
    pub fn new_uid(&mut self) -> String {
        if self.uid_seed == 0 {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            self.uid_seed = (now.as_nanos() as u64) ^ u64::from(std::process::id()) | 1;
        }
        // splitmix64.
        let mut next = || {
            self.uid_seed = self.uid_seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.uid_seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let (a, b) = (next(), next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }

    /// The server's clock as managedFields record it: fixed, advancing with resourceVersion.
    fn now(&self) -> String {
        let secs = self.version % 60;
        let mins = (self.version / 60) % 60;
        format!("2026-01-01T00:{mins:02}:{secs:02}Z")
    }

    /// Whether a namespace of that name exists.
    fn namespace_exists(&self, name: &str) -> bool {
        self.objects
            .iter()
            .any(|o| o["kind"] == "Namespace" && o["apiVersion"] == "v1" && o["metadata"]["name"] == name)
    }

    /// Server-side apply of `object` by `manager`, as the HTTP handler does it (the rules of
    /// [`super::ssa`]): for `support::converged`, which applies without HTTP.
    pub fn apply(&mut self, object: &Value, manager: &str, force: bool) -> Result<Value, (u16, Value)> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
        let collection = self.collection(object);
        if !self.served.contains(&collection) {
            return Err(status(
                404,
                "NotFound",
                format!("the server could not find the requested resource ({collection})"),
            ));
        }
        let found = self.objects.iter().position(|o| {
            self.collection(o) == collection
                && o["metadata"]["name"] == name.as_str()
                && o["metadata"]["namespace"].as_str() == namespace.as_deref()
        });
        write(self, found, &collection, namespace.as_deref(), &name, object, Write::Apply { manager, force })
    }

    /// The collection path of `object`: a built-in kind's ([`list_path`]), or for a custom
    /// resource the plural its CRD declares (`spec.names.plural`), never a guess.
    pub fn collection(&self, object: &Value) -> String {
        let api = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let built_in = list_path(object);
        if !built_in.contains("(no CRD declares") {
            return built_in;
        }
        let group = api.rsplit_once('/').map_or("", |(g, _)| g);
        let crd = self.objects.iter().find(|o| {
            o["kind"] == "CustomResourceDefinition" && o["spec"]["group"] == group && o["spec"]["names"]["kind"] == kind
        });
        match crd.and_then(|c| c["spec"]["names"]["plural"].as_str()) {
            Some(plural) => format!("{}/{plural}", api_prefix(api)),
            None => built_in,
        }
    }

    /// Whether a collection's objects live in a namespace: [`KINDS`] for the built-in kinds,
    /// the CRD's `spec.scope` for a custom one; `None` for a collection nothing declares.
    fn namespaced(&self, collection: &str) -> Option<bool> {
        if let Some((_, _, namespaced)) = KINDS.iter().find(|(path, _, _)| *path == collection) {
            return Some(*namespaced);
        }
        let (prefix, plural) = collection.rsplit_once('/')?;
        let group = prefix.strip_prefix("/apis/")?.split('/').next()?;
        self.objects
            .iter()
            .find(|o| {
                o["kind"] == "CustomResourceDefinition"
                    && o["spec"]["group"] == group
                    && o["spec"]["names"]["plural"] == plural
            })
            .map(|crd| crd["spec"]["scope"] == "Namespaced")
    }

    /// Discovery of one group version (`GET /api/v1`, `GET /apis/GROUP/VERSION`): the
    /// APIResourceList of what it serves, or `None` (404) when it serves nothing.
    fn discovery(&self, prefix: &str) -> Option<Value> {
        let resources: Vec<Value> = self
            .served
            .iter()
            .chain(std::iter::once(&"/api/v1/nodes".to_string()))
            .filter_map(|path| {
                let (p, plural) = path.rsplit_once('/')?;
                if p != prefix {
                    return None;
                }
                let crd = self.objects.iter().find(|o| {
                    o["kind"] == "CustomResourceDefinition"
                        && o["spec"]["names"]["plural"] == plural
                        && prefix.strip_prefix("/apis/").is_some_and(|gv| {
                            gv.starts_with(&format!("{}/", o["spec"]["group"].as_str().unwrap_or("-")))
                        })
                });
                let (kind, namespaced) = match crd {
                    Some(c) => (c["spec"]["names"]["kind"].as_str()?.to_string(), c["spec"]["scope"] == "Namespaced"),
                    None => {
                        let (_, kind, namespaced) = KINDS.iter().find(|(k, _, _)| k == path)?;
                        (kind.to_string(), *namespaced)
                    }
                };
                Some(json!({"name": plural, "singularName": kind.to_lowercase(), "namespaced": namespaced,
                    "kind": kind, "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}))
            })
            .collect();
        if resources.is_empty() {
            return None;
        }
        let group_version = prefix.trim_start_matches("/api/").trim_start_matches("/apis/");
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        )
    }

    /// Takes the next resourceVersion: newer than any the server handed out and any a test
    /// wrote by hand.
    fn next_version(&mut self) -> String {
        let newest = self
            .objects
            .iter()
            .chain(self.nodes.iter())
            .filter_map(|o| o["metadata"]["resourceVersion"].as_str()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        self.version = self.version.max(newest) + 1;
        self.version.to_string()
    }
}

/// k3s's packaged manifests (k3s-io/k3s `manifests/`, deployed by its deploy controller as
/// Addons in kube-system): what their objects carry that tells them apart from ours.
fn packaged(mut object: Value, addon: &str) -> Value {
    object["metadata"]["labels"]["objectset.rio.cattle.io/hash"] = json!(format!("{:0>40}", addon.len()));
    let annotations = &mut object["metadata"]["annotations"];
    annotations["objectset.rio.cattle.io/id"] = json!("");
    annotations["objectset.rio.cattle.io/owner-gvk"] = json!("k3s.cattle.io/v1, Kind=Addon");
    annotations["objectset.rio.cattle.io/owner-name"] = json!(addon);
    annotations["objectset.rio.cattle.io/owner-namespace"] = json!("kube-system");
    object
}

/// What a fresh k3s cluster holds before anyone applies anything:
/// - the four namespaces the API server makes;
/// - RuntimeClasses from k3s's `runtimes` manifest (manifests/runtimes.yaml at commit
///   c77d0b8509ac11a9659220187c3f8b7db99b8092): nvidia, nvidia-experimental, crun, the wasm
///   runtimes — none labelled managed-by k3d-gpu;
/// - kube-system workloads of k3s's defaults: coredns, local-path-provisioner, metrics-server
///   (Deployments), and traefik with its service load balancer (k3s's bundled Helm chart);
/// - their Services, ConfigMaps and ServiceAccounts, and the Addon objects themselves.
pub fn fresh_k3s_objects() -> Vec<Value> {
    let mut out = Vec::new();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        out.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}, "spec": {"finalizers": ["kubernetes"]}}));
        out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt", "namespace": ns}, "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"}}));
        out.push(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}),
        );
    }
    out.push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.43.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}));
    for handler in
        ["nvidia", "nvidia-experimental", "crun", "lunatic", "slight", "spin", "wws", "wasmedge", "wasmer", "wasmtime"]
    {
        out.push(packaged(
            json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": handler}, "handler": handler}),
            "runtimes",
        ));
    }
    let deployment = |name: &str, app: &str, image: &str, addon: &str| {
        packaged(
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "kube-system", "labels": {"k8s-app": app}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": app}},
                    "template": {"metadata": {"labels": {"k8s-app": app}},
                        "spec": {"priorityClassName": "system-cluster-critical", "serviceAccountName": name,
                            "containers": [{"name": name, "image": image}]}}},
                "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}}),
            addon,
        )
    };
    out.push(deployment("coredns", "kube-dns", "rancher/mirrored-coredns-coredns:1.12.3", "coredns"));
    out.push(deployment(
        "local-path-provisioner",
        "local-path-provisioner",
        "rancher/local-path-provisioner:v0.0.32",
        "local-storage",
    ));
    out.push(deployment(
        "metrics-server",
        "metrics-server",
        "rancher/mirrored-metrics-server:v0.8.0",
        "metrics-server",
    ));
    // Helm-installed, not an Addon: no objectset owner, Helm's labels instead.
    out.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "traefik", "namespace": "kube-system",
            "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/name": "traefik"},
            "annotations": {"meta.helm.sh/release-name": "traefik", "meta.helm.sh/release-namespace": "kube-system"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "traefik"}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "traefik"}},
                "spec": {"containers": [{"name": "traefik", "image": "rancher/mirrored-library-traefik:3.5.1"}]}}}}));
    out.push(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "svclb-traefik-00000000", "namespace": "kube-system",
            "labels": {"objectset.rio.cattle.io/hash": "0000000000000000000000000000000000000000", "svccontroller.k3s.cattle.io/svcname": "traefik"}},
        "spec": {"selector": {"matchLabels": {"app": "svclb-traefik-00000000"}},
            "template": {"metadata": {"labels": {"app": "svclb-traefik-00000000"}},
                "spec": {"containers": [{"name": "lb-tcp-80", "image": "rancher/klipper-lb:v0.4.13"}]}}}}));
    for (name, addon) in [("kube-dns", "coredns"), ("metrics-server", "metrics-server")] {
        out.push(packaged(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "kube-system"},
                "spec": {"type": "ClusterIP", "ports": [{"port": 443, "protocol": "TCP"}]}}),
            addon,
        ));
    }
    out.push(packaged(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": "kube-system"},
            "data": {"Corefile": ".:53 {\n    errors\n}\n"}}),
        "coredns",
    ));
    out.push(packaged(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "local-path-config", "namespace": "kube-system"},
            "data": {"config.json": "{}"}}),
        "local-storage",
    ));
    for name in ["coredns", "local-path-provisioner-service-account", "metrics-server"] {
        out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "kube-system"}}));
    }
    for addon in ["ccm", "coredns", "local-storage", "metrics-server", "rolebindings", "runtimes", "traefik"] {
        out.push(json!({"apiVersion": "k3s.cattle.io/v1", "kind": "Addon",
            "metadata": {"name": addon, "namespace": "kube-system"},
            "spec": {"source": format!("/var/lib/rancher/k3s/server/manifests/{addon}.yaml")}}));
    }
    out
}

/// A node as k3s registers it: the kubelet's well-known labels, k3s's instance type and, on
/// a server, the control-plane role labels; k3s's own annotations; Ready.
pub fn k3s_node(name: &str, server: bool) -> Value {
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "k3s",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "k3s",
    });
    if server {
        labels["node-role.kubernetes.io/control-plane"] = json!("true");
        labels["node-role.kubernetes.io/master"] = json!("true");
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            "k3s.io/hostname": name,
            "k3s.io/internal-ip": "172.18.0.2",
            "k3s.io/node-args": if server { "[\"server\"]" } else { "[\"agent\"]" },
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"podCIDR": "10.42.0.0/24", "providerID": format!("k3s://{name}")},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.37.1+k3s1", "containerRuntimeVersion": "containerd://2.1.4-k3s1"}}})
}

/// What a list or a watch returns: the objects of one collection, in one namespace or all,
/// that match the label and field selectors.
struct Selection {
    collection: String,
    namespace: Option<String>,
    labels: String,
    fields: String,
}

impl Selection {
    fn nodes(&self) -> bool {
        self.collection == "/api/v1/nodes"
    }

    /// In the collection and namespace, selectors aside (what a request by name looks in).
    fn in_scope(&self, state: &State, object: &Value) -> bool {
        (self.nodes() || state.collection(object) == self.collection)
            && self.namespace.as_deref().is_none_or(|ns| object["metadata"]["namespace"] == ns)
    }

    fn pick<'a>(&'a self, state: &'a State) -> impl Iterator<Item = &'a Value> {
        state.pool(self.nodes()).iter().filter(|o| {
            self.in_scope(state, o)
                && matches_selector(&self.collection, o, &self.labels, &self.fields).unwrap_or(false)
        })
    }

    /// 400 for selectors the server would refuse.
    fn check(&self) -> Result<(), String> {
        matches_selector(&self.collection, &json!({}), &self.labels, &self.fields).map(|_| ())
    }
}

pub struct FakeApiServer {
    pub url: String,
    pub state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One requirement of a label selector (apimachinery `pkg/labels/selector.go`'s grammar:
/// `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`).
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A label key or value as `pkg/labels` accepts it: qualified names of `[A-Za-z0-9._/-]`,
/// a value up to 63 characters.
fn label_token(text: &str) -> Option<String> {
    let t = text.trim();
    let ok = !t.is_empty() && t.len() <= 316 && t.chars().all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
    ok.then(|| t.to_string())
}

/// Splits a selector at the commas outside parentheses.
fn terms(selector: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&selector[start..]);
    out.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

fn parse_labels(selector: &str) -> Result<Vec<Requirement>, String> {
    let bad = |t: &str| format!("unable to parse requirement: {t:?}");
    terms(selector)
        .into_iter()
        .map(|term| {
            let t = term.trim();
            let set = |op: &str| -> Option<(String, Vec<String>)> {
                let (k, rest) = t.split_once(op)?;
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                let values: Option<Vec<String>> = inner
                    .split(',')
                    .map(|v| label_token(v).or_else(|| v.trim().is_empty().then(String::new)))
                    .collect();
                Some((label_token(k)?, values?))
            };
            if let Some((k, v)) = set(" notin ") {
                return Ok(Requirement::NotIn(k, v));
            }
            if let Some((k, v)) = set(" in ") {
                return Ok(Requirement::In(k, v));
            }
            if let Some((k, v)) = t.split_once("!=") {
                return Ok(Requirement::NotEquals(
                    label_token(k).ok_or_else(|| bad(t))?,
                    label_token(v).unwrap_or_default(),
                ));
            }
            if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                return Ok(Requirement::Equals(
                    label_token(k).ok_or_else(|| bad(t))?,
                    label_token(v).unwrap_or_default(),
                ));
            }
            if let Some(k) = t.strip_prefix('!') {
                return Ok(Requirement::NotExists(label_token(k).ok_or_else(|| bad(t))?));
            }
            Ok(Requirement::Exists(label_token(t).ok_or_else(|| bad(t))?))
        })
        .collect()
}

fn label_matches(object: &Value, requirements: &[Requirement]) -> bool {
    let labels = &object["metadata"]["labels"];
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    requirements.iter().all(|r| match r {
        Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
        Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
        Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        Requirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
        Requirement::Exists(k) => get(k).is_some(),
        Requirement::NotExists(k) => get(k).is_none(),
    })
}

/// The field selectors a collection supports (each registry's `GetAttrs`/field label
/// conversion: `metadata.name` and `metadata.namespace` everywhere; events' `reason`,
/// `type` and `involvedObject.*`; pods' `spec.nodeName` and `status.phase`). Anything else
/// is 400, as on a real API server.
fn field_value(collection: &str, object: &Value, field: &str) -> Result<Option<String>, String> {
    let text = |v: &Value| v.as_str().map(str::to_string);
    let value = match field {
        "metadata.name" => text(&object["metadata"]["name"]),
        "metadata.namespace" => text(&object["metadata"]["namespace"]),
        "reason" | "type" if collection.ends_with("/events") => text(&object[field]),
        f if collection.ends_with("/events") && f.starts_with("involvedObject.") => {
            text(&object["involvedObject"][&f["involvedObject.".len()..]])
        }
        "spec.nodeName" if collection.ends_with("/pods") => text(&object["spec"]["nodeName"]),
        "status.phase" if collection.ends_with("/pods") => text(&object["status"]["phase"]),
        _ => return Err(format!("field label not supported: {field}")),
    };
    Ok(value)
}

fn parse_fields(collection: &str, selector: &str) -> Result<Vec<(String, bool, String)>, String> {
    terms(selector)
        .into_iter()
        .map(|term| {
            let (field, negate, value) = match term.split_once("!=") {
                Some((f, v)) => (f, true, v),
                None => match term.split_once("==").or_else(|| term.split_once('=')) {
                    Some((f, v)) => (f, false, v),
                    None => return Err(format!("invalid selector: '{term}'; can't understand '{term}'")),
                },
            };
            field_value(collection, &json!({}), field.trim())?;
            Ok((field.trim().to_string(), negate, value.trim().to_string()))
        })
        .collect()
}

/// Whether `object` matches both selectors; an error (400) for a selector the server would
/// not parse or a field it does not index.
fn matches_selector(collection: &str, object: &Value, labels: &str, fields: &str) -> Result<bool, String> {
    let requirements = parse_labels(labels)?;
    let fields = parse_fields(collection, fields)?;
    let fields_ok = fields.iter().all(|(f, negate, v)| {
        let actual = field_value(collection, object, f).ok().flatten().unwrap_or_default();
        (actual == *v) != *negate
    });
    Ok(label_matches(object, &requirements) && fields_ok)
}

/// The built-in kinds' collections, by kind, and whether their objects live in a namespace
/// (the resource names and the NAMESPACED column of the Kubernetes API reference, v1.37, as
/// `kubectl api-resources` prints them; k3s's `Addon` from its `k3s.cattle.io` CRD, which is
/// namespaced). Written out here rather than taken from the product's table, so a wrong
/// plural or scope there fails against this server.
pub const KINDS: &[(&str, &str, bool)] = &[
    ("/api/v1/namespaces", "Namespace", false),
    ("/api/v1/configmaps", "ConfigMap", true),
    ("/api/v1/secrets", "Secret", true),
    ("/api/v1/serviceaccounts", "ServiceAccount", true),
    ("/api/v1/services", "Service", true),
    ("/api/v1/endpoints", "Endpoints", true),
    ("/api/v1/persistentvolumeclaims", "PersistentVolumeClaim", true),
    ("/api/v1/persistentvolumes", "PersistentVolume", false),
    ("/api/v1/nodes", "Node", false),
    ("/api/v1/pods", "Pod", true),
    ("/api/v1/events", "Event", true),
    ("/apis/apps/v1/daemonsets", "DaemonSet", true),
    ("/apis/apps/v1/deployments", "Deployment", true),
    ("/apis/apps/v1/statefulsets", "StatefulSet", true),
    ("/apis/apps/v1/replicasets", "ReplicaSet", true),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole", false),
    ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding", false),
    ("/apis/rbac.authorization.k8s.io/v1/roles", "Role", true),
    ("/apis/rbac.authorization.k8s.io/v1/rolebindings", "RoleBinding", true),
    ("/apis/node.k8s.io/v1/runtimeclasses", "RuntimeClass", false),
    ("/apis/networking.k8s.io/v1/networkpolicies", "NetworkPolicy", true),
    ("/apis/resource.k8s.io/v1/deviceclasses", "DeviceClass", false),
    ("/apis/resource.k8s.io/v1/resourceslices", "ResourceSlice", false),
    ("/apis/resource.k8s.io/v1/resourceclaims", "ResourceClaim", true),
    ("/apis/resource.k8s.io/v1/resourceclaimtemplates", "ResourceClaimTemplate", true),
    ("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", "ValidatingAdmissionPolicy", false),
    (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        false,
    ),
    ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "CustomResourceDefinition", false),
    ("/apis/k3s.cattle.io/v1/addons", "Addon", true),
];

/// The prefix of an apiVersion's paths: `/api/v1`, `/apis/GROUP/VERSION`.
fn api_prefix(api: &str) -> String {
    if api.contains('/') { format!("/apis/{api}") } else { format!("/api/{api}") }
}

/// The collection path of a built-in `object` (without namespace). A custom resource's is
/// [`State::collection`]'s: the plural its CRD declares. Without a CRD, a path no one serves.
pub fn list_path(object: &Value) -> String {
    let prefix = api_prefix(object["apiVersion"].as_str().unwrap_or_default());
    let kind = object["kind"].as_str().unwrap_or_default();
    KINDS
        .iter()
        .find(|(path, k, _)| *k == kind && path.rsplit_once('/').is_some_and(|(p, _)| p == prefix))
        .map(|(path, _, _)| path.to_string())
        .unwrap_or_else(|| format!("{prefix}/(no CRD declares {kind})"))
}

/// A parsed request path: collection, optional namespace, optional name.
struct Target {
    collection: String,
    namespace: Option<String>,
    name: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match *parts.first()? {
        "api" if parts.len() >= 3 => (format!("/api/{}", parts[1]), &parts[2..]),
        "apis" if parts.len() >= 4 => (format!("/apis/{}/{}", parts[1], parts[2]), &parts[3..]),
        _ => return None,
    };
    let t = |plural: &str, namespace: Option<&str>, name: Option<&str>| Target {
        collection: format!("{prefix}/{plural}"),
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
    };
    Some(match rest {
        [plural] => t(plural, None, None),
        ["namespaces", ns, plural] => t(plural, Some(ns), None),
        ["namespaces", ns, plural, name] => t(plural, Some(ns), Some(name)),
        [plural, name] => t(plural, None, Some(name)),
        _ => return None,
    })
}

fn status(code: u16, reason: &str, message: String) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Fields a real API server will not change on an update, by kind, as Kubernetes'
/// validation code has them (its `Validate…Update` functions: apps `ValidateDeploymentUpdate`,
/// `ValidateDaemonSetUpdate`, `ValidateReplicaSetUpdate`, `ValidateStatefulSetUpdate`; batch
/// `ValidateJobSpecUpdate`; core `ValidateServiceUpdate`, `ValidatePersistentVolumeUpdate`,
/// `ValidatePersistentVolumeClaimUpdate`, `ValidateSecretUpdate`, `ValidateConfigMapUpdate`;
/// rbac `ValidateRoleBindingUpdate`; storage `ValidateStorageClassUpdate`; resource
/// `ValidateResourceClaimUpdate`, `ValidateResourceClaimTemplateUpdate`), written out here
/// as JSON pointers, apart from the product's table. `(kind, pointers, condition)`:
/// `""` always, `"set"` once the live object has a value there, `"immutable"` when the live
/// object says `immutable: true`.
const IMMUTABLE: &[(&str, &[&str], &str)] = &[
    ("Deployment", &["/spec/selector"], ""),
    ("DaemonSet", &["/spec/selector"], ""),
    ("ReplicaSet", &["/spec/selector"], ""),
    (
        "StatefulSet",
        &["/spec/selector", "/spec/serviceName", "/spec/podManagementPolicy", "/spec/volumeClaimTemplates"],
        "",
    ),
    ("Job", &["/spec/selector", "/spec/template", "/spec/completionMode", "/spec/podFailurePolicy"], ""),
    ("Service", &["/spec/clusterIP", "/spec/clusterIPs"], "set"),
    (
        "PersistentVolume",
        &["/spec/hostPath", "/spec/local", "/spec/nfs", "/spec/csi", "/spec/volumeMode", "/spec/nodeAffinity"],
        "",
    ),
    (
        "PersistentVolumeClaim",
        &[
            "/spec/accessModes",
            "/spec/selector",
            "/spec/storageClassName",
            "/spec/volumeMode",
            "/spec/dataSource",
            "/spec/dataSourceRef",
        ],
        "",
    ),
    ("Secret", &["/type"], ""),
    ("Secret", &["/data"], "immutable"),
    ("ConfigMap", &["/data", "/binaryData"], "immutable"),
    ("RoleBinding", &["/roleRef"], ""),
    ("ClusterRoleBinding", &["/roleRef"], ""),
    ("StorageClass", &["/provisioner", "/parameters", "/reclaimPolicy", "/volumeBindingMode"], ""),
    ("ResourceClaim", &["/spec"], ""),
    ("ResourceClaimTemplate", &["/spec"], ""),
];

/// The 422 Invalid a real server answers when `next` changes a field of `live` it will not
/// change (metav1 Status with `details.causes`, reason FieldValueInvalid).
fn immutable_violation(live: &Value, next: &Value) -> Option<(u16, Value)> {
    let kind = live["kind"].as_str()?;
    for (k, pointers, condition) in IMMUTABLE.iter().filter(|(k, _, _)| *k == kind) {
        for pointer in *pointers {
            let (before, after) = (live.pointer(pointer), next.pointer(pointer));
            let holds = match *condition {
                "set" => before.is_some_and(|v| !v.is_null() && v != "" && v != &json!([])),
                "immutable" => live["immutable"] == true,
                _ => true,
            };
            if holds && before != after {
                let field = pointer.trim_start_matches('/').replace('/', ".");
                let shown = after.map(|v| v.to_string()).unwrap_or_else(|| "null".into());
                let cause = format!("Invalid value: {shown}: field is immutable");
                let group = live["apiVersion"].as_str().and_then(|a| a.rsplit_once('/')).map(|(g, _)| format!(".{g}"));
                let name = live["metadata"]["name"].as_str().unwrap_or_default();
                let mut body = status(
                    422,
                    "Invalid",
                    format!("{k}{} \"{name}\" is invalid: {field}: {cause}", group.unwrap_or_default()),
                )
                .1;
                body["details"] = json!({"name": name, "kind": kind.to_lowercase(),
                    "causes": [{"reason": "FieldValueInvalid", "message": cause, "field": field}]});
                return Some((422, body));
            }
        }
    }
    None
}

/// How a PATCH writes.
enum Write<'a> {
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply { manager: &'a str, force: bool },
    /// JSON merge patch, by a manager (an update).
    Merge { manager: &'a str },
}

/// One write of an object (`found`: its index among the objects, `None` for a create), with
/// every rule of the real server: preconditions, the namespace, ownership, defaults, canonical
/// quantities, uid, generation, resourceVersion; a CRD establishes its kinds.
fn write(
    state: &mut State,
    found: Option<usize>,
    collection: &str,
    namespace: Option<&str>,
    name: &str,
    patch: &Value,
    how: Write,
) -> Result<Value, (u16, Value)> {
    let live = found.map(|i| state.objects[i].clone());
    // A resourceVersion or uid in the patch is a precondition: the object changed or was
    // recreated since the caller read it → 409 Conflict.
    if let Some(wanted) = patch["metadata"]["resourceVersion"].as_str()
        && live.as_ref().and_then(|l| l["metadata"]["resourceVersion"].as_str()) != Some(wanted)
    {
        return Err(status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {name}: the object has been modified; please apply your changes to the latest version and try again"
            ),
        ));
    }
    if let Some(wanted) = patch["metadata"]["uid"].as_str()
        && live.as_ref().and_then(|l| l["metadata"]["uid"].as_str()) != Some(wanted)
    {
        return Err(status(
            409,
            "Conflict",
            format!(
                "Precondition failed: UID in precondition: {wanted}, UID in object meta: {}",
                live.as_ref().and_then(|l| l["metadata"]["uid"].as_str()).unwrap_or("")
            ),
        ));
    }
    if live.is_none() {
        if matches!(how, Write::Merge { .. }) {
            return Err(status(404, "NotFound", format!("{name} not found")));
        }
        if let Some(ns) = namespace
            && !state.namespace_exists(ns)
        {
            return Err(status(404, "NotFound", format!("namespaces \"{ns}\" not found")));
        }
    }
    let now = state.now();
    let mut object = match how {
        Write::Apply { manager, force } => match super::ssa::apply(live.as_ref(), patch, manager, force, &now) {
            Ok(o) => o,
            Err(conflicts) => {
                let list: Vec<String> =
                    conflicts.iter().map(|c| format!("conflict with \"{}\": {}", c.manager, c.path)).collect();
                return Err(status(
                    409,
                    "Conflict",
                    format!("Apply failed with {} conflicts: {}", list.len(), list.join("; ")),
                ));
            }
        },
        Write::Merge { manager } => {
            let before = live.clone().unwrap_or_default();
            let mut after = before.clone();
            merge_patch(&mut after, patch);
            super::ssa::record_update(&before, &mut after, patch, manager, &now);
            after
        }
    };
    object["metadata"]["name"] = json!(name);
    if let Some(ns) = namespace {
        object["metadata"]["namespace"] = json!(ns);
    }
    // What the client may not set: the server's own fields come from the live object.
    for key in ["uid", "creationTimestamp", "generation"] {
        match live.as_ref().map(|l| l["metadata"][key].clone()) {
            Some(v) if !v.is_null() => object["metadata"][key] = v,
            _ => {
                object["metadata"].as_object_mut().map(|m| m.remove(key));
            }
        }
    }
    if live.is_none() {
        object["metadata"]["uid"] = json!(state.new_uid());
        object["metadata"]["creationTimestamp"] = json!(now);
    }
    if let Some(l) = &live {
        object["status"] = l["status"].clone();
        if object["status"].is_null() {
            object.as_object_mut().map(|m| m.remove("status"));
        }
    } else {
        object.as_object_mut().map(|m| m.remove("status"));
    }
    let mut ips = state.cluster_ips;
    super::ssa::apply_defaults(&mut object, || {
        ips += 1;
        format!("10.43.{}.{}", 1 + ips / 250, ips % 250 + 1)
    });
    state.cluster_ips = ips;
    if let Some(l) = &live
        && let Some(refusal) = immutable_violation(l, &object)
    {
        return Err(refusal);
    }
    let spec_of = |o: &Value| {
        let mut o = o.clone();
        if let Some(m) = o.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        o
    };
    let unchanged = live.as_ref().is_some_and(|l| {
        let mut a = l.clone();
        let mut b = object.clone();
        for o in [&mut a, &mut b] {
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            // Ownership counts, its timestamp does not.
            for e in o["metadata"]["managedFields"].as_array_mut().into_iter().flatten() {
                e.as_object_mut().map(|e| e.remove("time"));
            }
        }
        a == b
    });
    if unchanged {
        // A no-op write changes nothing: no new resourceVersion, no watch event.
        return Ok(live.expect("checked"));
    }
    let g = live.as_ref().and_then(|l| l["metadata"]["generation"].as_i64()).unwrap_or(0);
    let spec_changed = live.as_ref().is_none_or(|l| spec_of(l) != spec_of(&object));
    object["metadata"]["generation"] = json!(if spec_changed { g + 1 } else { g.max(1) });
    if object["kind"] == "CustomResourceDefinition" {
        let group = object["spec"]["group"].as_str().unwrap_or_default().to_string();
        let plural = object["spec"]["names"]["plural"].as_str().unwrap_or_default().to_string();
        for v in object["spec"]["versions"].as_array().cloned().unwrap_or_default() {
            if v["served"] == false {
                continue;
            }
            let path = format!("/apis/{group}/{}/{plural}", v["name"].as_str().unwrap_or_default());
            if !state.served.contains(&path) {
                state.served.push(path);
            }
        }
    }
    object["metadata"]["resourceVersion"] = json!(state.next_version());
    let _ = collection;
    match found {
        Some(i) => state.objects[i] = object.clone(),
        None => state.objects.push(object.clone()),
    }
    Ok(object)
}

enum Reply {
    Once(u16, Value),
    /// A plain-text body (a pod's log).
    Text(u16, String),
    /// A pod's log that never ends: its bytes one at a time, one every so many milliseconds,
    /// over and over (a container that prints a byte every few seconds).
    Trickle(String, u64),
    /// A watch from a resourceVersion (`None`: the current state first), with bookmarks.
    Watch(Selection, Option<u64>, bool),
    /// A watch whose resourceVersion is compacted: one ERROR event, then the end.
    WatchGone(Value),
}

/// The request's headers that decide how it is served.
#[derive(Default)]
struct Headers {
    content_type: String,
    user_agent: String,
    /// `Upgrade`, `Sec-WebSocket-Key` and `Sec-WebSocket-Protocol`: a port-forward.
    upgrade: String,
    websocket_key: String,
    websocket_protocols: String,
}

fn respond(
    state: &Mutex<State>,
    changed: &Notify,
    method: &str,
    target: &str,
    headers: &Headers,
    body: &[u8],
) -> Reply {
    let (content_type, user_agent) = (headers.content_type.as_str(), headers.user_agent.as_str());
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let param = |name: &str| {
        query.split('&').find_map(|kv| kv.strip_prefix(&format!("{name}="))).map(percent_decode).unwrap_or_default()
    };
    let mut state = state.lock().unwrap();
    state.requests.push(format!("{method} {path}"));
    // A pod's log: the text in its `fake.k3d-gpu.io/log` annotation, the last `tailLines` lines.
    if let Some(pod) = path.strip_suffix("/log")
        && let Some(Target { namespace: Some(ns), name: Some(name), collection }) = parse_path(pod)
        && collection == "/api/v1/pods"
    {
        let found = state.objects.iter().find(|o| {
            list_path(o) == collection
                && o["metadata"]["namespace"] == ns.as_str()
                && o["metadata"]["name"] == name.as_str()
        });
        let Some(found) = found else {
            return Reply::Once(404, status(404, "NotFound", format!("pods {name} not found")).1);
        };
        let text = found["metadata"]["annotations"]["fake.k3d-gpu.io/log"].as_str().unwrap_or_default();
        if let Some(every) =
            found["metadata"]["annotations"]["fake.k3d-gpu.io/log-trickle-ms"].as_str().and_then(|ms| ms.parse().ok())
        {
            return Reply::Trickle(text.to_string(), every);
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = param("tailLines").parse::<usize>().unwrap_or(lines.len()).min(lines.len());
        let mut kept: String = lines[lines.len() - tail..].iter().map(|l| format!("{l}\n")).collect();
        // `limitBytes`: the API server stops after that many bytes (after the tail).
        if let Ok(limit) = param("limitBytes").parse::<usize>() {
            let mut cut = limit.min(kept.len());
            while !kept.is_char_boundary(cut) {
                cut -= 1;
            }
            kept.truncate(cut);
        }
        return Reply::Text(200, kept);
    }
    if method == "POST"
        && let Some(reply) = create_pod(&mut state, changed, path, body)
    {
        return reply;
    }
    // The service proxy: /api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH.
    if let Some((head, rest)) = path.split_once("/proxy")
        && let Some(service) = head.strip_prefix("/api/v1/namespaces/").and_then(|h| h.split_once("/services/"))
    {
        let key = format!("{}{rest}", service.1);
        if method == "POST" {
            // What the agent's default Intel server (OVMS) answers a POST that came through
            // the API server's service proxy: clients POST through a port-forward instead.
            let posted = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
            state.proxied_posts.push((key.clone(), posted));
            return Reply::Once(404, json!({ "error": "Mediapipe graph definition with requested name is not found" }));
        }
        return match state.proxied.iter().find(|(k, _)| *k == key) {
            Some((_, answer)) => Reply::Once(200, answer.clone()),
            None => {
                let name = service.1.split(':').next().unwrap_or_default();
                Reply::Once(
                    503,
                    status(503, "ServiceUnavailable", format!("no endpoints available for service \"{name}\"")).1,
                )
            }
        };
    }
    // Discovery of one group version: what kube-rs asks for a kind it cannot name itself.
    let segments = path.trim_matches('/').split('/').count();
    if method == "GET"
        && ((path.starts_with("/api/") && segments == 2) || (path.starts_with("/apis/") && segments == 3))
    {
        return match state.discovery(path.trim_end_matches('/')) {
            Some(list) => Reply::Once(200, list),
            None => {
                Reply::Once(404, status(404, "NotFound", "the server could not find the requested resource".into()).1)
            }
        };
    }
    let Some(t) = parse_path(path) else {
        return Reply::Once(404, status(404, "NotFound", format!("no route {path}")).1);
    };
    let selection = Selection {
        collection: t.collection,
        namespace: t.namespace,
        labels: param("labelSelector"),
        fields: param("fieldSelector"),
    };
    let nodes = selection.nodes();
    if !nodes && !state.served.contains(&selection.collection) {
        let (c, v) = status(404, "NotFound", format!("the server could not find the requested resource ({path})"));
        return Reply::Once(c, v);
    }
    // A URL of the wrong scope names no resource on a real API server: a namespaced kind's
    // object has no cluster-wide URL (its list has, across namespaces), and a cluster-scoped
    // kind has no namespaced URLs at all.
    if !nodes
        && let Some(namespaced) = state.namespaced(&selection.collection)
        && ((namespaced && selection.namespace.is_none() && t.name.is_some())
            || (!namespaced && selection.namespace.is_some()))
    {
        let (c, v) = status(404, "NotFound", format!("the server could not find the requested resource ({path})"));
        return Reply::Once(c, v);
    }
    if let Err(message) = selection.check() {
        return Reply::Once(400, status(400, "BadRequest", message).1);
    }
    if let Some(name) = &t.name
        && let Some(i) = state.answer_next.iter().position(|(n, _)| n == name)
    {
        let (_, code) = state.answer_next.remove(i);
        let reason = match code {
            401 => "Unauthorized",
            403 => "Forbidden",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        return Reply::Once(code, status(code, reason, format!("injected {code} for {name}")).1);
    }
    let watch = matches!(param("watch").as_str(), "1" | "true");
    match (method, &t.name) {
        ("GET", None) if watch => {
            let from = param("resourceVersion").parse::<u64>().ok().filter(|v| *v > 0);
            let expired = state.expire_watches > 0;
            state.expire_watches = state.expire_watches.saturating_sub(1);
            if expired || from.is_some_and(|v| v < state.compacted) {
                // Too old: the watch starts and at once ends with 410 Gone, as etcd compacted.
                let gone = status(
                    410,
                    "Expired",
                    format!("too old resource version: {} ({})", from.unwrap_or(0), state.compacted),
                )
                .1;
                return Reply::WatchGone(gone);
            }
            Reply::Watch(selection, from, param("allowWatchBookmarks") == "true")
        }
        ("GET", None) => {
            let items: Vec<Value> = selection.pick(&state).cloned().collect();
            Reply::Once(
                200,
                json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": state.version.to_string()}, "items": items}),
            )
        }
        (_, Some(name)) => {
            let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let found = state
                .pool(nodes)
                .iter()
                .position(|o| selection.in_scope(&state, o) && o["metadata"]["name"] == name.as_str());
            match method {
                "GET" => match found {
                    Some(i) => Reply::Once(200, state.pool(nodes)[i].clone()),
                    None => Reply::Once(404, status(404, "NotFound", format!("{name} not found")).1),
                },
                "DELETE" => match found {
                    Some(i) => {
                        // DeleteOptions' preconditions: that very object, at that version.
                        let current = &state.pool(nodes)[i]["metadata"];
                        for (key, field) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
                            if let Some(wanted) = patch["preconditions"][key].as_str()
                                && current[key].as_str() != Some(wanted)
                            {
                                let message = format!(
                                    "Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {}",
                                    current[key].as_str().unwrap_or("")
                                );
                                return Reply::Once(409, status(409, "Conflict", message).1);
                            }
                        }
                        let gone = state.pool_mut(nodes).remove(i);
                        if gone["kind"] == "Namespace" && gone["apiVersion"] == "v1" {
                            let ns = gone["metadata"]["name"].clone();
                            state.objects.retain(|o| o["metadata"]["namespace"] != ns);
                        }
                        if gone["kind"] == "CustomResourceDefinition" {
                            let group = gone["spec"]["group"].as_str().unwrap_or_default();
                            let plural = gone["spec"]["names"]["plural"].as_str().unwrap_or_default();
                            let prefix = format!("/apis/{group}/");
                            let suffix = format!("/{plural}");
                            state.served.retain(|p| !(p.starts_with(&prefix) && p.ends_with(&suffix)));
                            let kind = gone["spec"]["names"]["kind"].clone();
                            state.objects.retain(|o| {
                                !(o["kind"] == kind
                                    && o["apiVersion"].as_str().is_some_and(|a| a.starts_with(&prefix[6..])))
                            });
                        }
                        state.next_version();
                        changed.notify_waiters();
                        Reply::Once(200, gone)
                    }
                    None => Reply::Once(404, status(404, "NotFound", format!("{name} not found")).1),
                },
                // The two patch types this server implements; any other (JSON patch, strategic
                // merge patch) is refused rather than misread as a merge patch.
                "PATCH"
                    if !matches!(
                        content_type.split(';').next().map(str::trim),
                        Some("application/apply-patch+yaml" | "application/merge-patch+json")
                    ) =>
                {
                    let (c, v) = status(
                        415,
                        "UnsupportedMediaType",
                        format!(
                            "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/apply-patch+yaml (this server implements no {content_type:?})"
                        ),
                    );
                    Reply::Once(c, v)
                }
                "PATCH" if state.fail_once.contains(name) => {
                    state.fail_once.retain(|n| n != name);
                    let (c, v) = status(500, "InternalError", format!("injected failure for {name}"));
                    Reply::Once(c, v)
                }
                // Node patches are merge patches here: a server-side apply to a node would need
                // field ownership this arm does not keep, so it is refused, not misread as a merge.
                "PATCH" if nodes && content_type.starts_with("application/apply-patch") => {
                    let (c, v) = status(
                        415,
                        "UnsupportedMediaType",
                        "this fake implements only merge patches on nodes (no field ownership)".into(),
                    );
                    Reply::Once(c, v)
                }
                "PATCH" if nodes => {
                    let Some(i) = found else {
                        return Reply::Once(404, status(404, "NotFound", format!("nodes \"{name}\" not found")).1);
                    };
                    if let Some(at) = state.racing_node_edits.iter().position(|(n, _)| n == name) {
                        let (_, edit) = state.racing_node_edits.remove(at);
                        let mut raced = state.nodes[i].clone();
                        merge_patch(&mut raced, &edit);
                        raced["metadata"]["resourceVersion"] = json!(state.next_version());
                        state.nodes[i] = raced;
                    }
                    if let Some(wanted) = patch["metadata"]["resourceVersion"].as_str()
                        && state.nodes[i]["metadata"]["resourceVersion"].as_str() != Some(wanted)
                    {
                        let (c, v) = status(409, "Conflict", format!("{name}: the object has been modified"));
                        return Reply::Once(c, v);
                    }
                    let mut object = state.nodes[i].clone();
                    merge_patch(&mut object, &patch);
                    object["metadata"]["resourceVersion"] = json!(state.next_version());
                    state.nodes[i] = object.clone();
                    changed.notify_waiters();
                    Reply::Once(200, object)
                }
                "PATCH" => {
                    let manager = param("fieldManager");
                    let agent = user_agent.split('/').next().unwrap_or_default().to_string();
                    if param("fieldValidation") == "Strict"
                        && content_type.starts_with("application/apply-patch")
                        && let Some(problems) = super::schema::strict_problems(&patch)
                        && !problems.is_empty()
                    {
                        let (c, v) =
                            status(400, "BadRequest", format!("strict decoding error: {}", problems.join(", ")));
                        return Reply::Once(c, v);
                    }
                    let how = if content_type.starts_with("application/apply-patch") {
                        if manager.is_empty() {
                            let (c, v) = status(400, "BadRequest", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into());
                            return Reply::Once(c, v);
                        }
                        Write::Apply { manager: &manager, force: param("force") == "true" }
                    } else {
                        Write::Merge { manager: if manager.is_empty() { &agent } else { &manager } }
                    };
                    let collection = selection.collection.clone();
                    let namespace = selection.namespace.clone();
                    match write(&mut state, found, &collection, namespace.as_deref(), name, &patch, how) {
                        Ok(object) => {
                            changed.notify_waiters();
                            Reply::Once(if found.is_some() { 200 } else { 201 }, object)
                        }
                        Err((c, v)) => Reply::Once(c, v),
                    }
                }
                _ => Reply::Once(405, status(405, "MethodNotAllowed", method.to_string()).1),
            }
        }
        _ => Reply::Once(405, status(405, "MethodNotAllowed", method.to_string()).1),
    }
}

// ---- Pods: create (for `k3d-gpu test`'s smoke pods). ----
//
// POST /api/v1/namespaces/NS/pods, as the API server answers it (k8s.io/apiserver's create
// handler, pkg/registry/core/pod's strategy, release-1.37): 404 when the namespace does not
// exist, 400 when the body names another namespace, 422 without a name (generateName is not
// modelled) or without containers, 409 AlreadyExists for a name in use; otherwise 201 with the
// stored object: uid, creationTimestamp, resourceVersion, status.phase Pending and
// qosClass, and the defaults the real server fills in (schedulerName, dnsPolicy,
// enableServiceLinks, each container's terminationMessagePath/Policy and imagePullPolicy).
// Nothing runs it: a test plays the scheduler and the kubelet through `change`, and a pod's
// log is its `fake.k3d-gpu.io/log` annotation (above). Pods must be in `served`.

/// A POST that creates a pod, or `None` when the path is not a pods collection.
fn create_pod(state: &mut State, changed: &Notify, path: &str, body: &[u8]) -> Option<Reply> {
    let Target { collection, namespace: Some(ns), name: None } = parse_path(path)? else { return None };
    if collection != "/api/v1/pods" || !state.served.contains(&collection) {
        return None;
    }
    let fail = |(c, v): (u16, Value)| Some(Reply::Once(c, v));
    let Ok(mut pod) = serde_json::from_slice::<Value>(body) else {
        return fail(status(400, "BadRequest", "the body of the request was in an unknown format".into()));
    };
    if pod["kind"] != "Pod" || pod["apiVersion"] != "v1" {
        return fail(status(
            400,
            "BadRequest",
            format!("the API version in the data ({}) does not match the expected API version (v1)", pod["apiVersion"]),
        ));
    }
    if let Some(other) = pod["metadata"]["namespace"].as_str()
        && other != ns
    {
        return fail(status(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ));
    }
    let Some(name) = pod["metadata"]["name"].as_str().filter(|n| !n.is_empty()).map(str::to_string) else {
        return fail(status(
            422,
            "Invalid",
            "Pod \"\" is invalid: metadata.name: Required value: name or generateName is required".into(),
        ));
    };
    if pod["spec"]["containers"].as_array().is_none_or(|c| c.is_empty()) {
        return fail(status(422, "Invalid", format!("Pod \"{name}\" is invalid: spec.containers: Required value")));
    }
    if !state.namespace_exists(&ns) {
        return fail(status(404, "NotFound", format!("namespaces \"{ns}\" not found")));
    }
    let exists = state.objects.iter().any(|o| {
        list_path(o) == collection
            && o["metadata"]["namespace"] == ns.as_str()
            && o["metadata"]["name"] == name.as_str()
    });
    if exists {
        return fail(status(409, "AlreadyExists", format!("pods \"{name}\" already exists")));
    }
    pod["metadata"]["namespace"] = json!(ns);
    pod["metadata"]["uid"] = json!(state.new_uid());
    pod["metadata"]["creationTimestamp"] = json!(state.now());
    pod["metadata"]["resourceVersion"] = json!(state.next_version());
    let spec = &mut pod["spec"];
    for (key, value) in [
        ("schedulerName", json!("default-scheduler")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("restartPolicy", json!("Always")),
        ("enableServiceLinks", json!(true)),
        ("terminationGracePeriodSeconds", json!(30)),
        ("securityContext", json!({})),
    ] {
        if spec[key].is_null() {
            spec[key] = value;
        }
    }
    for c in spec["containers"].as_array_mut().into_iter().flatten() {
        let latest = c["image"].as_str().is_none_or(|i| {
            !i.contains('@') && (i.ends_with(":latest") || !i.rsplit('/').next().unwrap_or("").contains(':'))
        });
        for (key, value) in [
            ("terminationMessagePath", json!("/dev/termination-log")),
            ("terminationMessagePolicy", json!("File")),
            ("imagePullPolicy", json!(if latest { "Always" } else { "IfNotPresent" })),
        ] {
            if c[key].is_null() {
                c[key] = value;
            }
        }
    }
    // Limits alone set requests to the same values; all equal: Guaranteed, else BestEffort here.
    let guaranteed = pod["spec"]["containers"]
        .as_array()
        .is_some_and(|cs| cs.iter().all(|c| ["cpu", "memory"].iter().all(|r| !c["resources"]["limits"][r].is_null())));
    pod["status"] = json!({"phase": "Pending", "qosClass": if guaranteed { "Guaranteed" } else { "BestEffort" }});
    state.objects.push(pod.clone());
    changed.notify_waiters();
    Some(Reply::Once(201, pod))
}

impl FakeApiServer {
    /// Starts on 127.0.0.1 (a free port) in the current tokio runtime.
    pub async fn start(mut state: State) -> FakeApiServer {
        // Every object a real server holds has a resourceVersion; one a test made without it
        // gets one, so a client's precondition is never silently skipped.
        if state.nodes.iter().chain(state.objects.iter()).any(|o| o["metadata"]["resourceVersion"].is_null()) {
            let mut next: u64 = state.next_version().parse().unwrap_or(1);
            for object in state.nodes.iter_mut().chain(state.objects.iter_mut()) {
                if object["metadata"]["resourceVersion"].is_null() {
                    object["metadata"]["resourceVersion"] = json!(next.to_string());
                    next += 1;
                }
            }
            state.version = next;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(state));
        let changed = Arc::new(Notify::new());
        let (shared, notify) = (state.clone(), changed.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (state, changed) = (shared.clone(), notify.clone());
                state.lock().unwrap().connections += 1;
                tokio::spawn(async move {
                    serve_connection(stream, state.clone(), changed.clone()).await;
                    state.lock().unwrap().connections -= 1;
                    changed.notify_waiters();
                });
            }
        });
        FakeApiServer { url, state, changed }
    }

    /// Starts on its own thread and runtime, for tests whose main thread blocks (on a child
    /// process running the real binary).
    pub fn start_in_background(state: State) -> FakeApiServer {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let server = FakeApiServer::start(state).await;
                tx.send((server.url.clone(), server.state.clone(), server.changed.clone())).unwrap();
                std::future::pending::<()>().await;
            });
        });
        let (url, state, changed) = rx.recv().unwrap();
        FakeApiServer { url, state, changed }
    }

    /// Another handle on the same server (for a thread playing a controller).
    pub fn handle(&self) -> FakeApiServer {
        FakeApiServer { url: self.url.clone(), state: self.state.clone(), changed: self.changed.clone() }
    }

    /// Resolves at the next change to the state, or after the next request served (a request
    /// may change what a controller reacts to: the watches a test expires are counted down by
    /// requests). What a thread playing a controller waits on, instead of a clock.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Blocks until `holds` is true of the state: checked now and again after each change and
    /// each request served. Past `deadline` it panics naming `what` (the deadline only turns a
    /// hang into a failure; nothing is measured).
    pub fn wait_until(&self, what: &str, deadline: std::time::Duration, holds: impl Fn(&State) -> bool) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let until = async {
            loop {
                // Registered before the state is read, so no change falls between.
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if holds(&self.state.lock().unwrap()) {
                    return;
                }
                changed.await;
            }
        };
        // The timer is made inside the runtime, which drives it.
        let waited = rt.block_on(async { tokio::time::timeout(deadline, until).await });
        assert!(waited.is_ok(), "never happened: {what}; requests: {:?}", self.requests());
    }

    /// Wakes whatever waits on [`FakeApiServer::changed`] (the watches re-read the state and
    /// send only what changed, so a wake with no change sends nothing).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Changes the state as a controller or kubelet would (status, allocatable): every object
    /// the edit changed gets a new resourceVersion, and the watches wake.
    pub fn change(&self, edit: impl FnOnce(&mut State)) {
        let mut state = self.state.lock().unwrap();
        let key = |o: &Value| format!("{}|{}|{}", o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]);
        let before: std::collections::BTreeMap<String, Value> =
            state.objects.iter().chain(state.nodes.iter()).map(|o| (key(o), o.clone())).collect();
        edit(&mut state);
        let v = json!(state.next_version());
        let State { objects, nodes, .. } = &mut *state;
        let mut changed = false;
        for o in objects.iter_mut().chain(nodes.iter_mut()) {
            if before.get(&key(o)) != Some(o) {
                o["metadata"]["resourceVersion"] = v.clone();
                changed = true;
            }
        }
        drop(state);
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// A kubeconfig whose context `k3d-<cluster>` points here and whose *current* context
    /// points at a dead port, so a client that ignores our context choice fails.
    pub fn kubeconfig(&self, cluster: &str, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, kubeconfig_text(&self.url, cluster)).unwrap();
        path
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The JSON bodies POSTed through the service proxy so far.
    #[allow(dead_code)]
    pub fn proxied_posts(&self) -> Vec<(String, Value)> {
        self.state.lock().unwrap().proxied_posts.clone()
    }
}

pub fn kubeconfig_text(url: &str, cluster: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: k3d-{cluster}\n  context:\n    cluster: fake\n    user: nobody\n- name: elsewhere\n  context:\n    cluster: dead\n    user: nobody\nusers:\n- name: nobody\n  user: {{}}\n"
    )
}

/// One connection, served by hyper's HTTP/1.1 server (with upgrades, for port-forwards).
async fn serve_connection(stream: tokio::net::TcpStream, state: Arc<Mutex<State>>, changed: Arc<Notify>) {
    let service = hyper::service::service_fn(move |request| serve_request(request, state.clone(), changed.clone()));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

type Body = http_body_util::combinators::BoxBody<hyper::body::Bytes, std::convert::Infallible>;

/// A response with `body`, of `content_type`, and nothing else the client reads.
fn reply(code: u16, content_type: &str, body: String) -> hyper::Response<Body> {
    use http_body_util::BodyExt;
    hyper::Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body)).boxed())
        .unwrap()
}

/// A streamed (chunked) response: each string `lines` yields, as it comes, until it ends.
fn streamed(lines: tokio::sync::mpsc::Receiver<String>) -> hyper::Response<Body> {
    use http_body_util::BodyExt;
    let frames = futures_util::stream::unfold(lines, |mut lines| async move {
        let line = lines.recv().await?;
        Some((Ok(hyper::body::Frame::data(hyper::body::Bytes::from(line))), lines))
    });
    hyper::Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::StreamBody::new(frames).boxed())
        .unwrap()
}

async fn serve_request(
    mut request: hyper::Request<hyper::body::Incoming>,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
) -> Result<hyper::Response<Body>, std::convert::Infallible> {
    use http_body_util::BodyExt;
    // A header sent more than once reads as one comma list, as HTTP defines it.
    let header = |name: hyper::header::HeaderName| {
        let values: Vec<&str> =
            request.headers().get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::trim).collect();
        values.join(", ")
    };
    let headers = Headers {
        content_type: header(hyper::header::CONTENT_TYPE),
        user_agent: header(hyper::header::USER_AGENT),
        upgrade: header(hyper::header::UPGRADE),
        websocket_key: header(hyper::header::SEC_WEBSOCKET_KEY),
        websocket_protocols: header(hyper::header::SEC_WEBSOCKET_PROTOCOL),
    };
    let method = request.method().as_str().to_string();
    let target = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_string();
    if method == "GET" && target.split('?').next().is_some_and(|p| p.ends_with("/portforward")) {
        let path = target.split('?').next().unwrap_or_default();
        state.lock().unwrap().requests.push(format!("GET {path}"));
        let refusal = super::port_forward::accept(
            &state,
            &target,
            &headers.upgrade,
            &headers.websocket_key,
            &headers.websocket_protocols,
        );
        return Ok(match refusal {
            Err((code, value)) => reply(code, "application/json", value.to_string()),
            Ok(accepted) => {
                let upgraded = hyper::upgrade::on(&mut request);
                let switching = hyper::Response::builder()
                    .status(101)
                    .header(hyper::header::UPGRADE, "websocket")
                    .header(hyper::header::CONNECTION, "Upgrade")
                    .header(hyper::header::SEC_WEBSOCKET_ACCEPT, accepted.accept_key())
                    .header(hyper::header::SEC_WEBSOCKET_PROTOCOL, super::port_forward::PROTOCOL)
                    .body(http_body_util::Empty::new().boxed())
                    .unwrap();
                tokio::spawn(async move {
                    if let Ok(stream) = upgraded.await {
                        let stream = hyper_util::rt::TokioIo::new(stream);
                        super::port_forward::serve(stream, accepted, state, changed).await;
                    }
                });
                switching
            }
        });
    }
    let Ok(body) = request.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(reply(400, "application/json", json!({"error": "the body could not be read"}).to_string()));
    };
    let delayed = {
        let mut s = state.lock().unwrap();
        let delayed = method == "PATCH" && s.patch_delay_ms > 0;
        s.patches_in_flight += usize::from(delayed);
        delayed.then_some(s.patch_delay_ms)
    };
    let answer = match delayed {
        // Simulated slowness: nothing asserts on how long it takes. On a task of its own, as a
        // real API server finishes a request whose client went away: the PATCH still lands,
        // and leaves the count, when hyper drops this connection (a killed client) while it
        // waits.
        Some(delay) => {
            let (state, changed) = (state.clone(), changed.clone());
            let late = tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                let answer = respond(&state, &changed, &method, &target, &headers, &body);
                state.lock().unwrap().patches_in_flight -= 1;
                changed.notify_waiters();
                answer
            });
            match late.await {
                Ok(answer) => answer,
                Err(_) => {
                    let error = json!({"error": "the request's task failed"}).to_string();
                    return Ok(reply(500, "application/json", error));
                }
            }
        }
        None => respond(&state, &changed, &method, &target, &headers, &body),
    };
    // Whatever the request did, the controllers (`support::world`) look again.
    changed.notify_waiters();
    Ok(match answer {
        Reply::Once(code, value) => reply(code, "application/json", value.to_string()),
        Reply::Text(code, body) => reply(code, "text/plain", body),
        Reply::Trickle(text, every) => {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tokio::spawn(async move {
                let bytes = if text.is_empty() { b"x".to_vec() } else { text.into_bytes() };
                for b in bytes.iter().cycle() {
                    if tx.send(char::from(*b).to_string()).await.is_err() {
                        return; // the client went away
                    }
                    // A container that prints a byte every so often: nothing asserts on it.
                    tokio::time::sleep(std::time::Duration::from_millis(every)).await;
                }
            });
            streamed(rx)
        }
        Reply::WatchGone(gone) => {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let _ = tx.try_send(json!({"type": "ERROR", "object": gone}).to_string() + "\n");
            streamed(rx)
        }
        Reply::Watch(selection, from, bookmarks) => {
            let (tx, rx) = tokio::sync::mpsc::channel(64);
            tokio::spawn(watch(selection, from, bookmarks, state, changed, tx));
            streamed(rx)
        }
    })
}

/// A watch's events, one JSON line each, into `events` until the client goes away.
async fn watch(
    selection: Selection,
    from: Option<u64>,
    bookmarks: bool,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    events: tokio::sync::mpsc::Sender<String>,
) {
    let key_of = |o: &Value| {
        format!(
            "{}/{}",
            o["metadata"]["namespace"].as_str().unwrap_or(""),
            o["metadata"]["name"].as_str().unwrap_or("")
        )
    };
    let version_of = |o: &Value| o["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
    // From a resourceVersion: what the caller already has is not sent again (only its later
    // changes); without one, the current state first, as ADDED.
    let mut sent: std::collections::BTreeMap<String, (String, Value)> = Default::default();
    if let Some(from) = from {
        let state = state.lock().unwrap();
        for o in selection.pick(&state) {
            if version_of(o).parse::<u64>().is_ok_and(|v| v <= from) {
                sent.insert(key_of(o), (version_of(o), o.clone()));
            }
        }
    }
    loop {
        // Registered before reading the state, so no change falls between.
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let lines: Vec<String> = {
            let state = state.lock().unwrap();
            let now: std::collections::BTreeMap<String, &Value> =
                selection.pick(&state).map(|o| (key_of(o), o)).collect();
            let mut lines = Vec::new();
            for (key, o) in &now {
                let rv = version_of(o);
                let kind = if sent.contains_key(key) { "MODIFIED" } else { "ADDED" };
                if sent.get(key).map(|(v, _)| v) != Some(&rv) {
                    lines.push(json!({"type": kind, "object": o}).to_string());
                    sent.insert(key.clone(), (rv, (*o).clone()));
                }
            }
            let gone: Vec<String> = sent.keys().filter(|k| !now.contains_key(*k)).cloned().collect();
            for key in gone {
                if let Some((_, mut last)) = sent.remove(&key) {
                    last["metadata"]["resourceVersion"] = json!(state.version.to_string());
                    lines.push(json!({"type": "DELETED", "object": last}).to_string());
                }
            }
            if bookmarks && !lines.is_empty() {
                let kind = if selection.nodes() { "Node".to_string() } else { String::new() };
                lines.push(
                    json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": "v1",
                    "metadata": {"resourceVersion": state.version.to_string()}}})
                    .to_string(),
                );
            }
            lines
        };
        for line in lines {
            if events.send(line + "\n").await.is_err() {
                return;
            }
        }
        // A client that goes away (hyper drops the body) ends the watch at once.
        tokio::select! {
            () = &mut notified => {}
            () = events.closed() => return,
        }
    }
}
