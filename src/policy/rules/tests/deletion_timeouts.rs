//! Rules 16 to 18: the deletion timeout of a PipelineRollout
//! (`deletionGracePeriodSeconds`, or the deprecated
//! `deleteGracePeriodSeconds`), and a child Pipeline's own lifecycle
//! (its pause timeout by rules 2 to 4, its deletion timeout by 16 to 18),
//! under the built-in policy, namespace overrides, ratcheting and warn mode.

use super::fixtures::by_static_lists;
use serde_json::{Value, json};

use super::fixtures::{admin, parse, pipeline_rollout, policy, warn_mode};
use super::numaplane_keys::{child, controller};
use super::validate_case::{
    Case, ViolationKind, check_table, create, create_json, update, update_json,
};
use crate::kinds::Kind;
use crate::policy::rules::{GuardedWrite, Operation, Origin, Rule, validate};

const DELETION: &str = "spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds";
const DEPRECATED: &str = "spec.pipeline.spec.lifecycle.deleteGracePeriodSeconds";

/// A rollout with a valid pause timeout and this lifecycle besides.
fn lifecycle(extra: Value) -> test_builders::PipelineRolloutDoc {
    let mut lifecycle = json!({"pauseGracePeriodSeconds": 600});
    if let (Some(all), Some(more)) = (lifecycle.as_object_mut(), extra.as_object()) {
        all.extend(more.clone());
    }
    pipeline_rollout().with_lifecycle(lifecycle)
}

fn deletion(v: Value) -> test_builders::PipelineRolloutDoc {
    lifecycle(json!({"deletionGracePeriodSeconds": v}))
}

fn deprecated(v: Value) -> test_builders::PipelineRolloutDoc {
    lifecycle(json!({"deleteGracePeriodSeconds": v}))
}

/// The built-in deletionTimeout: 30 s to 1 h, no timeout not allowed.
fn rollout_cases() -> Vec<Case> {
    use ViolationKind::*;
    vec![
        create("absent", lifecycle(json!({}))),
        create("null", deletion(Value::Null)),
        create("30 (the minimum)", deletion(json!(30))),
        create("3600 (the maximum)", deletion(json!(3600))),
        create("\"30s\"", deletion(json!("30s")))
            .deny(&[NotInteger])
            .msg(&[DELETION, "\"30s\"", "write an integer"]),
        create("30.5", deletion(json!(30.5))).deny(&[NotInteger]),
        create("true", deletion(json!(true))).deny(&[NotInteger]),
        create("0", deletion(json!(0))).deny(&[TooShort]).msg(&[
            DELETION,
            "is 0",
            "dropping unconsumed messages",
            "set 30 to 3600 seconds",
        ]),
        create("-1", deletion(json!(-1))).deny(&[TooShort]),
        create("29", deletion(json!(29))).deny(&[TooShort]),
        create("3601", deletion(json!(3601)))
            .deny(&[TooLong])
            .msg(&[
                "above the maximum of 3600",
                "set by deletionTimeout in the policy",
            ]),
        create("no timeout", deletion(json!(31_536_000)))
            .deny(&[NoTimeout])
            .msg(&["means no timeout", "does not allow no timeout"]),
        create("9223372037 (overflows)", deletion(json!(9_223_372_037_i64)))
            .deny(&[NoTimeout, ClockOverflow])
            .msg(&["time.Duration", "at most 9223372036"]),
        create("u64 max", deletion(json!(u64::MAX))).deny(&[NoTimeout, ClockOverflow]),
        // Only the deprecated field: judged, with a warning.
        create("deprecated 60", deprecated(json!(60))).warn(&[
            "deleteGracePeriodSeconds is deprecated: rename it deletionGracePeriodSeconds",
        ]),
        create("deprecated 0", deprecated(json!(0)))
            .deny(&[TooShort])
            .msg(&[DEPRECATED, "is 0"])
            .warn(&["deprecated"]),
        create("deprecated \"1m\"", deprecated(json!("1m")))
            .deny(&[NotInteger])
            .msg(&[DEPRECATED])
            .warn(&["deprecated"]),
        // Both: Numaflow reads deletionGracePeriodSeconds; the other warns.
        create(
            "both, different",
            lifecycle(json!({"deletionGracePeriodSeconds": 60, "deleteGracePeriodSeconds": 0})),
        )
        .warn(&[
            "deleteGracePeriodSeconds 0 is ignored: Numaflow uses deletionGracePeriodSeconds 60",
        ]),
        create(
            "both, the same",
            lifecycle(json!({"deletionGracePeriodSeconds": 60, "deleteGracePeriodSeconds": 60})),
        ),
        create(
            "both, the one used is bad",
            lifecycle(json!({"deletionGracePeriodSeconds": 0, "deleteGracePeriodSeconds": 60})),
        )
        .deny(&[TooShort])
        .msg(&[DELETION])
        .not_msg(&[DEPRECATED])
        .warn(&["ignored"]),
        // Rule 8: an unchanged bad value warns.
        update(
            "unchanged 0",
            deletion(json!(0)),
            deletion(json!(0)).with_unrelated_edit(),
        )
        .warn(&["unchanged, so allowed: deletionGracePeriodSeconds 0 is below the minimum 30"]),
        update("changed to 0", deletion(json!(60)), deletion(json!(0))).deny(&[TooShort]),
        update(
            "renamed to the new field, same bad value",
            deprecated(json!(0)),
            deletion(json!(0)),
        )
        .deny(&[TooShort]),
        update(
            "deprecated unchanged 0",
            deprecated(json!(0)),
            deprecated(json!(0)).with_unrelated_edit(),
        )
        .warn(&["deprecated", "unchanged, so allowed"]),
        // Rule 10: warn mode denies nothing.
        create("warn mode: 0", deletion(json!(0)))
            .policy(warn_mode())
            .warn(&["warn mode, would deny: deletionGracePeriodSeconds 0"]),
    ]
}

#[test]
fn rollout_deletion_timeout_table() {
    check_table("rollout deletion timeout", &rollout_cases());
}

/// `deletionTimeout.namespaces`: the first match wins, keys left out come
/// from the top level; the pause timeout's rules are not involved.
#[test]
fn deletion_timeout_namespace_overrides() {
    use ViolationKind::*;
    let p = || {
        policy(
            "deletionTimeout:\n  namespaces:\n  - match: [\"batch-*\"]\n    min: 5s\n    max: 10m\n  - match: [ledger]\n    allowNoTimeout: true\n    default: none\n",
        )
    };
    let at = |ns: &'static str, name: &str, v: Value| {
        create(&format!("{ns}: {name}"), deletion(v))
            .policy(p())
            .ns(ns)
    };
    let cases = vec![
        at("batch-eu", "5s", json!(5)),
        at("batch-eu", "4s", json!(4))
            .deny(&[TooShort])
            .msg(&["the policy for namespaces \"batch-*\""]),
        at("batch-eu", "11m", json!(660)).deny(&[TooLong]),
        at("ledger", "no timeout", json!(31_536_000)),
        at("ledger", "29", json!(29)).deny(&[TooShort]),
        at("default", "5s", json!(5)).deny(&[TooShort]),
        at("default", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
    ];
    check_table("deletion timeout overrides", &cases);
}

/// A child Pipeline with this lifecycle (`None`: no `spec.lifecycle`).
fn pipeline(lifecycle: Option<Value>) -> Value {
    let mut doc = child(Kind::Pipeline, Some("promoted"), &[], &[]);
    if let Some(lifecycle) = lifecycle {
        doc["spec"]["lifecycle"] = lifecycle;
    }
    doc
}

/// A Pipeline of a user's own (no Numaplane keys) with this lifecycle.
fn own_pipeline(lifecycle: Option<Value>) -> Value {
    let mut doc = json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline",
        "metadata": {"name": "mine", "namespace": "default"}, "spec": {}});
    if let Some(lifecycle) = lifecycle {
        doc["spec"]["lifecycle"] = lifecycle;
    }
    doc
}

/// What Numaflow's CRD leaves on a child: both deletion fields at 30.
fn crd_defaults(extra: Value) -> Value {
    let mut all = json!({"deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30});
    if let (Some(all), Some(more)) = (all.as_object_mut(), extra.as_object()) {
        all.extend(more.clone());
    }
    all
}

fn child_cases() -> Vec<Case> {
    use ViolationKind::*;
    let stored = || pipeline(Some(crd_defaults(json!({"pauseGracePeriodSeconds": 600}))));
    // Editing a rollout's child needs forceReapply.editChildren (rule 26),
    // which system:masters holds; rules 2 to 4 and 16 to 18 judge the
    // holder's values still.
    let edit = |name: &str, lifecycle: Value| {
        update_json(name, Kind::Pipeline, stored(), pipeline(Some(lifecycle)))
            .user(admin())
            .audit("edit-child", "allowed: user \"admin\"")
    };
    vec![
        // Bad input: no lifecycle, a lifecycle that is not an object.
        create_json("no lifecycle", Kind::Pipeline, own_pipeline(None)),
        create_json(
            "lifecycle null",
            Kind::Pipeline,
            own_pipeline(Some(Value::Null)),
        ),
        create_json(
            "lifecycle a string",
            Kind::Pipeline,
            own_pipeline(Some(json!("Paused"))),
        )
            .deny(&[Unreachable])
            .msg(&["spec.lifecycle is a string, not an object", "Pipeline CRD"]),
        create_json(
            "CRD defaults only",
            Kind::Pipeline,
            own_pipeline(Some(crd_defaults(json!({})))),
        ),
        create_json(
            "a user's own Pipeline with pause 0",
            Kind::Pipeline,
            own_pipeline(Some(crd_defaults(json!({"pauseGracePeriodSeconds": 0})))),
        )
        .deny(&[TooShort]),
        update_json("lifecycle removed", Kind::Pipeline, stored(), pipeline(None))
            .user(admin())
            .audit("edit-child", "allowed"),
        update_json("alice edits a child's lifecycle", Kind::Pipeline, stored(), pipeline(None))
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["may not change spec.lifecycle of this Pipeline"]),
        edit(
            "pause 0",
            crd_defaults(json!({"pauseGracePeriodSeconds": 0})),
        )
        .deny(&[TooShort])
        .msg(&["spec.lifecycle.pauseGracePeriodSeconds is 0", "ends the pause at once"]),
        edit(
            "pause \"30s\"",
            crd_defaults(json!({"pauseGracePeriodSeconds": "30s"})),
        )
        .deny(&[NotInteger])
        .msg(&["spec.lifecycle.pauseGracePeriodSeconds is \"30s\""]),
        edit(
            "pause 1200",
            crd_defaults(json!({"pauseGracePeriodSeconds": 1200})),
        ),
        edit(
            "pause overflowing",
            crd_defaults(json!({"pauseGracePeriodSeconds": 9_223_372_037_i64})),
        )
        .deny(&[ClockOverflow]),
        edit(
            "deletion 0",
            json!({"pauseGracePeriodSeconds": 600, "deletionGracePeriodSeconds": 0, "deleteGracePeriodSeconds": 30}),
        )
        .deny(&[TooShort])
        .msg(&["spec.lifecycle.deletionGracePeriodSeconds is 0"]),
        edit(
            "deprecated 0, ignored (the CRD's 30 is read)",
            json!({"pauseGracePeriodSeconds": 600, "deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 0}),
        )
        .warn(&["deleteGracePeriodSeconds 0 is ignored: Numaflow uses deletionGracePeriodSeconds 30"]),
        edit(
            "deletion removed, deprecated 0 read",
            json!({"pauseGracePeriodSeconds": 600, "deleteGracePeriodSeconds": 0}),
        )
        .deny(&[TooShort])
        .msg(&["spec.lifecycle.deleteGracePeriodSeconds is 0"])
        .warn(&["deprecated"]),
        // The controller copies a judged rollout's values: not judged.
        update_json(
            "pause 0 by the controller",
            Kind::Pipeline,
            stored(),
            pipeline(Some(crd_defaults(json!({"pauseGracePeriodSeconds": 0})))),
        )
        .user(controller()),
        // Rule 8 on a child: a bad stored value left as it is warns.
        update_json(
            "unchanged pause 0",
            Kind::Pipeline,
            pipeline(Some(crd_defaults(json!({"pauseGracePeriodSeconds": 0})))),
            pipeline(Some(crd_defaults(json!({"pauseGracePeriodSeconds": 0, "desiredPhase": "Paused"})))),
        )
        .warn(&["unchanged, so allowed"]),
        // Other children have no drain timeouts of Numaflow's.
        {
            let mono = |l: Value| {
                let mut doc = child(Kind::MonoVertex, Some("promoted"), &[], &[]);
                doc["spec"]["lifecycle"] = l;
                doc
            };
            update_json(
                "a MonoVertex",
                Kind::MonoVertex,
                mono(json!({})),
                mono(json!({"pauseGracePeriodSeconds": 0})),
            )
            .user(admin())
            .audit("edit-child", "allowed")
        },
    ]
}

#[test]
fn child_lifecycle_table() {
    check_table("child lifecycle", &child_cases());
}

/// Violations of the deletion timeout carry rules 16 to 18, those of a
/// child's pause timeout rules 2 to 4: the metrics, the audit and the
/// Events take the rule from the violation.
#[test]
fn deletion_violations_carry_rules_16_to_18() {
    let judged = |object: Value, kind: Kind| {
        let object = parse(&object);
        let user = super::fixtures::alice();
        let policy = crate::policy::Policy::built_in();
        let write = GuardedWrite {
            kind,
            operation: Operation::Create,
            namespace: "default",
            user: &user,
            object: &object,
            old_object: None,
            now: super::fixtures::NOW,
            origin: Origin::Request,
        };
        let d = by_static_lists(validate(&policy, write), &policy, &user);
        let mut rules: Vec<u8> = d.denials.iter().map(|v| v.rule().number()).collect();
        rules.sort_unstable();
        rules
    };
    let rollout = |v: Value| deletion(v).into_json();
    assert_eq!(judged(rollout(json!("1m")), Kind::PipelineRollout), [16]);
    assert_eq!(judged(rollout(json!(0)), Kind::PipelineRollout), [17]);
    assert_eq!(
        judged(rollout(json!(9_223_372_037_i64)), Kind::PipelineRollout),
        [17, 18]
    );
    let on_child = |l: Value| own_pipeline(Some(l));
    assert_eq!(
        judged(
            on_child(json!({"deletionGracePeriodSeconds": -5})),
            Kind::Pipeline
        ),
        [17]
    );
    assert_eq!(
        judged(
            on_child(json!({"pauseGracePeriodSeconds": 1.5})),
            Kind::Pipeline
        ),
        [2]
    );
    assert_eq!(
        Rule::DeletionTimeoutOverflow.name(),
        "deletion-timeout-overflow"
    );
}
