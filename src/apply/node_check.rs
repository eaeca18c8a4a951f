//! The node image's self-check, its Docker half: runs the image once — no cluster, no
//! network, removed once read, its entrypoint replaced by the probe of `node_check` under the
//! image's own `/bin/sh` — and reads the verdict from what the probe printed. `apply` runs it
//! before its first k3d call, `doctor` on the config's image when the engine has it.

use bollard::Docker;
use futures_util::StreamExt;

use super::error::ApplyError;
use crate::node_check::{Check, Verdict, probe_command, verdict};

/// The probe runs a dozen version flags; a minute is far past a slow disk.
pub const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The label on the probe's container, so a leftover one is recognisable.
pub const CHECK_LABEL: &str = "k3d-gpu.io/node-image-check";

/// Runs the probe in `image` and returns what it showed. An error means the probe could not
/// run at all (no such image, no `/bin/sh`, the engine refused): that image cannot be a k3d
/// node either, and the error says why.
pub async fn check(docker: &Docker, image: &str, required: &[Check]) -> Result<Verdict, ApplyError> {
    let work = run_probe(docker, image, required);
    let (stdout, stderr) = match tokio::time::timeout(CHECK_TIMEOUT, work).await {
        Ok(result) => result?,
        Err(_) => {
            let what = format!("the check of node image {image}");
            return Err(ApplyError::TimedOut { what, secs: CHECK_TIMEOUT.as_secs() });
        }
    };
    Ok(verdict(required, &stdout, &stderr))
}

async fn run_probe(docker: &Docker, image: &str, required: &[Check]) -> Result<(String, String), ApplyError> {
    let (entrypoint, cmd) = probe_command(required);
    let body = bollard::models::ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(entrypoint),
        cmd: Some(cmd),
        // The probe reads the image's own PATH, as k3s will.
        working_dir: Some("/".into()),
        labels: Some(std::collections::HashMap::from([(CHECK_LABEL.to_string(), "true".to_string())])),
        // `ipset --version` also asks the kernel for its protocol over netfilter netlink,
        // which needs CAP_NET_ADMIN (k3d's nodes are privileged); in a network namespace of
        // its own that touches nothing of the host's.
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some("none".into()),
            cap_add: Some(vec!["NET_ADMIN".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = docker
        .create_container(None::<bollard::query_parameters::CreateContainerOptions>, body)
        .await
        .map_err(|e| docker_error(format!("cannot run node image {image} for its check"), &e))?;
    let id = created.id;
    let result = start_and_read(docker, &id, image).await;
    // Removed by us once read, whatever happened: the probe's output is read from its log
    // after it exits (plain requests; an attach would need a connection upgrade, which the
    // capped engine transport does not do), so the engine must not remove it first.
    let options = bollard::query_parameters::RemoveContainerOptions { force: true, ..Default::default() };
    let _ = docker.remove_container(&id, Some(options)).await;
    result
}

/// Starts the probe, waits for it to exit, and reads what it wrote to stdout and stderr.
async fn start_and_read(docker: &Docker, id: &str, image: &str) -> Result<(String, String), ApplyError> {
    docker.start_container(id, None::<bollard::query_parameters::StartContainerOptions>).await.map_err(|e| {
        docker_error(format!("node image {image} cannot run /bin/sh, which k3d's node entrypoint needs"), &e)
    })?;
    let options = bollard::query_parameters::WaitContainerOptions { condition: "not-running".into() };
    let mut waited = docker.wait_container(id, Some(options));
    // A non-zero exit is an answer too (the verdict reads the lines): only the wait matters.
    while let Some(item) = waited.next().await {
        if let Err(e) = item
            && !matches!(e, bollard::errors::Error::DockerContainerWaitError { .. })
        {
            return Err(docker_error(format!("waiting for the check of node image {image}"), &e));
        }
    }
    let options = bollard::query_parameters::LogsOptions { stdout: true, stderr: true, ..Default::default() };
    let mut output = docker.logs(id, Some(options));
    let (mut stdout, mut stderr) = (String::new(), String::new());
    while let Some(item) = output.next().await {
        match item {
            Ok(bollard::container::LogOutput::StdOut { message }) => {
                stdout.push_str(&String::from_utf8_lossy(&message))
            }
            Ok(bollard::container::LogOutput::StdErr { message }) => {
                stderr.push_str(&String::from_utf8_lossy(&message))
            }
            Ok(_) => {}
            Err(e) => return Err(docker_error(format!("reading the check of node image {image}"), &e)),
        }
        // The probe writes a few lines per check; more than this is not the probe.
        if stdout.len() + stderr.len() > 64 * 1024 {
            break;
        }
    }
    Ok((stdout, stderr))
}

/// The engine's error, escaped (an image's name and the engine's text reach it).
fn docker_error(doing: String, e: &bollard::errors::Error) -> ApplyError {
    ApplyError::Docker { doing, message: clean(&e.to_string()) }
}

fn clean(text: &str) -> String {
    crate::escape::capped(crate::escape::one_line(text.trim_end()).into_owned())
}
