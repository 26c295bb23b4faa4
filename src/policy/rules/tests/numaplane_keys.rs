//! Rules 13 and 14 on the children: the force-promote label and
//! marked-for-deletion, who may set them and in which upgrade states; the
//! documents the rule 13 to 15 tables share (rule 15 and the rollouts'
//! templates are in `bookkeeping_and_templates.rs`).

use serde_json::{Map as JsonMap, Value, json};

use super::fixtures::{admin, alice, argocd_server, policy, warn_mode};
use super::validate_case::{Case, ViolationKind, check_table, update_json};
use crate::kinds::{FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION, UPGRADE_STATE};
use crate::policy::UserInfo;
use crate::policy::rules::EventReason;

pub(super) const REQUIRES_DRAIN: &str = "numaplane.numaproj.io/requires-drain";

/// The Numaplane controller, as the built-in policy names it.
pub(super) fn controller() -> UserInfo {
    UserInfo::new(
        "system:serviceaccount:numaplane-system:numaplane-sa",
        &["system:serviceaccounts", "system:authenticated"],
    )
}

/// A child of `kind` in upgrade state `state` (`None`: no such label),
/// with more labels and annotations, owned by its rollout `parent`.
pub(super) fn child(
    kind: Kind,
    state: Option<&str>,
    labels: &[(&str, Value)],
    annotations: &[(&str, Value)],
) -> Value {
    let mut all_labels = JsonMap::new();
    all_labels.insert("app".to_owned(), json!("demo"));
    if let Some(state) = state {
        all_labels.insert(UPGRADE_STATE.to_owned(), json!(state));
    }
    for (k, v) in labels {
        all_labels.insert((*k).to_owned(), v.clone());
    }
    let mut all_annotations = JsonMap::new();
    all_annotations.insert(REQUIRES_DRAIN.to_owned(), json!("true"));
    for (k, v) in annotations {
        all_annotations.insert((*k).to_owned(), v.clone());
    }
    json!({
        "apiVersion": format!("{}/v1alpha1", kind.group()),
        "kind": kind.kind(),
        "metadata": {
            "name": "demo-1", "namespace": "default", "uid": "u-child",
            "labels": all_labels, "annotations": all_annotations,
            "ownerReferences": [{"apiVersion": "numaplane.numaproj.io/v1alpha1",
                "kind": kind.rollout().kind(), "name": "demo", "uid": "u-parent", "controller": true}],
        },
        "spec": {},
    })
}

/// A rollout of `kind` whose child template has these labels and annotations.
pub(super) fn rollout(kind: Kind, labels: Value, annotations: Value) -> Value {
    let key = kind.template().expect("a rollout");
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": kind.kind(),
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {key: {"metadata": {"labels": labels, "annotations": annotations}, "spec": {}}},
    })
}

pub(super) const CHILDREN: [Kind; 3] = [
    Kind::Pipeline,
    Kind::MonoVertex,
    Kind::InterStepBufferService,
];
pub(super) const ROLLOUTS: [Kind; 3] = [
    Kind::PipelineRollout,
    Kind::MonoVertexRollout,
    Kind::IsbServiceRollout,
];

fn force_promote_cases() -> Vec<Case> {
    use ViolationKind::*;
    let mut cases = Vec::new();
    let on = |v: &str| [(FORCE_PROMOTE_LABEL, json!(v))];
    for kind in CHILDREN {
        let k = kind.kind();
        let set = |state: Option<&str>, value: &str| {
            (
                child(kind, state, &[], &[]),
                child(kind, state, &on(value), &[]),
            )
        };
        for (who, user) in [
            ("argocd-server", argocd_server()),
            ("system:masters", admin()),
        ] {
            for state in ["in-progress", "trial"] {
                let (old, new) = set(Some(state), "true");
                cases.push(
                    update_json(
                        &format!("{k} {state}: {who} adds force-promote"),
                        kind,
                        old,
                        new,
                    )
                    .user(user.clone())
                    .audit("force-promote", "allowed: user")
                    .events(&[EventReason::ForcePromoteAllowed]),
                );
            }
        }
        let (old, new) = set(Some("in-progress"), "true");
        cases.push(
            update_json(
                &format!("{k} in-progress: alice adds force-promote"),
                kind,
                old,
                new,
            )
            .deny(&[PromoteLabel])
            .audit("force-promote", "denied by rule 13")
            .events(&[EventReason::ForceReapplyDenied])
            .msg(&[
                "\"alice\"",
                "metadata.labels[\"numaplane.numaproj.io/force-promote\"]",
                "force-promote action",
            ]),
        );
        for state in ["promoted", "recyclable"] {
            let (old, new) = set(Some(state), "true");
            cases.push(
                update_json(
                    &format!("{k} {state}: argocd-server adds force-promote"),
                    kind,
                    old,
                    new,
                )
                .user(argocd_server())
                .deny(&[PromoteLabel])
                .audit("force-promote", "denied by rule 13")
                .msg(&[&format!("is \"{state}\""), "in-progress or trial"])
                .not_msg(&["forceReapply.users"]),
            );
        }
        let (old, new) = set(None, "true");
        cases.push(
            update_json(
                &format!("{k} without upgrade-state: argocd-server adds force-promote"),
                kind,
                old,
                new,
            )
            .user(argocd_server())
            .deny(&[PromoteLabel])
            .msg(&["has no numaplane.numaproj.io/upgrade-state label"])
            .audit("force-promote", "denied by rule 13"),
        );
        for value in ["false", ""] {
            let (old, new) = set(Some("in-progress"), value);
            cases.push(
                update_json(
                    &format!("{k}: argocd-server sets force-promote {value:?}"),
                    kind,
                    old,
                    new,
                )
                .user(argocd_server())
                .deny(&[PromoteLabelValue])
                .audit("force-promote", "allowed: user")
                .msg(&["acts on the label's presence", "\"false\" included"]),
            );
        }
        let with = child(kind, Some("in-progress"), &on("true"), &[]);
        let mut relabelled = with.clone();
        relabelled["metadata"]["labels"]["team"] = json!("x");
        cases.push(update_json(
            &format!("{k}: alice leaves force-promote as it was"),
            kind,
            with.clone(),
            relabelled,
        ));
        cases.push(update_json(
            &format!("{k}: alice removes force-promote"),
            kind,
            with,
            child(kind, Some("in-progress"), &[], &[]),
        ));
        let (old, new) = set(Some("promoted"), "true");
        cases.push(
            update_json(
                &format!("{k}: the controller copies force-promote from its rollout"),
                kind,
                old,
                new,
            )
            .user(controller())
            .audit("force-promote", "not judged: user"),
        );
        let (old, new) = set(Some("in-progress"), "true");
        cases.push(
            update_json(
                &format!("{k}: warn mode, alice adds force-promote"),
                kind,
                old,
                new,
            )
            .policy(warn_mode())
            .warn(&["warn mode, would deny: alice may not set the force-promote label"])
            .audit("force-promote", "would-deny by rule 13")
            .events(&[EventReason::ForcePromoteAllowed]),
        );
        let (old, new) = set(Some("in-progress"), "true");
        cases.push(
            update_json(
                &format!("{k}: gateForcePromote off, alice adds force-promote"),
                kind,
                old,
                new,
            )
            .policy(policy("forceReapply:\n  gateForcePromote: false\n")),
        );
    }
    cases
}

fn undrained_cases() -> Vec<Case> {
    use ViolationKind::*;
    let mut cases = Vec::new();
    let kind = Kind::Pipeline;
    let mark = |state: Option<&str>, value: &str| {
        (
            child(kind, state, &[], &[]),
            child(kind, state, &[], &[(MARKED_FOR_DELETION, json!(value))]),
        )
    };
    for state in ["recyclable", "recyclable-expired"] {
        let (old, new) = mark(Some(state), "true");
        cases.push(
            update_json(
                &format!("Pipeline {state}: argocd-server marks it for deletion"),
                kind,
                old,
                new,
            )
            .user(argocd_server())
            .audit("delete-undrained", "allowed: user")
            .events(&[EventReason::DeleteUndrainedAllowed]),
        );
    }
    let (old, new) = mark(Some("recyclable"), "true");
    cases.push(
        update_json(
            "Pipeline recyclable: alice marks it for deletion",
            kind,
            old,
            new,
        )
        .deny(&[Undrained])
        .audit("delete-undrained", "denied by rule 14")
        .events(&[EventReason::DeleteUndrainedDenied])
        .msg(&[
            "\"alice\"",
            "without draining",
            "forceReapply.deleteUndrained.users",
            "delete action",
        ]),
    );
    for state in ["promoted", "in-progress"] {
        let (old, new) = mark(Some(state), "true");
        cases.push(
            update_json(
                &format!("Pipeline {state}: argocd-server marks it for deletion"),
                kind,
                old,
                new,
            )
            .user(argocd_server())
            .deny(&[Undrained])
            .audit("delete-undrained", "denied by rule 14")
            .msg(&["recyclable or recyclable-expired"]),
        );
    }
    let (old, new) = mark(Some("recyclable"), "true");
    cases.push(
        update_json(
            "Pipeline recyclable: argocd-server, deleteUndrained names bob only",
            kind,
            old,
            new,
        )
        .user(argocd_server())
        .policy(policy(
            "forceReapply:\n  deleteUndrained: {users: [bob], groups: []}\n",
        ))
        .deny(&[Undrained])
        .audit("delete-undrained", "denied by rule 14")
        .msg(&["it is not in forceReapply.deleteUndrained.users"]),
    );
    let (old, new) = mark(Some("recyclable"), "true");
    cases.push(
        update_json(
            "Pipeline recyclable: bob, whom deleteUndrained names",
            kind,
            old,
            new,
        )
        .user(UserInfo::new("bob", &[]))
        .policy(policy("forceReapply:\n  deleteUndrained: {users: [bob]}\n"))
        .audit(
            "delete-undrained",
            "allowed: user \"bob\", listed in forceReapply.deleteUndrained.users",
        ),
    );
    let (old, new) = mark(Some("recyclable"), "false");
    cases.push(update_json(
        "Pipeline recyclable: alice sets marked-for-deletion \"false\"",
        kind,
        old,
        new,
    ));
    let (old, new) = mark(Some("recyclable"), "true");
    cases.push(
        update_json(
            "Pipeline: marked-for-deletion left as it was",
            kind,
            new.clone(),
            new,
        )
        .user(alice()),
    );
    let _ = old;
    for other in [Kind::MonoVertex, Kind::InterStepBufferService] {
        cases.push(update_json(
            &format!(
                "{}: alice sets marked-for-deletion, which Numaplane ignores there",
                other.kind()
            ),
            other,
            child(other, Some("recyclable"), &[], &[]),
            child(
                other,
                Some("recyclable"),
                &[],
                &[(MARKED_FOR_DELETION, json!("true"))],
            ),
        ));
    }
    cases
}

#[test]
fn force_promote_label_on_children_table() {
    check_table("force-promote label on children", &force_promote_cases());
}

#[test]
fn marked_for_deletion_table() {
    check_table("marked-for-deletion", &undrained_cases());
}

#[test]
fn an_event_about_a_child_names_its_parent() {
    let case = update_json(
        "note",
        Kind::Pipeline,
        child(Kind::Pipeline, Some("recyclable"), &[], &[]),
        child(
            Kind::Pipeline,
            Some("recyclable"),
            &[],
            &[(MARKED_FOR_DELETION, json!("true"))],
        ),
    )
    .user(argocd_server());
    let d = super::validate_case::run(&case);
    let note = &d.events.first().expect("an Event").note;
    assert!(
        note.contains("on this Pipeline of PipelineRollout \"demo\""),
        "{note}"
    );
    assert!(note.contains("without draining"), "{note}");
}
