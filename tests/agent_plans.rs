//! Golden plans for the agent and its add-ons: the reference's two add-on placement cases, the
//! firmware gatekeeper's refusal, the NPU forced, the sandbox, and removal keeping the data.
//! Each golden (`tests/golden/agent/<case>.txt`) holds the placement `k3d-gpu agent` explains
//! and the plan text. Regenerate with `UPDATE_GOLDEN=1 cargo test --test agent_plans` and
//! review the diff.

mod support;

use std::sync::LazyLock;

use k3d_gpu::catalog::Catalog;
use k3d_gpu::compile::{DesiredGraph, compile};
use k3d_gpu::config::load_str;
use k3d_gpu::facts::Facts;
use k3d_gpu::observe::Observed;
use k3d_gpu::plan::render::{Style, text};
use support::{check_golden, converged, facts_of, placeholder_inputs};

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::embedded().unwrap());

fn graph(toml: &str, facts: &Facts) -> DesiredGraph {
    let config = load_str("k3dgpu.toml", toml).unwrap_or_else(|e| panic!("{e:?}"));
    compile(&config, facts, &CATALOG).unwrap_or_else(|e| panic!("{toml}: {e:#?}"))
}

/// Meteor Lake with its NPU firmware current: an iGPU without XMX, and a usable NPU.
fn meteor_lake_current_npu() -> Facts {
    let mut host = facts_of("meteor-lake-old-npu-fw").host;
    host.npus[0].firmware.as_mut().unwrap().build_date = Some("2026-07-01".into());
    k3d_gpu::facts::build(host, vec![], &k3d_gpu::facts::VendorFilter::Auto)
}

fn golden(case: &str, desired: &DesiredGraph, observed: &Observed) -> Result<(), String> {
    let plan = k3d_gpu::plan::plan(desired, observed, placeholder_inputs());
    let placement = match &desired.agent {
        Some(a) => serde_json::to_string_pretty(a).unwrap(),
        None => "(no agent)".into(),
    };
    let body = format!(
        "# placement (k3d-gpu agent)\n{placement}\n\n# plan\n{}",
        text(&plan, &plan.hash(), Style { color: false })
    );
    check_golden(&format!("tests/golden/agent/{case}.txt"), support::without_plan_hash(&body).as_bytes())
}

#[test]
fn golden_agent_plans() {
    let addons = "[sharing]\nshared = 1\n[agent]\n[agent.chat]\n[addons.vlm]\n[addons.stt]\n[addons.video]\n";
    let lnl = facts_of("lunar-lake-npu");
    let mtl = meteor_lake_current_npu();
    let mut stale = Vec::new();
    let fresh = Observed::nothing();
    // iGPU without XMX + NPU: LLM on the P-cores, video on the iGPU, stt on the NPU, vlm on the
    // CPU with a warning.
    stale.extend(golden("igpu-without-xmx-and-npu", &graph(addons, &mtl), &fresh).err());
    // One XMX GPU, not shared: the LLM keeps it, video decodes on the CPU.
    stale.extend(golden("one-xmx-gpu", &graph(addons, &lnl), &fresh).err());
    // The GuC gatekeeper refuses the GPU: auto serves on the CPU, and the plan says why.
    stale.extend(golden("gatekeeper-refusal", &graph("[agent]\n", &facts_of("rpl-guc-too-old")), &fresh).err());
    stale.extend(golden("npu-forced", &graph("[agent]\ndevice = \"npu\"\n", &lnl), &fresh).err());
    stale.extend(
        golden("embeddings-and-sandbox", &graph("[agent]\n[addons.embeddings]\n[sandbox]\n", &mtl), &fresh).err(),
    );
    // Removal: everything the add-ons ran goes, every PVC (and the namespace) stays, and the
    // plan says which data is kept.
    let before = graph(&format!("{addons}[addons.embeddings]\ndevice = \"cpu\"\n"), &lnl);
    stale.extend(golden("removal-keeps-pvcs", &graph("[sharing]\nshared = 1\n", &lnl), &converged(&before)).err());
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}

#[test]
fn a_converged_cluster_with_every_add_on_plans_nothing() {
    let toml = "[agent]\n[agent.chat]\n[addons.vlm]\n[addons.video]\n[addons.embeddings]\n[sandbox]\n";
    let g = graph(toml, &meteor_lake_current_npu());
    let plan = k3d_gpu::plan::plan(&g, &converged(&g), placeholder_inputs());
    assert!(plan.actions.is_empty(), "{:?}", plan.actions.iter().map(|a| &a.id).collect::<Vec<_>>());
}
