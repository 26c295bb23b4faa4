//! The metrics of the requests the webhook answers: how many, how they
//! ended, how long they took, how many are in flight.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::labels::duration_histogram;

/// Labels of a served request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// validate, mutate, or other (unknown paths).
    pub webhook: &'static str,
    /// CREATE, UPDATE, DELETE, CONNECT, or "" when unknown.
    pub operation: &'static str,
    /// allowed, denied or error.
    pub result: &'static str,
    pub code: u16,
}

/// Labels of a request-duration observation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// validate, mutate or other.
    pub webhook: &'static str,
}

#[derive(Debug, Clone)]
pub struct RequestMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    pub in_flight: Gauge,
}

impl RequestMetrics {
    /// Registers the block.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            in_flight: Gauge::default(),
        };
        registry.register(
            "requests",
            "Admission requests answered, by webhook, operation, result (allowed, denied, error) and HTTP code",
            metrics.requests.clone(),
        );
        registry.register_with_unit(
            "request_duration",
            "Time from a request's headers to its answer",
            Unit::Seconds,
            metrics.duration.clone(),
        );
        registry.register(
            "requests_in_flight",
            "Requests being answered now",
            metrics.in_flight.clone(),
        );
        metrics
    }

    /// Counts one answered request, and how long it took.
    pub fn record_request(&self, labels: RequestLabels, took: Duration) {
        let webhook = labels.webhook;
        self.requests.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&WebhookLabels { webhook })
            .observe(took.as_secs_f64());
    }
}
