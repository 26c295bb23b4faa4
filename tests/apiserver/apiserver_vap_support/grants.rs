//! The gates of rules 20, 21, 24 and 26 granted by RBAC on a real API
//! server, under the overrides policy
//! (tests/fixtures/policies/overrides-rbac.yaml: forceReapply's group
//! `sre`, no users, RBAC on, deleteUndrained's verb `delete-undrained` with
//! rollout deletes gated, which editChildren takes, namespaceStrategy's
//! `set-namespace-strategy`). A Role in payments-eu grants alice both
//! verbs (on Pipelines, MonoVertices and PipelineRollouts; on ConfigMaps);
//! one in ledger grants her only forceReapply's verb on the same
//! resources, which neither gate asks. So the `authorizer` expressions of
//! the exported policies, and the webhook's SubjectAccessReviews, must
//! allow her in payments-eu and refuse her in ledger; carol (group sre) is
//! allowed in both by the lists, argocd-server (in no list) in neither.

use serde_json::{Value, json};
use test_builders::pipeline_rollout;

use super::Judged;
use super::cases::{
    CONFIGMAPS, Case, MONOVERTICES, PIPELINES, ROLLOUTS, create_of, delete_of, update_of,
};
use super::drains::{child, strategy};
use envtest::{User, binding};

/// Where alice holds the gates' verbs, and where she holds only
/// forceReapply's.
pub const NAMESPACES: [&str; 2] = ["payments-eu", "ledger"];

/// The gates' verbs (the fixture's), and forceReapply's.
const DELETE_UNDRAINED: &str = "delete-undrained";
const NAMESPACE_STRATEGY: &str = "set-namespace-strategy";
const FORCE_REAPPLY: &str = "force-reapply";

/// The Roles and RoleBindings described above.
pub fn rbac() -> Vec<Value> {
    let role = |ns: &str, delete_verb: &str, strategy_verb: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "vap-e2e-gates", "namespace": ns},
            "rules": [
                {"apiGroups": ["numaflow.numaproj.io"], "resources": ["pipelines", "monovertices"], "verbs": [delete_verb]},
                {"apiGroups": ["numaplane.numaproj.io"], "resources": ["pipelinerollouts"], "verbs": [delete_verb]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": [strategy_verb]}]})
    };
    vec![
        role("payments-eu", DELETE_UNDRAINED, NAMESPACE_STRATEGY),
        binding(
            Some("payments-eu"),
            "alice-vap-e2e-gates",
            "Role",
            "vap-e2e-gates",
            &[User::Alice],
        ),
        role("ledger", FORCE_REAPPLY, FORCE_REAPPLY),
        binding(
            Some("ledger"),
            "alice-vap-e2e-gates",
            "Role",
            "vap-e2e-gates",
            &[User::Alice],
        ),
    ]
}

/// What RBAC must answer before the cases run (the authorizer sees new
/// bindings a moment after they are written): `(verb, resource,
/// namespace, allowed)` for alice.
pub fn expected_access() -> Vec<(&'static str, &'static str, &'static str, bool)> {
    vec![
        (
            DELETE_UNDRAINED,
            "pipelines.numaflow.numaproj.io",
            "payments-eu",
            true,
        ),
        (
            DELETE_UNDRAINED,
            "pipelinerollouts.numaplane.numaproj.io",
            "payments-eu",
            true,
        ),
        (NAMESPACE_STRATEGY, "configmaps", "payments-eu", true),
        (
            FORCE_REAPPLY,
            "pipelines.numaflow.numaproj.io",
            "ledger",
            true,
        ),
        (FORCE_REAPPLY, "configmaps", "ledger", true),
        (
            DELETE_UNDRAINED,
            "pipelines.numaflow.numaproj.io",
            "ledger",
            false,
        ),
        (NAMESPACE_STRATEGY, "configmaps", "ledger", false),
    ]
}

fn owned(kind: &str) -> Value {
    child(
        kind,
        json!({"numaplane.numaproj.io/parent-rollout-name": "demo"}),
        json!({}),
        json!({}),
    )
}

/// Each gate, by each user, in each namespace.
pub fn cases() -> Vec<Case> {
    let users = [User::Alice, User::Carol, User::ArgocdServer, User::Admin];
    let rollout = || {
        pipeline_rollout()
            .with_lifecycle(json!({"deletionGracePeriodSeconds": 600}))
            .into_json()
    };
    let mut cases = Vec::new();
    for ns in NAMESPACES {
        for user in users {
            let per_user = [
                delete_of(
                    PIPELINES,
                    &format!("{ns}, gated: owned Pipeline"),
                    owned("Pipeline"),
                ),
                delete_of(ROLLOUTS, &format!("{ns}, gated: rollout, gated"), rollout()),
                create_of(
                    CONFIGMAPS,
                    &format!("{ns}, gated: no-strategy"),
                    strategy(true, "no-strategy"),
                ),
                update_of(
                    CONFIGMAPS,
                    &format!("{ns}, gated: progressive -> \"\""),
                    strategy(true, "progressive"),
                    strategy(true, ""),
                ),
                // Rule 26: editChildren takes deleteUndrained's verb.
                update_of(
                    PIPELINES,
                    &format!("{ns}, gated: owned Pipeline's ownerReferences"),
                    owned("Pipeline"),
                    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1",
                        "kind": "ConfigMap", "name": "c",
                        "uid": "00000000-0000-0000-0000-000000000002"}]}}),
                )
                .on_stored(),
            ];
            cases.extend(per_user.into_iter().map(|c| c.by(user).ns(ns)));
        }
        cases.push(
            delete_of(
                MONOVERTICES,
                &format!("{ns}, gated: owned MonoVertex"),
                owned("MonoVertex"),
            )
            .ns(ns),
        );
        cases.push(
            delete_of(
                PIPELINES,
                &format!("{ns}, gated: owned Pipeline"),
                owned("Pipeline"),
            )
            .dry_run()
            .ns(ns),
        );
        cases.push(
            delete_of(
                PIPELINES,
                &format!("{ns}, gated: unowned Pipeline"),
                child("Pipeline", json!({}), json!({}), json!({})),
            )
            .ns(ns),
        );
        cases.push(
            delete_of(
                PIPELINES,
                &format!("{ns}, gated: owned Pipeline"),
                owned("Pipeline"),
            )
            .by_account(super::drains::GARBAGE_COLLECTOR)
            .ns(ns),
        );
    }
    cases
}

/// The grants take effect, so that both engines' agreement means
/// something: alice's gated requests go through where she holds the
/// gates' verbs and are refused where she holds only forceReapply's
/// (her DELETE of an unowned Pipeline, no gate's, goes through in both).
/// What differs, one line each.
pub fn check(judged: &[Judged]) -> Vec<String> {
    let mut found = Vec::new();
    for j in judged {
        let case = &j.case;
        if case.user != User::Alice
            || case.account.is_some()
            || !case.name.contains(", gated: ")
            || case.name.contains("unowned")
        {
            continue;
        }
        let granted = case.ns == NAMESPACES[0];
        let refused = j.api.status == 403;
        if granted == refused || (granted && !j.api.ok()) {
            found.push(format!(
                "[overrides-rbac] {} (namespace {}): alice {} the gate's verb here, yet the API server answered HTTP {}: {}",
                case.name,
                case.ns,
                if granted { "holds" } else { "does not hold" },
                j.api.status,
                j.api.message()
            ));
        }
    }
    found
}
