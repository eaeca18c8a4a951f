//! `k3d-gpu show PLANFILE`: a saved plan read back, as `plan` printed it (text, or plan/v1
//! with --json), with what it was made from and how to apply it. Reads nothing else: no
//! config, no host, no Docker; it only looks whether the paths the plan records exist, to say
//! where its apply command runs.

use std::path::Path;

use crate::cli::Global;
use crate::error::{EXIT_OK, Result};
use crate::plan::Plan;

pub fn run(global: &Global, file: &Path) -> Result<u8> {
    let (plan, bytes) = super::apply::read_plan_file(file)?;
    if global.json {
        super::print_bytes(&plan.to_bytes());
        return Ok(EXIT_OK);
    }
    super::print_bytes(text(file, &plan, &bytes).as_bytes());
    Ok(EXIT_OK)
}

/// The text: a header (the file, the options it was made with, offline or not), the plan as
/// `plan` prints it, and the command that applies it.
pub fn text(file: &Path, plan: &Plan, bytes: &[u8]) -> String {
    let canonical = plan.to_bytes();
    let hash = crate::canonical::sha256(&canonical);
    let name = crate::escape::one_line(&file.display().to_string()).into_owned();
    let mut out = format!("plan file {name}\n");
    out.push_str(&format!(
        "made with: {}\n",
        crate::escape::one_line(&super::made_from::describe(plan.inputs.made_from.as_ref()))
    ));
    let offline = super::apply::made_offline(plan);
    if offline {
        out.push_str(
            "made against nothing (--offline, or a saved observation of nothing): `apply` refuses it; plan against what exists to apply\n",
        );
    }
    if canonical != bytes {
        out.push_str("its bytes are not the plan's canonical bytes (edited?): `apply` refuses it\n");
    }
    out.push('\n');
    out.push_str(&crate::plan::render::text(plan, &hash, crate::plan::render::Style { color: false }));
    if !offline && canonical == bytes && !plan.is_empty() {
        let (apply, note) = apply_command(file, plan.inputs.made_from.as_ref(), Path::exists);
        out.push_str(&format!("to apply it: {}\n", crate::escape::one_line(&apply.to_string())));
        if let Some(note) = note {
            out.push_str(&format!("{}\n", crate::escape::one_line(&note)));
        }
    }
    out
}

/// The command that applies `file` from the working directory. The plan's paths are relative
/// to the directory it was made in, which the plan does not record (a plan is the same bytes
/// wherever it is made): `apply` reads them relative to where it runs. So the command runs
/// where they are found (`exists`): here, `k3d-gpu apply FILE`; else beside the plan file,
/// `cd DIR && k3d-gpu apply NAME`. A directory holding every recorded path and, when the plan
/// names no `-c`, a `k3dgpu.toml`, is preferred. Found in neither: the plain command, and a
/// note saying where it must run.
fn apply_command(
    file: &Path,
    made: Option<&crate::plan::MadeFrom>,
    exists: impl Fn(&Path) -> bool,
) -> (crate::shell::Command, Option<String>) {
    // A path named like an option would be read as one, by `cd` and by `apply` alike:
    // `Command::path` writes it `./-p.json`.
    let apply = |name: &Path| crate::shell::Command::new("k3d-gpu").lit("apply").path(name);
    let empty = crate::plan::MadeFrom::default();
    let made = made.unwrap_or(&empty);
    let paths: Vec<&str> =
        (made.config.iter().chain(&made.root).chain(&made.facts).chain(&made.stdlib)).map(String::as_str).collect();
    let default_config = made.config.is_none().then_some(super::inputs::DEFAULT_CONFIG);
    let fits = |dir: &Path, strict: bool| {
        paths.iter().all(|p| exists(&dir.join(p))) && (!strict || default_config.is_none_or(|c| exists(&dir.join(c))))
    };
    // Here, then the plan file's directory when it is another.
    let beside = file.parent().filter(|d| !d.as_os_str().is_empty() && *d != Path::new("."));
    let here = Path::new("");
    let chosen =
        [true, false].into_iter().find_map(|strict| std::iter::once(here).chain(beside).find(|dir| fits(dir, strict)));
    match (chosen, beside, file.file_name()) {
        (Some(dir), Some(parent), Some(name)) if dir == parent => {
            (crate::shell::Command::new("cd").path(dir).and(apply(Path::new(name))), None)
        }
        (Some(_), _, _) => (apply(file), None),
        (None, _, _) => (
            apply(file),
            Some(format!(
                "run it from the directory the plan was made in: its paths ({}) are relative to that directory, and are not all found here{}",
                super::made_from::describe(Some(made)),
                if beside.is_some() { " or beside the plan file" } else { "" }
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::MadeFrom;

    fn made() -> MadeFrom {
        MadeFrom { config: Some("lab.toml".into()), root: vec!["hosts/rtx".into()], ..MadeFrom::default() }
    }

    #[test]
    fn the_apply_command_runs_where_the_recorded_paths_are() {
        let files = |present: &'static [&'static str]| move |p: &Path| present.contains(&p.to_str().unwrap());
        // Found here: the plain command.
        let (c, note) = apply_command(Path::new("lab/p.json"), Some(&made()), files(&["lab.toml", "hosts/rtx"]));
        assert_eq!((c.to_string().as_str(), note), ("k3d-gpu apply lab/p.json", None));
        // Found beside the plan file: run there, with the file's name.
        let (c, note) =
            apply_command(Path::new("my lab/p.json"), Some(&made()), files(&["my lab/lab.toml", "my lab/hosts/rtx"]));
        assert_eq!((c.to_string().as_str(), note), ("cd 'my lab' && k3d-gpu apply p.json", None));
        let (c, _) = apply_command(Path::new("-x/p.json"), Some(&made()), files(&["-x/lab.toml", "-x/hosts/rtx"]));
        assert_eq!(c.to_string(), "cd ./-x && k3d-gpu apply p.json");
        let (c, _) = apply_command(Path::new("lab/-p.json"), Some(&made()), files(&["lab/lab.toml", "lab/hosts/rtx"]));
        assert_eq!(c.to_string(), "cd lab && k3d-gpu apply ./-p.json", "a plan file named like an option");
        let (c, _) = apply_command(Path::new("-p.json"), Some(&made()), files(&["lab.toml", "hosts/rtx"]));
        assert_eq!(c.to_string(), "k3d-gpu apply ./-p.json");
        // No -c recorded: the directory with a k3dgpu.toml is the one.
        let (c, _) = apply_command(Path::new("lab/p.json"), None, files(&["lab/k3dgpu.toml"]));
        assert_eq!(c.to_string(), "cd lab && k3d-gpu apply p.json");
        let (c, _) = apply_command(Path::new("lab/p.json"), None, files(&[]));
        assert_eq!(c.to_string(), "k3d-gpu apply lab/p.json");
        // Found nowhere: said.
        let (c, note) = apply_command(Path::new("lab/p.json"), Some(&made()), files(&["lab.toml"]));
        assert_eq!(c.to_string(), "k3d-gpu apply lab/p.json");
        let note = note.unwrap();
        assert!(note.contains("(-c lab.toml --root hosts/rtx)") && note.contains("beside the plan file"), "{note}");
    }
}
