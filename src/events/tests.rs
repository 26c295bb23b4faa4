//! The queue under a stuck API server, and the Event's own fields.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::publisher::{NOTE_LIMIT, safe_note};
use super::*;
use crate::rollout::{GROUP, VERSION};

/// Holds every publish until the gate opens, then records it: an API
/// server that does not answer, then recovers.
#[derive(Clone)]
struct Gated {
    gate: Arc<Semaphore>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Gated {
    fn closed() -> Self {
        Self {
            gate: Arc::new(Semaphore::new(0)),
            seen: Arc::default(),
        }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl PublishEvent for Gated {
    async fn publish(&self, event: &PendingEvent) -> Result<Delivery, PublishError> {
        let failed = |e: String| PublishError(e.into());
        let _open = self
            .gate
            .acquire()
            .await
            .map_err(|e| failed(e.to_string()))?;
        self.seen
            .lock()
            .map_err(|e| failed(e.to_string()))?
            .push(event.note.clone());
        Ok(Delivery::Sent)
    }
}

fn event(n: usize) -> PendingEvent {
    PendingEvent::about(
        EventReason::ForceReapplyReset,
        format!("note {n}"),
        format!("{GROUP}/{VERSION}"),
        ("team-a", "p", Some("uid-1")),
    )
}

fn counted(counts: &EventCounts, result: &'static str) -> f64 {
    let labels = EventLabels {
        reason: EventReason::ForceReapplyReset.as_str(),
        result,
    };
    counts.get_or_create(&labels).get() as f64
}

// A current-thread runtime: the publishing task cannot run while the
// test sends, so the queue's fill is exact.
#[tokio::test(flavor = "current_thread")]
async fn a_stuck_api_server_costs_dropped_events_not_waiting_requests() {
    let counts = EventCounts::default();
    let sink = Gated::closed();
    let queue = EventQueue::start(sink.clone(), counts.clone());
    // `send` is synchronous: had it waited for room, this loop would
    // never return (nothing drains the queue until the test yields).
    for n in 0..QUEUE_CAPACITY + 50 {
        queue.send(event(n));
    }
    assert_eq!(counted(&counts, "dropped"), 50.0, "the overflow is counted");

    sink.gate.add_permits(QUEUE_CAPACITY);
    let all_sent = async {
        while sink.seen().len() < QUEUE_CAPACITY {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(10), all_sent)
            .await
            .is_ok(),
        "the queued events are published once the API server answers; published {}",
        sink.seen().len()
    );
    let seen = sink.seen();
    assert_eq!(seen.first().map(String::as_str), Some("note 0"));
    let last = format!("note {}", QUEUE_CAPACITY - 1);
    assert_eq!(
        seen.last(),
        Some(&last),
        "the newest 50 were the ones dropped"
    );
    assert_eq!(counted(&counts, "sent"), QUEUE_CAPACITY as f64);
}

#[test]
fn an_event_is_about_the_rollout_it_names() {
    let e = event(1);
    assert_eq!(e.regarding.kind.as_deref(), Some("PipelineRollout"));
    assert_eq!(
        e.regarding.api_version.as_deref(),
        Some("numaplane.numaproj.io/v1alpha1")
    );
    assert_eq!(e.regarding.namespace.as_deref(), Some("team-a"));
    assert_eq!(e.regarding.name.as_deref(), Some("p"));
    assert_eq!(e.regarding.uid.as_deref(), Some("uid-1"));
}

#[test]
fn notes_are_escaped_and_kept_within_the_api_servers_limit() {
    assert_eq!(
        safe_note("user \"mallory\nforged\" may not"),
        "user \"mallory\\nforged\" may not"
    );
    let long = format!("{}é", "x".repeat(2_000));
    let cut = safe_note(&long);
    assert!(cut.len() <= NOTE_LIMIT, "{}", cut.len());
    assert!(cut.ends_with('…'));
}

/// Records every Event it is given.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<Vec<PendingEvent>>>);

impl Recording {
    fn seen(&self) -> Vec<PendingEvent> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl PublishEvent for Recording {
    async fn publish(&self, event: &PendingEvent) -> Result<Delivery, PublishError> {
        self.0
            .lock()
            .map_err(|e| PublishError(e.to_string().into()))?
            .push(event.clone());
        Ok(Delivery::Sent)
    }
}

/// A reviewed write of the namespace-level ConfigMap `team-a/numaplane-config`.
fn config_map_request(operation: &str, dry_run: bool) -> AdmissionRequest {
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "numaplane-config", "namespace": "team-a", "uid": "cm-uid"},
        "data": {"upgradeStrategy": "no-strategy"}});
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "review-1",
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "numaplane-config",
            "namespace": "team-a",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": object,
            "dryRun": dry_run,
        },
    });
    AdmissionRequest::parse(review.to_string().as_bytes()).expect("an AdmissionReview")
}

fn outcome_with(reason: EventReason) -> Reply {
    let mut verdict = crate::policy::rules::Verdict::default();
    verdict
        .events
        .push(crate::policy::rules::verdict::ForceEvent {
            reason,
            note: "refused".to_owned(),
        });
    Reply {
        webhook: crate::admission::Webhook::Validate,
        body: Vec::new(),
        judged: true,
        verdict,
        rbac: None,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_namespace_strategy_event_is_about_the_config_map_and_none_for_a_dry_run() {
    let sink = Recording::default();
    let queue = EventQueue::start(sink.clone(), EventCounts::default());
    let outcome = outcome_with(EventReason::NamespaceStrategyDenied);
    queue.send_verdict_events(&config_map_request("UPDATE", true), &outcome);
    queue.send_verdict_events(&config_map_request("UPDATE", false), &outcome);
    let published = async {
        while sink.seen().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(10), published)
            .await
            .is_ok()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let seen = sink.seen();
    let [event] = seen.as_slice() else {
        panic!("one Event (none for the dry run): {seen:#?}");
    };
    let regarding = &event.regarding;
    assert_eq!(
        (
            regarding.api_version.as_deref(),
            regarding.kind.as_deref(),
            regarding.namespace.as_deref(),
            regarding.name.as_deref(),
            regarding.uid.as_deref(),
        ),
        (
            Some("v1"),
            Some("ConfigMap"),
            Some("team-a"),
            Some("numaplane-config"),
            Some("cm-uid")
        )
    );
    assert!(!event.after_create);
    assert_eq!(
        regarded::from_reference(regarding),
        Some(Resource::ConfigMap)
    );
}

#[test]
fn the_forgery_check_looks_each_regarded_kind_up_where_it_lives() {
    let reference = |api_version: &str, kind: &str| ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        ..ObjectReference::default()
    };
    let config_map = regarded::from_reference(&reference("v1", "ConfigMap"))
        .map(regarded::api_resource)
        .map(|r| (r.group, r.api_version, r.plural));
    assert_eq!(
        config_map,
        Some(("".to_owned(), "v1".to_owned(), "configmaps".to_owned()))
    );
    for kind in Kind::ALL {
        let api_version = format!("{}/{}", kind.group(), crate::kinds::VERSION);
        let found = regarded::from_reference(&reference(&api_version, kind.kind()));
        assert_eq!(found, Some(Resource::Guarded(kind)), "{kind:?}");
        let resource = regarded::api_resource(Resource::Guarded(kind));
        assert_eq!(
            (resource.api_version, resource.plural),
            (api_version, kind.resource().to_owned())
        );
    }
    // Nothing else: no Event about a Secret, a ConfigMap of another group,
    // or a guarded kind without its group.
    for (api_version, kind) in [
        ("v1", "Secret"),
        ("apps/v1", "ConfigMap"),
        ("v1", "PipelineRollout"),
        ("", "ConfigMap"),
    ] {
        assert_eq!(
            regarded::from_reference(&reference(api_version, kind)),
            None,
            "{api_version} {kind}"
        );
    }
}
