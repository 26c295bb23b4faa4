//! Rule 21 on a real API server: a PipelineRollout's DELETE, with each
//! way its stored object can give its Pipelines' deletion timeout, warns
//! in both engines with the same words; under `gateRolloutDeletes` the
//! gate refuses or allows the same users (and a dry run is judged alike).

use serde_json::{Value, json};
use test_builders::pipeline_rollout;

use super::cases::{Case, ROLLOUTS, delete_of};
use super::{Judged, WebhookAnswer};
use envtest::User;

/// The start of rule 21's warning, as the webhook words it.
pub const WARNING: &str = "its Pipelines are deleted too";

/// A stored rollout whose `spec.pipeline.spec.lifecycle` is `lifecycle`.
fn stored(lifecycle: Value) -> Value {
    pipeline_rollout().with_lifecycle(lifecycle).into_json()
}

/// One DELETE per way of giving the deletion timeout, by alice.
pub fn timeouts() -> Vec<Case> {
    let mut cases = vec![
        delete_of(
            ROLLOUTS,
            "rollout, no lifecycle",
            pipeline_rollout().into_json(),
        ),
        delete_of(
            ROLLOUTS,
            "rollout, lifecycle a string",
            stored(json!("oops")),
        ),
    ];
    for (name, lifecycle) in [
        ("deletion 600", json!({"deletionGracePeriodSeconds": 600})),
        ("deletion 0", json!({"deletionGracePeriodSeconds": 0})),
        ("deletion -5", json!({"deletionGracePeriodSeconds": -5})),
        (
            "deletion 600.5",
            json!({"deletionGracePeriodSeconds": 600.5}),
        ),
        (
            "deletion \"600\"",
            json!({"deletionGracePeriodSeconds": "600"}),
        ),
        (
            "deletion a long string",
            json!({"deletionGracePeriodSeconds": "six hundred seconds, please"}),
        ),
        ("deletion true", json!({"deletionGracePeriodSeconds": true})),
        ("deprecated 120", json!({"deleteGracePeriodSeconds": 120})),
        (
            "both",
            json!({"deletionGracePeriodSeconds": 45, "deleteGracePeriodSeconds": 120}),
        ),
        (
            "deletion null, deprecated 120",
            json!({"deletionGracePeriodSeconds": null, "deleteGracePeriodSeconds": 120}),
        ),
    ] {
        cases.push(delete_of(
            ROLLOUTS,
            &format!("rollout, {name}"),
            stored(lifecycle),
        ));
    }
    cases
}

/// The gate's cases: each user, and a dry run, on a rollout drained at
/// most 600s.
pub fn gated() -> Vec<Case> {
    let case = || {
        delete_of(
            ROLLOUTS,
            "rollout, gated",
            stored(json!({"deletionGracePeriodSeconds": 600})),
        )
    };
    vec![
        case(),
        case().dry_run(),
        case().by(User::Admin),
        case().by(User::ArgocdServer),
        case().by(User::Carol),
    ]
}

/// Where rule 21's warnings differ: the API server's warnings from the
/// policy `warnings_policy` (the text after its binding's name) must be
/// the webhook's warnings that start with [`WARNING`], word for word.
pub fn compare_warnings(
    at: &str,
    warnings_policy: &str,
    judged: &Judged,
    webhook: &WebhookAnswer,
) -> Option<String> {
    let by = format!("ValidatingAdmissionPolicy '{warnings_policy}'");
    let policy: Vec<&str> = judged
        .api
        .warnings
        .iter()
        .filter(|w| w.contains(&by))
        .map(|w| w.split_once("': ").map_or(w.as_str(), |(_, m)| m))
        .collect();
    let webhook: Vec<&str> = webhook
        .warnings
        .iter()
        .filter(|w| w.starts_with(WARNING))
        .map(String::as_str)
        .collect();
    (policy != webhook).then(|| {
        format!("{at}: rule 21's warnings differ: the policy {policy:?}, the webhook {webhook:?}")
    })
}
