//! Writing the reports: one task that takes the names of the namespaces
//! whose results changed, builds each one's report from the store when its
//! turn comes (so only the report being written is held as text), and
//! writes it when its content differs from what is stored, within a
//! request budget (a token bucket: `--audit-qps`, `--audit-burst`). A
//! refused write is counted and retried with backoff. Without the
//! PolicyReport CRD nothing is written; the CRD is looked for again every
//! minute.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::bucket::Bucket;
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

/// What the writer knows of the reports stored.
struct Writer {
    client: kube::Client,
    metrics: AuditMetrics,
    store: Arc<Mutex<Store>>,
    bucket: Bucket,
    /// The content hash of each namespace's stored report.
    stored: HashMap<String, u64>,
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
    bucket: Bucket,
    mut notes: mpsc::UnboundedReceiver<Note>,
    stop: CancellationToken,
) {
    let mut writer = Writer {
        client,
        metrics,
        store,
        bucket,
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
                        () = writer.write_due(&stop) => {}
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
        if !self.bucket.acquire(&CancellationToken::new()).await {
            return;
        }
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
        let _ = self.bucket.acquire(&CancellationToken::new()).await;
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
                    .filter_map(|r| {
                        let namespace = r.metadata.namespace.clone()?;
                        let value = serde_json::to_value(r).ok()?;
                        Some((namespace, report::content_hash(&value)))
                    })
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
    async fn write_due(&mut self, stop: &CancellationToken) {
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
                Some(_) => self.stored.get(&namespace) == Some(&report.hash),
                None => !self.stored.contains_key(&namespace),
            };
            if current {
                continue;
            }
            if !self.bucket.acquire(stop).await {
                return;
            }
            match self.write(&report).await {
                Ok(outcome) => {
                    self.metrics.record_audit(AuditEvent::ReportWrite(outcome));
                    match outcome {
                        WriteOutcome::Deleted => {
                            self.stored.remove(&namespace);
                        }
                        _ => {
                            self.stored.insert(namespace, report.hash);
                        }
                    }
                }
                Err(e) => {
                    self.metrics
                        .record_audit(AuditEvent::ReportWrite(WriteOutcome::Failed));
                    let failures = pending.failures + 1;
                    let wait = pending.backoff.next_wait();
                    tracing::warn!(%namespace, error = %e, attempt = failures, retry_in = ?wait, "PolicyReport not written; retrying with backoff");
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

    async fn write(&self, report: &Report) -> Result<WriteOutcome, kube::Error> {
        let api = self.api(&report.namespace);
        match &report.body {
            Some(body) => {
                let params = PatchParams::apply(FIELD_MANAGER).force();
                api.patch(REPORT_NAME, &params, &Patch::Apply(&**body))
                    .await?;
                Ok(WriteOutcome::Written)
            }
            None => match api.delete(REPORT_NAME, &DeleteParams::default()).await {
                Ok(_) => Ok(WriteOutcome::Deleted),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(WriteOutcome::Deleted),
                Err(e) => Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
