//! The judge's tables: each rule's result for stored objects, wrong shapes, warn mode, forces by state.

use serde_json::{Value, json};

use super::*;
use crate::background::audit::audited::{KINDS, NAMESPACE_CONFIGS, PIPELINE_ROLLOUTS};
use crate::kinds::{FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION, UPGRADE_STATE};
use crate::rollout::ALLOW_DATA_LOSS;

fn judged(policy: &Policy, object: Value) -> ObjectResults {
    judged_as(0, policy, object)
}

/// Judges `object` as the kind at `kind` in [`KINDS`].
fn judged_as(kind: usize, policy: &Policy, object: Value) -> ObjectResults {
    let (enforcing, warn_only) = enforcing(policy);
    let judge = Judge::new(&enforcing, warn_only, OffsetDateTime::now_utc());
    let view = GuardedObject::from_stored(object.to_string().as_bytes()).expect("JSON");
    let text = |key: &str| {
        object
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    judge.object(&KINDS[kind], text("namespace"), text("name"), &view)
}

fn rollout(timeout: Value, annotations: Value, status: Value) -> Value {
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "u-1", "annotations": annotations},
        "spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": timeout, "deletionGracePeriodSeconds": 60}}}},
        "status": status,
    })
}

/// [`rollout`] without a deletion timeout.
fn without_deletion_timeout(mut object: Value) -> Value {
    if let Some(lifecycle) = object
        .pointer_mut("/spec/pipeline/spec/lifecycle")
        .and_then(Value::as_object_mut)
    {
        lifecycle.remove("deletionGracePeriodSeconds");
    }
    object
}

fn status_of(results: &ObjectResults, rule: Rule) -> (Status, String) {
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
    let cases: Vec<(&str, Value, Rule, Status, &str)> = vec![
        (
            "in range",
            rollout(json!(300), json!({}), idle.clone()),
            Rule::TimeoutRange,
            Status::Pass,
            "",
        ),
        (
            "above the maximum",
            rollout(json!(7200), json!({}), idle.clone()),
            Rule::TimeoutRange,
            Status::Fail,
            "above the maximum of 3600",
        ),
        (
            "not an integer",
            rollout(json!("1h"), json!({}), idle.clone()),
            Rule::TimeoutInteger,
            Status::Fail,
            "not an integer number of seconds",
        ),
        (
            "a value Numaplane ignores",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "True"}), idle.clone()),
            Rule::AllowDataLossValue,
            Status::Fail,
            "which Numaplane ignores",
        ),
        (
            "a stale force",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "true"}), idle.clone()),
            Rule::ForceReapply,
            Status::Fail,
            "is \"true\" and the pause is over",
        ),
        (
            "a force during a pause",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "true"}), pausing),
            Rule::ForceReapply,
            Status::Warn,
            "while the pipeline is paused or pausing",
        ),
        (
            "a force during a pause is no CREATE denial",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "true"}), idle.clone()),
            Rule::TimeoutRange,
            Status::Pass,
            "",
        ),
        (
            "false is no force",
            rollout(json!(300), json!({ALLOW_DATA_LOSS: "false"}), idle.clone()),
            Rule::ForceReapply,
            Status::Pass,
            "",
        ),
        (
            "an HPA rider warns",
            {
                let mut object = rollout(json!(300), json!({}), idle.clone());
                object["spec"]["riders"] = json!([{"definition": {
                    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "hpa"}, "spec": {"maxReplicas": 3}}}]);
                object
            },
            Rule::HpaRider,
            Status::Warn,
            "spec.riders[0] is an HPA: Numaplane promotes every progressive upgrade",
        ),
        (
            "a ServiceAccount rider warns",
            {
                let mut object = rollout(json!(300), json!({}), idle.clone());
                object["spec"]["riders"] = json!([{"definition": {
                    "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}}]);
                object
            },
            Rule::AccessRider,
            Status::Warn,
            "spec.riders[0] is a ServiceAccount: Numaplane creates it as itself",
        ),
        (
            "no rider passes",
            rollout(json!(300), json!({}), idle.clone()),
            Rule::HpaRider,
            Status::Pass,
            "",
        ),
        (
            "no deletion timeout warns: the minimal CRDs drain for 0s",
            without_deletion_timeout(rollout(json!(300), json!({}), idle.clone())),
            Rule::DeletionTimeoutRange,
            Status::Warn,
            "spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds is not set: with Numaflow's full CRDs the Pipeline gets their default of 30s, but with its minimal CRDs (no schema defaults) Numaflow drains a deleted Pipeline for metadata.deletionGracePeriodSeconds, which the API server sets to 0",
        ),
        (
            "a deletion timeout passes",
            {
                let mut object = rollout(json!(300), json!({}), idle.clone());
                object["spec"]["pipeline"]["spec"]["lifecycle"]["deletionGracePeriodSeconds"] =
                    json!(60);
                object
            },
            Rule::DeletionTimeoutRange,
            Status::Pass,
            "",
        ),
        (
            "the deprecated field is a deletion timeout",
            {
                let mut object =
                    without_deletion_timeout(rollout(json!(300), json!({}), idle.clone()));
                object["spec"]["pipeline"]["spec"]["lifecycle"]["deleteGracePeriodSeconds"] =
                    json!(60);
                object
            },
            Rule::DeletionTimeoutRange,
            Status::Pass,
            "",
        ),
        (
            "a key in another case is not Numaflow's (it reads the field exactly)",
            {
                let mut object = without_deletion_timeout(rollout(json!(300), json!({}), idle));
                object["spec"]["pipeline"]["spec"]["lifecycle"]["DeletionGracePeriodSeconds"] =
                    json!(60);
                object
            },
            Rule::DeletionTimeoutRange,
            Status::Warn,
            "is not set",
        ),
    ];
    for (name, object, rule, want, says) in cases {
        let results = judged(&policy, object);
        assert_eq!(
            results.len(),
            KINDS[PIPELINE_ROLLOUTS].rules.len(),
            "{name}: {results:?}"
        );
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
    let (status, message) = status_of(&results, Rule::TimeoutInteger);
    assert_eq!(status, Status::Error, "{message}");
    assert!(message.contains("spec.pipeline is a string"), "{message}");
    assert_eq!(status_of(&results, Rule::TimeoutRange).0, Status::Skip);

    let mut object = rollout(json!(300), json!({}), json!({}));
    object["metadata"]["annotations"] = json!("x");
    let (status, message) = status_of(&judged(&policy, object), Rule::AllowDataLossValue);
    assert_eq!(status, Status::Error, "{message}");

    let warn = Policy::from_yaml("mode: warn\n").expect("policy");
    let results = judged(&warn, rollout(json!(7200), json!({}), json!({})));
    assert_eq!(status_of(&results, Rule::TimeoutRange).0, Status::Warn);

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
    let (status, message) = status_of(&results, Rule::ForcePromote);
    assert_eq!(status, Status::Warn, "{message}");
    assert!(
        message.contains("no progressive upgrade is in progress"),
        "{message}"
    );
    assert!(
        results
            .iter()
            .all(|r| r.rule == Rule::ForcePromote || r.status == Status::Pass),
        "{results:?}"
    );
}

/// A rollout of the kind at `kind` in [`KINDS`] whose child template
/// carries `labels` and `annotations`, and whose strategy is `strategy`.
fn templated(kind: usize, labels: Value, annotations: Value, strategy: Value) -> Value {
    let entry = &KINDS[kind];
    let template = entry
        .resource
        .guarded()
        .and_then(|k| k.template())
        .expect("a rollout kind");
    json!({
        "apiVersion": entry.api_version(),
        "kind": entry.kind(),
        "metadata": {"name": "r", "namespace": "team-a", "uid": "u-2"},
        "spec": {
            template: {"metadata": {"labels": labels, "annotations": annotations},
                // A deletion timeout, so that a PipelineRollout's rule 17 passes.
                "spec": {"lifecycle": {"deletionGracePeriodSeconds": 60}}},
            "strategy": strategy,
        },
        "status": {},
    })
}

/// The index in [`KINDS`] of `kind`.
fn index(kind: Kind) -> usize {
    KINDS
        .iter()
        .position(|k| k.resource == crate::kinds::Resource::Guarded(kind))
        .expect("audited")
}

#[test]
fn numaplane_keys_in_a_child_template_are_reported_for_each_rollout_kind() {
    let policy = Policy::built_in();
    let (pr, mvr, isb) = (
        index(Kind::PipelineRollout),
        index(Kind::MonoVertexRollout),
        index(Kind::IsbServiceRollout),
    );
    let promote = |v: &str| json!({FORCE_PROMOTE_LABEL: v});
    let none = json!({});
    let cases: Vec<(&str, usize, Value, Rule, Status, &str)> = vec![
        (
            "a force-promote label in spec.pipeline.metadata",
            pr,
            templated(pr, promote("true"), none.clone(), none.clone()),
            Rule::ForcePromoteLabel,
            Status::Warn,
            "spec.pipeline.metadata.labels[\"numaplane.numaproj.io/force-promote\"] is set: Numaplane copies it onto every Pipeline",
        ),
        (
            "a force-promote label of \"false\" is denied for its value",
            pr,
            templated(pr, promote("false"), none.clone(), none.clone()),
            Rule::ForcePromoteLabel,
            Status::Fail,
            "Numaplane acts on the label's presence",
        ),
        (
            "marked-for-deletion in spec.pipeline.metadata",
            pr,
            templated(
                pr,
                none.clone(),
                json!({MARKED_FOR_DELETION: "true"}),
                none.clone(),
            ),
            Rule::DeleteUndrained,
            Status::Fail,
            "deletes each at once without draining",
        ),
        (
            "marked-for-deletion other than \"true\" does nothing",
            pr,
            templated(
                pr,
                none.clone(),
                json!({MARKED_FOR_DELETION: "false"}),
                none.clone(),
            ),
            Rule::DeleteUndrained,
            Status::Pass,
            "",
        ),
        (
            "a bookkeeping label in spec.pipeline.metadata",
            pr,
            templated(
                pr,
                json!({UPGRADE_STATE: "recyclable"}),
                none.clone(),
                none.clone(),
            ),
            Rule::Bookkeeping,
            Status::Fail,
            "set spec.pipeline.metadata.labels[\"numaplane.numaproj.io/upgrade-state\"]: Numaplane keeps its bookkeeping there",
        ),
        (
            "other labels are no one's business",
            pr,
            templated(pr, json!({"app": "x"}), json!({"note": "y"}), none.clone()),
            Rule::Bookkeeping,
            Status::Pass,
            "",
        ),
        (
            "a MonoVertexRollout's forcePromote",
            mvr,
            templated(
                mvr,
                none.clone(),
                none.clone(),
                json!({"progressive": {"forcePromote": true}}),
            ),
            Rule::ForcePromote,
            Status::Warn,
            "the next upgrade skips assessment; set it to false",
        ),
        (
            "a force-promote label in spec.monoVertex.metadata",
            mvr,
            templated(mvr, promote("true"), none.clone(), none.clone()),
            Rule::ForcePromoteLabel,
            Status::Warn,
            "spec.monoVertex.metadata.labels[\"numaplane.numaproj.io/force-promote\"] is set: Numaplane copies it onto every MonoVertex",
        ),
        (
            "a bookkeeping annotation in spec.interStepBufferService.metadata",
            isb,
            templated(
                isb,
                none.clone(),
                json!({"numaplane.numaproj.io/requires-drain": "true"}),
                none.clone(),
            ),
            Rule::Bookkeeping,
            Status::Fail,
            "spec.interStepBufferService.metadata.annotations[\"numaplane.numaproj.io/requires-drain\"]",
        ),
        (
            "an ISBServiceRollout's forcePromote false is no force",
            isb,
            templated(
                isb,
                none.clone(),
                none.clone(),
                json!({"progressive": {"forcePromote": false}}),
            ),
            Rule::ForcePromote,
            Status::Pass,
            "",
        ),
    ];
    for (name, kind, object, rule, want, says) in cases {
        let results = judged_as(kind, &policy, object);
        let rules: Vec<Rule> = results.iter().map(|r| r.rule).collect();
        assert_eq!(rules, KINDS[kind].rules, "{name}");
        let (status, message) = status_of(&results, rule);
        assert_eq!(status, want, "{name}: {message}");
        assert!(message.contains(says), "{name}: {message:?} lacks {says:?}");
        // Nothing else is reported.
        assert!(
            results
                .iter()
                .all(|r| r.rule == rule || r.status == Status::Pass),
            "{name}: {results:?}"
        );
    }
}

#[test]
fn the_other_rollouts_get_no_drain_rules_and_ignore_marked_for_deletion() {
    let policy = Policy::built_in();
    for kind in [Kind::MonoVertexRollout, Kind::IsbServiceRollout] {
        let at = index(kind);
        let object = templated(
            at,
            json!({}),
            json!({MARKED_FOR_DELETION: "true"}),
            json!({}),
        );
        let results = judged_as(at, &policy, object);
        assert!(
            results.iter().all(|r| r.status == Status::Pass),
            "{kind:?}: {results:?}"
        );
        assert!(
            !results
                .iter()
                .any(|r| r.rule == Rule::DeleteUndrained || r.rule == Rule::TimeoutRange),
            "{kind:?}: {results:?}"
        );
    }
}

#[test]
fn a_template_metadata_that_is_not_an_object_is_an_error_and_its_rules_are_skipped() {
    let policy = Policy::built_in();
    let at = index(Kind::MonoVertexRollout);
    let object = templated(at, json!("not a map"), json!({}), json!({}));
    let results = judged_as(at, &policy, object);
    let (status, message) = status_of(&results, Rule::Bookkeeping);
    assert_eq!(status, Status::Error, "{message}");
    assert!(
        message.contains("spec.monoVertex.metadata.labels is a string"),
        "{message}"
    );
    assert_eq!(status_of(&results, Rule::ForcePromoteLabel).0, Status::Skip);
}

#[test]
fn a_namespace_config_that_skips_draining_warns_and_an_unknown_strategy_fails() {
    use crate::namespace_config::{CONFIG_LABEL, NAMESPACE_CONFIG};
    let config = |strategy: Value| {
        json!({
            "apiVersion": "v1",
            "metadata": {"name": "numaplane-config", "namespace": "team-a", "uid": "u-9",
                "labels": {CONFIG_LABEL: NAMESPACE_CONFIG}},
            "data": {"upgradeStrategy": strategy},
        })
    };
    let built_in = Policy::built_in();
    let warn = Policy::from_yaml("mode: warn\n").expect("valid");
    let cases = [
        (
            "progressive",
            &built_in,
            json!("progressive"),
            Status::Pass,
            Status::Pass,
            "",
        ),
        (
            "pause-and-drain",
            &built_in,
            json!("pause-and-drain"),
            Status::Pass,
            Status::Pass,
            "",
        ),
        (
            "no-strategy",
            &built_in,
            json!("no-strategy"),
            Status::Pass,
            Status::Warn,
            "upgradeStrategy is \"no-strategy\": every rollout in namespace \"team-a\" upgrades by plain apply",
        ),
        (
            "blank",
            &built_in,
            json!(" "),
            Status::Pass,
            Status::Warn,
            "Numaplane reads it as \"no-strategy\"",
        ),
        (
            "unknown",
            &built_in,
            json!("drain"),
            Status::Fail,
            Status::Pass,
            "write one of \"progressive\"",
        ),
        (
            "not a string",
            &built_in,
            json!(3),
            Status::Fail,
            Status::Pass,
            "3, not a string",
        ),
        (
            "unknown, warn mode",
            &warn,
            json!("drain"),
            Status::Warn,
            Status::Pass,
            "\"drain\"",
        ),
    ];
    for (name, policy, strategy, value, skips, says) in cases {
        let results = judged_as(3, policy, config(strategy));
        let rules: Vec<Rule> = results.iter().map(|r| r.rule).collect();
        assert_eq!(rules, KINDS[NAMESPACE_CONFIGS].rules, "{name}");
        let (got_value, value_text) = status_of(&results, Rule::NamespaceStrategyValue);
        let (got_skips, skips_text) = status_of(&results, Rule::NamespaceStrategy);
        assert_eq!(
            (got_value, got_skips),
            (value, skips),
            "{name}: {results:?}"
        );
        assert!(
            format!("{value_text} {skips_text}").contains(says),
            "{name}: {results:?} lacks {says:?}"
        );
    }
}

#[test]
fn stored_forces_ask_no_permission_and_keep_their_status_in_warn_mode() {
    let pr = index(Kind::PipelineRollout);
    let mut object = templated(
        pr,
        json!({FORCE_PROMOTE_LABEL: "true"}),
        json!({MARKED_FOR_DELETION: "true"}),
        json!({"progressive": {"forcePromote": true}}),
    );
    object["metadata"]["annotations"] = json!({ALLOW_DATA_LOSS: "true"});
    let view = GuardedObject::from_json(&object.to_string()).expect("JSON");
    let user = UserInfo::new(AUDIT_USER, &[]);
    let policy = Policy::from_yaml("mode: warn\n").expect("policy");
    let input = Input {
        webhook: Webhook::Validate,
        subject: Subject::Write {
            write: GuardedWrite {
                kind: Kind::PipelineRollout,
                operation: Operation::Create,
                namespace: "team-a",
                user: &user,
                object: &view,
                old_object: None,
                now: OffsetDateTime::now_utc(),
                origin: Origin::Stored,
            },
            name: "r",
        },
    };
    let judgement = admission::decide(&policy, input);
    assert_eq!(judgement.questions().count(), 0);
    let results = judged_as(pr, &policy, object);
    for (rule, status) in [
        (Rule::ForceReapply, Status::Fail),
        (Rule::ForcePromote, Status::Warn),
        (Rule::ForcePromoteLabel, Status::Warn),
        (Rule::DeleteUndrained, Status::Fail),
    ] {
        assert_eq!(status_of(&results, rule).0, status, "{rule}: {results:?}");
    }
}
