//! Warnings as a person reads them: each said once, and the ones that repeat per image
//! (`image-unlocked`, one per image deployed by tag) summarised in one line that says where
//! the list is. JSON documents keep every warning; this is for text only. Pure.

use super::Warning;

/// The code of a warning about an image deployed by tag.
pub const UNLOCKED: &str = "image-unlocked";

/// The text of an `image-unlocked` warning (see `components::unlocked_images`).
pub fn unlocked_text(image: &str) -> String {
    format!("image {image} is deployed by tag (no digest in images.lock); `k3d-gpu images lock` pins it")
}

/// The image an `image-unlocked` warning is about.
pub fn unlocked_image(w: &Warning) -> Option<&str> {
    if w.code != UNLOCKED {
        return None;
    }
    w.text.strip_prefix("image ")?.split_once(' ').map(|(image, _)| image)
}

/// `warnings` to print: each distinct one once, in the order first met, and two or more
/// `image-unlocked` ones as one line where the first of them was.
pub fn summarised<'a>(warnings: impl IntoIterator<Item = &'a Warning>) -> Vec<Warning> {
    let mut out: Vec<Warning> = Vec::new();
    let mut images: Vec<&str> = Vec::new();
    let mut images_at = None;
    for w in warnings {
        if let Some(image) = unlocked_image(w) {
            images_at.get_or_insert(out.len());
            if !images.contains(&image) {
                images.push(image);
            }
            if images.len() > 1 {
                continue;
            }
        }
        if !out.contains(w) {
            out.push(w.clone());
        }
    }
    if images.len() > 1
        && let Some(at) = images_at
    {
        out[at] = Warning {
            code: UNLOCKED.into(),
            text: format!(
                "{} images are deployed by tag (no digest in images.lock): `k3d-gpu images` lists them, `k3d-gpu images lock` pins them",
                images.len()
            ),
            key: out[at].key.clone(),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(code: &str, text: &str) -> Warning {
        Warning { code: code.into(), text: text.into(), key: None }
    }

    #[test]
    fn repeats_are_said_once_and_unlocked_images_in_one_line() {
        let a = w(UNLOCKED, &unlocked_text("a:1"));
        let b = w(UNLOCKED, &unlocked_text("b:2"));
        let other = w("npu-firmware", "old firmware");
        let out = summarised([&other, &a, &other, &b, &a]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0], other);
        assert_eq!(out[1].code, UNLOCKED);
        assert!(out[1].text.starts_with("2 images are deployed by tag"), "{}", out[1].text);
        assert!(out[1].text.contains("`k3d-gpu images` lists them"), "{}", out[1].text);
        // One image: its own warning, as it was.
        assert_eq!(summarised([&a, &a]), vec![a.clone()]);
        assert_eq!(unlocked_image(&a), Some("a:1"));
        assert_eq!(unlocked_image(&other), None);
    }
}
