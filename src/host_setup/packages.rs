//! The pinned install recipes: for each distro and each piece of host software, the
//! repository it comes from, the packages (with exact versions where a version is pinned) and
//! what to run after. Data only; `plan` orders and merges it.
//!
//! What is pinned: on Ubuntu, the GitHub releases of compute-runtime, IGC, the Level Zero
//! loader and the NPU driver by tag, the PPA's media driver and libva by version (apt
//! preferences), and the NVIDIA container toolkit by exact package version; on Fedora the
//! toolkit by version. Fedora's and Arch's own repositories serve only their current build,
//! so those packages are pinned by name. No sha256 is shipped: the release pages publish the
//! digests, and a tool cannot vouch for bytes it has not seen (the same rule as images.lock).

use super::{Component, Distro, Phase, Step};

/// compute-runtime (OpenCL ICD and the Level Zero GPU driver) release tag.
pub const COMPUTE_RUNTIME: &str = "26.35.39758.10";
/// The Intel Graphics Compiler release compute-runtime is built against.
pub const IGC: &str = "v2.41.5";
/// The Level Zero loader (`libze1`).
pub const LEVEL_ZERO: &str = "v1.34.0";
/// linux-npu-driver (user-space driver, compiler and `intel-fw-npu`).
pub const NPU_DRIVER: &str = "v1.38.0";
/// The PPA's media driver and libva versions (Ubuntu).
pub const MEDIA_DRIVER: &str = "26.3.2";
pub const LIBVA: &str = "2.24.1";
/// NVIDIA container toolkit package version: the node image's pin, defined once (the
/// Dockerfile's `NVIDIA_CONTAINER_TOOLKIT_VERSION`, which a test holds to this constant), so
/// the host and its nodes run the same toolkit.
pub const NVIDIA_TOOLKIT: &str = crate::node_image::NVIDIA_CONTAINER_TOOLKIT_VERSION;
/// Intel Gaudi software release of the baked device plugin.
pub const GAUDI_SOFTWARE: &str = "1.24.2";

pub const INTEL_PPA: &str = "ppa:kobuk-team/intel-graphics";
const INTEL_PPA_ORIGIN: &str = "LP-PPA-kobuk-team-intel-graphics";
const APT_PIN_FILE: &str = "/etc/apt/preferences.d/k3d-gpu-intel-graphics";
const NVIDIA_KEY: &str = "/usr/share/keyrings/nvidia-container-toolkit-keyring.asc";
const NVIDIA_KEY_URL: &str = "https://nvidia.github.io/libnvidia-container/gpgkey";
const NVIDIA_APT_LIST: &str = "/etc/apt/sources.list.d/nvidia-container-toolkit.list";
const NVIDIA_RPM_REPO: &str = "/etc/yum.repos.d/nvidia-container-toolkit.repo";
const NVIDIA_RPM_REPO_URL: &str =
    "https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo";

/// A GitHub release whose assets the person downloads into its own folder under the download
/// directory, checked against the digests its release page lists; the plan then installs
/// every `.deb` in that folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// Folder under the download directory.
    pub folder: String,
    /// The release pages, with what to take from each.
    pub sources: Vec<(String, &'static str)>,
}

/// One component on one distro.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recipe {
    /// Repository setup, before any install.
    pub prepare: Vec<Step>,
    /// Distro packages, exact versions written the distro's way (`pkg=1.2-1`, `pkg-1.2-1`).
    pub packages: Vec<String>,
    pub release: Option<Release>,
    /// After the install: services, modules, runtime configuration.
    pub configure: Vec<Step>,
    /// What cannot be automated.
    pub manual: Vec<Step>,
}

fn sudo(args: &[&str]) -> Step {
    Step::run("sudo", args.iter().map(|s| s.to_string()).collect())
}

fn github(repo: &str, tag: &str) -> String {
    format!("https://github.com/{repo}/releases/tag/{tag}")
}

fn pinned(distro: Distro, names: &[&str], version: &str) -> Vec<String> {
    names
        .iter()
        .map(|n| match distro {
            Distro::Ubuntu2404 | Distro::Ubuntu2604 => format!("{n}={version}"),
            Distro::Fedora => format!("{n}-{version}"),
            Distro::Arch => n.to_string(),
        })
        .collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The apt preferences that hold the PPA's media stack at the pinned versions and keep its
/// compute builds from replacing the GitHub .debs.
fn apt_pin() -> Step {
    let lines = [
        "Package: intel-media-va-driver-non-free".to_string(),
        format!("Pin: version {MEDIA_DRIVER}*"),
        "Pin-Priority: 1001".into(),
        String::new(),
        "Package: libva2 libva-drm2 libva-x11-2 libva-wayland2".into(),
        format!("Pin: version {LIBVA}*"),
        "Pin-Priority: 1001".into(),
        String::new(),
        "Package: intel-opencl-icd libze* libigc* libigdfcl*".into(),
        format!("Pin: release o={INTEL_PPA_ORIGIN}"),
        "Pin-Priority: -1".into(),
    ];
    Step::write_file(APT_PIN_FILE, lines.to_vec())
        .why("pin the PPA's media driver and libva, and keep its compute builds from replacing the GitHub .debs")
}

fn toolkit_configure(distro: Distro) -> Vec<Step> {
    let mut steps = vec![
        sudo(&["nvidia-ctk", "runtime", "configure", "--runtime=docker"])
            .why("register the nvidia runtime with Docker (for --gpus)"),
        sudo(&["systemctl", "restart", "docker"]).why("restart Docker so it reads the runtime"),
    ];
    // nvidia-cdi-refresh ships with the toolkit since 1.18.0 (pinned on Ubuntu and Fedora); Arch's repo
    // version is whatever it serves, and `cdi generate` works with any.
    steps.push(match distro {
        Distro::Arch => sudo(&["nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"])
            .why("write the CDI spec for the GPUs"),
        _ => sudo(&["systemctl", "enable", "--now", "nvidia-cdi-refresh.path"])
            .why("keep the CDI spec current as drivers change (nvidia-cdi-refresh)"),
    });
    steps
}

fn npu_reload() -> Vec<Step> {
    vec![
        sudo(&["modprobe", "-r", "intel_vpu"]).why("unload intel_vpu so it loads the new firmware"),
        sudo(&["modprobe", "intel_vpu"]).why("load intel_vpu (the kernel prefers /lib/firmware/updates/intel/vpu)"),
    ]
}

fn gaudi_manual() -> Step {
    Step::manual(format!(
        "install the habanalabs driver and firmware of Intel Gaudi software {GAUDI_SOFTWARE} (the release of the \
baked device plugin) with Intel's installer; no distro ships it and the mainline kernel's driver stops at Gaudi 2"
    ))
    .with_url("https://docs.habana.ai/en/latest/Installation_Guide/Driver_Installation.html")
}

/// What `component` needs on `distro`.
pub fn recipe(distro: Distro, component: Component) -> Recipe {
    use Component as C;
    let ubuntu = matches!(distro, Distro::Ubuntu2404 | Distro::Ubuntu2604);
    match (component, ubuntu) {
        (C::ComputeRuntime, true) => Recipe {
            release: Some(Release {
                folder: format!("compute-runtime-{COMPUTE_RUNTIME}"),
                sources: vec![
                    (
                        github("intel/compute-runtime", COMPUTE_RUNTIME),
                        "intel-opencl-icd, libze-intel-gpu1, intel-ocloc and libigdgmm .debs",
                    ),
                    (github("intel/intel-graphics-compiler", IGC), "intel-igc-core-2 and intel-igc-opencl-2 .debs"),
                ],
            }),
            ..Recipe::default()
        },
        (C::ComputeRuntime, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["intel-opencl", "intel-level-zero"],
                _ => &["intel-compute-runtime"],
            }),
            ..Recipe::default()
        },
        (C::LevelZeroLoader, true) => Recipe {
            release: Some(Release {
                folder: format!("level-zero-{LEVEL_ZERO}"),
                sources: vec![(github("oneapi-src/level-zero", LEVEL_ZERO), "the libze1 .deb")],
            }),
            ..Recipe::default()
        },
        (C::LevelZeroLoader, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["oneapi-level-zero"],
                _ => &["level-zero-loader"],
            }),
            ..Recipe::default()
        },
        (C::IntelMediaDriver, true) => Recipe {
            prepare: vec![
                sudo(&["add-apt-repository", "-y", INTEL_PPA])
                    .why("add the Intel graphics PPA (media driver and libva)"),
                apt_pin(),
            ],
            packages: names(&["intel-media-va-driver-non-free", "libva2", "libva-drm2", "vainfo"]),
            ..Recipe::default()
        },
        (C::IntelMediaDriver, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["libva", "libva-intel-media-driver", "libva-utils"],
                _ => &["intel-media-driver", "libva", "libva-utils"],
            }),
            ..Recipe::default()
        },
        (C::NpuDriver, true) => Recipe {
            release: Some(Release {
                folder: format!("linux-npu-driver-{NPU_DRIVER}"),
                sources: vec![(
                    github("intel/linux-npu-driver", NPU_DRIVER),
                    if distro == Distro::Ubuntu2604 {
                        "the Ubuntu 26.04 archive, unpacked (intel-driver-compiler-npu, intel-fw-npu, intel-level-zero-npu .debs)"
                    } else {
                        "the Ubuntu 24.04 archive, unpacked (intel-driver-compiler-npu, intel-fw-npu, intel-level-zero-npu .debs)"
                    },
                )],
            }),
            configure: npu_reload(),
            ..Recipe::default()
        },
        (C::NpuDriver, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["intel-npu-driver", "intel-npu-firmware"],
                _ => &["intel-npu-driver", "linux-firmware-intel"],
            }),
            configure: npu_reload(),
            ..Recipe::default()
        },
        (C::ContainerToolkit, _) => {
            let toolkit = [
                "nvidia-container-toolkit",
                "nvidia-container-toolkit-base",
                "libnvidia-container-tools",
                "libnvidia-container1",
            ];
            let prepare = match distro {
                Distro::Ubuntu2404 | Distro::Ubuntu2604 => vec![
                    sudo(&["curl", "-fsSL", "-o", NVIDIA_KEY, NVIDIA_KEY_URL]).why("fetch the NVIDIA repository's signing key"),
                    Step::write_file(
                        NVIDIA_APT_LIST,
                        vec![format!(
                            "deb [signed-by={NVIDIA_KEY}] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /"
                        )],
                    )
                    .why("add NVIDIA's apt repository"),
                ],
                Distro::Fedora => vec![
                    sudo(&["curl", "-fsSL", "-o", NVIDIA_RPM_REPO, NVIDIA_RPM_REPO_URL]).why("add NVIDIA's dnf repository"),
                ],
                Distro::Arch => Vec::new(),
            };
            let packages = match distro {
                Distro::Arch => names(&["nvidia-container-toolkit"]),
                _ => pinned(distro, &toolkit, NVIDIA_TOOLKIT),
            };
            Recipe { prepare, packages, configure: toolkit_configure(distro), ..Recipe::default() }
        }
        (C::GaudiDriver, _) => Recipe {
            manual: vec![gaudi_manual()],
            configure: vec![sudo(&["modprobe", "habanalabs"]).why("load the driver so /dev/accel/accel* appear")],
            ..Recipe::default()
        },
    }
}

/// The install command for `packages` on `distro`, one command for all.
pub fn install(distro: Distro, packages: Vec<String>) -> Step {
    let (program, mut args): (&str, Vec<String>) = match distro {
        Distro::Ubuntu2404 | Distro::Ubuntu2604 => ("sudo", names(&["apt-get", "install", "-y"])),
        Distro::Fedora => ("sudo", names(&["dnf", "install", "-y"])),
        // A partial upgrade is what breaks Arch hosts: always sync and upgrade everything.
        Distro::Arch => ("sudo", names(&["pacman", "-Syu", "--needed", "--noconfirm"])),
    };
    args.extend(packages);
    let mut step = Step::run(program, args);
    step.phase = Phase::Install;
    step
}

/// Refreshes the package index after repositories were added (apt only; dnf and pacman
/// refresh on install).
pub fn refresh(distro: Distro) -> Option<Step> {
    matches!(distro, Distro::Ubuntu2404 | Distro::Ubuntu2604).then(|| {
        let mut step = sudo(&["apt-get", "update"]);
        step.phase = Phase::Refresh;
        step
    })
}

/// The fix command for a diagnosis, per distro.
pub fn fix_libva(distro: Distro) -> Step {
    match distro {
        Distro::Ubuntu2404 | Distro::Ubuntu2604 => {
            sudo(&["apt-get", "install", "-y", "libva2", "libva-drm2", "intel-media-va-driver-non-free"])
        }
        Distro::Fedora => sudo(&["dnf", "upgrade", "-y", "--refresh", "libva", "libva-intel-media-driver"]),
        Distro::Arch => sudo(&["pacman", "-Syu"]),
    }
}

pub fn fix_glibcxx(distro: Distro) -> Step {
    match distro {
        Distro::Ubuntu2404 | Distro::Ubuntu2604 => sudo(&["apt-get", "install", "-y", "--only-upgrade", "libstdc++6"]),
        Distro::Fedora => sudo(&["dnf", "upgrade", "-y", "--refresh", "libstdc++", "intel-opencl", "intel-level-zero"]),
        Distro::Arch => sudo(&["pacman", "-Syu"]),
    }
}
