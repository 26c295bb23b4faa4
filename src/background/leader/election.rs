//! One replica's part in the election ([`super`] describes it), call by
//! call; [`super::run_elected`] loops over it.

use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use super::args::LeaseOptions;
use super::controllers::{self, Started, Worker};
use super::observed::{Decision, Observed, StatedDuration, Version, looks_like_a_sibling};
use crate::metrics::leader::LeaderMetrics;

/// How long releasing the Lease on shutdown may take.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

/// What one call about the Lease came to.
#[derive(Debug)]
pub(super) enum Outcome {
    /// This replica wrote the Lease as its holder (`took`: it was not
    /// before); `sent` is when the write was sent, `lease` what was stored.
    Held {
        sent: Instant,
        took: bool,
        lease: Box<Lease>,
    },
    Following {
        holder: String,
    },
    /// Another replica wrote the Lease (or made it) between the read and
    /// the write: read it again.
    Lost,
    Failed(kube::Error),
}

/// The call about the Lease in flight, or the wait before the next one
/// (which completes with `None`).
pub(super) type Call = BoxFuture<'static, Option<(Option<Observed>, Outcome)>>;

/// The wait until the next call, at `at`.
pub(super) fn call_at(at: Instant) -> Call {
    Box::pin(tokio::time::sleep_until(at.into()).map(|()| None))
}

/// The wall-clock time written into the Lease (`acquireTime`,
/// `renewTime`): for people reading it, never for the election. `offset`
/// shifts it, so that tests can run a replica whose clock is wrong.
fn wall_now(offset: SignedDuration) -> MicroTime {
    MicroTime(
        Timestamp::now()
            .checked_add(offset)
            .unwrap_or_else(|_| Timestamp::now()),
    )
}

pub(super) struct Election {
    pub(super) options: LeaseOptions,
    pub(super) api: Api<Lease>,
    pub(super) metrics: LeaderMetrics,
    /// The offset of [`wall_now`] (tests only).
    pub(super) clock_offset: SignedDuration,
    /// The Lease as this replica last read it, and since when.
    pub(super) observed: Option<Observed>,
    /// The Lease as this replica last wrote it as its holder; `None` while
    /// it does not hold it.
    pub(super) held: Option<Lease>,
    /// When the last successful write as holder was sent.
    pub(super) renewed: Option<Instant>,
    pub(super) call: Call,
    pub(super) leading: Option<Started>,
    /// Since when this replica has seen the Lease held by others without
    /// holding it or seeing it free; `None` while it holds it.
    pub(super) following_since: Option<Instant>,
    pub(super) follow_logged: bool,
}

/// After this many of this replica's Lease durations without holding the
/// Lease, a replica logs whom it follows (when the holder does not look
/// like another replica) and the alert's metric passes its threshold.
pub const FOLLOW_LOG_DURATIONS: u32 = 3;

impl Election {
    pub(super) fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// Until when the controllers may run: the renew deadline after the
    /// last successful write as holder.
    pub(super) fn valid_until(&self) -> Option<Instant> {
        let renewed = self.renewed.filter(|_| self.holds())?;
        Some(renewed + self.options.renew_deadline)
    }

    /// Starts the controllers when this replica has come to lead, stops
    /// them when it no longer does.
    pub(super) async fn follow_standing(&mut self, controllers: &[Worker]) {
        let leads = self.valid_until().is_some_and(|t| Instant::now() < t);
        if leads && self.leading.is_none() {
            self.leading = Some(controllers::start(controllers));
            self.metrics.set_leading(true);
            self.metrics.record_transition("acquired");
            tracing::info!(identity = %self.options.identity, "this replica leads: background controllers started");
        } else if !leads && let Some(stopping) = self.leading.take() {
            stopping.stop().await;
            self.metrics.set_leading(false);
            self.metrics.record_transition("lost");
            let why = if self.holds() {
                "no renewal of the Lease succeeded within the renew deadline"
            } else {
                "the Lease is held by another replica, or was deleted"
            };
            tracing::warn!(identity = %self.options.identity, "this replica no longer leads ({why}): background controllers stopped");
        }
    }

    pub(super) fn call_now(&mut self) {
        let (api, options) = (self.api.clone(), self.options.clone());
        let call = attempt(api, options, self.clock_offset, self.observed.clone());
        self.call = Box::pin(call.map(Some));
    }

    /// Takes in what a call came to, and schedules the next one.
    pub(super) fn answered(&mut self, observed: Option<Observed>, outcome: Outcome) {
        let previous = std::mem::replace(&mut self.observed, observed.clone());
        if let Some(seen) = &observed {
            self.note_stated(previous.as_ref(), seen);
        }
        let retry = self.options.retry_period;
        let next = match outcome {
            Outcome::Held { sent, took, lease } => {
                if took {
                    let why = match observed.as_ref().and_then(|o| o.version.holder.as_ref()) {
                        None => "it had no holder".to_owned(),
                        Some(holder) => format!(
                            "{holder:?} had not renewed it for {} s",
                            observed.as_ref().map_or(0, |o| o.duration.as_secs())
                        ),
                    };
                    tracing::info!(identity = %self.options.identity, "took the Lease: {why}");
                }
                self.held = Some(*lease);
                self.renewed = Some(sent);
                self.following_since = None;
                self.follow_logged = false;
                sent + retry
            }
            Outcome::Following { holder } => {
                if self.held.take().is_some() {
                    tracing::warn!(%holder, "the Lease is held by another replica");
                }
                self.follow(&holder);
                Instant::now() + retry
            }
            Outcome::Lost => {
                if self.holds() {
                    self.metrics.lease_errors.inc();
                    tracing::warn!(
                        "the Lease changed between reading and renewing it; reading it again"
                    );
                }
                Instant::now() + retry
            }
            Outcome::Failed(e) => {
                self.metrics.lease_errors.inc();
                tracing::warn!(error = %e, holder = self.holds(), "a call about the Lease failed; trying again");
                if is_status(&e, 404) {
                    self.held = None;
                }
                Instant::now() + retry
            }
        };
        let followed = self
            .following_since
            .map_or(Duration::ZERO, |since| since.elapsed());
        self.metrics.set_followed(followed);
        self.call = call_at(next);
    }

    /// Logs what is wrong with the Lease's stated duration, once for each
    /// holder and stated duration (not on every read).
    fn note_stated(&self, previous: Option<&Observed>, seen: &Observed) {
        let Some(stated) = seen.stated else { return };
        let Some(problem) = stated.problem(self.options.duration) else {
            return;
        };
        let same = previous
            .is_some_and(|p| p.version.holder == seen.version.holder && p.stated == seen.stated);
        if same || seen.version.holder.as_deref() == Some(self.options.identity.as_str()) {
            return;
        }
        let holder = seen.version.holder.as_deref().unwrap_or("");
        tracing::warn!(%holder, "{problem}");
    }

    /// This replica follows `holder`: counts how long it has not held the
    /// Lease, and says so once it is [`FOLLOW_LOG_DURATIONS`] durations
    /// and the holder does not look like another replica.
    fn follow(&mut self, holder: &str) {
        let since = *self.following_since.get_or_insert_with(Instant::now);
        let long = self.options.duration * FOLLOW_LOG_DURATIONS;
        if self.follow_logged || since.elapsed() < long {
            return;
        }
        self.follow_logged = true;
        if looks_like_a_sibling(&self.options.identity, holder) {
            return;
        }
        tracing::warn!(
            %holder,
            identity = %self.options.identity,
            followed = ?since.elapsed(),
            "this replica has not held the Lease for {} s and its holder does not look like a replica of this webhook: if no running replica is {holder:?}, something else holds the Lease and the background work (certificates, audit, sweeper) is stopped; delete the Lease (docs/observability.md#pipelinerolloutwebhookleaseheldbynoreplica)",
            since.elapsed().as_secs()
        );
    }

    pub(super) fn released(&mut self) {
        tracing::debug!("the Lease was released: trying to take it");
        self.call = call_at(Instant::now());
    }

    /// The watch says the Lease was deleted: whoever makes it anew may take
    /// it at once, so a holder stops now; everyone calls at once.
    pub(super) fn deleted(&mut self) {
        tracing::warn!("the Lease was deleted: making it anew and trying to take it");
        self.held = None;
        self.observed = None;
        self.call = call_at(Instant::now());
    }

    /// Shutdown: the call in flight is dropped, the controllers stopped,
    /// then the Lease released (a write of the version this replica last
    /// wrote, so a Lease taken since is left alone).
    pub(super) async fn release(mut self) {
        self.call = call_at(Instant::now());
        let (metrics, options) = (&self.metrics, &self.options);
        if let Some(stopping) = self.leading.take() {
            stopping.stop().await;
            metrics.set_leading(false);
            metrics.record_transition("released");
        }
        let Some(lease) = &self.held else {
            return;
        };
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null},
        });
        let params = PatchParams {
            field_manager: Some(options.field_manager()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(&patch);
        let write = self.api.patch(&options.name, &params, &patch);
        match tokio::time::timeout(RELEASE_TIMEOUT, write).await {
            Ok(Ok(_)) => tracing::info!("background controllers stopped; the Lease is released"),
            Ok(Err(e)) => {
                metrics.lease_errors.inc();
                tracing::warn!(error = %e, "cannot release the Lease: another replica takes over once it expires");
            }
            Err(_) => {
                metrics.lease_errors.inc();
                tracing::warn!(
                    "releasing the Lease timed out: another replica takes over once it expires"
                );
            }
        }
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// One call: reads the Lease (making it, held by this replica, when it is
/// missing), then renews it, takes it or follows its holder.
async fn attempt(
    api: Api<Lease>,
    options: LeaseOptions,
    offset: SignedDuration,
    observed: Option<Observed>,
) -> (Option<Observed>, Outcome) {
    let lease = match api.get_opt(&options.name).await {
        Ok(Some(lease)) => lease,
        Ok(None) => return (None, create(&api, &options, offset).await),
        Err(e) => return (observed, Outcome::Failed(e)),
    };
    let stated = StatedDuration::of(&lease, options.duration);
    let duration = stated.counted(options.duration);
    let mut seen = Observed::read(observed, Version::of(&lease), duration, Instant::now());
    seen.stated = Some(stated);
    let took = match seen.decide(&options.identity, Instant::now()) {
        Decision::Follow { holder, .. } => return (Some(seen), Outcome::Following { holder }),
        Decision::Renew => false,
        Decision::Take => true,
    };
    let now = wall_now(offset);
    let mut spec = json!({
        "holderIdentity": options.identity,
        "renewTime": now,
        "leaseDurationSeconds": options.duration_seconds(),
    });
    if took {
        let transitions = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0);
        spec["acquireTime"] = json!(now);
        spec["leaseTransitions"] = json!(transitions.saturating_add(1));
    }
    let patch = json!({
        "metadata": {"resourceVersion": lease.metadata.resource_version},
        "spec": spec,
    });
    let params = PatchParams {
        field_manager: Some(options.field_manager()),
        ..PatchParams::default()
    };
    let sent = Instant::now();
    match api
        .patch(&options.name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(lease) => (
            Some(seen),
            Outcome::Held {
                sent,
                took,
                lease: Box::new(lease),
            },
        ),
        Err(e) if is_status(&e, 409) => (Some(seen), Outcome::Lost),
        Err(e) => (Some(seen), Outcome::Failed(e)),
    }
}

async fn create(api: &Api<Lease>, options: &LeaseOptions, offset: SignedDuration) -> Outcome {
    let now = wall_now(offset);
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(options.identity.clone()),
            lease_duration_seconds: i32::try_from(options.duration_seconds()).ok(),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    let params = PostParams {
        field_manager: Some(options.field_manager()),
        ..PostParams::default()
    };
    let sent = Instant::now();
    match api.create(&params, &lease).await {
        Ok(lease) => Outcome::Held {
            sent,
            took: true,
            lease: Box::new(lease),
        },
        Err(e) if is_status(&e, 409) => Outcome::Lost,
        Err(e) => Outcome::Failed(e),
    }
}
