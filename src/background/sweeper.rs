//! The stale-force sweeper: the hole the webhook cannot see. A pause can
//! start and end without any write to the PipelineRollout (an
//! ISBServiceRollout or NumaflowControllerRollout update pauses it), so a
//! forced re-apply's `allow-data-loss: "true"` can outlive its pause with no
//! request for `/mutate` to reset. The sweeper is a kube-runtime
//! `Controller` of the PipelineRollouts whose force is on, on the leader's
//! shared reader ([`super::rollout_watch`]): it resets the annotation to
//! "false" once the pause has been over for the grace period (the
//! reconciler requeues the object for the rest of the grace), with a JSON
//! Patch whose first operation tests the `resourceVersion` it saw: a
//! concurrent change wins and is looked at again when it arrives. A reset
//! that fails otherwise is retried by the error policy. It runs under the
//! elected leader ([`super::leader`]), so one replica patches; were two
//! ever to run at once, the second reset would simply fail its test. The
//! objects it tracks are looked at again when the policy changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation, TestOperation};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::audit::audited::{Audited, PIPELINE_ROLLOUTS};
use crate::events::{EventQueue, PendingEvent};
use crate::metrics::sweeper::SweeperMetrics;
use crate::policy::Policy;
use crate::policy::rules::{EventReason, stale_force_reset};
use crate::rollout::{ALLOW_DATA_LOSS, GuardedObject};

/// A PipelineRollout as the leader holds it: its identity and the rules'
/// view of what it stores (the audit's table, kind 0).
pub type Rollout = Audited<PIPELINE_ROLLOUTS>;

const FIELD_MANAGER: &str = "pipelinerollout-webhook";

const CONCURRENCY: u16 = 4;

/// How long after a failed reset (other than a lost race) it is tried
/// again.
const RETRY: Duration = Duration::from_secs(5);

/// What the sweeper works with besides the API server.
#[derive(Debug, Clone)]
pub struct SweeperContext {
    /// The policy in force (it may be reloaded while the sweeper runs).
    pub policy: watch::Receiver<Arc<Policy>>,
    pub events: EventQueue,
    pub metrics: SweeperMetrics,
}

/// The stale-force sweeper's flags of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweeperArgs {
    /// Watch PipelineRollouts and reset allow-data-loss to "false" once a forced re-apply's pause is over (needs get, list, watch and patch on pipelinerollouts).
    #[arg(long, env = "WEBHOOK_RESET_STALE_FORCE")]
    pub reset_stale_force: bool,
    /// How long the pause must have been over before the sweeper resets a force.
    #[arg(long, env = "WEBHOOK_STALE_FORCE_GRACE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub stale_force_grace: Duration,
}

impl SweeperArgs {
    /// The grace the sweeper runs with; `None`: no sweeper.
    pub fn grace(&self) -> Option<Duration> {
        self.reset_stale_force.then_some(self.stale_force_grace)
    }
}

/// An object by namespace and name.
pub type Key = (String, String);

/// The objects whose force outlives its pause: the resourceVersion seen,
/// and since when the pause is over. Pure: the reconciler feeds it and asks
/// it how long is left.
#[derive(Debug, Default)]
pub struct StaleForces {
    tracked: HashMap<Key, (String, Instant)>,
}

impl StaleForces {
    /// Takes in one observed version of an object.
    pub fn observe(
        &mut self,
        key: Key,
        resource_version: Option<&str>,
        object: &GuardedObject,
        now: Instant,
    ) {
        match resource_version.filter(|_| stale_force_reset::force_is_stale(object)) {
            Some(rv) => {
                let since = self.tracked.get(&key).map_or(now, |(_, since)| *since);
                self.tracked.insert(key, (rv.to_owned(), since));
            }
            None => self.forget(&key),
        }
    }

    pub fn forget(&mut self, key: &Key) {
        self.tracked.remove(key);
    }

    /// Keeps only the objects `exists` says are still stored.
    pub fn retain(&mut self, exists: impl Fn(&Key) -> bool) {
        self.tracked.retain(|key, _| exists(key));
    }

    /// How long until `key`'s pause has been over for `grace` (zero: it
    /// is due), with the resourceVersion seen; `None` when it is not
    /// tracked.
    pub fn wait(&self, key: &Key, now: Instant, grace: Duration) -> Option<(Duration, &str)> {
        let (rv, since) = self.tracked.get(key)?;
        let over_for = now.saturating_duration_since(*since);
        Some((grace.saturating_sub(over_for), rv.as_str()))
    }

    pub fn refs(&self) -> Vec<ObjectRef<Rollout>> {
        self.tracked
            .keys()
            .map(|(namespace, name)| ObjectRef::new(name).within(namespace))
            .collect()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tracked.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.tracked.is_empty()
    }
}

/// The JSON Patch that resets the annotation, if the object is still at
/// `resource_version`.
pub fn reset_patch(resource_version: &str) -> json_patch::Patch {
    json_patch::Patch(vec![
        PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
            value: Value::from(resource_version),
        }),
        PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(["metadata", "annotations", ALLOW_DATA_LOSS]),
            value: Value::from("false"),
        }),
    ])
}

struct Sweep {
    client: kube::Client,
    context: SweeperContext,
    grace: Duration,
    store: Store<Rollout>,
    stale: Mutex<StaleForces>,
}

impl Sweep {
    fn stale(&self) -> std::sync::MutexGuard<'_, StaleForces> {
        self.stale.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a reset was not made (the error policy tries again).
#[derive(Debug, thiserror::Error)]
#[error("stale force not reset: {0}")]
struct NotReset(kube::Error);

/// Resets the stale forces of the PipelineRollouts in `store` as
/// `triggers` brings them, until `stop` is cancelled; a reset in flight
/// then finishes (it carries its precondition), within the leader's stop
/// timeout.
pub async fn run(
    client: kube::Client,
    context: SweeperContext,
    grace: Duration,
    store: Store<Rollout>,
    triggers: mpsc::Receiver<Rollout>,
    stop: CancellationToken,
) {
    tracing::info!(?grace, "stale-force sweeper on: watching PipelineRollouts");
    let sweep = Arc::new(Sweep {
        client,
        context,
        grace,
        store: store.clone(),
        stale: Mutex::new(StaleForces::default()),
    });
    // The reader hands over only objects whose force is on (the others
    // have nothing to reset); its store holds only those.
    let forced = futures_util::stream::unfold(triggers, |mut rx| async {
        let object = rx.recv().await?;
        Some((Ok(object), rx))
    });
    // A policy change re-looks at the tracked objects only (the one-shot
    // switch is all it reads), not at every object stored.
    let tracked = Arc::clone(&sweep);
    let policy_changes = futures_util::stream::unfold(
        (sweep.context.policy.clone(), tracked),
        |(mut rx, sweep)| async move {
            rx.changed().await.ok()?;
            let refs = sweep.stale().refs();
            Some((futures_util::stream::iter(refs), (rx, sweep)))
        },
    )
    .flatten();
    Controller::for_stream(forced, store)
        .with_config(Config::default().concurrency(CONCURRENCY))
        .reconcile_on(policy_changes)
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, Arc::clone(&sweep))
        .for_each(|_| std::future::ready(()))
        .await;
    tracing::info!("stale-force sweeper stopped");
}

/// Looks at one PipelineRollout: tracks a force outliving its pause, and
/// resets it once the grace is over.
async fn reconcile(object: Arc<Rollout>, sweep: Arc<Sweep>) -> Result<Action, NotReset> {
    let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name) else {
        return Ok(Action::await_change());
    };
    let key = (namespace.clone(), name.clone());
    let due = {
        let mut stale = sweep.stale();
        let known = stale.wait(&key, Instant::now(), sweep.grace).is_some();
        stale.observe(
            key.clone(),
            object.metadata.resource_version.as_deref(),
            &object.view,
            Instant::now(),
        );
        if !known {
            // A new entry: drop those of objects deleted since.
            stale.retain(|(namespace, name)| {
                sweep
                    .store
                    .get(&ObjectRef::new(name).within(namespace))
                    .is_some()
            });
        }
        stale
            .wait(&key, Instant::now(), sweep.grace)
            .map(|(wait, rv)| (wait, rv.to_owned()))
    };
    let Some((wait, resource_version)) = due else {
        return Ok(Action::await_change());
    };
    if !wait.is_zero() {
        return Ok(Action::requeue(wait));
    }
    if !sweep.context.policy.borrow().force_reapply.one_shot {
        // Looked at again when the policy changes.
        return Ok(Action::await_change());
    }
    let uid = object.metadata.uid.as_deref();
    // Boxed: the reconcilers waiting for their turn stay small.
    match Box::pin(reset(&sweep, &key, &resource_version, uid)).await {
        Ok(()) => {
            sweep.stale().forget(&key);
            Ok(Action::await_change())
        }
        Err(e) => Err(NotReset(e)),
    }
}

/// A failed reset is tried again after [`RETRY`].
fn error_policy(_: Arc<Rollout>, _: &NotReset, _: Arc<Sweep>) -> Action {
    Action::requeue(RETRY)
}

/// Resets one object's annotation, counting the outcome; a lost race is
/// no error (the newer version is looked at when it arrives).
async fn reset(
    sweep: &Sweep,
    (namespace, name): &Key,
    resource_version: &str,
    uid: Option<&str>,
) -> Result<(), kube::Error> {
    let context = &sweep.context;
    let api: Api<Rollout> = Api::namespaced(sweep.client.clone(), namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api
        .patch(
            name,
            &params,
            &Patch::<()>::Json(reset_patch(resource_version)),
        )
        .await
    {
        Ok(_) => {
            context.metrics.record_reset();
            tracing::info!(%namespace, %name, "stale force reset by the sweeper");
            let note = format!(
                "allow-data-loss reset to \"false\" by the stale-force sweeper: the pause the forced re-apply was set for has been over for at least {}, so later changes drain as usual",
                humantime::format_duration(sweep.grace)
            );
            let event = PendingEvent::about(
                EventReason::ForceReapplyReset,
                note,
                Rollout::api_version(&()).into_owned(),
                (namespace, name, uid),
            );
            context.events.send(event);
            Ok(())
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409 | 422) => {
            context.metrics.conflicts.inc();
            tracing::debug!(%namespace, %name, code = status.code, "the object changed since it was seen; looking again");
            Ok(())
        }
        Err(e) => {
            context.metrics.errors.inc();
            tracing::warn!(%namespace, %name, error = %e, "stale force not reset; trying again in {RETRY:?}");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rollout(annotation: &str, status: Value) -> GuardedObject {
        let doc = json!({
            "metadata": {"uid": "u", "annotations": {ALLOW_DATA_LOSS: annotation}},
            "status": status,
        });
        GuardedObject::from_json(&doc.to_string()).expect("JSON")
    }

    fn key(name: &str) -> Key {
        ("team-a".to_owned(), name.to_owned())
    }

    #[test]
    fn tracks_only_forces_whose_pause_is_over_and_waits_for_the_grace() {
        let grace = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut s = StaleForces::default();
        let idle = json!({"upgradeInProgress": ""});
        let pausing = json!({"upgradeInProgress": "PipelinePauseAndDrain"});
        s.observe(key("a"), Some("1"), &rollout("true", idle.clone()), t0);
        s.observe(key("b"), Some("1"), &rollout("true", pausing.clone()), t0);
        s.observe(key("c"), Some("1"), &rollout("false", idle.clone()), t0);
        assert_eq!(s.len(), 1);
        assert_eq!(
            s.wait(&key("a"), t0 + Duration::from_secs(9), grace),
            Some((Duration::from_secs(1), "1"))
        );
        assert_eq!(s.wait(&key("b"), t0, grace), None, "pausing");
        assert_eq!(s.wait(&key("c"), t0, grace), None, "no force");
        // A newer version keeps the clock but updates what the test checks.
        s.observe(
            key("a"),
            Some("2"),
            &rollout("true", idle.clone()),
            t0 + Duration::from_secs(5),
        );
        assert_eq!(
            s.wait(&key("a"), t0 + grace, grace),
            Some((Duration::ZERO, "2"))
        );
        // An object no longer stored is dropped.
        s.observe(key("d"), Some("1"), &rollout("true", idle.clone()), t0);
        s.retain(|k| k != &key("d"));
        assert_eq!(s.len(), 1);
        // A pause starting again forgets it.
        s.observe(key("a"), Some("3"), &rollout("true", pausing), t0 + grace);
        assert!(s.is_empty());
    }

    #[test]
    fn the_reset_patch_tests_the_version_first_and_applies() {
        let patch = reset_patch("42");
        let mut object = json!({"metadata": {"resourceVersion": "42",
            "annotations": {ALLOW_DATA_LOSS: "true"}}});
        json_patch::patch(&mut object, &patch).expect("applies at the version seen");
        assert_eq!(object["metadata"]["annotations"][ALLOW_DATA_LOSS], "false");
        let mut moved = json!({"metadata": {"resourceVersion": "43",
            "annotations": {ALLOW_DATA_LOSS: "true"}}});
        assert!(
            json_patch::patch(&mut moved, &patch).is_err(),
            "a concurrent change wins"
        );
    }
}
