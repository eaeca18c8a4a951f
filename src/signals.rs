//! The process's stop signals, wired in one place: SIGINT, SIGTERM and SIGHUP, each with the
//! exit code the shell gives a process it ends (128 + the signal's number). `apply` stops its
//! executor on each; the MCP server stops its applies and exits on the first. Both listen
//! through here, so the set of signals and their codes cannot drift apart.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// A stop signal that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caught {
    /// The signal's name as people write it (`SIGTERM`).
    pub name: &'static str,
    /// The shell's exit code for a process this signal ended.
    pub code: u8,
}

/// The three stop signals, each listened for from `listen` on.
pub(crate) struct Stops {
    int: Signal,
    term: Signal,
    hup: Signal,
}

/// Starts listening for the stop signals. Must be called inside a tokio runtime (a handler is
/// registered with the runtime's driver); from then on a stop signal no longer ends the
/// process by default, so the caller owns what a signal does.
pub(crate) fn listen() -> std::io::Result<Stops> {
    Ok(Stops {
        int: signal(SignalKind::interrupt())?,
        term: signal(SignalKind::terminate())?,
        hup: signal(SignalKind::hangup())?,
    })
}

impl Stops {
    /// The next stop signal to arrive.
    pub(crate) async fn next(&mut self) -> Caught {
        tokio::select! {
            _ = self.int.recv() => Caught { name: "SIGINT", code: 130 },
            _ = self.term.recv() => Caught { name: "SIGTERM", code: 143 },
            _ = self.hup.recv() => Caught { name: "SIGHUP", code: 129 },
        }
    }
}

#[cfg(test)]
mod tests {
    /// The codes are the shell's (128 + the number): checked against libc's numbers, so a
    /// typo in one arm fails here rather than in a script that reads `$?`.
    #[test]
    fn each_signal_ends_with_the_shells_code() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut stops = super::listen().unwrap();
            for (number, name) in
                [(libc_sig::SIGINT, "SIGINT"), (libc_sig::SIGTERM, "SIGTERM"), (libc_sig::SIGHUP, "SIGHUP")]
            {
                // kill(1): std has no call that sends a signal to this process.
                let status = std::process::Command::new("kill")
                    .args([format!("-{number}"), std::process::id().to_string()])
                    .status()
                    .unwrap();
                assert!(status.success());
                let caught = stops.next().await;
                assert_eq!(caught.name, name);
                assert_eq!(i32::from(caught.code), 128 + number);
            }
        });
    }

    /// Signal numbers as POSIX fixes them on Linux (signal(7)).
    mod libc_sig {
        pub const SIGHUP: i32 = 1;
        pub const SIGINT: i32 = 2;
        pub const SIGTERM: i32 = 15;
    }
}
