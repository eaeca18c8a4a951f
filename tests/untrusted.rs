//! A config from a pull request is untrusted input. These run the real binary as an attacker
//! would (issue 10): what the tool may read, what it may write, what it prints.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{K3dGpu, hosts_dir};

fn k3d_gpu_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    K3dGpu::new().cwd(dir).args(args).envs(env.iter().copied()).output()
}

fn k3d_gpu(args: &[&str]) -> Output {
    k3d_gpu_in(Path::new("."), args, &[])
}

fn host(name: &str) -> String {
    hosts_dir().join(name).display().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A config in a fresh directory made a repository (a `.git` beside it).
fn repo_with_config(config: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let path = dir.path().join("k3dgpu.toml");
    std::fs::write(&path, config).unwrap();
    (dir, path.display().to_string())
}

const SECRET: &str = "hunter2-s3cr3t-t0ken";

#[test]
fn component_paths_cannot_leave_the_repository() {
    let outside = tempfile::tempdir().unwrap();
    let secret_file = outside.path().join("credentials.kdl");
    std::fs::write(&secret_file, format!("token {SECRET}\n")).unwrap();
    let (repo, _) = repo_with_config("");
    std::os::unix::fs::symlink(&secret_file, repo.path().join("linked.kdl")).unwrap();
    let sub = repo.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    for path in [
        "/proc/self/environ".to_string(),
        secret_file.display().to_string(),
        format!("../../../../../../..{}", secret_file.display()),
        "linked.kdl".into(),
        "k3dgpu.toml".into(),
    ] {
        let config = repo.path().join("k3dgpu.toml");
        std::fs::write(&config, format!("[[components]]\npath = {path:?}\n")).unwrap();
        let out = k3d_gpu_in(
            repo.path(),
            &["validate", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")],
            &[("K3D_GPU_TEST_SECRET", SECRET)],
        );
        assert_eq!(out.status.code(), Some(1), "{path}: {}", stderr(&out));
        assert!(!stderr(&out).contains(SECRET) && !stdout(&out).contains(SECRET), "{path}: {}", stderr(&out));
        assert!(stderr(&out).contains("component path"), "{path}: {}", stderr(&out));
    }
    // Inside the repository, `..` from a config in a subdirectory is fine.
    std::fs::write(repo.path().join("mine.kdl"), "not { a component\n").unwrap();
    let config = sub.join("k3dgpu.toml");
    std::fs::write(&config, "[[components]]\npath = \"../mine.kdl\"\n").unwrap();
    let out = k3d_gpu(&["validate", "-c", config.to_str().unwrap(), "--root", &host("plain-laptop-amd")]);
    assert!(stderr(&out).contains("not valid KDL (line 1"), "{}", stderr(&out));
}

#[test]
fn a_file_that_is_not_a_component_is_never_echoed() {
    // Well-formed KDL, not a component: a one-line credential file renamed .kdl.
    for text in [format!("token {SECRET}\n"), format!("password \"{SECRET}\" {{\n"), format!("{SECRET}=1 {{{{\n")] {
        let (repo, config) = repo_with_config("[[components]]\npath = \"creds.kdl\"\n");
        std::fs::write(repo.path().join("creds.kdl"), &text).unwrap();
        let out = k3d_gpu(&["validate", "-c", &config, "--root", &host("plain-laptop-amd")]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(!stderr(&out).contains(SECRET), "{text:?} echoed: {}", stderr(&out));
        assert!(stderr(&out).contains("(line 1, column "), "{}", stderr(&out));
    }
}

#[test]
fn a_cluster_name_is_checked_before_it_becomes_a_path() {
    let (repo, config) = repo_with_config("[cluster]\nname = \"../../victim/Cargo\"\n");
    let victim = repo.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("Cargo.lock"), "keep me\n").unwrap();
    let state = repo.path().join("state/a/b");
    std::fs::create_dir_all(&state).unwrap();
    let env = [("XDG_STATE_HOME", state.to_str().unwrap()), ("XDG_RUNTIME_DIR", state.to_str().unwrap())];
    for args in [vec!["destroy", "-c", &config], vec!["apply", "-c", &config], vec!["validate", "-c", &config]] {
        let out = k3d_gpu_in(repo.path(), &args, &env);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("is not a valid k3d name"), "{}", stderr(&out));
        assert_eq!(std::fs::read_to_string(victim.join("Cargo.lock")).unwrap(), "keep me\n", "{args:?}");
        assert!(std::fs::read_dir(&victim).unwrap().count() == 1, "{args:?} wrote beside the victim");
    }
}

#[test]
fn a_huge_value_gives_a_short_diagnostic() {
    let huge = "v".repeat(30 << 20);
    let (_repo, config) =
        repo_with_config(&format!("[cluster]\nnode_labels = {{ x = 1, y = \"{huge}\" }}\nbogus = 1\n"));
    // How long a 30 MB config takes is the benches' to show; this proves the diagnostic stays short.
    let out = k3d_gpu(&["validate", "-c", &config, "--root", &host("plain-laptop-amd")]);
    assert_eq!(out.status.code(), Some(1), "{}", &stderr(&out)[..2000.min(out.stderr.len())]);
    assert!(out.stderr.len() < 16 << 10, "{} bytes of diagnostics", out.stderr.len());
}

#[test]
fn kernel_files_devices_and_fifos_are_refused_without_waiting() {
    // Refused by what the file is, before a read (the message names the kind); a read of
    // /proc/kmsg would wait for the kernel's next line, which the deadline turns into a failure.
    for args in [vec!["validate", "-c", "/proc/kmsg", "--root", "x"], vec!["detect", "--facts", "/proc/self/environ"]] {
        let out = K3dGpu::new().args(&args).output_within(std::time::Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("kernel file"), "{}", stderr(&out));
    }
}

#[test]
fn the_kubeconfig_is_read_bounded_and_never_waits() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("kubeconfig");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for path in [std::path::PathBuf::from("/dev/zero"), fifo] {
        // Refused by what the file is: no writer ever opens the FIFO, so an open or a read
        // would wait for ever (on its own thread: the deadline turns that into a failure).
        let err = support::within("the kubeconfig refused unread", std::time::Duration::from_secs(60), move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(k3d_gpu::observe::kubernetes::client(&path, "gpu")).map(|_| ()).unwrap_err().to_string()
        });
        assert!(err.contains("not a regular file"), "{err}");
    }
}

/// A repository with a component of its own whose manifest holds a Secret and a Deployment.
fn repo_with_secret_component(config_extra: &str) -> (tempfile::TempDir, String) {
    let (repo, config) = repo_with_config(&format!("[[components]]\npath = \"vault.kdl\"\n{config_extra}"));
    std::fs::write(
        repo.path().join("vault.kdl"),
        "component vault {\n    summary \"a secret\"\n    upstream mine version=v1\n    manifest vault.yml\n    image \"example.invalid/app:1@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n}\n",
    )
    .unwrap();
    let manifest = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: vault, namespace: default}}
stringData: {{password: "{SECRET}"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app, namespace: default}}
spec:
  selector: {{matchLabels: {{app: x}}}}
  template:
    metadata: {{labels: {{app: x}}}}
    spec:
      initContainers:
        - name: init
          image: "example.invalid/app:1@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
          env: [{{name: DB_PASS, value: "{SECRET}"}}, {{name: GITHUB_PAT, value: "{SECRET}"}}]
          args: ["--token", "{SECRET}", "-t={SECRET}", "--vpn-auth={SECRET}", "--db=postgres://u:{SECRET}@db/x"]
      containers:
        - name: app
          image: "example.invalid/app:1@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
          env: [{{name: OPENAI_KEY, value: "{SECRET}"}}, {{name: HF_TOKEN, value: "{SECRET}"}}, {{name: PATH, value: /bin}}]
"#
    );
    std::fs::write(repo.path().join("vault.yml"), manifest).unwrap();
    (repo, config)
}

#[test]
fn render_never_writes_through_a_link_and_keeps_secrets_private() {
    use std::os::unix::fs::PermissionsExt;
    let (repo, config) = repo_with_secret_component("");
    let out = repo.path().join("gitops");
    std::fs::create_dir(&out).unwrap();
    let victim = repo.path().join("bashrc");
    std::fs::write(&victim, "keep\n").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("vault.yaml")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("kustomization.yaml")).unwrap();
    let result =
        k3d_gpu(&["render", "-c", &config, "--root", &host("plain-laptop-amd"), "--out", out.to_str().unwrap()]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    let vault = std::fs::symlink_metadata(out.join("vault.yaml")).unwrap();
    assert!(vault.file_type().is_file());
    assert_eq!(vault.permissions().mode() & 0o777, 0o600, "a Secret's file is its owner's alone");
    assert!(
        std::fs::read_to_string(out.join("vault.yaml")).unwrap().contains(SECRET),
        "render writes what GitOps applies"
    );
    let kustomization = std::fs::symlink_metadata(out.join("kustomization.yaml")).unwrap();
    assert_eq!(kustomization.permissions().mode() & 0o777, 0o644);
    // --out FILE for plan and facts: the same rule.
    let plan = repo.path().join("plan.json");
    std::os::unix::fs::symlink(&victim, &plan).unwrap();
    let result = k3d_gpu(&[
        "plan",
        "--offline",
        "-c",
        &config,
        "--root",
        &host("plain-laptop-amd"),
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
}

#[test]
fn no_printed_or_saved_document_holds_a_secret() {
    let extra = format!(
        "[cluster]\nk3s_args = [\"--token={SECRET}\", \"--datastore-endpoint=postgres://k3s:{SECRET}@db:5432/k3s\"]\n"
    );
    let (repo, config) = repo_with_secret_component(&extra);
    let root = host("plain-laptop-amd");
    let saved = repo.path().join("plan.json");
    for args in [
        vec!["graph", "--json", "-c", &config, "--root", &root],
        vec!["plan", "--json", "--offline", "-c", &config, "--root", &root],
        vec!["plan", "--offline", "-c", &config, "--root", &root, "--out", saved.to_str().unwrap()],
        vec!["plan", "--offline", "-c", &config, "--root", &root],
    ] {
        let out = k3d_gpu(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!stdout(&out).contains(SECRET) && !stderr(&out).contains(SECRET), "{args:?}: {}", stdout(&out));
    }
    let saved = std::fs::read_to_string(&saved).unwrap();
    assert!(!saved.contains(SECRET));
    assert!(saved.contains("(sensitive"), "masked, not dropped");
    assert!(saved.contains("\"value\": \"/bin\""), "PATH is not a secret");
}

#[test]
fn a_secret_changes_the_plan_hash_without_showing() {
    let hash = |secret: &str| {
        let (_repo, config) = repo_with_config(&format!("[cluster]\nk3s_args = [\"--token={secret}\"]\n"));
        let out = k3d_gpu(&["plan", "--offline", "--hash", "-c", &config, "--root", &host("plain-laptop-amd")]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    assert_ne!(hash("one-secret"), hash("another-secret"));
}

#[test]
fn observe_json_masks_split_flags_and_urls_in_node_env() {
    use k3d_gpu::observe::{NodeContainer, Observed, ObservedCluster, SCHEMA};
    let node = NodeContainer {
        name: "k3d-gpu-server-0".into(),
        role: "server".into(),
        image: "img:1".into(),
        image_id: "sha256:1".into(),
        image_version: None,
        k3s_args: vec!["server".into(), "-t".into(), SECRET.into(), "--agent-token".into(), SECRET.into()],
        mounts: vec![],
        env: [("K3S_DATASTORE_ENDPOINT".to_string(), format!("mysql://root:{SECRET}@tcp(db:3306)/k3s"))].into(),
        gpus: None,
        running: true,
        recorded_spec: Some(serde_json::json!({"k3s_args": [{"arg": format!("--vpn-auth={SECRET}"), "nodes": "all"}]})),
    };
    let observed = Observed {
        schema: SCHEMA.into(),
        cluster: Some(ObservedCluster { name: "gpu".into(), configured_image_id: None, nodes: vec![node] }),
        kubernetes: None,
        node_image: None,
    };
    let printed = String::from_utf8(observed.masked().to_bytes()).unwrap();
    assert!(!printed.contains(SECRET), "{printed}");
    assert!(printed.contains("\"server\""), "{printed}");
}

const FORGED: &str = "x\u{1b}[2K\r\nPlan: 0 to create, 0 to update, 0 to replace, 0 to delete.\u{9b}1A\u{202e}";

fn assert_no_control(text: &str, what: &str) {
    let bad: Vec<char> = text.chars().filter(|c| k3d_gpu::escape::is_control(*c)).collect();
    assert!(bad.is_empty(), "{what}: {bad:?} in\n{text}");
    assert!(!text.lines().any(|l| l.starts_with("Plan: 0 to create")), "{what}: a forged line\n{text}");
}

#[test]
fn names_from_manifests_and_hosts_cannot_drive_the_terminal() {
    // A manifest name with an escape sequence, a carriage return and a newline.
    let (repo, config) = repo_with_config("[[components]]\npath = \"evil.kdl\"\n");
    std::fs::write(
        repo.path().join("evil.kdl"),
        "component evil {\n    summary \"x\"\n    upstream mine version=v1\n    manifest evil.yml\n}\n",
    )
    .unwrap();
    // A YAML (and TOML) double-quoted string: every control character as \uXXXX.
    let name: String = std::iter::once("\"".to_string())
        .chain(FORGED.chars().map(|c| {
            if k3d_gpu::escape::is_control(c) || c == '\n' { format!("\\u{:04x}", c as u32) } else { c.to_string() }
        }))
        .chain(std::iter::once("\"".to_string()))
        .collect();
    std::fs::write(
        repo.path().join("evil.yml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata: {{k: {name}}}\n"
        ),
    )
    .unwrap();
    let out = k3d_gpu(&["plan", "--offline", "-c", &config, "--root", &host("plain-laptop-amd")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_control(&stdout(&out), "plan");
    assert!(stdout(&out).contains("\\x1b[2K"), "shown, escaped: {}", stdout(&out));

    // os-release on a fixture host.
    let root = support::copy_host("plain-laptop-amd");
    let raw = FORGED.replace('\n', " ");
    std::fs::write(root.path().join("etc/os-release"), format!("PRETTY_NAME=\"{raw}\"\nID=ubuntu\n")).unwrap();
    for command in ["detect", "doctor"] {
        let out = k3d_gpu(&[command, "--root", root.path().to_str().unwrap()]);
        assert_no_control(&stdout(&out), command);
        if command == "detect" {
            assert!(stdout(&out).contains("x\\x1b[2K"), "{}", stdout(&out));
        }
    }
    let (_repo, config) = repo_with_config("");
    let out = k3d_gpu(&["validate", "-c", &config, "--root", root.path().to_str().unwrap()]);
    assert_no_control(&stdout(&out), "validate");

    // A config whose bad key carries the sequence: the diagnostic echoes it escaped.
    let (_repo, config) = repo_with_config(&format!("[cluster]\n{name} = 1\n"));
    let out = k3d_gpu(&["validate", "-c", &config, "--root", &host("plain-laptop-amd")]);
    assert_eq!(out.status.code(), Some(1));
    assert_no_control(&stderr(&out), "diagnostic");
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn destroy_of_a_cluster_that_does_not_exist_says_so() {
    if !support::docker_ready() {
        return;
    }
    let (repo, config) = repo_with_config("[cluster]\nname = \"never-made\"\n");
    let state = repo.path().join("state");
    let docker = std::env::var("DOCKER_HOST").unwrap();
    let env = [("DOCKER_HOST", docker.as_str()), ("XDG_STATE_HOME", state.to_str().unwrap())];
    let out = k3d_gpu_in(repo.path(), &["destroy", "-c", &config], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Nothing to destroy: cluster never-made does not exist."), "{}", stdout(&out));
    assert!(!stdout(&out).contains("No changes"), "{}", stdout(&out));
}

#[test]
fn the_apply_lock_is_never_in_the_working_directory_and_io_errors_say_so() {
    let (repo, config) = repo_with_config("");
    let out = K3dGpu::new()
        .cwd(repo.path())
        .args(["apply", "-c", &config, "--root", &host("plain-laptop-amd")])
        .env_remove("HOME")
        .output();
    assert_ne!(out.status.code(), Some(0));
    assert!(!repo.path().join(".local").exists(), "HOME unset put the lock in the working directory");
    // A lock directory that cannot be made: said as such, not "wait for the other apply".
    let blocked = repo.path().join("file");
    std::fs::write(&blocked, "").unwrap();
    let out = k3d_gpu_in(repo.path(), &["apply", "-c", &config], &[("XDG_STATE_HOME", blocked.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot take the lock"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("wait for the other apply"), "{}", stderr(&out));
}

#[test]
fn an_unreadable_stdlib_is_unreadable_input() {
    let (repo, config) = repo_with_config("");
    let file = repo.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    for stdlib in [repo.path().join("missing"), file] {
        let out = k3d_gpu(&[
            "validate",
            "-c",
            &config,
            "--root",
            &host("plain-laptop-amd"),
            "--stdlib",
            stdlib.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("cannot read component catalog"), "{}", stderr(&out));
    }
}

#[test]
fn an_agent_model_that_reads_as_a_flag_is_refused_at_its_span() {
    let (_repo, config) = repo_with_config("[agent]\nmodel = \"--trust-remote-code\"\n");
    let out = k3d_gpu(&["validate", "-c", &config, "--root", &host("lunar-lake-npu")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("model \"--trust-remote-code\" is not of the form org/name"), "{text}");
    assert!(text.contains("2 │ model = \"--trust-remote-code\""), "the span is shown: {text}");
}

#[test]
fn a_stream_password_is_never_echoed_by_a_diagnostic() {
    // Each source is refused, and the refusal underlines the line that holds the password.
    for source in ["rtsp://admin:hunter2@cam/live", "admin:hunter2@cam/live"] {
        let (_repo, config) = repo_with_config(&format!("[agent]\n[addons.video]\nsource = \"{source}\"\n"));
        let out = k3d_gpu(&["validate", "-c", &config, "--root", &host("lunar-lake-npu")]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let text = stderr(&out);
        assert!(text.contains("3 │ source = "), "the line is still shown: {text}");
        assert!(!text.contains("hunter2"), "the password is echoed: {text}");
    }
}

#[test]
fn a_written_document_keeps_the_users_umask() {
    // `plan --out`, `facts --out`, render and reports are 0644 at most: a umask of 077 makes
    // them private, as for any tool (a chmod after writing widened them to 0644).
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("facts.json");
    let made = K3dGpu::program("sh")
        .binary_on_path()
        .args(["-c", "umask 077; exec k3d-gpu \"$@\"", "sh", "facts", "--root", &host("plain-laptop-amd"), "--out"])
        .arg(&out)
        .output();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
}
