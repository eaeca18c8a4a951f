//! The component readers never panic: any text either parses as a component (KDL) or a
//! manifest (YAML), or gives a diagnostic whose span lies inside the text. A component that
//! parses names a manifest that is a plain file name.
#![no_main]

use libfuzzer_sys::fuzz_target;

const MANIFEST: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match k3d_gpu::catalog::parse_component("fuzz.kdl", &text, &|_| Ok(MANIFEST.to_string())) {
        Ok(component) => {
            assert!(!component.manifest.contains('/'), "{:?}", component.manifest);
            assert!(k3d_gpu::config::dns_label(&component.name));
        }
        Err(e) => {
            if let Some(span) = e.span {
                assert!(span.offset() + span.len() <= text.len());
            }
        }
    }
    if let Ok(objects) = k3d_gpu::catalog::parse_manifest("fuzz.yml", &text) {
        for o in objects {
            assert!(o["apiVersion"].is_string() && o["kind"].is_string() && o["metadata"]["name"].is_string());
        }
    }
});
