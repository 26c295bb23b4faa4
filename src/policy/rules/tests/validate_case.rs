//! One `/validate` case of the tables, and its check: the denials by kind,
//! the warnings, the audit annotations and the denial message.

use super::fixtures::by_static_lists;
use serde_json::Value;
use test_builders::PipelineRolloutDoc;

use super::fixtures::{NOW, alice, built_in, parse};
use super::runner::{Mismatches, Named};
use crate::kinds::Kind;
use crate::policy::rules::{
    EventReason, GuardedWrite, Operation, Origin, Verdict, Violation, validate,
};
use crate::policy::{Policy, UserInfo};

/// The kinds of violation, so that a table can name the denials it expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ViolationKind {
    Unreachable,
    NotInteger,
    TooShort,
    TooLong,
    NoTimeout,
    OverflowReading,
    ClockOverflow,
    BadScale,
    BadMetadata,
    BadAnnotation,
    Reapply,
    Promote,
    PromoteLabelValue,
    PromoteLabel,
    Undrained,
    Bookkeeping,
    PauseTimestamp,
    DeleteChild,
    DeleteRollout,
    Record,
    EditChild,
}

/// The kind of `v`.
fn kind_of(v: &Violation) -> ViolationKind {
    use ViolationKind::*;
    match v {
        Violation::TimeoutUnreachable { .. } => Unreachable,
        Violation::TimeoutNotInteger { .. } => NotInteger,
        Violation::TimeoutTooShort { .. } => TooShort,
        Violation::TimeoutTooLong { .. } => TooLong,
        Violation::NoTimeoutNotAllowed { .. } => NoTimeout,
        Violation::TimeoutOverflows { .. } => OverflowReading,
        Violation::ClockOverflow { .. } => ClockOverflow,
        Violation::ScaleFactorInvalid { .. } => BadScale,
        Violation::MetadataMalformed { .. } => BadMetadata,
        Violation::AnnotationInvalid { .. } => BadAnnotation,
        Violation::ForceReapplyDenied { .. } => Reapply,
        Violation::ForcePromoteDenied { .. } => Promote,
        Violation::TemplateMalformed { .. } => BadMetadata,
        Violation::ForcePromoteLabelValue { .. } => PromoteLabelValue,
        Violation::ForcePromoteLabelDenied { .. } => PromoteLabel,
        Violation::DeleteUndrainedDenied { .. } => Undrained,
        Violation::BookkeepingChanged { .. } => Bookkeeping,
        Violation::PauseTimestampChanged { .. } => PauseTimestamp,
        Violation::ChildDeleteDenied { .. } => DeleteChild,
        Violation::RolloutDeleteDenied { .. } => DeleteRollout,
        Violation::ChildEditDenied { .. } => EditChild,
        Violation::StrategyDataMalformed { .. }
        | Violation::StrategyInvalid { .. }
        | Violation::StrategyKeysClash { .. }
        | Violation::NamespaceStrategyDenied { .. }
        | Violation::NamespaceFallbackDenied { .. }
        | Violation::ControllerDefinitionsDenied { .. }
        | Violation::ControllerVersionDenied { .. } => {
            panic!("rollout writes never break the ConfigMap rules: {v}")
        }
        Violation::MadeEditDenied { .. } => {
            panic!("rollout writes never break the rule of what Numaflow makes: {v}")
        }
        Violation::ForcePromoteRecordWritten { .. } => Record,
        Violation::Unjudgeable(_) => panic!("the rules never find a request unjudgeable: {v}"),
    }
}

/// One `/validate` case.
#[derive(Clone)]
pub(super) struct Case {
    pub(super) name: String,
    pub(super) policy: Policy,
    kind: Kind,
    op: Operation,
    ns: &'static str,
    user: UserInfo,
    object: Value,
    old: Option<Value>,
    /// The kinds of the expected denials (any order).
    deny: Vec<ViolationKind>,
    /// Substrings: one warning must contain each, and there are exactly as
    /// many warnings as entries.
    warn: Vec<&'static str>,
    /// Expected audit annotations: key and value prefix (exactly these keys).
    audit: Vec<(&'static str, &'static str)>,
    /// Substrings the denial message must contain.
    msg: Vec<String>,
    /// Substrings the denial message must not contain.
    not_msg: Vec<&'static str>,
    /// The reasons of the Events expected, in order (`None`: not checked).
    events: Option<Vec<EventReason>>,
}

impl Named for Case {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A CREATE of `object` by alice in `default`, under the built-in policy,
/// expected to be allowed without warnings.
pub(super) fn create(name: &str, object: PipelineRolloutDoc) -> Case {
    create_json(name, Kind::PipelineRollout, object.into_json())
}

/// A CREATE of the object of `kind` in `object` by alice in `default`,
/// under the built-in policy, expected to be allowed without warnings.
pub(super) fn create_json(name: &str, kind: Kind, object: Value) -> Case {
    Case {
        name: name.to_owned(),
        policy: built_in(),
        kind,
        op: Operation::Create,
        ns: "default",
        user: alice(),
        object,
        old: None,
        deny: Vec::new(),
        warn: Vec::new(),
        audit: Vec::new(),
        msg: Vec::new(),
        not_msg: Vec::new(),
        events: None,
    }
}

/// An UPDATE from `old` to `new` of an object of `kind`, otherwise like
/// [`create_json`].
pub(super) fn update_json(name: &str, kind: Kind, old: Value, new: Value) -> Case {
    Case {
        op: Operation::Update,
        old: Some(old),
        ..create_json(name, kind, new)
    }
}

/// A DELETE of the stored object `stored` of `kind`, otherwise like
/// [`create_json`].
pub(super) fn delete_json(name: &str, kind: Kind, stored: Value) -> Case {
    Case {
        op: Operation::Delete,
        ..create_json(name, kind, stored)
    }
}

/// An UPDATE from `old` to `new`, otherwise like [`create`].
pub(super) fn update(name: &str, old: PipelineRolloutDoc, new: PipelineRolloutDoc) -> Case {
    Case {
        op: Operation::Update,
        old: Some(old.into_json()),
        ..create(name, new)
    }
}

impl Case {
    /// Expects denials of these kinds.
    pub(super) fn deny(mut self, kinds: &[ViolationKind]) -> Self {
        self.deny = kinds.to_vec();
        self
    }
    /// Expects one warning containing each of `parts`, and no other.
    pub(super) fn warn(mut self, parts: &[&'static str]) -> Self {
        self.warn = parts.to_vec();
        self
    }
    /// Expects the audit annotation `key`, starting with `prefix`.
    pub(super) fn audit(mut self, key: &'static str, prefix: &'static str) -> Self {
        self.audit.push((key, prefix));
        self
    }
    /// Expects the denial message to contain each of `parts`.
    pub(super) fn msg(mut self, parts: &[&str]) -> Self {
        self.msg.extend(parts.iter().map(|p| (*p).to_owned()));
        self
    }
    /// Expects the denial message to contain none of `parts`.
    pub(super) fn not_msg(mut self, parts: &[&'static str]) -> Self {
        self.not_msg.extend_from_slice(parts);
        self
    }
    /// Judged under `policy`.
    pub(super) fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// In namespace `ns`.
    pub(super) fn ns(mut self, ns: &'static str) -> Self {
        self.ns = ns;
        self
    }
    /// Written by `user`.
    pub(super) fn user(mut self, user: UserInfo) -> Self {
        self.user = user;
        self
    }
    /// Expects Events with these reasons, in order.
    pub(super) fn events(mut self, reasons: &[EventReason]) -> Self {
        self.events = Some(reasons.to_vec());
        self
    }
}

/// Runs `/validate` on a case, asking for permission the way the admission
/// layer does.
pub(super) fn run(case: &Case) -> Verdict {
    let object = parse(&case.object);
    let old = case.old.as_ref().map(parse);
    let write = GuardedWrite {
        kind: case.kind,
        operation: case.op,
        namespace: case.ns,
        user: &case.user,
        object: &object,
        old_object: old.as_ref(),
        now: NOW,
        origin: Origin::Request,
    };
    by_static_lists(validate(&case.policy, write), &case.policy, &case.user)
}

/// Records each warning longer than kubectl's line of 120 characters.
pub(super) fn check_warnings_short(warnings: &[String], m: &mut Mismatches) {
    for w in warnings {
        let n = w.chars().count();
        m.check(n <= 120, || format!("warning of {n} characters: {w}"));
    }
}

/// Runs a case and records every expectation it does not meet.
pub(super) fn check(case: &Case, m: &mut Mismatches) -> Verdict {
    let d = run(case);
    let mut got: Vec<ViolationKind> = d.denials.iter().map(kind_of).collect();
    got.sort();
    let mut want = case.deny.clone();
    want.sort();
    m.check(got == want, || {
        format!("denials: got {got:?}, want {want:?}: {:#?}", d.denials)
    });
    m.equal("allowed()", d.allowed(), want.is_empty());
    m.equal(
        "denial_message().is_some()",
        d.denial_message().is_some(),
        !want.is_empty(),
    );
    m.check(d.warnings.len() == case.warn.len(), || {
        format!(
            "{} warnings, want {}: {:#?}",
            d.warnings.len(),
            case.warn.len(),
            d.warnings
        )
    });
    for part in &case.warn {
        m.check(d.warnings.iter().any(|w| w.contains(part)), || {
            format!("no warning contains {part:?}: {:#?}", d.warnings)
        });
    }
    let mut keys: Vec<&str> = d.audit.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want_keys: Vec<&str> = case.audit.iter().map(|(k, _)| *k).collect();
    want_keys.sort_unstable();
    m.check(keys == want_keys, || {
        format!(
            "audit keys: got {keys:?}, want {want_keys:?}: {:#?}",
            d.audit
        )
    });
    for (key, prefix) in &case.audit {
        let Some(value) = d.audit.get(*key) else {
            continue;
        };
        m.check(value.starts_with(prefix), || {
            format!("audit {key} = {value:?} does not start with {prefix:?}")
        });
        m.check(
            value.contains(&format!("\"{}\"", case.user.username())),
            || format!("audit {key} = {value:?} does not name the user"),
        );
    }
    let message = d.denial_message().unwrap_or_default();
    for part in &case.msg {
        m.check(message.contains(part.as_str()), || {
            format!("message lacks {part:?}: {message}")
        });
    }
    for part in &case.not_msg {
        m.check(!message.contains(part), || {
            format!("message has {part:?}: {message}")
        });
    }
    if let Some(want) = &case.events {
        let got: Vec<EventReason> = d.events.iter().map(|e| e.reason).collect();
        m.check(&got == want, || {
            format!("events: got {got:?}, want {want:?}: {:#?}", d.events)
        });
    }
    m.check(d.patch.is_empty(), || "/validate must not patch".to_owned());
    m.check(d.defaulted.is_none(), || {
        "/validate defaults nothing".to_owned()
    });
    check_warnings_short(&d.warnings, m);
    d
}

/// Checks every case of a `/validate` table (see [`super::runner`]).
pub(super) fn check_table(table: &str, cases: &[Case]) {
    super::runner::run_table(table, cases, |case, m| {
        check(case, m);
    });
}
