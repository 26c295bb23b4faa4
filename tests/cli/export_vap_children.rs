//! Rules 19 and 20 as exported, evaluated by the `cel` interpreter beside
//! the webhook's own decision (`admission::answer`) on the same request.
//! Rule 19: pause-timestamp on a Pipeline set, changed, removed or kept by
//! a user, by Numaplane's controller and by Numaflow's, and in a
//! PipelineRollout's template. Rule 20: the DELETE of an owned Pipeline,
//! MonoVertex and InterStepBufferService by a user (and a dry run), the
//! garbage collector, the namespace controller, Numaplane's controller,
//! and users `forceReapply.deleteUndrained` permits by its lists; an
//! unowned child. Rule 26: an owned child's spec (key by key, pausing and
//! a MonoVertex's scaling free), status, ownerReferences, finalizers and
//! Numaplane's and Numaflow's keys changed, and a CREATE owned by an
//! ownerReference, by a user, the controllers, the garbage collector and
//! users `forceReapply.editChildren` permits, denials word for word. The interpreter has no `authorizer`, so the policies
//! here grant by users and groups only; the RBAC verb is exercised on a
//! real API server by tests/apiserver/vap.rs.

use crate::cel_support;

use cel_support::table::{Case, Expect, case, run};
use cel_support::{Request, Resource};
use pipelinerollout_webhook::kinds::{
    Kind, NUMAFLOW_CONTROLLER, NUMAPLANE_CONTROLLER, PARENT_ROLLOUT, PAUSE_TIMESTAMP,
    SYSTEM_DELETERS,
};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};
use test_builders::{pipeline_rollout, users};

use Expect::{Allowed, Denied};

const PIPELINES: Resource = Resource::of(Kind::Pipeline);
const ACCOUNTS: &[&str] = &["system:serviceaccounts", "system:authenticated"];

/// A child of `kind`, owned by rollout `demo` or not.
fn child(kind: Kind, owned: bool, annotations: Value) -> Value {
    let labels = if owned {
        json!({PARENT_ROLLOUT: "demo", "app": "x"})
    } else {
        json!({"app": "x"})
    };
    json!({"apiVersion": format!("{}/v1alpha1", kind.group()), "kind": kind.kind(),
        "metadata": {"name": "demo-0", "namespace": "team", "labels": labels,
            "annotations": annotations},
        "spec": {}})
}

fn stamped(at: &str) -> Value {
    json!({PAUSE_TIMESTAMP: at, "note": "x"})
}

fn edited(mut object: Value) -> Value {
    object["metadata"]["labels"]["edited"] = json!("yes");
    object
}

fn pause_timestamp_cases() -> Vec<Case> {
    let pipe = |annotations: Value| child(Kind::Pipeline, false, annotations);
    let none = || json!({"note": "x"});
    let (t1, t0) = ("2026-06-01T10:00:00Z", "2026-06-01T09:00:00Z");
    let update = |who: &str, user: &str, what: &str, old: Value, new: Value, expect| {
        case(
            format!("Pipeline UPDATE {what} by {who}"),
            Request::update(PIPELINES, pipe(old), edited(pipe(new))).by(user, ACCOUNTS),
            expect,
        )
    };
    let mut cases = Vec::new();
    for (who, user, is_numaflow) in [
        ("alice", "alice", false),
        ("Numaplane's controller", NUMAPLANE_CONTROLLER, false),
        ("Numaflow's controller", NUMAFLOW_CONTROLLER, true),
    ] {
        let moved = if is_numaflow {
            Allowed
        } else {
            Denied("rule 19")
        };
        cases.extend([
            update(who, user, "setting it", none(), stamped(t1), moved),
            update(
                who,
                user,
                "moving it earlier",
                stamped(t1),
                stamped(t0),
                moved,
            ),
            update(who, user, "removing it", stamped(t1), none(), Allowed),
            update(who, user, "keeping it", stamped(t1), stamped(t1), Allowed),
            update(who, user, "without it", none(), none(), Allowed),
        ]);
    }
    cases.extend([
        case(
            "Pipeline CREATE with it by alice",
            Request::create(PIPELINES, pipe(stamped(t1))),
            Denied("rule 19"),
        ),
        case(
            "Pipeline CREATE with it by Numaflow's controller",
            Request::create(PIPELINES, pipe(stamped(t1))).by(NUMAFLOW_CONTROLLER, ACCOUNTS),
            Allowed,
        ),
        case(
            "Pipeline UPDATE setting it to a long time by alice",
            Request::update(
                PIPELINES,
                pipe(none()),
                pipe(stamped("2026-06-01T10:00:00.123456789+02:00")),
            ),
            Denied("rule 19"),
        ),
        case(
            "Pipeline UPDATE setting it to a quoted text by alice",
            Request::update(PIPELINES, pipe(none()), pipe(stamped("\"now\""))),
            Denied("rule 19"),
        ),
        case(
            "Pipeline UPDATE setting it where the stored one has no annotations, by alice",
            Request::update(
                PIPELINES,
                {
                    let mut o = pipe(none());
                    o["metadata"]
                        .as_object_mut()
                        .map(|m| m.remove("annotations"));
                    o
                },
                pipe(stamped(t1)),
            ),
            Denied("rule 19"),
        ),
        case(
            "Pipeline UPDATE setting it empty by alice",
            Request::update(PIPELINES, pipe(none()), pipe(stamped(""))),
            Denied("rule 19"),
        ),
    ]);
    // In a PipelineRollout's template nobody may set or change it.
    let template = |at: Option<&str>| {
        let doc = pipeline_rollout().with_field(&["metadata", "name"], "demo");
        match at {
            Some(at) => doc.with_field(
                &[
                    "spec",
                    "pipeline",
                    "metadata",
                    "annotations",
                    PAUSE_TIMESTAMP,
                ],
                at,
            ),
            None => doc,
        }
        .into_json()
    };
    let rollouts = Resource::of(Kind::PipelineRollout);
    cases.extend([
        case(
            "rollout CREATE with it in the template",
            Request::create(rollouts, template(Some(t1))),
            Denied("rule 19"),
        ),
        case(
            "rollout CREATE with it in the template by Numaflow's controller",
            Request::create(rollouts, template(Some(t1))).by(NUMAFLOW_CONTROLLER, ACCOUNTS),
            Denied("rule 19"),
        ),
        case(
            "rollout UPDATE keeping it in the template",
            Request::update(rollouts, template(Some(t1)), edited(template(Some(t1)))),
            Allowed,
        ),
        case(
            "rollout UPDATE changing it in the template",
            Request::update(rollouts, template(Some(t1)), template(Some(t0))),
            Denied("rule 19"),
        ),
        case(
            "rollout UPDATE removing it from the template",
            Request::update(rollouts, template(Some(t1)), template(None)),
            Allowed,
        ),
    ]);
    cases
}

/// The DELETEs of each child kind, owned or not, by each deleter.
fn delete_cases(permitted: &[(&str, &str, &[&str])]) -> Vec<Case> {
    let mut cases = Vec::new();
    for kind in [
        Kind::Pipeline,
        Kind::MonoVertex,
        Kind::InterStepBufferService,
    ] {
        let resource = Resource::of(kind);
        let owned = || child(kind, true, json!({}));
        let delete = |who: &str, user: &str, groups: &[&str], expect| {
            case(
                format!("{} DELETE by {who}", kind.kind()),
                Request::delete(resource, owned()).by(user, groups),
                expect,
            )
        };
        cases.extend([
            delete(
                "alice",
                "alice",
                &["devs", "system:authenticated"],
                Denied("rule 20"),
            ),
            case(
                format!("{} DELETE by alice, a dry run", kind.kind()),
                Request::delete(resource, owned()).dry_run(),
                Denied("rule 20"),
            ),
            delete(
                "the garbage collector",
                SYSTEM_DELETERS[0],
                ACCOUNTS,
                Allowed,
            ),
            delete(
                "the namespace controller",
                SYSTEM_DELETERS[1],
                ACCOUNTS,
                Allowed,
            ),
            delete(
                "Numaplane's controller",
                NUMAPLANE_CONTROLLER,
                ACCOUNTS,
                Allowed,
            ),
            delete(
                "Numaflow's controller",
                NUMAFLOW_CONTROLLER,
                ACCOUNTS,
                Denied("rule 20"),
            ),
            case(
                format!("{} DELETE, its parent label empty, by alice", kind.kind()),
                Request::delete(resource, {
                    let mut o = owned();
                    o["metadata"]["labels"][PARENT_ROLLOUT] = json!("");
                    o
                }),
                Denied("rule 20"),
            ),
            case(
                format!("{} DELETE, no labels, by alice", kind.kind()),
                Request::delete(resource, {
                    let mut o = owned();
                    o["metadata"].as_object_mut().map(|m| m.remove("labels"));
                    o
                }),
                Allowed,
            ),
            case(
                format!("{} DELETE, unowned, by alice", kind.kind()),
                Request::delete(resource, child(kind, false, json!({}))),
                Allowed,
            ),
        ]);
        for (who, user, groups) in permitted {
            cases.push(delete(who, user, groups, Allowed));
        }
    }
    cases
}

#[test]
fn pause_timestamp_is_numaflows_controllers_in_both_engines() {
    let summary = run("built-in", &Policy::built_in(), &pause_timestamp_cases());
    assert_eq!(summary.denied, 12, "{summary:?}");
}

#[test]
fn owned_children_are_deleted_only_by_the_permitted_in_both_engines() {
    // deleteUndrained's lists are forceReapply's where the policy leaves
    // them out: Argo CD's server and system:masters.
    let admin = users::admin();
    let argocd = users::argocd_server();
    let built_in: [(&str, &str, &[&str]); 2] = [
        (
            "admin (system:masters)",
            users::username(&admin),
            &users::groups(&admin),
        ),
        (
            "Argo CD's server",
            users::username(&argocd),
            &users::groups(&argocd),
        ),
    ];
    let cases = delete_cases(&built_in);
    let summary = run("built-in", &Policy::built_in(), &cases);
    assert_eq!(summary.denied, 12, "{summary:?}");

    let own = Policy::from_yaml(
        "forceReapply:\n  deleteUndrained:\n    users: [bob]\n    groups: [sre]\n",
    )
    .expect("valid");
    let lists: [(&str, &str, &[&str]); 3] = [
        ("bob, in its users", "bob", &["system:authenticated"]),
        (
            "carol, in its group sre",
            "carol",
            &["sre", "system:authenticated"],
        ),
        (
            "admin, in forceReapply's groups only",
            "admin",
            &["system:masters"],
        ),
    ];
    let mut cases = delete_cases(&lists[..2]);
    for kind in [
        Kind::Pipeline,
        Kind::MonoVertex,
        Kind::InterStepBufferService,
    ] {
        let (who, user, groups) = lists[2];
        cases.push(case(
            format!("{} DELETE by {who}", kind.kind()),
            Request::delete(Resource::of(kind), child(kind, true, json!({}))).by(user, groups),
            Denied("rule 20"),
        ));
    }
    run("deleteUndrained lists", &own, &cases);

    let warn = Policy::from_yaml("mode: warn\n").expect("valid");
    run("warn mode", &warn, &delete_cases(&[]));
}

/// An owned child of `kind` with a spec, a status, a finalizer and an
/// ownerReference to its rollout, as Numaplane and Numaflow keep it.
fn kept(kind: Kind) -> Value {
    let mut o = child(kind, true, json!({"note": "x"}));
    o["spec"] = json!({"a": 1, "b": "x", "replicas": 1,
        "lifecycle": {"desiredPhase": "Running", "foo": 1}});
    o["status"] = json!({"phase": "Running", "drainedOnPause": false});
    o["metadata"]["finalizers"] = json!(["numaflow.numaproj.io/cleanup"]);
    o["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": kind.rollout().kind(), "name": "demo", "uid": "u-1",
        "controller": true, "blockOwnerDeletion": true}]);
    o
}

/// `kept(kind)` with `change` applied.
fn changed(kind: Kind, change: impl Fn(&mut Value)) -> Value {
    let mut o = kept(kind);
    change(&mut o);
    o
}

/// Rule 26's UPDATEs and CREATEs of each child kind, by alice unless a
/// case says otherwise, and `permitted`'s edits.
fn edit_cases(permitted: &[(&str, &str, &[&str])]) -> Vec<Case> {
    let mut cases = Vec::new();
    let set = |path: &[&str], v: Value| {
        let path: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        move |o: &mut Value| {
            let mut at = o;
            for key in &path {
                at = &mut at[key.as_str()];
            }
            *at = v.clone();
        }
    };
    for kind in [
        Kind::Pipeline,
        Kind::MonoVertex,
        Kind::InterStepBufferService,
    ] {
        let resource = Resource::of(kind);
        let k = kind.kind();
        let update = |what: &str, change: &dyn Fn(&mut Value), expect| {
            case(
                format!("{k} UPDATE {what} by alice"),
                Request::update(resource, kept(kind), changed(kind, change)),
                expect,
            )
        };
        let by = |what: &str, user: &str, change: &dyn Fn(&mut Value), expect| {
            case(
                format!("{k} UPDATE {what} by {user}"),
                Request::update(resource, kept(kind), changed(kind, change)).by(user, ACCOUNTS),
                expect,
            )
        };
        let scaled = if kind == Kind::MonoVertex {
            Allowed
        } else {
            Denied("rule 26")
        };
        let forged = set(&["status", "phase"], json!("Failed"));
        cases.extend([
            update(
                "changing spec.a",
                &set(&["spec", "a"], json!(2)),
                Denied("rule 26"),
            ),
            update(
                "removing spec.b",
                &|o| {
                    o["spec"].as_object_mut().map(|m| m.remove("b"));
                },
                Denied("rule 26"),
            ),
            update(
                "adding spec.c",
                &set(&["spec", "c"], json!({"x": 1})),
                Denied("rule 26"),
            ),
            update(
                "pausing",
                &set(&["spec", "lifecycle", "desiredPhase"], json!("Paused")),
                Allowed,
            ),
            update("scaling", &set(&["spec", "replicas"], json!(3)), scaled),
            update(
                "changing spec.lifecycle.foo",
                &set(&["spec", "lifecycle", "foo"], json!(2)),
                Denied("rule 26"),
            ),
            update(
                "removing spec.lifecycle",
                &|o| {
                    o["spec"].as_object_mut().map(|m| m.remove("lifecycle"));
                },
                Denied("rule 26"),
            ),
            update("forging status.phase", &forged, Denied("rule 26")),
            update(
                "forging status.drainedOnPause and phase",
                &|o| {
                    o["status"] = json!({"phase": "Paused", "drainedOnPause": true});
                },
                Denied("rule 26"),
            ),
            update(
                "removing status",
                &|o| {
                    o.as_object_mut().map(|m| m.remove("status"));
                },
                Denied("rule 26"),
            ),
            update(
                "pointing ownerReferences at a ConfigMap",
                &set(
                    &["metadata", "ownerReferences"],
                    json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-2"}]),
                ),
                Denied("rule 26"),
            ),
            update(
                "removing the finalizers",
                &set(&["metadata", "finalizers"], Value::Null),
                Denied("rule 26"),
            ),
            update(
                "adding foregroundDeletion",
                &set(
                    &["metadata", "finalizers"],
                    json!(["numaflow.numaproj.io/cleanup", "foregroundDeletion"]),
                ),
                Denied("rule 26"),
            ),
            update(
                "changing its own label",
                &set(&["metadata", "labels", "app"], json!("y")),
                Allowed,
            ),
            update(
                "adding its own annotation",
                &set(&["metadata", "annotations", "team"], json!("y")),
                Allowed,
            ),
            update(
                "adding a Numaplane label",
                &set(
                    &["metadata", "labels", "numaplane.numaproj.io/note"],
                    json!("y"),
                ),
                Denied("rule 26"),
            ),
            update(
                "changing a Numaflow annotation",
                &set(
                    &["metadata", "annotations", "numaflow.numaproj.io/note"],
                    json!("y"),
                ),
                Denied("rule 26"),
            ),
            update(
                "changing six things",
                &|o| {
                    o["spec"]["b"] = json!("y");
                    o["spec"]["a"] = json!(7);
                    o["spec"]["lifecycle"]["foo"] = json!(3);
                    o["status"]["phase"] = json!("Failed");
                    o["metadata"]["finalizers"] = json!([]);
                    o["metadata"]["labels"]["numaflow.numaproj.io/z"] = json!("1");
                },
                Denied("rule 26"),
            ),
            by(
                "forging status.phase",
                NUMAPLANE_CONTROLLER,
                &forged,
                Allowed,
            ),
            by(
                "forging status.phase",
                NUMAFLOW_CONTROLLER,
                &forged,
                Allowed,
            ),
            by(
                "adding foregroundDeletion",
                SYSTEM_DELETERS[0],
                &set(
                    &["metadata", "finalizers"],
                    json!(["numaflow.numaproj.io/cleanup", "foregroundDeletion"]),
                ),
                Allowed,
            ),
            by(
                "orphaning it",
                SYSTEM_DELETERS[0],
                &set(&["metadata", "ownerReferences"], json!([])),
                Allowed,
            ),
            by(
                "removing the finalizers",
                SYSTEM_DELETERS[0],
                &set(&["metadata", "finalizers"], json!([])),
                Denied("rule 26"),
            ),
            by(
                "forging status.phase",
                SYSTEM_DELETERS[0],
                &forged,
                Denied("rule 26"),
            ),
            case(
                format!("{k} UPDATE forging status.phase, unowned, by alice"),
                Request::update(resource, child(kind, false, json!({})), {
                    let mut o = child(kind, false, json!({}));
                    o["status"] = json!({"phase": "Failed"});
                    o
                }),
                Allowed,
            ),
            case(
                format!("{k} UPDATE forging status.phase, owned by its label only, by alice"),
                Request::update(resource, child(kind, true, json!({})), {
                    let mut o = child(kind, true, json!({}));
                    o["status"] = json!({"phase": "Failed"});
                    o
                }),
                Denied("rule 26"),
            ),
            case(
                format!("{k} CREATE owned by a rollout's ownerReference, by alice"),
                Request::create(resource, {
                    let mut o = kept(kind);
                    o["metadata"]["labels"] = json!({"app": "x"});
                    o
                }),
                Denied("rule 26"),
            ),
            case(
                format!("{k} CREATE unowned, by alice"),
                Request::create(resource, child(kind, false, json!({}))),
                Allowed,
            ),
        ]);
        for (who, user, groups) in permitted {
            cases.push(case(
                format!("{k} UPDATE forging status.phase by {who}"),
                Request::update(resource, kept(kind), changed(kind, &forged)).by(user, groups),
                Allowed,
            ));
        }
    }
    cases
}

#[test]
fn owned_children_are_edited_only_by_the_permitted_in_both_engines() {
    // editChildren's lists are deleteUndrained's, so forceReapply's, where
    // the policy leaves them out.
    let admin = users::admin();
    let built_in: [(&str, &str, &[&str]); 1] = [(
        "admin (system:masters)",
        users::username(&admin),
        &users::groups(&admin),
    )];
    let summary = run("built-in", &Policy::built_in(), &edit_cases(&built_in));
    // 18 refusals of each kind, and scaling a Pipeline or an
    // InterStepBufferService (only a MonoVertex's replicas are free).
    assert_eq!(summary.denied, 3 * 18 + 2, "{summary:?}");
    assert_eq!(summary.same_words, summary.denied, "{summary:?}");

    let own =
        Policy::from_yaml("forceReapply:\n  editChildren:\n    users: [bob]\n    groups: [sre]\n")
            .expect("valid");
    let lists: [(&str, &str, &[&str]); 2] = [
        ("bob, in its users", "bob", &["system:authenticated"]),
        (
            "carol, in its group sre",
            "carol",
            &["sre", "system:authenticated"],
        ),
    ];
    run("editChildren lists", &own, &edit_cases(&lists));

    let warn = Policy::from_yaml("mode: warn\n").expect("valid");
    run("warn mode", &warn, &edit_cases(&[]));
}
