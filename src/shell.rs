//! Every command the tool prints for a person (or an agent) to paste: fixes in `doctor` and
//! `report`, hints in errors, the apply command after a refusal, MCP's port-forward. One
//! builder makes them all, so one rule holds for each:
//!
//! - every value is one POSIX shell word: bare only when made of `A-Z a-z 0-9 / . _ - + : , = @ %`
//!   (which no shell expands and no shell splits) and not starting with `=` (zsh expands `=ls`
//!   to a path), otherwise in single quotes, with `'` written `'\''`. A leading `~` (`~root`), `$(…)`, `;`, spaces and globs are quoted; the empty
//!   string is `''`. A control character cannot be pasted faithfully: it is written as a
//!   visible escape (`\x0a`) inside the quotes, so the command stays one line and one word;
//! - a path ([`Command::path`]) that is relative and starts with `-` is written `./-x`, so the
//!   command it is given to reads a path, not an option (quotes do not stop that);
//! - a value from outside ([`crate::escape::Untrusted`]) becomes a word only here
//!   ([`Command::untrusted`]);
//! - a `k3d-gpu` command carries the options the person gave (`cli::Global::k3d_gpu`: `-c`, `--root`,
//!   `--facts`, `--stdlib`, `--vendors`), so pasted it plans the same config on the same host.
//!
//! The words the tool itself writes (`kubectl`, `--context`, `get`, `nodes`) are literals:
//! [`Command::lit`] is for text in this source, [`Command::arg`] for everything else.

use std::fmt;

/// The characters a bare word may hold: none is special to sh, bash, dash or zsh anywhere in a
/// word (`~` is, at the start; `=` only in a first word, which is always a literal here).
fn bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c)
}

/// `value` as one shell word.
pub fn word(value: &str) -> String {
    let value = crate::escape::one_line(value);
    if !value.is_empty() && !value.starts_with('=') && value.chars().all(bare) {
        return value.into_owned();
    }
    format!("'{}'", value.replace('\'', "'\\''"))
}

/// `path` as one shell word (see [`Command::path`]).
pub fn path_word(path: &std::path::Path) -> String {
    let shown = path.display().to_string();
    if shown.starts_with('-') { word(&format!("./{shown}")) } else { word(&shown) }
}

/// A command line, word by word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    words: Vec<String>,
}

impl Command {
    /// A command running `program` (a literal: `kubectl`, `k3d`, `sudo`).
    pub fn new(program: &'static str) -> Command {
        Command { words: vec![program.to_string()] }
    }

    /// Literal words of this source, as written (`get nodes`, `-n`); never input.
    pub fn lit(mut self, words: &'static str) -> Command {
        self.words.extend(words.split_whitespace().map(str::to_string));
        self
    }

    /// One value, quoted as one word.
    pub fn arg(mut self, value: impl AsRef<str>) -> Command {
        self.words.push(word(value.as_ref()));
        self
    }

    /// A value from outside, quoted as one word (the one place an [`Untrusted`] becomes one).
    ///
    /// [`Untrusted`]: crate::escape::Untrusted
    pub fn untrusted(mut self, value: &crate::escape::Untrusted) -> Command {
        self.words.push(word(value.raw()));
        self
    }

    /// A path as one word: a relative one starting with `-` is written `./-x`, which every
    /// program reads as the same file and none as an option.
    pub fn path(mut self, path: impl AsRef<std::path::Path>) -> Command {
        self.words.push(path_word(path.as_ref()));
        self
    }

    /// A literal option followed by its value as one word: `--context 'x y'`.
    pub fn opt(self, flag: &'static str, value: impl AsRef<str>) -> Command {
        self.lit(flag).arg(value)
    }

    /// `self | next` (for `… | grep -A8 Allocatable`, `echo 16 | sudo tee …`).
    pub fn pipe(mut self, next: Command) -> Command {
        self.words.push("|".into());
        self.words.extend(next.words);
        self
    }

    /// `self && next` (for `cd DIR && k3d-gpu apply plan.json`).
    pub fn and(mut self, next: Command) -> Command {
        self.words.push("&&".into());
        self.words.extend(next.words);
        self
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words.join(" "))
    }
}

/// `kubectl --context CONTEXT`.
pub fn kubectl(context: &str) -> Command {
    Command::new("kubectl").opt("--context", context)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What `sh` makes of `words`: one line per word it passed to printf.
    pub(crate) fn sh_words(words: &str, dir: &std::path::Path) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {words}"))
            .current_dir(dir)
            .env("HOME", dir)
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{words}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    }

    const HOSTILE: &[&str] = &[
        "k3d-x; touch pwned",
        "$(touch pwned)",
        "`touch pwned`",
        "a b  c",
        "~root",
        "~",
        "it's",
        "''",
        "*",
        "{a,b}",
        "x|touch pwned",
        "x&&touch pwned",
        ">pwned",
        "!1",
        "\\",
        "\"",
        "-n",
        "#comment",
        "0000:00:02.0;touch pwned",
        "é",
    ];

    #[test]
    fn each_value_is_one_word_that_sh_reads_back_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        for value in HOSTILE.iter().chain(&["plain", "/a/b.toml", "sha256:ab", "k3d-gpu"]) {
            let quoted = word(value);
            assert_eq!(sh_words(&format!("X {quoted}"), dir.path()), ["X", value], "{value:?} as {quoted}");
        }
        assert_eq!(sh_words("X ''", dir.path()), ["X", ""]);
        assert_eq!(word(""), "''");
        assert!(!dir.path().join("pwned").exists(), "nothing ran");
        assert_eq!(word("~root"), "'~root'");
        assert_eq!(word("it's"), "'it'\\''s'");
    }

    #[test]
    fn a_control_character_stays_on_the_line_and_in_the_word() {
        let dir = tempfile::tempdir().unwrap();
        let quoted = word("a\nPlan: 0 to create\x1b[2K");
        assert!(!quoted.contains('\n') && !quoted.contains('\x1b'), "{quoted}");
        assert_eq!(sh_words(&quoted, dir.path()).len(), 1);
    }

    #[test]
    fn a_word_is_never_an_option_or_a_zsh_expansion() {
        assert_eq!(word("=ls"), "'=ls'", "zsh expands a leading = to a path");
        assert_eq!(word("a=b"), "a=b");
        let c = Command::new("k3d-gpu").lit("apply").path("--allow-replace").to_string();
        assert_eq!(c, "k3d-gpu apply ./--allow-replace");
        assert_eq!(Command::new("cd").path("-").to_string(), "cd ./-");
        assert_eq!(Command::new("cd").path("/abs/-x").to_string(), "cd /abs/-x");
        assert_eq!(Command::new("cat").path("=ls").to_string(), "cat '=ls'");
        let forged = crate::escape::Untrusted::new("x\npass forged");
        assert_eq!(Command::new("echo").untrusted(&forged).to_string(), "echo 'x\\x0apass forged'");
    }

    #[test]
    fn a_kubectl_command_quotes_its_context() {
        assert_eq!(kubectl("k3d-x;y").lit("get nodes").to_string(), "kubectl --context 'k3d-x;y' get nodes");
    }
}
