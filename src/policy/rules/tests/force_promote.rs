//! Rule 7: who may turn on `spec.strategy.progressive.forcePromote`.

use serde_json::{Value, json};
use test_builders::status::{PAUSING_CONDITION, condition_status, pause_and_drain_status};

use super::fixtures::{argocd_server, forcers, pipeline_rollout, policy};
use super::validate_case::{Case, ViolationKind, check_table, create, update};
use crate::rollout::FORCE_PROMOTE_FIELD;

/// Rule 7: who may turn on forcePromote (no pause needed).
pub(super) fn promote_cases() -> Vec<Case> {
    use ViolationKind::*;
    let promote = |v: Option<Value>| match v {
        Some(v) => pipeline_rollout()
            .with_timeout(json!(600))
            .with_force_promote(v),
        None => pipeline_rollout().with_timeout(json!(600)),
    };
    let on = || Some(json!(true));
    let mut cases = Vec::new();
    let users = forcers();
    for (uname, user, granted) in &users {
        let turned_on = vec![
            create(&format!("CREATE forcePromote true, {uname}"), promote(on())),
            update(
                &format!("UPDATE forcePromote false -> true, {uname}"),
                promote(Some(json!(false))),
                promote(on()),
            ),
            update(
                &format!("UPDATE forcePromote absent -> true, {uname}"),
                promote(None),
                promote(on()),
            ),
            update(
                &format!("UPDATE forcePromote \"true\" -> true, {uname}"),
                promote(Some(json!("true"))),
                promote(on()),
            ),
            // No pausing condition for rule 7: an idle UPDATE is fine.
            update(
                &format!("UPDATE forcePromote false -> true, idle status, {uname}"),
                promote(Some(json!(false))).with_status(condition_status(
                    PAUSING_CONDITION,
                    "False",
                    "Unpaused",
                )),
                promote(on()).with_status(condition_status(PAUSING_CONDITION, "False", "Unpaused")),
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
                        FORCE_PROMOTE_FIELD.dotted(),
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
                promote(on()),
            )
            .policy(policy("forceReapply:\n  gateForcePromote: false\n"))
            .user(user.clone()),
        );
        cases.push(
            update(
                &format!("gateForcePromote false, UPDATE false -> true, {uname}"),
                promote(Some(json!(false))),
                promote(on()),
            )
            .policy(policy("forceReapply:\n  gateForcePromote: false\n"))
            .user(user.clone()),
        );
    }
    // Already on, or off: no permission needed.
    // Rule 12: kept on, it is allowed with a warning about the next upgrade.
    cases.push(
        update(
            "UPDATE forcePromote true kept, alice",
            promote(on()),
            promote(on()).with_unrelated_edit(),
        )
        .warn(&["forcePromote is still true: the next upgrade skips assessment"]),
    );
    cases.push(update(
        "UPDATE forcePromote true -> false, alice",
        promote(on()),
        promote(Some(json!(false))),
    ));
    cases.push(update(
        "UPDATE forcePromote true -> absent, alice",
        promote(on()),
        promote(None),
    ));
    cases.push(create(
        "CREATE forcePromote false, alice",
        promote(Some(json!(false))),
    ));
    cases.push(create(
        "CREATE forcePromote \"true\" (a string), alice",
        promote(Some(json!("true"))),
    ));
    // Both gates at once.
    cases.push(
        update(
            "alice sets A \"true\" and forcePromote while pausing",
            promote(None)
                .with_allow_data_loss(json!("false"))
                .with_status(pause_and_drain_status(None)),
            promote(on())
                .with_allow_data_loss(json!("true"))
                .with_status(pause_and_drain_status(None)),
        )
        .deny(&[Reapply, Promote])
        .audit("force-reapply", "denied by rule 6")
        .audit("force-promote", "denied by rule 7")
        .msg(&["(1) ", "(2) "]),
    );
    cases.push(
        update(
            "argocd sets A \"true\" and forcePromote while pausing",
            promote(None)
                .with_allow_data_loss(json!("false"))
                .with_status(pause_and_drain_status(None)),
            promote(on())
                .with_allow_data_loss(json!("true"))
                .with_status(pause_and_drain_status(None)),
        )
        .user(argocd_server())
        .audit("force-reapply", "allowed: user")
        .audit("force-promote", "allowed: user"),
    );
    cases.push(
        create(
            "argocd CREATE with A \"true\" and forcePromote",
            promote(on()).with_allow_data_loss(json!("true")),
        )
        .user(argocd_server())
        .deny(&[Reapply])
        .audit("force-reapply", "denied by rule 6")
        .audit("force-promote", "allowed: user"),
    );
    cases
}

#[test]
fn force_promote_table() {
    check_table("force promote", &promote_cases());
}
