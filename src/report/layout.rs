//! The report graph made readable at any size, in time linear in the graph.
//!
//! - **Grouping.** A graph of more than [`GROUP_ABOVE`] resources has repeats: a label per
//!   fleet node (`node-label/<node>/<key>`), a check per node, a template per claim. Each id
//!   is split at `/`; of the ids that agree on every segment but one, those at least
//!   [`MIN_GROUP`] strong become one box (`node-label/*/<key>`, `×1000`). An id takes the
//!   pattern that the most ids share. Edges between groups are merged.
//! - **Layout.** Up to [`LAYERED_ABOVE`] boxes go to layout-rs (its crossing minimisation is
//!   superlinear, so it only ever sees a bounded graph, and above [`OPTIMISED_UP_TO`] boxes
//!   it runs without it). Beyond that, boxes are placed in
//!   columns by dependency depth (longest path from a resource without dependencies), in
//!   id order within a column, with edges as curves: O(boxes + edges).

use std::collections::{BTreeMap, HashMap};

use super::GraphNode;

/// Graphs up to this many resources are drawn a box per resource.
pub const GROUP_ABOVE: usize = 120;
/// The fewest ids one box stands for.
pub const MIN_GROUP: usize = 4;
/// Box counts above this are laid out in columns rather than by layout-rs.
pub const LAYERED_ABOVE: usize = 150;
/// Box counts above this are laid out by layout-rs without its rank and crossing
/// optimisation, which is superlinear (`html::svg`).
pub const OPTIMISED_UP_TO: usize = 60;

/// One box: its label, how many resources it stands for, and its dependencies (box indices).
#[derive(Debug, Clone, PartialEq)]
pub struct Box {
    pub label: String,
    pub count: usize,
    pub depends_on: Vec<usize>,
}

/// The graph's boxes, in the order of their first resource; deterministic.
pub fn boxes(graph: &[GraphNode]) -> Vec<Box> {
    let pattern_of = patterns(graph);
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<Box> = Vec::new();
    let mut of_id: HashMap<&str, usize> = HashMap::with_capacity(graph.len());
    for (node, pattern) in graph.iter().zip(&pattern_of) {
        let label = pattern.as_deref().unwrap_or(&node.id);
        let at = *index.entry(label).or_insert_with(|| {
            out.push(Box { label: label.to_string(), count: 0, depends_on: Vec::new() });
            out.len() - 1
        });
        out[at].count += 1;
        of_id.insert(&node.id, at);
    }
    for node in graph {
        let at = of_id[node.id.as_str()];
        for dep in &node.depends_on {
            if let Some(&from) = of_id.get(dep.as_str())
                && from != at
            {
                out[at].depends_on.push(from);
            }
        }
    }
    for b in &mut out {
        b.depends_on.sort_unstable();
        b.depends_on.dedup();
    }
    out
}

/// For each id, the pattern it is grouped under, or `None` to stand alone.
fn patterns(graph: &[GraphNode]) -> Vec<Option<String>> {
    if graph.len() <= GROUP_ABOVE {
        return vec![None; graph.len()];
    }
    let candidates = |id: &str| -> Vec<String> {
        let parts: Vec<&str> = id.split('/').collect();
        (0..parts.len())
            .filter(|&i| parts.len() > 1 && !parts[i].is_empty())
            .map(|i| {
                let mut p = parts.clone();
                p[i] = "*";
                p.join("/")
            })
            .collect()
    };
    let all: Vec<Vec<String>> = graph.iter().map(|n| candidates(&n.id)).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for c in all.iter().flatten() {
        *count.entry(c.as_str()).or_default() += 1;
    }
    all.iter()
        .map(|cs| {
            // The pattern most ids share; among equals the one with the star furthest right
            // (`…/ns/*` before `…/*/name`), so a choice never depends on order.
            let best = cs.iter().enumerate().max_by_key(|(i, c)| (count[c.as_str()], *i))?;
            (count[best.1.as_str()] >= MIN_GROUP).then(|| best.1.clone())
        })
        .collect()
}

/// A box's text: its label, cut to 60 printable ASCII characters, and `×N` for a group.
pub fn text(b: &Box) -> String {
    let label: String =
        b.label.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).take(60).collect();
    if b.count > 1 { format!("{label} ×{}", b.count) } else { label }
}

/// Columns by depth: each box one column right of its deepest dependency. A cycle among
/// groups (members depend across two groups both ways) is cut where it closes.
pub fn columns(boxes: &[Box]) -> Vec<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    let mut depth = vec![0usize; boxes.len()];
    let mut state = vec![State::New; boxes.len()];
    // Iterative depth-first search: a graph of 100k boxes must not overflow the stack.
    for start in 0..boxes.len() {
        if state[start] != State::New {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = State::Open;
        while let Some(&mut (at, ref mut next)) = stack.last_mut() {
            if let Some(&dep) = boxes[at].depends_on.get(*next) {
                *next += 1;
                if state[dep] == State::New {
                    state[dep] = State::Open;
                    stack.push((dep, 0));
                }
            } else {
                depth[at] = boxes[at]
                    .depends_on
                    .iter()
                    .filter(|&&d| state[d] == State::Done)
                    .map(|&d| depth[d] + 1)
                    .max()
                    .unwrap_or(0);
                state[at] = State::Done;
                stack.pop();
            }
        }
    }
    depth
}

const ROW: f64 = 46.0;
const HEIGHT: f64 = 36.0;
const GAP: f64 = 60.0;
const MARGIN: f64 = 10.0;

fn width(text: &str) -> f64 {
    12.0 + 7.0 * text.chars().count() as f64
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The boxes in columns, as SVG: linear in boxes and edges.
pub fn layered_svg(boxes: &[Box]) -> String {
    let depth = columns(boxes);
    let texts: Vec<String> = boxes.iter().map(text).collect();
    let mut by_column: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, d) in depth.iter().enumerate() {
        by_column.entry(*d).or_default().push(i);
    }
    let mut x_of = vec![0.0; boxes.len()];
    let mut y_of = vec![0.0; boxes.len()];
    let mut x = MARGIN;
    let mut tallest = 0usize;
    for members in by_column.values_mut() {
        members.sort_by(|a, b| boxes[*a].label.cmp(&boxes[*b].label));
        let widest = members.iter().map(|&i| width(&texts[i])).fold(0.0, f64::max);
        for (row, &i) in members.iter().enumerate() {
            x_of[i] = x;
            y_of[i] = MARGIN + row as f64 * ROW;
        }
        tallest = tallest.max(members.len());
        x += widest + GAP;
    }
    let (w, h) = (x - GAP + MARGIN, 2.0 * MARGIN + tallest as f64 * ROW);
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" style=\"max-width: 100%; height: auto;\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\">\n\
         <style>rect {{ fill: #fff; stroke: #333; }} text {{ font: 12px monospace; }} path {{ fill: none; stroke: #888; }}</style>\n"
    );
    for (i, b) in boxes.iter().enumerate() {
        let (bx, by) = (x_of[i], y_of[i]);
        for &d in &b.depends_on {
            let (sx, sy) = (x_of[d] + width(&texts[d]), y_of[d] + HEIGHT / 2.0);
            let (tx, ty) = (bx, by + HEIGHT / 2.0);
            let mid = (sx + tx) / 2.0;
            o.push_str(&format!("<path d=\"M{sx:.0},{sy:.0} C{mid:.0},{sy:.0} {mid:.0},{ty:.0} {tx:.0},{ty:.0}\"/>\n"));
        }
    }
    for (i, t) in texts.iter().enumerate() {
        let (bx, by) = (x_of[i], y_of[i]);
        o.push_str(&format!(
            "<rect x=\"{bx:.0}\" y=\"{by:.0}\" width=\"{:.0}\" height=\"{HEIGHT:.0}\"/><text x=\"{:.0}\" y=\"{:.0}\">{}</text>\n",
            width(t),
            bx + 6.0,
            by + 22.0,
            esc(t)
        ));
    }
    o.push_str("</svg>");
    o
}
