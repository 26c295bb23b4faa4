//! The audit: every stored object of the kinds the webhook guards
//! ([`audited::KINDS`]) judged again as a CREATE of it would be, by the
//! same [`crate::admission::decide`] as admission, with the results written as one
//! `wgpolicyk8s.io/v1alpha2` PolicyReport per namespace. The objects come
//! from kube-runtime's watchers ([`watch`]; the PipelineRollouts from the
//! reader the sweeper shares, [`crate::background::rollout_watch`]) into
//! reflector stores ([`store`]), are judged ([`judge`]) into reports
//! ([`report`]) that kube-runtime's applier writes ([`writer`]).
//!
//! Objects are judged when the first list is complete, on every change the
//! watch delivers (whatever has arrived is taken in as one batch, with no
//! timer), after each policy reload, and every [`AuditOptions::interval`].
//! Judging yields to the runtime every few objects, so admission requests
//! on the same runtime are not held up. A burst of changes in a namespace
//! is one report write: the writer's debounce ([`AuditOptions::debounce`]).

pub mod args;
pub mod audited;
pub mod judge;
pub mod report;
pub mod store;
pub mod watch;
pub mod writer;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::audited::KINDS;
use self::judge::{Judge, Status};
use self::store::Store;
use self::watch::WatchItem;
use self::writer::Note;
use crate::metrics::audit::{AuditEvent, AuditMetrics, ViolationLabels, Violations};
use crate::policy::Policy;

/// How the audit runs.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// How often every object is judged again, changed or not.
    pub interval: Duration,
    /// The writer's request budget ([`writer::rate_limited`]).
    pub qps: f64,
    pub burst: u32,
    /// How long a namespace's report waits after its results change before
    /// it is written, each further change restarting the wait: one write
    /// per namespace for a burst of changes.
    pub debounce: Duration,
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(3600),
            qps: 5.0,
            burst: 10,
            debounce: Duration::from_secs(1),
        }
    }
}

/// What the audit works with besides the API server.
#[derive(Debug, Clone)]
pub struct AuditContext {
    /// The policy in force; every object is judged again when it changes.
    pub policy: tokio::sync::watch::Receiver<Arc<Policy>>,
    pub metrics: AuditMetrics,
}

/// How many objects are judged between two yields to the runtime.
const CHUNK: usize = 64;

/// The most watch items taken in before what they changed is judged.
const BATCH: usize = 1024;

/// Runs the audit until `stop` is cancelled, then returns promptly, having
/// stopped its writes. It takes the PipelineRollouts from `rollouts` (the
/// leader's shared reader, [`crate::background::rollouts`]) and watches
/// the other audited kinds itself.
pub async fn run(
    client: kube::Client,
    context: AuditContext,
    options: AuditOptions,
    rollouts: watch::Events<0>,
    stop: CancellationToken,
) {
    tracing::info!(
        interval = ?options.interval,
        qps = options.qps,
        burst = options.burst,
        kinds = KINDS.len(),
        "audit on: judging every stored rollout (PipelineRollouts, MonoVertexRollouts, ISBServiceRollouts) and namespace-level ConfigMap into PolicyReports"
    );
    let (reports, reports_rx) = mpsc::unbounded_channel::<Note>();
    let store = Arc::new(Mutex::new(Store::default()));
    let writer = tokio::spawn(writer::run(
        writer::rate_limited(&client, options.qps, options.burst),
        context.metrics.clone(),
        Arc::clone(&store),
        reports_rx,
        options.debounce,
        stop.clone(),
    ));
    let watches = watch::all(&client, rollouts);
    let mut auditor = Auditor {
        policy: context.policy,
        metrics: context.metrics,
        store,
        judged: false,
        reports,
        full_since: None,
    };
    auditor.watch(watches, &options, &stop).await;
    // The writer stops with the same token; wait so that no write outlives
    // the audit.
    let _ = writer.await;
    tracing::info!("audit stopped");
}

struct Auditor {
    policy: tokio::sync::watch::Receiver<Arc<Policy>>,
    metrics: AuditMetrics,
    /// Shared with the writer, which builds each report when it writes it.
    store: Arc<Mutex<Store>>,
    /// Whether every object has been judged once (a new policy then
    /// judges them all again).
    judged: bool,
    /// To the writer.
    reports: mpsc::UnboundedSender<Note>,
    /// When the current full audit began, while one is under way.
    full_since: Option<Instant>,
}

impl Auditor {
    async fn watch(
        &mut self,
        watches: impl futures_util::Stream<Item = WatchItem> + Unpin,
        options: &AuditOptions,
        stop: &CancellationToken,
    ) {
        // Once the policy's sender is gone there is no change left to wait for.
        let mut policy_open = true;
        let mut interval = tokio::time::interval_at(
            tokio::time::Instant::now() + options.interval,
            options.interval,
        );
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whatever the watches have delivered is taken in at once, then
        // judged: the first list as one batch once every kind is listed,
        // later changes as they come (the writer's debounce gathers a
        // burst into one write per namespace).
        let mut batches = watches.ready_chunks(BATCH);
        loop {
            let judge = tokio::select! {
                () = stop.cancelled() => return,
                batch = batches.next() => {
                    let Some(items) = batch else {
                        tracing::error!("the audit's watches ended; the audit stops");
                        return;
                    };
                    for item in items {
                        self.take(item);
                    }
                    true
                },
                changed = self.policy.changed(), if policy_open => {
                    policy_open = changed.is_ok();
                    let again = policy_open && self.judged;
                    if again {
                        tracing::info!("audit: the policy changed, judging every object again");
                        self.begin_full();
                    }
                    again
                },
                _ = interval.tick() => {
                    let _ = self.reports.send(Note::Reread);
                    let listed = self.store().listed(KINDS.len());
                    if listed {
                        self.begin_full();
                    }
                    listed
                },
            };
            if judge && !self.judge_if_listed(stop).await {
                return;
            }
        }
    }

    /// Takes in one watch item, saying what needs saying.
    fn take(&mut self, item: WatchItem) {
        match &item {
            WatchItem::Failed { kind, error } => {
                self.metrics.record_audit(AuditEvent::WatchRestart);
                tracing::warn!(kind = KINDS[*kind].kind(), %error, "the audit's watch failed; restarting with backoff");
            }
            WatchItem::Absent { kind } if KINDS[*kind].label_selector.is_some() => tracing::info!(
                kind = KINDS[*kind].kind(),
                selector = KINDS[*kind].label_selector,
                "audit: the audit may not list Numaplane's namespace-level ConfigMaps (its ClusterRole lacks list and watch on configmaps), so it reports none; the watch retries with backoff and audits them once it may"
            ),
            WatchItem::Absent { kind } => tracing::info!(
                kind = KINDS[*kind].kind(),
                resource = %format!("{}.{}", KINDS[*kind].resource.resource(), KINDS[*kind].resource.group()),
                "audit: this kind is not served (its CRD is not installed), so it has nothing to judge; the watch retries with backoff and audits it once it is"
            ),
            _ => {}
        }
        let (completed, listed, objects) = {
            let mut store = self.store();
            let completed = store.take(item);
            (completed, store.listed(KINDS.len()), store.len())
        };
        if completed && listed && !self.judged {
            tracing::info!(objects, "audit: first list complete, judging every object");
            self.begin_full();
        }
    }

    /// Judges what waits, once every kind's first list is complete; false
    /// when stopped on the way.
    async fn judge_if_listed(&mut self, stop: &CancellationToken) -> bool {
        let listed = self.store().listed(KINDS.len());
        !listed || self.judge_pending(stop).await
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin_full(&mut self) {
        self.store().judge_all_again();
        self.judged = true;
        self.full_since.get_or_insert_with(Instant::now);
    }

    /// Judges every object waiting, then sends the reports that changed;
    /// false when stopped on the way.
    async fn judge_pending(&mut self, stop: &CancellationToken) -> bool {
        // The policy in force now, marked as seen.
        let policy = Arc::clone(&self.policy.borrow_and_update());
        self.judged = true;
        let (enforcing, warn_only) = judge::enforcing(&policy);
        let judge = Judge::new(&enforcing, warn_only, time::OffsetDateTime::now_utc());
        let mut judged = 0;
        loop {
            if stop.is_cancelled() {
                return false;
            }
            let chunk = self.store().next_unjudged(CHUNK);
            if chunk.is_empty() {
                break;
            }
            let done: Vec<_> = chunk
                .into_iter()
                .map(|(namespace, key, view)| {
                    let results = judge.object(&KINDS[key.0], &namespace, &key.1, &view);
                    (namespace, key, view, results)
                })
                .collect();
            judged += done.len();
            {
                let mut store = self.store();
                for (namespace, key, view, results) in done {
                    store.set_results(&namespace, &key, &view, results);
                }
            }
            tokio::task::yield_now().await;
        }
        self.publish();
        if let Some(since) = self.full_since.take() {
            let took = since.elapsed();
            let objects = self.store().len();
            tracing::info!(objects, judged, ?took, "audit complete");
            self.metrics.record_audit(AuditEvent::Completed {
                at: SystemTime::now(),
                took,
                objects,
            });
        }
        true
    }

    /// Hands the namespaces whose results changed to the writer; updates
    /// the violations.
    fn publish(&mut self) {
        let mut store = self.store();
        for namespace in store.take_changed() {
            let _ = self.reports.send(Note::Changed(namespace));
        }
        let _ = self.reports.send(Note::Judged);
        let mut violations = Violations::new();
        for (namespace, objects) in store.all() {
            for r in objects.values().flat_map(|e| e.results.iter()) {
                if matches!(r.status, Status::Fail | Status::Warn | Status::Error) {
                    let labels = ViolationLabels {
                        rollout_namespace: namespace.clone(),
                        rule: r.rule.name().to_owned(),
                        result: r.status.as_str().to_owned(),
                    };
                    *violations.entry(labels).or_default() += 1;
                }
            }
        }
        drop(store);
        self.metrics
            .record_audit(AuditEvent::Violations(&violations));
    }
}
