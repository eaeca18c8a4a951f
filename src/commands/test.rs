//! `k3d-gpu test`: one smoke pod per accelerator resource the cluster advertises, each one's
//! verdict and evidence, and the counts against the host's facts (`smoke`). Exit 1 on any
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
        super::print_bytes(crate::escape::for_terminal(&smoke::text(&report)).as_bytes());
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
    let catalog = super::load_catalog(global, &inputs)?;
    let facts = super::load_facts(global)?;
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
                eprintln!("note: {} is not in images.lock; its pod pulls it by tag", image.tagged());
            }
        }
    }
    let context = crate::observe::kubernetes::context_name(&cluster);
    let hints = Hints {
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
                    eprintln!("test: {} on {}: pod {}/{}", pod.resource, pod.node, smoke::NAMESPACE, pod.pod);
                }
                let outcome = if pod.image.is_empty() {
                    let name = if pod.probe == Probe::NvidiaSmi { smoke::NVIDIA_IMAGE } else { smoke::DEVICE_IMAGE };
                    smoke::Outcome {
                        refused: Some(format!(
                            "[policy] images = \"pinned\" and {name} is not in images.lock (`k3d-gpu images lock` pins it)"
                        )),
                        ..smoke::Outcome::default()
                    }
                } else if pod.probe == Probe::NvidiaSmi
                    && !smoke::run::has_runtime_class(&client, &context, "nvidia").await?
                {
                    smoke::Outcome {
                        refused: Some("the cluster has no RuntimeClass nvidia".into()),
                        ..smoke::Outcome::default()
                    }
                } else {
                    let manifest = smoke::manifest(&pod, deadline.as_secs());
                    smoke::run::run_pod(&client, &watcher, &context, &manifest, deadline).await?
                };
                let verdict = smoke::verdict(&pod, &outcome, &facts, &hints);
                results.push(PodResult { pod, outcome, verdict });
            }
            let problems = smoke::count_problems(&facts, &counts, &hints);
            Ok::<_, crate::observe::ObserveError>(smoke::Report::new(&cluster, results, counts, problems))
        })
        .map_err(super::observe_failed)?;
    Ok(report)
}
