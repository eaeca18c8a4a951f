//! `host-setup`: what the host itself needs for each active vendor (Intel compute runtime,
//! Level Zero, the media driver, the NPU driver and firmware, the NVIDIA container toolkit,
//! Gaudi's driver), as a pinned install plan for one distro, with the diagnoses of a partial
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
    Ubuntu2404,
    Ubuntu2604,
    Fedora,
    /// Arch and Manjaro (`ID_LIKE=arch`).
    Arch,
}

impl Distro {
    pub const ALL: [Distro; 4] = [Distro::Ubuntu2404, Distro::Ubuntu2604, Distro::Fedora, Distro::Arch];

    /// The `--distro` name.
    pub fn key(self) -> &'static str {
        match self {
            Distro::Ubuntu2404 => "ubuntu-24.04",
            Distro::Ubuntu2604 => "ubuntu-26.04",
            Distro::Fedora => "fedora",
            Distro::Arch => "arch",
        }
    }

    pub fn from_key(key: &str) -> Option<Distro> {
        Distro::ALL.into_iter().find(|d| d.key() == key)
    }

    /// The distro `/etc/os-release` names, or why there is none.
    pub fn from_os_release(os: &BTreeMap<String, String>) -> Result<Distro, String> {
        let id = os.get("ID").map(String::as_str).unwrap_or("");
        let like = os.get("ID_LIKE").map(String::as_str).unwrap_or("");
        let version = os.get("VERSION_ID").map(String::as_str).unwrap_or("");
        let named = || match os.get("PRETTY_NAME") {
            Some(p) => format!("{} (ID={id})", crate::escape::one_line(p)),
            None if id.is_empty() => "a host whose /etc/os-release names no ID".into(),
            None => format!("ID={}", crate::escape::one_line(id)),
        };
        match id {
            "ubuntu" if version == "24.04" => Ok(Distro::Ubuntu2404),
            "ubuntu" if version == "26.04" => Ok(Distro::Ubuntu2604),
            "fedora" => Ok(Distro::Fedora),
            "arch" | "manjaro" => Ok(Distro::Arch),
            _ if like.split_whitespace().any(|l| l == "arch") => Ok(Distro::Arch),
            _ => Err(named()),
        }
    }
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

/// Where a step falls in the plan: repositories first, then the index, the installs, the
/// downloaded releases, and the configuration that needs them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    #[default]
    Prepare,
    Refresh,
    Install,
    Release,
    Configure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// A command `--apply` runs.
    Run,
    /// Something only a person can do (a download from a release page); printed, never run.
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
            command: String::new(),
            program,
        }
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
    /// is `printf '%s\n' LINE… | sudo tee PATH`.
    fn display(&self) -> String {
        if self.kind == StepKind::Manual {
            return String::new();
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

    pub fn runnable(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| s.kind == StepKind::Run)
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
            let folder = format!("{dir}/{}", release.folder);
            let mkdir = |path: &str| {
                Step::run("install", vec!["-d".into(), "-m".into(), "0700".into(), path.to_string()])
                    .why("a download directory only you can write")
            };
            all.push(tag(mkdir(dir).in_phase(Phase::Prepare)));
            all.push(tag(mkdir(&folder).in_phase(Phase::Prepare)));
            for (url, what) in release.sources {
                all.push(tag(Step::manual(format!(
                    "download {what} from the release page into {folder}, and check each file's sha256 against the \
digest the page lists (sha256sum FILE)"
                ))
                .with_url(&url)
                .in_phase(Phase::Release)));
            }
            let args =
                [folder.as_str(), "-maxdepth", "1", "-name", "*.deb", "-exec", "sudo", "apt-get", "install", "-y"];
            let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            args.push("{}".into());
            args.push("+".into());
            all.push(tag(Step::run("find", args)
                .why(format!("install the .debs downloaded into {folder}"))
                .in_phase(Phase::Release)));
        }
        all.extend(recipe.configure.into_iter().map(|s| tag(s.in_phase(Phase::Configure))));
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
        if let Some(same) = out.iter_mut().find(|s| s.argv == step.argv && s.stdin == step.stdin && s.why == step.why) {
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
    let _ = writeln!(out, "\nsteps (in order; --apply runs the commands after you confirm, never the by-hand steps):");
    for (n, step) in plan.steps.iter().enumerate() {
        let components: Vec<&str> = step.components.iter().map(|c| c.key()).collect();
        let _ = writeln!(out, "{:>3}. [{}] {}", n + 1, components.join(", "), crate::escape::one_line(&step.why));
        match step.kind {
            StepKind::Run => {
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
