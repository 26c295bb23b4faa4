//! Table-driven tests of the force lifecycle: the one-shot reset in
//! `/mutate`, the minimum pause age of rule 6, and the Events decisions ask
//! for. Every case is judged at [`NOW`].

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::datetime;

use super::*;
use crate::policy::{Permission, Policy, UserInfo};
use crate::rollout::{ALLOW_DATA_LOSS, PipelineRollout};

const NOW: OffsetDateTime = datetime!(2026-12-01 10:00:00 UTC);

fn policy(yaml: &str) -> Policy {
    Policy::from_yaml(yaml).unwrap_or_else(|e| panic!("test policy {yaml:?} is invalid: {e}"))
}

fn argocd() -> UserInfo {
    UserInfo::new(
        "system:serviceaccount:argocd:argocd-server",
        &["system:serviceaccounts", "system:authenticated"],
    )
}

fn alice() -> UserInfo {
    UserInfo::new("alice", &["devs", "system:authenticated"])
}

/// A PipelineRollout with a valid timeout, the annotation `a` (if any) and
/// the status `status` (if any).
fn rollout(a: Option<&str>, status: Option<Value>) -> Value {
    let mut doc = json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "PipelineRollout",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "annotations": {}},
        "spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": 600}}}}
    });
    if let Some(a) = a {
        doc["metadata"]["annotations"][ALLOW_DATA_LOSS] = json!(a);
    }
    if let Some(status) = status {
        doc["status"] = status;
    }
    doc
}

/// A status pausing by the condition, which began at `since`.
fn pausing_since(since: &str) -> Value {
    json!({"upgradeInProgress": "", "conditions": [{
        "type": "PipelinePausingOrPaused", "status": "True",
        "reason": "PipelinePausing", "lastTransitionTime": since
    }]})
}

/// A pause-and-drain upgrade whose pause began at `begin` (if given).
fn ppnd(begin: Option<&str>) -> Value {
    match begin {
        Some(begin) => json!({
            "upgradeInProgress": "PipelinePauseAndDrain",
            "pauseStatus": {"lastPauseBeginTime": begin}
        }),
        None => json!({"upgradeInProgress": "PipelinePauseAndDrain"}),
    }
}

fn parse(value: &Value) -> PipelineRollout {
    PipelineRollout::from_json(&value.to_string()).expect("test object is JSON")
}

/// Runs `/validate` on an UPDATE from `old` to `new` (or a CREATE of `new`).
fn validate_case(
    policy: &Policy,
    ns: &str,
    user: &UserInfo,
    old: Option<&Value>,
    new: &Value,
) -> Decision {
    let object = parse(new);
    let old = old.map(parse);
    let review = Review {
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace: ns,
        user,
        object: &object,
        old_object: old.as_ref(),
        now: NOW,
    };
    validate(policy, review).finish_by_static_lists()
}

struct AgeCase {
    name: &'static str,
    policy: &'static str,
    ns: &'static str,
    user: fn() -> UserInfo,
    status: Value,
    /// Substrings of the denial message; empty: allowed.
    denied_with: &'static [&'static str],
    /// The Event the decision asks for, and a substring of its note.
    event: Option<(EventReason, &'static str)>,
}

const MIN_10M: &str = "forceReapply:\n  minPauseAge: 10m\n";
const OVERRIDES: &str = "forceReapply:\n  minPauseAge: 10m\ndrainTimeout:\n  namespaces:\n  - match: [\"fast-*\"]\n    minPauseAge: 0s\n  - match: [\"slow-*\"]\n    minPauseAge: 1h\n";

fn age_cases() -> Vec<AgeCase> {
    use EventReason::*;
    let case = |name, policy, status, denied_with, event| AgeCase {
        name,
        policy,
        ns: "default",
        user: argocd,
        status,
        denied_with,
        event,
    };
    vec![
        case(
            "condition began 5m ago, minimum 10m",
            MIN_10M,
            pausing_since("2026-12-01T09:55:00Z"),
            &[
                "has lasted 5m",
                "minimum of 10m",
                "from 2026-12-01T10:05:00Z",
            ],
            Some((ForceReapplyDenied, "has lasted 5m")),
        ),
        case(
            "condition began 15m ago",
            MIN_10M,
            pausing_since("2026-12-01T09:45:00Z"),
            &[],
            Some((ForceReapplyAllowed, "pause had lasted 15m")),
        ),
        case(
            "exactly the minimum",
            MIN_10M,
            pausing_since("2026-12-01T09:50:00Z"),
            &[],
            Some((ForceReapplyAllowed, "10m")),
        ),
        case(
            "pause-and-drain began 2m ago",
            MIN_10M,
            ppnd(Some("2026-12-01T09:58:00Z")),
            &["has lasted 2m", "from 2026-12-01T10:08:00Z"],
            Some((ForceReapplyDenied, "minPauseAge")),
        ),
        case(
            "pause-and-drain began 20m ago",
            MIN_10M,
            ppnd(Some("2026-12-01T09:40:00Z")),
            &[],
            Some((ForceReapplyAllowed, "20m")),
        ),
        case(
            "pause start missing: fail closed",
            MIN_10M,
            ppnd(None),
            &["pause start cannot be read", "lastPauseBeginTime"],
            Some((ForceReapplyDenied, "cannot be read")),
        ),
        case(
            "pause start not RFC 3339: fail closed",
            MIN_10M,
            ppnd(Some("yesterday")),
            &[
                "pause start cannot be read",
                "\"yesterday\", not an RFC 3339 time",
            ],
            None,
        ),
        case(
            "pause start in the future counts as 0",
            MIN_10M,
            ppnd(Some("2026-12-01T10:30:00Z")),
            &["has lasted 0s", "from 2026-12-01T10:40:00Z"],
            None,
        ),
        case(
            "condition without a time falls back to lastPauseBeginTime",
            MIN_10M,
            json!({"pauseStatus": {"lastPauseBeginTime": "2026-12-01T09:00:00Z"},
                   "conditions": [{"type": "PipelinePausingOrPaused", "status": "True",
                                   "reason": "PipelinePausing"}]}),
            &[],
            Some((ForceReapplyAllowed, "1h")),
        ),
        case(
            "no minimum by default",
            "",
            pausing_since("2026-12-01T09:59:59Z"),
            &[],
            Some((ForceReapplyAllowed, "1s")),
        ),
        case(
            "warn mode lets a young pause through, saying so",
            "mode: warn\nforceReapply:\n  minPauseAge: 10m\n",
            pausing_since("2026-12-01T09:55:00Z"),
            &[],
            Some((ForceReapplyAllowed, "warn mode")),
        ),
        AgeCase {
            ns: "fast-a",
            ..case(
                "an override of 0s in fast-*",
                OVERRIDES,
                pausing_since("2026-12-01T09:59:00Z"),
                &[],
                None,
            )
        },
        AgeCase {
            ns: "slow-a",
            ..case(
                "an override of 1h in slow-*",
                OVERRIDES,
                pausing_since("2026-12-01T09:30:00Z"),
                &["has lasted 30m", "minimum of 1h"],
                None,
            )
        },
        AgeCase {
            user: alice,
            ..case(
                "no permission and too young: both reasons",
                MIN_10M,
                pausing_since("2026-12-01T09:55:00Z"),
                &["not in forceReapply.users", "; and the pause has lasted 5m"],
                Some((ForceReapplyDenied, "not in forceReapply.users")),
            )
        },
    ]
}

#[test]
fn min_pause_age_table() {
    for case in age_cases() {
        let name = case.name;
        let policy = policy(case.policy);
        let old = rollout(Some("false"), Some(case.status.clone()));
        let new = rollout(Some("true"), Some(case.status.clone()));
        let d = validate_case(&policy, case.ns, &(case.user)(), Some(&old), &new);
        let message = d.denial_message().unwrap_or_default();
        assert_eq!(
            d.allowed(),
            case.denied_with.is_empty(),
            "{name}: allowed={} {message}",
            d.allowed()
        );
        for part in case.denied_with {
            assert!(message.contains(part), "{name}: lacks {part:?}: {message}");
        }
        if let Some((reason, part)) = case.event {
            let event = d.events.iter().find(|e| e.reason == reason);
            let event = event.unwrap_or_else(|| panic!("{name}: no {reason:?} in {:?}", d.events));
            assert!(
                event.note.contains(part),
                "{name}: note lacks {part:?}: {}",
                event.note
            );
            assert!(event.note.chars().count() <= 1000, "{name}: note too long");
        }
        for w in &d.warnings {
            assert!(w.chars().count() <= 120, "{name}: long warning {w}");
        }
    }
}

#[test]
fn a_refused_create_asks_for_no_event_and_an_allowed_promotion_does() {
    let p = policy(MIN_10M);
    let created = rollout(Some("true"), None);
    let d = validate_case(&p, "default", &alice(), None, &created);
    assert!(!d.allowed());
    assert!(
        d.events.is_empty(),
        "no stored object to record on: {:?}",
        d.events
    );

    let old = rollout(None, None);
    let mut promoted = rollout(None, None);
    promoted["spec"]["strategy"] = json!({"progressive": {"forcePromote": true}});
    let d = validate_case(&p, "default", &argocd(), Some(&old), &promoted);
    assert!(d.allowed(), "{:?}", d.denial_message());
    let reasons: Vec<EventReason> = d.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [EventReason::ForcePromoteAllowed]);
    assert!(
        d.events[0]
            .note
            .contains("allowed by the admission webhook")
    );
    assert!(d.events[0].note.contains("argocd-server"));
}

struct ResetCase {
    name: &'static str,
    policy: &'static str,
    old: Option<Value>,
    new: Value,
    reset: bool,
}

fn reset_cases() -> Vec<ResetCase> {
    let case = |name, old, new, reset| ResetCase {
        name,
        policy: "",
        old,
        new,
        reset,
    };
    let idle = json!({"upgradeInProgress": "", "conditions": [
        {"type": "PipelinePausingOrPaused", "status": "False", "reason": "PipelineUnpaused"}
    ]});
    vec![
        case(
            "true kept after the pause: reset",
            Some(rollout(Some("true"), Some(idle.clone()))),
            rollout(Some("true"), Some(idle.clone())),
            true,
        ),
        case(
            "true kept, no status at all: reset",
            Some(rollout(Some("true"), None)),
            rollout(Some("true"), None),
            true,
        ),
        case(
            "true kept while pausing and draining",
            Some(rollout(Some("true"), Some(ppnd(None)))),
            rollout(Some("true"), Some(ppnd(None))),
            false,
        ),
        case(
            "true kept while paused (condition True, reason PipelinePaused)",
            Some(rollout(
                Some("true"),
                Some(json!({"conditions": [{"type": "PipelinePausingOrPaused",
                    "status": "True", "reason": "PipelinePaused"}]})),
            )),
            rollout(Some("true"), Some(idle.clone())),
            false,
        ),
        case(
            "this request turns it on",
            Some(rollout(Some("false"), Some(idle.clone()))),
            rollout(Some("true"), Some(idle.clone())),
            false,
        ),
        case(
            "this request removes it",
            Some(rollout(Some("true"), Some(idle.clone()))),
            rollout(None, Some(idle.clone())),
            false,
        ),
        case(
            "a CREATE with true",
            None,
            rollout(Some("true"), None),
            false,
        ),
        ResetCase {
            policy: "forceReapply:\n  oneShot: false\n",
            ..case(
                "oneShot off",
                Some(rollout(Some("true"), Some(idle.clone()))),
                rollout(Some("true"), Some(idle)),
                false,
            )
        },
    ]
}

fn mutate_case(policy: &Policy, old: Option<&Value>, new: &Value) -> Decision {
    let object = parse(new);
    let old = old.map(parse);
    let user = argocd();
    let review = Review {
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace: "default",
        user: &user,
        object: &object,
        old_object: old.as_ref(),
        now: NOW,
    };
    mutate(policy, &review)
}

#[test]
fn one_shot_reset_table() {
    for case in reset_cases() {
        let name = case.name;
        let policy = policy(case.policy);
        let d = mutate_case(&policy, case.old.as_ref(), &case.new);
        assert_eq!(d.reset_force, case.reset, "{name}: {d:?}");
        let reset_events = d
            .events
            .iter()
            .filter(|e| e.reason == EventReason::ForceReapplyReset)
            .count();
        assert_eq!(reset_events, usize::from(case.reset), "{name}");
        if !case.reset {
            assert!(d.patch.is_empty(), "{name}: unexpected patch {:?}", d.patch);
            assert!(!d.audit.contains_key("force-reapply-reset"), "{name}");
            continue;
        }
        // The patch, applied as the API server applies it, leaves "false".
        let mut patched = case.new.clone();
        json_patch::patch(&mut patched, &d.patch)
            .unwrap_or_else(|e| panic!("{name}: patch does not apply: {e}"));
        assert_eq!(
            patched["metadata"]["annotations"][ALLOW_DATA_LOSS], "false",
            "{name}"
        );
        assert_eq!(d.warnings, [defaulting::RESET_WARNING], "{name}");
        assert!(defaulting::RESET_WARNING.chars().count() < 120);
        assert!(d.audit["force-reapply-reset"].contains("argocd-server"));
        // Re-invoked on the patched object, /mutate does nothing more.
        let again = mutate_case(&policy, case.old.as_ref(), &patched);
        assert!(
            again.patch.is_empty() && !again.reset_force,
            "{name}: {again:?}"
        );
        // And /validate then sees "false": rule 11 stays quiet.
        let v = validate_case(&policy, "default", &argocd(), case.old.as_ref(), &patched);
        assert!(v.allowed() && v.warnings.is_empty(), "{name}: {v:?}");
    }
}

#[test]
fn a_reset_and_a_default_make_one_patch_of_two_operations() {
    let mut old = rollout(Some("true"), None);
    old["spec"]["pipeline"]["spec"]["lifecycle"] = json!({});
    let new = old.clone();
    let d = mutate_case(&Policy::built_in(), Some(&old), &new);
    assert_eq!(d.patch.len(), 2, "{:?}", d.patch);
    let mut patched = new;
    json_patch::patch(&mut patched, &d.patch).expect("applies");
    assert_eq!(patched["metadata"]["annotations"][ALLOW_DATA_LOSS], "false");
    assert_eq!(
        patched["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"],
        31_536_000
    );
}

#[test]
fn with_rbac_a_request_denied_anyway_asks_nobody_and_claims_no_refusal() {
    let p = policy("forceReapply:\n  rbac: {verb: force-reapply}\n");
    // Not pausing: denied for that alone; RBAC (which might grant alice)
    // was not asked, so the message gives no permission advice.
    let idle = json!({"upgradeInProgress": ""});
    let old = rollout(Some("false"), Some(idle.clone()));
    let new = rollout(Some("true"), Some(idle));
    let object = parse(&new);
    let stored = parse(&old);
    let user = alice();
    let review = Review {
        operation: Operation::Update,
        namespace: "default",
        user: &user,
        object: &object,
        old_object: Some(&stored),
        now: NOW,
    };
    let validation = validate(&p, review);
    assert_eq!(validation.settled_permission(), Some(Permission::NotAsked));
    let d = validation.finish(&Permission::NotAsked);
    let message = d.denial_message().unwrap_or_default();
    assert!(message.contains("the pipeline is not pausing"), "{message}");
    assert!(!message.contains("ask a platform admin"), "{message}");
    assert!(d.audit["force-reapply"].starts_with("denied by rule 6"));

    // Pausing, but the timeout is invalid: denied for the timeout; the
    // force gate records nothing it did not decide.
    let pausing = json!({"upgradeInProgress": "PipelinePauseAndDrain"});
    let old = rollout(Some("false"), Some(pausing.clone()));
    let mut new = rollout(Some("true"), Some(pausing));
    new["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"] = json!(5);
    let d = validate_case(&p, "default", &alice(), Some(&old), &new);
    assert!(!d.allowed());
    assert!(!d.audit.contains_key("force-reapply"), "{:?}", d.audit);
    assert!(d.events.is_empty(), "{:?}", d.events);
}
