//! Kubernetes Events (events.k8s.io/v1) on the objects the webhook judges
//! (PipelineRollouts, the other rollouts, their children), sent off the
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

use std::future::Future;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{ApiResource, DynamicObject, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;

use crate::admission::{AdmissionRequest, Outcome, RequestOperation};
use crate::kinds::Kind;
use crate::logtext::Escaped;
use crate::policy::rules::EventReason;

/// The name Events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "pipelinerollout-webhook";

/// How many Events may wait to be sent; past it, new ones are dropped.
pub const QUEUE_CAPACITY: usize = 256;

/// Labels of an Event: its reason and what became of it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// ForceReapplyAllowed, ForcePromoteAllowed, ForceReapplyDenied,
    /// ForceReapplyReset, ForcePromoteReset, DeleteUndrainedAllowed or
    /// DeleteUndrainedDenied.
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

/// One Event to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    /// Why.
    pub reason: EventReason,
    /// The note.
    pub note: String,
    /// The object it is about (a PipelineRollout, another rollout, a child).
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
        Self::about_kind(reason, note, Kind::PipelineRollout, api_version, regarding)
    }

    /// An Event about the object of `kind` `namespace/name`.
    pub fn about_kind(
        reason: EventReason,
        note: String,
        kind: Kind,
        api_version: String,
        (namespace, name, uid): (&str, &str, Option<&str>),
    ) -> Self {
        Self {
            reason,
            note,
            regarding: ObjectReference {
                api_version: Some(api_version),
                kind: Some(kind.kind().to_owned()),
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
    /// It was written.
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

/// The longest a note may be (the API server refuses longer ones).
const NOTE_LIMIT: usize = 1024;

/// How often, and how far apart, the object of an Event from a CREATE is
/// looked for before the Event is given up as unverified.
const CREATE_LOOKUPS: (u32, Duration) = (5, Duration::from_millis(200));

/// The API server's events.k8s.io/v1 Events, written one by one (never
/// aggregated), each after a metadata GET of the object it is about.
pub struct KubeEvents {
    client: kube::Client,
    instance: String,
    sequence: AtomicU64,
}

impl std::fmt::Debug for KubeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeEvents")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl KubeEvents {
    /// Events through `client`, reported as this pod (`POD_NAME`, when the
    /// Deployment sets it; else the controller's name).
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| REPORTING_CONTROLLER.to_owned()),
            sequence: AtomicU64::new(0),
        }
    }

    /// Whether the object of `kind` `namespace/name` exists with `uid`.
    async fn exists(
        &self,
        kind: Kind,
        (namespace, name, uid): (&str, &str, &str),
        after_create: bool,
    ) -> Result<bool, PublishError> {
        let resource = ApiResource {
            group: kind.group().to_owned(),
            version: crate::kinds::VERSION.to_owned(),
            api_version: format!("{}/{}", kind.group(), crate::kinds::VERSION),
            kind: kind.kind().to_owned(),
            plural: kind.resource().to_owned(),
        };
        let api: kube::Api<DynamicObject> =
            kube::Api::namespaced_with(self.client.clone(), namespace, &resource);
        let (lookups, pause) = if after_create {
            CREATE_LOOKUPS
        } else {
            (1, Duration::ZERO)
        };
        for lookup in 1..=lookups {
            let found = api
                .get_metadata_opt(name)
                .await
                .map_err(|e| PublishError(Box::new(e)))?;
            match found {
                Some(object) => return Ok(object.metadata.uid.as_deref() == Some(uid)),
                None if lookup < lookups => tokio::time::sleep(pause).await,
                None => {}
            }
        }
        Ok(false)
    }

    /// The Event, with a name of its own: `<object>.<unique suffix>`.
    fn event(&self, event: &PendingEvent) -> Event {
        let reason = event.reason;
        let now = k8s_openapi::jiff::Timestamp::now();
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let object = event.regarding.name.as_deref().unwrap_or("pipelinerollout");
        let prefix: String = object.chars().take(200).collect();
        let unique = (now.as_nanosecond() as u64) ^ sequence.rotate_left(48);
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{prefix}.{unique:x}")),
                namespace: event.regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(
                if reason.is_warning() {
                    "Warning"
                } else {
                    "Normal"
                }
                .to_owned(),
            ),
            reason: Some(reason.as_str().to_owned()),
            action: Some(reason.action().to_owned()),
            note: Some(safe_note(&event.note)),
            regarding: Some(event.regarding.clone()),
            reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }
}

/// `note` with control characters escaped, cut to [`NOTE_LIMIT`] bytes.
fn safe_note(note: &str) -> String {
    let escaped = Escaped(note).to_string();
    if escaped.len() <= NOTE_LIMIT {
        return escaped;
    }
    let mut end = NOTE_LIMIT - '…'.len_utf8();
    while !escaped.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &escaped[..end])
}

impl PublishEvent for KubeEvents {
    async fn publish(&self, event: &PendingEvent) -> Result<Delivery, PublishError> {
        let regarding = &event.regarding;
        let (Some(namespace), Some(name), Some(uid)) = (
            regarding.namespace.as_deref(),
            regarding.name.as_deref(),
            regarding.uid.as_deref(),
        ) else {
            return Ok(Delivery::Unverified);
        };
        let group = regarding
            .api_version
            .as_deref()
            .and_then(|v| v.split_once('/'))
            .map_or("", |(group, _)| group);
        let Some(kind) = Kind::from_kind(group, regarding.kind.as_deref().unwrap_or_default())
        else {
            return Ok(Delivery::Unverified);
        };
        if !self
            .exists(kind, (namespace, name, uid), event.after_create)
            .await?
        {
            return Ok(Delivery::Unverified);
        }
        let api: kube::Api<Event> = kube::Api::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), &self.event(event))
            .await
            .map_err(|e| PublishError(Box::new(e)))?;
        Ok(Delivery::Sent)
    }
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
    /// Queues the Events an answered review's decision asks for (none for a
    /// dry run: the webhook configurations say `sideEffects: NoneOnDryRun`).
    pub fn send_decision_events(&self, request: &AdmissionRequest, outcome: &Outcome) {
        if request.dry_run || !self.is_on() {
            return;
        }
        if self.unguarded.contains(&request.namespace) {
            if let Some((_, counts)) = &self.tx {
                for event in &outcome.decision.events {
                    count(counts, event.reason, "unguarded");
                }
            }
            return;
        }
        for event in &outcome.decision.events {
            let regarding = (
                request.namespace.as_str(),
                request.name.as_str(),
                request.object_uid(),
            );
            let mut pending = PendingEvent::about_kind(
                event.reason,
                event.note.clone(),
                request.kind().unwrap_or(Kind::PipelineRollout),
                request.object_api_version(),
                regarding,
            );
            pending.after_create = request.operation == RequestOperation::Create;
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
}
