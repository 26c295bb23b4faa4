//! The force lifecycle: the minimum pause age of rule 6, the Events
//! verdicts ask for, and the one-shot reset of a stale force in `/mutate`.

use super::fixtures::by_static_lists;
use serde_json::{Value, json};
use test_builders::rollout::ALLOW_DATA_LOSS;
use test_builders::status::{
    PAUSING_CONDITION, condition_status, pause_and_drain_status, pausing_since,
};

use super::fixtures::{
    NOW, alice, argocd_server, mutated, parse, pipeline_rollout, policy, rollout_with,
};
use super::runner::{Mismatches, Named, run_table};
use crate::policy::rules::{
    EventReason, GuardedWrite, Need, Operation, Origin, Pending, Permissions, Verdict,
    stale_force_reset, validate,
};
use crate::policy::{Permission, Policy, UserInfo};

/// [`rollout_with`]'s document, as JSON.
fn rollout(allow_data_loss: Option<&str>, status: Option<Value>) -> Value {
    rollout_with(allow_data_loss, status).into_json()
}

/// Runs `/validate` on an UPDATE from `old` to `new` (or a CREATE of `new`).
fn validated(
    policy: &Policy,
    ns: &str,
    user: &UserInfo,
    old: Option<&Value>,
    new: &Value,
) -> Verdict {
    let object = parse(new);
    let old = old.map(parse);
    let write = GuardedWrite {
        kind: crate::kinds::Kind::PipelineRollout,
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
        origin: Origin::Request,
    };
    by_static_lists(validate(policy, write), policy, user)
}

/// A forced re-apply (allow-data-loss "false" -> "true") while pausing,
/// judged against a minimum pause age.
struct AgeCase {
    name: &'static str,
    policy: &'static str,
    ns: &'static str,
    user: fn() -> UserInfo,
    status: Value,
    /// Substrings of the denial message; empty: allowed.
    denied_with: &'static [&'static str],
    /// The Event the verdict asks for, and a substring of its note.
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
        user: argocd_server,
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
            pause_and_drain_status(Some("2026-12-01T09:58:00Z")),
            &["has lasted 2m", "from 2026-12-01T10:08:00Z"],
            Some((ForceReapplyDenied, "minPauseAge")),
        ),
        case(
            "pause-and-drain began 20m ago",
            MIN_10M,
            pause_and_drain_status(Some("2026-12-01T09:40:00Z")),
            &[],
            Some((ForceReapplyAllowed, "20m")),
        ),
        case(
            "pause start missing: fail closed",
            MIN_10M,
            pause_and_drain_status(None),
            &["pause start cannot be read", "lastPauseBeginTime"],
            Some((ForceReapplyDenied, "cannot be read")),
        ),
        case(
            "pause start not RFC 3339: fail closed",
            MIN_10M,
            pause_and_drain_status(Some("yesterday")),
            &[
                "pause start cannot be read",
                "\"yesterday\", not an RFC 3339 time",
            ],
            None,
        ),
        case(
            "pause start in the future counts as 0",
            MIN_10M,
            pause_and_drain_status(Some("2026-12-01T10:30:00Z")),
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

impl Named for AgeCase {
    fn name(&self) -> &str {
        self.name
    }
}

#[test]
fn min_pause_age_table() {
    run_table("min pause age", &age_cases(), |case, m| {
        let policy = policy(case.policy);
        let old = rollout(Some("false"), Some(case.status.clone()));
        let new = rollout(Some("true"), Some(case.status.clone()));
        let d = validated(&policy, case.ns, &(case.user)(), Some(&old), &new);
        let message = d.denial_message().unwrap_or_default();
        m.check(d.allowed() == case.denied_with.is_empty(), || {
            format!("allowed={} {message}", d.allowed())
        });
        for part in case.denied_with {
            m.check(message.contains(part), || {
                format!("message lacks {part:?}: {message}")
            });
        }
        if let Some((reason, part)) = case.event {
            match d.events.iter().find(|e| e.reason == reason) {
                None => m.check(false, || format!("no {reason:?} in {:?}", d.events)),
                Some(event) => {
                    m.check(event.note.contains(part), || {
                        format!("note lacks {part:?}: {}", event.note)
                    });
                    m.check(event.note.chars().count() <= 1000, || {
                        format!("note too long: {}", event.note)
                    });
                }
            }
        }
        for w in &d.warnings {
            m.check(w.chars().count() <= 120, || format!("long warning {w}"));
        }
    });
}

#[test]
fn a_refused_create_asks_for_no_event_and_an_allowed_promotion_does() {
    let p = policy(MIN_10M);
    let created = rollout(Some("true"), None);
    let d = validated(&p, "default", &alice(), None, &created);
    assert!(!d.allowed());
    assert!(
        d.events.is_empty(),
        "no stored object to record on: {:?}",
        d.events
    );

    let old = rollout(None, None);
    let promoted = pipeline_rollout()
        .with_timeout(600)
        .with_deletion_timeout(30)
        .with_force_promote(true)
        .into_json();
    let d = validated(&p, "default", &argocd_server(), Some(&old), &promoted);
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

/// A `/mutate` that may reset a stale force.
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
    let idle = condition_status(PAUSING_CONDITION, "False", "PipelineUnpaused");
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
            Some(rollout(Some("true"), Some(pause_and_drain_status(None)))),
            rollout(Some("true"), Some(pause_and_drain_status(None))),
            false,
        ),
        case(
            "true kept while paused (condition True, reason PipelinePaused)",
            Some(rollout(
                Some("true"),
                Some(condition_status(
                    PAUSING_CONDITION,
                    "True",
                    "PipelinePaused",
                )),
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

impl Named for ResetCase {
    fn name(&self) -> &str {
        self.name
    }
}

#[test]
fn one_shot_reset_table() {
    run_table("one-shot reset", &reset_cases(), check_reset);
}

/// Checks one reset case.
fn check_reset(case: &ResetCase, m: &mut Mismatches) {
    let policy = policy(case.policy);
    let d = mutated(&policy, case.old.as_ref(), &case.new);
    m.check(d.reset_force == case.reset, || {
        format!("reset_force {}, want {}: {d:?}", d.reset_force, case.reset)
    });
    let reset_events = d
        .events
        .iter()
        .filter(|e| e.reason == EventReason::ForceReapplyReset)
        .count();
    m.equal("reset Events", reset_events, usize::from(case.reset));
    if !case.reset {
        m.check(d.patch.is_empty(), || {
            format!("unexpected patch {:?}", d.patch)
        });
        m.check(!d.audit.contains_key("force-reapply-reset"), || {
            format!("audit {:?}", d.audit)
        });
        return;
    }
    // The patch, applied as the API server applies it, leaves "false".
    let mut patched = case.new.clone();
    if let Err(e) = json_patch::patch(&mut patched, &d.patch) {
        m.check(false, || format!("patch does not apply: {e}"));
        return;
    }
    m.equal(
        "allow-data-loss after the patch",
        &patched["metadata"]["annotations"][ALLOW_DATA_LOSS],
        &json!("false"),
    );
    m.equal(
        "warnings",
        d.warnings.as_slice(),
        &[stale_force_reset::RESET_WARNING.to_owned()],
    );
    m.check(
        stale_force_reset::RESET_WARNING.chars().count() < 120,
        || "the reset warning is too long".to_owned(),
    );
    let audit = d.audit.get("force-reapply-reset");
    m.check(audit.is_some_and(|a| a.contains("argocd-server")), || {
        format!("audit {audit:?}")
    });
    // Re-invoked on the patched object, /mutate does nothing more.
    let again = mutated(&policy, case.old.as_ref(), &patched);
    m.check(again.patch.is_empty() && !again.reset_force, || {
        format!("again: {again:?}")
    });
    // And /validate then sees "false": rule 11 stays quiet.
    let v = validated(
        &policy,
        "default",
        &argocd_server(),
        case.old.as_ref(),
        &patched,
    );
    m.check(v.allowed() && v.warnings.is_empty(), || {
        format!("validated: {v:?}")
    });
}

#[test]
fn a_reset_and_a_default_make_one_patch_of_two_operations() {
    let old = pipeline_rollout()
        .with_lifecycle(json!({"deletionGracePeriodSeconds": 30}))
        .with_allow_data_loss("true")
        .into_json();
    let new = old.clone();
    let d = mutated(&Policy::built_in(), Some(&old), &new);
    assert_eq!(d.patch.len(), 2, "{:?}", d.patch);
    let mut patched = new;
    json_patch::patch(&mut patched, &d.patch).expect("the patch applies");
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
    let write = GuardedWrite {
        kind: crate::kinds::Kind::PipelineRollout,
        operation: Operation::Update,
        namespace: "default",
        user: &user,
        object: &object,
        old_object: Some(&stored),
        now: NOW,
        origin: Origin::Request,
    };
    let validation = validate(&p, write);
    assert_eq!(
        validation.settled(Need::ForceReapply),
        Some(Permission::NotAsked)
    );
    let d = validation.finish(&Permissions(Need::ALL.map(|need| {
        if need == Need::ForceReapply {
            Permission::NotAsked
        } else {
            Permission::NotNeeded
        }
    })));
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
    let d = validated(&p, "default", &alice(), Some(&old), &new);
    assert!(!d.allowed());
    assert!(!d.audit.contains_key("force-reapply"), "{:?}", d.audit);
    assert!(d.events.is_empty(), "{:?}", d.events);
}
