//! The count of stale forces reset, shared by the two that reset them: the
//! `/mutate` one-shot rule and the stale-force sweeper.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Who reset a stale force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetBy {
    /// The one-shot rule of `/mutate`.
    Mutate,
    /// The stale-force sweeper.
    Sweeper,
}

impl ResetBy {
    /// Every one, for the series created at zero.
    pub const ALL: [ResetBy; 2] = [ResetBy::Mutate, ResetBy::Sweeper];

    pub fn as_str(self) -> &'static str {
        match self {
            ResetBy::Mutate => "mutate",
            ResetBy::Sweeper => "sweeper",
        }
    }
}

/// Labels of a stale-force reset: who reset it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResetLabels {
    /// mutate (the one-shot rule) or sweeper.
    pub by: &'static str,
}

/// Stale forces reset, by who reset them.
#[derive(Debug, Clone)]
pub struct ForceResets {
    pub family: Family<ResetLabels, Counter>,
}

impl ForceResets {
    /// Registers the counter, each resetter at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let resets = Self {
            family: Family::default(),
        };
        registry.register(
            "force_resets",
            "allow-data-loss annotations reset to \"false\" once the force was over, by who reset them (mutate, sweeper)",
            resets.family.clone(),
        );
        for by in ResetBy::ALL {
            resets
                .family
                .get_or_create(&ResetLabels { by: by.as_str() })
                .inc_by(0);
        }
        resets
    }

    pub fn record_reset(&self, by: ResetBy) {
        self.family
            .get_or_create(&ResetLabels { by: by.as_str() })
            .inc();
    }
}
