//! The two Secrets as Kubernetes objects: what the plan reads from them,
//! their writes, and the limit on how often they are written.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use super::material::{self, Served, Stored};

/// At most this many Secret writes in [`WRITE_WINDOW`]: a CA or Secret
/// that the webhook keeps replacing (an edit it cannot repair, a bug)
/// slows to this rate instead of looping. A rotation writes one Secret per
/// step, a repair two.
pub const WRITE_BURST: usize = 6;
pub const WRITE_WINDOW: Duration = Duration::from_secs(10);

/// The times of the last Secret writes.
#[derive(Debug, Default)]
pub struct WriteLimit {
    recent: VecDeque<Instant>,
}

impl WriteLimit {
    /// How long until the next write may go at `now` (zero: at once).
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.recent
            .retain(|t| now.saturating_duration_since(*t) < WRITE_WINDOW);
        match self.recent.front() {
            Some(oldest) if self.recent.len() >= WRITE_BURST => {
                (*oldest + WRITE_WINDOW).saturating_duration_since(now)
            }
            _ => Duration::ZERO,
        }
    }

    pub fn record(&mut self, now: Instant) {
        self.recent.push_back(now);
    }
}

/// The types the CA Secret may have: the webhook makes it `Opaque`.
pub const CA_TYPES: &[&str] = &["Opaque"];
/// The types the serving Secret may have: the webhook makes it
/// `kubernetes.io/tls`; an `Opaque` one made by hand serves as well.
pub const SERVING_TYPES: &[&str] = &["kubernetes.io/tls", "Opaque"];

/// A Secret the webhook keeps its certificates in has a type it does not
/// write (made by hand, or by something else under the same name). A
/// Secret's type cannot change, so the webhook leaves it alone, and says
/// how to get out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Secret {name} is of type {found}, not {wanted}, and a Secret's type cannot change: the webhook does not write it; delete it, and the webhook makes it anew"
)]
pub struct WrongType {
    /// namespace/name.
    pub name: String,
    pub found: String,
    /// The types the webhook keeps it as.
    pub wanted: String,
}

/// `Ok` when `secret` is absent or of one of the `allowed` types (a Secret
/// without a type is `Opaque`).
pub fn check_type(secret: Option<&Secret>, name: &str, allowed: &[&str]) -> Result<(), WrongType> {
    let Some(secret) = secret else { return Ok(()) };
    let found = secret.type_.as_deref().unwrap_or("Opaque");
    if allowed.contains(&found) {
        return Ok(());
    }
    Err(WrongType {
        name: name.to_owned(),
        found: found.to_owned(),
        wanted: allowed.join(" or "),
    })
}

/// The serving Secret as the plan reads it.
pub fn served(secret: &Secret) -> Served {
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
        data: served(secret),
        retire_after: secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(material::RETIRE_AFTER))
            .cloned(),
    }
}

/// Writes the Secret `name` holding `data`: replaces
/// `existing` (carrying the resourceVersion it was read with, its other
/// metadata kept without managed fields), or creates it of type `type_`;
/// the rotation annotation set to `annotation`.
pub async fn write(
    secrets: &Api<Secret>,
    existing: Option<&Secret>,
    name: &str,
    type_: &str,
    data: Served,
    annotation: Option<String>,
) -> Result<(), kube::Error> {
    let mut metadata = existing.map_or_else(
        || ObjectMeta {
            name: Some(name.to_owned()),
            namespace: secrets.namespace().map(str::to_owned),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "pipelinerollout-webhook".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        |s| s.metadata.clone(),
    );
    metadata.managed_fields = None;
    if let Some(after) = annotation {
        let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(material::RETIRE_AFTER.to_owned(), after);
    } else if let Some(annotations) = metadata.annotations.as_mut() {
        annotations.remove(material::RETIRE_AFTER);
    }
    let secret = Secret {
        metadata,
        type_: existing
            .and_then(|s| s.type_.clone())
            .or_else(|| Some(type_.to_owned())),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Secret::default()
    };
    let params = PostParams::default();
    if existing.is_some() {
        secrets.replace(name, &params, &secret).await?;
    } else {
        secrets.create(&params, &secret).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_of_a_type_the_webhook_does_not_write_is_named_with_the_way_out() {
        let of = |t: Option<&str>| Secret {
            type_: t.map(str::to_owned),
            ..Secret::default()
        };
        let cases = [
            (None, CA_TYPES, true),
            (Some(of(None)), CA_TYPES, true),
            (Some(of(Some("Opaque"))), CA_TYPES, true),
            (Some(of(Some("kubernetes.io/tls"))), CA_TYPES, false),
            (Some(of(Some("kubernetes.io/tls"))), SERVING_TYPES, true),
            (Some(of(Some("Opaque"))), SERVING_TYPES, true),
            (
                Some(of(Some("kubernetes.io/service-account-token"))),
                SERVING_TYPES,
                false,
            ),
            (Some(of(Some("example.com/other"))), CA_TYPES, false),
        ];
        for (secret, allowed, ok) in cases {
            let checked = check_type(secret.as_ref(), "ns/s", allowed);
            assert_eq!(checked.is_ok(), ok, "{secret:?} {allowed:?}");
            if let Err(e) = checked {
                let said = e.to_string();
                assert!(
                    said.starts_with("Secret ns/s is of type ")
                        && said.contains(&allowed.join(" or "))
                        && said.contains("delete it"),
                    "{said}"
                );
            }
        }
    }

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
