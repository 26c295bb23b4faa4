//! The metrics of leader election (`background::leader`), registered by
//! [`Metrics`](super::metrics::Metrics).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of a change of who runs the background controllers.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// acquired, lost or released.
    pub transition: &'static str,
}

/// The metrics of leader election.
#[derive(Debug, Clone)]
pub struct LeaderMetrics {
    /// 1 while this replica runs the background controllers.
    pub leader: Gauge,
    /// Changes, by transition.
    pub transitions: Family<TransitionLabels, Counter>,
    /// Failed calls about the Lease.
    pub lease_errors: Counter,
}

impl LeaderMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            leader: Gauge::default(),
            transitions: Family::default(),
            lease_errors: Counter::default(),
        };
        registry.register(
            "leader",
            "1 while this replica runs the background controllers (the stale-force sweeper): as the holder of the Lease, or always with --leader-elect=false; else 0",
            metrics.leader.clone(),
        );
        registry.register(
            "leader_transitions",
            "Times this replica started (acquired) or stopped (lost: the Lease went elsewhere or was not renewed in time; released: on shutdown) the background controllers",
            metrics.transitions.clone(),
        );
        registry.register(
            "leader_lease_errors",
            "Failed calls about the Lease (read, create, renew, release), each retried after --leader-elect-retry-period",
            metrics.lease_errors.clone(),
        );
        metrics
    }
}
