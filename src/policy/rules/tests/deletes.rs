//! Rules 19 to 22: pause-timestamp, the DELETE of a rollout's child and of
//! a PipelineRollout, and the HPA rider.

use serde_json::{Value, json};

use super::fixtures::{admin, argocd_server, policy, warn_mode};
use super::numaplane_keys::{CHILDREN, child, controller};
use super::validate_case::{
    Case, ViolationKind, check_table, create_json, delete_json, update_json,
};
use crate::kinds::{Kind, NUMAFLOW_CONTROLLER, PARENT_ROLLOUT, PAUSE_TIMESTAMP, SYSTEM_DELETERS};
use crate::policy::UserInfo;
use crate::policy::rules::EventReason;

fn account(name: &str) -> UserInfo {
    UserInfo::new(name, &["system:serviceaccounts", "system:authenticated"])
}

/// An owned child (labelled with its rollout) of `kind`.
fn owned(kind: Kind) -> Value {
    child(
        kind,
        Some("promoted"),
        &[(PARENT_ROLLOUT, json!("demo"))],
        &[],
    )
}

fn delete_cases() -> Vec<Case> {
    use ViolationKind::*;
    let mut cases = Vec::new();
    for kind in CHILDREN {
        let k = kind.kind();
        cases.push(
            delete_json(
                &format!("{k}: alice deletes an owned one"),
                kind,
                owned(kind),
            )
            .deny(&[DeleteChild])
            .audit("delete-child", "denied by rule 20")
            .events(&[EventReason::DeleteUndrainedDenied])
            .msg(&[
                "user \"alice\" may not delete this",
                "\"demo\"",
                "deletion timeout",
                "forceReapply.deleteUndrained",
            ]),
        );
        for (who, user) in [
            ("argocd-server", argocd_server()),
            ("system:masters", admin()),
        ] {
            cases.push(
                delete_json(
                    &format!("{k}: {who} deletes an owned one"),
                    kind,
                    owned(kind),
                )
                .user(user)
                .audit("delete-child", "allowed: user")
                .events(&[EventReason::DeleteUndrainedAllowed]),
            );
        }
        for (who, user) in [
            ("Numaplane's controller", controller()),
            ("the garbage collector", account(SYSTEM_DELETERS[0])),
            ("the namespace controller", account(SYSTEM_DELETERS[1])),
        ] {
            cases.push(
                delete_json(
                    &format!("{k}: {who} deletes an owned one"),
                    kind,
                    owned(kind),
                )
                .user(user)
                .audit("delete-child", "allowed: user")
                .events(&[]),
            );
        }
        let unowned = child(kind, None, &[], &[]);
        cases.push(
            delete_json(
                &format!("{k}: alice deletes one no rollout owns"),
                kind,
                unowned,
            )
            .audit("delete-child", "allowed: user")
            .events(&[]),
        );
        let mut unreadable = owned(kind);
        unreadable["metadata"]["labels"] = json!("not a map");
        cases.push(
            delete_json(
                &format!("{k}: labels that cannot be read are judged as owned"),
                kind,
                unreadable,
            )
            .deny(&[DeleteChild])
            .audit("delete-child", "denied by rule 20")
            .msg(&["(its labels cannot be read)"]),
        );
        cases.push(
            delete_json(
                &format!("{k}: warn mode lets alice delete"),
                kind,
                owned(kind),
            )
            .policy(warn_mode())
            .warn(&["warn mode, would deny"])
            .audit("delete-child", "would-deny by rule 20")
            .events(&[EventReason::DeleteUndrainedAllowed]),
        );
        // What the stored object holds is not judged on DELETE.
        let stored = child(
            kind,
            Some("promoted"),
            &[
                (PARENT_ROLLOUT, json!("demo")),
                ("numaplane.numaproj.io/force-promote", json!("no")),
            ],
            &[],
        );
        cases.push(
            delete_json(
                &format!("{k}: deleted with a bad label as its owner's deleter"),
                kind,
                stored,
            )
            .user(account(SYSTEM_DELETERS[0]))
            .audit("delete-child", "allowed: user"),
        );
    }
    let deleters =
        policy("forceReapply:\n  deleteUndrained: {users: [bob], systemDeleters: [ci-cleaner]}\n");
    cases.push(
        delete_json(
            "a policy's own system deleter",
            Kind::Pipeline,
            owned(Kind::Pipeline),
        )
        .policy(deleters.clone())
        .user(account("ci-cleaner"))
        .audit("delete-child", "allowed: user"),
    );
    cases.push(
        delete_json(
            "the garbage collector, once the policy names other deleters",
            Kind::Pipeline,
            owned(Kind::Pipeline),
        )
        .policy(deleters.clone())
        .user(account(SYSTEM_DELETERS[0]))
        .deny(&[DeleteChild])
        .audit("delete-child", "denied by rule 20"),
    );
    cases.push(
        delete_json(
            "deleteUndrained.users may delete",
            Kind::Pipeline,
            owned(Kind::Pipeline),
        )
        .policy(deleters)
        .user(account("bob"))
        .audit("delete-child", "allowed: user"),
    );
    cases
}

fn pipeline_rollout(lifecycle: Value, riders: Value) -> Value {
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "PipelineRollout",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {"pipeline": {"spec": {"lifecycle": lifecycle}}, "riders": riders},
    })
}

fn rollout_delete_cases() -> Vec<Case> {
    use ViolationKind::*;
    let pr = Kind::PipelineRollout;
    let gated = policy("forceReapply:\n  deleteUndrained: {gateRolloutDeletes: true}\n");
    let stored = pipeline_rollout(json!({"pauseGracePeriodSeconds": "bad"}), json!([]));
    vec![
        delete_json("alice deletes a PipelineRollout", pr, stored.clone())
            .warn(&["its Pipelines are deleted too, each drained at most 30s (0s with Numaflow's minimal CRDs)"])
            .events(&[]),
        delete_json(
            "its deletion timeout is named",
            pr,
            pipeline_rollout(json!({"deletionGracePeriodSeconds": 600}), json!([])),
        )
        .warn(&["drained at most 600s"]),
        delete_json(
            "the deprecated field is read too",
            pr,
            pipeline_rollout(json!({"deleteGracePeriodSeconds": 0}), json!([])),
        )
        .warn(&["drained 0s, so not drained at all"]),
        delete_json("gated: alice is refused", pr, stored.clone())
            .policy(gated.clone())
            .deny(&[DeleteRollout])
            .audit("delete-rollout", "denied by rule 21")
            .events(&[EventReason::DeleteUndrainedDenied])
            .msg(&[
                "user \"alice\" may not delete this PipelineRollout",
                "gateRolloutDeletes",
            ]),
        delete_json("gated: argocd-server may", pr, stored.clone())
            .policy(gated.clone())
            .user(argocd_server())
            .warn(&["drained at most 30s"])
            .audit("delete-rollout", "allowed: user")
            .events(&[EventReason::DeleteUndrainedAllowed]),
        delete_json("gated: the namespace controller is not", pr, stored.clone())
            .policy(gated)
            .user(account(SYSTEM_DELETERS[1]))
            .warn(&["drained at most 30s"]),
    ]
}

fn pause_timestamp_cases() -> Vec<Case> {
    use ViolationKind::*;
    let p = Kind::Pipeline;
    let at = |t: &str| child(p, Some("promoted"), &[], &[(PAUSE_TIMESTAMP, json!(t))]);
    let none = child(p, Some("promoted"), &[], &[]);
    let t0 = "2026-12-01T09:00:00Z";
    let t1 = "2020-01-01T00:00:00Z";
    let numaflow = account(NUMAFLOW_CONTROLLER);
    let mut cases = vec![
        update_json("alice backdates it", p, at(t0), at(t1))
            .deny(&[PauseTimestamp])
            .msg(&[
                "user \"alice\" may not change metadata.annotations[\"numaflow.numaproj.io/pause-timestamp\"]",
                "pauseGracePeriodSeconds",
                "undrained",
                "numaflow.controllerAccount",
                "allow-data-loss",
            ]),
        update_json("alice sets it on a running Pipeline", p, none.clone(), at(t1))
            .deny(&[PauseTimestamp])
            .msg(&["may not set"]),
        // Rule 19 lets it go; rule 26 keeps Numaflow's keys its own.
        update_json("alice removes it", p, at(t0), none.clone())
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["may not change metadata.annotations[\"numaflow.numaproj.io/pause-timestamp\"] of this Pipeline"]),
        update_json("alice leaves it as it was", p, at(t0), at(t0)),
        update_json("Numaplane's controller may not change it", p, at(t0), at(t1))
            .user(controller())
            .deny(&[PauseTimestamp]),
        update_json("Numaflow sets it", p, none.clone(), at(t0)).user(numaflow.clone()),
        update_json("Numaflow removes it", p, at(t0), none.clone()).user(numaflow.clone()),
        create_json(
            "alice creates a Pipeline with it",
            p,
            json!({"metadata": {"name": "p", "annotations": {PAUSE_TIMESTAMP: t1}}, "spec": {}}),
        )
        .deny(&[PauseTimestamp]),
        update_json("warn mode lets alice change it", p, at(t0), at(t1))
            .policy(warn_mode())
            .warn(&["warn mode, would deny: alice may not write Numaflow's pause-timestamp"]),
    ];
    // On a MonoVertex the annotation means nothing to Numaflow v1.8.
    let mv = Kind::MonoVertex;
    cases.push(update_json(
        "a MonoVertex is not judged for it",
        mv,
        child(mv, Some("promoted"), &[], &[]),
        child(mv, Some("promoted"), &[], &[(PAUSE_TIMESTAMP, json!(t1))]),
    ));
    let template = |annotations: Value| {
        json!({
            "apiVersion": "numaplane.numaproj.io/v1alpha1",
            "kind": "PipelineRollout",
            "metadata": {"name": "demo", "namespace": "default"},
            "spec": {"pipeline": {"metadata": {"annotations": annotations}, "spec": {}}},
        })
    };
    cases.push(
        create_json(
            "a PipelineRollout's template may not carry it, even for admin",
            Kind::PipelineRollout,
            template(json!({PAUSE_TIMESTAMP: t1})),
        )
        .user(admin())
        .deny(&[PauseTimestamp])
        .msg(&[
            "spec.pipeline.metadata.annotations",
            "remove it from the template",
        ]),
    );
    cases
}

fn hpa_rider_cases() -> Vec<Case> {
    let pr = Kind::PipelineRollout;
    let hpa = json!([{"definition": {"apiVersion": "v1", "kind": "ConfigMap"}},
        {"definition": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"}}]);
    let none = json!([{"definition": {"apiVersion": "v1", "kind": "ConfigMap"}}]);
    let lifecycle = json!({"pauseGracePeriodSeconds": 60});
    vec![
        create_json(
            "an HPA rider warns",
            pr,
            pipeline_rollout(lifecycle.clone(), hpa.clone()),
        )
        .warn(&["spec.riders[1] is an HPA: Numaplane promotes every progressive upgrade"]),
        update_json(
            "and warns on every write",
            pr,
            pipeline_rollout(lifecycle.clone(), hpa.clone()),
            pipeline_rollout(lifecycle.clone(), hpa),
        )
        .warn(&["spec.riders[1]"]),
        create_json(
            "other riders do not",
            pr,
            pipeline_rollout(lifecycle.clone(), none),
        ),
        create_json(
            "a RoleBinding rider warns (rule 28)",
            pr,
            pipeline_rollout(
                lifecycle.clone(),
                json!([{"definition": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"}}]),
            ),
        )
        .warn(&["spec.riders[0] is a RoleBinding: Numaplane creates it as itself, for anyone who may edit this rollout"]),
        update_json(
            "a Secret rider warns on every write, beside an HPA's",
            pr,
            pipeline_rollout(lifecycle.clone(), json!([])),
            pipeline_rollout(
                lifecycle,
                json!([{"definition": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"}},
                    {"definition": {"apiVersion": "v1", "kind": "Secret"}}]),
            ),
        )
        .warn(&["spec.riders[0] is an HPA", "spec.riders[1] is a Secret"]),
    ]
}

#[test]
fn child_deletes() {
    check_table("child deletes", &delete_cases());
}

#[test]
fn rollout_deletes() {
    check_table("PipelineRollout deletes", &rollout_delete_cases());
}

#[test]
fn pause_timestamp() {
    check_table("pause-timestamp", &pause_timestamp_cases());
}

#[test]
fn hpa_riders() {
    check_table("HPA riders", &hpa_rider_cases());
}
