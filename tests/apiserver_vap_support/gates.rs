//! Rules 6, 7 and 11 of the rule table under the built-in policy: who may
//! set allow-data-loss to "true" or turn on forcePromote, and when.

use serde_json::{Value, json};

use super::cases::{Case, condition, create, doc, not_pausing, pausing, ppnd, update};
use super::tables::FORCERS;
use envtest::User;

/// Rules 6, 7 and 11 under the built-in policy.
pub fn force_cases() -> Vec<Case> {
    let base = || doc().t(json!(600));
    let with = |a: Option<&str>| match a {
        Some(a) => base().a(a),
        None => base(),
    };
    let mut cases = Vec::new();
    for (pname, status) in pausing() {
        for old_a in [Some("false"), Some("True"), None] {
            for user in FORCERS {
                let name = format!("A {old_a:?} -> \"true\", {pname}");
                cases.push(
                    update(&name, with(old_a), with(Some("true")))
                        .status(status.clone())
                        .by(user),
                );
            }
        }
        cases.push(
            update(
                &format!("A \"true\" kept, {pname}"),
                with(Some("true")),
                with(Some("true")).edited(),
            )
            .status(status.clone()),
        );
    }
    for (pname, status) in not_pausing() {
        for user in FORCERS {
            let mut case = update(
                &format!("A \"false\" -> \"true\", {pname}"),
                with(Some("false")),
                with(Some("true")),
            )
            .by(user);
            if let Some(status) = &status {
                case = case.status(status.clone());
            }
            cases.push(case);
        }
        let mut kept = update(
            &format!("A \"true\" kept, {pname} (rule 11)"),
            with(Some("true")),
            with(Some("true")).edited(),
        );
        if let Some(status) = &status {
            kept = kept.status(status.clone());
        }
        cases.push(kept);
    }
    for user in FORCERS {
        cases.push(create("A \"true\"", with(Some("true"))).by(user));
    }
    // The pause is read from the stored object; a status sent with an
    // UPDATE is not even kept (the status subresource).
    cases.push(
        update(
            "pausing only in the new object's status",
            with(Some("false")),
            with(Some("true")).at(&["status"], ppnd()),
        )
        .by(User::ArgocdServer),
    );
    cases.push(
        update(
            "A \"true\" -> \"false\", pausing",
            with(Some("true")),
            with(Some("false")),
        )
        .status(ppnd()),
    );
    cases.push(update(
        "A \"true\" -> \"false\", idle",
        with(Some("true")),
        with(Some("false")),
    ));
    cases.push(update(
        "A \"true\" -> removed, idle",
        with(Some("true")),
        with(None),
    ));
    cases.push(update(
        "A \"false\" kept, idle",
        with(Some("false")),
        with(Some("false")).edited(),
    ));
    cases.push(
        update(
            "A -> \"true\", pausing",
            with(Some("false")),
            with(Some("true")),
        )
        .status(ppnd())
        .terminating(),
    );
    cases.push(
        update(
            "finalizer removed, A \"true\" kept, idle",
            with(Some("true")),
            with(Some("true")),
        )
        .terminating(),
    );
    // Rule 7.
    let fp = |v: Option<Value>| match v {
        Some(v) => base().fp(v),
        None => base(),
    };
    let on = || Some(json!(true));
    for user in FORCERS {
        cases.push(create("forcePromote true", fp(on())).by(user));
        cases.push(
            update(
                "forcePromote false -> true",
                fp(Some(json!(false))),
                fp(on()),
            )
            .by(user),
        );
        cases.push(update("forcePromote absent -> true", fp(None), fp(on())).by(user));
        cases.push(
            update(
                "forcePromote false -> true, idle status",
                fp(Some(json!(false))),
                fp(on()),
            )
            .status(condition("PipelinePausingOrPaused", "False", "Unpaused"))
            .by(user),
        );
    }
    cases.push(update(
        "forcePromote true kept",
        fp(on()),
        fp(on()).edited(),
    ));
    cases.push(update(
        "forcePromote true -> false",
        fp(on()),
        fp(Some(json!(false))),
    ));
    cases.push(update("forcePromote true -> absent", fp(on()), fp(None)));
    cases.push(create("forcePromote false", fp(Some(json!(false)))));
    for user in [User::Alice, User::ArgocdServer] {
        cases.push(
            update(
                "A \"true\" and forcePromote while pausing",
                fp(None).a("false"),
                fp(on()).a("true"),
            )
            .status(ppnd())
            .by(user),
        );
    }
    cases.push(create("A \"true\" and forcePromote", fp(on()).a("true")).by(User::ArgocdServer));
    cases
}
