//! The publisher that writes Events to the API server: a metadata GET of
//! the object first (the forgery check), then the Event, named uniquely and
//! never aggregated.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DynamicObject, PostParams};

use super::regarded;
use super::{Delivery, PendingEvent, PublishError, PublishEvent, REPORTING_CONTROLLER};
use crate::kinds::Resource;
use crate::logtext::Escaped;

/// The longest a note may be (the API server refuses longer ones).
pub(super) const NOTE_LIMIT: usize = 1024;

/// How often, and how far apart, the object of an Event from a CREATE is
/// looked for before the Event is given up as unverified.
const CREATE_LOOKUPS: (u32, Duration) = (5, Duration::from_millis(200));

/// The API server's events.k8s.io/v1 Events, as the module says.
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

    /// Whether the object `regarded` `namespace/name` exists with `uid`
    /// (a metadata-only GET: the API server sends no `data` or `spec`).
    async fn exists(
        &self,
        regarded: Resource,
        (namespace, name, uid): (&str, &str, &str),
        after_create: bool,
    ) -> Result<bool, PublishError> {
        let resource = regarded::api_resource(regarded);
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
pub(super) fn safe_note(note: &str) -> String {
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
        let Some(resource) = regarded::from_reference(regarding) else {
            return Ok(Delivery::Unverified);
        };
        if !self
            .exists(resource, (namespace, name, uid), event.after_create)
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
