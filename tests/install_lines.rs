//! The README's completion and man lines (Install, "With cargo"), typed as written into each
//! shell with HOME an empty directory, as on a new account (issue 39: they wrote into
//! directories nothing had made, zsh never loaded its script, and `man k3d-gpu` found
//! nothing). A `# …` line in the block names the shells the lines after it are for; lines
//! before any such line are bash's. Then each shell shows that the lines did their job:
//! bash-completion loads the script on the first TAB and completes `k3d-gpu vali`, zsh's
//! compinit has registered `_k3d-gpu` from the file the lines wrote, fish completes
//! `k3d-gpu vali`, and `man -w k3d-gpu` finds the page the lines wrote.
//!
//! A shell, bash-completion or man that is not installed skips its part, saying so, unless
//! K3D_GPU_TEST_SHELLS is set: `.ci/run` sets it and `.ci/apt.sh` installs them.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::K3dGpu;
use support::repo;

/// bash-completion's main script: a user's interactive bash sources it (Debian's and
/// Ubuntu's default ~/.bashrc, Fedora's /etc/profile.d).
const BASH_COMPLETION: &str = "/usr/share/bash-completion/bash_completion";

/// The README's indented block that runs `k3d-gpu completions`, its lines without the indent.
fn readme_block() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let code = |l: &&str| l.starts_with("    ");
    let at = lines
        .iter()
        .position(|l| code(l) && l.contains("k3d-gpu completions "))
        .expect("the README shows how to install the completions");
    let start = (0..at).rev().take_while(|&i| code(&lines[i])).last().unwrap_or(at);
    let end = (at..lines.len()).find(|&i| !code(&lines[i])).unwrap_or(lines.len());
    lines[start..end].iter().map(|l| l[4..].to_string()).collect()
}

/// The lines `shell` runs, in order: those under a `#` line that names it (bash before any).
fn lines_for(block: &[String], shell: &str) -> Vec<String> {
    let mut mine = shell == "bash";
    let mut out = Vec::new();
    for line in block {
        if let Some(header) = line.trim_start().strip_prefix('#') {
            mine = header.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == shell);
        } else if mine {
            out.push(line.clone());
        }
    }
    out
}

/// Whether `program probe…` runs and succeeds.
fn installed(program: &str, probe: &[&str]) -> bool {
    Command::new(program).args(probe).output().is_ok_and(|o| o.status.success())
}

/// Whether the test may go without `what`: only when CI did not ask for every shell.
fn skip(what: &str) -> bool {
    assert!(std::env::var_os("K3D_GPU_TEST_SHELLS").is_none(), "{what} is not installed");
    eprintln!("skipped: {what} is not installed");
    true
}

/// Runs `lines` in `shell` on an empty HOME, then `check` in the same shell; its stdout.
fn typed(shell: &str, lines: &[String], check: &str, home: &Path) -> String {
    let script = match shell {
        // Sourced first, as the user's shell did before they typed anything.
        "bash" => format!("source {BASH_COMPLETION}\nset -e\n{}\nset +e\n{check}", lines.join("\n")),
        "zsh" => format!("setopt err_exit\n{}\nunsetopt err_exit\n{check}", lines.join("\n")),
        // fish has no errexit: each line stops the script when it fails.
        _ => {
            let stop: Vec<String> = lines.iter().map(|l| format!("{l}\nor exit 99")).collect();
            format!("{}\n{check}", stop.join("\n"))
        }
    };
    let out = K3dGpu::program(shell)
        .arg("-c")
        .arg(&script)
        .binary_on_path()
        .env("HOME", home)
        .cwd(home)
        .stdin(Stdio::null())
        .output();
    assert!(
        out.status.success(),
        "{shell}: the README's lines failed on an empty HOME (exit {:?}):\n{}\n--- stderr:\n{}",
        out.status.code(),
        lines.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `shell` prints for `man -w k3d-gpu`, on a line of its own after `man `.
fn man_check(shell: &str) -> &'static str {
    if shell == "fish" { "echo man (man -w k3d-gpu 2>/dev/null)" } else { "echo \"man $(man -w k3d-gpu 2>/dev/null)\"" }
}

/// The shell's answer to TAB after `k3d-gpu vali`, one `completes WORD` line per candidate,
/// and (zsh) where compinit found `_k3d-gpu`.
fn completion_check(shell: &str) -> &'static str {
    match shell {
        // What TAB does for a command bash has no completion for yet: bash-completion's
        // default (-D) function loads one from its directories; then the loaded function is
        // called as TAB calls it.
        "bash" => {
            r#"d=$(complete -p -D); d=${d#*-F }; d=${d%% *}; "$d" k3d-gpu '' k3d-gpu
f=$(complete -p k3d-gpu) || exit 3; f=${f#*-F }; f=${f%% *}
COMP_WORDS=(k3d-gpu vali); COMP_CWORD=1; COMP_LINE='k3d-gpu vali'; COMP_POINT=${#COMP_LINE}
"$f" k3d-gpu vali k3d-gpu
for w in "${COMPREPLY[@]}"; do echo "completes $w"; done"#
        }
        "zsh" => {
            r#"print -r -- "registered $_comps[k3d-gpu]"
autoload +X _k3d-gpu 2>/dev/null && print -r -- "loaded $functions_source[_k3d-gpu]""#
        }
        _ => r#"for c in (complete -C 'k3d-gpu vali'); echo completes (string split \t -- $c)[1]; end"#,
    }
}

#[test]
fn the_readmes_completion_and_man_lines_work_on_an_empty_home() {
    let block = readme_block();
    let has_man = installed("man", &["--version"]) || !skip("man (man-db)");
    for shell in ["bash", "zsh", "fish"] {
        if !installed(shell, &["-c", "exit 0"]) && skip(shell) {
            continue;
        }
        if shell == "bash" && !Path::new(BASH_COMPLETION).is_file() && skip("bash-completion") {
            continue;
        }
        let lines = lines_for(&block, shell);
        let home = tempfile::tempdir().unwrap();
        let check = format!("{}\n{}", completion_check(shell), man_check(shell));
        let out = typed(shell, &lines, &check, home.path());
        let said: Vec<&str> = out.lines().collect();
        if shell == "zsh" {
            assert!(said.contains(&"registered _k3d-gpu"), "zsh: compinit did not register _k3d-gpu: {out}");
            let loaded = said.iter().find_map(|l| l.strip_prefix("loaded ")).unwrap_or("");
            assert!(Path::new(loaded).starts_with(home.path()), "zsh: _k3d-gpu is not the file the lines wrote: {out}");
        } else {
            assert!(
                said.contains(&"completes validate"),
                "{shell}: `k3d-gpu vali<TAB>` does not offer validate: {out}"
            );
        }
        if has_man {
            let page = said.iter().find_map(|l| l.strip_prefix("man ")).unwrap_or("");
            assert!(
                Path::new(page).starts_with(home.path()) && page.ends_with("/k3d-gpu.1"),
                "{shell}: after the lines, `man k3d-gpu` opens {page:?}, not the page they wrote:\n{}",
                lines.join("\n")
            );
        }
    }
}

/// The block is split by its `#` lines: a line runs in each shell its header names.
#[test]
fn each_line_runs_in_the_shells_its_header_names() {
    let block: Vec<String> =
        ["a", "# zsh and fish", "b", "# bash-completion, for bash", "c", "# fish", "d"].map(String::from).to_vec();
    assert_eq!(lines_for(&block, "bash"), ["a", "c"]);
    assert_eq!(lines_for(&block, "zsh"), ["b"]);
    assert_eq!(lines_for(&block, "fish"), ["b", "d"]);
}
