//! `host-setup`: what the host itself needs for each active vendor (Intel compute runtime,
//! Level Zero, the media driver, the NPU driver and firmware, the NVIDIA container toolkit,
//! Gaudi's driver), as a pinned install plan for one distro (every release file downloaded
//! and checked against its sha256 before anything is installed), with the diagnoses of a partial
//! upgrade (a libva older than the media driver, a libstdc++ without the GLIBCXX the runtime
//! needs). Pure: [`plan`] takes what [`probe`] read and returns the plan; the command prints
//! it, and only `--apply` with a typed confirmation runs it.

pub mod packages;
pub mod probe;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::facts::Vendor;
use crate::shell;
use probe::HostState;

pub const SCHEMA: &str = "k3d-gpu.host-setup/v1";

/// The distros host-setup has plans for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Distro {
    /// WSL2's default distribution.
    Ubuntu2204,
    Ubuntu2404,
    Ubuntu2604,
    /// Debian 12 (bookworm): Proxmox VE 8's base.
    Debian12,
    /// Debian 13 (trixie): Proxmox VE 9's base.
    Debian13,
    Fedora,
    /// Arch and Manjaro (`ID_LIKE=arch`).
    Arch,
}

impl Distro {
    pub const ALL: [Distro; 7] = [
        Distro::Ubuntu2204,
        Distro::Ubuntu2404,
        Distro::Ubuntu2604,
        Distro::Debian12,
        Distro::Debian13,
        Distro::Fedora,
        Distro::Arch,
    ];

    /// The `--distro` name.
    pub fn key(self) -> &'static str {
        match self {
            Distro::Ubuntu2204 => "ubuntu-22.04",
            Distro::Ubuntu2404 => "ubuntu-24.04",
            Distro::Ubuntu2604 => "ubuntu-26.04",
            Distro::Debian12 => "debian-12",
            Distro::Debian13 => "debian-13",
            Distro::Fedora => "fedora",
            Distro::Arch => "arch",
        }
    }

    /// Debian and Ubuntu: apt, dpkg and `.deb`s.
    pub fn apt(self) -> bool {
        !matches!(self, Distro::Fedora | Distro::Arch)
    }

    pub fn from_key(key: &str) -> Option<Distro> {
        Distro::ALL.into_iter().find(|d| d.key() == key)
    }

    /// The distro `/etc/os-release` names, or why there is none.
    pub fn from_os_release(os: &BTreeMap<String, String>) -> Result<Distro, UnknownDistro> {
        let id = os.get("ID").map(String::as_str).unwrap_or("");
        let like = os.get("ID_LIKE").map(String::as_str).unwrap_or("");
        let version = os.get("VERSION_ID").map(String::as_str).unwrap_or("");
        let named = || match os.get("PRETTY_NAME") {
            Some(p) => UnknownDistro::Named { pretty: p.clone(), id: id.into() },
            None if id.is_empty() => UnknownDistro::NoId,
            None => UnknownDistro::Id(id.into()),
        };
        match id {
            "ubuntu" if version == "22.04" => Ok(Distro::Ubuntu2204),
            "ubuntu" if version == "24.04" => Ok(Distro::Ubuntu2404),
            "ubuntu" if version == "26.04" => Ok(Distro::Ubuntu2604),
            // Proxmox VE keeps Debian's os-release (ID=debian, VERSION_ID=12 or 13).
            "debian" if version == "12" => Ok(Distro::Debian12),
            "debian" if version == "13" => Ok(Distro::Debian13),
            "fedora" => Ok(Distro::Fedora),
            "arch" | "manjaro" => Ok(Distro::Arch),
            _ if like.split_whitespace().any(|l| l == "arch") => Ok(Distro::Arch),
            _ => Err(named()),
        }
    }
}

/// A host whose /etc/os-release names no distro this supports, as it names itself (its
/// text shown on one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownDistro {
    #[error("{} (ID={})", crate::escape::one_line(pretty), crate::escape::one_line(id))]
    Named { pretty: String, id: String },
    #[error("a host whose /etc/os-release names no ID")]
    NoId,
    #[error("ID={}", crate::escape::one_line(.0))]
    Id(String),
}

/// One piece of host software, in install order (the loader before what links to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    IntelMediaDriver,
    LevelZeroLoader,
    ComputeRuntime,
    NpuDriver,
    ContainerToolkit,
    GaudiDriver,
}

impl Component {
    pub fn key(self) -> &'static str {
        match self {
            Component::IntelMediaDriver => "intel-media-driver",
            Component::LevelZeroLoader => "level-zero-loader",
            Component::ComputeRuntime => "intel-compute-runtime",
            Component::NpuDriver => "intel-npu-driver",
            Component::ContainerToolkit => "nvidia-container-toolkit",
            Component::GaudiDriver => "gaudi-driver",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Component::IntelMediaDriver => "Intel media driver (iHD) and libva",
            Component::LevelZeroLoader => "Level Zero loader",
            Component::ComputeRuntime => "Intel compute runtime (OpenCL and Level Zero GPU)",
            Component::NpuDriver => "Intel NPU user-space driver and firmware",
            Component::ContainerToolkit => "NVIDIA container toolkit",
            Component::GaudiDriver => "Gaudi habanalabs driver",
        }
    }

    /// What each vendor needs on the host.
    pub fn for_vendor(vendor: Vendor) -> &'static [Component] {
        match vendor {
            Vendor::Intel => &[Component::IntelMediaDriver, Component::LevelZeroLoader, Component::ComputeRuntime],
            Vendor::Npu => &[Component::LevelZeroLoader, Component::NpuDriver],
            Vendor::Nvidia => &[Component::ContainerToolkit],
            Vendor::Gaudi => &[Component::GaudiDriver],
            _ => &[],
        }
    }
}

/// Where a step falls in the plan. Every download and its sha256 check come before anything
/// that changes the system's packages or sources (issue 41): a file that fails its check
/// stops the run while the host is as it was. Then the repositories, the index, the distro
/// packages, the downloaded `.deb`s, and the configuration that needs them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The downloader itself, where a minimal install lacks it.
    Tools,
    /// The download folders (the user's own, no sudo).
    Folders,
    /// Downloads, each followed by its sha256 check; archives unpacked after theirs.
    Fetch,
    #[default]
    Prepare,
    Refresh,
    Install,
    /// Installs the checked release files.
    Release,
    Configure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// A command `--apply` runs.
    Run,
    /// A sha256 check of a downloaded file, which `--apply` does itself: `path` must hash to
    /// `sha256`, or to the digest the checksum file `sha256_list` gives for its name. A
    /// mismatch stops the run.
    Verify,
    /// Something only a person can do (Gaudi's installer); printed, never run.
    Manual,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    #[serde(skip)]
    pub phase: Phase,
    pub kind: StepKind,
    /// The components that need it.
    pub components: Vec<Component>,
    pub why: String,
    /// The program and its arguments, as run (empty for a manual step).
    pub argv: Vec<String>,
    /// Lines written to the command's stdin (a file written through `sudo tee`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stdin: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A verify step's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A verify step's pinned digest (lowercase hex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A verify step's checksum file (`sha256sum` format), when the digest is the release's
    /// own list rather than pinned here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256_list: Option<String>,
    /// The command as a person pastes it, every word quoted by `shell`.
    pub command: String,
    #[serde(skip)]
    program: &'static str,
}

impl Step {
    /// `program` (a literal of this source) with its arguments.
    pub fn run(program: &'static str, args: Vec<String>) -> Step {
        let mut argv = vec![program.to_string()];
        argv.extend(args);
        Step {
            phase: Phase::Prepare,
            kind: StepKind::Run,
            components: Vec::new(),
            why: String::new(),
            argv,
            stdin: Vec::new(),
            url: None,
            path: None,
            sha256: None,
            sha256_list: None,
            command: String::new(),
            program,
        }
    }

    /// Checks that `path` hashes to `sha256` (pinned) or to the digest the checksum file
    /// `list` gives for the file's name.
    pub fn verify(path: &str, sha256: Option<&str>, list: Option<&str>) -> Step {
        let mut step = Step::run("sha256sum", Vec::new());
        step.argv.clear();
        step.kind = StepKind::Verify;
        step.path = Some(path.to_string());
        step.sha256 = sha256.map(str::to_string);
        step.sha256_list = list.map(str::to_string);
        step.why = match (sha256, list) {
            (Some(d), _) => format!("check {} against its pinned sha256 {d}", file_name(path)),
            (None, Some(l)) => {
                format!("check {} against the release's checksum file {}", file_name(path), file_name(l))
            }
            (None, None) => format!("check {}", file_name(path)),
        };
        step
    }

    /// Writes `lines` to the root-owned file `path` (`sudo tee PATH`, the lines on stdin).
    pub fn write_file(path: &str, lines: Vec<String>) -> Step {
        let mut step = Step::run("sudo", vec!["tee".into(), path.to_string()]);
        step.stdin = lines;
        step.why = format!("write {path}");
        step
    }

    pub fn manual(text: String) -> Step {
        let mut step = Step::run("", Vec::new());
        step.argv.clear();
        step.kind = StepKind::Manual;
        step.why = text;
        step
    }

    pub fn with_url(mut self, url: &str) -> Step {
        self.url = Some(url.to_string());
        self
    }

    pub fn why(mut self, why: impl Into<String>) -> Step {
        self.why = why.into();
        self
    }

    fn in_phase(mut self, phase: Phase) -> Step {
        self.phase = phase;
        self
    }

    /// The command line for a person, built by `shell`'s one quoting rule; a write to a file
    /// is `printf '%s\n' LINE… | sudo tee PATH`; a pinned check is
    /// `printf '%s  %s\n' SHA256 PATH | sha256sum -c -`; a check against a list is shown as
    /// `sha256sum PATH` (the step's text names the list: matching its line needs a shell).
    fn display(&self) -> String {
        match self.kind {
            StepKind::Manual => return String::new(),
            StepKind::Verify => {
                let path = self.path.as_deref().unwrap_or("");
                return match &self.sha256 {
                    Some(d) => shell::Command::new("printf")
                        .arg("%s  %s\\n")
                        .arg(d)
                        .arg(path)
                        .pipe(shell::Command::new("sha256sum").arg("-c").arg("-"))
                        .to_string(),
                    None => shell::Command::new("sha256sum").arg(path).to_string(),
                };
            }
            StepKind::Run => {}
        }
        let mut c = shell::Command::new(self.program);
        for a in &self.argv[1..] {
            c = c.arg(a);
        }
        if self.stdin.is_empty() {
            return c.to_string();
        }
        let mut p = shell::Command::new("printf").arg("%s\\n");
        for line in &self.stdin {
            p = p.arg(line);
        }
        p.pipe(c).to_string()
    }
}

/// A component's state on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub component: Component,
    pub what: &'static str,
    pub vendors: Vec<Vendor>,
    /// `present`, `missing`, or `broken` (a diagnosis names it).
    pub state: &'static str,
    /// The files that show it is there.
    pub found: Vec<String>,
}

/// A partial upgrade's damage, found before the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    pub code: &'static str,
    pub component: Component,
    pub message: String,
    pub evidence: Vec<String>,
    pub fix: String,
    pub fix_argv: Vec<String>,
}

/// The plan, as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostSetupPlan {
    pub schema: &'static str,
    pub distro: &'static str,
    /// `os-release` or `--distro`.
    pub distro_from: &'static str,
    pub vendors: Vec<Vendor>,
    pub download_dir: String,
    pub checks: Vec<Check>,
    pub diagnoses: Vec<Diagnosis>,
    pub steps: Vec<Step>,
    /// Files that could not be read (`path: reason`).
    pub unreadable: Vec<String>,
}

impl HostSetupPlan {
    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// What `--apply` does: the commands and the checks, in order.
    pub fn runnable(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| s.kind != StepKind::Manual)
    }
}

/// What the plan is made from.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub state: &'a HostState,
    /// Active vendors (from detection, after `--vendors`).
    pub vendors: Vec<Vendor>,
    /// Whether the habanalabs driver is loaded or bound (from detection).
    pub gaudi_driver: bool,
    pub distro: Distro,
    /// True when `--distro` chose it.
    pub distro_given: bool,
    /// Absolute path of the download directory.
    pub download_dir: String,
}

/// The last `/`-separated part of `path`.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn found(f: &Option<probe::Found>) -> Vec<String> {
    f.iter().map(|f| f.path.clone()).collect()
}

fn diagnose(inputs: &Inputs, active: &[Component]) -> Vec<Diagnosis> {
    let state = inputs.state;
    let mut out = Vec::new();
    if active.contains(&Component::IntelMediaDriver)
        && let (Some(driver), Some(libva)) = (&state.media_driver, &state.libva)
        && let (Some(needs), Some(has)) = (driver.version, libva.version)
        && needs > has
    {
        let fix = packages::fix_libva(inputs.distro);
        out.push(Diagnosis {
            code: "libva-older-than-media-driver",
            component: Component::IntelMediaDriver,
            message: format!(
                "the media driver is built for libva 2.{needs} (it exports __vaDriverInit_1_{needs}) but libva is 2.{has}: \
vainfo fails with \"iHD_drv_video.so has no function __vaDriverInit_1_0\"; upgrade libva with the driver"
            ),
            evidence: vec![
                format!("{}: __vaDriverInit_1_{needs}", driver.path),
                format!("{}: libva 2.{has}", libva.path),
            ],
            fix: fix.display(),
            fix_argv: fix.argv,
        });
    }
    if active.contains(&Component::ComputeRuntime)
        && let Some(cxx) = &state.libstdcxx
        && let Some(has) = cxx.version
    {
        for lib in &state.compute_runtime {
            let Some(needs) = lib.version else { continue };
            if needs <= has {
                continue;
            }
            let fix = packages::fix_glibcxx(inputs.distro);
            out.push(Diagnosis {
                code: "glibcxx-missing",
                component: Component::ComputeRuntime,
                message: format!(
                    "the compute runtime needs GLIBCXX_3.4.{needs} but libstdc++ provides up to GLIBCXX_3.4.{has}: it was \
built by a newer GCC than the installed libstdc++, and OpenCL (clinfo) and Level Zero silently lose the Intel GPU"
                ),
                evidence: vec![
                    format!("{}: needs GLIBCXX_3.4.{needs}", lib.path),
                    format!("{}: provides up to GLIBCXX_3.4.{has}", cxx.path),
                ],
                fix: fix.display(),
                fix_argv: fix.argv,
            });
        }
    }
    out
}

/// The plan for `inputs`.
pub fn plan(inputs: &Inputs) -> HostSetupPlan {
    let state = inputs.state;
    let mut vendors: Vec<Vendor> =
        inputs.vendors.iter().copied().filter(|v| !Component::for_vendor(*v).is_empty()).collect();
    vendors.sort();
    vendors.dedup();
    let mut by_component: BTreeMap<Component, Vec<Vendor>> = BTreeMap::new();
    for v in &vendors {
        for c in Component::for_vendor(*v) {
            by_component.entry(*c).or_default().push(*v);
        }
    }
    let active: Vec<Component> = by_component.keys().copied().collect();
    let diagnoses = diagnose(inputs, &active);
    let mut checks = Vec::new();
    let mut needed = Vec::new();
    for (component, vendors) in &by_component {
        let files = match component {
            Component::IntelMediaDriver => {
                let both = state.media_driver.is_some() && state.libva.is_some();
                if both { [found(&state.media_driver), found(&state.libva)].concat() } else { Vec::new() }
            }
            Component::LevelZeroLoader => found(&state.level_zero_loader),
            Component::ComputeRuntime => state.compute_runtime.iter().map(|f| f.path.clone()).collect(),
            Component::NpuDriver => found(&state.npu_driver),
            Component::ContainerToolkit => found(&state.nvidia_ctk),
            Component::GaudiDriver => {
                if inputs.gaudi_driver {
                    vec!["/sys/module/habanalabs".to_string()]
                } else {
                    Vec::new()
                }
            }
        };
        let broken = diagnoses.iter().any(|d| d.component == *component);
        let state = match (broken, files.is_empty()) {
            (true, _) => "broken",
            (false, true) => "missing",
            (false, false) => "present",
        };
        if state != "present" {
            needed.push(*component);
        }
        checks.push(Check {
            component: *component,
            what: component.what(),
            vendors: vendors.clone(),
            state,
            found: files,
        });
    }
    let steps = steps(inputs, &needed);
    HostSetupPlan {
        schema: SCHEMA,
        distro: inputs.distro.key(),
        distro_from: if inputs.distro_given { "--distro" } else { "os-release" },
        vendors,
        download_dir: inputs.download_dir.clone(),
        checks,
        diagnoses,
        steps,
        unreadable: state.unreadable.clone(),
    }
}

/// The steps for the components `needed`, ordered by phase, each command once (with every
/// component that needs it).
fn steps(inputs: &Inputs, needed: &[Component]) -> Vec<Step> {
    let distro = inputs.distro;
    let dir = inputs.download_dir.trim_end_matches('/');
    let mut all: Vec<Step> = Vec::new();
    let mut packages: Vec<(Component, String)> = Vec::new();
    let mut with_repos: Vec<Component> = Vec::new();
    for &component in needed {
        let recipe = packages::recipe(distro, component);
        let tag = |s: Step| {
            let mut s = s;
            s.components = vec![component];
            s
        };
        if !recipe.prepare.is_empty() {
            with_repos.push(component);
        }
        all.extend(recipe.prepare.into_iter().map(|s| tag(s.in_phase(Phase::Prepare))));
        packages.extend(recipe.packages.into_iter().map(|p| (component, p)));
        all.extend(recipe.manual.into_iter().map(|s| tag(s.in_phase(Phase::Install))));
        if let Some(release) = recipe.release {
            all.extend(release_steps(dir, &release).into_iter().map(tag));
        }
        all.extend(recipe.configure.into_iter().map(|s| tag(s.in_phase(Phase::Configure))));
    }
    let mut downloading: Vec<Component> = all
        .iter()
        .filter(|s| s.argv.first().is_some_and(|p| p == "curl") || s.argv.get(1).is_some_and(|a| a == "curl"))
        .flat_map(|s| s.components.iter().copied())
        .collect();
    downloading.dedup();
    if !downloading.is_empty()
        && let Some(mut tool) = packages::downloader(distro)
    {
        tool.components = downloading;
        all.push(tool);
    }
    if !with_repos.is_empty()
        && let Some(refresh) = packages::refresh(distro)
    {
        let mut refresh = refresh.why("refresh the package index with the new sources");
        refresh.components = with_repos;
        all.push(refresh);
    }
    if !packages.is_empty() {
        let mut components: Vec<Component> = packages.iter().map(|(c, _)| *c).collect();
        components.dedup();
        let mut install = packages::install(distro, packages.into_iter().map(|(_, p)| p).collect());
        install.why = "install the distro packages".into();
        install.components = components;
        all.push(install);
    }
    all.sort_by_key(|s| s.phase);
    let mut out: Vec<Step> = Vec::new();
    for step in all {
        if let Some(same) = out
            .iter_mut()
            .find(|s| s.argv == step.argv && s.stdin == step.stdin && s.path == step.path && s.why == step.why)
        {
            for c in step.components {
                if !same.components.contains(&c) {
                    same.components.push(c);
                }
            }
            continue;
        }
        out.push(step);
    }
    for step in &mut out {
        step.components.sort();
        step.command = step.display();
    }
    out
}

/// A release's steps: its folder, each checksum file, each download followed by its check
/// (and archives unpacked after theirs), then one install of exactly the checked `.deb`s.
fn release_steps(dir: &str, release: &packages::Release) -> Vec<Step> {
    let folder = format!("{dir}/{}", release.folder);
    let mkdir = |path: &str| {
        Step::run("install", vec!["-d".into(), "-m".into(), "0700".into(), path.to_string()])
            .why("a download directory only you can write")
            .in_phase(Phase::Folders)
    };
    let curl = |url: &str, path: &str| {
        // https only, redirects too (GitHub sends the asset from another host); -f: an HTTP
        // error is a failed step, not an error page saved as the file.
        let args = ["-fL", "--proto", "=https", "--proto-redir", "=https", "--retry", "3", "-o", path, url];
        Step::run("curl", args.iter().map(|s| s.to_string()).collect()).with_url(url).in_phase(Phase::Fetch)
    };
    let mut out = vec![mkdir(dir), mkdir(&folder)];
    for (url, file) in &release.lists {
        let path = format!("{folder}/{file}");
        out.push(curl(url, &path).why(format!("download the release's checksum file {file}")));
    }
    let unpacked = format!("{folder}/debs");
    if release.archives {
        out.push(mkdir(&unpacked).why("where the archives' .debs are unpacked"));
    }
    let mut debs = Vec::new();
    for d in &release.downloads {
        let path = format!("{folder}/{}", d.file);
        out.push(curl(&d.url, &path).why(format!("download {}", d.file)));
        let check = match &d.sha256 {
            packages::Sha256::Pinned(sha) => Step::verify(&path, Some(sha), None),
            packages::Sha256::Listed(list) => Step::verify(&path, None, Some(&format!("{folder}/{list}"))),
        };
        out.push(check.in_phase(Phase::Fetch));
        if release.archives {
            let args = ["-xzf", path.as_str(), "-C", unpacked.as_str()];
            out.push(
                Step::run("tar", args.iter().map(|s| s.to_string()).collect())
                    .why(format!("unpack {} (checked above)", d.file))
                    .in_phase(Phase::Fetch),
            );
        } else {
            debs.push(path);
        }
    }
    let install = if release.archives {
        let args =
            [&unpacked, "-maxdepth", "1", "-name", "*.deb", "-exec", "sudo", "apt-get", "install", "-y", "{}", "+"];
        Step::run("find", args.iter().map(|s| s.to_string()).collect())
            .why(format!("install the .debs unpacked into {unpacked}"))
    } else {
        // Paths, not names: apt installs these files and resolves their dependencies.
        let mut args = vec!["apt-get".to_string(), "install".into(), "-y".into()];
        args.extend(debs);
        Step::run("sudo", args).why(format!("install the checked .debs in {folder}"))
    };
    out.push(install.in_phase(Phase::Release));
    out
}

/// The plan as text: the checks, the diagnoses with their fixes, then the numbered steps.
pub fn render_text(plan: &HostSetupPlan) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let vendors: Vec<&str> = plan.vendors.iter().map(|v| v.key()).collect();
    let _ = writeln!(
        out,
        "host-setup for {} (from {}); vendors: {}",
        plan.distro,
        plan.distro_from,
        if vendors.is_empty() { "none that need host software".to_string() } else { vendors.join(", ") }
    );
    for line in &plan.unreadable {
        let _ = writeln!(out, "unreadable: {}", crate::escape::one_line(line));
    }
    if !plan.checks.is_empty() {
        out.push('\n');
    }
    for check in &plan.checks {
        let files: Vec<String> = check.found.iter().map(|f| crate::escape::one_line(f).into_owned()).collect();
        let _ = writeln!(out, "{:<8} {:<25} {}", check.state, check.component.key(), files.join(", ")).map(|_| ());
    }
    for d in &plan.diagnoses {
        let _ = writeln!(out, "\nfail {}: {}", d.code, d.message);
        for e in &d.evidence {
            let _ = writeln!(out, "  evidence: {}", crate::escape::one_line(e));
        }
        let _ = writeln!(out, "  fix: {}", d.fix);
    }
    if plan.steps.is_empty() {
        let _ = writeln!(out, "\nnothing to install");
        return tidy(out);
    }
    let _ = writeln!(
        out,
        "\nsteps (in order; --apply runs the commands and checks after you confirm, never the by-hand steps):"
    );
    for (n, step) in plan.steps.iter().enumerate() {
        let components: Vec<&str> = step.components.iter().map(|c| c.key()).collect();
        let _ = writeln!(out, "{:>3}. [{}] {}", n + 1, components.join(", "), crate::escape::one_line(&step.why));
        match step.kind {
            StepKind::Run | StepKind::Verify => {
                let _ = writeln!(out, "     {}", step.command);
            }
            StepKind::Manual => {
                let _ = writeln!(out, "     by hand: {}", step.url.as_deref().unwrap_or(""));
            }
        }
    }
    tidy(out)
}

/// Lines without trailing blanks (a check with no file leaves padding).
fn tidy(text: String) -> String {
    let mut out: String = text.lines().map(|l| l.trim_end()).collect::<Vec<_>>().join("\n");
    out.push('\n');
    out
}

/// Whether `answer` is the typed confirmation: the word `apply`, nothing else.
pub fn confirmed(answer: &str) -> bool {
    answer.trim() == "apply"
}

#[cfg(test)]
mod tests;
