//! Hot reload: watches files and calls back when their contents change.
//!
//! Kubernetes updates a mounted Secret or ConfigMap by swapping a `..data`
//! symlink in the volume's directory, not by writing the file, so a watch on
//! the file itself misses the second rotation. We watch the directories
//! instead and also poll on an interval; either way, only a change in the
//! files' contents counts. `notify` delivers the events; what no crate here
//! does is the rest: the `..data` swap seen twice
//! (`certificate_rotated_through_data_symlink_twice` in
//! tests/https/operations.rs), reads of the files not taken for changes,
//! and a reload only when the contents differ.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// The contents of a set of files (`None` for one that cannot be read).
type Snapshot = Vec<Option<Vec<u8>>>;

pub(crate) fn snapshot(paths: &[PathBuf]) -> Snapshot {
    paths.iter().map(|p| std::fs::read(p).ok()).collect()
}

/// Reads every file on a blocking thread, off the async workers.
async fn snapshot_off_workers(paths: &Arc<Vec<PathBuf>>) -> Option<Snapshot> {
    let paths = Arc::clone(paths);
    tokio::task::spawn_blocking(move || snapshot(&paths))
        .await
        .ok()
}

/// Whether a file-system event can mean new contents. Opening and reading a
/// file cannot, and reacting to them would loop: every check reads the
/// files, and those reads would trigger the next check (without this filter
/// the server would re-read its certificate every 50 ms, idle or not). A writer
/// closing the file, or anything else, counts; so does a watch error.
fn may_change(event: &notify::Result<notify::Event>) -> bool {
    match event {
        Ok(event) => match event.kind {
            EventKind::Access(kind) => kind == AccessKind::Close(AccessMode::Write),
            _ => true,
        },
        Err(_) => true,
    }
}

/// Runs `on_change` whenever the contents of `paths` differ from the last
/// contents seen (starting from `initial`), until `stop` completes. Checks
/// after file-system events in the files' directories (after a short settle
/// time, so a writer that replaces several files is seen whole) and every
/// `interval`. Reading the files and `on_change` (which reads them again to
/// load them) run on blocking threads, never on the async workers.
pub(crate) async fn watch(
    name: &'static str,
    paths: Vec<PathBuf>,
    initial: Snapshot,
    interval: Duration,
    on_change: impl Fn() + Send + Sync + 'static,
    stop: impl Future<Output = ()>,
) {
    let on_change = Arc::new(on_change);
    let (tx, mut events) = mpsc::channel::<()>(1);
    // The files' directories ("." for a bare file name).
    let dirs: BTreeSet<&Path> = paths
        .iter()
        .map(|p| p.parent().filter(|d| !d.as_os_str().is_empty()))
        .map(|d| d.unwrap_or(Path::new(".")))
        .collect();
    let watcher = notify::recommended_watcher(move |event| {
        if may_change(&event) {
            // A full channel already holds a pending check.
            let _ = tx.try_send(());
        }
    })
    .and_then(|mut w| {
        for dir in &dirs {
            w.watch(dir, RecursiveMode::NonRecursive)?;
        }
        Ok(w)
    });
    let _watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(what = name, error = %e, "cannot watch files; polling only");
            None
        }
    };
    let paths = Arc::new(paths);
    let mut last = initial;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {}
            Some(()) = events.recv() => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let Some(now) = snapshot_off_workers(&paths).await else {
            continue;
        };
        if now != last {
            last = now;
            let on_change = Arc::clone(&on_change);
            if tokio::task::spawn_blocking(move || on_change())
                .await
                .is_err()
            {
                tracing::warn!(
                    what = name,
                    "reload task failed; will try again on the next change"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind};

    use super::*;

    #[test]
    fn only_events_that_can_change_contents_start_a_check() {
        let cases = [
            (EventKind::Access(AccessKind::Open(AccessMode::Any)), false),
            (EventKind::Access(AccessKind::Read), false),
            (
                EventKind::Access(AccessKind::Close(AccessMode::Read)),
                false,
            ),
            (
                EventKind::Access(AccessKind::Close(AccessMode::Write)),
                true,
            ),
            (EventKind::Create(CreateKind::File), true),
            (EventKind::Modify(ModifyKind::Data(DataChange::Any)), true),
            (EventKind::Remove(RemoveKind::File), true),
            (EventKind::Any, true),
        ];
        for (kind, want) in cases {
            assert_eq!(may_change(&Ok(notify::Event::new(kind))), want, "{kind:?}");
        }
        assert!(may_change(&Err(notify::Error::generic("queue overflow"))));
    }
}
