//! Whether the Lease may be taken, judged by this replica's own monotonic
//! clock. Pure: the election reads the Lease and passes in what it read
//! and the time it read it.
//!
//! The holder's `renewTime` is a wall-clock time written by the holder's
//! clock; comparing it with this replica's wall clock would make two
//! leaders out of a few seconds of clock skew. So it is never compared
//! with anything here: this replica remembers the version of the Lease it
//! last saw (holder, `renewTime`, `resourceVersion`) and *when it saw it
//! change*, on its monotonic clock. The Lease has expired only when it has
//! not changed for its `leaseDurationSeconds`, counted from that moment.
//! A holder that keeps renewing changes the Lease every retry period, so it
//! is never judged expired, whatever its clock says.

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
    /// The version of `lease`.
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
    /// The version seen.
    pub version: Version,
    /// How long the holder may go without renewing: the Lease's
    /// `leaseDurationSeconds`, or this replica's own duration without one.
    pub duration: Duration,
    /// When this replica first saw `version` (its monotonic clock).
    pub since: Instant,
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
        /// The holder.
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
        }
    }

    /// Whether the holder has not renewed for the Lease's duration, as
    /// this replica's clock measures it at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.since) >= self.duration
    }

    /// What replica `identity` does about the Lease at `now`.
    pub fn decide(&self, identity: &str, now: Instant) -> Decision {
        match &self.version.holder {
            None => Decision::Take,
            Some(holder) if holder == identity => Decision::Renew,
            Some(_) if self.expired(now) => Decision::Take,
            Some(holder) => Decision::Follow {
                holder: holder.clone(),
                until: self.since + self.duration,
            },
        }
    }
}

/// The duration a Lease states, when it states a usable one.
pub fn stated_duration(lease: &Lease) -> Option<Duration> {
    let seconds = lease.spec.as_ref()?.lease_duration_seconds?;
    u64::try_from(seconds)
        .ok()
        .filter(|&s| s > 0)
        .map(Duration::from_secs)
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
    fn a_stated_duration_must_be_positive() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        let lease = |seconds| Lease {
            spec: Some(LeaseSpec {
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        assert_eq!(
            stated_duration(&lease(Some(4))),
            Some(Duration::from_secs(4))
        );
        for bad in [None, Some(0), Some(-3)] {
            assert_eq!(stated_duration(&lease(bad)), None, "{bad:?}");
        }
        assert_eq!(stated_duration(&Lease::default()), None);
    }
}
