//! What the export leaves to the webhook: the comment block's lines, and
//! what `--strict` names.

use crate::policy::format_seconds;
use crate::policy::model::Policy;

/// The `minPauseAge` settings above 0, by key.
pub fn inexpressible(policy: &Policy) -> Vec<String> {
    let mut found = Vec::new();
    let top = policy.force_reapply.min_pause_age_seconds;
    if top > 0 {
        found.push(format!(
            "forceReapply.minPauseAge is {}",
            format_seconds(top)
        ));
    }
    for (i, ns) in policy.drain_timeout.namespaces.iter().enumerate() {
        if let Some(age) = ns.min_pause_age_seconds.filter(|a| *a > 0) {
            found.push(format!(
                "drainTimeout.namespaces[{i}].minPauseAge is {}",
                format_seconds(age)
            ));
        }
    }
    found
}

/// What the export never covers, whatever the policy: the kinds it does
/// not match, and the rules on the kinds it matches that it leaves to the
/// webhook.
pub fn left_out() -> Vec<String> {
    vec![
        "MonoVertexRollouts and ISBServiceRollouts, and the writes of MonoVertices and InterStepBufferServices but an owned one's edits (which the child edit policy judges): no exported policy matches them; keep the webhook's validate-monovertexrollouts, validate-isbservicerollouts and validate-children webhooks for them".to_owned(),
        "rules 13 to 15: the force-promote label, marked-for-deletion and Numaplane's bookkeeping keys (in spec.pipeline.metadata and on the children): they need the rollout's or child's upgrade state and several gates' permissions; keep the webhooks for them".to_owned(),
        "a namespace left to Numaplane's cluster default strategy (rule 24): a DELETE of a namespace-level ConfigMap, its label removed, or no upgradeStrategy in it; that default is in Numaplane's own ConfigMap, which CEL cannot read; keep the webhook's validate-namespace-config for them".to_owned(),
        "what Numaflow makes for a rollout's child (rule 29: its Vertices, the daemon Service and Deployment, the vertices' and the buffer service's workloads): whether their Pipeline, MonoVertex or InterStepBufferService is a rollout's is on that object, which CEL cannot read; keep the webhook's validate-numaflow-vertices and validate-numaflow-workloads for them".to_owned(),
        "the Numaflow controller version a NumaflowController or NumaflowControllerRollout names (rule 27): where Numaplane would take it from is in the controller definitions' ConfigMaps, which CEL cannot read; keep the webhook's validate-numaflow-controllers for them".to_owned(),
        "Go's folding of non-ASCII key characters (the long s as s, the Kelvin sign as k), which Numaplane's encoding/json decoding applies: CEL folds keys with lowerAscii() only; the keys the export folds, a ConfigMap's data, can only be ASCII, so its upgradeStrategy is read as Numaplane reads it, but no exported rule reads another object Numaplane decodes that way".to_owned(),
    ]
}

/// What the comment block lists as not covered: [`left_out`], then what
/// the webhook does besides validating, for `policy`.
pub fn not_covered(policy: &Policy) -> Vec<String> {
    let mut lines = left_out();
    lines.extend([
        "warnings without a violation: the deprecated or ignored deleteGracePeriodSeconds (rules 16 to 18) and the notes on a namespace-level ConfigMap without data or upgradeStrategy (rule 23)".to_owned(),
        "defaulting: /mutate writes drainTimeout.default where a rollout sets no timeout, and deletionTimeout.default where it sets no deletion timeout; a ValidatingAdmissionPolicy cannot change objects".to_owned(),
    ]);
    if policy.force_reapply.one_shot {
        lines.push("the one-shot reset (forceReapply.oneShot): /mutate and the sweeper set allow-data-loss back to \"false\" once the pause is over".to_owned());
    }
    if policy.force_promote.one_shot {
        lines.push("the one-shot forcePromote (forcePromote.oneShot): /mutate records the upgrade it is for and resets it once that upgrade is over".to_owned());
    }
    lines.extend([
        "Events (ForceReapplyAllowed, ForceReapplyDenied, ForcePromoteAllowed) and the force-reapply and force-promote audit annotations".to_owned(),
        "warnings: a violation whose inputs are unchanged on UPDATE (rule 8) and allow-data-loss left at \"true\" while nothing pauses (rule 11) and forcePromote kept on (rule 12) and an HPA rider (rule 22) and a rider that grants access (rule 28) are allowed silently".to_owned(),
        "messages: the API server shows the first failing validation's message; the webhook lists every violation".to_owned(),
    ]);
    let ages = inexpressible(policy);
    if ages.is_empty() {
        lines.push(
            "forceReapply.minPauseAge (CEL in admission has no clock): not used by this policy"
                .to_owned(),
        );
    } else {
        lines.push(format!(
            "forceReapply.minPauseAge (CEL in admission has no clock): NOT ENFORCED here, although {}",
            ages.join(", ")
        ));
    }
    lines
}
