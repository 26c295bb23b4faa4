//! One broken rule, with the message a denial shows and the short summary
//! a warning shows.

use std::fmt;

use serde_json::Value;

use super::rule::Rule;
use super::timeout_field::TimeoutField;
use crate::kinds::{
    FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION, PAUSE_TIMESTAMP, UPGRADE_STATE,
    UPGRADE_STRATEGY_KEY,
};
use crate::lenient::JsonKind;
use crate::policy::duration::format_seconds;
use crate::policy::model::MAX_CLOCK_SECONDS;
use crate::policy::user::NotPermitted;
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
        "{path} is {found}, not an object, so {field} cannot be read or set: make {path} an object as the {} CRD describes",
        crd_of(*field)
    )]
    TimeoutUnreachable {
        /// The timeout that cannot be reached.
        field: TimeoutField,
        /// The dotted path of the bad value.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rules 2 and 16: the timeout is not a JSON integer.
    #[error(
        "{field} is {value}, which is not an integer number of seconds: write an integer, e.g. 3600 for 1h"
    )]
    TimeoutNotInteger {
        /// The timeout.
        field: TimeoutField,
        /// The value as JSON.
        value: String,
    },
    /// Rules 3 and 17: below 1 or below the minimum.
    #[error(
        "{field} is {value}, below the minimum of {min} ({}) set by {scope}{}: {fix}",
        format_seconds(*min),
        if *value < 1 { field.zero_effect() } else { "" }
    )]
    TimeoutTooShort {
        /// The timeout.
        field: TimeoutField,
        /// The value.
        value: i128,
        /// The minimum in force.
        min: u64,
        /// Which scope.
        scope: String,
        /// The allowed values.
        fix: String,
    },
    /// Rules 3 and 17: above the maximum but not "no timeout".
    #[error("{field} is {value}, above the maximum of {max} ({max_text}) set by {scope}: {fix}")]
    TimeoutTooLong {
        /// The timeout.
        field: TimeoutField,
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
    /// Rules 3 and 17: "no timeout" where it is not allowed.
    #[error(
        "{field} is {value}, which means no timeout (at or above {no_timeout}), and {scope} does not allow no timeout: {fix}"
    )]
    NoTimeoutNotAllowed {
        /// The timeout.
        field: TimeoutField,
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
    /// Rules 4 and 18: the timeout, as Numaflow reads it (no multiplier),
    /// overflows its clock.
    #[error(
        "{field} is {value}; Numaflow counts it in Go's time.Duration, which overflows above {MAX_CLOCK_SECONDS} seconds: set at most {MAX_CLOCK_SECONDS}, or the {} policy's no-timeout value if it allows one",
        field.section()
    )]
    ClockOverflow {
        /// The timeout.
        field: TimeoutField,
        /// The value.
        value: i128,
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
    /// Rule 23: the namespace-level ConfigMap's `data` is not an object.
    #[error(
        "data is {found}, not an object, so Numaplane cannot read this namespace-level ConfigMap: make data a map of strings with upgradeStrategy one of {STRATEGIES_SHOWN}"
    )]
    StrategyDataMalformed {
        /// What `data` is.
        found: JsonKind,
    },
    /// Rule 23: `data.upgradeStrategy` is not one Numaplane accepts.
    #[error(
        "{field} is {value}{not_string}, which Numaplane does not accept: it ignores the ConfigMap and only logs an error its operators see; write one of {STRATEGIES_SHOWN} (an empty value means \"no-strategy\")"
    )]
    StrategyInvalid {
        /// The field as written (`data.upgradeStrategy`, or the key
        /// Numaplane reads as it).
        field: String,
        /// The value as written (quoted, or JSON when not a string).
        value: String,
        /// ", not a string" when it is not one; else empty.
        not_string: &'static str,
    },
    /// Rule 23: `data` has several keys Numaplane reads as
    /// `upgradeStrategy` (Go's `encoding/json` matches keys in any case).
    #[error(
        "data has both \"{kept}\" and \"{also}\", which Numaplane reads as the same field upgradeStrategy (Go matches keys in any case, and keeps the value of the key that sorts last, \"{kept}\"): keep one key, spelled upgradeStrategy, with one of {STRATEGIES_SHOWN}"
    )]
    StrategyKeysClash {
        /// The key whose value Numaplane keeps.
        kept: String,
        /// Another key it reads as the same field.
        also: String,
    },
    /// Rule 24: a strategy that skips draining needs permission.
    #[error(
        "user \"{user}\" may not set {field} to {shown} in namespace \"{namespace}\": every rollout there would then upgrade by plain apply, with no pause and no drain, so data in flight may be lost; {refused}; ask a platform admin to add you to forceReapply.namespaceStrategy in the webhook's policy, or write \"pause-and-drain\" or \"progressive\""
    )]
    NamespaceStrategyDenied {
        /// The requester.
        user: String,
        /// The namespace.
        namespace: String,
        /// The field as written (`data.upgradeStrategy`, or the key
        /// Numaplane reads as it).
        field: String,
        /// The value as written (`"no-strategy"`, or empty or blank).
        shown: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
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
    /// Rule 19: pause-timestamp is Numaflow's controller's (and nobody's in
    /// a rollout's child template).
    #[error(
        "user \"{user}\" may not {change} {path}[\"{PAUSE_TIMESTAMP}\"] (to {value}): Numaflow ends a pause at this time plus spec.lifecycle.pauseGracePeriodSeconds, drained or not, so an earlier time ends the drain with data undrained; {}",
        if *template { "Numaplane would copy it onto every Pipeline it makes: remove it from the template".to_owned() } else { format!("only Numaflow's controller (\"{controller}\", numaflow.controllerAccount in the webhook's policy) writes it: leave it as Numaflow wrote it, and to end a stuck pause use a forced re-apply (allow-data-loss) on the PipelineRollout") }
    )]
    PauseTimestampChanged {
        /// The requester.
        user: String,
        /// "set" or "change".
        change: &'static str,
        /// The dotted path of the map.
        path: String,
        /// The value as JSON.
        value: String,
        /// Whether the map is a rollout's child template.
        template: bool,
        /// Numaflow's controller's username.
        controller: String,
    },
    /// Rule 20: deleting a rollout's child needs the deleteUndrained permission.
    #[error(
        "user \"{user}\" may not delete this {kind} of {rollout} \"{parent}\": it is drained for at most its deletion timeout (spec.lifecycle.deletionGracePeriodSeconds), then what was not consumed is dropped, and Numaplane makes it again; {refused}; ask a platform admin to add you to forceReapply.deleteUndrained in the webhook's policy, or change or delete the {rollout} instead and let Numaplane drain it"
    )]
    ChildDeleteDenied {
        /// The requester.
        user: String,
        /// The child's kind.
        kind: &'static str,
        /// The rollout kind that owns it.
        rollout: &'static str,
        /// The owning rollout's name.
        parent: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// Rule 26: changing what Numaplane's and Numaflow's controllers keep
    /// on a rollout's child needs the editChildren permission.
    #[error(
        "user \"{user}\" may not {} this {} of {} \"{parent}\": only Numaplane's and Numaflow's controllers change a rollout's children (Numaplane reads their status to decide whether to drain, and applies a change that can lose data only by pausing and draining); {refused}; change the {} instead, or ask a platform admin to add you to forceReapply.editChildren in the webhook's policy (scaling, pausing, resuming and your own labels and annotations need no permission)",
        if fields.is_empty() { "make".to_owned() } else { format!("change {fields} of") },
        kind.kind(),
        kind.rollout().kind(),
        kind.rollout().kind()
    )]
    ChildEditDenied {
        /// The requester.
        user: String,
        /// The child's kind.
        kind: Kind,
        /// The owning rollout's name.
        parent: String,
        /// What the write changes, as listed (the first is the
        /// violation's field); empty for a CREATE.
        fields: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// Rule 21: with gateRolloutDeletes, deleting a PipelineRollout needs
    /// the deleteUndrained permission.
    #[error(
        "user \"{user}\" may not delete this PipelineRollout: Numaplane then deletes its Pipelines, each drained {timeout} before what was not consumed is dropped, and the webhook's policy (forceReapply.deleteUndrained.gateRolloutDeletes) requires the forceReapply.deleteUndrained permission for it; {refused}; ask a platform admin to add you to forceReapply.deleteUndrained"
    )]
    RolloutDeleteDenied {
        /// The requester.
        user: String,
        /// The Pipeline's deletion timeout, in words.
        timeout: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
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

/// The CRD that describes the object holding `field`.
fn crd_of(field: TimeoutField) -> &'static str {
    if field.path.starts_with("spec.pipeline.") {
        "PipelineRollout"
    } else {
        "Pipeline"
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

/// The three strategies Numaplane accepts, as denials list them.
const STRATEGIES_SHOWN: &str = "\"progressive\", \"pause-and-drain\" or \"no-strategy\"";

impl Violation {
    /// The rule this violation breaks (docs/rules.md).
    pub fn rule(&self) -> Rule {
        match self {
            Self::TimeoutUnreachable { field, .. } | Self::TimeoutNotInteger { field, .. } => {
                field.rules()[0]
            }
            Self::TimeoutTooShort { field, .. }
            | Self::TimeoutTooLong { field, .. }
            | Self::NoTimeoutNotAllowed { field, .. } => field.rules()[1],
            Self::ClockOverflow { field, .. } => field.rules()[2],
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
            Self::PauseTimestampChanged { .. } => Rule::PauseTimestamp,
            Self::ChildDeleteDenied { .. } => Rule::DeleteChild,
            Self::ChildEditDenied { .. } => Rule::EditChild,
            Self::RolloutDeleteDenied { .. } => Rule::DeleteRollout,
            Self::StrategyDataMalformed { .. }
            | Self::StrategyInvalid { .. }
            | Self::StrategyKeysClash { .. } => Rule::NamespaceStrategyValue,
            Self::NamespaceStrategyDenied { .. } => Rule::NamespaceStrategy,
            Self::ForcePromoteRecordWritten { .. } => Rule::ForcePromoteRecord,
            Self::Unjudgeable(_) => Rule::Judgeable,
        }
    }

    /// A one-line summary for warnings (kubectl shows them; kept short).
    pub fn summary(&self) -> String {
        match self {
            Self::TimeoutUnreachable { path, found, field } => {
                format!(
                    "{path} is {found}, not an object: no {} can be set",
                    field.name()
                )
            }
            Self::TimeoutNotInteger { value, field } => {
                format!(
                    "{} {value} is not an integer number of seconds",
                    field.name()
                )
            }
            Self::TimeoutTooShort {
                value, min, field, ..
            } => {
                format!("{} {value} is below the minimum {min}", field.name())
            }
            Self::TimeoutTooLong {
                value, max, field, ..
            } => {
                format!("{} {value} is above the maximum {max}", field.name())
            }
            Self::NoTimeoutNotAllowed { value, field, .. } => {
                format!(
                    "{} {value} means no timeout, which is not allowed here",
                    field.name()
                )
            }
            Self::ClockOverflow { value, field } => {
                format!("{} {value} overflows Numaflow's clock", field.name())
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
            Self::PauseTimestampChanged { user, .. } => {
                format!("{} may not write Numaflow's pause-timestamp", short(user))
            }
            Self::ChildDeleteDenied { user, kind, .. } => {
                format!("{} may not delete a rollout's {kind}", short(user))
            }
            Self::RolloutDeleteDenied { user, .. } => {
                format!("{} may not delete a PipelineRollout", short(user))
            }
            Self::ChildEditDenied { user, kind, .. } => format!(
                "{} may not change {} of a rollout's {}",
                short(user),
                cut(&self.field().unwrap_or_default(), 40),
                kind.kind()
            ),
            Self::StrategyDataMalformed { found } => format!("data is {found}, not an object"),
            Self::StrategyInvalid { value, .. } => {
                format!("upgradeStrategy {value} is ignored by Numaplane")
            }
            Self::StrategyKeysClash { kept, also } => {
                format!(
                    "data keys \"{}\" and \"{}\" are both upgradeStrategy to Numaplane",
                    cut(kept, 30),
                    cut(also, 30)
                )
            }
            Self::NamespaceStrategyDenied { user, .. } => {
                format!(
                    "{} may not make the namespace upgrade without draining",
                    short(user)
                )
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
            Self::TimeoutNotInteger { field, .. }
            | Self::TimeoutTooShort { field, .. }
            | Self::TimeoutTooLong { field, .. }
            | Self::NoTimeoutNotAllowed { field, .. }
            | Self::ClockOverflow { field, .. } => Some(field.path.to_owned()),
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
            Self::PauseTimestampChanged { path, .. } => {
                Some(format!("{path}[\"{PAUSE_TIMESTAMP}\"]"))
            }
            Self::StrategyDataMalformed { .. } | Self::StrategyKeysClash { .. } => {
                Some("data".to_owned())
            }
            Self::ChildEditDenied { fields, .. } => Some(
                fields
                    .split(", ")
                    .next()
                    .filter(|f| !f.is_empty())
                    .unwrap_or("metadata.ownerReferences")
                    .to_owned(),
            ),
            Self::StrategyInvalid { .. } | Self::NamespaceStrategyDenied { .. } => {
                Some(format!("data.{UPGRADE_STRATEGY_KEY}"))
            }
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
