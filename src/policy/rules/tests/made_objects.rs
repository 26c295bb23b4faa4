//! Rule 29: what Numaflow makes for a rollout's child (a Vertex, the
//! daemon Service and Deployment, a vertex's workloads) is changed only by
//! Numaflow's controller, the deleters as they delete, and holders of
//! forceReapply.editChildren. Each case is judged with a table of the
//! children standing in for the server's view of them.

use super::fixtures::by_static_lists;
use serde_json::{Value, json};

use super::fixtures::{admin, alice, built_in, parse, warn_mode};
use crate::kinds::{Kind, Made, NUMAFLOW_CONTROLLER, SYSTEM_DELETERS};
use crate::policy::rules::made_objects::{self, Belonging, ChildLookup, MadeWrite};
use crate::policy::rules::{EventReason, Operation, Verdict};
use crate::policy::{Policy, UserInfo};

/// The children: Pipeline `demo-0` is the rollout `demo`'s, `plain` is
/// no rollout's, and the MonoVertices cannot be told (their list is not in).
#[derive(Debug)]
struct Table;

impl ChildLookup for Table {
    fn belonging(&self, namespace: &str, parents: &[(Kind, String)]) -> Belonging {
        assert_eq!(namespace, "team-a");
        for (kind, name) in parents {
            match (kind, name.as_str()) {
                (Kind::Pipeline, "demo-0") => {
                    return Belonging::Guarded {
                        kind: *kind,
                        child: name.clone(),
                        rollout: "demo".to_owned(),
                    };
                }
                (Kind::MonoVertex, _) => {
                    return Belonging::Unknown("the monovertices are not listed yet".to_owned());
                }
                _ => {}
            }
        }
        Belonging::Free
    }
}

/// A daemon Service as Numaflow makes it for Pipeline `pipeline`.
fn daemon_service(pipeline: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("{pipeline}-daemon-svc"), "namespace": "team-a",
            "labels": {"app.kubernetes.io/part-of": "numaflow",
                "numaflow.numaproj.io/pipeline-name": pipeline},
            "ownerReferences": [{"apiVersion": "numaflow.numaproj.io/v1alpha1",
                "kind": "Pipeline", "name": pipeline, "uid": "u1", "controller": true}]},
        "spec": {"selector": {"app.kubernetes.io/component": "daemon"}, "ports": [{"port": 4327}]}})
}

/// A Vertex of Pipeline `pipeline` (named by its label only), with a status.
fn vertex(pipeline: &str) -> Value {
    json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Vertex",
        "metadata": {"name": format!("{pipeline}-cat"), "namespace": "team-a",
            "labels": {"numaflow.numaproj.io/pipeline-name": pipeline}},
        "spec": {"name": "cat", "replicas": 1},
        "status": {"phase": "Running", "readyReplicas": 1}})
}

fn changed(mut doc: Value, edit: impl FnOnce(&mut Value)) -> Value {
    edit(&mut doc);
    doc
}

fn account(name: &str) -> UserInfo {
    UserInfo::new(name, &["system:serviceaccounts", "system:authenticated"])
}

/// Judges a write of `kind` by `user` (an UPDATE from `old`, else a
/// CREATE), the permission answered from the policy's static lists.
fn judge(
    policy: &Policy,
    kind: Made,
    user: &UserInfo,
    old: Option<&Value>,
    new: &Value,
) -> Verdict {
    let (object, old_object) = (parse(new), old.map(parse));
    let mut write = MadeWrite {
        kind,
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace: "team-a",
        user,
        object: &object,
        old_object: old_object.as_ref(),
        belonging: Belonging::Free,
    };
    write.look_up(Some(&Table));
    by_static_lists(made_objects::validate(policy, write), policy, user)
}

/// One case: what, kind, user, the stored object (`None`: a CREATE), the
/// object written, and what the denial says (`None`: allowed).
type Row<'a> = (
    &'a str,
    Made,
    &'a UserInfo,
    Option<&'a Value>,
    &'a Value,
    Option<&'a str>,
);

#[test]
fn the_reviews_doors_are_shut_and_the_rest_stays_open() {
    let service = daemon_service("demo-0");
    let selector = changed(service.clone(), |d| {
        d["spec"]["selector"] = json!({"app": "mine"})
    });
    let relabel = changed(service.clone(), |d| {
        d["metadata"]["labels"]["team"] = json!("a")
    });
    let scaled = changed(vertex("demo-0"), |d| d["spec"]["replicas"] = json!(5));
    let forged = changed(vertex("demo-0"), |d| {
        d["status"]["readyReplicas"] = json!(0)
    });
    let orphaned = changed(service.clone(), |d| {
        d["metadata"]["ownerReferences"] = json!([])
    });
    let unreadable = changed(service.clone(), |d| d["metadata"]["labels"] = json!("x"));
    let plain = daemon_service("plain");
    let plain_selector = changed(plain.clone(), |d| d["spec"]["selector"] = json!({}));
    let mono = changed(
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "mv", "namespace": "team-a",
            "labels": {"numaflow.numaproj.io/mono-vertex-name": "mv"}},
        "spec": {"template": {"spec": {"containers": [{"image": "a"}]}}}}),
        |_| {},
    );
    let mono_image = changed(mono.clone(), |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("b");
    });
    let numaflow = account(NUMAFLOW_CONTROLLER);
    let collector = account(SYSTEM_DELETERS[0]);
    let (alice, admin, v0) = (alice(), admin(), vertex("demo-0"));
    let policy = built_in();
    // (what, kind, user, old, new, denied: the first words of the field named)
    let cases: Vec<Row<'_>> = vec![
        (
            "daemon selector",
            Made::Service,
            &alice,
            Some(&service),
            &selector,
            Some(
                "change spec.selector of this Service of Pipeline \"demo-0\" of PipelineRollout \"demo\"",
            ),
        ),
        (
            "extra Vertex",
            Made::Vertex,
            &alice,
            None,
            &v0,
            Some("make this Vertex of Pipeline \"demo-0\""),
        ),
        (
            "forged Vertex status",
            Made::Vertex,
            &alice,
            Some(&v0),
            &forged,
            Some("change status.readyReplicas of this Vertex"),
        ),
        (
            "ownerReferences dropped",
            Made::Service,
            &alice,
            Some(&service),
            &orphaned,
            Some("change metadata.ownerReferences of this Service"),
        ),
        (
            "labels unreadable",
            Made::Service,
            &alice,
            Some(&service),
            &unreadable,
            Some("of a child of a rollout (it could not be told: metadata.labels is a string)"),
        ),
        (
            "MonoVertex not listed yet",
            Made::Deployment,
            &alice,
            Some(&mono),
            &mono_image,
            Some("(it could not be told: the monovertices are not listed yet)"),
        ),
        (
            "own label",
            Made::Service,
            &alice,
            Some(&service),
            &relabel,
            None,
        ),
        (
            "scaling a Vertex",
            Made::Vertex,
            &alice,
            Some(&v0),
            &scaled,
            None,
        ),
        (
            "no rollout's Pipeline",
            Made::Service,
            &alice,
            Some(&plain),
            &plain_selector,
            None,
        ),
        (
            "holder of editChildren",
            Made::Service,
            &admin,
            Some(&service),
            &selector,
            None,
        ),
        (
            "Numaflow's controller",
            Made::Service,
            &numaflow,
            Some(&service),
            &selector,
            None,
        ),
        (
            "the garbage collector orphaning",
            Made::Service,
            &collector,
            Some(&service),
            &orphaned,
            None,
        ),
        (
            "the garbage collector changing the spec",
            Made::Service,
            &collector,
            Some(&service),
            &selector,
            Some("change spec.selector"),
        ),
    ];
    for (what, kind, user, old, new, denied) in cases {
        let verdict = judge(&policy, kind, user, old, new);
        let message = verdict.denial_message();
        match denied {
            Some(says) => {
                let text = message.unwrap_or_else(|| panic!("{what}: allowed"));
                assert!(text.contains(says), "{what}: {text}");
                assert!(text.contains("forceReapply.editChildren"), "{what}: {text}");
                assert_eq!(
                    verdict
                        .audit
                        .get("edit-child")
                        .map(|v| v.starts_with("denied by rule 29")),
                    Some(true),
                    "{what}: {:?}",
                    verdict.audit
                );
            }
            None => assert!(message.is_none(), "{what}: {message:?}"),
        }
    }
}

#[test]
fn a_holder_is_recorded_and_warn_mode_denies_nothing() {
    let service = daemon_service("demo-0");
    let selector = changed(service.clone(), |d| {
        d["spec"]["selector"] = json!({"app": "mine"})
    });
    let verdict = judge(
        &built_in(),
        Made::Service,
        &admin(),
        Some(&service),
        &selector,
    );
    let reasons: Vec<EventReason> = verdict.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [EventReason::ChildEditAllowed]);
    assert!(
        verdict.events[0].note.contains(
            "spec.selector on this Service of Pipeline \"demo-0\" of PipelineRollout \"demo\""
        ),
        "{:?}",
        verdict.events
    );
    let denied = judge(
        &built_in(),
        Made::Service,
        &alice(),
        Some(&service),
        &selector,
    );
    let reasons: Vec<EventReason> = denied.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [EventReason::ChildEditDenied]);

    let warned = judge(
        &warn_mode(),
        Made::Service,
        &alice(),
        Some(&service),
        &selector,
    );
    assert!(warned.denials.is_empty());
    assert!(
        warned.warnings.iter().any(|w| w.starts_with("warn mode, would deny: alice may not change spec.selector of the Service of a rollout's Pipeline \"demo-0\"")),
        "{:?}",
        warned.warnings
    );
}

#[test]
fn without_a_view_of_the_children_a_named_child_is_judged_as_a_rollouts() {
    let service = daemon_service("plain");
    let selector = changed(service.clone(), |d| d["spec"]["selector"] = json!({}));
    let (object, old) = (parse(&selector), parse(&service));
    let user = alice();
    let mut write = MadeWrite {
        kind: Made::Service,
        operation: Operation::Update,
        namespace: "team-a",
        user: &user,
        object: &object,
        old_object: Some(&old),
        belonging: Belonging::Free,
    };
    write.look_up(None);
    assert!(
        matches!(write.belonging, Belonging::Unknown(_)),
        "{:?}",
        write.belonging
    );
    // An object that names no child needs no view.
    let bare = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
    let bare = parse(&bare);
    write.object = &bare;
    write.old_object = None;
    write.look_up(None);
    assert_eq!(write.belonging, Belonging::Free);
}
