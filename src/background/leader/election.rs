//! One replica's part in the election, step by step: its [`Standing`],
//! the call about the Lease in flight, and the controllers while it
//! leads. [`super::run_elected`] loops over it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseManagerError};

use super::controllers::{self, Controller, Started};
use super::options::LeaseOptions;
use super::renewals::LeaseWrites;
use super::standing::{Answer, Next, Standing};
use crate::metrics::leader::{LeaderMetrics, Transition};

/// How long releasing the Lease on shutdown may take.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

type ChangedFuture = Pin<Box<dyn Future<Output = kube_lease_manager::Result<bool>> + Send>>;
type BuildFuture =
    Pin<Box<dyn Future<Output = kube_lease_manager::Result<Box<LeaseManager>>> + Send>>;

/// The call about the Lease in flight, or the wait before the next one.
pub(super) enum Call {
    /// None: the next one is made at the top of the loop.
    Idle,
    /// Waiting a retry period after a failure.
    RetryAt(Instant),
    /// A manager being built.
    Building(BuildFuture),
    /// The manager renewing, or waiting for the holder to change.
    Changing(ChangedFuture),
}

/// What a [`Call`] came to.
pub(super) enum Done {
    /// The retry period is over.
    RetryOver,
    /// A build answered.
    Built(kube_lease_manager::Result<Box<LeaseManager>>),
    /// A change answered.
    Changed(kube_lease_manager::Result<bool>),
}

impl Call {
    /// Completes when the call answers or its retry wait is over; never
    /// while idle.
    pub(super) async fn done(&mut self) -> Done {
        match self {
            Call::Idle => std::future::pending().await,
            Call::RetryAt(at) => {
                tokio::time::sleep_until((*at).into()).await;
                Done::RetryOver
            }
            Call::Building(f) => Done::Built(f.await),
            Call::Changing(f) => Done::Changed(f.await),
        }
    }
}

pub(super) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// One replica's part in the election: its standing, the call in flight,
/// and the controllers while it leads.
pub(super) struct Election {
    pub(super) options: LeaseOptions,
    pub(super) namespace: String,
    /// The Lease client.
    pub(super) client: kube::Client,
    pub(super) writes: LeaseWrites,
    pub(super) metrics: LeaderMetrics,
    pub(super) standing: Standing<Arc<LeaseManager>>,
    pub(super) call: Call,
    pub(super) leading: Option<Started>,
}

impl Election {
    /// Starts the controllers when this replica has come to lead, stops
    /// them when it no longer does.
    pub(super) async fn follow_standing(&mut self, controllers: &[Controller]) {
        let fresh = self
            .writes
            .fresh(Instant::now(), self.options.renew_deadline);
        let leads = self.standing.leads(fresh);
        if leads && self.leading.is_none() {
            self.leading = Some(controllers::start(controllers));
            self.metrics.set_leading(true);
            self.metrics.record_transition(Transition::Acquired);
            tracing::info!(identity = %self.options.identity, "this replica leads: background controllers started");
        } else if !leads && let Some(stopping) = self.leading.take() {
            stopping.stop().await;
            self.metrics.set_leading(false);
            self.metrics.record_transition(Transition::Lost);
            let why = if self.standing.holds() {
                "no renewal of the Lease succeeded within the renew deadline"
            } else {
                "the Lease is held by another replica"
            };
            tracing::warn!(identity = %self.options.identity, "this replica no longer leads ({why}): background controllers stopped");
        }
    }

    /// Makes the next call about the Lease when none is in flight: a
    /// candidate builds a manager, anyone else asks it for a change.
    pub(super) fn next_call(&mut self) {
        if !matches!(self.call, Call::Idle) {
            return;
        }
        self.call = match self.standing.manager() {
            None => {
                let (client, namespace, options) = (
                    self.client.clone(),
                    self.namespace.clone(),
                    self.options.clone(),
                );
                Call::Building(Box::pin(async move {
                    new_manager(client, &namespace, &options)
                        .await
                        .map(Box::new)
                }))
            }
            Some(m) => {
                let m = Arc::clone(m);
                Call::Changing(Box::pin(async move { m.changed().await }))
            }
        };
    }

    /// When to look at the standing again. While leading: at the renew
    /// deadline. Holding the Lease without a fresh renewal: each retry
    /// period, to start again once a renewal succeeds.
    pub(super) fn check_at(&self) -> Option<Instant> {
        let deadline = self.options.renew_deadline;
        if self.leading.is_some() {
            self.writes.valid_until(deadline)
        } else if self.standing.holds() {
            Some(Instant::now() + self.options.retry_period)
        } else {
            None
        }
    }

    /// Takes in what the call came to.
    pub(super) fn answered(&mut self, done: Done) {
        let answer = match done {
            Done::RetryOver => {
                self.call = Call::Idle;
                return;
            }
            Done::Built(Ok(m)) => Answer::Built(Arc::from(m)),
            Done::Built(Err(e)) => {
                self.metrics.record_lease_error();
                tracing::warn!(error = %e, "cannot read or create the Lease; trying again");
                Answer::Failed { gone: false }
            }
            Done::Changed(Ok(holds)) => Answer::Holds(holds),
            Done::Changed(Err(e)) => {
                self.metrics.record_lease_error();
                let gone = lease_is_gone(&e);
                let holder = self.standing.holds() && !gone;
                tracing::warn!(error = %e, holder, "a call about the Lease failed; trying again");
                Answer::Failed { gone }
            }
        };
        let standing = std::mem::replace(&mut self.standing, Standing::Candidate);
        let (standing, next) = standing.answered(answer);
        self.standing = standing;
        self.call = match next {
            Next::Now => Call::Idle,
            Next::AfterRetry => Call::RetryAt(Instant::now() + self.options.retry_period),
        };
    }

    /// The watch says the Lease was released: campaign afresh.
    pub(super) fn released(&mut self) {
        tracing::debug!("the Lease was released: trying to take it");
        let standing = std::mem::replace(&mut self.standing, Standing::Candidate);
        self.standing = standing.released();
        self.call = Call::Idle;
    }

    /// The watch says the Lease was deleted: make it anew and campaign.
    pub(super) fn deleted(&mut self) {
        tracing::warn!("the Lease was deleted: making it anew and trying to take it");
        let standing = std::mem::replace(&mut self.standing, Standing::Candidate);
        self.standing = standing.deleted();
        self.call = Call::Idle;
    }

    /// Shutdown: the call in flight is dropped (releasing the manager's
    /// state), the controllers stopped, then the Lease released.
    pub(super) async fn release(self) {
        let Election {
            call,
            leading,
            standing,
            metrics,
            ..
        } = self;
        drop(call);
        if let Some(stopping) = leading {
            stopping.stop().await;
            metrics.set_leading(false);
            metrics.record_transition(Transition::Released);
        }
        let Standing::Holder(m) = standing else {
            return;
        };
        match tokio::time::timeout(RELEASE_TIMEOUT, m.release()).await {
            Ok(Ok(())) => tracing::info!("background controllers stopped; the Lease is released"),
            Ok(Err(e)) => {
                metrics.record_lease_error();
                tracing::warn!(error = %e, "cannot release the Lease: another replica takes over once it expires");
            }
            Err(_) => {
                metrics.record_lease_error();
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
