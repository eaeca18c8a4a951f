//! The saved-document readers (facts/v1, observed/v1, plan/v1) and what the tool does with
//! what they read: never a panic, and the rules of issue 10 hold for any document —
//! - masking is idempotent and leaves no secret-shaped value behind it;
//! - the plan text and the detect table carry no control character to the terminal;
//! - escaping keeps diagnostics' byte offsets and removes every control character.
#![no_main]

use k3d_gpu::escape::{assembled, is_control, one_line, rendered_diagnostic, source};
use libfuzzer_sys::fuzz_target;

fn no_control(text: &str) {
    assert!(!text.chars().any(is_control), "{text:?}");
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    no_control(&assembled(&text));
    assert!(!one_line(&text).contains('\n'));
    assert_eq!(source(&text).len(), text.len());
    // Only SGR sequences (ESC [ digits ; m) may remain in a rendered diagnostic.
    let rendered = rendered_diagnostic(&text);
    let without_sgr: String = rendered.split('\u{1b}').enumerate().map(|(i, part)| {
        if i == 0 { part.to_string() } else {
            let rest = part.strip_prefix('[').expect("an ESC that survives starts an SGR sequence");
            let end = rest.find('m').expect("SGR ends in m");
            assert!(rest[..end].chars().all(|c| c.is_ascii_digit() || c == ';'));
            rest[end + 1..].to_string()
        }
    }).collect();
    no_control(&without_sgr);

    if let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(data) {
        k3d_gpu::secrets::mask_document(&mut value);
        let once = value.clone();
        k3d_gpu::secrets::mask_document(&mut value);
        assert_eq!(once, value, "masking twice changes nothing");
        let _ = k3d_gpu::secrets::digest_secrets(&value);
    }
    if let Ok(plan) = serde_json::from_slice::<k3d_gpu::plan::Plan>(data) {
        let rendered = k3d_gpu::plan::render::text(&plan, "sha256:0", k3d_gpu::plan::render::Style { color: false });
        no_control(&rendered);
        let bytes = plan.to_bytes();
        serde_json::from_slice::<k3d_gpu::plan::Plan>(&bytes).expect("a plan's canonical bytes read back");
    }
    if let Ok(observed) = serde_json::from_slice::<k3d_gpu::observe::Observed>(data) {
        let masked = observed.masked().to_bytes();
        serde_json::from_slice::<k3d_gpu::observe::Observed>(&masked).expect("the masked document reads back");
    }
    if let Ok(facts) = serde_json::from_slice::<k3d_gpu::facts::Facts>(data) {
        no_control(&assembled(&k3d_gpu::commands::render_detect(&facts)));
        let _ = facts.to_bytes();
    }
});
