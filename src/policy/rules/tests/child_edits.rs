//! Rule 26: a rollout's children are changed by Numaplane's and Numaflow's
//! controllers; anyone else needs forceReapply.editChildren for their spec
//! (but scaling and pausing), status, ownerReferences, finalizers and keys
//! under Numaplane's and Numaflow's prefixes. The four attacks of a
//! namespace editor are refused; the controllers, the Kubernetes deleters
//! as they delete and orphan, and a holder of the permission are not.

use serde_json::{Value, json};

use super::fixtures::{admin, argocd_server, policy, warn_mode};
use super::numaplane_keys::{CHILDREN, child, controller};
use super::validate_case::{Case, ViolationKind, check_table, create_json, update_json};
use crate::kinds::{Kind, NUMAFLOW_CONTROLLER, SYSTEM_DELETERS, UPGRADE_STATE};
use crate::policy::UserInfo;
use crate::policy::rules::EventReason;

fn account(name: &str) -> UserInfo {
    UserInfo::new(name, &["system:serviceaccounts", "system:authenticated"])
}

/// An owned child of `kind` with a spec and status as Numaflow keeps them.
fn stored(kind: Kind) -> Value {
    let mut doc = child(kind, Some("promoted"), &[], &[]);
    doc["spec"] = json!({
        "vertices": [{"name": "in"}, {"name": "cat"}, {"name": "out"}],
        "edges": [{"from": "in", "to": "cat"}, {"from": "cat", "to": "out"}],
        "lifecycle": {"desiredPhase": "Running", "pauseGracePeriodSeconds": 600},
    });
    if kind == Kind::MonoVertex {
        doc["spec"]["replicas"] = json!(2);
    }
    doc["metadata"]["finalizers"] = json!(["numaflow.numaproj.io/finalizer"]);
    doc["status"] = json!({"phase": "Running", "drainedOnPause": false});
    doc
}

/// `stored(kind)` changed by `edit`.
fn edited(kind: Kind, edit: impl FnOnce(&mut Value)) -> Value {
    let mut doc = stored(kind);
    edit(&mut doc);
    doc
}

/// An update of an owned child of `kind` by alice, changed by `edit`.
fn alice_edits(kind: Kind, what: &str, edit: impl FnOnce(&mut Value)) -> Case {
    update_json(
        &format!("{}: alice {what}", kind.kind()),
        kind,
        stored(kind),
        edited(kind, edit),
    )
}

fn attack(kind: Kind, what: &str, field: &str, edit: impl FnOnce(&mut Value)) -> Case {
    alice_edits(kind, what, edit)
        .deny(&[ViolationKind::EditChild])
        .audit("edit-child", "denied by rule 26")
        .events(&[EventReason::ChildEditDenied])
        .msg(&[
            &format!("user \"alice\" may not change {field}"),
            &format!(
                "of this {} of {} \"demo\"",
                kind.kind(),
                kind.rollout().kind()
            ),
            "change the",
            "forceReapply.editChildren",
        ])
}

fn cases() -> Vec<Case> {
    use ViolationKind::*;
    let mut cases = Vec::new();
    for kind in CHILDREN {
        let k = kind.kind();
        // The four attacks of a namespace editor.
        cases.push(attack(
            kind,
            "forges a Failed status",
            "status.phase",
            |d| {
                d["status"]["phase"] = json!("Failed");
            },
        ));
        cases.push(attack(
            kind,
            "forges a drained pause",
            "status.drainedOnPause, status.phase",
            |d| d["status"] = json!({"phase": "Paused", "drainedOnPause": true}),
        ));
        cases.push(attack(
            kind,
            "points the ownerReferences at a ConfigMap",
            "metadata.ownerReferences",
            |d| {
                d["metadata"]["ownerReferences"] =
                    json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "bait", "uid": "u-bait"}]);
            },
        ));
        cases.push(attack(
            kind,
            "removes the finalizers of a terminating child",
            "metadata.finalizers",
            |d| {
                d["metadata"]["finalizers"] = Value::Null;
            },
        ));
        cases.push(attack(
            kind,
            "removes a vertex and its edges",
            "spec.edges, spec.vertices",
            |d| {
                d["spec"]["vertices"] = json!([{"name": "in"}, {"name": "out"}]);
                d["spec"]["edges"] = json!([{"from": "in", "to": "out"}]);
            },
        ));
        cases.push(attack(
            kind,
            "changes a lifecycle timeout beside desiredPhase",
            "spec.lifecycle.pauseGracePeriodSeconds",
            |d| {
                d["spec"]["lifecycle"] =
                    json!({"desiredPhase": "Paused", "pauseGracePeriodSeconds": 900});
            },
        ));
        cases.push(attack(
            kind,
            "sets a key of Numaplane's",
            "metadata.annotations[\"numaplane.numaproj.io/anything\"]",
            |d| d["metadata"]["annotations"]["numaplane.numaproj.io/anything"] = json!("x"),
        ));
        cases.push(attack(
            kind,
            "sets a key of Numaflow's",
            "metadata.labels[\"numaflow.numaproj.io/part-of\"]",
            |d| d["metadata"]["labels"]["numaflow.numaproj.io/part-of"] = json!("x"),
        ));
        // Free for everyone.
        cases.push(alice_edits(
            kind,
            "adds her own label and annotation",
            |d| {
                d["metadata"]["labels"]["team"] = json!("b");
                d["metadata"]["annotations"]["note"] = json!("hi");
            },
        ));
        cases.push(alice_edits(kind, "pauses it", |d| {
            d["spec"]["lifecycle"]["desiredPhase"] = json!("Paused");
        }));
        cases.push(alice_edits(kind, "changes nothing", |_| {}));
        cases.push(update_json(
            &format!("{k}: alice pauses one with no lifecycle"),
            kind,
            edited(kind, |d| {
                d["spec"].as_object_mut().map(|m| m.remove("lifecycle"));
            }),
            edited(kind, |d| {
                d["spec"]["lifecycle"] = json!({"desiredPhase": "Paused"})
            }),
        ));
        // The controllers, wholesale.
        for (who, user) in [
            ("Numaplane's controller", controller()),
            ("Numaflow's controller", account(NUMAFLOW_CONTROLLER)),
        ] {
            cases.push(
                update_json(
                    &format!("{k}: {who} changes spec, status and finalizers"),
                    kind,
                    stored(kind),
                    edited(kind, |d| {
                        d["spec"]["vertices"] = json!([]);
                        d["status"]["phase"] = json!("Paused");
                        d["metadata"]["finalizers"] = json!([]);
                    }),
                )
                .user(user),
            );
        }
        // A holder of the permission.
        for (who, user) in [
            ("system:masters", admin()),
            ("argocd-server", argocd_server()),
        ] {
            cases.push(
                update_json(
                    &format!("{k}: {who} forges the status"),
                    kind,
                    stored(kind),
                    edited(kind, |d| d["status"]["phase"] = json!("Failed")),
                )
                .user(user)
                .audit("edit-child", "allowed: user")
                .events(&[EventReason::ChildEditAllowed]),
            );
        }
        // The garbage collector as it deletes and orphans.
        let gc = account(SYSTEM_DELETERS[0]);
        cases.push(
            update_json(
                &format!("{k}: the garbage collector removes foregroundDeletion"),
                kind,
                edited(kind, |d| {
                    d["metadata"]["finalizers"] =
                        json!(["foregroundDeletion", "numaflow.numaproj.io/finalizer"]);
                }),
                stored(kind),
            )
            .user(gc.clone()),
        );
        cases.push(
            update_json(
                &format!("{k}: the garbage collector orphans it"),
                kind,
                edited(kind, |d| {
                    d["metadata"]["finalizers"] =
                        json!(["orphan", "numaflow.numaproj.io/finalizer"]);
                }),
                edited(kind, |d| d["metadata"]["ownerReferences"] = json!([])),
            )
            .user(gc.clone()),
        );
        cases.push(
            update_json(
                &format!("{k}: the garbage collector may not add an owner"),
                kind,
                stored(kind),
                edited(kind, |d| {
                    d["metadata"]["ownerReferences"]
                        .as_array_mut()
                        .expect("a list")
                        .push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u"}));
                }),
            )
            .user(gc.clone())
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["metadata.ownerReferences"]),
        );
        cases.push(
            update_json(
                &format!("{k}: the garbage collector may not remove Numaflow's finalizer"),
                kind,
                stored(kind),
                edited(kind, |d| d["metadata"]["finalizers"] = json!([])),
            )
            .user(gc)
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26"),
        );
        // Whose child is it.
        let free = |d: &mut Value| {
            d["metadata"]["ownerReferences"] = Value::Null;
            d["metadata"]["labels"] = json!({"app": "mine"});
            d["metadata"]["annotations"] = json!({});
        };
        cases.push(update_json(
            &format!("{k}: alice edits her own one"),
            kind,
            edited(kind, free),
            edited(kind, |d| {
                free(d);
                d["status"]["phase"] = json!("Failed");
                d["metadata"]["finalizers"] = Value::Null;
            }),
        ));
        cases.push(
            update_json(
                &format!("{k}: alice gives her own one to a rollout"),
                kind,
                edited(kind, free),
                edited(kind, |d| {
                    free(d);
                    d["metadata"]["ownerReferences"] = json!([{"apiVersion": "numaplane.numaproj.io/v1alpha1",
                        "kind": kind.rollout().kind(), "name": "demo", "uid": "u-parent"}]);
                }),
            )
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["metadata.ownerReferences"]),
        );
        cases.push(
            create_json(
                &format!("{k}: alice creates one owned by a rollout"),
                kind,
                edited(kind, |d| {
                    d["metadata"]["labels"] = json!({"app": "x"});
                    d["metadata"]["annotations"] = json!({});
                }),
            )
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&[&format!("may not make this {k} of")]),
        );
        cases.push(create_json(
            &format!("{k}: alice creates her own one"),
            kind,
            edited(kind, free),
        ));
        // Bad input: never a silent allow.
        cases.push(
            alice_edits(kind, "writes ownerReferences that are not a list", |d| {
                d["metadata"]["ownerReferences"] = json!("demo");
            })
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["metadata.ownerReferences"]),
        );
        cases.push(
            alice_edits(kind, "writes a status that is not an object", |d| {
                d["status"] = json!("Failed");
            })
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["may not change status of"]),
        );
        cases.push(
            update_json(
                &format!("{k}: alice edits one whose stored ownerReferences cannot be read"),
                kind,
                edited(kind, |d| {
                    d["metadata"]["ownerReferences"] = json!({"kind": "X"});
                    d["metadata"]["labels"] = json!({});
                }),
                edited(kind, |d| {
                    d["metadata"]["ownerReferences"] = json!({"kind": "X"});
                    d["metadata"]["labels"] = json!({});
                    d["status"]["phase"] = json!("Failed");
                }),
            )
            .deny(&[EditChild])
            .audit("edit-child", "denied by rule 26")
            .msg(&["\"(unknown: metadata.ownerReferences is an object)\""]),
        );
        // The permission does not lift the other rules.
        cases.push(
            alice_edits(kind, "with editChildren changes the upgrade state", |d| {
                d["metadata"]["labels"][UPGRADE_STATE] = json!("recyclable");
                d["status"]["phase"] = json!("Failed");
            })
            .policy(policy("forceReapply:\n  editChildren: {users: [alice]}\n"))
            .deny(&[Bookkeeping])
            .audit(
                "edit-child",
                "allowed: user \"alice\", listed in forceReapply.editChildren.users",
            ),
        );
        cases.push(
            alice_edits(kind, "forges the status in warn mode", |d| {
                d["status"]["phase"] = json!("Failed");
            })
            .policy(warn_mode())
            .audit("edit-child", "would-deny by rule 26")
            .events(&[EventReason::ChildEditAllowed])
            .warn(&["warn mode, would deny: alice may not change status.phase of a rollout's"]),
        );
    }
    // Scaling a MonoVertex is free; a Pipeline has no replicas of its own.
    cases.push(alice_edits(Kind::MonoVertex, "scales it", |d| {
        d["spec"]["replicas"] = json!(5);
    }));
    cases.push(
        alice_edits(Kind::Pipeline, "writes spec.replicas", |d| {
            d["spec"]["replicas"] = json!(5);
        })
        .deny(&[EditChild])
        .audit("edit-child", "denied by rule 26")
        .msg(&["spec.replicas"]),
    );
    cases
}

#[test]
fn child_edits_table() {
    check_table("a rollout's children", &cases());
}
