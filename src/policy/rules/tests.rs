//! Table-driven tests of the pure admission rules: rules 1 to 11 of
//! `/validate` (docs/rules.md) and the `/mutate` section. Every case has a
//! name that is printed when it fails.

use serde_json::{Value, json};

use super::*;
use crate::policy::{Policy, UserInfo};
use json_patch::PatchOperation;

use crate::rollout::{
    ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, PipelineRollout, SCALE_FACTOR_FIELD, TIMEOUT_FIELD,
    TIMEOUT_PATH,
};

// ---------------------------------------------------------------------------
// Fixtures: policies, users, objects.
// ---------------------------------------------------------------------------

/// Two overrides: the first wins for `payments-eu` and `ledger` (which `pay*`
/// also matches for `payments-eu`); `min` comes from the top level.
const OVERRIDES: &str = "\
drainTimeout:
  min: 60s
  namespaces:
  - match: [\"payments-*\", ledger]
    default: 5m
    allowNoTimeout: false
  - match: [\"pay*\"]
    default: 10m
    max: 2h
";

/// The time every case is judged at.
fn now() -> time::OffsetDateTime {
    time::macros::datetime!(2026-12-01 10:00:00 UTC)
}

fn policy(yaml: &str) -> Policy {
    Policy::from_yaml(yaml).unwrap_or_else(|e| panic!("test policy {yaml:?} is invalid: {e}"))
}

fn built_in() -> Policy {
    Policy::built_in()
}

fn overrides() -> Policy {
    policy(OVERRIDES)
}

fn warn_mode() -> Policy {
    policy("mode: warn\n")
}

fn argocd() -> UserInfo {
    UserInfo::new(
        "system:serviceaccount:argocd:argocd-server",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:argocd",
            "system:authenticated",
        ],
    )
}

fn admin() -> UserInfo {
    UserInfo::new("kube-admin", &["system:masters", "system:authenticated"])
}

fn alice() -> UserInfo {
    UserInfo::new("alice", &["devs", "system:authenticated"])
}

const SCALE_PATH: [&str; 4] = ["spec", "strategy", "recycleStrategy", "scaleFactor"];
const PROMOTE_PATH: [&str; 4] = ["spec", "strategy", "progressive", "forcePromote"];
const LIFECYCLE_PATH: [&str; 4] = ["spec", "pipeline", "spec", "lifecycle"];

/// Sets `path` in `doc`, creating (or replacing non-objects with) objects on
/// the way.
fn set(doc: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        panic!("empty path");
    };
    let mut cur = doc;
    for key in parents {
        let Some(obj) = cur.as_object_mut() else {
            panic!("not an object on the way to {path:?}");
        };
        cur = obj.entry((*key).to_owned()).or_insert_with(|| json!({}));
        if !cur.is_object() {
            *cur = json!({});
        }
    }
    match cur.as_object_mut() {
        Some(obj) => {
            obj.insert((*last).to_owned(), value);
        }
        None => panic!("not an object at the end of {path:?}"),
    }
}

/// A PipelineRollout document under construction.
#[derive(Clone)]
struct Doc(Value);

/// A realistic PipelineRollout without a drain timeout.
fn doc() -> Doc {
    Doc(json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "PipelineRollout",
        "metadata": {"name": "my-pipeline", "namespace": "default", "labels": {"team": "a"}},
        "spec": {"pipeline": {"spec": {
            "vertices": [
                {"name": "in", "source": {"generator": {"rpu": 5}}},
                {"name": "out", "sink": {"log": {}}}
            ],
            "edges": [{"from": "in", "to": "out"}]
        }}}
    }))
}

impl Doc {
    fn at(mut self, path: &[&str], value: Value) -> Self {
        set(&mut self.0, path, value);
        self
    }
    /// The drain timeout T.
    fn t(self, value: Value) -> Self {
        self.at(&TIMEOUT_PATH, value)
    }
    /// The recycle scale factor S.
    fn s(self, value: Value) -> Self {
        self.at(&SCALE_PATH, value)
    }
    /// The allow-data-loss annotation A.
    fn a(self, value: Value) -> Self {
        self.at(&["metadata", "annotations", ALLOW_DATA_LOSS], value)
    }
    /// spec.strategy.progressive.forcePromote.
    fn fp(self, value: Value) -> Self {
        self.at(&PROMOTE_PATH, value)
    }
    fn status(self, value: Value) -> Self {
        self.at(&["status"], value)
    }
    /// An unrelated edit, so an UPDATE changes something.
    fn edited(self) -> Self {
        self.at(&["metadata", "labels", "edited"], json!("yes"))
    }
    fn terminating(self) -> Self {
        self.at(
            &["metadata", "deletionTimestamp"],
            json!("2026-06-01T10:00:00Z"),
        )
        .at(&["metadata", "finalizers"], json!([]))
    }
    fn json(self) -> Value {
        self.0
    }
}

fn ppnd() -> Value {
    json!({"phase": "Pending", "upgradeInProgress": "PipelinePauseAndDrain"})
}

fn condition(status: &str, reason: &str) -> Value {
    json!({"phase": "Deployed", "upgradeInProgress": "", "conditions": [
        {"type": "ChildResourcesHealthy", "status": "True", "reason": "Successful"},
        {"type": "PipelinePausingOrPaused", "status": status, "reason": reason}
    ]})
}

fn parse(value: &Value) -> PipelineRollout {
    PipelineRollout::from_json(&value.to_string())
        .unwrap_or_else(|e| panic!("test object is not JSON: {e}"))
}

// ---------------------------------------------------------------------------
// The case type and its checker.
// ---------------------------------------------------------------------------

/// Violation kinds, so tables can name the expected denials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum K {
    Unreachable,
    NotInteger,
    TooShort,
    TooLong,
    NoTimeout,
    Overflow,
    BadScale,
    BadMetadata,
    BadAnnotation,
    Reapply,
    Promote,
}

fn kind(v: &Violation) -> K {
    match v {
        Violation::TimeoutUnreachable { .. } => K::Unreachable,
        Violation::TimeoutNotInteger { .. } => K::NotInteger,
        Violation::TimeoutTooShort { .. } => K::TooShort,
        Violation::TimeoutTooLong { .. } => K::TooLong,
        Violation::NoTimeoutNotAllowed { .. } => K::NoTimeout,
        Violation::TimeoutOverflows { .. } => K::Overflow,
        Violation::ScaleFactorInvalid { .. } => K::BadScale,
        Violation::MetadataMalformed { .. } => K::BadMetadata,
        Violation::AnnotationInvalid { .. } => K::BadAnnotation,
        Violation::ForceReapplyDenied { .. } => K::Reapply,
        Violation::ForcePromoteDenied { .. } => K::Promote,
        Violation::Unjudgeable(_) => panic!("the rules never find a request unjudgeable: {v}"),
    }
}

/// One `/validate` case.
#[derive(Clone)]
struct Case {
    name: String,
    policy: Policy,
    op: Operation,
    ns: &'static str,
    user: UserInfo,
    object: Value,
    old: Option<Value>,
    /// The kinds of the expected denials (any order).
    deny: Vec<K>,
    /// Substrings: one warning must contain each, and there are exactly as
    /// many warnings as entries.
    warn: Vec<&'static str>,
    /// Expected audit annotations: key and value prefix (exactly these keys).
    audit: Vec<(&'static str, &'static str)>,
    /// Substrings the denial message must contain.
    msg: Vec<String>,
    /// Substrings the denial message must not contain.
    not_msg: Vec<&'static str>,
}

fn create(name: &str, object: Doc) -> Case {
    Case {
        name: name.to_owned(),
        policy: built_in(),
        op: Operation::Create,
        ns: "default",
        user: alice(),
        object: object.json(),
        old: None,
        deny: Vec::new(),
        warn: Vec::new(),
        audit: Vec::new(),
        msg: Vec::new(),
        not_msg: Vec::new(),
    }
}

fn update(name: &str, old: Doc, new: Doc) -> Case {
    Case {
        op: Operation::Update,
        old: Some(old.json()),
        ..create(name, new)
    }
}

impl Case {
    fn deny(mut self, kinds: &[K]) -> Self {
        self.deny = kinds.to_vec();
        self
    }
    fn warn(mut self, parts: &[&'static str]) -> Self {
        self.warn = parts.to_vec();
        self
    }
    fn audit(mut self, key: &'static str, prefix: &'static str) -> Self {
        self.audit.push((key, prefix));
        self
    }
    fn msg(mut self, parts: &[&str]) -> Self {
        self.msg.extend(parts.iter().map(|p| (*p).to_owned()));
        self
    }
    fn not_msg(mut self, parts: &[&'static str]) -> Self {
        self.not_msg.extend_from_slice(parts);
        self
    }
    fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    fn ns(mut self, ns: &'static str) -> Self {
        self.ns = ns;
        self
    }
    fn user(mut self, user: UserInfo) -> Self {
        self.user = user;
        self
    }
}

/// Runs `/validate` on a case, asking for permission the way the admission
/// layer does.
fn run(case: &Case) -> Decision {
    let object = parse(&case.object);
    let old = case.old.as_ref().map(parse);
    let review = Review {
        operation: case.op,
        namespace: case.ns,
        user: &case.user,
        object: &object,
        old_object: old.as_ref(),
        now: now(),
    };
    validate(&case.policy, review).finish_by_static_lists()
}

fn assert_warnings_short(name: &str, warnings: &[String]) {
    for w in warnings {
        let n = w.chars().count();
        assert!(n <= 120, "{name}: warning of {n} characters: {w}");
    }
}

/// Runs a case and checks every expectation it states.
fn check(case: &Case) -> Decision {
    let name = &case.name;
    let d = run(case);
    let mut got: Vec<K> = d.denials.iter().map(kind).collect();
    got.sort();
    let mut want = case.deny.clone();
    want.sort();
    assert_eq!(got, want, "{name}: denials were {:#?}", d.denials);
    assert_eq!(d.allowed(), want.is_empty(), "{name}: allowed()");
    assert_eq!(
        d.denial_message().is_some(),
        !want.is_empty(),
        "{name}: denial_message()"
    );
    assert_eq!(
        d.warnings.len(),
        case.warn.len(),
        "{name}: warnings were {:#?}",
        d.warnings
    );
    for part in &case.warn {
        assert!(
            d.warnings.iter().any(|w| w.contains(part)),
            "{name}: no warning contains {part:?}: {:#?}",
            d.warnings
        );
    }
    let mut keys: Vec<&str> = d.audit.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want_keys: Vec<&str> = case.audit.iter().map(|(k, _)| *k).collect();
    want_keys.sort_unstable();
    assert_eq!(keys, want_keys, "{name}: audit was {:#?}", d.audit);
    for (key, prefix) in &case.audit {
        let value = &d.audit[*key];
        assert!(
            value.starts_with(prefix),
            "{name}: audit {key} = {value:?} does not start with {prefix:?}"
        );
        assert!(
            value.contains(&format!("\"{}\"", case.user.username())),
            "{name}: audit {key} = {value:?} does not name the user"
        );
    }
    let message = d.denial_message().unwrap_or_default();
    for part in &case.msg {
        assert!(
            message.contains(part.as_str()),
            "{name}: message lacks {part:?}: {message}"
        );
    }
    for part in &case.not_msg {
        assert!(
            !message.contains(part),
            "{name}: message has {part:?}: {message}"
        );
    }
    assert!(d.patch.is_empty(), "{name}: /validate must not patch");
    assert!(d.defaulted.is_none(), "{name}: /validate defaults nothing");
    assert_warnings_short(name, &d.warnings);
    d
}

fn check_all(cases: &[Case]) {
    assert!(!cases.is_empty());
    let mut names = std::collections::BTreeSet::new();
    for case in cases {
        assert!(
            names.insert(case.name.clone()),
            "duplicate case name {}",
            case.name
        );
        check(case);
    }
}

// ---------------------------------------------------------------------------
// Rules 1 to 4: the drain timeout T and the scale factor S.
// ---------------------------------------------------------------------------

fn timeout_cases() -> Vec<Case> {
    use K::*;
    let t = |v: Value| doc().t(v);
    let ts = |v: Value, s: Value| doc().t(v).s(s);
    vec![
        // Rule 1: absent or null is fine.
        create("T absent", doc()),
        create("T null", t(Value::Null)),
        create("lifecycle null", doc().at(&LIFECYCLE_PATH, Value::Null)),
        create("lifecycle empty", doc().at(&LIFECYCLE_PATH, json!({}))),
        create("no spec", Doc(json!({"kind": "PipelineRollout"}))),
        create(
            "pipeline.spec null",
            doc().at(&["spec", "pipeline", "spec"], Value::Null),
        ),
        // Rule 2: not a JSON integer.
        create("T \"1h\"", t(json!("1h"))).deny(&[NotInteger]),
        create("T \"30\"", t(json!("30"))).deny(&[NotInteger]),
        create("T 30.5", t(json!(30.5))).deny(&[NotInteger]),
        create("T true", t(json!(true))).deny(&[NotInteger]),
        create("T 1e3 (a float)", t(json!(1e3))).deny(&[NotInteger]),
        create("T 30.0 (a float)", t(json!(30.0))).deny(&[NotInteger]),
        create("T object", t(json!({"seconds": 30}))).deny(&[NotInteger]),
        create("T array", t(json!([30]))).deny(&[NotInteger]),
        // A value on the way is not an object: T cannot be read.
        create(
            "spec.pipeline a string",
            doc().at(&["spec", "pipeline"], json!("oops")),
        )
        .deny(&[Unreachable]),
        create("lifecycle an array", doc().at(&LIFECYCLE_PATH, json!([1]))).deny(&[Unreachable]),
        create("spec a number", Doc(json!({"spec": 5}))).deny(&[Unreachable]),
        // Rule 3 with the built-in policy: min 30s, max 1h, no timeout 31536000 allowed.
        create("T 0", t(json!(0))).deny(&[TooShort]),
        create("T -5", t(json!(-5))).deny(&[TooShort]),
        create("T i64::MIN", t(json!(i64::MIN))).deny(&[TooShort]),
        create("T 1", t(json!(1))).deny(&[TooShort]),
        create("T 29", t(json!(29))).deny(&[TooShort]),
        create("T 30", t(json!(30))),
        create("T 300", t(json!(300))),
        create("T 3600", t(json!(3600))),
        create("T 3601", t(json!(3601))).deny(&[TooLong]),
        create("T 86400", t(json!(86400))).deny(&[TooLong]),
        create("T 31535999", t(json!(31_535_999))).deny(&[TooLong]),
        create("T 31536000", t(json!(31_536_000))),
        create("T 31536001", t(json!(31_536_001))),
        create("T 92233720 (x2)", t(json!(92_233_720))),
        // Rule 4 with the default scale factor 50 (x2): 4611686018 x 2 = 9223372036.
        create("T 4611686018 x2", t(json!(4_611_686_018_u64))),
        create("T 4611686019 x2", t(json!(4_611_686_019_u64))).deny(&[Overflow]),
        create("T 9223372036 x2", t(json!(9_223_372_036_u64))).deny(&[Overflow]),
        create("T 10^10 x2", t(json!(10_000_000_000_u64))).deny(&[Overflow]),
        create("T i64::MAX", t(json!(i64::MAX))).deny(&[Overflow]),
        create("T i64::MAX + 1", t(json!(9_223_372_036_854_775_808_u64))).deny(&[Overflow]),
        create("T u64::MAX", t(json!(u64::MAX))).deny(&[Overflow]),
        // Above u64::MAX, serde_json reads the literal as a float.
        create(
            "T 10^20 (beyond u64)",
            t(serde_json::from_str("100000000000000000000").unwrap_or_default()),
        )
        .deny(&[NotInteger]),
        create("T 1e20 (a float)", t(json!(1e20))).deny(&[NotInteger]),
        // scaleFactor 1 (x100): 92233720 x 100 = 9223372000.
        create("T 92233720 S 1", ts(json!(92_233_720), json!(1))),
        create("T 92233721 S 1", ts(json!(92_233_721), json!(1))).deny(&[Overflow]),
        create("T 100000000 S 1", ts(json!(100_000_000), json!(1))).deny(&[Overflow]),
        create("T 31536000 S 1", ts(json!(31_536_000), json!(1))),
        create("T -5 S 1", ts(json!(-5), json!(1))).deny(&[TooShort]),
        // scaleFactor 2 (x50), 33 (x4: ceil(100/33)), 34 (x3), 100 (x1).
        create("T 184467440 S 2", ts(json!(184_467_440), json!(2))),
        create("T 184467441 S 2", ts(json!(184_467_441), json!(2))).deny(&[Overflow]),
        create("T 2305843009 S 33", ts(json!(2_305_843_009_u64), json!(33))),
        create("T 2305843010 S 33", ts(json!(2_305_843_010_u64), json!(33))).deny(&[Overflow]),
        create("T 3074457345 S 34", ts(json!(3_074_457_345_u64), json!(34))),
        create("T 3074457346 S 34", ts(json!(3_074_457_346_u64), json!(34))).deny(&[Overflow]),
        create(
            "T 9223372036 S 100",
            ts(json!(9_223_372_036_u64), json!(100)),
        ),
        create(
            "T 9223372037 S 100",
            ts(json!(9_223_372_037_u64), json!(100)),
        )
        .deny(&[Overflow]),
        // Rule 4: S present and not an integer from 1 to 100.
        create("S 0", ts(json!(600), json!(0))).deny(&[BadScale]),
        create("S 101", ts(json!(600), json!(101))).deny(&[BadScale]),
        create("S -1", ts(json!(600), json!(-1))).deny(&[BadScale]),
        create("S \"50\"", ts(json!(600), json!("50"))).deny(&[BadScale]),
        create("S 50.5", ts(json!(600), json!(50.5))).deny(&[BadScale]),
        create("S true", ts(json!(600), json!(true))).deny(&[BadScale]),
        create("S 1", ts(json!(600), json!(1))),
        create("S 33", ts(json!(600), json!(33))),
        create("S 50", ts(json!(600), json!(50))),
        create("S 100", ts(json!(600), json!(100))),
        create("S null (the default)", ts(json!(600), Value::Null)),
        create("S 0 with T absent", doc().s(json!(0))).deny(&[BadScale]),
        create("T \"1h\" and S 0", ts(json!("1h"), json!(0))).deny(&[NotInteger, BadScale]),
        create("T 29 and S 101", ts(json!(29), json!(101))).deny(&[TooShort, BadScale]),
        // A policy without no timeout: both rule 3 and rule 4 fire.
        create(
            "T 92233721 S 1, no timeout not allowed",
            ts(json!(92_233_721), json!(1)),
        )
        .policy(policy(
            "drainTimeout:\n  default: 5m\n  allowNoTimeout: false\n",
        ))
        .deny(&[NoTimeout, Overflow]),
        create("T 31536000, no timeout not allowed", t(json!(31_536_000)))
            .policy(policy(
                "drainTimeout:\n  default: 5m\n  allowNoTimeout: false\n",
            ))
            .deny(&[NoTimeout]),
        create("T 31535999, no timeout not allowed", t(json!(31_535_999)))
            .policy(policy(
                "drainTimeout:\n  default: 5m\n  allowNoTimeout: false\n",
            ))
            .deny(&[TooLong]),
        // The policy's defaultRecycleScaleFactor is used when S is absent.
        create(
            "T 92233721, defaultRecycleScaleFactor 1",
            t(json!(92_233_721)),
        )
        .policy(policy("drainTimeout:\n  defaultRecycleScaleFactor: 1\n"))
        .deny(&[Overflow]),
        create(
            "T 92233720, defaultRecycleScaleFactor 1",
            t(json!(92_233_720)),
        )
        .policy(policy("drainTimeout:\n  defaultRecycleScaleFactor: 1\n")),
        create(
            "T 92233721, defaultRecycleScaleFactor 1, S 50",
            ts(json!(92_233_721), json!(50)),
        )
        .policy(policy("drainTimeout:\n  defaultRecycleScaleFactor: 1\n")),
        // UPDATE from an absent T to a bad one is judged like a CREATE.
        update("UPDATE T absent -> \"1h\"", doc(), t(json!("1h"))).deny(&[NotInteger]),
        update("UPDATE T 600 -> 29", t(json!(600)), t(json!(29))).deny(&[TooShort]),
        update("UPDATE T 600 -> 3601", t(json!(600)), t(json!(3601))).deny(&[TooLong]),
        update(
            "UPDATE T 600 -> 5e9",
            t(json!(600)),
            t(json!(5_000_000_000_u64)),
        )
        .deny(&[Overflow]),
        update(
            "UPDATE S 50 -> 0",
            ts(json!(600), json!(50)),
            ts(json!(600), json!(0)),
        )
        .deny(&[BadScale]),
        update("UPDATE T 29 -> 30", t(json!(29)), t(json!(30))),
        update("UPDATE T \"1h\" -> 3600", t(json!("1h")), t(json!(3600))),
        update("UPDATE T 600 -> absent", t(json!(600)), doc()),
    ]
}

#[test]
fn drain_timeout_and_scale_factor_table() {
    check_all(&timeout_cases());
}

// ---------------------------------------------------------------------------
// Namespace overrides.
// ---------------------------------------------------------------------------

fn namespace_cases() -> Vec<Case> {
    use K::*;
    let t = |v: Value| doc().t(v);
    let at = |ns: &'static str, name: &str, v: Value| {
        create(&format!("{ns}: {name}"), t(v))
            .policy(overrides())
            .ns(ns)
    };
    vec![
        // First override: no timeout not allowed; max 1h from the top level.
        at("payments-eu", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
        at("payments-eu", "far above no timeout", json!(50_000_000)).deny(&[NoTimeout]),
        at("ledger", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
        // First match wins: `pay*` would allow 2h, but `payments-*` comes first.
        at("payments-eu", "2h", json!(7200)).deny(&[TooLong]),
        at("payments-eu", "1h", json!(3600)),
        // min 60s comes from the top level, not from the built-in 30s.
        at("payments-eu", "59s", json!(59)).deny(&[TooShort]),
        at("payments-eu", "60s", json!(60)),
        at("payments-", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
        // Second override: max 2h, no timeout allowed (from the top level).
        at("payroll", "2h", json!(7200)),
        at("payroll", "2h + 1s", json!(7201)).deny(&[TooLong]),
        at("payroll", "no timeout", json!(31_536_000)),
        at("payroll", "59s", json!(59)).deny(&[TooShort]),
        // No override: the top level (min 60s, max 1h, no timeout allowed).
        at("ledger-2", "no timeout", json!(31_536_000)),
        at("ledger-2", "2h", json!(7200)).deny(&[TooLong]),
        at("default", "59s", json!(59)).deny(&[TooShort]),
        at("default", "no timeout", json!(31_536_000)),
        at("xpayments-eu", "2h", json!(7200)).deny(&[TooLong]),
        // Both rules 3 and 4 in an override.
        create(
            "payments-eu: T 92233721 S 1",
            t(json!(92_233_721)).s(json!(1)),
        )
        .policy(overrides())
        .ns("payments-eu")
        .deny(&[NoTimeout, Overflow]),
    ]
}

#[test]
fn namespace_override_table() {
    check_all(&namespace_cases());
}

// ---------------------------------------------------------------------------
// Rule 5: the annotation's value.
// ---------------------------------------------------------------------------

fn annotation_cases() -> Vec<Case> {
    use K::*;
    let a = |v: Value| doc().t(json!(600)).a(v);
    vec![
        create("A \"false\"", a(json!("false"))),
        create("A \"True\"", a(json!("True"))).deny(&[BadAnnotation]),
        create("A \"TRUE\"", a(json!("TRUE"))).deny(&[BadAnnotation]),
        create("A \"yes\"", a(json!("yes"))).deny(&[BadAnnotation]),
        create("A \"\"", a(json!(""))).deny(&[BadAnnotation]),
        create("A \" true\"", a(json!(" true"))).deny(&[BadAnnotation]),
        create("A 1 (a number)", a(json!(1))).deny(&[BadAnnotation]),
        create("A true (a boolean)", a(json!(true))).deny(&[BadAnnotation]),
        // "true" itself is valid for rule 5 (rule 6 judges who sets it).
        update(
            "A \"true\" kept while pausing",
            a(json!("true")).status(ppnd()),
            a(json!("true")).status(ppnd()).edited(),
        ),
        update(
            "A \"true\" set by argocd while pausing",
            a(json!("false")).status(ppnd()),
            a(json!("true")).status(ppnd()),
        )
        .user(argocd())
        .audit("force-reapply", "allowed"),
        create(
            "annotations a string",
            doc().at(&["metadata", "annotations"], json!("x")),
        )
        .deny(&[BadMetadata]),
        create("metadata an array", Doc(json!({"metadata": [1]}))).deny(&[BadMetadata]),
        create(
            "other annotations only",
            doc().at(&["metadata", "annotations"], json!({"a": "b"})),
        ),
        update(
            "UPDATE A \"false\" -> \"yes\"",
            a(json!("false")),
            a(json!("yes")),
        )
        .deny(&[BadAnnotation]),
        update(
            "UPDATE A \"yes\" -> \"false\"",
            a(json!("yes")),
            a(json!("false")),
        ),
    ]
}

#[test]
fn annotation_value_table() {
    check_all(&annotation_cases());
}

// ---------------------------------------------------------------------------
// Rule 6: the forced re-apply; rule 11: the annotation left at "true";
// rule 9: terminating objects are judged.
// ---------------------------------------------------------------------------

fn reapply_cases() -> Vec<Case> {
    use K::*;
    let base = || doc().t(json!(600));
    let with = |a: Option<&str>, status: Option<Value>| {
        let mut d = base();
        if let Some(a) = a {
            d = d.a(json!(a));
        }
        if let Some(s) = status {
            d = d.status(s);
        }
        d
    };
    let not_pausing: Vec<(&str, Option<Value>)> = vec![
        ("no status", None),
        (
            "upgradeInProgress empty",
            Some(json!({"upgradeInProgress": ""})),
        ),
        (
            "Progressive",
            Some(json!({"upgradeInProgress": "Progressive"})),
        ),
        (
            "reason PipelinePaused",
            Some(condition("True", "PipelinePaused")),
        ),
        ("status False", Some(condition("False", "Unpaused"))),
        (
            "status False reason PipelinePausing",
            Some(condition("False", "PipelinePausing")),
        ),
        (
            "other condition type",
            Some(json!({"conditions": [
                {"type": "Progressing", "status": "True", "reason": "PipelinePausing"}
            ]})),
        ),
        ("status a string", Some(json!("weird"))),
    ];
    let pausing: Vec<(&str, Value)> = vec![
        ("PipelinePauseAndDrain", ppnd()),
        (
            "condition PipelinePausing",
            condition("True", "PipelinePausing"),
        ),
    ];
    let users: Vec<(&str, UserInfo, bool)> = vec![
        ("argocd-server", argocd(), true),
        ("system:masters", admin(), true),
        ("alice", alice(), false),
    ];
    let mut cases = Vec::new();

    // UPDATE to "true" while pausing: only the permission matters.
    for (pname, status) in &pausing {
        for old_a in [Some("false"), Some("True"), None] {
            for (uname, user, granted) in &users {
                let name = format!("UPDATE A {old_a:?} -> \"true\", {pname}, {uname}");
                let case = update(
                    &name,
                    with(old_a, Some(status.clone())),
                    with(Some("true"), Some(status.clone())),
                )
                .user(user.clone());
                cases.push(if *granted {
                    case.audit("force-reapply", "allowed: user")
                } else {
                    case.deny(&[Reapply])
                        .audit("force-reapply", "denied by rule 6")
                        .msg(&[
                            "\"alice\"",
                            "not in forceReapply.users",
                            "ask a platform admin",
                        ])
                        .not_msg(&["not pausing"])
                });
            }
        }
    }
    // UPDATE to "true" while nothing is pausing: denied for everyone.
    for (pname, status) in &not_pausing {
        for (uname, user, granted) in &users {
            let name = format!("UPDATE A \"false\" -> \"true\", {pname}, {uname}");
            let mut case = update(
                &name,
                with(Some("false"), status.clone()),
                with(Some("true"), status.clone()),
            )
            .user(user.clone())
            .deny(&[Reapply])
            .audit("force-reapply", "denied by rule 6")
            .msg(&[
                "the pipeline is not pausing",
                "set it only while a pause is stuck",
            ]);
            case = if *granted {
                case.not_msg(&["not in forceReapply.users"])
            } else {
                case.msg(&["not in forceReapply.users"])
            };
            cases.push(case);
        }
    }
    // CREATE with "true": a new object cannot be pausing.
    for (uname, user, granted) in &users {
        let case = create(
            &format!("CREATE A \"true\", {uname}"),
            with(Some("true"), None),
        )
        .user(user.clone())
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6")
        .msg(&["a new PipelineRollout cannot be pausing"]);
        cases.push(if *granted {
            case.not_msg(&["not in forceReapply.users"])
        } else {
            case.msg(&["not in forceReapply.users"])
        });
    }
    // The pause is read from the stored (old) object, not the new one.
    cases.push(
        update(
            "pausing only in the new object's status",
            with(Some("false"), None),
            with(Some("true"), Some(ppnd())),
        )
        .user(argocd())
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6"),
    );
    cases.push(
        update(
            "pausing only in the old object's status",
            with(Some("false"), Some(ppnd())),
            with(Some("true"), None),
        )
        .user(argocd())
        .audit("force-reapply", "allowed"),
    );
    // requirePausing false: only the permission matters.
    let no_pause = || policy("forceReapply:\n  requirePausing: false\n");
    for (uname, user, granted) in &users {
        for (label, case) in [
            ("CREATE", create("", with(Some("true"), None))),
            (
                "UPDATE idle",
                update("", with(Some("false"), None), with(Some("true"), None)),
            ),
        ] {
            let case = Case {
                name: format!("requirePausing false, {label}, {uname}"),
                ..case
            }
            .policy(no_pause())
            .user(user.clone());
            cases.push(if *granted {
                case.audit("force-reapply", "allowed: user")
            } else {
                case.deny(&[Reapply])
                    .audit("force-reapply", "denied by rule 6")
                    .not_msg(&["pausing"])
            });
        }
    }
    // No permission needed: keeping "true", setting "false", removing it.
    for (pname, status) in &pausing {
        cases.push(update(
            &format!("A \"true\" kept, {pname}, alice"),
            with(Some("true"), Some(status.clone())),
            with(Some("true"), Some(status.clone())).edited(),
        ));
    }
    for (pname, status) in &not_pausing {
        // Rule 11: still "true" while nothing is pausing.
        cases.push(
            update(
                &format!("A \"true\" kept, {pname}, alice (rule 11)"),
                with(Some("true"), status.clone()),
                with(Some("true"), status.clone()).edited(),
            )
            .warn(&["set it to \"false\""]),
        );
    }
    cases.push(
        update(
            "A \"true\" kept, nothing pausing, argocd (rule 11)",
            with(Some("true"), None),
            with(Some("true"), None).edited(),
        )
        .user(argocd())
        .warn(&["without draining"]),
    );
    cases.push(update(
        "A \"true\" -> \"false\", pausing, alice",
        with(Some("true"), Some(ppnd())),
        with(Some("false"), Some(ppnd())),
    ));
    cases.push(update(
        "A \"true\" -> \"false\", idle, alice",
        with(Some("true"), None),
        with(Some("false"), None),
    ));
    cases.push(update(
        "A \"true\" -> removed, idle, alice",
        with(Some("true"), None),
        with(None, None),
    ));
    cases.push(update(
        "A \"false\" kept, idle, alice",
        with(Some("false"), None),
        with(Some("false"), None).edited(),
    ));
    cases.push(create(
        "CREATE A \"false\", alice",
        with(Some("false"), None),
    ));
    // Rule 9: a terminating object is judged like any other.
    cases.push(
        update(
            "terminating, A -> \"true\", pausing, alice",
            with(Some("false"), Some(ppnd())).terminating(),
            with(Some("true"), Some(ppnd())).terminating(),
        )
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6"),
    );
    cases.push(
        update(
            "terminating, finalizer removed, A \"true\" kept, idle",
            with(Some("true"), None).terminating().at(
                &["metadata", "finalizers"],
                json!(["numaplane.numaproj.io/finalizer"]),
            ),
            with(Some("true"), None).terminating(),
        )
        .warn(&["\"false\""]),
    );
    cases
}

#[test]
fn force_reapply_table() {
    check_all(&reapply_cases());
}

// ---------------------------------------------------------------------------
// Rule 7: forcePromote.
// ---------------------------------------------------------------------------

fn promote_cases() -> Vec<Case> {
    use K::*;
    let fp = |v: Option<Value>| match v {
        Some(v) => doc().t(json!(600)).fp(v),
        None => doc().t(json!(600)),
    };
    let on = || Some(json!(true));
    let mut cases = Vec::new();
    let users: Vec<(&str, UserInfo, bool)> = vec![
        ("argocd-server", argocd(), true),
        ("system:masters", admin(), true),
        ("alice", alice(), false),
    ];
    for (uname, user, granted) in &users {
        let turned_on = vec![
            create(&format!("CREATE forcePromote true, {uname}"), fp(on())),
            update(
                &format!("UPDATE forcePromote false -> true, {uname}"),
                fp(Some(json!(false))),
                fp(on()),
            ),
            update(
                &format!("UPDATE forcePromote absent -> true, {uname}"),
                fp(None),
                fp(on()),
            ),
            update(
                &format!("UPDATE forcePromote \"true\" -> true, {uname}"),
                fp(Some(json!("true"))),
                fp(on()),
            ),
            // No pausing condition for rule 7: an idle UPDATE is fine.
            update(
                &format!("UPDATE forcePromote false -> true, idle status, {uname}"),
                fp(Some(json!(false))).status(condition("False", "Unpaused")),
                fp(on()).status(condition("False", "Unpaused")),
            ),
        ];
        for case in turned_on {
            let case = case.user(user.clone());
            cases.push(if *granted {
                case.audit("force-promote", "allowed: user")
            } else {
                case.deny(&[Promote])
                    .audit("force-promote", "denied by rule 7")
                    .msg(&[
                        FORCE_PROMOTE_FIELD,
                        "\"alice\"",
                        "not in forceReapply.users",
                        "ask a platform admin",
                    ])
            });
        }
        // gateForcePromote false: nobody is asked.
        cases.push(
            create(
                &format!("gateForcePromote false, CREATE true, {uname}"),
                fp(on()),
            )
            .policy(policy("forceReapply:\n  gateForcePromote: false\n"))
            .user(user.clone()),
        );
        cases.push(
            update(
                &format!("gateForcePromote false, UPDATE false -> true, {uname}"),
                fp(Some(json!(false))),
                fp(on()),
            )
            .policy(policy("forceReapply:\n  gateForcePromote: false\n"))
            .user(user.clone()),
        );
    }
    // Already on, or off: no permission needed.
    cases.push(update(
        "UPDATE forcePromote true kept, alice",
        fp(on()),
        fp(on()).edited(),
    ));
    cases.push(update(
        "UPDATE forcePromote true -> false, alice",
        fp(on()),
        fp(Some(json!(false))),
    ));
    cases.push(update(
        "UPDATE forcePromote true -> absent, alice",
        fp(on()),
        fp(None),
    ));
    cases.push(create(
        "CREATE forcePromote false, alice",
        fp(Some(json!(false))),
    ));
    cases.push(create(
        "CREATE forcePromote \"true\" (a string), alice",
        fp(Some(json!("true"))),
    ));
    // Both gates at once.
    cases.push(
        update(
            "alice sets A \"true\" and forcePromote while pausing",
            fp(None).a(json!("false")).status(ppnd()),
            fp(on()).a(json!("true")).status(ppnd()),
        )
        .deny(&[Reapply, Promote])
        .audit("force-reapply", "denied by rule 6")
        .audit("force-promote", "denied by rule 7")
        .msg(&["(1) ", "(2) "]),
    );
    cases.push(
        update(
            "argocd sets A \"true\" and forcePromote while pausing",
            fp(None).a(json!("false")).status(ppnd()),
            fp(on()).a(json!("true")).status(ppnd()),
        )
        .user(argocd())
        .audit("force-reapply", "allowed: user")
        .audit("force-promote", "allowed: user"),
    );
    cases.push(
        create(
            "argocd CREATE with A \"true\" and forcePromote",
            fp(on()).a(json!("true")),
        )
        .user(argocd())
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6")
        .audit("force-promote", "allowed: user"),
    );
    cases
}

#[test]
fn force_promote_table() {
    check_all(&promote_cases());
}

// ---------------------------------------------------------------------------
// Rule 8: ratcheting.
// ---------------------------------------------------------------------------

fn ratchet_cases() -> Vec<Case> {
    use K::*;
    let t = |v: Value| doc().t(v);
    let ts = |v: Value, s: Value| doc().t(v).s(s);
    let a = |v: Value| doc().t(json!(600)).a(v);
    let huge = || json!(5_000_000_000_u64);
    let unchanged = "unchanged, so allowed: ";
    vec![
        // Rule 2.
        update(
            "rule 2 unchanged \"1h\"",
            t(json!("1h")),
            t(json!("1h")).edited(),
        )
        .warn(&[unchanged]),
        update(
            "rule 2 unchanged 30.5",
            t(json!(30.5)),
            t(json!(30.5)).edited(),
        )
        .warn(&["pauseGracePeriodSeconds 30.5"]),
        update(
            "rule 2 changed \"1h\" -> \"2h\"",
            t(json!("1h")),
            t(json!("2h")),
        )
        .deny(&[NotInteger]),
        update(
            "rule 2 changed 600 -> \"1h\"",
            t(json!(600)),
            t(json!("1h")),
        )
        .deny(&[NotInteger]),
        create("rule 2 CREATE \"1h\"", t(json!("1h"))).deny(&[NotInteger]),
        update(
            "rule 2 unchanged, spec.pipeline a string",
            doc().at(&["spec", "pipeline"], json!("oops")),
            doc().at(&["spec", "pipeline"], json!("oops")).edited(),
        )
        .warn(&["spec.pipeline is a string"]),
        update(
            "rule 2 changed, spec.pipeline becomes a string",
            doc(),
            doc().at(&["spec", "pipeline"], json!("oops")),
        )
        .deny(&[Unreachable]),
        // Rule 3.
        update("rule 3 unchanged 29", t(json!(29)), t(json!(29)).edited())
            .warn(&["pauseGracePeriodSeconds 29 is below the minimum 30"]),
        update("rule 3 unchanged -5", t(json!(-5)), t(json!(-5)).edited()).warn(&[unchanged]),
        update(
            "rule 3 unchanged 3601",
            t(json!(3601)),
            t(json!(3601)).edited(),
        )
        .warn(&["above the maximum 3600"]),
        update("rule 3 changed 29 -> 28", t(json!(29)), t(json!(28))).deny(&[TooShort]),
        update(
            "rule 3 changed 3601 -> 3602",
            t(json!(3601)),
            t(json!(3602)),
        )
        .deny(&[TooLong]),
        create("rule 3 CREATE 29", t(json!(29))).deny(&[TooShort]),
        update(
            "rule 3 unchanged no timeout in payments-eu",
            t(json!(31_536_000)),
            t(json!(31_536_000)).edited(),
        )
        .policy(overrides())
        .ns("payments-eu")
        .warn(&["means no timeout"]),
        update(
            "rule 3 changed to no timeout in payments-eu",
            t(json!(600)),
            t(json!(31_536_000)),
        )
        .policy(overrides())
        .ns("payments-eu")
        .deny(&[NoTimeout]),
        // Rule 4: the overflow needs T and S unchanged.
        update(
            "rule 4 T, S absent unchanged",
            t(huge()),
            t(huge()).edited(),
        )
        .warn(&["overflows"]),
        update(
            "rule 4 T, S 1 unchanged",
            ts(json!(100_000_000), json!(1)),
            ts(json!(100_000_000), json!(1)).edited(),
        )
        .warn(&["x100 (recycle) overflows"]),
        update("rule 4 T changed", t(huge()), t(json!(6_000_000_000_u64))).deny(&[Overflow]),
        update(
            "rule 4 S changed 50 -> 1, T unchanged",
            ts(json!(100_000_000), json!(50)),
            ts(json!(100_000_000), json!(1)),
        )
        .deny(&[Overflow]),
        update(
            "rule 4 S changed absent -> 1, T unchanged",
            t(json!(100_000_000)),
            ts(json!(100_000_000), json!(1)),
        )
        .deny(&[Overflow]),
        update(
            "rule 4 S changed 2 -> 1, T unchanged, both overflow",
            ts(json!(200_000_000), json!(2)),
            ts(json!(200_000_000), json!(1)),
        )
        .deny(&[Overflow]),
        update(
            "rule 4 T and S changed",
            ts(json!(600), json!(50)),
            ts(json!(100_000_000), json!(1)),
        )
        .deny(&[Overflow]),
        create("rule 4 CREATE overflow", t(huge())).deny(&[Overflow]),
        update(
            "rule 4 S 0 unchanged",
            ts(json!(600), json!(0)),
            ts(json!(600), json!(0)).edited(),
        )
        .warn(&["scaleFactor 0 is not an integer from 1 to 100"]),
        update(
            "rule 4 S \"50\" unchanged, T changed",
            ts(json!(600), json!("50")),
            ts(json!(700), json!("50")),
        )
        .warn(&["scaleFactor \"50\""]),
        update(
            "rule 4 S changed 0 -> 101",
            ts(json!(600), json!(0)),
            ts(json!(600), json!(101)),
        )
        .deny(&[BadScale]),
        create("rule 4 CREATE S 0", ts(json!(600), json!(0))).deny(&[BadScale]),
        // Rule 5.
        update(
            "rule 5 unchanged \"yes\"",
            a(json!("yes")),
            a(json!("yes")).edited(),
        )
        .warn(&["allow-data-loss \"yes\" is ignored"]),
        update("rule 5 unchanged 1", a(json!(1)), a(json!(1)).edited()).warn(&[unchanged]),
        update(
            "rule 5 changed \"yes\" -> \"True\"",
            a(json!("yes")),
            a(json!("True")),
        )
        .deny(&[BadAnnotation]),
        create("rule 5 CREATE \"yes\"", a(json!("yes"))).deny(&[BadAnnotation]),
        update(
            "rule 5 unchanged, annotations a string",
            doc().at(&["metadata", "annotations"], json!("x")),
            doc().at(&["metadata", "annotations"], json!("x")).edited(),
        )
        .warn(&["metadata.annotations is a string"]),
        // Mixed: one unchanged (warning), one changed (denial).
        update(
            "T 29 unchanged, A \"yes\" -> \"no\"",
            t(json!(29)).a(json!("yes")),
            t(json!(29)).a(json!("no")),
        )
        .warn(&["below the minimum"])
        .deny(&[BadAnnotation]),
        update(
            "T \"1h\", S 0, A \"yes\" all unchanged",
            ts(json!("1h"), json!(0)).a(json!("yes")),
            ts(json!("1h"), json!(0)).a(json!("yes")).edited(),
        )
        .warn(&["\"1h\"", "scaleFactor 0", "\"yes\""]),
        // Rule 9 with rule 8: a terminating object can still lose its finalizer.
        update(
            "terminating, finalizer removed, T \"1h\" unchanged",
            t(json!("1h")).terminating().at(
                &["metadata", "finalizers"],
                json!(["numaplane.numaproj.io/finalizer"]),
            ),
            t(json!("1h")).terminating(),
        )
        .warn(&[unchanged]),
        update(
            "terminating, T changed to \"1h\"",
            t(json!(600)).terminating(),
            t(json!("1h")).terminating(),
        )
        .deny(&[NotInteger]),
        // Rules 6 and 7 do not ratchet.
        update(
            "rule 6 is not ratcheted",
            a(json!("false")).status(ppnd()),
            a(json!("true")).status(ppnd()),
        )
        .deny(&[Reapply])
        .audit("force-reapply", "denied"),
    ]
}

#[test]
fn ratcheting_table() {
    check_all(&ratchet_cases());
}

/// Rule 8 defines S as "spec.strategy.recycleStrategy.scaleFactor
/// (defaultRecycleScaleFactor when absent)", so writing out the default
/// explicitly leaves S unchanged and the overflow should stay a warning.
#[test]
fn ratcheting_treats_an_explicit_default_scale_factor_as_unchanged() {
    let huge = json!(5_000_000_000_u64);
    check_all(&[
        update(
            "S absent -> 50 (the default), T unchanged",
            doc().t(huge.clone()),
            doc().t(huge.clone()).s(json!(50)),
        )
        .warn(&["overflows"]),
        update(
            "S 50 (the default) -> absent, T unchanged",
            doc().t(huge.clone()).s(json!(50)),
            doc().t(huge),
        )
        .warn(&["overflows"]),
    ]);
}

// ---------------------------------------------------------------------------
// Rule 10: warn mode.
// ---------------------------------------------------------------------------

fn warn_cases() -> Vec<Case> {
    let t = |v: Value| doc().t(v);
    let would = "warn mode, would deny: ";
    vec![
        create("warn: T \"1h\"", t(json!("1h"))).warn(&[would]),
        create("warn: T 29", t(json!(29)))
            .warn(&["warn mode, would deny: pauseGracePeriodSeconds 29"]),
        create("warn: T 3601", t(json!(3601))).warn(&[would]),
        create("warn: overflow", t(json!(5_000_000_000_u64))).warn(&["overflows"]),
        create("warn: S 0", t(json!(600)).s(json!(0))).warn(&["scaleFactor 0"]),
        create("warn: A \"yes\"", t(json!(600)).a(json!("yes"))).warn(&["\"yes\""]),
        create(
            "warn: spec.pipeline a string",
            doc().at(&["spec", "pipeline"], json!("oops")),
        )
        .warn(&["spec.pipeline is a string"]),
        create(
            "warn: T 29, S 0, A \"yes\"",
            t(json!(29)).s(json!(0)).a(json!("yes")),
        )
        .warn(&[
            "pauseGracePeriodSeconds 29",
            "scaleFactor 0",
            "allow-data-loss \"yes\"",
        ]),
        create(
            "warn: alice CREATE A \"true\"",
            t(json!(600)).a(json!("true")),
        )
        .warn(&["alice may not set allow-data-loss"])
        .audit("force-reapply", "would-deny by rule 6"),
        create(
            "warn: argocd CREATE A \"true\"",
            t(json!(600)).a(json!("true")),
        )
        .user(argocd())
        .warn(&[would])
        .audit("force-reapply", "would-deny by rule 6"),
        update(
            "warn: alice A -> \"true\" while pausing",
            t(json!(600)).a(json!("false")).status(ppnd()),
            t(json!(600)).a(json!("true")).status(ppnd()),
        )
        .warn(&[would])
        .audit("force-reapply", "would-deny"),
        update(
            "warn: argocd A -> \"true\" while pausing",
            t(json!(600)).a(json!("false")).status(ppnd()),
            t(json!(600)).a(json!("true")).status(ppnd()),
        )
        .user(argocd())
        .audit("force-reapply", "allowed: user"),
        create("warn: alice forcePromote", t(json!(600)).fp(json!(true)))
            .warn(&["alice may not turn on forcePromote"])
            .audit("force-promote", "would-deny by rule 7"),
        create("warn: admin forcePromote", t(json!(600)).fp(json!(true)))
            .user(admin())
            .audit("force-promote", "allowed: user"),
        update(
            "warn: unchanged T \"1h\"",
            t(json!("1h")),
            t(json!("1h")).edited(),
        )
        .warn(&["unchanged, so allowed"]),
        update(
            "warn: rule 11",
            t(json!(600)).a(json!("true")),
            t(json!(600)).a(json!("true")).edited(),
        )
        .warn(&["\"false\""]),
        create("warn: valid", t(json!(600))),
    ]
    .into_iter()
    .map(|c| c.policy(warn_mode()))
    .collect()
}

#[test]
fn warn_mode_table() {
    let cases = warn_cases();
    check_all(&cases);
    let mut would_deny = 0;
    for case in &cases {
        let name = &case.name;
        let warned = run(case);
        assert!(warned.allowed(), "{name}: warn mode denies nothing");
        for w in warned.warnings.iter().filter(|w| w.contains("would deny")) {
            assert!(w.starts_with("warn mode, would deny:"), "{name}: {w}");
        }
        for value in warned.audit.values() {
            assert!(
                value.starts_with("allowed") || value.starts_with("would-deny"),
                "{name}: audit {value}"
            );
        }
        // The same request in enforce mode: each denial is one warning here.
        let enforced = run(&case.clone().policy(built_in()));
        for v in &enforced.denials {
            let expected = format!("warn mode, would deny: {}", v.summary());
            assert!(
                warned.warnings.contains(&expected),
                "{name}: missing {expected:?} in {:#?}",
                warned.warnings
            );
        }
        let count = warned
            .warnings
            .iter()
            .filter(|w| w.starts_with("warn mode, would deny:"))
            .count();
        assert_eq!(
            count,
            enforced.denials.len(),
            "{name}: one warning per denial"
        );
        would_deny += count;
        for (key, value) in &enforced.audit {
            let warned_value = &warned.audit[key];
            if let Some(rest) = value.strip_prefix("denied by rule ") {
                let rule = &rest[..1];
                assert!(
                    warned_value.starts_with(&format!("would-deny by rule {rule}")),
                    "{name}: {key}: {value} in enforce vs {warned_value} in warn"
                );
            } else {
                assert_eq!(value, warned_value, "{name}: {key}");
            }
        }
    }
    assert!(would_deny >= 10, "the table exercises warn mode");
}

// ---------------------------------------------------------------------------
// Denial messages: the field path, the value, and a fix.
// ---------------------------------------------------------------------------

fn message_cases() -> Vec<Case> {
    use K::*;
    let t = |v: Value| doc().t(v);
    vec![
        create("message: not an integer", t(json!("1h")))
            .deny(&[NotInteger])
            .msg(&[
                TIMEOUT_FIELD,
                "is \"1h\"",
                "not an integer number of seconds",
                "e.g. 3600 for 1h",
            ]),
        create("message: 30.5", t(json!(30.5)))
            .deny(&[NotInteger])
            .msg(&[TIMEOUT_FIELD, "is 30.5", "write an integer"]),
        create("message: too short", t(json!(29)))
            .deny(&[TooShort])
            .msg(&[
                TIMEOUT_FIELD,
                "is 29",
                "minimum of 30",
                "set 30 to 3600 seconds",
                "31536000",
            ])
            .not_msg(&["without draining"]),
        create("message: zero", t(json!(0)))
            .deny(&[TooShort])
            .msg(&[
                TIMEOUT_FIELD,
                "is 0",
                "without draining",
                "set 30 to 3600 seconds",
            ]),
        create("message: negative", t(json!(-5)))
            .deny(&[TooShort])
            .msg(&[TIMEOUT_FIELD, "is -5", "without draining"]),
        create("message: too long", t(json!(3601)))
            .deny(&[TooLong])
            .msg(&[
                TIMEOUT_FIELD,
                "is 3601",
                "maximum of 3600",
                "set 30 to 3600 seconds",
                "or 31536000 (or more) for no timeout",
            ]),
        create("message: too long in override", t(json!(7200)))
            .policy(overrides())
            .ns("payments-eu")
            .deny(&[TooLong])
            .msg(&[
                TIMEOUT_FIELD,
                "is 7200",
                "maximum of 3600",
                "namespaces \"payments-*\"",
                "set 60 to 3600 seconds",
            ])
            .not_msg(&["for no timeout"]),
        create("message: no timeout not allowed", t(json!(31_536_000)))
            .policy(overrides())
            .ns("ledger")
            .deny(&[NoTimeout])
            .msg(&[
                TIMEOUT_FIELD,
                "is 31536000",
                "no timeout",
                "namespaces \"ledger\"",
                "set 60 to 3600 seconds",
            ]),
        create("message: overflow x2", t(json!(5_000_000_000_u64)))
            .deny(&[Overflow])
            .msg(&[
                TIMEOUT_FIELD,
                "is 5000000000",
                "multiplies it by 2",
                "scaleFactor 50",
                "9223372036",
                "set at most 4611686018",
            ]),
        create("message: overflow x100", t(json!(92_233_721)).s(json!(1)))
            .deny(&[Overflow])
            .msg(&[
                TIMEOUT_FIELD,
                "is 92233721",
                "multiplies it by 100",
                "set at most 92233720",
            ]),
        create("message: overflow u64", t(json!(u64::MAX)))
            .deny(&[Overflow])
            .msg(&["is 18446744073709551615", "set at most 4611686018"]),
        create("message: bad scale factor", t(json!(600)).s(json!(0)))
            .deny(&[BadScale])
            .msg(&[
                SCALE_FACTOR_FIELD,
                "is 0",
                "integer percent from 1 to 100",
                "default of 50",
            ]),
        create("message: scale factor string", t(json!(600)).s(json!("50")))
            .deny(&[BadScale])
            .msg(&[SCALE_FACTOR_FIELD, "is \"50\"", "set e.g. 50"]),
        create("message: annotation", t(json!(600)).a(json!("yes")))
            .deny(&[BadAnnotation])
            .msg(&[
                &format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"]"),
                "is \"yes\"",
                "set \"true\"",
                "or \"false\"",
            ]),
        create("message: annotation True", t(json!(600)).a(json!("True")))
            .deny(&[BadAnnotation])
            .msg(&["is \"True\"", "exactly \"true\""]),
        create(
            "message: annotations malformed",
            doc().at(&["metadata", "annotations"], json!([])),
        )
        .deny(&[BadMetadata])
        .msg(&["metadata.annotations is an array", "map of strings"]),
        create(
            "message: unreachable",
            doc().at(&["spec", "pipeline"], json!("oops")),
        )
        .deny(&[Unreachable])
        .msg(&[
            "spec.pipeline is a string",
            TIMEOUT_FIELD,
            "make spec.pipeline an object",
        ]),
        create("message: force re-apply", t(json!(600)).a(json!("true")))
            .deny(&[Reapply])
            .audit("force-reapply", "denied")
            .msg(&[
                "user \"alice\"",
                &format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\""),
                "not in forceReapply.users",
                "ask a platform admin",
                "Argo CD's allow-data-loss action",
                "a new PipelineRollout cannot be pausing",
            ]),
        create("message: force promote", t(json!(600)).fp(json!(true)))
            .deny(&[Promote])
            .audit("force-promote", "denied")
            .msg(&[
                "user \"alice\"",
                FORCE_PROMOTE_FIELD,
                "ask a platform admin",
            ]),
        create(
            "message: several are numbered",
            t(json!("1h")).s(json!(0)).a(json!("yes")),
        )
        .deny(&[NotInteger, BadScale, BadAnnotation])
        .msg(&[
            "(1) ",
            "(2) ",
            "(3) ",
            TIMEOUT_FIELD,
            SCALE_FACTOR_FIELD,
            ALLOW_DATA_LOSS,
        ]),
    ]
}

#[test]
fn denial_message_table() {
    check_all(&message_cases());
}

// ---------------------------------------------------------------------------
// Every warning fits kubectl's line.
// ---------------------------------------------------------------------------

fn all_validate_cases() -> Vec<Case> {
    let mut all = Vec::new();
    all.extend(timeout_cases());
    all.extend(namespace_cases());
    all.extend(annotation_cases());
    all.extend(reapply_cases());
    all.extend(promote_cases());
    all.extend(ratchet_cases());
    all.extend(warn_cases());
    all.extend(message_cases());
    all
}

#[test]
fn every_warning_is_at_most_120_characters() {
    let mut seen = 0;
    let mut longest = String::new();
    for case in all_validate_cases() {
        // The same request in warn mode, so every violation becomes a warning.
        for policy in [case.policy.clone(), {
            let mut p = case.policy.clone();
            p.mode = Mode::Warn;
            p
        }] {
            let d = run(&case.clone().policy(policy));
            for w in &d.warnings {
                let n = w.chars().count();
                assert!(n <= 120, "{}: warning of {n} characters: {w}", case.name);
                if n > longest.chars().count() {
                    longest.clone_from(w);
                }
                seen += 1;
            }
        }
    }
    for case in mutate_cases() {
        let d = run_mutate(&case);
        for w in &d.warnings {
            assert!(w.chars().count() <= 120, "{}: {w}", case.name);
            seen += 1;
        }
    }
    assert!(seen > 100, "only {seen} warnings were checked");
    assert!(!longest.is_empty());
}

/// DOMAIN.md: "Warnings are shown by kubectl; keep each under 120 characters."
/// A long invalid value is cut to 48 characters, but with the 23-character
/// prefix a ratcheted or warn-mode warning can still reach about 135.
#[test]
fn warnings_stay_short_for_long_values() {
    let long = json!("x".repeat(200));
    let cases = vec![
        update(
            "long T unchanged",
            doc().t(long.clone()),
            doc().t(long.clone()).edited(),
        ),
        update(
            "long A unchanged",
            doc().a(long.clone()),
            doc().a(long.clone()).edited(),
        ),
        create("long T in warn mode", doc().t(long.clone())).policy(warn_mode()),
        create("long A in warn mode", doc().a(long.clone())).policy(warn_mode()),
        create("long S in warn mode", doc().s(long)).policy(warn_mode()),
    ];
    for case in cases {
        let d = run(&case);
        assert!(!d.warnings.is_empty(), "{}", case.name);
        assert_warnings_short(&case.name, &d.warnings);
    }
}

// ---------------------------------------------------------------------------
// /mutate.
// ---------------------------------------------------------------------------

struct MutateCase {
    name: String,
    policy: Policy,
    op: Operation,
    ns: &'static str,
    object: Value,
    /// The timeout the patch must write; `None`: no patch.
    want: Option<u64>,
    /// Substring of the one expected warning; `None`: no warning.
    warn: Option<&'static str>,
}

fn run_mutate(case: &MutateCase) -> Decision {
    let object = parse(&case.object);
    let user = alice();
    let review = Review {
        operation: case.op,
        namespace: case.ns,
        user: &user,
        object: &object,
        old_object: match case.op {
            Operation::Update => Some(&object),
            Operation::Create => None,
        },
        now: now(),
    };
    mutate(&case.policy, &review)
}

/// A scope for the mutate table: label, policy, namespace, expected default.
type MutateScope = (&'static str, fn() -> Policy, &'static str, u64);

fn mutate_cases() -> Vec<MutateCase> {
    let meta = || json!({"name": "p", "namespace": "ns", "labels": {"team": "a"}});
    let pipeline_spec = || {
        json!({
            "vertices": [{"name": "in", "source": {"generator": {}}}],
            "edges": [],
            "watermark": {"disabled": true}
        })
    };
    let strategy = || json!({"recycleStrategy": {"scaleFactor": 50}});
    let wrap = |spec: Value| {
        json!({
            "apiVersion": "numaplane.numaproj.io/v1alpha1",
            "kind": "PipelineRollout",
            "metadata": meta(),
            "spec": spec,
            "status": {"phase": "Deployed"}
        })
    };
    let with_pipeline_spec = |ps: Value| {
        wrap(
            json!({"strategy": strategy(), "pipeline": {"metadata": {"labels": {"x": "y"}}, "spec": ps}}),
        )
    };
    let with_lifecycle = |lc: Value| {
        let mut ps = pipeline_spec();
        set(&mut ps, &["lifecycle"], lc);
        with_pipeline_spec(ps)
    };
    let missing: Vec<(&str, Value)> = vec![
        (
            "no spec",
            json!({"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "PipelineRollout", "metadata": meta()}),
        ),
        ("spec null", wrap(Value::Null)),
        (
            "spec without pipeline",
            wrap(json!({"strategy": strategy()})),
        ),
        (
            "pipeline null",
            wrap(json!({"strategy": strategy(), "pipeline": null})),
        ),
        (
            "no pipeline.spec",
            wrap(json!({"strategy": strategy(), "pipeline": {"metadata": {"labels": {"x": "y"}}}})),
        ),
        ("pipeline.spec null", with_pipeline_spec(Value::Null)),
        ("no lifecycle", with_pipeline_spec(pipeline_spec())),
        ("lifecycle null", with_lifecycle(Value::Null)),
        ("lifecycle empty", with_lifecycle(json!({}))),
        (
            "lifecycle without T",
            with_lifecycle(json!({"desiredPhase": "Running"})),
        ),
        (
            "T null",
            with_lifecycle(json!({"desiredPhase": "Running", "pauseGracePeriodSeconds": null})),
        ),
    ];
    let scopes: Vec<MutateScope> = vec![
        ("built-in", built_in, "default", 31_536_000),
        ("overrides, first match", overrides, "payments-eu", 300),
        ("overrides, exact name", overrides, "ledger", 300),
        ("overrides, second match", overrides, "payroll", 600),
        ("overrides, no match", overrides, "default", 31_536_000),
        (
            "default 45m",
            || policy("drainTimeout:\n  default: 45m\n"),
            "default",
            2700,
        ),
    ];
    let mut cases = Vec::new();
    for (label, object) in &missing {
        for (scope, make, ns, want) in &scopes {
            for op in [Operation::Create, Operation::Update] {
                cases.push(MutateCase {
                    name: format!("{label}, {scope} ({ns}), {op}"),
                    policy: make(),
                    op,
                    ns,
                    object: object.clone(),
                    want: Some(*want),
                    warn: None,
                });
            }
        }
    }
    // A present T is never changed, even an invalid one.
    for (label, value) in [
        ("\"1h\"", json!("1h")),
        ("30", json!(30)),
        ("0", json!(0)),
        ("-5", json!(-5)),
        ("30.5", json!(30.5)),
        ("true", json!(true)),
        ("false", json!(false)),
        ("\"\"", json!("")),
        ("{}", json!({})),
        ("[]", json!([])),
        ("u64::MAX", json!(u64::MAX)),
        ("31536000", json!(31_536_000)),
    ] {
        for (scope, make, ns, _) in &scopes {
            cases.push(MutateCase {
                name: format!("T {label} present, {scope} ({ns})"),
                policy: make(),
                op: Operation::Create,
                ns,
                object: with_lifecycle(json!({"pauseGracePeriodSeconds": value.clone()})),
                want: None,
                warn: None,
            });
        }
    }
    // Too malformed to patch: no patch, one warning.
    for (label, object, path) in [
        ("spec a string", wrap(json!("x")), "spec is a string"),
        (
            "spec.pipeline a string",
            wrap(json!({"pipeline": "oops"})),
            "spec.pipeline is a string",
        ),
        (
            "spec.pipeline.spec a number",
            with_pipeline_spec(json!(7)),
            "spec.pipeline.spec is a number",
        ),
        (
            "lifecycle an array",
            with_lifecycle(json!([1])),
            "spec.pipeline.spec.lifecycle is an array",
        ),
        (
            "lifecycle a string",
            with_lifecycle(json!("x")),
            "spec.pipeline.spec.lifecycle is a string",
        ),
    ] {
        cases.push(MutateCase {
            name: format!("blocked: {label}"),
            policy: built_in(),
            op: Operation::Create,
            ns: "default",
            object,
            want: None,
            warn: Some(path),
        });
    }
    cases
}

#[test]
fn mutate_table() {
    let cases = mutate_cases();
    let mut patched_count = 0;
    for case in &cases {
        let name = &case.name;
        let d = run_mutate(case);
        assert!(d.denials.is_empty(), "{name}: /mutate denies nothing");
        assert_warnings_short(name, &d.warnings);
        match case.warn {
            None => assert!(d.warnings.is_empty(), "{name}: {:?}", d.warnings),
            Some(part) => {
                assert_eq!(d.warnings.len(), 1, "{name}: {:?}", d.warnings);
                assert!(d.warnings[0].contains(part), "{name}: {}", d.warnings[0]);
                assert!(d.warnings[0].contains("not an object"), "{name}");
            }
        }
        let Some(want) = case.want else {
            assert!(d.patch.is_empty(), "{name}: unexpected patch {:?}", d.patch);
            assert!(d.defaulted.is_none(), "{name}");
            assert!(d.audit.is_empty(), "{name}: {:?}", d.audit);
            continue;
        };
        let patch = json_patch::Patch(d.patch.clone());
        assert!(!patch.0.is_empty(), "{name}: no patch");
        assert_eq!(d.defaulted, Some(want), "{name}: defaulted");
        let audit = d.audit.get("drain-timeout-default").map(String::as_str);
        assert!(
            audit.is_some_and(|a| a.starts_with(&format!("{want} ("))),
            "{name}: audit {audit:?}"
        );
        let mut patched = case.object.clone();
        if let Err(e) = json_patch::patch(&mut patched, &patch.0) {
            panic!("{name}: the patch {patch:?} does not apply: {e}");
        }
        // T is the namespace's default ...
        let pointer = format!("/{}", TIMEOUT_PATH.join("/"));
        assert_eq!(patched.pointer(&pointer), Some(&json!(want)), "{name}");
        // ... and everything else is unchanged.
        let mut expected = case.object.clone();
        set(&mut expected, &TIMEOUT_PATH, json!(want));
        assert_eq!(patched, expected, "{name}: patch {patch:?}");
        // Idempotent: the patched object needs no further change.
        let again = run_mutate(&MutateCase {
            name: format!("{name}, again"),
            policy: case.policy.clone(),
            op: case.op,
            ns: case.ns,
            object: patched.clone(),
            want: None,
            warn: None,
        });
        assert!(
            again.patch.is_empty(),
            "{name}: second patch {:?}",
            again.patch
        );
        assert!(again.warnings.is_empty(), "{name}: {:?}", again.warnings);
        assert!(again.defaulted.is_none(), "{name}");
        // The default passes /validate in the same namespace.
        let checked = run(&Case {
            name: format!("{name}, validated"),
            policy: case.policy.clone(),
            ns: case.ns,
            ..create("", Doc(patched))
        });
        assert!(
            checked.allowed(),
            "{name}: the default is denied: {:?}",
            checked.denial_message()
        );
        patched_count += 1;
    }
    assert!(patched_count > 0);
}

/// The patch for a top-level gap creates every object on the way, and the
/// path of a T that is null is the T itself.
#[test]
fn mutate_patch_paths() {
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no spec", json!({}), "/spec"),
        ("spec null", json!({"spec": null}), "/spec"),
        ("no pipeline", json!({"spec": {}}), "/spec/pipeline"),
        (
            "no pipeline.spec",
            json!({"spec": {"pipeline": {}}}),
            "/spec/pipeline/spec",
        ),
        (
            "no lifecycle",
            json!({"spec": {"pipeline": {"spec": {}}}}),
            "/spec/pipeline/spec/lifecycle",
        ),
        (
            "lifecycle null",
            json!({"spec": {"pipeline": {"spec": {"lifecycle": null}}}}),
            "/spec/pipeline/spec/lifecycle",
        ),
        (
            "T null",
            json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": null}}}}}),
            "/spec/pipeline/spec/lifecycle/pauseGracePeriodSeconds",
        ),
    ];
    for (name, object, path) in cases {
        let d = run_mutate(&MutateCase {
            name: name.to_owned(),
            policy: built_in(),
            op: Operation::Create,
            ns: "default",
            object,
            want: None,
            warn: None,
        });
        let patch = json_patch::Patch(d.patch);
        assert!(!patch.0.is_empty(), "{name}: no patch");
        assert_eq!(patch.0.len(), 1, "{name}: one operation");
        let PatchOperation::Add(add) = &patch.0[0] else {
            panic!("{name}: not an add: {patch:?}");
        };
        assert_eq!(add.path.to_string(), path, "{name}");
    }
}
