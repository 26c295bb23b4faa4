//! The RBAC verb of the delete and strategy gates on a real API server,
//! under the overrides policy (forceReapply's groups `[sre]` and verb
//! `force-reapply`, which `deleteUndrained` and `namespaceStrategy` take):
//! alice is granted the verb on Pipelines and ConfigMaps in payments-eu
//! only (see `rbac` in tests/apiserver_vap.rs), so the `authorizer`
//! expressions of rules 20 and 24 allow her there and refuse her in
//! ledger; carol, in the group sre, is allowed in both without RBAC.

use serde_json::{Value, json};

use super::cases::{CONFIGMAPS, Case, PIPELINES, create_of, delete_of};
use envtest::User;

/// Where alice holds the verb, and where she does not.
const NAMESPACES: [&str; 2] = ["payments-eu", "ledger"];

fn owned_pipeline() -> Value {
    json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline",
        "metadata": {"labels": {"numaplane.numaproj.io/parent-rollout-name": "demo"}},
        "spec": {}})
}

fn no_strategy() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {"numaplane.numaproj.io/config": "namespace-level-config"}},
        "data": {"upgradeStrategy": "no-strategy"}})
}

/// Each gate, by alice and by carol, in each namespace.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for ns in NAMESPACES {
        for user in [User::Alice, User::Carol] {
            cases.push(
                delete_of(
                    PIPELINES,
                    &format!("{ns}: owned Pipeline"),
                    owned_pipeline(),
                )
                .by(user)
                .ns(ns),
            );
            cases.push(
                create_of(CONFIGMAPS, &format!("{ns}: no-strategy"), no_strategy())
                    .by(user)
                    .ns(ns),
            );
        }
    }
    cases
}
