//! The webhook binary, run on 127.0.0.1 with development certificates, for
//! the tests that measure the process (memory, file descriptors).

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use tokio::net::TcpStream;

use super::{Client, admin_get};

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// The webhook binary, run on 127.0.0.1 with development certificates;
/// killed when dropped.
pub struct Binary {
    /// The process.
    pub child: Child,
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
    /// reads: a log collector that has stalled. (`log_text` is then empty.)
    pub async fn start_with_stalled_log(args: &[&str]) -> Self {
        Self::launch(None, args, true).await
    }

    /// Starts it, picking other ports when one picked a moment ago was
    /// taken since by another test's process (at most three times).
    async fn launch(nofile: Option<u32>, args: &[&str], stalled_log: bool) -> Self {
        let mut attempt = 1;
        loop {
            match Self::try_launch(nofile, args, stalled_log).await {
                Ok(binary) => return binary,
                Err(log) if attempt < 3 && log.contains("Address already in use") => attempt += 1,
                Err(log) => panic!("{log}"),
            }
        }
    }

    /// Starts it on two free ports; the error is its log, when it exits
    /// before it is ready.
    async fn try_launch(
        nofile: Option<u32>,
        args: &[&str],
        stalled_log: bool,
    ) -> Result<Self, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("dir");
        let (port, admin_port) = (free_port(), free_port());
        let bin = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
        let mut command = match nofile {
            None => Command::new(bin),
            Some(n) if which("prlimit") => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg(bin);
                c
            }
            Some(n) => {
                let mut c = Command::new("bash");
                c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), bin]);
                c
            }
        };
        let log = dir.path().join("webhook.log");
        command
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .args(["--shutdown-delay", "0s", "--shutdown-grace", "1s"])
            .arg("--dev-certs-dir")
            .arg(dir.path().join("certs"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if stalled_log {
                Stdio::piped()
            } else {
                Stdio::from(std::fs::File::create(&log).expect("log file"))
            });
        let child = command.spawn().expect("spawn the binary");
        let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().expect("addr");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut binary = Self {
            child,
            addr,
            admin,
            client: Client::build(addr, &[], None),
            log,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = binary.child.try_wait().expect("wait") {
                return Err(format!(
                    "the binary exited ({status}): {}",
                    binary.log_text()
                ));
            }
            if TcpStream::connect(admin).await.is_ok()
                && admin_get(admin, "/readyz").await.0 == StatusCode::OK
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "never ready: {}",
                binary.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ca = std::fs::read_to_string(binary.dir.path().join("certs/ca.crt")).expect("ca");
        binary.client = Client::build(addr, &[&ca], None);
        Ok(binary)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `program` is on the PATH.
pub fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
