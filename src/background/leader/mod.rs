//! One replica runs the background controllers: the holder of a
//! `coordination.k8s.io/v1` Lease in the webhook's namespace. Every replica
//! serves admission whatever this module does; only the controllers that
//! need the Lease (the stale-force sweeper, the audit, the certificate
//! controller: whatever the composition root hands in) wait for it.
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
//! Where the replica stands is a state machine ([`standing`]): a
//! candidate builds a lease manager, a follower waits for the holder to
//! change, a holder leads while its renewals are fresh, and on shutdown
//! the leader releases. The loop here makes the calls and feeds their
//! answers to it.
//!
//! With election off ([`run_unelected`]) the controllers run from start to
//! shutdown, in every replica.

pub mod controllers;
mod election;
mod options;
mod released;
mod renewals;
pub mod standing;

use std::sync::Arc;

use kube::api::Api;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use self::controllers::{Controller, ControllerFuture, STOP_TIMEOUT, Started};
use self::election::{Call, Election, sleep_until};
pub use self::options::{
    DEFAULT_LEASE_NAME, LeaseOptions, LeaseOptionsError, identity, own_identity,
};
pub use self::renewals::{LeaseWrites, RecordWrites};
use self::standing::Standing;
use crate::metrics::leader::LeaderMetrics;

/// Runs `controllers` from now until `shutdown` is cancelled, then stops
/// them and waits for them: every replica runs them (`--leader-elect=false`).
pub async fn run_unelected(
    controllers: Vec<Controller>,
    metrics: LeaderMetrics,
    shutdown: CancellationToken,
) {
    if controllers.is_empty() {
        return;
    }
    let started = controllers::start(&controllers);
    metrics.set_leading(true);
    shutdown.cancelled().await;
    started.stop().await;
    metrics.set_leading(false);
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

/// Takes part in the election for the Lease of `options` until `shutdown`
/// is cancelled, running `controllers` while this replica leads. `config`
/// is the API server's (the Lease client gets short timeouts of its own);
/// `client`, built from it, watches the Lease.
pub async fn run_elected(
    config: kube::Config,
    client: kube::Client,
    options: LeaseOptions,
    controllers: Vec<Controller>,
    metrics: LeaderMetrics,
    shutdown: CancellationToken,
) {
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let writes = LeaseWrites::default();
    let lease_client = match lease_client(config, &namespace, &options, writes.clone()) {
        Ok(client) => client,
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
        Api::namespaced(client, &namespace),
        options.name.clone(),
        (Arc::clone(&released), Arc::clone(&deleted)),
        shutdown.child_token(),
    ));
    let mut election = Election {
        options,
        namespace,
        client: lease_client,
        writes,
        metrics,
        standing: Standing::Candidate,
        call: Call::Idle,
        leading: None,
    };
    loop {
        election.follow_standing(&controllers).await;
        election.next_call();
        let check = election.check_at();
        let holds = election.standing.holds();
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            () = sleep_until(check) => {}
            () = deleted.notified() => election.deleted(),
            () = released.notified(), if !holds => election.released(),
            done = election.call.done() => election.answered(done),
        }
    }
    election.release().await;
}
