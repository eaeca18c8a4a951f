//! The node image as a plan input (DESIGN.md §8): what it is built from, or which prebuilt
//! image it is. Pure: the command edge reads a user's build context into a [`Source`]; the
//! tool's own context (the top-level `Dockerfile`) is compiled in.
//!
//! The digest of the build inputs — every context file, every build arg, the digest each base
//! is pinned to — names the image (`k3d-gpu-node:<k3s tag>-<12 hex>`) and is recorded in its
//! [`INPUTS_LABEL`], so a local image whose label matches needs no build, and a changed input
//! gives a new name, which is what replaces the cluster.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::images::{ImageRef, Locks, Use};

/// The Dockerfile the tool ships, compiled in so a plan never depends on where it runs.
pub const SHIPPED_DOCKERFILE: &str = include_str!("../Dockerfile");

/// The k3s release our node image runs (a `rancher/k3s` tag).
pub const K3S_TAG: &str = "v1.37.1-k3s1";
/// The Ubuntu base; 24.04 is supported too (`build_args = { UBUNTU_TAG = "24.04" }`).
pub const UBUNTU_TAG: &str = "26.04";
/// The NVIDIA container toolkit's apt version.
pub const NVIDIA_CONTAINER_TOOLKIT_VERSION: &str = "1.20.0-1";

/// The label holding the digest of the build inputs.
pub const INPUTS_LABEL: &str = "io.k3d-gpu.build-inputs";
/// The label naming the k3s release (the Dockerfile sets it from `K3S_TAG`).
pub const K3S_VERSION_LABEL: &str = "io.k3d-gpu.k3s-version";
/// The repository local builds are tagged in.
pub const LOCAL_REPOSITORY: &str = "k3d-gpu-node";

/// A regular file of a directory tree read by `input_file::read_tree`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    pub bytes: Vec<u8>,
    /// Any execute bit set: a script that runs in the image must stay runnable there.
    pub executable: bool,
}

/// How much of a tree `input_file::read_tree` reads before it refuses.
#[derive(Debug, Clone, Copy)]
pub struct TreeLimits {
    pub files: usize,
    pub bytes: u64,
}

/// A build context can be a whole directory tree; more than this is a mistake (a home
/// directory given as the context), not a node image.
pub const MAX_CONTEXT_FILES: usize = 2000;
pub const MAX_CONTEXT_BYTES: u64 = 256 << 20;
pub const CONTEXT_LIMITS: TreeLimits = TreeLimits { files: MAX_CONTEXT_FILES, bytes: MAX_CONTEXT_BYTES };

/// The mode a context file has in the tar sent to Docker: the execute bits kept (as one
/// bit, so the same files give the same bytes on any umask), nothing else.
pub fn tar_mode(file: &TreeFile) -> u32 {
    if file.executable { 0o755 } else { 0o644 }
}

/// A user's build context as the edge reads it: bounded, regular files only, a Dockerfile
/// at its top.
pub fn check_context(files: BTreeMap<String, TreeFile>) -> Result<BTreeMap<String, TreeFile>, NoDockerfile> {
    if !files.contains_key("Dockerfile") {
        return Err(NoDockerfile);
    }
    Ok(files)
}

/// A build context without a Dockerfile at its top.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no Dockerfile in it")]
pub struct NoDockerfile;

/// Where the node image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built from a context: the shipped one, or the user's directory (as read by the edge).
    Build {
        /// `shipped`, or the directory as the config names it (resolved by the edge).
        context: String,
        /// Relative path → the file. Paths use `/` and never climb out (`..`).
        files: BTreeMap<String, TreeFile>,
    },
    /// `[cluster] image`: pulled when missing, never built. `k3s_version` is the image's
    /// [`K3S_VERSION_LABEL`] as observed (a saved or live observation), when it has one.
    Prebuilt { reference: String, k3s_version: Option<String> },
}

impl Source {
    /// A prebuilt image whose labels are not known (yet).
    pub fn prebuilt(reference: &str) -> Source {
        Source::Prebuilt { reference: reference.to_string(), k3s_version: None }
    }

    /// The source with what an observation says about a prebuilt image: its k3s release
    /// label, when the observed image is this one. A build says its own version.
    pub fn with_observed(self, observed: &crate::observed::Observed) -> Source {
        match self {
            Source::Prebuilt { reference, k3s_version: None } => {
                let k3s_version = observed
                    .node_image
                    .as_ref()
                    .filter(|i| i.present && i.reference == reference)
                    .and_then(|i| i.k3s_version.clone());
                Source::Prebuilt { reference, k3s_version }
            }
            other => other,
        }
    }

    /// The shipped context: the top-level Dockerfile alone.
    pub fn shipped() -> Source {
        Source::Build {
            context: "shipped".into(),
            files: BTreeMap::from([(
                "Dockerfile".to_string(),
                TreeFile { bytes: SHIPPED_DOCKERFILE.as_bytes().to_vec(), executable: false },
            )]),
        }
    }
}

/// A base image of a Dockerfile: `FROM repo:${TAG_ARG}${DIGEST_ARG:+@}${DIGEST_ARG}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub repository: String,
    pub tag_arg: String,
    pub digest_arg: String,
}

/// The Dockerfile's `ARG NAME=default` lines (before or after a FROM), first default wins.
pub fn arg_defaults(dockerfile: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in instructions(dockerfile) {
        let mut words = line.split_whitespace();
        if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("ARG")) {
            continue;
        }
        for word in words {
            let (name, value) = word.split_once('=').unwrap_or((word, ""));
            out.entry(name.to_string()).or_insert_with(|| value.trim_matches('"').to_string());
        }
    }
    out
}

/// Every FROM of a Dockerfile, as its image text (stage names and flags dropped).
pub fn from_lines(dockerfile: &str) -> Vec<String> {
    instructions(dockerfile)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.next().filter(|w| w.eq_ignore_ascii_case("FROM"))?;
            words.find(|w| !w.starts_with("--")).map(str::to_string)
        })
        .collect()
}

/// The FROMs that name a registry image pinned through build args, or why one is not.
/// A FROM naming an earlier stage is fine; anything else must be lockable.
pub fn bases(dockerfile: &str) -> Result<Vec<Base>, Unbuildable> {
    let mut stages: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in instructions(dockerfile) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words.first().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let rest: Vec<&str> = words[1..].iter().copied().filter(|w| !w.starts_with("--")).collect();
        let Some(image) = rest.first() else { return Err(Unbuildable::FromWithoutImage) };
        if let [_, as_word, name] = rest.as_slice()
            && as_word.eq_ignore_ascii_case("AS")
        {
            stages.push(name.to_string());
        }
        if stages[..stages.len().saturating_sub(usize::from(rest.len() == 3))].iter().any(|s| s == image) {
            continue;
        }
        out.push(parse_base(image).ok_or_else(|| Unbuildable::Unpinned(image.to_string()))?);
    }
    Ok(out)
}

fn parse_base(image: &str) -> Option<Base> {
    let (repository, rest) = image.split_once(":${")?;
    let (tag_arg, rest) = rest.split_once('}')?;
    let rest = rest.strip_prefix("${")?;
    let (digest_arg, rest) = rest.split_once(":+@}")?;
    (rest == format!("${{{digest_arg}}}") && !repository.is_empty() && !repository.contains('$')).then(|| Base {
        repository: repository.into(),
        tag_arg: tag_arg.into(),
        digest_arg: digest_arg.into(),
    })
}

/// Logical instructions: continuation lines joined, comments and blank lines dropped.
fn instructions(dockerfile: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut current = String::new();
    for raw in dockerfile.lines() {
        let line = raw.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
        } else {
            current.push_str(line);
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out.into_iter()
}

/// Why a node image's build context cannot be resolved; sentences about the build context.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unbuildable {
    #[error("a FROM without an image")]
    FromWithoutImage,
    #[error("FROM {0} is not pinned through the lock: write FROM repo:${{X_TAG}}${{X_DIGEST:+@}}${{X_DIGEST}}")]
    Unpinned(String),
    #[error("the build context has no Dockerfile")]
    NoDockerfile,
    #[error("its Dockerfile is not UTF-8 text")]
    NotUtf8,
    #[error("build arg {0} is not an ARG of the Dockerfile")]
    UnknownArg(String),
    #[error("base {} ({}={tag:?}): {why}", base.repository, base.tag_arg)]
    Base { base: Box<Base>, tag: String, why: crate::images::BadImageRef },
}

/// What the compiler makes of the node image: the graph resource's spec, the images its bases
/// are pinned to, and the k3s version when the build says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The reference the cluster is created from.
    pub reference: String,
    pub spec: Value,
    /// The bases as pinned (name → use), for the plan's image inputs and `images`.
    pub bases: BTreeMap<String, Use>,
    /// `K3S_TAG` of the build, when the build has one.
    pub k3s_tag: Option<String>,
    /// The build inputs, for the replace reason.
    pub inputs: BTreeMap<String, String>,
}

/// Resolves the source against the locks and the config's build args. Errors are sentences
/// about the build context.
pub fn resolve(source: &Source, build_args: &BTreeMap<String, String>, locks: &Locks) -> Result<Resolved, Unbuildable> {
    match source {
        Source::Prebuilt { reference, k3s_version } => Ok(Resolved {
            reference: reference.clone(),
            spec: json!({ "source": "pull", "reference": reference }),
            bases: BTreeMap::new(),
            k3s_tag: k3s_version.clone(),
            inputs: BTreeMap::new(),
        }),
        Source::Build { context, files } => {
            let dockerfile = files.get("Dockerfile").ok_or(Unbuildable::NoDockerfile)?;
            let dockerfile = std::str::from_utf8(&dockerfile.bytes).map_err(|_| Unbuildable::NotUtf8)?;
            let defaults = arg_defaults(dockerfile);
            let mut args: BTreeMap<String, String> = BTreeMap::new();
            for (name, value) in build_args {
                if !defaults.contains_key(name) {
                    return Err(Unbuildable::UnknownArg(name.clone()));
                }
                args.insert(name.clone(), value.clone());
            }
            let mut pinned = BTreeMap::new();
            for base in bases(dockerfile)? {
                let tag = args.get(&base.tag_arg).or(defaults.get(&base.tag_arg)).cloned().unwrap_or_default();
                let image = ImageRef::parse(&format!("{}:{tag}", base.repository))
                    .map_err(|why| Unbuildable::Base { base: Box::new(base.clone()), tag: tag.clone(), why })?;
                let used = locks.resolve(&image);
                if let Some((_, digest)) = used.reference.split_once('@') {
                    args.insert(base.digest_arg.clone(), digest.to_string());
                }
                pinned.insert(image.tagged(), used);
            }
            let inputs = build_inputs(files, &args);
            let digest = crate::canonical::digest(&inputs);
            let hex = digest.trim_start_matches("sha256:");
            let k3s_tag = args.get("K3S_TAG").or(defaults.get("K3S_TAG")).cloned();
            let tag = match &k3s_tag {
                Some(t) if ImageRef::parse(&format!("x:{t}")).is_ok() && t.len() <= 100 => {
                    format!("{t}-{}", &hex[..12])
                }
                _ => hex[..12].to_string(),
            };
            let reference = format!("{LOCAL_REPOSITORY}:{tag}");
            Ok(Resolved {
                spec: json!({
                    "source": "build",
                    "reference": reference,
                    "context": context,
                    "build_args": args,
                    "digest": digest,
                }),
                reference,
                bases: pinned,
                k3s_tag,
                inputs,
            })
        }
    }
}

/// The build inputs by name: `file:<path>` → its sha256, `mode:<path>` → `0755` for an
/// executable file (absent for 0644, so contexts without scripts hash as before), `arg:<NAME>`
/// → its value (the base digests are args). Their canonical digest is the image's
/// [`INPUTS_LABEL`].
pub fn build_inputs(files: &BTreeMap<String, TreeFile>, args: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut inputs: BTreeMap<String, String> = BTreeMap::new();
    for (path, file) in files {
        inputs.insert(format!("file:{path}"), crate::canonical::sha256(&file.bytes));
        if file.executable {
            inputs.insert(format!("mode:{path}"), format!("{:04o}", tar_mode(file)));
        }
    }
    for (name, value) in args {
        // The list is an image label anyone with `docker inspect` reads: a secret arg is
        // recorded by its digest, which still changes when the secret does.
        let recorded = if crate::secrets::is_sensitive_name(name) {
            crate::canonical::sha256(value.as_bytes())
        } else {
            value.clone()
        };
        inputs.insert(format!("arg:{name}"), recorded);
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_execute_bit_is_a_build_input_and_plain_files_hash_as_before() {
        let context = |executable| {
            BTreeMap::from([
                ("Dockerfile".to_string(), TreeFile { bytes: b"FROM x\n".to_vec(), executable: false }),
                ("run.sh".to_string(), TreeFile { bytes: b"#!/bin/sh\n".to_vec(), executable }),
            ])
        };
        let plain = build_inputs(&context(false), &BTreeMap::new());
        assert!(plain.keys().all(|k| !k.starts_with("mode:")), "{plain:?}");
        let script = build_inputs(&context(true), &BTreeMap::new());
        assert_eq!(script.get("mode:run.sh").map(String::as_str), Some("0755"));
        assert_ne!(crate::canonical::digest(&plain), crate::canonical::digest(&script), "a chmod +x rebuilds");
    }

    #[test]
    fn a_secret_build_arg_is_recorded_by_its_digest() {
        let args =
            |v: &str| BTreeMap::from([("NPM_TOKEN".to_string(), v.to_string()), ("UBUNTU_TAG".into(), "24.04".into())]);
        let one = build_inputs(&BTreeMap::new(), &args("npm_s3cret"));
        assert!(!one.values().any(|v| v.contains("npm_s3cret")), "{one:?}");
        assert_eq!(one["arg:UBUNTU_TAG"], "24.04");
        assert_ne!(one, build_inputs(&BTreeMap::new(), &args("npm_other")), "a new secret is a new input");
    }

    #[test]
    fn every_from_of_the_shipped_dockerfile_is_pinned_through_the_lock() {
        let bases = bases(SHIPPED_DOCKERFILE).expect("every FROM takes its digest from a build arg");
        let names: Vec<&str> = bases.iter().map(|b| b.repository.as_str()).collect();
        assert_eq!(names, ["rancher/k3s", "ubuntu"]);
        let defaults = arg_defaults(SHIPPED_DOCKERFILE);
        assert_eq!(defaults["K3S_TAG"], K3S_TAG);
        assert_eq!(defaults["UBUNTU_TAG"], UBUNTU_TAG);
        assert_eq!(defaults["NVIDIA_CONTAINER_TOOLKIT_VERSION"], NVIDIA_CONTAINER_TOOLKIT_VERSION);
        assert_eq!(from_lines(SHIPPED_DOCKERFILE).len(), 2, "no FROM escapes the check");
    }

    #[test]
    fn a_from_by_tag_alone_is_refused() {
        assert_eq!(bases("FROM ubuntu:26.04\n"), Err(Unbuildable::Unpinned("ubuntu:26.04".into())));
        assert!(bases("FROM ubuntu@sha256:abc\n").is_err());
        // A later FROM of an earlier stage is no base.
        let two = "ARG T=1\nARG D=\nFROM a/b:${T}${D:+@}${D} AS one\nFROM one\n";
        assert_eq!(bases(two).unwrap().len(), 1);
    }

    #[test]
    fn a_locked_base_is_a_digest_build_arg_and_changes_the_name() {
        let locks = Locks::shipped();
        let unlocked = resolve(&Source::shipped(), &BTreeMap::new(), &locks).unwrap();
        assert!(unlocked.reference.starts_with("k3d-gpu-node:v1.37.1-k3s1-"));
        assert_eq!(unlocked.k3s_tag.as_deref(), Some(K3S_TAG));
        let mut user = crate::images::Lock::default();
        let digest = format!("sha256:{}", "a".repeat(64));
        user.images
            .insert("ubuntu:26.04".into(), crate::images::Entry { digest: digest.clone(), platforms: Vec::new() });
        let locked = resolve(&Source::shipped(), &BTreeMap::new(), &Locks { user: Some(user), ..locks }).unwrap();
        assert_eq!(locked.spec["build_args"]["UBUNTU_DIGEST"], digest.as_str());
        assert_ne!(locked.reference, unlocked.reference);
        assert_eq!(locked.inputs["arg:UBUNTU_DIGEST"], digest);
    }

    #[test]
    fn an_unknown_build_arg_is_refused() {
        let args = BTreeMap::from([("UBUNTU_TAGG".to_string(), "24.04".to_string())]);
        assert_eq!(
            resolve(&Source::shipped(), &args, &Locks::shipped()).unwrap_err(),
            Unbuildable::UnknownArg("UBUNTU_TAGG".into())
        );
    }
}
