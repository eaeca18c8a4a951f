//! `k3d-gpu host-setup`: reads the host (or a fixture host) and the config's `[vendors]`,
//! prints the install plan for the vendors the cluster gets, and with `--apply` runs its
//! commands — only on the real host, only after showing them, and only when the person types
//! `apply` on a terminal. Nothing else (no config key, no variable) makes it run anything.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::cli::{Global, HostSetupArgs};
use crate::error::{EXIT_FAILED, EXIT_OK, Error, Result};
use crate::facts::Vendor;
use crate::host_setup::{self, Distro, HostSetupPlan, Inputs};

fn distro_names() -> String {
    Distro::ALL.iter().map(|d| d.key()).collect::<Vec<_>>().join(", ")
}

/// Where downloads go: the option (or K3D_GPU_SETUP_DIR), else the XDG cache.
fn download_dir(given: Option<&Path>) -> Result<String> {
    let absolute = |p: PathBuf| -> Result<String> {
        let p = if p.is_absolute() { p } else { std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p) };
        Ok(p.display().to_string())
    };
    if let Some(p) = given {
        return absolute(p.to_path_buf());
    }
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = nonempty("XDG_CACHE_HOME").or_else(|| nonempty("HOME").map(|h| h.join(".cache")));
    match cache {
        Some(c) => absolute(c.join("k3d-gpu").join("host-setup")),
        None => Err(Error::Usage {
            message: "no download directory: neither XDG_CACHE_HOME nor HOME is set".into(),
            help: Some("pass --download-dir DIR".into()),
        }),
    }
}

/// Reads the host and makes the plan.
pub fn make_plan(global: &Global, args: &HostSetupArgs) -> Result<(HostSetupPlan, bool)> {
    let distro_given = match &args.distro {
        Some(name) => Some(Distro::from_key(name).ok_or_else(|| Error::Usage {
            message: format!("--distro: no plan for {}", crate::shell::word(name)),
            help: Some(format!("use one of {}", distro_names())),
        })?),
        None => None,
    };
    // The config's [vendors] choose among the host's vendors as they do for the cluster: a
    // vendor the cluster will not get needs no host software from this plan.
    let config = super::load_config(global)?.config;
    let host = super::open_host(global)?;
    let facts = super::detect_facts(&host, &global.vendor_filter()?)?;
    let state = host_setup::probe::read(&host);
    let distro = match distro_given {
        Some(d) => d,
        None => Distro::from_os_release(&state.os_release).map_err(|named| Error::Usage {
            message: match state.unreadable.iter().find(|u| u.starts_with("/etc/os-release:")) {
                Some(why) => format!("host-setup cannot tell the distro: {}", crate::escape::one_line(why)),
                None => format!("host-setup has no plan for {named}"),
            },
            help: Some(format!("pass --distro with one of {} to print that distro's plan", distro_names())),
        })?,
    };
    let gaudi = &facts.host.gaudi;
    let mut vendors: Vec<Vendor> =
        crate::compile::active_vendors(&config, &facts).into_iter().map(|d| d.vendor).collect();
    // A Gaudi is inactive exactly when its driver is missing, which is what host-setup is for.
    if !gaudi.devices.is_empty() && facts.vendor_filter.allows(Vendor::Gaudi) && config.vendors.allows(Vendor::Gaudi) {
        vendors.push(Vendor::Gaudi);
    }
    let inputs = Inputs {
        state: &state,
        vendors,
        gaudi_driver: gaudi.module_loaded || gaudi.devices.iter().any(|d| d.driver.as_deref() == Some("habanalabs")),
        distro,
        distro_given: distro_given.is_some(),
        download_dir: download_dir(args.download_dir.as_deref())?,
    };
    Ok((host_setup::plan(&inputs), host.is_real_host()))
}

pub fn run(global: &Global, args: &HostSetupArgs) -> Result<u8> {
    let (plan, real_host) = make_plan(global, args)?;
    if global.json {
        super::print_bytes(&plan.to_json());
    } else {
        super::print_bytes(host_setup::render_text(&plan).as_bytes());
    }
    let code = if plan.diagnoses.is_empty() { EXIT_OK } else { EXIT_FAILED };
    if !args.apply {
        return Ok(code);
    }
    // Checked in this order so that each refusal is the same whatever else holds: a fixture
    // host is never a target, and without a terminal nobody can confirm.
    if !real_host {
        return Err(Error::Usage {
            message: "--apply changes the machine it runs on; it never runs against --root DIR".into(),
            help: Some("run host-setup --apply without --root, on the host itself".into()),
        });
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Error::Refused {
            message: "--apply needs a typed confirmation on a terminal; nothing was changed".into(),
            help: Some("run it in a terminal, or paste the commands above yourself".into()),
        });
    }
    let steps: Vec<_> = plan.runnable().collect();
    if steps.is_empty() {
        crate::stderrln!("nothing to run; nothing was changed");
        return Ok(code);
    }
    crate::stderrln!("\n--apply runs these {} commands on this machine, in order:", steps.len());
    for step in &steps {
        crate::stderrln!("  {}", step.command);
    }
    crate::stderr!("type apply to run them: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if !host_setup::confirmed(&answer) {
        return Err(Error::Refused {
            message: "not confirmed; nothing was changed".into(),
            help: Some("type the word apply to run the commands".into()),
        });
    }
    for (n, step) in steps.iter().enumerate() {
        crate::stderrln!("[{}/{}] {}", n + 1, steps.len(), step.command);
        if let Err(why) = run_step(step) {
            return Err(Error::Refused {
                message: format!("step {} failed ({why}); the steps after it did not run", n + 1),
                help: Some(
                    "fix what it printed, then run host-setup again: it plans from what is now installed".into(),
                ),
            });
        }
    }
    crate::stderrln!("done; run k3d-gpu host-setup again to check");
    Ok(EXIT_OK)
}

/// Runs one step's argv directly (no shell), its stdin lines piped in.
fn run_step(step: &host_setup::Step) -> std::result::Result<(), String> {
    let (program, args) = step.argv.split_first().ok_or("empty command")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    if !step.stdin.is_empty() {
        cmd.stdin(std::process::Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {program}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let mut text = step.stdin.join("\n");
        text.push('\n');
        stdin.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() { Ok(()) } else { Err(format!("{program} exited with {status}")) }
}
