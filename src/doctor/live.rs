//! Doctor's live checks: the Docker engine's version floor and its NVIDIA path (the nvidia
//! runtime or a CDI spec: the most common NVIDIA failure), k3d's version floor, and with a
//! cluster up its device-plugin DaemonSets and the node image it runs. The rules are pure
//! functions of what was read; [`engine_findings`] and [`cluster_findings`] do the reading.

use serde_json::Value;

use crate::facts::{Finding, Level};
use crate::observe::ObservedCluster;

/// The reference's prerequisites: Docker 20.10+ and k3d v5.0.0+.
pub const DOCKER_FLOOR: (u32, u32, u32) = (20, 10, 0);
pub const K3D_FLOOR: (u32, u32, u32) = (5, 0, 0);

/// The first `X.Y[.Z]` in `text` (`v5.8.3`, `27.3.1`, `20.10.24+dfsg1`).
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.')).find_map(|word| {
        let mut parts = word.split('.').filter(|p| !p.is_empty()).map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next()??;
        let patch = parts.next().flatten().unwrap_or(0);
        Some((major, minor, patch))
    })
}

/// A finding for `tool` at the version `text` names against `floor`.
pub fn version_floor(tool: &str, text: &str, floor: (u32, u32, u32)) -> Finding {
    let floor_text = format!("{}.{}.{}", floor.0, floor.1, floor.2);
    let evidence = format!("{tool} version: {}", text.lines().next().unwrap_or_default().trim());
    match parse_version(text) {
        Some(v) if v >= floor => Finding::new(
            Level::Info,
            &format!("{tool}-version-ok"),
            format!("{tool} {}.{}.{} (at least {floor_text})", v.0, v.1, v.2),
            evidence,
        ),
        Some(v) => Finding::new(
            Level::Fail,
            &format!("{tool}-too-old"),
            format!("{tool} {}.{}.{} is older than {floor_text}, the oldest k3d-gpu supports", v.0, v.1, v.2),
            evidence,
        )
        .with_fix(format!("upgrade {tool} to {floor_text} or newer")),
        None => Finding::new(
            Level::Warn,
            &format!("{tool}-version-unknown"),
            format!("cannot read {tool}'s version, so its floor ({floor_text}) is not checked"),
            evidence,
        ),
    }
}

/// NVIDIA GPUs reach the node through Docker's `nvidia` runtime (the container toolkit) or a
/// CDI spec for `nvidia.com/gpu`; with neither, `--gpus all` fails when the node is created.
/// `cdi_specs` are the spec files found (path, text).
pub fn nvidia_path(nvidia_gpu: bool, runtimes: &[String], cdi_specs: &[(String, String)]) -> Option<Finding> {
    if !nvidia_gpu {
        return None;
    }
    let runtime = runtimes.iter().any(|r| r == "nvidia");
    let spec = cdi_specs.iter().find(|(_, text)| text.contains("nvidia.com/gpu"));
    Some(match (runtime, spec) {
        (true, _) => Finding::new(
            Level::Info,
            "nvidia-runtime-ok",
            "Docker has the nvidia runtime (NVIDIA container toolkit)",
            "docker info: Runtimes",
        ),
        (false, Some((path, _))) => Finding::new(
            Level::Info,
            "nvidia-cdi-ok",
            "a CDI spec for nvidia.com/gpu exists, so Docker can resolve --gpus through CDI",
            path.clone(),
        ),
        (false, None) => Finding::new(
            Level::Fail,
            "nvidia-runtime-missing",
            "this host has an NVIDIA GPU, but Docker has no nvidia runtime and there is no CDI spec for nvidia.com/gpu: the node cannot get the GPU",
            format!("docker info: Runtimes {}; no nvidia.com/gpu spec in the CDI directories", runtimes.join(",")),
        )
        .with_fix(
            "install the NVIDIA container toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` (or `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)",
        ),
    })
}

/// Each device-plugin DaemonSet k3d-gpu manages: ready on every node it is scheduled on.
/// The fixes' commands (crate::shell) go through the cluster's `context`, and `k3d_gpu`
/// carries the options doctor was given.
pub fn daemonsets(objects: &[Value], k3d_gpu: &crate::shell::Command, context: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for o in objects.iter().filter(|o| o["kind"] == "DaemonSet") {
        let name = format!(
            "{}/{}",
            o["metadata"]["namespace"].as_str().unwrap_or_default(),
            o["metadata"]["name"].as_str().unwrap_or_default()
        );
        let desired = o["status"]["desiredNumberScheduled"].as_i64().unwrap_or(0);
        let ready = o["status"]["numberReady"].as_i64().unwrap_or(0);
        let evidence = format!("DaemonSet {name}: {ready} of {desired} ready");
        if desired > 0 && ready >= desired {
            out.push(Finding::new(
                Level::Info,
                "daemonset-ready",
                format!("{name} is ready on {ready} node(s)"),
                evidence,
            ));
        } else if desired == 0 {
            out.push(
                Finding::new(Level::Warn, "daemonset-unscheduled", format!("{name} runs on no node"), evidence)
                    .with_fix(format!(
                        "check its node selector against the node labels (`{}`)",
                        crate::shell::kubectl(context)
                            .opt("-n", o["metadata"]["namespace"].as_str().unwrap_or_default())
                            .lit("describe daemonset")
                            .arg(o["metadata"]["name"].as_str().unwrap_or_default())
                    )),
            );
        } else {
            out.push(
                Finding::new(
                    Level::Fail,
                    "daemonset-not-ready",
                    format!("{name}: only {ready} of {desired} pods ready"),
                    evidence,
                )
                .with_fix(format!(
                    "read its pods' logs: `{}`",
                    k3d_gpu
                        .clone()
                        .lit("logs")
                        .arg(o["metadata"]["labels"][crate::compile::COMPONENT_LABEL].as_str().unwrap_or("COMPONENT"))
                )),
            );
        }
    }
    out
}

/// The node image the server runs against the one the config builds (`configured`), and a
/// tag that now names another local image (a re-pull or a rebuild).
pub fn node_image(cluster: &ObservedCluster, configured: &str) -> Option<Finding> {
    let server = cluster.nodes.iter().find(|n| n.role == "server")?;
    let version = server.image_version.as_deref().unwrap_or("unversioned");
    let evidence = format!("container {}: image {} ({version})", server.name, server.image);
    Some(if server.image != configured {
        Finding::new(
            Level::Warn,
            "node-image-other",
            format!("the cluster runs {} ({version}), not {configured}, the image this config builds", server.image),
            evidence,
        )
        .with_fix("`k3d-gpu plan` shows the recreate that moves it to the config's image")
    } else if cluster.configured_image_id.as_deref().is_some_and(|id| id != server.image_id) {
        Finding::new(
            Level::Warn,
            "node-image-stale",
            format!("{configured} now names another local image than the one the cluster runs"),
            evidence,
        )
        .with_fix("`k3d-gpu plan` shows the recreate that moves the cluster to it")
    } else {
        Finding::new(Level::Info, "node-image-ok", format!("node image {} ({version})", server.image), evidence)
    })
}

/// The node image's self-check (`node_check`): what the probe ran in `image`, or why it
/// could not run there. Either way apply would refuse the image before creating a cluster.
pub fn node_image_runs(image: &str, checked: &Result<crate::node_check::Verdict, String>) -> Finding {
    let evidence = format!(
        "node image {image}, run once under its own /bin/sh with k3d's entrypoint constructs and each binary's version flag (no cluster)"
    );
    match checked {
        Ok(v) if v.ok() => {
            let versions: Vec<String> = v
                .passed()
                .filter(|o| matches!(o.check.run, crate::node_check::Run::Command(_)))
                .map(crate::node_check::Outcome::describe)
                .collect();
            Finding::new(
                Level::Info,
                "node-image-runs",
                format!(
                    "node image {image} runs what k3d's entrypoint and k3s run ({} checks passed)",
                    v.outcomes.len()
                ),
                format!("{evidence}: {}", versions.join("; ")),
            )
        }
        Ok(v) => Finding::new(Level::Fail, "node-image-incomplete", v.refusal(image), evidence)
            .with_fix(crate::node_check::FIX),
        Err(reason) => Finding::new(
            Level::Fail,
            "node-image-unusable",
            format!("node image {image} could not be checked: {reason}"),
            evidence,
        )
        .with_fix(crate::node_check::FIX),
    }
}

/// The self-check on the config's node image when the engine has it (a build or pull waits
/// for `apply`, which checks it then). An unreachable engine gives none: the tool check says so.
pub async fn node_image_findings(
    endpoint: &crate::observe::docker::Endpoint,
    image: &str,
    nvidia: bool,
) -> Vec<Finding> {
    let Ok(docker) = crate::observe::docker::connect(endpoint) else { return vec![] };
    let present = tokio::time::timeout(crate::observe::CALL_TIMEOUT, docker.inspect_image(image)).await;
    if !matches!(present, Ok(Ok(_))) {
        return vec![];
    }
    let docker = docker.with_timeout(crate::apply::node_check::CHECK_TIMEOUT);
    let required = crate::node_check::required(nvidia);
    let checked = crate::apply::node_check::check(&docker, image, &required).await.map_err(|e| e.to_string());
    vec![node_image_runs(image, &checked)]
}

/// The engine's findings: its version floor and, with an NVIDIA GPU, its NVIDIA path. An
/// unreachable engine gives none here: the tool check already says so.
pub async fn engine_findings(endpoint: &crate::observe::docker::Endpoint, nvidia_gpu: bool) -> Vec<Finding> {
    let Ok(docker) = crate::observe::docker::connect(endpoint) else { return vec![] };
    let Ok(Ok(info)) = tokio::time::timeout(crate::observe::CALL_TIMEOUT, docker.info()).await else { return vec![] };
    let mut out = vec![version_floor("docker", info.server_version.as_deref().unwrap_or_default(), DOCKER_FLOOR)];
    let mut runtimes: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
    runtimes.sort();
    let dirs = info.cdi_spec_dirs.unwrap_or_else(|| vec!["/etc/cdi".into(), "/var/run/cdi".into()]);
    let specs = if nvidia_gpu { read_cdi_specs(&dirs) } else { vec![] };
    out.extend(nvidia_path(nvidia_gpu, &runtimes, &specs));
    out
}

/// `docker info`'s storage driver for `doctor --perf`'s rule (`perf_engine`): no engine, or
/// one that does not answer in time, is an answer too, so `--perf` never fails on it.
pub async fn storage(endpoint: &crate::observe::docker::Endpoint) -> crate::doctor::perf_engine::Engine {
    use crate::doctor::perf_engine::Engine;
    let docker = match crate::observe::docker::connect(endpoint) {
        Ok(d) => d,
        Err(e) => return Engine::Unanswered(e.to_string()),
    };
    let info = match tokio::time::timeout(crate::observe::CALL_TIMEOUT, docker.info()).await {
        Ok(Ok(info)) => info,
        Ok(Err(e)) => {
            return Engine::Unanswered(crate::secrets::blank_passwords(&format!("{}: {e}", endpoint.shown())));
        }
        Err(_) => return Engine::Unanswered(format!("{}: no answer in time", endpoint.shown())),
    };
    let status = info
        .driver_status
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pair| match pair.as_slice() {
            [k, v] => Some((k.clone(), v.clone())),
            _ => None,
        })
        .collect();
    // The printed fix edits /etc/docker/daemon.json and restarts the system service: right only
    // for the system daemon on its default socket, not a rootless, remote or VM engine.
    let default_socket = matches!(endpoint.host.as_str(), "unix:///var/run/docker.sock" | "unix:///run/docker.sock");
    let rootless = info.security_options.unwrap_or_default().iter().any(|o| o.split(',').any(|p| p == "name=rootless"));
    Engine::Answered { driver: info.driver.unwrap_or_default(), status, system: default_socket && !rootless }
}

/// The spec files in the CDI directories (bounded reads; a directory that is not there is
/// no spec).
fn read_cdi_specs(dirs: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths.into_iter().take(64) {
            if let Ok(text) = crate::input_file::read_text(&path) {
                out.push((path.display().to_string(), text));
            }
        }
    }
    out
}

/// With the cluster up: its node image and its managed DaemonSets. No cluster, or one that
/// cannot be read, gives none (plan and observe say why).
pub async fn cluster_findings(target: &crate::observe::Target, k3d_gpu: &crate::shell::Command) -> Vec<Finding> {
    let Ok((Some(cluster), _)) = crate::observe::observe_docker(target).await else { return vec![] };
    let mut out: Vec<Finding> = node_image(&cluster, &target.image).into_iter().collect();
    if let Ok(Some(kubernetes)) = crate::observe::observe_kubernetes(target, Some(&cluster)).await {
        let context = crate::observe::kubernetes::context_name(&target.cluster);
        out.extend(daemonsets(&kubernetes.objects, k3d_gpu, &context));
    }
    out
}

#[cfg(test)]
mod tests;
