//! Writing the reports: kube-runtime's `applier`, keyed by namespace. A
//! namespace's first PolicyReport does not exist yet, so a `Controller` of
//! PolicyReports could never write it; the applier's store holds instead
//! the identity of every report wanted (one per namespace that has
//! objects or had a report), and its queue is the namespaces whose results
//! changed. Its reconciler builds the namespace's report from the audit's
//! store when its turn comes (so only the report being written is held) and
//! writes it when its content differs from what is stored; the
//! scheduler merges repeated requests, and a refused write is counted and
//! requeued by the error policy with the namespace's backoff. Requests go
//! out within a budget (`--audit-qps`, `--audit-burst`: tower's rate limit
//! as a layer on the writer's own client, [`rate_limited`]). Without the
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

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Config, applier};
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::watcher::Event;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::report::{
    self, MANAGED_BY, REPORT_GROUP, REPORT_KIND, REPORT_NAME, REPORT_PLURAL, REPORT_VERSION, Report,
};
use super::store::Store;
use crate::background::backoff::Backoff;
use crate::metrics::audit::{AuditEvent, AuditMetrics, WriteOutcome};

const FIELD_MANAGER: &str = "pipelinerollout-webhook-audit";
/// The longest wait between two looks for the CRD while it is missing or
/// cannot be looked for: the first is after 1 s, doubled each time, so a
/// CRD installed beside the webhook, or a failed look, costs seconds.
const CRD_RECHECK: Duration = Duration::from_secs(60);
/// A refused write is retried after 1 s, the wait doubled each time up
/// to a minute.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
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
struct KnownReport {
    /// The hash of its [`report::content`].
    hash: u64,
    /// The precondition of the next write.
    resource_version: Option<String>,
}

impl KnownReport {
    fn of(report: &DynamicObject) -> Option<Self> {
        let value = serde_json::to_value(report).ok()?;
        Some(Self {
            hash: report::content_hash(&value),
            resource_version: report.metadata.resource_version.clone(),
        })
    }
}

/// `body` (a PolicyReport) with `metadata.resourceVersion` set to
/// `resource_version` when one is known: server-side apply then writes only
/// over that version.
fn with_precondition(mut body: Value, resource_version: Option<&str>) -> Value {
    if let Some(rv) = resource_version {
        // An object (report::build's), whose metadata is an object or absent.
        body["metadata"]["resourceVersion"] = rv.into();
    }
    body
}

/// Whether the API server answered `code` (409: a failed precondition).
fn answered(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == code)
}

/// What the applier's reconciler works with: the reports as known, the
/// store they are built from, and each namespace's backoff.
struct Reports {
    client: kube::Client,
    metrics: AuditMetrics,
    store: Arc<Mutex<Store>>,
    /// Each namespace's stored report, as last read or written.
    known: Mutex<HashMap<String, KnownReport>>,
    /// The waits of the namespaces whose last write was refused.
    failing: Mutex<HashMap<String, (u32, Backoff)>>,
    /// Whether the CRD is there and the stored reports were read.
    on: AtomicBool,
}

/// A refused write, retried by the error policy.
#[derive(Debug, thiserror::Error)]
#[error("PolicyReport not written: {error}")]
struct Refused {
    error: kube::Error,
    /// The resourceVersion the write was made over.
    precondition: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The applier's object: one namespace's report, by its identity only.
fn report_key(namespace: &str) -> DynamicObject {
    DynamicObject::new(REPORT_NAME, &api_resource()).within(namespace)
}

/// Writes what `notes` brings until `stop`.
pub async fn run(
    client: kube::Client,
    metrics: AuditMetrics,
    store: Arc<Mutex<Store>>,
    mut notes: mpsc::UnboundedReceiver<Note>,
    debounce: Duration,
    stop: CancellationToken,
) {
    let reports = Arc::new(Reports {
        client,
        metrics,
        store,
        known: Mutex::new(HashMap::new()),
        failing: Mutex::new(HashMap::new()),
        on: AtomicBool::new(false),
    });
    let mut keys = Writer::<DynamicObject>::new(api_resource());
    // Filled by hand, not by a watch: ready (for the applier) at once.
    keys.apply_watcher_event(&Event::Init);
    keys.apply_watcher_event(&Event::InitDone);
    let (requests, mut queue) = mpsc::unbounded_channel::<ObjectRef<DynamicObject>>();
    let queue = futures_util::stream::poll_fn(move |cx| {
        queue
            .poll_recv(cx)
            .map(|r| r.map(Ok::<_, std::convert::Infallible>))
    });
    let applier = applier(
        |key, reports: Arc<Reports>| Box::pin(reconcile(key, reports)),
        error_policy,
        Arc::clone(&reports),
        keys.as_reader(),
        queue,
        // One report at a time: only the report being written is held (a
        // hundred at once, waiting for the rate limit, took the
        // leader from 47 to 63 MiB in audit_bench). A namespace's burst of
        // changes is one write: its request waits out the debounce.
        Config::default().concurrency(1).debounce(debounce),
    );
    let mut applier = std::pin::pin!(applier);
    let mut wanted = Wanted {
        keys,
        requests,
        ready: false,
        waiting: BTreeSet::new(),
    };
    let mut next_crd_check = Instant::now();
    let mut crd_backoff = Backoff::new(FIRST_BACKOFF, CRD_RECHECK);
    let mut first_check = true;
    let mut was_on = false;
    loop {
        let on = reports.on.load(Ordering::Relaxed);
        if was_on && !on {
            next_crd_check = Instant::now();
            crd_backoff.reset();
        }
        was_on = on;
        if !on && Instant::now() >= next_crd_check {
            next_crd_check = Instant::now() + crd_backoff.next_wait();
            let found = tokio::select! {
                () = stop.cancelled() => return,
                found = reports.look_for_crd(first_check) => found,
            };
            first_check = false;
            if found && !wanted.read_stored(&reports, &stop).await {
                return;
            }
            was_on = reports.on.load(Ordering::Relaxed);
            continue;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            _ = applier.next() => {}
            note = notes.recv() => match note {
                Some(Note::Judged) => wanted.ready(on),
                Some(Note::Changed(namespace)) => {
                    wanted.want(namespace, on);
                    wanted.ready(on);
                }
                Some(Note::Reread) => {
                    if on && !wanted.read_stored(&reports, &stop).await {
                        return;
                    }
                }
                None => return,
            },
            () = tokio::time::sleep_until(next_crd_check), if !on => {}
        }
    }
}

/// The namespaces asked for: handed to the applier (its store and its
/// queue) once the auditor has judged its first list (before that, a
/// namespace without objects may only be not listed yet), kept until then.
struct Wanted {
    keys: Writer<DynamicObject>,
    requests: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    ready: bool,
    waiting: BTreeSet<String>,
}

impl Wanted {
    /// Asks for `namespace`'s report; nothing while the CRD is off (once it
    /// is found, every namespace is looked at).
    fn want(&mut self, namespace: String, on: bool) {
        if !on {
            return;
        }
        if !self.ready {
            self.waiting.insert(namespace);
            return;
        }
        let key = report_key(&namespace);
        self.keys.apply_watcher_event(&Event::Apply(key.clone()));
        let _ = self
            .requests
            .send(ObjectRef::from_obj_with(&key, api_resource()));
    }

    /// Reads the stored reports and asks for every namespace to look at;
    /// false when stopped on the way.
    async fn read_stored(&mut self, reports: &Reports, stop: &CancellationToken) -> bool {
        let all = tokio::select! {
            () = stop.cancelled() => return false,
            all = reports.read_stored() => all,
        };
        for namespace in all {
            self.want(namespace, true);
        }
        true
    }

    /// The first list is judged: what waited is asked for.
    fn ready(&mut self, on: bool) {
        if self.ready {
            return;
        }
        self.ready = true;
        for namespace in std::mem::take(&mut self.waiting) {
            self.want(namespace, on);
        }
    }
}

/// Writes one namespace's report when it differs from what is stored.
async fn reconcile(key: Arc<DynamicObject>, reports: Arc<Reports>) -> Result<Action, Refused> {
    let Some(namespace) = key.metadata.namespace.as_deref() else {
        return Ok(Action::await_change());
    };
    if !reports.on.load(Ordering::Relaxed) {
        // The CRD went away; once it is back every namespace is looked at.
        return Ok(Action::await_change());
    }
    let report = reports.build(namespace);
    let known = lock(&reports.known).get(namespace).cloned();
    let current = match &report.body {
        Some(_) => known.as_ref().map(|k| k.hash) == Some(report.hash),
        None => known.is_none(),
    };
    if !current {
        let precondition = known.and_then(|k| k.resource_version);
        let deletion = report.body.is_none();
        let written = reports
            .write(namespace, report, precondition.as_deref())
            .await;
        let outcome = match &written {
            Ok(_) if deletion => WriteOutcome::Deleted,
            Ok(_) => WriteOutcome::Written,
            Err(e) if answered(e, 409) => WriteOutcome::Conflict,
            Err(_) => WriteOutcome::Failed,
        };
        reports
            .metrics
            .record_audit(AuditEvent::ReportWrite(outcome));
        match written {
            Ok(None) => lock(&reports.known).remove(namespace),
            Ok(Some(written)) => lock(&reports.known).insert(namespace.to_owned(), written),
            Err(error) => {
                if outcome == WriteOutcome::Conflict {
                    reports.reread(namespace).await;
                }
                if answered(&error, 404) && !deletion {
                    // The CRD went away: look for it again.
                    reports.on.store(false, Ordering::Relaxed);
                }
                return Err(Refused {
                    error,
                    precondition,
                });
            }
        };
    }
    lock(&reports.failing).remove(namespace);
    Ok(Action::await_change())
}

/// A refused write is tried again after the namespace's next backoff.
fn error_policy(key: Arc<DynamicObject>, refused: &Refused, reports: Arc<Reports>) -> Action {
    let namespace = key.metadata.namespace.clone().unwrap_or_default();
    let mut failing = lock(&reports.failing);
    let (attempt, backoff) = failing
        .entry(namespace.clone())
        .or_insert_with(|| (0, report_backoff()));
    *attempt += 1;
    let wait = backoff.next_wait();
    let attempt = *attempt;
    if answered(&refused.error, 409) {
        tracing::warn!(%namespace, resource_version = ?refused.precondition, attempt, retry_in = ?wait, "PolicyReport not written: it changed since this replica last read or wrote it (another replica wrote it, or someone edited it); reading it again, retrying with backoff");
    } else {
        tracing::warn!(%namespace, error = %refused.error, attempt, retry_in = ?wait, "PolicyReport not written; retrying with backoff");
    }
    Action::requeue(wait)
}

impl Reports {
    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &api_resource())
    }

    /// Whether the CRD is there.
    async fn look_for_crd(&self, first: bool) -> bool {
        let version = format!("{REPORT_GROUP}/{REPORT_VERSION}");
        match self.client.list_api_group_resources(&version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == REPORT_PLURAL) => true,
            Ok(_) | Err(kube::Error::Api(_)) => {
                if first {
                    tracing::info!(
                        "the PolicyReport CRD ({REPORT_PLURAL}.{REPORT_GROUP}, {REPORT_VERSION}) is not installed: the audit runs and exports its metrics, its reports are off (looked for again, from after 1 s to every minute)"
                    );
                }
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for the PolicyReport CRD; trying again with backoff (1 s doubling to a minute)");
                false
            }
        }
    }

    /// Reads the stored reports' content, so that an unchanged one is not
    /// written again and a missing or edited one is; says which
    /// namespaces to look at: those with objects, and those with a report
    /// from an earlier run (none when the read failed).
    async fn read_stored(&self) -> Vec<String> {
        // The field selector lets RBAC narrow `list` to the report's name.
        let params = ListParams::default()
            .labels(&format!("{MANAGED_BY}={REPORT_NAME}"))
            .fields(&format!("metadata.name={REPORT_NAME}"));
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &api_resource());
        match api.list(&params).await {
            Ok(list) => {
                let stored: HashMap<String, KnownReport> = list
                    .items
                    .iter()
                    .filter(|r| r.metadata.name.as_deref() == Some(REPORT_NAME))
                    .filter_map(|r| Some((r.metadata.namespace.clone()?, KnownReport::of(r)?)))
                    .collect();
                if !self.on.load(Ordering::Relaxed) {
                    tracing::info!(
                        stored = stored.len(),
                        "PolicyReports on: writing one per namespace, named {REPORT_NAME}"
                    );
                }
                let mut all: Vec<String> =
                    lock(&self.store).all().map(|(ns, _)| ns.clone()).collect();
                all.extend(stored.keys().cloned());
                *lock(&self.known) = stored;
                self.on.store(true, Ordering::Relaxed);
                all
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the stored PolicyReports; trying again with backoff (1 s doubling to a minute)");
                Vec::new()
            }
        }
    }

    /// The report of `namespace` as the store has it now.
    fn build(&self, namespace: &str) -> Report {
        let store = lock(&self.store);
        match store.objects(namespace) {
            Some(objects) => report::build(namespace, objects),
            None => Report::default(),
        }
    }

    /// Reads the report of `namespace` again after a conflict, so that the
    /// retry writes over the version stored now.
    async fn reread(&self, namespace: &str) {
        match self.api(namespace).get_opt(REPORT_NAME).await {
            Ok(stored) => {
                let mut known = lock(&self.known);
                match stored.as_ref().and_then(KnownReport::of) {
                    Some(stored) => known.insert(namespace.to_owned(), stored),
                    None => known.remove(namespace),
                };
            }
            // Retried with the next write, which conflicts again.
            Err(e) => tracing::warn!(%namespace, error = %e, "cannot read the PolicyReport again"),
        }
    }

    /// Writes `namespace`'s `report` over the stored version
    /// `precondition` (none: the report is not known to be stored); what is
    /// stored then (`None` once deleted).
    async fn write(
        &self,
        namespace: &str,
        report: Report,
        precondition: Option<&str>,
    ) -> Result<Option<KnownReport>, kube::Error> {
        let api = self.api(namespace);
        match report.body {
            Some(body) => {
                let body = with_precondition(body, precondition);
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let written = api
                    .patch(REPORT_NAME, &params, &Patch::Apply(&body))
                    .await?;
                Ok(Some(KnownReport {
                    hash: report.hash,
                    resource_version: written.metadata.resource_version,
                }))
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
                    Err(e) if !answered(&e, 404) => Err(e),
                    _ => Ok(None),
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
        let body = serde_json::json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport", "metadata": {"name": "r", "namespace": "a"}, "results": []});
        let with = with_precondition(body.clone(), Some("42"));
        assert_eq!(with["metadata"]["resourceVersion"], "42");
        assert_eq!(with["metadata"]["name"], "r", "the rest is kept");
        assert_eq!(with["results"], serde_json::json!([]));
        assert_eq!(with_precondition(body.clone(), None), body);
        assert!(
            with_precondition(serde_json::json!({"kind": "PolicyReport"}), Some("7"))["metadata"]["resourceVersion"]
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
