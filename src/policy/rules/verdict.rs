//! [`Verdict`] and what it carries: findings, gate decisions, Events.

use std::collections::BTreeMap;
use std::fmt;

use json_patch::PatchOperation;

use super::rule::Rule;
use super::violation::Violation;
use crate::policy::model::Mode;

/// A broken rule, and whether its inputs are unchanged from the stored
/// object (rule 8: then it warns instead of denying).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) violation: Violation,
    /// Whether the stored object breaks it the same way.
    pub(crate) unchanged: bool,
}

/// A force or a setting found on a stored object, judged by the state it
/// leaves, since who wrote it cannot be known ([`super::Origin::Stored`]):
/// the audit's result for the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredState {
    /// The rule the state is filed under.
    pub(crate) rule: Rule,
    /// Whether it fails whatever the policy's mode (else it warns).
    pub(crate) fails: bool,
    /// What it does, and how to undo it.
    pub(crate) message: String,
}

impl StoredState {
    pub(crate) fn warn(rule: Rule, message: String) -> Self {
        Self {
            rule,
            fails: false,
            message,
        }
    }
}

/// What the webhook decided, before it is put on the wire.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// The violations that deny the request; empty means allowed.
    pub denials: Vec<Violation>,
    /// Warnings for the requester.
    pub warnings: Vec<String>,
    /// The JSON Patch operations to apply, in order (only from `/mutate`);
    /// empty: no patch.
    pub(crate) patch: Vec<PatchOperation>,
    /// Audit annotations (keys without the webhook's prefix).
    pub(crate) audit: BTreeMap<String, String>,
    /// The drain timeout `/mutate` wrote, if it wrote one.
    pub defaulted: Option<u64>,
    /// The gate decisions taken (rules 6, 7, 13, 14, 20, 21, 24, 26), for the metrics.
    pub(crate) gates: Vec<(Gate, GateResult)>,
    /// Kubernetes Events the verdict asks for (sent at the edge, never on
    /// the request path, and not for dry runs).
    pub(crate) events: Vec<ForceEvent>,
    /// Whether `/mutate` reset a stale force (the one-shot rule).
    pub(crate) reset_force: bool,
    /// What a stored object holds, judged by state (the audit's only).
    pub(crate) stored: Vec<StoredState>,
}

/// Declares [`EventReason`] with [`EventReason::ALL`] and
/// [`EventReason::as_str`] (a reason as Kubernetes shows it: its name), so
/// that no reason is left out of either.
macro_rules! event_reasons {
    ($($(#[doc = $doc:literal])* $reason:ident,)*) => {
        /// The reasons of the Events the webhook records on the objects it judges.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum EventReason {
            $($(#[doc = $doc])* $reason,)*
        }

        impl EventReason {
            /// Every reason (the metrics export each at zero from the start).
            pub(crate) const ALL: [EventReason; 13] = [$(EventReason::$reason),*];

            /// The reason as Kubernetes shows it.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(Self::$reason => stringify!($reason),)*
                }
            }
        }
    };
}

event_reasons! {
    /// The validating webhook allowed `allow-data-loss` to become "true".
    ForceReapplyAllowed,
    /// The validating webhook allowed `forcePromote` to be turned on.
    ForcePromoteAllowed,
    /// An UPDATE whose force was refused.
    ForceReapplyDenied,
    /// The annotation was reset to "false" once the force was over.
    ForceReapplyReset,
    /// forcePromote was reset to false once its upgrade was over.
    ForcePromoteReset,
    /// The validating webhook allowed `marked-for-deletion: "true"` (a
    /// recyclable Pipeline deleted without draining).
    DeleteUndrainedAllowed,
    /// An UPDATE whose `marked-for-deletion: "true"` was refused.
    DeleteUndrainedDenied,
    /// The validating webhook allowed a namespace-level ConfigMap's
    /// `upgradeStrategy` to become one that skips draining (rule 24).
    NamespaceStrategyAllowed,
    /// An UPDATE of a namespace-level ConfigMap whose strategy that skips
    /// draining was refused (rule 24).
    NamespaceStrategyDenied,
    /// The validating webhook allowed a change of what Numaplane's and
    /// Numaflow's controllers keep on a rollout's child (rule 26).
    ChildEditAllowed,
    /// An UPDATE of a rollout's child refused by rule 26.
    ChildEditDenied,
    /// The validating webhook allowed Numaflow controller definitions
    /// outside Numaplane's namespace (rule 27).
    ControllerDefinitionsAllowed,
    /// An UPDATE of a definitions ConfigMap refused by rule 27.
    ControllerDefinitionsDenied,
}

impl EventReason {
    /// Whether the Event is a Warning (else Normal).
    pub(crate) fn is_warning(self) -> bool {
        !matches!(self, Self::ForceReapplyReset | Self::ForcePromoteReset)
    }

    /// The Event's action: the reason's verb.
    pub(crate) fn action(self) -> &'static str {
        match self {
            Self::ForceReapplyAllowed
            | Self::ForcePromoteAllowed
            | Self::DeleteUndrainedAllowed
            | Self::NamespaceStrategyAllowed
            | Self::ChildEditAllowed
            | Self::ControllerDefinitionsAllowed => "Allowed",
            Self::ForceReapplyDenied
            | Self::DeleteUndrainedDenied
            | Self::NamespaceStrategyDenied
            | Self::ChildEditDenied
            | Self::ControllerDefinitionsDenied => "Denied",
            Self::ForceReapplyReset | Self::ForcePromoteReset => "Reset",
        }
    }
}

/// One Event to record on the object a request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForceEvent {
    pub(crate) reason: EventReason,
    /// The human-readable note (at most 1 kB, as Kubernetes allows).
    pub(crate) note: String,
}

/// The permission gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Rule 6: allow-data-loss set to "true".
    ForceReapply,
    /// Rules 7 and 13: forcePromote turned on, or the force-promote label set.
    ForcePromote,
    /// Rule 14: marked-for-deletion set to "true".
    DeleteUndrained,
    /// Rule 20: a rollout's child deleted.
    DeleteChild,
    /// Rule 21: a PipelineRollout deleted (with gateRolloutDeletes).
    DeleteRollout,
    /// Rule 24: a namespace's upgrade strategy set to skip draining.
    NamespaceStrategy,
    /// Rule 26: what the controllers keep on a rollout's child changed.
    EditChild,
    /// Rule 27: Numaflow controller definitions outside Numaplane's namespace.
    ControllerDefinitions,
}

impl Gate {
    /// The name used in audit annotations and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ForceReapply => "force-reapply",
            Self::ForcePromote => "force-promote",
            Self::DeleteUndrained => "delete-undrained",
            Self::DeleteChild => "delete-child",
            Self::DeleteRollout => "delete-rollout",
            Self::NamespaceStrategy => "namespace-strategy",
            Self::EditChild => "edit-child",
            Self::ControllerDefinitions => "controller-definitions",
        }
    }
}

/// What a gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateResult {
    Allowed,
    Denied,
    /// Would have been denied; warn mode let it through.
    WouldDeny,
}

impl GateResult {
    /// The name used in metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::WouldDeny => "would_deny",
        }
    }
}

impl Verdict {
    /// Rule 8: a finding whose inputs are unchanged warns; the others deny.
    pub(super) fn ratchet(&mut self, findings: Vec<Finding>) {
        for finding in findings {
            if finding.unchanged {
                self.warnings.push(format!(
                    "unchanged, so allowed: {}",
                    finding.violation.summary()
                ));
            } else {
                self.denials.push(finding.violation);
            }
        }
    }

    /// Rule 10: in warn mode every denial becomes a warning, so that
    /// nothing is denied.
    pub(super) fn apply_mode(&mut self, mode: Mode) {
        if mode == Mode::Warn {
            for violation in std::mem::take(&mut self.denials) {
                self.warnings
                    .push(format!("warn mode, would deny: {}", violation.summary()));
            }
        }
    }

    /// Whether the request is allowed.
    pub fn allowed(&self) -> bool {
        self.denials.is_empty()
    }

    /// The denial text for `status.message`: every violation, numbered when
    /// there are several.
    pub(crate) fn denial_message(&self) -> Option<String> {
        self.denial().map(|message| message.to_string())
    }

    /// The denial text, written where it is displayed (the answer's
    /// serialiser escapes it straight into the body): `None` when allowed.
    pub(crate) fn denial(&self) -> Option<DenialMessage<'_>> {
        (!self.denials.is_empty()).then_some(DenialMessage(&self.denials))
    }
}

/// The denial text of a verdict's violations: the one, or each numbered
/// and separated by `; `. Built by [`Verdict::denial`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DenialMessage<'a>(&'a [Violation]);

impl fmt::Display for DenialMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(f, "{one}"),
            many => {
                for (i, violation) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "({}) {violation}", i + 1)?;
                }
                Ok(())
            }
        }
    }
}
