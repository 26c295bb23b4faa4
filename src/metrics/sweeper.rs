//! The metrics of the stale-force sweeper (`background::sweeper`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::force_resets::{ForceResets, ResetBy};

/// The metrics of the sweeper, each described where it is registered.
#[derive(Debug, Clone)]
pub struct SweeperMetrics {
    resets: ForceResets,
    pub conflicts: Counter,
    pub errors: Counter,
    pub watch_restarts: Counter,
}

impl SweeperMetrics {
    /// Creates the block and registers it in `registry`; its resets are
    /// counted in `resets`.
    pub fn register(registry: &mut Registry, resets: ForceResets) -> Self {
        let metrics = Self {
            resets,
            conflicts: Counter::default(),
            errors: Counter::default(),
            watch_restarts: Counter::default(),
        };
        registry.register(
            "sweeper_conflicts",
            "Sweeper resets refused because the object changed since it was seen (it is looked at again)",
            metrics.conflicts.clone(),
        );
        registry.register(
            "sweeper_errors",
            "Sweeper resets that failed for a reason other than a conflict",
            metrics.errors.clone(),
        );
        registry.register(
            "sweeper_watch_restarts",
            "Times the sweeper's watch of PipelineRollouts failed and was restarted with backoff",
            metrics.watch_restarts.clone(),
        );
        metrics
    }

    /// Counts a stale force the sweeper reset.
    pub fn record_reset(&self) {
        self.resets.record_reset(ResetBy::Sweeper);
    }
}
