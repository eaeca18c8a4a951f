//! The host root never lets a read leave it, and turns bad links into errors, not panics.

use std::fs;
use std::os::unix::fs::symlink;

use k3d_gpu::host::{HostError, HostRoot};

fn host_with(build: impl FnOnce(&std::path::Path)) -> (tempfile::TempDir, HostRoot) {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let host = HostRoot::open(dir.path()).unwrap();
    (dir, host)
}

#[test]
fn relative_links_resolve_inside_the_root() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:02.0")).unwrap();
        fs::write(root.join("sys/devices/pci0000:00/0000:00:02.0/vendor"), "0x8086\n").unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        symlink("../../../devices/pci0000:00/0000:00:02.0", root.join("sys/bus/pci/devices/0000:00:02.0")).unwrap();
    });
    assert_eq!(host.read_text("/sys/bus/pci/devices/0000:00:02.0/vendor").unwrap().as_deref(), Some("0x8086\n"));
    assert_eq!(
        host.canonical("/sys/bus/pci/devices/0000:00:02.0").unwrap().as_deref(),
        Some("/sys/devices/pci0000:00/0000:00:02.0")
    );
    let trail = host.trail();
    assert!(trail.files.contains("/sys/devices/pci0000:00/0000:00:02.0/vendor"));
    assert_eq!(
        trail.links.get("/sys/bus/pci/devices/0000:00:02.0").map(String::as_str),
        Some("../../../devices/pci0000:00/0000:00:02.0")
    );
}

#[test]
fn a_path_spelled_otherwise_reads_what_its_plain_spelling_reads() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:02.0")).unwrap();
        fs::write(root.join("sys/devices/pci0000:00/0000:00:02.0/vendor"), "0x8086\n").unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        symlink("../../../devices/pci0000:00/0000:00:02.0", root.join("sys/bus/pci/devices/0000:00:02.0")).unwrap();
        symlink("0000:00:02.0/vendor", root.join("sys/bus/pci/devices/vendor-of-gpu")).unwrap();
    });
    // Each spelling in both orders: whichever comes first fills the directory cache.
    let spellings = [
        "/sys/bus/pci/devices/0000:00:02.0/vendor",
        "//sys/bus//pci/devices/0000:00:02.0/./vendor",
        "sys/bus/pci/devices/0000:00:02.0/vendor",
        "/sys/bus/pci/devices/vendor-of-gpu",
        "/sys/bus/pci/devices/../devices/vendor-of-gpu",
    ];
    for order in [spellings.to_vec(), spellings.iter().rev().copied().collect()] {
        let host = HostRoot::open(host.root()).unwrap();
        for path in order {
            assert_eq!(host.read_text(path).unwrap().as_deref(), Some("0x8086\n"), "{path}");
            assert_eq!(
                host.canonical(path).unwrap().as_deref(),
                Some("/sys/devices/pci0000:00/0000:00:02.0/vendor"),
                "{path}"
            );
        }
    }
    assert_eq!(host.read_text("/sys/bus/pci/devices/0000:00:02.0/missing").unwrap(), None);
    // Below a file is nothing, as the kernel's ENOTDIR says.
    assert_eq!(host.read_text("/sys/bus/pci/devices/0000:00:02.0/vendor/below").unwrap(), None);
}

#[test]
fn a_link_climbing_out_of_the_root_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "host data").unwrap();
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("sys/class/drm")).unwrap();
        let climb = "../".repeat(32) + outside.path().strip_prefix("/").unwrap().to_str().unwrap();
        symlink(climb, root.join("sys/class/drm/card1")).unwrap();
    });
    let err = host.read_text("/sys/class/drm/card1/secret").unwrap_err();
    assert_eq!(err, HostError::Escapes { link: "/sys/class/drm/card1".into() });
}

#[test]
fn an_absolute_link_is_read_relative_to_the_root() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::write(root.join("etc/os-release"), "ID=fixture\n").unwrap();
        symlink("/etc/os-release", root.join("os-release")).unwrap();
        symlink("/etc/passwd", root.join("passwd")).unwrap();
    });
    assert_eq!(host.read_text("/os-release").unwrap().as_deref(), Some("ID=fixture\n"));
    // The machine's own /etc/passwd exists, the fixture's does not: the link dangles.
    assert_eq!(host.read_text("/passwd").unwrap_err(), HostError::Dangling { link: "/passwd".into() });
}

#[test]
fn link_loops_and_dangling_links() {
    let (_dir, host) = host_with(|root| {
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        symlink("nowhere", root.join("dangling")).unwrap();
    });
    assert_eq!(host.read_text("/a").unwrap_err(), HostError::Loop);
    assert_eq!(host.read_text("/dangling").unwrap_err(), HostError::Dangling { link: "/dangling".into() });
    assert_eq!(host.read_text("/missing").unwrap(), None);
}

#[test]
fn dotdot_in_a_path_cannot_leave_a_fixture_root() {
    let (_dir, host) = host_with(|_| {});
    assert!(matches!(host.read_text("/../../etc/passwd"), Err(HostError::Escapes { .. })));
}

#[test]
fn unreadable_and_non_text_files_are_errors() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("proc/meminfo")).unwrap();
        fs::write(root.join("bad"), [0xff, 0xfe, 0x00]).unwrap();
    });
    assert!(matches!(host.read_text("/proc/meminfo"), Err(HostError::Io(_))));
    assert_eq!(host.read_text("/bad").unwrap_err(), HostError::NotUtf8);
    assert!(host.read_bytes("/bad").unwrap().is_some());
}

#[test]
fn device_node_owner_comes_from_the_sidecar() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("dev/accel")).unwrap();
        fs::write(root.join("dev/accel/accel0"), "").unwrap();
        fs::write(root.join("dev/accel/accel1"), "").unwrap();
        fs::write(root.join(".k3d-gpu-stat"), "0666 0 992 /dev/accel/accel0\n").unwrap();
    });
    let stat = host.node_stat("/dev/accel/accel0").unwrap().unwrap();
    assert_eq!((stat.mode, stat.uid, stat.gid), (0o666, 0, 992));
    let default = host.node_stat("/dev/accel/accel1").unwrap().unwrap();
    assert_eq!((default.mode, default.gid), (0o660, 0));
    assert_eq!(host.node_stat("/dev/accel/accel2").unwrap(), None);
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("proc")).unwrap();
        let status = std::process::Command::new("mkfifo").arg(root.join("proc/cpuinfo")).status().unwrap();
        assert!(status.success());
    });
    assert_eq!(host.read_text("/proc/cpuinfo").unwrap_err(), HostError::NotRegular);
}

#[test]
fn a_huge_file_is_refused_after_the_cap() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("proc")).unwrap();
        let file = fs::File::create(root.join("proc/meminfo")).unwrap();
        file.set_len(k3d_gpu::host::MAX_READ + 1).unwrap();
    });
    assert_eq!(host.read_bytes("/proc/meminfo").unwrap_err(), HostError::TooLarge);
}

#[test]
fn a_sysfs_attribute_is_read_at_most_a_page() {
    let governor = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor";
    let (_dir, host) = host_with(|root| {
        let dir = root.join("sys/devices/system/cpu/cpufreq/policy0");
        fs::create_dir_all(&dir).unwrap();
        // 62 MB of governor, as a hostile fixture host held: refused after the first page.
        fs::File::create(dir.join("scaling_governor")).unwrap().set_len(62 << 20).unwrap();
        fs::write(dir.join("energy_performance_preference"), "x".repeat(4096)).unwrap();
    });
    assert_eq!(host.read_bytes(governor).unwrap_err(), HostError::TooLarge);
    let page = "/sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference";
    assert_eq!(host.read_bytes(page).unwrap().unwrap().len(), 4096, "one page is read whole");
}

#[test]
fn a_sidecar_linking_outside_the_root_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("stat"), "0606 0 4321 /dev/dri/renderD128\n").unwrap();
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("dev/dri")).unwrap();
        fs::write(root.join("dev/dri/renderD128"), "").unwrap();
        // An absolute link is read inside the root, where there is no such file.
        symlink(outside.path().join("stat"), root.join(".k3d-gpu-stat")).unwrap();
    });
    let stat = host.node_stat("/dev/dri/renderD128").unwrap().unwrap();
    assert_eq!((stat.mode, stat.gid), (0o660, 0), "the outside sidecar was read");
}

#[test]
fn a_real_device_node_in_a_fixture_is_refused() {
    // Creating a device node needs root; CI runs as root, a developer may not.
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("proc")).unwrap();
    let made = std::process::Command::new("mknod")
        .args([dir.path().join("proc/cpuinfo").to_str().unwrap(), "c", "1", "5"])
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: mknod needs root");
        return;
    }
    let host = HostRoot::open(dir.path()).unwrap();
    assert_eq!(host.read_text("/proc/cpuinfo").unwrap_err(), HostError::NotRegular);
}

/// A link whose target ends in `.`, `..` or is `/` resolves to a directory above where its
/// components say; a second lookup through the same link must not reuse a wrong prefix.
#[test]
fn links_to_dot_dotdot_and_root_resolve_the_same_on_every_lookup() {
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("f"), "f\n").unwrap();
        fs::write(root.join("g"), "g\n").unwrap();
        symlink(".", root.join("l")).unwrap();
        symlink("/", root.join("r")).unwrap();
        symlink("sub/..", root.join("m")).unwrap();
    });
    for link in ["l", "r", "m"] {
        for (file, text) in [("f", "f\n"), ("g", "g\n"), ("f", "f\n")] {
            let path = format!("/{link}/{file}");
            assert_eq!(host.canonical(&path).unwrap().as_deref(), Some(format!("/{file}").as_str()), "{path}");
            assert_eq!(host.read_text(&path).unwrap().as_deref(), Some(text), "{path}");
        }
        assert_eq!(host.canonical(&format!("/{link}")).unwrap().as_deref(), Some("/"));
        assert_eq!(host.read_text(&format!("/{link}/missing")).unwrap(), None);
    }
}

#[test]
fn links_in_a_cached_directory_still_count_toward_the_hop_limit() {
    // 40 links to reach the directory, one more for the file: 41 in one lookup, a loop to
    // Linux, even when the directory was resolved (and cached) by an earlier lookup.
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("d")).unwrap();
        fs::write(root.join("d/ok"), "ok\n").unwrap();
        symlink("ok", root.join("d/link")).unwrap();
        symlink("d", root.join("l1")).unwrap();
        for i in 2..=k3d_gpu::host::MAX_LINK_HOPS {
            symlink(format!("l{}", i - 1), root.join(format!("l{i}"))).unwrap();
        }
    });
    let top = format!("/l{}", k3d_gpu::host::MAX_LINK_HOPS);
    assert_eq!(host.read_text(&format!("{top}/ok")).unwrap().as_deref(), Some("ok\n"));
    assert_eq!(host.read_text(&format!("{top}/link")).unwrap_err(), HostError::Loop);
}

#[test]
fn what_was_missing_is_looked_up_again() {
    // The host root remembers what it found, for the command's life, but not what it did not
    // find: a device node or driver directory that appears (a module loading) is seen.
    let (dir, host) = host_with(|root| fs::create_dir_all(root.join("sys/class")).unwrap());
    assert_eq!(host.read_text("/sys/class/drm/card0/dev").unwrap(), None);
    assert!(!host.exists("/sys/class/drm").unwrap());
    assert_eq!(host.list("/sys/class/drm").unwrap(), None);
    fs::create_dir_all(dir.path().join("sys/class/drm/card0")).unwrap();
    fs::write(dir.path().join("sys/class/drm/card0/dev"), "226:0\n").unwrap();
    assert!(host.exists("/sys/class/drm").unwrap());
    assert_eq!(host.list("/sys/class/drm").unwrap(), Some(vec!["card0".to_string()]));
    assert_eq!(host.read_text("/sys/class/drm/card0/dev").unwrap().as_deref(), Some("226:0\n"));
}

#[test]
fn a_file_is_read_whole_whatever_its_size() {
    // A read starts from a buffer of the size `lstat` gave (a page when it gives 0, as procfs
    // does): files of several pages, of one byte and of none are read whole all the same.
    let big = "x".repeat(3 * 4096 + 17);
    let (_dir, host) = host_with(|root| {
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::write(root.join("etc/big"), &big).unwrap();
        fs::write(root.join("etc/empty"), "").unwrap();
        fs::write(root.join("etc/one"), "1").unwrap();
    });
    assert_eq!(host.read_text("/etc/big").unwrap().as_deref(), Some(big.as_str()));
    assert_eq!(host.read_text("/etc/empty").unwrap().as_deref(), Some(""));
    assert_eq!(host.read_text("/etc/one").unwrap().as_deref(), Some("1"));
}
