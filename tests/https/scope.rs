//! Which requests the webhook judges, over real HTTPS: subresources,
//! CONNECT and children on /mutate pass untouched, a resource it does not
//! guard is allowed with a warning, a child Pipeline is judged by its own
//! rules.

use crate::https_support;

use https_support::{TestServer, fixture_json, response_for};
use pipelinerollout_webhook::policy::Policy;
use serde_json::json;

#[tokio::test]
async fn requests_not_judged_are_allowed_untouched() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let base = fixture_json("13-create-string-timeout-kubectl-create-validate.json");
    let mut subresource = base.clone();
    subresource["request"]["subResource"] = json!("status");
    let mut connect = base.clone();
    connect["request"]["operation"] = json!("CONNECT");
    let mut child_to_mutate = base.clone();
    child_to_mutate["request"]["resource"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "resource": "pipelines"});
    for (name, request, paths) in [
        (
            "status subresource",
            subresource,
            &["/validate", "/mutate"][..],
        ),
        ("CONNECT", connect, &["/validate", "/mutate"][..]),
        (
            "a child Pipeline (never defaulted)",
            child_to_mutate,
            &["/mutate"][..],
        ),
    ] {
        for path in paths {
            let response = response_for(&request, &client.post(path, request.to_string()).await);
            assert_eq!(response["allowed"], true, "{name} {path}");
            assert!(response.get("patch").is_none(), "{name} {path}");
            assert!(response.get("warnings").is_none(), "{name} {path}");
        }
    }
}

#[tokio::test]
async fn a_resource_the_webhook_does_not_know_is_allowed_saying_so() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let mut request = fixture_json("13-create-string-timeout-kubectl-create-validate.json");
    request["request"]["resource"] = json!({"group": "numaplane.numaproj.io",
        "version": "v1alpha1", "resource": "numaplanewidgets"});
    request["request"]["object"]["metadata"]["labels"] =
        json!({"numaplane.numaproj.io/force-promote": "true"});
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], true, "{response}");
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("numaplanewidgets.numaplane.numaproj.io is no kind this webhook guards")
            && warning.contains("force-promote went unchecked"),
        "{response}"
    );
    assert_eq!(
        response["auditAnnotations"]["not-judged"].as_str(),
        Some(warning),
        "{response}"
    );
    let response = response_for(&request, &client.post("/mutate", request.to_string()).await);
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("warnings").is_none(), "{response}");
}

#[tokio::test]
async fn a_child_pipeline_is_judged_over_https() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let mut request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    request["request"]["resource"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "resource": "pipelines"});
    request["request"]["kind"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "kind": "Pipeline"});
    let labels = json!({"numaplane.numaproj.io/upgrade-state": "in-progress"});
    request["request"]["oldObject"]["metadata"]["labels"] = labels.clone();
    request["request"]["object"]["metadata"]["labels"] = labels;
    request["request"]["object"]["metadata"]["labels"]["numaplane.numaproj.io/force-promote"] =
        json!("true");
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "user \"alice\" may not set metadata.labels[\"numaplane.numaproj.io/force-promote\"]"
        ),
        "{message}"
    );
    // The PipelineRollout rules do not read a Pipeline: the fixture's
    // allow-data-loss annotation and timeout are not judged here.
    assert!(!message.contains("allow-data-loss"), "{message}");
    assert_eq!(
        response["auditAnnotations"]["force-promote"].as_str(),
        Some("denied by rule 13: user \"alice\"")
    );
}
