//! The man pages' sections clap_mangen does not write: EXAMPLES (a few command lines per
//! page), ENVIRONMENT (each variable an option of that command reads, from its clap
//! definition; on k3d-gpu(1) also the ones the tool itself reads) and EXIT STATUS. Roff text,
//! inserted before the VERSION section. Pure.

/// Escapes text for roff: backslashes and dashes, and a leading `.` or `'`.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) { format!("\\&{escaped}") } else { escaped }
}

/// Command lines shown under EXAMPLES, by page (`plan`, `images lock`; `` for k3d-gpu(1)).
fn examples(path: &str) -> &'static [&'static str] {
    match path {
        "" => &[
            "k3d-gpu detect",
            "k3d-gpu init",
            "k3d-gpu validate",
            "k3d-gpu plan --out plan.json",
            "k3d-gpu show plan.json",
            "k3d-gpu apply plan.json",
        ],
        "detect" => &["k3d-gpu detect", "k3d-gpu detect --root tests/fixtures/hosts/lunar-lake-npu --json"],
        "doctor" => &["k3d-gpu doctor", "k3d-gpu doctor --no-tools --json"],
        "host-setup" => {
            &["k3d-gpu host-setup", "k3d-gpu host-setup --distro fedora --json", "k3d-gpu host-setup --apply"]
        }
        "facts" => &["k3d-gpu facts --out host.json", "k3d-gpu detect --facts host.json"],
        "facts capture" => &["k3d-gpu facts capture --out hosts/my-box"],
        "init" => &[
            "k3d-gpu init",
            "k3d-gpu init --root tests/fixtures/hosts/rtx2000ada-x2 --out lab.toml",
            "k3d-gpu init --out -",
        ],
        "version" => &["k3d-gpu version", "k3d-gpu --version --json"],
        "validate" => {
            &["k3d-gpu validate", "k3d-gpu validate -c k3dgpu.toml --root hosts/a --root hosts/b --facts host.json"]
        }
        "graph" => &["k3d-gpu graph | dot -Tsvg > graph.svg", "k3d-gpu graph --json"],
        "render" => &["k3d-gpu render --out gitops/cluster"],
        "schema" => &["k3d-gpu schema > k3dgpu.schema.json", "k3d-gpu schema --markdown"],
        "observe" => &["k3d-gpu observe", "k3d-gpu observe --json > observed.json"],
        "plan" => &[
            "k3d-gpu plan --out plan.json",
            "k3d-gpu plan --hash",
            "k3d-gpu plan --offline --detailed-exitcode",
            "k3d-gpu plan --observed observed.json",
        ],
        "apply" => &["k3d-gpu apply plan.json", "k3d-gpu apply --plan-hash sha256:<hash from plan --hash>"],
        "show" => &["k3d-gpu show plan.json", "k3d-gpu show --json plan.json"],
        "destroy" => &["k3d-gpu destroy", "k3d-gpu destroy --plan-hash sha256:<hash it printed>"],
        "agent" => &["k3d-gpu agent", "k3d-gpu agent --json"],
        "images" => &["k3d-gpu images", "k3d-gpu images --json"],
        "images lock" => &["k3d-gpu images lock"],
        "images check" => &["k3d-gpu images check"],
        "audit" => &["k3d-gpu audit", "k3d-gpu audit --observe > audit.json", "k3d-gpu audit --observed audit.json"],
        "logs" => &["k3d-gpu logs", "k3d-gpu logs --follow", "k3d-gpu logs intel-gpu-plugin --tail 50"],
        "report" => &["k3d-gpu report", "k3d-gpu report --offline out/"],
        "completions" => &["k3d-gpu completions bash > /etc/bash_completion.d/k3d-gpu"],
        "man" => &["k3d-gpu man --out /usr/share/man/man1"],
        "mcp" => &["k3d-gpu mcp -c lab/k3dgpu.toml"],
        _ => &[],
    }
}

/// The variables the tool reads whatever the command, for k3d-gpu(1).
const TOOL_VARIABLES: [(&str, &str); 6] = [
    ("DOCKER_HOST", "The Docker engine to observe and build with (default: the local socket)."),
    ("KUBECONFIG", "The kubeconfig whose first file holds the cluster's context (default: ~/.kube/config)."),
    ("K3D_GPU_K3D", "The k3d binary to run (default: k3d on PATH)."),
    ("XDG_STATE_HOME", "Where the apply lock and k3d's config files are kept (default: ~/.local/state)."),
    ("NO_COLOR", "Set and not empty: no colour in the plan, even on a terminal."),
    ("HOME", "Where ~/.kube/config and ~/.local/state are."),
];

/// The page's extra sections, in roff.
pub fn sections(cmd: &clap::Command, path: &str) -> String {
    let mut out = String::new();
    let lines = examples(path);
    if !lines.is_empty() {
        out.push_str(".SH EXAMPLES\n");
        for line in lines {
            out.push_str(&format!(".PP\n.nf\n{}\n.fi\n", roff(line)));
        }
    }
    let mut variables: Vec<(String, String)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let name = a.get_env()?.to_str()?.to_string();
            let flag = a.get_long().map(|l| format!("--{l}"))?;
            Some((name, format!("The default of {flag}.")))
        })
        .collect();
    if path.is_empty() {
        // k3d-gpu(1): every command's option variables, and the tool's own.
        fn walk(cmd: &clap::Command, out: &mut Vec<(String, String)>) {
            for a in cmd.get_arguments() {
                if let (Some(env), Some(long)) = (a.get_env().and_then(|e| e.to_str()), a.get_long()) {
                    out.push((env.to_string(), format!("The default of --{long}.")));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, out);
            }
        }
        walk(cmd, &mut variables);
        variables.extend(TOOL_VARIABLES.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    }
    variables.sort();
    variables.dedup_by(|a, b| a.0 == b.0);
    if !variables.is_empty() {
        out.push_str(".SH ENVIRONMENT\n");
        for (name, text) in variables {
            out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(&name), roff(&text)));
        }
    }
    out.push_str(".SH \"EXIT STATUS\"\n");
    for (code, text) in [
        ("0", "Success."),
        (
            "1",
            "A check failed: the config is invalid, a finding failed, a plan was refused or an apply failed, or \
             init found a file where it would write.",
        ),
        (
            "2",
            "Bad usage or unreadable input (with plan --detailed-exitcode: the plan has changes). Under --json a \
             failed command prints one k3d-gpu.error/v1 object on stdout.",
        ),
    ] {
        out.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff(text)));
    }
    out
}

/// `page` with the sections inserted before its VERSION section (at its end without one).
pub fn insert(page: Vec<u8>, sections: &str) -> Vec<u8> {
    let text = String::from_utf8(page).unwrap_or_default();
    match text.find("\n.SH VERSION") {
        Some(at) => format!("{}\n{}{}", &text[..at], sections.trim_end_matches('\n'), &text[at..]).into_bytes(),
        None => format!("{text}{sections}").into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_has_its_exit_status_and_the_main_page_every_variable() {
        let cmd = <crate::cli::Cli as clap::CommandFactory>::command();
        let main = sections(&cmd, "");
        for needle in [
            ".SH EXAMPLES",
            "k3d\\-gpu apply plan.json",
            ".SH ENVIRONMENT",
            "K3D_GPU_CONFIG",
            "DOCKER_HOST",
            ".SH \"EXIT STATUS\"",
        ] {
            assert!(main.contains(needle), "{needle}:\n{main}");
        }
        let schema = sections(cmd.find_subcommand("schema").unwrap(), "schema");
        assert!(schema.contains(".SH \"EXIT STATUS\"") && !schema.contains("ENVIRONMENT"), "{schema}");
        let plan = sections(cmd.find_subcommand("plan").unwrap(), "plan");
        assert!(plan.contains("K3D_GPU_ROOT") && plan.contains("\\-\\-detailed\\-exitcode"), "{plan}");
        assert_eq!(roff(".x-y\\z"), "\\&.x\\-y\\ez");
    }
}
