//! Observe against a real Docker engine: containers shaped like k3d's nodes, created in the
//! private dockerd `.ci/run` starts (docs/ARCHITECTURE.md, Tests). GPUs cannot be attached here, but a
//! created (never started) container keeps its `--gpus all` device request, so that is read
//! too. The tests that need an engine are `#[ignore]`d, so a plain `cargo test` lists them as
//! ignored; .ci/run runs them (`-- --include-ignored`) with K3D_GPU_TEST_DOCKER=1, which fails
//! them when no engine answers at DOCKER_HOST.

mod support;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions, StartContainerOptions};
use k3d_gpu::observe::docker::{Endpoint, connect, endpoint, observe_cluster};
use support::K3dGpu;
use support::{docker_ready, import_image};

fn engine() -> Option<(Docker, Endpoint)> {
    if !docker_ready() {
        return None;
    }
    let ep = endpoint(&|k: &str| std::env::var(k).ok(), None);
    Some((connect(&ep).unwrap(), ep))
}

struct Node<'a> {
    name: &'a str,
    cluster: &'a str,
    role: &'a str,
    args: &'a [&'a str],
    start: bool,
    gpus: bool,
}

async fn create(docker: &Docker, image: &str, node: &Node<'_>, spec: &str) {
    let labels =
        [("app", "k3d"), ("k3d.cluster", node.cluster), ("k3d.role", node.role), ("k3d-gpu.io/cluster-spec", spec)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let mut cmd = vec![node.role.to_string()];
    cmd.extend(node.args.iter().map(|a| a.to_string()));
    let body = ContainerCreateBody {
        image: Some(image.into()),
        // k3d's entrypoint runs `server …`/`agent …`; here a shell sleeps with them as $0 $@.
        entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), "sleep 600".into()]),
        cmd: Some(cmd),
        env: Some(vec!["K3S_TOKEN=t0ken".into()]),
        labels: Some(labels),
        host_config: Some(HostConfig {
            binds: Some(vec!["/etc/os-release:/k3d-gpu/host/etc/os-release:ro".into()]),
            network_mode: Some("none".into()),
            device_requests: node.gpus.then(|| {
                vec![DeviceRequest {
                    count: Some(-1),
                    capabilities: Some(vec![vec!["gpu".into()]]),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptions { name: Some(node.name.into()), ..Default::default() };
    docker.create_container(Some(options), body).await.unwrap();
    if node.start {
        docker.start_container(node.name, None::<StartContainerOptions>).await.unwrap();
    }
}

async fn remove(docker: &Docker, names: &[&str]) {
    for name in names {
        let _ = docker.remove_container(name, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
    }
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn observe_reads_k3d_shaped_node_containers() {
    let Some((docker, ep)) = engine() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let image = "k3d-gpu-test/node:1";
        let image_id = import_image(image, "9.9.9");
        let names = ["k3d-obs-server-0", "k3d-obs-agent-0", "k3d-other-server-0"];
        remove(&docker, &names).await;
        let spec = r#"{"image":"k3d-gpu-test/node:1","name":"obs"}"#;
        for node in [
            Node {
                name: names[0],
                cluster: "obs",
                role: "server",
                args: &["--disable=traefik", "--default-runtime=nvidia"],
                start: true,
                gpus: false,
            },
            Node { name: names[1], cluster: "obs", role: "agent", args: &[], start: false, gpus: true },
            Node { name: names[2], cluster: "other", role: "server", args: &[], start: false, gpus: false },
        ] {
            create(&docker, image, &node, spec).await;
        }

        let observed = observe_cluster(&docker, &ep, "obs", image).await.unwrap().expect("the cluster exists");
        assert_eq!(observed.nodes.len(), 2, "only this cluster's containers");
        let server = observed.nodes.iter().find(|n| n.role == "server").unwrap();
        assert_eq!(server.name, "k3d-obs-server-0");
        assert_eq!(server.image, image);
        assert_eq!(server.image_id, image_id);
        assert_eq!(server.image_version.as_deref(), Some("9.9.9"));
        assert_eq!(server.k3s_args, ["--disable=traefik", "--default-runtime=nvidia"]);
        assert_eq!(server.mounts, ["/etc/os-release:/k3d-gpu/host/etc/os-release:ro"]);
        assert_eq!(
            server.env.get("K3S_TOKEN").map(String::as_str),
            Some("(sensitive)"),
            "the token is masked at the source"
        );
        assert!(server.running);
        assert_eq!(server.gpus, None);
        assert_eq!(server.recorded_spec.as_ref().unwrap()["name"], "obs");
        let agent = observed.nodes.iter().find(|n| n.role == "agent").unwrap();
        assert!(!agent.running);
        assert_eq!(agent.gpus.as_deref(), Some("all"), "--gpus all as a device request");
        assert_eq!(observed.configured_image_id.as_deref(), Some(image_id.as_str()));

        // The same tag now names a different local image: what a re-pull does.
        let newer = import_image(image, "10.0.0");
        let observed = observe_cluster(&docker, &ep, "obs", image).await.unwrap().unwrap();
        assert_eq!(observed.configured_image_id.as_deref(), Some(newer.as_str()));
        assert_ne!(observed.nodes[0].image_id, newer);

        assert!(observe_cluster(&docker, &ep, "absent", image).await.unwrap().is_none());
        remove(&docker, &names).await;
    });
}

#[test]
fn an_unreachable_engine_is_a_clear_error_not_a_hang() {
    let ep = Endpoint { host: "unix:///nonexistent/docker.sock".into(), source: "a test".into() };
    let err = connect(&ep).expect_err("no socket there");
    let text = err.to_string();
    assert!(text.contains("cannot reach Docker at unix:///nonexistent/docker.sock (a test)"), "{text}");
    // Not every command that observes has --offline: only `plan` adds it to the help.
    assert!(err.help().contains("dockerd") && !err.help().contains("--offline"), "{}", err.help());
}

#[test]
#[ignore = "needs a Docker engine: .ci/run runs it (see README, Run the tests)"]
fn plan_observes_the_live_engine_and_finds_no_cluster() {
    let Some(_) = engine() else { return };
    let repo = env!("CARGO_MANIFEST_DIR");
    let run = |extra: &[&str]| {
        let mut args =
            vec!["plan", "--json", "-c", "examples/wsl2-intel.toml", "--root", "tests/fixtures/hosts/wsl2-intel"];
        args.extend_from_slice(extra);
        K3dGpu::new().docker().args(&args).cwd(repo).output()
    };
    let live = run(&[]);
    assert_eq!(live.status.code(), Some(0), "{}", String::from_utf8_lossy(&live.stderr));
    // No cluster of that name: the same actions as when nothing exists. Only the node image's
    // reason differs: live, the engine was asked and has no such image; offline, nobody asked.
    let actions = |stdout: &[u8]| -> Vec<(String, String, String)> {
        let plan: serde_json::Value = serde_json::from_slice(stdout).unwrap();
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["id"].to_string(), a["action"].to_string(), a["reason"]["code"].to_string()))
            .collect()
    };
    let (live, offline) = (actions(&live.stdout), actions(&run(&["--offline"]).stdout));
    assert_eq!(live.len(), offline.len());
    for (l, o) in live.iter().zip(&offline) {
        if l.0 == "\"docker/node-image\"" {
            assert_eq!((l.2.as_str(), o.2.as_str()), ("\"absent\"", "\"not-observed\""));
        } else {
            assert_eq!(l, o);
        }
    }
    let observe =
        K3dGpu::new().docker().args(["observe", "--json", "-c", "examples/wsl2-intel.toml"]).cwd(repo).output();
    let doc: serde_json::Value = serde_json::from_slice(&observe.stdout).unwrap();
    assert_eq!(doc["schema"], "k3d-gpu.observed/v1");
    assert!(doc["cluster"].is_null());
    // The node image the config builds is looked up too, and is not there.
    assert_eq!(doc["node_image"]["present"], false, "{doc}");
    assert!(doc["node_image"]["reference"].as_str().unwrap().starts_with("k3d-gpu-node:v1.37.1-k3s1-"));
}
