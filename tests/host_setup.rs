//! `k3d-gpu host-setup` end to end on fixture hosts: every distro × vendor plan against its
//! golden, each partial-upgrade diagnosis, the refusals of `--apply`, and the capture of
//! the files host-setup reads.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::{K3dGpu, check_golden, copy_host, hosts_dir};

const DOWNLOADS: &str = "/var/cache/k3d-gpu-host-setup";

fn host_setup_env(args: &[&str], path: Option<&str>) -> Output {
    let mut cmd = K3dGpu::new().arg("host-setup").args(args).env("K3D_GPU_SETUP_DIR", DOWNLOADS).stdin(Stdio::null());
    if let Some(path) = path {
        cmd = cmd.env("PATH", path);
    }
    cmd.output()
}

fn host_setup(args: &[&str]) -> Output {
    host_setup_env(args, None)
}

fn host(name: &str) -> String {
    hosts_dir().join(name).display().to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", text(&out.stdout), text(&out.stderr)))
}

/// A fixture host for each vendor, where that vendor's host software is missing.
const VENDOR_HOSTS: [(&str, &str); 4] = [
    ("nvidia", "rtx2000ada-x2"),
    ("intel", "arc-b580-x2"),
    ("npu", "panther-lake-old-kernel"),
    ("gaudi", "gaudi3-no-driver"),
];
const DISTROS: [&str; 7] = ["ubuntu-22.04", "ubuntu-24.04", "ubuntu-26.04", "debian-12", "debian-13", "fedora", "arch"];

#[test]
fn every_distro_and_vendor_plan_matches_its_golden() {
    let mut stale = Vec::new();
    for (vendor, name) in VENDOR_HOSTS {
        for distro in DISTROS {
            let out = host_setup(&["--root", &host(name), "--vendors", vendor, "--distro", distro]);
            assert_eq!(out.status.code(), Some(0), "{vendor} on {distro}: {}", text(&out.stderr));
            let plan = text(&out.stdout);
            assert!(plan.starts_with(&format!("host-setup for {distro} (from --distro)")), "{plan}");
            assert!(plan.contains("steps (in order"), "{vendor} on {distro} has no steps:\n{plan}");
            if let Err(e) = check_golden(&format!("tests/golden/host-setup/{vendor}-{distro}.txt"), &out.stdout) {
                stale.push(e);
            }
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

/// The files a step installs from the download directory: `.deb` paths, or the folder a
/// `find` installs from.
fn installs_from(step: &serde_json::Value) -> Vec<String> {
    let argv: Vec<&str> = step["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let installs = argv.windows(2).any(|w| w == ["apt-get", "install"]);
    if !installs {
        return Vec::new();
    }
    argv.iter().filter(|a| a.starts_with(DOWNLOADS)).map(|a| a.to_string()).collect()
}

/// Issue 41 (defect 15): `--apply` ran each `find … -exec apt-get install` before anything had
/// downloaded what it installs (the downloads were by-hand steps it skips). Now every file a
/// step installs was downloaded and checked by earlier steps that `--apply` runs.
#[test]
fn apply_downloads_and_checks_each_file_before_the_step_that_installs_it() {
    for (vendor, name) in VENDOR_HOSTS {
        for distro in DISTROS {
            let doc = json(&host_setup(&["--root", &host(name), "--vendors", vendor, "--distro", distro, "--json"]));
            let steps = doc["steps"].as_array().unwrap();
            let runs = |s: &serde_json::Value| s["kind"] == "run" || s["kind"] == "verify";
            for (n, step) in steps.iter().enumerate() {
                for target in installs_from(step) {
                    assert!(runs(step), "{vendor} on {distro}: {step}");
                    let before = &steps[..n];
                    // A folder (a find over unpacked archives): the archive it came from was
                    // downloaded, checked and unpacked into it first.
                    let downloaded = |path: &str| {
                        before.iter().any(|s| {
                            runs(s) && s["argv"][0] == "curl" && s["argv"].as_array().unwrap().iter().any(|a| a == path)
                        })
                    };
                    let checked = |path: &str| before.iter().any(|s| s["kind"] == "verify" && s["path"] == path);
                    if target.ends_with(".deb") {
                        assert!(
                            downloaded(&target),
                            "{vendor} on {distro}: {target} installed before it is downloaded"
                        );
                        assert!(checked(&target), "{vendor} on {distro}: {target} installed before its sha256 check");
                    } else {
                        let unpack = before
                            .iter()
                            .find(|s| {
                                s["argv"][0] == "tar" && s["argv"].as_array().unwrap().iter().any(|a| a == &target)
                            })
                            .unwrap_or_else(|| {
                                panic!("{vendor} on {distro}: nothing unpacks into {target} before {step}")
                            });
                        let archive = unpack["argv"][2].as_str().unwrap();
                        assert!(downloaded(archive) && checked(archive), "{vendor} on {distro}: {archive}");
                    }
                }
            }
        }
    }
}

/// The new distros, as their own hosts name them: WSL2's Ubuntu 22.04 (wsl2-nvidia), a Debian
/// 13 box (nvidia-module-no-nodes), and Proxmox VE 8's Debian 12 (that box's os-release
/// rewritten to bookworm's), each planned from /etc/os-release against its golden.
#[test]
fn ubuntu_22_04_and_debian_12_and_13_hosts_are_planned_from_os_release() {
    let bookworm = copy_host("nvidia-module-no-nodes");
    std::fs::write(
        bookworm.path().join("etc/os-release"),
        "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n\
VERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n",
    )
    .unwrap();
    let mut stale = Vec::new();
    for (root, distro, golden) in [
        (host("wsl2-nvidia"), "ubuntu-22.04", "wsl2-nvidia"),
        (host("nvidia-module-no-nodes"), "debian-13", "nvidia-module-no-nodes"),
        (bookworm.path().display().to_string(), "debian-12", "proxmox-8-bookworm"),
    ] {
        let out = host_setup(&["--root", &root]);
        assert_eq!(out.status.code(), Some(0), "{distro}: {}", text(&out.stderr));
        let plan = text(&out.stdout);
        assert!(plan.starts_with(&format!("host-setup for {distro} (from os-release)")), "{plan}");
        if let Err(e) = check_golden(&format!("tests/golden/host-setup/{golden}.txt"), &out.stdout) {
            stale.push(e);
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

#[test]
fn the_plans_pin_what_the_reference_pins() {
    let plan = |vendor: &str, distro: &str| {
        let name = VENDOR_HOSTS.iter().find(|(v, _)| *v == vendor).unwrap().1;
        json(&host_setup(&["--root", &host(name), "--vendors", vendor, "--distro", distro, "--json"]))
    };
    let commands = |doc: &serde_json::Value| -> Vec<String> {
        doc["steps"].as_array().unwrap().iter().map(|s| s["command"].as_str().unwrap().to_string()).collect()
    };
    // Issue 35: the host gets the toolkit the node image pins, read from the Dockerfile.
    let dockerfile = k3d_gpu::node_image::SHIPPED_DOCKERFILE;
    let pin = k3d_gpu::node_image::arg_defaults(dockerfile)["NVIDIA_CONTAINER_TOOLKIT_VERSION"].clone();
    assert_eq!(pin, "1.20.0-1", "the newest toolkit release (share/README.md)");
    let ubuntu = commands(&plan("nvidia", "ubuntu-24.04"));
    assert!(ubuntu.iter().any(|c| c.contains(&format!("nvidia-container-toolkit={pin}"))), "{ubuntu:?}");
    let fedora = commands(&plan("nvidia", "fedora"));
    assert!(fedora.iter().any(|c| c.contains(&format!("nvidia-container-toolkit-{pin}"))), "{fedora:?}");
    let arch = commands(&plan("nvidia", "arch"));
    assert!(arch.iter().any(|c| c.starts_with("sudo pacman -Syu --needed")), "{arch:?}");
    assert!(arch.iter().any(|c| c.contains("nvidia-ctk cdi generate")), "{arch:?}");
    let intel = plan("intel", "ubuntu-26.04");
    let urls: Vec<&str> = intel["steps"].as_array().unwrap().iter().filter_map(|s| s["url"].as_str()).collect();
    let gh = "https://github.com/";
    for url in [
        "intel/compute-runtime/releases/download/26.35.39758.10/intel-opencl-icd_26.35.39758.10-0_amd64.deb",
        "intel/compute-runtime/releases/download/26.35.39758.10/libze-intel-gpu1_26.35.39758.10-0_amd64.deb",
        "intel/intel-graphics-compiler/releases/download/v2.41.5/intel-igc-core-2_2.41.5+22716_amd64.deb",
        "oneapi-src/level-zero/releases/download/v1.34.0/libze1_1.34.0+u24.04_amd64.deb",
    ] {
        assert!(urls.contains(&format!("{gh}{url}").as_str()), "{url} not in {urls:?}");
    }
    // Ubuntu 22.04 and Debian 12 get the releases built for glibc 2.35.
    for distro in ["ubuntu-22.04", "debian-12"] {
        let doc = plan("intel", distro);
        let urls: Vec<&str> = doc["steps"].as_array().unwrap().iter().filter_map(|s| s["url"].as_str()).collect();
        assert!(
            urls.iter().any(|u| u.contains("/compute-runtime/releases/download/25.13.33276.16/ww13.sum")),
            "{urls:?}"
        );
        assert!(urls.iter().any(|u| u.ends_with("level-zero_1.24.2+u22.04_amd64.deb")), "{urls:?}");
        assert!(!urls.iter().any(|u| u.contains("26.35.39758.10")), "{urls:?}");
    }
    let pin = commands(&intel).into_iter().find(|c| c.contains("preferences.d")).unwrap();
    assert!(pin.contains("'Pin: version 26.3.2*'") && pin.contains("'Pin: version 2.24.1*'"), "{pin}");
    let npu = plan("npu", "ubuntu-24.04");
    assert!(npu["steps"].as_array().unwrap().iter().any(|s| {
        s["url"]
            .as_str()
            .is_some_and(|u| u.contains("/releases/download/v1.38.0/") && u.ends_with("-ubuntu2404.tar.gz"))
    }));
    // A manual step is never something --apply could run.
    for step in intel["steps"].as_array().unwrap() {
        if step["kind"] == "manual" {
            assert_eq!(step["argv"], serde_json::json!([]), "{step}");
            assert_eq!(step["command"], "", "{step}");
        }
    }
}

#[test]
fn a_libva_older_than_the_media_driver_is_diagnosed_with_its_fix() {
    let out = host_setup(&["--root", &host("meteor-lake-old-npu-fw"), "--json"]);
    assert_eq!(out.status.code(), Some(1), "a diagnosis is a failed check");
    let doc = json(&out);
    assert_eq!(doc["distro"], "ubuntu-24.04");
    assert_eq!(doc["distro_from"], "os-release");
    let d = &doc["diagnoses"][0];
    assert_eq!(d["code"], "libva-older-than-media-driver", "{doc}");
    let evidence = d["evidence"].to_string();
    assert!(evidence.contains("__vaDriverInit_1_22") && evidence.contains("libva 2.20"), "{evidence}");
    assert_eq!(d["fix"], "sudo apt-get install -y libva2 libva-drm2 intel-media-va-driver-non-free");
    let media = doc["checks"].as_array().unwrap().iter().find(|c| c["component"] == "intel-media-driver").unwrap();
    assert_eq!(media["state"], "broken");
    // The broken component gets its install steps even though its files are there.
    let steps = doc["steps"].to_string();
    assert!(steps.contains("ppa:kobuk-team/intel-graphics"), "{steps}");
    check_golden("tests/golden/host-setup/meteor-lake-old-npu-fw.json", &out.stdout).unwrap();
}

#[test]
fn a_libstdcxx_without_the_runtimes_glibcxx_is_diagnosed_with_its_fix() {
    let out = host_setup(&["--root", &host("desktop-rpl-nvidia")]);
    assert_eq!(out.status.code(), Some(1));
    let plan = text(&out.stdout);
    assert!(plan.starts_with("host-setup for arch (from os-release)"), "Manjaro is planned as Arch: {plan}");
    assert!(
        plan.contains(
            "fail glibcxx-missing: the compute runtime needs GLIBCXX_3.4.35 but libstdc++ provides up to GLIBCXX_3.4.34"
        ),
        "{plan}"
    );
    assert!(plan.contains("evidence: /usr/lib/intel-opencl/libigdrcl.so: needs GLIBCXX_3.4.35"), "{plan}");
    assert!(plan.contains("fix: sudo pacman -Syu\n"), "{plan}");
    assert!(plan.contains("present  nvidia-container-toolkit  /usr/bin/nvidia-ctk"), "{plan}");
    check_golden("tests/golden/host-setup/desktop-rpl-nvidia.txt", &out.stdout).unwrap();
}

#[test]
fn a_host_with_everything_installed_needs_nothing() {
    let out = host_setup(&["--root", &host("lunar-lake-npu")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("present  intel-npu-driver") && plan.ends_with("nothing to install\n"), "{plan}");
    let doc = json(&host_setup(&["--root", &host("lunar-lake-npu"), "--json"]));
    assert_eq!(doc["schema"], "k3d-gpu.host-setup/v1");
    assert_eq!(doc["steps"], serde_json::json!([]));
    assert_eq!(doc["diagnoses"], serde_json::json!([]));
}

#[test]
fn an_unknown_distro_is_a_usage_error() {
    let out = host_setup(&["--root", &host("lunar-lake-npu"), "--distro", "gentoo"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no plan for gentoo")
            && err.contains("ubuntu-22.04, ubuntu-24.04, ubuntu-26.04, debian-12, debian-13, fedora, arch"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // A host whose os-release names no planned distro: the same, with the way out.
    let out = host_setup(&["--root", &host("xeon-2s-snc2")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Rocky Linux 10.0"), "{}", text(&out.stderr));
    assert_eq!(host_setup(&["--root", &host("xeon-2s-snc2"), "--distro", "fedora"]).status.code(), Some(0));
    // An os-release that cannot be read says so, rather than naming no distro.
    let out = host_setup(&["--root", &host("broken-inputs")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot tell the distro: /etc/os-release: not valid UTF-8 text"),
        "{}",
        text(&out.stderr)
    );
}

/// A directory of stub programs, each recording that it ran, and the file they record to.
fn stubs(dir: &Path) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("ran.log");
    for name in [
        "sudo",
        "apt-get",
        "dnf",
        "pacman",
        "install",
        "find",
        "curl",
        "tee",
        "add-apt-repository",
        "modprobe",
        "systemctl",
    ] {
        let stub = bin.join(name);
        std::fs::write(&stub, format!("#!/bin/sh\necho {name} \"$@\" >> '{}'\n", log.display())).unwrap();
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()), log)
}

/// Every path under `dir` with its content, for "nothing changed".
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if meta.is_dir() {
                stack.push(e.path());
                out.push((rel, Vec::new()));
            } else if meta.file_type().is_symlink() {
                out.push((rel, std::fs::read_link(e.path()).unwrap().display().to_string().into_bytes()));
            } else {
                out.push((rel, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn apply_never_runs_against_a_fixture_host_even_a_read_only_one() {
    let copy = copy_host("meteor-lake-old-npu-fw");
    let before = snapshot(copy.path());
    assert!(before.iter().any(|(p, _)| p.ends_with("libva.so.2")), "the copy has the libraries");
    Command::new("chmod").arg("-R").arg("a-w").arg(copy.path()).status().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (path, log) = stubs(work.path());
    let root = copy.path().display().to_string();
    let out = host_setup_env(&["--root", &root, "--apply"], Some(&path));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("never runs against --root"), "{}", text(&out.stderr));
    // The plan was shown first: what --apply would have run is on stdout.
    assert!(text(&out.stdout).contains("sudo add-apt-repository -y ppa:kobuk-team/intel-graphics"));
    assert!(!log.exists(), "a stub ran: {}", std::fs::read_to_string(&log).unwrap_or_default());
    // Without --apply, the same: a plan is only printed.
    let out = host_setup_env(&["--root", &root], Some(&path));
    assert_eq!(out.status.code(), Some(1), "the diagnosis, nothing else");
    assert!(!log.exists());
    Command::new("chmod").arg("-R").arg("u+w").arg(copy.path()).status().unwrap();
    assert_eq!(snapshot(copy.path()), before, "the fixture host is unchanged");
}

#[test]
fn apply_on_the_real_host_without_a_terminal_refuses_and_runs_nothing() {
    let work = tempfile::tempdir().unwrap();
    let (path, log) = stubs(work.path());
    // Whatever this machine has, a plan is made for ubuntu-24.04 and nothing may run: stdin
    // and stderr are not terminals, so nobody can type the confirmation.
    let out = host_setup_env(&["--root", "/", "--distro", "ubuntu-24.04", "--apply"], Some(&path));
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("needs a typed confirmation on a terminal; nothing was changed"), "{err}");
    assert!(!log.exists(), "a stub ran: {}", std::fs::read_to_string(&log).unwrap_or_default());
}

#[test]
fn apply_and_json_do_not_mix() {
    let out = host_setup(&["--root", &host("lunar-lake-npu"), "--apply", "--json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn facts_capture_carries_the_files_host_setup_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("captured");
    let cap = K3dGpu::new()
        .args(["facts", "capture", "--root", &host("desktop-rpl-nvidia"), "--out", out_dir.to_str().unwrap()])
        .output();
    assert!(cap.status.success(), "{}", text(&cap.stderr));
    for file in [
        "usr/lib/libva.so.2",
        "usr/lib/dri/iHD_drv_video.so",
        "usr/lib/intel-opencl/libigdrcl.so",
        "usr/bin/nvidia-ctk",
    ] {
        assert!(std::fs::symlink_metadata(out_dir.join(file)).is_ok(), "{file} was not captured");
    }
    // Libraries are kept as the versions read, not as the library.
    let lib = std::fs::read(out_dir.join("usr/lib/intel-opencl/libigdrcl.so")).unwrap();
    assert!(!lib.starts_with(b"\x7fELF") && text(&lib).contains("GLIBCXX_3.4.35"), "{}", text(&lib));
    let captured = out_dir.display().to_string();
    let a = host_setup(&["--root", &captured, "--json"]);
    let b = host_setup(&["--root", &host("desktop-rpl-nvidia"), "--json"]);
    assert_eq!(a.status.code(), Some(1));
    assert_eq!(text(&a.stdout), text(&b.stdout), "the capture plans the same as its source");
}

/// Issue 39: the config's `[vendors]` choose the vendors host-setup plans for, as they choose
/// the ones the cluster gets; a vendor the cluster will not get needs no host software.
#[test]
fn the_configs_vendors_choose_what_is_planned() {
    let dir = tempfile::tempdir().unwrap();
    let planned = |name: &str, config: Option<&str>| -> (Vec<String>, String) {
        let mut args = vec!["--root".to_string(), host(name), "--json".into()];
        if let Some(text) = config {
            let path = dir.path().join("k3dgpu.toml");
            std::fs::write(&path, text).unwrap();
            args.extend(["-c".into(), path.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = host_setup(&args);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}: {}", text(&out.stderr));
        let doc = json(&out);
        let mut vendors: Vec<String> =
            doc["vendors"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        vendors.sort();
        (vendors, doc["steps"].to_string())
    };
    // rtx2000ada-x2 has NVIDIA GPUs and an Intel iGPU.
    let (all, steps) = planned("rtx2000ada-x2", None);
    assert_eq!(all, ["intel", "nvidia"]);
    assert!(steps.contains("nvidia-container-toolkit"), "{steps}");
    let (vendors, steps) = planned("rtx2000ada-x2", Some("[vendors]\nexclude = [\"nvidia\"]\n"));
    assert_eq!(vendors, ["intel"]);
    assert!(!steps.contains("nvidia"), "an excluded vendor gets no steps: {steps}");
    let (vendors, steps) = planned("rtx2000ada-x2", Some("[vendors]\nenable = [\"nvidia\"]\n"));
    assert_eq!(vendors, ["nvidia"]);
    assert!(!steps.contains("intel-opencl") && !steps.contains("level-zero"), "{steps}");
    // A Gaudi without its driver counts for host-setup, unless the config leaves it out.
    assert_eq!(planned("gaudi3-no-driver", None).0, ["gaudi"]);
    let (vendors, steps) = planned("gaudi3-no-driver", Some("[vendors]\nexclude = [\"gaudi\"]\n"));
    assert!(vendors.is_empty(), "{vendors:?}");
    assert_eq!(steps, "[]");
}

/// Issue 39: no document calls a command that exists "not implemented".
#[test]
fn no_doc_calls_an_existing_command_not_implemented() {
    use clap::CommandFactory;
    let cli = k3d_gpu::cli::Cli::command();
    let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir(support::repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(support::repo().join("README.md"));
    let mut wrong = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for line in text.lines().filter(|l| l.contains("not implemented")) {
            for word in line.split("`k3d-gpu ").skip(1).filter_map(|rest| rest.split([' ', '`']).next()) {
                if cli.find_subcommand(word).is_some() {
                    wrong.push(format!("{}: {line}", doc.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
