//! `k3d-gpu host-setup`: reads the host (or a fixture host) and the config's `[vendors]`,
//! prints the install plan for the vendors the cluster gets, and with `--apply` runs its
//! commands and its sha256 checks — only on the real host, only after showing them, and only
//! when the person types `apply` on a terminal. Nothing else (no config key, no variable)
//! makes it run anything.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::cli::{Global, HostSetupArgs};
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};
use crate::facts::Vendor;
use crate::host_setup::{self, Distro, HostSetupPlan, Inputs, StepKind};

fn distro_names() -> String {
    Distro::ALL.iter().map(|d| d.key()).collect::<Vec<_>>().join(", ")
}

/// Where downloads go: the option (or K3D_GPU_SETUP_DIR), else the XDG cache.
fn download_dir(given: Option<&Path>) -> Result<String> {
    let absolute = |p: PathBuf| -> Result<String> {
        let p = if p.is_absolute() { p } else { std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p) };
        Ok(p.display().to_string())
    };
    if let Some(p) = given {
        return absolute(p.to_path_buf());
    }
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = nonempty("XDG_CACHE_HOME").or_else(|| nonempty("HOME").map(|h| h.join(".cache")));
    match cache {
        Some(c) => absolute(c.join("k3d-gpu").join("host-setup")),
        None => Err(Error::Usage {
            message: "no download directory: neither XDG_CACHE_HOME nor HOME is set".into(),
            help: Some("pass --download-dir DIR".into()),
        }),
    }
}

/// Reads the host and makes the plan.
pub fn make_plan(global: &Global, args: &HostSetupArgs) -> Result<(HostSetupPlan, bool)> {
    let distro_given = match &args.distro {
        Some(name) => Some(Distro::from_key(name).ok_or_else(|| Error::Usage {
            message: format!("--distro: no plan for {}", crate::shell::word(name)),
            help: Some(format!("use one of {}", distro_names())),
        })?),
        None => None,
    };
    // The config's [vendors] choose among the host's vendors as they do for the cluster: a
    // vendor the cluster will not get needs no host software from this plan.
    let config = super::load_config(global)?.config;
    let host = super::open_host(global)?;
    let facts = super::detect_facts(&host, &global.vendor_filter()?)?;
    let state = host_setup::probe::read(&host);
    let distro = match distro_given {
        Some(d) => d,
        None => Distro::from_os_release(&state.os_release).map_err(|named| Error::Usage {
            message: match state.unreadable.iter().find(|u| u.starts_with("/etc/os-release:")) {
                Some(why) => format!("host-setup cannot tell the distro: {}", crate::escape::one_line(why)),
                None => format!("host-setup has no plan for {named}"),
            },
            help: Some(format!("pass --distro with one of {} to print that distro's plan", distro_names())),
        })?,
    };
    let gaudi = &facts.host.gaudi;
    let mut vendors: Vec<Vendor> =
        crate::compile::active_vendors(&config, &facts).into_iter().map(|d| d.vendor).collect();
    // A Gaudi is inactive exactly when its driver is missing, which is what host-setup is for.
    if !gaudi.devices.is_empty() && facts.vendor_filter.allows(Vendor::Gaudi) && config.vendors.allows(Vendor::Gaudi) {
        vendors.push(Vendor::Gaudi);
    }
    let inputs = Inputs {
        state: &state,
        vendors,
        gaudi_driver: gaudi.module_loaded || gaudi.devices.iter().any(|d| d.driver.as_deref() == Some("habanalabs")),
        distro,
        distro_given: distro_given.is_some(),
        download_dir: download_dir(args.download_dir.as_deref())?,
    };
    Ok((host_setup::plan(&inputs), host.is_real_host()))
}

pub fn run(global: &Global, args: &HostSetupArgs) -> Result<u8> {
    let (plan, real_host) = make_plan(global, args)?;
    if global.json {
        super::print_bytes(&plan.to_json());
    } else {
        super::print_bytes(host_setup::render_text(&plan).as_bytes());
    }
    let code = if plan.diagnoses.is_empty() { EXIT_OK } else { EXIT_FAILED };
    if !args.apply {
        return Ok(code);
    }
    // Checked in this order so that each refusal is the same whatever else holds: a fixture
    // host is never a target, and without a terminal nobody can confirm.
    if !real_host {
        return Err(Error::Usage {
            message: "--apply changes the machine it runs on; it never runs against --root DIR".into(),
            help: Some("run host-setup --apply without --root, on the host itself".into()),
        });
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Error::Refused {
            message: "--apply needs a typed confirmation on a terminal; nothing was changed".into(),
            help: Some("run it in a terminal, or paste the commands above yourself".into()),
        });
    }
    let steps: Vec<_> = plan.runnable().collect();
    if steps.is_empty() {
        crate::stderrln!("nothing to run; nothing was changed");
        return Ok(code);
    }
    crate::stderrln!("\n--apply runs these {} commands and checks on this machine, in order:", steps.len());
    for step in &steps {
        crate::stderrln!("  {}", step.command);
    }
    crate::stderr!("type apply to run them: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if !host_setup::confirmed(&answer) {
        return Err(Error::Refused {
            message: "not confirmed; nothing was changed".into(),
            help: Some("type the word apply to run the commands".into()),
        });
    }
    let total = steps.len();
    execute(&steps, |n, step| crate::stderrln!("[{}/{total}] {}", n + 1, step.command)).map_err(|(n, why)| {
        Error::Refused {
            message: format!("step {} failed ({why}); the steps after it did not run", n + 1),
            help: Some("fix what it printed, then run host-setup again: it plans from what is now installed".into()),
        }
    })?;
    crate::stderrln!("done; run k3d-gpu host-setup again to check");
    Ok(EXIT_OK)
}

/// Runs `steps` in order, telling `progress` before each; the first that fails stops the
/// run, and its index and reason come back. A check is done here, not by a program.
pub fn execute(
    steps: &[&host_setup::Step],
    mut progress: impl FnMut(usize, &host_setup::Step),
) -> std::result::Result<(), (usize, StepFailed)> {
    for (n, step) in steps.iter().enumerate() {
        progress(n, step);
        let done = match step.kind {
            StepKind::Run => run_step(step),
            StepKind::Verify => verify_step(step),
            StepKind::Manual => Ok(()),
        };
        done.map_err(|why| (n, why))?;
    }
    Ok(())
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The sha256 of the file at `path`, read in pieces (release files run to 100 MB).
fn sha256_of(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The digest a `sha256sum`-format list gives for `name` (`HEX  NAME` or `HEX *NAME`).
fn listed_digest(list: &str, name: &str) -> Option<String> {
    list.lines().find_map(|line| {
        let (hex, rest) = line.trim_end_matches('\r').split_once(char::is_whitespace)?;
        let listed = rest.trim_start().trim_start_matches('*');
        let hex = hex.to_ascii_lowercase();
        (listed == name && is_sha256(&hex)).then_some(hex)
    })
}

/// A release's checksum file, capped at 1 MiB (a `sha256sum` line per file is ~100 bytes).
fn read_checksum_list(list: &str) -> std::result::Result<String, crate::input_file::InputError> {
    crate::input_file::read_text_capped(Path::new(list), 1 << 20)
}

/// Checks a downloaded file against its pinned digest, or against its line in the release's
/// checksum file. A mismatch names both digests.
fn verify_step(step: &host_setup::Step) -> std::result::Result<(), StepFailed> {
    let path = step.path.as_deref().ok_or(StepFailed::NoFile)?;
    let owned = || path.to_string();
    let (want, from) = match (&step.sha256, &step.sha256_list) {
        (Some(pinned), _) => (pinned.to_ascii_lowercase(), Expected::Pinned),
        (None, Some(list)) => {
            // The list came off the network: read at most what a release's checksum file holds.
            let text =
                read_checksum_list(list).map_err(|cause| StepFailed::ChecksumFile { list: list.clone(), cause })?;
            let name = path.rsplit('/').next().unwrap_or(path);
            let want = listed_digest(&text, name)
                .ok_or_else(|| StepFailed::NotListed { list: list.clone(), name: name.to_string() })?;
            (want, Expected::Listed(list.clone()))
        }
        (None, None) => return Err(StepFailed::NoSha256(owned())),
    };
    if !is_sha256(&want) {
        return Err(StepFailed::BadExpected(owned()));
    }
    let got = sha256_of(Path::new(path)).map_err(|e| StepFailed::Unreadable { path: owned(), cause: e.into() })?;
    if got != want {
        return Err(StepFailed::Mismatch { path: owned(), got, want, from });
    }
    Ok(())
}

/// Runs one step's argv directly (no shell), its stdin lines piped in.
fn run_step(step: &host_setup::Step) -> std::result::Result<(), StepFailed> {
    let (program, args) = step.argv.split_first().ok_or(StepFailed::Empty)?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    if !step.stdin.is_empty() {
        cmd.stdin(std::process::Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| StepFailed::Start { program: program.clone(), cause: e.into() })?;
    if let Some(mut stdin) = child.stdin.take() {
        let mut text = step.stdin.join("\n");
        text.push('\n');
        stdin.write_all(text.as_bytes()).map_err(|e| StepFailed::Io(e.into()))?;
    }
    let status = child.wait().map_err(|e| StepFailed::Io(e.into()))?;
    if status.success() {
        Ok(())
    } else {
        Err(StepFailed::Exit { program: program.clone(), status: status.to_string() })
    }
}

/// Why a step of host-setup failed. Paths and names come from the plan (and a release's
/// checksum file): shown on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepFailed {
    #[error("a check with no file")]
    NoFile,
    #[error("cannot read the checksum file {}: {cause}", one_line(list))]
    ChecksumFile { list: String, cause: crate::input_file::InputError },
    #[error("the checksum file {} lists no sha256 for {}", one_line(list), one_line(name))]
    NotListed { list: String, name: String },
    #[error("no sha256 to check {} against", one_line(.0))]
    NoSha256(String),
    #[error("{}: the expected sha256 is not 64 hex digits", one_line(.0))]
    BadExpected(String),
    #[error("cannot read {}: {cause}", one_line(path))]
    Unreadable { path: String, cause: IoCause },
    #[error(
        "{} has sha256 {got}, not {want} ({from}); it was not installed — delete it and run again, or report a changed release",
        one_line(path)
    )]
    Mismatch { path: String, got: String, want: String, from: Expected },
    #[error("empty command")]
    Empty,
    #[error("cannot start {}: {cause}", one_line(program))]
    Start { program: String, cause: IoCause },
    #[error("{0}")]
    Io(IoCause),
    #[error("{program} exited with {status}")]
    Exit { program: String, status: String },
}

/// Where the digest a download must have came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    Pinned,
    /// The release's checksum file at this path.
    Listed(String),
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Pinned => f.write_str("the pinned sha256"),
            Expected::Listed(list) => write!(f, "the sha256 {} lists", one_line(list)),
        }
    }
}

/// An I/O error as its kind and the OS's sentence (comparable, unlike `io::Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct IoCause {
    pub kind: std::io::ErrorKind,
    text: String,
}

impl From<std::io::Error> for IoCause {
    fn from(e: std::io::Error) -> IoCause {
        IoCause { kind: e.kind(), text: e.to_string() }
    }
}

fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    crate::escape::one_line(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_setup::Step;

    /// The checksum list comes off the network: one past the cap is refused, not read whole.
    #[test]
    fn a_checksum_list_past_its_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("ww13.sum");
        std::fs::write(&list, vec![b'a'; (1 << 20) + 1]).unwrap();
        assert!(read_checksum_list(&list.display().to_string()).is_err());
        std::fs::write(&list, format!("{EMPTY_SHA256}  x.deb\n")).unwrap();
        assert!(read_checksum_list(&list.display().to_string()).unwrap().contains("x.deb"));
    }

    const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const HELLO_SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

    /// A stand-in download (`cp` from a local file, as curl would write it), its check, and a
    /// step after it that leaves a mark when it runs.
    fn planned(dir: &Path, pinned: Option<&str>, list: Option<&str>) -> (Vec<Step>, std::path::PathBuf) {
        let source = dir.join("release-asset.deb");
        std::fs::write(&source, "hello\n").unwrap();
        let saved = dir.join("saved.deb").display().to_string();
        let mark = dir.join("installed");
        let list_path = list.map(|text| {
            let p = dir.join("ww13.sum");
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        });
        let steps = vec![
            Step::run("cp", vec![source.display().to_string(), saved.clone()]),
            Step::verify(&saved, pinned, list_path.as_deref()),
            Step::run("touch", vec![mark.display().to_string()]),
        ];
        (steps, mark)
    }

    fn run(steps: &[Step]) -> std::result::Result<(), (usize, StepFailed)> {
        let refs: Vec<&Step> = steps.iter().collect();
        let mut seen = Vec::new();
        let out = execute(&refs, |n, _| seen.push(n));
        assert_eq!(seen.first(), Some(&0));
        out
    }

    #[test]
    fn a_download_with_the_wrong_sha256_stops_the_run_naming_both_digests() {
        let dir = tempfile::tempdir().unwrap();
        let (steps, mark) = planned(dir.path(), Some(EMPTY_SHA256), None);
        let (at, why) = run(&steps).unwrap_err();
        assert_eq!(at, 1, "the check fails, not the download");
        let StepFailed::Mismatch { got, want, from, .. } = &why else { panic!("{why}") };
        assert_eq!((got.as_str(), want.as_str(), from), (HELLO_SHA256, EMPTY_SHA256, &Expected::Pinned));
        assert!(!mark.exists(), "the install after the check ran");
    }

    #[test]
    fn a_download_with_the_right_sha256_goes_on_to_the_install() {
        let dir = tempfile::tempdir().unwrap();
        let (steps, mark) = planned(dir.path(), Some(HELLO_SHA256), None);
        assert_eq!(run(&steps), Ok(()));
        assert!(mark.exists());
    }

    #[test]
    fn a_download_is_checked_against_the_releases_checksum_file_line_for_its_name() {
        let dir = tempfile::tempdir().unwrap();
        // Another file's line first: only the line for this name counts.
        let wrong = format!("{HELLO_SHA256}  other.deb\n{EMPTY_SHA256}  saved.deb\n");
        let (steps, mark) = planned(dir.path(), None, Some(&wrong));
        let (at, why) = run(&steps).unwrap_err();
        let why = why.to_string();
        assert_eq!(at, 1);
        assert!(why.contains(HELLO_SHA256) && why.contains(EMPTY_SHA256) && why.contains("ww13.sum"), "{why}");
        assert!(!mark.exists());
        let dir = tempfile::tempdir().unwrap();
        let right = format!("{EMPTY_SHA256}  other.deb\n{}  *saved.deb\r\n", HELLO_SHA256.to_uppercase());
        let (steps, mark) = planned(dir.path(), None, Some(&right));
        assert_eq!(run(&steps), Ok(()));
        assert!(mark.exists());
        // A list without the file's name is a failure, not a pass.
        let dir = tempfile::tempdir().unwrap();
        let (steps, mark) = planned(dir.path(), None, Some(&format!("{HELLO_SHA256}  other.deb\n")));
        let (at, why) = run(&steps).unwrap_err();
        assert!(at == 1 && why.to_string().contains("lists no sha256 for saved.deb"), "{why}");
        assert!(!mark.exists());
    }

    #[test]
    fn a_missing_download_stops_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let (steps, mark) = planned(dir.path(), Some(HELLO_SHA256), None);
        let (at, why) = run(&steps[1..]).unwrap_err();
        let StepFailed::Unreadable { cause, .. } = &why else { panic!("{why}") };
        assert!(at == 0 && cause.kind == std::io::ErrorKind::NotFound, "{why}");
        assert!(!mark.exists());
    }
}
