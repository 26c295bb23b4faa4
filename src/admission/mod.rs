//! AdmissionReview in, decision applied, AdmissionReview out.
//!
//! The request is read with a small lenient envelope of our own (so a
//! broken object still yields the uid to answer with); the answer is built
//! from the Decision in one place, in the request's apiVersion, with the
//! patch as base64 text.

mod request;
mod response;

use std::fmt;
use std::time::Duration;

use time::OffsetDateTime;

pub use self::request::{AdmissionRequest, Envelope, ParseError, RequestOperation};
use self::request::{Review, Unjudgeable};
use crate::authz::{ForcePermission, RbacTrace, Target};
use crate::policy::Policy;
use crate::policy::rules::{self, Decision, Permissions, Violation};

/// The AdmissionReview apiVersions we speak.
pub const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// Which webhook a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    /// `/validate`, a ValidatingWebhookConfiguration.
    Validate,
    /// `/mutate`, a MutatingWebhookConfiguration.
    Mutate,
}

impl Webhook {
    /// The name used in paths, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validate => "validate",
            Self::Mutate => "mutate",
        }
    }
}

impl fmt::Display for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The whole outcome of one request: the decision, and the answer built
/// from it.
#[derive(Debug)]
pub struct Outcome {
    /// Which webhook answered.
    pub webhook: Webhook,
    /// The response AdmissionReview, serialised.
    pub body: Vec<u8>,
    /// Whether the rules judged it (false for DELETE, other resources, ...).
    pub judged: bool,
    /// The decision behind the answer: the only record of the outcome.
    pub decision: Decision,
    /// The RBAC check made for it, if one was.
    pub rbac: Option<RbacTrace>,
}

impl Outcome {
    /// Whether the request was allowed.
    pub fn allowed(&self) -> bool {
        self.decision.allowed()
    }

    /// The denial message, if denied.
    pub fn message(&self) -> Option<String> {
        self.decision.denial_message()
    }
}

/// What [`answer`] is given besides the policy and the body: who may force
/// (asked within `permission_timeout`) and the time the request is judged at.
#[derive(Debug, Clone, Copy)]
pub struct AnswerContext<'a, P> {
    /// The source of the force-reapply permission.
    pub authorizer: &'a P,
    /// How long asking it may take.
    pub permission_timeout: Duration,
    /// The time the request is judged at.
    pub now: OffsetDateTime,
}

impl<'a, P: ForcePermission> AnswerContext<'a, P> {
    /// Judging now, by the system clock.
    pub fn now(authorizer: &'a P, permission_timeout: Duration) -> Self {
        Self {
            authorizer,
            permission_timeout,
            now: OffsetDateTime::now_utc(),
        }
    }
}

/// Parses, judges and answers one AdmissionReview body for `webhook` under
/// `policy`, asking `context.authorizer` when a force needs permission. The
/// server, `review`, `check`, the tests and the benches all answer through
/// here.
pub async fn answer<P: ForcePermission>(
    webhook: Webhook,
    policy: &Policy,
    body: &[u8],
    context: AnswerContext<'_, P>,
) -> Result<(AdmissionRequest, Outcome), ParseError> {
    let request = AdmissionRequest::parse(body)?;
    let mut rbac = None;
    let (decision, judged) = match (request.review(context.now), webhook) {
        (Ok(Review::Skipped), _) => (Decision::default(), false),
        (Ok(Review::Unknown(_)), Webhook::Mutate) => (Decision::default(), false),
        (Ok(Review::Unknown(why)), Webhook::Validate) => {
            let mut decision = Decision::default();
            decision.audit.insert("not-judged".to_owned(), why.clone());
            decision.warnings.push(why);
            (decision, false)
        }
        // `/mutate` defaults PipelineRollouts only.
        (Ok(Review::Write(review)), Webhook::Mutate) if !review.is_pipeline_rollout() => {
            (Decision::default(), false)
        }
        (Ok(Review::Write(review)), Webhook::Mutate) => (rules::mutate(policy, &review), true),
        (Ok(Review::Write(review)), Webhook::Validate) => {
            let validation = rules::validate(policy, review);
            let kind = review.kind;
            let target = Target {
                group: kind.group(),
                resource: kind.resource(),
                namespace: &request.namespace,
                name: &request.name,
            };
            let user = &request.user;
            let limit = context.permission_timeout;
            let force = match validation.settled_permission() {
                Some(settled) => settled,
                None => {
                    let grant = policy.force_reapply.grant();
                    let check = context.authorizer.check(grant, user, target, limit).await;
                    rbac = check.rbac;
                    check.permission
                }
            };
            let undrained = match validation.settled_undrained_permission() {
                Some(settled) => settled,
                None => {
                    let grant = policy.force_reapply.delete_undrained.grant();
                    let check = context.authorizer.check(grant, user, target, limit).await;
                    rbac = check.rbac.or(rbac);
                    check.permission
                }
            };
            (validation.finish(&Permissions { force, undrained }), true)
        }
        (Err(Unjudgeable(message)), webhook) => {
            let mut decision = Decision::default();
            match webhook {
                // The validating webhook denies what it cannot judge.
                Webhook::Validate => decision.denials.push(Violation::Unjudgeable(message)),
                Webhook::Mutate => decision.warnings.push(format!("not defaulted: {message}")),
            }
            (decision, true)
        }
    };
    let body = response::wire_body(&request, &decision);
    let outcome = Outcome {
        webhook,
        body,
        judged,
        decision,
        rbac,
    };
    Ok((request, outcome))
}
