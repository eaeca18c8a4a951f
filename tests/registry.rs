//! `images lock` and `images check` against a real OCI registry (DESIGN.md §7): Debian's
//! docker-registry on 127.0.0.1 (`.ci/registry.sh`), fed by the private dockerd
//! (`.ci/dockerd.sh`). Skipped without them, unless K3D_GPU_TEST_DOCKER=1 requires them.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::K3dGpu;
use support::{docker_ready, repo};

/// The registry's address, or `None` (the test skips) when the environment has none.
fn registry() -> Option<String> {
    if !docker_ready() {
        return None;
    }
    let found = std::env::var("K3D_GPU_TEST_REGISTRY").ok().filter(|r| !r.is_empty());
    let required = std::env::var("K3D_GPU_TEST_DOCKER").is_ok_and(|v| v == "1");
    assert!(
        found.is_some() || !required,
        "K3D_GPU_TEST_DOCKER=1 but K3D_GPU_TEST_REGISTRY is not set (.ci/registry.sh)"
    );
    if found.is_none() {
        eprintln!("skipped: no registry (run .ci/registry.sh)");
    }
    found
}

/// Builds a one-file image whose content is `marker`, tags it `reference`, pushes it, and
/// returns the digest the registry reported.
fn push(reference: &str, marker: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::write(rootfs.join("marker"), marker).unwrap();
    let tar = dir.path().join("rootfs.tar");
    let packed = Command::new("tar").args(["-C", rootfs.to_str().unwrap(), "-cf", tar.to_str().unwrap(), "."]).status();
    assert!(packed.unwrap().success());
    let out = Command::new("docker").args(["import", tar.to_str().unwrap(), reference]).output().unwrap();
    assert!(out.status.success(), "import: {}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new("docker").args(["push", reference]).output().unwrap();
    assert!(out.status.success(), "push: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let digest = text.split_whitespace().skip_while(|w| *w != "digest:").nth(1).expect("push prints the digest");
    digest.to_string()
}

/// A config directory with one component of its own that deploys `images` (each a
/// DaemonSet in namespace default), always wanted, and an empty catalog.
fn config_dir(images: &[String]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut kdl = String::from(
        "component registry-test {\n    summary \"test\"\n    upstream test version=v1\n    manifest m.yml\n",
    );
    let mut yaml = String::new();
    for (i, image) in images.iter().enumerate() {
        kdl.push_str(&format!("    image \"{image}\"\n"));
        yaml.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: ds{i}, namespace: default}}\nspec:\n  selector: {{matchLabels: {{app: ds{i}}}}}\n  template:\n    metadata: {{labels: {{app: ds{i}}}}}\n    spec:\n      containers: [{{name: c, image: \"{image}\"}}]\n"
        ));
    }
    kdl.push_str("}\n");
    std::fs::write(dir.path().join("c.kdl"), kdl).unwrap();
    std::fs::write(dir.path().join("m.yml"), yaml).unwrap();
    // A prebuilt node image: the shipped build's bases (rancher/k3s, ubuntu) would be images
    // of the config too, and Docker Hub cannot be reached from here.
    std::fs::write(
        dir.path().join("k3dgpu.toml"),
        "[cluster]\nimage = \"k3d-gpu-test/node:prebuilt\"\n\n[[components]]\npath = \"c.kdl\"\n",
    )
    .unwrap();
    // An empty catalog, so the only images are the test's (the built-in ones live on
    // registries this machine cannot reach).
    std::fs::create_dir(dir.path().join("empty-catalog")).unwrap();
    dir
}

fn k3d_gpu(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("k3dgpu.toml");
    let root = repo().join("tests/fixtures/hosts/plain-laptop-amd");
    // Every test here resolves tags through the private engine .ci/run starts.
    K3dGpu::new()
        .docker()
        .args(["-c", config.to_str().unwrap(), "--root", root.to_str().unwrap()])
        .args(["--stdlib", dir.join("empty-catalog").to_str().unwrap()])
        .args(args)
        .output()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn plan_json(dir: &Path) -> serde_json::Value {
    let out = k3d_gpu(dir, &["plan", "--offline", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn image_in_plan(plan: &serde_json::Value, name: &str) -> String {
    let action =
        plan["actions"].as_array().unwrap().iter().find(|a| a["id"] == format!("k8s/apps/DaemonSet/default/{name}"));
    action.unwrap()["after"]["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().to_string()
}

#[test]
#[ignore = "needs a Docker engine and a registry: .ci/run runs it (see README, Run the tests)"]
fn lock_records_the_registry_digest_and_a_repush_shows_in_check_and_plan() {
    let Some(registry) = registry() else { return };
    let tagged = format!("{registry}/k3d-gpu-test/tagged:1");
    let pinned_tag = format!("{registry}/k3d-gpu-test/pinned:1");
    let first = push(&tagged, "one");
    let pinned_digest = push(&pinned_tag, "pinned-one");
    let dir = config_dir(&[tagged.clone(), format!("{pinned_tag}@{pinned_digest}")]);

    // Before the lock: deployed by tag, with a warning; the check fails.
    let before = plan_json(dir.path());
    assert_eq!(image_in_plan(&before, "ds0"), tagged);
    assert!(before["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "image-unlocked"));
    assert_eq!(k3d_gpu(dir.path(), &["images", "check"]).status.code(), Some(1));

    // The lock records exactly what the registry reported, sorted, for both images.
    let out = k3d_gpu(dir.path(), &["images", "lock"]);
    assert!(out.status.success(), "{}", text(&out));
    let lock = std::fs::read_to_string(dir.path().join("images.lock")).unwrap();
    let parsed = k3d_gpu::images::Lock::parse(&lock).unwrap();
    assert_eq!(parsed.images[&tagged].digest, first);
    assert_eq!(parsed.images[&pinned_tag].digest, pinned_digest);
    assert_eq!(parsed.images.len(), 2);
    // Locking again with nothing re-pushed gives the same bytes.
    assert!(k3d_gpu(dir.path(), &["images", "lock"]).status.success());
    assert_eq!(std::fs::read_to_string(dir.path().join("images.lock")).unwrap(), lock);

    // Everything locked: the check passes and the plan has no image warning.
    let out = k3d_gpu(dir.path(), &["images", "check"]);
    assert!(out.status.success(), "{}", text(&out));
    let locked = plan_json(dir.path());
    assert_eq!(image_in_plan(&locked, "ds0"), format!("{tagged}@{first}"));
    assert!(
        locked["warnings"].as_array().unwrap().iter().all(|w| w["code"] != "image-unlocked"),
        "{}",
        locked["warnings"]
    );
    let locked_hash = k3d_gpu(dir.path(), &["plan", "--offline", "--hash"]).stdout;

    // Both tags re-pushed with new content, then re-locked.
    let second = push(&tagged, "two");
    assert_ne!(second, first);
    push(&pinned_tag, "pinned-two");
    let out = k3d_gpu(dir.path(), &["images", "lock"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("the tag was re-pushed"), "{}", text(&out));
    // The tag-only image follows the lock: the plan and its hash change.
    let relocked = plan_json(dir.path());
    assert_eq!(image_in_plan(&relocked, "ds0"), format!("{tagged}@{second}"));
    assert_ne!(k3d_gpu(dir.path(), &["plan", "--offline", "--hash"]).stdout, locked_hash);
    // The catalog's pin stands in the plan, and the check reports the moved tag.
    assert_eq!(image_in_plan(&relocked, "ds1"), format!("{pinned_tag}@{pinned_digest}"));
    let out = k3d_gpu(dir.path(), &["images", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&format!("disagrees {pinned_tag}")), "{}", text(&out));
}

#[test]
#[ignore = "needs a Docker engine and a registry: .ci/run runs it (see README, Run the tests)"]
fn an_unreachable_registry_is_a_clear_error_and_leaves_the_old_lock() {
    let Some(registry) = registry() else { return };
    let good = format!("{registry}/k3d-gpu-test/reachable:1");
    push(&good, "reachable");
    // Port 1 on loopback: nothing listens there.
    let gone = "127.0.0.1:1/k3d-gpu-test/unreachable:1".to_string();
    let dir = config_dir(&[good.clone(), gone.clone()]);
    let old = "schema = \"k3d-gpu.images/v1\"\n";
    std::fs::write(dir.path().join("images.lock"), old).unwrap();
    let out = k3d_gpu(dir.path(), &["images", "lock"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let message = text(&out);
    assert!(message.contains(&gone), "names the image: {message}");
    assert!(!message.contains('\u{1b}'), "no control characters: {message:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("images.lock")).unwrap(), old);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 5, "no temporary file left: {left:?}");
}

/// A registry that wants a login (htpasswd), run by the test itself; stopped on drop.
struct AuthRegistry {
    child: std::process::Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Drop for AuthRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn auth_registry(user: &str, password: &str) -> AuthRegistry {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // The registry's htpasswd takes bcrypt only; libcrypt makes one.
    let hash = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))",
        ])
        .arg(password)
        .output()
        .unwrap();
    assert!(hash.status.success());
    std::fs::write(dir.path().join("htpasswd"), format!("{user}:{}", String::from_utf8(hash.stdout).unwrap())).unwrap();
    let config = format!(
        "version: 0.1\nlog: {{level: info}}\nstorage: {{filesystem: {{rootdirectory: {0}/data}}}}\nhttp: {{addr: 127.0.0.1:{port}}}\nauth: {{htpasswd: {{realm: test, path: {0}/htpasswd}}}}\n",
        dir.path().display()
    );
    std::fs::write(dir.path().join("config.yml"), config).unwrap();
    let mut child = Command::new("docker-registry")
        .args(["serve", dir.path().join("config.yml").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docker-registry (apt install docker-registry)");
    let address = format!("127.0.0.1:{port}");
    // Ready once it says it listens (distribution's registry logs "listening on ADDR" after
    // its listener is bound, before it serves). Its log is read to the end, so it never blocks.
    let log = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(log).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let listening = format!("listening on {address}");
    loop {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(line) if line.contains(&listening) => break,
            Ok(_) => continue,
            Err(_) => panic!("docker-registry never said {listening:?}"),
        }
    }
    AuthRegistry { child, address, _dir: dir }
}

#[test]
#[ignore = "needs a Docker engine and a registry: .ci/run runs it (see README, Run the tests)"]
fn lock_sends_the_users_registry_login() {
    if registry().is_none() {
        return;
    }
    let registry = auth_registry("ci", "s3cret-pw");
    let logged_in = tempfile::tempdir().unwrap();
    let docker = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = Command::new("docker")
            .arg("--config")
            .arg(logged_in.path())
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    docker(&["login", &registry.address, "-u", "ci", "--password-stdin"], "s3cret-pw");
    let image = format!("{}/k3d-gpu-test/private:1", registry.address);
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::write(rootfs.join("marker"), "private").unwrap();
    let tar = dir.path().join("rootfs.tar");
    assert!(
        Command::new("tar")
            .args(["-C", rootfs.to_str().unwrap(), "-cf", tar.to_str().unwrap(), "."])
            .status()
            .unwrap()
            .success()
    );
    docker(&["import", tar.to_str().unwrap(), &image], "");
    let pushed = docker(&["push", &image], "");
    let digest = pushed.split_whitespace().skip_while(|w| *w != "digest:").nth(1).unwrap().to_string();

    let config = config_dir(std::slice::from_ref(&image));
    let lock = |docker_config: &Path| {
        K3dGpu::new()
            .docker()
            .args(["-c", config.path().join("k3dgpu.toml").to_str().unwrap()])
            .args(["--root", repo().join("tests/fixtures/hosts/plain-laptop-amd").to_str().unwrap()])
            .args(["--stdlib", config.path().join("empty-catalog").to_str().unwrap()])
            .args(["images", "lock"])
            .env("DOCKER_CONFIG", docker_config)
            .output()
    };
    // Without the login the registry refuses, and the error names the image, not the secret.
    let nobody = tempfile::tempdir().unwrap();
    let out = lock(nobody.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains(&image), "{}", text(&out));
    // With the user's login it resolves.
    let out = lock(logged_in.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("s3cret-pw"), "the password is never printed");
    let written =
        k3d_gpu::images::Lock::parse(&std::fs::read_to_string(config.path().join("images.lock")).unwrap()).unwrap();
    assert_eq!(written.images[&image].digest, digest);
}
