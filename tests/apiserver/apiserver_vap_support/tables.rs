//! The cases each policy of the differential test is driven through,
//! following the tables of src/policy/rules/tests/ (rules 1 to 9 for the
//! built-in policy; namespace overrides, the default scale factor and RBAC;
//! warn mode).

use serde_json::{Value, json};

use test_builders::rollout::ALLOW_DATA_LOSS;
use test_builders::status::{pause_and_drain_status, pausing_statuses};
use test_builders::{PipelineRolloutDoc, pipeline_rollout};

use super::cases::{Case, create, timeout_values, update};
use envtest::User;

/// The users whose permission the rule table varies.
pub const FORCERS: [User; 3] = [User::ArgocdServer, User::Admin, User::Alice];

/// A PipelineRollout with the drain timeout `v`.
fn timeout(v: Value) -> PipelineRolloutDoc {
    pipeline_rollout().with_timeout(v)
}

/// A PipelineRollout with the drain timeout `v` and the scale factor `s`.
fn timeout_and_scale(v: Value, s: Value) -> PipelineRolloutDoc {
    pipeline_rollout().with_timeout(v).with_scale_factor(s)
}

/// Rules 1 to 9 under the built-in policy, in namespace `ns`.
pub fn built_in(ns: &'static str) -> Vec<Case> {
    // Rules 1 to 4: T and S.
    let mut cases = vec![
        create("T absent", pipeline_rollout()),
        create(
            "lifecycle null",
            pipeline_rollout().with_lifecycle(Value::Null),
        ),
        create(
            "lifecycle empty",
            pipeline_rollout().with_lifecycle(json!({})),
        ),
        create(
            "lifecycle an array",
            pipeline_rollout().with_lifecycle(json!([1])),
        ),
        create(
            "lifecycle a string",
            pipeline_rollout().with_lifecycle(json!("oops")),
        ),
    ];
    for (name, value) in timeout_values() {
        cases.push(create(name, timeout(value)));
    }
    let big = |n: u64| json!(n);
    for (tv, s) in [
        (92_233_720, 1),
        (92_233_721, 1),
        (100_000_000, 1),
        (31_536_000, 1),
        (184_467_440, 2),
        (184_467_441, 2),
        (2_305_843_009, 33),
        (2_305_843_010, 33),
        (3_074_457_345, 34),
        (3_074_457_346, 34),
        (9_223_372_036, 100),
        (9_223_372_037, 100),
    ] {
        cases.push(create(
            &format!("T {tv} S {s}"),
            timeout_and_scale(big(tv), json!(s)),
        ));
    }
    cases.push(create("T -5 S 1", timeout_and_scale(json!(-5), json!(1))));
    for s in [
        json!(0),
        json!(101),
        json!(-1),
        json!(1),
        json!(33),
        json!(50),
        json!(100),
    ] {
        cases.push(create(&format!("S {s}"), timeout_and_scale(json!(600), s)));
    }
    cases.push(create(
        "S null (the default)",
        timeout_and_scale(json!(600), Value::Null),
    ));
    let float = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    cases.push(create(
        "S 50.0 (a float)",
        timeout_and_scale(json!(600), float("50.0")),
    ));
    cases.push(create(
        "S 0 with T absent",
        pipeline_rollout().with_scale_factor(json!(0)),
    ));
    cases.push(create(
        "T \"1h\" and S 0",
        timeout_and_scale(json!("1h"), json!(0)),
    ));
    cases.push(create(
        "T 29 and S 101",
        timeout_and_scale(json!(29), json!(101)),
    ));
    // What the API server refuses before admission.
    for (name, d) in [
        ("S \"50\"", timeout_and_scale(json!(600), json!("50"))),
        ("S 50.5", timeout_and_scale(json!(600), json!(50.5))),
        ("S true", timeout_and_scale(json!(600), json!(true))),
        (
            "spec.pipeline a string",
            pipeline_rollout().with_field(&["spec", "pipeline"], json!("oops")),
        ),
        (
            "spec a number",
            pipeline_rollout().with_field(&["spec"], json!(5)),
        ),
        (
            "pipeline.spec null",
            pipeline_rollout().with_field(&["spec", "pipeline", "spec"], Value::Null),
        ),
        (
            "forcePromote \"true\"",
            timeout(json!(600)).with_force_promote(json!("true")),
        ),
        (
            "annotations a string",
            timeout(json!(600)).with_field(&["metadata", "annotations"], json!("x")),
        ),
        (
            "A 1 (a number)",
            timeout(json!(600)).with_field(&["metadata", "annotations", ALLOW_DATA_LOSS], json!(1)),
        ),
    ] {
        cases.push(create(name, d).rejected());
    }
    // Rule 5.
    for value in ["false", "True", "TRUE", "yes", "", " true"] {
        cases.push(create(
            &format!("A {value:?}"),
            timeout(json!(600)).with_allow_data_loss(value),
        ));
    }
    cases.push(create(
        "other annotations only",
        timeout(json!(600)).with_field(&["metadata", "annotations"], json!({"a": "b"})),
    ));
    cases.push(update(
        "A \"false\" -> \"yes\"",
        timeout(json!(600)).with_allow_data_loss("false"),
        timeout(json!(600)).with_allow_data_loss("yes"),
    ));
    cases.push(update(
        "A \"yes\" -> \"false\"",
        timeout(json!(600)).with_allow_data_loss("yes"),
        timeout(json!(600)).with_allow_data_loss("false"),
    ));
    // Updates of T and S, and rule 8 (ratcheting).
    let huge = || json!(5_000_000_000_u64);
    for (name, old, new) in [
        (
            "T absent -> \"1h\"",
            pipeline_rollout(),
            timeout(json!("1h")),
        ),
        ("T 600 -> 29", timeout(json!(600)), timeout(json!(29))),
        ("T 600 -> 3601", timeout(json!(600)), timeout(json!(3601))),
        ("T 600 -> 5e9", timeout(json!(600)), timeout(huge())),
        (
            "S 50 -> 0",
            timeout_and_scale(json!(600), json!(50)),
            timeout_and_scale(json!(600), json!(0)),
        ),
        ("T 29 -> 30", timeout(json!(29)), timeout(json!(30))),
        (
            "T \"1h\" -> 3600",
            timeout(json!("1h")),
            timeout(json!(3600)),
        ),
        ("T 600 -> absent", timeout(json!(600)), pipeline_rollout()),
        (
            "T \"1h\" unchanged",
            timeout(json!("1h")),
            timeout(json!("1h")).with_unrelated_edit(),
        ),
        (
            "T 30.5 unchanged",
            timeout(json!(30.5)),
            timeout(json!(30.5)).with_unrelated_edit(),
        ),
        (
            "T \"1h\" -> \"2h\"",
            timeout(json!("1h")),
            timeout(json!("2h")),
        ),
        ("T 600 -> \"1h\"", timeout(json!(600)), timeout(json!("1h"))),
        (
            "T 29 unchanged",
            timeout(json!(29)),
            timeout(json!(29)).with_unrelated_edit(),
        ),
        (
            "T 29 -> 29.0 (a float)",
            timeout(json!(29)),
            timeout(float("29.0")).with_unrelated_edit(),
        ),
        ("T \"29\" -> 29", timeout(json!("29")), timeout(json!(29))),
        ("T 29 -> \"29\"", timeout(json!(29)), timeout(json!("29"))),
        (
            "T -5 unchanged",
            timeout(json!(-5)),
            timeout(json!(-5)).with_unrelated_edit(),
        ),
        (
            "T 3601 unchanged",
            timeout(json!(3601)),
            timeout(json!(3601)).with_unrelated_edit(),
        ),
        ("T 29 -> 28", timeout(json!(29)), timeout(json!(28))),
        ("T 3601 -> 3602", timeout(json!(3601)), timeout(json!(3602))),
        (
            "T 5e9, S absent unchanged",
            timeout(huge()),
            timeout(huge()).with_unrelated_edit(),
        ),
        (
            "T 1e8, S 1 unchanged",
            timeout_and_scale(json!(100_000_000), json!(1)),
            timeout_and_scale(json!(100_000_000), json!(1)).with_unrelated_edit(),
        ),
        (
            "T 5e9 -> 6e9",
            timeout(huge()),
            timeout(json!(6_000_000_000_u64)),
        ),
        (
            "S 50 -> 1, T 1e8 unchanged",
            timeout_and_scale(json!(100_000_000), json!(50)),
            timeout_and_scale(json!(100_000_000), json!(1)),
        ),
        (
            "S absent -> 1, T 1e8 unchanged",
            timeout(json!(100_000_000)),
            timeout_and_scale(json!(100_000_000), json!(1)),
        ),
        (
            "S 2 -> 1, T 2e8 unchanged, both overflow",
            timeout_and_scale(json!(200_000_000), json!(2)),
            timeout_and_scale(json!(200_000_000), json!(1)),
        ),
        (
            "T and S changed",
            timeout_and_scale(json!(600), json!(50)),
            timeout_and_scale(json!(100_000_000), json!(1)),
        ),
        (
            "S absent -> 50 (the default), T 5e9 unchanged",
            timeout(huge()),
            timeout(huge()).with_scale_factor(json!(50)),
        ),
        (
            "S 50 (the default) -> absent, T 5e9 unchanged",
            timeout(huge()).with_scale_factor(json!(50)),
            timeout(huge()),
        ),
        (
            "S 0 unchanged",
            timeout_and_scale(json!(600), json!(0)),
            timeout_and_scale(json!(600), json!(0)).with_unrelated_edit(),
        ),
        (
            "S 0 -> 101",
            timeout_and_scale(json!(600), json!(0)),
            timeout_and_scale(json!(600), json!(101)),
        ),
        (
            "A \"yes\" unchanged",
            timeout(json!(600)).with_allow_data_loss("yes"),
            timeout(json!(600))
                .with_allow_data_loss("yes")
                .with_unrelated_edit(),
        ),
        (
            "A \"yes\" -> \"True\"",
            timeout(json!(600)).with_allow_data_loss("yes"),
            timeout(json!(600)).with_allow_data_loss("True"),
        ),
        (
            "T 29 unchanged, A \"yes\" -> \"no\"",
            timeout(json!(29)).with_allow_data_loss("yes"),
            timeout(json!(29)).with_allow_data_loss("no"),
        ),
        (
            "T \"1h\", S 0, A \"yes\" all unchanged",
            timeout_and_scale(json!("1h"), json!(0)).with_allow_data_loss("yes"),
            timeout_and_scale(json!("1h"), json!(0))
                .with_allow_data_loss("yes")
                .with_unrelated_edit(),
        ),
        (
            "lifecycle a string unchanged",
            pipeline_rollout().with_lifecycle(json!("oops")),
            pipeline_rollout()
                .with_lifecycle(json!("oops"))
                .with_unrelated_edit(),
        ),
        (
            "lifecycle a string -> an array",
            pipeline_rollout().with_lifecycle(json!("oops")),
            pipeline_rollout().with_lifecycle(json!([1])),
        ),
        (
            "T 600 -> lifecycle a string",
            timeout(json!(600)),
            pipeline_rollout().with_lifecycle(json!("oops")),
        ),
    ] {
        cases.push(update(name, old, new));
    }
    cases.push(
        update(
            "finalizer removed, T \"1h\" unchanged",
            timeout(json!("1h")),
            timeout(json!("1h")),
        )
        .terminating(),
    );
    cases.push(update("T 600 -> \"1h\"", timeout(json!(600)), timeout(json!("1h"))).terminating());
    cases.extend(super::gates::force_cases());
    cases.into_iter().map(|c| c.ns(ns)).collect()
}

/// The namespaces the overrides policy is tried in (tests/apiserver/vap.rs
/// creates them): two overrides, and namespaces that match neither.
pub const OVERRIDE_NAMESPACES: [&str; 8] = [
    "payments-eu",
    "ledger",
    "payroll",
    "team-prod",
    "ledger-2",
    "xpayments-eu",
    "vap-overrides",
    "vap-overrides-2",
];

/// Namespace overrides, defaultRecycleScaleFactor 25 and RBAC (see
/// `OVERRIDES_POLICY` in tests/apiserver/vap.rs): alice may force only in
/// payments-eu, through a RoleBinding; carol through the group sre.
pub fn overrides() -> Vec<Case> {
    let mut cases = Vec::new();
    let at = |ns: &'static str, v: Value| create(&format!("{ns}: T {v}"), timeout(v)).ns(ns);
    for (ns, values) in [
        (
            "payments-eu",
            vec![31_536_000, 50_000_000, 7200, 3600, 59, 60],
        ),
        ("ledger", vec![31_536_000, 3600]),
        ("payroll", vec![7200, 7201, 31_536_000, 59]),
        ("team-prod", vec![7200, 7201]),
        ("ledger-2", vec![31_536_000, 7200]),
        ("xpayments-eu", vec![7200]),
        ("vap-overrides", vec![59, 60, 3600, 3601, 31_536_000]),
    ] {
        for v in values {
            cases.push(at(ns, json!(v)));
        }
    }
    cases.push(
        create(
            "payments-eu: T 92233721 S 1",
            timeout_and_scale(json!(92_233_721), json!(1)),
        )
        .ns("payments-eu"),
    );
    // defaultRecycleScaleFactor 25: x4 unless the rollout sets S.
    for (tv, s) in [
        (2_305_843_009_u64, None),
        (2_305_843_010, None),
        (2_305_843_010, Some(50)),
    ] {
        let d = match s {
            Some(s) => timeout_and_scale(json!(tv), json!(s)),
            None => timeout(json!(tv)),
        };
        cases.push(create(&format!("T {tv} S {s:?}"), d).ns("vap-overrides"));
    }
    cases.push(
        update(
            "T 2305843010, S absent -> 25 (the default)",
            timeout(json!(2_305_843_010_u64)),
            timeout_and_scale(json!(2_305_843_010_u64), json!(25)),
        )
        .ns("vap-overrides"),
    );
    cases.push(
        update(
            "payments-eu: no timeout unchanged",
            timeout(json!(31_536_000)),
            timeout(json!(31_536_000)).with_unrelated_edit(),
        )
        .ns("payments-eu"),
    );
    cases.push(
        update(
            "payments-eu: 600 -> no timeout",
            timeout(json!(600)),
            timeout(json!(31_536_000)),
        )
        .ns("payments-eu"),
    );
    // RBAC, the group sre, and system:masters (which RBAC allows everything).
    for ns in ["payments-eu", "vap-overrides"] {
        for user in [User::Alice, User::Carol, User::ArgocdServer, User::Admin] {
            for (pname, status) in pausing_statuses() {
                cases.push(
                    update(
                        &format!("{ns}: A \"false\" -> \"true\", {pname}"),
                        timeout(json!(600)).with_allow_data_loss("false"),
                        timeout(json!(600)).with_allow_data_loss("true"),
                    )
                    .status(status)
                    .ns(ns)
                    .by(user),
                );
            }
            cases.push(
                update(
                    &format!("{ns}: A \"false\" -> \"true\", idle"),
                    timeout(json!(600)).with_allow_data_loss("false"),
                    timeout(json!(600)).with_allow_data_loss("true"),
                )
                .ns(ns)
                .by(user),
            );
            cases.push(
                create(
                    &format!("{ns}: forcePromote true"),
                    timeout(json!(600)).with_force_promote(json!(true)),
                )
                .ns(ns)
                .by(user),
            );
        }
    }
    // generateName: the request names no object, so RBAC is asked about
    // any name in the namespace.
    for user in [User::Alice, User::ArgocdServer] {
        let mut case = create(
            "payments-eu: forcePromote true, generateName",
            timeout(json!(600)).with_force_promote(json!(true)),
        )
        .ns("payments-eu")
        .by(user);
        case.generate_name = true;
        cases.push(case);
    }
    cases
}

/// Warn mode with `requirePausing: false`: nothing is denied; what the
/// webhook would deny it warns about, and so must the policy.
pub fn warn(ns: &'static str) -> Vec<Case> {
    let mut cases = vec![
        create("T \"1h\"", timeout(json!("1h"))),
        create("T 29", timeout(json!(29))),
        create("T 3601", timeout(json!(3601))),
        create("T 5e9", timeout(json!(5_000_000_000_u64))),
        create("S 0", timeout_and_scale(json!(600), json!(0))),
        create("A \"yes\"", timeout(json!(600)).with_allow_data_loss("yes")),
        create(
            "lifecycle a string",
            pipeline_rollout().with_lifecycle(json!("oops")),
        ),
        create(
            "T 29, S 0, A \"yes\"",
            timeout_and_scale(json!(29), json!(0)).with_allow_data_loss("yes"),
        ),
        create(
            "A \"true\"",
            timeout(json!(600)).with_allow_data_loss("true"),
        ),
        create(
            "A \"true\"",
            timeout(json!(600)).with_allow_data_loss("true"),
        )
        .by(User::ArgocdServer),
        create(
            "forcePromote",
            timeout(json!(600)).with_force_promote(json!(true)),
        ),
        create(
            "forcePromote",
            timeout(json!(600)).with_force_promote(json!(true)),
        )
        .by(User::Admin),
        create("T 600", timeout(json!(600))),
        update(
            "T \"1h\" unchanged",
            timeout(json!("1h")),
            timeout(json!("1h")).with_unrelated_edit(),
        ),
        update(
            "A \"true\" kept, idle (rule 11)",
            timeout(json!(600)).with_allow_data_loss("true"),
            timeout(json!(600))
                .with_allow_data_loss("true")
                .with_unrelated_edit(),
        ),
    ];
    for user in [User::Alice, User::ArgocdServer] {
        cases.push(
            update(
                "A -> \"true\" while pausing",
                timeout(json!(600)).with_allow_data_loss("false"),
                timeout(json!(600)).with_allow_data_loss("true"),
            )
            .status(pause_and_drain_status(None))
            .by(user),
        );
        cases.push(
            update(
                "A -> \"true\", idle",
                timeout(json!(600)).with_allow_data_loss("false"),
                timeout(json!(600)).with_allow_data_loss("true"),
            )
            .by(user),
        );
    }
    cases.into_iter().map(|c| c.ns(ns)).collect()
}

/// The other policy switches of the rule table (see `VARIANTS_POLICY` in
/// tests/apiserver/vap.rs): no pause condition, forcePromote not gated, no
/// timeout not allowed anywhere, and a default scale factor of 1 (x100).
pub fn variants(ns: &'static str) -> Vec<Case> {
    let mut cases = Vec::new();
    for user in FORCERS {
        cases.push(
            create(
                "A \"true\"",
                timeout(json!(600)).with_allow_data_loss("true"),
            )
            .by(user),
        );
        cases.push(
            update(
                "A \"false\" -> \"true\", idle",
                timeout(json!(600)).with_allow_data_loss("false"),
                timeout(json!(600)).with_allow_data_loss("true"),
            )
            .by(user),
        );
        cases.push(
            create(
                "forcePromote true",
                timeout(json!(600)).with_force_promote(json!(true)),
            )
            .by(user),
        );
        cases.push(
            update(
                "forcePromote false -> true",
                timeout(json!(600)).with_force_promote(json!(false)),
                timeout(json!(600)).with_force_promote(json!(true)),
            )
            .by(user),
        );
    }
    for (name, d) in [
        (
            "T 92233721 S 1",
            timeout_and_scale(json!(92_233_721), json!(1)),
        ),
        ("T 31536000", timeout(json!(31_536_000))),
        ("T 31535999", timeout(json!(31_535_999))),
        ("T 92233721 (the default S 1)", timeout(json!(92_233_721))),
        ("T 92233720 (the default S 1)", timeout(json!(92_233_720))),
        (
            "T 92233721 S 50",
            timeout_and_scale(json!(92_233_721), json!(50)),
        ),
        ("T 3600", timeout(json!(3600))),
    ] {
        cases.push(create(name, d));
    }
    cases.into_iter().map(|c| c.ns(ns)).collect()
}
