//! The host model store: one directory on the host (`[agent] model_dir`, by default under the
//! user's data directory) that every k3d node mounts at [`NODE_DIR`], so a recreated cluster
//! (a new node image, a new GPU, a changed k3s flag) finds its models in place instead of
//! downloading tens of GB again.
//!
//! Every model server (the agent, the vlm/stt/embeddings add-ons, the video add-on) reads its
//! models through a PVC bound to a static local PersistentVolume at `NODE_DIR/<server>`. The
//! PV's reclaim policy is Retain and deleting it never touches the files: only a person
//! deletes the store (the plan says where; `destroy` and `keep_models = false` say so too).
//!
//! The store is part of the cluster spec (what k3d fixes at creation) whether or not the
//! config has `[agent]`, so adding the agent later needs no new cluster. The objects name the
//! store as configured (the absolute path, or `$XDG_DATA_HOME/…` for the default), never the
//! path it resolves to on this machine: they stay the same bytes on every machine. Only the
//! cluster spec's `host` names the resolved directory, where the command edge found one;
//! without it apply resolves the default (`apply::k3d::model_store_path`). Pure.

use serde_json::{Value, json};

use super::{CompileError, Context};

/// Where every node mounts the store.
pub const NODE_DIR: &str = "/var/lib/k3d-gpu/models";

/// The storage class name the store's PVs and PVCs carry: no StorageClass object has it, so
/// no provisioner acts on them and a PVC binds only to the PV it names.
pub const STORAGE_CLASS: &str = "k3d-gpu-models";

/// The annotation on a model PVC and PV naming its directory in the store, for the plan.
pub const HOST_DIR_ANNOTATION: &str = "k3d-gpu.io/model-store";

/// The cluster spec's `model_store`: the configured directory (null: the default), the node
/// path, and `host`, the directory the nodes really mount (every link resolved, as the command
/// edge found it; absent when none did). An unusable `[agent] model_dir` is an error on that
/// key; so is a store that resolves to `/`, written or not: a link is judged by its target.
pub fn cluster_spec(cx: &mut Context) -> Value {
    let dir = cx.config.agent.as_ref().and_then(|a| a.model_dir.clone());
    let what = match &dir {
        Some(d) => format!("model_dir {}", crate::escape::quoted(d)),
        None => format!("the default model store {}", short(None, &cx.config.cluster.name)),
    };
    let refuse = |cx: &mut Context, why: String| {
        cx.error(CompileError::new(
            "agent-model-dir",
            &["agent", "model_dir"],
            format!("{what}: {why}"),
            Some("use an absolute host path such as \"/srv/models\" that is not a link to a system directory, or leave it unset for the default under ~/.local/share/k3d-gpu".into()),
        ));
    };
    let written_ok = match dir.as_deref().map(check_dir) {
        Some(Err(why)) => {
            refuse(cx, why.to_string());
            false
        }
        _ => true,
    };
    let host = match cx.config.host_paths.model_store.clone() {
        Some(Ok(host)) => Some(host),
        Some(Err(why)) => {
            refuse(cx, format!("cannot be resolved: {why}"));
            None
        }
        None => None,
    };
    // Judged by what is mounted: the resolved directory where the edge gave one.
    let judged = host.as_deref().or(dir.as_deref());
    let through = match &host {
        Some(h) if dir.as_deref().is_none_or(|d| d.trim_end_matches('/') != h) => {
            format!(" (resolves to {})", crate::escape::quoted(h))
        }
        _ => String::new(),
    };
    if let Some(h) = &host
        && h.trim_end_matches('/').is_empty()
        && written_ok
    {
        refuse(cx, "is a link to the root directory".to_string());
    } else if let Some(h) = &host
        && written_ok
        && let Err(why) = check_dir(h)
    {
        // A link (or HOME) can lead to a name k3d's volume syntax cannot carry.
        refuse(cx, format!("resolves to {}, which {why}", crate::escape::quoted(h)));
    } else if let Some(why) = judged.and_then(super::user_volumes::sensitive) {
        cx.warn(
            "model-dir-sensitive-path",
            Some("agent.model_dir"),
            format!("{what}{through} is {why}; the model store is mounted read-write into every node"),
        );
    }
    let mut spec = json!({ "dir": dir, "node": NODE_DIR });
    if let Some(h) = host {
        spec["host"] = json!(h);
    }
    spec
}

/// The store's host directory for the model servers' volumes, as written ([`short`]), never
/// as it resolves on this machine: the objects are the same bytes wherever they are rendered
/// (`render --flux` commits them), and carry no user's home. Only the cluster spec's `host`
/// names the resolved directory.
pub fn store_dir(config: &crate::config::Config) -> String {
    short(config.agent.as_ref().and_then(|a| a.model_dir.as_deref()), &config.cluster.name)
}

/// An absolute path k3d can mount: no `:` or `,` (k3d's volume syntax splits there), no
/// control characters, no `.`/`..` components, not `/` itself.
fn check_dir(dir: &str) -> Result<(), &'static str> {
    if !dir.starts_with('/') {
        return Err("is not an absolute path");
    }
    if dir.chars().any(|c| c.is_control() || c == ':' || c == ',') {
        return Err("may not hold ':', ',' or control characters (k3d's volume syntax)");
    }
    if dir.split('/').any(|c| c == "." || c == "..") {
        return Err("may not hold `.` or `..` components");
    }
    if dir.trim_end_matches('/').is_empty() {
        return Err("is the root directory");
    }
    Ok(())
}

/// The store's host directory as a short path: the configured one, or the default for
/// `cluster` written with its variable.
pub fn short(dir: Option<&str>, cluster: &str) -> String {
    match dir {
        Some(dir) => crate::escape::one_line(dir).into_owned(),
        None => format!("$XDG_DATA_HOME/k3d-gpu/models/{cluster}"),
    }
}

/// Where the store is on the host, in words, from a cluster spec's `model_store` (a recorded
/// one included): the configured path, or the default for `cluster` and what it falls back to.
pub fn describe(store: &Value, cluster: &str) -> String {
    let host = store["host"].as_str().map(|h| crate::escape::one_line(h).into_owned());
    match (store["dir"].as_str(), host) {
        (Some(dir), Some(host)) if dir.trim_end_matches('/') != host => {
            format!("{} (resolves to {host})", short(Some(dir), cluster))
        }
        (_, Some(host)) => host,
        (Some(dir), None) => short(Some(dir), cluster),
        (None, None) => {
            format!("{} (~/.local/share/k3d-gpu/models/{cluster} without XDG_DATA_HOME)", short(None, cluster))
        }
    }
}

/// The static local PersistentVolume of one server's directory in the store, and the PVC
/// changes that bind to it: storage class [`STORAGE_CLASS`] and `volumeName`. `keep` is the
/// keep-on-removal label's value; `store` the store's host directory ([`short`]).
pub fn bind(pvc: &mut Value, server: &str, storage: &str, keep: &str, labels: Value, store: &str) -> Value {
    let pv_name = format!("{}-{server}-models", super::workloads::NAMESPACE);
    let where_ = format!("{store}/{server}");
    pvc["spec"]["storageClassName"] = json!(STORAGE_CLASS);
    pvc["spec"]["volumeName"] = json!(pv_name);
    pvc["metadata"]["annotations"][HOST_DIR_ANNOTATION] = json!(where_);
    let mut labels = labels;
    labels[super::KEEP_LABEL] = json!(keep);
    json!({ "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": { "name": pv_name, "labels": labels,
            "annotations": { HOST_DIR_ANNOTATION: where_ } },
        "spec": {
            "capacity": { "storage": storage },
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            // Deleting the PV (or its claim) never deletes the files: a person does.
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            // A local volume, unlike a hostPath one, gets the pod's fsGroup (OVMS runs as
            // uid 5000). Every k3d node mounts the store, so any Linux node serves it.
            "local": { "path": format!("{NODE_DIR}/{server}") },
            "nodeAffinity": { "required": { "nodeSelectorTerms": [ { "matchExpressions": [
                { "key": "kubernetes.io/os", "operator": "In", "values": ["linux"] } ] } ] } },
        } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_dir_is_an_absolute_mountable_path() {
        assert!(check_dir("/srv/models").is_ok());
        assert!(check_dir("/home/me/.cache/k3d models").is_ok());
        for bad in ["srv/models", "~/models", "/srv/a:b", "/srv/a,b", "/srv/../etc", "/", "//", "/srv/\n"] {
            assert!(check_dir(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_store_is_described_by_its_variables() {
        let default = describe(&json!({ "dir": null }), "gpu");
        assert!(default.starts_with("$XDG_DATA_HOME/k3d-gpu/models/gpu"), "{default}");
        assert_eq!(describe(&json!({ "dir": "/srv/models" }), "gpu"), "/srv/models");
    }
}
