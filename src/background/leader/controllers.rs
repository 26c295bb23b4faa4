//! The background controllers as a set: started together with one
//! cancellation token, stopped together, and waited for.

use std::future::Future;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long stopping controllers waits for them to return before
/// aborting them (they are asked to return within a second).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(1);

/// A background controller: a name for the logs, whether it needs the
/// Lease, and how to start it. One that needs the Lease may be started and
/// stopped many times (each time this replica leads); one that does not
/// runs in every replica from start to shutdown.
pub struct Worker {
    name: &'static str,
    needs_lease: bool,
    start: Box<dyn Fn(CancellationToken) -> BoxFuture<'static, ()> + Send + Sync>,
}

impl Worker {
    /// A controller named `name` that `start` runs in the replica that
    /// holds the Lease: given a token, it returns a future that stops all
    /// its writes and returns soon after the token is cancelled.
    pub fn new<F>(
        name: &'static str,
        start: impl Fn(CancellationToken) -> F + Send + Sync + 'static,
    ) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Self {
            name,
            needs_lease: true,
            start: Box::new(move |stop| Box::pin(start(stop))),
        }
    }

    /// A controller named `name` that `start` runs in every replica,
    /// whoever holds the Lease (it writes nothing shared).
    pub fn in_every_replica<F>(
        name: &'static str,
        start: impl Fn(CancellationToken) -> F + Send + Sync + 'static,
    ) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Self {
            needs_lease: false,
            ..Self::new(name, start)
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether it runs only in the replica that holds the Lease.
    pub fn needs_lease(&self) -> bool {
        self.needs_lease
    }
}

/// Controllers started together, running until stopped.
#[derive(Debug)]
pub struct Started {
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

/// Starts every controller with one token.
pub fn start(controllers: &[Worker]) -> Started {
    let stop = CancellationToken::new();
    let mut tasks = JoinSet::new();
    for controller in controllers {
        tasks.spawn((controller.start)(stop.child_token()));
    }
    Started { stop, tasks }
}

impl Started {
    /// Cancels the token and waits for every controller to return; those
    /// still running after [`STOP_TIMEOUT`] are aborted (their futures
    /// dropped, so they write nothing more). Returns how many were
    /// aborted.
    pub async fn stop(mut self) -> usize {
        self.stop.cancel();
        let finished = tokio::time::timeout(STOP_TIMEOUT, async {
            while let Some(done) = self.tasks.join_next().await {
                if let Err(e) = done
                    && e.is_panic()
                {
                    tracing::error!("a background controller panicked: {e}");
                }
            }
        })
        .await;
        if finished.is_ok() {
            return 0;
        }
        let left = self.tasks.len();
        self.tasks.shutdown().await;
        tracing::error!(
            left,
            timeout = ?STOP_TIMEOUT,
            "background controllers did not stop in time and were aborted"
        );
        left
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counting(started: Arc<AtomicUsize>, stopped: Arc<AtomicUsize>) -> Worker {
        Worker::new("counting", move |stop: CancellationToken| {
            let (started, stopped) = (Arc::clone(&started), Arc::clone(&stopped));
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                stop.cancelled().await;
                stopped.fetch_add(1, Ordering::SeqCst);
            }
        })
    }

    #[tokio::test]
    async fn controllers_run_until_stopped_and_can_start_again() {
        let (started, stopped) = (Arc::default(), Arc::default());
        let set = [
            counting(Arc::clone(&started), Arc::clone(&stopped)),
            counting(Arc::clone(&started), Arc::clone(&stopped)),
        ];
        for round in 1..=2 {
            let running = start(&set);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(started.load(Ordering::SeqCst), 2 * round);
            assert_eq!(stopped.load(Ordering::SeqCst), 2 * (round - 1));
            assert_eq!(running.stop().await, 0, "they returned in time");
            assert_eq!(
                stopped.load(Ordering::SeqCst),
                2 * round,
                "stopped before stop() returns"
            );
        }
    }

    #[tokio::test]
    async fn a_controller_that_ignores_its_token_is_aborted() {
        let dropped = Arc::new(AtomicUsize::new(0));
        struct OnDrop(Arc<AtomicUsize>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = Arc::clone(&dropped);
        let stubborn = Worker::new("stubborn", move |_stop| {
            let guard = OnDrop(Arc::clone(&d));
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }
        });
        let running = start(std::slice::from_ref(&stubborn));
        tokio::time::sleep(Duration::from_millis(10)).await;
        let begun = std::time::Instant::now();
        assert_eq!(running.stop().await, 1);
        assert!(begun.elapsed() < STOP_TIMEOUT + Duration::from_millis(500));
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "its future was dropped");
    }
}
