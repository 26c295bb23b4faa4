//! DELETE over real HTTPS, as the API server sends it (`object: null`, the
//! stored object in `oldObject`; the captured fixture 15): a rollout's
//! child judged on the stored object (rule 20), a PipelineRollout's
//! warning (rule 21), and a DELETE without a readable `oldObject` refused
//! with the reason, never allowed silently.

use crate::https_support;

use https_support::{TestServer, fixture_json, response_for, warnings_of};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

/// Fixture 15 (kubectl delete of a PipelineRollout by admin) turned into a
/// DELETE of a Pipeline owned by rollout "demo", by `user`.
fn child_delete(user: &str) -> Value {
    let mut request = fixture_json("15-delete-kubectl-validate.json");
    let r = &mut request["request"];
    r["resource"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "resource": "pipelines"});
    r["kind"] = json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "kind": "Pipeline"});
    r["userInfo"] = json!({"username": user, "groups": ["system:authenticated"]});
    r["oldObject"]["apiVersion"] = json!("numaflow.numaproj.io/v1alpha1");
    r["oldObject"]["kind"] = json!("Pipeline");
    r["oldObject"]["metadata"]["labels"] =
        json!({"numaplane.numaproj.io/parent-rollout-name": "demo"});
    request
}

#[tokio::test]
async fn a_child_delete_is_judged_on_the_stored_object() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let request = child_delete("alice");
    assert!(
        request["request"]["object"].is_null(),
        "as the API server sends it"
    );
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("user \"alice\" may not delete this Pipeline of PipelineRollout \"demo\""),
        "{message}"
    );
    assert_eq!(
        response["auditAnnotations"]["delete-child"].as_str(),
        Some("denied by rule 20: user \"alice\"")
    );
    // A dry run is judged the same.
    let mut dry = child_delete("alice");
    dry["request"]["dryRun"] = json!(true);
    let response = response_for(&dry, &client.post("/validate", dry.to_string()).await);
    assert_eq!(response["allowed"], false, "{response}");
    // The garbage collector may.
    let gc = child_delete("system:serviceaccount:kube-system:generic-garbage-collector");
    let response = response_for(&gc, &client.post("/validate", gc.to_string()).await);
    assert_eq!(response["allowed"], true, "{response}");
    // /mutate has nothing to say on a DELETE.
    let response = response_for(&request, &client.post("/mutate", request.to_string()).await);
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
}

#[tokio::test]
async fn a_delete_without_a_readable_old_object_is_refused_saying_why() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    for (name, old, found) in [
        ("missing", None, "request.oldObject is missing"),
        ("null", Some(Value::Null), "request.oldObject is null"),
        (
            "a string",
            Some(json!("x")),
            "request.oldObject is a string",
        ),
    ] {
        for mut request in [
            child_delete("alice"),
            fixture_json("15-delete-kubectl-validate.json"),
        ] {
            let r = request["request"].as_object_mut().expect("a request");
            match &old {
                None => {
                    r.remove("oldObject");
                }
                Some(v) => {
                    r.insert("oldObject".to_owned(), v.clone());
                }
            }
            let response = response_for(
                &request,
                &client.post("/validate", request.to_string()).await,
            );
            assert_eq!(response["allowed"], false, "{name}: {response}");
            let message = response["status"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(found), "{name}: {message}");
            assert!(
                message.contains("judged on the stored object"),
                "{name}: {message}"
            );
        }
    }
}

#[tokio::test]
async fn a_pipeline_rollout_delete_warns_of_its_deletion_timeout() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let mut request = fixture_json("15-delete-kubectl-validate.json");
    request["request"]["oldObject"]["spec"]["pipeline"]["spec"]["lifecycle"] =
        json!({"deleteGracePeriodSeconds": 120});
    let answer = client.post("/validate", request.to_string()).await;
    let response = response_for(&request, &answer);
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = warnings_of(&response);
    assert_eq!(
        warnings,
        ["its Pipelines are deleted too, each drained at most 120s, then undrained data is lost"],
        "{response}"
    );
}
