//! Rule 8: a violation whose inputs an UPDATE leaves unchanged warns
//! instead of denying; rules 6 and 7 never ratchet.

use serde_json::{Value, json};
use test_builders::status::pause_and_drain_status;

use super::fixtures::{overrides, pipeline_rollout, rollout_with};
use super::validate_case::{Case, ViolationKind, check_table, create, update};

/// Rule 8 for rules 2 to 5, and rules 6 and 7, which do not ratchet.
pub(super) fn ratchet_cases() -> Vec<Case> {
    use ViolationKind::*;
    let timeout = |v: Value| pipeline_rollout().with_timeout(v);
    let timeout_and_scale =
        |v: Value, s: Value| pipeline_rollout().with_timeout(v).with_scale_factor(s);
    let annotated = |v: Value| {
        pipeline_rollout()
            .with_timeout(json!(600))
            .with_allow_data_loss(v)
    };
    let huge = || json!(5_000_000_000_u64);
    let unchanged = "unchanged, so allowed: ";
    vec![
        // Rule 2.
        update(
            "rule 2 unchanged \"1h\"",
            timeout(json!("1h")),
            timeout(json!("1h")).with_unrelated_edit(),
        )
        .warn(&[unchanged]),
        update(
            "rule 2 unchanged 30.5",
            timeout(json!(30.5)),
            timeout(json!(30.5)).with_unrelated_edit(),
        )
        .warn(&["pauseGracePeriodSeconds 30.5"]),
        update(
            "rule 2 changed \"1h\" -> \"2h\"",
            timeout(json!("1h")),
            timeout(json!("2h")),
        )
        .deny(&[NotInteger]),
        update(
            "rule 2 changed 600 -> \"1h\"",
            timeout(json!(600)),
            timeout(json!("1h")),
        )
        .deny(&[NotInteger]),
        create("rule 2 CREATE \"1h\"", timeout(json!("1h"))).deny(&[NotInteger]),
        update(
            "rule 2 unchanged, spec.pipeline a string",
            pipeline_rollout().with_field(&["spec", "pipeline"], json!("oops")),
            pipeline_rollout()
                .with_field(&["spec", "pipeline"], json!("oops"))
                .with_unrelated_edit(),
        )
        .warn(&["spec.pipeline is a string"]),
        update(
            "rule 2 changed, spec.pipeline becomes a string",
            pipeline_rollout(),
            pipeline_rollout().with_field(&["spec", "pipeline"], json!("oops")),
        )
        .deny(&[Unreachable]),
        // Rule 3.
        update(
            "rule 3 unchanged 29",
            timeout(json!(29)),
            timeout(json!(29)).with_unrelated_edit(),
        )
        .warn(&["pauseGracePeriodSeconds 29 is below the minimum 30"]),
        update(
            "rule 3 unchanged -5",
            timeout(json!(-5)),
            timeout(json!(-5)).with_unrelated_edit(),
        )
        .warn(&[unchanged]),
        update(
            "rule 3 unchanged 3601",
            timeout(json!(3601)),
            timeout(json!(3601)).with_unrelated_edit(),
        )
        .warn(&["above the maximum 3600"]),
        update(
            "rule 3 changed 29 -> 28",
            timeout(json!(29)),
            timeout(json!(28)),
        )
        .deny(&[TooShort]),
        update(
            "rule 3 changed 3601 -> 3602",
            timeout(json!(3601)),
            timeout(json!(3602)),
        )
        .deny(&[TooLong]),
        create("rule 3 CREATE 29", timeout(json!(29))).deny(&[TooShort]),
        update(
            "rule 3 unchanged no timeout in payments-eu",
            timeout(json!(31_536_000)),
            timeout(json!(31_536_000)).with_unrelated_edit(),
        )
        .policy(overrides())
        .ns("payments-eu")
        .warn(&["means no timeout"]),
        update(
            "rule 3 changed to no timeout in payments-eu",
            timeout(json!(600)),
            timeout(json!(31_536_000)),
        )
        .policy(overrides())
        .ns("payments-eu")
        .deny(&[NoTimeout]),
        // Rule 4: the overflow needs T and S unchanged.
        update(
            "rule 4 T, S absent unchanged",
            timeout(huge()),
            timeout(huge()).with_unrelated_edit(),
        )
        .warn(&["overflows"]),
        update(
            "rule 4 T, S 1 unchanged",
            timeout_and_scale(json!(100_000_000), json!(1)),
            timeout_and_scale(json!(100_000_000), json!(1)).with_unrelated_edit(),
        )
        .warn(&["x100 (recycle) overflows"]),
        update(
            "rule 4 T changed",
            timeout(huge()),
            timeout(json!(6_000_000_000_u64)),
        )
        .deny(&[OverflowReading]),
        update(
            "rule 4 S changed 50 -> 1, T unchanged",
            timeout_and_scale(json!(100_000_000), json!(50)),
            timeout_and_scale(json!(100_000_000), json!(1)),
        )
        .deny(&[OverflowReading]),
        update(
            "rule 4 S changed absent -> 1, T unchanged",
            timeout(json!(100_000_000)),
            timeout_and_scale(json!(100_000_000), json!(1)),
        )
        .deny(&[OverflowReading]),
        update(
            "rule 4 S changed 2 -> 1, T unchanged, both overflow",
            timeout_and_scale(json!(200_000_000), json!(2)),
            timeout_and_scale(json!(200_000_000), json!(1)),
        )
        .deny(&[OverflowReading]),
        update(
            "rule 4 T and S changed",
            timeout_and_scale(json!(600), json!(50)),
            timeout_and_scale(json!(100_000_000), json!(1)),
        )
        .deny(&[OverflowReading]),
        create("rule 4 CREATE overflow", timeout(huge())).deny(&[OverflowReading]),
        update(
            "rule 4 S 0 unchanged",
            timeout_and_scale(json!(600), json!(0)),
            timeout_and_scale(json!(600), json!(0)).with_unrelated_edit(),
        )
        .warn(&["scaleFactor 0 is not an integer from 1 to 100"]),
        update(
            "rule 4 S \"50\" unchanged, T changed",
            timeout_and_scale(json!(600), json!("50")),
            timeout_and_scale(json!(700), json!("50")),
        )
        .warn(&["scaleFactor \"50\""]),
        update(
            "rule 4 S changed 0 -> 101",
            timeout_and_scale(json!(600), json!(0)),
            timeout_and_scale(json!(600), json!(101)),
        )
        .deny(&[BadScale]),
        create("rule 4 CREATE S 0", timeout_and_scale(json!(600), json!(0))).deny(&[BadScale]),
        // Rule 5.
        update(
            "rule 5 unchanged \"yes\"",
            annotated(json!("yes")),
            annotated(json!("yes")).with_unrelated_edit(),
        )
        .warn(&["allow-data-loss \"yes\" is ignored"]),
        update(
            "rule 5 unchanged 1",
            annotated(json!(1)),
            annotated(json!(1)).with_unrelated_edit(),
        )
        .warn(&[unchanged]),
        update(
            "rule 5 changed \"yes\" -> \"True\"",
            annotated(json!("yes")),
            annotated(json!("True")),
        )
        .deny(&[BadAnnotation]),
        create("rule 5 CREATE \"yes\"", annotated(json!("yes"))).deny(&[BadAnnotation]),
        update(
            "rule 5 unchanged, annotations a string",
            pipeline_rollout().with_field(&["metadata", "annotations"], json!("x")),
            pipeline_rollout()
                .with_field(&["metadata", "annotations"], json!("x"))
                .with_unrelated_edit(),
        )
        .warn(&["metadata.annotations is a string"]),
        // Mixed: one unchanged (warning), one changed (denial).
        update(
            "T 29 unchanged, A \"yes\" -> \"no\"",
            timeout(json!(29)).with_allow_data_loss(json!("yes")),
            timeout(json!(29)).with_allow_data_loss(json!("no")),
        )
        .warn(&["below the minimum"])
        .deny(&[BadAnnotation]),
        update(
            "T \"1h\", S 0, A \"yes\" all unchanged",
            timeout_and_scale(json!("1h"), json!(0)).with_allow_data_loss(json!("yes")),
            timeout_and_scale(json!("1h"), json!(0))
                .with_allow_data_loss(json!("yes"))
                .with_unrelated_edit(),
        )
        .warn(&["\"1h\"", "scaleFactor 0", "\"yes\""]),
        // Rule 9 with rule 8: a terminating object can still lose its finalizer.
        update(
            "terminating, finalizer removed, T \"1h\" unchanged",
            timeout(json!("1h")).terminating().with_field(
                &["metadata", "finalizers"],
                json!(["numaplane.numaproj.io/finalizer"]),
            ),
            timeout(json!("1h")).terminating(),
        )
        .warn(&[unchanged]),
        update(
            "terminating, T changed to \"1h\"",
            timeout(json!(600)).terminating(),
            timeout(json!("1h")).terminating(),
        )
        .deny(&[NotInteger]),
        // Rules 6 and 7 do not ratchet.
        update(
            "rule 6 is not ratcheted",
            rollout_with(Some("false"), Some(pause_and_drain_status(None))),
            rollout_with(Some("true"), Some(pause_and_drain_status(None))),
        )
        .deny(&[Reapply])
        .audit("force-reapply", "denied"),
    ]
}

#[test]
fn ratcheting_table() {
    check_table("ratcheting", &ratchet_cases());
}

/// Rule 8 defines S as "spec.strategy.recycleStrategy.scaleFactor
/// (defaultRecycleScaleFactor when absent)", so writing out the default
/// explicitly leaves S unchanged and the overflow should stay a warning.
#[test]
fn ratcheting_treats_an_explicit_default_scale_factor_as_unchanged() {
    let huge = json!(5_000_000_000_u64);
    check_table(
        "explicit default scale factor",
        &[
            update(
                "S absent -> 50 (the default), T unchanged",
                pipeline_rollout().with_timeout(huge.clone()),
                pipeline_rollout()
                    .with_timeout(huge.clone())
                    .with_scale_factor(json!(50)),
            )
            .warn(&["overflows"]),
            update(
                "S 50 (the default) -> absent, T unchanged",
                pipeline_rollout()
                    .with_timeout(huge.clone())
                    .with_scale_factor(json!(50)),
                pipeline_rollout().with_timeout(huge),
            )
            .warn(&["overflows"]),
        ],
    );
}
