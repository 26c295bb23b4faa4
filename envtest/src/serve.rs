//! `pipelinerollout-webhook serve` as a test starts it: the one launcher of
//! the webhook binary for the end-to-end harness ([`Webhook`](crate::Webhook))
//! and for the tests that measure the process (memory, file descriptors,
//! a stalled log pipe).
//!
//! It listens where it is told, port 0 unless the caller names one; `serve`
//! binds, then logs one line with the addresses it bound (`addr=` the
//! webhook, `admin=Some(..)` the admin server; the same fields in the JSON
//! format) and the word "ready", under the target [`BOUND_TARGET`]. The
//! launcher reads the addresses from that line, so no port is picked
//! before the process binds it; it adds `BOUND_TARGET=info` to a
//! `--log-level` it is given, so that line is written at any level. (A
//! `RUST_LOG` in the environment replaces `--log-level`, and must let the
//! line through.)

use std::io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::http;
use crate::process::{Process, wait_until};

/// The target of the line in which `serve` reports the addresses it bound.
pub const BOUND_TARGET: &str = "pipelinerollout_webhook::server::bound";

/// How long `serve` may take to report its addresses.
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where `serve` listens, as it reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The webhook (HTTPS) listener.
    pub webhook: SocketAddr,
    /// The admin server (`/readyz`, `/metrics`; plain HTTP).
    pub admin: SocketAddr,
}

impl Bound {
    /// The addresses in one line of `serve`'s log (text or JSON format),
    /// when it is the line that reports them.
    pub fn from_log_line(line: &str) -> Option<Self> {
        if !line.contains("ready") {
            return None;
        }
        let webhook = field(line, "addr")?;
        let admin = field(line, "admin")?;
        let admin = admin.strip_prefix("Some(")?.strip_suffix(')')?;
        Some(Self {
            webhook: webhook.parse().ok()?,
            admin: admin.parse().ok()?,
        })
    }
}

/// The value of field `name` in a log line: ` name=value` (text) or
/// `"name":"value"` (JSON).
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    if let Some(at) = line.find(&format!("\"{name}\":\"")) {
        let rest = &line[at + name.len() + 4..];
        return rest.split('"').next();
    }
    let at = line.find(&format!(" {name}="))?;
    line[at + name.len() + 2..].split_whitespace().next()
}

/// How to run `serve`.
#[derive(Debug, Clone)]
pub struct ServeCommand {
    /// The `pipelinerollout-webhook` binary (from a test of the webhook's
    /// own package: `env!("CARGO_BIN_EXE_pipelinerollout-webhook")`).
    pub binary: PathBuf,
    /// `--listen`: 127.0.0.1 port 0 unless set.
    pub listen: SocketAddr,
    /// `--admin-listen`: 127.0.0.1 port 0 unless set.
    pub admin_listen: SocketAddr,
    /// Every other flag of `serve`.
    pub args: Vec<String>,
    /// At most this many open files (`prlimit`, else bash's `ulimit -n`).
    pub nofile: Option<u32>,
    /// Environment variables set for `serve` (through `env`); by default
    /// [`DEPLOYMENT_ENV`].
    pub env: Vec<(String, String)>,
}

/// The environment `manifests/base/deployment.yaml` gives the webhook
/// besides the downward API's: glibc's allocator returns what is allocated
/// above 128 KiB as soon as it is freed, so memory measured here is memory
/// a cluster sees.
pub const DEPLOYMENT_ENV: [(&str, &str); 1] = [("MALLOC_MMAP_THRESHOLD_", "131072")];

impl ServeCommand {
    /// `serve` on 127.0.0.1, ports chosen by the kernel, no other flags.
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            binary: binary.into(),
            listen: any_port,
            admin_listen: any_port,
            args: Vec::new(),
            nofile: None,
            env: DEPLOYMENT_ENV
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    /// The program to start and its arguments.
    fn program_and_args(&self) -> (PathBuf, Vec<String>) {
        let mut serve = vec![
            "serve".to_owned(),
            "--listen".to_owned(),
            self.listen.to_string(),
            "--admin-listen".to_owned(),
            self.admin_listen.to_string(),
        ];
        serve.extend(self.args.iter().cloned());
        keep_bound_line(&mut serve);
        let (program, args) = self.limited(serve);
        if self.env.is_empty() {
            return (program, args);
        }
        let mut with_env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        with_env.push(program.display().to_string());
        with_env.extend(args);
        (PathBuf::from("env"), with_env)
    }

    /// `serve` and its arguments, under the open-files limit if one is set.
    fn limited(&self, serve: Vec<String>) -> (PathBuf, Vec<String>) {
        let binary = self.binary.display().to_string();
        match self.nofile {
            None => (self.binary.clone(), serve),
            Some(n) if on_path("prlimit") => {
                let mut args = vec![format!("--nofile={n}:{n}"), binary];
                args.extend(serve);
                (PathBuf::from("prlimit"), args)
            }
            Some(n) => {
                let mut args = vec![
                    "-c".to_owned(),
                    format!("ulimit -n {n} && exec \"$0\" \"$@\""),
                    binary,
                ];
                args.extend(serve);
                (PathBuf::from("bash"), args)
            }
        }
    }
}

/// Adds `BOUND_TARGET=info` to the `--log-level` among `args`, if any (the
/// default level, info, writes the line anyway).
fn keep_bound_line(args: &mut [String]) {
    let keep = format!(",{BOUND_TARGET}=info");
    let mut next_is_level = false;
    for arg in args.iter_mut() {
        if next_is_level {
            arg.push_str(&keep);
            next_is_level = false;
        } else if arg == "--log-level" {
            next_is_level = true;
        } else if arg.starts_with("--log-level=") {
            arg.push_str(&keep);
        }
    }
}

/// Whether `program` is on the PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// A running `serve` and the addresses it reported; stopped (SIGTERM, then
/// SIGKILL after 5 s) when dropped or when the test process ends.
#[derive(Debug)]
pub struct Served {
    process: Process,
    bound: Bound,
    /// The read end of a stalled log pipe, held open and never read again.
    _stalled: Option<BufReader<std::io::PipeReader>>,
}

/// How long a stopped `serve` has between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

impl Served {
    /// Starts `command` with its output appended to `log`, through `spawn`
    /// (which gets the program and its arguments and starts them, such as
    /// [`Process::spawn`] or a cluster's), and waits until it reports the
    /// addresses it bound.
    pub(crate) fn start_with(
        command: &ServeCommand,
        log: &Path,
        spawn: impl FnOnce(&Path, &[String]) -> Result<Process, String>,
    ) -> Result<Self, String> {
        // The log may hold earlier runs: read only what this one writes.
        let from = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        let (program, args) = command.program_and_args();
        let mut process = spawn(&program, &args)?;
        let mut bound = None;
        let what = format!("{}: the addresses serve bound", process.name());
        wait_until(&mut process, &what, REPORT_TIMEOUT, || {
            bound = reported_in(log, from);
            bound
                .map(|_| ())
                .ok_or_else(|| "no address reported yet".to_owned())
        })?;
        let bound = bound.ok_or("serve reported no address")?;
        Ok(Self {
            process,
            bound,
            _stalled: None,
        })
    }

    /// Starts `command` named `name`, its output appended to `log`, and
    /// waits until it reports the addresses it bound.
    pub fn start(name: &str, command: &ServeCommand, log: &Path) -> Result<Self, String> {
        Self::start_with(command, log, |program, args| {
            Process::spawn(name, program, args, log, GRACE)
        })
    }

    /// Starts `command` named `name` with its standard error on a pipe that
    /// is read only until `serve` reports its addresses, then never again:
    /// a log collector that has stalled.
    pub fn start_with_stalled_log(name: &str, command: &ServeCommand) -> Result<Self, String> {
        let (program, args) = command.program_and_args();
        let (mut process, reader) = Process::spawn_to_pipe(name, &program, &args, GRACE)?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            let mut line = String::new();
            let mut seen = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Err(seen));
                        return;
                    }
                    Ok(_) => {}
                }
                if let Some(bound) = Bound::from_log_line(&line) {
                    let _ = tx.send(Ok((bound, reader)));
                    return;
                }
                seen.push_str(&line);
            }
        });
        let (bound, reader) = match rx.recv_timeout(REPORT_TIMEOUT) {
            Ok(Ok(reported)) => reported,
            Ok(Err(seen)) => {
                let why = process.exited().unwrap_or_default();
                return Err(format!("{name} reported no address: {why}\n{seen}"));
            }
            Err(_) => return Err(format!("{name} reported no address in {REPORT_TIMEOUT:?}")),
        };
        Ok(Self {
            process,
            bound,
            _stalled: Some(reader),
        })
    }

    /// Where it listens.
    pub fn bound(&self) -> Bound {
        self.bound
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// `Some(why)` when it has ended on its own.
    pub fn exited(&mut self) -> Option<String> {
        self.process.exited()
    }

    /// Its exit status once it has ended (after a signal, say), else `None`.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.process.try_wait()
    }

    /// Waits (up to `timeout`) until `path` of its admin server answers
    /// 200, failing early when it exits.
    pub fn wait_for(&mut self, path: &str, timeout: Duration) -> Result<(), String> {
        let admin = self.bound.admin;
        let what = format!("{} {path}", self.process.name());
        wait_until(&mut self.process, &what, timeout, || {
            match http::get(admin, path, None)? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("{path}: {status} {}", body.trim())),
            }
        })
    }

    /// Stops it and waits until it is gone.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

/// The addresses reported in `log` after byte `from`, if any yet.
fn reported_in(log: &Path, from: u64) -> Option<Bound> {
    let mut file = std::fs::File::open(log).ok()?;
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.lines().find_map(Bound::from_log_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addresses_come_from_the_text_and_the_json_line() {
        let want = Some(Bound {
            webhook: "127.0.0.1:41234".parse().expect("addr"),
            admin: "127.0.0.1:40001".parse().expect("addr"),
        });
        let text = "2026-12-03T08:00:00.1Z  INFO pipelinerollout_webhook::server::bound: ready \
                    addr=127.0.0.1:41234 admin=Some(127.0.0.1:40001)";
        assert_eq!(Bound::from_log_line(text), want);
        let json = r#"{"timestamp":"2026","level":"INFO","message":"ready","addr":"127.0.0.1:41234","admin":"Some(127.0.0.1:40001)","target":"pipelinerollout_webhook::server::bound"}"#;
        assert_eq!(Bound::from_log_line(json), want);
        let managed = "INFO x: serving; ready once the caBundle trusts the served certificate \
                       addr=127.0.0.1:41234 admin=Some(127.0.0.1:40001)";
        assert_eq!(Bound::from_log_line(managed), want);
        assert_eq!(
            Bound::from_log_line("INFO x: ready addr=127.0.0.1:1 admin=None"),
            None
        );
        assert_eq!(Bound::from_log_line("INFO x: policy loaded"), None);
    }

    #[test]
    fn a_log_level_given_keeps_the_bound_line() {
        let mut args: Vec<String> = ["--log-level", "warn", "--policy", "p", "--log-level=error"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        keep_bound_line(&mut args);
        assert_eq!(args[1], format!("warn,{BOUND_TARGET}=info"));
        assert_eq!(args[3], "p");
        assert_eq!(args[4], format!("--log-level=error,{BOUND_TARGET}=info"));
    }
}
