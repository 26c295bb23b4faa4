//! The accounts the webhook configurations keep off the webhook follow the
//! chart's policy value: `helm template` with other accounts, and the
//! rendered matchConditions evaluated by a CEL interpreter (the real API
//! server runs the default ones in `tests/apiserver/children.rs`) on the
//! shapes the API server sends. Each account the rendered policy names (as
//! the rules read it, parsed by the webhook's own loader) is exempt where
//! the rules would allow it, and the built-in one is not; Numaplane's
//! controller is kept off all six webhooks but for the one write rule 19
//! refuses it too.
//!
//! Needs `helm` (3.8 or newer) on the PATH.

use crate::helm_support;

use helm_support::{policy_text, template, write};
use pipelinerollout_webhook::kinds::{
    NUMAFLOW_CONTROLLER, NUMAPLANE_CONTROLLER, PARENT_ROLLOUT, PAUSE_TIMESTAMP, SYSTEM_DELETERS,
    UPGRADE_STATE,
};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

const NUMAPLANE: &str = "system:serviceaccount:numaplane:numaplane-controller-manager";
const NUMAFLOW: &str = "system:serviceaccount:numaflow:numaflow-controller";
const DELETER: &str = "system:serviceaccount:ops:o'brien-gc";

/// One write as the API server shows it to a matchCondition.
struct Write {
    resource: &'static str,
    operation: &'static str,
    object: Value,
    old: Value,
}

/// Whether every matchCondition of `hook` lets `user`'s `write` through
/// (the API server calls the webhook only then).
fn sent(hook: &Value, user: &str, write: &Write) -> bool {
    // The interpreter recurses once per operator of the long `||` chains:
    // more than a test thread's stack holds.
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(scope, || sent_here(hook, user, write))
            .expect("a thread")
            .join()
            .expect("evaluated")
    })
}

fn sent_here(hook: &Value, user: &str, write: &Write) -> bool {
    let conditions = hook["matchConditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !conditions.is_empty(),
        "{}: no matchConditions",
        hook["name"]
    );
    let mut context = cel::Context::default();
    let value = |v: Value| cel::to_value(v).expect("a CEL value");
    context.add_variable_from_value("object", value(write.object.clone()));
    context.add_variable_from_value("oldObject", value(write.old.clone()));
    context.add_variable_from_value(
        "request",
        value(json!({"operation": write.operation,
            "resource": {"resource": write.resource},
            "userInfo": {"username": user}})),
    );
    conditions.iter().all(|condition| {
        let text = condition["expression"].as_str().expect("an expression");
        let program = cel::Program::compile(text)
            .unwrap_or_else(|e| panic!("{}: {text} does not compile: {e}", hook["name"]));
        match program.execute(&context) {
            Ok(cel::Value::Bool(b)) => b,
            other => panic!("{}: {text} gives {other:?}", hook["name"]),
        }
    })
}

/// The webhooks of both configurations, by name.
fn webhooks(docs: &[Value]) -> Vec<Value> {
    docs.iter()
        .filter(|d| {
            d["kind"] == "ValidatingWebhookConfiguration"
                || d["kind"] == "MutatingWebhookConfiguration"
        })
        .flat_map(|d| d["webhooks"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn hook<'a>(hooks: &'a [Value], short: &str) -> &'a Value {
    let name = format!("{short}.pipelinerollout-webhook.numaplane.numaproj.io");
    hooks
        .iter()
        .find(|h| h["name"] == name.as_str())
        .unwrap_or_else(|| panic!("no webhook {name}"))
}

fn child(labels: Value, annotations: Value) -> Value {
    json!({"metadata": {"name": "p-1", "labels": labels, "annotations": annotations}, "spec": {}})
}

/// A write of every webhook's kind that the rules judge when anyone but
/// Numaplane's controller makes it: (webhook, write).
fn judged_writes() -> Vec<(&'static str, Write)> {
    let rollout = json!({"metadata": {"name": "demo"}, "spec": {"pipeline": {}}});
    let promote = |template: &str| {
        json!({"metadata": {"name": "demo"}, "spec": {
            template: {"metadata": {"labels": {UPGRADE_STATE: "recyclable"}}}}})
    };
    let config = json!({"metadata": {"name": "numaplane-config",
        "labels": {"numaplane.numaproj.io/config": "namespace-level-config"}},
        "data": {"upgradeStrategy": "progressive"}});
    vec![
        (
            "mutate",
            Write {
                resource: "pipelinerollouts",
                operation: "UPDATE",
                object: rollout.clone(),
                old: rollout.clone(),
            },
        ),
        (
            "validate",
            Write {
                resource: "pipelinerollouts",
                operation: "UPDATE",
                object: rollout.clone(),
                old: rollout,
            },
        ),
        (
            "validate-children",
            Write {
                resource: "pipelines",
                operation: "UPDATE",
                object: child(json!({UPGRADE_STATE: "recyclable"}), json!({})),
                old: child(json!({UPGRADE_STATE: "promoted"}), json!({})),
            },
        ),
        (
            "validate-monovertexrollouts",
            Write {
                resource: "monovertexrollouts",
                operation: "CREATE",
                object: promote("monoVertex"),
                old: Value::Null,
            },
        ),
        (
            "validate-isbservicerollouts",
            Write {
                resource: "isbservicerollouts",
                operation: "CREATE",
                object: promote("interStepBufferService"),
                old: Value::Null,
            },
        ),
        (
            "validate-numaflow-controllers",
            Write {
                resource: "numaflowcontrollers",
                operation: "UPDATE",
                object: json!({"metadata": {"name": "c"}, "spec": {"version": "9.9.9"}}),
                old: json!({"metadata": {"name": "c"}, "spec": {"version": "1.8.1"}}),
            },
        ),
        (
            "validate-namespace-config",
            Write {
                resource: "configmaps",
                operation: "UPDATE",
                object: config.clone(),
                old: config,
            },
        ),
    ]
}

/// An UPDATE of a daemon Service: `part` (`spec`, `status`) set to
/// `value`, or a label or annotation named `value` added.
fn made_write(part: &str, value: Value) -> Write {
    let old = json!({"metadata": {"name": "p-daemon-svc",
        "labels": {"app.kubernetes.io/part-of": "numaflow", "numaflow.numaproj.io/pipeline-name": "p"}},
        "spec": {"selector": {"app": "daemon"}}, "status": {"readyReplicas": 1}});
    let mut object = old.clone();
    match part {
        "label" | "annotation" => {
            let map = if part == "label" {
                "labels"
            } else {
                "annotations"
            };
            let key = value.as_str().unwrap_or_default().to_owned();
            object["metadata"][map][key] = json!("x");
        }
        _ => object[part] = value,
    }
    Write {
        resource: "services",
        operation: "UPDATE",
        object,
        old,
    }
}

fn stamp() -> Write {
    Write {
        resource: "pipelines",
        operation: "UPDATE",
        object: child(
            json!({UPGRADE_STATE: "promoted"}),
            json!({PAUSE_TIMESTAMP: "2020-01-01T00:00:00Z"}),
        ),
        old: child(json!({UPGRADE_STATE: "promoted"}), json!({})),
    }
}

fn delete_owned() -> Write {
    Write {
        resource: "pipelines",
        operation: "DELETE",
        object: Value::Null,
        old: child(json!({PARENT_ROLLOUT: "demo"}), json!({})),
    }
}

#[test]
fn the_policys_accounts_are_the_ones_the_webhooks_keep_off() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let values = write(
        dir.path(),
        "accounts.yaml",
        &format!(
            "policy:\n  numaplane:\n    controllerAccount: {NUMAPLANE:?}\n  numaflow:\n    controllerAccount: {NUMAFLOW:?}\n  forceReapply:\n    deleteUndrained:\n      systemDeleters: [{DELETER:?}]\n"
        ),
    );
    let docs = template(&["-f", values.to_str().expect("a UTF-8 path")]);
    // The rules read these accounts from the rendered policy.
    let policy = Policy::from_yaml(&policy_text(&docs)).expect("the rendered policy loads");
    assert_eq!(policy.numaplane.controller_account, NUMAPLANE);
    assert_eq!(policy.numaflow.controller_account, NUMAFLOW);
    assert_eq!(
        policy
            .force_reapply
            .delete_undrained
            .own
            .system_deleters
            .iter()
            .collect::<Vec<_>>(),
        [DELETER]
    );
    let hooks = webhooks(&docs);
    assert_eq!(hooks.len(), 9, "mutate and eight validating webhooks");
    for (short, write) in judged_writes() {
        let hook = hook(&hooks, short);
        assert!(
            !sent(hook, NUMAPLANE, &write),
            "{short}: the policy's Numaplane controller is kept off"
        );
        assert!(
            sent(hook, NUMAPLANE_CONTROLLER, &write),
            "{short}: the built-in account is judged like anyone"
        );
        assert!(sent(hook, "alice", &write), "{short}: alice is judged");
    }
    let children = hook(&hooks, "validate-children");
    for (user, want) in [
        (NUMAFLOW, false),
        (NUMAFLOW_CONTROLLER, true),
        (NUMAPLANE, true),
        ("alice", true),
    ] {
        assert_eq!(
            sent(children, user, &stamp()),
            want,
            "{user} sets pause-timestamp (rule 19)"
        );
    }
    for short in ["validate-numaflow-vertices", "validate-numaflow-workloads"] {
        let made = hook(&hooks, short);
        for (user, write, want) in [
            (NUMAFLOW, made_write("spec", json!({"replicas": 2})), false),
            (
                NUMAFLOW_CONTROLLER,
                made_write("spec", json!({"replicas": 2})),
                true,
            ),
            (
                "alice",
                made_write("spec", json!({"selector": {"app": "mine"}})),
                true,
            ),
            (
                "alice",
                made_write("status", json!({"readyReplicas": 0})),
                true,
            ),
            (
                "alice",
                made_write("label", json!("numaflow.numaproj.io/pipeline-name")),
                true,
            ),
            ("alice", made_write("label", json!("team")), false),
            (
                "alice",
                made_write("annotation", json!("deployment.kubernetes.io/revision")),
                false,
            ),
        ] {
            assert_eq!(
                sent(made, user, &write),
                want,
                "{short}: {user} writes {:?} (rule 29)",
                write.object
            );
        }
    }
    for (user, want) in [
        (DELETER, false),
        (NUMAPLANE, false),
        (SYSTEM_DELETERS[0], true),
        (SYSTEM_DELETERS[1], true),
        ("alice", true),
    ] {
        assert_eq!(
            sent(children, user, &delete_owned()),
            want,
            "{user} deletes an owned child (rule 20)"
        );
    }
}

#[test]
fn without_a_policy_value_the_built_in_accounts_are_kept_off() {
    let hooks = webhooks(&template(&[]));
    for (short, write) in judged_writes() {
        let hook = hook(&hooks, short);
        assert!(
            !sent(hook, NUMAPLANE_CONTROLLER, &write),
            "{short}: the built-in Numaplane controller is kept off"
        );
        assert!(
            sent(hook, NUMAPLANE, &write),
            "{short}: another account is judged"
        );
    }
    let children = hook(&hooks, "validate-children");
    assert!(!sent(children, NUMAFLOW_CONTROLLER, &stamp()));
    assert!(sent(children, NUMAFLOW, &stamp()));
    for deleter in SYSTEM_DELETERS {
        assert!(!sent(children, deleter, &delete_owned()), "{deleter}");
    }
    assert!(sent(children, DELETER, &delete_owned()));
}
