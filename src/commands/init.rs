//! `k3d-gpu init`: a commented k3dgpu.toml for one host. It says what the host is (from the
//! facts), expects its active vendors and device counts under `[expect]`, and says in a
//! comment where the agent would run, found by compiling the written config with `[agent]`
//! added, as `k3d-gpu agent` would. The text is compiled as `validate` compiles it before it
//! is written, so a file init writes is one validate accepts on that host.
//!
//! Never a replacement: the file is linked in under its name only when nothing is there
//! (`output_file::write_new`), so an existing config, or a link where it would go, is left as
//! it was and the command exits 1. Text from the host (CPU and GPU names, the OS, reasons that
//! quote them) is only ever in comments, each escaped to one line (`escape::one_line`): a
//! model name holding a newline cannot start a TOML line of its own. Values are written by the
//! `toml` crate's own quoting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cli::{Global, InitArgs};
use crate::compile::agent::AgentPlan;
use crate::config::Config;
use crate::error::{EXIT_OK, Error, Result};
use crate::facts::{Facts, Level, VendorFilter};

/// How wide a comment may grow before it wraps.
const WIDTH: usize = 96;

pub fn run(global: &Global, args: &InitArgs) -> Result<u8> {
    let to_stdout = args.out == Path::new("-");
    if !to_stdout {
        refuse_existing(global, &args.out)?;
        super::check_out_file(&args.out)?;
    }
    let facts = super::load_facts(global)?;
    let name = if to_stdout { PathBuf::from("k3dgpu.toml") } else { args.out.clone() };
    let text = config_text(global, &facts, &name)?;
    if to_stdout {
        super::print_bytes(text.as_bytes());
        return Ok(EXIT_OK);
    }
    crate::output_file::write_new(&args.out, text.as_bytes(), crate::output_file::PUBLIC).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            exists(global, &args.out)
        } else {
            Error::Output { path: args.out.display().to_string(), reason: e.to_string() }
        }
    })?;
    let validate = (Global { config: Some(args.out.clone()), ..global.clone() }).k3d_gpu().lit("validate");
    crate::stderrln!("wrote {}; check it with: {validate}", crate::escape::one_line(&args.out.display().to_string()));
    Ok(EXIT_OK)
}

/// The refusal when something is at `out` already: exit 1, nothing written. The command that
/// checks the file there keeps the user's --root, --facts, --stdlib and --vendors.
fn exists(global: &Global, out: &Path) -> Error {
    let shown = crate::shell::word(&out.display().to_string());
    let validate = (Global { config: Some(out.to_path_buf()), ..global.clone() }).k3d_gpu().lit("validate");
    Error::Refused {
        message: format!("{shown} already exists; init never replaces a file, so nothing was written"),
        help: Some(format!(
            "move it away, or write another file with --out FILE (or --out - for stdout); `{validate}` checks the one you have"
        )),
    }
}

/// Refuses before reading the host when `out` is taken (a file, directory or link, even a
/// dangling one). The write checks again, without a window.
fn refuse_existing(global: &Global, out: &Path) -> Result<()> {
    match std::fs::symlink_metadata(out) {
        Ok(_) => Err(exists(global, out)),
        Err(_) => Ok(()),
    }
}

/// The file: the body compiled as `validate` would (an error there is a bug, refused with its
/// diagnostics rather than written), then the agent's placement on this host as a comment.
/// The whole text must read back as the config that was compiled: the comments, which carry
/// the host's text, add nothing to it.
fn config_text(global: &Global, facts: &Facts, path: &Path) -> Result<String> {
    let body = body(global, facts);
    let (config, agent) = compile(global, facts, path, &body)?;
    let mut text = header(facts);
    text.push_str(&body);
    text.push_str(&agent_comment(&agent));
    if crate::config::load_all("k3dgpu.toml", &text).ok().as_ref() != Some(&config) {
        return Err(Error::Refused {
            message: "the file init made does not read back as the config it checked; nothing was written".into(),
            help: Some("this is a bug in k3d-gpu init: please report it with `k3d-gpu facts` of this host".into()),
        });
    }
    Ok(text)
}

/// Compiles `body` on these facts as `validate` does, giving its config; then the agent's
/// placement when `[agent]` is added (or why it cannot be placed).
fn compile(
    global: &Global,
    facts: &Facts,
    path: &Path,
    body: &str,
) -> Result<(Config, std::result::Result<AgentPlan, Unplaced>)> {
    let name = path.display().to_string();
    let config = crate::config::load_all(&name, body)
        .map_err(|errors| Error::Invalid(errors.into_iter().map(miette::Report::new).collect()))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let inputs = super::inputs::Inputs { config, name, text: body.to_string(), dir };
    let catalog = super::inputs::load_catalog(global, &inputs)?;
    let source = super::inputs::node_image_source(&inputs)?;
    crate::compile::compile_with(&inputs.config, facts, &catalog, &source)
        .map_err(|errors| Error::Invalid(super::inputs::compile_diagnostics(&inputs, errors)))?;
    let with_agent = Config { agent: Some(Default::default()), ..inputs.config.clone() };
    let agent = match crate::compile::compile_with(&with_agent, facts, &catalog, &source) {
        Ok(g) => g.agent.ok_or(Unplaced::Nowhere),
        Err(errors) => Err(Unplaced::Refused(errors.into_iter().map(|e| e.message).collect())),
    };
    Ok((inputs.config, agent))
}

/// Why the agent would not run on this host: the compile with `[agent]` placed none, or
/// refused it (its messages).
#[derive(Debug, thiserror::Error)]
enum Unplaced {
    #[error("the compile placed no agent")]
    Nowhere,
    #[error("{}", .0.join("; "))]
    Refused(Vec<String>),
}

/// A TOML string (basic or literal, as the `toml` crate quotes it): also a quoted key.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// `text` as comment lines starting `prefix`, escaped to one line first (so nothing in it,
/// the Unicode line and paragraph separators included, ends the comment), then wrapped at a space where it grows past [`WIDTH`].
fn comment(out: &mut String, prefix: &str, text: &str) {
    let escaped = crate::escape::capped(crate::escape::one_line(text).into_owned());
    let mut line = String::from(prefix);
    for (i, word) in escaped.split(' ').enumerate() {
        if i > 0 && !word.is_empty() && line.len() + 1 + word.len() > WIDTH && line.trim_end().len() > prefix.len() {
            out.push_str(line.trim_end());
            out.push('\n');
            line = format!("{prefix}    ");
        } else {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// What the host is, as the comment at the top.
fn header(facts: &Facts) -> String {
    let h = &facts.host;
    let mut out = String::new();
    out.push_str(&format!(
        "# k3dgpu.toml for this host, written by `k3d-gpu init` (k3d-gpu {}).\n",
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str("# Check it with `k3d-gpu validate`, see what it does with `k3d-gpu plan`. Every key is in\n");
    out.push_str("# docs/config.md; keys left out take their defaults.\n#\n");
    comment(
        &mut out,
        "# host:",
        &format!(
            "{}, {} CPUs, {} memory",
            h.cpu.model.as_deref().unwrap_or("unknown CPU"),
            h.cpu.online_count,
            super::detect::gib(h.memory.total_kib)
        ),
    );
    comment(
        &mut out,
        "# os:",
        &format!(
            "{}, kernel {}",
            h.os.pretty_name.as_deref().unwrap_or("unknown"),
            h.kernel.release.as_deref().unwrap_or("unknown")
        ),
    );
    let devices = super::detect::device_lines(facts);
    if !devices.is_empty() {
        out.push_str("# devices:\n");
        for line in devices {
            comment(&mut out, "#  ", &line);
        }
    }
    if facts.vendor_filter != VendorFilter::Auto {
        comment(&mut out, "# read with:", &format!("--vendors {}", facts.vendor_filter));
    }
    let count = |level| facts.findings.iter().filter(|f| f.level == level).count();
    let (fail, warn) = (count(Level::Fail), count(Level::Warn));
    if fail + warn > 0 {
        out.push_str(&format!(
            "# findings: {fail} fail, {warn} warn; `k3d-gpu doctor` has the evidence and fixes (and\n# `k3d-gpu host-setup` the host software).\n"
        ));
    }
    out.push('\n');
    out
}

/// The keys: the cluster's name, the vendor selection and `[expect]`.
fn body(global: &Global, facts: &Facts) -> String {
    let mut out = String::new();
    out.push_str("[cluster]\n# The k3d cluster (kubectl context k3d-<name>).\n");
    out.push_str(&format!("name = {}\n\n", toml_string(&crate::config::Cluster::default().name)));

    let active: Vec<String> = facts.detected.iter().map(|d| toml_string(d.vendor.key())).collect();
    out.push_str("[vendors]\n");
    let enable = match (&facts.vendor_filter, global.vendors.is_some()) {
        (VendorFilter::Only(_), true) => {
            out.push_str(
                "# The vendors --vendors allowed when this file was written; \"auto\" is every one the\n# host has.\n",
            );
            format!("[{}]", active.join(", "))
        }
        _ => {
            out.push_str("# \"auto\": every vendor the host has; or a list, e.g. [\"intel\", \"npu\"].\n");
            toml_string("auto")
        }
    };
    out.push_str(&format!("enable = {enable}\n"));
    out.push_str("# Vendors to leave out even when detected.\nexclude = []\n\n");

    out.push_str("[expect]\n");
    out.push_str("# What this host has: `validate`, `plan` and `apply` fail on a machine without it.\n");
    if active.is_empty() {
        out.push_str("# No vendor k3d-gpu deploys for is active here; `k3d-gpu detect` says why each is not.\n");
    }
    out.push_str(&format!("vendors = [{}]\n", active.join(", ")));
    let mut devices: BTreeMap<&str, u32> = BTreeMap::new();
    for d in facts.detected.iter().filter(|d| d.devices > 0) {
        for resource in &d.resources {
            *devices.entry(resource).or_default() += d.devices;
        }
    }
    if !devices.is_empty() {
        let entries: Vec<String> = devices.iter().map(|(r, n)| format!("{} = {n}", toml_string(r))).collect();
        out.push_str("# At least this many of each device resource.\n");
        out.push_str(&format!("devices = {{ {} }}\n", entries.join(", ")));
    }
    out.push_str("# Uncomment to hold the config to this very hardware (any change fails it):\n");
    out.push_str(&format!("# fingerprint = {}\n", toml_string(&facts.fingerprint)));
    out
}

/// The agent, off, with where it would run here.
fn agent_comment(agent: &std::result::Result<AgentPlan, Unplaced>) -> String {
    let mut out = String::from("\n");
    out.push_str("# The agent (an OpenAI-compatible LLM server) is off. With [agent] it would run here as:\n");
    match agent {
        Ok(plan) => {
            let resource = plan.resource.as_deref().unwrap_or("no device resource");
            comment(&mut out, "#  ", &format!("{} on {} ({resource}): {}", plan.backend, plan.device, plan.reason));
            out.push_str("# `k3d-gpu agent` explains it. Uncomment to deploy it (the model is downloaded when it\n");
            out.push_str("# starts); device = \"auto\" lets the host decide again.\n");
            out.push_str("# [agent]\n");
            out.push_str(&format!("# device = {}\n", toml_string(&plan.device.to_ascii_lowercase())));
        }
        Err(why) => {
            comment(&mut out, "#   nowhere:", &why.to_string());
            out.push_str("# `k3d-gpu agent` explains it once [agent] is added.\n");
        }
    }
    out
}
