//! Leader election's flags of `serve`, checked together into the
//! [`LeaseOptions`] the election runs with.

use std::time::Duration;

use clap::ArgAction;

use super::options::{DEFAULT_LEASE_NAME, LeaseOptions, LeaseOptionsError, own_identity};

/// Leader election's flags of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaseArgs {
    /// Elect one replica, the holder of a Lease, to run the background work (the sweeper); every replica serves admission. Needs get, list, watch, patch and create on leases. Off (--leader-elect=false): every replica runs it.
    #[arg(
        long,
        env = "WEBHOOK_LEADER_ELECT",
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value_t = false
    )]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_LEASE_NAME", default_value = DEFAULT_LEASE_NAME)]
    pub leader_elect_lease_name: String,
    /// The Lease's namespace (the webhook's own, which the Deployment sets as POD_NAMESPACE); without it, the kubeconfig's or service account's namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// How long a renewal holds the Lease: another replica takes over this long after the leader's last renewal (whole seconds). A Lease that states a longer leaseDurationSeconds is trusted for this long only.
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// The leader stops the background work when no renewal has succeeded for this long (shorter than the lease duration).
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the leader renews, and how long any Lease call may take before it is retried (whole seconds, shorter than the renew deadline).
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = humantime::parse_duration)]
    pub leader_elect_retry_period: Duration,
}

impl LeaseArgs {
    /// The Lease's settings with --leader-elect, checked; `None` without.
    pub fn options(&self) -> Result<Option<LeaseOptions>, LeaseOptionsError> {
        if !self.leader_elect {
            return Ok(None);
        }
        LeaseOptions::new(
            self.leader_elect_namespace.clone(),
            &self.leader_elect_lease_name,
            own_identity(),
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        )
        .map(Some)
    }
}
