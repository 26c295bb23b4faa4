//! Denial messages: each names the field path and the value, and says
//! how to fix it.

use serde_json::{Value, json};

use super::fixtures::{overrides, pipeline_rollout};
use super::validate_case::{Case, ViolationKind, check_table, create};
use crate::rollout::{ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, SCALE_FACTOR_FIELD, TIMEOUT_FIELD};

/// One case per violation, checking its message.
pub(super) fn message_cases() -> Vec<Case> {
    use ViolationKind::*;
    let timeout = |v: Value| pipeline_rollout().with_timeout(v);
    vec![
        create("message: not an integer", timeout(json!("1h")))
            .deny(&[NotInteger])
            .msg(&[
                TIMEOUT_FIELD.dotted(),
                "is \"1h\"",
                "not an integer number of seconds",
                "e.g. 3600 for 1h",
            ]),
        create("message: 30.5", timeout(json!(30.5)))
            .deny(&[NotInteger])
            .msg(&[TIMEOUT_FIELD.dotted(), "is 30.5", "write an integer"]),
        create("message: too short", timeout(json!(29)))
            .deny(&[TooShort])
            .msg(&[
                TIMEOUT_FIELD.dotted(),
                "is 29",
                "minimum of 30",
                "set 30 to 3600 seconds",
                "31536000",
            ])
            .not_msg(&["without draining"]),
        create("message: zero", timeout(json!(0)))
            .deny(&[TooShort])
            .msg(&[
                TIMEOUT_FIELD.dotted(),
                "is 0",
                "without draining",
                "set 30 to 3600 seconds",
            ]),
        create("message: negative", timeout(json!(-5)))
            .deny(&[TooShort])
            .msg(&[TIMEOUT_FIELD.dotted(), "is -5", "without draining"]),
        create("message: too long", timeout(json!(3601)))
            .deny(&[TooLong])
            .msg(&[
                TIMEOUT_FIELD.dotted(),
                "is 3601",
                "maximum of 3600",
                "set 30 to 3600 seconds",
                "or 31536000 (or more) for no timeout",
            ]),
        create("message: too long in override", timeout(json!(7200)))
            .policy(overrides())
            .ns("payments-eu")
            .deny(&[TooLong])
            .msg(&[
                TIMEOUT_FIELD.dotted(),
                "is 7200",
                "maximum of 3600",
                "namespaces \"payments-*\"",
                "set 60 to 3600 seconds",
            ])
            .not_msg(&["for no timeout"]),
        create(
            "message: no timeout not allowed",
            timeout(json!(31_536_000)),
        )
        .policy(overrides())
        .ns("ledger")
        .deny(&[NoTimeout])
        .msg(&[
            TIMEOUT_FIELD.dotted(),
            "is 31536000",
            "no timeout",
            "namespaces \"ledger\"",
            "set 60 to 3600 seconds",
        ]),
        create("message: overflow x2", timeout(json!(5_000_000_000_u64)))
            .deny(&[OverflowReading])
            .msg(&[
                TIMEOUT_FIELD.dotted(),
                "is 5000000000",
                "multiplies it by 2",
                "scaleFactor 50",
                "9223372036",
                "set at most 4611686018",
            ]),
        create(
            "message: overflow x100",
            timeout(json!(92_233_721)).with_scale_factor(json!(1)),
        )
        .deny(&[OverflowReading])
        .msg(&[
            TIMEOUT_FIELD.dotted(),
            "is 92233721",
            "multiplies it by 100",
            "set at most 92233720",
        ]),
        create("message: overflow u64", timeout(json!(u64::MAX)))
            .deny(&[OverflowReading])
            .msg(&["is 18446744073709551615", "set at most 4611686018"]),
        create(
            "message: bad scale factor",
            timeout(json!(600)).with_scale_factor(json!(0)),
        )
        .deny(&[BadScale])
        .msg(&[
            SCALE_FACTOR_FIELD.dotted(),
            "is 0",
            "integer percent from 1 to 100",
            "default of 50",
        ]),
        create(
            "message: scale factor string",
            timeout(json!(600)).with_scale_factor(json!("50")),
        )
        .deny(&[BadScale])
        .msg(&[SCALE_FACTOR_FIELD.dotted(), "is \"50\"", "set e.g. 50"]),
        create(
            "message: annotation",
            timeout(json!(600)).with_allow_data_loss(json!("yes")),
        )
        .deny(&[BadAnnotation])
        .msg(&[
            &format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"]"),
            "is \"yes\"",
            "set \"true\"",
            "or \"false\"",
        ]),
        create(
            "message: annotation True",
            timeout(json!(600)).with_allow_data_loss(json!("True")),
        )
        .deny(&[BadAnnotation])
        .msg(&["is \"True\"", "exactly \"true\""]),
        create(
            "message: annotations malformed",
            pipeline_rollout().with_field(&["metadata", "annotations"], json!([])),
        )
        .deny(&[BadMetadata])
        .msg(&["metadata.annotations is an array", "map of strings"]),
        create(
            "message: unreachable",
            pipeline_rollout().with_field(&["spec", "pipeline"], json!("oops")),
        )
        .deny(&[Unreachable])
        .msg(&[
            "spec.pipeline is a string",
            TIMEOUT_FIELD.dotted(),
            "make spec.pipeline an object",
        ]),
        create(
            "message: force re-apply",
            timeout(json!(600)).with_allow_data_loss(json!("true")),
        )
        .deny(&[Reapply])
        .audit("force-reapply", "denied")
        .msg(&[
            "user \"alice\"",
            &format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\""),
            "not in forceReapply.users",
            "ask a platform admin",
            "Argo CD's allow-data-loss action",
            "a new PipelineRollout cannot be pausing",
        ]),
        create(
            "message: force promote",
            timeout(json!(600)).with_force_promote(json!(true)),
        )
        .deny(&[Promote])
        .audit("force-promote", "denied")
        .msg(&[
            "user \"alice\"",
            FORCE_PROMOTE_FIELD.dotted(),
            "ask a platform admin",
        ]),
        create(
            "message: several are numbered",
            timeout(json!("1h"))
                .with_scale_factor(json!(0))
                .with_allow_data_loss(json!("yes")),
        )
        .deny(&[NotInteger, BadScale, BadAnnotation])
        .msg(&[
            "(1) ",
            "(2) ",
            "(3) ",
            TIMEOUT_FIELD.dotted(),
            SCALE_FACTOR_FIELD.dotted(),
            ALLOW_DATA_LOSS,
        ]),
    ]
}

#[test]
fn denial_message_table() {
    check_table("denial message", &message_cases());
}
