//! `k3d-gpu completions SHELL` and `k3d-gpu man`: shell completions and man pages generated
//! from the clap definitions in `cli.rs`, so they can never drift from `--help`. Packages run
//! these at build time and install the output (see packaging/README.md). The pages' EXAMPLES,
//! ENVIRONMENT and EXIT STATUS sections are `man_sections`'.
//!
//! Rendering is pure (bytes from the command tree); only `man --out` writes, and only the
//! `k3d-gpu*.1` files it names, into the directory the user gave.

use std::path::Path;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::{EXIT_OK, Error, Result};

pub use clap_complete::Shell;

/// The binary's name, which the scripts complete.
const BIN: &str = "k3d-gpu";

/// The completion script for `shell`.
pub fn completion_script(shell: Shell) -> Vec<u8> {
    let mut cmd = with_values(Cli::command());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut out);
    match shell {
        Shell::Bash => bash_config_files(bash_states_fixed(out)),
        Shell::Zsh => zsh_config_files(out),
        Shell::Fish => fish_positionals(&cmd, fish_config_files(&cmd, out)),
        _ => out,
    }
}

/// The command tree as the scripts see it, which no parse ever uses: the values an option
/// takes where they are known words (`--vendors`, `--distro`, `logs COMPONENT`), `-c` as a
/// file, and the options that may come before the command on the binary itself, so
/// `k3d-gpu -c <TAB>` completes a file and not a command. The values are offered, not
/// enforced: the parser keeps its own checks and messages, and `--vendors` still takes a
/// comma list. Components are the built-in catalog's; a config's own `[[components]]` and a
/// `--stdlib` catalog are not known when the script is made.
fn with_values(cmd: clap::Command) -> clap::Command {
    use clap::builder::{PossibleValue, PossibleValuesParser};
    fn words(names: impl IntoIterator<Item = String>) -> PossibleValuesParser {
        // The script is printed once per process; the few names live as long as it.
        PossibleValuesParser::new(names.into_iter().map(|n| PossibleValue::new(n.leak() as &'static str)))
    }
    fn walk(cmd: clap::Command, components: &[String]) -> clap::Command {
        let ids: Vec<String> = cmd.get_arguments().map(|a| a.get_id().to_string()).collect();
        let mut cmd = cmd;
        for id in ids {
            cmd = cmd.mut_arg(&id, |arg| match id.as_str() {
                "vendors" => {
                    let keys = crate::facts::vendors::Vendor::ALL.map(|v| v.key().to_string());
                    arg.value_parser(words(std::iter::once("auto".to_string()).chain(keys)))
                }
                "distro" => arg.value_parser(words(crate::host_setup::Distro::ALL.map(|d| d.key().to_string()))),
                "component" => arg.value_parser(words(components.iter().cloned())),
                "config" => arg.value_hint(clap::ValueHint::FilePath),
                _ => arg,
            });
        }
        let subs: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        for name in subs {
            cmd = cmd.mut_subcommand(&name, |sub| walk(sub, components));
        }
        cmd
    }
    let components: Vec<String> =
        crate::catalog::Catalog::embedded().map(|c| c.components.keys().cloned().collect()).unwrap_or_default();
    let mut cmd = walk(cmd, &components);
    // The leading options, as the first command that takes each defines it (values included).
    let leading: Vec<clap::Arg> = crate::cli::LEADING
        .iter()
        .filter_map(|id| {
            cmd.get_subcommands().find_map(|s| s.get_arguments().find(|a| a.get_id().as_str() == *id).cloned())
        })
        .collect();
    for arg in leading {
        cmd = cmd.arg(arg);
    }
    cmd
}

/// bash: `-c`/`--config` offer directories and `*.toml` files, not every file. clap_complete
/// writes `compgen -f` for every file option; the `-c)` and `--config)` arms' are replaced.
fn bash_config_files(script: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(script).unwrap_or_default();
    let every_file = r#"COMPREPLY=($(compgen -f "${cur}"))"#;
    let toml = r#"COMPREPLY=($(compgen -d -- "${cur}") $(compgen -f -X '!*.toml' -- "${cur}"))"#;
    let mut in_config = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match line.trim() {
            "-c)" | "--config)" => in_config = true,
            ";;" => in_config = false,
            _ => {}
        }
        if in_config && line.contains(every_file) {
            out.push_str(&line.replace(every_file, toml));
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

/// zsh: `_files -g "*.toml"` (directories still offered) for `-c`/`--config`.
fn zsh_config_files(script: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(script).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let spec = line.trim_start();
        if spec.starts_with("'-c+[") || spec.starts_with("'--config=[") {
            out.push_str(&line.replacen(":_files'", r#":_files -g "*.toml"'"#, 1));
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

/// fish: the values of a command's positionals (`logs COMPONENT`), which clap_complete's fish
/// generator leaves out (it writes named options only), one `complete` line per command.
fn fish_positionals(cmd: &clap::Command, script: Vec<u8>) -> Vec<u8> {
    let mut text = String::from_utf8(script).unwrap_or_default();
    let function = format!("__fish_{}_using_subcommand", BIN.replace('-', "_"));
    for sub in cmd.get_subcommands() {
        let values: Vec<String> = sub
            .get_positionals()
            .flat_map(|p| p.get_possible_values())
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        if !values.is_empty() {
            let condition = format!("{function} {}", sub.get_name());
            text.push_str(&format!("complete -c {BIN} -n \"{condition}\" -f -a \"{}\"\n", values.join(" ")));
        }
    }
    text.into_bytes()
}

/// fish: `-c`/`--config` complete directories and `*.toml` files, through a function the
/// script defines, instead of any file (`-F`): fish's own `__fish_complete_suffix`, whose
/// other files (it offers them after the matching ones) are dropped, given the word without
/// a `--config=` before it. And the options before the command complete their values: the
/// generator's condition for them (no command yet, by `argparse`) fails while the option
/// still lacks its value, so theirs is "no command given" instead.
fn fish_config_files(cmd: &clap::Command, script: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(script).unwrap_or_default();
    let prefix = format!("__fish_{}", BIN.replace('-', "_"));
    let mut out = format!(
        "function {prefix}_toml_files\n    set -l word (string replace -r -- '^--?[^=]*=' '' (commandline -ct))\n    string match -r --entire -- '\\.toml$|/$' (__fish_complete_suffix \"$word\" .toml)\nend\n\n"
    );
    let top = format!("-n \"{prefix}_needs_command\"");
    let mut commands: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
    commands.push("help");
    let no_command = format!("-n \"not {prefix}_using_subcommand {}\"", commands.join(" "));
    for line in text.split_inclusive('\n') {
        let mut line = line.to_string();
        if line.contains(" -s c -l config ") {
            line = line.replacen(" -r -F", &format!(" -r -f -a \"({prefix}_toml_files)\""), 1);
        }
        let leading = crate::cli::LEADING.iter().any(|id| line.contains(&format!(" -l {id} ")));
        if leading && line.contains(" -r") {
            line = line.replacen(&top, &no_command, 1);
        }
        out.push_str(&line);
    }
    out.into_bytes()
}

/// clap_complete 4.6.12's bash generator names the state a subcommand's word leads to from
/// the binary's name with `-` turned into `__` (`k3d__gpu__subcmd__plan`, the
/// `cmd="…"` assignments in its first `case`), but the arms that complete each state's
/// options from the name with `-` turned into `__subcmd__` (`k3d__subcmd__gpu__subcmd__plan)`,
/// in `subcommand_details`, src/aot/shells/bash.rs). With a dash in the name no arm ever
/// matches, and nothing after the first word completes. The arms are renamed to the states.
fn bash_states_fixed(script: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(script).unwrap_or_default();
    let wrong = format!("{}__subcmd__", BIN.replace('-', "__subcmd__"));
    let right = format!("{}__subcmd__", BIN.replace('-', "__"));
    text.replace(&wrong, &right).into_bytes()
}

/// Every man page: `k3d-gpu.1` first, then one per (nested) subcommand, e.g.
/// `k3d-gpu-images-lock.1`, as (file name, roff bytes). No date in them, so the bytes depend
/// only on the version and the definitions.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: clap::Command, path: &str, pages: &mut Vec<(String, Vec<u8>)>) {
        let subs: Vec<clap::Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned().collect();
        let extra = super::man_sections::sections(&cmd, path);
        let man = clap_mangen::Man::new(cmd);
        let mut bytes = Vec::new();
        // Rendering into a Vec cannot fail: the only errors are the writer's.
        man.render(&mut bytes).expect("writing to a Vec");
        pages.push((man.get_filename(), super::man_sections::insert(bytes, &extra)));
        for sub in subs {
            let sub_path =
                if path.is_empty() { sub.get_name().to_string() } else { format!("{path} {}", sub.get_name()) };
            walk(sub, &sub_path, pages);
        }
    }
    // `build` gives each subcommand its full display name (k3d-gpu-images-lock), which is the
    // page's file name and title; the `help` subcommand has no page.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    walk(cmd, "", &mut pages);
    pages
}

pub fn completions(args: &CompletionsArgs) -> Result<u8> {
    super::print_bytes(&completion_script(args.shell));
    Ok(EXIT_OK)
}

pub fn man(args: &ManArgs) -> Result<u8> {
    let pages = man_pages();
    let Some(dir) = &args.out else {
        super::print_bytes(&pages[0].1);
        return Ok(EXIT_OK);
    };
    write_pages(dir, &pages)?;
    Ok(EXIT_OK)
}

fn write_pages(dir: &Path, pages: &[(String, Vec<u8>)]) -> Result<()> {
    let failed = |path: &Path, e: std::io::Error| Error::Output {
        path: path.display().to_string(),
        reason: e.kind().to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    for (name, bytes) in pages {
        // Never through a link planted where a page goes (`output_file`).
        super::write_out(&dir.join(name), bytes, crate::output_file::PUBLIC)?;
    }
    Ok(())
}
