//! `k3d-gpu show PLANFILE`: a saved plan read back, as `plan` printed it (text, or plan/v1
//! with --json), with what it was made from and how to apply it. Reads nothing else: no
//! config, no host, no Docker.

use std::path::Path;

use crate::cli::Global;
use crate::error::{EXIT_OK, Result};
use crate::plan::Plan;

pub fn run(global: &Global, file: &Path) -> Result<u8> {
    let (plan, bytes) = super::apply::read_plan_file(file)?;
    if global.json {
        super::print_bytes(&plan.to_bytes());
        return Ok(EXIT_OK);
    }
    super::print_bytes(text(file, &plan, &bytes).as_bytes());
    Ok(EXIT_OK)
}

/// The text: a header (the file, the options it was made with, offline or not), the plan as
/// `plan` prints it, and the command that applies it.
pub fn text(file: &Path, plan: &Plan, bytes: &[u8]) -> String {
    let canonical = plan.to_bytes();
    let hash = crate::canonical::sha256(&canonical);
    let name = crate::escape::one_line(&file.display().to_string()).into_owned();
    let mut out = format!("plan file {name}\n");
    out.push_str(&format!(
        "made with: {}\n",
        crate::escape::one_line(&super::made_from::describe(plan.inputs.made_from.as_ref()))
    ));
    let offline = super::apply::made_offline(plan);
    if offline {
        out.push_str(
            "made against nothing (--offline, or a saved observation of nothing): `apply` refuses it; plan against what exists to apply\n",
        );
    }
    if canonical != bytes {
        out.push_str("its bytes are not the plan's canonical bytes (edited?): `apply` refuses it\n");
    }
    out.push('\n');
    out.push_str(&crate::plan::render::text(plan, &hash, crate::plan::render::Style { color: false }));
    if !offline && canonical == bytes && !plan.is_empty() {
        let apply = crate::shell::Command::new("k3d-gpu").lit("apply").arg(file.display().to_string());
        out.push_str(&format!("to apply it: {}\n", crate::escape::one_line(&apply.to_string())));
    }
    out
}
