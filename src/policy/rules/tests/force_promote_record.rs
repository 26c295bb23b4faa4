//! Rule 25: the one-shot forcePromote's record is the webhook's own. A
//! write may keep it or drop it; setting it to anything but what `/mutate`
//! writes is refused, so a forged record cannot stop the reset.

use serde_json::{Value, json};
use test_builders::PipelineRolloutDoc;

use super::fixtures::{argocd_server, built_in, pipeline_rollout, policy};
use super::validate_case::{Case, ViolationKind, check_table, update};
use crate::rollout::FORCE_PROMOTE_FOR;

/// The stored status of a progressive upgrade of child `child`.
fn progressive(in_progress: bool, child: &str) -> Value {
    json!({
        "upgradeInProgress": if in_progress { "Progressive" } else { "" },
        "progressiveStatus": {"upgradingPipelineStatus": {"name": child}},
    })
}

/// A rollout with forcePromote `on`, the record `record`, during the
/// upgrade of p-1.
fn rollout(on: bool, record: Option<&str>) -> PipelineRolloutDoc {
    let mut doc = pipeline_rollout()
        .with_timeout(600)
        .with_force_promote(on)
        .with_status(progressive(true, "p-1"));
    if let Some(record) = record {
        doc = doc.with_field(&["metadata", "annotations", FORCE_PROMOTE_FOR], record);
    }
    doc
}

fn cases() -> Vec<Case> {
    use ViolationKind::*;
    let one_shot = || policy("forcePromote:\n  oneShot: true\n");
    let case = |name: &str, old, new| update(name, old, new).policy(one_shot());
    // Rule 12 warns of every UPDATE that keeps forcePromote on.
    let left_on = "forcePromote is still true";
    let fix = "leave the annotation out of your change";
    let huge = "f".repeat(256_000);
    vec![
        case(
            "kept on, the record kept",
            rollout(true, Some("upgrade:p-1")),
            rollout(true, Some("upgrade:p-1")),
        )
        .warn(&[left_on]),
        case(
            "kept on, the record dropped (the mutating webhook puts it back)",
            rollout(true, Some("upgrade:p-1")),
            rollout(true, None),
        )
        .warn(&[left_on]),
        case(
            "kept on, the record forged to a value no reset reads",
            rollout(true, Some("upgrade:p-1")),
            rollout(true, Some("never:")),
        )
        .warn(&[left_on])
        .deny(&[Record])
        .msg(&["\"never:\"", "not a record the webhook writes", fix]),
        case(
            "kept on, the record moved to another upgrade",
            rollout(true, Some("upgrade:p-1")),
            rollout(true, Some("after:p-9")),
        )
        .warn(&[left_on])
        .deny(&[Record])
        .msg(&[
            "\"after:p-9\"",
            "the webhook's record for this forcePromote is \"upgrade:p-1\"",
            fix,
        ]),
        case(
            "turned on with the record the mutating webhook writes",
            rollout(false, None),
            rollout(true, Some("upgrade:p-1")),
        )
        .user(argocd_server())
        .audit("force-promote", "allowed: user"),
        case(
            "turned on with a forged record",
            rollout(false, None),
            rollout(true, Some("after:p-1")),
        )
        .user(argocd_server())
        .audit("force-promote", "allowed: user")
        .deny(&[Record])
        .msg(&["is \"upgrade:p-1\""]),
        case(
            "a record added while forcePromote is off",
            rollout(false, None),
            rollout(false, Some("after:")),
        )
        .deny(&[Record])
        .msg(&["forcePromote is off"]),
        update(
            "oneShot off: a record set by hand",
            rollout(true, Some("upgrade:p-1")),
            rollout(true, Some("after:")),
        )
        .warn(&[left_on])
        .policy(built_in())
        .deny(&[Record])
        .msg(&["forcePromote.oneShot is off"]),
        case(
            "a 250 KiB value is refused, and the message stays short",
            rollout(true, Some("upgrade:p-1")),
            rollout(true, Some(&huge)),
        )
        .warn(&[left_on])
        .deny(&[Record])
        .msg(&["not a record the webhook writes"]),
        case(
            "a stored record this write leaves alone is not this write's doing",
            rollout(true, Some("never:")),
            rollout(true, Some("never:")),
        )
        .warn(&[left_on]),
    ]
}

#[test]
fn the_record_is_the_webhooks_own_table() {
    check_table("force-promote record", &cases());
}

#[test]
fn a_refused_record_is_named_in_a_message_of_bounded_length() {
    let huge = "f".repeat(256_000);
    let case = update(
        "huge",
        rollout(true, Some("upgrade:p-1")),
        rollout(true, Some(&huge)),
    )
    .policy(policy("forcePromote:\n  oneShot: true\n"));
    let verdict = super::validate_case::run(&case);
    let message = verdict
        .denials
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(message.contains(FORCE_PROMOTE_FOR), "{message}");
    assert!(message.len() < 600, "{} bytes", message.len());
}
