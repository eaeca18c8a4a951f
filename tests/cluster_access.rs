//! `[cluster] ports`, `volumes` and `registries` through the real binary: a volume source the
//! host lacks is a plan-time error on its list element, registry credentials reach no plan,
//! graph, render or diagnostic (only their digest, which a changed password changes), and a
//! port off loopback is a plan warning.

mod support;

use std::path::Path;
use std::process::Output;

use support::K3dGpu;
use support::copy_host;

const HOST: &str = "plain-laptop-amd";
const PASSWORD: &str = "hunter2-do-not-print";

fn k3d_gpu(dir: &Path, args: &[&str]) -> Output {
    K3dGpu::new().args(args).cwd(dir).output()
}

fn all(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn a_volume_source_the_host_lacks_is_a_plan_error_and_one_it_has_plans_read_only() {
    let host = copy_host(HOST);
    let root = host.path().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k3dgpu.toml"), "[cluster]\nvolumes = [\n  \"/srv/models:/models\",\n]\n").unwrap();
    let out = k3d_gpu(dir.path(), &["plan", "--offline", "--root", &root]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    let text = all(&out);
    assert!(text.contains("volume source \"/srv/models\" does not exist"), "{text}");
    assert!(text.contains("[volume-source-missing]") && text.contains("cluster.volumes"), "{text}");
    assert!(text.contains("\"/srv/models:/models\""), "the element is underlined: {text}");
    // Nothing was created on the host it read.
    assert!(!host.path().join("srv").exists());

    std::fs::create_dir_all(host.path().join("srv/models")).unwrap();
    let out = k3d_gpu(dir.path(), &["plan", "--offline", "--json", "--root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cluster = plan["actions"].as_array().unwrap().iter().find(|a| a["id"] == "k3d/cluster/gpu").unwrap();
    assert_eq!(
        cluster["after"]["user_volumes"],
        serde_json::json!([{"host": "/srv/models", "node": "/models", "read_only": true, "nodes": []}])
    );
}

#[test]
fn a_port_off_loopback_is_a_plan_warning() {
    let dir = tempfile::tempdir().unwrap();
    let root = support::hosts_dir().join(HOST).display().to_string();
    std::fs::write(dir.path().join("k3dgpu.toml"), "[cluster]\nports = [\"8080:80\", \"0.0.0.0:8443:443\"]\n").unwrap();
    let out = k3d_gpu(dir.path(), &["plan", "--offline", "--root", &root]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let text = all(&out);
    assert!(text.contains("port-published-off-loopback"), "{text}");
    assert!(text.contains("\"0.0.0.0:8443:443\" is published on 0.0.0.0 (every interface)"), "{text}");
    assert!(!text.contains("\"8080:80\" is published"), "{text}");
}

fn credentials(password: &str) -> String {
    format!("configs:\n  mirror.lan:5000:\n    auth:\n      username: lab\n      password: {password}\n")
}

#[test]
fn registry_credentials_reach_no_plan_graph_render_or_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let root = support::hosts_dir().join(HOST).display().to_string();
    std::fs::write(
        dir.path().join("k3dgpu.toml"),
        "[cluster.registries]\nmirrors = { \"docker.io\" = [\"https://mirror.lan:5000\"] }\ncredentials = \"auth.yaml\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("auth.yaml"), credentials(PASSWORD)).unwrap();
    let out_dir = dir.path().join("rendered");
    let runs = [
        vec!["plan", "--offline", "--root", &root],
        vec!["plan", "--offline", "--json", "--root", &root],
        vec!["graph", "--json", "--root", &root],
        vec!["validate", "--root", &root],
        vec!["render", "--out", out_dir.to_str().unwrap(), "--root", &root],
    ];
    for args in &runs {
        let out = k3d_gpu(dir.path(), args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", all(&out));
        assert!(!all(&out).contains(PASSWORD), "{args:?} printed the password");
    }
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains(PASSWORD), "render wrote the password");
    }
    let plan = k3d_gpu(dir.path(), &["plan", "--offline", "--json", "--root", &root]);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let cluster = plan["actions"].as_array().unwrap().iter().find(|a| a["id"] == "k3d/cluster/gpu").unwrap();
    assert_eq!(cluster["after"]["registries"]["credentials"]["file"], "auth.yaml");
    assert_eq!(cluster["after"]["registries"]["credentials"]["registries"], serde_json::json!(["mirror.lan:5000"]));

    // A changed password changes the plan (through the digest), so a reviewed plan goes stale.
    let hash = |dir: &Path| {
        let out = k3d_gpu(dir, &["plan", "--offline", "--hash", "--root", &root]);
        assert_eq!(out.status.code(), Some(0), "{}", all(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let before = hash(dir.path());
    std::fs::write(dir.path().join("auth.yaml"), credentials("another-one")).unwrap();
    assert_ne!(hash(dir.path()), before);

    // A file that is not k3s's format: an error on the key that quotes none of the file.
    std::fs::write(dir.path().join("auth.yaml"), format!("configs:\n  m:\n    auth:\n      pasword: {PASSWORD}\n"))
        .unwrap();
    let out = k3d_gpu(dir.path(), &["plan", "--offline", "--root", &root]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    assert!(all(&out).contains("[bad-registry-credentials]"), "{}", all(&out));
    assert!(!all(&out).contains(PASSWORD) && !all(&out).contains("pasword"), "{}", all(&out));

    // A missing file is an error of the config, not a silent plan without credentials.
    std::fs::remove_file(dir.path().join("auth.yaml")).unwrap();
    let out = k3d_gpu(dir.path(), &["plan", "--offline", "--root", &root]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    assert!(all(&out).contains("credentials file \"auth.yaml\""), "{}", all(&out));
}

#[test]
fn a_credentials_digest_is_keyed_with_a_secret_kept_on_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let root = support::hosts_dir().join(HOST).display().to_string();
    std::fs::write(
        dir.path().join("k3dgpu.toml"),
        "[cluster.registries]\nmirrors = { \"docker.io\" = [\"https://mirror.lan:5000\"] }\ncredentials = \"auth.yaml\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("auth.yaml"), credentials(PASSWORD)).unwrap();
    let state = dir.path().join("state");
    let plan = |state: &Path| {
        let out = K3dGpu::new()
            .cwd(dir.path())
            .args(["plan", "--offline", "--json", "--root", &root])
            .env("XDG_STATE_HOME", state)
            .output();
        assert_eq!(out.status.code(), Some(0), "{}", all(&out));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let cluster =
            plan["actions"].as_array().unwrap().iter().find(|a| a["id"] == "k3d/cluster/gpu").unwrap().clone();
        cluster["after"]["registries"]["credentials"]["digest"].as_str().unwrap().to_string()
    };
    let digest = plan(&state);
    // Not the plain hash of the credentials, which a dictionary reverses from a shared plan.
    let credentials = k3d_gpu::apply::registries::Credentials::parse(&credentials(PASSWORD)).unwrap();
    let plain = k3d_gpu::canonical::digest(&credentials);
    assert!(digest.starts_with("hmac-sha256:") && !digest.contains(plain.trim_start_matches("sha256:")), "{digest}");
    // The key is in the state directory, readable by its owner only, and the same run to run.
    use std::os::unix::fs::PermissionsExt;
    let key = state.join("k3d-gpu").join(k3d_gpu::apply::registries::KEY_FILE);
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(plan(&state), digest);
    // Another machine (another state directory) has another key, and another digest.
    assert_ne!(plan(&dir.path().join("elsewhere")), digest);
}

#[test]
fn a_credentials_file_that_links_outside_the_repository_is_not_read() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("auth.yaml"),
        credentials(PASSWORD).replace("mirror.lan", "secret-registry.corp"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let root = support::hosts_dir().join(HOST).display().to_string();
    std::fs::write(
        dir.path().join("k3dgpu.toml"),
        "[cluster.registries]\nmirrors = { \"docker.io\" = [\"https://mirror.lan:5000\"] }\ncredentials = \"auth.yaml\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path().join("auth.yaml"), dir.path().join("auth.yaml")).unwrap();
    let out = k3d_gpu(dir.path(), &["plan", "--offline", "--json", "--root", &root]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    assert!(all(&out).contains("[bad-registry-credentials]") && all(&out).contains("leads outside"), "{}", all(&out));
    assert!(!all(&out).contains("secret-registry.corp"), "its registry names reach no output: {}", all(&out));
}
