//! Every rule the webhook has, as one value: its number (docs/rules.md
//! numbers them, and denials, metrics and audit annotations cite it) and
//! its name (the audit's PolicyReports file results under it). Violations,
//! the denial metric's series, the audit's result lists and the rules page
//! all take from [`Rule`], so a rule is named and numbered in one place.

use std::fmt;

/// Declares [`Rule`], one line a rule: its number, its name and whether it
/// denies, so that [`Rule::ALL`], [`Rule::name`] and the rules that deny
/// cannot drift apart.
macro_rules! rules {
    ($(
        $(#[doc = $doc:literal])*
        $rule:ident = $number:literal, $name:literal, denies: $denies:literal;
    )*) => {
        /// One rule of the webhook.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($(#[doc = $doc])* $rule = $number,)*
        }

        impl Rule {
            /// Every rule, by number.
            pub const ALL: [Rule; 30] = [$(Rule::$rule),*];

            /// The rule's name: the `rule` of the audit's PolicyReport results
            /// and of its violations metric.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$rule => $name,)*
                }
            }

            /// Whether a violation of this rule denies a request (the others
            /// shape how violations are judged, or only warn): the rules the
            /// denial metric counts.
            const fn denies(self) -> bool {
                match self {
                    $(Self::$rule => $denies,)*
                }
            }
        }
    };
}

rules! {
    /// 0: a request the rules cannot judge (no object, no resource, a
    /// DELETE without the stored object) is denied, saying what is missing.
    Judgeable = 0, "judgeable", denies: true;
    /// 1: no drain timeout set is fine (`/mutate` fills in the default).
    TimeoutOptional = 1, "drain-timeout-optional", denies: false;
    /// 2: the drain timeout is a JSON integer (and can be reached).
    TimeoutInteger = 2, "drain-timeout-integer", denies: true;
    /// 3: the drain timeout is in the namespace's range.
    TimeoutRange = 3, "drain-timeout-range", denies: true;
    /// 4: the drain timeout times the recycle multiplier fits Numaflow's
    /// clock (and the scale factor is a percent).
    TimeoutOverflow = 4, "drain-timeout-overflow", denies: true;
    /// 5: `allow-data-loss` is a value Numaplane understands (and the
    /// metadata holding it is an object).
    AllowDataLossValue = 5, "allow-data-loss-value", denies: true;
    /// 6: forcing a re-apply needs permission (and a pause).
    ForceReapply = 6, "force-reapply", denies: true;
    /// 7: turning on `forcePromote` needs permission.
    ForcePromote = 7, "force-promote", denies: true;
    /// 8: a violation whose inputs are unchanged warns (ratcheting).
    Ratcheting = 8, "ratcheting", denies: false;
    /// 9: what is judged: CREATE and UPDATE of the guarded kinds (and
    /// DELETE, by rules 20 and 21).
    Scope = 9, "scope", denies: false;
    /// 10: warn mode denies nothing; gate decisions are audit annotations.
    WarnMode = 10, "warn-mode", denies: false;
    /// 11: a force left on after its pause warns.
    StaleForce = 11, "stale-force", denies: false;
    /// 12: a `forcePromote` left on warns.
    ForcePromoteLeftOn = 12, "force-promote-left-on", denies: false;
    /// 13: the force-promote label needs permission and, on a child, an
    /// upgrade in progress. Its name is the audit's, which meets the label
    /// in a rollout's child template.
    ForcePromoteLabel = 13, "template-force-promote", denies: true;
    /// 14: `marked-for-deletion` needs permission and a recyclable
    /// Pipeline. Named, like rule 13, for the child template.
    DeleteUndrained = 14, "template-delete-undrained", denies: true;
    /// 15: Numaplane's bookkeeping keys are its controller's (and the
    /// template and maps holding them are objects). Named, like rule 13,
    /// for the child template.
    Bookkeeping = 15, "template-bookkeeping", denies: true;
    /// 16: the deletion timeout (`deletionGracePeriodSeconds`, or the
    /// deprecated `deleteGracePeriodSeconds`) is a JSON integer (and can be
    /// reached), on a PipelineRollout and on a child Pipeline.
    DeletionTimeoutInteger = 16, "deletion-timeout-integer", denies: true;
    /// 17: the deletion timeout is in the namespace's `deletionTimeout` range.
    DeletionTimeoutRange = 17, "deletion-timeout-range", denies: true;
    /// 18: the deletion timeout fits Numaflow's clock.
    DeletionTimeoutOverflow = 18, "deletion-timeout-overflow", denies: true;
    /// 19: `numaflow.numaproj.io/pause-timestamp` is set or changed by
    /// Numaflow's controller only (and never in a rollout's child template).
    PauseTimestamp = 19, "pause-timestamp", denies: true;
    /// 20: deleting a rollout's child needs the deleteUndrained permission
    /// (Numaplane's controller and Kubernetes' own deleters excepted).
    DeleteChild = 20, "delete-child", denies: true;
    /// 21: deleting a PipelineRollout warns of its Pipelines' deletion
    /// timeout, and may need the deleteUndrained permission.
    DeleteRollout = 21, "delete-rollout", denies: true;
    /// 22: an HPA rider warns that every progressive upgrade is promoted
    /// without assessment.
    HpaRider = 22, "hpa-rider", denies: false;
    /// 23: a namespace-level ConfigMap's `data.upgradeStrategy` is one
    /// Numaplane accepts (and `data` is an object).
    NamespaceStrategyValue = 23, "namespace-strategy-value", denies: true;
    /// 24: a namespace-level ConfigMap whose strategy skips draining
    /// (`no-strategy`, empty or blank) needs permission.
    NamespaceStrategy = 24, "namespace-strategy", denies: true;
    /// 25: the one-shot forcePromote's record annotation is the webhook's
    /// own: written only by `/mutate`.
    ForcePromoteRecord = 25, "force-promote-record", denies: true;
    /// 26: changing what Numaplane's and Numaflow's controllers keep on a
    /// rollout's child (spec, status, ownerReferences, finalizers, their
    /// keys) needs the editChildren permission.
    EditChild = 26, "edit-child", denies: true;
    /// 27: Numaflow controller definitions outside Numaplane's namespace
    /// are written only by Numaplane's controller and holders of the
    /// controllerDefinitions permission.
    ControllerDefinitions = 27, "controller-definitions", denies: true;
    /// 28: a rider that grants access (a Role, RoleBinding, ServiceAccount
    /// or Secret) warns that Numaplane creates it with its own account.
    AccessRider = 28, "access-rider", denies: false;
    /// 29: changing what Numaflow's controller makes for a rollout's child
    /// (its Vertices, the daemon, the vertices' workloads) needs the
    /// editChildren permission.
    NumaflowMade = 29, "numaflow-made", denies: true;
}

impl Rule {
    /// The rule's number in docs/rules.md (0: the request could not be
    /// judged at all).
    pub const fn number(self) -> u8 {
        self as u8
    }

    /// The rules that deny, by number.
    pub(crate) fn denying() -> impl Iterator<Item = Rule> {
        Self::ALL.into_iter().filter(|rule| rule.denies())
    }
}

/// `rule N (name)`.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {} ({})", self.number(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_are_numbered_in_order_with_distinct_names() {
        // ALL lists every number from 0, in order, each once.
        for (i, rule) in Rule::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(rule.number()), i, "{rule}");
        }
        let mut names: Vec<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Rule::ALL.len());
    }

    #[test]
    fn the_rules_that_deny_are_the_denial_metrics_series() {
        let numbers: Vec<u8> = Rule::denying().map(Rule::number).collect();
        assert_eq!(
            numbers,
            [
                0, 2, 3, 4, 5, 6, 7, 13, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 29
            ]
        );
    }
}
