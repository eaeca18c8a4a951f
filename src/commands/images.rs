//! `k3d-gpu images`, `images check` and `images lock` (DESIGN.md §7): the images this config
//! deploys on this host, the CI check of images.lock (no network), and resolving tags to
//! digests through the Docker engine, written atomically beside the config.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::cli::{Global, ImagesArgs, ImagesCommand};
use crate::error::{EXIT_OK, Error, Result};
use crate::images::{Entry, ImageRef, Lock, Source};

/// One image the config deploys, as `images` prints it.
#[derive(Debug, Serialize)]
struct Row {
    image: String,
    state: Source,
    /// What the manifests carry.
    reference: String,
    /// Where it is used: the same three places `plan` and `render` count by.
    #[serde(rename = "use")]
    used_in: Role,
}

/// Where an image is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Role {
    /// A Kubernetes object of the graph runs it.
    Workload,
    /// The node image is built from it.
    NodeImage,
    /// Only `k3d-gpu test`'s pods run it.
    TestPod,
    /// k3s runs it on its own (CoreDNS, metrics-server, …): no plan deploys it.
    K3s,
}

impl Role {
    fn word(self) -> &'static str {
        match self {
            Role::Workload => "workload",
            Role::NodeImage => "node image",
            Role::TestPod => "test pod",
            Role::K3s => "k3s",
        }
    }
}

/// Where each image of `images` is used: a test pod's when only `test` runs it, a workload's
/// when an object of the graph names it, else a base of the node image.
fn roles(
    graph: &crate::compile::DesiredGraph,
    images: &BTreeMap<String, crate::images::Use>,
    test_pods: &[&str],
    k3s: &[&str],
) -> BTreeMap<String, Role> {
    let objects: Vec<String> = graph
        .resources()
        .filter(|r| r.kind == crate::compile::ResourceKind::Object)
        .map(|r| r.spec.to_string())
        .collect();
    images
        .iter()
        .map(|(name, u)| {
            let role = if !graph.images.contains_key(name) && test_pods.contains(&name.as_str()) {
                Role::TestPod
            } else if !graph.images.contains_key(name) && k3s.contains(&name.as_str()) {
                Role::K3s
            } else if objects.iter().any(|o| o.contains(&format!("\"{}\"", u.reference))) {
                Role::Workload
            } else {
                Role::NodeImage
            };
            (name.clone(), role)
        })
        .collect()
}

/// `images --json`: every image the config deploys, with its lock state.
pub const LIST_SCHEMA: &str = "k3d-gpu.image-list/v1";
/// `images check --json`: what the lock misses, holds extra, or contradicts.
pub const CHECK_SCHEMA: &str = "k3d-gpu.images-check/v1";

/// What a lock check found.
#[derive(Debug, Default, Serialize)]
pub struct Check {
    /// Deployed by tag: neither the catalog nor a lock pins it.
    pub missing: Vec<String>,
    /// In the config's lock, but nothing this config deploys uses it.
    pub extra: Vec<String>,
    /// The config's lock names another digest than the catalog pins: `(image, lock, catalog)`.
    pub disagrees: Vec<(String, String, String)>,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.disagrees.is_empty()
    }
}

/// Compares the graph's images with the config's lock. Pure.
pub fn check(images: &BTreeMap<String, crate::images::Use>, user: Option<&Lock>) -> Check {
    let mut out = Check::default();
    let mut used = std::collections::BTreeSet::new();
    for (name, used_as) in images {
        let Ok(image) = ImageRef::parse(name) else { continue };
        used.insert(image.tagged());
        if used_as.source == Source::Unlocked {
            out.missing.push(image.tagged());
        }
        if let (Some(pin), Some(entry)) = (&image.digest, user.and_then(|l| l.images.get(&image.tagged())))
            && *pin != entry.digest
        {
            out.disagrees.push((image.tagged(), entry.digest.clone(), pin.clone()));
        }
    }
    if let Some(lock) = user {
        out.extra = lock.images.keys().filter(|k| !used.contains(*k)).cloned().collect();
    }
    out
}

pub fn run(global: &Global, args: &ImagesArgs) -> Result<u8> {
    let mut inputs = super::load_config(global)?;
    // Listing and locking must work when `[policy] images = "pinned"` refuses what is not
    // locked yet: that is what `images lock` is for.
    inputs.config.policy.images = crate::config::ImagePolicy::Tags;
    let compiled = super::inputs::compile(global, &inputs)?;
    // `k3d-gpu test`'s pods too: not in the graph (no plan deploys them), pinned through the
    // same locks.
    let mut images = compiled.graph.images.clone();
    let test_pods = crate::smoke::images_for(&compiled.facts);
    for name in test_pods.iter().copied() {
        if let Ok(image) = ImageRef::parse(name) {
            images.entry(name.to_string()).or_insert_with(|| compiled.catalog.images.resolve(&image));
        }
    }
    // k3s's own images: every cluster runs them, so `audit` finds them only if the lock
    // pins them (share/k3s-images.txt lists them for the k3s the built node image runs). A
    // prebuilt `[cluster] image` runs a k3s of its own, and an existing cluster's k3s is not
    // ours to pin.
    let ours = !super::fleet::is_fleet(&inputs) && inputs.config.cluster.image.is_none();
    let k3s = if ours { crate::images::k3s_images() } else { Vec::new() };
    for name in k3s.iter().copied() {
        if let Ok(image) = ImageRef::parse(name) {
            images.entry(name.to_string()).or_insert_with(|| compiled.catalog.images.resolve(&image));
        }
    }
    let images = &images;
    let user = compiled.catalog.images.user.as_ref();
    let lock_path = super::inputs::lock_path(&inputs);
    match &args.command {
        None => list(global, images, &roles(&compiled.graph, images, &test_pods, &k3s)),
        Some(ImagesCommand::Check(_)) => {
            let found = check(images, user);
            if global.json {
                #[derive(Serialize)]
                struct Doc<'a> {
                    schema: &'static str,
                    #[serde(flatten)]
                    found: &'a Check,
                }
                super::print_bytes(&crate::canonical::to_bytes(&Doc { schema: CHECK_SCHEMA, found: &found }));
            } else {
                super::print_bytes(crate::escape::assembled(&check_text(&found, &lock_path)).as_bytes());
            }
            if found.passed() {
                Ok(EXIT_OK)
            } else {
                Err(Error::CheckFailed(format!("{} is not current", lock_path.display())))
            }
        }
        Some(ImagesCommand::Lock(_)) => lock(images, user, &lock_path),
    }
}

fn list(global: &Global, images: &BTreeMap<String, crate::images::Use>, roles: &BTreeMap<String, Role>) -> Result<u8> {
    let rows: Vec<Row> = images
        .iter()
        .map(|(name, u)| Row {
            image: ImageRef::parse(name).map(|i| i.tagged()).unwrap_or_else(|_| name.clone()),
            state: u.source,
            reference: u.reference.clone(),
            used_in: roles.get(name).copied().unwrap_or(Role::Workload),
        })
        .collect();
    if global.json {
        #[derive(Serialize)]
        struct Doc<'a> {
            schema: &'static str,
            images: &'a [Row],
        }
        super::print_bytes(&crate::canonical::to_bytes(&Doc { schema: LIST_SCHEMA, images: &rows }));
        return Ok(EXIT_OK);
    }
    let width = crate::table::column_width(rows.iter().map(|r| r.image.as_str()), 5);
    let mut out = format!("{}  {:<10}  {:<21}  DIGEST\n", crate::table::pad("IMAGE", width), "USE", "STATE");
    for r in &rows {
        let digest = r.reference.split_once('@').map_or("-", |(_, d)| d);
        out.push_str(&format!(
            "{}  {:<10}  {:<21}  {digest}\n",
            crate::table::pad(&r.image, width),
            r.used_in.word(),
            r.state.word()
        ));
    }
    let unlocked = |role: Role| rows.iter().filter(|r| r.state == Source::Unlocked && r.used_in == role).count();
    if rows.iter().any(|r| r.state == Source::Unlocked) {
        let count = crate::compile::warnings::unlocked_count(
            unlocked(Role::Workload),
            unlocked(Role::NodeImage),
            unlocked(Role::TestPod),
            unlocked(Role::K3s),
        );
        out.push_str(&format!("\n{count}; `k3d-gpu images lock` pins them\n"));
    }
    // Image names come from manifests: escaped like every table.
    super::print_bytes(crate::escape::assembled(&out).as_bytes());
    Ok(EXIT_OK)
}

fn check_text(found: &Check, path: &Path) -> String {
    if found.passed() {
        return format!("{}: every image this config deploys is pinned\n", path.display());
    }
    let mut out = String::new();
    for image in &found.missing {
        out.push_str(&format!("missing   {image}: deployed by tag; run `k3d-gpu images lock`\n"));
    }
    for image in &found.extra {
        out.push_str(&format!("extra     {image}: this config no longer deploys it; run `k3d-gpu images lock`\n"));
    }
    for (image, locked, pinned) in &found.disagrees {
        out.push_str(&format!("disagrees {image}: the lock says {locked}, the catalog pins {pinned}\n"));
    }
    out
}

/// Resolves every image the config deploys and writes the lock. Images the catalog pins are
/// resolved too: the catalog's digest still wins, and `images check` then reports a tag that
/// was re-pushed since. All or nothing: an image that cannot be resolved is an error and the
/// old lock stays as it was.
fn lock(images: &BTreeMap<String, crate::images::Use>, old: Option<&Lock>, path: &Path) -> Result<u8> {
    let pins: BTreeMap<String, String> = images
        .keys()
        .filter_map(|name| ImageRef::parse(name).ok())
        .filter_map(|i| Some((i.tagged(), i.digest.clone()?)))
        .collect();
    let mut wanted: Vec<String> =
        images.keys().filter_map(|name| ImageRef::parse(name).ok().map(|i| i.tagged())).collect();
    wanted.sort();
    wanted.dedup();
    let endpoint = crate::observe::docker::endpoint(&|k| std::env::var(k).ok(), None);
    let docker_config = docker_config();
    let rt = super::runtime()?;
    let resolving = crate::observe::registry::resolve_all(&endpoint, &wanted, docker_config.as_ref());
    let resolved = rt.block_on(resolving).map_err(|reason| {
        let message = format!("images lock: {}", crate::secrets::blank_passwords(&reason.to_string()));
        let help = Some(format!(
            "Docker at {} ({}) resolves tags with its own registry access; check that it runs, that the registry is reachable from it, and `docker login` for a private one. {} was left as it was",
            endpoint.shown(),
            endpoint.source,
            path.display()
        ));
        use crate::observe::registry::Unresolved;
        match reason {
            Unresolved::Docker(_) | Unresolved::NoAnswer { .. } => Error::Unreachable { message, help },
            Unresolved::Refused { .. } | Unresolved::NoDigest(_) => Error::Usage { message, help },
        }
    })?;
    let mut lock = Lock::default();
    for (image, r) in resolved {
        lock.images.insert(image, Entry { digest: r.digest, platforms: r.platforms });
    }
    let mut report = String::new();
    for (image, entry) in &lock.images {
        let before = old.and_then(|l| l.images.get(image)).map(|e| e.digest.as_str());
        let word = match before {
            None => "added",
            Some(d) if d == entry.digest => "same",
            Some(_) => "changed",
        };
        report.push_str(&format!("{word:<8} {image}@{}\n", entry.digest));
        if let Some(pin) = pins.get(image).filter(|p| **p != entry.digest) {
            report.push_str(&format!("         the catalog pins {pin}: the tag was re-pushed; `images check` fails\n"));
        }
    }
    let dropped: Vec<&String> =
        old.map(|l| l.images.keys().filter(|k| !lock.images.contains_key(*k)).collect()).unwrap_or_default();
    for image in dropped {
        report.push_str(&format!("dropped  {image}\n"));
    }
    super::write_out(path, lock.to_text().as_bytes(), crate::output_file::PUBLIC)?;
    super::print_bytes(crate::escape::assembled(&report).as_bytes());
    crate::stderrln!("wrote {} ({} images)", path.display(), lock.images.len());
    Ok(EXIT_OK)
}

/// The Docker CLI's config, for the registry logins it holds; absent or unreadable means
/// no login.
fn docker_config() -> Option<serde_json::Value> {
    let env = |k: &str| std::env::var(k).ok();
    crate::observe::docker::cli_config(&crate::observe::docker::config_dir(&env)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::Use;

    fn d(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn check_finds_missing_extra_and_disagreeing_entries() {
        let mut images = BTreeMap::new();
        images.insert("a/pinned:1@".to_string() + &d('1'), Use { reference: String::new(), source: Source::Catalog });
        images.insert("a/locked:1".to_string(), Use { reference: String::new(), source: Source::Lock });
        images.insert("a/bare:1".to_string(), Use { reference: String::new(), source: Source::Unlocked });
        let mut lock = Lock::default();
        for (k, c) in [("a/pinned:1", '2'), ("a/locked:1", '3'), ("a/gone:1", '4')] {
            lock.images.insert(k.into(), Entry { digest: d(c), platforms: vec![] });
        }
        let found = check(&images, Some(&lock));
        assert_eq!(found.missing, ["a/bare:1"]);
        assert_eq!(found.extra, ["a/gone:1"]);
        assert_eq!(found.disagrees, [("a/pinned:1".to_string(), d('2'), d('1'))]);
        assert!(!found.passed());
        lock.images.remove("a/gone:1");
        lock.images.get_mut("a/pinned:1").unwrap().digest = d('1');
        images.get_mut("a/bare:1").unwrap().source = Source::Shipped;
        assert!(check(&images, Some(&lock)).passed());
    }
}
