//! Whether the Lease may be taken, judged by this replica's own monotonic
//! clock from when it saw the Lease change, never by the holder's
//! `renewTime` ([`super`] says why). Pure: the election passes in what it
//! read and when.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;

/// What identifies one version of the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// `spec.holderIdentity`; `None` when empty or absent (released).
    pub holder: Option<String>,
    /// `spec.renewTime` as the holder wrote it (compared, never read as a time).
    pub renew_time: Option<String>,
    /// `metadata.resourceVersion`: changes on every write.
    pub resource_version: Option<String>,
}

impl Version {
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew_time: spec
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string()),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// The version of the Lease this replica last saw, and when it first saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub version: Version,
    /// How long the holder may go without renewing: the Lease's
    /// `leaseDurationSeconds`, or this replica's own duration without one.
    pub duration: Duration,
    /// When this replica first saw `version` (its monotonic clock).
    pub since: Instant,
    /// What the Lease's stated duration came to (`None`: not judged).
    pub stated: Option<StatedDuration>,
}

/// What to do about the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// This replica holds it: renew it.
    Renew,
    /// Nobody holds it, or its holder has not renewed it for its duration
    /// on this replica's clock: take it.
    Take,
    /// Another replica holds it; it cannot be taken before `until`.
    Follow {
        holder: String,
        /// When it expires unless it changes before.
        until: Instant,
    },
}

impl Observed {
    /// What this replica knows once it reads `version` at `now`: the time
    /// it was first seen is kept while the version is the one seen before.
    pub fn read(
        previous: Option<Self>,
        version: Version,
        duration: Duration,
        now: Instant,
    ) -> Self {
        let since = match previous {
            Some(p) if p.version == version => p.since,
            _ => now,
        };
        Self {
            version,
            duration,
            since,
            stated: None,
        }
    }

    /// What replica `identity` does about the Lease at `now`: another's is
    /// taken once it has not changed for its duration on this replica's
    /// clock.
    pub fn decide(&self, identity: &str, now: Instant) -> Decision {
        match &self.version.holder {
            None => Decision::Take,
            Some(holder) if holder == identity => Decision::Renew,
            Some(_) if now.saturating_duration_since(self.since) >= self.duration => Decision::Take,
            Some(holder) => Decision::Follow {
                holder: holder.clone(),
                until: self.since + self.duration,
            },
        }
    }
}

/// What the Lease's `leaseDurationSeconds` comes to on this replica: the
/// holder's word is trusted only up to this replica's own duration (the
/// bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatedDuration {
    /// Positive and within the bound: counted as stated.
    Trusted(Duration),
    /// Longer than the bound (the seconds stated): the bound is counted.
    Capped(i32),
    /// Absent, zero or negative: the bound is counted.
    Unusable(Option<i32>),
}

impl StatedDuration {
    /// Judges the `leaseDurationSeconds` of `lease` against `bound`.
    pub fn of(lease: &Lease, bound: Duration) -> Self {
        let seconds = lease.spec.as_ref().and_then(|s| s.lease_duration_seconds);
        match seconds.map(u64::try_from) {
            Some(Ok(s)) if s > 0 && Duration::from_secs(s) <= bound => {
                Self::Trusted(Duration::from_secs(s))
            }
            Some(Ok(s)) if s > 0 => Self::Capped(seconds.unwrap_or_default()),
            _ => Self::Unusable(seconds),
        }
    }

    /// How long the holder may go without renewing, as this replica counts it.
    pub fn counted(self, bound: Duration) -> Duration {
        match self {
            Self::Trusted(d) => d,
            Self::Capped(_) | Self::Unusable(_) => bound,
        }
    }

    /// What is wrong with the stated duration, for the log; `None` when
    /// nothing is.
    pub fn problem(self, bound: Duration) -> Option<String> {
        let bound = bound.as_secs();
        match self {
            Self::Trusted(_) => None,
            Self::Capped(stated) => Some(format!(
                "the Lease states leaseDurationSeconds {stated}, longer than this replica's own {bound}: its holder is trusted for {bound} s without renewing, no longer"
            )),
            Self::Unusable(None) => Some(format!(
                "the Lease states no leaseDurationSeconds: its holder is trusted for this replica's own {bound} s without renewing"
            )),
            Self::Unusable(Some(s)) => Some(format!(
                "the Lease states leaseDurationSeconds {s}, which is not positive: its holder is trusted for this replica's own {bound} s without renewing"
            )),
        }
    }
}

/// Whether `holder` looks like another replica of the same workload as
/// `own`: the same Deployment (pod names that differ only in their last
/// two `-` parts, the ReplicaSet's and the pod's suffixes), or, outside a
/// pod, the same host (`host_pid`). A hint for the log, not a check: a
/// name proves nothing.
pub fn looks_like_a_sibling(own: &str, holder: &str) -> bool {
    fn family(identity: &str) -> &str {
        if let Some((host, pid)) = identity.rsplit_once('_')
            && !pid.is_empty()
            && pid.bytes().all(|b| b.is_ascii_digit())
        {
            return host;
        }
        let mut parts = identity.rsplitn(3, '-');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(_), Some(_), Some(workload)) if !workload.is_empty() => workload,
            _ => identity,
        }
    }
    family(own) == family(holder)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DURATION: Duration = Duration::from_secs(15);

    fn version(holder: &str, renew_time: &str, rv: &str) -> Version {
        Version {
            holder: (!holder.is_empty()).then(|| holder.to_owned()),
            renew_time: Some(renew_time.to_owned()),
            resource_version: Some(rv.to_owned()),
        }
    }

    /// One read: seconds after t0, holder, renewTime, resourceVersion.
    type Read<'a> = (u64, &'a str, &'a str, &'a str);

    /// Reads versions one after the other, each `(seconds after t0,
    /// holder, renewTime, resourceVersion)`, and decides at `at` seconds:
    /// "take", "renew" or "follow".
    fn decide_after(reads: &[Read<'_>], at: u64) -> &'static str {
        let t0 = Instant::now();
        let secs = |s: u64| t0 + Duration::from_secs(s);
        let mut seen = None;
        for &(s, holder, renew, rv) in reads {
            seen = Some(Observed::read(
                seen,
                version(holder, renew, rv),
                DURATION,
                secs(s),
            ));
        }
        let seen = seen.expect("at least one read");
        match seen.decide("me", secs(at)) {
            Decision::Take => "take",
            Decision::Renew => "renew",
            Decision::Follow { holder, until } => {
                assert_eq!(Some(holder), seen.version.holder);
                assert_eq!(
                    until,
                    seen.since + DURATION,
                    "expires a duration after the change"
                );
                "follow"
            }
        }
    }

    #[test]
    fn the_holders_renew_time_against_our_wall_clock_does_not_matter() {
        // renewTime values hours, a day and decades off our wall clock (the
        // holder's clock far behind or ahead), or right on it: none changes
        // the judgement, only how long the Lease stayed the same on ours.
        let now = k8s_openapi::jiff::Timestamp::now();
        let off =
            |hours: i64| (now + k8s_openapi::jiff::SignedDuration::from_hours(hours)).to_string();
        let renew_times = [
            off(0),
            off(-3),
            off(3),
            off(-24),
            off(24),
            off(-200_000),
            off(200_000),
        ];
        for renew in &renew_times {
            let renew = renew.as_str();
            let cases: [(&[Read<'_>], u64, &str); 7] = [
                // Seen once, just now.
                (&[(0, "other", renew, "1")], 0, "follow"),
                // Unchanged for less than the duration.
                (&[(0, "other", renew, "1")], 14, "follow"),
                // Unchanged for the duration: expired.
                (&[(0, "other", renew, "1")], 15, "take"),
                (&[(0, "other", renew, "1")], 3600, "take"),
                // Renewed (a new resourceVersion) at 10: counted from 10.
                (
                    &[(0, "other", renew, "1"), (10, "other", renew, "2")],
                    24,
                    "follow",
                ),
                (
                    &[(0, "other", renew, "1"), (10, "other", renew, "2")],
                    25,
                    "take",
                ),
                // Read again unchanged: still counted from the first read.
                (
                    &[(0, "other", renew, "1"), (10, "other", renew, "1")],
                    15,
                    "take",
                ),
            ];
            for (reads, at, want) in cases {
                assert_eq!(
                    decide_after(reads, at),
                    want,
                    "renewTime {renew}, reads {reads:?}, at {at}s"
                );
            }
        }
    }

    #[test]
    fn any_change_of_the_version_restarts_the_count() {
        let changes = [
            // Another holder.
            (("other", "t1", "1"), ("third", "t1", "1")),
            // A renewal that wrote the same renewTime (a clock stuck).
            (("other", "t1", "1"), ("other", "t1", "2")),
            // A new renewTime.
            (("other", "t1", "1"), ("other", "t2", "1")),
        ];
        for (a, b) in changes {
            let reads = [(0, a.0, a.1, a.2), (14, b.0, b.1, b.2)];
            assert_eq!(decide_after(&reads, 20), "follow", "{a:?} then {b:?}");
            assert_eq!(decide_after(&reads, 29), "take", "{a:?} then {b:?}");
        }
    }

    #[test]
    fn a_free_lease_is_taken_at_once_and_our_own_is_renewed() {
        assert_eq!(decide_after(&[(0, "", "t", "1")], 0), "take");
        assert_eq!(decide_after(&[(0, "me", "t", "1")], 0), "renew");
        assert_eq!(
            decide_after(&[(0, "me", "t", "1")], 3600),
            "renew",
            "ours, however old"
        );
    }

    #[test]
    fn a_stated_duration_is_trusted_only_up_to_our_own() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        let lease = |seconds| Lease {
            spec: Some(LeaseSpec {
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let cases = [
            (Some(4), Duration::from_secs(4), None),
            (Some(15), DURATION, None),
            (
                Some(16),
                DURATION,
                Some("longer than this replica's own 15"),
            ),
            (
                Some(i32::MAX),
                DURATION,
                Some("leaseDurationSeconds 2147483647, longer"),
            ),
            (Some(0), DURATION, Some("0, which is not positive")),
            (Some(-3), DURATION, Some("-3, which is not positive")),
            (Some(i32::MIN), DURATION, Some("not positive")),
            (None, DURATION, Some("states no leaseDurationSeconds")),
        ];
        for (seconds, counted, problem) in cases {
            let judged = StatedDuration::of(&lease(seconds), DURATION);
            assert_eq!(judged.counted(DURATION), counted, "{seconds:?}");
            match (judged.problem(DURATION), problem) {
                (None, None) => {}
                (Some(said), Some(want)) => assert!(said.contains(want), "{seconds:?}: {said}"),
                (said, want) => panic!("{seconds:?}: said {said:?}, want {want:?}"),
            }
        }
        assert_eq!(
            StatedDuration::of(&Lease::default(), DURATION),
            StatedDuration::Unusable(None),
            "no spec at all"
        );
    }

    #[test]
    fn a_lease_written_once_with_a_huge_duration_expires_after_our_own() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        let lease = Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some("evil".to_owned()),
                lease_duration_seconds: Some(i32::MAX),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let t0 = Instant::now();
        let duration = StatedDuration::of(&lease, DURATION).counted(DURATION);
        let seen = Observed::read(None, Version::of(&lease), duration, t0);
        assert!(matches!(
            seen.decide("me", t0 + DURATION - Duration::from_secs(1)),
            Decision::Follow { .. }
        ));
        assert_eq!(seen.decide("me", t0 + DURATION), Decision::Take);
    }

    #[test]
    fn siblings_share_a_deployment_or_a_host() {
        let cases = [
            ("prw-7d9f8c6b5-abcde", "prw-7d9f8c6b5-fghij", true),
            ("prw-7d9f8c6b5-abcde", "prw-5c4b3a291-zzzzz", true),
            ("pipelinerollout-webhook-7d9f-x1", "evil", false),
            (
                "pipelinerollout-webhook-7d9f-x1",
                "other-app-7d9f-x1",
                false,
            ),
            ("node1_123", "node1_456", true),
            ("node1_123", "evil", false),
            ("node1_123", "node2_123", false),
            ("evil", "evil", true),
        ];
        for (own, holder, want) in cases {
            assert_eq!(looks_like_a_sibling(own, holder), want, "{own} / {holder}");
        }
    }
}
