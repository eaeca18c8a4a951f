//! The test world the end-to-end tests share: a fake API server started like a fresh k3s, a
//! scratch directory, and a thread playing the cluster's controllers and kubelets (a `round`
//! that edits the server's state). The thread runs a round at the start and again after each
//! change to the server's state or each request it serves, never on a clock, until the
//! world is dropped; dropping it also removes the containers of its k3d cluster, if it has one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use super::fake_apiserver::{FakeApiServer, State};

pub struct World {
    pub dir: tempfile::TempDir,
    pub server: FakeApiServer,
    /// The k3d cluster whose containers (label `k3d.cluster`) go with the world.
    k3d_cluster: Option<String>,
    controllers: Controllers,
}

impl World {
    /// A fake API server serving `state`, a scratch directory, and `round` played as the
    /// controllers.
    pub fn start(state: State, round: impl FnMut(&mut State) + Send + 'static) -> World {
        World::start_in(tempfile::tempdir().unwrap(), state, round)
    }

    /// [`World::start`] with a scratch directory made first (a round that reads from it).
    pub fn start_in(dir: tempfile::TempDir, state: State, round: impl FnMut(&mut State) + Send + 'static) -> World {
        let server = FakeApiServer::start_in_background(state);
        let controllers = Controllers::play(&server, round);
        World { dir, server, k3d_cluster: None, controllers }
    }

    /// This world's containers are those of k3d cluster `name` (made by the k3d stub).
    pub fn with_cluster(mut self, name: &str) -> World {
        self.k3d_cluster = Some(name.into());
        self
    }

    /// The k3d cluster's name ([`World::with_cluster`]); empty without one.
    pub fn cluster(&self) -> &str {
        self.k3d_cluster.as_deref().unwrap_or_default()
    }

    /// `name` in the scratch directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// [`World::join`] as a string, for an argument.
    pub fn path(&self, name: &str) -> String {
        self.join(name).display().to_string()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.controllers.stop();
        let Some(cluster) = &self.k3d_cluster else { return };
        let filter = format!("label=k3d.cluster={cluster}");
        let Ok(ids) = std::process::Command::new("docker").args(["ps", "-aq", "--filter", &filter]).output() else {
            return;
        };
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = std::process::Command::new("docker").args(["rm", "-f", id]).output();
        }
    }
}

/// A thread that plays `round` against a fake API server, after each change to it.
pub struct Controllers {
    stop: Arc<AtomicBool>,
    server: FakeApiServer,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Controllers {
    pub fn play(server: &FakeApiServer, mut round: impl FnMut(&mut State) + Send + 'static) -> Controllers {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, handle) = (stop.clone(), server.handle());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async move {
                loop {
                    // Registered before the stop flag and the state are read, so neither a
                    // change nor the stop can fall between the round and the wait.
                    let changed = handle.changed();
                    tokio::pin!(changed);
                    changed.as_mut().enable();
                    if flag.load(Ordering::SeqCst) {
                        return;
                    }
                    // A round that changes the state wakes the wait at once: rounds repeat
                    // until one changes nothing, then wait for the client.
                    handle.change(&mut round);
                    changed.await;
                }
            });
        });
        Controllers { stop, server: server.handle(), thread: Some(thread) }
    }

    /// Stops the thread (after its current round) and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.wake();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The workload controllers' part: every DaemonSet and Deployment reports itself rolled out
/// at its current generation (one replica). Only the fields a controller writes are set; the
/// rest of a status a test set stays.
pub fn roll_out(s: &mut State) {
    for o in s.objects.iter_mut() {
        let generation = o["metadata"]["generation"].clone();
        let status = match o["kind"].as_str() {
            Some("DaemonSet") => {
                json!({"observedGeneration": generation, "desiredNumberScheduled": 1, "numberReady": 1, "updatedNumberScheduled": 1})
            }
            Some("Deployment") => {
                json!({"observedGeneration": generation, "replicas": 1, "availableReplicas": 1, "updatedReplicas": 1})
            }
            _ => continue,
        };
        for (k, v) in status.as_object().unwrap() {
            o["status"][k] = v.clone();
        }
    }
}

/// Whether a DaemonSet named `name` has been applied.
pub fn daemonset_applied(s: &State, name: &str) -> bool {
    s.objects.iter().any(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == name)
}

/// A device plugin's part: every node (those `on` picks) advertises `count` of `resource`.
pub fn advertise(s: &mut State, on: impl Fn(&str) -> bool, resource: &str, count: &str) {
    for n in s.nodes.iter_mut().filter(|n| on(n["metadata"]["name"].as_str().unwrap_or_default())) {
        n["status"]["allocatable"][resource] = json!(count);
    }
}
