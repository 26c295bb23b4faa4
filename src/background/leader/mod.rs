//! One replica runs the background controllers: the holder of a
//! `coordination.k8s.io/v1` Lease in the webhook's namespace. Every replica
//! serves admission whatever this module does; only the controllers that
//! need the Lease (the stale-force sweeper, the audit, the certificate
//! controller: whatever the composition root hands in) wait for it.
//!
//! The election is client-go's, on kube's `Api<Lease>` ([`election`]):
//! each replica reads the Lease every retry period and writes it with a
//! merge patch carrying the `resourceVersion` it read, so of two replicas
//! writing the same version only one succeeds. Around that:
//! - **Expiry by this replica's own clock.** Another replica's Lease has
//!   expired only when it has not changed for its duration as measured by
//!   this replica's monotonic clock from when it saw it change
//!   ([`observed`]); the holder's `renewTime` is written for people and
//!   never compared with this replica's wall clock, so clock skew between
//!   nodes cannot make two leaders.
//! - **The renew deadline.** The controllers run only while the last
//!   successful write as holder was *sent* less than the renew deadline
//!   ago. Past that they are cancelled and waited for (at most
//!   [`STOP_TIMEOUT`], then aborted), which is over before the Lease can
//!   expire for the others: they count its duration from when they saw
//!   that write, which is later than when it was sent, and the deadline is
//!   shorter than the duration. The Lease client's requests time out after
//!   the retry period, so a hung API server shows up as failures, retried
//!   every retry period until a renewal succeeds or the deadline passes.
//! - **A bounded duration.** The holder's `leaseDurationSeconds` counts
//!   only up to this replica's own duration, so a Lease written once with
//!   a huge duration and never renewed is taken over like any other.
//! - **A Lease no replica holds, visible.** Each replica exports how long
//!   it has followed others without holding the Lease
//!   (`leader_lease_followed_seconds`): when even the smallest of those is
//!   several durations, no running replica holds it (an alert says so),
//!   and a replica whose holder does not look like another replica logs it.
//! - **Quick hand-over.** A watch of the Lease wakes a waiting replica as
//!   soon as the holder releases it, so a leader that stops on SIGTERM is
//!   replaced within a few round trips instead of a Lease duration.
//! - **Shutdown.** On shutdown the leader stops its controllers first, then
//!   releases the Lease (a write of the version it last wrote).
//! - **A deleted Lease** (seen by the watch, or a renewal answered 404)
//!   stops the leader at once; every replica then makes it anew (the first
//!   to make it holds it) and the others follow.
//!
//! With election off ([`run_unelected`]) the controllers run from start to
//! shutdown, in every replica.

pub mod args;
pub mod controllers;
mod election;
pub mod observed;

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use self::args::{LeaseOptions, LeaseOptionsError};
pub use self::controllers::Worker;
use self::election::{Election, call_at};
use crate::metrics::leader::LeaderMetrics;

/// Runs `controllers` from now until `shutdown` is cancelled, then stops
/// them and waits for them: every replica runs them (`--leader-elect=false`).
pub async fn run_unelected(
    controllers: Vec<Worker>,
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

/// The environment variable that shifts the wall-clock times this replica
/// writes into the Lease by its value in seconds (e.g. `-10800`): for tests
/// of replicas whose clocks disagree. Unset in any install.
pub const CLOCK_OFFSET_ENV: &str = "PIPELINEROLLOUT_WEBHOOK_TEST_LEASE_CLOCK_OFFSET";

/// The offset [`CLOCK_OFFSET_ENV`] asks for; zero when unset or unreadable.
fn clock_offset() -> k8s_openapi::jiff::SignedDuration {
    let seconds = std::env::var(CLOCK_OFFSET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0);
    k8s_openapi::jiff::SignedDuration::from_secs(seconds)
}

/// The Lease client: each request times out after the retry period (per
/// request: a read timeout on the connection would also close idle pooled
/// connections and fail the request handed one just then).
fn lease_client(
    mut config: kube::Config,
    options: &LeaseOptions,
) -> Result<kube::Client, kube::Error> {
    config.connect_timeout = Some(options.retry_period);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::timeout::TimeoutLayer::new(options.retry_period))
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
    controllers: Vec<Worker>,
    metrics: LeaderMetrics,
    shutdown: CancellationToken,
) {
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let lease_client = match lease_client(config, &options) {
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
        controllers = ?controllers.iter().map(Worker::name).collect::<Vec<_>>(),
        "leader election on: the holder of the Lease runs the background controllers"
    );
    let (released, deleted) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    tokio::spawn(watch_released(
        Api::namespaced(client, &namespace),
        options.name.clone(),
        (Arc::clone(&released), Arc::clone(&deleted)),
        shutdown.child_token(),
    ));
    let clock_offset = clock_offset();
    if !clock_offset.is_zero() {
        tracing::warn!(offset = ?clock_offset, "{CLOCK_OFFSET_ENV} is set: the times written into the Lease are shifted (a test setting)");
    }
    let mut election = Election {
        api: Api::namespaced(lease_client, &namespace),
        options,
        metrics,
        clock_offset,
        observed: None,
        held: None,
        renewed: None,
        call: call_at(Instant::now()),
        leading: None,
        following_since: None,
        follow_logged: false,
    };
    loop {
        election.follow_standing(&controllers).await;
        let check = election
            .valid_until()
            .filter(|_| election.leading.is_some());
        let deadline = tokio::time::sleep_until(check.unwrap_or_else(Instant::now).into());
        let holds = election.holds();
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            () = deadline, if check.is_some() => {}
            () = deleted.notified() => election.deleted(),
            () = released.notified(), if !holds => election.released(),
            done = &mut election.call => match done {
                None => election.call_now(),
                Some((observed, outcome)) => election.answered(observed, outcome),
            },
        }
    }
    election.release().await;
}

/// Wakes `released` whenever the Lease has no holder (released, or never
/// held), and `deleted` when it is deleted: a replica waiting for the
/// Lease sleeps until the expiry it last read, so it campaigns at once.
async fn watch_released(
    api: Api<Lease>,
    name: String,
    (released, deleted): (Arc<Notify>, Arc<Notify>),
    stop: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(api, config).default_backoff();
    let follow = stream.for_each(|event| {
        match event {
            Ok(Event::Apply(lease) | Event::InitApply(lease)) => {
                let free = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref())
                    .is_none_or(str::is_empty);
                if free {
                    released.notify_one();
                }
            }
            Ok(Event::Delete(_)) => deleted.notify_one(),
            Ok(Event::Init | Event::InitDone) => {}
            Err(e) => {
                tracing::debug!(error = %e, "the watch of the Lease failed; restarting with backoff");
            }
        }
        std::future::ready(())
    });
    stop.run_until_cancelled(follow).await;
}
