//! Rules 16 to 20, 23 and 24 in warn mode (`WARN_POLICY` in
//! tests/apiserver/vap.rs: the built-in lists, no RBAC): nothing is denied,
//! and each request the webhook would deny draws from the exported
//! policies one warning per violation, as from the webhook.

use serde_json::{Value, json};
use test_builders::pipeline_rollout;

use super::cases::{CONFIGMAPS, Case, PIPELINES, create, create_of, delete_of, update_of};
use super::drains::{NUMAFLOW, PAUSE_TIMESTAMP, child, pipeline, stamped, strategy};
use envtest::User;

/// Every case of this table, in namespace `ns`.
pub fn cases(ns: &'static str) -> Vec<Case> {
    let rollout = |d: Value| {
        pipeline_rollout()
            .with_timeout(json!(600))
            .with_deletion_timeout(d)
    };
    let mut cases = Vec::new();
    // Rules 16 to 18 on rollouts and Pipelines.
    for d in [
        json!("1h"),
        json!(29),
        json!(3601),
        json!(10_000_000_000_u64),
        json!(600),
    ] {
        cases.push(create(&format!("deletion {d}"), rollout(d.clone())));
        // Numaflow's CRD types a Pipeline's timeouts as integers.
        let rejected = d.is_string();
        let case = create_of(
            PIPELINES,
            &format!("Pipeline deletion {d}"),
            pipeline(json!(30), d, json!(30)),
        );
        cases.push(if rejected { case.rejected() } else { case });
    }
    cases.push(create(
        "deprecated deletion 0",
        pipeline_rollout().with_timeout(json!(600)).with_field(
            &[
                "spec",
                "pipeline",
                "spec",
                "lifecycle",
                "deleteGracePeriodSeconds",
            ],
            json!(0),
        ),
    ));
    cases.push(update_of(
        PIPELINES,
        "Pipeline deletion 30 -> 5",
        pipeline(json!(30), json!(30), json!(30)),
        pipeline(json!(30), json!(5), json!(30)),
    ));
    // Rule 19.
    let ok = || pipeline(json!(30), json!(30), json!(30));
    let at = "2026-01-01T00:00:00Z";
    let set = || update_of(PIPELINES, "pause-timestamp set", ok(), stamped(ok(), at));
    cases.push(set());
    cases.push(set().by(User::NumaplaneController));
    cases.push(set().by_account(NUMAFLOW));
    cases.push(create(
        "pause-timestamp in the template",
        pipeline_rollout().with_timeout(json!(600)).with_field(
            &[
                "spec",
                "pipeline",
                "metadata",
                "annotations",
                PAUSE_TIMESTAMP,
            ],
            json!(at),
        ),
    ));
    // Rule 20.
    let owned = || {
        child(
            "Pipeline",
            json!({"numaplane.numaproj.io/parent-rollout-name": "demo"}),
            json!({}),
            json!({}),
        )
    };
    for user in [User::Alice, User::ArgocdServer] {
        cases.push(delete_of(PIPELINES, "owned Pipeline", owned()).by(user));
    }
    cases.push(delete_of(PIPELINES, "owned Pipeline", owned()).dry_run());
    // Rules 23 and 24.
    for value in ["fast", "no-strategy", "  ", "progressive"] {
        for user in [User::Alice, User::ArgocdServer] {
            cases.push(
                create_of(
                    CONFIGMAPS,
                    &format!("upgradeStrategy {value:?}"),
                    strategy(true, value),
                )
                .by(user),
            );
        }
    }
    cases.push(update_of(
        CONFIGMAPS,
        "progressive -> no-strategy",
        strategy(true, "progressive"),
        strategy(true, "no-strategy"),
    ));
    cases.into_iter().map(|c| c.ns(ns)).collect()
}
