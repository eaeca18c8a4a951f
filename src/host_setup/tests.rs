//! Unit tests of the pure plan: distro choice, merging, the confirmation word, and that
//! every command is quoted by `shell`.

use super::probe::{Found, HostState};
use super::*;

fn os(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn the_distro_comes_from_os_release_or_is_refused_by_name() {
    assert_eq!(Distro::from_os_release(&os(&[("ID", "ubuntu"), ("VERSION_ID", "24.04")])), Ok(Distro::Ubuntu2404));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "ubuntu"), ("VERSION_ID", "26.04")])), Ok(Distro::Ubuntu2604));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "ubuntu"), ("VERSION_ID", "22.04")])), Ok(Distro::Ubuntu2204));
    // Proxmox VE 8 and 9 carry Debian's os-release.
    assert_eq!(Distro::from_os_release(&os(&[("ID", "debian"), ("VERSION_ID", "12")])), Ok(Distro::Debian12));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "debian"), ("VERSION_ID", "13")])), Ok(Distro::Debian13));
    // Debian testing and sid name no VERSION_ID: no pinned plan fits them.
    assert!(Distro::from_os_release(&os(&[("ID", "debian")])).is_err());
    assert_eq!(Distro::from_os_release(&os(&[("ID", "fedora"), ("VERSION_ID", "45")])), Ok(Distro::Fedora));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "manjaro"), ("ID_LIKE", "arch")])), Ok(Distro::Arch));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "endeavouros"), ("ID_LIKE", "arch")])), Ok(Distro::Arch));
    let old = Distro::from_os_release(&os(&[
        ("ID", "ubuntu"),
        ("VERSION_ID", "20.04"),
        ("PRETTY_NAME", "Ubuntu 20.04.6 LTS"),
    ]));
    let named = UnknownDistro::Named { pretty: "Ubuntu 20.04.6 LTS".into(), id: "ubuntu".into() };
    assert_eq!(old.as_ref().map_err(ToString::to_string), Err("Ubuntu 20.04.6 LTS (ID=ubuntu)".to_string()));
    assert_eq!(old, Err(named));
    assert_eq!(Distro::from_os_release(&BTreeMap::new()), Err(UnknownDistro::NoId));
    for d in Distro::ALL {
        assert_eq!(Distro::from_key(d.key()), Some(d));
    }
    assert_eq!(Distro::from_key("Ubuntu"), None);
}

#[test]
fn only_the_word_apply_confirms() {
    assert!(confirmed("apply\n"));
    assert!(confirmed("  apply  "));
    for no in ["", "y", "yes", "Apply", "apply now", "\n"] {
        assert!(!confirmed(no), "{no:?}");
    }
}

fn inputs(state: &HostState, vendors: Vec<Vendor>, distro: Distro) -> Inputs<'_> {
    Inputs { state, vendors, gaudi_driver: false, distro, distro_given: true, download_dir: "/d l/".into() }
}

#[test]
fn one_command_serves_every_component_that_needs_it_and_phases_keep_their_order() {
    let state = HostState::default();
    let plan = plan(&inputs(&state, vec![Vendor::Npu, Vendor::Intel, Vendor::Intel, Vendor::Amx], Distro::Ubuntu2404));
    assert_eq!(plan.vendors, [Vendor::Intel, Vendor::Npu], "deduplicated, and amx needs nothing on the host");
    let updates: Vec<&Step> = plan.steps.iter().filter(|s| s.argv == ["sudo", "apt-get", "update"]).collect();
    assert_eq!(updates.len(), 1);
    let at = |pred: &dyn Fn(&Step) -> bool| plan.steps.iter().position(pred).unwrap();
    let ppa = at(&|s| s.command.contains("add-apt-repository"));
    let update = at(&|s| s.argv == ["sudo", "apt-get", "update"]);
    let install = at(&|s| s.why == "install the distro packages");
    let reload = at(&|s| s.command == "sudo modprobe intel_vpu");
    assert!(ppa < update && update < install && install < reload, "{:#?}", plan.steps);
    // The loader is one component for both vendors, downloaded once.
    let loader: Vec<&Step> = plan.steps.iter().filter(|s| s.command.contains("level-zero-v1.34.0")).collect();
    assert_eq!(loader.len(), 4, "its folder, download, check and install: {loader:#?}");
    // A download directory with a space is one word.
    let mkdir = plan.steps.iter().find(|s| s.argv[..].starts_with(&["install".to_string()])).unwrap();
    assert_eq!(mkdir.command, "install -d -m 0700 '/d l'");
    assert_eq!(mkdir.argv.last().map(String::as_str), Some("/d l"));
}

#[test]
fn a_diagnosis_needs_both_versions_and_the_component_active() {
    let mut state = HostState {
        media_driver: Some(Found { path: "/usr/lib/dri/iHD_drv_video.so".into(), version: Some(22) }),
        libva: Some(Found { path: "/usr/lib/libva.so.2.2200.0".into(), version: Some(22) }),
        libstdcxx: Some(Found { path: "/usr/lib/libstdc++.so.6.0.34".into(), version: Some(34) }),
        compute_runtime: vec![Found { path: "/usr/lib/intel-opencl/libigdrcl.so".into(), version: Some(34) }],
        ..HostState::default()
    };
    assert!(plan(&inputs(&state, vec![Vendor::Intel], Distro::Arch)).diagnoses.is_empty());
    state.libva.as_mut().unwrap().version = Some(21);
    state.compute_runtime[0].version = Some(35);
    let p = plan(&inputs(&state, vec![Vendor::Intel], Distro::Fedora));
    let codes: Vec<&str> = p.diagnoses.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["libva-older-than-media-driver", "glibcxx-missing"]);
    assert_eq!(p.diagnoses[0].fix, "sudo dnf upgrade -y --refresh libva libva-intel-media-driver");
    // Not an Intel host (only the NPU is active): the GPU's libraries are not its business.
    assert!(plan(&inputs(&state, vec![Vendor::Npu], Distro::Fedora)).diagnoses.is_empty());
    // A version that could not be read is no evidence.
    state.libva.as_mut().unwrap().version = None;
    state.libstdcxx.as_mut().unwrap().version = None;
    assert!(plan(&inputs(&state, vec![Vendor::Intel], Distro::Fedora)).diagnoses.is_empty());
}

#[test]
fn a_file_written_through_tee_is_pasted_as_printf_into_sudo_tee() {
    let step = Step::write_file("/etc/x y", vec!["a 'b'".into(), String::new(), "$(c)".into()]);
    assert_eq!(step.display(), "printf '%s\\n' 'a '\\''b'\\''' '' '$(c)' | sudo tee '/etc/x y'");
    assert_eq!(step.argv, ["sudo", "tee", "/etc/x y"]);
}

/// Every file the plans download has a pinned URL (a release asset at its tag) and either a
/// pinned sha256 or the release's own checksum file, downloaded before it.
#[test]
fn every_download_is_pinned_and_checked_before_anything_is_installed() {
    let state = HostState::default();
    let all = vec![Vendor::Intel, Vendor::Npu, Vendor::Nvidia, Vendor::Gaudi];
    for distro in Distro::ALL {
        let plan = plan(&inputs(&state, all.clone(), distro));
        let steps = &plan.steps;
        let mut fetched: Vec<(usize, &str)> = Vec::new();
        for (n, s) in steps.iter().enumerate() {
            if s.argv.first().map(String::as_str) != Some("curl") {
                continue;
            }
            let url = s.url.as_deref().unwrap();
            assert!(url.starts_with("https://github.com/") && url.contains("/releases/download/"), "{url}");
            let path = &s.argv[s.argv.iter().position(|a| a == "-o").unwrap() + 1];
            assert!(path.starts_with("/d l/"), "{path}");
            fetched.push((n, path));
        }
        assert!(!fetched.is_empty() || !distro.apt(), "{distro:?}");
        let verifies: Vec<(usize, &Step)> =
            steps.iter().enumerate().filter(|(_, s)| s.kind == StepKind::Verify).collect();
        // Each download but a checksum file is checked, after it is downloaded.
        for (n, path) in &fetched {
            if path.ends_with(".sum") {
                continue;
            }
            let (v, check) = verifies
                .iter()
                .find(|(_, s)| s.path.as_deref() == Some(*path))
                .unwrap_or_else(|| panic!("{path} is never checked"));
            assert!(v > n, "{path} is checked before it is downloaded");
            match (&check.sha256, &check.sha256_list) {
                (Some(d), None) => assert!(d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()), "{d}"),
                (None, Some(list)) => {
                    let got =
                        fetched.iter().find(|(_, p)| p == list).unwrap_or_else(|| panic!("{list} is never downloaded"));
                    assert!(got.0 < *v, "{list} comes after the check that reads it");
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        // Nothing changes the system before the last check: no sudo but the downloader's install.
        if let Some((last, _)) = verifies.last() {
            for s in &steps[..*last] {
                let sudo = s.argv.first().is_some_and(|p| p == "sudo");
                assert!(
                    !sudo || s.argv[1..] == ["apt-get", "install", "-y", "curl", "ca-certificates"],
                    "{distro:?}: {} runs before the checks",
                    s.command
                );
            }
        }
    }
}
