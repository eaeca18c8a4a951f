//! What packages install and how they are kept honest: the completion scripts and man pages
//! the binary generates name every subcommand, and every packaging file names Cargo.toml's
//! version (and repository), so a release cannot ship a formula for another version.

mod support;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use support::K3dGpu;
use support::repo;

fn k3d_gpu(args: &[&str]) -> Output {
    K3dGpu::new().args(args).output()
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

/// What a real `shell` offers for `line` (the cursor at its end), from the script
/// `k3d-gpu completions SHELL` prints; None when the shell is not installed. `.ci/run`
/// installs bash, zsh and fish and sets K3D_GPU_TEST_SHELLS=1, which makes a missing one fail.
fn completed(shell: &str, line: &str) -> Option<Vec<String>> {
    completed_in(shell, line, None)
}

/// [`completed`] with the shell in `cwd` (file names are completed from there).
fn completed_in(shell: &str, line: &str, cwd: Option<&std::path::Path>) -> Option<Vec<String>> {
    if Command::new(shell).arg("-c").arg("exit 0").output().is_err() {
        assert!(std::env::var_os("K3D_GPU_TEST_SHELLS").is_none(), "{shell} is not installed");
        eprintln!("skipped: {shell} is not installed, so its completion script is not exercised");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = k3d_gpu(&["completions", shell]).stdout;
    let words: Vec<&str> = line.split(' ').collect();
    let out = match shell {
        "bash" => {
            let path = dir.path().join("k3d-gpu.bash");
            std::fs::write(&path, script).unwrap();
            // What bash does on TAB: COMP_WORDS/COMP_CWORD set, the function `complete -p`
            // names called with (command, current word, previous word).
            let array: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
            let program = format!(
                "source '{}'; f=$(complete -p k3d-gpu); f=${{f#*-F }}; f=${{f%% *}}; COMP_WORDS=({}); \
COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; $f k3d-gpu '{}' '{}'; printf '%s\n' \"${{COMPREPLY[@]}}\"",
                path.display(),
                array.join(" "),
                words.len() - 1,
                words[words.len() - 1],
                words[words.len() - 2],
            );
            in_dir(Command::new("bash").arg("--norc").arg("-c").arg(program), cwd).output().unwrap()
        }
        "zsh" => {
            std::fs::write(dir.path().join("_k3d-gpu"), script).unwrap();
            let found = dir.path().join("found");
            let driver = repo().join("tests/support/complete.zsh");
            let out = in_dir(
                Command::new("timeout").args(["120", "zsh", "-f"]).arg(driver).arg(dir.path()).arg(&found).arg(line),
                cwd,
            )
            .output()
            .unwrap();
            assert!(out.status.success(), "zsh: {}", String::from_utf8_lossy(&out.stderr));
            let text = std::fs::read_to_string(&found).unwrap_or_default();
            assert!(text.ends_with("__done__\n"), "zsh did not finish completing {line:?}: {text}");
            return Some(text.lines().filter(|l| *l != "__done__").map(String::from).collect());
        }
        _ => {
            let path = dir.path().join("k3d-gpu.fish");
            std::fs::write(&path, script).unwrap();
            let program = format!("source '{}'; complete -C '{line}'", path.display());
            in_dir(Command::new("fish").arg("--no-config").arg("-c").arg(program), cwd).output().unwrap()
        }
    };
    assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
    // fish prints `candidate<TAB>description`.
    Some(String::from_utf8(out.stdout).unwrap().lines().map(|l| l.split('\t').next().unwrap().to_string()).collect())
}

fn in_dir<'a>(command: &'a mut Command, cwd: Option<&std::path::Path>) -> &'a mut Command {
    match cwd {
        Some(dir) => command.current_dir(dir),
        None => command,
    }
}

/// Issue 39: an option's values are completed, not file names. `--vendors` offers the vendor
/// names, `--distro` the distros host-setup knows, `logs` the catalog's components, and `-c`
/// (before the command too, where bash offered the commands and zsh nothing) directories and
/// `*.toml` files only.
#[test]
fn each_shell_completes_option_values_and_config_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lab.toml"), "").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "").unwrap();
    for shell in ["bash", "zsh", "fish"] {
        for (line, wanted, unwanted) in [
            ("k3d-gpu plan --vendors ", "nvidia", "notes.txt"),
            ("k3d-gpu detect --vendors i", "intel", "notes.txt"),
            ("k3d-gpu host-setup --distro ", "ubuntu-24.04", "notes.txt"),
            ("k3d-gpu logs ", "intel-gpu-plugin", "notes.txt"),
            ("k3d-gpu logs nvidia-", "nvidia-device-plugin", "notes.txt"),
            ("k3d-gpu plan -c ", "lab.toml", "notes.txt"),
            ("k3d-gpu images check --config ", "lab.toml", "notes.txt"),
            ("k3d-gpu -c ", "lab.toml", "plan"),
            ("k3d-gpu --config ", "lab.toml", "notes.txt"),
            ("k3d-gpu -c lab.toml pl", "plan", "lab.toml"),
        ] {
            let Some(found) = completed_in(shell, line, Some(dir.path())) else { break };
            assert!(found.iter().any(|f| f == wanted), "{shell}: `{line}<TAB>` offers {found:?}, not {wanted}");
            assert!(!found.iter().any(|f| f == unwanted), "{shell}: `{line}<TAB>` offers {unwanted}: {found:?}");
        }
    }
}

/// Completion past the first word, in each shell itself: a nested command's flags, a
/// sub-subcommand's, and the first word. bash's script from clap_complete 4.6.12 completed
/// nothing after the first word for a binary with a dash in its name.
#[test]
fn each_shell_completes_a_nested_commands_flags() {
    for shell in ["bash", "zsh", "fish"] {
        for (line, wanted) in [
            ("k3d-gpu plan --det", "--detailed-exitcode"),
            ("k3d-gpu images check --ro", "--root"),
            ("k3d-gpu facts capture --o", "--out"),
            ("k3d-gpu vali", "validate"),
        ] {
            let Some(found) = completed(shell, line) else { break };
            assert!(found.iter().any(|f| f == wanted), "{shell}: `{line}<TAB>` offers {found:?}, not {wanted}");
        }
        // An option the command does not read is not offered (it is not in its definition).
        if let Some(found) = completed(shell, "k3d-gpu schema --ro") {
            assert!(!found.iter().any(|f| f == "--root"), "{shell}: schema offers --root: {found:?}");
        }
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
}

// --- packaging files name Cargo.toml's version --------------------------------------------

/// Every version a packaging file states, as (file, version), by each format's own syntax.
fn stated_versions() -> Vec<(String, String)> {
    let patterns: &[(&str, &str)] = &[
        ("packaging/aur/PKGBUILD", "pkgver="),
        ("packaging/aur/.SRCINFO", "pkgver = "),
        ("packaging/aur/.SRCINFO", "source = k3d-gpu::git+https://github.com/k3d-gpu/k3d-gpu.git#tag=v"),
        ("packaging/homebrew/k3d-gpu.rb", "tag:      \"v"),
        ("packaging/nix/flake.nix", "version = \""),
        ("packaging/debian/changelog", "k3d-gpu ("),
        ("README.md", "V="),
        ("README.md", "sudo dnf install \"https://github.com/k3d-gpu/k3d-gpu/releases/download/v"),
        ("examples/ci/k3d-gpu-configs.yml", "K3D_GPU_VERSION: \""),
    ];
    let mut found = Vec::new();
    for (file, prefix) in patterns {
        let text = std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut hits = 0;
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix(prefix) {
                let version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                found.push((file.to_string(), version));
                hits += 1;
            }
        }
        assert!(hits > 0, "{file} has no `{prefix}` line any more: update this test with the file");
    }
    found
}

#[test]
fn every_packaging_file_names_the_cargo_version() {
    let wrong: Vec<String> = stated_versions()
        .into_iter()
        .filter(|(_, v)| v != env!("CARGO_PKG_VERSION"))
        .map(|(file, v)| format!("{file} says {v}"))
        .collect();
    assert!(wrong.is_empty(), "Cargo.toml says {}: {wrong:?}", env!("CARGO_PKG_VERSION"));
}

#[test]
fn every_packaging_file_points_at_the_cargo_repository() {
    let repository = env!("CARGO_PKG_REPOSITORY");
    for file in ["packaging/aur/PKGBUILD", "packaging/homebrew/k3d-gpu.rb", "examples/ci/k3d-gpu-configs.yml"] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let urls = text
            .split("https://github.com/")
            .skip(1)
            .map(|rest| rest.split(['/', '"', '.', '\'']).take(2).collect::<Vec<_>>());
        for parts in urls {
            let url = format!("https://github.com/{}", parts.join("/"));
            if parts.first() != Some(&"actions") {
                assert_eq!(url, repository, "{file} names another repository");
            }
        }
    }
}

// --- the CI recipe users copy (examples/ci/k3d-gpu-configs.yml) ---------------------------

#[derive(serde::Deserialize)]
struct Workflow {
    jobs: std::collections::BTreeMap<String, Job>,
}

#[derive(serde::Deserialize)]
struct Job {
    steps: Vec<Step>,
}

#[derive(serde::Deserialize)]
struct Step {
    name: Option<String>,
    run: Option<String>,
    shell: Option<String>,
}

/// The recipe's "Check every machine" step, exactly as the workflow runs it (GitHub's `shell:
/// bash` is `bash --noprofile --norc -eo pipefail`), with this build's k3d-gpu first on PATH
/// and `machines` as k3dgpu-machines.txt.
fn run_recipe(machines: &str) -> Output {
    let text = std::fs::read_to_string(repo().join("examples/ci/k3d-gpu-configs.yml")).unwrap();
    let workflow: Workflow = serde_saphyr::from_str(&text).unwrap();
    let step = workflow.jobs["check"].steps.iter().find(|s| s.name.as_deref() == Some("Check every machine")).unwrap();
    assert_eq!(step.shell.as_deref(), Some("bash"));
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("k3dgpu-machines.txt");
    std::fs::write(&list, machines).unwrap();
    K3dGpu::program("bash")
        .binary_on_path()
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", step.run.as_deref().unwrap()])
        .cwd(repo())
        .env("K3D_GPU_MACHINES", &list)
        .output()
}

/// The example's config in a directory of its own, with an images.lock beside it that pins
/// (with made-up digests: `images check` needs no network) every image the catalog does not.
fn locked_copy(example: &str, host: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("k3dgpu.toml");
    std::fs::copy(repo().join(format!("examples/{example}.toml")), &config).unwrap();
    let listed = K3dGpu::new()
        .args(["images", "--json", "-c"])
        .arg(&config)
        .arg("--root")
        .arg(repo().join(format!("tests/fixtures/hosts/{host}")))
        .output();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let images: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let mut lock = String::from("schema = \"k3d-gpu.images/v1\"\n");
    for (i, image) in images["images"].as_array().unwrap().iter().filter(|i| i["state"] == "unlocked").enumerate() {
        lock.push_str(&format!(
            "\n[images.\"{}\"]\ndigest = \"sha256:{:064x}\"\n",
            image["image"].as_str().unwrap(),
            i + 1
        ));
    }
    std::fs::write(dir.path().join("images.lock"), lock).unwrap();
    dir
}

fn example_machines() -> String {
    let mut text = String::from("# the repo's examples, each with the fixture host it is for\n\n");
    for (example, host) in support::EXAMPLES {
        text.push_str(&format!("examples/{example}.toml  tests/fixtures/hosts/{host}\n"));
    }
    text
}

#[test]
fn the_ci_recipe_validates_every_example_and_checks_its_images() {
    let out = run_recipe(&example_machines());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // validate passes on every example: one "0 failed" summary per machine.
    assert_eq!(stdout.matches("1 host(s), 0 failed").count(), support::EXAMPLES.len(), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("::group::").count(), support::EXAMPLES.len());
    // images check runs for each: a verdict per machine, pinned or the images it misses.
    // The catalog still lacks confirmed digests for some images (stdlib/README.md), so those
    // examples report them as missing from images.lock and the job fails, as it must for a
    // user whose lock is incomplete. Nothing else may be reported.
    for section in stdout.split("::group::").skip(1) {
        let pinned = section.contains("every image this config deploys is pinned");
        let missing = section.lines().any(|l| l.starts_with("missing "));
        assert!(pinned != missing, "no images verdict, or two:\n{section}");
        if section.starts_with("examples/wsl2-intel.toml") {
            // Its device images are all pinned by the catalog; only the node image's bases
            // (DESIGN.md §8), the images k3s runs on its own (share/k3s-images.txt) and
            // `k3d-gpu test`'s pod image wait for a user's lock.
            let unpinned: Vec<&str> = section.lines().filter(|l| l.starts_with("missing ")).collect();
            let smoke = format!(" {}:", k3d_gpu::smoke::DEVICE_IMAGE);
            let k3s_own = std::fs::read_to_string(support::repo().join("share/k3s-images.txt")).unwrap();
            let k3s_own: Vec<String> =
                k3s_own.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(|l| format!(" {l}:")).collect();
            assert!(!k3s_own.is_empty());
            assert!(
                unpinned.iter().all(|l| l.contains(" rancher/k3s:")
                    || l.contains(" ubuntu:")
                    || l.contains(&smoke)
                    || k3s_own.iter().any(|k| l.contains(k.as_str()))),
                "wsl2-intel deploys only images the catalog pins, and the node image's bases:\n{section}"
            );
        }
    }
    let missing: Vec<&str> = stdout.lines().chain(stderr.lines()).filter(|l| l.starts_with("missing ")).collect();
    assert!(missing.iter().all(|l| l.contains("deployed by tag")), "{missing:?}");
    let expected = if missing.is_empty() { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(expected), "{stdout}\n{stderr}");
}

#[test]
fn the_ci_recipe_validates_a_fleet_config_against_every_captured_machine() {
    // A line with a config alone: an existing cluster, whose [[nodes]] name their facts.
    let out = run_recipe("examples/homelab-fleet.toml\n");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("::group::examples/homelab-fleet.toml (its [[nodes]])"), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 host(s), 0 failed"), "validate checks every node:\n{stdout}\n{stderr}");
    for node in ["arc-01", "gpu-01", "xeon-01"] {
        assert!(stdout.lines().any(|l| l.starts_with(node) && l.contains(" ok ")), "{node}:\n{stdout}");
    }
    // images check ran too: a verdict, pinned or the images it misses.
    assert!(
        stdout.contains("every image this config deploys is pinned")
            || stdout.lines().any(|l| l.starts_with("missing ")),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn the_ci_recipe_passes_a_fully_pinned_machine_and_skips_comments() {
    // wsl2-intel with a lock beside it for every image the catalog does not pin.
    let machine = locked_copy("wsl2-intel", "wsl2-intel");
    let host = repo().join("tests/fixtures/hosts/wsl2-intel");
    let out =
        run_recipe(&format!("# comment\n\n{} {}\n", machine.path().join("k3dgpu.toml").display(), host.display()));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_ci_recipe_fails_a_config_checked_against_the_wrong_machine() {
    let out = run_recipe(
        "examples/wsl2-intel.toml tests/fixtures/hosts/wsl2-intel\n\
         examples/nvidia-workstation.toml tests/fixtures/hosts/plain-laptop-amd\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    // The loop goes on past the first failure, so every machine is reported.
    assert_eq!(stdout.matches("::group::").count(), 2, "{stdout}");
    assert!(stdout.contains("1 host(s), 1 failed"), "{stdout}");
}
