//! The metrics of the stale-force sweeper (`background::sweeper`), and
//! what it reports into them ([`SweepOutcome`]).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::force_resets::{ForceResets, ResetBy};

/// What the sweeper did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepOutcome {
    /// A stale force was reset.
    Reset,
    /// A reset lost to a concurrent change (the object is looked at again).
    Conflict,
    /// A reset failed for another reason.
    Error,
    /// The watch failed and was restarted.
    WatchRestart,
}

#[derive(Debug, Clone)]
pub struct SweeperMetrics {
    /// Stale forces reset (here: by the sweeper).
    resets: ForceResets,
    pub conflicts: Counter,
    pub errors: Counter,
    pub watch_restarts: Counter,
}

impl SweeperMetrics {
    /// Registers the block; its resets count in `resets`.
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

    pub fn record_sweep(&self, outcome: SweepOutcome) {
        match outcome {
            SweepOutcome::Reset => self.resets.record_reset(ResetBy::Sweeper),
            SweepOutcome::Conflict => {
                self.conflicts.inc();
            }
            SweepOutcome::Error => {
                self.errors.inc();
            }
            SweepOutcome::WatchRestart => {
                self.watch_restarts.inc();
            }
        }
    }
}
