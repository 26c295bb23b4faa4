//! Leader election's flags of `serve`, checked together at start-up into
//! the [`LeaseOptions`] the election runs with: the Lease's name and
//! namespace, who this replica is, and the three durations.

use std::time::Duration;

use clap::ArgAction;

/// The Lease's name when `--leader-elect-lease-name` is not given.
pub const DEFAULT_LEASE_NAME: &str = "pipelinerollout-webhook";

/// The longest field manager the API server accepts.
const FIELD_MANAGER_MAX: usize = 128;
const FIELD_MANAGER_PREFIX: &str = "pipelinerollout-webhook-";

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

/// How this replica takes part in the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// The Lease's namespace; `None`: the client's default namespace (in a
    /// pod, the service account's).
    pub namespace: Option<String>,
    pub name: String,
    /// This replica's `holderIdentity`.
    pub identity: String,
    /// The flags' durations, as [`LeaseArgs`] describes them.
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// A Lease setting that cannot work; each message names the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseOptionsError {
    #[error(
        "--leader-elect-lease-duration must be a whole number of seconds, at least 2s (got {0}): the Lease stores it in seconds"
    )]
    Duration(String),
    #[error("--leader-elect-retry-period must be a whole number of seconds, at least 1s (got {0})")]
    RetryPeriod(String),
    #[error(
        "--leader-elect-renew-deadline ({renew}) must be shorter than --leader-elect-lease-duration ({duration}): a leader that cannot renew must stop before another replica may take over"
    )]
    RenewDeadline { renew: String, duration: String },
    #[error(
        "--leader-elect-retry-period ({retry}) must be shorter than --leader-elect-renew-deadline ({renew}): the leader renews every retry period and needs more than one try before it gives up"
    )]
    RetryPeriodTooLong { retry: String, renew: String },
    #[error(
        "--leader-elect-lease-name {0:?} is not a valid Lease name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
    )]
    Name(String),
}

fn text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn whole_seconds(d: Duration) -> Option<u64> {
    (d.subsec_nanos() == 0).then_some(d.as_secs())
}

impl LeaseArgs {
    /// The Lease's settings with --leader-elect, checked; `None` without.
    pub fn options(&self) -> Result<Option<LeaseOptions>, LeaseOptionsError> {
        if !self.leader_elect {
            return Ok(None);
        }
        self.checked(own_identity()).map(Some)
    }

    /// The settings for replica `identity`: durations in whole seconds
    /// with `retry_period < renew_deadline < duration`, and a valid name.
    fn checked(&self, identity: String) -> Result<LeaseOptions, LeaseOptionsError> {
        let name = &self.leader_elect_lease_name;
        let (duration, renew_deadline, retry_period) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        );
        if !crate::vap::valid_name(name) {
            return Err(LeaseOptionsError::Name(name.clone()));
        }
        if whole_seconds(duration).is_none_or(|s| s < 2) {
            return Err(LeaseOptionsError::Duration(text(duration)));
        }
        if whole_seconds(retry_period).is_none_or(|s| s < 1) {
            return Err(LeaseOptionsError::RetryPeriod(text(retry_period)));
        }
        if renew_deadline >= duration {
            return Err(LeaseOptionsError::RenewDeadline {
                renew: text(renew_deadline),
                duration: text(duration),
            });
        }
        if retry_period >= renew_deadline {
            return Err(LeaseOptionsError::RetryPeriodTooLong {
                retry: text(retry_period),
                renew: text(renew_deadline),
            });
        }
        Ok(LeaseOptions {
            namespace: self
                .leader_elect_namespace
                .clone()
                .filter(|n| !n.is_empty()),
            name: name.clone(),
            identity,
            duration,
            renew_deadline,
            retry_period,
        })
    }
}

impl LeaseOptions {
    pub fn duration_seconds(&self) -> u64 {
        self.duration.as_secs()
    }

    /// This replica's field manager on the Lease: unique per identity (so
    /// `managedFields` tells the replicas' writes apart), and within the
    /// API server's 128 characters.
    pub fn field_manager(&self) -> String {
        field_manager(&self.identity)
    }
}

fn field_manager(identity: &str) -> String {
    let whole = format!("{FIELD_MANAGER_PREFIX}{identity}");
    if whole.len() <= FIELD_MANAGER_MAX {
        return whole;
    }
    // A long identity: its start, then a hash of all of it, so that two
    // identities sharing a long prefix still differ.
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    identity.hash(&mut hasher);
    let hash = format!("-{:016x}", hasher.finish());
    let mut keep = FIELD_MANAGER_MAX - FIELD_MANAGER_PREFIX.len() - hash.len();
    while !identity.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{FIELD_MANAGER_PREFIX}{}{hash}", &identity[..keep])
}

/// This replica's identity: the pod's name (`POD_NAME`, which the
/// Deployment sets), else the host name and the process id.
pub fn identity(pod_name: Option<String>, hostname: Option<String>, pid: u32) -> String {
    let given = |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    given(pod_name).unwrap_or_else(|| {
        let host = given(hostname).unwrap_or_else(|| "unknown-host".to_owned());
        format!("{host}_{pid}")
    })
}

/// [`identity`] from this process's environment.
pub fn own_identity() -> String {
    let hostname = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok());
    identity(std::env::var("POD_NAME").ok(), hostname, std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn args(
        namespace: Option<&str>,
        name: &str,
        d: Duration,
        r: Duration,
        p: Duration,
    ) -> LeaseArgs {
        LeaseArgs {
            leader_elect: true,
            leader_elect_lease_name: name.to_owned(),
            leader_elect_namespace: namespace.map(str::to_owned),
            leader_elect_lease_duration: d,
            leader_elect_renew_deadline: r,
            leader_elect_retry_period: p,
        }
    }

    fn options(d: Duration, r: Duration, p: Duration) -> Result<LeaseOptions, LeaseOptionsError> {
        args(None, DEFAULT_LEASE_NAME, d, r, p).checked("me".to_owned())
    }

    #[test]
    fn durations_must_nest_and_be_whole_seconds() {
        let cases: [(&str, Duration, Duration, Duration, Option<&str>); 8] = [
            ("the defaults", secs(15), secs(10), secs(2), None),
            ("tight but ordered", secs(3), secs(2), secs(1), None),
            (
                "renew = duration",
                secs(10),
                secs(10),
                secs(2),
                Some("must be shorter than --leader-elect-lease-duration"),
            ),
            (
                "renew > duration",
                secs(5),
                secs(10),
                secs(2),
                Some(
                    "--leader-elect-renew-deadline (10s) must be shorter than --leader-elect-lease-duration (5s)",
                ),
            ),
            (
                "retry = renew",
                secs(15),
                secs(2),
                secs(2),
                Some(
                    "--leader-elect-retry-period (2s) must be shorter than --leader-elect-renew-deadline (2s)",
                ),
            ),
            (
                "fractional duration",
                Duration::from_millis(15_500),
                secs(10),
                secs(2),
                Some("whole number of seconds, at least 2s (got 15s 500ms)"),
            ),
            (
                "one-second duration",
                secs(1),
                Duration::from_millis(500),
                Duration::from_millis(100),
                Some("--leader-elect-lease-duration must be"),
            ),
            (
                "fractional retry",
                secs(15),
                secs(10),
                Duration::from_millis(1500),
                Some("--leader-elect-retry-period must be a whole number of seconds"),
            ),
        ];
        for (name, d, r, p, want) in cases {
            match (options(d, r, p), want) {
                (Ok(_), None) => {}
                (Err(e), Some(says)) => {
                    assert!(e.to_string().contains(says), "{name}: {e}");
                }
                (got, want) => panic!("{name}: got {got:?}, wanted an error saying {want:?}"),
            }
        }
    }

    #[test]
    fn the_lease_states_its_duration_in_seconds() {
        let o = options(secs(15), secs(10), secs(2)).expect("valid");
        assert_eq!(o.duration_seconds(), 15);
    }

    #[test]
    fn lease_names_are_object_names() {
        let checked =
            |name: &str| args(None, name, secs(15), secs(10), secs(2)).checked("me".into());
        for good in ["pipelinerollout-webhook", "a", "lease.v2", "0abc"] {
            assert!(checked(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Lease",
            "-a",
            "a-",
            "a_b",
            "a b",
            "a..b",
            &"a".repeat(254),
        ] {
            let e = checked(bad);
            assert!(matches!(e, Err(LeaseOptionsError::Name(_))), "{bad}");
        }
    }

    #[test]
    fn identity_is_the_pod_name_else_host_and_pid() {
        assert_eq!(identity(Some("web-1".into()), Some("h".into()), 7), "web-1");
        assert_eq!(identity(Some(" ".into()), Some("h\n".into()), 7), "h_7");
        assert_eq!(identity(None, None, 7), "unknown-host_7");
    }

    #[test]
    fn field_managers_stay_short_and_distinct() {
        assert_eq!(field_manager("web-1"), "pipelinerollout-webhook-web-1");
        let a = format!("{}-a", "x".repeat(200));
        let b = format!("{}-b", "x".repeat(200));
        let (fa, fb) = (field_manager(&a), field_manager(&b));
        assert!(fa.len() <= FIELD_MANAGER_MAX && fb.len() <= FIELD_MANAGER_MAX);
        assert_ne!(fa, fb);
        let wide = "é".repeat(100);
        assert!(field_manager(&wide).len() <= FIELD_MANAGER_MAX);
    }

    #[test]
    fn an_empty_namespace_means_the_clients_default() {
        let o = args(Some(""), DEFAULT_LEASE_NAME, secs(15), secs(10), secs(2))
            .checked("me".into())
            .expect("valid");
        assert_eq!(o.namespace, None);
    }
}
