//! The two Secrets as Kubernetes objects: what the plan reads from them,
//! the objects it writes, and the limit on how often they are written.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;

use super::CertOptions;
use super::material::{self, Served, Stored};

/// At most this many Secret writes in [`WRITE_WINDOW`]: a CA or Secret
/// that the webhook keeps replacing (an edit it cannot repair, a bug)
/// slows to this rate instead of looping. A rotation writes one Secret per
/// step, a repair two.
pub const WRITE_BURST: usize = 6;
/// See [`WRITE_BURST`].
pub const WRITE_WINDOW: Duration = Duration::from_secs(10);

/// The times of the last Secret writes.
#[derive(Debug, Default)]
pub struct WriteLimit {
    recent: VecDeque<Instant>,
}

impl WriteLimit {
    /// How long until the next write may go at `now` (zero: at once).
    pub fn wait(&mut self, now: Instant) -> Duration {
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WRITE_WINDOW)
        {
            self.recent.pop_front();
        }
        match self.recent.front() {
            Some(oldest) if self.recent.len() >= WRITE_BURST => {
                (*oldest + WRITE_WINDOW).saturating_duration_since(now)
            }
            _ => Duration::ZERO,
        }
    }

    /// Counts a write at `now`.
    pub fn record(&mut self, now: Instant) {
        self.recent.push_back(now);
    }
}

fn data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

/// The CA Secret as the plan reads it.
pub fn stored(secret: &Secret) -> Stored {
    Stored {
        data: data(secret),
        retire_after: secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(material::RETIRE_AFTER))
            .cloned(),
    }
}

/// The serving Secret as the plan reads it.
pub fn served(secret: &Secret) -> Served {
    data(secret)
}

/// A Secret named `name` holding `data`: `existing`'s metadata kept
/// (without managed fields), the rotation annotation set to `annotation`,
/// of type `type_` when created.
pub fn object(
    existing: Option<&Secret>,
    name: &str,
    options: &CertOptions,
    type_: &str,
    data: BTreeMap<String, String>,
    annotation: Option<String>,
) -> Secret {
    let mut metadata = existing.map_or_else(
        || ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(options.secret_namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "pipelinerollout-webhook".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        |s| s.metadata.clone(),
    );
    metadata.managed_fields = None;
    match annotation {
        Some(after) => {
            metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(material::RETIRE_AFTER.to_owned(), after);
        }
        None => {
            if let Some(annotations) = metadata.annotations.as_mut() {
                annotations.remove(material::RETIRE_AFTER);
            }
        }
    }
    Secret {
        metadata,
        type_: existing
            .and_then(|s| s.type_.clone())
            .or_else(|| Some(type_.to_owned())),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_beyond_the_burst_wait_for_the_window() {
        let start = Instant::now();
        let mut limit = WriteLimit::default();
        let at = |ms: u64| start + Duration::from_millis(ms);
        // A write every 100 ms, as fast as a loop of passes would go.
        let mut written = 0;
        let mut t = 0;
        while t < 10_000 {
            if limit.wait(at(t)).is_zero() {
                limit.record(at(t));
                written += 1;
            }
            t += 100;
        }
        assert_eq!(written, WRITE_BURST, "one window holds the burst only");
        assert_eq!(limit.wait(at(10_000)), Duration::ZERO, "the window ends");
        let mut limit = WriteLimit::default();
        for i in 0..WRITE_BURST as u64 {
            limit.record(at(i * 100));
        }
        assert_eq!(limit.wait(at(1_000)), Duration::from_secs(9));
    }
}
