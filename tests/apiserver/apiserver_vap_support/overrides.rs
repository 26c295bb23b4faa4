//! Rules 16 to 19 and 23 under the overrides policy
//! (tests/fixtures/policies/overrides-rbac.yaml): the deletion timeout of
//! PipelineRollouts and child Pipelines against each namespace's
//! `deletionTimeout` (payments-eu: 2m to 2h, no timeout allowed; ledger and
//! team-prod: 45s to 5m; the rest: 45s to 20m), the pause-timestamp and
//! the namespace strategy's value. Rules 20, 21 and 24, which grant, are in
//! [`super::grants`].

use serde_json::{Value, json};
use test_builders::pipeline_rollout;

use super::cases::{CONFIGMAPS, Case, PIPELINES, create, create_of, update, update_of};
use super::drains::{NUMAFLOW, PAUSE_TIMESTAMP, edited, pipeline, stamped, strategy};
use envtest::User;

/// A PipelineRollout with a valid drain timeout (every namespace allows
/// 600s) and the deletion timeout `d`.
fn rollout(d: Value) -> test_builders::PipelineRolloutDoc {
    pipeline_rollout()
        .with_timeout(json!(600))
        .with_deletion_timeout(d)
}

/// A child Pipeline with a valid pause timeout and the deletion timeout `d`.
fn child(d: Value) -> Value {
    pipeline(json!(600), d, json!(30))
}

/// Each namespace's bounds, from below, at and above each end, and no
/// timeout.
const DELETION_TIMEOUTS: [(&str, &[u64]); 6] = [
    ("payments-eu", &[45, 119, 120, 7200, 7201, 31_536_000]),
    ("ledger", &[44, 45, 300, 301, 31_536_000]),
    ("team-prod", &[300, 301]),
    ("payroll", &[44, 45, 1200, 1201, 31_536_000]),
    ("xpayments-eu", &[119, 7200]),
    ("vap-overrides", &[45, 1201]),
];

/// Every case of this table.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (ns, values) in DELETION_TIMEOUTS {
        for v in values {
            let d = json!(v);
            cases.push(create(&format!("{ns}: deletion {v}"), rollout(d.clone())).ns(ns));
            cases.push(
                create_of(PIPELINES, &format!("{ns}: Pipeline deletion {v}"), child(d)).ns(ns),
            );
        }
    }
    cases.push(
        create_of(
            PIPELINES,
            "ledger: Pipeline deletion 301",
            child(json!(301)),
        )
        .by(User::NumaplaneController)
        .ns("ledger"),
    );
    cases.push(
        create(
            "payments-eu: deprecated deletion 60",
            pipeline_rollout().with_timeout(json!(600)).with_field(
                &[
                    "spec",
                    "pipeline",
                    "spec",
                    "lifecycle",
                    "deleteGracePeriodSeconds",
                ],
                json!(60),
            ),
        )
        .ns("payments-eu"),
    );
    cases.push(
        update(
            "payments-eu: deletion 600 -> 60",
            rollout(json!(600)),
            rollout(json!(60)),
        )
        .ns("payments-eu"),
    );
    cases.push(
        update(
            "ledger: deletion 600 unchanged",
            rollout(json!(600)),
            rollout(json!(600)).with_unrelated_edit(),
        )
        .ns("ledger"),
    );
    cases.push(
        update_of(
            PIPELINES,
            "ledger: Pipeline deletion 300 -> 600",
            child(json!(300)),
            child(json!(600)),
        )
        .ns("ledger"),
    );
    cases.extend(timestamps());
    cases.extend(values());
    cases
}

/// Rule 19 in an overriding namespace.
fn timestamps() -> Vec<Case> {
    let ok = || child(json!(600));
    let at = "2026-01-01T00:00:00Z";
    let set = || {
        update_of(
            PIPELINES,
            "payments-eu: pause-timestamp set",
            ok(),
            stamped(ok(), at),
        )
    };
    let template = pipeline_rollout().with_timeout(json!(600)).with_field(
        &[
            "spec",
            "pipeline",
            "metadata",
            "annotations",
            PAUSE_TIMESTAMP,
        ],
        json!(at),
    );
    vec![
        set(),
        set().by(User::Carol),
        set().by_account(NUMAFLOW),
        update_of(
            PIPELINES,
            "payments-eu: pause-timestamp removed",
            stamped(ok(), at),
            edited(ok()),
        ),
        create("payments-eu: pause-timestamp in the template", template),
    ]
    .into_iter()
    .map(|c| c.ns("payments-eu"))
    .collect()
}

/// Rule 23 in an overriding namespace (rule 24's grants are in
/// [`super::grants`]).
fn values() -> Vec<Case> {
    let mut cases = Vec::new();
    for value in ["progressive", "pause-and-drain", "fast", "Progressive"] {
        cases.push(
            create_of(
                CONFIGMAPS,
                &format!("ledger: upgradeStrategy {value:?}"),
                strategy(true, value),
            )
            .ns("ledger"),
        );
    }
    cases.push(
        update_of(
            CONFIGMAPS,
            "ledger: \"fast\" kept",
            strategy(true, "fast"),
            edited(strategy(true, "fast")),
        )
        .ns("ledger"),
    );
    cases
}
