//! The video add-on (`[addons.video]`): Intel DL Streamer runs OMZ's
//! person-vehicle-bike-detection-2004 on a stream and writes each frame's detections to its log
//! as JSON lines (`kubectl logs deploy/video`). On the GPU, decode runs on the media engines and
//! frames stay VA surfaces into inference (`va-surface-sharing`); on the CPU everything is
//! software. Never on the NPU (agent.rs refuses it: only the GPU has media engines).
//!
//! It serves nothing, so it gets no Service; its readiness is the Deployment rolled out. The
//! model (and the sample clip when no `source` is given) is downloaded once into a PVC by an
//! init container that checks each file against the checksum upstream publishes for it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{NAMESPACE, Scope, addon_groups, hardened, labels, model_pvc, push_workload, rollout};
use crate::compile::agent::AddonPlan;
use crate::compile::{Context, Resource};

/// DL Streamer's runtime image by tag (its newest release, v2026.1.0, whose install guide pulls
/// this Ubuntu 22 tag); the digest comes from images.lock.
pub const DLSTREAMER_IMAGE: &str = "docker.io/intel/dlstreamer:2026.1.0-ubuntu22";
/// The image's user `dlstreamer`: uid 1000, the first user its Dockerfile adds.
const DLSTREAMER_UID: i64 = 1000;
const NAME: &str = "video";
const STORAGE: &str = "1Gi";
const MODELS: &str = "/models";
const MODEL: &str = "person-vehicle-bike-detection-2004";
/// OMZ's FP16 files of the model, with the SHA-384 its `model.yml` records
/// (openvinotoolkit/open_model_zoo, models/intel/person-vehicle-bike-detection-2004).
const MODEL_FILES: [(&str, &str); 2] = [
    (
        "https://storage.openvinotoolkit.org/repositories/open_model_zoo/2023.0/models_bin/1/person-vehicle-bike-detection-2004/FP16/person-vehicle-bike-detection-2004.xml",
        "sha384:19a906728e2ecbe59af76977f6c28a8f4c4f2c90bc79769026f080d18054eec1846ee2a5df41acb02f0928636279b002",
    ),
    (
        "https://storage.openvinotoolkit.org/repositories/open_model_zoo/2023.0/models_bin/1/person-vehicle-bike-detection-2004/FP16/person-vehicle-bike-detection-2004.bin",
        "sha384:b05653a5f220e21ba57b9d1a3f95f0b83ea1c97879398d1b6422a51c2955adcc8467508002fe503064ce4ee9f85e2508",
    ),
];
/// The sample clip DL Streamer's samples use, pinned by commit, and checked by its git blob id
/// at that commit (intel-iot-devkit/sample-videos).
const SAMPLE_CLIP: (&str, &str) = (
    "https://raw.githubusercontent.com/intel-iot-devkit/sample-videos/978b8b7f9342364d37aaa79e826644f4fec8ff44/person-bicycle-car-detection.mp4",
    "gitblob:39bbc1a681dbd8621ff69f3e271516d5479f43d8",
);
const SAMPLE_PATH: &str = "/models/video/person-bicycle-car-detection.mp4";
/// The model's labels (DL Streamer's model-proc for it: `boxes_labels`, in output order).
const MODEL_PROC: &str = r#"{"json_schema_version": "2.2.0", "input_preproc": [], "output_postproc": [{"converter": "boxes_labels", "labels": ["vehicle", "person", ""]}]}"#;

/// Downloads each `URL PATH CHECKSUM` triple of its arguments unless the file is there and
/// matches, and refuses a file that does not match (nothing half-written is left behind).
const FETCH: &str = r#"import hashlib, os, sys, urllib.request
def ok(data, want):
    kind, hexd = want.split(":", 1)
    if kind == "gitblob":
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == hexd
    return hashlib.new(kind, data).hexdigest() == hexd
args = sys.argv[1:]
for url, path, want in zip(args[0::3], args[1::3], args[2::3]):
    if os.path.exists(path) and ok(open(path, "rb").read(), want):
        continue
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = urllib.request.urlopen(url, timeout=120).read()
    if not ok(data, want):
        sys.exit("checksum mismatch: " + url)
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)
with open(os.environ["MODEL_PROC_PATH"], "w") as f:
    f.write(os.environ["MODEL_PROC"])
"#;

/// The video add-on's PVC and Deployment, and its rollout check.
pub(super) fn resources(cx: &mut Context, addon: &AddonPlan, scope: &Scope, out: &mut Vec<Resource>) {
    let Scope { cluster_id, ns_id, .. } = *scope;
    let gpu = addon.device == "GPU";
    let source = cx.config.addons.get(&crate::config::AddonName::Video).and_then(|a| a.source.clone());
    let dir = format!("{MODELS}/video/{MODEL}");
    let xml = format!("{dir}/{MODEL}.xml");
    let proc_path = format!("{dir}/{MODEL}.json");

    let mut fetch_args = vec!["-c".to_string(), FETCH.to_string()];
    for (url, sum) in MODEL_FILES {
        let file = url.rsplit('/').next().unwrap_or(MODEL);
        fetch_args.extend([url.to_string(), format!("{dir}/{file}"), sum.to_string()]);
    }
    if source.is_none() {
        fetch_args.extend([SAMPLE_CLIP.0.to_string(), SAMPLE_PATH.to_string(), SAMPLE_CLIP.1.to_string()]);
    }
    let mounts = json!([{ "name": "models", "mountPath": MODELS }]);
    let init = json!({
        "name": "fetch",
        "command": ["python3"],
        "args": fetch_args,
        "env": [
            { "name": "MODEL_PROC", "value": MODEL_PROC },
            { "name": "MODEL_PROC_PATH", "value": proc_path },
        ],
        "volumeMounts": mounts,
        "securityContext": hardened(),
    });

    // The stream URI reaches gst-launch only through this variable, and config validation
    // (agent.rs) has already refused any character that gst-launch's parser would read as
    // syntax. On the GPU, decodebin3 decodes to VA surfaces and inference reads them in place.
    let infer = if gpu {
        "decodebin3 ! gvadetect device=GPU pre-process-backend=va-surface-sharing"
    } else {
        "decodebin3 ! videoconvert ! gvadetect device=CPU"
    };
    let pipeline = format!(
        "while gst-launch-1.0 -q urisourcebin uri=\"$VIDEO_SOURCE\" ! {infer} model={xml} model-proc={proc_path} \
         ! queue ! gvametaconvert format=json ! gvametapublish method=file file-path=/dev/stdout \
         file-format=json-lines ! fakesink sync=true; do :; done"
    );
    let uri = source.unwrap_or_else(|| format!("file://{SAMPLE_PATH}"));
    let cpu = if gpu { "1" } else { "2" };
    let mut requests = json!({ "cpu": cpu, "memory": "2Gi" });
    let mut limits = json!({ "memory": "2Gi" });
    if let Some(resource) = &addon.resource {
        requests[resource] = json!("1");
        limits[resource] = json!("1");
    }
    let main = json!({
        "name": "dlstreamer",
        "command": ["/bin/sh", "-c"],
        "args": [pipeline],
        "env": [{ "name": "VIDEO_SOURCE", "value": uri }],
        "resources": { "requests": requests, "limits": limits },
        "volumeMounts": mounts,
        "securityContext": hardened(),
    });
    let mut security = json!({
        "runAsNonRoot": true,
        "runAsUser": DLSTREAMER_UID,
        "runAsGroup": DLSTREAMER_UID,
        "fsGroup": DLSTREAMER_UID,
        "seccompProfile": { "type": "RuntimeDefault" },
    });
    let groups = addon_groups(cx, addon.device);
    if !groups.is_empty() {
        security["supplementalGroups"] = json!(groups);
    }
    let mut pod_labels: BTreeMap<String, String> = BTreeMap::from([("app.kubernetes.io/name".into(), NAME.into())]);
    if let Some(cores) = addon.cores {
        pod_labels.insert("k3d-gpu.io/cores".into(), cores.into());
    }
    let pvc_name = format!("{NAME}-models");
    let pvc = model_pvc(out, scope, NAME, STORAGE, Some("a downloaded detection model and clip"));
    let mut deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": NAME, "namespace": NAMESPACE, "labels": labels(&[("app.kubernetes.io/name", NAME)]) },
        "spec": {
            "replicas": 1,
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": { "app.kubernetes.io/name": NAME } },
            "template": { "metadata": { "labels": pod_labels }, "spec": {
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "securityContext": security,
                "initContainers": [with_image(init)],
                "containers": [with_image(main)],
                "volumes": [{ "name": "models", "persistentVolumeClaim": { "claimName": pvc_name } }],
            } },
        } });
    crate::images::pin_object(&mut deployment, &cx.catalog.images, &mut cx.images);
    let deployment_id = push_workload(out, (cluster_id, ns_id), pvc, deployment);
    out.push(rollout(NAME, deployment_id));
}

fn with_image(mut container: Value) -> Value {
    container["image"] = json!(DLSTREAMER_IMAGE);
    container
}
