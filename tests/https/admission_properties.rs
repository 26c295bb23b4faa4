//! Property tests of the parsing and decision path, in process: arbitrary
//! bytes and arbitrary mutations of the captured AdmissionReviews go
//! through `admission::answer` (the server's own path); it must never
//! panic, and must either refuse the body (the server's 400) or answer with
//! a well-formed AdmissionReview that carries the request's uid.
//!
//! The default run is short (256 cases per property). For a long run:
//! `PROPTEST_CASES=100000 cargo test --release --test https admission_properties::`
//! (see docs/robustness.md); every `PROPTEST_*` variable is honoured.

use crate::admission_bodies;
use crate::https_support;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use admission_bodies::build::build;
use admission_bodies::strategy::case;
use base64::Engine as _;
use pipelinerollout_webhook::admission::{API_VERSIONS, Webhook};
use pipelinerollout_webhook::policy::Policy;
use proptest::prelude::*;
use proptest::test_runner::{
    FileFailurePersistence, TestCaseError, TestRunner, contextualize_config,
};
use serde_json::Value;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::built_in);

/// `cases` per property unless `PROPTEST_CASES` (or any other `PROPTEST_*`
/// variable) says otherwise.
fn config(cases: u32) -> ProptestConfig {
    contextualize_config(ProptestConfig {
        cases,
        // Shrinking 10,000-deep bodies is slow and rarely needed to read a
        // failure; keep it bounded.
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    })
}

// ---------------------------------------------------------------------------
// The property

/// What one body led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Refused: the server's 400.
    Refused,
    /// Answered, without the rules judging it (DELETE, other resources).
    Answered,
    /// Answered after the rules judged it.
    Judged,
    /// Judged, with a patch that was checked to apply.
    Patched,
}

/// The uid and apiVersion of a well-formed envelope, as `serde_json` reads
/// the body (the last of duplicate keys wins there).
fn envelope(sent: &Value) -> Option<(&str, &str)> {
    let api_version = sent.get("apiVersion")?.as_str()?;
    let uid = sent.get("request")?.as_object()?.get("uid")?.as_str()?;
    (API_VERSIONS.contains(&api_version)
        && sent.get("kind")? == "AdmissionReview"
        && !uid.is_empty())
    .then_some((api_version, uid))
}

/// Runs one body through `handle` and checks the answer.
fn check(webhook: Webhook, body: &[u8], tampered: bool) -> Result<Seen, TestCaseError> {
    let result = https_support::answer_now(webhook, &POLICY, body);
    // How serde_json reads the same bytes; `None` when it cannot (invalid
    // UTF-8 or lone surrogates in skipped strings, numbers out of range,
    // nesting past 128: the lenient reader skips those it does not need).
    let sent: Option<Value> = serde_json::from_slice(body).ok();
    let (request, outcome) = match result {
        Err(e) => {
            // A body with a usable envelope must be answered, not refused,
            // unless it has duplicate keys or broken text.
            if let (Some(sent), false) = (&sent, tampered) {
                prop_assert!(
                    envelope(sent).is_none(),
                    "refused ({e}) a body with a valid envelope"
                );
            }
            return Ok(Seen::Refused);
        }
        Ok(answered) => answered,
    };
    let answer: Value = serde_json::from_slice(&outcome.body)
        .map_err(|e| TestCaseError::fail(format!("answer is not JSON: {e}")))?;
    prop_assert_eq!(&answer["kind"], "AdmissionReview");
    let api_version = answer["apiVersion"].as_str().unwrap_or_default();
    prop_assert!(API_VERSIONS.contains(&api_version), "{}", answer);
    prop_assert_eq!(api_version, request.api_version.as_str());
    let response = &answer["response"];
    prop_assert!(response.is_object(), "{}", answer);
    prop_assert_eq!(response["uid"].as_str(), Some(request.uid.as_str()));
    prop_assert!(!request.uid.is_empty());
    prop_assert_eq!(response["allowed"].as_bool(), Some(outcome.allowed()));
    if outcome.allowed() {
        prop_assert!(outcome.message().is_none());
    } else {
        prop_assert_eq!(response["status"]["code"].as_u64(), Some(403));
        prop_assert!(
            response["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        prop_assert!(response.get("patch").is_none());
    }
    if webhook == Webhook::Validate {
        prop_assert!(response.get("patch").is_none(), "patch from /validate");
        prop_assert!(response.get("patchType").is_none());
    }
    if let Some(sent) = &sent {
        // Echoed exactly as sent.
        if !tampered {
            let (want_version, want_uid) = envelope(sent)
                .ok_or_else(|| TestCaseError::fail("answered a body without a valid envelope"))?;
            prop_assert_eq!(api_version, want_version);
            prop_assert_eq!(response["uid"].as_str(), Some(want_uid));
        }
        if let Some(patch) = response.get("patch") {
            prop_assert_eq!(&response["patchType"], "JSONPatch");
            let text = patch
                .as_str()
                .ok_or_else(|| TestCaseError::fail(format!("patch is not base64 text: {patch}")))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| TestCaseError::fail(format!("patch is not base64: {e}")))?;
            let patch: json_patch::Patch = serde_json::from_slice(&bytes)
                .map_err(|e| TestCaseError::fail(format!("patch is not a JSON Patch: {e}")))?;
            let mut object = sent["request"]["object"].clone();
            let before = object
                .pointer(https_support::TIMEOUT_POINTER)
                .and_then(Value::as_u64);
            json_patch::patch(&mut object, &patch)
                .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
            let written = object
                .pointer(https_support::TIMEOUT_POINTER)
                .and_then(Value::as_u64);
            // The pause timeout is the default written, or as it was (a
            // patch may default only the deletion timeout).
            prop_assert_eq!(written, outcome.verdict.defaulted.or(before));
            return Ok(Seen::Patched);
        }
    }
    Ok(if outcome.judged {
        Seen::Judged
    } else {
        Seen::Answered
    })
}

/// Runs `strategy` for `cases` (or `PROPTEST_CASES`) cases through `test`.
fn run<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<Vec<Seen>, TestCaseError>,
) -> [usize; 4] {
    let counts = [(); 4].map(|()| AtomicUsize::new(0));
    let mut runner = TestRunner::new(ProptestConfig {
        // Failures are saved here and replayed first on the next run.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            format!(
                "{}/tests/proptest-regressions/{name}.txt",
                env!("CARGO_MANIFEST_DIR")
            )
            .leak(),
        ))),
        source_file: Some(file!()),
        test_name: Some(name.to_owned().leak()),
        ..config(cases)
    });
    let started = std::time::Instant::now();
    let outcome = runner.run(&strategy, |value| {
        for r in test(value)? {
            counts[r as usize].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    let counts = counts.map(AtomicUsize::into_inner);
    eprintln!(
        "{name}: {} cases in {:?}: refused {}, answered unjudged {}, judged {}, patched {}",
        runner.config().cases,
        started.elapsed(),
        counts[0],
        counts[1],
        counts[2],
        counts[3],
    );
    if let Err(e) = outcome {
        panic!("{name}: {e}");
    }
    counts
}

#[test]
fn arbitrary_bytes_never_panic() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096);
    run("arbitrary_bytes", 256, bytes, |body| {
        Ok(vec![
            check(Webhook::Validate, &body, true)?,
            check(Webhook::Mutate, &body, true)?,
        ])
    });
}

/// JSON-looking token soup, alone and after a valid envelope's opening.
#[test]
fn json_token_soup_never_panics() {
    let token = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\"",
        "\\",
        "\\u",
        "d800",
        "0",
        "-",
        "1e400",
        ".",
        "true",
        "null",
        " ",
        "\"uid\"",
        "\"request\"",
        "\"object\"",
        "\"spec\"",
        "\"x\"",
        "\u{0}",
        "\u{ff}",
    ]);
    let soup = (any::<bool>(), prop::collection::vec(token, 0..400)).prop_map(|(prefixed, tokens)| {
        let mut body = if prefixed {
            String::from(
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"soup","operation":"CREATE","resource":{"group":"numaplane.numaproj.io","resource":"pipelinerollouts"},"object":"#,
            )
        } else {
            String::new()
        };
        body.extend(tokens);
        body.into_bytes()
    });
    run("json_token_soup", 256, soup, |body| {
        Ok(vec![
            check(Webhook::Validate, &body, true)?,
            check(Webhook::Mutate, &body, true)?,
        ])
    });
}

#[test]
fn mutated_fixtures_are_refused_or_answered_with_their_uid() {
    let counts = run("mutated_fixtures", 256, case(), |case| {
        let (body, tampered) = build(&case);
        let webhook = if case.mutate {
            Webhook::Mutate
        } else {
            Webhook::Validate
        };
        Ok(vec![check(webhook, &body, tampered)?])
    });
    // The mutations must not all end in a refusal: most answers must come
    // from the rules, or this tests only the parser's error path.
    let total: usize = counts.iter().sum();
    assert!(
        (counts[2] + counts[3]) * 3 >= total,
        "too few cases reached the rules: {counts:?}"
    );
}
