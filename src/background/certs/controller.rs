//! The certificate controller (the leader's): keeps the Secrets and the
//! caBundle as [`plan`] says, whenever a Secret or a webhook
//! configuration changes (it watches all four by name) and when the next
//! rotation is due. A failed call is retried with backoff; what the
//! replicas serve meanwhile is the last Secret written.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::CertOptions;
use super::bundle::{self, WebhookConfiguration};
use super::linger::Lingering;
use super::material::{self, Material};
use super::plan::{self, Change, Reason};
use super::secrets::{self, WRITE_BURST, WRITE_WINDOW, WriteLimit};
use crate::background::backoff::Backoff;
use crate::metrics::certificates::{CertMetrics, Issued, Operation, RotationStep};

/// Why one pass failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// `name` is namespace/name.
    #[error("Secret {name}: {source}")]
    Secret { name: String, source: kube::Error },
    #[error("webhook configuration {name}: {source}")]
    Bundle { name: String, source: kube::Error },
    #[error(transparent)]
    Certs(#[from] plan::PlanError),
    #[error(transparent)]
    WrongType(#[from] secrets::WrongType),
}

impl PassError {
    /// The `operation` label of the error metric.
    fn operation(&self) -> Operation {
        match self {
            Self::Secret { .. } | Self::WrongType(_) => Operation::Secret,
            Self::Bundle { .. } => Operation::Bundle,
            Self::Certs(_) => Operation::Issue,
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
    let configurations = bundle::configurations(&client, &options);
    let (tx, mut changed) = mpsc::channel::<()>(1);
    let [validating, mutating] = &configurations;
    let watches = [
        watch(secrets.clone(), &options.secret, &tx, &metrics),
        watch(secrets.clone(), &options.ca_secret, &tx, &metrics),
        watch(validating.api.clone(), &validating.name, &tx, &metrics),
        watch(mutating.api.clone(), &mutating.name, &tx, &metrics),
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
                metrics.error(e.operation());
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

/// Spawns the watch of the object `name` (through a `metadata.name` field
/// selector, which RBAC's resourceNames allow): a tick on `tx` on every
/// change.
fn watch<K>(api: Api<K>, name: &str, tx: &mpsc::Sender<()>, metrics: &CertMetrics) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (name, tx, metrics) = (name.to_owned(), tx.clone(), metrics.clone());
    tokio::spawn(async move {
        let stream = watcher::watcher(api, config).default_backoff();
        futures_util::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    // A full channel already holds a pending pass.
                    let _ = tx.try_send(());
                }
                Err(e) => {
                    metrics.error(Operation::Watch);
                    tracing::warn!(%name, error = %e, "watch failed; restarting with backoff");
                }
            }
        }
    })
}

/// One pass: read, plan, write what changed (the CA Secret, then the
/// caBundle, then the serving Secret, so that no replica is handed a
/// certificate from a CA the caBundle lacks); the wait until the next.
/// `lingering` keeps the CAs the replicas may still serve from when the
/// Secrets lost them.
async fn pass(
    secrets: &Api<Secret>,
    configurations: &[WebhookConfiguration],
    options: &CertOptions,
    metrics: &CertMetrics,
    limit: &mut WriteLimit,
    lingering: &mut Lingering,
) -> Result<Duration, PassError> {
    let ca_name = format!("{}/{}", options.secret_namespace, options.ca_secret);
    let serving_name = format!("{}/{}", options.secret_namespace, options.secret);
    let secret_err = |name: &String| {
        let name = name.clone();
        move |source| PassError::Secret { name, source }
    };
    let bundle_err = |configuration: &WebhookConfiguration| {
        let name = configuration.name.clone();
        move |source| PassError::Bundle { name, source }
    };
    let existing_ca = secrets
        .get_opt(&options.ca_secret)
        .await
        .map_err(secret_err(&ca_name))?;
    let existing = secrets
        .get_opt(&options.secret)
        .await
        .map_err(secret_err(&serving_name))?;
    secrets::check_type(existing_ca.as_ref(), &ca_name, secrets::CA_TYPES)?;
    secrets::check_type(existing.as_ref(), &serving_name, secrets::SERVING_TYPES)?;
    let mut read = Vec::with_capacity(2);
    for configuration in configurations {
        let ours = configuration.read(&options.service).await;
        read.push(ours.map_err(bundle_err(configuration))?);
    }
    let now = OffsetDateTime::now_utc();
    let plan = plan::plan(
        existing_ca.as_ref().map(secrets::stored).as_ref(),
        existing.as_ref().map(secrets::served).as_ref(),
        now,
        options,
        |cas| {
            read.iter()
                .flatten()
                .all(|w| bundle::carries(&w.ca_bundle, cas))
        },
    )?;
    if plan.write_ca || plan.write_serving {
        let wait = limit.wait(Instant::now());
        if !wait.is_zero() {
            metrics.error(Operation::Rate);
            tracing::warn!(
                writes = WRITE_BURST, window = ?WRITE_WINDOW, retry_in = ?wait,
                "certificate Secrets written too often: the next write waits (is something rewriting them?)"
            );
            return Ok(wait);
        }
    }
    if plan.write_ca {
        secrets::write(
            secrets,
            existing_ca.as_ref(),
            &options.ca_secret,
            "Opaque",
            plan.material.ca_data(),
            plan.material.annotation(),
        )
        .await
        .map_err(secret_err(&ca_name))?;
        limit.record(Instant::now());
    }
    for change in &plan.changes {
        report(change, metrics, &ca_name, &plan.material);
    }
    let (left, kept) = lingering.update(&plan, now, options.propagation);
    if left > 0 {
        tracing::info!(secret_name = %ca_name, cas = left, "a CA the replicas no longer serve from left the caBundle");
    }
    if kept > 0 {
        tracing::warn!(
            secret_name = %ca_name, cas = kept,
            "the Secrets no longer name the CA the replicas serve from (both deleted?): it stays in the caBundle until they serve the new certificate"
        );
    }
    let ca_bundle = lingering.bundle(&plan.material);
    for (configuration, ours) in configurations.iter().zip(&read) {
        if let Some(patch) = bundle::patch(ours, &ca_bundle) {
            configuration
                .write(&patch)
                .await
                .map_err(bundle_err(configuration))?;
            metrics.bundle_updated(configuration.label);
            tracing::info!(
                configuration = %configuration.name,
                webhooks = ours.len(),
                cas = plan.material.bundle_cas().len(),
                "caBundle written"
            );
        }
    }
    if plan.write_serving
        && let Some(data) = plan.material.serving_data()
    {
        secrets::write(
            secrets,
            existing.as_ref(),
            &options.secret,
            "kubernetes.io/tls",
            data,
            None,
        )
        .await
        .map_err(secret_err(&serving_name))?;
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

fn report(change: &Change, metrics: &CertMetrics, secret: &str, now: &Material) {
    match change {
        Change::CaIssued(reason) => metrics.issued(Issued::Ca, reason.label()),
        Change::ServingIssued(reason) => metrics.issued(Issued::Serving, reason.label()),
        Change::RotationStarted => metrics.rotation(RotationStep::Started),
        Change::RotationSwitched => metrics.rotation(RotationStep::Switched),
        Change::RotationCompleted => metrics.rotation(RotationStep::Completed),
        Change::RetireCapped(_) | Change::Dropped(_) => {}
    }
    let not_after = |pem: &str| material::validity(pem).map(|v| v.not_after.to_string());
    match change {
        Change::CaIssued(Reason::Invalid(why)) => tracing::warn!(
            %secret, %why,
            "the Secret's CA is unusable (edited by hand?): replaced with a new CA and serving certificate"
        ),
        Change::CaIssued(reason) => {
            let not_after = not_after(&now.ca.cert_pem);
            tracing::info!(%secret, reason = reason.label().label(), not_after = ?not_after, "CA issued")
        }
        Change::ServingIssued(Reason::Invalid(why)) => tracing::warn!(
            %secret, %why,
            "the Secret's serving certificate is unusable (edited by hand?): replaced"
        ),
        Change::ServingIssued(reason) => {
            let serving = now.serving.as_ref();
            let not_after = serving.and_then(|s| not_after(&s.pair.cert_pem));
            tracing::info!(%secret, reason = reason.label().label(), not_after = ?not_after, "serving certificate issued")
        }
        Change::RotationStarted => {
            tracing::info!(%secret, "CA rotation: a new CA joins the caBundle beside the current one")
        }
        Change::RotationSwitched => {
            tracing::info!(%secret, "CA rotation: the serving certificate is now signed by the new CA")
        }
        Change::RotationCompleted => {
            tracing::info!(%secret, "CA rotation: the previous CA left the caBundle")
        }
        Change::RetireCapped(by) => {
            tracing::warn!(%secret, retire_after = %by, "the retired CA's time to leave the caBundle was later than one propagation delay and a margin after the serving certificate left it (not a CA this webhook retired?): it leaves earlier")
        }
        Change::Dropped(why) => {
            tracing::warn!(%secret, %why, "a CA rotation entry that is unusable or not the webhook's was dropped")
        }
    }
}
