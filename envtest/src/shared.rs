//! One installation shared by the tests of a module, stopped once they are
//! done with it.
//!
//! A test binary holds the tests of several modules, and each module may
//! share one installation between its tests (a `static` cell). Shared
//! values are never dropped, so without more their servers would all run
//! until the binary exits: one idle kube-apiserver, etcd and webhook per
//! module. Instead every server and janitor that a shared value starts is
//! recorded ([`collect`]), each test thread that asks for the value counts
//! as one of its users until the thread ends (libtest runs each test on a
//! thread of its own), and a value whose users are gone is stopped as soon
//! as another shared value has started. libtest starts tests in the order
//! of their names, so a module's tests run one after another and its
//! installation stops when the next module's starts: at most one shared
//! installation runs beyond those the running tests hold, as when each
//! module was a binary of its own.
//!
//! Should a test ask for a value after it was stopped (a filter or
//! `--shuffle` that mixes the modules), the value starts again, and the
//! new one is the one that test and those after it get.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::assets::{Assets, require};
use crate::process::{Shared as Control, collect};

/// A value started by [`shared`].
struct Entry {
    /// The address of the cell it was started for.
    cell: usize,
    /// The value (leaked: tests hold it as `&'static`).
    value: &'static (dyn Any + Send + Sync),
    /// What it started, in order.
    controls: Vec<Control>,
    /// The test threads that asked for it and have not ended.
    users: usize,
    /// When it started, in starts since the binary did.
    started: u64,
    /// Whether its servers were stopped.
    stopped: bool,
}

/// Every shared value of the binary, and the number of starts so far.
static ENTRIES: Mutex<(Vec<Entry>, u64)> = Mutex::new((Vec::new(), 0));
/// Held while a shared value starts, so that two tests asking for one do
/// not both start it.
static STARTING: Mutex<()> = Mutex::new(());

fn entries() -> MutexGuard<'static, (Vec<Entry>, u64)> {
    ENTRIES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The cells this thread uses; when the thread ends, it is no longer one of
/// their users.
struct Using(RefCell<Vec<usize>>);

impl Drop for Using {
    fn drop(&mut self) {
        let cells = std::mem::take(&mut *self.0.borrow_mut());
        let mut to_stop = Vec::new();
        {
            let mut guard = entries();
            let (list, starts) = &mut *guard;
            for cell in cells {
                if let Some(entry) = list.iter_mut().find(|e| e.cell == cell && !e.stopped) {
                    entry.users = entry.users.saturating_sub(1);
                    // Idle, and another value started since: its module is done.
                    if entry.users == 0 && entry.started + 1 < *starts {
                        entry.stopped = true;
                        to_stop.append(&mut entry.controls);
                    }
                }
            }
        }
        stop(to_stop);
    }
}

thread_local! {
    static USING: Using = const { Using(RefCell::new(Vec::new())) };
}

/// Stops what a value started, the last started first (the webhook, then
/// the API server, etcd, and the janitor of the scratch directory).
fn stop(controls: Vec<Control>) {
    for control in controls.into_iter().rev() {
        control
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop();
    }
}

/// The running value for `cell`, this thread counted as its user.
fn running<T: Send + Sync + 'static>(cell: usize) -> Option<&'static Result<T, String>> {
    let mut guard = entries();
    let entry = guard.0.iter_mut().find(|e| e.cell == cell && !e.stopped)?;
    let value = entry.value.downcast_ref::<Result<T, String>>()?;
    let counted = USING.with(|using| {
        let mut cells = using.0.borrow_mut();
        let new = !cells.contains(&cell);
        if new {
            cells.push(cell);
        }
        new
    });
    if counted {
        entry.users += 1;
    }
    Some(value)
}

/// The value shared through `cell`, started with `init` by the first test
/// that asks (and again should a test ask after it was stopped; see the
/// module's doc); `None` (after printing a skip line) when the binaries are
/// missing outside CI. A failed start fails every test that asks, with the
/// reason.
#[track_caller]
pub fn shared<T: Send + Sync + 'static>(
    cell: &'static OnceLock<Result<T, String>>,
    test: &str,
    init: impl FnOnce(&Assets) -> Result<T, String>,
) -> Option<&'static T> {
    let assets = require(test, Assets::find())?;
    match get(cell, || init(&assets)) {
        Ok(value) => Some(value),
        Err(why) => panic!("{test}: the shared test cluster did not start: {why}"),
    }
}

/// [`shared`] once the binaries are found: the running value for `cell`,
/// else one started with `init`.
fn get<T: Send + Sync + 'static>(
    cell: &'static OnceLock<Result<T, String>>,
    init: impl FnOnce() -> Result<T, String>,
) -> &'static Result<T, String> {
    let key = std::ptr::from_ref(cell) as usize;
    if let Some(value) = running::<T>(key) {
        return value;
    }
    let _starting = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
    match running::<T>(key) {
        Some(value) => value,
        None => start(cell, key, init),
    }
}

/// Stops the idle values, starts `cell`'s, and counts this thread as its
/// user.
fn start<T: Send + Sync + 'static>(
    cell: &'static OnceLock<Result<T, String>>,
    key: usize,
    init: impl FnOnce() -> Result<T, String>,
) -> &'static Result<T, String> {
    let idle: Vec<Control> = {
        let mut guard = entries();
        guard
            .0
            .iter_mut()
            .filter(|e| e.users == 0 && !e.stopped)
            .flat_map(|e| {
                e.stopped = true;
                std::mem::take(&mut e.controls)
            })
            .collect()
    };
    stop(idle);
    let (result, controls) = collect(init);
    // The first start lives in the cell; a start again is leaked beside it.
    let value: &'static Result<T, String> = match cell.set(result) {
        Ok(()) => cell.get().expect("just set"),
        Err(again) => Box::leak(Box::new(again)),
    };
    {
        let mut guard = entries();
        let (list, starts) = &mut *guard;
        list.retain(|e| e.cell != key);
        list.push(Entry {
            cell: key,
            value,
            controls,
            users: 0,
            started: *starts,
            stopped: false,
        });
        *starts += 1;
    }
    running::<T>(key).unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::process::Process;

    /// A server as a shared value holds one: a `sleep` under the wrapper.
    struct Sleeper(Process);

    fn sleeper(dir: &Path, name: &str) -> Result<Sleeper, String> {
        Process::spawn(
            name,
            Path::new("sleep"),
            &["600".to_owned()],
            &dir.join(format!("{name}.log")),
            Duration::ZERO,
        )
        .map(Sleeper)
    }

    /// Asks for `cell` on a thread of its own, as a test does, and returns
    /// the pid once that thread has ended.
    fn ask(
        cell: &'static OnceLock<Result<Sleeper, String>>,
        dir: &'static Path,
        name: &'static str,
    ) -> u32 {
        std::thread::spawn(move || match get(cell, || sleeper(dir, name)) {
            Ok(sleeper) => sleeper.0.pid(),
            Err(why) => panic!("{why}"),
        })
        .join()
        .expect("the asking thread")
    }

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn an_idle_shared_value_stops_once_another_starts_and_starts_again_when_asked() {
        static A: OnceLock<Result<Sleeper, String>> = OnceLock::new();
        static B: OnceLock<Result<Sleeper, String>> = OnceLock::new();
        let dir: &'static Path = Box::leak(
            tempfile::tempdir()
                .expect("a scratch directory")
                .keep()
                .into_boxed_path(),
        );

        let a = ask(&A, dir, "a");
        assert!(alive(a), "the newest value runs while idle");
        assert_eq!(ask(&A, dir, "a"), a, "asked again, the same value");

        // A test of B while another thread still uses A: A keeps running
        // until that thread ends.
        let (using_a, done) = std::sync::mpsc::channel::<()>();
        let (counted, holding) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let pid = get(&A, || Err("A is running".to_owned()))
                .as_ref()
                .map(|s| s.0.pid());
            let _ = counted.send(());
            let _ = done.recv();
            pid
        });
        // B starts only once the holder counts as A's user.
        holding.recv().expect("the holder asked for A");
        let b = ask(&B, dir, "b");
        assert!(alive(a) && alive(b), "A is in use, so it runs beside B");
        drop(using_a);
        assert_eq!(holder.join().expect("the holder"), Ok(a));
        assert!(
            !alive(a),
            "A stops once its last user ends, B having started since"
        );
        assert!(alive(b), "B, the newest, runs while idle");

        // Asked after it stopped, A starts again, and idle B stops.
        let again = ask(&A, dir, "a-again");
        assert_ne!(again, a);
        assert!(alive(again), "A runs again");
        assert!(!alive(b), "B stopped when A started again");
        let _ = std::fs::remove_dir_all(dir);
    }
}
