//! One replica runs the background controllers: the holder of a
//! `coordination.k8s.io/v1` Lease in the webhook's namespace. Every replica
//! serves admission whatever this module does; only the controllers (the
//! stale-force sweeper, and whatever else is handed in) wait for the Lease.
//!
//! kube-lease-manager takes, renews and releases the Lease (a server-side
//! apply to take it, so two replicas cannot both take a free Lease). Three
//! things are added around it:
//! - **The renew deadline.** The crate tells when the holder changes, not
//!   when a renewal succeeds. [`renewals`] watches the wire for successful
//!   writes of the Lease; the controllers run only while the crate says
//!   this replica holds the Lease *and* the last successful write is less
//!   than the renew deadline old. Past that they are cancelled and waited
//!   for (at most [`STOP_TIMEOUT`], then aborted), which is over before the
//!   Lease can expire for the others (the deadline is shorter than the
//!   Lease duration). The Lease client's requests time out after the retry
//!   period, so a hung API server shows up as failures, retried every retry
//!   period until a renewal succeeds or the deadline passes.
//! - **Quick hand-over.** A replica waiting for the Lease sleeps until the
//!   expiry it last read. A watch of the Lease wakes it as soon as the
//!   holder releases it, so a leader that stops on SIGTERM is replaced
//!   within a few round trips instead of a Lease duration.
//! - **Shutdown.** On shutdown the leader stops its controllers first, then
//!   releases the Lease.
//! - **A deleted Lease** (seen by the watch, or a renewal answered 404)
//!   stops the leader at once; every replica then makes it anew and
//!   campaigns.
//!
//! With election off ([`run_unelected`]) the controllers run from start to
//! shutdown, in every replica.

mod controllers;
mod options;
mod released;
mod renewals;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::Api;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use self::controllers::{Controller, ControllerFuture, STOP_TIMEOUT};
pub use self::options::{
    DEFAULT_LEASE_NAME, LeaseOptions, LeaseOptionsError, identity, own_identity,
};
pub use self::renewals::{LeaseWrites, RecordWrites};

/// How long releasing the Lease on shutdown may take.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

/// A change of who runs the controllers, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// This replica took the Lease and started the controllers.
    Acquired,
    /// This replica stopped them: the Lease went to another replica, or it
    /// could not renew within the renew deadline.
    Lost,
    /// This replica stopped them on shutdown and released the Lease.
    Released,
}

impl Transition {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Acquired => "acquired",
            Transition::Lost => "lost",
            Transition::Released => "released",
        }
    }
}

/// What the election needs from the process it runs in: where to report.
pub trait LeaderHost: Send + Sync + 'static {
    /// Whether this replica runs the controllers now.
    fn leading(&self, leading: bool);
    /// Counts one change.
    fn transition(&self, transition: Transition);
    /// Counts one failed call about the Lease (read, create, renew).
    fn lease_error(&self);
}

/// Runs `controllers` from now until `shutdown` is cancelled, then stops
/// them and waits for them: every replica runs them (`--leader-elect=false`).
pub async fn run_unelected(
    controllers: Vec<Controller>,
    host: Arc<dyn LeaderHost>,
    shutdown: CancellationToken,
) {
    if controllers.is_empty() {
        return;
    }
    let running = controllers::start(&controllers);
    host.leading(true);
    shutdown.cancelled().await;
    running.stop().await;
    host.leading(false);
}

/// The Lease client: each request must be answered within the retry
/// period (so a hung API server fails a renewal instead of stalling it),
/// and successful writes of the Lease are recorded in `writes`. The
/// timeout is per request, not a read timeout on the connection, which
/// would also close idle pooled connections and fail the request handed
/// one just then.
fn lease_client(
    mut config: kube::Config,
    namespace: &str,
    options: &LeaseOptions,
    writes: LeaseWrites,
) -> Result<kube::Client, kube::Error> {
    config.connect_timeout = Some(options.retry_period);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::timeout::TimeoutLayer::new(options.retry_period))
        .with_layer(&RecordWrites::new(namespace, &options.name, writes))
        .build())
}

type ChangedFuture = Pin<Box<dyn Future<Output = kube_lease_manager::Result<bool>> + Send>>;
type BuildFuture =
    Pin<Box<dyn Future<Output = kube_lease_manager::Result<Box<LeaseManager>>> + Send>>;

/// What woke the election loop.
enum Wake {
    Shutdown,
    Check,
    Retry,
    Released,
    Deleted,
    Built(kube_lease_manager::Result<Box<LeaseManager>>),
    Changed(kube_lease_manager::Result<bool>),
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn poll_opt<T>(future: &mut Option<Pin<Box<dyn Future<Output = T> + Send>>>) -> T {
    match future {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Takes part in the election for the Lease of `options` until `shutdown`
/// is cancelled, running `controllers` while this replica leads. `config`
/// is the API server's (the Lease client gets short timeouts of its own).
pub async fn run_elected(
    config: kube::Config,
    options: LeaseOptions,
    controllers: Vec<Controller>,
    host: Arc<dyn LeaderHost>,
    shutdown: CancellationToken,
) {
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let writes = LeaseWrites::default();
    let clients = lease_client(config.clone(), &namespace, &options, writes.clone())
        .and_then(|lease| Ok((lease, kube::Client::try_from(config)?)));
    let (lease_client, watch_client) = match clients {
        Ok(clients) => clients,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the Lease client: leader election and the background controllers are off");
            return;
        }
    };
    tracing::info!(
        lease = %format!("{namespace}/{}", options.name),
        identity = %options.identity,
        duration = ?options.duration,
        renew_deadline = ?options.renew_deadline,
        controllers = ?controllers.iter().map(Controller::name).collect::<Vec<_>>(),
        "leader election on: the holder of the Lease runs the background controllers"
    );
    let (released, deleted) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    tokio::spawn(released::watch(
        Api::namespaced(watch_client, &namespace),
        options.name.clone(),
        (Arc::clone(&released), Arc::clone(&deleted)),
        shutdown.child_token(),
    ));
    let retry = options.retry_period;
    let deadline = options.renew_deadline;
    let mut manager: Option<Arc<LeaseManager>> = None;
    let mut holder = false;
    let mut retry_at: Option<Instant> = None;
    let mut running: Option<controllers::Running> = None;
    let mut building: Option<BuildFuture> = None;
    let mut changing: Option<ChangedFuture> = None;
    loop {
        let now = Instant::now();
        let leads = holder && writes.fresh(now, deadline);
        if leads && running.is_none() {
            running = Some(controllers::start(&controllers));
            host.leading(true);
            host.transition(Transition::Acquired);
            tracing::info!(identity = %options.identity, "this replica leads: background controllers started");
        } else if !leads && let Some(stopping) = running.take() {
            stopping.stop().await;
            host.leading(false);
            host.transition(Transition::Lost);
            let why = if holder {
                "no renewal of the Lease succeeded within the renew deadline"
            } else {
                "the Lease is held by another replica"
            };
            tracing::warn!(identity = %options.identity, "this replica no longer leads ({why}): background controllers stopped");
        }
        if retry_at.is_none() {
            match &manager {
                None if building.is_none() => {
                    let (client, namespace, options) =
                        (lease_client.clone(), namespace.clone(), options.clone());
                    building = Some(Box::pin(async move {
                        new_manager(client, &namespace, &options)
                            .await
                            .map(Box::new)
                    }));
                }
                Some(m) if changing.is_none() => {
                    let m = Arc::clone(m);
                    changing = Some(Box::pin(async move { m.changed().await }));
                }
                _ => {}
            }
        }
        // While leading: wake at the renew deadline. Holding the Lease
        // without a fresh renewal: look again each retry period, to start
        // again once a renewal succeeds.
        let check = if leads {
            writes.valid_until(deadline)
        } else if holder {
            Some(now + retry)
        } else {
            None
        };
        let wake = tokio::select! {
            biased;
            () = shutdown.cancelled() => Wake::Shutdown,
            () = sleep_until(check) => Wake::Check,
            () = sleep_until(retry_at) => Wake::Retry,
            () = deleted.notified() => Wake::Deleted,
            () = released.notified(), if !holder => Wake::Released,
            built = poll_opt(&mut building) => Wake::Built(built),
            changed = poll_opt(&mut changing) => Wake::Changed(changed),
        };
        match wake {
            Wake::Shutdown => break,
            Wake::Check => {}
            Wake::Retry => retry_at = None,
            Wake::Released => {
                // Campaign afresh now, instead of sleeping until the expiry
                // the current manager last read.
                tracing::debug!("the Lease was released: trying to take it");
                (manager, changing, building, retry_at) = (None, None, None, None);
            }
            Wake::Deleted => {
                // Whoever makes it anew may take it at once: a leader stops
                // now rather than at its next renewal.
                tracing::warn!("the Lease was deleted: making it anew and trying to take it");
                holder = false;
                (manager, changing, building, retry_at) = (None, None, None, None);
            }
            Wake::Built(built) => {
                building = None;
                match built {
                    Ok(m) => manager = Some(Arc::from(m)),
                    Err(e) => {
                        host.lease_error();
                        tracing::warn!(error = %e, "cannot read or create the Lease; trying again");
                        retry_at = Some(Instant::now() + retry);
                    }
                }
            }
            Wake::Changed(changed) => {
                changing = None;
                match changed {
                    Ok(now_holder) => holder = now_holder,
                    Err(e) => {
                        host.lease_error();
                        if lease_is_gone(&e) {
                            // Deleted: others may make it anew and take it.
                            holder = false;
                            manager = None;
                        }
                        tracing::warn!(error = %e, holder, "a call about the Lease failed; trying again");
                        retry_at = Some(Instant::now() + retry);
                    }
                }
            }
        }
    }
    // Shutdown: the calls in flight are dropped (releasing the manager's
    // state), the controllers stopped, then the Lease released.
    drop(building);
    drop(changing);
    if let Some(stopping) = running.take() {
        stopping.stop().await;
        host.leading(false);
        host.transition(Transition::Released);
    }
    if holder && let Some(m) = manager {
        match tokio::time::timeout(RELEASE_TIMEOUT, m.release()).await {
            Ok(Ok(())) => tracing::info!("background controllers stopped; the Lease is released"),
            Ok(Err(e)) => {
                host.lease_error();
                tracing::warn!(error = %e, "cannot release the Lease: another replica takes over once it expires");
            }
            Err(_) => {
                host.lease_error();
                tracing::warn!(
                    "releasing the Lease timed out: another replica takes over once it expires"
                );
            }
        }
    }
}

/// Whether `error` says the Lease does not exist (read, or written: a
/// renewal of a deleted Lease is a 404).
fn lease_is_gone(error: &LeaseManagerError) -> bool {
    match error {
        LeaseManagerError::NonexistentLease(_) => true,
        LeaseManagerError::KubeError(kube::Error::Api(status)) => status.code == 404,
        _ => false,
    }
}

/// A lease manager for `options`, making the Lease when it is missing.
async fn new_manager(
    client: kube::Client,
    namespace: &str,
    options: &LeaseOptions,
) -> kube_lease_manager::Result<LeaseManager> {
    LeaseManagerBuilder::new(client, &options.name)
        .with_namespace(namespace)
        .with_create_mode(LeaseCreateMode::AutoCreate)
        .with_identity(&options.identity)
        .with_field_manager(options.field_manager())
        .with_duration(options.duration_seconds())
        .with_grace(options.renew_ahead_seconds())
        .build()
        .await
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api(code: u16) -> LeaseManagerError {
        LeaseManagerError::KubeError(kube::Error::Api(
            Status {
                code,
                ..Status::default()
            }
            .boxed(),
        ))
    }

    #[test]
    fn only_a_missing_lease_counts_as_gone() {
        assert!(lease_is_gone(&LeaseManagerError::NonexistentLease(
            "l".into()
        )));
        assert!(lease_is_gone(&api(404)), "a renewal of a deleted Lease");
        for code in [403, 409, 500, 503] {
            assert!(!lease_is_gone(&api(code)), "{code} is retried");
        }
        assert!(!lease_is_gone(&LeaseManagerError::InconsistentState(
            "x".into()
        )));
    }
}
