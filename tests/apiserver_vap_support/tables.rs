//! The cases each policy of the differential test is driven through,
//! following the tables of src/policy/rules/tests.rs (rules 1 to 9 for the
//! built-in policy; namespace overrides, the default scale factor and RBAC;
//! warn mode).

use serde_json::{Value, json};

use super::cases::{Case, Doc, create, doc, pausing, ppnd, timeout_values, update};
use envtest::User;

/// The users whose permission the rule table varies.
pub const FORCERS: [User; 3] = [User::ArgocdServer, User::Admin, User::Alice];

fn t(v: Value) -> Doc {
    doc().t(v)
}

fn ts(v: Value, s: Value) -> Doc {
    doc().t(v).s(s)
}

/// Rules 1 to 9 under the built-in policy, in namespace `ns`.
pub fn built_in(ns: &'static str) -> Vec<Case> {
    // Rules 1 to 4: T and S.
    let mut cases = vec![
        create("T absent", doc()),
        create("lifecycle null", doc().lifecycle(Value::Null)),
        create("lifecycle empty", doc().lifecycle(json!({}))),
        create("lifecycle an array", doc().lifecycle(json!([1]))),
        create("lifecycle a string", doc().lifecycle(json!("oops"))),
    ];
    for (name, value) in timeout_values() {
        cases.push(create(name, t(value)));
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
        cases.push(create(&format!("T {tv} S {s}"), ts(big(tv), json!(s))));
    }
    cases.push(create("T -5 S 1", ts(json!(-5), json!(1))));
    for s in [
        json!(0),
        json!(101),
        json!(-1),
        json!(1),
        json!(33),
        json!(50),
        json!(100),
    ] {
        cases.push(create(&format!("S {s}"), ts(json!(600), s)));
    }
    cases.push(create("S null (the default)", ts(json!(600), Value::Null)));
    let float = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    cases.push(create("S 50.0 (a float)", ts(json!(600), float("50.0"))));
    cases.push(create("S 0 with T absent", doc().s(json!(0))));
    cases.push(create("T \"1h\" and S 0", ts(json!("1h"), json!(0))));
    cases.push(create("T 29 and S 101", ts(json!(29), json!(101))));
    // What the API server refuses before admission.
    for (name, d) in [
        ("S \"50\"", ts(json!(600), json!("50"))),
        ("S 50.5", ts(json!(600), json!(50.5))),
        ("S true", ts(json!(600), json!(true))),
        (
            "spec.pipeline a string",
            doc().at(&["spec", "pipeline"], json!("oops")),
        ),
        ("spec a number", doc().at(&["spec"], json!(5))),
        (
            "pipeline.spec null",
            doc().at(&["spec", "pipeline", "spec"], Value::Null),
        ),
        ("forcePromote \"true\"", t(json!(600)).fp(json!("true"))),
        (
            "annotations a string",
            t(json!(600)).at(&["metadata", "annotations"], json!("x")),
        ),
        (
            "A 1 (a number)",
            t(json!(600)).at(
                &["metadata", "annotations", super::cases::ALLOW_DATA_LOSS],
                json!(1),
            ),
        ),
    ] {
        cases.push(create(name, d).rejected());
    }
    // Rule 5.
    for value in ["false", "True", "TRUE", "yes", "", " true"] {
        cases.push(create(&format!("A {value:?}"), t(json!(600)).a(value)));
    }
    cases.push(create(
        "other annotations only",
        t(json!(600)).at(&["metadata", "annotations"], json!({"a": "b"})),
    ));
    cases.push(update(
        "A \"false\" -> \"yes\"",
        t(json!(600)).a("false"),
        t(json!(600)).a("yes"),
    ));
    cases.push(update(
        "A \"yes\" -> \"false\"",
        t(json!(600)).a("yes"),
        t(json!(600)).a("false"),
    ));
    // Updates of T and S, and rule 8 (ratcheting).
    let huge = || json!(5_000_000_000_u64);
    for (name, old, new) in [
        ("T absent -> \"1h\"", doc(), t(json!("1h"))),
        ("T 600 -> 29", t(json!(600)), t(json!(29))),
        ("T 600 -> 3601", t(json!(600)), t(json!(3601))),
        ("T 600 -> 5e9", t(json!(600)), t(huge())),
        (
            "S 50 -> 0",
            ts(json!(600), json!(50)),
            ts(json!(600), json!(0)),
        ),
        ("T 29 -> 30", t(json!(29)), t(json!(30))),
        ("T \"1h\" -> 3600", t(json!("1h")), t(json!(3600))),
        ("T 600 -> absent", t(json!(600)), doc()),
        (
            "T \"1h\" unchanged",
            t(json!("1h")),
            t(json!("1h")).edited(),
        ),
        ("T 30.5 unchanged", t(json!(30.5)), t(json!(30.5)).edited()),
        ("T \"1h\" -> \"2h\"", t(json!("1h")), t(json!("2h"))),
        ("T 600 -> \"1h\"", t(json!(600)), t(json!("1h"))),
        ("T 29 unchanged", t(json!(29)), t(json!(29)).edited()),
        (
            "T 29 -> 29.0 (a float)",
            t(json!(29)),
            t(float("29.0")).edited(),
        ),
        ("T \"29\" -> 29", t(json!("29")), t(json!(29))),
        ("T 29 -> \"29\"", t(json!(29)), t(json!("29"))),
        ("T -5 unchanged", t(json!(-5)), t(json!(-5)).edited()),
        ("T 3601 unchanged", t(json!(3601)), t(json!(3601)).edited()),
        ("T 29 -> 28", t(json!(29)), t(json!(28))),
        ("T 3601 -> 3602", t(json!(3601)), t(json!(3602))),
        ("T 5e9, S absent unchanged", t(huge()), t(huge()).edited()),
        (
            "T 1e8, S 1 unchanged",
            ts(json!(100_000_000), json!(1)),
            ts(json!(100_000_000), json!(1)).edited(),
        ),
        ("T 5e9 -> 6e9", t(huge()), t(json!(6_000_000_000_u64))),
        (
            "S 50 -> 1, T 1e8 unchanged",
            ts(json!(100_000_000), json!(50)),
            ts(json!(100_000_000), json!(1)),
        ),
        (
            "S absent -> 1, T 1e8 unchanged",
            t(json!(100_000_000)),
            ts(json!(100_000_000), json!(1)),
        ),
        (
            "S 2 -> 1, T 2e8 unchanged, both overflow",
            ts(json!(200_000_000), json!(2)),
            ts(json!(200_000_000), json!(1)),
        ),
        (
            "T and S changed",
            ts(json!(600), json!(50)),
            ts(json!(100_000_000), json!(1)),
        ),
        (
            "S absent -> 50 (the default), T 5e9 unchanged",
            t(huge()),
            t(huge()).s(json!(50)),
        ),
        (
            "S 50 (the default) -> absent, T 5e9 unchanged",
            t(huge()).s(json!(50)),
            t(huge()),
        ),
        (
            "S 0 unchanged",
            ts(json!(600), json!(0)),
            ts(json!(600), json!(0)).edited(),
        ),
        (
            "S 0 -> 101",
            ts(json!(600), json!(0)),
            ts(json!(600), json!(101)),
        ),
        (
            "A \"yes\" unchanged",
            t(json!(600)).a("yes"),
            t(json!(600)).a("yes").edited(),
        ),
        (
            "A \"yes\" -> \"True\"",
            t(json!(600)).a("yes"),
            t(json!(600)).a("True"),
        ),
        (
            "T 29 unchanged, A \"yes\" -> \"no\"",
            t(json!(29)).a("yes"),
            t(json!(29)).a("no"),
        ),
        (
            "T \"1h\", S 0, A \"yes\" all unchanged",
            ts(json!("1h"), json!(0)).a("yes"),
            ts(json!("1h"), json!(0)).a("yes").edited(),
        ),
        (
            "lifecycle a string unchanged",
            doc().lifecycle(json!("oops")),
            doc().lifecycle(json!("oops")).edited(),
        ),
        (
            "lifecycle a string -> an array",
            doc().lifecycle(json!("oops")),
            doc().lifecycle(json!([1])),
        ),
        (
            "T 600 -> lifecycle a string",
            t(json!(600)),
            doc().lifecycle(json!("oops")),
        ),
    ] {
        cases.push(update(name, old, new));
    }
    cases.push(
        update(
            "finalizer removed, T \"1h\" unchanged",
            t(json!("1h")),
            t(json!("1h")),
        )
        .terminating(),
    );
    cases.push(update("T 600 -> \"1h\"", t(json!(600)), t(json!("1h"))).terminating());
    cases.extend(super::gates::force_cases());
    cases.into_iter().map(|c| c.ns(ns)).collect()
}

/// The namespaces the overrides policy is tried in (test/e2e_vap.rs
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
/// `OVERRIDES_POLICY` in tests/e2e_vap.rs): alice may force only in
/// payments-eu, through a RoleBinding; carol through the group sre.
pub fn overrides() -> Vec<Case> {
    let mut cases = Vec::new();
    let at = |ns: &'static str, v: Value| create(&format!("{ns}: T {v}"), t(v)).ns(ns);
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
            ts(json!(92_233_721), json!(1)),
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
            Some(s) => ts(json!(tv), json!(s)),
            None => t(json!(tv)),
        };
        cases.push(create(&format!("T {tv} S {s:?}"), d).ns("vap-overrides"));
    }
    cases.push(
        update(
            "T 2305843010, S absent -> 25 (the default)",
            t(json!(2_305_843_010_u64)),
            ts(json!(2_305_843_010_u64), json!(25)),
        )
        .ns("vap-overrides"),
    );
    cases.push(
        update(
            "payments-eu: no timeout unchanged",
            t(json!(31_536_000)),
            t(json!(31_536_000)).edited(),
        )
        .ns("payments-eu"),
    );
    cases.push(
        update(
            "payments-eu: 600 -> no timeout",
            t(json!(600)),
            t(json!(31_536_000)),
        )
        .ns("payments-eu"),
    );
    // RBAC, the group sre, and system:masters (which RBAC allows everything).
    for ns in ["payments-eu", "vap-overrides"] {
        for user in [User::Alice, User::Carol, User::ArgocdServer, User::Admin] {
            for (pname, status) in pausing() {
                cases.push(
                    update(
                        &format!("{ns}: A \"false\" -> \"true\", {pname}"),
                        t(json!(600)).a("false"),
                        t(json!(600)).a("true"),
                    )
                    .status(status)
                    .ns(ns)
                    .by(user),
                );
            }
            cases.push(
                update(
                    &format!("{ns}: A \"false\" -> \"true\", idle"),
                    t(json!(600)).a("false"),
                    t(json!(600)).a("true"),
                )
                .ns(ns)
                .by(user),
            );
            cases.push(
                create(
                    &format!("{ns}: forcePromote true"),
                    t(json!(600)).fp(json!(true)),
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
            t(json!(600)).fp(json!(true)),
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
        create("T \"1h\"", t(json!("1h"))),
        create("T 29", t(json!(29))),
        create("T 3601", t(json!(3601))),
        create("T 5e9", t(json!(5_000_000_000_u64))),
        create("S 0", ts(json!(600), json!(0))),
        create("A \"yes\"", t(json!(600)).a("yes")),
        create("lifecycle a string", doc().lifecycle(json!("oops"))),
        create("T 29, S 0, A \"yes\"", ts(json!(29), json!(0)).a("yes")),
        create("A \"true\"", t(json!(600)).a("true")),
        create("A \"true\"", t(json!(600)).a("true")).by(User::ArgocdServer),
        create("forcePromote", t(json!(600)).fp(json!(true))),
        create("forcePromote", t(json!(600)).fp(json!(true))).by(User::Admin),
        create("T 600", t(json!(600))),
        update(
            "T \"1h\" unchanged",
            t(json!("1h")),
            t(json!("1h")).edited(),
        ),
        update(
            "A \"true\" kept, idle (rule 11)",
            t(json!(600)).a("true"),
            t(json!(600)).a("true").edited(),
        ),
    ];
    for user in [User::Alice, User::ArgocdServer] {
        cases.push(
            update(
                "A -> \"true\" while pausing",
                t(json!(600)).a("false"),
                t(json!(600)).a("true"),
            )
            .status(ppnd())
            .by(user),
        );
        cases.push(
            update(
                "A -> \"true\", idle",
                t(json!(600)).a("false"),
                t(json!(600)).a("true"),
            )
            .by(user),
        );
    }
    cases.into_iter().map(|c| c.ns(ns)).collect()
}

/// The other policy switches of the rule table (see `VARIANTS_POLICY` in
/// tests/e2e_vap.rs): no pause condition, forcePromote not gated, no
/// timeout not allowed anywhere, and a default scale factor of 1 (x100).
pub fn variants(ns: &'static str) -> Vec<Case> {
    let mut cases = Vec::new();
    for user in FORCERS {
        cases.push(create("A \"true\"", t(json!(600)).a("true")).by(user));
        cases.push(
            update(
                "A \"false\" -> \"true\", idle",
                t(json!(600)).a("false"),
                t(json!(600)).a("true"),
            )
            .by(user),
        );
        cases.push(create("forcePromote true", t(json!(600)).fp(json!(true))).by(user));
        cases.push(
            update(
                "forcePromote false -> true",
                t(json!(600)).fp(json!(false)),
                t(json!(600)).fp(json!(true)),
            )
            .by(user),
        );
    }
    for (name, d) in [
        ("T 92233721 S 1", ts(json!(92_233_721), json!(1))),
        ("T 31536000", t(json!(31_536_000))),
        ("T 31535999", t(json!(31_535_999))),
        ("T 92233721 (the default S 1)", t(json!(92_233_721))),
        ("T 92233720 (the default S 1)", t(json!(92_233_720))),
        ("T 92233721 S 50", ts(json!(92_233_721), json!(50))),
        ("T 3600", t(json!(3600))),
    ] {
        cases.push(create(name, d));
    }
    cases.into_iter().map(|c| c.ns(ns)).collect()
}
