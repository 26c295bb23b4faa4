//! Rules 6, 7 and 11 of the rule table under the built-in policy: who may
//! set allow-data-loss to "true" or turn on forcePromote, and when.

use serde_json::{Value, json};
use test_builders::pipeline_rollout;
use test_builders::status::{
    PAUSING_CONDITION, condition_status, not_pausing_statuses, pause_and_drain_status,
    pausing_statuses,
};

use super::cases::{Case, create, update};
use super::tables::FORCERS;
use envtest::User;

/// Rules 6, 7 and 11 under the built-in policy.
pub fn force_cases() -> Vec<Case> {
    let base = || pipeline_rollout().with_timeout(json!(600));
    let annotated = |a: Option<&str>| match a {
        Some(a) => base().with_allow_data_loss(a),
        None => base(),
    };
    let mut cases = Vec::new();
    for (pname, status) in pausing_statuses() {
        for old_a in [Some("false"), Some("True"), None] {
            for user in FORCERS {
                let name = format!("A {old_a:?} -> \"true\", {pname}");
                cases.push(
                    update(&name, annotated(old_a), annotated(Some("true")))
                        .status(status.clone())
                        .by(user),
                );
            }
        }
        cases.push(
            update(
                &format!("A \"true\" kept, {pname}"),
                annotated(Some("true")),
                annotated(Some("true")).with_unrelated_edit(),
            )
            .status(status.clone()),
        );
    }
    for (pname, status) in not_pausing_statuses() {
        for user in FORCERS {
            let mut case = update(
                &format!("A \"false\" -> \"true\", {pname}"),
                annotated(Some("false")),
                annotated(Some("true")),
            )
            .by(user);
            if let Some(status) = &status {
                case = case.status(status.clone());
            }
            cases.push(case);
        }
        let mut kept = update(
            &format!("A \"true\" kept, {pname} (rule 11)"),
            annotated(Some("true")),
            annotated(Some("true")).with_unrelated_edit(),
        );
        if let Some(status) = &status {
            kept = kept.status(status.clone());
        }
        cases.push(kept);
    }
    for user in FORCERS {
        cases.push(create("A \"true\"", annotated(Some("true"))).by(user));
    }
    // The pause is read from the stored object; a status sent with an
    // UPDATE is not even kept (the status subresource).
    cases.push(
        update(
            "pausing only in the new object's status",
            annotated(Some("false")),
            annotated(Some("true")).with_status(pause_and_drain_status(None)),
        )
        .by(User::ArgocdServer),
    );
    cases.push(
        update(
            "A \"true\" -> \"false\", pausing",
            annotated(Some("true")),
            annotated(Some("false")),
        )
        .status(pause_and_drain_status(None)),
    );
    cases.push(update(
        "A \"true\" -> \"false\", idle",
        annotated(Some("true")),
        annotated(Some("false")),
    ));
    cases.push(update(
        "A \"true\" -> removed, idle",
        annotated(Some("true")),
        annotated(None),
    ));
    cases.push(update(
        "A \"false\" kept, idle",
        annotated(Some("false")),
        annotated(Some("false")).with_unrelated_edit(),
    ));
    cases.push(
        update(
            "A -> \"true\", pausing",
            annotated(Some("false")),
            annotated(Some("true")),
        )
        .status(pause_and_drain_status(None))
        .terminating(),
    );
    cases.push(
        update(
            "finalizer removed, A \"true\" kept, idle",
            annotated(Some("true")),
            annotated(Some("true")),
        )
        .terminating(),
    );
    // Rule 7.
    let promote = |v: Option<Value>| match v {
        Some(v) => base().with_force_promote(v),
        None => base(),
    };
    let on = || Some(json!(true));
    for user in FORCERS {
        cases.push(create("forcePromote true", promote(on())).by(user));
        cases.push(
            update(
                "forcePromote false -> true",
                promote(Some(json!(false))),
                promote(on()),
            )
            .by(user),
        );
        cases.push(update("forcePromote absent -> true", promote(None), promote(on())).by(user));
        cases.push(
            update(
                "forcePromote false -> true, idle status",
                promote(Some(json!(false))),
                promote(on()),
            )
            .status(condition_status(PAUSING_CONDITION, "False", "Unpaused"))
            .by(user),
        );
    }
    cases.push(update(
        "forcePromote true kept",
        promote(on()),
        promote(on()).with_unrelated_edit(),
    ));
    cases.push(update(
        "forcePromote true -> false",
        promote(on()),
        promote(Some(json!(false))),
    ));
    cases.push(update(
        "forcePromote true -> absent",
        promote(on()),
        promote(None),
    ));
    cases.push(create("forcePromote false", promote(Some(json!(false)))));
    for user in [User::Alice, User::ArgocdServer] {
        cases.push(
            update(
                "A \"true\" and forcePromote while pausing",
                promote(None).with_allow_data_loss("false"),
                promote(on()).with_allow_data_loss("true"),
            )
            .status(pause_and_drain_status(None))
            .by(user),
        );
    }
    cases.push(
        create(
            "A \"true\" and forcePromote",
            promote(on()).with_allow_data_loss("true"),
        )
        .by(User::ArgocdServer),
    );
    cases
}
