//! The expressions evaluated by a CEL interpreter on the shapes the API
//! server sends (the real API server runs them in
//! `tests/apiserver/children.rs`).

use serde_json::{Value, json};

use super::*;

fn matches(kind: Kind, operation: &str, object: Value, old: Value) -> bool {
    matches_as(kind, operation, "alice", object, old)
}

fn matches_as(kind: Kind, operation: &str, user: &str, object: Value, old: Value) -> bool {
    let text = expression(kind).expect("an expression");
    evaluate(&text, kind, operation, user, (object, old))
}

fn evaluate(
    text: &str,
    kind: Kind,
    operation: &str,
    user: &str,
    (object, old): (Value, Value),
) -> bool {
    // The interpreter recurses once per operator of the long `||` chains:
    // more than a test thread's stack holds.
    let (text, operation, user) = (text.to_owned(), operation.to_owned(), user.to_owned());
    let run = move || {
        let program = cel::Program::compile(&text).expect("compiles");
        let mut context = cel::Context::default();
        let value = |v: Value| cel::to_value(v).expect("a CEL value");
        context.add_variable_from_value("object", value(object));
        context.add_variable_from_value("oldObject", value(old));
        context.add_variable_from_value(
            "request",
            value(json!({"operation": operation,
                "resource": {"resource": kind.resource()},
                "userInfo": {"username": user}})),
        );
        match program.execute(&context).expect("evaluates") {
            cel::Value::Bool(b) => b,
            other => panic!("not a bool: {other:?}"),
        }
    };
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(run)
        .expect("a thread")
        .join()
        .expect("evaluated")
}

fn child(labels: Value, annotations: Value) -> Value {
    json!({"metadata": {"name": "p", "labels": labels, "annotations": annotations}, "spec": {}})
}

#[test]
fn a_child_write_is_sent_only_when_a_judged_key_changes() {
    let state = json!({UPGRADE: "promoted"});
    let base = child(state.clone(), json!({}));
    let cases = [
        (
            "an ordinary label",
            child(json!({UPGRADE: "promoted", "app": "x"}), json!({})),
            false,
        ),
        (
            "the spec",
            {
                let mut o = base.clone();
                o["spec"] = json!({"lifecycle": {"desiredPhase": "Paused"}});
                o
            },
            false,
        ),
        (
            "force-promote added",
            child(
                json!({UPGRADE: "promoted", FORCE_PROMOTE_LABEL: "true"}),
                json!({}),
            ),
            true,
        ),
        (
            "force-promote added empty",
            child(
                json!({UPGRADE: "promoted", FORCE_PROMOTE_LABEL: ""}),
                json!({}),
            ),
            true,
        ),
        (
            "upgrade-state changed",
            child(json!({UPGRADE: "recyclable"}), json!({})),
            true,
        ),
        ("upgrade-state removed", child(json!({}), json!({})), true),
        (
            "marked-for-deletion",
            child(state.clone(), json!({MARKED_FOR_DELETION: "true"})),
            true,
        ),
        (
            "no labels at all",
            json!({"metadata": {"name": "p"}, "spec": {}}),
            true,
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(
            matches(Kind::Pipeline, "UPDATE", object, base.clone()),
            want,
            "{name}"
        );
    }
    assert!(!matches(
        Kind::Pipeline,
        "CREATE",
        child(json!({"app": "x"}), json!({})),
        Value::Null
    ));
    assert!(matches(
        Kind::MonoVertex,
        "CREATE",
        child(state, json!({})),
        Value::Null
    ));
    let bare = json!({"metadata": {"name": "p"}, "spec": {}});
    assert!(!matches(Kind::Pipeline, "UPDATE", bare.clone(), bare));
}

#[test]
fn a_pipeline_lifecycle_write_is_sent_unless_the_controller_makes_it() {
    let state = json!({UPGRADE: "promoted"});
    let with = |lifecycle: Value| {
        let mut o = child(state.clone(), json!({}));
        o["spec"] = json!({"lifecycle": lifecycle});
        o
    };
    let crd = || json!({"pauseGracePeriodSeconds": 30, "deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30, "desiredPhase": "Running"});
    let stored = with(crd());
    let edit = |key: &str, v: Value| {
        let mut l = crd();
        l[key] = v;
        with(l)
    };
    let cases = [
        (
            "pause changed",
            edit("pauseGracePeriodSeconds", json!(0)),
            true,
        ),
        (
            "deletion changed",
            edit("deletionGracePeriodSeconds", json!(0)),
            true,
        ),
        (
            "deprecated changed",
            edit("deleteGracePeriodSeconds", json!(5)),
            true,
        ),
        (
            "desiredPhase only",
            edit("desiredPhase", json!("Paused")),
            false,
        ),
        ("no change", stored.clone(), false),
        (
            "pause removed",
            with(json!({"deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30})),
            true,
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(
            matches(Kind::Pipeline, "UPDATE", object.clone(), stored.clone()),
            want,
            "{name}"
        );
        assert!(
            !matches_as(
                Kind::Pipeline,
                "UPDATE",
                NUMAPLANE_CONTROLLER,
                object,
                stored.clone()
            ),
            "{name}, by the controller"
        );
    }
    // A MonoVertex's lifecycle is not sent.
    assert!(!matches(
        Kind::MonoVertex,
        "UPDATE",
        edit("pauseGracePeriodSeconds", json!(0)),
        stored.clone()
    ));
    // A CREATE by a user carries the CRD's defaults: sent; by the
    // controller: not (with no Numaplane key on it).
    let plain = json!({"metadata": {"name": "p"}, "spec": {"lifecycle": crd()}});
    assert!(matches(
        Kind::Pipeline,
        "CREATE",
        plain.clone(),
        Value::Null
    ));
    assert!(!matches_as(
        Kind::Pipeline,
        "CREATE",
        NUMAPLANE_CONTROLLER,
        plain,
        Value::Null
    ));
    let bare = json!({"metadata": {"name": "p"}, "spec": {}});
    assert!(!matches(Kind::Pipeline, "CREATE", bare, Value::Null));
}

#[test]
fn a_rollout_write_is_sent_for_its_template_and_force_promote() {
    let rollout = |labels: Value, force: bool| {
        json!({"metadata": {"name": "r"}, "spec": {
            "strategy": {"progressive": {"forcePromote": force}},
            "interStepBufferService": {"metadata": {"labels": labels}, "spec": {}}}})
    };
    let kind = Kind::IsbServiceRollout;
    let base = rollout(json!({}), false);
    assert!(!matches(
        kind,
        "UPDATE",
        rollout(json!({"app": "x"}), false),
        base.clone()
    ));
    assert!(matches(
        kind,
        "UPDATE",
        rollout(json!({FORCE_PROMOTE_LABEL: "true"}), false),
        base.clone()
    ));
    assert!(matches(
        kind,
        "UPDATE",
        rollout(json!({}), true),
        base.clone()
    ));
    assert!(!matches(
        kind,
        "UPDATE",
        rollout(json!({}), true),
        rollout(json!({}), true)
    ));
    assert!(!matches(
        kind,
        "UPDATE",
        rollout(json!({}), false),
        rollout(json!({}), true)
    ));
    assert!(matches(
        kind,
        "CREATE",
        rollout(json!({}), true),
        Value::Null
    ));
    assert!(!matches(
        kind,
        "CREATE",
        json!({"metadata": {"name": "r"}, "spec": {}}),
        Value::Null
    ));
}

#[test]
fn a_child_delete_is_sent_when_owned_and_not_by_a_system_deleter() {
    let owned = child(json!({PARENT_ROLLOUT: "demo"}), json!({}));
    let cases = [
        (
            "a user deletes an owned child",
            "alice",
            owned.clone(),
            true,
        ),
        (
            "Numaplane's controller",
            NUMAPLANE_CONTROLLER,
            owned.clone(),
            false,
        ),
        (
            "the garbage collector",
            SYSTEM_DELETERS[0],
            owned.clone(),
            false,
        ),
        (
            "the namespace controller",
            SYSTEM_DELETERS[1],
            owned.clone(),
            false,
        ),
        (
            "Numaflow's controller",
            NUMAFLOW_CONTROLLER,
            owned.clone(),
            true,
        ),
        (
            "a child no rollout owns",
            "alice",
            child(json!({"app": "x"}), json!({})),
            false,
        ),
        (
            "no labels",
            "alice",
            json!({"metadata": {"name": "p"}}),
            false,
        ),
    ];
    for kind in [
        Kind::Pipeline,
        Kind::MonoVertex,
        Kind::InterStepBufferService,
    ] {
        for (name, user, old, want) in &cases {
            // On DELETE the API server sends `object: null`.
            assert_eq!(
                matches_as(kind, "DELETE", user, Value::Null, old.clone()),
                *want,
                "{kind:?}: {name}"
            );
        }
    }
}

#[test]
fn a_pause_timestamp_write_is_sent_unless_numaflow_writes_it() {
    let at = |t: &str| child(json!({UPGRADE: "promoted"}), json!({PAUSE_TIMESTAMP: t}));
    let none = child(json!({UPGRADE: "promoted"}), json!({}));
    let t0 = "2026-01-01T00:00:00Z";
    let t1 = "2025-01-01T00:00:00Z";
    let cases = [
        ("a user sets it", "alice", at(t0), none.clone(), true),
        ("a user backdates it", "alice", at(t1), at(t0), true),
        ("a user leaves it", "alice", at(t0), at(t0), false),
        ("a user removes it", "alice", none.clone(), at(t0), false),
        (
            "Numaflow sets it",
            NUMAFLOW_CONTROLLER,
            at(t0),
            none.clone(),
            false,
        ),
        (
            "Numaflow removes it",
            NUMAFLOW_CONTROLLER,
            none.clone(),
            at(t0),
            false,
        ),
        (
            "Numaplane changes it",
            NUMAPLANE_CONTROLLER,
            at(t1),
            at(t0),
            true,
        ),
    ];
    for (name, user, new, old, want) in cases {
        assert_eq!(
            matches_as(Kind::Pipeline, "UPDATE", user, new, old),
            want,
            "{name}"
        );
    }
    let plain = child(json!({"app": "x"}), json!({PAUSE_TIMESTAMP: t0}));
    assert!(matches_as(
        Kind::Pipeline,
        "CREATE",
        "alice",
        plain.clone(),
        Value::Null
    ));
    assert!(!matches_as(
        Kind::Pipeline,
        "CREATE",
        NUMAFLOW_CONTROLLER,
        plain,
        Value::Null
    ));
}

#[test]
fn the_policys_accounts_are_the_ones_kept_off() {
    let (numaplane, numaflow) = (
        "system:serviceaccount:numaplane:numaplane-controller-manager",
        "system:serviceaccount:numaflow:numaflow-controller",
    );
    let deleters = ["system:serviceaccount:ops:o'brien\\gc"];
    let accounts = Accounts {
        numaplane,
        numaflow,
        system_deleters: &deleters,
    };
    let text = expression_for(Kind::Pipeline, &accounts).expect("an expression");
    let promoted = child(json!({UPGRADE: "promoted"}), json!({}));
    let recyclable = child(json!({UPGRADE: "recyclable"}), json!({}));
    let owned = child(json!({PARENT_ROLLOUT: "demo"}), json!({}));
    let stamped = child(
        json!({UPGRADE: "promoted"}),
        json!({PAUSE_TIMESTAMP: "2026-01-01T00:00:00Z"}),
    );
    let relabel = || (recyclable.clone(), promoted.clone());
    let cases = [
        (
            "the policy's Numaplane relabels",
            numaplane,
            "UPDATE",
            relabel(),
            false,
        ),
        (
            "the built-in Numaplane relabels",
            NUMAPLANE_CONTROLLER,
            "UPDATE",
            relabel(),
            true,
        ),
        ("alice relabels", "alice", "UPDATE", relabel(), true),
        (
            "the policy's Numaplane stamps",
            numaplane,
            "UPDATE",
            (stamped.clone(), promoted.clone()),
            true,
        ),
        (
            "the policy's Numaflow stamps",
            numaflow,
            "UPDATE",
            (stamped.clone(), promoted.clone()),
            false,
        ),
        (
            "the built-in Numaflow stamps",
            NUMAFLOW_CONTROLLER,
            "UPDATE",
            (stamped, promoted.clone()),
            true,
        ),
        (
            "the policy's deleter deletes",
            deleters[0],
            "DELETE",
            (Value::Null, owned.clone()),
            false,
        ),
        (
            "the policy's Numaplane deletes",
            numaplane,
            "DELETE",
            (Value::Null, owned.clone()),
            false,
        ),
        (
            "the built-in garbage collector deletes",
            SYSTEM_DELETERS[0],
            "DELETE",
            (Value::Null, owned),
            true,
        ),
    ];
    for (name, user, operation, objects, want) in cases {
        assert_eq!(
            evaluate(&text, Kind::Pipeline, operation, user, objects),
            want,
            "{name}"
        );
    }
}

#[test]
fn the_controllers_own_condition_leaves_only_it_out() {
    let accounts = Accounts {
        numaplane: "system:serviceaccount:numaplane:numaplane-controller-manager",
        ..Accounts::BUILT_IN
    };
    let text = controller_exempt(&accounts);
    let sent = |user: &str| {
        evaluate(
            &text,
            Kind::MonoVertexRollout,
            "UPDATE",
            user,
            (json!({}), json!({})),
        )
    };
    assert!(!sent(accounts.numaplane));
    assert!(sent(NUMAPLANE_CONTROLLER));
    assert!(sent("alice"));
    assert_eq!(literal("a'b\\c"), "'a\\'b\\\\c'");
}

const UPGRADE: &str = pipelinerollout_webhook::kinds::UPGRADE_STATE;

#[test]
fn an_owned_childs_edit_is_sent_unless_the_controllers_make_it() {
    let gc = SYSTEM_DELETERS[0];
    let owner = json!([{"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "MonoVertexRollout",
        "name": "demo", "uid": "u"}]);
    let owned = |edit: &dyn Fn(&mut Value)| {
        let mut o = json!({"metadata": {"name": "m", "labels": {"app": "x"}, "ownerReferences": owner,
                "finalizers": ["numaflow.numaproj.io/finalizer"]},
            "spec": {"replicas": 1, "lifecycle": {"desiredPhase": "Running", "pauseGracePeriodSeconds": 30},
                "source": {"x": 1}},
            "status": {"phase": "Running"}});
        edit(&mut o);
        o
    };
    let same = owned(&|_| {});
    let cases: [(&str, &str, &str, Value, bool); 16] = [
        (
            "alice forges the status",
            "UPDATE",
            "alice",
            owned(&|o| o["status"]["phase"] = json!("Failed")),
            true,
        ),
        (
            "Numaflow writes the status",
            "UPDATE",
            NUMAFLOW_CONTROLLER,
            owned(&|o| o["status"]["phase"] = json!("Failed")),
            false,
        ),
        (
            "Numaplane writes the spec",
            "UPDATE",
            NUMAPLANE_CONTROLLER,
            owned(&|o| o["spec"]["source"] = json!({})),
            false,
        ),
        (
            "alice edits the spec",
            "UPDATE",
            "alice",
            owned(&|o| o["spec"]["source"] = json!({})),
            true,
        ),
        (
            "alice removes the spec",
            "UPDATE",
            "alice",
            owned(&|o| {
                o.as_object_mut().map(|m| m.remove("spec"));
            }),
            true,
        ),
        (
            "alice scales it",
            "UPDATE",
            "alice",
            owned(&|o| o["spec"]["replicas"] = json!(9)),
            false,
        ),
        (
            "alice pauses it",
            "UPDATE",
            "alice",
            owned(&|o| o["spec"]["lifecycle"]["desiredPhase"] = json!("Paused")),
            false,
        ),
        (
            "alice changes the pause timeout",
            "UPDATE",
            "alice",
            owned(&|o| o["spec"]["lifecycle"]["pauseGracePeriodSeconds"] = json!(1)),
            true,
        ),
        (
            "alice removes the finalizers",
            "UPDATE",
            "alice",
            owned(&|o| o["metadata"]["finalizers"] = json!([])),
            true,
        ),
        (
            "alice repoints the owner",
            "UPDATE",
            "alice",
            owned(&|o| o["metadata"]["ownerReferences"][0]["name"] = json!("x")),
            true,
        ),
        (
            "alice labels it her way",
            "UPDATE",
            "alice",
            owned(&|o| o["metadata"]["labels"]["team"] = json!("b")),
            false,
        ),
        (
            "alice sets a key of Numaflow's",
            "UPDATE",
            "alice",
            owned(&|o| o["metadata"]["annotations"] = json!({"numaflow.numaproj.io/x": "1"})),
            true,
        ),
        (
            "the garbage collector orphans it",
            "UPDATE",
            gc,
            owned(&|o| o["metadata"]["ownerReferences"] = json!([])),
            false,
        ),
        (
            "the garbage collector ends a foreground deletion",
            "UPDATE",
            gc,
            same.clone(),
            false,
        ),
        (
            "the garbage collector removes Numaflow's finalizer",
            "UPDATE",
            gc,
            owned(&|o| o["metadata"]["finalizers"] = json!([])),
            true,
        ),
        (
            "alice creates a child of a rollout",
            "CREATE",
            "alice",
            same.clone(),
            true,
        ),
    ];
    for (name, operation, user, object, want) in cases {
        let old = if name.contains("foreground") {
            owned(&|o| {
                o["metadata"]["finalizers"] =
                    json!(["foregroundDeletion", "numaflow.numaproj.io/finalizer"])
            })
        } else if operation == "CREATE" {
            Value::Null
        } else {
            same.clone()
        };
        assert_eq!(
            matches_as(Kind::MonoVertex, operation, user, object, old),
            want,
            "{name}"
        );
    }
    // A child no rollout owns is its owner's.
    let mine =
        |phase: &str| json!({"metadata": {"name": "m"}, "spec": {}, "status": {"phase": phase}});
    assert!(!matches(
        Kind::Pipeline,
        "UPDATE",
        mine("Failed"),
        mine("Running")
    ));
}
