//! Kubernetes Events (events.k8s.io/v1) on PipelineRollouts, sent off the
//! request path: answers, and background work such as the sweeper, put what
//! they ask for into a bounded queue, and one task publishes them. A full queue or an API error drops
//! the Event, logs it and counts it; nothing here delays or changes an
//! answer. Repeated identical Events become a series (kube-runtime's
//! recorder aggregates them).

use std::future::Future;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;

use crate::admission::{AdmissionRequest, Outcome};
use crate::policy::rules::EventReason;
use crate::rollout::KIND;

/// The name Events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "pipelinerollout-webhook";

/// How many Events may wait to be sent; past it, new ones are dropped.
pub const QUEUE_CAPACITY: usize = 256;

/// Labels of an Event: its reason and what became of it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// ForceReapplyAllowed, ForcePromoteAllowed, ForceReapplyDenied or ForceReapplyReset.
    pub reason: &'static str,
    /// sent, failed (the API server refused it) or dropped (the queue was full).
    pub result: &'static str,
}

/// The Events counted, by reason and result.
pub type EventCounts = Family<EventLabels, Counter>;

/// Why an Event could not be published; its Display is the publisher's
/// own message.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PublishError(#[from] Box<dyn std::error::Error + Send + Sync>);

/// One Event to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    /// Why.
    pub reason: EventReason,
    /// The note.
    pub note: String,
    /// The PipelineRollout it is about.
    pub regarding: ObjectReference,
}

impl PendingEvent {
    /// An Event about the PipelineRollout `namespace/name`.
    pub fn about(
        reason: EventReason,
        note: String,
        api_version: String,
        (namespace, name, uid): (&str, &str, Option<&str>),
    ) -> Self {
        Self {
            reason,
            note,
            regarding: ObjectReference {
                api_version: Some(api_version),
                kind: Some(KIND.to_owned()),
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                uid: uid.map(str::to_owned),
                ..ObjectReference::default()
            },
        }
    }
}

/// Where Events go: the API server, or (in tests) anything else.
pub trait PublishEvent: Send + Sync + 'static {
    /// Publishes one Event.
    fn publish(
        &self,
        event: &PendingEvent,
    ) -> impl Future<Output = Result<(), PublishError>> + Send;
}

impl PublishEvent for Recorder {
    async fn publish(&self, event: &PendingEvent) -> Result<(), PublishError> {
        let reason = event.reason;
        let ev = Event {
            type_: if reason.is_warning() {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.as_str().to_owned(),
            note: Some(event.note.clone()),
            action: reason.action().to_owned(),
            secondary: None,
        };
        Recorder::publish(self, &ev, &event.regarding)
            .await
            .map_err(|e| PublishError(Box::new(e)))
    }
}

/// A recorder for the API server behind `client`, reporting as this pod
/// (`POD_NAME`, when the Deployment sets it).
pub fn recorder(client: kube::Client) -> Recorder {
    let reporter = Reporter {
        controller: REPORTING_CONTROLLER.to_owned(),
        instance: std::env::var("POD_NAME").ok(),
    };
    Recorder::new(client, reporter)
}

/// The sending side of the queue, shared by the request handlers and the
/// sweeper. Off when no API server can be reached.
#[derive(Debug, Clone, Default)]
pub struct EventQueue {
    /// The queue and the counts of its Events; `None`: off.
    tx: Option<(mpsc::Sender<PendingEvent>, EventCounts)>,
}

impl EventQueue {
    /// No Events (no API server).
    pub fn off() -> Self {
        Self { tx: None }
    }

    /// Whether Events are sent.
    pub fn is_on(&self) -> bool {
        self.tx.is_some()
    }

    /// Starts the task that publishes queued Events through `publisher`,
    /// counting each in `counts`.
    pub fn start(publisher: impl PublishEvent, counts: EventCounts) -> Self {
        let (tx, mut rx) = mpsc::channel::<PendingEvent>(QUEUE_CAPACITY);
        let counted = counts.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                let result = match publisher.publish(&event).await {
                    Ok(()) => "sent",
                    Err(e) => {
                        tracing::warn!(reason = event.reason.as_str(), object = ?event.regarding.name, error = %e, "event not recorded");
                        "failed"
                    }
                };
                count(&counted, event.reason, result);
            }
        });
        Self {
            tx: Some((tx, counts)),
        }
    }

    /// Queues an Event; never waits. A full queue drops it (logged and
    /// counted as `dropped`).
    pub fn send(&self, event: PendingEvent) {
        let Some((tx, counts)) = &self.tx else {
            return;
        };
        let reason = event.reason;
        if let Err(e) = tx.try_send(event) {
            tracing::warn!(reason = reason.as_str(), error = %e, "event dropped: the queue is full");
            count(counts, reason, "dropped");
        }
    }
}

impl EventQueue {
    /// Queues the Events an answered review's decision asks for (none for a
    /// dry run: the webhook configurations say `sideEffects: NoneOnDryRun`).
    pub fn send_decision_events(&self, request: &AdmissionRequest, outcome: &Outcome) {
        if request.dry_run || !self.is_on() {
            return;
        }
        for event in &outcome.decision.events {
            let regarding = (
                request.namespace.as_str(),
                request.name.as_str(),
                request.object_uid(),
            );
            self.send(PendingEvent::about(
                event.reason,
                event.note.clone(),
                request.object_api_version(),
                regarding,
            ));
        }
    }
}

fn count(counts: &EventCounts, reason: EventReason, result: &'static str) {
    counts
        .get_or_create(&EventLabels {
            reason: reason.as_str(),
            result,
        })
        .inc();
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::Semaphore;

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
        async fn publish(&self, event: &PendingEvent) -> Result<(), PublishError> {
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
            Ok(())
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
}
