//! The nastiest bodies: deep nesting, numbers out of range, broken text,
//! duplicate keys, bodies at the size limit, and a few generated cases.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::Value;

use super::build::{build, find};
use super::strategy::{case, nested};
use crate::https_support::{fixture, fixture_json};

pub fn with_text(name: &str, pointer: &str, text: &[u8]) -> Vec<u8> {
    let mut doc = fixture_json(name);
    let marker = Value::String("\u{1}NASTY\u{1}".into());
    *doc.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = marker.clone();
    let mut body = serde_json::to_vec(&doc).expect("serialise");
    let pattern = serde_json::to_vec(&marker).expect("marker");
    let at = find(&body, &pattern).expect("marker present");
    body.splice(at..at + pattern.len(), text.iter().copied());
    body
}

pub fn nasty_bodies() -> Vec<(String, &'static str, Vec<u8>)> {
    const UPDATE: &str = "07-allow-data-loss-true-kubectl-annotate-alice-validate.json";
    const CREATE: &str = "11-create-no-lifecycle-kubectl-create-mutate.json";
    const TIMEOUT: &str = "/request/object/spec/pipeline/spec/lifecycle/pauseGracePeriodSeconds";
    let deep = nested(10_000, "[", "", "]");
    let mut v = vec![
        ("10,000 nested arrays".to_owned(), "/validate", deep.clone()),
        (
            "10,000 nested arrays as the object".into(),
            "/mutate",
            with_text(CREATE, "/request/object", &deep),
        ),
        (
            "10,000 nested objects in managedFields".into(),
            "/validate",
            with_text(
                UPDATE,
                "/request/object/metadata/managedFields",
                &nested(10_000, "{\"a\":", "1", "}"),
            ),
        ),
        (
            "timeout 1e400".into(),
            "/validate",
            with_text(UPDATE, TIMEOUT, b"1e400"),
        ),
        (
            "timeout u64::MAX + 1".into(),
            "/validate",
            with_text(UPDATE, TIMEOUT, b"18446744073709551616"),
        ),
        (
            "timeout of 5,000 digits".into(),
            "/validate",
            with_text(UPDATE, TIMEOUT, "9".repeat(5_000).as_bytes()),
        ),
        (
            "uid a lone surrogate".into(),
            "/validate",
            with_text(UPDATE, "/request/uid", b"\"\\ud800\""),
        ),
        (
            "invalid UTF-8 in a skipped string".into(),
            "/validate",
            with_text(
                UPDATE,
                "/request/object/metadata/uid",
                b"\"\xff\xfe\xed\xa0\x80\"",
            ),
        ),
        (
            "RTL override and NUL in the user name".into(),
            "/validate",
            with_text(
                UPDATE,
                "/request/userInfo/username",
                b"\"\\u202e\\u0000admin\\ufeff\"",
            ),
        ),
        (
            "escaped keys everywhere".into(),
            "/mutate",
            String::from_utf8(fixture(CREATE))
                .expect("UTF-8")
                .replace("\"spec\"", "\"\\u0073\\u0070\\u0065\\u0063\"")
                .replace("\"uid\"", "\"\\u0075id\"")
                .into_bytes(),
        ),
        (
            "truncated in the middle".into(),
            "/validate",
            fixture(UPDATE)[..fixture(UPDATE).len() / 2].to_vec(),
        ),
        (
            "8 MiB of [".into(),
            "/validate",
            vec![b'['; 8 * 1024 * 1024],
        ),
        (
            "a 7 MiB annotation".into(),
            "/validate",
            with_text(
                UPDATE,
                "/request/object/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
                format!("\"{}\"", "\\u00e9".repeat(7 * 1024 * 1024 / 6)).as_bytes(),
            ),
        ),
    ];
    for (key, what) in [("uid", "uid"), ("request", "request"), ("object", "object")] {
        let body = String::from_utf8(fixture(UPDATE))
            .expect("UTF-8")
            .replacen(
                &format!("\"{key}\":"),
                &format!("\"{key}\":\"dup\",\"{key}\":"),
                1,
            )
            .into_bytes();
        v.push((format!("duplicate {what} key"), "/validate", body));
    }
    // And a few generated ones, with a fixed seed.
    let mut runner = TestRunner::deterministic();
    let strategy = case();
    for i in 0..16 {
        let case = strategy.new_tree(&mut runner).expect("case").current();
        let (body, _) = build(&case);
        let path = if case.mutate { "/mutate" } else { "/validate" };
        v.push((format!("generated #{i}"), path, body));
    }
    v
}
