//! `k3d-gpu test`: one smoke pod per accelerator resource the cluster advertises, each one's
//! verdict and evidence, a group of pods at once for each resource the config shares (the
//! proof of sharing, `smoke::share`), and the counts against the host's facts (`smoke`). Exit 1 on any
//! failure; 2 when the cluster cannot be reached or an image option does not parse.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cli::{Global, TestArgs};
use crate::error::{EXIT_OK, Error, Result};
use crate::images::{ImageRef, Source};
use crate::smoke::{self, Hints, PodResult, Probe};

pub fn run(global: &Global, args: &TestArgs) -> Result<u8> {
    let report = smoke_test(global, args)?;
    if global.json {
        super::print_bytes(&crate::canonical::to_bytes(&report));
    } else {
        super::print_bytes(crate::escape::assembled(&smoke::text(&report)).as_bytes());
    }
    if report.passed { Ok(EXIT_OK) } else { Err(Error::CheckFailed("a smoke test failed".into())) }
}

/// The smoke pods run and judged: what `test` prints, and what `apply --test` reports.
pub fn smoke_test(global: &Global, args: &TestArgs) -> Result<smoke::Report> {
    let inputs = super::load_config(global)?;
    let fleet = super::fleet::is_fleet(&inputs);
    if fleet && args.node.is_none() {
        let names: Vec<&str> = inputs.config.nodes.iter().map(|n| n.name.as_str()).take(12).collect();
        return Err(Error::Usage {
            message: "`k3d-gpu test` on an existing cluster tests one node: name it with --node".into(),
            help: Some(crate::escape::one_line(&format!("one of the [[nodes]]: {}", names.join(", "))).into_owned()),
        });
    }
    let subject = subject(global, args, &inputs, fleet)?;
    let cluster = inputs.config.cluster.name.clone();
    let images = smoke_images(global, args, &subject.catalog, &inputs)?;
    let (context, hints) = context_and_hints(global, &inputs, fleet, &subject.catalog);
    let kubeconfig = super::plan::kubeconfig_path();
    let rt = super::runtime()?;
    let report = rt
        .block_on(async {
            let session = Session {
                client: crate::observe::kubernetes::context_client(&kubeconfig, &context).await?,
                watcher: crate::observe::kubernetes::context_watch_client(&kubeconfig, &context).await?,
                context: &context,
                deadline: Duration::from_secs(args.timeout.max(1)),
                tolerations: node_tolerations(&inputs, args),
                hints: &hints,
                images: &images,
                subject: &subject,
                quiet: global.json,
            };
            let mut allocatable = smoke::run::allocatable(&session.client, &context).await?;
            if let Some(node) = &args.node {
                if !allocatable.contains_key(node) {
                    return Ok(Err(node_missing(node, &allocatable)));
                }
                allocatable.retain(|n, _| n == node);
            }
            let (pods, counts) = smoke::plan(&subject.facts, &allocatable, &images);
            let results = session.pods(pods).await?;
            let mut shared = session.shares(&allocatable).await?;
            let (claimed, claim_groups) = session.claims().await?;
            shared.extend(claim_groups);
            let classes = subject.dra_classes.iter().map(String::as_str);
            let problems = smoke::count_problems(&subject.facts, &counts, &smoke::dra_served(classes), &hints);
            let found = smoke::Found { pods: results, shares: shared, claims: claimed, counts, problems };
            Ok::<_, crate::observe::ObserveError>(Ok(smoke::Report::new(&cluster, found)))
        })
        .map_err(|e| if fleet { super::observe_failed(e) } else { super::cluster_failed(global, &cluster, e) })??;
    Ok(report)
}

/// The context the cluster is reached through (a fleet's own, else k3d's for the cluster) and
/// the hints its findings' fixes are written with. `cluster_health` judges through the same.
pub(super) fn context_and_hints(
    global: &Global,
    inputs: &super::Inputs,
    fleet: bool,
    catalog: &crate::catalog::Catalog,
) -> (String, Hints) {
    let cluster = inputs.config.cluster.name.clone();
    let context = match &inputs.config.cluster.context {
        Some(c) if fleet => c.clone(),
        _ => crate::observe::kubernetes::context_name(&cluster),
    };
    let hints = Hints {
        cluster,
        kubectl: crate::shell::kubectl(&context),
        k3d_gpu: global.k3d_gpu(),
        component: catalog
            .components
            .values()
            .flat_map(|c| c.provides_resources.iter().map(|r| (r.clone(), c.name.clone())))
            .collect(),
    };
    (context, hints)
}

/// The DeviceClasses the compiled graph creates: the resources DRA serves instead of a
/// device plugin ([`smoke::dra_served`]).
pub(super) fn device_classes(graph: &crate::compile::DesiredGraph) -> Vec<String> {
    graph
        .resources()
        .filter(|r| r.spec["kind"] == "DeviceClass")
        .filter_map(|r| r.spec["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// What the node is judged against: the catalog, its facts, and what the config compiled
/// for it shares (and by how much), its claim templates and DRA device classes.
struct Subject {
    catalog: crate::catalog::Catalog,
    facts: crate::facts::Facts,
    shares: BTreeMap<String, u32>,
    mps: bool,
    templates: Vec<serde_json::Value>,
    dra_classes: Vec<String>,
}

fn subject(global: &Global, args: &TestArgs, inputs: &super::Inputs, fleet: bool) -> Result<Subject> {
    match super::inputs::compile(global, inputs) {
        Ok(compiled) => {
            // On an existing cluster the node's own facts judge it.
            let facts = match (&args.node, fleet) {
                (Some(node), true) => match compiled.fleet.iter().find(|(n, _)| n == node) {
                    Some((_, f)) => (**f).clone(),
                    None => return Err(not_listed(inputs, node)),
                },
                _ => compiled.facts,
            };
            let dra_classes = device_classes(&compiled.graph);
            let templates = compiled
                .graph
                .resources()
                .filter(|r| r.spec["kind"] == "ResourceClaimTemplate")
                .map(|r| r.spec.clone())
                .collect();
            Ok(Subject {
                catalog: compiled.catalog,
                facts,
                shares: compiled.graph.shares,
                mps: compiled.graph.mps,
                templates,
                dra_classes,
            })
        }
        // A fleet's node has no facts but its own: nothing to test it against.
        Err(e) if fleet => Err(e),
        Err(_) => {
            if !global.json {
                crate::stderrln!(
                    "note: the config does not compile for this host (`k3d-gpu validate` says why); sharing is not tested"
                );
            }
            Ok(Subject {
                catalog: super::load_catalog(global, inputs)?,
                facts: super::load_facts(global)?,
                shares: BTreeMap::new(),
                mps: false,
                templates: Vec::new(),
                dra_classes: Vec::new(),
            })
        }
    }
}

/// The smoke images, by their catalog name, through the same locks as every image. Under
/// `images = "pinned"` an unlocked one is left empty: refused when a pod needs it (a host
/// without NVIDIA never uses cuda).
fn smoke_images(
    global: &Global,
    args: &TestArgs,
    catalog: &crate::catalog::Catalog,
    inputs: &super::Inputs,
) -> Result<BTreeMap<&'static str, String>> {
    let pinned = inputs.config.policy.images == crate::config::ImagePolicy::Pinned;
    let mut images = BTreeMap::new();
    for (name, given, flag) in [
        (smoke::NVIDIA_IMAGE, &args.nvidia_image, "--nvidia-image"),
        (smoke::DEVICE_IMAGE, &args.device_image, "--device-image"),
    ] {
        let text = given.as_deref().unwrap_or(name);
        let image = ImageRef::parse(text).map_err(|e| Error::Usage {
            message: format!("{flag}: {}: {e}", crate::escape::quoted(text)),
            help: Some("give an image as repo:tag or repo:tag@sha256:…".into()),
        })?;
        let used = catalog.images.resolve(&image);
        images.insert(name, used.reference.clone());
        if used.source == Source::Unlocked {
            if pinned {
                images.insert(name, String::new());
            } else if !global.json {
                crate::stderrln!("note: {} is not in images.lock; its pod pulls it by tag", image.tagged());
            }
        }
    }
    Ok(images)
}

/// The pods tolerate the node's taints (`[[nodes]] taints`), or they would never be placed.
fn node_tolerations(inputs: &super::Inputs, args: &TestArgs) -> Vec<serde_json::Value> {
    args.node
        .as_ref()
        .and_then(|n| inputs.config.nodes.iter().find(|c| &c.name == n))
        .map(|n| {
            n.taints.iter().filter_map(|t| crate::config::fleet::parse_taint(t).ok()).map(|t| t.toleration()).collect()
        })
        .unwrap_or_default()
}

/// One run of `test` against the cluster: the clients, the deadline and what every pod shares.
struct Session<'a> {
    client: kube::Client,
    watcher: kube::Client,
    context: &'a str,
    deadline: Duration,
    tolerations: Vec<serde_json::Value>,
    hints: &'a Hints,
    images: &'a BTreeMap<&'static str, String>,
    subject: &'a Subject,
    /// `--json`: no progress lines on stderr.
    quiet: bool,
}

type Observed<T> = std::result::Result<T, crate::observe::ObserveError>;

impl Session<'_> {
    /// A progress line on stderr; its values are the cluster's, so each is one escaped line.
    fn say(&self, what: std::fmt::Arguments<'_>) {
        if !self.quiet {
            crate::stderrln!("test: {what}");
        }
    }

    /// One pod per resource a node advertises.
    async fn pods(&self, pods: Vec<smoke::SmokePod>) -> Observed<Vec<PodResult>> {
        let mut results = Vec::new();
        for pod in pods {
            // The pod's name is ours, made of the resource's letters and digits.
            self.say(format_args!("{} on {}: pod {}/{}", pod.resource, pod.node, smoke::NAMESPACE, pod.pod));
            let outcome = match group_refusal(&self.client, self.context, std::slice::from_ref(&pod)).await? {
                Some(refused) => refused,
                None => {
                    let manifest = tolerating(smoke::manifest(&pod, self.deadline.as_secs()), &self.tolerations);
                    smoke::run::run_pod(&self.client, &self.watcher, self.context, &manifest, self.deadline).await?
                }
            };
            let verdict = smoke::verdict(&pod, &outcome, &self.subject.facts, self.hints);
            results.push(PodResult { pod, outcome, verdict });
        }
        Ok(results)
    }

    /// A group of pods at once for each resource the config shares, asking only for the units
    /// other pods leave free.
    async fn shares(
        &self,
        allocatable: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Observed<Vec<smoke::share::GroupResult>> {
        let subject = self.subject;
        let mut held = smoke::share::Held::new();
        if !subject.shares.is_empty() {
            for pod in crate::observe::kubernetes::holders(&self.client, self.context).await? {
                for (resource, quantity) in &pod.resources {
                    let units = crate::compile::held::units(quantity).unwrap_or(0);
                    let e = held.entry((pod.node.clone(), resource.clone())).or_default();
                    *e = e.saturating_add(units);
                }
            }
        }
        let mut shared = Vec::new();
        for group in smoke::share::groups(&subject.facts, &subject.shares, allocatable, &held, subject.mps, self.images)
        {
            self.say(format_args!(
                "{} on {} shared: {} pods at once ({}=…)",
                group.resource,
                group.node,
                group.pods.len(),
                smoke::share::GROUP_LABEL
            ));
            let run = match group_refusal(&self.client, self.context, &group.pods).await? {
                Some(refused) => smoke::share::Run {
                    outcomes: group.pods.iter().map(|p| (p.pod.clone(), refused.clone())).collect(),
                    together: Vec::new(),
                },
                None => {
                    let manifests: Vec<_> = group
                        .pods
                        .iter()
                        .map(|p| {
                            tolerating(
                                smoke::share::manifest(p, &group.name, self.deadline.as_secs()),
                                &self.tolerations,
                            )
                        })
                        .collect();
                    smoke::run::run_group(
                        &self.client,
                        &self.watcher,
                        self.context,
                        &group.name,
                        &manifests,
                        self.deadline,
                    )
                    .await?
                }
            };
            let verdict = smoke::share::verdict(&group, &run, self.hints);
            shared.push(smoke::share::GroupResult { group, verdict });
        }
        Ok(shared)
    }

    /// DRA: each claim template's pod, then one claim made from it shared by two pods.
    async fn claims(&self) -> Observed<(Vec<smoke::claims::ClaimResult>, Vec<smoke::share::GroupResult>)> {
        let device_image = self.images.get(smoke::DEVICE_IMAGE).cloned().unwrap_or_default();
        let nvidia_image = self.images.get(smoke::NVIDIA_IMAGE).cloned().unwrap_or_default();
        let (mut claimed, mut shared) = (Vec::new(), Vec::new());
        for check in smoke::claims::checks(self.subject.templates.iter(), &device_image, &nvidia_image) {
            self.say(format_args!(
                "claim template {}/{}: pod {}",
                crate::escape::one_line(&check.namespace),
                crate::escape::one_line(&check.template),
                crate::escape::one_line(&check.pod)
            ));
            let pods = smoke::claims::group(&check).pods;
            let refusal = group_refusal(&self.client, self.context, &pods).await?;
            let outcome = match refusal.clone() {
                Some(refused) => refused,
                None => {
                    let manifest =
                        tolerating(smoke::claims::template_pod(&check, self.deadline.as_secs()), &self.tolerations);
                    smoke::run::run_pod(&self.client, &self.watcher, self.context, &manifest, self.deadline).await?
                }
            };
            let allocated = outcome.allocated.clone();
            let verdict = smoke::claims::verdict(&check, &outcome, allocated, self.hints);
            claimed.push(smoke::claims::ClaimResult {
                namespace: check.namespace.clone(),
                template: check.template.clone(),
                pod: check.pod.clone(),
                verdict,
            });
            shared.push(self.shared_claim(&check, refusal).await?);
        }
        Ok((claimed, shared))
    }

    /// Two pods sharing one claim made from `check`'s template; refused as its pod was.
    async fn shared_claim(
        &self,
        check: &smoke::claims::Check,
        refusal: Option<smoke::Outcome>,
    ) -> Observed<smoke::share::GroupResult> {
        let group = smoke::claims::group(check);
        let created = match &refusal {
            Some(refused) => Err(refused.refused.clone().unwrap_or_default()),
            None => smoke::run::create_claim(&self.client, self.context, &smoke::claims::shared_claim(check)).await?,
        };
        let run = match created {
            Err(why) => smoke::share::Run {
                outcomes: group
                    .pods
                    .iter()
                    .map(|p| (p.pod.clone(), smoke::Outcome { refused: Some(why.clone()), ..Default::default() }))
                    .collect(),
                together: Vec::new(),
            },
            Ok(()) => {
                let manifests: Vec<_> = smoke::claims::sharing_pods(check, self.deadline.as_secs())
                    .into_iter()
                    .map(|m| tolerating(m, &self.tolerations))
                    .collect();
                let run = smoke::run::run_group(
                    &self.client,
                    &self.watcher,
                    self.context,
                    &check.claim,
                    &manifests,
                    self.deadline,
                )
                .await;
                smoke::run::delete_claim(&self.client, &check.namespace, &check.claim, None).await;
                run?
            }
        };
        let verdict = smoke::share::verdict(&group, &run, self.hints);
        Ok(smoke::share::GroupResult { group, verdict })
    }
}

/// A `--node` the config's `[[nodes]]` do not list.
fn not_listed(inputs: &super::Inputs, node: &str) -> Error {
    let names: Vec<&str> = inputs.config.nodes.iter().map(|n| n.name.as_str()).take(12).collect();
    Error::Usage {
        message: format!("--node {} is not one of the [[nodes]]", crate::escape::quoted(node)),
        help: Some(crate::escape::one_line(&format!("name one of: {}", names.join(", "))).into_owned()),
    }
}

/// A `--node` the cluster does not have.
fn node_missing(node: &str, allocatable: &BTreeMap<String, BTreeMap<String, String>>) -> Error {
    let names: Vec<&str> = allocatable.keys().map(String::as_str).take(12).collect();
    Error::Usage {
        message: format!("the cluster has no node {}", crate::escape::quoted(node)),
        help: Some(crate::escape::one_line(&format!("its nodes: {}", names.join(", "))).into_owned()),
    }
}

/// A smoke pod's manifest with the node's tolerations added after its own.
fn tolerating(mut manifest: serde_json::Value, tolerations: &[serde_json::Value]) -> serde_json::Value {
    if tolerations.is_empty() {
        return manifest;
    }
    if let Some(spec) = manifest.get_mut("spec").and_then(serde_json::Value::as_object_mut) {
        let list = spec.entry("tolerations").or_insert_with(|| serde_json::json!([]));
        if let Some(list) = list.as_array_mut() {
            list.extend(tolerations.iter().cloned());
        }
    }
    manifest
}

/// Why pods like these cannot be created at all: an image `[policy] images = "pinned"` has no
/// digest for, or (NVIDIA) no `nvidia` RuntimeClass in the cluster.
async fn group_refusal(
    client: &kube::Client,
    context: &str,
    pods: &[smoke::SmokePod],
) -> std::result::Result<Option<smoke::Outcome>, crate::observe::ObserveError> {
    let Some(pod) = pods.first() else { return Ok(None) };
    let refused = |why: String| Some(smoke::Outcome { refused: Some(why.into()), ..smoke::Outcome::default() });
    if pod.image.is_empty() {
        let name = if pod.probe == Probe::NvidiaSmi { smoke::NVIDIA_IMAGE } else { smoke::DEVICE_IMAGE };
        return Ok(refused(format!(
            "[policy] images = \"pinned\" and {name} is not in images.lock (`k3d-gpu images lock` pins it)"
        )));
    }
    if pod.probe == Probe::NvidiaSmi && !smoke::run::has_runtime_class(client, context, "nvidia").await? {
        return Ok(refused("the cluster has no RuntimeClass nvidia".into()));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_pod_tolerates_the_nodes_taints_after_its_own() {
        let own = json!({ "key": "a", "operator": "Exists" });
        let taint = crate::config::fleet::parse_taint("k3d-gpu.io/gpu-only=true:NoSchedule").unwrap().toleration();
        // (case, manifest, tolerations added, tolerations after)
        let cases = [
            ("none to add", json!({ "spec": {} }), vec![], None),
            ("added", json!({ "spec": {} }), vec![taint.clone()], Some(json!([taint.clone()]))),
            (
                "after its own",
                json!({ "spec": { "tolerations": [own.clone()] } }),
                vec![taint.clone()],
                Some(json!([own, taint])),
            ),
        ];
        for (name, manifest, add, want) in cases {
            let got = super::tolerating(manifest, &add);
            assert_eq!(got["spec"].get("tolerations").cloned(), want, "{name}");
        }
    }
}
