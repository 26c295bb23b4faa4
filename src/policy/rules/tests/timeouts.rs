//! Rules 1 to 4: the drain timeout T and the recycle scale factor S,
//! under the built-in policy and under namespace overrides.

use serde_json::{Value, json};
use test_builders::PipelineRolloutDoc;

use super::fixtures::{overrides, pipeline_rollout, policy};
use super::validate_case::{Case, ViolationKind, check_table, create, update};

/// Rules 1 to 4 under the built-in policy (and a few others): T absent,
/// not an integer, out of bounds, overflowing with S; S out of range.
pub(super) fn timeout_cases() -> Vec<Case> {
    use ViolationKind::*;
    let timeout = |v: Value| pipeline_rollout().with_timeout(v);
    let timeout_and_scale =
        |v: Value, s: Value| pipeline_rollout().with_timeout(v).with_scale_factor(s);
    vec![
        // Rule 1: absent or null is fine.
        create("T absent", pipeline_rollout()),
        create("T null", timeout(Value::Null)),
        create(
            "lifecycle null",
            pipeline_rollout().with_lifecycle(Value::Null),
        ),
        create(
            "lifecycle empty",
            pipeline_rollout().with_lifecycle(json!({})),
        ),
        create(
            "no spec",
            PipelineRolloutDoc::from_json(json!({"kind": "PipelineRollout"})),
        ),
        create(
            "pipeline.spec null",
            pipeline_rollout().with_field(&["spec", "pipeline", "spec"], Value::Null),
        ),
        // Rule 2: not a JSON integer.
        create("T \"1h\"", timeout(json!("1h"))).deny(&[NotInteger]),
        create("T \"30\"", timeout(json!("30"))).deny(&[NotInteger]),
        create("T 30.5", timeout(json!(30.5))).deny(&[NotInteger]),
        create("T true", timeout(json!(true))).deny(&[NotInteger]),
        create("T 1e3 (a float)", timeout(json!(1e3))).deny(&[NotInteger]),
        create("T 30.0 (a float)", timeout(json!(30.0))).deny(&[NotInteger]),
        create("T object", timeout(json!({"seconds": 30}))).deny(&[NotInteger]),
        create("T array", timeout(json!([30]))).deny(&[NotInteger]),
        // A value on the way is not an object: T cannot be read.
        create(
            "spec.pipeline a string",
            pipeline_rollout().with_field(&["spec", "pipeline"], json!("oops")),
        )
        .deny(&[Unreachable]),
        create(
            "lifecycle an array",
            pipeline_rollout().with_lifecycle(json!([1])),
        )
        .deny(&[Unreachable]),
        create(
            "spec a number",
            PipelineRolloutDoc::from_json(json!({"spec": 5})),
        )
        .deny(&[Unreachable]),
        // Rule 3 with the built-in policy: min 30s, max 1h, no timeout 31536000 allowed.
        create("T 0", timeout(json!(0))).deny(&[TooShort]),
        create("T -5", timeout(json!(-5))).deny(&[TooShort]),
        create("T i64::MIN", timeout(json!(i64::MIN))).deny(&[TooShort]),
        create("T 1", timeout(json!(1))).deny(&[TooShort]),
        create("T 29", timeout(json!(29))).deny(&[TooShort]),
        create("T 30", timeout(json!(30))),
        create("T 300", timeout(json!(300))),
        create("T 3600", timeout(json!(3600))),
        create("T 3601", timeout(json!(3601))).deny(&[TooLong]),
        create("T 86400", timeout(json!(86400))).deny(&[TooLong]),
        create("T 31535999", timeout(json!(31_535_999))).deny(&[TooLong]),
        create("T 31536000", timeout(json!(31_536_000))),
        create("T 31536001", timeout(json!(31_536_001))),
        create("T 92233720 (x2)", timeout(json!(92_233_720))),
        // Rule 4 with the default scale factor 50 (x2): 4611686018 x 2 = 9223372036.
        create("T 4611686018 x2", timeout(json!(4_611_686_018_u64))),
        create("T 4611686019 x2", timeout(json!(4_611_686_019_u64))).deny(&[OverflowReading]),
        create("T 9223372036 x2", timeout(json!(9_223_372_036_u64))).deny(&[OverflowReading]),
        create("T 10^10 x2", timeout(json!(10_000_000_000_u64))).deny(&[OverflowReading]),
        create("T i64::MAX", timeout(json!(i64::MAX))).deny(&[OverflowReading]),
        create(
            "T i64::MAX + 1",
            timeout(json!(9_223_372_036_854_775_808_u64)),
        )
        .deny(&[OverflowReading]),
        create("T u64::MAX", timeout(json!(u64::MAX))).deny(&[OverflowReading]),
        // Above u64::MAX, serde_json reads the literal as a float.
        create(
            "T 10^20 (beyond u64)",
            timeout(serde_json::from_str("100000000000000000000").unwrap_or_default()),
        )
        .deny(&[NotInteger]),
        create("T 1e20 (a float)", timeout(json!(1e20))).deny(&[NotInteger]),
        // scaleFactor 1 (x100): 92233720 x 100 = 9223372000.
        create(
            "T 92233720 S 1",
            timeout_and_scale(json!(92_233_720), json!(1)),
        ),
        create(
            "T 92233721 S 1",
            timeout_and_scale(json!(92_233_721), json!(1)),
        )
        .deny(&[OverflowReading]),
        create(
            "T 100000000 S 1",
            timeout_and_scale(json!(100_000_000), json!(1)),
        )
        .deny(&[OverflowReading]),
        create(
            "T 31536000 S 1",
            timeout_and_scale(json!(31_536_000), json!(1)),
        ),
        create("T -5 S 1", timeout_and_scale(json!(-5), json!(1))).deny(&[TooShort]),
        // scaleFactor 2 (x50), 33 (x4: ceil(100/33)), 34 (x3), 100 (x1).
        create(
            "T 184467440 S 2",
            timeout_and_scale(json!(184_467_440), json!(2)),
        ),
        create(
            "T 184467441 S 2",
            timeout_and_scale(json!(184_467_441), json!(2)),
        )
        .deny(&[OverflowReading]),
        create(
            "T 2305843009 S 33",
            timeout_and_scale(json!(2_305_843_009_u64), json!(33)),
        ),
        create(
            "T 2305843010 S 33",
            timeout_and_scale(json!(2_305_843_010_u64), json!(33)),
        )
        .deny(&[OverflowReading]),
        create(
            "T 3074457345 S 34",
            timeout_and_scale(json!(3_074_457_345_u64), json!(34)),
        ),
        create(
            "T 3074457346 S 34",
            timeout_and_scale(json!(3_074_457_346_u64), json!(34)),
        )
        .deny(&[OverflowReading]),
        create(
            "T 9223372036 S 100",
            timeout_and_scale(json!(9_223_372_036_u64), json!(100)),
        ),
        create(
            "T 9223372037 S 100",
            timeout_and_scale(json!(9_223_372_037_u64), json!(100)),
        )
        .deny(&[OverflowReading]),
        // Rule 4: S present and not an integer from 1 to 100.
        create("S 0", timeout_and_scale(json!(600), json!(0))).deny(&[BadScale]),
        create("S 101", timeout_and_scale(json!(600), json!(101))).deny(&[BadScale]),
        create("S -1", timeout_and_scale(json!(600), json!(-1))).deny(&[BadScale]),
        create("S \"50\"", timeout_and_scale(json!(600), json!("50"))).deny(&[BadScale]),
        create("S 50.5", timeout_and_scale(json!(600), json!(50.5))).deny(&[BadScale]),
        create("S true", timeout_and_scale(json!(600), json!(true))).deny(&[BadScale]),
        create("S 1", timeout_and_scale(json!(600), json!(1))),
        create("S 33", timeout_and_scale(json!(600), json!(33))),
        create("S 50", timeout_and_scale(json!(600), json!(50))),
        create("S 100", timeout_and_scale(json!(600), json!(100))),
        create(
            "S null (the default)",
            timeout_and_scale(json!(600), Value::Null),
        ),
        create(
            "S 0 with T absent",
            pipeline_rollout().with_scale_factor(json!(0)),
        )
        .deny(&[BadScale]),
        create("T \"1h\" and S 0", timeout_and_scale(json!("1h"), json!(0)))
            .deny(&[NotInteger, BadScale]),
        create("T 29 and S 101", timeout_and_scale(json!(29), json!(101)))
            .deny(&[TooShort, BadScale]),
        // A policy without no timeout: both rule 3 and rule 4 fire.
        create(
            "T 92233721 S 1, no timeout not allowed",
            timeout_and_scale(json!(92_233_721), json!(1)),
        )
        .policy(policy(
            "drainTimeout:\n  default: 5m\n  allowNoTimeout: false\n",
        ))
        .deny(&[NoTimeout, OverflowReading]),
        create(
            "T 31536000, no timeout not allowed",
            timeout(json!(31_536_000)),
        )
        .policy(policy(
            "drainTimeout:\n  default: 5m\n  allowNoTimeout: false\n",
        ))
        .deny(&[NoTimeout]),
        create(
            "T 31535999, no timeout not allowed",
            timeout(json!(31_535_999)),
        )
        .policy(policy(
            "drainTimeout:\n  default: 5m\n  allowNoTimeout: false\n",
        ))
        .deny(&[TooLong]),
        // The policy's defaultRecycleScaleFactor is used when S is absent.
        create(
            "T 92233721, defaultRecycleScaleFactor 1",
            timeout(json!(92_233_721)),
        )
        .policy(policy("drainTimeout:\n  defaultRecycleScaleFactor: 1\n"))
        .deny(&[OverflowReading]),
        create(
            "T 92233720, defaultRecycleScaleFactor 1",
            timeout(json!(92_233_720)),
        )
        .policy(policy("drainTimeout:\n  defaultRecycleScaleFactor: 1\n")),
        create(
            "T 92233721, defaultRecycleScaleFactor 1, S 50",
            timeout_and_scale(json!(92_233_721), json!(50)),
        )
        .policy(policy("drainTimeout:\n  defaultRecycleScaleFactor: 1\n")),
        // UPDATE from an absent T to a bad one is judged like a CREATE.
        update(
            "UPDATE T absent -> \"1h\"",
            pipeline_rollout(),
            timeout(json!("1h")),
        )
        .deny(&[NotInteger]),
        update(
            "UPDATE T 600 -> 29",
            timeout(json!(600)),
            timeout(json!(29)),
        )
        .deny(&[TooShort]),
        update(
            "UPDATE T 600 -> 3601",
            timeout(json!(600)),
            timeout(json!(3601)),
        )
        .deny(&[TooLong]),
        update(
            "UPDATE T 600 -> 5e9",
            timeout(json!(600)),
            timeout(json!(5_000_000_000_u64)),
        )
        .deny(&[OverflowReading]),
        update(
            "UPDATE S 50 -> 0",
            timeout_and_scale(json!(600), json!(50)),
            timeout_and_scale(json!(600), json!(0)),
        )
        .deny(&[BadScale]),
        update("UPDATE T 29 -> 30", timeout(json!(29)), timeout(json!(30))),
        update(
            "UPDATE T \"1h\" -> 3600",
            timeout(json!("1h")),
            timeout(json!(3600)),
        ),
        update(
            "UPDATE T 600 -> absent",
            timeout(json!(600)),
            pipeline_rollout(),
        ),
    ]
}

#[test]
fn drain_timeout_and_scale_factor_table() {
    check_table("drain timeout and scale factor", &timeout_cases());
}

/// The namespace overrides of [`overrides`]: the first match wins, and
/// what an override leaves out comes from the top level.
pub(super) fn namespace_cases() -> Vec<Case> {
    use ViolationKind::*;
    let timeout = |v: Value| pipeline_rollout().with_timeout(v);
    let at = |ns: &'static str, name: &str, v: Value| {
        create(&format!("{ns}: {name}"), timeout(v))
            .policy(overrides())
            .ns(ns)
    };
    vec![
        // First override: no timeout not allowed; max 1h from the top level.
        at("payments-eu", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
        at("payments-eu", "far above no timeout", json!(50_000_000)).deny(&[NoTimeout]),
        at("ledger", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
        // First match wins: `pay*` would allow 2h, but `payments-*` comes first.
        at("payments-eu", "2h", json!(7200)).deny(&[TooLong]),
        at("payments-eu", "1h", json!(3600)),
        // min 60s comes from the top level, not from the built-in 30s.
        at("payments-eu", "59s", json!(59)).deny(&[TooShort]),
        at("payments-eu", "60s", json!(60)),
        at("payments-", "no timeout", json!(31_536_000)).deny(&[NoTimeout]),
        // Second override: max 2h, no timeout allowed (from the top level).
        at("payroll", "2h", json!(7200)),
        at("payroll", "2h + 1s", json!(7201)).deny(&[TooLong]),
        at("payroll", "no timeout", json!(31_536_000)),
        at("payroll", "59s", json!(59)).deny(&[TooShort]),
        // No override: the top level (min 60s, max 1h, no timeout allowed).
        at("ledger-2", "no timeout", json!(31_536_000)),
        at("ledger-2", "2h", json!(7200)).deny(&[TooLong]),
        at("default", "59s", json!(59)).deny(&[TooShort]),
        at("default", "no timeout", json!(31_536_000)),
        at("xpayments-eu", "2h", json!(7200)).deny(&[TooLong]),
        // Both rules 3 and 4 in an override.
        create(
            "payments-eu: T 92233721 S 1",
            timeout(json!(92_233_721)).with_scale_factor(json!(1)),
        )
        .policy(overrides())
        .ns("payments-eu")
        .deny(&[NoTimeout, OverflowReading]),
    ]
}

#[test]
fn namespace_override_table() {
    check_table("namespace override", &namespace_cases());
}
