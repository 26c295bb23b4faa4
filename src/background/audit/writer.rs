//! Writing the reports: one task that takes the names of the namespaces
//! whose results changed, builds each one's report from the store when its
//! turn comes (so only the report being written is held as text), and
//! writes it when its content differs from what is stored, within a
//! request budget (`--audit-qps`, `--audit-burst`: tower's rate limit as a
//! layer on the writer's own client, [`rate_limited`]). A refused write is
//! counted and retried with backoff. Without the
//! PolicyReport CRD nothing is written; the CRD is looked for again every
//! minute.
//!
//! Every write of a report this replica knows to be stored carries the
//! `resourceVersion` it last read or wrote as a precondition (in the
//! applied body, and in a deletion's preconditions). A replica that lost
//! the Lease while a write was on its way, or was paused past its renew
//! deadline, writes from a stale view: the API server refuses it with 409
//! once the new leader has written that report, so a late write never
//! overwrites a newer one. A refused write is counted
//! (`result="conflict"`), logged, the report read again and the write
//! retried with backoff (a deposed leader's writer is stopped by then).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::core::{ApiResource, GroupVersionKind};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::report::{
    self, MANAGED_BY, REPORT_GROUP, REPORT_KIND, REPORT_NAME, REPORT_PLURAL, REPORT_VERSION, Report,
};
use super::store::Store;
use crate::background::backoff::Backoff;
use crate::metrics::audit::{AuditEvent, AuditMetrics, WriteOutcome};

/// The field manager of the audit's writes.
const FIELD_MANAGER: &str = "pipelinerollout-webhook-audit";
/// How often the CRD is looked for while it is missing.
const CRD_RECHECK: Duration = Duration::from_secs(60);
/// The first retry of a refused write, doubled each time up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait before retrying a refused write.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// `client` with its requests limited to `burst` at once, then `qps` a
/// second on average (tower's rate limit: `burst` requests in each window
/// of `burst / qps` seconds), for the writer's requests only: report
/// writes, deletions, reads and the CRD look-up. The watches use the
/// client unlimited.
pub fn rate_limited(client: &kube::Client, qps: f64, burst: u32) -> kube::Client {
    let burst = burst.max(1);
    let window = Duration::from_secs_f64(f64::from(burst) / qps.max(0.01));
    let inner = client.clone();
    let send = tower::service_fn(move |request| {
        let inner = inner.clone();
        async move { inner.send(request).await }
    });
    let limited = tower::ServiceBuilder::new()
        .rate_limit(u64::from(burst), window)
        .service(send);
    kube::Client::new(limited, client.default_namespace())
}

/// What the auditor tells the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The results of this namespace changed.
    Changed(String),
    /// Every object listed has been judged (sent after each round, even
    /// when nothing changed: a report left from an earlier run may now be
    /// deleted).
    Judged,
    /// Read the stored reports again (every audit interval), so that a
    /// report deleted or edited by someone else is written again.
    Reread,
}

/// A namespace whose report waits to be written.
#[derive(Debug)]
struct Pending {
    failures: u32,
    not_before: Instant,
    /// The waits after its refused writes.
    backoff: Backoff,
}

impl Pending {
    fn now() -> Self {
        Self {
            failures: 0,
            not_before: Instant::now(),
            backoff: report_backoff(),
        }
    }
}

/// The waits before retrying a refused write: from [`FIRST_BACKOFF`],
/// doubled each time, up to [`MAX_BACKOFF`].
fn report_backoff() -> Backoff {
    Backoff::new(FIRST_BACKOFF, MAX_BACKOFF)
}

fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(REPORT_GROUP, REPORT_VERSION, REPORT_KIND),
        REPORT_PLURAL,
    )
}

/// What the writer knows of one stored report.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    /// The hash of its content.
    hash: u64,
    /// Its `resourceVersion`: the precondition of the next write.
    resource_version: Option<String>,
}

impl Stored {
    fn of(report: &DynamicObject) -> Option<Self> {
        let value = serde_json::to_value(report).ok()?;
        Some(Self {
            hash: report::content_hash(&value),
            resource_version: report.metadata.resource_version.clone(),
        })
    }
}

/// `body` (a PolicyReport as JSON text) with `metadata.resourceVersion`
/// set to `resource_version` when one is known: server-side apply then
/// writes only over that version.
fn with_precondition(
    body: &str,
    resource_version: Option<&str>,
) -> serde_json::Result<serde_json::Value> {
    let mut value: serde_json::Value = serde_json::from_str(body)?;
    if let Some(rv) = resource_version
        && let Some(object) = value.as_object_mut()
    {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".to_owned(), rv.into());
        }
    }
    Ok(value)
}

/// Whether `e` is a failed precondition (409 Conflict).
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

/// What the writer knows of the reports stored.
struct Writer {
    client: kube::Client,
    metrics: AuditMetrics,
    store: Arc<Mutex<Store>>,
    /// Each namespace's stored report, as last read or written.
    stored: HashMap<String, Stored>,
    pending: BTreeMap<String, Pending>,
    /// Whether the CRD is there and the stored reports were read.
    on: bool,
    /// Whether the auditor has judged its first list (before that, a
    /// namespace without objects may only be not listed yet).
    ready: bool,
    next_crd_check: Instant,
}

/// Writes what `reports` brings until `stop`.
pub async fn run(
    client: kube::Client,
    metrics: AuditMetrics,
    store: Arc<Mutex<Store>>,
    mut notes: mpsc::UnboundedReceiver<Note>,
    stop: CancellationToken,
) {
    let mut writer = Writer {
        client,
        metrics,
        store,
        stored: HashMap::new(),
        pending: BTreeMap::new(),
        on: false,
        ready: false,
        next_crd_check: Instant::now(),
    };
    let mut first_check = true;
    loop {
        if !writer.on && Instant::now() >= writer.next_crd_check {
            tokio::select! {
                () = stop.cancelled() => return,
                () = writer.look_for_crd(first_check) => {}
            }
            first_check = false;
        }
        let wake = writer.next_wake();
        tokio::select! {
            () = stop.cancelled() => return,
            note = notes.recv() => match note {
                Some(Note::Judged) => writer.ready = true,
                Some(Note::Changed(namespace)) => {
                    writer.ready = true;
                    writer.want(namespace);
                }
                Some(Note::Reread) => {
                    if writer.on {
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = writer.read_stored() => {}
                        }
                    }
                }
                None => return,
            },
            () = tokio::time::sleep_until(wake) => {
                if writer.on && writer.ready {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = writer.write_due() => {}
                    }
                }
            }
        }
    }
}

impl Writer {
    fn api_all(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &api_resource())
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &api_resource())
    }

    /// Looks for the CRD; when it is there, reads the stored reports.
    async fn look_for_crd(&mut self, first: bool) {
        self.next_crd_check = Instant::now() + CRD_RECHECK;
        let version = format!("{REPORT_GROUP}/{REPORT_VERSION}");
        match self.client.list_api_group_resources(&version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == REPORT_PLURAL) => {}
            Ok(_) | Err(kube::Error::Api(_)) => {
                if first {
                    tracing::info!(
                        "the PolicyReport CRD ({REPORT_PLURAL}.{REPORT_GROUP}, {REPORT_VERSION}) is not installed: the audit runs and exports its metrics, its reports are off (looked for again every minute)"
                    );
                }
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for the PolicyReport CRD; trying again in a minute");
                return;
            }
        }
        self.read_stored().await;
    }

    /// Reads the stored reports' content, so that an unchanged one is not
    /// written again and a missing or edited one is; then looks at every
    /// namespace.
    async fn read_stored(&mut self) {
        // The field selector lets RBAC narrow `list` to the report's name.
        let params = ListParams::default()
            .labels(&format!("{MANAGED_BY}={REPORT_NAME}"))
            .fields(&format!("metadata.name={REPORT_NAME}"));
        match self.api_all().list(&params).await {
            Ok(list) => {
                self.stored = list
                    .items
                    .iter()
                    .filter(|r| r.metadata.name.as_deref() == Some(REPORT_NAME))
                    .filter_map(|r| Some((r.metadata.namespace.clone()?, Stored::of(r)?)))
                    .collect();
                if !self.on {
                    tracing::info!(
                        stored = self.stored.len(),
                        "PolicyReports on: writing one per namespace, named {REPORT_NAME}"
                    );
                }
                self.on = true;
                // Every namespace is looked at: those with objects, and those
                // with a report from an earlier run.
                let mut all: Vec<String> = {
                    let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
                    store.all().map(|(ns, _)| ns.clone()).collect()
                };
                all.extend(self.stored.keys().cloned());
                for namespace in all {
                    self.want(namespace);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the stored PolicyReports; trying again in a minute");
            }
        }
    }

    /// Takes in a namespace whose report may have changed.
    fn want(&mut self, namespace: String) {
        self.pending.entry(namespace).or_insert_with(Pending::now);
    }

    /// The report of `namespace` as the store has it now.
    fn build(&self, namespace: &str) -> Report {
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        match store.objects(namespace) {
            Some(objects) => report::build(namespace, objects),
            None => report::deletion(namespace),
        }
    }

    fn next_wake(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        let crd = if self.on { far } else { self.next_crd_check };
        let due = if self.on && self.ready {
            self.pending
                .values()
                .map(|p| p.not_before)
                .min()
                .unwrap_or(far)
        } else {
            far
        };
        crd.min(due)
    }

    /// Writes every pending report that is due, within the budget.
    async fn write_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.not_before <= now)
            .map(|(ns, _)| ns.clone())
            .collect();
        for namespace in due {
            let Some(mut pending) = self.pending.remove(&namespace) else {
                continue;
            };
            let report = self.build(&namespace);
            let current = match &report.body {
                Some(_) => self.stored.get(&namespace).map(|s| s.hash) == Some(report.hash),
                None => !self.stored.contains_key(&namespace),
            };
            if current {
                continue;
            }
            let precondition = self
                .stored
                .get(&namespace)
                .and_then(|s| s.resource_version.clone());
            match self.write(&report, precondition.as_deref()).await {
                Ok((outcome, resource_version)) => {
                    self.metrics.record_audit(AuditEvent::ReportWrite(outcome));
                    match outcome {
                        WriteOutcome::Deleted => {
                            self.stored.remove(&namespace);
                        }
                        _ => {
                            let stored = Stored {
                                hash: report.hash,
                                resource_version,
                            };
                            self.stored.insert(namespace, stored);
                        }
                    }
                }
                Err(e) => {
                    let conflict = is_conflict(&e);
                    let outcome = if conflict {
                        WriteOutcome::Conflict
                    } else {
                        WriteOutcome::Failed
                    };
                    self.metrics.record_audit(AuditEvent::ReportWrite(outcome));
                    let failures = pending.failures + 1;
                    let wait = pending.backoff.next_wait();
                    if conflict {
                        tracing::warn!(%namespace, resource_version = ?precondition, attempt = failures, retry_in = ?wait, "PolicyReport not written: it changed since this replica last read or wrote it (another replica wrote it, or someone edited it); reading it again, retrying with backoff");
                        self.reread(&namespace).await;
                    } else {
                        tracing::warn!(%namespace, error = %e, attempt = failures, retry_in = ?wait, "PolicyReport not written; retrying with backoff");
                    }
                    if let kube::Error::Api(status) = &e
                        && status.code == 404
                        && report.body.is_some()
                    {
                        // The CRD went away: look for it again.
                        self.on = false;
                        self.next_crd_check = Instant::now();
                    }
                    self.pending.insert(
                        namespace,
                        Pending {
                            failures,
                            not_before: Instant::now() + wait,
                            backoff: pending.backoff,
                        },
                    );
                }
            }
        }
    }

    /// Reads the report of `namespace` again after a conflict, so that the
    /// retry writes over the version stored now.
    async fn reread(&mut self, namespace: &str) {
        match self.api(namespace).get_opt(REPORT_NAME).await {
            Ok(Some(stored)) => match Stored::of(&stored) {
                Some(stored) => {
                    self.stored.insert(namespace.to_owned(), stored);
                }
                None => {
                    self.stored.remove(namespace);
                }
            },
            Ok(None) => {
                self.stored.remove(namespace);
            }
            Err(e) => {
                // Retried with the next write, which conflicts again.
                tracing::warn!(%namespace, error = %e, "cannot read the PolicyReport again");
            }
        }
    }

    /// Writes `report` over the stored version `precondition` (none: the
    /// report is not known to be stored); the outcome and the
    /// `resourceVersion` written.
    async fn write(
        &self,
        report: &Report,
        precondition: Option<&str>,
    ) -> Result<(WriteOutcome, Option<String>), kube::Error> {
        let api = self.api(&report.namespace);
        match &report.body {
            Some(body) => {
                let body =
                    with_precondition(body.get(), precondition).map_err(kube::Error::SerdeError)?;
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let written = api
                    .patch(REPORT_NAME, &params, &Patch::Apply(&body))
                    .await?;
                Ok((WriteOutcome::Written, written.metadata.resource_version))
            }
            None => {
                let params = DeleteParams {
                    preconditions: precondition.map(|rv| Preconditions {
                        resource_version: Some(rv.to_owned()),
                        uid: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(REPORT_NAME, &params).await {
                    Ok(_) => Ok((WriteOutcome::Deleted, None)),
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        Ok((WriteOutcome::Deleted, None))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_precondition_is_the_resource_version_last_seen() {
        let body = r#"{"apiVersion":"wgpolicyk8s.io/v1alpha2","kind":"PolicyReport","metadata":{"name":"r","namespace":"a"},"results":[]}"#;
        let with = with_precondition(body, Some("42")).expect("JSON");
        assert_eq!(with["metadata"]["resourceVersion"], "42");
        assert_eq!(with["metadata"]["name"], "r", "the rest is kept");
        assert_eq!(with["results"], serde_json::json!([]));
        let without = with_precondition(body, None).expect("JSON");
        assert_eq!(
            without,
            serde_json::from_str::<serde_json::Value>(body).expect("JSON")
        );
        assert!(
            with_precondition(r#"{"kind":"PolicyReport"}"#, Some("7")).expect("JSON")["metadata"]["resourceVersion"]
                == "7",
            "a body without metadata gets it"
        );
    }

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let mut backoff = report_backoff();
        let waits: Vec<Duration> = (1..=30).map(|_| backoff.next_wait()).collect();
        assert_eq!(waits[0], Duration::from_secs(1));
        assert_eq!(waits[1], Duration::from_secs(2));
        assert_eq!(waits[3], Duration::from_secs(8));
        assert_eq!(waits[29], MAX_BACKOFF);
    }
}
