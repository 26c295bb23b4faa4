//! Kubernetes Events (events.k8s.io/v1) on PipelineRollouts, sent off the
//! request path: answers put what their decisions ask for into a bounded
//! queue, and one task publishes them. A full queue or an API error drops
//! the Event, logs it and counts it; nothing here delays or changes an
//! answer. Repeated identical Events become a series (kube-runtime's
//! recorder aggregates them).

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

use super::metrics::{EventLabels, Metrics};
use crate::admission::{AdmissionRequest, Outcome};
use crate::policy::rules::EventReason;

/// The name Events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "pipelinerollout-webhook";

/// How many Events may wait to be sent; past it, new ones are dropped.
pub const QUEUE_CAPACITY: usize = 256;

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
                kind: Some("PipelineRollout".to_owned()),
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
    fn publish(&self, event: &PendingEvent) -> impl Future<Output = Result<(), String>> + Send;
}

impl PublishEvent for Recorder {
    async fn publish(&self, event: &PendingEvent) -> Result<(), String> {
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
            .map_err(|e| e.to_string())
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
    /// The queue and the metrics its Events are counted in; `None`: off.
    tx: Option<(mpsc::Sender<PendingEvent>, Arc<Metrics>)>,
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
    /// counting each in `metrics`.
    pub fn start(publisher: impl PublishEvent, metrics: Arc<Metrics>) -> Self {
        let (tx, mut rx) = mpsc::channel::<PendingEvent>(QUEUE_CAPACITY);
        let counted = Arc::clone(&metrics);
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
            tx: Some((tx, metrics)),
        }
    }

    /// Queues an Event; never waits. A full queue drops it (logged and
    /// counted as `dropped`).
    pub fn send(&self, event: PendingEvent) {
        let Some((tx, metrics)) = &self.tx else {
            return;
        };
        let reason = event.reason;
        if let Err(e) = tx.try_send(event) {
            tracing::warn!(reason = reason.as_str(), error = %e, "event dropped: the queue is full");
            count(metrics, reason, "dropped");
        }
    }
}

impl EventQueue {
    /// Queues the Events an answered review's decision asks for (none for a
    /// dry run: the webhook configurations say `sideEffects: NoneOnDryRun`).
    pub fn send_decision_events(&self, request: &AdmissionRequest, outcome: &Outcome) {
        if outcome.dry_run || !self.is_on() {
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

fn count(metrics: &Metrics, reason: EventReason, result: &'static str) {
    metrics
        .events
        .get_or_create(&EventLabels {
            reason: reason.as_str(),
            result,
        })
        .inc();
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// Records what it is asked to publish, after a pause.
    #[derive(Clone, Default)]
    struct Slow(Arc<Mutex<Vec<PendingEvent>>>);

    impl PublishEvent for Slow {
        async fn publish(&self, event: &PendingEvent) -> Result<(), String> {
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.0
                .lock()
                .map_err(|e| e.to_string())?
                .push(event.clone());
            Ok(())
        }
    }

    fn event(n: usize) -> PendingEvent {
        PendingEvent::about(
            EventReason::ForceReapplyReset,
            format!("note {n}"),
            "numaplane.numaproj.io/v1alpha1".to_owned(),
            ("team-a", "p", Some("uid-1")),
        )
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_without_waiting() {
        let metrics = Arc::new(Metrics::new());
        let sink = Slow::default();
        let queue = EventQueue::start(sink.clone(), Arc::clone(&metrics));
        let started = std::time::Instant::now();
        for n in 0..QUEUE_CAPACITY + 50 {
            queue.send(event(n));
        }
        assert!(
            started.elapsed() < Duration::from_millis(40),
            "sending never waits for the API server"
        );
        let text = metrics.encode();
        let dropped = text
            .lines()
            .find(|l| l.contains("result=\"dropped\""))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        assert!(dropped >= 49.0, "{text}");
        tokio::time::sleep(Duration::from_millis(120)).await;
        let sent = sink.0.lock().map(|v| v.len()).unwrap_or(0);
        assert!(sent >= 1, "queued events are published");
    }

    #[test]
    fn an_event_names_the_rollout() {
        let e = event(1);
        assert_eq!(e.regarding.kind.as_deref(), Some("PipelineRollout"));
        assert_eq!(e.regarding.namespace.as_deref(), Some("team-a"));
        assert_eq!(e.regarding.uid.as_deref(), Some("uid-1"));
        assert_eq!(REPORTING_CONTROLLER, "pipelinerollout-webhook");
    }
}
