//! Rule 26 over real HTTPS, with AdmissionReviews in the shape the API
//! server sends for `kubectl patch`: a forged status on a child's
//! `/status` subresource is refused to a namespace editor (answer, audit
//! annotation, the `force_decisions` and `denials` series) and allowed to
//! a holder of forceReapply.editChildren; a `/scale` write is not judged;
//! bad input gets a clear refusal, never a silent allow.

use crate::https_support;

use https_support::{TestServer, metric_value, response_for};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

/// A stored Pipeline that PipelineRollout `demo` owns, as the API server
/// sends it (keys in sorted order, as Go writes an object's map).
fn stored() -> Value {
    json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {
            "creationTimestamp": "2026-12-04T10:00:00Z",
            "finalizers": ["numaflow.numaproj.io/finalizer"],
            "generation": 1,
            "labels": {"numaplane.numaproj.io/parent-rollout-name": "demo",
                "numaplane.numaproj.io/upgrade-state": "promoted"},
            "name": "demo-0",
            "namespace": "team-a",
            "ownerReferences": [{"apiVersion": "numaplane.numaproj.io/v1alpha1", "blockOwnerDeletion": true,
                "controller": true, "kind": "PipelineRollout", "name": "demo",
                "uid": "5b1f8d0e-8f39-4f7e-9a43-6f3c2b1f0a11"}],
            "resourceVersion": "4711",
            "uid": "0c8d3f2e-1d5a-4b6e-8f7a-2e9c4d1b3a55"
        },
        "spec": {
            "edges": [{"from": "in", "to": "out"}],
            "lifecycle": {"deleteGracePeriodSeconds": 30, "deletionGracePeriodSeconds": 30,
                "desiredPhase": "Running", "pauseGracePeriodSeconds": 30},
            "vertices": [{"name": "in", "source": {"generator": {}}}, {"name": "out", "sink": {"log": {}}}]
        },
        "status": {"drainedOnPause": false, "phase": "Running"}
    })
}

/// An UPDATE of `resource` (and `sub_resource`) by `username` (groups
/// `groups`) from the stored Pipeline to `object`.
fn review(sub_resource: Option<&str>, user: (&str, &[&str]), object: Value) -> Value {
    let resource =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "resource": "pipelines"});
    let kind = json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "kind": "Pipeline"});
    let mut request = json!({
        "uid": "8f3a4c1e-77b2-4a0d-9c6e-1b2d3e4f5a60",
        "kind": kind, "resource": resource,
        "requestKind": kind, "requestResource": resource,
        "name": "demo-0", "namespace": "team-a", "operation": "UPDATE",
        "userInfo": {"username": user.0, "groups": user.1},
        "object": object, "oldObject": stored(), "dryRun": false,
        "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-patch"}
    });
    if let Some(sub) = sub_resource {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})
}

fn with(edit: impl FnOnce(&mut Value)) -> Value {
    let mut object = stored();
    edit(&mut object);
    object
}

const ALICE: (&str, &[&str]) = ("alice", &["devs", "system:authenticated"]);
const ADMIN: (&str, &[&str]) = ("admin", &["system:masters", "system:authenticated"]);

#[tokio::test]
async fn a_forged_child_status_is_refused_to_an_editor_and_allowed_to_a_holder() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let ask = |request: Value| {
        let client = &client;
        async move {
            response_for(
                &request,
                &client.post("/validate", request.to_string()).await,
            )
        }
    };
    let forged = with(|o| o["status"] = json!({"drainedOnPause": true, "phase": "Paused"}));

    let refused = ask(review(Some("status"), ALICE, forged.clone())).await;
    assert_eq!(refused["allowed"], false, "{refused}");
    let message = refused["status"]["message"].as_str().unwrap_or_default();
    for part in [
        "user \"alice\" may not change status.drainedOnPause, status.phase of this Pipeline of PipelineRollout \"demo\"",
        "change the PipelineRollout instead",
        "forceReapply.editChildren",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(refused["status"]["code"], 403, "{refused}");
    assert!(
        refused["auditAnnotations"]["edit-child"]
            .as_str()
            .is_some_and(|a| a.starts_with("denied by rule 26")),
        "{refused}"
    );

    let allowed = ask(review(Some("status"), ADMIN, forged)).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert!(
        allowed["auditAnnotations"]["edit-child"]
            .as_str()
            .is_some_and(|a| a.starts_with("allowed: user \"admin\"")),
        "{allowed}"
    );

    // Scaling never needs the permission (and `/scale` is not judged).
    let scaled = ask(review(
        Some("scale"),
        ALICE,
        with(|o| o["spec"]["replicas"] = json!(3)),
    ))
    .await;
    assert_eq!(scaled["allowed"], true, "{scaled}");
    assert!(
        scaled["auditAnnotations"].get("edit-child").is_none(),
        "{scaled}"
    );

    let (_, _, metrics) = server.admin_get("/metrics").await;
    let series =
        |name: &str| metric_value(&metrics, name).unwrap_or_else(|| panic!("{name}:\n{metrics}"));
    assert_eq!(
        series(
            "pipelinerollout_webhook_force_decisions_total{gate=\"edit-child\",result=\"denied\"} "
        ),
        1.0
    );
    assert_eq!(
        series(
            "pipelinerollout_webhook_force_decisions_total{gate=\"edit-child\",result=\"allowed\"} "
        ),
        1.0
    );
    assert_eq!(
        series("pipelinerollout_webhook_denials_total{rule=\"26\"} "),
        1.0
    );
}

#[tokio::test]
async fn bad_child_input_is_refused_with_a_clear_message() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let cases: [(&str, Value, &str); 3] = [
        (
            "ownerReferences that are not a list",
            with(|o| o["metadata"]["ownerReferences"] = json!("demo")),
            "may not change metadata.ownerReferences of this Pipeline",
        ),
        (
            "a status that is not an object",
            with(|o| o["status"] = json!("Failed")),
            "may not change status of this Pipeline",
        ),
        (
            "no labels, the finalizers removed",
            with(|o| {
                o["metadata"].as_object_mut().map(|m| m.remove("labels"));
                o["metadata"]["finalizers"] = Value::Null;
            }),
            "may not change metadata.finalizers of this Pipeline of PipelineRollout \"demo\"",
        ),
    ];
    for (name, object, says) in cases {
        let request = review(None, ALICE, object);
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(response["allowed"], false, "{name}: {response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{name}: {message}");
    }
    // A child whose keys arrive out of Go's order (spec before kind) is
    // still read whole: its vertex removal is judged.
    let text = review(None, ALICE, with(|o| o["spec"]["vertices"] = json!([])))
        .to_string()
        .replace(
            "\"apiVersion\":\"numaflow.numaproj.io/v1alpha1\",\"kind\":\"Pipeline\",",
            "",
        );
    let reordered = text.replace(
        "\"status\":{\"drainedOnPause\":false,\"phase\":\"Running\"}}",
        "\"status\":{\"drainedOnPause\":false,\"phase\":\"Running\"},\"kind\":\"Pipeline\"}",
    );
    let request: Value = serde_json::from_str(&reordered).expect("JSON");
    let response = response_for(&request, &client.post("/validate", reordered).await);
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.vertices")),
        "{response}"
    );
}
