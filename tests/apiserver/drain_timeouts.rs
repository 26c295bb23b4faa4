//! End-to-end: the deletion timeout and a child Pipeline's own lifecycle,
//! through a real kube-apiserver with Numaplane's PipelineRollout CRD,
//! Numaflow's Pipeline CRD (which defaults the lifecycle's timeouts to 30)
//! and the project's manifests and policy. Users write with kubectl and
//! see what kubectl shows them: the denial and the warnings.
//!
//! The scenarios share one cluster and take turns (`TURN`): the webhook
//! call counter read in one needs no other request in flight.

use crate::apiserver_children_support;
use crate::apiserver_support;

use std::sync::MutexGuard;

use apiserver_children_support::{
    CHILDREN_WEBHOOK, assert_refused_by, before_webhooks, child, children_calls, team,
};
use apiserver_support::{ROLLOUTS, assert_refused, rollout, stored};
use envtest::{Installation, User};
use serde_json::{Value, json};

const PIPELINES: &str = "pipelines.numaflow.numaproj.io";

/// The shared installation, and this scenario's turn on it.
fn shared() -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    static SHARED: apiserver_children_support::Shared = apiserver_children_support::Shared::new();
    apiserver_children_support::shared(&SHARED, before_webhooks)
}

/// The sample rollout with a pause timeout of 300 and `lifecycle` besides.
fn rollout_with(ns: &str, name: &str, lifecycle: Value) -> Value {
    let mut object = rollout(ns, name, Some(json!(300)));
    let target = &mut object["spec"]["pipeline"]["spec"]["lifecycle"];
    if let (Some(all), Some(more)) = (target.as_object_mut(), lifecycle.as_object()) {
        all.extend(more.clone());
    }
    object
}

fn lifecycle_of(object: &Value) -> &Value {
    &object["spec"]["pipeline"]["spec"]["lifecycle"]
}

#[test]
fn a_rollouts_deletion_timeout_is_judged_defaulted_and_warned() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-deletion-timeout";
    team(cluster, ns);
    let alice = cluster.kubectl(User::Alice);

    // A bad deletion timeout is refused, saying where, what and how to fix it.
    for (value, says) in [
        (
            json!(0),
            "spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds is 0, below the minimum of 30",
        ),
        (
            json!("30s"),
            "spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds is \"30s\", which is not an integer number of seconds",
        ),
        (json!(31_536_000), "does not allow no timeout"),
    ] {
        let object = rollout_with(ns, "bad", json!({"deletionGracePeriodSeconds": value}));
        let out = alice.create(&object, &[]);
        assert_refused(&out, says);
        assert!(
            out.stderr.contains("set 30 to 3600 seconds")
                || !value.is_number()
                || value == 31_536_000
        );
    }
    assert!(alice.get(ROLLOUTS, ns, "bad").is_none());

    // None set: /mutate writes deletionTimeout.default (30) beside the pause timeout.
    alice
        .create(&rollout_with(ns, "plain", json!({})), &[])
        .expect_success("a rollout that sets no deletion timeout");
    let object = stored(&alice, ns, "plain");
    assert_eq!(lifecycle_of(&object)["deletionGracePeriodSeconds"], 30);
    assert_eq!(lifecycle_of(&object)["pauseGracePeriodSeconds"], 300);
    assert!(
        lifecycle_of(&object)
            .get("deleteGracePeriodSeconds")
            .is_none()
    );

    // Only the deprecated field: judged, kept, and kubectl shows the warning.
    let out = alice.create(
        &rollout_with(ns, "old-name", json!({"deleteGracePeriodSeconds": 120})),
        &[],
    );
    let out = out.expect_success("a rollout with the deprecated deletion timeout");
    assert!(
        out.stderr.contains(
            "Warning: deleteGracePeriodSeconds is deprecated: rename it deletionGracePeriodSeconds"
        ),
        "{out}"
    );
    let object = stored(&alice, ns, "old-name");
    assert_eq!(lifecycle_of(&object)["deleteGracePeriodSeconds"], 120);
    assert!(
        lifecycle_of(&object)
            .get("deletionGracePeriodSeconds")
            .is_none(),
        "the user's deprecated field is never written over: {object}"
    );
    let out = alice.create(
        &rollout_with(ns, "old-bad", json!({"deleteGracePeriodSeconds": 0})),
        &[],
    );
    assert_refused(
        &out,
        "spec.pipeline.spec.lifecycle.deleteGracePeriodSeconds is 0",
    );

    // Both, different: allowed, with the warning that the old one is ignored.
    let out = alice.merge_patch(
        ROLLOUTS,
        ns,
        "plain",
        &json!({"spec": {"pipeline": {"spec": {"lifecycle": {"deleteGracePeriodSeconds": 0}}}}}),
        &[],
    );
    let out = out.expect_success("both set");
    assert!(
        out.stderr.contains(
            "Warning: deleteGracePeriodSeconds 0 is ignored: Numaflow uses deletionGracePeriodSeconds 30"
        ),
        "{out}"
    );
}

#[test]
fn a_child_pipelines_lifecycle_is_judged_unless_the_controller_writes_it() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-child-lifecycle";
    team(cluster, ns);
    child(cluster, ns, "Pipeline", "demo-1", Some("promoted"));
    let read = |key: &str| {
        cluster
            .kubectl(User::Admin)
            .get(PIPELINES, ns, "demo-1")
            .map(|o| o["spec"]["lifecycle"][key].clone())
    };
    // Numaflow's CRD defaults both deletion fields (and the pause timeout) to 30.
    assert_eq!(read("deletionGracePeriodSeconds"), Some(json!(30)));
    assert_eq!(read("deleteGracePeriodSeconds"), Some(json!(30)));

    let patch = |key: &str, value: Value| json!({"spec": {"lifecycle": {key: value}}});
    // Editing a rollout's child needs forceReapply.editChildren (rule 26),
    // which carol holds through RBAC (the group sre); the timeouts are
    // judged for her all the same.
    let out = cluster.kubectl(User::Alice).merge_patch(
        PIPELINES,
        ns,
        "demo-1",
        &patch("pauseGracePeriodSeconds", json!(600)),
        &[],
    );
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "user \"alice\" may not change spec.lifecycle.pauseGracePeriodSeconds of this Pipeline",
    );
    let carol = cluster.kubectl(User::Carol);
    for (key, value, says) in [
        (
            "pauseGracePeriodSeconds",
            json!(0),
            "spec.lifecycle.pauseGracePeriodSeconds is 0, below the minimum of 30",
        ),
        (
            "deletionGracePeriodSeconds",
            json!(0),
            "spec.lifecycle.deletionGracePeriodSeconds is 0, below the minimum of 30",
        ),
        (
            "deletionGracePeriodSeconds",
            json!(31_536_000),
            "does not allow no timeout",
        ),
    ] {
        let out = carol.merge_patch(PIPELINES, ns, "demo-1", &patch(key, value), &[]);
        assert_refused_by(&out, CHILDREN_WEBHOOK, says);
    }
    assert_eq!(read("pauseGracePeriodSeconds"), Some(json!(30)));
    // Within range: allowed. The deprecated field, which Numaflow ignores
    // while deletionGracePeriodSeconds is set: allowed with a warning.
    carol
        .merge_patch(
            PIPELINES,
            ns,
            "demo-1",
            &patch("pauseGracePeriodSeconds", json!(600)),
            &[],
        )
        .expect_success("a pause timeout within range");
    let out = carol.merge_patch(
        PIPELINES,
        ns,
        "demo-1",
        &patch("deleteGracePeriodSeconds", json!(0)),
        &[],
    );
    let out = out.expect_success("the ignored deprecated field");
    assert!(
        out.stderr
            .contains("Warning: deleteGracePeriodSeconds 0 is ignored"),
        "{out}"
    );

    // Numaplane's controller copies a judged rollout's values: its write
    // reaches no webhook.
    let before = children_calls(env);
    cluster
        .kubectl(User::NumaplaneController)
        .merge_patch(
            PIPELINES,
            ns,
            "demo-1",
            &patch("pauseGracePeriodSeconds", json!(0)),
            &[],
        )
        .expect_success("the controller's write of the lifecycle");
    assert_eq!(read("pauseGracePeriodSeconds"), Some(json!(0)));
    assert_eq!(
        children_calls(env),
        before,
        "the controller's write was sent"
    );
    // A user's write of something else is not sent either.
    cluster
        .kubectl(User::Alice)
        .merge_patch(
            PIPELINES,
            ns,
            "demo-1",
            &json!({"metadata": {"labels": {"app": "x"}}}),
            &[],
        )
        .expect_success("an ordinary label");
    assert_eq!(children_calls(env), before, "an ordinary write was sent");
    // The stored 0 is the controller's; a user's edit of another timeout
    // is judged, and the unchanged 0 only warns (ratcheting).
    let out = carol.merge_patch(
        PIPELINES,
        ns,
        "demo-1",
        &patch("deletionGracePeriodSeconds", json!(60)),
        &[],
    );
    let out = out.expect_success("another timeout, the stored 0 unchanged");
    assert!(out.stderr.contains("unchanged, so allowed"), "{out}");
    assert!(children_calls(env) > before);
}
