//! The one way tests run the k3d-gpu binary (or a script that runs it): hermetically. The
//! child's environment is cleared, then given only an allow-list — PATH (to find `docker`,
//! `k3d`, `sh`), a HOME nobody has, `LANG=C.UTF-8`, `NO_COLOR=1`, a Docker socket that does
//! not exist — plus exactly what the test sets. A developer's `K3D_GPU_*`, `KUBECONFIG`,
//! `DOCKER_HOST`, `XDG_*` or colour settings never reach the binary; what a test needs from
//! the outside (the Docker engine `.ci/dockerd.sh` started) it asks for by name
//! ([`K3dGpu::docker`], [`K3dGpu::pass`]). `tests/house_rules.rs` keeps every test file on
//! this runner.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// HOME when a test gives none: a directory that does not exist, so nothing of the user's is
/// read and nothing is written there.
pub const NO_HOME: &str = "/nonexistent/k3d-gpu-test-home";

/// DOCKER_HOST when a test asks for no engine: no test reaches one by accident (without it,
/// the engine at /var/run/docker.sock would answer).
pub const NO_DOCKER: &str = "unix:///nonexistent/k3d-gpu-test.sock";

/// What the Docker tests pass through from the test process: where the engine is and how to
/// reach it.
const DOCKER_VARS: &[&str] = &["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONFIG"];

/// Variables that change how a run is reported or measured, never what it does: passed when
/// the test process has them.
const TOOLING_VARS: &[&str] = &["RUST_BACKTRACE", "LLVM_PROFILE_FILE"];

/// The binary cargo built for the tests: for reading it as a file; run it with [`K3dGpu`].
pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_k3d-gpu"))
}

/// A run of the binary (or, with [`K3dGpu::program`], of a script that runs it) being set up.
pub struct K3dGpu {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env: BTreeMap<OsString, OsString>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
}

impl Default for K3dGpu {
    fn default() -> Self {
        K3dGpu::new()
    }
}

impl K3dGpu {
    /// `k3d-gpu`, with the allow-listed environment and nothing else.
    pub fn new() -> K3dGpu {
        K3dGpu::program(binary())
    }

    /// Another program (`bash`, `python3`, `env`) under the same environment; with
    /// [`K3dGpu::binary_on_path`] or [`K3dGpu::env_binary`] it finds the binary.
    pub fn program(program: impl AsRef<OsStr>) -> K3dGpu {
        let mut env = BTreeMap::new();
        let mut set = |k: &str, v: &OsStr| env.insert(OsString::from(k), v.to_owned());
        set("PATH", &std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()));
        set("HOME", NO_HOME.as_ref());
        set("LANG", "C.UTF-8".as_ref());
        set("NO_COLOR", "1".as_ref());
        set("DOCKER_HOST", NO_DOCKER.as_ref());
        let mut run = K3dGpu {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env,
            stdin: None,
            stdout: None,
            stderr: None,
        };
        for key in TOOLING_VARS {
            run = run.pass(key);
        }
        run
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> K3dGpu {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> K3dGpu {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The working directory (the test process's when not given).
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> K3dGpu {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Sets `key` for the child, over any default.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> K3dGpu {
        self.env.insert(key.as_ref().to_owned(), value.as_ref().to_owned());
        self
    }

    /// Every pair, as [`K3dGpu::env`].
    pub fn envs<I: IntoIterator<Item = (K, V)>, K: AsRef<OsStr>, V: AsRef<OsStr>>(mut self, vars: I) -> K3dGpu {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// Unsets `key`, a default included (no `DOCKER_HOST` at all, no `HOME`).
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> K3dGpu {
        self.env.remove(key.as_ref());
        self
    }

    /// `key` as the test process has it (unset when it has none): a variable a test needs
    /// from outside, by name.
    pub fn pass(self, key: &str) -> K3dGpu {
        match std::env::var_os(key) {
            Some(value) => self.env(key, value),
            None => self.env_remove(key),
        }
    }

    /// The Docker engine the test process was given (`DOCKER_HOST` and how to reach it), for
    /// the Docker tests; without this the child has none.
    pub fn docker(mut self) -> K3dGpu {
        for key in DOCKER_VARS {
            self = self.pass(key);
        }
        self
    }

    /// The binary's directory first on PATH, for a script that runs `k3d-gpu`.
    pub fn binary_on_path(self) -> K3dGpu {
        let dir = binary().parent().expect("the binary is in a directory").to_owned();
        let rest = self.env.get(OsStr::new("PATH")).cloned().unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest)))
            .expect("the build directory has no ':' in its path");
        self.env("PATH", path)
    }

    /// `link` made a symbolic link to the binary: a stand-in checkout's
    /// `target/debug/k3d-gpu`, for a test that runs the README's set-up lines as typed.
    #[cfg(unix)]
    pub fn link_binary(link: &Path) {
        if let Some(dir) = link.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink(binary(), link).unwrap();
    }

    /// `key` set to the binary's path, for a script told where it is.
    pub fn env_binary(self, key: &str) -> K3dGpu {
        self.env(key, binary())
    }

    pub fn stdin(mut self, stdin: impl Into<Stdio>) -> K3dGpu {
        self.stdin = Some(stdin.into());
        self
    }

    pub fn stdout(mut self, stdout: impl Into<Stdio>) -> K3dGpu {
        self.stdout = Some(stdout.into());
        self
    }

    pub fn stderr(mut self, stderr: impl Into<Stdio>) -> K3dGpu {
        self.stderr = Some(stderr.into());
        self
    }

    /// The whole environment the child will have: nothing else reaches it.
    pub fn planned_env(&self) -> BTreeMap<String, String> {
        self.env.iter().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())).collect()
    }

    /// The `std::process::Command`, environment cleared and set.
    pub fn command(self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args).env_clear().envs(&self.env);
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        if let Some(s) = self.stdin {
            command.stdin(s);
        }
        if let Some(s) = self.stdout {
            command.stdout(s);
        }
        if let Some(s) = self.stderr {
            command.stderr(s);
        }
        command
    }

    /// Runs it to the end, collecting stdout and stderr.
    pub fn output(self) -> Output {
        let program = self.program.clone();
        self.command().output().unwrap_or_else(|e| panic!("cannot run {}: {e}", program.to_string_lossy()))
    }

    /// [`K3dGpu::output`], for a run that must not wait on its input (a FIFO, a device): past
    /// `deadline` the child is killed and the test fails naming the wait. The deadline only
    /// turns a hang into a failure; how long the run took is not asserted.
    pub fn output_within(self, deadline: std::time::Duration) -> Output {
        let child = self.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(deadline) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                panic!("k3d-gpu was still running after {deadline:?}: it waited on its input");
            }
        }
    }

    /// Starts it.
    pub fn spawn(self) -> Child {
        let program = self.program.clone();
        self.command().spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", program.to_string_lossy()))
    }
}
