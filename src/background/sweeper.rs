//! The stale-force sweeper: the hole the webhook cannot see. A pause can
//! start and end without any write to the PipelineRollout (an
//! ISBServiceRollout or NumaflowControllerRollout update pauses it), so a
//! forced re-apply's `allow-data-loss: "true"` can outlive its pause with no
//! request for `/mutate` to reset. This task watches PipelineRollouts
//! (kube-runtime's watcher, listing as [`super::list`] does, restarted
//! with backoff) and resets the
//! annotation to "false" once the pause has been over for the grace period,
//! with a JSON Patch whose first operation tests the `resourceVersion` it
//! saw: a concurrent change wins and is looked at again. It runs under the
//! elected leader ([`super::leader`]), so one replica watches and patches;
//! were two ever to run at once, the second reset would simply fail its
//! test. It reads the policy in force from a `watch` channel, so a reload
//! takes effect at its next look, and counts what it does in its own
//! block of metrics ([`SweeperMetrics`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation, TestOperation};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events::{EventQueue, PendingEvent};
use crate::metrics::sweeper::{SweepOutcome, SweeperMetrics};
use crate::policy::Policy;
use crate::policy::rules::{EventReason, stale_force_reset};
use crate::rollout::{ALLOW_DATA_LOSS, GuardedObject, Stored};

/// The field manager of the sweeper's patches.
const FIELD_MANAGER: &str = "pipelinerollout-webhook";

/// What the sweeper works with besides the API server.
#[derive(Debug, Clone)]
pub struct SweeperContext {
    /// The policy in force (it may be reloaded while the sweeper runs).
    pub policy: watch::Receiver<Arc<Policy>>,
    /// Where the sweeper's Events go.
    pub events: EventQueue,
    /// Where what it does is counted.
    pub metrics: SweeperMetrics,
}

/// An object by namespace and name.
pub type Key = (String, String);

/// What the sweeper knows of one object whose force is on and whose pause
/// is over.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tracked {
    resource_version: String,
    uid: Option<String>,
    over_since: Instant,
}

/// The objects whose force outlives its pause, and since when. Pure: the
/// watch feeds it, the timer asks it what is due.
#[derive(Debug, Default)]
pub struct StaleForces {
    tracked: HashMap<Key, Tracked>,
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
        let stale = stale_force_reset::force_is_stale(object);
        match (stale, resource_version) {
            (true, Some(rv)) => {
                let entry = self.tracked.entry(key).or_insert_with(|| Tracked {
                    resource_version: rv.to_owned(),
                    uid: object.uid().map(str::to_owned),
                    over_since: now,
                });
                rv.clone_into(&mut entry.resource_version);
            }
            _ => {
                self.tracked.remove(&key);
            }
        }
    }

    /// Forgets an object (deleted, reset, or lost a race).
    pub fn forget(&mut self, key: &Key) {
        self.tracked.remove(key);
    }

    /// The objects whose pause has been over for at least `grace`, with the
    /// resourceVersion seen and the uid.
    pub fn due(&self, now: Instant, grace: Duration) -> Vec<(Key, String, Option<String>)> {
        let mut due: Vec<_> = self
            .tracked
            .iter()
            .filter(|(_, t)| now.saturating_duration_since(t.over_since) >= grace)
            .map(|(k, t)| (k.clone(), t.resource_version.clone(), t.uid.clone()))
            .collect();
        due.sort();
        due
    }

    /// How many objects are tracked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tracked.len()
    }

    /// Whether none are.
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

fn key_of(object: &Stored) -> Option<Key> {
    Some((
        object.metadata.namespace.clone()?,
        object.metadata.name.clone()?,
    ))
}

/// Watches and resets, with `context`, until `stop` is cancelled; then
/// returns at once (a reset in flight is dropped: its outcome is not
/// counted, and the next leader looks at the object again).
pub async fn run(
    client: kube::Client,
    context: SweeperContext,
    grace: Duration,
    stop: CancellationToken,
) {
    tracing::info!(?grace, "stale-force sweeper on: watching PipelineRollouts");
    tokio::select! {
        () = stop.cancelled() => {}
        () = sweep(client, &context, grace) => {}
    }
    tracing::info!("stale-force sweeper stopped");
}

/// Watches and resets until the watch ends.
async fn sweep(client: kube::Client, context: &SweeperContext, grace: Duration) {
    let all: Api<Stored> = Api::all(client.clone());
    let stream = super::list::watch(all, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut stale = StaleForces::default();
    let mut tick = tokio::time::interval(
        grace
            .min(Duration::from_secs(1))
            .max(Duration::from_millis(100)),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut started = false;
    loop {
        tokio::select! {
            event = stream.next() => match event {
                None => {
                    tracing::error!("the PipelineRollout watch ended; the sweeper stops");
                    return;
                }
                Some(Err(e)) => {
                    context.metrics.record_sweep(SweepOutcome::WatchRestart);
                    tracing::warn!(error = %e, "PipelineRollout watch failed; restarting with backoff");
                }
                Some(Ok(Event::Init)) => {
                    if started {
                        context.metrics.record_sweep(SweepOutcome::WatchRestart);
                    }
                    started = true;
                }
                Some(Ok(Event::InitDone)) => {}
                Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                    if let Some(key) = key_of(&object) {
                        stale.observe(key, object.metadata.resource_version.as_deref(), &object.view(), Instant::now());
                    }
                }
                Some(Ok(Event::Delete(object))) => {
                    if let Some(key) = key_of(&object) {
                        stale.forget(&key);
                    }
                }
            },
            _ = tick.tick() => {
                if !context.policy.borrow().force_reapply.one_shot {
                    continue;
                }
                for (key, rv, uid) in stale.due(Instant::now(), grace) {
                    reset(&client, context, &key, &rv, uid.as_deref(), grace).await;
                    stale.forget(&key);
                }
            }
        }
    }
}

/// Resets one object's annotation, counting the outcome.
async fn reset(
    client: &kube::Client,
    context: &SweeperContext,
    (namespace, name): &Key,
    resource_version: &str,
    uid: Option<&str>,
    grace: Duration,
) {
    let api: Api<Stored> = Api::namespaced(client.clone(), namespace);
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
            context.metrics.record_sweep(SweepOutcome::Reset);
            tracing::info!(%namespace, %name, "stale force reset by the sweeper");
            let note = format!(
                "allow-data-loss reset to \"false\" by the stale-force sweeper: the pause the forced re-apply was set for has been over for at least {}, so later changes drain as usual",
                humantime::format_duration(grace)
            );
            let event = PendingEvent::about(
                EventReason::ForceReapplyReset,
                note,
                Stored::api_version(&()).into_owned(),
                (namespace, name, uid),
            );
            context.events.send(event);
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409 | 422) => {
            context.metrics.record_sweep(SweepOutcome::Conflict);
            tracing::debug!(%namespace, %name, code = status.code, "the object changed since it was seen; looking again");
        }
        Err(e) => {
            context.metrics.record_sweep(SweepOutcome::Error);
            tracing::warn!(%namespace, %name, error = %e, "stale force not reset");
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
        assert!(s.due(t0 + Duration::from_secs(9), grace).is_empty());
        // A newer version keeps the clock but updates what the test checks.
        s.observe(
            key("a"),
            Some("2"),
            &rollout("true", idle.clone()),
            t0 + Duration::from_secs(5),
        );
        let due = s.due(t0 + grace, grace);
        assert_eq!(due, [(key("a"), "2".to_owned(), Some("u".to_owned()))]);
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
