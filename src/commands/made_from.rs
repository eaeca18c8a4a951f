//! What a saved plan was made from (`plan::MadeFrom`): the `-c`, `--root`, `--facts`,
//! `--stdlib` and `--vendors` given, recorded in the plan as they were given (a relative path
//! without `.` components, an absolute one as it is), and read back by `apply PLANFILE` for
//! the options it is not given. A plan file is outside text: a path it records is read only
//! when it resolves (links included) inside the plan file's directory ([`confined`]).

use std::path::{Component, Path, PathBuf};

use crate::cli::Global;
use crate::plan::MadeFrom;

/// `path` as a plan records it, without `.` components (`./lab.toml` is `lab.toml`); an
/// absolute one stays absolute. Not resolved: a link stays the name the person gave.
/// Never made relative to the working directory: the same command with absolute paths gives
/// the same plan (and hash) from any directory.
pub fn relative(path: &Path) -> String {
    let kept: PathBuf = path.components().filter(|c| !matches!(c, Component::CurDir)).collect();
    if kept.as_os_str().is_empty() { ".".to_string() } else { kept.display().to_string() }
}

/// The options of `global` as a plan records them; `None` when none was given.
pub fn record(global: &Global) -> Option<MadeFrom> {
    let rel = |p: &PathBuf| relative(p);
    let made = MadeFrom {
        config: global.config.as_ref().map(rel),
        facts: global.facts.iter().map(rel).collect(),
        root: global.root.iter().map(rel).collect(),
        stdlib: global.stdlib.as_ref().map(rel),
        vendors: global.vendors.clone(),
    };
    (!made.is_empty()).then_some(made)
}

/// Checks each path `saved` records that [`fill`] would take (the option is not in `global`):
/// from the working directory, with every link resolved, it must be inside `plan_dir` (the
/// plan file's directory), and a config must be a `.toml` file, as a component must be a
/// `.kdl` one. Otherwise `(flag, path, why)`: the flag must be given again. A plan file whose
/// recorded config is `.env` would else have its secrets quoted by the TOML diagnostic.
pub fn confined(global: &Global, saved: &MadeFrom, plan_dir: &Path) -> Result<(), (&'static str, String, String)> {
    let boundary = std::fs::canonicalize(plan_dir)
        .map_err(|e| ("a plan file", plan_dir.display().to_string(), format!("cannot be resolved: {}", e.kind())))?;
    let host_given = !global.root.is_empty() || !global.facts.is_empty();
    let mut recorded: Vec<(&'static str, &String)> = Vec::new();
    if global.config.is_none() {
        recorded.extend(saved.config.iter().map(|p| ("-c", p)));
    }
    if global.stdlib.is_none() {
        recorded.extend(saved.stdlib.iter().map(|p| ("--stdlib", p)));
    }
    if !host_given {
        recorded.extend(saved.root.iter().map(|p| ("--root", p)));
        recorded.extend(saved.facts.iter().map(|p| ("--facts", p)));
    }
    for (flag, path) in recorded {
        let outside = || format!("is not inside the plan file's directory {} (links included)", boundary.display());
        match std::fs::canonicalize(path) {
            // Missing: the command that reads it says so, and quotes nothing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err((flag, path.clone(), format!("cannot be resolved: {}", e.kind()))),
            Ok(resolved) if !resolved.starts_with(&boundary) => return Err((flag, path.clone(), outside())),
            Ok(resolved) if flag == "-c" && resolved.extension().is_none_or(|e| e != "toml") => {
                return Err((flag, path.clone(), "is not a .toml file".into()));
            }
            Ok(_) => {}
        }
    }
    Ok(())
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
    fn paths_are_recorded_as_given_whatever_the_working_directory() {
        assert_eq!(relative(Path::new("./k3dgpu.toml")), "k3dgpu.toml");
        assert_eq!(relative(Path::new("hosts/./a")), "hosts/a");
        assert_eq!(relative(Path::new("../other/x.toml")), "../other/x.toml");
        assert_eq!(relative(Path::new(".")), ".");
        // Absolute stays absolute, so the hash of `-c /abs --root /abs` is the same from any
        // directory (it was made relative when inside the working directory).
        assert_eq!(relative(Path::new("/home/me/lab/hosts/a")), "/home/me/lab/hosts/a");
        assert_eq!(relative(Path::new("/srv/./facts.json")), "/srv/facts.json");
    }

    #[test]
    fn a_recorded_path_is_read_only_inside_the_plan_files_directory() {
        let dir = tempfile::tempdir().unwrap();
        let plans = dir.path().join("plans");
        std::fs::create_dir(&plans).unwrap();
        std::fs::write(dir.path().join(".env"), "GITHUB_TOKEN=x\n").unwrap();
        std::fs::write(plans.join("lab.toml"), "").unwrap();
        std::fs::write(plans.join("env.toml.txt"), "").unwrap();
        std::os::unix::fs::symlink(dir.path().join(".env"), plans.join("linked.toml")).unwrap();
        let made = |config: &Path| MadeFrom { config: Some(config.display().to_string()), ..MadeFrom::default() };
        let none = Global::default();
        assert!(confined(&none, &made(&plans.join("lab.toml")), &plans).is_ok());
        for bad in [dir.path().join(".env"), plans.join("linked.toml"), plans.join("env.toml.txt")] {
            let refused = confined(&none, &made(&bad), &plans).unwrap_err();
            assert_eq!(refused.0, "-c", "{bad:?}");
        }
        // Given again, the recorded one is not read.
        let given = Global { config: Some("mine.toml".into()), ..Global::default() };
        assert!(confined(&given, &made(&dir.path().join(".env")), &plans).is_ok());
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
