//! Judging one stored object as a CREATE of it would be judged: an
//! AdmissionReview built for the slim object, sent through
//! [`admission::answer`] (the server's own path) to `/validate`, the
//! denials sorted into one result per rule. A stored force is judged by
//! state instead, since who set it cannot be known afterwards:
//! [`StoredState`] is the permission source, and it asks no one.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use self::state::{
    force_promote_state, force_reapply_state, template_deletion_state, template_label_state,
};
use super::kinds::{
    self, KindEntry, RULE_ALLOW_DATA_LOSS_VALUE, RULE_FORCE_PROMOTE, RULE_FORCE_REAPPLY,
    RULE_JUDGEABLE, RULE_TEMPLATE_BOOKKEEPING, RULE_TEMPLATE_DELETE_UNDRAINED,
    RULE_TEMPLATE_FORCE_PROMOTE, RULE_TIMEOUT_INTEGER, RULE_TIMEOUT_OVERFLOW, RULE_TIMEOUT_RANGE,
};
use crate::admission::{self, AnswerContext, Webhook};
use crate::authz::{ForcePermission, PermissionCheck, Target};
use crate::kinds::Kind;
use crate::policy::rules::Violation;
use crate::policy::{Grant, Mode, Permission, Policy, UserInfo};
use crate::rollout::{ALLOW_DATA_LOSS, PipelineRollout};

/// The requester named in the audit's AdmissionReviews.
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
    /// The rule's name.
    pub rule: &'static str,
    /// The outcome.
    pub status: Status,
    /// What is wrong and how to fix it (the denial's words), when not a pass.
    pub message: Option<Box<str>>,
}

/// Every result of one object.
pub type Judged = Vec<RuleResult>;

/// A boxed judgement, as the kinds' table holds them.
pub type JudgeFuture<'a> = Pin<Box<dyn Future<Output = Judged> + Send + 'a>>;

/// What judging needs: the policy (in enforce mode, so that every
/// violation is named), whether the policy in force only warns, and the
/// time judged at.
#[derive(Debug)]
pub struct Judge<'a> {
    policy: &'a Policy,
    warn_only: bool,
    now: OffsetDateTime,
}

impl<'a> Judge<'a> {
    /// Judges under `policy` (already turned to enforce mode; `warn_only`
    /// says whether the policy in force is in warn mode) at `now`.
    pub fn new(policy: &'a Policy, warn_only: bool, now: OffsetDateTime) -> Self {
        Self {
            policy,
            warn_only,
            now,
        }
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

/// The permission source of the audit: it does no SubjectAccessReview.
/// The audit takes a stored force out of what it sends (see
/// [`pipeline_rollout`]) and judges it by state, so this answers only a
/// gate a future rule might add, granting it with the reason.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoredState;

impl ForcePermission for StoredState {
    fn check(
        &self,
        _grant: Grant<'_>,
        _user: &UserInfo,
        _target: Target<'_>,
        _limit: Duration,
    ) -> impl Future<Output = PermissionCheck> + Send {
        std::future::ready(
            Permission::Granted(
                "who set a stored force is unknown to the audit; it is judged by state".to_owned(),
            )
            .into(),
        )
    }
}

/// The AdmissionReview of a CREATE of `object` (kind `entry`).
fn create_review(entry: &KindEntry, object: &Value) -> Vec<u8> {
    let text = |key: &str| {
        object
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let kind = json!({"group": entry.group, "version": entry.version, "kind": entry.kind});
    let resource =
        json!({"group": entry.group, "version": entry.version, "resource": entry.plural});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("pipelinerollout-webhook-audit-{}", text("uid")),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": text("name"),
            "namespace": text("namespace"),
            "operation": "CREATE",
            "userInfo": {"username": AUDIT_USER, "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": true,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    })
    .to_string()
    .into_bytes()
}

/// The rule a violation's result goes under.
fn rule_of(violation: &Violation) -> &'static str {
    if matches!(violation, Violation::TemplateMalformed { .. }) {
        return RULE_TEMPLATE_BOOKKEEPING;
    }
    match violation.rule() {
        2 => RULE_TIMEOUT_INTEGER,
        3 => RULE_TIMEOUT_RANGE,
        4 => RULE_TIMEOUT_OVERFLOW,
        5 => RULE_ALLOW_DATA_LOSS_VALUE,
        6 => RULE_FORCE_REAPPLY,
        7 => RULE_FORCE_PROMOTE,
        13 => RULE_TEMPLATE_FORCE_PROMOTE,
        14 => RULE_TEMPLATE_DELETE_UNDRAINED,
        15 => RULE_TEMPLATE_BOOKKEEPING,
        _ => RULE_JUDGEABLE,
    }
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

/// Judges one stored rollout of the kind `entry` names (its slim JSON):
/// a PipelineRollout, a MonoVertexRollout or an ISBServiceRollout.
pub fn rollout<'a>(judge: &'a Judge<'a>, entry: &'a KindEntry, json: &'a str) -> JudgeFuture<'a> {
    Box::pin(judge_rollout(judge, entry, json))
}

async fn judge_rollout(judge: &Judge<'_>, entry: &KindEntry, json: &str) -> Judged {
    let Some(kind) = Kind::from_kind(entry.group, entry.kind) else {
        return unjudgeable(format!("{} is no kind this webhook guards", entry.kind));
    };
    let mut object: Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return unjudgeable(format!("the stored object is not JSON: {e}")),
    };
    let view = PipelineRollout::from_json(json).unwrap_or_default();
    let force_state = force_reapply_state(&view);
    let promote_state = force_promote_state(&view, kind);
    let label_state = template_label_state(&view, kind);
    let deletion_state = template_deletion_state(&view, kind);
    // The stored forces are judged by state: the CREATE sent leaves them out.
    if kinds::forces_reapply(&object)
        && let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations")
    {
        annotations.remove(ALLOW_DATA_LOSS);
    }
    if let Some(Value::Object(progressive)) = object.pointer_mut("/spec/strategy/progressive") {
        progressive.remove("forcePromote");
    }
    let body = create_review(entry, &object);
    let context = AnswerContext {
        authorizer: &StoredState,
        permission_timeout: Duration::from_secs(1),
        now: judge.now,
    };
    let decision = match admission::answer(Webhook::Validate, judge.policy, &body, context).await {
        Ok((_, outcome)) => outcome.decision,
        Err(e) => return unjudgeable(format!("the audit's review could not be read: {e}")),
    };
    if let Some(Violation::Unjudgeable(why)) = decision
        .denials
        .iter()
        .find(|v| matches!(v, Violation::Unjudgeable(_)))
    {
        return unjudgeable(why.clone());
    }
    let broken = if judge.warn_only {
        Status::Warn
    } else {
        Status::Fail
    };
    let unreachable = decision
        .denials
        .iter()
        .any(|v| matches!(v, Violation::TimeoutUnreachable { .. }));
    let template_unreadable = decision
        .denials
        .iter()
        .any(|v| matches!(v, Violation::TemplateMalformed { .. }));
    let mut results = Vec::with_capacity(entry.rules.len());
    for &rule in entry.rules {
        let found: Vec<&Violation> = decision
            .denials
            .iter()
            .filter(|v| rule_of(v) == rule)
            .collect();
        let result = match rule {
            RULE_FORCE_REAPPLY => force_state.clone(),
            RULE_FORCE_PROMOTE => promote_state.clone(),
            RULE_TEMPLATE_FORCE_PROMOTE | RULE_TEMPLATE_DELETE_UNDRAINED if template_unreadable => {
                result(
                    rule,
                    Status::Skip,
                    Some(format!(
                        "the child template's metadata cannot be read (see {RULE_TEMPLATE_BOOKKEEPING})"
                    )),
                )
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
            RULE_TEMPLATE_FORCE_PROMOTE if label_state.is_some() => label_state
                .clone()
                .unwrap_or_else(|| result(rule, Status::Pass, None)),
            RULE_TEMPLATE_DELETE_UNDRAINED if deletion_state.is_some() => deletion_state
                .clone()
                .unwrap_or_else(|| result(rule, Status::Pass, None)),
            RULE_TIMEOUT_RANGE | RULE_TIMEOUT_OVERFLOW if unreachable => result(
                rule,
                Status::Skip,
                Some("the drain timeout cannot be read (see drain-timeout-integer)".to_owned()),
            ),
            _ => result(rule, Status::Pass, None),
        };
        results.push(result);
    }
    results
}

pub(super) fn result(rule: &'static str, status: Status, message: Option<String>) -> RuleResult {
    RuleResult {
        rule,
        status,
        message: message.map(String::into_boxed_str),
    }
}

fn unjudgeable(why: String) -> Judged {
    vec![result(
        RULE_JUDGEABLE,
        Status::Error,
        Some(format!("cannot be judged: {why}")),
    )]
}

mod state;
#[cfg(test)]
mod tests;
