//! The metrics of leader election (`background::leader`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The metrics of leader election, each described where it is registered.
#[derive(Debug, Clone, Default)]
pub struct LeaderMetrics {
    pub leader: Gauge,
    pub transitions: Family<[(&'static str, &'static str); 1], Counter>,
    pub lease_errors: Counter,
    pub lease_followed: Gauge,
}

impl LeaderMetrics {
    /// Creates the block and registers it in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
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
        registry.register(
            "leader_lease_followed_seconds",
            "Seconds this replica has seen the Lease held by others without holding it or seeing it free (0 while it holds it, or with --leader-elect=false). When the smallest value among the replicas is several Lease durations, no running replica holds the Lease",
            metrics.lease_followed.clone(),
        );
        metrics
    }

    /// How long this replica has followed others without holding the Lease.
    pub fn set_followed(&self, followed: std::time::Duration) {
        self.lease_followed
            .set(i64::try_from(followed.as_secs()).unwrap_or(i64::MAX));
    }

    /// Whether this replica runs the controllers now.
    pub fn set_leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts one change of who runs the controllers: `transition` is
    /// "acquired" (this replica took the Lease), "lost" (it went to another
    /// replica, or was not renewed within the renew deadline) or "released"
    /// (on shutdown).
    pub fn record_transition(&self, transition: &'static str) {
        self.transitions
            .get_or_create(&[("transition", transition)])
            .inc();
    }
}
