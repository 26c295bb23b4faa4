//! Judging one stored object as a CREATE of it would be judged: the
//! object's typed view (read once from the stored bytes) given to
//! [`admission::decide`] for `/validate` as [`Origin::Stored`], and the
//! denials sorted into one result per rule. The rules judge what it holds
//! that a writer must be permitted to set (a force, a strategy that skips
//! draining) by the state it leaves, since who wrote it cannot be known:
//! those are the verdict's [`StoredState`]s, and no permission is asked.

use time::OffsetDateTime;

use super::audited::KindEntry;
use crate::admission::{self, Input, Subject, Webhook};
use crate::kinds::Resource;
use crate::policy::rules::{
    GuardedWrite, Operation, Origin, Rule, StoredState, StrategyWrite, Verdict, Violation,
};
use crate::policy::{Mode, Permission, Policy, UserInfo};
use crate::rollout::GuardedObject;

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
    /// Judges under `policy` as [`enforcing`] turns it, at `now`.
    pub fn new(policy: &'a Policy, warn_only: bool, now: OffsetDateTime) -> Self {
        Self {
            policy,
            warn_only,
            now,
            user: UserInfo::new(AUDIT_USER, &["system:authenticated"]),
        }
    }

    /// Judges one stored object of the kind `entry` names (its view), in
    /// `namespace` under `name`: a rollout or a labelled ConfigMap.
    pub fn object(
        &self,
        entry: &KindEntry,
        namespace: &str,
        name: &str,
        view: &GuardedObject,
    ) -> ObjectResults {
        let subject = match entry.resource {
            Resource::Guarded(kind) => Subject::Write {
                write: GuardedWrite {
                    kind,
                    operation: Operation::Create,
                    namespace,
                    user: &self.user,
                    object: view,
                    old_object: None,
                    now: self.now,
                    origin: Origin::Stored,
                },
                name,
            },
            _ => Subject::NamespaceConfig {
                write: StrategyWrite {
                    operation: Operation::Create,
                    namespace,
                    user: &self.user,
                    object: view.config_read(),
                    old_object: None,
                    fallback: None,
                    origin: Origin::Stored,
                },
                name,
            },
        };
        let input = Input {
            webhook: Webhook::Validate,
            subject,
        };
        // A stored object's judgement asks for no permission; were one
        // asked, it would be refused: who wrote it is unknown.
        let unknown = "who wrote a stored object is unknown to the audit";
        let verdict =
            admission::decide(self.policy, input).finish(|_| Permission::Refused(unknown.into()));
        self.results(entry, &verdict)
    }

    /// The results of one object, one per rule of its kind, from the
    /// violations decided and the states of what it holds.
    fn results(&self, entry: &KindEntry, verdict: &Verdict) -> ObjectResults {
        let denials = &verdict.denials;
        if let Some(Violation::Unjudgeable(why)) = denials
            .iter()
            .find(|v| matches!(v, Violation::Unjudgeable(_)))
        {
            let message = format!("cannot be judged: {why}");
            return vec![result(Rule::Judgeable, Status::Error, Some(message))];
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
            let mut found: Vec<&Violation> = denials.iter().filter(|v| v.rule() == rule).collect();
            // A ConfigMap's strategy is named by its first denial (keys
            // that clash, before the value they leave unclear).
            if entry.resource == Resource::ConfigMap {
                found.truncate(1);
            }
            let stored = verdict.stored.iter().find(|s| s.rule == rule);
            let result = match rule {
                Rule::ForcePromoteLabel | Rule::DeleteUndrained if template_unreadable => {
                    skipped(rule, "the child template's metadata", Rule::Bookkeeping)
                }
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
                Rule::TimeoutRange
                | Rule::TimeoutOverflow
                | Rule::DeletionTimeoutInteger
                | Rule::DeletionTimeoutRange
                | Rule::DeletionTimeoutOverflow
                    if unreachable =>
                {
                    skipped(rule, "the drain timeout", Rule::TimeoutInteger)
                }
                _ => stored.map_or_else(|| result(rule, Status::Pass, None), stored_result),
            };
            results.push(result);
        }
        results
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

/// A state the rules found stored: it fails or warns whatever the mode.
fn stored_result(state: &StoredState) -> RuleResult {
    let status = if state.fails {
        Status::Fail
    } else {
        Status::Warn
    };
    result(state.rule, status, Some(state.message.clone()))
}

/// `rule` skipped: `what` it reads cannot be read, as `see` reports.
fn skipped(rule: Rule, what: &str, see: Rule) -> RuleResult {
    let message = format!("{what} cannot be read (see {})", see.name());
    result(rule, Status::Skip, Some(message))
}

fn result(rule: Rule, status: Status, message: Option<String>) -> RuleResult {
    RuleResult {
        rule,
        status,
        message: message.map(String::into_boxed_str),
    }
}

#[cfg(test)]
mod tests;
