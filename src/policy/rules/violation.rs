//! One broken rule, with the message a denial shows and the short summary
//! a warning shows.

use std::fmt;

use serde_json::Value;

use super::rule::Rule;
use crate::kinds::{FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION, UPGRADE_STATE};
use crate::lenient::JsonKind;
use crate::policy::duration::format_seconds;
use crate::policy::model::MAX_CLOCK_SECONDS;
use crate::rollout::{
    ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, FORCE_PROMOTE_FOR, SCALE_FACTOR_FIELD, TIMEOUT_FIELD,
};

/// Why the pause condition of rule 6 is not met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotPausing {
    /// A CREATE: a new object cannot be pausing.
    NewObject,
    /// The stored status shows no pause in progress.
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

/// One broken rule. The `Display` text is the full message a denial shows:
/// what is wrong, where, the value, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// An object on the way to the timeout is not an object.
    #[error(
        "{path} is {found}, not an object, so {TIMEOUT_FIELD} cannot be read or set: make {path} an object as the PipelineRollout CRD describes"
    )]
    TimeoutUnreachable {
        /// The dotted path of the bad value.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 2: the timeout is not a JSON integer.
    #[error(
        "{TIMEOUT_FIELD} is {value}, which is not an integer number of seconds: write an integer, e.g. 3600 for 1h"
    )]
    TimeoutNotInteger {
        /// The value as JSON.
        value: String,
    },
    /// Rule 3: below 1 or below the minimum.
    #[error(
        "{TIMEOUT_FIELD} is {value}, below the minimum of {min} ({min_text}) set by {scope}{zero}: {fix}"
    )]
    TimeoutTooShort {
        /// The value.
        value: i128,
        /// The minimum in force.
        min: u64,
        /// The minimum as a duration.
        min_text: String,
        /// Which scope.
        scope: String,
        /// Extra words for 0 and negative values.
        zero: &'static str,
        /// The allowed values.
        fix: String,
    },
    /// Rule 3: above the maximum but not "no timeout".
    #[error(
        "{TIMEOUT_FIELD} is {value}, above the maximum of {max} ({max_text}) set by {scope}: {fix}"
    )]
    TimeoutTooLong {
        /// The value.
        value: i128,
        /// The maximum in force.
        max: u64,
        /// The maximum as a duration.
        max_text: String,
        /// Which scope.
        scope: String,
        /// The allowed values.
        fix: String,
    },
    /// Rule 3: "no timeout" where it is not allowed.
    #[error(
        "{TIMEOUT_FIELD} is {value}, which means no timeout (at or above {no_timeout}), and {scope} does not allow no timeout: {fix}"
    )]
    NoTimeoutNotAllowed {
        /// The value.
        value: i128,
        /// noTimeoutSeconds.
        no_timeout: u64,
        /// Which scope.
        scope: String,
        /// The allowed values.
        fix: String,
    },
    /// Rule 4: the timeout times the recycle multiplier overflows Numaflow's clock.
    #[error(
        "{TIMEOUT_FIELD} is {value}; Numaplane multiplies it by {multiplier} (scaleFactor {scale_factor}%) and {value} x {multiplier} seconds overflow Numaflow's clock (at most {MAX_CLOCK_SECONDS}): set at most {largest}"
    )]
    TimeoutOverflows {
        /// The value.
        value: i128,
        /// ceil(100 / scaleFactor).
        multiplier: u64,
        /// The scale factor used.
        scale_factor: u64,
        /// The largest value that does not overflow.
        largest: u64,
    },
    /// Rule 4: the scale factor is not an integer percent from 1 to 100.
    #[error(
        "{SCALE_FACTOR_FIELD} is {value}, which is not an integer percent from 1 to 100: set e.g. 50, or leave it out for the default of {default}"
    )]
    ScaleFactorInvalid {
        /// The value as JSON.
        value: String,
        /// defaultRecycleScaleFactor.
        default: u64,
    },
    /// `metadata` or `metadata.annotations` is not an object.
    #[error("{path} is {found}, not an object: annotations must be a map of strings")]
    MetadataMalformed {
        /// The dotted path.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 5: the annotation is neither "true" nor "false".
    #[error(
        "metadata.annotations[\"{ALLOW_DATA_LOSS}\"] is {value}, which Numaplane ignores (it acts only on exactly \"true\"): set \"true\" to force a re-apply, or \"false\", or remove it"
    )]
    AnnotationInvalid {
        /// The value as JSON.
        value: String,
    },
    /// Rule 6: setting allow-data-loss to "true" is not allowed here.
    #[error(
        "user \"{user}\" may not set metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\" (a forced re-apply skips draining and can lose data): {}",
        force_reapply_reasons(refused.as_deref(), *not_pausing, too_young.as_ref())
    )]
    ForceReapplyDenied {
        /// The requester.
        user: String,
        /// Why the requester lacks permission, if they do.
        refused: Option<String>,
        /// Why the pause condition is not met, if it is not.
        not_pausing: Option<NotPausing>,
        /// Why the minimum pause age is not met, if it is not.
        too_young: Option<PauseAgeProblem>,
    },
    /// The request cannot be judged (no object, no resource, ...): the
    /// Rule 25: the one-shot record is the webhook's own.
    #[error(
        "metadata.annotations[\"{FORCE_PROMOTE_FOR}\"] is {value}, {why}: it is the webhook's own record of the upgrade a forcePromote was set for, written only by its mutating webhook, so that forcePromote.oneShot resets it when that upgrade is over; leave the annotation out of your change (the webhook keeps it)"
    )]
    ForcePromoteRecordWritten {
        /// The value written, quoted and cut short.
        value: String,
        /// Why it is not the webhook's record.
        why: RecordProblem,
    },
    /// validating webhook denies it, saying what is missing.
    #[error("{0}")]
    Unjudgeable(String),
    /// Rule 13: the force-promote label with a value other than "true".
    #[error(
        "{path}[\"{FORCE_PROMOTE_LABEL}\"] is {value}: Numaplane acts on the label's presence, so any value, \"false\" included, force-promotes; to force a promotion set \"true\", otherwise remove the label"
    )]
    ForcePromoteLabelValue {
        /// The dotted path of the map.
        path: String,
        /// The value as JSON.
        value: String,
    },
    /// Rule 13: the force-promote label needs permission and, on a child,
    /// an upgrading child.
    #[error(
        "user \"{user}\" may not set {path}[\"{FORCE_PROMOTE_LABEL}\"] (Numaplane then promotes without assessment{also}): {}",
        gate_reasons(refused.as_deref(), state.as_deref(), "Argo CD's force-promote action")
    )]
    ForcePromoteLabelDenied {
        /// The requester.
        user: String,
        /// The dotted path of the map.
        path: String,
        /// What else it does, for a rollout's template.
        also: &'static str,
        /// Why the requester lacks permission, if they do.
        refused: Option<String>,
        /// Why it cannot act on this child, if it cannot.
        state: Option<Box<NotActable>>,
    },
    /// Rule 14: marked-for-deletion "true" needs permission and, on a
    /// Pipeline, a recyclable one.
    #[error(
        "user \"{user}\" may not set {path}[\"{MARKED_FOR_DELETION}\"] to \"true\" (Numaplane then deletes the recyclable Pipeline at once, without draining, and its data is lost): {}",
        gate_reasons(refused.as_deref(), state.as_deref(), "Argo CD's delete action")
    )]
    DeleteUndrainedDenied {
        /// The requester.
        user: String,
        /// The dotted path of the map.
        path: String,
        /// Why the requester lacks permission, if they do.
        refused: Option<String>,
        /// Why it cannot act on this Pipeline, if it cannot.
        state: Option<Box<NotActable>>,
    },
    /// Rule 15: Numaplane's bookkeeping keys are its controller's.
    #[error(
        "user \"{user}\" may not {change} {path}[\"{key}\"]: Numaplane keeps its bookkeeping there, and only its controller (\"{controller}\", numaplane.controllerAccount in the webhook's policy) may change it; leave the key as Numaplane wrote it"
    )]
    BookkeepingChanged {
        /// The requester.
        user: String,
        /// The dotted path of the map.
        path: String,
        /// The key.
        key: String,
        /// "set", "change" or "remove".
        change: &'static str,
        /// The controller's username.
        controller: String,
    },
    /// A rollout's child template (or a value on the way) is not an object.
    #[error("{path} is {found}, not an object: labels and annotations must be maps of strings")]
    TemplateMalformed {
        /// The dotted path.
        path: String,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 7: turning on forcePromote needs permission.
    #[error(
        "user \"{user}\" may not turn on {FORCE_PROMOTE_FIELD} (it promotes without draining and can lose data): {refused}; ask a platform admin to add you to forceReapply in the webhook's policy"
    )]
    ForcePromoteDenied {
        /// The requester.
        user: String,
        /// Why the requester lacks permission.
        refused: String,
    },
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PauseAgeProblem {
    /// The pause began too recently.
    TooYoung {
        /// How long it has lasted, in seconds.
        age: u64,
        /// The minimum, in seconds.
        min: u64,
        /// When a force will be allowed (RFC 3339, UTC).
        allowed_from: String,
    },
    /// The status does not say when the pause began in a readable way.
    StartUnreadable {
        /// What is wrong with it.
        detail: String,
        /// The minimum, in seconds.
        min: u64,
    },
}

impl fmt::Display for PauseAgeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooYoung {
                age,
                min,
                allowed_from,
            } => write!(
                f,
                "the pause has lasted {}, less than the minimum of {} (forceReapply.minPauseAge) before a force: let it drain, and force only from {allowed_from} if it is still stuck",
                format_seconds(*age),
                format_seconds(*min)
            ),
            Self::StartUnreadable { detail, min } => write!(
                f,
                "the pause start cannot be read ({detail}), so its age cannot be checked against the minimum of {} (forceReapply.minPauseAge): wait until the Numaplane controller records it",
                format_seconds(*min)
            ),
        }
    }
}

fn gate_reasons(refused: Option<&str>, state: Option<&NotActable>, action: &str) -> String {
    let mut reasons = Vec::new();
    if let Some(why) = refused {
        reasons.push(format!(
            "{why}; ask a platform admin to add you to the webhook's policy, or use {action}"
        ));
    }
    if let Some(state) = state {
        reasons.push(state.to_string());
    }
    reasons.join("; and ")
}

fn force_reapply_reasons(
    refused: Option<&str>,
    not_pausing: Option<NotPausing>,
    too_young: Option<&PauseAgeProblem>,
) -> String {
    let mut reasons = Vec::new();
    if let Some(why) = refused {
        reasons.push(format!(
            "{why}; ask a platform admin to add you to forceReapply in the webhook's policy, or use Argo CD's allow-data-loss action"
        ));
    }
    match not_pausing {
        Some(NotPausing::NewObject) => reasons.push(
            "a new PipelineRollout cannot be pausing: create it without the annotation and set it only while a pause is stuck"
                .to_owned(),
        ),
        Some(NotPausing::Idle) => reasons.push(
            "the pipeline is not pausing (status.upgradeInProgress is not PipelinePauseAndDrain and no PipelinePausingOrPaused condition has reason PipelinePausing): set it only while a pause is stuck"
                .to_owned(),
        ),
        None => {}
    }
    if let Some(problem) = too_young {
        reasons.push(problem.to_string());
    }
    reasons.join("; and ")
}

const SHORT_TIMEOUT: &str = "pauseGracePeriodSeconds";

impl Violation {
    /// The rule this violation breaks (docs/rules.md).
    pub fn rule(&self) -> Rule {
        match self {
            Self::TimeoutUnreachable { .. } | Self::TimeoutNotInteger { .. } => {
                Rule::TimeoutInteger
            }
            Self::TimeoutTooShort { .. }
            | Self::TimeoutTooLong { .. }
            | Self::NoTimeoutNotAllowed { .. } => Rule::TimeoutRange,
            Self::TimeoutOverflows { .. } | Self::ScaleFactorInvalid { .. } => {
                Rule::TimeoutOverflow
            }
            Self::MetadataMalformed { .. } | Self::AnnotationInvalid { .. } => {
                Rule::AllowDataLossValue
            }
            Self::ForceReapplyDenied { .. } => Rule::ForceReapply,
            Self::ForcePromoteDenied { .. } => Rule::ForcePromote,
            Self::ForcePromoteLabelValue { .. } | Self::ForcePromoteLabelDenied { .. } => {
                Rule::ForcePromoteLabel
            }
            Self::DeleteUndrainedDenied { .. } => Rule::DeleteUndrained,
            Self::BookkeepingChanged { .. } | Self::TemplateMalformed { .. } => Rule::Bookkeeping,
            Self::ForcePromoteRecordWritten { .. } => Rule::ForcePromoteRecord,
            Self::Unjudgeable(_) => Rule::Judgeable,
        }
    }

    /// A one-line summary for warnings (kubectl shows them; kept short).
    pub fn summary(&self) -> String {
        match self {
            Self::TimeoutUnreachable { path, found } => {
                format!("{path} is {found}, not an object: no drain timeout can be set")
            }
            Self::TimeoutNotInteger { value } => {
                format!("{SHORT_TIMEOUT} {value} is not an integer number of seconds")
            }
            Self::TimeoutTooShort { value, min, .. } => {
                format!("{SHORT_TIMEOUT} {value} is below the minimum {min}")
            }
            Self::TimeoutTooLong { value, max, .. } => {
                format!("{SHORT_TIMEOUT} {value} is above the maximum {max}")
            }
            Self::NoTimeoutNotAllowed { value, .. } => {
                format!("{SHORT_TIMEOUT} {value} means no timeout, which is not allowed here")
            }
            Self::TimeoutOverflows {
                value, multiplier, ..
            } => format!(
                "{SHORT_TIMEOUT} {value} x{multiplier} (recycle) overflows Numaflow's clock"
            ),
            Self::ScaleFactorInvalid { value, .. } => {
                format!("scaleFactor {value} is not an integer from 1 to 100")
            }
            Self::MetadataMalformed { path, found } => format!("{path} is {found}, not an object"),
            Self::AnnotationInvalid { value } => {
                format!(
                    "allow-data-loss {value} is ignored by Numaplane: use \"true\" or \"false\""
                )
            }
            Self::ForceReapplyDenied { user, .. } => {
                format!("{} may not set allow-data-loss to \"true\"", short(user))
            }
            Self::ForcePromoteDenied { user, .. } => {
                format!("{} may not turn on forcePromote", short(user))
            }
            Self::ForcePromoteLabelValue { value, .. } => {
                format!("force-promote label {value}: any value force-promotes")
            }
            Self::ForcePromoteLabelDenied { user, .. } => {
                format!("{} may not set the force-promote label", short(user))
            }
            Self::DeleteUndrainedDenied { user, .. } => {
                format!(
                    "{} may not mark a Pipeline for undrained deletion",
                    short(user)
                )
            }
            Self::BookkeepingChanged { key, .. } => {
                format!("{} is Numaplane's bookkeeping", cut(key, 60))
            }
            Self::TemplateMalformed { path, found } => {
                format!("{} is {found}, not an object", cut(path, 60))
            }
            Self::ForcePromoteRecordWritten { .. } => {
                "force-promote-for is the webhook's own record: leave it out".to_owned()
            }
            Self::Unjudgeable(message) => format!("cannot be judged: {}", cut(message, 80)),
        }
    }

    /// The field this violation is about, dotted as users write it (`None`
    /// when the request could not be judged). Rules added later without an
    /// arm here are mapped by their rule number.
    pub fn field(&self) -> Option<String> {
        match self {
            Self::TimeoutUnreachable { path, .. } | Self::MetadataMalformed { path, .. } => {
                Some((*path).to_owned())
            }
            Self::ScaleFactorInvalid { .. } => Some(SCALE_FACTOR_FIELD.to_owned()),
            Self::TemplateMalformed { path, .. } => Some(path.clone()),
            Self::ForcePromoteLabelValue { path, .. }
            | Self::ForcePromoteLabelDenied { path, .. } => {
                Some(format!("{path}[\"{FORCE_PROMOTE_LABEL}\"]"))
            }
            Self::DeleteUndrainedDenied { path, .. } => {
                Some(format!("{path}[\"{MARKED_FOR_DELETION}\"]"))
            }
            Self::BookkeepingChanged { path, key, .. } => Some(format!("{path}[\"{key}\"]")),
            other => match other.rule() {
                Rule::TimeoutInteger | Rule::TimeoutRange | Rule::TimeoutOverflow => {
                    Some(TIMEOUT_FIELD.to_owned())
                }
                Rule::AllowDataLossValue | Rule::ForceReapply => {
                    Some(format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"]"))
                }
                Rule::ForcePromote => Some(FORCE_PROMOTE_FIELD.to_owned()),
                Rule::ForcePromoteRecord => {
                    Some(format!("metadata.annotations[\"{FORCE_PROMOTE_FOR}\"]"))
                }
                _ => None,
            },
        }
    }
}

/// Shows a JSON value compactly, cut short when long.
pub(super) fn show(value: &Value) -> String {
    cut(&value.to_string(), 32)
}

/// Shows a user name, cut short when long.
fn short(text: &str) -> String {
    cut(text, 48)
}

/// Cuts a text to `limit` characters, marking the cut with `…`.
pub(super) fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(limit - 1).collect();
        format!("{kept}…")
    }
}
