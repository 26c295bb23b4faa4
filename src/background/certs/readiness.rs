//! Readiness under `--manage-certs`, in every replica: is the certificate
//! this replica serves trusted by the caBundle of every webhook that calls
//! the Service, and still for [`super::schedule::MARGIN`] from now? A
//! replica whose certificate expired, or is seconds from it (its new one
//! has not reached the volume), is not ready, so the Service sends the API
//! server to the others. It reads the two webhook configurations by name
//! every few seconds; while the API server cannot be reached it keeps its
//! last verdict and retries with backoff.

use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;

use super::bundle::{self, OurWebhook};
use super::{CertOptions, schedule, trust};
use crate::background::backoff::Backoff;

/// What the trust check needs from the replica it runs in: the chain it
/// serves, and where its verdict goes (readiness and the metrics).
pub trait ServedCertificate: Send + Sync + 'static {
    /// The certificate chain served now (DER, leaf first; empty when none).
    fn served_chain(&self) -> Vec<Vec<u8>>;
    /// Whether the served certificate is trusted by the caBundle.
    fn set_trusted(&self, trusted: bool);
}

/// Why the served certificate is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    #[error("no webhook in the webhook configurations calls the Service of {name}")]
    NoWebhook { name: String },
    #[error("webhook {webhook}: {why}")]
    Webhook { webhook: String, why: String },
}

/// `Ok` when every webhook in `configurations` that calls the Service
/// trusts `chain` for `name` at `now` (Unix seconds); otherwise why not.
pub fn judge(
    configurations: &[Vec<OurWebhook>],
    chain: &[Vec<u8>],
    name: &str,
    now: u64,
) -> Result<(), Untrusted> {
    let chain: Vec<CertificateDer<'_>> = chain
        .iter()
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    let mut ours = configurations.iter().flatten().peekable();
    if ours.peek().is_none() {
        return Err(Untrusted::NoWebhook {
            name: name.to_owned(),
        });
    }
    for webhook in ours {
        trust::verify(&webhook.ca_bundle, &chain, name, now).map_err(|e| Untrusted::Webhook {
            webhook: webhook.name.clone(),
            why: e.to_string(),
        })?;
    }
    Ok(())
}

/// Reports trust to `served` until `stop` is cancelled.
pub async fn run<S: ServedCertificate>(
    client: kube::Client,
    served: Arc<S>,
    options: CertOptions,
    stop: CancellationToken,
) {
    let configurations = bundle::configurations(&client, &options);
    let name = options.server_name();
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    let mut last: Option<Result<(), Untrusted>> = None;
    loop {
        let read = async {
            let mut read = Vec::with_capacity(2);
            for configuration in &configurations {
                read.push(configuration.read(&options.service).await?);
            }
            Ok::<_, kube::Error>(read)
        };
        let wait = match read.await {
            Ok(both) => {
                backoff.reset();
                let soon = time::OffsetDateTime::now_utc() + schedule::signed(schedule::MARGIN);
                let now = u64::try_from(soon.unix_timestamp()).unwrap_or(0);
                let verdict = judge(&both, &served.served_chain(), &name, now);
                served.set_trusted(verdict.is_ok());
                if last.as_ref() != Some(&verdict) {
                    match &verdict {
                        Ok(()) => {
                            tracing::info!("the caBundle trusts the served certificate: ready")
                        }
                        Err(why) => {
                            tracing::warn!(%why, "not ready until the caBundle trusts the served certificate")
                        }
                    }
                }
                last = Some(verdict);
                Duration::from_secs(2)
            }
            Err(e) => {
                let wait = backoff.next_wait();
                tracing::warn!(error = %e, retry_in = ?wait, "cannot read the webhook configurations; readiness keeps its last verdict");
                wait
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}
