//! One broken rule: the [`Violation`] enum, what each variant holds, and
//! the rule each breaks. Each variant's words (its `Display`, the message
//! a denial shows, and its one-line summary) and the field it is about are
//! in [`words`]; the reasons a denial is composed of in [`reasons`].

mod reasons;
mod words;

use super::rule::Rule;
use super::timeout_field::TimeoutField;
use crate::kinds::{ControllerKind, Kind, Made};
use crate::lenient::JsonKind;
pub(super) use crate::logtext::cut;
use crate::policy::user::NotPermitted;
pub use reasons::{NotActable, NotPausing, PauseAgeProblem, RecordProblem};
pub(super) use words::show;

/// One broken rule. Its `Display` text is the full message a denial shows:
/// what is wrong, where, the value, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// An object on the way to the timeout is not an object.
    TimeoutUnreachable {
        /// The timeout that cannot be reached.
        field: TimeoutField,
        /// The dotted path of the bad value.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rules 2 and 16: the timeout is not a JSON integer.
    TimeoutNotInteger {
        /// The timeout.
        field: TimeoutField,
        /// The value as JSON.
        value: String,
    },
    /// Rules 3 and 17: below 1 or below the minimum.
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
    /// Rules 4 and 18: the timeout (no multiplier) overflows Numaflow's clock.
    ClockOverflow {
        /// The timeout.
        field: TimeoutField,
        /// The value.
        value: i128,
    },
    /// Rule 4: the scale factor is not an integer percent from 1 to 100.
    ScaleFactorInvalid {
        /// The value as JSON.
        value: String,
        /// defaultRecycleScaleFactor.
        default: u64,
    },
    /// `metadata` or `metadata.annotations` is not an object.
    MetadataMalformed {
        /// The dotted path.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 5: the annotation is neither "true" nor "false".
    AnnotationInvalid {
        /// The value as JSON.
        value: String,
    },
    /// Rule 6: setting allow-data-loss to "true" is not allowed here.
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
    StrategyDataMalformed {
        /// What `data` is.
        found: JsonKind,
    },
    /// Rule 23: `data.upgradeStrategy` is not one Numaplane accepts.
    StrategyInvalid {
        /// `data.upgradeStrategy`, or the key Numaplane reads as it.
        field: String,
        /// The value as written (quoted, or JSON when not a string).
        value: String,
        /// ", not a string" when it is not one; else empty.
        not_string: &'static str,
    },
    /// Rule 23: `data` has several keys Numaplane reads as
    /// `upgradeStrategy` (Go's `encoding/json` matches keys in any case).
    StrategyKeysClash {
        /// The key whose value Numaplane keeps.
        kept: String,
        /// Another key it reads as the same field.
        also: String,
    },
    /// Rule 24: a strategy that skips draining needs permission.
    NamespaceStrategyDenied {
        /// The requester.
        user: String,
        /// The namespace.
        namespace: String,
        /// `data.upgradeStrategy`, or the key Numaplane reads as it.
        field: String,
        /// The value as written (`"no-strategy"`, or empty or blank).
        shown: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// Rule 24 on a fall-back: a write that makes Numaplane use its
    /// cluster default, which skips draining, needs permission.
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
    /// Rule 25: the one-shot record is the webhook's own.
    ForcePromoteRecordWritten {
        /// The value written, quoted and cut short.
        value: String,
        /// Why it is not the webhook's record.
        why: RecordProblem,
    },
    /// The request cannot be judged (no object, no resource, ...): the
    /// validating webhook denies it, saying what is missing.
    Unjudgeable(String),
    /// Rule 13: the force-promote label with a value other than "true".
    ForcePromoteLabelValue {
        /// The dotted path of the map.
        path: String,
        /// The value as JSON.
        value: String,
    },
    /// Rule 13: the force-promote label needs permission and, on a child,
    /// an upgrading child.
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
    TemplateMalformed {
        /// The dotted path.
        path: String,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 19: pause-timestamp is Numaflow's controller's (and nobody's in
    /// a rollout's child template).
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
    RolloutDeleteDenied {
        /// The requester.
        user: String,
        /// The Pipeline's deletion timeout, in words.
        timeout: String,
        /// Why the requester lacks permission.
        refused: NotPermitted,
    },
    /// Rule 7: turning on forcePromote needs permission.
    ForcePromoteDenied {
        /// The requester.
        user: String,
        /// Why the requester lacks permission.
        refused: String,
    },
}

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
