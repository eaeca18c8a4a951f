//! Loading the inputs every config-consuming command needs: the config file, the catalog
//! (built in or --stdlib, plus the config's own components), and rendering compile errors
//! as diagnostics that point into the config.

use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::cli::Global;
use crate::compile::CompileError;
use crate::config::{Config, ConfigError, load_all, span_of, span_of_element};
use crate::error::{Error, Result};
use crate::input_file::Unconfined;

/// The config as loaded, with its text for diagnostics.
pub struct Inputs {
    pub config: Config,
    /// What diagnostics call the file.
    pub name: String,
    pub text: String,
    /// Directory relative paths in the config are resolved against.
    pub dir: PathBuf,
}

/// The config read when no `-c` is given, in the working directory.
pub(crate) const DEFAULT_CONFIG: &str = "k3dgpu.toml";

pub fn load_config(global: &Global) -> Result<Inputs> {
    let (path, explicit) = match &global.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG), false),
    };
    // No config at all is the reference launcher's defaults, like an empty file: said once
    // on stderr, so a run in the wrong directory does not pass for the intended config.
    let text = if !explicit && crate::input_file::is_missing(&path) {
        no_config_note(global.json);
        String::new()
    } else {
        crate::input_file::read_text(&path).map_err(|reason| Error::Input {
            what: "config",
            path: path.display().to_string(),
            reason: reason.to_string(),
            help: Some("pass -c FILE, or run where k3dgpu.toml is".into()),
        })?
    };
    let name = path.display().to_string();
    let config = load_all(&name, &text)
        .map_err(|errors| Error::Invalid(errors.into_iter().map(miette::Report::new).collect()))?;
    // The name becomes file names (the lock, k3d's config) and a Docker/kubectl context: it
    // is checked here, before anything uses it, not later in compile.
    if !crate::config::cluster_name(&config.cluster.name) {
        let span = span_of(&text, &["cluster", "name"]);
        let label = if span.is_some() { "cluster.name".to_string() } else { String::new() };
        let error = ConfigError::at(
            &name,
            &text,
            span,
            format!("cluster name {} is not a valid k3d name", crate::escape::quoted(&config.cluster.name)),
            label,
            Some(format!(
                "use 1-{} lowercase letters, digits and '-', not starting or ending with '-'",
                crate::config::MAX_CLUSTER_NAME
            )),
        );
        return Err(Error::Invalid(vec![miette::Report::new(error)]));
    }
    let dir = path.parent().map(Path::to_path_buf).filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| ".".into());
    let mut config = config;
    read_registry_credentials(&mut config, &dir);
    config.host_paths.model_store = resolve_model_store(&config, &global.root);
    Ok(Inputs { config, name, text, dir })
}

/// What a run without a config says, once per process.
pub const NO_CONFIG: &str = "no config found (no -c, and no k3dgpu.toml in this directory): using the defaults";

fn no_config_note(json: bool) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    if json {
        crate::stderrln!("{}", serde_json::json!({ "event": "note", "text": NO_CONFIG }));
    } else {
        crate::stderrln!("note: {NO_CONFIG}");
    }
}

/// Reads `[cluster.registries] credentials` for the compile: its digest and the registries it
/// configures go into the config (`credentials_read`), the credentials stay in the file. A
/// file that cannot be read or parsed is recorded as such and is a compile error, so
/// commands that never compile (`destroy`, `logs`) do not need it.
///
/// The file is confined as a `[[components]] path` is: with every link resolved it must be
/// inside the repository that holds the config, so a link to `~/.docker/…` or another
/// repository's secrets is not read, and its registry names do not reach the plan. The digest
/// is keyed with this machine's key in the state directory (`apply::registries::machine_key`).
fn read_registry_credentials(config: &mut Config, dir: &Path) {
    let Some(registries) = config.cluster.registries.as_mut() else { return };
    let Some(file) = registries.credentials.as_deref() else { return };
    if crate::config::fleet::path_problem(file).is_some() {
        return; // compile says why
    }
    use crate::config::{CredentialsStep, CredentialsUnread};
    let failed =
        |step: CredentialsStep| move |e: &dyn std::fmt::Display| CredentialsUnread { step, reason: e.to_string() };
    let read = confine_file(dir, file)
        .map_err(|e| failed(CredentialsStep::Confine)(&e))
        .and_then(|path| crate::input_file::read_text(&path).map_err(|e| failed(CredentialsStep::Read)(&e)))
        .and_then(|text| {
            crate::apply::registries::Credentials::parse(&text).map_err(|e| failed(CredentialsStep::Parse)(&e))
        })
        .and_then(|c| {
            let env = |k: &str| std::env::var(k).ok();
            let state = crate::apply::lock::state_dir(&env);
            let key = crate::apply::registries::machine_key(&state).map_err(|e| failed(CredentialsStep::Key)(&e))?;
            Ok(crate::config::CredentialsRead { digest: c.digest(&key), registries: c.registries() })
        });
    registries.credentials_read = Some(read);
}

/// `path` (relative to `config_dir`) with every link resolved, when that is inside
/// [`confinement`]; else why not.
pub fn confine_file(config_dir: &Path, path: &str) -> std::result::Result<PathBuf, Unconfined> {
    let boundary = confinement(config_dir).map_err(|e| Unconfined::ConfigDir(e.kind()))?;
    crate::input_file::resolve_within(&boundary, config_dir, Path::new(path))
}

/// `[cluster] volumes` sources on `host` (the fixture host `--root` names, else this machine):
/// an error on its list element for each that does not exist, and the config with what each
/// link among them resolves to (`Config::host_paths`), which compile judges. Docker would
/// create a missing source as an empty directory owned by root, and k3d-gpu never writes to
/// the host. Entries that do not parse are left to the compile, which says why.
pub fn volume_sources(inputs: &Inputs, host: &crate::host::HostRoot) -> (Vec<miette::Report>, crate::config::Config) {
    let mut config = inputs.config.clone();
    let mut out = Vec::new();
    for (i, entry) in inputs.config.cluster.volumes.iter().enumerate() {
        let Ok(volume) = crate::compile::user_volumes::parse(entry) else { continue };
        let problem = match host.canonical(&volume.host) {
            Ok(Some(resolved)) => {
                if resolved != volume.host {
                    config.host_paths.volumes.insert(volume.host, resolved);
                }
                continue;
            }
            Ok(None) => {
                "does not exist on this host: Docker would create it as an empty directory owned by root".to_string()
            }
            Err(e) => format!("cannot be checked on this host: {e}"),
        };
        let span = span_of_element(&inputs.text, &["cluster", "volumes"], i);
        let message =
            format!("volume source {} {problem} [volume-source-missing]", crate::escape::quoted(&volume.host));
        let help = "create the directory yourself (k3d-gpu never writes to the host), or correct the path";
        out.push(config_error(inputs, span, "cluster.volumes", message, help));
    }
    (out, config)
}

/// The host model store's directory with every link resolved on this machine, where apply
/// makes and mounts it: `[agent] model_dir`, else the default under the user's data directory.
/// `None` for an existing cluster (no store), a `model_dir` compile refuses as written, no
/// data directory (apply says so), or a fixture host (`--root` other than `/`): that plan is
/// another machine's, and this one's home and links are not its store, so it names the store
/// as written, the same on every machine that makes it.
fn resolve_model_store(
    config: &Config,
    roots: &[PathBuf],
) -> Option<std::result::Result<String, crate::config::Unresolved>> {
    if config.cluster.provider != crate::config::Provider::K3d {
        return None;
    }
    if roots.iter().any(|root| !root.canonicalize().is_ok_and(|r| r == Path::new("/"))) {
        return None;
    }
    let configured = config.agent.as_ref().and_then(|a| a.model_dir.as_deref());
    if configured.is_some_and(|d| !d.starts_with('/')) {
        return None;
    }
    let short = crate::compile::models::short(configured, &config.cluster.name);
    let data_home = crate::apply::k3d::data_home(&|k| std::env::var(k).ok());
    let path = crate::apply::k3d::model_store_path(&short, data_home.as_deref()).ok()?;
    Some(
        crate::input_file::resolve_links(&path)
            .map_err(|e| {
                use crate::config::Unresolved;
                use crate::input_file::Unconfined;
                // Every variant named: one resolve_links comes to return is mapped on purpose.
                match e {
                    Unconfined::Dangling => Unresolved::Dangling,
                    Unconfined::Unresolvable(kind) | Unconfined::ConfigDir(kind) => Unresolved::Io(kind),
                    Unconfined::Missing => Unresolved::Io(std::io::ErrorKind::NotFound),
                    // The only name resolve_links refuses is one with a `..` component.
                    Unconfined::Name(_) => Unresolved::DotDot,
                    Unconfined::Outside(_) => Unresolved::Io(std::io::ErrorKind::PermissionDenied),
                }
            })
            .and_then(|p| p.into_os_string().into_string().map_err(|_| crate::config::Unresolved::NotUtf8)),
    )
}

/// A diagnostic on the config at `span` (labelled `key` where the span was found), with help.
fn config_error(
    inputs: &Inputs,
    span: Option<std::ops::Range<usize>>,
    key: &str,
    message: String,
    help: &str,
) -> miette::Report {
    let label = if span.is_some() { key.to_string() } else { String::new() };
    miette::Report::new(ConfigError::at(&inputs.name, &inputs.text, span, message, label, Some(help.into())))
}

pub fn load_catalog(global: &Global, inputs: &Inputs) -> Result<Catalog> {
    let invalid = |e: Box<crate::catalog::CatalogError>| Error::Invalid(vec![miette::Report::new(*e)]);
    let mut catalog = match &global.stdlib {
        Some(dir) => {
            // A directory that cannot be read is unreadable input (exit 2), not an invalid
            // catalog (exit 1): that is for what is in it.
            std::fs::read_dir(dir).map_err(|e| Error::Input {
                what: "component catalog",
                path: dir.display().to_string(),
                reason: e.kind().to_string(),
                help: Some("--stdlib takes a directory laid out like the repository's stdlib/ and share/".into()),
            })?;
            crate::component_files::from_dir(dir).map_err(invalid)?
        }
        None => Catalog::embedded().map_err(invalid)?,
    };
    for component in &inputs.config.components {
        let path = confine_component(&inputs.dir, &component.path).map_err(|reason| {
            let span = span_of(&inputs.text, &["components"]);
            let message = format!("component path {}: {reason}", crate::escape::quoted(&component.path));
            let help = "a component is a .kdl file in the repository that holds the config, named relative to it";
            Error::Invalid(vec![config_error(inputs, span, "components", message, help)])
        })?;
        let manifests = path.parent().map(Path::to_path_buf).unwrap_or_else(|| ".".into());
        crate::component_files::add_user_file(&mut catalog, &path, &manifests).map_err(invalid)?;
    }
    catalog.check().map_err(invalid)?;
    catalog.images.user = user_lock(inputs)?;
    Ok(catalog)
}

/// The directory a config's component files must stay in: the repository that holds the
/// config (the nearest directory above it with a `.git`), or the config's own directory when
/// it is in none. Canonical, so links are resolved before anything is compared.
pub fn confinement(config_dir: &Path) -> std::io::Result<PathBuf> {
    crate::input_file::repository_of(config_dir)
}

/// A `[[components]] path` as a file to read, or why not: a relative path to a `.kdl` file
/// that, with every link resolved, is inside [`confinement`]. A config from a pull request
/// must not make `validate` read (and echo) `/proc/self/environ` or `~/.ssh/id_rsa`.
pub fn confine_component(config_dir: &Path, path: &str) -> std::result::Result<PathBuf, Unconfined> {
    let relative = Path::new(path);
    if path.is_empty() || relative.is_absolute() {
        return Err(Unconfined::Name("must be relative to the config's directory"));
    }
    if relative.extension().is_none_or(|e| e != "kdl") {
        return Err(Unconfined::Name("is not a .kdl file"));
    }
    let boundary = confinement(config_dir).map_err(|e| Unconfined::ConfigDir(e.kind()))?;
    let resolved = crate::input_file::resolve_within(&boundary, config_dir, relative)?;
    // Checked on the resolved name too: a link named x.kdl to a file that is not one.
    if resolved.extension().is_none_or(|e| e != "kdl") {
        return Err(Unconfined::Name("is a link to something that is not a .kdl file"));
    }
    Ok(resolved)
}

/// Where the config's images.lock is: beside the config.
pub fn lock_path(inputs: &Inputs) -> PathBuf {
    inputs.dir.join(crate::images::LOCK_FILE)
}

/// The images.lock beside the config, if there is one; a lock that cannot be read or parsed
/// is bad input (exit 2), never silently ignored.
pub fn user_lock(inputs: &Inputs) -> Result<Option<crate::images::Lock>> {
    let path = lock_path(inputs);
    if crate::input_file::is_missing(&path) {
        return Ok(None);
    }
    let bad = |reason: String| Error::Input {
        what: "image lock",
        path: path.display().to_string(),
        reason,
        help: Some("fix or delete it, then run `k3d-gpu images lock`".into()),
    };
    let text = crate::input_file::read_text(&path).map_err(|e| bad(e.to_string()))?;
    crate::images::Lock::parse(&text).map(Some).map_err(|e| bad(e.to_string()))
}

/// What compiling these inputs gives, with what it was compiled from.
pub struct Compiled {
    pub catalog: Catalog,
    pub facts: crate::facts::Facts,
    pub graph: crate::compile::DesiredGraph,
    /// An existing cluster's nodes and their facts (`facts` is then the first node's).
    pub fleet: Vec<(String, std::rc::Rc<crate::facts::Facts>)>,
    /// Where the node image comes from, as read once (a build context is read whole); `None`
    /// for an existing cluster, which has no node image.
    pub source: Option<crate::node_image::Source>,
}

/// Loads the catalog and facts and compiles; compile errors become diagnostics.
pub fn compile(global: &Global, inputs: &Inputs) -> Result<Compiled> {
    let catalog = load_catalog(global, inputs)?;
    if super::fleet::is_fleet(inputs) {
        let fleet = super::fleet::load_nodes(global, inputs)?;
        let graph = super::fleet::compile(inputs, &fleet, &catalog)?;
        // The config check guarantees at least one node.
        let Some(facts) = fleet.first().map(|(_, f)| (**f).clone()) else {
            return Err(Error::Usage {
                message: "provider \"existing\" needs at least one [[nodes]]".into(),
                help: None,
            });
        };
        return Ok(Compiled { catalog, facts, graph, fleet, source: None });
    }
    let facts = super::load_facts(global)?;
    let mut config = std::borrow::Cow::Borrowed(&inputs.config);
    if !inputs.config.cluster.volumes.is_empty() {
        // The host the volumes come from: the fixture host given, else this machine (a saved
        // facts document has no file tree).
        let host = match global.root.first() {
            Some(root) => super::open_root(root)?,
            None => super::open_root(Path::new("/"))?,
        };
        let (errors, resolved) = volume_sources(inputs, &host);
        if !errors.is_empty() {
            return Err(Error::Invalid(errors));
        }
        config = std::borrow::Cow::Owned(resolved);
    }
    let source = node_image_source(inputs)?;
    let graph = crate::compile::compile_with(&config, &facts, &catalog, &source)
        .map_err(|errors| Error::Invalid(compile_diagnostics(inputs, errors)))?;
    Ok(Compiled { catalog, facts, graph, fleet: Vec::new(), source: Some(source) })
}

/// Compile errors as diagnostics underlining the key they are about.
pub fn compile_diagnostics(inputs: &Inputs, errors: Vec<CompileError>) -> Vec<miette::Report> {
    errors
        .into_iter()
        .map(|e| {
            let span = match e.element {
                Some(i) => span_of_element(&inputs.text, &e.key, i),
                None => span_of(&inputs.text, &e.key),
            };
            let label = if span.is_some() { e.key.join(".") } else { String::new() };
            let mut report = ConfigError::at(&inputs.name, &inputs.text, span, e.message, label, e.help);
            report.message = format!("{} [{}]", report.message, e.code);
            miette::Report::new(report)
        })
        .collect()
}

/// Where the node image comes from: `[cluster] image`, the user's `build_context` as read from
/// disk, or the shipped Dockerfile.
pub fn node_image_source(inputs: &Inputs) -> Result<crate::node_image::Source> {
    let cluster = &inputs.config.cluster;
    if let Some(image) = &cluster.image {
        return Ok(crate::node_image::Source::prebuilt(image));
    }
    let Some(dir) = &cluster.build_context else { return Ok(crate::node_image::Source::shipped()) };
    let path = inputs.dir.join(dir);
    let files = crate::input_file::read_tree(&path, crate::node_image::CONTEXT_LIMITS)
        .map_err(|e| e.to_string())
        .and_then(|files| crate::node_image::check_context(files).map_err(|e| e.to_string()))
        .map_err(|reason| Error::Input {
            what: "node image build context",
            path: path.display().to_string(),
            reason,
            help: Some("[cluster] build_context names a directory with a Dockerfile".into()),
        })?;
    Ok(crate::node_image::Source::Build { context: path.display().to_string(), files })
}

/// The node image reference this config creates its cluster from (what observe inspects),
/// resolved without compiling the rest.
pub fn node_image_reference(inputs: &Inputs, catalog: &Catalog) -> Result<String> {
    let source = node_image_source(inputs)?;
    crate::node_image::resolve(&source, &inputs.config.cluster.build_args, &catalog.images)
        .map(|r| r.reference)
        .map_err(|why| Error::Invalid(vec![miette::miette!("the node image cannot be built: {why}")]))
}
