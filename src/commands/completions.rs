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
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut out);
    if shell == Shell::Bash { bash_states_fixed(out) } else { out }
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
