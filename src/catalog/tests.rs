//! The embedded catalog against the files it was built from.

use super::*;
use std::path::Path;

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// build.rs embeds every `share/*.yml`, a file added later (an upstream CRD) included, with
/// nothing to register.
#[test]
fn every_shipped_manifest_is_embedded() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("share"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yml"))
        .collect();
    on_disk.sort();
    let embedded: Vec<&str> = embedded::SHARE.iter().map(|m| m.file).collect();
    assert_eq!(embedded, on_disk);
}

/// What build.rs embedded decodes to exactly what the YAML parses to at run time, and its
/// digest, images and kinds are those of the parsed objects.
#[test]
fn the_embedded_json_is_the_yaml_parsed() {
    for shipped in embedded::SHARE {
        let text = std::fs::read_to_string(repo().join("share").join(shipped.file)).unwrap();
        let parsed = parse_manifest(shipped.file, &text).unwrap();
        let decoded: Vec<serde_json::Value> = serde_json::from_str(shipped.json).unwrap();
        assert_eq!(decoded, parsed, "{}", shipped.file);
        assert_eq!(shipped.digest, crate::canonical::sha256(yaml::encode(&parsed).as_bytes()), "{}", shipped.file);
        assert_eq!(shipped.images, yaml::images(&parsed), "{}", shipped.file);
        let kinds: Vec<(String, String)> = shipped.kinds.iter().map(|(a, k)| (a.to_string(), k.to_string())).collect();
        assert_eq!(kinds, yaml::kinds(&parsed), "{}", shipped.file);
        let plurals: Vec<(String, String, String, bool)> =
            shipped.plurals.iter().map(|(g, k, p, n)| (g.to_string(), k.to_string(), p.to_string(), *n)).collect();
        assert_eq!(plurals, yaml::plurals(&parsed), "{}", shipped.file);
    }
}

/// Loading the shipped catalog decodes no manifest; a component's objects, digest and kinds
/// are the same as the same files read with `--stdlib`.
#[test]
fn the_embedded_catalog_decodes_nothing_and_matches_the_files() {
    let embedded = Catalog::embedded().unwrap();
    let from_dir = crate::component_files::from_dir(&repo()).unwrap();
    assert_eq!(embedded.components.keys().collect::<Vec<_>>(), from_dir.components.keys().collect::<Vec<_>>());
    for (name, c) in &embedded.components {
        let _ = c.objects.digest();
        let _ = c.objects.kinds();
        let _ = c.objects.plurals();
        assert!(!c.objects.decoded(), "{name}: the digest, kinds and plurals need no decoding");
        let disk = &from_dir.components[name];
        assert!(!disk.objects.decoded(), "{name}: --stdlib parses a manifest when it is used");
        assert_eq!(c.objects.digest(), disk.objects.digest(), "{name}");
        assert_eq!(c.objects.kinds(), disk.objects.kinds(), "{name}");
        assert_eq!(c.objects.plurals(), disk.objects.plurals(), "{name}");
        assert_eq!(c.objects.get().unwrap(), disk.objects.get().unwrap(), "{name}");
        assert!(c.objects.decoded());
    }
}

/// The KDL tree build.rs embedded is what parsing the file gives at run time, and every
/// `stdlib/*.kdl` is embedded.
#[test]
fn the_embedded_kdl_tree_is_the_file_parsed() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("stdlib"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kdl"))
        .collect();
    on_disk.sort();
    assert_eq!(embedded::STDLIB.iter().map(|(f, _, _)| *f).collect::<Vec<_>>(), on_disk);
    for (file, text, tree) in embedded::STDLIB {
        assert_eq!(*text, std::fs::read_to_string(repo().join("stdlib").join(file)).unwrap(), "{file}");
        let embedded: Vec<kdl_tree::Node> = serde_json::from_str(tree).unwrap();
        assert_eq!(embedded, kdl_tree::parse(text).unwrap(), "{file}");
    }
}
