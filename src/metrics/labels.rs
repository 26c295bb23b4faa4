//! The label set several blocks share, and the request-duration buckets
//! the timing histograms share.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// Request-duration buckets, in seconds: fine below a millisecond, where
/// answers should be, and up to the API server's longest timeout.
const DURATION_BUCKETS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Labels of a reload (success or failure), of an RBAC check (allowed,
/// denied or error), of a report write or of an audit result.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// A histogram of durations with [`DURATION_BUCKETS`].
pub fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Creates each of `results` in `family` at zero, so that its first
/// increment shows in `increase()` and `rate()`.
pub fn results_at_zero(family: &Family<ResultLabels, Counter>, results: &[&'static str]) {
    for &result in results {
        family.get_or_create(&ResultLabels { result }).inc_by(0);
    }
}
