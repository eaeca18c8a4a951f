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

/// What marks the warning of an image the node image is built from, not one the cluster runs.
const BASE_MARK: &str = " (a base of the node image)";

/// The text of an `image-unlocked` warning about a base of the node image.
pub fn unlocked_base_text(image: &str) -> String {
    format!("image {image}{BASE_MARK} is deployed by tag (no digest in images.lock); `k3d-gpu images lock` pins it")
}

/// Whether an `image-unlocked` warning is about a base of the node image.
pub fn is_base(w: &Warning) -> bool {
    unlocked_image(w).is_some() && w.text.contains(BASE_MARK)
}

/// How many images are deployed by tag, said the same way by every command that counts them:
/// the total, then where they are used (`plan`, `render` and `images` count different sets,
/// and each says which).
pub fn unlocked_count(workloads: usize, bases: usize, test_pods: usize, k3s: usize) -> String {
    let mut parts = Vec::new();
    if workloads > 0 {
        parts.push(format!("{workloads} in the cluster's workloads"));
    }
    if bases > 0 {
        parts.push(format!("{bases} the node image is built from"));
    }
    if test_pods > 0 {
        parts.push(format!("{test_pods} in `k3d-gpu test`'s pods"));
    }
    if k3s > 0 {
        parts.push(format!("{k3s} k3s runs on its own"));
    }
    let total = workloads + bases + test_pods + k3s;
    let noun = if total == 1 { "image is" } else { "images are" };
    format!("{total} {noun} deployed by tag (no digest in images.lock): {}", parts.join(", "))
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
    let mut bases = 0;
    let mut images_at = None;
    for w in warnings {
        if let Some(image) = unlocked_image(w) {
            images_at.get_or_insert(out.len());
            if !images.contains(&image) {
                images.push(image);
                bases += usize::from(is_base(w));
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
                "{}; `k3d-gpu images` lists them, `k3d-gpu images lock` pins them",
                unlocked_count(images.len() - bases, bases, 0, 0)
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
        assert!(out[1].text.contains(": 2 in the cluster's workloads;"), "{}", out[1].text);
        assert!(out[1].text.contains("`k3d-gpu images` lists them"), "{}", out[1].text);
        // A base of the node image is counted as one.
        let base = w(UNLOCKED, &unlocked_base_text("ubuntu:26.04"));
        assert_eq!(unlocked_image(&base), Some("ubuntu:26.04"));
        assert!(is_base(&base) && !is_base(&a));
        let out = summarised([&a, &base, &b]);
        assert!(
            out[0].text.starts_with("3 images are deployed by tag (no digest in images.lock): 2 in the cluster's workloads, 1 the node image is built from;"),
            "{}",
            out[0].text
        );
        assert_eq!(
            unlocked_count(4, 2, 1, 0),
            "7 images are deployed by tag (no digest in images.lock): 4 in the cluster's workloads, 2 the node image is built from, 1 in `k3d-gpu test`'s pods"
        );
        // One image: its own warning, as it was.
        assert_eq!(summarised([&a, &a]), vec![a.clone()]);
        assert_eq!(unlocked_image(&a), Some("a:1"));
        assert_eq!(unlocked_image(&other), None);
    }
}
