//! The inputs: the captured AdmissionReviews, and strategies for values,
//! raw JSON text and the mutations applied to a fixture.

use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

use crate::https_support::{fixture_json, fixtures_dir};

/// Every captured AdmissionReview, parsed.
pub static FIXTURES: LazyLock<Vec<(String, Value)>> = LazyLock::new(|| {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixtures: {names:?}");
    names
        .into_iter()
        .map(|n| {
            let v = fixture_json(&n);
            (n, v)
        })
        .collect()
});

/// Keys the decision path reads: mutations aim at them half the time, so
/// they do not all land in `managedFields`.
pub const INTERESTING_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "request",
    "uid",
    "operation",
    "resource",
    "group",
    "version",
    "subResource",
    "userInfo",
    "username",
    "groups",
    "extra",
    "dryRun",
    "namespace",
    "name",
    "object",
    "oldObject",
    "metadata",
    "annotations",
    "numaplane.numaproj.io/allow-data-loss",
    "spec",
    "pipeline",
    "lifecycle",
    "pauseGracePeriodSeconds",
    "strategy",
    "recycleStrategy",
    "scaleFactor",
    "progressive",
    "forcePromote",
    "status",
    "upgradeInProgress",
    "conditions",
    "type",
    "reason",
];

/// Paths the rules read, created (with their parents) by [`Mutation::Set`].
pub const SET_PATHS: &[&[&str]] = &[
    &["apiVersion"],
    &["kind"],
    &["request", "uid"],
    &["request", "operation"],
    &["request", "subResource"],
    &["request", "dryRun"],
    &["request", "resource", "group"],
    &["request", "resource", "resource"],
    &["request", "userInfo", "username"],
    &["request", "userInfo", "groups"],
    &["request", "object"],
    &["request", "oldObject"],
    &[
        "request",
        "object",
        "spec",
        "pipeline",
        "spec",
        "lifecycle",
        "pauseGracePeriodSeconds",
    ],
    &[
        "request",
        "oldObject",
        "spec",
        "pipeline",
        "spec",
        "lifecycle",
        "pauseGracePeriodSeconds",
    ],
    &["request", "object", "spec", "pipeline", "spec", "lifecycle"],
    &["request", "object", "spec", "pipeline"],
    &["request", "object", "spec"],
    &[
        "request",
        "object",
        "metadata",
        "annotations",
        "numaplane.numaproj.io/allow-data-loss",
    ],
    &[
        "request",
        "oldObject",
        "metadata",
        "annotations",
        "numaplane.numaproj.io/allow-data-loss",
    ],
    &["request", "object", "metadata", "annotations"],
    &[
        "request",
        "object",
        "spec",
        "strategy",
        "recycleStrategy",
        "scaleFactor",
    ],
    &[
        "request",
        "object",
        "spec",
        "strategy",
        "progressive",
        "forcePromote",
    ],
    &["request", "oldObject", "status", "upgradeInProgress"],
    &["request", "oldObject", "status", "conditions"],
];

/// Strings that are odd on the wire or meaningful to the rules.
pub fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9:._/-]{0,24}",
        prop::sample::select(vec![
            "",
            "\u{0}",
            "\u{1}\u{1f}\u{7f}",
            "\u{feff}",
            "\u{202e}gnp.exe",
            "\u{fffd}",
            "\u{10ffff}",
            "e\u{301}\u{301}\u{301}",
            "🙂👩‍👩‍👧",
            "\r\n\t\"\\/",
            "true",
            "True",
            "TRUE",
            " true",
            "false",
            "1h",
            "3600",
            "admission.k8s.io/v1",
            "admission.k8s.io/v1beta1",
            "admission.k8s.io/v2",
            "AdmissionReview",
            "CREATE",
            "UPDATE",
            "DELETE",
            "CONNECT",
            "numaplane.numaproj.io",
            "pipelinerollouts",
            "status",
            "system:masters",
            "system:serviceaccount:argocd:argocd-server",
            "PipelinePauseAndDrain",
            "PipelinePausingOrPaused",
            "PipelinePausing",
        ])
        .prop_map(str::to_owned),
        (1usize..70_000).prop_map(|n| "x".repeat(n)),
        (1usize..2_000).prop_map(|n| "🙂".repeat(n)),
    ]
}

/// Numbers at the edges of every integer and float type.
pub fn edge_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(0),
            json!(-1),
            json!(1),
            json!(29),
            json!(30),
            json!(3600),
            json!(3601),
            json!(86_400),
            json!(2_147_483_647),
            json!(2_147_483_648_i64),
            json!(9_007_199_254_740_993_i64),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(f64::MIN_POSITIVE),
            json!(100),
            json!(101),
        ]),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::num::f64::NORMAL.prop_map(Value::from),
    ]
}

/// Arbitrary JSON values, a few levels deep.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        edge_number(),
        odd_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((odd_string(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

pub fn nested(depth: usize, open: &str, inner: &str, close: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(depth * (open.len() + close.len()) + inner.len());
    for _ in 0..depth {
        out.extend_from_slice(open.as_bytes());
    }
    out.extend_from_slice(inner.as_bytes());
    for _ in 0..depth {
        out.extend_from_slice(close.as_bytes());
    }
    out
}

pub fn depth() -> impl Strategy<Value = usize> {
    prop_oneof![
        prop::sample::select(vec![100, 120, 126, 127, 128, 129, 130, 10_000]),
        1usize..20_000,
    ]
}

/// Raw JSON text (not always valid) that a `serde_json::Value` cannot hold:
/// deep nesting, numbers out of range, lone surrogates, bad escapes,
/// invalid UTF-8.
pub fn raw_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        depth().prop_map(|d| nested(d, "[", "", "]")),
        depth().prop_map(|d| nested(d, "{\"a\":", "null", "}")),
        depth().prop_map(|d| nested(d, "[{\"spec\":", "1", "}]")),
        depth().prop_map(|d| nested(d, "[", "", "")),
        prop::sample::select(vec![
            "1e400",
            "-1e400",
            "1e-400",
            "18446744073709551616",
            "-9223372036854775809",
            "340282366920938463463374607431768211456",
            "1.7976931348623157e309",
            "-0",
            "0e0",
            "1E+2",
            "3600.0",
            "36e2",
            "01",
            "+1",
            ".5",
            "NaN",
            "Infinity",
            "-Infinity",
            "True",
            "nul",
            "undefined",
            "'single'",
            "\"\\ud800\"",
            "\"\\udfff\"",
            "\"\\udc00\\ud800\"",
            "\"\\ud83d\\ude00\"",
            "\"\\u0000\"",
            "\"\\u00e9\\u0301\"",
            "\"\\/\\b\\f\\n\\r\\t\"",
            "\"\\x41\"",
            "\"\\u12\"",
            "\"\\",
            "\"unterminated",
            "\"\u{1}raw control\"",
            "\"\\u0074rue\"",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::sample::select(vec![
            &b"\"\xff\xfe\""[..],
            &b"\"\xc0\xaf\""[..],
            &b"\"\xed\xa0\x80\""[..],
            &b"\"\xe2\x82\""[..],
            &b"\"\xf4\x90\x80\x80\""[..],
        ])
        .prop_map(<[u8]>::to_vec),
        (1usize..2_000).prop_map(|n| "9".repeat(n).into_bytes()),
        (1usize..2_000).prop_map(|n| format!("0.{}1", "0".repeat(n)).into_bytes()),
        any::<i32>().prop_map(|e| format!("1e{e}").into_bytes()),
    ]
}

/// A value to put somewhere: one `serde_json` can hold, or raw text.
#[derive(Debug, Clone)]
pub enum Replacement {
    Value(Value),
    Raw(Vec<u8>),
}

pub fn replacement() -> impl Strategy<Value = Replacement> {
    prop_oneof![
        3 => json_value().prop_map(Replacement::Value),
        1 => raw_value().prop_map(Replacement::Raw),
    ]
}

/// A change to the parsed document.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Replace the value at a pointer (its type usually changes).
    Replace {
        at: Index,
        interesting: bool,
        with: Replacement,
    },
    /// Remove the value at a pointer.
    Remove { at: Index, interesting: bool },
    /// Set a path the rules read, creating its parents.
    Set { path: Index, with: Replacement },
    /// Add a second entry with the key of an existing one, in the text.
    DuplicateKey {
        at: Index,
        interesting: bool,
        key: Index,
        with: Replacement,
    },
    /// Rename a key: to an odd variant, or to the same name written with
    /// `\u` escapes.
    RenameKey {
        at: Index,
        interesting: bool,
        key: Index,
        how: u8,
    },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), any::<bool>(), replacement())
            .prop_map(|(at, interesting, with)| Mutation::Replace { at, interesting, with }),
        2 => (any::<Index>(), any::<bool>())
            .prop_map(|(at, interesting)| Mutation::Remove { at, interesting }),
        4 => (any::<Index>(), replacement()).prop_map(|(path, with)| Mutation::Set { path, with }),
        1 => (any::<Index>(), any::<bool>(), any::<Index>(), replacement()).prop_map(
            |(at, interesting, key, with)| Mutation::DuplicateKey { at, interesting, key, with }
        ),
        1 => (any::<Index>(), any::<bool>(), any::<Index>(), 0u8..5).prop_map(
            |(at, interesting, key, how)| Mutation::RenameKey { at, interesting, key, how }
        ),
    ]
}

/// A change to the bytes after serialisation.
#[derive(Debug, Clone)]
pub enum TextMutation {
    Truncate(Index),
    Overwrite(Index, u8),
    Insert(Index, Vec<u8>),
    WrapDeep(usize),
    Bom,
    Trailing(Vec<u8>),
}

pub fn text_mutation() -> impl Strategy<Value = TextMutation> {
    prop_oneof![
        any::<Index>().prop_map(TextMutation::Truncate),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| TextMutation::Overwrite(i, b)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| TextMutation::Insert(i, b)),
        depth().prop_map(TextMutation::WrapDeep),
        Just(TextMutation::Bom),
        prop::collection::vec(any::<u8>(), 1..16).prop_map(TextMutation::Trailing),
    ]
}

/// One generated body: a fixture, the changes to it, and which endpoint.
#[derive(Debug, Clone)]
pub struct Case {
    /// Which fixture.
    pub fixture: Index,
    /// The changes to the parsed document.
    pub mutations: Vec<Mutation>,
    /// The changes to its text.
    pub text: Vec<TextMutation>,
    /// Whether it goes to /mutate (else /validate).
    pub mutate: bool,
}

pub fn case() -> impl Strategy<Value = Case> {
    (
        any::<Index>(),
        prop::collection::vec(mutation(), 0..5),
        // Most cases keep the text intact so the decision path is reached.
        prop_oneof![
            4 => Just(Vec::new()),
            1 => prop::collection::vec(text_mutation(), 1..3),
        ],
        any::<bool>(),
    )
        .prop_map(|(fixture, mutations, text, mutate)| Case {
            fixture,
            mutations,
            text,
            mutate,
        })
}
