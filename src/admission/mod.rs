//! Parse, decide, respond: an AdmissionReview read into typed input
//! ([`request`]), judged by [`decide`] (pure, synchronous), the
//! permissions it names asked of the [`Authorizer`], and answered from the
//! verdict ([`response`]).
//!
//! The server and `review` go through [`answer`]; the audit and `check`,
//! which hold objects rather than AdmissionReviews, build the [`Input`]
//! themselves, call [`decide`] and answer its questions from what they
//! know. Only the server turns verdicts into Events.

mod decide;
mod request;
mod response;

use std::fmt;
use std::time::Duration;

use time::OffsetDateTime;

pub(crate) use self::decide::Subject;
pub use self::decide::{Input, decide};
pub(crate) use self::request::RequestOperation;
pub use self::request::{AdmissionRequest, Envelope, ParseError};
use crate::authz::{Authorizer, RbacTrace};
use crate::namespace_config::ClusterDefault;
use crate::policy::rules::{ChildLookup, ClusterView, DefinitionLookup, Verdict};
use crate::policy::{Permission, Policy};

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
    pub(crate) fn as_str(self) -> &'static str {
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

/// The reply to one AdmissionReview: the verdict, and the answer built
/// from it.
#[derive(Debug)]
pub struct Reply {
    pub(crate) webhook: Webhook,
    /// The response AdmissionReview, serialised.
    pub body: Vec<u8>,
    /// Whether the rules judged it (false for CONNECT, other resources, ...).
    pub judged: bool,
    /// The verdict behind the answer: the only record of the outcome.
    pub verdict: Verdict,
    /// The RBAC check made for it, if one was.
    pub(crate) rbac: Option<RbacTrace>,
}

impl Reply {
    /// Whether the request was allowed.
    pub fn allowed(&self) -> bool {
        self.verdict.allowed()
    }

    /// The denial message, if denied.
    pub fn message(&self) -> Option<String> {
        self.verdict.denial_message()
    }
}

/// What [`answer`] is given besides the policy and the body: who may force
/// (asked within `permission_timeout`) and the time the request is judged at.
#[derive(Debug, Clone, Copy)]
pub struct AnswerContext<'a> {
    /// The source of the permissions the rules need.
    pub authorizer: &'a Authorizer,
    /// How long asking it may take.
    pub permission_timeout: Duration,
    /// The time the request is judged at.
    pub now: OffsetDateTime,
    /// Numaplane's cluster default strategy, as last read (`None`: not
    /// read, taken as `no-strategy`).
    pub cluster_default: Option<&'a ClusterDefault>,
    /// The webhook's view of the children (rule 29) and the controller
    /// definitions (rule 27) (`None`: none, and what Numaflow makes for a
    /// child, or a version named, is judged as if it were a user
    /// namespace's).
    pub cluster: Option<&'a dyn ClusterView>,
}

impl<'a> AnswerContext<'a> {
    /// Judging now, by the system clock.
    pub fn now(authorizer: &'a Authorizer, permission_timeout: Duration) -> Self {
        Self {
            authorizer,
            permission_timeout,
            now: OffsetDateTime::now_utc(),
            cluster_default: None,
            cluster: None,
        }
    }
}

/// Parses, judges and answers one AdmissionReview body for `webhook` under
/// `policy`, asking `context.authorizer` the permissions the judgement
/// needs: parse, [`decide`], ask, finish, respond.
pub async fn answer(
    webhook: Webhook,
    policy: &Policy,
    body: &[u8],
    context: AnswerContext<'_>,
) -> Result<(AdmissionRequest, Reply), ParseError> {
    let request = AdmissionRequest::parse(body)?;
    let mut subject = request.subject(context.now);
    match &mut subject {
        Subject::NamespaceConfig { write, .. } => write.fallback = context.cluster_default,
        Subject::Made { write, .. } => {
            write.look_up(context.cluster.map(|c| c as &dyn ChildLookup));
        }
        Subject::ControllerVersion { write, .. } => {
            let lookup = context.cluster.map(|c| c as &dyn DefinitionLookup);
            write.look_up(lookup, &policy.numaplane.namespace);
        }
        _ => {}
    }
    let input = Input { webhook, subject };
    let judgement = decide(policy, input);
    let mut rbac = None;
    let mut answers = Vec::new();
    for question in judgement.questions() {
        let check = context
            .authorizer
            .ask(
                question.grant,
                question.user,
                question.target,
                context.permission_timeout,
            )
            .await;
        rbac = check.rbac.or(rbac);
        answers.push((question.need, check.permission));
    }
    let judged = judgement.judged();
    let verdict = judgement.finish(|question| {
        answers
            .iter()
            .position(|(need, _)| *need == question.need)
            .map_or_else(
                || Permission::Refused("its permission was not asked".to_owned()),
                |at| answers.swap_remove(at).1,
            )
    });
    let body = response::wire_body(&request, &verdict);
    let reply = Reply {
        webhook,
        body,
        judged,
        verdict,
        rbac,
    };
    Ok((request, reply))
}
