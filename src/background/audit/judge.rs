//! Judging one stored object as a CREATE of it would be judged: the
//! object's typed view (read once from its slim JSON) given to
//! [`admission::decide`] for `/validate`, and the denials sorted into one
//! result per rule. A stored force is judged by state instead, since who
//! set it cannot be known afterwards: it is left out of what is decided,
//! and any permission the judgement asks for is granted as
//! [`BY_STATE`] says (no one is asked).

use time::OffsetDateTime;

use self::state::{
    access_rider_state, force_promote_state, force_reapply_state, hpa_rider_state,
    no_deletion_timeout_state, template_deletion_state, template_label_state,
};
use super::audited::KindEntry;
use crate::admission::{self, Input, Subject, Webhook};
use crate::kinds::{Kind, Resource};
use crate::namespace_config::ConfigRead;
use crate::policy::rules::{GuardedWrite, Operation, Rule, StrategyWrite, Verdict, Violation};
use crate::policy::{Mode, Permission, Policy, UserInfo};
use crate::rollout::{DeletionTimeout, GuardedObject};

/// The requester the audit judges a CREATE for.
pub const AUDIT_USER: &str = "system:serviceaccount:pipelinerollout-webhook:audit";

/// A result's outcome, as PolicyReports name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// The rule holds.
    Pass,
    /// The rule is broken, and the policy enforces it.
    Fail,
    /// The rule is broken but only warned about (warn mode, or a state
    /// the webhook itself only warns of).
    Warn,
    /// The object cannot be judged for this rule.
    Error,
    /// The rule cannot be applied because another one could not.
    Skip,
}

impl Status {
    /// The name in a PolicyReport.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Warn => "warn",
            Self::Error => "error",
            Self::Skip => "skip",
        }
    }
}

/// One rule's result for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleResult {
    /// The rule (a report names it by [`Rule::name`]).
    pub rule: Rule,
    /// The outcome.
    pub status: Status,
    /// What is wrong and how to fix it (the denial's words), when not a pass.
    pub message: Option<Box<str>>,
}

/// Every result of one object.
pub type ObjectResults = Vec<RuleResult>;

/// What judging needs: the policy (in enforce mode, so that every
/// violation is named), whether the policy in force only warns, the time
/// judged at, and the requester named.
#[derive(Debug)]
pub struct Judge<'a> {
    policy: &'a Policy,
    warn_only: bool,
    now: OffsetDateTime,
    user: UserInfo,
}

impl<'a> Judge<'a> {
    /// Judges under `policy` (already turned to enforce mode; `warn_only`
    /// says whether the policy in force is in warn mode) at `now`.
    pub fn new(policy: &'a Policy, warn_only: bool, now: OffsetDateTime) -> Self {
        Self {
            policy,
            warn_only,
            now,
            user: UserInfo::new(AUDIT_USER, &["system:authenticated"]),
        }
    }

    /// Judges one stored object of the kind `entry` names (its view), in
    /// `namespace` under `name`: a rollout or a namespace-level ConfigMap.
    pub fn object(
        &self,
        entry: &KindEntry,
        namespace: &str,
        name: &str,
        view: &GuardedObject,
    ) -> ObjectResults {
        self.view(entry, namespace, name, view)
    }
}

/// `policy` as the audit judges with it: in enforce mode, so every
/// violation comes back as a denial; and whether it was in warn mode.
pub fn enforcing(policy: &Policy) -> (Policy, bool) {
    let mut enforcing = policy.clone();
    let warn_only = enforcing.mode == Mode::Warn;
    enforcing.mode = Mode::Enforce;
    (enforcing, warn_only)
}

/// How the audit answers a permission a judgement asks for: granted, since
/// the stored forces are taken out of what it decides (see
/// [`GuardedObject::without_stored_forces`](crate::rollout::GuardedObject::without_stored_forces)) and judged by state, and a
/// namespace's strategy is judged by state too.
pub const BY_STATE: &str =
    "who set a stored force or strategy is unknown to the audit; it is judged by state";

/// The verdict on `input` (a CREATE for `/validate`), every permission it
/// asks for granted [`BY_STATE`].
fn decide_by_state(policy: &Policy, input: Input<'_>) -> Verdict {
    admission::decide(policy, input)
        .finish(|_| Permission::Granted(BY_STATE.to_owned()))
        .verdict
}

/// Whether a violation says the object has a wrong shape rather than a
/// wrong value.
fn is_shape_problem(violation: &Violation) -> bool {
    matches!(
        violation,
        Violation::TimeoutUnreachable { .. }
            | Violation::MetadataMalformed { .. }
            | Violation::TemplateMalformed { .. }
            | Violation::Unjudgeable(_)
    )
}

impl Judge<'_> {
    fn view(
        &self,
        entry: &KindEntry,
        namespace: &str,
        name: &str,
        view: &GuardedObject,
    ) -> ObjectResults {
        let kind = match entry.resource {
            Resource::Guarded(kind) => kind,
            _ => return self.namespace_config(namespace, name, view),
        };
        // The stored forces are judged by state: the CREATE decided leaves
        // them out.
        let object = view.without_stored_forces();
        let input = Input {
            webhook: Webhook::Validate,
            subject: Subject::Write {
                write: GuardedWrite {
                    kind,
                    operation: Operation::Create,
                    namespace,
                    user: &self.user,
                    object: &object,
                    old_object: None,
                    now: self.now,
                },
                name,
            },
        };
        let verdict = decide_by_state(self.policy, input);
        self.results(entry, kind, view, &verdict.denials)
    }

    /// A namespace-level ConfigMap's results: rule 23 as a CREATE of it
    /// would be judged, rule 24 by state (who set the strategy cannot be
    /// known afterwards): a strategy that skips draining is a warning
    /// naming the namespace.
    fn namespace_config(&self, namespace: &str, name: &str, view: &GuardedObject) -> ObjectResults {
        let read = ConfigRead::of(view);
        let definitions = read.definitions && namespace != self.policy.numaplane.namespace;
        let skips = read.skips_draining();
        let shown = read.shown();
        let write = StrategyWrite {
            operation: Operation::Create,
            namespace,
            user: &self.user,
            object: read,
            old_object: None,
            fallback: None,
        };
        let input = Input {
            webhook: Webhook::Validate,
            subject: Subject::NamespaceConfig { write, name },
        };
        let decision = decide_by_state(self.policy, input);
        let broken = if self.warn_only {
            Status::Warn
        } else {
            Status::Fail
        };
        let value = decision
            .denials
            .iter()
            .find(|v| v.rule() == Rule::NamespaceStrategyValue)
            .map_or_else(
                || result(Rule::NamespaceStrategyValue, Status::Pass, None),
                |v| result(Rule::NamespaceStrategyValue, broken, Some(v.to_string())),
            );
        let strategy = if skips {
            result(
                Rule::NamespaceStrategy,
                Status::Warn,
                Some(format!(
                    "upgradeStrategy is {shown}: every rollout in namespace \"{namespace}\" upgrades by plain apply, with no pause and no drain; write \"pause-and-drain\" or \"progressive\" unless that is meant"
                )),
            )
        } else {
            result(Rule::NamespaceStrategy, Status::Pass, None)
        };
        // Rule 27 by state too: who wrote the definitions cannot be known.
        let definitions = if definitions {
            result(
                Rule::ControllerDefinitions,
                Status::Warn,
                Some(format!(
                    "Numaflow controller definitions in namespace \"{namespace}\": Numaplane prefers them to those of \"{}\" and applies a definition's fullSpec with its own account; move them to \"{}\" or delete them unless a platform admin wrote them",
                    self.policy.numaplane.namespace, self.policy.numaplane.namespace
                )),
            )
        } else {
            result(Rule::ControllerDefinitions, Status::Pass, None)
        };
        vec![value, strategy, definitions]
    }

    /// The results of one object, one per rule of its kind, from the
    /// violations decided and the stored forces' states.
    fn results(
        &self,
        entry: &KindEntry,
        kind: Kind,
        view: &GuardedObject,
        denials: &[Violation],
    ) -> ObjectResults {
        if let Some(Violation::Unjudgeable(why)) = denials
            .iter()
            .find(|v| matches!(v, Violation::Unjudgeable(_)))
        {
            return unjudgeable(why.clone());
        }
        let broken = if self.warn_only {
            Status::Warn
        } else {
            Status::Fail
        };
        let unreachable = denials
            .iter()
            .any(|v| matches!(v, Violation::TimeoutUnreachable { .. }));
        let template_unreadable = denials
            .iter()
            .any(|v| matches!(v, Violation::TemplateMalformed { .. }));
        let mut results = Vec::with_capacity(entry.rules.len());
        for &rule in entry.rules {
            let found: Vec<&Violation> = denials.iter().filter(|v| v.rule() == rule).collect();
            let result = match rule {
                Rule::ForceReapply => force_reapply_state(view),
                Rule::ForcePromote => force_promote_state(view, kind),
                Rule::HpaRider => hpa_rider_state(view),
                Rule::AccessRider => access_rider_state(view),
                Rule::ForcePromoteLabel | Rule::DeleteUndrained if template_unreadable => result(
                    rule,
                    Status::Skip,
                    Some(format!(
                        "the child template's metadata cannot be read (see {})",
                        Rule::Bookkeeping.name()
                    )),
                ),
                _ if !found.is_empty() => {
                    let status = if found.iter().any(|v| is_shape_problem(v)) {
                        Status::Error
                    } else {
                        broken
                    };
                    let message = found
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ");
                    result(rule, status, Some(message))
                }
                Rule::ForcePromoteLabel => template_label_state(view, kind)
                    .unwrap_or_else(|| result(rule, Status::Pass, None)),
                Rule::DeleteUndrained => template_deletion_state(view, kind)
                    .unwrap_or_else(|| result(rule, Status::Pass, None)),
                Rule::TimeoutRange
                | Rule::TimeoutOverflow
                | Rule::DeletionTimeoutInteger
                | Rule::DeletionTimeoutRange
                | Rule::DeletionTimeoutOverflow
                    if unreachable =>
                {
                    result(
                        rule,
                        Status::Skip,
                        Some(format!(
                            "the drain timeout cannot be read (see {})",
                            Rule::TimeoutInteger.name()
                        )),
                    )
                }
                Rule::DeletionTimeoutRange
                    if kind == Kind::PipelineRollout
                        && view.deletion_timeout() == DeletionTimeout::Default =>
                {
                    no_deletion_timeout_state()
                }
                _ => result(rule, Status::Pass, None),
            };
            results.push(result);
        }
        results
    }
}

pub(super) fn result(rule: Rule, status: Status, message: Option<String>) -> RuleResult {
    RuleResult {
        rule,
        status,
        message: message.map(String::into_boxed_str),
    }
}

fn unjudgeable(why: String) -> ObjectResults {
    vec![result(
        Rule::Judgeable,
        Status::Error,
        Some(format!("cannot be judged: {why}")),
    )]
}

mod state;
#[cfg(test)]
mod tests;
