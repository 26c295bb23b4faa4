//! The decision path alone, without TLS or HTTP: `admission::answer` (parse
//! the AdmissionReview leniently, decide, serialise the answer) on real
//! fixtures and on generated large PipelineRollouts, next to
//! `serde_json::from_slice::<Value>` of the same bytes (what parsing the whole
//! document costs, before any deciding or answering), and `admission::decide`
//! alone on the typed input read from captured fixtures, allowed and denied
//! (what the audit and `check` pay per object, without the parse).
//!
//! `cargo bench --bench decision`; see BENCHMARKS.md.

use std::future::Future as _;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pipelinerollout_webhook::admission::{
    self, AdmissionRequest, Input, ParseError, Reply, Webhook,
};
use pipelinerollout_webhook::authz::{Authorizer, StaticLists};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::policy::rules::Verdict;
use serde_json::Value;
use support::{MAIN, fixture, grown};

mod support;

fn bodies() -> Vec<(&'static str, Webhook, Vec<u8>)> {
    vec![
        ("07-validate-14KiB", Webhook::Validate, fixture(MAIN)),
        (
            "07-mutate-14KiB",
            Webhook::Mutate,
            fixture("07-allow-data-loss-true-kubectl-annotate-alice-mutate.json"),
        ),
        (
            "11-mutate-3KiB",
            Webhook::Mutate,
            fixture("11-create-no-lifecycle-kubectl-create-mutate.json"),
        ),
        (
            "01-validate-6KiB",
            Webhook::Validate,
            fixture("01-create-kubectl-apply-validate.json"),
        ),
        (
            "07-validate-64KiB-objects",
            Webhook::Validate,
            grown(64 * 1024),
        ),
        (
            "07-validate-1MiB-objects",
            Webhook::Validate,
            grown(1024 * 1024),
        ),
    ]
}

/// Answers through the server's decision path with the static lists, which
/// never wait: the future is ready on its first poll.
fn answer_now(
    webhook: Webhook,
    policy: &Policy,
    lists: &Authorizer,
    body: &[u8],
) -> Result<(AdmissionRequest, Reply), ParseError> {
    let judge = admission::AnswerContext::now(lists, Duration::from_secs(1));
    let future = admission::answer(webhook, policy, body, judge);
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(answer) => answer,
        Poll::Pending => panic!("the static lists never wait"),
    }
}

/// Captured fixtures for `decide`, with whether each is allowed.
fn typed_cases() -> Vec<(&'static str, Webhook, bool, AdmissionRequest)> {
    let read = |name: &str| AdmissionRequest::parse(&fixture(name)).expect("a captured review");
    vec![
        (
            "01-validate-allowed",
            Webhook::Validate,
            true,
            read("01-create-kubectl-apply-validate.json"),
        ),
        ("07-validate-denied", Webhook::Validate, false, read(MAIN)),
        (
            "13-validate-denied",
            Webhook::Validate,
            false,
            read("13-create-string-timeout-kubectl-create-validate.json"),
        ),
        (
            "11-mutate-defaulted",
            Webhook::Mutate,
            true,
            read("11-create-no-lifecycle-kubectl-create-mutate.json"),
        ),
    ]
}

/// Decides on typed input, the static lists answering what it asks (as
/// `check` does): whether the rules judged it, and the verdict.
fn decide_now(
    webhook: Webhook,
    policy: &Policy,
    lists: &StaticLists,
    request: &AdmissionRequest,
) -> (bool, Verdict) {
    let input = Input {
        webhook,
        subject: request.subject(time::OffsetDateTime::now_utc()),
    };
    let judgement = admission::decide(policy, input);
    let judged = judgement.judged();
    let verdict = judgement.finish(|question| lists.answer(question.grant, question.user));
    (judged, verdict)
}

fn decide(c: &mut Criterion) {
    let lists = StaticLists::new("no API server in the benchmark");
    let policy = Policy::built_in();
    let cases = typed_cases();
    // Each case must be decided as labelled, or the figures mean nothing.
    for (name, webhook, allowed, request) in &cases {
        let (judged, verdict) = decide_now(*webhook, &policy, &lists, request);
        assert!(judged, "{name}: not judged");
        assert_eq!(verdict.allowed(), *allowed, "{name}");
    }
    let mut group = c.benchmark_group("decide");
    for (name, webhook, _, request) in &cases {
        group.bench_with_input(BenchmarkId::from_parameter(name), request, |b, request| {
            b.iter(|| {
                let (_, verdict) = decide_now(*webhook, &policy, &lists, black_box(request));
                black_box(verdict.denials.len())
            });
        });
    }
    group.finish();
}

fn decision(c: &mut Criterion) {
    let lists = Authorizer::StaticLists(StaticLists::new("no API server in the benchmark"));
    let policy = Policy::built_in();
    let bodies = bodies();
    // Every body must be answered, not refused, or the figures mean nothing.
    for (name, webhook, body) in &bodies {
        answer_now(*webhook, &policy, &lists, body)
            .unwrap_or_else(|e| panic!("{name}: the webhook refused the body: {e}"));
    }
    let mut group = c.benchmark_group("handle");
    for (name, webhook, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), body, |b, body| {
            b.iter(|| {
                let answer = answer_now(*webhook, &policy, &lists, black_box(body));
                black_box(answer.map(|(_, outcome)| outcome.body.len()).ok())
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("value_parse");
    for (name, _, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), body, |b, body| {
            b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(body)).ok()));
        });
    }
    group.finish();
}

criterion_group!(benches, decision, decide);
criterion_main!(benches);
