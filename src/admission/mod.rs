//! Parse, decide, respond: an AdmissionReview read into typed input
//! ([`request`]), judged by [`decide`] with the request's origin as data,
//! and answered from the decision ([`response`]).
//!
//! The request is read with a small lenient envelope of our own (so a
//! broken object still yields the uid to answer with); the answer is built
//! from the Decision in one place, in the request's apiVersion, with the
//! patch as base64 text. The server and `review` go through [`answer`];
//! the audit and `check`, which hold objects rather than AdmissionReviews,
//! build the [`Input`] themselves and call [`decide`].

mod decide;
mod request;
mod response;

use std::fmt;
use std::time::Duration;

use time::OffsetDateTime;

pub use self::decide::{Asker, Decided, Input, Origin, Subject, decide};
pub use self::request::{AdmissionRequest, Envelope, ParseError, RequestOperation};
use crate::authz::{ForcePermission, RbacTrace};
use crate::policy::Policy;
use crate::policy::rules::Decision;

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
    /// Whether the rules judged it (false for CONNECT, other resources, ...).
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
/// `policy`, asking `context.authorizer` when a force needs permission: the
/// server's and `review`'s path (parse, [`decide`], respond), and the
/// wire-level tests' and benches'.
pub async fn answer<P: ForcePermission>(
    webhook: Webhook,
    policy: &Policy,
    body: &[u8],
    context: AnswerContext<'_, P>,
) -> Result<(AdmissionRequest, Outcome), ParseError> {
    let request = AdmissionRequest::parse(body)?;
    let input = Input {
        webhook,
        origin: Origin::Admission,
        subject: request.subject(context.now),
    };
    let asker = Asker {
        authorizer: context.authorizer,
        timeout: context.permission_timeout,
    };
    let Decided {
        decision,
        judged,
        rbac,
    } = decide(policy, input, asker).await;
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
