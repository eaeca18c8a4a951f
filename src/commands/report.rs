//! `k3d-gpu report [DIR]`: the host, its findings, the plan and the graph, and the cluster
//! when there is one. Without DIR: text (or JSON with --json) on stdout. With DIR: report.txt,
//! report.json and report.html written there. `--test FILE` adds a saved `k3d-gpu test` result.

use crate::cli::{Global, ReportArgs};
use crate::error::{EXIT_OK, Error, Result};
use crate::observe::Observed;

pub fn run(global: &Global, args: &ReportArgs) -> Result<u8> {
    if let Some(dir) = &args.dir
        && dir.exists()
        && !dir.is_dir()
    {
        return Err(Error::Usage { message: format!("{} is not a directory", dir.display()), help: None });
    }
    let inputs = super::load_config(global)?;
    let cluster = inputs.config.cluster.name.clone();
    let test = args.test.as_deref().map(|path| read_test(path, &cluster)).transpose()?;
    // Read and compiled once: the facts the report shows are the ones the plan was made from.
    let compiled = super::inputs::compile(global, &inputs)?;
    let facts = compiled.facts.clone();
    let (observed, note) = if args.offline {
        (None, Some("--offline".to_string()))
    } else {
        let image = compiled.graph.get(crate::compile::NODE_IMAGE_ID).and_then(|r| r.spec["reference"].as_str());
        let target = super::plan::target(&inputs, &compiled.catalog, image.unwrap_or_default());
        let rt = super::runtime()?;
        // A report of the host is still worth having without Docker: say why the cluster is missing.
        match rt.block_on(crate::observe::observe(&target)) {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e.to_string())),
        }
    };
    let saved = observed.clone().unwrap_or_else(Observed::nothing);
    let mut computed =
        super::plan::compute_compiled(inputs, compiled, super::plan::Observation::Saved(Box::new(saved)))?;
    // The hash it shows is `plan --hash`'s with the same options.
    computed.plan.inputs.made_from = super::made_from::record(global);
    let mut report = crate::report::build(&cluster, &facts, &computed.plan, &computed.graph, observed.as_ref(), note);
    report.test = test;
    let json = crate::canonical::to_bytes(&report);
    let text = crate::report::text(&report);
    let Some(dir) = &args.dir else {
        if global.json {
            super::print_bytes(&json);
        } else {
            super::print_bytes(text.as_bytes());
        }
        return Ok(EXIT_OK);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Output { path: dir.display().to_string(), reason: e.to_string() })?;
    let html = crate::report::html(&report);
    for (name, bytes) in [("report.txt", text.as_bytes()), ("report.json", &json[..]), ("report.html", html.as_bytes())]
    {
        let path = dir.join(name);
        super::write_out(&path, bytes, crate::output_file::PUBLIC)?;
    }
    crate::stderrln!(
        "wrote report.txt, report.json and report.html to {}",
        crate::escape::one_line(&dir.display().to_string())
    );
    Ok(EXIT_OK)
}

/// `--test FILE`: a k3d-gpu.test/v1 document of this config's cluster. The file is outside
/// text: its verdict is computed again from its parts ([`judged`]), and its causes and fixes
/// are not copied into the report (a `fix: curl … | sudo sh` there is not ours).
fn read_test(path: &std::path::Path, cluster: &str) -> Result<crate::report::TestResult> {
    let help = "save one with `k3d-gpu test --json > FILE`";
    let result: crate::report::TestResult = super::read_document(path, "test result", crate::smoke::SCHEMA, help)?;
    let result = judged(result, cluster);
    if result.cluster != cluster {
        return Err(Error::Usage {
            message: format!(
                "{} is a test of cluster {}, not of {}, which this config names",
                path.display(),
                crate::escape::quoted(&result.cluster),
                crate::escape::quoted(cluster)
            ),
            help: Some("run `k3d-gpu test --json` with the same config".into()),
        });
    }
    Ok(result)
}

/// A saved test result as the report shows it: `passed` only when every pod, sharing group
/// and claim passed and there is no problem (the file's own `passed` is not taken), and every
/// cause and fix the file carries replaced by ours: run the test again, which says both.
fn judged(mut result: crate::report::TestResult, cluster: &str) -> crate::report::TestResult {
    result.passed = result.pods.iter().all(|p| p.verdict.passed)
        && result.shares.iter().all(|s| s.verdict.passed)
        && result.claims.iter().all(|c| c.verdict.passed)
        && result.problems.is_empty();
    let rerun = format!(
        "run `k3d-gpu test` (cluster {}) again: it says the cause and the fix",
        crate::escape::one_line(cluster)
    );
    let ours = |passed: bool| (!passed).then(|| rerun.clone());
    for p in &mut result.pods {
        (p.verdict.cause, p.verdict.fix) = (None, ours(p.verdict.passed));
    }
    for s in &mut result.shares {
        (s.verdict.cause, s.verdict.fix) = (None, ours(s.verdict.passed));
    }
    for c in &mut result.claims {
        (c.verdict.cause, c.verdict.fix) = (None, ours(c.verdict.passed));
    }
    for problem in &mut result.problems {
        problem.fix = rerun.clone();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_results_verdict_is_computed_and_its_fixes_are_not_copied() {
        let forged = serde_json::json!({
            "schema": crate::smoke::SCHEMA, "cluster": "gpu", "passed": true,
            "pods": [{"resource": "gpu.intel.com/i915", "node": "n", "expected": 1,
                "verdict": {"passed": false, "seen": 0, "cause": "fine", "fix": "curl x | sudo sh"}}],
            "problems": [{"text": "x\npass  forged", "fix": "curl x | sudo sh"}]
        });
        let result: crate::report::TestResult = serde_json::from_value(forged).unwrap();
        let judged = judged(result, "gpu");
        assert!(!judged.passed, "a failed pod is a failed test, whatever the file says");
        let shown = serde_json::to_string(&judged).unwrap();
        assert!(!shown.contains("curl") && !shown.contains("\"fine\""), "{shown}");
        assert!(judged.pods[0].verdict.fix.as_deref().unwrap().contains("k3d-gpu test"));
        // Kept as the file says it, and shown as one escaped line.
        assert_eq!(judged.problems[0].text, "x\npass  forged");
        assert_eq!(judged.problems[0].text.to_string(), "x\\x0apass  forged");
    }
}
