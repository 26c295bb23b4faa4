//! The webhook binary, run on 127.0.0.1 with development certificates, for
//! the tests that measure the process (memory, file descriptors, its log).
//! It is started by envtest's launcher ([`envtest::Served`]), which reads
//! the addresses `serve` bound from its log.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use envtest::{ServeCommand, Served};

use super::Client;

/// The webhook binary, run on 127.0.0.1 with development certificates;
/// stopped when dropped (before its directory goes: fields drop in order).
pub struct Binary {
    served: Served,
    /// Where the webhook listens.
    pub addr: SocketAddr,
    /// Where the admin server listens.
    pub admin: SocketAddr,
    /// A client trusting its CA.
    pub client: Client,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Binary {
    /// Starts the binary, with at most `nofile` open files if given, and
    /// waits until it is ready.
    pub async fn start(nofile: Option<u32>) -> Self {
        Self::start_with(nofile, &[]).await
    }

    /// Starts the binary with extra flags `args`.
    pub async fn start_with(nofile: Option<u32>, args: &[&str]) -> Self {
        Self::launch(nofile, args, false).await
    }

    /// Starts the binary with its standard error on a pipe that nobody
    /// reads once it has reported its addresses: a log collector that has
    /// stalled. (`log_text` is then empty.)
    pub async fn start_with_stalled_log(args: &[&str]) -> Self {
        Self::launch(None, args, true).await
    }

    async fn launch(nofile: Option<u32>, args: &[&str], stalled_log: bool) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("dir");
        let log = dir.path().join("webhook.log");
        let mut command = ServeCommand::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"));
        command.nofile = nofile;
        command.args = ["--shutdown-delay", "0s", "--shutdown-grace", "1s"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        command.args.push("--dev-certs-dir".to_owned());
        command
            .args
            .push(dir.path().join("certs").display().to_string());
        command.args.extend(args.iter().map(|s| (*s).to_owned()));
        // The launcher waits in blocking calls: off the runtime's threads.
        let served = tokio::task::spawn_blocking({
            let log = log.clone();
            move || {
                let mut served = if stalled_log {
                    Served::start_with_stalled_log("webhook", &command)?
                } else {
                    Served::start("webhook", &command, &log)?
                };
                served.wait_for("/readyz", Duration::from_secs(30))?;
                Ok::<_, String>(served)
            }
        })
        .await
        .expect("the launcher's thread")
        .unwrap_or_else(|why| panic!("the binary: {why}"));
        let bound = served.bound();
        let ca = std::fs::read_to_string(dir.path().join("certs/ca.crt")).expect("ca");
        Self {
            served,
            addr: bound.webhook,
            admin: bound.admin,
            client: Client::build(bound.webhook, &[&ca], None),
            log,
            dir,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.served.pid()
    }

    /// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
    pub fn status_kib(&self, field: &str) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {status}"))
    }

    /// How many file descriptors it has open.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
