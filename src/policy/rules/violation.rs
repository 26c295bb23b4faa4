//! One broken rule, with the message a denial shows: the [`Violation`]
//! enum (each variant's `Display` is its denial) and the rule each breaks.
//! The reasons a denial is composed of are in [`reasons`]; the one-line
//! summaries warnings show, and the field each violation is about, in
//! [`summary`].

mod reasons;
mod summary;

use super::rule::Rule;
use super::timeout_field::TimeoutField;
use crate::kinds::{
    ControllerKind, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION, Made, PAUSE_TIMESTAMP,
};
use crate::lenient::JsonKind;
use crate::policy::duration::format_seconds;
use crate::policy::model::MAX_CLOCK_SECONDS;
use crate::policy::user::NotPermitted;
use crate::rollout::{
    ALLOW_DATA_LOSS, ANNOTATIONS, FORCE_PROMOTE_FIELD, FORCE_PROMOTE_FOR, FieldPath, LifecycleKey,
    SCALE_FACTOR_FIELD, TIMEOUT_FIELD,
};
pub use reasons::{NotActable, NotPausing, PauseAgeProblem, RecordProblem};

/// A child Pipeline's pause timeout, as messages name it.
const CHILD_PAUSE: FieldPath = LifecycleKey::Pause.child_field();
/// A child Pipeline's deletion timeout, as messages name it.
const CHILD_DELETION: FieldPath = LifecycleKey::Deletion.child_field();
use reasons::{crd_of, force_reapply_reasons, gate_reasons};
pub(super) use summary::{cut, show};

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
        "{ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] is {value}, which Numaplane ignores (it acts only on exactly \"true\"): set \"true\" to force a re-apply, or \"false\", or remove it"
    )]
    AnnotationInvalid {
        /// The value as JSON.
        value: String,
    },
    /// Rule 6: setting allow-data-loss to "true" is not allowed here.
    #[error(
        "user \"{user}\" may not set {ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] to \"true\" (a forced re-apply skips draining and can lose data): {}",
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
    /// Rule 24 on a fall-back: a write that makes Numaplane use its
    /// cluster default, which skips draining, needs permission.
    #[error(
        "user \"{user}\" may not change the namespace-level ConfigMap of namespace \"{namespace}\" by {how}: Numaplane would then use {default} there, so every rollout would upgrade by plain apply, with no pause and no drain, and data in flight may be lost; {refused}; keep data.upgradeStrategy \"pause-and-drain\" or \"progressive\" in a namespace-level ConfigMap, or ask a platform admin to add you to forceReapply.namespaceStrategy in the webhook's policy"
    )]
    NamespaceFallbackDenied {
        /// The requester.
        user: String,
        /// The namespace.
        namespace: String,
        /// How the write makes Numaplane fall back.
        how: &'static str,
        /// The cluster default, described.
        default: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// Rule 27: Numaflow controller definitions outside Numaplane's
    /// namespace need permission.
    #[error(
        "user \"{user}\" may not write Numaflow controller definitions (a ConfigMap labelled numaplane.numaproj.io/config: numaflow-controller-definitions) in namespace \"{namespace}\": Numaplane prefers them to its own and applies a definition's fullSpec with its own account, which can grant any permission; {refused}; keep the definitions in \"{numaplane_namespace}\" (Numaplane's namespace), or ask a platform admin to add you to forceReapply.controllerDefinitions in the webhook's policy"
    )]
    ControllerDefinitionsDenied {
        /// The requester.
        user: String,
        /// The ConfigMap's namespace.
        namespace: String,
        /// Numaplane's own namespace (`numaplane.namespace`).
        numaplane_namespace: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// Rule 27: a Numaflow controller version Numaplane would install from
    /// a user namespace's definitions needs permission.
    #[error(
        "user \"{user}\" may not name Numaflow controller version \"{version}\" in this {}: Numaplane would install it from {from}, applying its fullSpec with its own account, which can grant any permission; {refused}; name a version defined in \"{numaplane_namespace}\" (Numaplane's namespace), or ask a platform admin to add you to forceReapply.controllerDefinitions in the webhook's policy",
        kind.kind()
    )]
    ControllerVersionDenied {
        /// The requester.
        user: String,
        /// The kind written.
        kind: ControllerKind,
        /// The version named, cut short.
        version: String,
        /// Where Numaplane would take it from, in words.
        from: String,
        /// Numaplane's own namespace (`numaplane.namespace`).
        numaplane_namespace: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// The request cannot be judged (no object, no resource, ...): the
    /// Rule 25: the one-shot record is the webhook's own.
    #[error(
        "{ANNOTATIONS}[\"{FORCE_PROMOTE_FOR}\"] is {value}, {why}: it is the webhook's own record of the upgrade a forcePromote was set for, written only by its mutating webhook, so that forcePromote.oneShot resets it when that upgrade is over; leave the annotation out of your change (the webhook keeps it)"
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
        "user \"{user}\" may not {change} {path}[\"{PAUSE_TIMESTAMP}\"] (to {value}): Numaflow ends a pause at this time plus {CHILD_PAUSE}, drained or not, so an earlier time ends the drain with data undrained; {}",
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
        "user \"{user}\" may not delete this {kind} of {rollout} \"{parent}\": it is drained for at most its deletion timeout ({CHILD_DELETION}), then what was not consumed is dropped, and Numaplane makes it again; {refused}; ask a platform admin to add you to forceReapply.deleteUndrained in the webhook's policy, or change or delete the {rollout} instead and let Numaplane drain it"
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
    /// Rule 29: changing what Numaflow's controller makes for a rollout's
    /// child needs the editChildren permission.
    #[error(
        "user \"{user}\" may not {} this {} of {child} of {parent}: Numaflow's controller makes and keeps it, and Numaplane and Numaflow read it back to decide whether a pause or a deletion has drained and whether an upgrade is healthy; {refused}; change the rollout instead, or ask a platform admin to add you to forceReapply.editChildren in the webhook's policy (scaling and your own labels and annotations need no permission)",
        if fields.is_empty() { "make".to_owned() } else { format!("change {fields} of") },
        kind.kind()
    )]
    MadeEditDenied {
        /// The requester.
        user: String,
        /// The kind written.
        kind: Made,
        /// The child it belongs to, as shown (`Pipeline "name"`).
        child: String,
        /// The rollout that owns the child, as shown.
        parent: String,
        /// What the write changes, as listed; empty for a CREATE.
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
            Self::MadeEditDenied { .. } => Rule::NumaflowMade,
            Self::RolloutDeleteDenied { .. } => Rule::DeleteRollout,
            Self::StrategyDataMalformed { .. }
            | Self::StrategyInvalid { .. }
            | Self::StrategyKeysClash { .. } => Rule::NamespaceStrategyValue,
            Self::NamespaceStrategyDenied { .. } | Self::NamespaceFallbackDenied { .. } => {
                Rule::NamespaceStrategy
            }
            Self::ControllerDefinitionsDenied { .. } | Self::ControllerVersionDenied { .. } => {
                Rule::ControllerDefinitions
            }
            Self::ForcePromoteRecordWritten { .. } => Rule::ForcePromoteRecord,
            Self::Unjudgeable(_) => Rule::Judgeable,
        }
    }
}
