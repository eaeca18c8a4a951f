//! Stand-ins for the node image's bases, made in the test (nothing can be pulled here):
//!
//! - **k3s**: a `/bin` laid out as rancher/k3s's is (`tests/upstream/k3s-package-bin.txt`,
//!   `tests/upstream/k3s-root-bin.txt`): busybox-static as `busybox` with a link per applet
//!   (`sh` among them), `aux/mount` and `aux/modprobe` as links to `../busybox`, the iptables
//!   wrappers in `aux/`, and one stand-in script for each binary of k3s's package and each of
//!   k3s-root's tools. The script answers the version flag the node image check runs; as
//!   `k3s server|agent` it runs like a node until signalled, and as `kubectl` it answers k3d's
//!   `uncordon`.
//! - **ubuntu**: a usr-merged root (`/bin -> usr/bin`) whose `/bin/sh` is Debian's dash, with
//!   bash for the Dockerfile's `SHELL` and the few tools a base image has (coreutils, sed,
//!   grep, mount), each copied from this machine with the libraries `ldd` names.
//!
//! Both are `docker import`ed into the test engine under a tag of the caller's.

use std::path::Path;
use std::process::Command;

/// The stand-in for every binary of k3s's package and of k3s-root: one `#!/bin/sh` script,
/// named by its link. It runs under the image's own `/bin/sh`, whichever that is.
const STAND_IN: &str = r#"#!/bin/sh
name=${0##*/}
case "$name" in
  kubectl) exit 0 ;;
  *-restore) cat >/dev/null; exit 0 ;;
esac
case "${1:-}" in
  --version|-v|version) echo "$name stand-in v0.0.0"; exit 0 ;;
esac
case "$name:${1:-}" in
  k3s:server|k3s:agent)
    # As k3s does when it cannot run ipset: it goes on, with no network policy controller.
    ipset --version >/dev/null 2>&1 || echo "Skipping network policy controller start, ipset unavailable" >&2
    # What a test waits for: the entrypoint got as far as starting k3s.
    echo "k3s stand-in started as $1" >&2
    exec sleep 2147483647 ;;
esac
exit 0
"#;

/// k3s's package in `/bin` (tests/upstream/k3s-package-bin.txt): its binaries, and its links
/// (name, target).
const K3S_FILES: &[&str] = &["k3s", "containerd", "containerd-shim-runc-v2", "runc", "cni", "check-config"];
const K3S_LINKS: &[(&str, &str)] = &[
    ("k3s-agent", "k3s"),
    ("k3s-server", "k3s"),
    ("k3s-token", "k3s"),
    ("k3s-etcd-snapshot", "k3s"),
    ("k3s-secrets-encrypt", "k3s"),
    ("k3s-certificate", "k3s"),
    ("k3s-completion", "k3s"),
    ("kubectl", "k3s"),
    ("crictl", "k3s"),
    ("ctr", "k3s"),
    ("bandwidth", "cni"),
    ("bridge", "cni"),
    ("firewall", "cni"),
    ("flannel", "cni"),
    ("host-local", "cni"),
    ("loopback", "cni"),
    ("portmap", "cni"),
];
/// k3s-root's tools (tests/upstream/k3s-root-bin.txt) that are not busybox applets.
const K3S_ROOT_TOOLS: &[&str] = &["conntrack", "ethtool", "ipset"];
const K3S_ROOT_AUX: &[&str] =
    &["iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"];

fn write_script(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, STAND_IN).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn symlink(target: &str, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// Fills `bin` as rancher/k3s's `/bin`, without the entries named in `lacking`.
pub fn k3s_bin(bin: &Path, lacking: &[&str]) {
    std::fs::create_dir_all(bin.join("aux")).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
    let applets = Command::new("/bin/busybox").arg("--list").output().unwrap();
    assert!(applets.status.success(), "busybox --list failed");
    for applet in String::from_utf8(applets.stdout).unwrap().lines().map(str::trim) {
        // k3s-root moves these two into aux/ (scripts/package).
        if applet.is_empty() || applet.contains('/') || matches!(applet, "busybox" | "mount" | "modprobe") {
            continue;
        }
        symlink("busybox", &bin.join(applet));
    }
    symlink("../busybox", &bin.join("aux/mount"));
    symlink("../busybox", &bin.join("aux/modprobe"));
    for name in K3S_FILES.iter().chain(K3S_ROOT_TOOLS) {
        write_script(&bin.join(name));
    }
    for name in K3S_ROOT_AUX {
        write_script(&bin.join("aux").join(name));
    }
    for (name, target) in K3S_LINKS {
        symlink(target, &bin.join(name));
    }
    for name in lacking {
        let path = bin.join(name);
        let _ = std::fs::remove_file(&path);
        assert!(std::fs::symlink_metadata(&path).is_err(), "{name} still there");
    }
}

/// Tars `rootfs` and imports it as `reference` with the given `--change` instructions.
pub fn import(rootfs: &Path, reference: &str, changes: &[&str]) -> String {
    let tar = rootfs.with_extension("tar");
    let packed = Command::new("tar").args(["-C", rootfs.to_str().unwrap(), "-cf", tar.to_str().unwrap(), "."]).status();
    assert!(packed.unwrap().success(), "tar failed");
    let mut import = Command::new("docker");
    import.arg("import");
    for change in changes {
        import.args(["--change", change]);
    }
    let out = import.args([tar.to_str().unwrap(), reference]).output().unwrap();
    assert!(out.status.success(), "docker import failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The stand-in of rancher/k3s as `reference`: its `/bin` and its image config (PATH with
/// `/bin/aux`, entrypoint `/bin/k3s agent`), as package/Dockerfile sets them.
pub fn import_k3s(dir: &Path, reference: &str) -> String {
    let rootfs = dir.join("k3s-rootfs");
    k3s_bin(&rootfs.join("bin"), &[]);
    for d in ["etc", "tmp", "run", "var/lib/rancher/k3s"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    import(
        &rootfs,
        reference,
        &[
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/bin/aux",
            r#"ENTRYPOINT ["/bin/k3s"]"#,
            r#"CMD ["agent"]"#,
        ],
    )
}

/// The tools of the Ubuntu stand-in, from this machine: dash as `/bin/sh`, bash for RUN, and
/// what a base image's `/usr/bin` has that k3d's entrypoint scripts call.
const UBUNTU_TOOLS: &[&str] =
    &["dash", "bash", "ln", "mkdir", "date", "touch", "sleep", "cat", "cp", "sed", "grep", "mount"];

fn which(tool: &str) -> std::path::PathBuf {
    for dir in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        let path = Path::new(dir).join(tool);
        if path.exists() {
            return std::fs::canonicalize(path).unwrap();
        }
    }
    panic!("{tool} is not on this machine (Debian's dash, bash, coreutils, sed, grep and mount are)");
}

/// The libraries `ldd` names for `binary`, by absolute path.
fn libraries(binary: &Path) -> Vec<std::path::PathBuf> {
    let out = Command::new("ldd").arg(binary).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| std::path::PathBuf::from(path))
        })
        .collect()
}

/// A usr-merged root like Ubuntu's, with dash as `/bin/sh`.
pub fn ubuntu_rootfs(rootfs: &Path) {
    for d in ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "tmp", "var/log", "var/run", "root"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    for (link, target) in [("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")] {
        symlink(target, &rootfs.join(link));
    }
    for tool in UBUNTU_TOOLS {
        let path = which(tool);
        std::fs::copy(&path, rootfs.join("usr/bin").join(tool)).unwrap();
        for lib in libraries(&path) {
            // Through the root's own links (lib -> usr/lib), as the loader will look.
            let dest = rootfs.join(lib.strip_prefix("/").unwrap());
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            if !dest.exists() {
                std::fs::copy(std::fs::canonicalize(&lib).unwrap(), &dest).unwrap();
            }
        }
    }
    symlink("dash", &rootfs.join("usr/bin/sh"));
    std::fs::write(rootfs.join("etc/os-release"), "ID=ubuntu\nVERSION_ID=\"26.04\"\n").unwrap();
}

/// The stand-in of the Ubuntu base as `reference`, with the PATH the real image sets.
pub fn import_ubuntu(dir: &Path, reference: &str) -> String {
    let rootfs = dir.join("ubuntu-rootfs");
    ubuntu_rootfs(&rootfs);
    import(&rootfs, reference, &["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
}
