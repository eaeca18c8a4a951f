//! The node image action: build it through the Docker engine's build API from a tar of the
//! context (the files whose digests the plan recorded), or pull a prebuilt one. Progress goes
//! to stderr line by line, control characters removed, like the rest of apply's output.

use std::collections::{BTreeMap, HashMap};

use bollard::Docker;
use futures_util::StreamExt;
use serde_json::Value;

use super::error::ApplyError;
use crate::node_image::{INPUTS_LABEL, Source, TreeFile};

/// A build or pull has no natural deadline; an hour is far past a slow network.
pub const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Builds or pulls what `spec` (the graph's node-image spec) says. `say` prints one line of
/// progress.
pub async fn run(docker: &Docker, spec: &Value, say: &(dyn Fn(&str) + Sync)) -> Result<(), ApplyError> {
    let reference = spec["reference"].as_str().ok_or("no image reference")?;
    let work = async {
        match spec["source"].as_str() {
            Some("build") => build(docker, spec, reference, say).await,
            Some("pull") => pull(docker, reference, say).await,
            other => Err(ApplyError::Malformed(format!("unknown node image source {other:?}"))),
        }
    };
    tokio::time::timeout(BUILD_TIMEOUT, work).await.unwrap_or_else(|_| {
        Err(ApplyError::TimedOut { what: format!("the build or pull of {reference}"), secs: BUILD_TIMEOUT.as_secs() })
    })
}

/// The context's files, read again and checked against the digest the plan recorded: what is
/// built is what was planned.
fn context_files(spec: &Value, args: &BTreeMap<String, String>) -> Result<BTreeMap<String, TreeFile>, ApplyError> {
    let context = spec["context"].as_str().ok_or("no build context")?;
    let files = match context {
        "shipped" => match Source::shipped() {
            Source::Build { files, .. } => files,
            Source::Prebuilt { .. } => unreachable!("the shipped source is a build"),
        },
        dir => crate::input_file::read_tree(std::path::Path::new(dir), crate::node_image::CONTEXT_LIMITS)
            .map_err(|e| e.to_string())
            .and_then(|files| crate::node_image::check_context(files).map_err(|e| e.to_string()))
            .map_err(|reason| ApplyError::File { what: format!("the build context {dir}"), reason })?,
    };
    let digest = crate::canonical::digest(&crate::node_image::build_inputs(&files, args));
    if Some(digest.as_str()) != spec["digest"].as_str() {
        return Err(ApplyError::ChangedSincePlan { what: format!("the build context {context}") });
    }
    Ok(files)
}

/// A tar of the files, in path order, with fixed metadata (the execute bit kept) so the same
/// files give the same bytes.
pub fn tar(files: &BTreeMap<String, TreeFile>) -> Result<Vec<u8>, ApplyError> {
    let failed = |what: String, e: std::io::Error| ApplyError::File { what, reason: e.to_string() };
    let mut archive = tar::Builder::new(Vec::new());
    for (path, file) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(file.bytes.len() as u64);
        header.set_mode(crate::node_image::tar_mode(file));
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        archive.append_data(&mut header, path, file.bytes.as_slice()).map_err(|e| failed(format!("tar {path}"), e))?;
    }
    archive.into_inner().map_err(|e| failed("tar".into(), e))
}

async fn build(docker: &Docker, spec: &Value, reference: &str, say: &(dyn Fn(&str) + Sync)) -> Result<(), ApplyError> {
    let failed = |message: String| ApplyError::Docker { doing: format!("build {reference}"), message };
    let args: BTreeMap<String, String> = serde_json::from_value(spec["build_args"].clone()).unwrap_or_default();
    // Reading up to 256 MiB and building its tar are blocking work: on the blocking pool, so
    // the other actions and the progress output go on meanwhile.
    let body = {
        let (spec, args) = (spec.clone(), args.clone());
        tokio::task::spawn_blocking(move || tar(&context_files(&spec, &args)?))
            .await
            .map_err(|e| failed(format!("reading the context failed: {e}")))??
    };
    let tag = reference.rsplit_once(':').map_or("", |(_, t)| t);
    let labels = HashMap::from([
        (INPUTS_LABEL.to_string(), spec["digest"].as_str().unwrap_or_default().to_string()),
        ("org.opencontainers.image.version".to_string(), tag.to_string()),
    ]);
    let options = bollard::query_parameters::BuildImageOptions {
        dockerfile: "Dockerfile".into(),
        t: Some(reference.to_string()),
        rm: true,
        forcerm: true,
        buildargs: Some(args.into_iter().collect()),
        labels: Some(labels),
        ..Default::default()
    };
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(body.into())));
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| failed(clean(&e.to_string())))?;
        if let Some(detail) = info.error_detail {
            return Err(failed(clean(&detail.message.unwrap_or_default())));
        }
        if let Some(text) = info.stream.or(info.status) {
            for line in text.lines().map(clean).filter(|l| !l.trim().is_empty()) {
                say(&line);
            }
        }
    }
    Ok(())
}

async fn pull(docker: &Docker, reference: &str, say: &(dyn Fn(&str) + Sync)) -> Result<(), ApplyError> {
    let failed = |message: String| ApplyError::Docker { doing: format!("pull {reference}"), message };
    let options =
        bollard::query_parameters::CreateImageOptions { from_image: Some(reference.to_string()), ..Default::default() };
    let mut stream = docker.create_image(Some(options), None, None);
    let mut last = String::new();
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| failed(clean(&e.to_string())))?;
        if let Some(detail) = info.error_detail {
            return Err(failed(clean(&detail.message.unwrap_or_default())));
        }
        // Per-layer byte counts would flood the log: one line per change of status.
        if let Some(status) = info.status {
            let line = clean(&format!("{} {status}", info.id.unwrap_or_default()));
            if line != last {
                say(line.trim());
                last = line;
            }
        }
    }
    Ok(())
}

/// The text on one line, escaped like every printed string (a hostile Dockerfile or
/// registry chooses it).
fn clean(text: &str) -> String {
    crate::escape::capped(crate::escape::one_line(text.trim_end()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bytes: &[u8], executable: bool) -> TreeFile {
        TreeFile { bytes: bytes.to_vec(), executable }
    }

    #[test]
    fn the_same_files_give_the_same_tar() {
        let files = BTreeMap::from([
            ("Dockerfile".to_string(), file(b"FROM x\n", false)),
            ("a/b".to_string(), file(&[1, 2], false)),
        ]);
        assert_eq!(tar(&files).unwrap(), tar(&files).unwrap());
        // Escaped as every printed string is, bidi overrides included, never passed through.
        assert_eq!(clean("step\u{1b}[31m 1\r"), "step\\x1b[31m 1");
        assert!(!clean("evil \u{202e}txt.exe").contains('\u{202e}'));
    }

    #[test]
    fn an_executable_script_stays_executable_in_the_tar() {
        let files = BTreeMap::from([
            ("Dockerfile".to_string(), file(b"FROM x\nCOPY entry.sh /\n", false)),
            ("entry.sh".to_string(), file(b"#!/bin/sh\n", true)),
        ]);
        let bytes = tar(&files).unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let modes: BTreeMap<String, u32> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path().unwrap().display().to_string(), e.header().mode().unwrap())
            })
            .collect();
        assert_eq!(modes, BTreeMap::from([("Dockerfile".to_string(), 0o644), ("entry.sh".to_string(), 0o755)]));
    }
}
