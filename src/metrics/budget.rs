//! The metrics of the body budget and the request limit
//! (`server::budget`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::labels::duration_histogram;

/// Labels of a wait for body budget.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaneLabels {
    /// small (bodies up to 1 MiB) or large.
    pub lane: &'static str,
}

/// Labels of a request refused with 503 by the limits.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// requests_in_flight (no request slot free) or body_budget (no room
    /// for the body before the deadline).
    pub reason: &'static str,
}

#[derive(Debug, Clone)]
pub struct BudgetMetrics {
    pub capacity: Gauge,
    pub reserved: Gauge,
    pub waits: Family<LaneLabels, Counter>,
    pub wait_duration: Histogram,
    pub refusals: Family<ReasonLabels, Counter>,
}

impl BudgetMetrics {
    /// Registers the block, its refusal reasons and lanes at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            capacity: Gauge::default(),
            reserved: Gauge::default(),
            waits: Family::default(),
            wait_duration: duration_histogram(),
            refusals: Family::default(),
        };
        registry.register_with_unit(
            "body_budget",
            "The budget of request body bytes in flight (--max-inflight-body-bytes)",
            Unit::Bytes,
            metrics.capacity.clone(),
        );
        registry.register_with_unit(
            "body_budget_reserved",
            "Request body bytes reserved now (announced or read)",
            Unit::Bytes,
            metrics.reserved.clone(),
        );
        registry.register(
            "body_budget_waits",
            "Requests that waited for body budget, by lane (small: bodies up to 1 MiB)",
            metrics.waits.clone(),
        );
        registry.register_with_unit(
            "body_budget_wait_duration",
            "How long requests waited for body budget, whether they got it or not",
            Unit::Seconds,
            metrics.wait_duration.clone(),
        );
        registry.register(
            "limit_refusals",
            "Requests answered 503 by the limits, by reason (requests_in_flight, body_budget)",
            metrics.refusals.clone(),
        );
        for reason in ["requests_in_flight", "body_budget"] {
            metrics
                .refusals
                .get_or_create(&ReasonLabels { reason })
                .inc_by(0);
        }
        for lane in ["small", "large"] {
            metrics.waits.get_or_create(&LaneLabels { lane }).inc_by(0);
        }
        metrics
    }

    /// Counts one request that waits for body budget in `lane`.
    pub fn record_wait(&self, lane: &'static str) {
        self.waits.get_or_create(&LaneLabels { lane }).inc();
    }

    /// Counts one request answered 503 for `reason`.
    pub fn record_refusal(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabels { reason }).inc();
    }
}
