//! The reasons a denial is composed of: why a pause does not allow a
//! force (rule 6), why a child's state does not let a key act (rules 13
//! and 14), why a one-shot record is not the webhook's (rule 25), and the
//! sentences that join them.

use std::fmt;

use crate::kinds::UPGRADE_STATE;
use crate::logtext::cut;
use crate::policy::duration::format_seconds;
use crate::rollout::UPGRADE_IN_PROGRESS;

/// Why the pause condition of rule 6 is not met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotPausing {
    /// A CREATE: a new object cannot be pausing.
    #[error(
        "a new PipelineRollout cannot be pausing: create it without the annotation and set it only while a pause is stuck"
    )]
    NewObject,
    /// The stored status shows no pause in progress.
    #[error(
        "the pipeline is not pausing ({UPGRADE_IN_PROGRESS} is not PipelinePauseAndDrain and no PipelinePausingOrPaused condition has reason PipelinePausing): set it only while a pause is stuck"
    )]
    Idle,
}

/// Why a value of the one-shot record is not one the webhook writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordProblem {
    /// Not `upgrade:CHILD` or `after:CHILD`.
    #[error("which is not a record the webhook writes (upgrade:CHILD or after:CHILD)")]
    Unreadable,
    /// `forcePromote.oneShot` is off: the webhook writes none.
    #[error("but the policy's forcePromote.oneShot is off, so the webhook writes no record")]
    OneShotOff,
    /// forcePromote is off: the webhook drops the record.
    #[error("but forcePromote is off, so the webhook keeps no record")]
    PromoteOff,
    /// A record of another upgrade than the one this forcePromote is for.
    #[error("while the webhook's record for this forcePromote is \"{0}\"")]
    NotThisOne(String),
}

/// Why a force on a child cannot act there: its upgrade state, as the
/// stored object's `upgrade-state` label says, is not one Numaplane acts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotActable {
    /// The state found (`None`: no such label, or not a string).
    pub state: Option<String>,
    /// The states in which the force acts.
    pub wanted: [&'static str; 2],
}

impl fmt::Display for NotActable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b] = self.wanted;
        match &self.state {
            Some(state) => write!(
                f,
                "its label {UPGRADE_STATE} is \"{}\", and Numaplane acts on this key only on a child that is {a} or {b}: set it only while the child is {a} or {b}",
                cut(state, 40)
            ),
            None => write!(
                f,
                "it has no {UPGRADE_STATE} label, so it is no child Numaplane is upgrading or recycling (Numaplane labels every child it makes) and the key would do nothing now but act later: leave it out"
            ),
        }
    }
}

/// Why a pause is not old enough for a force (`forceReapply.minPauseAge`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PauseAgeProblem {
    /// The pause began too recently.
    #[error(
        "the pause has lasted {}, less than the minimum of {} (forceReapply.minPauseAge) before a force: let it drain, and force only from {allowed_from} if it is still stuck",
        format_seconds(*.age),
        format_seconds(*.min)
    )]
    TooYoung {
        /// How long it has lasted, in seconds.
        age: u64,
        /// The minimum, in seconds.
        min: u64,
        /// When a force will be allowed (RFC 3339, UTC).
        allowed_from: String,
    },
    /// The status does not say when the pause began in a readable way.
    #[error(
        "the pause start cannot be read ({detail}), so its age cannot be checked against the minimum of {} (forceReapply.minPauseAge): wait until the Numaplane controller records it",
        format_seconds(*.min)
    )]
    StartUnreadable {
        /// What is wrong with it.
        detail: String,
        /// The minimum, in seconds.
        min: u64,
    },
}

/// The reasons a gated write is refused, joined by "; and ": why the
/// requester lacks permission (`refused`), with the policy to be added to
/// and what to `use_instead`, then what in the object's state forbids it.
pub(super) fn refusal<'a>(
    refused: Option<&'a str>,
    policy: &'a str,
    use_instead: &'a str,
    state: [Option<&'a dyn fmt::Display>; 2],
) -> impl fmt::Display + 'a {
    fmt::from_fn(move |f| {
        let mut and = "";
        if let Some(why) = refused {
            write!(
                f,
                "{why}; ask a platform admin to add you to {policy}, or use {use_instead}"
            )?;
            and = "; and ";
        }
        for reason in state.into_iter().flatten() {
            write!(f, "{and}{reason}")?;
            and = "; and ";
        }
        Ok(())
    })
}
