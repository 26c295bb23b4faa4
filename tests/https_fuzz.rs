//! Property tests of the parsing and decision path: arbitrary bytes and
//! arbitrary mutations of the captured AdmissionReviews go through
//! `admission::answer` (the server's own path); it must never panic, and must either refuse the body
//! (the server's 400) or answer with a well-formed AdmissionReview that
//! carries the request's uid. A few of the nastiest bodies also go to a real
//! server over HTTPS.
//!
//! The default run is short (256 cases per property). For a long run:
//! `PROPTEST_CASES=100000 cargo test --release --test https_fuzz` (see
//! docs/robustness.md); every `PROPTEST_*` variable is honoured.

mod https_support;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use https_support::{Client, TestServer, fixture, fixture_json, fixtures_dir, response_for};
use hyper::StatusCode;
use pipelinerollout_webhook::admission::{API_VERSIONS, Webhook};
use pipelinerollout_webhook::policy::Policy;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::{
    FileFailurePersistence, TestCaseError, TestRunner, contextualize_config,
};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------
// Inputs

/// Every captured AdmissionReview, parsed.
static FIXTURES: LazyLock<Vec<(String, Value)>> = LazyLock::new(|| {
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

/// Keys the decision path reads: mutations aim at them half the time, so
/// they do not all land in `managedFields`.
const INTERESTING_KEYS: &[&str] = &[
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
const SET_PATHS: &[&[&str]] = &[
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
fn odd_string() -> impl Strategy<Value = String> {
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
fn edge_number() -> impl Strategy<Value = Value> {
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
fn json_value() -> impl Strategy<Value = Value> {
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

fn nested(depth: usize, open: &str, inner: &str, close: &str) -> Vec<u8> {
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

fn depth() -> impl Strategy<Value = usize> {
    prop_oneof![
        prop::sample::select(vec![100, 120, 126, 127, 128, 129, 130, 10_000]),
        1usize..20_000,
    ]
}

/// Raw JSON text (not always valid) that a `serde_json::Value` cannot hold:
/// deep nesting, numbers out of range, lone surrogates, bad escapes,
/// invalid UTF-8.
fn raw_value() -> impl Strategy<Value = Vec<u8>> {
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
enum Replacement {
    Value(Value),
    Raw(Vec<u8>),
}

fn replacement() -> impl Strategy<Value = Replacement> {
    prop_oneof![
        3 => json_value().prop_map(Replacement::Value),
        1 => raw_value().prop_map(Replacement::Raw),
    ]
}

/// A change to the parsed document.
#[derive(Debug, Clone)]
enum Mutation {
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

fn mutation() -> impl Strategy<Value = Mutation> {
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
enum TextMutation {
    Truncate(Index),
    Overwrite(Index, u8),
    Insert(Index, Vec<u8>),
    WrapDeep(usize),
    Bom,
    Trailing(Vec<u8>),
}

fn text_mutation() -> impl Strategy<Value = TextMutation> {
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
struct Case {
    fixture: Index,
    mutations: Vec<Mutation>,
    text: Vec<TextMutation>,
    mutate: bool,
}

fn case() -> impl Strategy<Value = Case> {
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

// ---------------------------------------------------------------------------
// Applying mutations

/// Every pointer in `v` (as tokens), parents before children.
fn pointers(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                prefix.push(k.clone());
                pointers(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                prefix.push(i.to_string());
                pointers(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn is_interesting(tokens: &[String]) -> bool {
    tokens
        .iter()
        .all(|t| INTERESTING_KEYS.contains(&t.as_str()) || t.parse::<usize>().is_ok())
}

fn pick(doc: &Value, at: &Index, interesting: bool, objects_only: bool) -> Option<Vec<String>> {
    let mut all = Vec::new();
    pointers(doc, &mut Vec::new(), &mut all);
    let lookup = |p: &Vec<String>| get(doc, p);
    let mut candidates: Vec<Vec<String>> = all
        .iter()
        .filter(|p| !objects_only || lookup(p).is_some_and(Value::is_object))
        .cloned()
        .collect();
    if interesting {
        let narrowed: Vec<Vec<String>> = candidates
            .iter()
            .filter(|p| is_interesting(p))
            .cloned()
            .collect();
        if !narrowed.is_empty() {
            candidates = narrowed;
        }
    }
    if candidates.is_empty() {
        None
    } else {
        Some(at.get(&candidates).clone())
    }
}

fn get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get(t),
        Value::Array(a) => a.get(t.parse::<usize>().ok()?),
        _ => None,
    })
}

fn get_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get_mut(t),
        Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Builds the body: the document with placeholders, then the placeholders
/// replaced by raw text.
struct Builder {
    doc: Value,
    raw: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys to write with `\u` escapes, done last so that no later
    /// mutation adds the same key again (a duplicate).
    escapes: Vec<(Index, bool, Index)>,
}

impl Builder {
    /// A string that stands for raw text until [`Builder::finish`].
    fn placeholder(&mut self, text: Vec<u8>) -> Value {
        let marker = format!("\u{1}PH{}\u{1}", self.raw.len());
        let pattern = serde_json::to_vec(&Value::String(marker.clone())).expect("string");
        self.raw.push((pattern, text));
        Value::String(marker)
    }

    fn value(&mut self, with: &Replacement) -> Value {
        match with {
            Replacement::Value(v) => v.clone(),
            Replacement::Raw(text) => self.placeholder(text.clone()),
        }
    }

    fn raw_text(with: &Replacement) -> Vec<u8> {
        match with {
            Replacement::Value(v) => serde_json::to_vec(v).expect("value"),
            Replacement::Raw(text) => text.clone(),
        }
    }

    fn apply(&mut self, m: &Mutation) {
        match m {
            Mutation::Replace {
                at,
                interesting,
                with,
            } => {
                let Some(p) = pick(&self.doc, at, *interesting, false) else {
                    return;
                };
                let value = self.value(with);
                if let Some(slot) = get_mut(&mut self.doc, &p) {
                    *slot = value;
                }
            }
            Mutation::Remove { at, interesting } => {
                let Some(mut p) = pick(&self.doc, at, *interesting, false) else {
                    return;
                };
                let Some(last) = p.pop() else { return };
                match get_mut(&mut self.doc, &p) {
                    Some(Value::Object(m)) => {
                        m.remove(&last);
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(i) = last.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
            Mutation::Set { path, with } => {
                let tokens = path.get(SET_PATHS);
                let value = self.value(with);
                let mut node = &mut self.doc;
                for key in &tokens[..tokens.len() - 1] {
                    if !node.is_object() {
                        *node = Value::Object(Map::new());
                    }
                    node = node
                        .as_object_mut()
                        .expect("object")
                        .entry(*key)
                        .or_insert_with(|| Value::Object(Map::new()));
                }
                if !node.is_object() {
                    *node = Value::Object(Map::new());
                }
                node.as_object_mut()
                    .expect("object")
                    .insert(tokens[tokens.len() - 1].to_owned(), value);
            }
            Mutation::DuplicateKey {
                at,
                interesting,
                key,
                with,
            } => {
                let Some(p) = pick(&self.doc, at, *interesting, true) else {
                    return;
                };
                let n = self.raw.len();
                let Some(Value::Object(map)) = get_mut(&mut self.doc, &p) else {
                    return;
                };
                let keys: Vec<String> = map.keys().cloned().collect();
                let name = if keys.is_empty() {
                    "uid".to_owned()
                } else {
                    key.get(&keys).clone()
                };
                let marker = format!("\u{1}DUP{n}\u{1}");
                map.insert(marker.clone(), Value::Null);
                let mut pattern = serde_json::to_vec(&Value::String(marker)).expect("key");
                pattern.extend_from_slice(b":null");
                let mut text = serde_json::to_vec(&Value::String(name)).expect("key");
                text.push(b':');
                text.extend_from_slice(&Self::raw_text(with));
                self.raw.push((pattern, text));
            }
            Mutation::RenameKey {
                at,
                interesting,
                key,
                how: 4..,
            } => self.escapes.push((*at, *interesting, *key)),
            Mutation::RenameKey {
                at,
                interesting,
                key,
                how,
            } => {
                let Some(p) = pick(&self.doc, at, *interesting, true) else {
                    return;
                };
                let Some(Value::Object(map)) = get_mut(&mut self.doc, &p) else {
                    return;
                };
                let keys: Vec<String> = map.keys().cloned().collect();
                if keys.is_empty() {
                    return;
                }
                let old = key.get(&keys).clone();
                let value = map.remove(&old).expect("key present");
                let renamed = match how {
                    0 => old.to_uppercase(),
                    1 => format!("{old}\u{0}"),
                    2 => format!("\u{feff}{old}"),
                    _ => format!("{old} "),
                };
                map.insert(renamed, value);
            }
        }
    }

    /// Writes one key as the same name with every character as `\uXXXX`.
    fn escape_key(&mut self, at: &Index, interesting: bool, key: &Index) {
        let Some(p) = pick(&self.doc, at, interesting, true) else {
            return;
        };
        let n = self.raw.len();
        let Some(Value::Object(map)) = get_mut(&mut self.doc, &p) else {
            return;
        };
        let keys: Vec<String> = map
            .keys()
            .filter(|k| !k.starts_with('\u{1}'))
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        let old = key.get(&keys).clone();
        let value = map.remove(&old).expect("key present");
        let marker = format!("\u{1}KEY{n}\u{1}");
        let pattern = serde_json::to_vec(&Value::String(marker.clone())).expect("key");
        let mut text = String::from("\"");
        for unit in old.encode_utf16() {
            text.push_str(&format!("\\u{unit:04x}"));
        }
        text.push('"');
        self.raw.push((pattern, text.into_bytes()));
        map.insert(marker, value);
    }

    fn finish(mut self) -> Vec<u8> {
        for (at, interesting, key) in std::mem::take(&mut self.escapes) {
            self.escape_key(&at, interesting, &key);
        }
        let mut body = serde_json::to_vec(&self.doc).expect("serialise");
        for (pattern, text) in &self.raw {
            if let Some(at) = find(&body, pattern) {
                body.splice(at..at + pattern.len(), text.iter().copied());
            }
        }
        body
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn apply_text(body: &mut Vec<u8>, m: &TextMutation) {
    match m {
        TextMutation::Truncate(at) => {
            let keep = at.index(body.len().max(1));
            body.truncate(keep);
        }
        TextMutation::Overwrite(at, byte) => {
            if !body.is_empty() {
                let i = at.index(body.len());
                body[i] = *byte;
            }
        }
        TextMutation::Insert(at, bytes) => {
            let i = at.index(body.len() + 1);
            body.splice(i..i, bytes.iter().copied());
        }
        TextMutation::WrapDeep(depth) => {
            let mut wrapped = nested(*depth, "[", "", "");
            wrapped.extend_from_slice(body);
            wrapped.extend(std::iter::repeat_n(b']', *depth));
            *body = wrapped;
        }
        TextMutation::Bom => {
            body.splice(0..0, *b"\xef\xbb\xbf");
        }
        TextMutation::Trailing(bytes) => body.extend_from_slice(bytes),
    }
}

/// The body of a case, and whether it may hold duplicate keys or broken text.
fn build(case: &Case) -> (Vec<u8>, bool) {
    let (_, doc) = case.fixture.get(&FIXTURES);
    let mut builder = Builder {
        doc: doc.clone(),
        raw: Vec::new(),
        escapes: Vec::new(),
    };
    for m in &case.mutations {
        builder.apply(m);
    }
    let mut body = builder.finish();
    for m in &case.text {
        apply_text(&mut body, m);
    }
    let tampered = !case.text.is_empty()
        || case
            .mutations
            .iter()
            .any(|m| matches!(m, Mutation::DuplicateKey { .. }));
    (body, tampered)
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
            json_patch::patch(&mut object, &patch)
                .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
            let written = object
                .pointer(https_support::TIMEOUT_POINTER)
                .and_then(Value::as_u64);
            prop_assert_eq!(written, outcome.decision.defaulted);
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

// ---------------------------------------------------------------------------
// The nastiest bodies over real HTTPS

fn with_text(name: &str, pointer: &str, text: &[u8]) -> Vec<u8> {
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

fn nasty_bodies() -> Vec<(String, &'static str, Vec<u8>)> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nastiest_bodies_over_https_leave_the_server_serving() {
    let server = TestServer::start(Policy::built_in()).await;
    let client: Client = server.client();
    let mut report = Vec::new();
    for (what, path, body) in nasty_bodies() {
        let webhook = if path == "/mutate" {
            Webhook::Mutate
        } else {
            Webhook::Validate
        };
        let expected = https_support::answer_now(webhook, &POLICY, &body);
        let answer = client.post(path, body.clone()).await;
        match expected {
            Ok((_, outcome)) => {
                assert_eq!(answer.status, StatusCode::OK, "{what}: {}", answer.text());
                assert_eq!(
                    answer.body.as_ref(),
                    outcome.body.as_slice(),
                    "{what}: the server answers as answer() does"
                );
            }
            Err(_) => {
                assert!(
                    answer.status.is_client_error(),
                    "{what}: {} {}",
                    answer.status,
                    answer.text()
                );
            }
        }
        let summary = if answer.status == StatusCode::OK {
            let response = &answer.json()["response"];
            format!(
                "allowed {}, {}",
                response["allowed"],
                response["status"]["message"]
                    .as_str()
                    .or_else(|| response["warnings"][0].as_str())
                    .unwrap_or("")
            )
        } else {
            answer.text()
        };
        let summary: String = summary.trim().chars().take(110).collect();
        report.push(format!(
            "{what} ({} bytes): {} {summary}",
            body.len(),
            answer.status.as_u16()
        ));
    }
    eprintln!("nastiest bodies over HTTPS:\n  {}", report.join("\n  "));
    // Still serving, and correctly.
    let request = fixture_json("01-create-kubectl-apply-validate.json");
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], true);
    let (status, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        metrics.contains("pipelinerollout_webhook_requests_in_flight 0"),
        "{metrics}"
    );
}
