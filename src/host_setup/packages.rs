//! The pinned install recipes: for each distro and each piece of host software, the
//! repository it comes from, the packages (with exact versions where a version is pinned), the
//! release files it downloads (each by URL and sha256) and what to run after. Data only;
//! `plan` orders and merges it.
//!
//! What is pinned: on the apt distros, the GitHub releases of compute-runtime, IGC, the Level
//! Zero loader and the NPU driver by tag, each file by its sha256; the PPA's media driver and
//! libva by version (apt preferences, Ubuntu 24.04 and 26.04); the NVIDIA container toolkit by
//! exact package version (apt and dnf). Fedora's, Arch's and Debian's own repositories serve
//! only their current build, so those packages are pinned by name (apt and dnf check them
//! against the repository's signed index).
//!
//! Where the digests come from: each release publishes them (compute-runtime as its
//! `wwNN.sum` asset and in its release notes, which also list IGC's; GitHub shows a sha256 for
//! every release asset). Those pages cannot be read from where this table is kept, so each
//! digest here was compared with public install scripts and package recipes that pin the same
//! file; the sources each one agrees with are named beside it, and none disagreed. A file no
//! copy pins is checked against the release's own checksum file, which `--apply` downloads
//! first (compute-runtime 25.13's `ww13.sum`). The Ubuntu 22.04 digests of IGC v2.10.8, Level
//! Zero v1.24.2 and the NPU driver v1.26.0 have one source between them (one install script),
//! so they rest on `--apply`'s check failing loudly rather than on agreement. Either way
//! `--apply` checks every file before anything is installed, and a mismatch stops the run.

use super::{Component, Distro, Phase, Step};

/// compute-runtime (OpenCL ICD and the Level Zero GPU driver) release tag, for the distros
/// with glibc 2.38 or newer (Ubuntu 24.04 and 26.04, Debian 13): its packages are built on
/// Ubuntu 24.04.
pub const COMPUTE_RUNTIME: &str = "26.35.39758.10";
/// The Intel Graphics Compiler release compute-runtime is built against.
pub const IGC: &str = "v2.41.5";
/// The Level Zero loader (`libze1`).
pub const LEVEL_ZERO: &str = "v1.34.0";
/// linux-npu-driver (user-space driver, compiler and `intel-fw-npu`).
pub const NPU_DRIVER: &str = "v1.38.0";
/// For Ubuntu 22.04 and Debian 12 (glibc 2.35 and 2.36, libstdc++ up to GLIBCXX_3.4.30): the
/// newest releases with packages built on Ubuntu 22.04. The releases above need glibc 2.38.
pub const COMPUTE_RUNTIME_JAMMY: &str = "25.13.33276.16";
pub const IGC_JAMMY: &str = "v2.10.8";
pub const LEVEL_ZERO_JAMMY: &str = "v1.24.2";
pub const NPU_DRIVER_JAMMY: &str = "v1.26.0";
/// The PPA's media driver and libva versions (Ubuntu 24.04 and 26.04).
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
const DEBIAN_NON_FREE: &str = "/etc/apt/sources.list.d/k3d-gpu-debian-non-free.sources";
const NVIDIA_KEY: &str = "/usr/share/keyrings/nvidia-container-toolkit-keyring.asc";
const NVIDIA_KEY_URL: &str = "https://nvidia.github.io/libnvidia-container/gpgkey";
const NVIDIA_APT_LIST: &str = "/etc/apt/sources.list.d/nvidia-container-toolkit.list";
const NVIDIA_RPM_REPO: &str = "/etc/yum.repos.d/nvidia-container-toolkit.repo";
const NVIDIA_RPM_REPO_URL: &str =
    "https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo";

/// What a downloaded file is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sha256 {
    /// The digest, pinned here.
    Pinned(&'static str),
    /// The line for the file in the release's own checksum file (`sha256sum` format), which
    /// is downloaded into the same folder first.
    Listed(&'static str),
}

/// One release file: where it is and what it must hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    pub url: String,
    /// The file name it is saved as, in the release's folder.
    pub file: String,
    pub sha256: Sha256,
}

/// Files from GitHub releases, downloaded into one folder under the download directory and
/// each checked against its sha256 before anything is installed; then the plan installs
/// exactly those `.deb`s (or, for archives, the `.deb`s unpacked from them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// Folder under the download directory.
    pub folder: String,
    /// Checksum files the release publishes, (URL, file name), downloaded first.
    pub lists: Vec<(String, &'static str)>,
    pub downloads: Vec<Download>,
    /// The downloads are `.tar.gz` archives of `.deb`s (linux-npu-driver), unpacked into the
    /// folder's `debs/` after the check.
    pub archives: bool,
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

/// A release asset's download URL.
fn asset(repo: &str, tag: &str, file: &str) -> String {
    format!("https://github.com/{repo}/releases/download/{tag}/{file}")
}

fn pinned_file(repo: &str, tag: &str, file: &str, sha256: &'static str) -> Download {
    Download { url: asset(repo, tag, file), file: file.to_string(), sha256: Sha256::Pinned(sha256) }
}

fn pinned(distro: Distro, names: &[&str], version: &str) -> Vec<String> {
    names
        .iter()
        .map(|n| match distro {
            Distro::Fedora => format!("{n}-{version}"),
            Distro::Arch => n.to_string(),
            _ => format!("{n}={version}"),
        })
        .collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// glibc 2.35/2.36 and GLIBCXX_3.4.30: the releases built on Ubuntu 22.04.
fn jammy_era(distro: Distro) -> bool {
    matches!(distro, Distro::Ubuntu2204 | Distro::Debian12)
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

/// Debian's non-free component, where `intel-media-va-driver-non-free` lives (Debian's
/// archive layout: the package is in non-free in bookworm and trixie). A file of its own, in
/// deb822 form, so the host's own sources are left as they are (Proxmox keeps its in
/// /etc/apt/sources.list).
fn debian_non_free(distro: Distro) -> Step {
    let suite = if distro == Distro::Debian12 { "bookworm" } else { "trixie" };
    Step::write_file(
        DEBIAN_NON_FREE,
        vec![
            "Types: deb".into(),
            "URIs: http://deb.debian.org/debian".into(),
            format!("Suites: {suite} {suite}-updates"),
            "Components: non-free".into(),
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg".into(),
        ],
    )
    .why("add Debian's non-free component (the Intel media driver with its encoders)")
}

/// The tool that downloads, installed first where a minimal install lacks it: Debian's
/// minimal installs (and some Proxmox templates) have no curl; Ubuntu, Fedora and Arch ship it.
pub fn downloader(distro: Distro) -> Option<Step> {
    matches!(distro, Distro::Debian12 | Distro::Debian13).then(|| {
        let mut step = sudo(&["apt-get", "install", "-y", "curl", "ca-certificates"])
            .why("install curl, which downloads the release files and NVIDIA's key");
        step.phase = Phase::Tools;
        step
    })
}

fn toolkit_configure(distro: Distro) -> Vec<Step> {
    let mut steps = vec![
        sudo(&["nvidia-ctk", "runtime", "configure", "--runtime=docker"])
            .why("register the nvidia runtime with Docker (for --gpus)"),
        sudo(&["systemctl", "restart", "docker"]).why("restart Docker so it reads the runtime"),
    ];
    // nvidia-cdi-refresh ships with the toolkit since 1.18.0 (pinned on the apt distros and
    // Fedora); Arch's repo version is whatever it serves, and `cdi generate` works with any.
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

/// compute-runtime and the IGC it is built against, file by file. 26.35.39758.10 and v2.41.5:
/// each digest is the same in five or more public install scripts and Dockerfiles and in Arch
/// User Repository recipes by an Arch packager (`intel-compute-runtime-bin` 26.35.39758.10-1
/// for the four compute-runtime files, `intel-graphics-compiler-bin` 2.41.5-1 for IGC's two).
/// 25.13.33276.16: IGC v2.10.8's two digests from one public install script, no recipe pins
/// them; the compute-runtime files against the release's ww13.sum.
fn compute_runtime(distro: Distro) -> Release {
    const CR: &str = "intel/compute-runtime";
    const IGC_REPO: &str = "intel/intel-graphics-compiler";
    if jammy_era(distro) {
        let t = COMPUTE_RUNTIME_JAMMY;
        let listed = |file: &str| Download {
            url: asset(CR, t, file),
            file: file.to_string(),
            sha256: Sha256::Listed("ww13.sum"),
        };
        return Release {
            folder: format!("compute-runtime-{t}"),
            lists: vec![(asset(CR, t, "ww13.sum"), "ww13.sum")],
            downloads: vec![
                pinned_file(
                    IGC_REPO,
                    IGC_JAMMY,
                    "intel-igc-core-2_2.10.8+18926_amd64.deb",
                    "85bb185f5c9f0700321c6ce9362a4aa85b6cdf02f74a7b8685424d0be024fb0e",
                ),
                pinned_file(
                    IGC_REPO,
                    IGC_JAMMY,
                    "intel-igc-opencl-2_2.10.8+18926_amd64.deb",
                    "21e5ee9f0b5798335d82a88f98e80bccd9539380782e60893d6d050eb801d322",
                ),
                listed("intel-level-zero-gpu_1.6.33276.16_amd64.deb"),
                listed("intel-opencl-icd_25.13.33276.16_amd64.deb"),
                listed("libigdgmm12_22.7.0_amd64.deb"),
            ],
            archives: false,
        };
    }
    let t = COMPUTE_RUNTIME;
    Release {
        folder: format!("compute-runtime-{t}"),
        lists: Vec::new(),
        downloads: vec![
            pinned_file(
                IGC_REPO,
                IGC,
                "intel-igc-core-2_2.41.5+22716_amd64.deb",
                "0a6e64a663ae65a0fa02d6912ae3b6b37cf85b90c21cc423fd9fef70aaf4f628",
            ),
            pinned_file(
                IGC_REPO,
                IGC,
                "intel-igc-opencl-2_2.41.5+22716_amd64.deb",
                "779e1b9e88098eb25711e9a8f67c2752665bad22f134aa40ed5649f6e1b87058",
            ),
            pinned_file(
                CR,
                t,
                "intel-ocloc_26.35.39758.10-0_amd64.deb",
                "c64bff586edf2bd9b49f3e4c9c2be25e05c43466e4dafa2a2c3948d498c736b7",
            ),
            pinned_file(
                CR,
                t,
                "intel-opencl-icd_26.35.39758.10-0_amd64.deb",
                "61712caaddeba3d38e4f79e2a0fb23fea25596ca2d72c3144c6eea2331ec4301",
            ),
            pinned_file(
                CR,
                t,
                "libze-intel-gpu1_26.35.39758.10-0_amd64.deb",
                "c19a641b953d55aebbf1d51bec364a84bf629f985e02fbbe6dc70224c0e88470",
            ),
            pinned_file(
                CR,
                t,
                "libigdgmm12_22.10.0_amd64.deb",
                "6031a63d6e8a12ce61c14efc15f2c8e727061286e3820b8594e6d00615e04d54",
            ),
        ],
        archives: false,
    }
}

/// The Level Zero loader: v1.34.0's Ubuntu 24.04 build (its digest the same in three public
/// install scripts and Dockerfiles, two of them alike enough to share an author; distro
/// recipes build the loader from source, so none pins the .deb), or v1.24.2's Ubuntu 22.04
/// build (one public script).
fn level_zero(distro: Distro) -> Release {
    const LZ: &str = "oneapi-src/level-zero";
    let (tag, file, sha) = if jammy_era(distro) {
        (
            LEVEL_ZERO_JAMMY,
            "level-zero_1.24.2+u22.04_amd64.deb",
            "7c304e93835d96025c90f6a3d8f2ce5edf142c24da9f4871113a4f0225fef22e",
        )
    } else {
        (
            LEVEL_ZERO,
            "libze1_1.34.0+u24.04_amd64.deb",
            "45210e4549cd965ad7b9f160eefe53cbcdba01af341bea7ac7ba0aedeeb613ba",
        )
    };
    Release {
        folder: format!("level-zero-{tag}"),
        lists: Vec::new(),
        downloads: vec![pinned_file(LZ, tag, file, sha)],
        archives: false,
    }
}

/// linux-npu-driver's archive for the distro's Ubuntu base: v1.38.0's 24.04 archive (Debian
/// 13 too; its digest the same in four public scripts and, as `sha256-HvzU…NwdI=`, in a Nix
/// derivation's `fetchurl`), its 26.04 archive (one public script), or v1.26.0's 22.04
/// archive (one public script), the newest built for glibc 2.35.
fn npu_driver(distro: Distro) -> Release {
    const NPU: &str = "intel/linux-npu-driver";
    let (tag, file, sha) = match distro {
        Distro::Ubuntu2604 => (
            NPU_DRIVER,
            "linux-npu-driver-v1.38.0.20260910-34487311128-ubuntu2604.tar.gz",
            "83685e6d92f4db1ca65e442846d487c7feb1335634b33994292ceb38f933bcc7",
        ),
        d if jammy_era(d) => (
            NPU_DRIVER_JAMMY,
            "linux-npu-driver-v1.26.0.20251125-19665715237-ubuntu2204.tar.gz",
            "cfdbcc9adc1ea20d498ebd9cbdb5c212f6fc940e1034ef7a72e239a8636f653a",
        ),
        _ => (
            NPU_DRIVER,
            "linux-npu-driver-v1.38.0.20260910-34487311128-ubuntu2404.tar.gz",
            "1efcd4b60c22abee751d8f2705962cbcc2a569de45c7e0e670cf08afbfcdc1d2",
        ),
    };
    Release {
        folder: format!("linux-npu-driver-{tag}"),
        lists: Vec::new(),
        downloads: vec![pinned_file(NPU, tag, file, sha)],
        archives: true,
    }
}

/// What `component` needs on `distro`.
pub fn recipe(distro: Distro, component: Component) -> Recipe {
    use Component as C;
    match (component, distro.apt()) {
        (C::ComputeRuntime, true) => Recipe { release: Some(compute_runtime(distro)), ..Recipe::default() },
        (C::ComputeRuntime, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["intel-opencl", "intel-level-zero"],
                _ => &["intel-compute-runtime"],
            }),
            ..Recipe::default()
        },
        (C::LevelZeroLoader, true) => Recipe { release: Some(level_zero(distro)), ..Recipe::default() },
        (C::LevelZeroLoader, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["oneapi-level-zero"],
                _ => &["level-zero-loader"],
            }),
            ..Recipe::default()
        },
        (C::IntelMediaDriver, true) => {
            let prepare = match distro {
                Distro::Ubuntu2404 | Distro::Ubuntu2604 => vec![
                    sudo(&["add-apt-repository", "-y", INTEL_PPA])
                        .why("add the Intel graphics PPA (media driver and libva)"),
                    apt_pin(),
                ],
                // The PPA builds for 24.04 and later only; 22.04's driver is in multiverse.
                Distro::Ubuntu2204 => vec![
                    sudo(&["add-apt-repository", "-y", "multiverse"])
                        .why("enable multiverse (Ubuntu 22.04's Intel media driver with its encoders)"),
                ],
                _ => vec![debian_non_free(distro)],
            };
            Recipe {
                prepare,
                packages: names(&["intel-media-va-driver-non-free", "libva2", "libva-drm2", "vainfo"]),
                ..Recipe::default()
            }
        }
        (C::IntelMediaDriver, false) => Recipe {
            packages: names(match distro {
                Distro::Fedora => &["libva", "libva-intel-media-driver", "libva-utils"],
                _ => &["intel-media-driver", "libva", "libva-utils"],
            }),
            ..Recipe::default()
        },
        (C::NpuDriver, true) => Recipe {
            // The compiler in the archive links oneTBB, which the archive does not carry.
            packages: names(&["libtbb12"]),
            release: Some(npu_driver(distro)),
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
                // One repository for every apt distro: NVIDIA publishes a single
                // architecture-keyed deb repository, not one per release.
                _ if distro.apt() => vec![
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
                _ => Vec::new(),
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
        Distro::Fedora => ("sudo", names(&["dnf", "install", "-y"])),
        // A partial upgrade is what breaks Arch hosts: always sync and upgrade everything.
        Distro::Arch => ("sudo", names(&["pacman", "-Syu", "--needed", "--noconfirm"])),
        _ => ("sudo", names(&["apt-get", "install", "-y"])),
    };
    args.extend(packages);
    let mut step = Step::run(program, args);
    step.phase = Phase::Install;
    step
}

/// Refreshes the package index after repositories were added (apt only; dnf and pacman
/// refresh on install).
pub fn refresh(distro: Distro) -> Option<Step> {
    distro.apt().then(|| {
        let mut step = sudo(&["apt-get", "update"]);
        step.phase = Phase::Refresh;
        step
    })
}

/// The fix command for a diagnosis, per distro.
pub fn fix_libva(distro: Distro) -> Step {
    match distro {
        Distro::Fedora => sudo(&["dnf", "upgrade", "-y", "--refresh", "libva", "libva-intel-media-driver"]),
        Distro::Arch => sudo(&["pacman", "-Syu"]),
        _ => sudo(&["apt-get", "install", "-y", "libva2", "libva-drm2", "intel-media-va-driver-non-free"]),
    }
}

pub fn fix_glibcxx(distro: Distro) -> Step {
    match distro {
        Distro::Fedora => sudo(&["dnf", "upgrade", "-y", "--refresh", "libstdc++", "intel-opencl", "intel-level-zero"]),
        Distro::Arch => sudo(&["pacman", "-Syu"]),
        _ => sudo(&["apt-get", "install", "-y", "--only-upgrade", "libstdc++6"]),
    }
}
