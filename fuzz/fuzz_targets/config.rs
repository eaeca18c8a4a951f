//! The config loader never panics: any bytes either parse into a Config or give a diagnostic
//! with a span inside the text; a parsed config serialises and loads back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match k3d_gpu::config::load_str("k3dgpu.toml", &text) {
        Ok(config) => {
            let again = toml::to_string(&config).expect("a loaded config serialises");
            // Not compared for equality: a NaN in [agent] never equals itself.
            k3d_gpu::config::load_str("again.toml", &again).expect("a serialised config loads");
        }
        Err(e) => {
            if let Some(span) = e.span {
                assert!(span.offset() + span.len() <= text.len());
            }
        }
    }
    let _ = k3d_gpu::config::span_of(&text, &["sharing", "allocation"]);
});
