//! Why an action or a check failed: [`ApplyError`], one variant per case a person or a retry
//! must tell apart, and [`KubeError`], a Kubernetes client error sorted by whether waiting
//! can heal it. The executor shows them as text (`Display` at the edge); `kubernetes.rs`
//! retries only what [`KubeError::is_retryable`] says can heal.

use std::path::PathBuf;

/// A failed Kubernetes call, sorted by what it means. Each keeps the client's error; the
/// text names the case first, so "retry" and "fix the kubeconfig" read apart.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// 401: the API server does not accept the kubeconfig's credentials. Waiting never helps.
    #[error("the API server does not accept the kubeconfig's credentials (401 Unauthorized): {}", message(.0))]
    Unauthenticated(kube::Error),
    /// 403: the credentials are accepted but may not do this (RBAC).
    #[error("the kubeconfig's user may not do this (403 Forbidden): {}", message(.0))]
    Forbidden(kube::Error),
    /// The TLS handshake failed (an untrusted or wrong certificate, a server that does not
    /// speak TLS): the kubeconfig's server or certificate-authority is wrong.
    #[error("TLS with the API server failed; check the kubeconfig's server URL and certificate-authority: {0}")]
    Tls(kube::Error),
    /// The kubeconfig's credentials could not be obtained (an exec plugin failed, a token
    /// file is missing) or the kubeconfig itself is unusable.
    #[error("the kubeconfig's credentials or settings are unusable: {0}")]
    Credentials(kube::Error),
    /// The server refused this request (400, 404, 409, 422, a 500 InternalError such as a
    /// webhook's denial): sending it again gives the same answer.
    #[error("{}", status_text(.0))]
    Refused(kube::Error),
    /// The server is there but busy or not ready (429, 503, 504): retryable.
    #[error("{}", status_text(.0))]
    Busy(kube::Error),
    /// 410 Gone: a watch's resourceVersion was compacted; listing again heals it.
    #[error("{}", status_text(.0))]
    Expired(kube::Error),
    /// No answer: the connection was refused, reset or timed out (a cluster still starting).
    #[error("{0}")]
    Unreachable(kube::Error),
    /// Anything else the client reports: a reply it cannot read, a request it cannot build.
    #[error("{0}")]
    Client(kube::Error),
}

/// The status's own words, or the client's error when it is not a status.
fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// `message (code Reason)`: what the server said, without kube's debug dump of the Status.
fn status_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() { String::new() } else { format!(" {}", status.reason) };
            format!("{} ({}{reason})", status.message, status.code)
        }
        other => other.to_string(),
    }
}

impl From<kube::Error> for KubeError {
    fn from(error: kube::Error) -> KubeError {
        use kube::Error as E;
        match &error {
            E::Api(status) => match status.code {
                401 => KubeError::Unauthenticated(error),
                403 => KubeError::Forbidden(error),
                410 => KubeError::Expired(error),
                429 | 503 | 504 => KubeError::Busy(error),
                _ => KubeError::Refused(error),
            },
            E::Auth(_) | E::InferConfig(_) | E::InferKubeconfig(_) => KubeError::Credentials(error),
            E::RustlsTls(_) | E::TlsRequired => KubeError::Tls(error),
            E::HyperError(_) | E::Service(_) | E::ReadEvents(_) => transport(error),
            _ => KubeError::Client(error),
        }
    }
}

/// A transport error by what lies beneath it. rustls reports a failed handshake (a bad
/// certificate, a reply that is not TLS) to the connection as `InvalidData`; a refused,
/// reset or timed-out connection has its own kinds. An HTTP reply hyper cannot parse is a
/// server that is not an API server. What is not recognised stays retryable, as before:
/// a name that does not resolve yet, a proxy still starting.
fn transport(error: kube::Error) -> KubeError {
    use std::io::ErrorKind as K;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    let mut tls = false;
    let mut parse = false;
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                K::InvalidData => tls = true,
                K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::NotConnected
                | K::BrokenPipe
                | K::TimedOut
                | K::UnexpectedEof => return KubeError::Unreachable(error),
                _ => {}
            }
            // An io::Error's `source` skips the error it wraps (hyper-util wraps the TLS
            // stream's InvalidData in an Other): look at that one next.
            if let Some(inner) = io.get_ref() {
                next = Some(inner as &(dyn std::error::Error + 'static));
                continue;
            }
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            if hyper.is_timeout() || hyper.is_closed() || hyper.is_incomplete_message() || hyper.is_canceled() {
                return KubeError::Unreachable(error);
            }
            parse |= hyper.is_parse();
        }
        next = e.source();
    }
    match (tls, parse) {
        (true, _) => KubeError::Tls(error),
        (false, true) => KubeError::Client(error),
        (false, false) => KubeError::Unreachable(error),
    }
}

impl KubeError {
    /// Whether the same call may succeed if made again a little later.
    pub fn is_retryable(&self) -> bool {
        match self {
            KubeError::Busy(_) | KubeError::Expired(_) | KubeError::Unreachable(_) => true,
            KubeError::Unauthenticated(_)
            | KubeError::Forbidden(_)
            | KubeError::Tls(_)
            | KubeError::Credentials(_)
            | KubeError::Refused(_)
            | KubeError::Client(_) => false,
        }
    }

    /// The HTTP status the server answered, when it answered one.
    pub fn code(&self) -> Option<u16> {
        match self.inner() {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    fn inner(&self) -> &kube::Error {
        match self {
            KubeError::Unauthenticated(e)
            | KubeError::Forbidden(e)
            | KubeError::Tls(e)
            | KubeError::Credentials(e)
            | KubeError::Refused(e)
            | KubeError::Busy(e)
            | KubeError::Expired(e)
            | KubeError::Unreachable(e)
            | KubeError::Client(e) => e,
        }
    }
}

/// Why an action or a verify check failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A Kubernetes call failed; `doing` names it ("server-side apply of x", "list nodes").
    #[error("{doing}: {source}")]
    Kubernetes { doing: String, source: KubeError },
    /// The cluster's client could not be made (no such context, an unreadable kubeconfig),
    /// or the Docker engine could not be reached.
    #[error(transparent)]
    Observe(#[from] crate::observe::ObserveError),
    /// The kind is not served, after waiting for its CRD to be established.
    #[error("server-side apply of {name}: the API server does not serve {api_version} {kind} (is its CRD installed?)")]
    NotServed { name: String, api_version: String, kind: String },
    /// A create found an object of that name that k3d-gpu did not make.
    #[error(
        "{name} already exists and is not managed by k3d-gpu; remove it, or label it {}={} to hand it over",
        crate::compile::MANAGED_BY.0,
        crate::compile::MANAGED_BY.1
    )]
    NotOurs { name: String },
    /// A delete of an object without our managed-by label.
    #[error("refusing to delete an object that k3d-gpu does not manage")]
    NotManaged,
    /// `None`: the cluster has no nodes at all.
    #[error("{}", match .0 { Some(node) => format!("node {node} is not in the cluster"), None => "the cluster has no nodes yet".into() })]
    NoSuchNode(Option<String>),
    /// Every patch of a node met a concurrent edit.
    #[error("patch node {node}: it kept changing under us ({attempts} conflicts); apply again")]
    NodeKeptChanging { node: String, attempts: usize },
    /// The action or check is not what apply expects (a plan written by hand, an older
    /// k3d-gpu's): `what` says what is missing.
    #[error("{0}")]
    Malformed(String),
    /// An input was read again and is not what the plan recorded: plan again and review it.
    #[error("{what} changed since the plan was made: plan again and review it")]
    ChangedSincePlan { what: String },
    /// A file apply reads or writes (the k3d config, a model store, the credentials file).
    #[error("{what}: {reason}")]
    File { what: String, reason: String },
    /// A `[cluster] volumes` source is gone since the plan.
    #[error(
        "volume source {} does not exist (any more): Docker would create it as an empty directory owned by root; create it, or drop it from [cluster] volumes and plan again",
        crate::escape::quoted(.host)
    )]
    VolumeSourceMissing { host: String },
    /// The default model store needs a data directory.
    #[error("the default model store needs XDG_DATA_HOME or HOME; or set [agent] model_dir")]
    NoDataHome,
    #[error("model store {0:?} is not an absolute path")]
    RelativeModelStore(String),
    /// The Docker engine refused or failed; `message` is escaped (an image or a registry
    /// chooses it).
    #[error("{doing}: {message}")]
    Docker { doing: String, message: String },
    /// The node image's self-check found it lacking (`Verdict::refusal`).
    #[error("{0}")]
    NodeImageRefused(String),
    /// The node image check before a k3d call failed: with the fix.
    #[error("{source}; {}", crate::node_check::FIX)]
    NodeImageUnfit { source: Box<ApplyError> },
    /// Something that should have finished did not ("the check of node image x", "`k3d …`").
    #[error("{what} did not finish within {secs}s")]
    TimedOut { what: String, secs: u64 },
    /// The k3d binary could not be started.
    #[error("cannot run {}: {reason} (is k3d installed? `k3d-gpu doctor` checks)", .binary.display())]
    K3dNotRun { binary: PathBuf, reason: String },
    /// k3d ran and failed; `tail`: its last lines, escaped and joined with ` | `.
    #[error("`k3d {args}` failed ({status}): {tail}")]
    K3dFailed { args: String, status: String, tail: String },
    /// A verify check did not hold by its deadline.
    #[error("not true after {secs}s{}: {diagnosis}", last_error.as_ref().map(|e| format!(" (the watch's last error: {e})")).unwrap_or_default())]
    NotTrue { secs: u64, last_error: Option<String>, diagnosis: String },
    /// A verify check failed before its deadline; with the diagnosis.
    #[error("{source}; {diagnosis}")]
    CheckFailed { source: Box<ApplyError>, diagnosis: String },
    /// A watch stream ended, which a watcher never does by itself.
    #[error("the watch ended")]
    WatchEnded,
    /// Another action's result, shared (an existing cluster's node batch answers each of its
    /// actions with its one result).
    #[error(transparent)]
    Shared(std::sync::Arc<ApplyError>),
}

impl ApplyError {
    /// A failed Kubernetes call, named.
    pub fn kube(doing: impl Into<String>, error: impl Into<KubeError>) -> ApplyError {
        ApplyError::Kubernetes { doing: doing.into(), source: error.into() }
    }

    /// Whether running the same action again, a little later, may succeed without anything
    /// being fixed first. Only a Kubernetes call that met a busy or absent server can.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApplyError::Kubernetes { source, .. } => source.is_retryable(),
            ApplyError::Shared(inner) => inner.is_retryable(),
            _ => false,
        }
    }
}

impl From<&str> for ApplyError {
    fn from(what: &str) -> ApplyError {
        ApplyError::Malformed(what.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure(&format!("said {code}"), reason).with_code(code).boxed())
    }

    fn io(kind: std::io::ErrorKind) -> kube::Error {
        kube::Error::Service(Box::new(std::io::Error::new(kind, "beneath")))
    }

    #[test]
    fn each_kubernetes_case_is_named_and_only_what_can_heal_is_retried() {
        use std::io::ErrorKind as K;
        let table: Vec<(kube::Error, &str, bool)> = vec![
            (api(401, "Unauthorized"), "Unauthenticated", false),
            (api(403, "Forbidden"), "Forbidden", false),
            (api(400, "BadRequest"), "Refused", false),
            (api(404, "NotFound"), "Refused", false),
            (api(409, "Conflict"), "Refused", false),
            (api(422, "Invalid"), "Refused", false),
            (api(500, "InternalError"), "Refused", false),
            (api(410, "Expired"), "Expired", true),
            (api(429, "TooManyRequests"), "Busy", true),
            (api(503, "ServiceUnavailable"), "Busy", true),
            (api(504, "Timeout"), "Busy", true),
            (io(K::ConnectionRefused), "Unreachable", true),
            (io(K::ConnectionReset), "Unreachable", true),
            (io(K::TimedOut), "Unreachable", true),
            (io(K::UnexpectedEof), "Unreachable", true),
            (io(K::InvalidData), "Tls", false),
            // As hyper-util reports a handshake that failed: an Other around the InvalidData.
            (
                kube::Error::Service(Box::new(std::io::Error::other(std::io::Error::new(K::InvalidData, "tls")))),
                "Tls",
                false,
            ),
            (io(K::Other), "Unreachable", true),
            (kube::Error::ReadEvents(std::io::Error::new(K::ConnectionAborted, "x")), "Unreachable", true),
            (kube::Error::TlsRequired, "Tls", false),
            (
                kube::Error::Auth(kube::client::AuthError::AuthExecStart(std::io::Error::new(
                    K::NotFound,
                    "no plugin",
                ))),
                "Credentials",
                false,
            ),
            (kube::Error::LinesCodecMaxLineLengthExceeded, "Client", false),
        ];
        for (error, name, retryable) in table {
            let shown = format!("{error:?}");
            let classified = KubeError::from(error);
            let variant = format!("{classified:?}");
            assert!(variant.starts_with(&format!("{name}(")), "{shown} became {variant}");
            assert_eq!(classified.is_retryable(), retryable, "{shown}");
            let applied = ApplyError::kube("patch x", classified);
            assert_eq!(applied.is_retryable(), retryable, "{shown}");
            let shared = ApplyError::Shared(std::sync::Arc::new(applied));
            assert_eq!(shared.is_retryable(), retryable, "a shared result keeps its class: {shown}");
        }
    }

    #[test]
    fn nothing_but_a_kubernetes_call_is_retryable() {
        let boxed = || Box::new(ApplyError::WatchEnded);
        for error in [
            ApplyError::NotServed { name: "x".into(), api_version: "v1".into(), kind: "K".into() },
            ApplyError::NotOurs { name: "x".into() },
            ApplyError::NotManaged,
            ApplyError::NoSuchNode(None),
            ApplyError::NodeKeptChanging { node: "n".into(), attempts: 5 },
            ApplyError::Malformed("no key".into()),
            ApplyError::ChangedSincePlan { what: "credentials file a".into() },
            ApplyError::File { what: "w".into(), reason: "r".into() },
            ApplyError::VolumeSourceMissing { host: "/srv".into() },
            ApplyError::NoDataHome,
            ApplyError::RelativeModelStore("m".into()),
            ApplyError::Docker { doing: "pull x".into(), message: "denied".into() },
            ApplyError::NodeImageRefused("lacks".into()),
            ApplyError::NodeImageUnfit { source: boxed() },
            ApplyError::TimedOut { what: "x".into(), secs: 1 },
            ApplyError::K3dNotRun { binary: "k3d".into(), reason: "not found".into() },
            ApplyError::K3dFailed { args: "cluster create".into(), status: "exit status: 1".into(), tail: "t".into() },
            ApplyError::NotTrue { secs: 1, last_error: None, diagnosis: "d".into() },
            ApplyError::CheckFailed { source: boxed(), diagnosis: "d".into() },
            ApplyError::WatchEnded,
        ] {
            assert!(!error.is_retryable(), "{error:?}");
        }
    }

    #[test]
    fn the_text_names_the_case_and_keeps_the_servers_words() {
        let refused = ApplyError::kube("server-side apply of x", api(422, "Invalid"));
        assert_eq!(refused.to_string(), "server-side apply of x: said 422 (422 Invalid)");
        let denied = ApplyError::kube("list nodes", api(403, "Forbidden"));
        assert_eq!(denied.to_string(), "list nodes: the kubeconfig's user may not do this (403 Forbidden): said 403");
        let timed = ApplyError::NotTrue { secs: 2, last_error: Some("410".into()), diagnosis: "d".into() };
        assert_eq!(timed.to_string(), "not true after 2s (the watch's last error: 410): d");
        assert_eq!(ApplyError::NoSuchNode(Some("n".into())).to_string(), "node n is not in the cluster");
    }
}
