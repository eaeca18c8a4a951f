//! What packages install and how they are kept honest: the completion scripts and man pages
//! the binary generates name every subcommand, and every packaging file names Cargo.toml's
//! version (and repository), so a release cannot ship a formula for another version.

mod support;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use support::repo;

fn k3d_gpu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_k3d-gpu")).args(args).env("NO_COLOR", "1").output().unwrap()
}

/// Every subcommand path of the CLI, from its own `--help`: ["detect", "facts capture", …].
/// Read from the binary's help, not from clap, so a command added later is covered unasked.
fn subcommands(prefix: &[&str]) -> Vec<Vec<String>> {
    let mut args: Vec<&str> = prefix.to_vec();
    args.push("--help");
    let out = k3d_gpu(&args);
    let help = String::from_utf8(out.stdout).unwrap();
    let Some(section) = help.split("Commands:\n").nth(1) else { return Vec::new() };
    let mut found = Vec::new();
    for line in section.lines() {
        // Command lines are "  name  description"; continuation lines are indented further.
        if !line.starts_with("  ") || line.starts_with("   ") {
            if line.trim().is_empty() || !line.starts_with(' ') {
                break;
            }
            continue;
        }
        let name = line.split_whitespace().next().unwrap();
        if name == "help" {
            continue;
        }
        let mut path: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
        path.push(name.to_string());
        let borrowed: Vec<&str> = path.iter().map(String::as_str).collect();
        found.extend(subcommands(&borrowed));
        found.push(path);
    }
    found
}

#[test]
fn the_help_lists_the_commands_this_test_relies_on() {
    let all: BTreeSet<String> = subcommands(&[]).into_iter().map(|p| p.join(" ")).collect();
    for expected in ["detect", "validate", "plan", "facts capture", "images lock", "images check", "completions", "man"]
    {
        assert!(all.contains(expected), "{expected} missing from {all:?}");
    }
}

#[test]
fn completion_scripts_name_every_subcommand_in_every_shell() {
    let commands = subcommands(&[]);
    for shell in ["bash", "zsh", "fish"] {
        let out = k3d_gpu(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        let script = String::from_utf8(out.stdout).unwrap();
        for path in &commands {
            let name = path.last().unwrap();
            // How each generator offers a subcommand: bash's case arm on (parent, word), zsh's
            // 'name:description' entry, fish's `-a "name"`.
            let offer = match shell {
                "bash" => {
                    let parent: String = path[..path.len() - 1].iter().map(|p| format!("__subcmd__{p}")).collect();
                    format!("k3d__gpu{parent},{name})")
                }
                "zsh" => format!("'{name}:"),
                _ => format!("-a \"{name}\""),
            };
            assert!(script.contains(&offer), "{shell} completion does not offer `{}`", path.join(" "));
        }
        // Each shell's own marker, so a script for the wrong shell fails.
        let marker = match shell {
            "bash" => "-o default k3d-gpu",
            "zsh" => "#compdef k3d-gpu",
            _ => "complete -c k3d-gpu",
        };
        assert!(script.contains(marker), "{shell} script lacks `{marker}`");
    }
}

#[test]
fn an_unknown_shell_is_bad_usage() {
    let out = k3d_gpu(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn the_man_page_lists_every_top_level_command_and_the_version() {
    let out = k3d_gpu(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH k3d-gpu 1"), "not a section-1 page:\n{page}");
    assert!(page.contains(&format!("k3d-gpu {}", env!("CARGO_PKG_VERSION"))));
    for path in subcommands(&[]).iter().filter(|p| p.len() == 1) {
        // roff escapes '-' as '\-'.
        let name = path[0].replace('-', "\\-");
        assert!(page.contains(&format!("k3d\\-gpu\\-{name}(1)")), "k3d-gpu.1 does not list `{}`", path[0]);
    }
}

#[test]
fn man_out_writes_one_page_per_subcommand_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    let out = k3d_gpu(&["man", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
    let written: BTreeSet<String> =
        std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    let mut expected: BTreeSet<String> =
        subcommands(&[]).iter().map(|p| format!("k3d-gpu-{}.1", p.join("-"))).collect();
    expected.insert("k3d-gpu.1".into());
    assert_eq!(written, expected);
    // The page `man k3d-gpu` opens is the one `k3d-gpu man` prints.
    assert_eq!(std::fs::read(out_dir.join("k3d-gpu.1")).unwrap(), k3d_gpu(&["man"]).stdout);
    let lock = std::fs::read_to_string(out_dir.join("k3d-gpu-images-lock.1")).unwrap();
    assert!(lock.contains(".TH k3d-gpu-images-lock 1"), "{lock}");
}

#[cfg(unix)]
#[test]
fn man_out_replaces_a_planted_link_instead_of_writing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let out_dir = dir.path().join("man1");
    std::fs::create_dir(&out_dir).unwrap();
    std::os::unix::fs::symlink(&victim, out_dir.join("k3d-gpu.1")).unwrap();
    let out = k3d_gpu(&["man", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(!out_dir.join("k3d-gpu.1").symlink_metadata().unwrap().file_type().is_symlink());
}

#[test]
fn man_pages_and_completions_are_the_same_bytes_every_run() {
    assert_eq!(k3d_gpu(&["man"]).stdout, k3d_gpu(&["man"]).stdout);
    assert_eq!(k3d_gpu(&["completions", "zsh"]).stdout, k3d_gpu(&["completions", "zsh"]).stdout);
    let _ = repo();
}
