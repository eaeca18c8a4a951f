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
    super::fleet::k3d_only(
        &inputs,
        "test",
        "run a pod that requests the resource with `kubectl --context {context} run …`",
    )?;
    // The config compiled for this host says which devices it shares, and by how much.
    let (catalog, facts, shares, mps, templates, dra_classes) = match super::inputs::compile(global, &inputs) {
        Ok(compiled) => {
            let dra_classes: Vec<String> = compiled
                .graph
                .resources()
                .filter(|r| r.spec["kind"] == "DeviceClass")
                .filter_map(|r| r.spec["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            let templates: Vec<serde_json::Value> = compiled
                .graph
                .resources()
                .filter(|r| r.spec["kind"] == "ResourceClaimTemplate")
                .map(|r| r.spec.clone())
                .collect();
            (compiled.catalog, compiled.facts, compiled.graph.shares, compiled.graph.mps, templates, dra_classes)
        }
        Err(_) => {
            if !global.json {
                crate::stderrln!(
                    "note: the config does not compile for this host (`k3d-gpu validate` says why); sharing is not tested"
                );
            }
            (
                super::load_catalog(global, &inputs)?,
                super::load_facts(global)?,
                BTreeMap::new(),
                false,
                Vec::new(),
                Vec::new(),
            )
        }
    };
    let cluster = inputs.config.cluster.name.clone();
    let pinned = inputs.config.policy.images == crate::config::ImagePolicy::Pinned;
    // The smoke images, by their catalog name, through the same locks as every image.
    let mut images: BTreeMap<&str, String> = BTreeMap::new();
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
                // Refused when a pod needs it (below): a host without NVIDIA never uses cuda.
                images.insert(name, String::new());
            } else if !global.json {
                crate::stderrln!("note: {} is not in images.lock; its pod pulls it by tag", image.tagged());
            }
        }
    }
    let context = crate::observe::kubernetes::context_name(&cluster);
    let hints = Hints {
        cluster: cluster.clone(),
        kubectl: crate::shell::kubectl(&context),
        k3d_gpu: crate::shell::k3d_gpu(global),
        component: catalog
            .components
            .values()
            .flat_map(|c| c.provides_resources.iter().map(|r| (r.clone(), c.name.clone())))
            .collect(),
    };
    let kubeconfig = super::plan::kubeconfig_path();
    let deadline = Duration::from_secs(args.timeout.max(1));
    let rt = super::runtime()?;
    let report = rt
        .block_on(async {
            let client = crate::observe::kubernetes::client(&kubeconfig, &cluster).await?;
            let watcher = crate::observe::kubernetes::watch_client(&kubeconfig, &cluster).await?;
            let allocatable = smoke::run::allocatable(&client, &context).await?;
            let (pods, counts) = smoke::plan(&facts, &allocatable, &images);
            let mut results = Vec::new();
            for pod in pods {
                if !global.json {
                    // Node and resource names are the cluster's: one escaped line each.
                    let l = crate::escape::one_line;
                    crate::stderrln!(
                        "test: {} on {}: pod {}/{}",
                        l(&pod.resource),
                        l(&pod.node),
                        smoke::NAMESPACE,
                        l(&pod.pod)
                    );
                }
                let outcome = match group_refusal(&client, &context, std::slice::from_ref(&pod)).await? {
                    Some(refused) => refused,
                    None => {
                        let manifest = smoke::manifest(&pod, deadline.as_secs());
                        smoke::run::run_pod(&client, &watcher, &context, &manifest, deadline).await?
                    }
                };
                let verdict = smoke::verdict(&pod, &outcome, &facts, &hints);
                results.push(PodResult { pod, outcome, verdict });
            }
            let mut shared = Vec::new();
            // What pods already hold, so a group asks only for the units left free.
            let mut held = smoke::share::Held::new();
            if !shares.is_empty() {
                for pod in crate::observe::kubernetes::holders(&client, &context).await? {
                    for (resource, quantity) in &pod.resources {
                        let units = crate::compile::held::units(quantity).unwrap_or(0);
                        let e = held.entry((pod.node.clone(), resource.clone())).or_default();
                        *e = e.saturating_add(units);
                    }
                }
            }
            for group in smoke::share::groups(&facts, &shares, &allocatable, &held, mps, &images) {
                if !global.json {
                    crate::stderrln!(
                        "test: {} on {} shared: {} pods at once ({}=…)",
                        crate::escape::one_line(&group.resource),
                        crate::escape::one_line(&group.node),
                        group.pods.len(),
                        smoke::share::GROUP_LABEL
                    );
                }
                let run = match group_refusal(&client, &context, &group.pods).await? {
                    Some(refused) => smoke::share::Run {
                        outcomes: group.pods.iter().map(|p| (p.pod.clone(), refused.clone())).collect(),
                        together: Vec::new(),
                    },
                    None => {
                        let manifests: Vec<_> = group
                            .pods
                            .iter()
                            .map(|p| smoke::share::manifest(p, &group.name, deadline.as_secs()))
                            .collect();
                        smoke::run::run_group(&client, &watcher, &context, &group.name, &manifests, deadline).await?
                    }
                };
                let verdict = smoke::share::verdict(&group, &run, &hints);
                shared.push(smoke::share::GroupResult { group, verdict });
            }
            // DRA: each template's pod, then one claim made from it shared by two pods.
            let device_image = images.get(smoke::DEVICE_IMAGE).cloned().unwrap_or_default();
            let nvidia_image = images.get(smoke::NVIDIA_IMAGE).cloned().unwrap_or_default();
            let mut claimed = Vec::new();
            for check in smoke::claims::checks(templates.iter(), &device_image, &nvidia_image) {
                if !global.json {
                    crate::stderrln!(
                        "test: claim template {}/{}: pod {}",
                        crate::escape::one_line(&check.namespace),
                        crate::escape::one_line(&check.template),
                        crate::escape::one_line(&check.pod)
                    );
                }
                let pods = smoke::claims::group(&check).pods;
                let refusal = group_refusal(&client, &context, &pods).await?;
                let outcome = match refusal.clone() {
                    Some(refused) => refused,
                    None => {
                        let manifest = smoke::claims::template_pod(&check, deadline.as_secs());
                        smoke::run::run_pod(&client, &watcher, &context, &manifest, deadline).await?
                    }
                };
                let allocated = outcome.allocated.clone();
                let verdict = smoke::claims::verdict(&check, &outcome, allocated, &hints);
                claimed.push(smoke::claims::ClaimResult {
                    namespace: check.namespace.clone(),
                    template: check.template.clone(),
                    pod: check.pod.clone(),
                    verdict,
                });
                let group = smoke::claims::group(&check);
                let created = match &refusal {
                    Some(refused) => Err(refused.refused.clone().unwrap_or_default()),
                    None => smoke::run::create_claim(&client, &context, &smoke::claims::shared_claim(&check)).await?,
                };
                let run = match created {
                    Err(why) => smoke::share::Run {
                        outcomes: group
                            .pods
                            .iter()
                            .map(|p| {
                                (p.pod.clone(), smoke::Outcome { refused: Some(why.clone()), ..Default::default() })
                            })
                            .collect(),
                        together: Vec::new(),
                    },
                    Ok(()) => {
                        let manifests = smoke::claims::sharing_pods(&check, deadline.as_secs());
                        let run =
                            smoke::run::run_group(&client, &watcher, &context, &check.claim, &manifests, deadline)
                                .await;
                        smoke::run::delete_claim(&client, &check.namespace, &check.claim, None).await;
                        run?
                    }
                };
                let verdict = smoke::share::verdict(&group, &run, &hints);
                shared.push(smoke::share::GroupResult { group, verdict });
            }
            let classes = dra_classes.iter().map(String::as_str);
            let problems = smoke::count_problems(&facts, &counts, &smoke::dra_served(classes), &hints);
            let found = smoke::Found { pods: results, shares: shared, claims: claimed, counts, problems };
            Ok::<_, crate::observe::ObserveError>(smoke::Report::new(&cluster, found))
        })
        .map_err(|e| super::cluster_failed(global, &cluster, e))?;
    Ok(report)
}

/// Why pods like these cannot be created at all: an image `[policy] images = "pinned"` has no
/// digest for, or (NVIDIA) no `nvidia` RuntimeClass in the cluster.
async fn group_refusal(
    client: &kube::Client,
    context: &str,
    pods: &[smoke::SmokePod],
) -> std::result::Result<Option<smoke::Outcome>, crate::observe::ObserveError> {
    let Some(pod) = pods.first() else { return Ok(None) };
    let refused = |why: String| Some(smoke::Outcome { refused: Some(why), ..smoke::Outcome::default() });
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
