//! One component file (KDL v2) into a [`Component`]. Every mistake is a diagnostic that
//! underlines the node in the file.

use miette::{NamedSource, SourceSpan};

use super::kdl_tree::{Node as KdlNode, Span};
use super::manifest::{Objects, Shipped, Unreadable, images_match};
use super::{CatalogError, Component, Condition, Configure, HOOKS, Rollout, parse_manifest, yaml};

const NODES: &[&str] = &[
    "summary",
    "upstream",
    "manifest",
    "image",
    "when",
    "after",
    "provides",
    "rollout",
    "configure",
    "replaces-baked",
    "accelerator-node",
];

/// Per node: (arguments it takes, properties it allows, may appear more than once).
fn shape(node: &str) -> (usize, &'static [&'static str], bool) {
    match node {
        "summary" | "manifest" | "replaces-baked" => (1, &[], false),
        "accelerator-node" => (0, &[], false),
        "upstream" => (1, &["version"], false),
        "image" | "after" => (1, &[], true),
        "when" => (
            0,
            &["vendor", "intel-gpu-mode", "nvidia-gpu-mode", "balloons", "telemetry", "sandbox", "nvidia-sharing"],
            true,
        ),
        "provides" => (0, &["resource", "label"], true),
        "rollout" => (2, &[], true),
        "configure" => (1, &["container"], true),
        _ => (0, &[], true),
    }
}

/// The deepest a component file may nest children blocks and block comments: a component
/// uses three levels; serde-saphyr's default for YAML is 64 too.
pub const MAX_NESTING: usize = 64;

/// Where `text` first nests deeper than [`MAX_NESTING`] (`{` children blocks and `/* */`
/// comments, which KDL nests), as a byte offset; strings, raw strings and line comments are
/// skipped. A scan without recursion, so it cannot overflow whatever the input.
pub fn too_deep(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut comments, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        let next = bytes.get(i + 1).copied();
        match (bytes[i], next) {
            (b'/', Some(b'*')) => {
                comments += 1;
                i += 2;
            }
            (b'*', Some(b'/')) if comments > 0 => {
                comments -= 1;
                i += 2;
                continue;
            }
            _ if comments > 0 => {
                i += 1;
                continue;
            }
            (b'/', Some(b'/')) => {
                i = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| i + p);
                continue;
            }
            (b'"', _) => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            (b'#', _) => {
                let hashes = bytes[i..].iter().take_while(|&&b| b == b'#').count();
                i += hashes;
                if bytes.get(i) == Some(&b'"') {
                    let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                    i = bytes[i + 1..]
                        .windows(close.len())
                        .position(|w| w == close)
                        .map_or(bytes.len(), |p| i + 1 + p + close.len());
                }
                continue;
            }
            (b'{', _) => {
                depth += 1;
                i += 1;
            }
            (b'}', _) => {
                depth = depth.saturating_sub(1);
                i += 1;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        }
        if depth + comments > MAX_NESTING {
            return Some(i - 1);
        }
    }
    None
}

/// Names a component may not take: `render` writes `<name>.yaml` beside these.
const RESERVED: &[&str] = &["kustomization", "k3d-gpu"];

struct File<'a> {
    origin: &'a str,
    text: &'a str,
    /// Whether a diagnostic may quote the file: only once it has parsed as KDL holding one
    /// `component` node. A file that is not a component (a key, `/etc/shadow`) is never
    /// echoed; its errors give the line and column instead.
    quotable: bool,
}

impl From<Span> for SourceSpan {
    fn from(span: Span) -> SourceSpan {
        SourceSpan::from(span.0..span.0 + span.1)
    }
}

impl File<'_> {
    fn error(
        &self,
        span: impl Into<SourceSpan>,
        message: impl Into<String>,
        label: &str,
        help: Option<String>,
    ) -> Box<CatalogError> {
        let span: SourceSpan = span.into();
        let range = span.offset()..span.offset() + span.len();
        if !self.quotable || !crate::escape::snippet_fits(self.text, &range) {
            let (line, column) = crate::escape::line_column(self.text, span.offset());
            let message = crate::escape::capped(message.into());
            return Box::new(CatalogError::plain(format!("{message} (line {line}, column {column})"), help));
        }
        Box::new(CatalogError {
            message: message.into(),
            source_code: Some(NamedSource::new(self.origin, crate::escape::source(self.text))),
            span: Some(span),
            label: label.into(),
            help,
        })
    }

    /// The node's first argument as a string.
    fn arg(&self, node: &KdlNode, index: usize, what: &str) -> Result<String, Box<CatalogError>> {
        node.args()
            .nth(index)
            .and_then(|e| e.value.clone())
            .ok_or_else(|| self.error(node.span, format!("`{}` needs {what}", node.name), "here", None))
    }

    fn prop(&self, node: &KdlNode, key: &str) -> Result<Option<String>, Box<CatalogError>> {
        match node.get(key) {
            None => Ok(None),
            Some(v) => v
                .value
                .clone()
                .map(Some)
                .ok_or_else(|| self.error(node.span, format!("`{key}` must be a string"), "here", None)),
        }
    }
}

/// Where a component's manifest comes from, and when it is parsed.
pub(super) enum Manifest<'a> {
    /// Read by name and parsed now (a user's component, tests).
    Now(&'a dyn Fn(&str) -> Result<String, Unreadable>),
    /// Shipped: parsed at build time; its images are checked now, from the build's list.
    Shipped(&'a dyn Fn(&str) -> Option<&'static Shipped>),
    /// Read by name now (the only I/O), parsed on first use (`--stdlib DIR`).
    Later(&'a dyn Fn(&str) -> Result<String, Unreadable>),
}

/// Parses a component file and its manifest. `load_manifest` returns the text of a `share/`
/// file by name.
pub fn parse_component(
    origin: &str,
    text: &str,
    load_manifest: &dyn Fn(&str) -> Result<String, Unreadable>,
) -> Result<Component, Box<CatalogError>> {
    parse_with(origin, text, None, Manifest::Now(load_manifest))
}

/// Parses a component file (`tree`: its KDL already parsed, by build.rs for a shipped one),
/// its manifest read or found as `manifest` says.
pub(super) fn parse_with(
    origin: &str,
    text: &str,
    tree: Option<Vec<KdlNode>>,
    manifest: Manifest,
) -> Result<Component, Box<CatalogError>> {
    let mut file = File { origin, text, quotable: false };
    let nodes = match tree {
        Some(nodes) => nodes,
        None => parse_tree(&file)?,
    };
    let Some(root) = nodes.first().filter(|n| n.name == "component" && nodes.len() == 1) else {
        let span = nodes.first().map(|n| n.span.into()).unwrap_or_else(|| SourceSpan::from(0..0));
        return Err(file.error(
            span,
            format!("{origin}: a component file holds exactly one `component NAME {{ … }}`"),
            "here",
            None,
        ));
    };
    file.quotable = true;
    let mut c = Component {
        name: component_name(&file, root)?,
        summary: String::new(),
        upstream: String::new(),
        version: String::new(),
        manifest: String::new(),
        images: Vec::new(),
        when: Vec::new(),
        after: Vec::new(),
        provides_resources: Vec::new(),
        provides_labels: Vec::new(),
        rollouts: Vec::new(),
        configure: Vec::new(),
        replaces_baked: None,
        accelerator_node: false,
        objects: Objects::parsed(Vec::new()),
        origin: origin.to_string(),
        user: false,
    };
    let mut seen: Vec<&str> = Vec::new();
    for node in root.children.as_deref().unwrap_or_default() {
        check_shape(&file, node, &mut seen)?;
        read_node(&file, node, &mut c)?;
    }
    for (value, what) in [(&c.summary, "summary"), (&c.upstream, "upstream"), (&c.manifest, "manifest")] {
        if value.is_empty() {
            return Err(file.error(root.span, format!("component {} has no `{what}`", c.name), "here", None));
        }
    }
    attach_manifest(&file, root, &mut c, manifest)?;
    Ok(c)
}

/// The file's KDL tree. The kdl crate parses children and block comments recursively: 2,000
/// levels in 10 KB overflow the stack (a SIGABRT, mid-apply under `k3d-gpu mcp`), so the
/// depth is measured on the raw text, before the parser sees it.
fn parse_tree(file: &File) -> Result<Vec<KdlNode>, Box<CatalogError>> {
    let (origin, text) = (file.origin, file.text);
    if let Some(at) = too_deep(text) {
        let (line, column) = crate::escape::line_column(text, at);
        return Err(Box::new(CatalogError::plain(
            format!(
                "{origin}: nested more than {MAX_NESTING} levels deep (line {line}, column {column}); a component is a few levels"
            ),
            Some("component files are KDL v2; see docs/stdlib.md".into()),
        )));
    }
    super::kdl_tree::parse(text).map_err(|span| {
        file.error(
            span,
            format!("{origin}: not valid KDL"),
            "here",
            Some("component files are KDL v2; see docs/stdlib.md".into()),
        )
    })
}

/// A component's name is a DNS label, and not one `render` writes beside the components.
fn component_name(file: &File, root: &KdlNode) -> Result<String, Box<CatalogError>> {
    let name = file.arg(root, 0, "a name")?;
    if !crate::config::dns_label(&name) {
        return Err(file.error(
            root.span,
            format!("component name {name:?} must be 1-63 lowercase letters, digits and '-', not starting or ending with '-'"),
            "here",
            None,
        ));
    }
    if RESERVED.contains(&name.as_str()) {
        return Err(file.error(
            root.span,
            format!("component name {name} is reserved"),
            "here",
            Some("pick another name".into()),
        ));
    }
    Ok(name)
}

/// A known node has the shape [`shape`] gives it: given once unless repeatable, its count of
/// arguments, only its properties, no children. (`seen`: the nodes before it.)
fn check_shape<'n>(file: &File, node: &'n KdlNode, seen: &mut Vec<&'n str>) -> Result<(), Box<CatalogError>> {
    let kind = node.name.as_str();
    if !NODES.contains(&kind) {
        return Ok(());
    }
    let (args, props, repeatable) = shape(kind);
    if !repeatable && seen.contains(&kind) {
        return Err(file.error(node.span, format!("`{kind}` is given twice"), "again here", None));
    }
    seen.push(kind);
    let given_args = node.args().count();
    if given_args != args {
        return Err(file.error(
            node.span,
            format!("`{kind}` takes {args} argument(s), found {given_args}"),
            "here",
            None,
        ));
    }
    if let Some((bad, bad_span)) =
        node.entries.iter().filter_map(|e| e.name.as_ref()).find(|(k, _)| !props.contains(&k.as_str()))
    {
        let allowed = if props.is_empty() { "none".to_string() } else { props.join(", ") };
        return Err(file.error(
            *bad_span,
            format!("`{kind}` has no property `{bad}`"),
            "unknown property",
            Some(format!("allowed: {allowed}")),
        ));
    }
    if node.children.is_some() {
        return Err(file.error(node.span, format!("`{kind}` takes no children"), "here", None));
    }
    Ok(())
}

/// One child of `component` into the component, by its own rule.
fn read_node(file: &File, node: &KdlNode, c: &mut Component) -> Result<(), Box<CatalogError>> {
    match node.name.as_str() {
        "summary" => c.summary = file.arg(node, 0, "a one-line summary")?,
        "upstream" => (c.upstream, c.version) = upstream(file, node)?,
        "manifest" => c.manifest = manifest_name(file, node)?,
        "image" => c.images.push(image(file, node)?),
        "when" => c.when.push(when(file, node)?),
        "after" => c.after.push(file.arg(node, 0, "a component name")?),
        "provides" => match provides(file, node)? {
            Provided::Resource(r) => c.provides_resources.push(r),
            Provided::Label(l) => c.provides_labels.push(l),
        },
        "rollout" => c.rollouts.push(rollout(file, node)?),
        "configure" => c.configure.push(configure(file, node)?),
        "accelerator-node" => c.accelerator_node = true,
        "replaces-baked" => c.replaces_baked = Some(replaces_baked(file, node)?),
        other => {
            let hint = crate::suggest::closest(other, NODES.iter().copied());
            return Err(file.error(
                node.name_span,
                format!("unknown node `{other}` in component {}", c.name),
                "unknown node",
                Some(hint.map_or_else(|| format!("known: {}", NODES.join(", ")), |h| format!("did you mean `{h}`?"))),
            ));
        }
    }
    Ok(())
}

/// `upstream NAME version=…`: the project and its version, both required.
fn upstream(file: &File, node: &KdlNode) -> Result<(String, String), Box<CatalogError>> {
    let name = file.arg(node, 0, "the upstream project")?;
    let version = file.prop(node, "version")?.ok_or_else(|| {
        file.error(node.span, "`upstream` needs version=…", "here", Some("e.g. upstream foo version=v1.2.3".into()))
    })?;
    Ok((name, version))
}

/// `manifest NAME`: a file name beside the component, never a path.
fn manifest_name(file: &File, node: &KdlNode) -> Result<String, Box<CatalogError>> {
    let manifest = file.arg(node, 0, "a file name in share/")?;
    if manifest.contains('/') || manifest == ".." || manifest == "." || manifest.is_empty() {
        let message = format!("manifest {manifest:?} must be a file name beside the component");
        return Err(file.error(node.span, message, "here", None));
    }
    Ok(manifest)
}

/// `image REF`: a tag is required; a digest only where a public source confirmed one
/// (DESIGN.md §7). images.lock supplies the rest.
fn image(file: &File, node: &KdlNode) -> Result<String, Box<CatalogError>> {
    let image = file.arg(node, 0, "an image reference")?;
    if let Err(why) = crate::images::ImageRef::parse(&image) {
        return Err(file.error(
            node.span,
            format!("image {image:?}: {why}"),
            "bad image",
            Some("write it as registry/repo:tag, or registry/repo:tag@sha256:<64 hex digits>".into()),
        ));
    }
    Ok(image)
}

/// `when key=value…`: one line of conditions, never empty (it would always hold).
fn when(file: &File, node: &KdlNode) -> Result<Vec<Condition>, Box<CatalogError>> {
    let line = conditions(file, node)?;
    if line.is_empty() {
        return Err(file.error(node.span, "an empty `when` would always hold; drop it instead", "here", None));
    }
    Ok(line)
}

/// What a `provides` node says the component provides.
#[derive(Debug, PartialEq, Eq)]
enum Provided {
    Resource(String),
    Label(String),
}

/// `provides resource=…` or `provides label=…`: exactly one of them.
fn provides(file: &File, node: &KdlNode) -> Result<Provided, Box<CatalogError>> {
    if node.entries.len() != 1 {
        return Err(file.error(node.span, "`provides` takes one of resource=… or label=…", "here", None));
    }
    if let Some(r) = file.prop(node, "resource")? {
        return Ok(Provided::Resource(r));
    }
    if let Some(l) = file.prop(node, "label")? {
        return Ok(Provided::Label(l));
    }
    Err(file.error(node.span, "`provides` needs resource=… or label=…", "here", None))
}

/// `rollout KIND NAMESPACE/NAME`: a DaemonSet or Deployment to wait for.
fn rollout(file: &File, node: &KdlNode) -> Result<Rollout, Box<CatalogError>> {
    let kind = file.arg(node, 0, "a kind (DaemonSet or Deployment)")?;
    if kind != "DaemonSet" && kind != "Deployment" {
        return Err(file.error(node.span, format!("rollout kind {kind} is not DaemonSet or Deployment"), "here", None));
    }
    let at = file.arg(node, 1, "NAMESPACE/NAME")?;
    let Some((namespace, name)) =
        at.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        return Err(file.error(node.span, format!("rollout target {at:?} must be NAMESPACE/NAME"), "here", None));
    };
    Ok(Rollout { kind, namespace: namespace.into(), name: name.into() })
}

/// `configure HOOK container=…`: a known hook, on a named container.
fn configure(file: &File, node: &KdlNode) -> Result<Configure, Box<CatalogError>> {
    let hook = file.arg(node, 0, "a hook name")?;
    if !HOOKS.contains(&hook.as_str()) {
        return Err(file.error(
            node.span,
            format!("unknown hook {hook}"),
            "unknown hook",
            Some(format!("known hooks: {}", HOOKS.join(", "))),
        ));
    }
    let container = file
        .prop(node, "container")?
        .ok_or_else(|| file.error(node.span, "`configure` needs container=…", "here", None))?;
    Ok(Configure { hook, container })
}

/// `replaces-baked NAME`: a k3s manifest name (no path, space or `=`).
fn replaces_baked(file: &File, node: &KdlNode) -> Result<String, Box<CatalogError>> {
    let baked = file.arg(node, 0, "the baked manifest's name")?;
    if baked.is_empty() || baked.contains(['/', ' ', '=']) {
        let message = format!("baked manifest name {baked:?} is not a k3s manifest name");
        return Err(file.error(node.span, message, "here", None));
    }
    Ok(baked)
}

/// The component's objects, as `manifest` says: parsed now, shipped (parsed at build time)
/// or read now and parsed on first use; the images are checked against the listed ones
/// where the manifest is known now.
fn attach_manifest(
    file: &File,
    root: &KdlNode,
    c: &mut Component,
    manifest: Manifest,
) -> Result<(), Box<CatalogError>> {
    let label = manifest_label(file.origin, &c.manifest);
    let not_found =
        |e: &dyn std::fmt::Display| file.error(root.span, format!("component {}: {e}", c.name), "here", None);
    match manifest {
        Manifest::Now(load) => {
            let text = load(&c.manifest).map_err(|e| not_found(&e))?;
            let objects = parse_manifest(&label, &text)?;
            check_images(file, root, c, &yaml::images(&objects))?;
            c.objects = Objects::parsed_from(&label, &text, objects);
        }
        Manifest::Shipped(find) => {
            let shipped =
                find(&c.manifest).ok_or_else(|| not_found(&format!("share/{} is not in the binary", c.manifest)))?;
            let in_manifest: Vec<String> = shipped.images.iter().map(|i| i.to_string()).collect();
            check_images(file, root, c, &in_manifest)?;
            c.objects = Objects::shipped(shipped);
        }
        Manifest::Later(load) => {
            let text = load(&c.manifest).map_err(|e| not_found(&e))?;
            c.objects = Objects::yaml(label, text, c.name.clone(), listed_images(c));
        }
    }
    Ok(())
}

/// How messages name a manifest: `share/NAME` for the catalog, the file beside a user's own
/// component otherwise.
fn manifest_label(origin: &str, manifest: &str) -> String {
    if origin.starts_with("stdlib/") {
        format!("share/{manifest}")
    } else {
        let dir = std::path::Path::new(origin).parent().map(|p| p.display().to_string()).unwrap_or_default();
        if dir.is_empty() { manifest.to_string() } else { format!("{dir}/{manifest}") }
    }
}

fn conditions(file: &File, node: &KdlNode) -> Result<Vec<Condition>, Box<CatalogError>> {
    let mut out = Vec::new();
    for entry in &node.entries {
        let Some(key) = entry.name.as_ref().map(|(k, _)| k.as_str()) else {
            return Err(file.error(entry.span, "`when` takes key=value conditions", "here", None));
        };
        let value = entry.value.as_deref().unwrap_or_default();
        let bad = |allowed: String| {
            file.error(
                entry.span,
                format!("`{key}={value}` is not a known condition"),
                "here",
                Some(format!("allowed: {allowed}")),
            )
        };
        out.push(match key {
            "vendor" => Condition::Vendor(value.parse().map_err(|e: crate::facts::vendors::UnknownVendor| {
                file.error(entry.span, e.to_string(), "unknown vendor", None)
            })?),
            "intel-gpu-mode" => Condition::IntelGpuMode(config_value(value).map_err(|a| bad(a.0))?),
            "nvidia-gpu-mode" => Condition::NvidiaGpuMode(config_value(value).map_err(|a| bad(a.0))?),
            "balloons" => Condition::Balloons(config_value(value).map_err(|a| bad(a.0))?),
            "telemetry" => Condition::Telemetry(config_value(value).map_err(|a| bad(a.0))?),
            "sandbox" => Condition::Sandbox(match value {
                "on" => true,
                "off" => false,
                _ => return Err(bad("on, off".into())),
            }),
            "nvidia-sharing" => Condition::NvidiaSharing(config_value(value).map_err(|a| bad(a.0))?),
            _ => {
                return Err(file.error(
                    entry.span,
                    format!("unknown condition key `{key}`"),
                    "here",
                    Some(
                        "keys: vendor, intel-gpu-mode, nvidia-gpu-mode, balloons, telemetry, sandbox, nvidia-sharing"
                            .into(),
                    ),
                ));
            }
        });
    }
    Ok(out)
}

/// A condition value read as the config reads it (the same serde names); the error is the
/// list of allowed values.
fn config_value<T: serde::de::DeserializeOwned>(value: &str) -> Result<T, Allowed> {
    T::deserialize(serde::de::value::StrDeserializer::<Allowed>::new(value))
}

/// A deserialisation error that keeps the allowed variant names, comma-separated.
#[derive(Debug)]
struct Allowed(String);

impl serde::de::Error for Allowed {
    fn custom<M: std::fmt::Display>(message: M) -> Self {
        Allowed(message.to_string())
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        Allowed(expected.join(", "))
    }
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Allowed {}

fn listed_images(c: &Component) -> Vec<String> {
    let mut listed = c.images.clone();
    listed.sort();
    listed.dedup();
    listed
}

/// Every image in the manifest (`in_manifest`, sorted, once each) is listed in the component,
/// and the other way round.
fn check_images(file: &File, root: &KdlNode, c: &Component, in_manifest: &[String]) -> Result<(), Box<CatalogError>> {
    let label = manifest_label(&c.origin, &c.manifest);
    images_match(&label, &c.name, in_manifest, &listed_images(c))
        .map_err(|e| file.error(root.span, e.to_string(), "here", e.help().map(str::to_string)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one node rule on the first node of `text`; the error as its message.
    fn rule<T>(text: &str, rule: impl Fn(&File, &KdlNode) -> Result<T, Box<CatalogError>>) -> Result<T, String> {
        let nodes = crate::catalog::kdl_tree::parse(text).expect("the case is KDL");
        let file = File { origin: "mine.kdl", text, quotable: true };
        rule(&file, &nodes[0]).map_err(|e| e.message)
    }

    #[test]
    fn each_known_node_has_its_shape() {
        // (nodes, the error at the last one)
        const CASES: &[(&str, Option<&str>)] = &[
            ("summary \"s\"", None),
            ("summary \"a\"\nsummary \"b\"", Some("`summary` is given twice")),
            ("image a:1\nimage b:2", None),
            ("summary", Some("`summary` takes 1 argument(s), found 0")),
            ("rollout DaemonSet", Some("`rollout` takes 2 argument(s), found 1")),
            ("upstream u version=\"1\" colour=\"red\"", Some("`upstream` has no property `colour`")),
            ("manifest m.yaml k=\"v\"", Some("`manifest` has no property `k`")),
            ("after a { b }", Some("`after` takes no children")),
            // Unknown nodes are read_node's to refuse: the shape passes them.
            ("colour red { x }", None),
        ];
        for (text, want) in CASES {
            let nodes = crate::catalog::kdl_tree::parse(text).expect("the case is KDL");
            let file = File { origin: "mine.kdl", text, quotable: true };
            let mut seen = Vec::new();
            let got = nodes.iter().try_for_each(|n| check_shape(&file, n, &mut seen)).map_err(|e| e.message);
            assert_eq!(got.as_ref().map_err(String::as_str).copied(), want.map_or(Ok(()), Err), "{text}");
        }
        let e = rule("manifest m.yaml k=\"v\"", |f, n| check_shape(f, n, &mut Vec::new())).unwrap_err();
        assert!(e.contains("`manifest` has no property"), "{e}");
    }

    /// Runs `read` on each node of a table: Ok(what it reads as) / Err(the message's start).
    fn table(read: impl Fn(&str) -> Result<String, String>, cases: &[(&str, Result<&str, &str>)]) {
        for (text, want) in cases {
            match (read(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{text}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{text}: {got}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn upstream_needs_a_version() {
        table(
            |t| rule(t, upstream).map(|(n, v)| format!("{n} {v}")),
            &[
                ("upstream foo version=\"v1\"", Ok("foo v1")),
                ("upstream foo", Err("`upstream` needs version=…")),
                ("upstream foo version=1", Err("`version` must be a string")),
            ],
        );
    }

    #[test]
    fn a_manifest_is_a_file_name_not_a_path() {
        table(
            |t| rule(t, manifest_name),
            &[
                ("manifest plugin.yaml", Ok("plugin.yaml")),
                ("manifest \"../x.yaml\"", Err("manifest \"../x.yaml\" must be a file name")),
                ("manifest \"..\"", Err("manifest \"..\" must be")),
                ("manifest \".\"", Err("manifest \".\" must be")),
                ("manifest \"\"", Err("manifest \"\" must be")),
            ],
        );
    }

    #[test]
    fn an_image_has_a_tag() {
        table(
            |t| rule(t, image),
            &[
                ("image \"ghcr.io/a/b:1\"", Ok("ghcr.io/a/b:1")),
                ("image \"ghcr.io/a/b\"", Err("image \"ghcr.io/a/b\": ")),
            ],
        );
    }

    #[test]
    fn provides_is_one_resource_or_one_label() {
        table(
            |t| rule(t, provides).map(|p| format!("{p:?}")),
            &[
                ("provides resource=\"gpu.intel.com/xe\"", Ok("Resource(\"gpu.intel.com/xe\")")),
                ("provides label=\"k3d-gpu.io/x\"", Ok("Label(\"k3d-gpu.io/x\")")),
                ("provides resource=\"a\" label=\"b\"", Err("`provides` takes one of")),
                ("provides", Err("`provides` takes one of")),
                ("provides other=\"a\"", Err("`provides` needs resource=… or label=…")),
            ],
        );
    }

    #[test]
    fn a_rollout_is_a_daemonset_or_deployment_by_namespace_and_name() {
        table(
            |t| rule(t, rollout).map(|r| format!("{} {}/{}", r.kind, r.namespace, r.name)),
            &[
                ("rollout DaemonSet \"kube-system/plugin\"", Ok("DaemonSet kube-system/plugin")),
                ("rollout Deployment \"a/b\"", Ok("Deployment a/b")),
                ("rollout StatefulSet \"a/b\"", Err("rollout kind StatefulSet is not")),
                ("rollout DaemonSet plugin", Err("rollout target \"plugin\" must be NAMESPACE/NAME")),
                ("rollout DaemonSet \"a/b/c\"", Err("rollout target \"a/b/c\"")),
                ("rollout DaemonSet \"/b\"", Err("rollout target \"/b\"")),
            ],
        );
    }

    #[test]
    fn configure_names_a_known_hook_and_a_container() {
        table(
            |t| rule(t, configure).map(|c| format!("{} {}", c.hook, c.container)),
            &[
                ("configure intel-gpu-plugin-args container=plugin", Ok("intel-gpu-plugin-args plugin")),
                ("configure nope container=plugin", Err("unknown hook nope")),
                ("configure intel-gpu-plugin-args", Err("`configure` needs container=…")),
            ],
        );
    }

    #[test]
    fn replaces_baked_is_a_k3s_manifest_name() {
        table(
            |t| rule(t, replaces_baked),
            &[
                ("replaces-baked intel-gpu-plugin", Ok("intel-gpu-plugin")),
                ("replaces-baked \"a/b\"", Err("baked manifest name \"a/b\" is not")),
                ("replaces-baked \"a b\"", Err("baked manifest name")),
                ("replaces-baked \"a=b\"", Err("baked manifest name")),
                ("replaces-baked \"\"", Err("baked manifest name")),
            ],
        );
    }

    #[test]
    fn a_when_line_is_conditions_and_never_empty() {
        // (node, conditions read / Err(message start))
        let cases: &[(&str, Result<Vec<Condition>, &str>)] = &[
            ("when vendor=intel", Ok(vec![Condition::Vendor(crate::facts::Vendor::Intel)])),
            ("when sandbox=on", Ok(vec![Condition::Sandbox(true)])),
            ("when nvidia-sharing=mps", Ok(vec![Condition::NvidiaSharing(crate::config::NvidiaStrategy::Mps)])),
            (
                "when vendor=nvidia sandbox=off",
                Ok(vec![Condition::Vendor(crate::facts::Vendor::Nvidia), Condition::Sandbox(false)]),
            ),
            ("when", Err("an empty `when` would always hold")),
            ("when intel", Err("`when` takes key=value conditions")),
            ("when sandbox=maybe", Err("`sandbox=maybe` is not a known condition")),
            ("when colour=red", Err("unknown condition key `colour`")),
        ];
        for (text, want) in cases {
            let got = rule(text, when);
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{text}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{text}: {got}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn component_names_are_dns_labels_and_not_reserved() {
        table(
            |t| rule(t, component_name),
            &[
                ("component \"a-1\"", Ok("a-1")),
                ("component \"kustomization\"", Err("component name kustomization is reserved")),
                ("component \"k3d-gpu\"", Err("component name k3d-gpu is reserved")),
                ("component \"A\"", Err("component name \"A\" must be 1-63")),
                ("component", Err("`component` needs a name")),
            ],
        );
    }

    #[test]
    fn an_unknown_node_suggests_the_closest() {
        let none = |_: &str| -> Result<String, Unreadable> { Err(Unreadable::Link("none.yml".into())) };
        // (child node, help)
        const CASES: &[(&str, &str)] =
            &[("sumary \"s\"", "did you mean `summary`?"), ("zzz", "known: summary, upstream")];
        for (child, help) in CASES {
            let text = format!("component \"x\" {{\n  {child}\n}}\n");
            let e = parse_component("mine.kdl", &text, &none).unwrap_err();
            assert!(e.message.starts_with("unknown node"), "{child}: {}", e.message);
            assert!(e.help.as_deref().is_some_and(|h| h.starts_with(help)), "{child}: {:?}", e.help);
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_the_parser_recurses() {
        let none = |_: &str| -> Result<String, Unreadable> { Err(Unreadable::Link("none.yml".into())) };
        for deep in [
            format!("component \"a\" {{\n{}{}\n}}\n", "x {".repeat(2000), "}".repeat(2000)),
            format!("/*{}*/\ncomponent \"a\" {{\n}}\n", "/*".repeat(2000)),
        ] {
            let e = parse_component("deep.kdl", &deep, &none).unwrap_err();
            assert!(e.to_string().contains("deep.kdl: nested more than 64 levels deep (line"), "{e}");
        }
        assert_eq!(too_deep("a \"{{{{\" #\"{{{\"# // {{{{\nb { c { } }"), None);
        assert_eq!(too_deep(&"{".repeat(64)), None);
        assert_eq!(too_deep(&"{".repeat(65)), Some(64));
    }

    #[test]
    fn component_names_are_dns_labels() {
        let none = |_: &str| -> Result<String, Unreadable> { Err(Unreadable::Link("none.yml".into())) };
        for bad in ["-x", "x-", "X", &"a".repeat(64)] {
            let e = parse_component("mine.kdl", &format!("component \"{bad}\" {{\n}}\n"), &none).unwrap_err();
            assert!(e.message.starts_with("component name"), "{bad}: {}", e.message);
        }
        // A good name gets past the check to the next problem.
        let e = parse_component("mine.kdl", "component \"a-1\" {\n}\n", &none).unwrap_err();
        assert!(!e.message.starts_with("component name"), "{}", e.message);
    }

    #[test]
    fn accelerator_node_is_a_flag_given_once() {
        let manifest = |_: &str| -> Result<String, Unreadable> { Ok(String::new()) };
        let file = |extra: &str| {
            format!("component \"x\" {{\n  summary \"s\"\n  upstream u version=\"1\"\n  manifest x.yml\n{extra}}}\n")
        };
        assert!(!parse_component("mine.kdl", &file(""), &manifest).unwrap().accelerator_node);
        assert!(parse_component("mine.kdl", &file("  accelerator-node\n"), &manifest).unwrap().accelerator_node);
        let e = parse_component("mine.kdl", &file("  accelerator-node\n  accelerator-node\n"), &manifest).unwrap_err();
        assert!(e.message.contains("given twice"), "{}", e.message);
        let e = parse_component("mine.kdl", &file("  accelerator-node yes\n"), &manifest).unwrap_err();
        assert!(e.message.contains("takes 0 argument"), "{}", e.message);
    }

    #[test]
    fn condition_values_are_the_configs() {
        let none = |_: &str| -> Result<String, Unreadable> { Err(Unreadable::Link("none.yml".into())) };
        let when = |line: &str| {
            let text = format!("component \"x\" {{\n  when {line}\n}}\n");
            parse_component("mine.kdl", &text, &none).unwrap_err()
        };
        for (line, allowed) in [
            ("intel-gpu-mode=\"pluginn\"", "allowed: plugin, dra"),
            ("balloons=\"K3s\"", "allowed: k3s, external"),
            ("telemetry=\"amd\"", "allowed: intel, nvidia"),
        ] {
            let e = when(line);
            assert!(e.message.ends_with("is not a known condition"), "{line}: {}", e.message);
            assert_eq!(e.help.as_deref(), Some(allowed), "{line}");
        }
        // Known values get past the condition to the next problem (no summary).
        for line in
            ["intel-gpu-mode=\"dra\"", "intel-gpu-mode=\"plugin\" balloons=\"external\"", "telemetry=\"nvidia\""]
        {
            assert!(when(line).message.contains("has no `summary`"), "{line}: {}", when(line).message);
        }
    }
}
