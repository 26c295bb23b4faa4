//! Where this replica stands in the election, as a state machine with one
//! function per transition. Pure: the election loop makes the calls about
//! the Lease and feeds their answers in; the standing says what holds now
//! and whether the next call waits a retry period. Generic over the lease
//! manager, so the transitions are tested without an API server.

/// This replica's standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing<M> {
    /// No lease manager: one is being built (the Lease read, or made when
    /// missing), or waits for its retry.
    Candidate,
    /// The manager says another replica holds the Lease, or nobody yet.
    Follower(M),
    /// The manager says this replica holds the Lease. The controllers run
    /// while a renewal is also fresh ([`Standing::leads`]).
    Holder(M),
}

/// The answer to the call in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<M> {
    /// A manager was built.
    Built(M),
    /// The manager says whether this replica holds the Lease now.
    Holds(bool),
    /// The call failed; `gone` when the Lease does not exist.
    Failed {
        /// The Lease does not exist (read, or a renewal answered 404).
        gone: bool,
    },
}

/// Whether the next call about the Lease waits a retry period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Call at once.
    Now,
    /// Wait a retry period first.
    AfterRetry,
}

impl<M> Standing<M> {
    /// The standing once `answer` is in.
    pub fn answered(self, answer: Answer<M>) -> (Self, Next) {
        match (self, answer) {
            (_, Answer::Built(manager)) => (Self::Follower(manager), Next::Now),
            (Self::Candidate, Answer::Holds(_)) => (Self::Candidate, Next::Now),
            (Self::Follower(m) | Self::Holder(m), Answer::Holds(true)) => {
                (Self::Holder(m), Next::Now)
            }
            (Self::Follower(m) | Self::Holder(m), Answer::Holds(false)) => {
                (Self::Follower(m), Next::Now)
            }
            // Deleted: others may make it anew and take it.
            (_, Answer::Failed { gone: true }) => (Self::Candidate, Next::AfterRetry),
            (same, Answer::Failed { gone: false }) => (same, Next::AfterRetry),
        }
    }

    /// The standing once the watch says the Lease was released: a follower
    /// campaigns afresh now, instead of sleeping until the expiry its
    /// manager last read. A holder released nothing, and stays.
    pub fn released(self) -> Self {
        match self {
            Self::Holder(m) => Self::Holder(m),
            Self::Candidate | Self::Follower(_) => Self::Candidate,
        }
    }

    /// The standing once the Lease is deleted: whoever makes it anew may
    /// take it at once, so a holder stops now rather than at its next
    /// renewal, and everyone campaigns again.
    pub fn deleted(self) -> Self {
        Self::Candidate
    }

    /// Whether the manager says this replica holds the Lease.
    pub fn holds(&self) -> bool {
        matches!(self, Self::Holder(_))
    }

    /// Whether the controllers run: holding the Lease with a renewal
    /// within the renew deadline (`fresh`).
    pub fn leads(&self, fresh: bool) -> bool {
        self.holds() && fresh
    }

    /// The manager, once one is built.
    pub fn manager(&self) -> Option<&M> {
        match self {
            Self::Candidate => None,
            Self::Follower(m) | Self::Holder(m) => Some(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type S = Standing<&'static str>;

    #[test]
    fn a_candidate_follows_once_built_and_retries_a_failed_build() {
        assert_eq!(
            S::Candidate.answered(Answer::Built("m")),
            (Standing::Follower("m"), Next::Now)
        );
        for gone in [false, true] {
            assert_eq!(
                S::Candidate.answered(Answer::Failed { gone }),
                (Standing::Candidate, Next::AfterRetry)
            );
        }
    }

    #[test]
    fn the_manager_says_who_holds_the_lease() {
        let (holder, next) = S::Follower("m").answered(Answer::Holds(true));
        assert_eq!((&holder, next), (&Standing::Holder("m"), Next::Now));
        assert!(holder.leads(true));
        assert!(
            !holder.leads(false),
            "no fresh renewal: the controllers stop"
        );
        assert_eq!(
            holder.answered(Answer::Holds(false)),
            (Standing::Follower("m"), Next::Now),
            "the Lease went to another replica"
        );
        assert!(!S::Follower("m").leads(true));
    }

    #[test]
    fn a_failed_call_keeps_the_standing_unless_the_lease_is_gone() {
        assert_eq!(
            S::Holder("m").answered(Answer::Failed { gone: false }),
            (Standing::Holder("m"), Next::AfterRetry),
            "a holder keeps holding until its renew deadline says otherwise"
        );
        assert_eq!(
            S::Holder("m").answered(Answer::Failed { gone: true }),
            (Standing::Candidate, Next::AfterRetry)
        );
        assert_eq!(
            S::Follower("m").answered(Answer::Failed { gone: true }),
            (Standing::Candidate, Next::AfterRetry)
        );
    }

    #[test]
    fn a_release_wakes_followers_and_a_deletion_everyone() {
        assert_eq!(S::Follower("m").released(), Standing::Candidate);
        assert_eq!(S::Holder("m").released(), Standing::Holder("m"));
        assert_eq!(S::Holder("m").deleted(), Standing::Candidate);
        assert_eq!(S::Follower("m").deleted(), Standing::Candidate);
        assert_eq!(S::Candidate.manager(), None);
        assert_eq!(S::Holder("m").manager(), Some(&"m"));
    }
}
