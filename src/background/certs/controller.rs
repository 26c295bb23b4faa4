//! The certificate controller (the leader's): keeps the Secret and the
//! caBundle as [`plan`] says, whenever the Secret or either
//! webhook configuration changes (it watches all three by name) and when
//! the next rotation is due. A failed call is retried with backoff; what
//! the replicas serve meanwhile is the last Secret written.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::CertOptions;
use super::bundle::{self, ConfigurationType, Configurations};
use super::inspect;
use super::linger::Lingering;
use super::material;
use super::plan::{self, Change, Reason};
use super::secrets::{self, WRITE_BURST, WRITE_WINDOW, WriteLimit};
use crate::background::backoff::Backoff;
use crate::metrics::certificates::{CertEvent, CertMetrics, CertOperation};

/// Why one pass failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The Secret could not be read or written.
    #[error("Secret {name}: {source}")]
    Secret {
        /// namespace/name.
        name: String,
        /// The API server's answer.
        source: kube::Error,
    },
    /// A webhook configuration could not be read or patched.
    #[error("webhook configuration {name}: {source}")]
    Bundle {
        /// Its name.
        name: String,
        /// The API server's answer.
        source: kube::Error,
    },
    /// A certificate could not be made.
    #[error(transparent)]
    Certs(#[from] plan::PlanError),
    /// A Secret has a type the webhook does not write.
    #[error(transparent)]
    WrongType(#[from] secrets::WrongType),
}

impl PassError {
    fn operation(&self) -> CertOperation {
        match self {
            Self::Secret { .. } | Self::WrongType(_) => CertOperation::Secret,
            Self::Bundle { .. } => CertOperation::Bundle,
            Self::Certs(_) => CertOperation::Issue,
        }
    }
}

/// Runs the controller until `stop` is cancelled; returns within moments,
/// abandoning a call in flight. That is safe for whoever leads next: a
/// Secret write carries the resourceVersion it read (a late one loses to
/// any newer write), and a late caBundle patch is a change the next
/// leader's watch sees and puts right.
pub async fn run(
    client: kube::Client,
    metrics: CertMetrics,
    options: CertOptions,
    stop: CancellationToken,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.secret_namespace);
    let configurations = Configurations::new(
        client.clone(),
        &options.validating,
        &options.mutating,
        options.service.clone(),
    );
    let (tx, mut changed) = mpsc::channel::<()>(1);
    let watches = [
        tokio::spawn(watch(
            secrets.clone(),
            options.secret.clone(),
            tx.clone(),
            metrics.clone(),
        )),
        tokio::spawn(watch(
            secrets.clone(),
            options.ca_secret.clone(),
            tx.clone(),
            metrics.clone(),
        )),
        tokio::spawn(watch(
            Api::<ValidatingWebhookConfiguration>::all(client.clone()),
            options.validating.clone(),
            tx.clone(),
            metrics.clone(),
        )),
        tokio::spawn(watch(
            Api::<MutatingWebhookConfiguration>::all(client),
            options.mutating.clone(),
            tx,
            metrics.clone(),
        )),
    ];
    tracing::info!(
        secret = %format!("{}/{}", options.secret_namespace, options.secret),
        ca_secret = %format!("{}/{}", options.secret_namespace, options.ca_secret),
        service = %options.server_name(),
        validating = %options.validating,
        mutating = %options.mutating,
        "certificate controller started"
    );
    let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(30));
    let mut limit = WriteLimit::default();
    let mut lingering = Lingering::default();
    loop {
        let pass = tokio::select! {
            () = stop.cancelled() => break,
            pass = pass(&secrets, &configurations, &options, &metrics, &mut limit, &mut lingering) => pass,
        };
        let wait = match pass {
            Ok(wait) => {
                backoff.reset();
                wait
            }
            Err(e) => {
                let wait = backoff.next_wait();
                metrics.record_cert(CertEvent::Error(e.operation()));
                tracing::warn!(error = %e, retry_in = ?wait, "certificate controller: retrying");
                wait
            }
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
            Some(()) = changed.recv() => {
                // Let a burst of changes settle into one pass.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    for task in watches {
        task.abort();
    }
    tracing::info!("certificate controller stopped");
}

/// Sends a tick on every change of the object `name` (watched through a
/// `metadata.name` field selector, which RBAC's resourceNames allow).
async fn watch<K>(api: Api<K>, name: String, tx: mpsc::Sender<()>, metrics: CertMetrics)
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(api, config).default_backoff();
    futures_util::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(_) => {
                // A full channel already holds a pending pass.
                let _ = tx.try_send(());
            }
            Err(e) => {
                metrics.record_cert(CertEvent::Error(CertOperation::Watch));
                tracing::warn!(%name, error = %e, "watch failed; restarting with backoff");
            }
        }
    }
}

/// One pass: read, plan, write what changed (the CA Secret, then the
/// caBundle, then the serving Secret, so that no replica is handed a
/// certificate from a CA the caBundle lacks); the wait until the next.
/// `lingering` keeps the CAs the replicas may still serve from when the
/// Secrets lost them.
async fn pass(
    secrets: &Api<Secret>,
    configurations: &Configurations,
    options: &CertOptions,
    metrics: &CertMetrics,
    limit: &mut WriteLimit,
    lingering: &mut Lingering,
) -> Result<Duration, PassError> {
    let secret_err = |name: &str| {
        let name = format!("{}/{name}", options.secret_namespace);
        move |source| PassError::Secret { name, source }
    };
    let existing_ca = secrets
        .get_opt(&options.ca_secret)
        .await
        .map_err(secret_err(&options.ca_secret))?;
    let existing = secrets
        .get_opt(&options.secret)
        .await
        .map_err(secret_err(&options.secret))?;
    let named = |name: &str| format!("{}/{name}", options.secret_namespace);
    secrets::check_type(
        existing_ca.as_ref(),
        &named(&options.ca_secret),
        secrets::CA_TYPES,
    )?;
    secrets::check_type(
        existing.as_ref(),
        &named(&options.secret),
        secrets::SERVING_TYPES,
    )?;
    let mut read = Vec::with_capacity(2);
    for kind in ConfigurationType::BOTH {
        read.push(
            configurations
                .read(kind)
                .await
                .map_err(|source| PassError::Bundle {
                    name: configurations.name(kind).to_owned(),
                    source,
                })?,
        );
    }
    let now = OffsetDateTime::now_utc();
    let plan = plan::plan(
        existing_ca.as_ref().map(secrets::stored).as_ref(),
        existing.as_ref().map(secrets::served).as_ref(),
        now,
        &options.settings(),
        |cas| {
            read.iter()
                .all(|c| c.ours.iter().all(|w| bundle::carries(&w.ca_bundle, cas)))
        },
    )?;
    if plan.write_ca || plan.write_serving {
        let wait = limit.wait(Instant::now());
        if !wait.is_zero() {
            metrics.record_cert(CertEvent::Error(CertOperation::Rate));
            tracing::warn!(
                writes = WRITE_BURST, window = ?WRITE_WINDOW, retry_in = ?wait,
                "certificate Secrets written too often: the next write waits (is something rewriting them?)"
            );
            return Ok(wait);
        }
    }
    let secret_name = format!("{}/{}", options.secret_namespace, options.ca_secret);
    if plan.write_ca {
        let secret = secrets::object(
            existing_ca.as_ref(),
            &options.ca_secret,
            options,
            "Opaque",
            plan.material.ca_data(),
            plan.material.annotation(),
        );
        write(secrets, existing_ca.is_some(), &options.ca_secret, &secret)
            .await
            .map_err(secret_err(&options.ca_secret))?;
        limit.record(Instant::now());
    }
    for change in &plan.changes {
        report(change, metrics, &secret_name, &plan.material);
    }
    let (left, kept) = lingering.update(&plan, now, options.propagation);
    if left > 0 {
        tracing::info!(%secret_name, cas = left, "a CA the replicas no longer serve from left the caBundle");
    }
    if kept > 0 {
        tracing::warn!(
            %secret_name, cas = kept,
            "the Secrets no longer name the CA the replicas serve from (both deleted?): it stays in the caBundle until they serve the new certificate"
        );
    }
    let ca_bundle = lingering.bundle(&plan.material);
    for (kind, configuration) in ConfigurationType::BOTH.into_iter().zip(&read) {
        if let Some(patch) = bundle::patch(configuration, &ca_bundle) {
            configurations
                .write(kind, &patch)
                .await
                .map_err(|source| PassError::Bundle {
                    name: configurations.name(kind).to_owned(),
                    source,
                })?;
            metrics.record_cert(CertEvent::BundleUpdated(kind.label()));
            tracing::info!(
                configuration = %configurations.name(kind),
                webhooks = configuration.ours.len(),
                cas = plan.material.bundle_cas().len(),
                "caBundle written"
            );
        }
    }
    if plan.write_serving
        && let Some(data) = plan.material.serving_data()
    {
        let secret = secrets::object(
            existing.as_ref(),
            &options.secret,
            options,
            "kubernetes.io/tls",
            data,
            None,
        );
        write(secrets, existing.is_some(), &options.secret, &secret)
            .await
            .map_err(secret_err(&options.secret))?;
        limit.record(Instant::now());
    }
    let due = lingering.written(
        &plan.material,
        OffsetDateTime::now_utc(),
        options.propagation,
    );
    let wake_at = due.map_or(plan.wake_at, |due| due.min(plan.wake_at));
    let wait = (wake_at - OffsetDateTime::now_utc())
        .clamp(time::Duration::milliseconds(200), time::Duration::hours(1));
    Ok(Duration::try_from(wait).unwrap_or(Duration::from_secs(1)))
}

/// Replaces the Secret `name` (carrying the resourceVersion it was read
/// with) or creates it.
async fn write(
    secrets: &Api<Secret>,
    exists: bool,
    name: &str,
    secret: &Secret,
) -> Result<(), kube::Error> {
    if exists {
        secrets
            .replace(name, &PostParams::default(), secret)
            .await?;
    } else {
        secrets.create(&PostParams::default(), secret).await?;
    }
    Ok(())
}

fn report(change: &Change, metrics: &CertMetrics, secret: &str, now: &material::Material) {
    let not_after = |pem: &str| inspect::validity(pem).map(|v| v.not_after.to_string());
    let ca_not_after = not_after(&now.ca.cert_pem);
    let serving_not_after = now
        .serving
        .as_ref()
        .and_then(|s| not_after(&s.pair.cert_pem));
    match change {
        Change::CaIssued(reason) => {
            metrics.record_cert(CertEvent::Issued {
                kind: "ca",
                reason: reason.label(),
            });
            match reason {
                Reason::Invalid(why) => tracing::warn!(
                    %secret, %why,
                    "the Secret's CA is unusable (edited by hand?): replaced with a new CA and serving certificate"
                ),
                _ => {
                    tracing::info!(%secret, reason = reason.label(), not_after = ?ca_not_after, "CA issued")
                }
            }
        }
        Change::ServingIssued(reason) => {
            metrics.record_cert(CertEvent::Issued {
                kind: "serving",
                reason: reason.label(),
            });
            match reason {
                Reason::Invalid(why) => tracing::warn!(
                    %secret, %why,
                    "the Secret's serving certificate is unusable (edited by hand?): replaced"
                ),
                _ => {
                    tracing::info!(%secret, reason = reason.label(), not_after = ?serving_not_after, "serving certificate issued")
                }
            }
        }
        Change::RotationStarted => {
            metrics.record_cert(CertEvent::Rotation("started"));
            tracing::info!(%secret, "CA rotation: a new CA joins the caBundle beside the current one");
        }
        Change::RotationSwitched => {
            metrics.record_cert(CertEvent::Rotation("switched"));
            tracing::info!(%secret, "CA rotation: the serving certificate is now signed by the new CA");
        }
        Change::RotationCompleted => {
            metrics.record_cert(CertEvent::Rotation("completed"));
            tracing::info!(%secret, "CA rotation: the previous CA left the caBundle");
        }
        Change::RetireCapped(by) => {
            tracing::warn!(%secret, retire_after = %by, "the retired CA's time to leave the caBundle was later than one propagation delay and a margin after the serving certificate left it (not a CA this webhook retired?): it leaves earlier");
        }
        Change::Dropped(why) => {
            tracing::warn!(%secret, %why, "a CA rotation entry that is unusable or not the webhook's was dropped");
        }
    }
}
