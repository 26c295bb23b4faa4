//! Server processes that cannot outlive the test process.
//!
//! Each server runs under a small bash wrapper whose stdin is a pipe from
//! the test process. The wrapper waits for end-of-file on that pipe, which
//! comes when the test stops the server ([`Process::stop`], also on drop
//! while a panic unwinds) or when the test process ends in any way,
//! including SIGKILL: the kernel then closes the pipe. The wrapper then
//! stops the server (SIGTERM, SIGKILL after the grace period) and waits for
//! it. The write end of every pipe is close-on-exec (Rust's default), so no
//! other child keeps it open. A [`Janitor`] removes the scratch directory
//! the same way, once the servers are gone.

use std::cell::RefCell;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The wrapper. Arguments: log file, grace seconds, program, its arguments.
/// Prints the server's pid, then waits for end-of-file on stdin (the
/// watcher) and for the server; exits with the server's status when the
/// server ends first. Its own messages (such as bash's "Killed") go to the
/// log too. With an empty log file name the server's standard error is the
/// wrapper's and its standard output is discarded.
const WRAPPER: &str = r#"
log=$1 grace=$2
shift 2
if [ -n "$log" ]; then exec 2>>"$log"; fi
exec 3<&0 </dev/null
if [ -n "$log" ]; then "$@" 3<&- >>"$log" 2>&1 & else "$@" 3<&- >/dev/null & fi
p=$!
echo "$p"
{
  cat <&3 >/dev/null
  if [ "$grace" -gt 0 ] && kill -TERM "$p" 2>/dev/null; then
    n=0
    while [ "$n" -lt "$((grace * 10))" ] && kill -0 "$p" 2>/dev/null; do
      sleep 0.1
      n=$((n + 1))
    done
  fi
  kill -KILL "$p" 2>/dev/null
} &
w=$!
exec 3<&-
wait "$p"
status=$?
kill "$w" 2>/dev/null
exit "$status"
"#;

/// Removes a directory once the test process closes its stdin and the
/// processes whose pids it was sent (one a line) are gone (at most 10 s).
const JANITOR: &str = r#"
pids=
while read -r p; do pids="$pids $p"; done
for p in $pids; do
  n=0
  while kill -0 "$p" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
done
rm -rf -- "$1"
"#;

/// The write end of a wrapper's (or a janitor's) stdin and the wrapper
/// itself: closing the one and waiting for the other stops a server. It is
/// shared with [`collect`], which can stop a server whose owner is never
/// dropped (a shared installation, `shared.rs`).
#[derive(Debug)]
pub struct Control {
    stdin: Option<ChildStdin>,
    child: Child,
}

impl Control {
    /// Closes the pipe (the signal; the wrapper does the rest) and waits
    /// until the wrapper has ended. Stopping twice does nothing.
    pub fn stop(&mut self) {
        self.stdin.take();
        let _ = self.child.wait();
    }
}

/// A [`Control`] as [`Process`], [`Janitor`] and [`collect`] hold it.
pub type Shared = Arc<Mutex<Control>>;

thread_local! {
    /// The controls of what this thread starts inside [`collect`].
    static COLLECTED: RefCell<Option<Vec<Shared>>> = const { RefCell::new(None) };
}

/// Runs `start`, and returns with its result the controls of every server
/// and janitor it started on this thread, in the order they started.
pub fn collect<R>(start: impl FnOnce() -> R) -> (R, Vec<Shared>) {
    let outer = COLLECTED.with(|c| c.borrow_mut().replace(Vec::new()));
    let result = start();
    let collected = COLLECTED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (result, collected.unwrap_or_default())
}

/// A new control, recorded when a [`collect`] is under way on this thread.
fn control(stdin: Option<ChildStdin>, child: Child) -> Shared {
    let shared = Arc::new(Mutex::new(Control { stdin, child }));
    COLLECTED.with(|c| {
        if let Some(collected) = c.borrow_mut().as_mut() {
            collected.push(Arc::clone(&shared));
        }
    });
    shared
}

/// The control, whatever a panicking holder left in it.
fn lock(control: &Shared) -> std::sync::MutexGuard<'_, Control> {
    control.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A server started through the wrapper; stopped when dropped.
#[derive(Debug)]
pub struct Process {
    name: String,
    control: Shared,
    wrapper_pid: u32,
    pid: u32,
    /// `None`: its output goes to a pipe ([`Process::spawn_to_pipe`]).
    log: Option<PathBuf>,
}

impl Process {
    /// Starts `program` with `args`, its output appended to `log`. When it
    /// is stopped it gets SIGTERM and `grace` (whole seconds) to exit before
    /// SIGKILL; a zero grace means SIGKILL at once.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        grace: Duration,
    ) -> Result<Self, String> {
        Self::spawn_with(name, program, args, Some(log), Stdio::inherit(), grace)
    }

    /// [`Process::spawn`] with the server's standard error on a pipe (its
    /// standard output discarded): the read end, which the caller reads as
    /// it likes, or not at all.
    pub fn spawn_to_pipe(
        name: &str,
        program: &Path,
        args: &[String],
        grace: Duration,
    ) -> Result<(Self, std::io::PipeReader), String> {
        let (reader, writer) =
            std::io::pipe().map_err(|e| format!("cannot make a pipe for {name}: {e}"))?;
        let process = Self::spawn_with(name, program, args, None, writer.into(), grace)?;
        Ok((process, reader))
    }

    fn spawn_with(
        name: &str,
        program: &Path,
        args: &[String],
        log: Option<&Path>,
        stderr: Stdio,
        grace: Duration,
    ) -> Result<Self, String> {
        let mut wrapper = Command::new("bash")
            .arg("-c")
            .arg(WRAPPER)
            .arg(format!("envtest-{name}"))
            .arg(log.map(Path::as_os_str).unwrap_or_default())
            .arg(grace.as_secs().to_string())
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // Its own process group: a Ctrl-C in the terminal reaches the
            // test process, whose exit then stops the server the usual way.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start bash to run {name}: {e}"))?;
        let stdin = wrapper.stdin.take();
        let stdout = wrapper.stdout.take().ok_or("no stdout pipe")?;
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let pid = match (read, line.trim().parse::<u32>()) {
            (Ok(_), Ok(pid)) => pid,
            (read, _) => {
                let _ = wrapper.kill();
                let _ = wrapper.wait();
                return Err(format!(
                    "the wrapper of {name} ({}) did not report a pid ({read:?}, {line:?})",
                    program.display()
                ));
            }
        };
        let wrapper_pid = wrapper.id();
        Ok(Self {
            name: name.to_owned(),
            control: control(stdin, wrapper),
            wrapper_pid,
            pid,
            log: log.map(Path::to_owned),
        })
    }

    /// The name it was started under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The wrapper's pid (what a [`Janitor`] waits for).
    pub fn wrapper_pid(&self) -> u32 {
        self.wrapper_pid
    }

    /// `Some(why)` when the server has ended on its own: its exit status
    /// and the end of its log.
    pub fn exited(&mut self) -> Option<String> {
        let status = lock(&self.control).child.try_wait();
        match status {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!(
                "{} exited ({status}); the end of its log:\n{}",
                self.name,
                self.log_tail(40)
            )),
            Err(e) => Some(format!("cannot check on {}: {e}", self.name)),
        }
    }

    /// The server's exit status once it has ended on its own (the wrapper
    /// exits with it), else `None`.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        lock(&self.control).child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the server's log (with its path).
    pub fn log_tail(&self, lines: usize) -> String {
        match &self.log {
            Some(log) => format!("{}:\n{}", log.display(), log_tail(log, lines)),
            None => "(its output goes to a pipe)".to_owned(),
        }
    }

    /// Stops the server and waits until it is gone. Stopping a stopped
    /// process does nothing.
    pub fn stop(&mut self) {
        lock(&self.control).stop();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `lines` lines of a file, or why it cannot be read.
pub fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// Removes a directory after the test process is done with it: on drop,
/// or when the test process dies, once every process it was told about
/// ([`Janitor::watch`]) has ended.
#[derive(Debug)]
pub struct Janitor {
    control: Shared,
}

impl Janitor {
    /// Starts a janitor for `dir`.
    pub fn start(dir: &Path) -> Result<Self, String> {
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(JANITOR)
            .arg("envtest-janitor")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start bash for the scratch-directory janitor: {e}"))?;
        let stdin = child.stdin.take();
        Ok(Self {
            control: control(stdin, child),
        })
    }

    /// Waits for `process` to end before removing the directory.
    pub fn watch(&mut self, process: &Process) {
        if let Some(stdin) = &mut lock(&self.control).stdin {
            let _ = writeln!(stdin, "{}", process.wrapper_pid());
        }
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        lock(&self.control).stop();
    }
}

/// Waits until `ready` says yes, failing early with the process's log when
/// it exits, and after `timeout` with the last reason `ready` gave.
pub fn wait_until(
    process: &mut Process,
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(why) = process.exited() {
            return Err(format!("{what}: {why}"));
        }
        let last = match ready() {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "{what}: not ready after {timeout:?} (last: {last}); the end of its log:\n{}",
                process.log_tail(40)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
