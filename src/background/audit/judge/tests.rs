//! The judge's tables: each rule's result for stored objects, wrong shapes, warn mode, forces by state.

use serde_json::json;

use super::*;
use crate::background::audit::kinds::KINDS;

fn judged(policy: &Policy, object: Value) -> Judged {
    let (enforcing, warn_only) = enforcing(policy);
    let judge = Judge::new(&enforcing, warn_only, OffsetDateTime::now_utc());
    let json = object.to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on((KINDS[0].judge)(&judge, &KINDS[0], &json))
}

fn rollout(timeout: Value, annotations: Value, status: Value) -> Value {
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "u-1", "annotations": annotations},
        "spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": timeout}}}},
        "status": status,
    })
}

fn status_of(results: &Judged, rule: &str) -> (Status, String) {
    let r = results
        .iter()
        .find(|r| r.rule == rule)
        .unwrap_or_else(|| panic!("no result for {rule} in {results:?}"));
    (
        r.status,
        r.message.as_deref().unwrap_or_default().to_owned(),
    )
}

#[test]
fn each_rule_gets_one_result_with_the_denial_words() {
    let policy = Policy::built_in();
    let idle = json!({"upgradeInProgress": ""});
    let pausing = json!({"upgradeInProgress": "PipelinePauseAndDrain"});
    let cases: Vec<(&str, Value, &str, Status, &str)> = vec![
        (
            "in range",
            rollout(json!(300), json!({}), idle.clone()),
            RULE_TIMEOUT_RANGE,
            Status::Pass,
            "",
        ),
        (
            "above the maximum",
            rollout(json!(7200), json!({}), idle.clone()),
            RULE_TIMEOUT_RANGE,
            Status::Fail,
            "above the maximum of 3600",
        ),
        (
            "not an integer",
            rollout(json!("1h"), json!({}), idle.clone()),
            RULE_TIMEOUT_INTEGER,
            Status::Fail,
            "not an integer number of seconds",
        ),
        (
            "a value Numaplane ignores",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "True"}), idle.clone()),
            RULE_ALLOW_DATA_LOSS_VALUE,
            Status::Fail,
            "which Numaplane ignores",
        ),
        (
            "a stale force",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "true"}), idle.clone()),
            RULE_FORCE_REAPPLY,
            Status::Fail,
            "is \"true\" and the pause is over",
        ),
        (
            "a force during a pause",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "true"}), pausing),
            RULE_FORCE_REAPPLY,
            Status::Warn,
            "while the pipeline is paused or pausing",
        ),
        (
            "a force during a pause is no CREATE denial",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "true"}), idle.clone()),
            RULE_TIMEOUT_RANGE,
            Status::Pass,
            "",
        ),
        (
            "false is no force",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "false"}), idle),
            RULE_FORCE_REAPPLY,
            Status::Pass,
            "",
        ),
    ];
    for (name, object, rule, want, says) in cases {
        let results = judged(&policy, object);
        assert_eq!(results.len(), KINDS[0].rules.len(), "{name}: {results:?}");
        let (status, message) = status_of(&results, rule);
        assert_eq!(status, want, "{name}: {message}");
        assert!(message.contains(says), "{name}: {message:?} lacks {says:?}");
    }
}

#[test]
fn wrong_shapes_are_errors_with_the_reason_and_warn_mode_warns() {
    let policy = Policy::built_in();
    let mut object = rollout(json!(300), json!({}), json!({}));
    object["spec"]["pipeline"] = json!("not an object");
    let results = judged(&policy, object);
    let (status, message) = status_of(&results, RULE_TIMEOUT_INTEGER);
    assert_eq!(status, Status::Error, "{message}");
    assert!(message.contains("spec.pipeline is a string"), "{message}");
    assert_eq!(status_of(&results, RULE_TIMEOUT_RANGE).0, Status::Skip);

    let mut object = rollout(json!(300), json!({}), json!({}));
    object["metadata"]["annotations"] = json!("x");
    let (status, message) = status_of(&judged(&policy, object), RULE_ALLOW_DATA_LOSS_VALUE);
    assert_eq!(status, Status::Error, "{message}");

    let warn = Policy::from_yaml("mode: warn\n").expect("policy");
    let results = judged(&warn, rollout(json!(7200), json!({}), json!({})));
    assert_eq!(status_of(&results, RULE_TIMEOUT_RANGE).0, Status::Warn);

    let results = judged(&policy, json!({"metadata": "no", "spec": 1}));
    assert!(
        results.iter().any(|r| r.status == Status::Error),
        "{results:?}"
    );
}

#[test]
fn a_stored_force_promote_is_reported_by_state() {
    let policy = Policy::built_in();
    let mut object = rollout(json!(300), json!({}), json!({}));
    object["spec"]["strategy"] = json!({"progressive": {"forcePromote": true}});
    let results = judged(&policy, object);
    let (status, message) = status_of(&results, RULE_FORCE_PROMOTE);
    assert_eq!(status, Status::Warn, "{message}");
    assert!(
        message.contains("no progressive upgrade is in progress"),
        "{message}"
    );
    assert!(
        results
            .iter()
            .all(|r| r.rule == RULE_FORCE_PROMOTE || r.status == Status::Pass),
        "{results:?}"
    );
}
