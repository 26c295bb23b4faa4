//! The pure core's contract with its callers: which permissions a
//! judgement asks for, on which object, and that its verdict follows the
//! answers it is given.

use std::cell::Cell;

use time::OffsetDateTime;

use super::*;
use crate::admission::AdmissionRequest;

/// A captured AdmissionReview from tests/fixtures/admission.
fn captured(name: &str) -> AdmissionRequest {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission")
        .join(name);
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    AdmissionRequest::parse(&body).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn judge<'a>(policy: &'a Policy, request: &'a AdmissionRequest) -> Judgement<'a> {
    judge_at(policy, request, OffsetDateTime::now_utc())
}

fn judge_at<'a>(
    policy: &'a Policy,
    request: &'a AdmissionRequest,
    now: OffsetDateTime,
) -> Judgement<'a> {
    decide(
        policy,
        Input {
            webhook: Webhook::Validate,
            subject: request.subject(now),
        },
    )
}

#[test]
fn a_plain_create_asks_nothing_and_is_finished_without_answers() {
    let policy = Policy::built_in();
    let request = captured("01-create-kubectl-apply-validate.json");
    let judgement = judge(&policy, &request);
    assert_eq!(judgement.questions().count(), 0);
    let asked = Cell::new(0);
    let judged = judgement.judged();
    let verdict = judgement.finish(|_| {
        asked.set(asked.get() + 1);
        Permission::Refused("never asked".to_owned())
    });
    assert_eq!(asked.get(), 0, "finish asked a question no one needed");
    assert!(judged && verdict.allowed(), "{verdict:?}");
}

#[test]
fn a_force_asks_its_grant_on_the_object_and_follows_the_answer() {
    let policy = Policy::built_in();
    let request = captured("04-allow-data-loss-argocd-server-action-validate.json");
    let questions: Vec<_> = judge(&policy, &request).questions().collect();
    let [question] = questions.as_slice() else {
        panic!("expected one question, got {questions:?}");
    };
    assert_eq!(question.need, Need::ForceReapply);
    assert_eq!(question.grant.key, "forceReapply");
    assert_eq!(
        question.user.username(),
        "system:serviceaccount:argocd:argocd-server"
    );
    let target = question.target;
    assert_eq!(
        (target.group, target.resource, target.namespace, target.name),
        (
            "numaplane.numaproj.io",
            "pipelinerollouts",
            "team-a",
            "my-pipeline"
        )
    );
    let granted = judge(&policy, &request).finish(|_| Permission::Granted("listed".to_owned()));
    assert!(granted.allowed(), "{granted:?}");
    let refused = judge(&policy, &request).finish(|_| Permission::Refused("not listed".to_owned()));
    let message = refused.denial_message().unwrap_or_default();
    assert!(
        message.contains("may not set") && message.contains("not listed"),
        "{message}"
    );
}

#[test]
fn a_request_denied_anyway_asks_nothing() {
    // Alice forces a re-apply 10 s into a pause when the policy asks for an
    // hour: rule 6 denies it whatever she may do, so RBAC is not asked.
    let policy =
        Policy::from_yaml("forceReapply:\n  rbac: {verb: force-reapply}\n  minPauseAge: 1h\n")
            .expect("valid policy");
    let request = captured("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let pause_began = OffsetDateTime::parse(
        "2026-11-29T16:10:30Z",
        &time::format_description::well_known::Rfc3339,
    )
    .expect("a time");
    let now = pause_began + time::Duration::seconds(10);
    assert_eq!(
        judge(&policy, &request).questions().count(),
        1,
        "asked once the pause is old enough"
    );
    let judgement = judge_at(&policy, &request, now);
    assert_eq!(judgement.questions().count(), 0);
    let verdict = judgement.finish(|q| panic!("asked {:?} of a request denied anyway", q.need));
    assert!(!verdict.allowed(), "{verdict:?}");
}

#[test]
fn the_verdict_keeps_its_events_for_the_server_to_send() {
    // Events are data in the verdict: the server sends them, the audit and
    // check ignore them; the core does not know who called it.
    let policy = Policy::built_in();
    let request = captured("04-allow-data-loss-argocd-server-action-validate.json");
    let verdict = judge(&policy, &request).finish(|_| Permission::Granted("listed".to_owned()));
    assert!(
        verdict
            .events
            .iter()
            .any(|e| e.reason == rules::EventReason::ForceReapplyAllowed),
        "{:?}",
        verdict.events
    );
}
