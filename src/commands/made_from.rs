//! What a saved plan was made from (`plan::MadeFrom`): the `-c`, `--root`, `--facts`,
//! `--stdlib` and `--vendors` given, recorded in the plan with paths relative to the working
//! directory, and read back by `apply PLANFILE` for the options it is not given.

use std::path::{Component, Path, PathBuf};

use crate::cli::Global;
use crate::plan::MadeFrom;

/// `path` as a plan records it: a relative path without `.` components (`./lab.toml` is
/// `lab.toml`); an absolute one inside the working directory relative to it, any other
/// absolute one as it is. Not resolved: a link stays the name the person gave.
pub fn relative(path: &Path, cwd: Option<&Path>) -> String {
    let tail = match cwd.and_then(|cwd| path.strip_prefix(cwd).ok()) {
        Some(inside) => inside,
        None if path.is_absolute() => return path.display().to_string(),
        None => path,
    };
    let kept: PathBuf = tail.components().filter(|c| !matches!(c, Component::CurDir)).collect();
    if kept.as_os_str().is_empty() { ".".to_string() } else { kept.display().to_string() }
}

/// The options of `global` as a plan records them; `None` when none was given.
pub fn record(global: &Global) -> Option<MadeFrom> {
    let cwd = std::env::current_dir().ok();
    let rel = |p: &PathBuf| relative(p, cwd.as_deref());
    let made = MadeFrom {
        config: global.config.as_ref().map(rel),
        facts: global.facts.iter().map(rel).collect(),
        root: global.root.iter().map(rel).collect(),
        stdlib: global.stdlib.as_ref().map(rel),
        vendors: global.vendors.clone(),
    };
    (!made.is_empty()).then_some(made)
}

/// `global` with what the plan was made from filling the options it was not given: the
/// config, the catalog, and the host (a root or facts document, and the vendors) as one,
/// since --root and --facts exclude each other. Returns the options taken from the plan.
pub fn fill(global: &Global, saved: &MadeFrom) -> (Global, Vec<&'static str>) {
    let mut out = global.clone();
    let mut taken = Vec::new();
    if out.config.is_none()
        && let Some(config) = &saved.config
    {
        out.config = Some(config.into());
        taken.push("-c");
    }
    if out.stdlib.is_none()
        && let Some(stdlib) = &saved.stdlib
    {
        out.stdlib = Some(stdlib.into());
        taken.push("--stdlib");
    }
    if out.root.is_empty() && out.facts.is_empty() {
        if !saved.root.is_empty() {
            out.root = saved.root.iter().map(PathBuf::from).collect();
            taken.push("--root");
        }
        if !saved.facts.is_empty() {
            out.facts = saved.facts.iter().map(PathBuf::from).collect();
            taken.push("--facts");
        }
    }
    if out.vendors.is_none()
        && let Some(vendors) = &saved.vendors
    {
        out.vendors = Some(vendors.clone());
        taken.push("--vendors");
    }
    (out, taken)
}

/// The options as a command line's words (`-c lab.toml --root hosts/a`), for messages;
/// `(none)` for the defaults.
pub fn describe(made: Option<&MadeFrom>) -> String {
    let Some(made) = made else { return "(no options: the defaults)".into() };
    let global = Global {
        config: made.config.as_ref().map(PathBuf::from),
        root: made.root.iter().map(PathBuf::from).collect(),
        facts: made.facts.iter().map(PathBuf::from).collect(),
        stdlib: made.stdlib.as_ref().map(PathBuf::from),
        json: false,
        vendors: made.vendors.clone(),
    };
    let line = global.k3d_gpu().to_string();
    line.strip_prefix("k3d-gpu ").unwrap_or("(no options: the defaults)").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_recorded_relative_to_the_working_directory() {
        let cwd = Path::new("/home/me/lab");
        assert_eq!(relative(Path::new("./k3dgpu.toml"), Some(cwd)), "k3dgpu.toml");
        assert_eq!(relative(Path::new("hosts/./a"), Some(cwd)), "hosts/a");
        assert_eq!(relative(Path::new("../other/x.toml"), Some(cwd)), "../other/x.toml");
        assert_eq!(relative(Path::new("/home/me/lab/hosts/a"), Some(cwd)), "hosts/a");
        assert_eq!(relative(Path::new("/home/me/lab"), Some(cwd)), ".");
        assert_eq!(relative(Path::new("/srv/facts.json"), Some(cwd)), "/srv/facts.json");
        assert_eq!(relative(Path::new("/home/me/laboratory/x"), Some(cwd)), "/home/me/laboratory/x");
    }

    #[test]
    fn the_options_given_win_and_the_host_is_taken_whole() {
        let saved = MadeFrom {
            config: Some("lab.toml".into()),
            facts: vec![],
            root: vec!["hosts/a".into()],
            stdlib: None,
            vendors: Some("intel".into()),
        };
        let (filled, taken) = fill(&Global::default(), &saved);
        assert_eq!(filled.config.as_deref(), Some(Path::new("lab.toml")));
        assert_eq!(filled.root, vec![PathBuf::from("hosts/a")]);
        assert_eq!(filled.vendors.as_deref(), Some("intel"));
        assert_eq!(taken, ["-c", "--root", "--vendors"]);
        // --facts given: the recorded --root is not added beside it (they exclude each other).
        let given = Global { facts: vec!["f.json".into()], config: Some("x.toml".into()), ..Global::default() };
        let (filled, taken) = fill(&given, &saved);
        assert_eq!(filled.config.as_deref(), Some(Path::new("x.toml")));
        assert!(filled.root.is_empty());
        assert_eq!(taken, ["--vendors"]);
        assert_eq!(describe(Some(&saved)), "-c lab.toml --root hosts/a --vendors intel");
        assert_eq!(describe(None), "(no options: the defaults)");
    }
}
