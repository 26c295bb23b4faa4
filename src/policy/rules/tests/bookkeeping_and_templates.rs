//! Rule 15 (Numaplane's bookkeeping keys are its controller's) and rules
//! 13 to 15 in each rollout's child template, with rule 7 on the other
//! two rollouts.

use serde_json::json;

use super::fixtures::argocd_server;
use super::numaplane_keys::{CHILDREN, ROLLOUTS, child, controller, rollout};
use super::validate_case::{Case, ViolationKind, check_table, create_json, update_json};
use crate::kinds::{FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION, PARENT_ROLLOUT, UPGRADE_STATE};
use crate::policy::rules::EventReason;

fn bookkeeping_cases() -> Vec<Case> {
    use ViolationKind::*;
    let mut cases = Vec::new();
    for kind in CHILDREN {
        let k = kind.kind();
        cases.push(
            update_json(
                &format!("{k}: alice relabels a promoted child recyclable"),
                kind,
                child(kind, Some("promoted"), &[], &[]),
                child(kind, Some("recyclable"), &[], &[]),
            )
            .deny(&[Bookkeeping])
            .msg(&[
                "may not change metadata.labels[\"numaplane.numaproj.io/upgrade-state\"]",
                "system:serviceaccount:numaplane-system:numaplane-sa",
                "numaplane.controllerAccount",
            ]),
        );
        let mut undrained = child(kind, Some("recyclable"), &[], &[]);
        undrained["metadata"]["annotations"] = json!({});
        cases.push(
            update_json(
                &format!("{k}: argocd-server removes requires-drain"),
                kind,
                child(kind, Some("recyclable"), &[], &[]),
                undrained,
            )
            .user(argocd_server())
            .deny(&[Bookkeeping])
            .msg(&[
                "may not remove metadata.annotations[\"numaplane.numaproj.io/requires-drain\"]",
            ]),
        );
        cases.push(
            update_json(
                &format!("{k}: the controller moves the child to recyclable"),
                kind,
                child(kind, Some("promoted"), &[], &[]),
                child(kind, Some("recyclable"), &[], &[]),
            )
            .user(controller()),
        );
        cases.push(
            create_json(
                &format!("{k}: alice creates a child that names a rollout"),
                kind,
                child(
                    kind,
                    Some("promoted"),
                    &[(PARENT_ROLLOUT, json!("demo"))],
                    &[],
                ),
            )
            // Its ownerReference to the rollout makes it a child too (rule 26).
            .deny(&[Bookkeeping, Bookkeeping, Bookkeeping, EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["may not set metadata.labels[\"numaplane.numaproj.io/parent-rollout-name\"]"]),
        );
        cases.push(
            create_json(
                &format!("{k}: the controller creates a child"),
                kind,
                child(
                    kind,
                    Some("in-progress"),
                    &[(PARENT_ROLLOUT, json!("demo"))],
                    &[],
                ),
            )
            .user(controller()),
        );
        let mut bad = child(kind, Some("promoted"), &[], &[]);
        bad["metadata"]["labels"] = json!("force-promote");
        cases.push(
            update_json(
                &format!("{k}: labels that are not a map"),
                kind,
                child(kind, Some("promoted"), &[], &[]),
                bad,
            )
            .deny(&[BadMetadata, Bookkeeping])
            .msg(&["metadata.labels is a string, not an object"]),
        );
        cases.push(update_json(
            &format!("{k}: alice changes only ordinary labels"),
            kind,
            child(kind, Some("promoted"), &[], &[]),
            child(kind, Some("promoted"), &[("team", json!("b"))], &[]),
        ));
    }
    cases
}

fn template_cases() -> Vec<Case> {
    use ViolationKind::*;
    let mut cases = Vec::new();
    for kind in ROLLOUTS {
        let k = kind.kind();
        let key = kind.template().expect("a rollout");
        let labels = format!("spec.{key}.metadata.labels[\"{FORCE_PROMOTE_LABEL}\"]");
        let plain = rollout(kind, json!({"app": "demo"}), json!({}));
        let promoting = rollout(
            kind,
            json!({"app": "demo", FORCE_PROMOTE_LABEL: "true"}),
            json!({}),
        );
        cases.push(
            create_json(
                &format!("{k}: alice creates it with force-promote in its template"),
                kind,
                promoting.clone(),
            )
            .deny(&[PromoteLabel])
            .audit("force-promote", "denied by rule 13")
            .msg(&[&labels, "of every upgrade to come"]),
        );
        cases.push(
            update_json(
                &format!("{k}: argocd-server adds force-promote to its template"),
                kind,
                plain.clone(),
                promoting.clone(),
            )
            .user(argocd_server())
            .audit("force-promote", "allowed: user")
            .events(&[EventReason::ForcePromoteAllowed]),
        );
        let mut kept = promoting.clone();
        kept["spec"][key]["metadata"]["labels"]["app"] = json!("other");
        cases.push(update_json(
            &format!("{k}: alice keeps force-promote in its template"),
            kind,
            promoting,
            kept,
        ));
        let mut forced = plain.clone();
        forced["spec"]["strategy"] = json!({"progressive": {"forcePromote": true}});
        cases.push(
            update_json(
                &format!("{k}: alice turns on forcePromote"),
                kind,
                plain.clone(),
                forced.clone(),
            )
            .deny(&[Promote])
            .audit("force-promote", "denied by rule 7"),
        );
        cases.push(
            update_json(
                &format!("{k}: argocd-server turns on forcePromote"),
                kind,
                plain.clone(),
                forced,
            )
            .user(argocd_server())
            .audit("force-promote", "allowed: user"),
        );
        let bookkeeping = rollout(kind, json!({UPGRADE_STATE: "recyclable"}), json!({}));
        cases.push(
            update_json(
                &format!("{k}: alice puts upgrade-state into its template"),
                kind,
                plain.clone(),
                bookkeeping,
            )
            .deny(&[Bookkeeping])
            .msg(&[&format!("spec.{key}.metadata.labels[\"{UPGRADE_STATE}\"]")]),
        );
        let broken = rollout(kind, json!("force-promote"), json!({}));
        cases.push(
            update_json(
                &format!("{k}: template labels that are not a map"),
                kind,
                plain.clone(),
                broken.clone(),
            )
            .deny(&[BadMetadata])
            .msg(&[&format!("spec.{key}.metadata.labels is a string")]),
        );
        cases.push(
            update_json(
                &format!("{k}: template labels left broken"),
                kind,
                broken.clone(),
                broken,
            )
            .warn(&["unchanged, so allowed"]),
        );
        let marking = rollout(kind, json!({}), json!({MARKED_FOR_DELETION: "true"}));
        let case = update_json(
            &format!("{k}: alice puts marked-for-deletion into its template"),
            kind,
            plain.clone(),
            marking,
        );
        cases.push(if kind == Kind::PipelineRollout {
            case.deny(&[Undrained])
                .audit("delete-undrained", "denied by rule 14")
                .msg(&[&format!(
                    "spec.pipeline.metadata.annotations[\"{MARKED_FOR_DELETION}\"]"
                )])
        } else {
            case
        });
    }
    // The PipelineRollout rules judge PipelineRollouts only.
    let mut odd = rollout(Kind::MonoVertexRollout, json!({}), json!({}));
    odd["metadata"]["annotations"] = json!({"numaplane.numaproj.io/allow-data-loss": "True"});
    cases.push(create_json(
        "MonoVertexRollout: allow-data-loss \"True\" is no PipelineRollout's",
        Kind::MonoVertexRollout,
        odd,
    ));
    cases
}

#[test]
fn bookkeeping_table() {
    check_table("Numaplane's bookkeeping", &bookkeeping_cases());
}

#[test]
fn rollout_template_table() {
    check_table("rollouts' child templates", &template_cases());
}
