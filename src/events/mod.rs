//! Kubernetes Events (events.k8s.io/v1) on the objects the webhook judges
//! (PipelineRollouts, the other rollouts, their children, Numaplane's
//! namespace-level ConfigMaps), sent off the
//! request path: answers, and background work such as the sweeper, put what
//! they ask for into a bounded queue, and one task publishes them. A full queue or an API error drops
//! the Event, logs it and counts it; nothing here delays or changes an
//! answer.
//!
//! Anyone who can reach the webhook port can send it a request, so an Event
//! is written only about an object that exists with the uid the
//! request names (one metadata GET before each, rare, Event), only in a
//! namespace the webhooks guard, and with control characters in its note
//! escaped. Events are never aggregated into series: each force allowed,
//! denied or reset is an Event of its own, naming its own user and time.

pub mod args;
mod publisher;
mod regarded;

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;

use crate::admission::{AdmissionRequest, Reply, RequestOperation};
use crate::kinds::{Kind, Resource};
use crate::policy::rules::{EventReason, Operation};

pub use self::publisher::KubeEvents;

/// The name Events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "pipelinerollout-webhook";

/// How many Events may wait to be sent; past it, new ones are dropped.
pub const QUEUE_CAPACITY: usize = 256;

/// Labels of an Event: its reason and what became of it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// One of [`EventReason::ALL`].
    pub reason: &'static str,
    /// sent; failed (the API server refused it); dropped (the queue was
    /// full); unverified (no object with that uid exists, as for a
    /// forged request); unguarded (the namespace is one the webhooks skip).
    pub result: &'static str,
}

/// The Events counted, by reason and result.
pub type EventCounts = Family<EventLabels, Counter>;

/// Why an Event could not be published; its Display is the publisher's
/// own message.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PublishError(#[from] Box<dyn std::error::Error + Send + Sync>);

#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    pub reason: EventReason,
    pub note: String,
    /// The object it is about (a PipelineRollout, another rollout, a child,
    /// a namespace-level ConfigMap).
    pub regarding: ObjectReference,
    /// Whether the object may not be stored yet: the Event comes from a
    /// CREATE, whose object the API server stores once the webhooks answer.
    pub after_create: bool,
}

impl PendingEvent {
    /// An Event about the PipelineRollout `namespace/name`.
    pub fn about(
        reason: EventReason,
        note: String,
        api_version: String,
        regarding: (&str, &str, Option<&str>),
    ) -> Self {
        Self::about_object(
            reason,
            note,
            Resource::Guarded(Kind::PipelineRollout),
            api_version,
            regarding,
        )
    }

    /// An Event about the object `regarded` `namespace/name`.
    pub fn about_object(
        reason: EventReason,
        note: String,
        regarded: Resource,
        api_version: String,
        (namespace, name, uid): (&str, &str, Option<&str>),
    ) -> Self {
        Self {
            reason,
            note,
            regarding: ObjectReference {
                api_version: Some(api_version),
                kind: Some(regarded.kind().to_owned()),
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                uid: uid.map(str::to_owned),
                ..ObjectReference::default()
            },
            after_create: false,
        }
    }
}

/// What became of an Event the publisher was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// It was not written: no object of its kind with its name and uid exists.
    Unverified,
}

/// Where Events go: the API server, or (in tests) anything else.
pub trait PublishEvent: Send + Sync + 'static {
    /// Publishes one Event, or says why it is not about a real object.
    fn publish(
        &self,
        event: &PendingEvent,
    ) -> impl Future<Output = Result<Delivery, PublishError>> + Send;
}

/// The sending side of the queue, shared by the request handlers and the
/// sweeper. Off when no API server can be reached.
#[derive(Debug, Clone, Default)]
pub struct EventQueue {
    /// The queue and the counts of its Events; `None`: off.
    tx: Option<(mpsc::Sender<PendingEvent>, EventCounts)>,
    /// The namespaces the webhooks skip: no request about them is real.
    unguarded: Arc<[String]>,
}

impl EventQueue {
    /// No Events (no API server).
    pub fn off() -> Self {
        Self::default()
    }

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
                    Ok(Delivery::Sent) => "sent",
                    Ok(Delivery::Unverified) => {
                        tracing::info!(reason = event.reason.as_str(), object = ?event.regarding.name, "event not recorded: no such object with that uid (a forged request?)");
                        "unverified"
                    }
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
            unguarded: Arc::default(),
        }
    }

    /// The same queue, sending no Event from a request about an object in
    /// `namespaces` (the ones the webhook configurations skip).
    pub fn skipping(mut self, namespaces: &[String]) -> Self {
        self.unguarded = namespaces.into();
        self
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
    /// Queues the Events an answered review's verdict asks for (none for a
    /// dry run: the webhook configurations say `sideEffects: NoneOnDryRun`).
    pub fn send_verdict_events(&self, request: &AdmissionRequest, outcome: &Reply) {
        if request.dry_run || !self.is_on() {
            return;
        }
        if self.unguarded.contains(&request.namespace) {
            if let Some((_, counts)) = &self.tx {
                for event in &outcome.verdict.events {
                    count(counts, event.reason, "unguarded");
                }
            }
            return;
        }
        let (regarded, api_version) = regarded::of(request);
        for event in &outcome.verdict.events {
            let regarding = (
                request.namespace.as_str(),
                request.name.as_str(),
                request.object_uid(),
            );
            let mut pending = PendingEvent::about_object(
                event.reason,
                event.note.clone(),
                regarded,
                api_version.clone(),
                regarding,
            );
            pending.after_create = request.operation == RequestOperation::Judged(Operation::Create);
            self.send(pending);
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
mod tests;
