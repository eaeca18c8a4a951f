//! The catalog's files on disk: a `--stdlib` directory laid out like the repository
//! (`DIR/stdlib/*.kdl`, `DIR/share/*.yml`, `DIR/share/images.lock`) and the config's own
//! `[[components]]`. `catalog` is pure — text in, components out — so the reading lives here,
//! bounded through `input_file`, and hands it the text and a manifest loader.

use std::path::Path;

use crate::catalog::{Catalog, CatalogError, MAX_COMPONENT, ManifestUnreadable};

/// A catalog from a directory laid out like the repository's: `DIR/stdlib/*.kdl` and
/// `DIR/share/*.yml` (or the `.kdl` files and manifests side by side in DIR). The files are
/// read now; each manifest is parsed (and its images checked) when first used.
pub fn from_dir(dir: &Path) -> Result<Catalog, Box<CatalogError>> {
    let stdlib = if dir.join("stdlib").is_dir() { dir.join("stdlib") } else { dir.to_path_buf() };
    let share = if dir.join("share").is_dir() { dir.join("share") } else { dir.to_path_buf() };
    let mut paths: Vec<_> = std::fs::read_dir(&stdlib)
        .map_err(|e| CatalogError::plain(format!("cannot read {}: {e}", stdlib.display()), None))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
        .collect();
    paths.sort();
    // A directory laid out like the repository carries its own shipped lock.
    let lock = share.join(crate::images::LOCK_FILE);
    let shipped = if lock.is_file() {
        let text = crate::input_file::read_text(&lock)
            .map_err(|e| CatalogError::plain(format!("cannot read {}: {e}", lock.display()), None))?;
        crate::images::Lock::parse(&text).map_err(|e| CatalogError::plain(format!("{}: {e}", lock.display()), None))?
    } else {
        crate::images::Lock::default()
    };
    let mut texts = Vec::with_capacity(paths.len());
    for path in &paths {
        let text = crate::input_file::read_text(path)
            .map_err(|e| CatalogError::plain(format!("cannot read component {}: {e}", path.display()), None))?;
        texts.push((path.display().to_string(), text));
    }
    let load = |name: &str| {
        let file = share.join(name);
        crate::input_file::read_text(&file).map_err(|e| ManifestUnreadable::Read { path: file, source: e.into() })
    };
    Catalog::from_texts(shipped, texts.iter().map(|(origin, text)| (origin.clone(), text.as_str())), &load)
}

/// Reads one of the config's own component files (`[[components]]`) into `catalog`.
/// Its manifest must be a `.yml`/`.yaml` file beside it, not a link: a component in a pull
/// request must not name `.env` or a link to `~/.kube/config` as its manifest.
pub fn add_user_file(catalog: &mut Catalog, path: &Path, manifest_dir: &Path) -> Result<(), Box<CatalogError>> {
    let text = crate::input_file::read_text_capped(path, MAX_COMPONENT)
        .map_err(|e| CatalogError::plain(format!("cannot read component {}: {e}", path.display()), None))?;
    catalog.add_user_component(&path.display().to_string(), &text, &|name| {
        let file = manifest_dir.join(name);
        if !(name.ends_with(".yml") || name.ends_with(".yaml")) {
            return Err(ManifestUnreadable::NotYaml(file));
        }
        if std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(ManifestUnreadable::Link(file));
        }
        crate::input_file::read_text(&file).map_err(|e| ManifestUnreadable::Read { path: file, source: e.into() })
    })
}
