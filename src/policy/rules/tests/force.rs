//! Rule 5: the value of allow-data-loss; rule 6: who may force a re-apply
//! and when; rule 11: the annotation left at "true"; rule 9: terminating
//! objects are judged like any other.

use serde_json::{Value, json};
use test_builders::PipelineRolloutDoc;
use test_builders::status::{not_pausing_statuses, pause_and_drain_status, pausing_statuses};

use super::fixtures::{argocd_server, forcers, pipeline_rollout, policy, rollout_with};
use super::validate_case::{Case, ViolationKind, check_table, create, update};

/// Rule 5: allow-data-loss must be exactly "true" or "false".
pub(super) fn annotation_cases() -> Vec<Case> {
    use ViolationKind::*;
    let annotated = |v: Value| {
        pipeline_rollout()
            .with_timeout(json!(600))
            .with_allow_data_loss(v)
    };
    vec![
        create("A \"false\"", annotated(json!("false"))),
        create("A \"True\"", annotated(json!("True"))).deny(&[BadAnnotation]),
        create("A \"TRUE\"", annotated(json!("TRUE"))).deny(&[BadAnnotation]),
        create("A \"yes\"", annotated(json!("yes"))).deny(&[BadAnnotation]),
        create("A \"\"", annotated(json!(""))).deny(&[BadAnnotation]),
        create("A \" true\"", annotated(json!(" true"))).deny(&[BadAnnotation]),
        create("A 1 (a number)", annotated(json!(1))).deny(&[BadAnnotation]),
        create("A true (a boolean)", annotated(json!(true))).deny(&[BadAnnotation]),
        // "true" itself is valid for rule 5 (rule 6 judges who sets it).
        update(
            "A \"true\" kept while pausing",
            annotated(json!("true")).with_status(pause_and_drain_status(None)),
            annotated(json!("true"))
                .with_status(pause_and_drain_status(None))
                .with_unrelated_edit(),
        ),
        update(
            "A \"true\" set by argocd while pausing",
            annotated(json!("false")).with_status(pause_and_drain_status(None)),
            annotated(json!("true")).with_status(pause_and_drain_status(None)),
        )
        .user(argocd_server())
        .audit("force-reapply", "allowed"),
        create(
            "annotations a string",
            pipeline_rollout().with_field(&["metadata", "annotations"], json!("x")),
        )
        .deny(&[BadMetadata]),
        create(
            "metadata an array",
            PipelineRolloutDoc::from_json(json!({"metadata": [1]})),
        )
        .deny(&[BadMetadata]),
        create(
            "other annotations only",
            pipeline_rollout().with_field(&["metadata", "annotations"], json!({"a": "b"})),
        ),
        update(
            "UPDATE A \"false\" -> \"yes\"",
            annotated(json!("false")),
            annotated(json!("yes")),
        )
        .deny(&[BadAnnotation]),
        update(
            "UPDATE A \"yes\" -> \"false\"",
            annotated(json!("yes")),
            annotated(json!("false")),
        ),
    ]
}

#[test]
fn annotation_value_table() {
    check_table("annotation value", &annotation_cases());
}

/// Rule 6: who may set allow-data-loss to "true" and when; rule 11: the
/// annotation left at "true"; rule 9: terminating objects are judged.
pub(super) fn reapply_cases() -> Vec<Case> {
    use ViolationKind::*;
    // A status the API server's schema would refuse: not pausing either.
    let mut not_pausing = not_pausing_statuses();
    not_pausing.push(("status a string", Some(json!("weird"))));
    let pausing = pausing_statuses();
    let users = forcers();
    let mut cases = Vec::new();

    // UPDATE to "true" while pausing: only the permission matters.
    for (pname, status) in &pausing {
        for old_a in [Some("false"), Some("True"), None] {
            for (uname, user, granted) in &users {
                let name = format!("UPDATE A {old_a:?} -> \"true\", {pname}, {uname}");
                let case = update(
                    &name,
                    rollout_with(old_a, Some(status.clone())),
                    rollout_with(Some("true"), Some(status.clone())),
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
                rollout_with(Some("false"), status.clone()),
                rollout_with(Some("true"), status.clone()),
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
            rollout_with(Some("true"), None),
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
            rollout_with(Some("false"), None),
            rollout_with(Some("true"), Some(pause_and_drain_status(None))),
        )
        .user(argocd_server())
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6"),
    );
    cases.push(
        update(
            "pausing only in the old object's status",
            rollout_with(Some("false"), Some(pause_and_drain_status(None))),
            rollout_with(Some("true"), None),
        )
        .user(argocd_server())
        .audit("force-reapply", "allowed"),
    );
    // requirePausing false: only the permission matters.
    let no_pause = || policy("forceReapply:\n  requirePausing: false\n");
    for (uname, user, granted) in &users {
        let name = |label: &str| format!("requirePausing false, {label}, {uname}");
        for case in [
            create(&name("CREATE"), rollout_with(Some("true"), None)),
            update(
                &name("UPDATE idle"),
                rollout_with(Some("false"), None),
                rollout_with(Some("true"), None),
            ),
        ] {
            let case = case.policy(no_pause()).user(user.clone());
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
            rollout_with(Some("true"), Some(status.clone())),
            rollout_with(Some("true"), Some(status.clone())).with_unrelated_edit(),
        ));
    }
    for (pname, status) in &not_pausing {
        // Rule 11: still "true" while nothing is pausing.
        cases.push(
            update(
                &format!("A \"true\" kept, {pname}, alice (rule 11)"),
                rollout_with(Some("true"), status.clone()),
                rollout_with(Some("true"), status.clone()).with_unrelated_edit(),
            )
            .warn(&["set it to \"false\""]),
        );
    }
    cases.push(
        update(
            "A \"true\" kept, nothing pausing, argocd (rule 11)",
            rollout_with(Some("true"), None),
            rollout_with(Some("true"), None).with_unrelated_edit(),
        )
        .user(argocd_server())
        .warn(&["without draining"]),
    );
    cases.push(update(
        "A \"true\" -> \"false\", pausing, alice",
        rollout_with(Some("true"), Some(pause_and_drain_status(None))),
        rollout_with(Some("false"), Some(pause_and_drain_status(None))),
    ));
    cases.push(update(
        "A \"true\" -> \"false\", idle, alice",
        rollout_with(Some("true"), None),
        rollout_with(Some("false"), None),
    ));
    cases.push(update(
        "A \"true\" -> removed, idle, alice",
        rollout_with(Some("true"), None),
        rollout_with(None, None),
    ));
    cases.push(update(
        "A \"false\" kept, idle, alice",
        rollout_with(Some("false"), None),
        rollout_with(Some("false"), None).with_unrelated_edit(),
    ));
    cases.push(create(
        "CREATE A \"false\", alice",
        rollout_with(Some("false"), None),
    ));
    // Rule 9: a terminating object is judged like any other.
    cases.push(
        update(
            "terminating, A -> \"true\", pausing, alice",
            rollout_with(Some("false"), Some(pause_and_drain_status(None))).terminating(),
            rollout_with(Some("true"), Some(pause_and_drain_status(None))).terminating(),
        )
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6"),
    );
    cases.push(
        update(
            "terminating, finalizer removed, A \"true\" kept, idle",
            rollout_with(Some("true"), None).terminating().with_field(
                &["metadata", "finalizers"],
                json!(["numaplane.numaproj.io/finalizer"]),
            ),
            rollout_with(Some("true"), None).terminating(),
        )
        .warn(&["\"false\""]),
    );
    cases
}

#[test]
fn force_reapply_table() {
    check_table("force reapply", &reapply_cases());
}
