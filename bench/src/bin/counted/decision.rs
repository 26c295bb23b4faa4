//! The decision path without TLS or HTTP: `admission::answer` (the lenient
//! parse, the rules, the answer's serialisation) on the captured reviews,
//! as captured (pretty) and re-encoded compact as the API server sends them.

use std::future::Future as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use pipelinerollout_webhook::admission::{
    self, AdmissionRequest, Decided, Input, ParseError, Reply, Webhook,
};
use pipelinerollout_webhook::authz::{Authorizer, StaticLists};
use pipelinerollout_webhook::policy::Policy;

use crate::{CountedError, Entry, Scenario};

/// The allowed review: a PipelineRollout created with `kubectl apply`.
pub const ALLOWED: &str = "01-create-kubectl-apply-validate.json";
/// The denied review: alice forces a re-apply she may not.
pub const DENIED: &str = "07-allow-data-loss-true-kubectl-annotate-alice-validate.json";

/// How a fixture is sent.
#[derive(Debug, Clone, Copy)]
pub enum Encoding {
    /// As captured from the API server's audit log, indented.
    Pretty,
    /// Re-encoded without whitespace, as the API server sends it.
    Compact,
}

/// The bytes of the captured review `name` in `encoding`.
pub fn fixture(name: &str, encoding: Encoding) -> Result<Vec<u8>, CountedError> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/admission")
        .join(name);
    let failed = |why: String| CountedError::Fixture {
        path: path.display().to_string(),
        why,
    };
    let bytes = std::fs::read(&path).map_err(|e| failed(e.to_string()))?;
    match encoding {
        Encoding::Pretty => Ok(bytes),
        Encoding::Compact => {
            let value: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|e| failed(e.to_string()))?;
            serde_json::to_vec(&value).map_err(|e| failed(e.to_string()))
        }
    }
}

/// Answers through the server's decision path with the static lists, which
/// never wait: the future is ready on its first poll.
fn answer_now(
    policy: &Policy,
    lists: &Authorizer,
    body: &[u8],
) -> Option<Result<(AdmissionRequest, Reply), ParseError>> {
    let context = admission::AnswerContext::now(lists, Duration::from_secs(1));
    let future = admission::answer(Webhook::Validate, policy, body, context);
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(answer) => Some(answer),
        Poll::Pending => None,
    }
}

/// `admission::answer` on one body, under the built-in policy.
struct Answer {
    policy: Policy,
    lists: Authorizer,
    body: Vec<u8>,
}

impl Answer {
    fn build(
        scenario: &'static str,
        fixture_name: &str,
        encoding: Encoding,
        allowed: bool,
    ) -> Result<Box<dyn Scenario>, CountedError> {
        let this = Self {
            policy: Policy::built_in(),
            lists: Authorizer::StaticLists(StaticLists::new("no API server in the guard")),
            body: fixture(fixture_name, encoding)?,
        };
        let wrong = |why: String| CountedError::Answer { scenario, why };
        match answer_now(&this.policy, &this.lists, &this.body) {
            None => return Err(wrong("the static lists never wait, yet it did".to_owned())),
            Some(Err(e)) => return Err(wrong(format!("the webhook refused the body: {e}"))),
            Some(Ok((_, outcome))) if outcome.allowed() != allowed => {
                return Err(wrong(format!(
                    "expected allowed={allowed}, answered allowed={}",
                    outcome.allowed()
                )));
            }
            Some(Ok(_)) => {}
        }
        Ok(Box::new(this))
    }
}

impl Scenario for Answer {
    fn run(&mut self, n: u64) -> Result<(), CountedError> {
        for _ in 0..n {
            let answer = answer_now(&self.policy, &self.lists, black_box(&self.body));
            black_box(answer.and_then(Result::ok).map(|(_, o)| o.body.len()));
        }
        Ok(())
    }
}

/// The decision-path scenarios.
pub fn scenarios() -> Vec<Entry> {
    vec![
        Entry {
            name: "answer-01-allowed-pretty",
            iterations: 500,
            build: |s| Answer::build(s, ALLOWED, Encoding::Pretty, true),
        },
        Entry {
            name: "answer-01-allowed-compact",
            iterations: 500,
            build: |s| Answer::build(s, ALLOWED, Encoding::Compact, true),
        },
        Entry {
            name: "answer-07-denied-pretty",
            iterations: 500,
            build: |s| Answer::build(s, DENIED, Encoding::Pretty, false),
        },
        Entry {
            name: "answer-07-denied-compact",
            iterations: 500,
            build: |s| Answer::build(s, DENIED, Encoding::Compact, false),
        },
        // `admission::decide` on typed input, the request parsed once during
        // set-up: the rules' count alone (the parse and the answer are
        // counted above).
        Entry {
            name: "decide-01-allowed",
            iterations: 500,
            build: |s| Decide::build(s, ALLOWED, true),
        },
        Entry {
            name: "decide-07-denied",
            iterations: 500,
            build: |s| Decide::build(s, DENIED, false),
        },
    ]
}

/// `admission::decide` on a request parsed once, finished with the static
/// lists: the rules alone.
struct Decide {
    policy: Policy,
    lists: StaticLists,
    request: AdmissionRequest,
}

/// Decides `request`, the static lists answering what it asks, as `check`
/// does.
fn decide_now(policy: &Policy, lists: &StaticLists, request: &AdmissionRequest) -> Decided {
    let input = Input {
        webhook: Webhook::Validate,
        subject: request.subject(time::OffsetDateTime::UNIX_EPOCH),
    };
    admission::decide(policy, input).finish(|question| lists.answer(question.grant, question.user))
}

impl Decide {
    fn build(
        scenario: &'static str,
        fixture_name: &str,
        allowed: bool,
    ) -> Result<Box<dyn Scenario>, CountedError> {
        let wrong = |why: String| CountedError::Answer { scenario, why };
        let body = fixture(fixture_name, Encoding::Compact)?;
        let request = AdmissionRequest::parse(&body)
            .map_err(|e| wrong(format!("the webhook refused the body: {e}")))?;
        let this = Self {
            policy: Policy::built_in(),
            lists: StaticLists::new("no API server in the guard"),
            request,
        };
        let decided = decide_now(&this.policy, &this.lists, &this.request);
        if decided.verdict.allowed() != allowed {
            return Err(wrong(format!(
                "expected allowed={allowed}, decided allowed={}",
                decided.verdict.allowed()
            )));
        }
        Ok(Box::new(this))
    }
}

impl Scenario for Decide {
    fn run(&mut self, n: u64) -> Result<(), CountedError> {
        for _ in 0..n {
            let decided = decide_now(&self.policy, &self.lists, black_box(&self.request));
            black_box(decided.verdict.denials.len());
        }
        Ok(())
    }
}
