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
    assert_eq!(Distro::from_os_release(&os(&[("ID", "fedora"), ("VERSION_ID", "45")])), Ok(Distro::Fedora));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "manjaro"), ("ID_LIKE", "arch")])), Ok(Distro::Arch));
    assert_eq!(Distro::from_os_release(&os(&[("ID", "endeavouros"), ("ID_LIKE", "arch")])), Ok(Distro::Arch));
    let old = Distro::from_os_release(&os(&[
        ("ID", "ubuntu"),
        ("VERSION_ID", "22.04"),
        ("PRETTY_NAME", "Ubuntu 22.04.5 LTS"),
    ]));
    assert_eq!(old, Err("Ubuntu 22.04.5 LTS (ID=ubuntu)".to_string()));
    assert!(Distro::from_os_release(&BTreeMap::new()).unwrap_err().contains("names no ID"));
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
    assert_eq!(loader.len(), 2, "its folder and its install");
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
