//! The plan: desired graph + observed state → the actions that make one into the other, each
//! with a reason, as plan/v1 JSON whose canonical bytes hash to the plan hash. Pure.

pub mod attributes;
mod diff;
pub mod digest;
pub mod fleet;
pub mod immutable;
mod live;
pub mod render;
pub mod target;

pub use target::{ObjectRef, Target, TargetError};

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::compile::{Change, DesiredGraph, Resource, ResourceKind, Warning};
use crate::observed::{MANAGED_LABELS_ANNOTATION, Observed};

use diff::{changed_keys, owned_differences, project};
use live::{Live, Seen};

pub const SCHEMA: &str = "k3d-gpu.plan/v1";

/// Digests of everything the plan was computed from, so a refusal can say which changed.
/// Fields in sorted order, like every struct of the plan (see `Action`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inputs {
    pub config: String,
    pub facts: String,
    /// Digest of how each deployed image is pinned (images.lock is a plan input).
    pub images: String,
    /// The options the plan was made with, so `apply PLANFILE` given none reads the same
    /// files. Absent when none was given (the defaults: ./k3dgpu.toml, the host at `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_from: Option<MadeFrom>,
    pub observed: String,
    /// An existing cluster's config name (`[cluster] name`): the plan touches only the
    /// objects and nodes stamped with it (`compile::fleet::CONFIG_LABEL`), so two configs on
    /// one cluster do not delete each other's. Absent for k3d, whose cluster is the config's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub stdlib: String,
    pub tool_version: String,
}

impl Inputs {
    /// The digests of what a plan of `graph` is computed from, and this tool's version. The
    /// observed state is digested as the plan's decisions read it ([`digest`]).
    pub fn new(
        config: &crate::config::Config,
        facts: &impl Serialize,
        observed: &Observed,
        stdlib: String,
        graph: &DesiredGraph,
    ) -> Inputs {
        Inputs {
            config: crate::canonical::digest(config),
            facts: crate::canonical::digest(facts),
            made_from: None,
            observed: digest::observed_digest(Some(graph), observed),
            owner: None,
            stdlib,
            images: crate::canonical::digest(&graph.images),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// A destroy plan's inputs: it reads neither facts nor the catalog.
    pub fn for_destroy(config: &crate::config::Config, observed: &Observed) -> Inputs {
        Inputs {
            config: crate::canonical::digest(config),
            owner: None,
            made_from: None,
            facts: "none: destroy reads no facts".into(),
            observed: digest::observed_digest(None, observed),
            stdlib: "none: destroy uses no component".into(),
            images: "none: destroy deploys no image".into(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// The command-line inputs of a plan: `-c`, `--root`, `--facts`, `--stdlib` and `--vendors`
/// as given (the paths relative to the working directory the plan was made in), so a saved
/// plan carries what it was made from, as `terraform apply PLANFILE` needs no flags. Part of
/// the hashed bytes: a plan is of these files. Fields sorted, like every struct of the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MadeFrom {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdlib: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendors: Option<String>,
}

impl MadeFrom {
    /// Nothing given: every default.
    pub fn is_empty(&self) -> bool {
        *self == MadeFrom::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    Create,
    Update,
    Replace,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub code: String,
    pub text: String,
}

// The fields of the plan's structs are declared in sorted order: serialised as they are,
// their bytes are already canonical, with no copy into a `Value` tree first (that copy was
// most of the hash's time on a plan of 10,000 objects). `plan_bytes_are_canonical` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub action: ActionKind,
    pub after: Option<Value>,
    pub before: Option<Value>,
    /// For an update: the owned fields that differ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_paths: Vec<String>,
    pub depends_on: Vec<String>,
    pub id: String,
    pub reason: Reason,
    /// For a replace: the creation-time properties that force it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replace_paths: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub create: usize,
    pub delete: usize,
    pub replace: usize,
    pub update: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub inputs: Inputs,
    pub schema: String,
    pub summary: Summary,
    /// Checks to run after the actions (only those that depend on something that changes).
    pub verify: Vec<String>,
    /// `Warning` (compile's) declares its fields unsorted; few, so sorted through a `Value`.
    #[serde(serialize_with = "sorted_warnings")]
    pub warnings: Vec<Warning>,
}

fn sorted_warnings<S: serde::Serializer>(warnings: &[Warning], s: S) -> Result<S::Ok, S::Error> {
    let tree = serde_json::to_value(warnings).map_err(serde::ser::Error::custom)?;
    tree.serialize(s)
}

/// Bytes written as a list of the pieces given (each a buffer's worth, 64 KiB).
struct Pieces(Vec<Vec<u8>>);

impl std::io::Write for Pieces {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push(buf.to_vec());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Action {
    /// An action with no paths and no dependencies yet (the plan adds those at the end).
    fn new(id: String, action: ActionKind, reason: Reason, before: Option<Value>, after: Option<Value>) -> Action {
        Action {
            id,
            action,
            reason,
            replace_paths: Vec::new(),
            changed_paths: Vec::new(),
            depends_on: Vec::new(),
            before,
            after,
        }
    }
}

impl Plan {
    /// The canonical bytes (`canonical::to_bytes` gives the same; see the field order above).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.print_to(&mut bytes).expect("a plan always serialises");
        bytes
    }

    /// Writes the canonical bytes into `out` as they are made, giving their `sha256:`: a
    /// plan of 100k deletes is 67 MB of JSON never held whole.
    pub fn write_to(&self, out: impl std::io::Write) -> std::io::Result<String> {
        crate::canonical::write_presorted(out, self)
    }

    /// [`Plan::write_to`] without the hash: bytes only printed.
    pub fn print_to(&self, out: impl std::io::Write) -> std::io::Result<()> {
        crate::canonical::print_presorted(out, self)
    }

    /// `sha256:` of the canonical bytes.
    pub fn hash(&self) -> String {
        crate::canonical::digest_presorted(self)
    }

    /// [`Plan::to_bytes`] of a plan no longer needed: each action is freed once it is
    /// written, so the bytes grow as the plan shrinks and the two are never both whole in
    /// memory (the MCP server's answer holds the bytes; a plan of 20k deletes is ten times
    /// their size as a tree).
    pub fn into_bytes(self) -> Vec<u8> {
        // Every field named: a field added to `Plan` and not here does not compile.
        let Plan { actions, inputs, schema, summary, verify, warnings } = self;
        #[derive(Serialize)]
        struct Written<'a> {
            actions: Draining,
            inputs: &'a Inputs,
            schema: &'a str,
            summary: &'a Summary,
            verify: &'a [String],
            #[serde(serialize_with = "sorted_warnings")]
            warnings: &'a [Warning],
        }
        /// The actions, each dropped once serialised (serialising takes `&self`, hence the cell).
        struct Draining(std::cell::RefCell<std::vec::IntoIter<Action>>);
        impl Serialize for Draining {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeSeq;
                let mut actions = self.0.borrow_mut();
                let mut seq = serializer.serialize_seq(Some(actions.len()))?;
                for action in actions.by_ref() {
                    seq.serialize_element(&action)?;
                }
                seq.end()
            }
        }
        let written = Written {
            actions: Draining(std::cell::RefCell::new(actions.into_iter())),
            inputs: &inputs,
            schema: &schema,
            summary: &summary,
            verify: &verify,
            warnings: &warnings,
        };
        // Gathered in pieces the size of what is freed, which the allocator hands out again
        // from the plan's own freed memory; one contiguous buffer would be fresh pages while
        // the freed ones stay resident.
        let mut pieces = Pieces(Vec::new());
        crate::canonical::print_presorted(&mut pieces, &written).expect("a plan always serialises");
        drop(written);
        let mut bytes = Vec::with_capacity(pieces.0.iter().map(Vec::len).sum());
        for piece in pieces.0 {
            bytes.extend_from_slice(&piece);
        }
        bytes
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    pub fn replaces_cluster(&self) -> bool {
        self.actions.iter().any(|a| a.action == ActionKind::Replace)
    }
}

/// A cluster spec volume as Docker shows the bind (`host:node[:ro]`): what apply asks k3d
/// for and what the plan looks for among a node's mounts, so the two cannot drift.
pub fn bind_mount(volume: &Value) -> String {
    let ro = if volume["read_only"] == true { ":ro" } else { "" };
    format!("{}:{}{ro}", volume["host"].as_str().unwrap_or_default(), volume["node"].as_str().unwrap_or_default())
}

fn reason(code: &str, text: impl Into<String>) -> Reason {
    Reason { code: code.into(), text: text.into() }
}

/// Computes the plan.
pub fn plan(graph: &DesiredGraph, observed: &Observed, inputs: Inputs) -> Plan {
    let objects = observed.kubernetes.as_ref().map_or(&[][..], |k| &k.objects[..]);
    plan_with(graph, observed, objects, inputs).finish(|i| digest::without_volatile(&objects[i]))
}

/// [`plan`] of an observation the caller no longer needs: each deleted object's `before`
/// is the observed object itself, moved, rather than a copy (an observation of 100k objects
/// to delete would otherwise be in memory twice, as a tree).
pub fn plan_owned(graph: &DesiredGraph, mut observed: Observed, inputs: Inputs) -> Plan {
    let mut objects = observed.kubernetes.as_mut().map(|k| std::mem::take(&mut k.objects)).unwrap_or_default();
    let draft = plan_with(graph, &observed, &objects, inputs);
    draft.finish(|i| digest::strip_volatile(std::mem::take(&mut objects[i])))
}

/// A plan before its deleted objects' `before`s are filled in: made while the observed
/// objects are read, finished once they can be moved.
struct Draft {
    inputs: Inputs,
    /// Every action but the deletes of observed objects.
    actions: BTreeMap<String, Action>,
    /// The deletes of observed objects, in id order, each with its object's index.
    deletes: Vec<(Action, usize)>,
    verify: Vec<String>,
    warnings: Vec<Warning>,
}

impl Draft {
    /// The plan, each deleted object's `before` given by `before_of` its index: the object
    /// less what the server changes by itself (a rollout of what is being deleted does not
    /// change the plan). The two sorted lists of actions are merged, not re-sorted.
    fn finish(self, mut before_of: impl FnMut(usize) -> Value) -> Plan {
        // Each delete's `before` is masked as it is made, while the object is still in the
        // cache from being stripped (a second pass over 100k objects misses it again).
        let mut deletes = self
            .deletes
            .into_iter()
            .map(|(mut action, index)| {
                action.before = Some(before_of(index));
                crate::secrets::mask_pair(&mut action.before, &mut action.after);
                action
            })
            .peekable();
        let mut actions = Vec::with_capacity(self.actions.len() + deletes.len());
        for mut action in self.actions.into_values() {
            crate::secrets::mask_pair(&mut action.before, &mut action.after);
            while let Some(delete) = deletes.next_if(|d| d.id < action.id) {
                actions.push(delete);
            }
            // One id twice: the delete stands, as the last word (it never happens: an object
            // deleted is one the graph does not have).
            match deletes.next_if(|d| d.id == action.id) {
                Some(delete) => actions.push(delete),
                None => actions.push(action),
            }
        }
        actions.extend(deletes);
        assemble(self.inputs, actions, self.verify, self.warnings)
    }
}

/// The plan of `objects` (the observed objects, which `observed` may no longer hold).
fn plan_with(graph: &DesiredGraph, observed: &Observed, objects: &[Value], inputs: Inputs) -> Draft {
    let owner = inputs.owner.clone();
    let mut warnings = graph.warnings.clone();
    let mut actions: BTreeMap<String, Action> = BTreeMap::new();
    let mut deletes = Vec::new();
    if let Some(image) = graph.resources().find(|r| r.kind == ResourceKind::NodeImage)
        && let Some(a) = node_image_action(image, observed)
    {
        actions.insert(a.id.clone(), a);
    }
    let cluster = graph.resources().find(|r| r.kind == ResourceKind::Cluster);
    let fresh = match cluster {
        Some(c) => cluster_action(c, observed, &mut warnings).map(|a| {
            let fresh = matches!(a.action, ActionKind::Create | ActionKind::Replace);
            actions.insert(a.id.clone(), a);
            fresh
        }),
        None => None,
    }
    .unwrap_or(false);

    if fresh {
        // A new cluster has nothing in it: everything else is created.
        let why = if actions.values().any(|a| a.action == ActionKind::Replace) {
            reason("cluster-replaced", "the cluster is recreated, so this is created anew")
        } else {
            reason("cluster-created", "created with the new cluster")
        };
        for r in graph.resources().filter(|r| r.change == Change::InPlace) {
            actions.insert(r.id.clone(), create(r, why.clone()));
        }
    } else {
        if fleet::is_fleet(graph) {
            fleet::node_actions(graph, observed, owner.as_deref(), &mut actions, &mut warnings);
        } else {
            node_metadata_actions(graph, observed, &mut actions);
        }
        let seen: Vec<Seen> = objects.iter().map(Seen::of).collect();
        deletes = object_actions(graph, objects, &seen, owner.as_deref(), &mut actions, &mut warnings);
        order_deletes(&mut deletes, &seen);
    }

    // Dependencies between actions: the nearest ancestors that also change (an action of
    // something not in the graph, an observed object to delete, has none). One pass over the
    // graph in dependency order (walking each resource's ancestors was quadratic in a fleet).
    let nearest = NearestChanged::new(graph, |id| actions.contains_key(id));
    for action in actions.values_mut() {
        action.depends_on = nearest.of(graph, &action.id);
    }

    let verify: Vec<String> = graph
        .resources()
        .filter(|r| r.change == Change::Verify)
        .filter(|r| nearest.any(graph, &r.id))
        .map(|r| r.id.clone())
        .collect();

    Draft { inputs, actions, deletes, verify, warnings }
}

/// `destroy` will not delete a cluster whose nodes carry no recorded spec: k3d-gpu did not
/// create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotManaged;

/// The plan `destroy` runs: delete the observed cluster, if there is one and k3d-gpu created
/// it. It needs no graph, so a host whose facts no longer fit the config can still destroy.
pub fn destroy(observed: &Observed, inputs: Inputs) -> Result<Plan, NotManaged> {
    let mut actions = match &observed.cluster {
        None => Vec::new(),
        Some(cluster) => {
            let recorded = cluster.nodes.iter().find_map(|n| n.recorded_spec.clone()).ok_or(NotManaged)?;
            vec![Action::new(
                format!("k3d/cluster/{}", cluster.name),
                ActionKind::Delete,
                reason("destroy", format!("k3d-gpu destroy: delete cluster {} and everything in it", cluster.name)),
                Some(recorded),
                None,
            )]
        }
    };
    // The host model store is never deleted with the cluster: the plan says where it is.
    let warnings = observed
        .cluster
        .iter()
        .flat_map(|c| c.nodes.iter().find_map(|n| n.recorded_spec.clone()).map(|s| (c.name.clone(), s)))
        .filter(|(_, spec)| !spec["model_store"].is_null())
        .map(|(name, spec)| Warning {
            code: "models-kept".into(),
            text: format!(
                "the host model store {} is not deleted: it keeps the downloaded models for the next cluster. Delete that directory yourself when no model in it is needed",
                crate::compile::models::describe(&spec["model_store"], &name)
            ),
            key: Some("agent.model_dir".into()),
        })
        .collect();
    for a in &mut actions {
        crate::secrets::mask_pair(&mut a.before, &mut a.after);
    }
    Ok(assemble(inputs, actions, Vec::new(), warnings))
}

/// The plan document from its actions, whose secrets are masked already
/// (`secrets::mask_pair`): counts summed, warnings sorted.
fn assemble(inputs: Inputs, actions: Vec<Action>, verify: Vec<String>, mut warnings: Vec<Warning>) -> Plan {
    let mut summary = Summary::default();
    for a in &actions {
        match a.action {
            ActionKind::Create => summary.create += 1,
            ActionKind::Update => summary.update += 1,
            ActionKind::Replace => summary.replace += 1,
            ActionKind::Delete => summary.delete += 1,
        }
    }
    warnings.sort();
    warnings.dedup();
    Plan { schema: SCHEMA.into(), inputs, actions, verify, warnings, summary }
}

fn create(r: &Resource, why: Reason) -> Action {
    Action::new(r.id.clone(), ActionKind::Create, why, None, Some(r.spec.clone()))
}

/// The node image: build it when the engine has no image of that name whose build-inputs
/// label matches (or nothing was observed), pull a prebuilt one that is missing, else nothing.
fn node_image_action(desired: &Resource, observed: &Observed) -> Option<Action> {
    let reference = desired.spec["reference"].as_str().unwrap_or_default();
    let build = desired.spec["source"] == "build";
    let seen = observed.node_image.as_ref().filter(|i| i.reference == reference);
    let why = match seen {
        None => reason(
            "not-observed",
            format!("{reference}: the local engine was not asked (offline or a saved observation)"),
        ),
        Some(i) if !i.present => reason("absent", format!("{reference} is not in the local engine")),
        Some(i) if build && i.build_inputs.as_deref() != desired.spec["digest"].as_str() => reason(
            "build-inputs-differ",
            format!(
                "{reference} carries build inputs {}, wanted {}",
                i.build_inputs.as_deref().unwrap_or("(no label)"),
                desired.spec["digest"].as_str().unwrap_or_default()
            ),
        ),
        Some(_) => return None,
    };
    let what = if build {
        match desired.spec["context"].as_str() {
            Some("shipped") | None => "build from the Dockerfile k3d-gpu ships".to_string(),
            Some(dir) => format!("build from {dir}"),
        }
    } else {
        "pull".to_string()
    };
    let why = Reason { text: format!("{}: {what}", why.text), ..why };
    Some(Action::new(desired.id.clone(), ActionKind::Create, why, None, Some(desired.spec.clone())))
}

/// Which build inputs of the node image changed, as a sentence.
fn changed_inputs(before: &Value, after: &Value) -> String {
    let empty = serde_json::Map::new();
    let (b, a) = (before.as_object().unwrap_or(&empty), after.as_object().unwrap_or(&empty));
    let mut names: Vec<&str> =
        a.keys().chain(b.keys()).filter(|k| a.get(*k) != b.get(*k)).map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    format!(
        "node image build inputs changed: {}",
        if names.is_empty() { "none recorded".into() } else { names.join(", ") }
    )
}

/// The cluster: create, replace (a creation-time property changed), start, or nothing.
fn cluster_action(desired: &Resource, observed: &Observed, warnings: &mut Vec<Warning>) -> Option<Action> {
    let name = desired.spec["name"].as_str().unwrap_or_default();
    let exists = observed.cluster.as_ref().is_some_and(|c| c.name == name);
    let Some(server) = observed.server().filter(|_| exists) else {
        return Some(create(desired, reason("absent", format!("cluster {name} does not exist"))));
    };
    let image = desired.spec["image"].as_str().unwrap_or_default();
    let mut paths = Vec::new();
    let mut texts = Vec::new();
    // Labels record secrets as digests: compared as digests (an older clear label too).
    let desired_recorded = crate::secrets::digest_secrets(&desired.spec);
    match &server.recorded_spec {
        Some(recorded) => {
            let (desired_compared, recorded_compared) =
                comparable(&desired_recorded, &crate::secrets::digest_secrets(recorded));
            for key in changed_keys(&desired_compared, &recorded_compared) {
                if key == "devices" && recorded.get("devices").is_none() {
                    // Made by a k3d-gpu that recorded no devices: no replace on a guess.
                    warnings.push(Warning {
                        code: "node-devices-unrecorded".into(),
                        text: format!(
                            "cluster {name} was made by an older k3d-gpu, which recorded no device nodes: a driver loaded or a card added since its nodes were created is not seen here, and its nodes may lack them. `k3d-gpu destroy` and a new apply make nodes with this host's devices"
                        ),
                        key: Some("cluster".into()),
                    });
                    continue;
                }
                texts.push(match key.as_str() {
                    "image" => format!("node image differs ({} → {image})", server.image),
                    "node_image_inputs" => {
                        changed_inputs(&recorded["node_image_inputs"], &desired.spec["node_image_inputs"])
                    }
                    "k3s_args" => "k3s args changed".to_string(),
                    "volumes" => "host mounts changed".to_string(),
                    "model_store" => "the host model store's mount changed".to_string(),
                    "gpus" => "--gpus changed".to_string(),
                    "ports" => "published ports ([cluster] ports) changed".to_string(),
                    "user_volumes" => "host directories ([cluster] volumes) changed".to_string(),
                    "registries" => "registries ([cluster.registries]) changed".to_string(),
                    "devices" => changed_devices(&recorded["devices"], &desired.spec["devices"]),
                    other => format!("{other} changed"),
                });
                paths.push(key);
            }
        }
        None => {
            // A cluster k3d-gpu did not create: check what it needs is there.
            if server.image != image {
                texts.push(format!("node image differs ({} → {image})", server.image));
                paths.push("image".into());
            }
            if desired.spec["gpus"].is_string() && server.gpus.is_none() {
                texts.push("nodes were created without --gpus all".into());
                paths.push("gpus".into());
            }
            for arg in desired.spec["k3s_args"].as_array().into_iter().flatten() {
                let applies_to_server = matches!(arg["nodes"].as_str(), Some("server:*") | Some("all"));
                let text = arg["arg"].as_str().unwrap_or_default();
                if applies_to_server && !server.k3s_args.iter().any(|a| a == text) {
                    texts.push(format!("k3s arg {text} added"));
                    paths.push("k3s_args".into());
                }
            }
            // Of the user's, those on the server (no filter, or one naming servers or all).
            let on_server = |v: &&Value| {
                let filters = v["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
                filters.is_empty()
                    || filters
                        .iter()
                        .filter_map(|f| f.as_str())
                        .any(|f| f.starts_with("server") || f.starts_with("all"))
            };
            let user_volumes = desired.spec["user_volumes"].as_array().into_iter().flatten().filter(on_server);
            for volume in desired.spec["volumes"].as_array().into_iter().flatten().chain(user_volumes) {
                let mount = bind_mount(volume);
                if !server.mounts.contains(&mount) {
                    texts.push(format!("host mount {mount} added"));
                    paths.push("volumes".into());
                }
            }
        }
    }
    if let Some(id) = observed.cluster.as_ref().and_then(|c| c.configured_image_id.as_ref())
        && server.image == image
        && server.image_id != *id
    {
        texts.push(format!("the tag {image} now names a different local image (re-pulled)"));
        paths.push("image".into());
    }
    if server.image_version.is_none() {
        warnings.push(Warning {
            code: "unversioned-node-image".into(),
            text: format!(
                "the cluster's node image {} carries no org.opencontainers.image.version label",
                server.image
            ),
            key: Some("cluster.image".into()),
        });
    }
    paths.sort();
    paths.dedup();
    if !paths.is_empty() {
        return Some(Action {
            replace_paths: paths,
            ..Action::new(
                desired.id.clone(),
                ActionKind::Replace,
                reason(
                    "creation-property-changed",
                    format!(
                        "{}: k3d fixes these at creation, so the cluster is recreated, which deletes its state{}",
                        texts.join("; "),
                        models_on_replace(server.recorded_spec.as_ref(), &desired.spec, name)
                    ),
                ),
                server.recorded_spec.clone().or_else(|| Some(json!({ "image": server.image }))),
                // Digested as the recorded one is, so the mask shows which secret changed.
                Some(desired_recorded),
            )
        });
    }
    let stopped = observed.cluster.iter().flat_map(|c| &c.nodes).any(|n| !n.running);
    stopped.then(|| {
        Action::new(
            desired.id.clone(),
            ActionKind::Update,
            reason("stopped", "node containers are stopped: start the cluster"),
            None,
            None,
        )
    })
}

/// The desired and recorded specs as they can be compared: where either side's model store
/// lacks its resolved `host`, both are compared without it. A cluster made by a k3d-gpu that
/// recorded the store as configured only is not replaced by an upgrade alone, nor is one
/// planned where the store cannot be resolved (HOME unset: cron, a scrubbed MCP environment).
fn comparable(desired: &Value, recorded: &Value) -> (Value, Value) {
    let (mut desired, mut recorded) = (desired.clone(), recorded.clone());
    let lacks_host = |spec: &Value| spec["model_store"].is_object() && spec["model_store"].get("host").is_none();
    if lacks_host(&desired) || lacks_host(&recorded) {
        for spec in [&mut desired, &mut recorded] {
            if let Some(store) = spec["model_store"].as_object_mut() {
                store.remove("host");
            }
        }
    }
    (desired, recorded)
}

/// What changed in the host's devices since the nodes were made, per vendor: the device nodes
/// gained and lost and the drivers before and after (`intel: +/dev/dri/renderD129`).
fn changed_devices(recorded: &Value, desired: &Value) -> String {
    let list = |v: &Value, vendor: &str, field: &str| -> Vec<String> {
        v[vendor][field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(|s| crate::escape::one_line(s).into_owned()))
            .collect()
    };
    let empty = serde_json::Map::new();
    let (r, d) = (recorded.as_object().unwrap_or(&empty), desired.as_object().unwrap_or(&empty));
    let mut vendors: Vec<&String> = r.keys().chain(d.keys()).collect();
    vendors.sort();
    vendors.dedup();
    let mut parts = Vec::new();
    for vendor in vendors.into_iter().filter(|v| r.get(*v) != d.get(*v)) {
        let (before, after) = (list(recorded, vendor, "nodes"), list(desired, vendor, "nodes"));
        let mut change: Vec<String> = after.iter().filter(|n| !before.contains(n)).map(|n| format!("+{n}")).collect();
        change.extend(before.iter().filter(|n| !after.contains(n)).map(|n| format!("-{n}")));
        let (was, now) = (list(recorded, vendor, "drivers"), list(desired, vendor, "drivers"));
        if was != now {
            let shown = |d: &[String]| if d.is_empty() { "none".to_string() } else { d.join(",") };
            change.push(format!("driver {} → {}", shown(&was), shown(&now)));
        }
        let vendor = crate::escape::one_line(vendor);
        parts.push(if change.is_empty() {
            format!("{vendor} changed")
        } else {
            format!("{vendor} {}", change.join(" "))
        });
    }
    format!(
        "the host's devices changed since the nodes were made ({}); Docker fixes a node's devices when it creates it, so its device plugin would not see them",
        parts.join("; ")
    )
}

/// What a replace does to the models (issue 27): kept in the host model store when the old
/// cluster mounted the same store, else what happens to them.
fn models_on_replace(recorded: Option<&Value>, desired: &Value, cluster: &str) -> String {
    use crate::compile::models::{NODE_DIR, describe};
    let wanted = &desired["model_store"];
    if wanted.is_null() {
        return String::new();
    }
    let here = describe(wanted, cluster);
    match recorded.map(|r| &r["model_store"]) {
        Some(old)
            if old["dir"] == wanted["dir"]
                && (old.get("host").is_none() || wanted.get("host").is_none() || old["host"] == wanted["host"]) =>
        {
            format!(
                ". The models are kept: they are in the host model store {here}, which the new nodes mount again at {NODE_DIR}"
            )
        }
        Some(old) if !old.is_null() => format!(
            ". The models in the old store {} stay on the host, not used; the new cluster keeps its models in {here}",
            describe(old, cluster)
        ),
        _ => format!(
            ". The old cluster kept its models inside its volumes, so they go with it; the new cluster keeps them in the host model store {here}, where the next rebuild finds them"
        ),
    }
}

/// Node labels and annotations: compared on every node; ours are listed in an annotation so
/// only those are ever deleted.
fn node_metadata_actions(graph: &DesiredGraph, observed: &Observed, actions: &mut BTreeMap<String, Action>) {
    let nodes = observed.kubernetes.as_ref().map(|k| k.nodes.as_slice()).unwrap_or_default();
    for (kind, prefix) in [(ResourceKind::NodeLabel, "node-label/"), (ResourceKind::NodeAnnotation, "node-annotation/")]
    {
        let current = |n: &crate::observed::ObservedNode, key: &str| -> Option<String> {
            if kind == ResourceKind::NodeLabel { n.labels.get(key).cloned() } else { n.annotations.get(key).cloned() }
        };
        let mut desired_keys = BTreeSet::new();
        for r in graph.resources().filter(|r| r.kind == kind) {
            let key = r.spec["key"].as_str().unwrap_or_default();
            let value = r.spec["value"].as_str().unwrap_or_default();
            desired_keys.insert(key.to_string());
            let values: Vec<Option<String>> = nodes.iter().map(|n| current(n, key)).collect();
            let action = if nodes.is_empty() || values.iter().all(Option::is_none) {
                Some((ActionKind::Create, reason("absent", format!("{key} is not set")), None))
            } else if let Some(other) = values.iter().flatten().find(|v| *v != value) {
                Some((
                    ActionKind::Update,
                    reason("value-differs", format!("{key} is {other:?}, wanted {value:?}")),
                    Some(json!({ "key": key, "value": other })),
                ))
            } else if values.iter().any(Option::is_none) {
                Some((ActionKind::Update, reason("missing-on-a-node", format!("{key} is missing on some nodes")), None))
            } else {
                None
            };
            if let Some((kind, why, before)) = action {
                actions.insert(r.id.clone(), Action::new(r.id.clone(), kind, why, before, Some(r.spec.clone())));
            }
        }
        if kind != ResourceKind::NodeLabel {
            continue;
        }
        let ours: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.annotations.get(MANAGED_LABELS_ANNOTATION))
            .flat_map(|list| crate::observed::managed_labels(list))
            .collect();
        for key in ours.difference(&desired_keys) {
            if let Some(value) = nodes.iter().find_map(|n| n.labels.get(key)) {
                let id = format!("{prefix}{key}");
                actions.insert(
                    id.clone(),
                    Action::new(
                        id,
                        ActionKind::Delete,
                        reason("no-longer-wanted", format!("k3d-gpu set {key}, and the config no longer asks for it")),
                        Some(json!({ "key": key, "value": value })),
                        None,
                    ),
                );
            }
        }
    }
}

/// Kubernetes objects: create what is missing, update what drifted on owned fields, delete
/// what k3d-gpu manages but no longer wants. Gives the deletes, in id order, each with its
/// object's index (its `before` is filled in by [`Draft::finish`]).
fn object_actions(
    graph: &DesiredGraph,
    objects: &[Value],
    seen: &[Seen],
    owner: Option<&str>,
    actions: &mut BTreeMap<String, Action>,
    warnings: &mut Vec<Warning>,
) -> Vec<(Action, usize)> {
    let mut live = Live::new(seen);
    // On an existing cluster, another config's objects are neither updated nor deleted: the
    // two configs would undo each other on every apply.
    let mut others = BTreeSet::new();
    if let Some(owner) = owner {
        live.entries.retain(|(id, index)| {
            let Some(warning) = fleet::other_config(id, seen[*index].stamp, owner, None) else { return true };
            warnings.push(warning);
            others.insert(id.clone());
            false
        });
    }
    for r in graph.resources().filter(|r| r.kind == ResourceKind::Object && !others.contains(&r.id)) {
        match live.get(&r.id, objects) {
            None => {
                actions.insert(r.id.clone(), create(r, reason("absent", "does not exist")));
            }
            Some(current) => {
                let paths = owned_differences(&r.spec, current);
                if let Some((field, rule)) = immutable::refused_change(current, &paths) {
                    let why = reason(
                        "immutable-field",
                        format!(
                            "{field} changed, which the API server refuses to change on a live object ({rule}): deleted and created again"
                        ),
                    );
                    let before = Some(project(&r.spec, current));
                    actions.insert(
                        r.id.clone(),
                        Action {
                            changed_paths: paths,
                            replace_paths: vec![field],
                            ..Action::new(r.id.clone(), ActionKind::Replace, why, before, Some(r.spec.clone()))
                        },
                    );
                } else if !paths.is_empty() {
                    let why =
                        reason("drift", format!("changed outside k3d-gpu or by a new config: {}", paths.join(", ")));
                    let before = Some(project(&r.spec, current));
                    actions.insert(
                        r.id.clone(),
                        Action {
                            changed_paths: paths,
                            ..Action::new(r.id.clone(), ActionKind::Update, why, before, Some(r.spec.clone()))
                        },
                    );
                }
            }
        }
    }
    // On a cluster k3d-gpu did not create, deleting a Namespace deletes every object in it,
    // and deleting a CRD every object of its kind: users' objects among them. Those stay.
    let cascades = fleet::is_fleet(graph);
    // Most observed objects are wanted: no room is taken for each of them.
    let mut deletes = Vec::new();
    for (id, index) in live.entries {
        let object = &seen[index];
        if graph.get(&id).is_some() || !object.managed {
            continue;
        }
        if cascades && object.cascades() {
            warnings.push(Warning {
                code: "cascade-kept".into(),
                text: format!(
                    "{id} is no longer in the config and is kept: deleting it would delete everything in it, \
                     objects k3d-gpu did not create among them. Delete it yourself once nothing in it is needed"
                ),
                key: None,
            });
            continue;
        }
        // Data (a model download, its compile cache) outlives the workload that wrote it,
        // unless the config let it go when it was created: the plan says which.
        // What the data is, as the compiler described it (`k3d-gpu.io/data`); the live copy
        // is the cluster's word, so it is cut short and kept on one line.
        let what = || -> String {
            object
                .data_note
                .map_or_else(|| "a downloaded model".into(), |t| crate::escape::one_line(t).chars().take(80).collect())
        };
        let store = object.host_dir.map(|d| crate::escape::one_line(d).chars().take(200).collect::<String>());
        if object.keep {
            let files = store.as_ref().map(|d| format!("; its files are on the host in {d}")).unwrap_or_default();
            warnings.push(Warning {
                code: "data-kept".into(),
                text: format!(
                    "{id} is no longer in the config and is kept: it holds data ({}). \
                     Delete it yourself when it is no longer needed (`kubectl delete`){files}",
                    what()
                ),
                key: None,
            });
            continue;
        }
        let why = if let Some(dir) = &store {
            // The files are on the host (models.rs): deleting the PVC or its PV leaves them.
            reason(
                "no-longer-wanted",
                format!(
                    "managed by k3d-gpu and no longer in the config; its files stay on the host in {dir}: delete that directory when they are no longer needed"
                ),
            )
        } else if object.kind == Some("PersistentVolumeClaim") {
            reason(
                "no-longer-wanted",
                format!("managed by k3d-gpu and no longer in the config; its data ({}) is lost", what()),
            )
        } else {
            reason("no-longer-wanted", "managed by k3d-gpu and no longer in the config")
        };
        deletes.push((Action::new(id, ActionKind::Delete, why, None, None), index));
    }
    deletes
}

/// For every resource of a graph, its nearest changed ancestors: each dependency that
/// changes, and for each that does not, its own nearest changed ancestors. Computed once for
/// the whole graph in dependency order, so a resource reads its dependencies' answers instead
/// of walking every ancestor (in a converged fleet nothing stops that walk, and about 3,000
/// resources each walking a node's worth of ancestors made the plan grow with nodes²).
/// A resource whose only unchanged dependency passes its answer on shares it (`Rc`), so a
/// long chain holds one set, not one per link.
struct NearestChanged {
    /// By `NodeIndex::index()`: the ancestors' indices, sorted and without duplicates.
    of: Vec<std::rc::Rc<Vec<petgraph::graph::NodeIndex>>>,
}

impl NearestChanged {
    fn new(graph: &DesiredGraph, changed: impl Fn(&str) -> bool) -> NearestChanged {
        use petgraph::Direction::Incoming;
        use std::rc::Rc;
        let g = &graph.graph;
        let is_changed: Vec<bool> = g.node_indices().map(|n| changed(&g[n].id)).collect();
        let none: Rc<Vec<petgraph::graph::NodeIndex>> = Rc::new(Vec::new());
        let mut of = vec![none.clone(); g.node_count()];
        // `DesiredGraph::build` refused cycles, so the order exists; were it ever missing,
        // the answers would only be empty, never wrong in the other direction.
        let order = petgraph::algo::toposort(g, None).unwrap_or_default();
        for node in order {
            let mut sets: Vec<Rc<Vec<petgraph::graph::NodeIndex>>> = Vec::new();
            let mut own: Vec<petgraph::graph::NodeIndex> = Vec::new();
            for dep in g.neighbors_directed(node, Incoming) {
                if is_changed[dep.index()] {
                    own.push(dep);
                } else if !of[dep.index()].is_empty() {
                    sets.push(of[dep.index()].clone());
                }
            }
            of[node.index()] = if own.is_empty() && sets.is_empty() {
                none.clone()
            } else if own.is_empty() && sets.iter().all(|s| Rc::ptr_eq(s, &sets[0])) {
                sets.swap_remove(0)
            } else {
                for s in &sets {
                    own.extend(s.iter().copied());
                }
                own.sort_unstable();
                own.dedup();
                Rc::new(own)
            };
        }
        NearestChanged { of }
    }

    /// The nearest changed ancestors of `id`, sorted by id (none when it is not in the graph).
    fn of(&self, graph: &DesiredGraph, id: &str) -> Vec<String> {
        let Some(&node) = graph.index.get(id) else { return Vec::new() };
        let mut ids: Vec<String> = self.of[node.index()].iter().map(|&n| graph.graph[n].id.clone()).collect();
        ids.sort_unstable();
        ids
    }

    /// Whether anything `id` depends on, however far up, changes.
    fn any(&self, graph: &DesiredGraph, id: &str) -> bool {
        graph.index.get(id).is_some_and(|&node| !self.of[node.index()].is_empty())
    }
}

/// Deletes run in reverse: a namespace after what lives in it, a CRD after its objects.
/// Linear in the deletes: each is indexed once by its namespace and by (API group, kind),
/// and a namespace or CRD looks its dependents up there (comparing every pair was quadratic:
/// 10,000 observed objects took seconds). Without a namespace or CRD among them, nothing is
/// indexed. The objects are read as observed (a delete's `before` is not filled in yet).
fn order_deletes(deletes: &mut [(Action, usize)], seen: &[Seen]) {
    if !deletes.iter().any(|(_, index)| seen[*index].cascades()) {
        return;
    }
    let mut in_namespace: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut of_kind: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for (action, index) in deletes.iter() {
        let object = &seen[*index];
        if let Some(namespace) = object.namespace {
            in_namespace.entry(namespace).or_default().push(&action.id);
        }
        // `group/version`; the core group ("v1") has no CRDs.
        if let (Some((group, _)), Some(kind)) = (object.api_version.and_then(|a| a.split_once('/')), object.kind) {
            of_kind.entry((group, kind)).or_default().push(&action.id);
        }
    }
    let mut ordered: Vec<(usize, Vec<String>)> = Vec::new();
    for (at, (action, index)) in deletes.iter().enumerate() {
        let object = &seen[*index];
        let mut deps: BTreeSet<&str> = BTreeSet::new();
        match object.kind {
            Some("Namespace") => {
                if let Some(name) = object.name {
                    deps.extend(in_namespace.get(name).into_iter().flatten());
                }
            }
            Some("CustomResourceDefinition") => {
                if let Some(defines) = object.defines {
                    deps.extend(of_kind.get(&defines).into_iter().flatten());
                }
            }
            _ => continue,
        }
        deps.remove(action.id.as_str());
        ordered.push((at, deps.into_iter().map(str::to_string).collect()));
    }
    for (at, deps) in ordered {
        deletes[at].0.depends_on = deps;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster recorded before the store's resolved directory was: an upgrade alone plans no
    /// replace, and a store that now resolves elsewhere does.
    #[test]
    fn a_store_recorded_without_its_resolved_directory_is_compared_as_configured() {
        let desired =
            json!({ "model_store": { "dir": null, "node": "/n", "host": "/home/me/.local/share/k3d-gpu/models/gpu" } });
        let old = json!({ "model_store": { "dir": null, "node": "/n" } });
        let compared = |d: &Value, r: &Value| {
            let (d, r) = comparable(d, r);
            changed_keys(&d, &r)
        };
        assert!(compared(&desired, &old).is_empty());
        let moved = json!({ "model_store": { "dir": null, "node": "/n", "host": "/srv/elsewhere" } });
        assert_eq!(compared(&desired, &moved), ["model_store"]);
        assert!(models_on_replace(Some(&moved), &desired, "gpu").contains("stay on the host, not used"));
        assert!(models_on_replace(Some(&old), &desired, "gpu").contains("The models are kept"));
        // The other way round: recorded with `host`, planned where none resolves (HOME unset).
        assert!(compared(&old, &desired).is_empty());
        assert!(models_on_replace(Some(&desired), &old, "gpu").contains("The models are kept"));
        let elsewhere = json!({ "model_store": { "dir": "/srv/m", "node": "/n" } });
        assert_eq!(compared(&elsewhere, &desired), ["model_store"]);
    }

    #[test]
    fn plan_bytes_are_canonical() {
        let action = Action {
            replace_paths: vec!["image".into()],
            changed_paths: vec!["spec".into()],
            depends_on: vec!["a".into()],
            ..Action::new(
                "k8s/v1/ConfigMap/ns/x".into(),
                ActionKind::Update,
                reason("drift", "x"),
                Some(json!({"z": 1, "a": [{"y": 2, "b": null}]})),
                Some(json!({"kind": "ConfigMap"})),
            )
        };
        let warning = Warning { code: "w".into(), text: "t".into(), key: Some("k".into()) };
        let inputs = Inputs {
            config: "c".into(),
            facts: "f".into(),
            images: "i".into(),
            made_from: Some(MadeFrom {
                config: Some("c.toml".into()),
                facts: vec!["f.json".into()],
                root: vec!["r".into()],
                stdlib: Some("s".into()),
                vendors: Some("intel".into()),
            }),
            observed: "o".into(),
            owner: Some("lab".into()),
            stdlib: "s".into(),
            tool_version: "v".into(),
        };
        let plan = assemble(inputs, vec![action], vec!["verify/x".into()], vec![warning]);
        assert_eq!(plan.to_bytes(), crate::canonical::to_bytes(&plan));
        assert_eq!(plan.clone().into_bytes(), plan.to_bytes(), "the bytes written as the plan is freed");
        assert_eq!(plan.hash(), crate::canonical::sha256(&plan.to_bytes()));
        let mut written = Vec::new();
        assert_eq!(plan.write_to(&mut written).unwrap(), plan.hash());
        assert_eq!(written, plan.to_bytes());
    }

    fn resource(id: &str, deps: &[&str]) -> Resource {
        Resource {
            id: id.into(),
            kind: ResourceKind::Object,
            change: Change::InPlace,
            component: None,
            spec: json!({}),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    /// The walk `NearestChanged` replaced: each resource's ancestors, stopping at a change.
    fn walked(graph: &DesiredGraph, id: &str, changed: &BTreeSet<&str>) -> Vec<String> {
        let mut out = BTreeSet::new();
        let mut stack: Vec<&str> = graph.get(id).unwrap().depends_on.iter().map(String::as_str).collect();
        let mut seen = BTreeSet::new();
        while let Some(dep) = stack.pop() {
            if !seen.insert(dep) {
                continue;
            }
            if changed.contains(dep) {
                out.insert(dep.to_string());
            } else {
                stack.extend(graph.get(dep).unwrap().depends_on.iter().map(String::as_str));
            }
        }
        out.into_iter().collect()
    }

    /// A change stops the search up its branch; an unchanged resource passes on what is
    /// above it, through every path (d reaches a through b and c directly).
    #[test]
    fn nearest_changed_ancestors_through_unchanged_ones() {
        let graph = DesiredGraph::build(
            vec![
                resource("a", &[]),
                resource("b", &["a"]),
                resource("c", &["b"]),
                resource("d", &["b", "c"]),
                resource("e", &["d", "a"]),
                resource("f", &["e"]),
                resource("g", &["x"]),
                resource("x", &[]),
            ],
            Vec::new(),
            None,
        )
        .unwrap();
        let changed = ["a", "c", "f"];
        let nearest = NearestChanged::new(&graph, |id| changed.contains(&id));
        let of = |id: &str| nearest.of(&graph, id);
        assert_eq!(of("a"), Vec::<String>::new());
        assert_eq!(of("b"), ["a"]);
        assert_eq!(of("c"), ["a"]);
        assert_eq!(of("d"), ["a", "c"]);
        assert_eq!(of("e"), ["a", "c"]);
        assert_eq!(of("f"), ["a", "c"]);
        assert_eq!(of("g"), Vec::<String>::new());
        assert!(nearest.any(&graph, "f") && !nearest.any(&graph, "g") && !nearest.any(&graph, "a"));
        assert_eq!(of("not-in-the-graph"), Vec::<String>::new());
    }

    /// On a layered graph with many paths (each resource depends on up to three of the layer
    /// above), the one pass answers exactly what walking each resource's ancestors did, for
    /// several choices of what changes.
    #[test]
    fn nearest_changed_matches_walking_the_ancestors() {
        let ids: Vec<String> = (0..200).map(|i| format!("r{i:03}")).collect();
        let resources: Vec<Resource> = (0..200usize)
            .map(|i| {
                let layer = i / 20;
                let deps: Vec<&str> = if layer == 0 {
                    Vec::new()
                } else {
                    [7, 13, 29].iter().map(|k| ids[(layer - 1) * 20 + (i * k) % 20].as_str()).collect()
                };
                resource(&ids[i], &deps)
            })
            .collect();
        let graph = DesiredGraph::build(resources, Vec::new(), None).unwrap();
        for modulus in [1usize, 3, 7, 50, 1000] {
            let changed: BTreeSet<&str> =
                ids.iter().enumerate().filter(|(i, _)| (i * 31) % modulus == 0).map(|(_, id)| id.as_str()).collect();
            let nearest = NearestChanged::new(&graph, |id| changed.contains(id));
            for id in &ids {
                let want = walked(&graph, id, &changed);
                assert_eq!(nearest.of(&graph, id), want, "{id}, every {modulus}th changed");
                assert_eq!(nearest.any(&graph, id), !want.is_empty());
            }
        }
    }

    /// A plan far over the writer's 64 KiB buffer, with strings that need escaping and
    /// characters of several bytes, comes out whole through every writer.
    #[test]
    fn a_large_plan_is_written_whole() {
        let actions: Vec<Action> = (0..3000)
            .map(|i| {
                let before = json!({"data": {"k": format!("é\"\u{1}{i}"), "n": i}, "kind": "ConfigMap"});
                Action::new(
                    format!("k8s/core/ConfigMap/ns/cm-{i:05}"),
                    ActionKind::Delete,
                    reason("gone", "x"),
                    Some(before),
                    None,
                )
            })
            .collect();
        let inputs = Inputs::for_destroy(&crate::config::Config::default(), &Observed::nothing());
        let plan = assemble(inputs, actions, Vec::new(), Vec::new());
        let bytes = plan.to_bytes();
        assert!(bytes.len() > 4 * (1 << 16), "{}", bytes.len());
        assert_eq!(bytes, crate::canonical::to_bytes(&plan));
        assert_eq!(plan.hash(), crate::canonical::sha256(&bytes));
        assert_eq!(plan.into_bytes(), bytes);
    }
}
