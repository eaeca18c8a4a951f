//! Dispatches each plan action to the provider that owns it: the Docker engine for the node
//! image, k3d for the cluster, the Kubernetes API for node metadata and objects.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use kube::Client;
use serde_json::Value;
use tokio::sync::{Mutex, OnceCell};

use super::error::ApplyError;
use super::executor::Runner;
use super::{k3d, kubernetes};
use crate::plan::{Action, ActionKind, Target};

pub struct Providers {
    pub k3d: PathBuf,
    /// Where the generated k3d config files are written (kept for review).
    pub workdir: PathBuf,
    pub kubeconfig: PathBuf,
    pub cluster: String,
    /// An existing cluster's kubeconfig context (`[cluster] context`); `None`: k3d's
    /// `k3d-<cluster>`.
    pub context: Option<String>,
    client: OnceCell<Client>,
    /// Node metadata patches read and rewrite the managed-labels annotation: one at a time.
    nodes: Mutex<()>,
    /// An existing cluster's node changes, by node: the first action of a node applies all of
    /// them in one patch (`batch_nodes`), the others answer with its result.
    node_batches: std::sync::Mutex<BTreeMap<String, Vec<kubernetes::NodeChange>>>,
    node_results: std::sync::Mutex<BTreeMap<String, Result<(), std::sync::Arc<ApplyError>>>>,
    /// The Docker engine the node image is built or pulled in.
    pub docker: crate::observe::docker::Endpoint,
    /// Progress lines as JSON events (`--json`) rather than text.
    pub json: bool,
    /// The apply lock's file, which each k3d run inherits (`k3d::run_k3d`).
    pub lock: Option<std::fs::File>,
    /// The plurals of the CRDs this apply applied or deleted (`spec.names.plural`), so their
    /// custom resources are served under their real name without asking discovery.
    crds: std::sync::Mutex<crate::observe::resources::CrdPlurals>,
    /// The user's data directory, where the default host model store is (`k3d::data_home`).
    pub data_home: Option<PathBuf>,
    /// The config's directory: `[cluster.registries] credentials` is named relative to it.
    pub config_dir: PathBuf,
}

impl Providers {
    pub fn new(k3d: PathBuf, workdir: PathBuf, kubeconfig: PathBuf, cluster: String) -> Providers {
        let env = |k: &str| std::env::var(k).ok();
        Providers {
            k3d,
            workdir,
            kubeconfig,
            cluster,
            context: None,
            client: OnceCell::new(),
            nodes: Mutex::new(()),
            node_batches: std::sync::Mutex::default(),
            node_results: std::sync::Mutex::default(),
            docker: crate::observe::docker::endpoint(&env, None),
            json: false,
            lock: None,
            crds: std::sync::Mutex::default(),
            data_home: k3d::data_home(&env),
            config_dir: PathBuf::from("."),
        }
    }

    /// The cluster's client, made on first use (after k3d wrote the kubeconfig).
    pub async fn client(&self) -> Result<&Client, ApplyError> {
        self.client
            .get_or_try_init(|| async {
                match &self.context {
                    Some(context) => crate::observe::kubernetes::context_client(&self.kubeconfig, context).await,
                    None => crate::observe::kubernetes::client(&self.kubeconfig, &self.cluster).await,
                }
                .map_err(ApplyError::from)
            })
            .await
    }

    /// A client for verify's watches, which may be quiet for longer than a read deadline.
    pub async fn watch_client(&self) -> Result<Client, ApplyError> {
        match &self.context {
            Some(context) => crate::observe::kubernetes::context_watch_client(&self.kubeconfig, context).await,
            None => crate::observe::kubernetes::watch_client(&self.kubeconfig, &self.cluster).await,
        }
        .map_err(ApplyError::from)
    }

    async fn cluster(&self, action: &Action) -> Result<(), ApplyError> {
        let name = self.cluster.as_str();
        let lock = || self.lock.as_ref().and_then(|f| f.try_clone().ok());
        let file_error = |path: &std::path::Path, e: std::io::Error| ApplyError::File {
            what: path.display().to_string(),
            reason: e.to_string(),
        };
        // The config and whether it holds the registries' credentials (then it is removed once
        // k3d has read it: a password must not stay in the state directory after apply).
        let create = |spec: &Value| -> Result<(PathBuf, bool), ApplyError> {
            std::fs::create_dir_all(&self.workdir).map_err(|e| file_error(&self.workdir, e))?;
            let file = self.workdir.join(format!("{name}.k3d.json"));
            user_volume_sources(spec)?;
            let credentials = registry_credentials(spec, &self.config_dir, &self.workdir)?;
            let secret = credentials.is_some();
            let mut config = match credentials {
                Some(credentials) => k3d::with_credentials(k3d::simple_config(spec), spec, &credentials),
                None => k3d::simple_config(spec),
            };
            if !spec["model_store"].is_null() {
                // The host model store: made before k3d mounts it (compile/models.rs). The
                // directory the plan named (links resolved) where it names one.
                let short = match spec["model_store"]["host"].as_str() {
                    Some(host) => host.to_string(),
                    None => crate::compile::models::short(spec["model_store"]["dir"].as_str(), name),
                };
                let host = k3d::model_store_path(&short, self.data_home.as_deref())?;
                k3d::make_model_dir(&host)?;
                k3d::add_model_store(&mut config, spec, &host);
            }
            let text = serde_json::to_string_pretty(&config).unwrap_or_default() + "\n";
            // It can hold a k3s token or datastore credentials: readable by its owner only,
            // and never written through a link left in the state directory.
            crate::output_file::write(&file, text.as_bytes(), crate::output_file::PRIVATE)
                .map_err(|e| file_error(&file, e))?;
            Ok((file, secret))
        };
        match action.action {
            ActionKind::Create | ActionKind::Replace => {
                let spec = action.after.as_ref().ok_or("no desired spec")?;
                // Before k3d deletes the old cluster or creates one: a node image that cannot
                // start k3s stops here, with nothing changed.
                self.check_node_image(spec).await.map_err(|e| ApplyError::NodeImageUnfit { source: Box::new(e) })?;
                let (file, secret) = create(spec)?;
                let ran = async {
                    if action.action == ActionKind::Replace {
                        k3d::run_k3d(&self.k3d, &["cluster", "delete", name], k3d::CREATE_TIMEOUT, lock()).await?;
                    }
                    k3d::run_k3d(
                        &self.k3d,
                        &["cluster", "create", "--config", &file.display().to_string()],
                        k3d::CREATE_TIMEOUT,
                        lock(),
                    )
                    .await
                }
                .await;
                // Whatever k3d did: the password it read is in the nodes now, not here.
                if secret && let Err(e) = std::fs::remove_file(&file) {
                    crate::stderrln!(
                        "note: could not remove {}: {e}",
                        crate::escape::one_line(&file.display().to_string())
                    );
                }
                ran
            }
            ActionKind::Update => {
                k3d::run_k3d(&self.k3d, &["cluster", "start", name], k3d::CREATE_TIMEOUT, lock()).await
            }
            ActionKind::Delete => {
                k3d::run_k3d(&self.k3d, &["cluster", "delete", name], k3d::CREATE_TIMEOUT, lock()).await
            }
        }
    }

    /// The node image's self-check (`node_check`) on the image a cluster spec names.
    pub async fn check_node_image(&self, spec: &Value) -> Result<(), ApplyError> {
        let image = spec["image"].as_str().ok_or("the cluster spec names no node image")?;
        let required = crate::node_check::required(crate::node_check::nvidia_in(spec));
        let docker = crate::observe::docker::connect(&self.docker)?.with_timeout(super::node_check::CHECK_TIMEOUT);
        let verdict = super::node_check::check(&docker, image, &required).await?;
        if verdict.ok() {
            return Ok(());
        }
        Err(ApplyError::NodeImageRefused(verdict.refusal(image)))
    }

    async fn node_image(&self, action: &Action) -> Result<(), ApplyError> {
        let spec = action.after.as_ref().ok_or("no desired node image")?;
        // Observe's per-request deadline is seconds; a build or pull streams for minutes.
        let docker = crate::observe::docker::connect(&self.docker)?.with_timeout(super::node_image::BUILD_TIMEOUT);
        let id = action.id.as_str();
        let say = |line: &str| {
            if self.json {
                crate::stderrln!("{}", serde_json::json!({ "event": "progress", "id": id, "text": line }));
            } else {
                crate::stderrln!("           {id} | {line}");
            }
        };
        super::node_image::run(&docker, spec, &say).await
    }

    /// Groups the per-node label and annotation actions of an existing cluster (those whose
    /// spec names a node), so each node costs one GET and one PATCH rather than two requests
    /// per label.
    pub fn batch_nodes(&self, actions: &[Action]) {
        let mut batches = self.node_batches.lock().unwrap_or_else(|p| p.into_inner());
        for action in actions {
            let label = action.id.starts_with("node-label/");
            if !label && !action.id.starts_with("node-annotation/") {
                continue;
            }
            let Some(spec) = action.after.as_ref().or(action.before.as_ref()) else { continue };
            let (Some(node), Some(key)) = (spec["node"].as_str(), spec["key"].as_str()) else { continue };
            let value = match action.action {
                ActionKind::Delete => None,
                _ => Some(spec["value"].as_str().unwrap_or_default().to_string()),
            };
            batches.entry(node.to_string()).or_default().push(kubernetes::NodeChange {
                label,
                key: key.to_string(),
                value,
                claim: action.action == ActionKind::Create,
            });
        }
    }

    async fn node_metadata(&self, action: &Action, label: bool) -> Result<(), ApplyError> {
        let client = self.client().await?;
        let _one_at_a_time = self.nodes.lock().await;
        let node = action.after.as_ref().or(action.before.as_ref()).and_then(|s| s["node"].as_str());
        if let Some(node) = node {
            if let Some(done) = self.node_results.lock().unwrap_or_else(|p| p.into_inner()).get(node) {
                return done.clone().map_err(ApplyError::Shared);
            }
            let batch = self.node_batches.lock().unwrap_or_else(|p| p.into_inner()).remove(node);
            if let Some(changes) = batch {
                let result = kubernetes::node_changes(client, node, &changes).await.map_err(std::sync::Arc::new);
                self.node_results.lock().unwrap_or_else(|p| p.into_inner()).insert(node.to_string(), result.clone());
                return result.map_err(ApplyError::Shared);
            }
        }
        let spec = action.after.as_ref().or(action.before.as_ref()).ok_or("no key")?;
        let key = spec["key"].as_str().ok_or("no key")?;
        let value = match action.action {
            ActionKind::Delete => None,
            _ => Some(spec["value"].as_str().unwrap_or_default()),
        };
        // An existing cluster's labels are per node (`spec.node`); k3d's are on every node.
        let only = spec["node"].as_str();
        kubernetes::node_metadata(client, label, key, value, action.action == ActionKind::Create, only).await
    }

    async fn object(&self, action: &Action) -> Result<(), ApplyError> {
        let client = self.client().await?;
        // A CRD runs before the custom resources that depend on it: learn its plural first.
        let learned = action.after.as_ref().or(action.before.as_ref()).and_then(crate::observe::resources::crd_plural);
        let crds = {
            let mut crds = self.crds.lock().unwrap_or_else(|p| p.into_inner());
            crds.extend(learned);
            crds.clone()
        };
        match action.action {
            ActionKind::Delete => {
                kubernetes::delete(client, action.before.as_ref().ok_or("nothing observed to delete")?, &crds).await
            }
            kind => {
                let object = action.after.as_ref().ok_or("no desired object")?;
                if object["kind"] == "PersistentVolume"
                    && let Some(dir) =
                        object["metadata"]["annotations"][crate::compile::models::HOST_DIR_ANNOTATION].as_str()
                {
                    // A local volume's path must exist before a pod mounts it.
                    k3d::make_model_dir(&k3d::model_store_path(dir, self.data_home.as_deref())?)?;
                }
                if kind == ActionKind::Replace {
                    return kubernetes::replace(client, object, &crds).await;
                }
                kubernetes::apply(client, object, kind == ActionKind::Create, &crds).await
            }
        }
    }
}

impl Runner for Providers {
    fn run<'a>(&'a self, action: &'a Action) -> Pin<Box<dyn Future<Output = Result<(), ApplyError>> + Send + 'a>> {
        Box::pin(async move {
            // Routed on the typed target: an object's comes from the object the action carries,
            // which must give the action's id back (crate::plan::target).
            match action.target().map_err(|e| ApplyError::Malformed(e.to_string()))? {
                Target::NodeImage => self.node_image(action).await,
                Target::Cluster { .. } => self.cluster(action).await,
                Target::NodeLabel { .. } => self.node_metadata(action, true).await,
                Target::NodeAnnotation { .. } => self.node_metadata(action, false).await,
                Target::Object(_) => self.object(action).await,
            }
        })
    }
}

/// `[cluster] volumes` sources, checked again right before k3d runs: one removed since the
/// plan would be created by Docker as an empty directory owned by root.
fn user_volume_sources(spec: &Value) -> Result<(), ApplyError> {
    for volume in spec["user_volumes"].as_array().into_iter().flatten() {
        let host = volume["host"].as_str().unwrap_or_default();
        if std::fs::metadata(host).is_err() {
            return Err(ApplyError::VolumeSourceMissing { host: host.to_string() });
        }
    }
    Ok(())
}

/// The credentials file the spec names, read again and checked against the digest the plan
/// recorded, so what k3d writes into the nodes is what was reviewed (as a digest).
fn registry_credentials(
    spec: &Value,
    config_dir: &std::path::Path,
    key_dir: &std::path::Path,
) -> Result<Option<super::registries::Credentials>, ApplyError> {
    let named = &spec["registries"]["credentials"];
    let Some(file) = named["file"].as_str() else { return Ok(None) };
    let path = config_dir.join(file);
    let what = || format!("credentials file {}", path.display());
    let unusable = |reason: String| ApplyError::File { what: what(), reason };
    // Confined as plan confined it: a link swapped in since the plan is not followed out of
    // the repository.
    let boundary = crate::input_file::repository_of(config_dir)
        .map_err(|e| unusable(crate::input_file::Unconfined::ConfigDir(e.kind()).to_string()))?;
    let resolved = crate::input_file::resolve_within(&boundary, config_dir, std::path::Path::new(file))
        .map_err(|e| unusable(e.to_string()))?;
    let text = crate::input_file::read_text(&resolved).map_err(|e| unusable(e.to_string()))?;
    let credentials = super::registries::Credentials::parse(&text).map_err(|e| unusable(e.to_string()))?;
    let key = super::registries::machine_key(key_dir).map_err(|e| ApplyError::File {
        what: format!("the credentials digest key in {}", key_dir.display()),
        reason: e.to_string(),
    })?;
    if Some(credentials.digest(&key).as_str()) != named["digest"].as_str() {
        return Err(ApplyError::ChangedSincePlan { what: what() });
    }
    Ok(Some(credentials))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credentials_file_that_became_a_link_out_of_the_repository_is_not_read_at_apply() {
        let top = tempfile::tempdir().unwrap();
        let repo = top.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let outside = top.path().join("secret.yaml");
        std::fs::write(&outside, "configs: {}\n").unwrap();
        std::os::unix::fs::symlink(&outside, repo.join("auth.yaml")).unwrap();
        let spec = serde_json::json!({"registries": {"credentials": {"file": "auth.yaml", "digest": "x"}}});
        let keys = top.path().join("state");
        let refused = registry_credentials(&spec, &repo, &keys).map(|_| ()).unwrap_err().to_string();
        assert!(refused.contains("leads outside") && refused.contains("auth.yaml"), "{refused}");
        // The same file inside the repository is read (and then judged by its digest).
        std::fs::remove_file(repo.join("auth.yaml")).unwrap();
        std::fs::copy(&outside, repo.join("auth.yaml")).unwrap();
        let read = registry_credentials(&spec, &repo, &keys).map(|_| ()).unwrap_err().to_string();
        assert!(!read.contains("leads outside"), "{read}");
    }
}
