//! The plan as text: grouped by resource with `+ ~ -/+ -` markers, unified diffs of what
//! changes, what a create creates (`attributes`), a plain statement when the cluster's state
//! will be deleted, and a summary.
//! Colour only when asked (a TTY without NO_COLOR); the words carry the meaning without it.
//! Ids, reasons, diff lines and warnings come from manifests and the cluster: every one is
//! escaped (`escape`) before it is painted, so only our own colour codes reach the terminal
//! and no name can start a line of its own.

use std::fmt::Write;

use similar::TextDiff;

use super::{Action, ActionKind, Plan};
use crate::escape::one_line;

#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }
}

fn marker(kind: ActionKind) -> (&'static str, &'static str) {
    match kind {
        ActionKind::Create => ("+", "32"),
        ActionKind::Update => ("~", "33"),
        ActionKind::Replace => ("-/+", "35"),
        ActionKind::Delete => ("-", "31"),
    }
}

fn yaml(value: &Option<serde_json::Value>) -> String {
    match value {
        None => String::new(),
        Some(v) => serde_saphyr::to_string(v).unwrap_or_else(|_| v.to_string()),
    }
}

fn render_action(out: &mut String, a: &Action, style: Style) {
    let (mark, color) = marker(a.action);
    let verb = format!("{:?}", a.action).to_lowercase();
    let _ = writeln!(out, "{} {}  ({verb})", style.paint(color, &format!("{mark:>3}")), one_line(&a.id));
    let _ = writeln!(out, "      {}", one_line(&a.reason.text));
    if !a.replace_paths.is_empty() {
        let _ = writeln!(out, "      forces replacement: {}", one_line(&a.replace_paths.join(", ")));
    }
    if a.action == ActionKind::Replace && a.id.starts_with("k3d/cluster/") {
        let _ = writeln!(
            out,
            "      {}",
            style.paint(
                "1;31",
                "this deletes the cluster's state: every workload, volume and object in it; back up what you need"
            )
        );
    }
    // A create shows what it creates (masked, long values by digest, bounded).
    if a.action == ActionKind::Create
        && let Some(after) = &a.after
    {
        for line in super::attributes::lines(&a.id, after) {
            let _ = writeln!(out, "        {}", one_line(&line));
        }
    }
    if matches!(a.action, ActionKind::Update | ActionKind::Replace) {
        let before = yaml(&a.before);
        let after = yaml(&a.after);
        let diff = TextDiff::from_lines(&before, &after);
        let diff = diff.unified_diff().context_radius(2).header("observed", "desired").to_string();
        for line in diff.lines() {
            let line = &*one_line(line);
            let painted = match line.chars().next() {
                Some('+') if !line.starts_with("+++") => style.paint("32", line),
                Some('-') if !line.starts_with("---") => style.paint("31", line),
                Some('@') => style.paint("36", line),
                _ => line.to_string(),
            };
            let _ = writeln!(out, "      {painted}");
        }
    }
}

pub fn text(plan: &Plan, hash: &str, style: Style) -> String {
    let mut out = String::new();
    if plan.is_empty() {
        let _ = writeln!(out, "No changes: the cluster matches the config.");
    }
    // Replacements first, then creates, updates, deletes: the order a reader weighs them.
    for kind in [ActionKind::Replace, ActionKind::Create, ActionKind::Update, ActionKind::Delete] {
        for a in plan.actions.iter().filter(|a| a.action == kind) {
            render_action(&mut out, a, style);
        }
    }
    if !plan.verify.is_empty() {
        let _ = writeln!(out, "\nverify after apply:");
        for id in &plan.verify {
            let _ = writeln!(out, "      {}", one_line(id));
        }
    }
    // Each once, repeats summarised; plan/v1 keeps them all.
    for w in &crate::compile::warnings::summarised(&plan.warnings) {
        let _ = writeln!(out, "\n{} {} [{}]", style.paint("33", "warning:"), one_line(&w.text), one_line(&w.code));
    }
    let s = &plan.summary;
    let _ = writeln!(
        out,
        "\nPlan: {} to create, {} to update, {} to replace, {} to delete.",
        s.create, s.update, s.replace, s.delete
    );
    let _ = writeln!(out, "plan hash: {hash}");
    out
}
