//! The metrics of the audit of stored rollouts (`background::audit`), and
//! what the audit reports into them ([`AuditEvent`]).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{ResultLabels, results_at_zero};

/// The results that are not a pass.
const RESULTS: [&str; 3] = ["fail", "warn", "error"];

/// What became of one report write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Created or updated.
    Written,
    /// Deleted (its namespace has no objects left).
    Deleted,
    /// Refused or failed; retried with backoff.
    Failed,
    /// Its `resourceVersion` precondition failed (another replica wrote
    /// it, or someone edited it): read again, retried with backoff.
    Conflict,
}

impl WriteOutcome {
    /// The name in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Written => "written",
            Self::Deleted => "deleted",
            Self::Failed => "failed",
            Self::Conflict => "conflict",
        }
    }
}

/// The number of results that are not a pass, by namespace, rule and
/// outcome (fail, warn, error).
pub type Violations = HashMap<ViolationLabels, i64>;

/// Something the audit did.
#[derive(Debug)]
pub enum AuditEvent<'a> {
    /// Every object was judged (a full audit), at `at`, taking `took`.
    Completed {
        at: SystemTime,
        took: Duration,
        objects: usize,
    },
    /// The violations now (replacing the previous ones).
    Violations(&'a Violations),
    /// A report write.
    ReportWrite(WriteOutcome),
    /// A watch failed and is restarted with backoff.
    WatchRestart,
}

/// Labels of the audit's violations gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ViolationLabels {
    /// The rollout's namespace (not `namespace`, which Prometheus gives the
    /// scraped pod's).
    pub rollout_namespace: String,
    /// The rule's name, as in the PolicyReports.
    pub rule: String,
    /// fail, warn or error.
    pub result: String,
}

/// The metrics of the audit (`background::audit`), each described where
/// it is registered.
#[derive(Debug, Clone)]
pub struct AuditMetrics {
    pub violations: Family<ViolationLabels, Gauge>,
    /// Each result exported from the start.
    pub results: Family<ResultLabels, Gauge>,
    /// The label sets set last, so that those gone are removed.
    violation_labels: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<ViolationLabels>>>,
    pub last_audit: Gauge,
    pub last_audit_duration: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub audited_objects: Gauge,
    pub report_writes: Family<ResultLabels, Counter>,
    pub watch_restarts: Counter,
}

impl AuditMetrics {
    /// Creates the block, its known series at zero, and registers it in
    /// `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            violations: Family::default(),
            results: Family::default(),
            violation_labels: std::sync::Arc::default(),
            last_audit: Gauge::default(),
            last_audit_duration: Gauge::default(),
            audited_objects: Gauge::default(),
            report_writes: Family::default(),
            watch_restarts: Counter::default(),
        };
        registry.register(
            "audit_violations",
            "Stored objects whose audit result is not a pass, by rollout_namespace, rule and result (fail, warn, error)",
            metrics.violations.clone(),
        );
        registry.register(
            "audit_results",
            "Stored objects' audit results that are not a pass, summed over namespaces and rules, by result (fail, warn, error)",
            metrics.results.clone(),
        );
        for result in RESULTS {
            // Created at 0.
            let _ = metrics.results.get_or_create(&ResultLabels { result });
        }
        registry.register_with_unit(
            "audit_last_completed_timestamp",
            "When the last full audit of the stored objects ended, as a Unix timestamp",
            Unit::Seconds,
            metrics.last_audit.clone(),
        );
        registry.register_with_unit(
            "audit_last_duration",
            "How long the last full audit took to judge every stored object",
            Unit::Seconds,
            metrics.last_audit_duration.clone(),
        );
        registry.register(
            "audit_objects",
            "Stored objects judged by the last full audit",
            metrics.audited_objects.clone(),
        );
        registry.register(
            "audit_report_writes",
            "PolicyReport writes by the audit, by result (written, deleted, failed: retried with backoff, conflict: changed since last read, read again and retried)",
            metrics.report_writes.clone(),
        );
        registry.register(
            "audit_watch_restarts",
            "Times the audit's watch failed and was restarted with backoff",
            metrics.watch_restarts.clone(),
        );
        results_at_zero(&metrics.report_writes, &["written", "deleted", "failed"]);
        metrics
    }

    /// Records one thing the audit did.
    pub fn record_audit(&self, event: AuditEvent<'_>) {
        match event {
            AuditEvent::Completed { at, took, objects } => {
                let seconds = at
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                self.last_audit.set(seconds);
                self.last_audit_duration.set(took.as_secs_f64());
                self.audited_objects
                    .set(i64::try_from(objects).unwrap_or(i64::MAX));
            }
            AuditEvent::Violations(counts) => {
                self.set_violations(counts.iter().map(|(labels, n)| (labels.clone(), *n)));
            }
            AuditEvent::ReportWrite(outcome) => {
                self.report_writes
                    .get_or_create(&ResultLabels {
                        result: outcome.as_str(),
                    })
                    .inc();
            }
            AuditEvent::WatchRestart => {
                self.watch_restarts.inc();
            }
        }
    }

    /// Puts `counts` in force, removing the label sets no longer there.
    pub fn set_violations(&self, counts: impl IntoIterator<Item = (ViolationLabels, i64)>) {
        let mut previous = match self.violation_labels.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut now = std::collections::HashSet::new();
        let mut sums = [0_i64; RESULTS.len()];
        for (labels, count) in counts {
            self.violations.get_or_create(&labels).set(count);
            if let Some(i) = RESULTS.iter().position(|r| *r == labels.result) {
                sums[i] += count;
            }
            now.insert(labels);
        }
        for (result, sum) in RESULTS.into_iter().zip(sums) {
            self.results
                .get_or_create(&ResultLabels { result })
                .set(sum);
        }
        for gone in previous.iter().filter(|l| !now.contains(l)) {
            self.violations.remove(gone);
        }
        *previous = now;
    }
}
