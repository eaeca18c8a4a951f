//! Loading the inputs every config-consuming command needs: the config file, the catalog
//! (built in or --stdlib, plus the config's own components), and rendering compile errors
//! as diagnostics that point into the config.

use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::cli::Global;
use crate::compile::CompileError;
use crate::config::{Config, ConfigError, load_all, span_of, span_of_element};
use crate::error::{Error, Result};

/// The config as loaded, with its text for diagnostics.
pub struct Inputs {
    pub config: Config,
    /// What diagnostics call the file.
    pub name: String,
    pub text: String,
    /// Directory relative paths in the config are resolved against.
    pub dir: PathBuf,
}

const DEFAULT_CONFIG: &str = "k3dgpu.toml";

pub fn load_config(global: &Global) -> Result<Inputs> {
    let (path, explicit) = match &global.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG), false),
    };
    // No config at all is the reference launcher's defaults, like an empty file.
    let text = if !explicit && crate::input_file::is_missing(&path) {
        String::new()
    } else {
        crate::input_file::read_text(&path).map_err(|reason| Error::Input {
            what: "config",
            path: path.display().to_string(),
            reason,
            help: Some("pass -c FILE, or run where k3dgpu.toml is".into()),
        })?
    };
    let name = path.display().to_string();
    let config = load_all(&name, &text)
        .map_err(|errors| Error::Invalid(errors.into_iter().map(miette::Report::new).collect()))?;
    let dir = path.parent().map(Path::to_path_buf).filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| ".".into());
    Ok(Inputs { config, name, text, dir })
}

pub fn load_catalog(global: &Global, inputs: &Inputs) -> Result<Catalog> {
    let invalid = |e: Box<crate::catalog::CatalogError>| Error::Invalid(vec![miette::Report::new(*e)]);
    let mut catalog = match &global.stdlib {
        Some(dir) => Catalog::from_dir(dir).map_err(invalid)?,
        None => Catalog::embedded().map_err(invalid)?,
    };
    for component in &inputs.config.components {
        let path = inputs.dir.join(&component.path);
        let manifests = path.parent().map(Path::to_path_buf).unwrap_or_else(|| ".".into());
        catalog.add_user_file(&path, &manifests).map_err(invalid)?;
    }
    catalog.check().map_err(invalid)?;
    catalog.images.user = user_lock(inputs)?;
    Ok(catalog)
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
    let text = crate::input_file::read_text(&path).map_err(bad)?;
    crate::images::Lock::parse(&text).map(Some).map_err(bad)
}

/// What compiling these inputs gives, with what it was compiled from.
pub struct Compiled {
    pub catalog: Catalog,
    pub facts: crate::facts::Facts,
    pub graph: crate::compile::DesiredGraph,
}

/// Loads the catalog and facts and compiles; compile errors become diagnostics.
pub fn compile(global: &Global, inputs: &Inputs) -> Result<Compiled> {
    let catalog = load_catalog(global, inputs)?;
    let facts = super::load_facts(global)?;
    let graph = crate::compile::compile(&inputs.config, &facts, &catalog)
        .map_err(|errors| Error::Invalid(compile_diagnostics(inputs, errors)))?;
    Ok(Compiled { catalog, facts, graph })
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
