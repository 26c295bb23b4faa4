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
    self, AdmissionRequest, Input, ParseError, Reply, Webhook,
};
use pipelinerollout_webhook::authz::{Authorizer, StaticLists};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::policy::rules::Verdict;

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
        // The parse alone, `AdmissionRequest::parse` (which skims what the
        // rules do not read, src/skim.rs) beside serde_json reading the
        // very same types: what skimming saves.
        Entry {
            name: "parse-01-compact",
            iterations: 500,
            build: |s| Parse::build(s, Body::Fixture(ALLOWED), Reader::Skim),
        },
        Entry {
            name: "parse-01-compact-serde-json",
            iterations: 500,
            build: |s| Parse::build(s, Body::Fixture(ALLOWED), Reader::SerdeJson),
        },
        Entry {
            name: "parse-07-compact",
            iterations: 500,
            build: |s| Parse::build(s, Body::Fixture(DENIED), Reader::Skim),
        },
        Entry {
            name: "parse-07-compact-serde-json",
            iterations: 500,
            build: |s| Parse::build(s, Body::Fixture(DENIED), Reader::SerdeJson),
        },
        Entry {
            name: "parse-07-1mib-objects",
            iterations: 3,
            build: |s| Parse::build(s, Body::Grown(DENIED, 1 << 20), Reader::Skim),
        },
        Entry {
            name: "parse-07-1mib-objects-serde-json",
            iterations: 3,
            build: |s| Parse::build(s, Body::Grown(DENIED, 1 << 20), Reader::SerdeJson),
        },
    ]
}

/// The body a parse scenario reads.
#[derive(Debug, Clone, Copy)]
enum Body {
    /// A captured review, compact.
    Fixture(&'static str),
    /// A captured review whose object and old object are grown to at
    /// least this many bytes each (copies of a vertex of the pipeline).
    Grown(&'static str, usize),
}

impl Body {
    fn bytes(self) -> Result<Vec<u8>, CountedError> {
        match self {
            Self::Fixture(name) => fixture(name, Encoding::Compact),
            Self::Grown(name, size) => grown(name, size),
        }
    }
}

/// `name` with `spec.pipeline.spec.vertices` of its object and old object
/// grown with copies of their first vertex under new names, until each
/// object is at least `object_bytes` long (compact).
fn grown(name: &str, object_bytes: usize) -> Result<Vec<u8>, CountedError> {
    let failed = |why: &str| CountedError::Fixture {
        path: name.to_owned(),
        why: why.to_owned(),
    };
    let mut review: serde_json::Value = serde_json::from_slice(&fixture(name, Encoding::Compact)?)
        .map_err(|e| failed(&e.to_string()))?;
    for key in ["object", "oldObject"] {
        let object = &mut review["request"][key];
        let size = serde_json::to_vec(&*object).map_or(0, |v| v.len());
        let vertices = object
            .pointer_mut("/spec/pipeline/spec/vertices")
            .and_then(serde_json::Value::as_array_mut)
            .ok_or_else(|| failed("no spec.pipeline.spec.vertices"))?;
        let template = vertices
            .first()
            .cloned()
            .ok_or_else(|| failed("no vertex"))?;
        let one = serde_json::to_vec(&template).map_or(1, |v| v.len() + 1);
        for i in 0..object_bytes.saturating_sub(size).div_ceil(one) {
            let mut vertex = template.clone();
            vertex["name"] = serde_json::Value::from(format!("copy-{i:05}"));
            vertices.push(vertex);
        }
    }
    serde_json::to_vec(&review).map_err(|e| failed(&e.to_string()))
}

/// Which reader a parse scenario counts.
#[derive(Debug, Clone, Copy)]
enum Reader {
    /// `AdmissionRequest::parse`, as the webhook reads a body.
    Skim,
    /// serde_json reading the same envelope types.
    SerdeJson,
}

/// One parse of one body.
struct Parse {
    body: Vec<u8>,
    reader: Reader,
    /// Whether the warm-up ran: a large body warms up in two parses.
    warm: bool,
}

impl Parse {
    fn build(
        scenario: &'static str,
        body: Body,
        reader: Reader,
    ) -> Result<Box<dyn Scenario>, CountedError> {
        let body = body.bytes()?;
        let this = Self {
            body,
            reader,
            warm: false,
        };
        let skimmed = format!("{:?}", AdmissionRequest::parse(&this.body));
        let whole = format!("{:?}", this.parse());
        if skimmed != whole || skimmed.starts_with("Err") {
            return Err(CountedError::Answer {
                scenario,
                why: format!("the readers disagree or refuse: {skimmed} / {whole}"),
            });
        }
        Ok(Box::new(this))
    }

    fn parse(&self) -> Result<AdmissionRequest, ParseError> {
        let body = black_box(self.body.as_slice());
        match self.reader {
            Reader::Skim => AdmissionRequest::parse(body),
            Reader::SerdeJson => serde_json::from_slice::<admission::Envelope>(body)
                .map_err(ParseError::from)
                .and_then(AdmissionRequest::from_envelope),
        }
    }
}

impl Scenario for Parse {
    fn run(&mut self, n: u64) -> Result<(), CountedError> {
        let n = if self.warm { n } else { n.min(2) };
        self.warm = true;
        for _ in 0..n {
            black_box(self.parse().map(|r| r.uid.len()).ok());
        }
        Ok(())
    }
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
fn decide_now(policy: &Policy, lists: &StaticLists, request: &AdmissionRequest) -> Verdict {
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
        let verdict = decide_now(&this.policy, &this.lists, &this.request);
        if verdict.allowed() != allowed {
            return Err(wrong(format!(
                "expected allowed={allowed}, decided allowed={}",
                verdict.allowed()
            )));
        }
        Ok(Box::new(this))
    }
}

impl Scenario for Decide {
    fn run(&mut self, n: u64) -> Result<(), CountedError> {
        for _ in 0..n {
            let verdict = decide_now(&self.policy, &self.lists, black_box(&self.request));
            black_box(verdict.denials.len());
        }
        Ok(())
    }
}
