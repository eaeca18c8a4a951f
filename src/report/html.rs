//! The report as one self-contained HTML page: inline styles, no script, a
//! Content-Security-Policy that starts with `default-src 'none'` (so the page loads nothing),
//! and the resource graph as an inline SVG laid out in-process (`layout.rs`: repeats grouped,
//! layout-rs for a bounded number of boxes, columns beyond).

use layout::backends::svg::SVGWriter;
use layout::core::base::Orientation;
use layout::core::geometry::Point;
use layout::core::style::StyleAttr;
use layout::std_shapes::shapes::{Arrow, Element, ShapeKind};
use layout::topo::layout::VisualGraph;

use super::{GraphNode, Report, TestResult};

/// The page's policy: nothing may load; only the page's own inline styles apply (the SVG's
/// `<style>` and the `style` attributes), which `default-src 'none'` alone would also block.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// HTML text: `&`, `<`, `>`, `"` and `'` escaped, control characters made visible.
fn esc(text: &str) -> String {
    let visible = crate::escape::one_line(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The graph as SVG: a box per resource (or, in a big graph, per group of resources that
/// repeat: `report/layout.rs`), an arrow from each dependency. Labels are cleaned to printable
/// ASCII first (layout-rs escapes markup, but a label is still the user's text). A bounded
/// number of boxes goes to layout-rs; more are laid out in columns, in linear time.
pub fn svg(graph: &[GraphNode]) -> String {
    if graph.is_empty() {
        return String::new();
    }
    let boxes = super::layout::boxes(graph);
    if boxes.len() > super::layout::LAYERED_ABOVE {
        return super::layout::layered_svg(&boxes);
    }
    let mut vg = VisualGraph::new(Orientation::LeftToRight);
    let mut handles = Vec::with_capacity(boxes.len());
    for b in &boxes {
        let text = super::layout::text(b);
        let width = 12.0 + 7.0 * text.chars().count() as f64;
        let element = Element::create(
            ShapeKind::new_box(&text),
            StyleAttr::simple(),
            Orientation::TopToBottom,
            Point::new(width, 36.0),
        );
        handles.push(vg.add_node(element));
    }
    for (at, b) in boxes.iter().enumerate() {
        for &dep in &b.depends_on {
            vg.add_edge(Arrow::simple(""), handles[dep], handles[at]);
        }
    }
    let mut writer = SVGWriter::new();
    // layout-rs's rank and crossing optimisers (layout-rs 0.1.3, src/topo/layout.rs
    // `split_long_edges`) cost far more than the rest of the layout: a report of 100-150
    // boxes took 6-14x what one of 1,000 claims (laid out in columns) did. Above
    // `OPTIMISED_UP_TO` boxes they are skipped; the layout is still layered, only with more
    // crossings.
    vg.do_it(false, boxes.len() > super::layout::OPTIMISED_UP_TO, false, &mut writer);
    // Drop the XML declaration: inside HTML the <svg> element stands alone.
    let svg = writer.finalize();
    // It scales down to the page's width (the viewBox keeps its proportions).
    match svg.find("<svg") {
        Some(at) => format!("<svg style=\"max-width: 100%; height: auto;\"{}", &svg[at + 4..]),
        None => svg,
    }
}

/// The page.
pub fn html(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str(&format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"));
    o.push_str(&format!("<title>k3d-gpu report: {}</title>\n</head>\n", esc(&r.cluster)));
    o.push_str(
        "<body style=\"font-family: sans-serif; max-width: 70em; margin: 1em auto; padding: 0 1em; color: #222;\">\n",
    );
    o.push_str(&format!("<h1>k3d-gpu report: cluster {}</h1>\n", esc(&r.cluster)));
    o.push_str(&format!("<h2>Host</h2>\n<p>fingerprint <code>{}</code></p>\n", esc(&r.host.fingerprint)));
    o.push_str("<table style=\"border-collapse: collapse;\">\n<tr><th style=\"text-align: left;\">engine</th><th>devices</th><th style=\"text-align: left;\">resources</th></tr>\n");
    if r.host.engines.is_empty() {
        o.push_str("<tr><td colspan=\"3\">no accelerator engines: CPU only</td></tr>\n");
    }
    for g in &r.host.engines {
        o.push_str(&format!(
            "<tr><td>{}</td><td style=\"text-align: right;\">{}</td><td>{}</td></tr>\n",
            esc(&g.vendor),
            g.devices,
            esc(&g.resources.join(", "))
        ));
    }
    for i in &r.host.inactive {
        o.push_str(&format!("<tr><td>{}</td><td>-</td><td>inactive: {}</td></tr>\n", esc(&i.vendor), esc(&i.reason)));
    }
    o.push_str("</table>\n");
    o.push_str(&format!("<h2>Findings ({})</h2>\n<ul>\n", r.findings.len()));
    for f in &r.findings {
        o.push_str(&format!("<li><strong>{}</strong> {} <code>[{}]</code>", f.level, esc(&f.text), esc(&f.code)));
        if let Some(fix) = &f.fix {
            o.push_str(&format!("<br>fix: {}", esc(fix)));
        }
        o.push_str("</li>\n");
    }
    o.push_str("</ul>\n");
    o.push_str(&format!(
        "<h2>Plan</h2>\n<p>hash <code>{}</code>, {} action(s)</p>\n<ul>\n",
        esc(&r.plan.hash),
        r.plan.actions.len()
    ));
    for a in &r.plan.actions {
        o.push_str(&format!(
            "<li><strong>{}</strong> <code>{}</code>: {}</li>\n",
            esc(&a.action),
            esc(&a.id),
            esc(&a.reason)
        ));
    }
    for w in &crate::compile::warnings::summarised(&r.plan.warnings) {
        o.push_str(&format!("<li><strong>warning</strong> {} <code>[{}]</code></li>\n", esc(&w.text), esc(&w.code)));
    }
    o.push_str("</ul>\n");
    o.push_str(&format!("<h2>Resource graph ({} resources)</h2>\n<div style=\"overflow: auto;\">\n", r.graph.len()));
    o.push_str(&svg(&r.graph));
    o.push_str("\n</div>\n<h2>Cluster</h2>\n<p>");
    match (&r.state, &r.observed_note) {
        (Some(s), _) if s.exists => {
            o.push_str(&format!("{} node container(s): {}", s.nodes.len(), esc(&s.nodes.join(", "))));
            if let Some((ready, all)) = s.ready_nodes {
                o.push_str(&format!("; {ready}/{all} node(s) ready; {} managed object(s)", s.managed_objects));
            }
        }
        (Some(_), _) => o.push_str("does not exist"),
        (None, note) => o.push_str(&format!("not observed ({})", esc(note.as_deref().unwrap_or("offline")))),
    }
    o.push_str("</p>\n");
    if let Some(d) = &r.dashboard {
        o.push_str(&format!(
            "<h2>Dashboard</h2>\n<p><a href=\"{0}\">{0}</a>, after <code>{1}</code>; sign in as admin with the password <code>{2}</code> prints.</p>\n",
            esc(&d.url),
            esc(&d.port_forward),
            esc(&d.password)
        ));
    }
    if let Some(t) = &r.test {
        test_section(&mut o, t);
    }
    o.push_str("</body>\n</html>\n");
    o
}

/// `report --test FILE`: each smoke pod's verdict, with the cause and fix of a failure.
fn test_section(o: &mut String, t: &TestResult) {
    o.push_str(&format!("<h2>Test: {} ({} pod(s))</h2>\n<ul>\n", t.verdict(), t.pods.len()));
    for p in &t.pods {
        let (seen, expected) = (p.verdict.seen, p.expected);
        let (resource, node) = (esc(&p.resource.to_string()), esc(&p.node.to_string()));
        o.push_str(&format!(
            "<li>{} <code>{resource}</code> on <code>{node}</code>: {seen} of {expected} usable",
            p.word()
        ));
        for (label, line) in p.notes() {
            o.push_str(&format!("<br>{label}: <code>{}</code>", esc(line)));
        }
        o.push_str("</li>\n");
    }
    for s in &t.shares {
        let (resource, node) = (esc(&s.resource.to_string()), esc(&s.node.to_string()));
        o.push_str(&format!(
            "<li>{} <code>{resource}</code> on <code>{node}</code> shared: {}",
            s.word(),
            esc(&s.together())
        ));
        for (label, line) in s.notes() {
            o.push_str(&format!("<br>{label}: <code>{}</code>", esc(line)));
        }
        o.push_str("</li>\n");
    }
    for c in &t.claims {
        o.push_str(&format!(
            "<li>{} claim template <code>{}/{}</code>",
            c.word(),
            esc(&c.namespace.to_string()),
            esc(&c.template.to_string())
        ));
        for (label, line) in c.notes() {
            o.push_str(&format!("<br>{label}: <code>{}</code>", esc(line)));
        }
        o.push_str("</li>\n");
    }
    for p in &t.problems {
        o.push_str(&format!("<li>FAIL {}<br>fix: <code>{}</code></li>\n", esc(&p.text.to_string()), esc(&p.fix)));
    }
    o.push_str("</ul>\n");
}
