//! The deletion timeout and a child Pipeline's lifecycle over real HTTPS:
//! captured AdmissionReviews with the deletion fields set to each kind of
//! value, through `/validate` (denials, warnings) and `/mutate` (the patch,
//! applied to the object).

use crate::https_support;

use https_support::{Client, TestServer, fixture_json, patch_of, response_for, warnings_of};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

/// The captured CREATE with `lifecycle` merged into its lifecycle.
fn create_with(file: &str, lifecycle: Value) -> Value {
    let mut request = fixture_json(file);
    let target = &mut request["request"]["object"]["spec"]["pipeline"]["spec"]["lifecycle"];
    if !target.is_object() {
        *target = json!({});
    }
    if let (Some(all), Some(more)) = (target.as_object_mut(), lifecycle.as_object()) {
        all.extend(more.clone());
    }
    request
}

async fn answer(client: &Client, path: &str, request: &Value) -> Value {
    response_for(request, &client.post(path, request.to_string()).await)
}

#[tokio::test]
async fn deletion_timeout_values_over_https() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let file = "01-create-kubectl-apply-validate.json";
    let cases: Vec<(Value, bool, &str)> = vec![
        (json!({"deletionGracePeriodSeconds": 30}), true, ""),
        (json!({"deletionGracePeriodSeconds": 3600}), true, ""),
        (json!({"deletionGracePeriodSeconds": null}), true, ""),
        (
            json!({"deletionGracePeriodSeconds": 0}),
            false,
            "dropping unconsumed messages",
        ),
        (
            json!({"deletionGracePeriodSeconds": "30s"}),
            false,
            "not an integer",
        ),
        (
            json!({"deletionGracePeriodSeconds": 31_536_000}),
            false,
            "does not allow no timeout",
        ),
        (
            json!({"deletionGracePeriodSeconds": u64::MAX}),
            false,
            "time.Duration",
        ),
        (
            json!({"deleteGracePeriodSeconds": -1}),
            false,
            "deleteGracePeriodSeconds is -1",
        ),
    ];
    for (lifecycle, allowed, says) in cases {
        let response = answer(&client, "/validate", &create_with(file, lifecycle.clone())).await;
        assert_eq!(response["allowed"], allowed, "{lifecycle}: {response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{lifecycle}: {message}");
        if !allowed {
            assert!(
                message.contains("GracePeriodSeconds is"),
                "{lifecycle}: {message}"
            );
        }
    }
    // The deprecated field alone: allowed with the warning kubectl shows.
    let response = answer(
        &client,
        "/validate",
        &create_with(file, json!({"deleteGracePeriodSeconds": 60})),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        warnings_of(&response),
        [
            "deleteGracePeriodSeconds is deprecated: rename it deletionGracePeriodSeconds (Numaflow reads that first)"
        ]
    );
    // Both, different: the ignored one warns.
    let response = answer(
        &client,
        "/validate",
        &create_with(
            file,
            json!({"deletionGracePeriodSeconds": 60, "deleteGracePeriodSeconds": 0}),
        ),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        warnings_of(&response),
        [
            "deleteGracePeriodSeconds 0 is ignored: Numaflow uses deletionGracePeriodSeconds 60; remove it"
        ]
    );
}

#[tokio::test]
async fn mutate_defaults_the_deletion_timeout_and_never_the_deprecated_field() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let file = "01-create-kubectl-apply-mutate.json";
    let apply = |request: &Value, response: &Value| {
        let mut object = request["request"]["object"].clone();
        if let Some(patch) = patch_of(response) {
            json_patch::patch(&mut object, &patch.0).expect("the patch applies");
        }
        object
    };
    let lifecycle = |object: &Value| object["spec"]["pipeline"]["spec"]["lifecycle"].clone();

    // Neither field: deletionTimeout.default (30) is written beside the rest.
    let request = create_with(file, json!({}));
    let response = answer(&client, "/mutate", &request).await;
    let object = apply(&request, &response);
    let mut want = lifecycle(&request["request"]["object"]);
    want["deletionGracePeriodSeconds"] = json!(30);
    assert_eq!(lifecycle(&object), want, "{response}");
    assert_eq!(
        response["auditAnnotations"]["deletion-timeout-default"].as_str(),
        Some("30 (30s)")
    );
    // Re-invoked on the patched object: nothing more to do.
    let mut again = request.clone();
    again["request"]["object"] = object;
    assert!(patch_of(&answer(&client, "/mutate", &again).await).is_none());

    // No lifecycle at all: both timeouts, one after the other.
    let mut request = fixture_json(file);
    if let Some(spec) = request["request"]["object"]["spec"]["pipeline"]["spec"].as_object_mut() {
        spec.remove("lifecycle");
    }
    let response = answer(&client, "/mutate", &request).await;
    assert_eq!(
        lifecycle(&apply(&request, &response)),
        json!({"pauseGracePeriodSeconds": 31_536_000, "deletionGracePeriodSeconds": 30})
    );

    // The deprecated field is the user's: nothing is added beside it.
    let request = create_with(file, json!({"deleteGracePeriodSeconds": 120}));
    let response = answer(&client, "/mutate", &request).await;
    let object = apply(&request, &response);
    assert_eq!(lifecycle(&object)["deleteGracePeriodSeconds"], 120);
    assert!(
        lifecycle(&object)
            .get("deletionGracePeriodSeconds")
            .is_none(),
        "{object}"
    );
    // An invalid present value is left for /validate.
    let request = create_with(file, json!({"deletionGracePeriodSeconds": "1m"}));
    let response = answer(&client, "/mutate", &request).await;
    assert_eq!(
        lifecycle(&apply(&request, &response))["deletionGracePeriodSeconds"],
        "1m"
    );
}

#[tokio::test]
async fn a_child_pipelines_lifecycle_over_https() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let mut request = fixture_json("02-update-timeout-kubectl-apply-validate.json");
    request["request"]["resource"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "resource": "pipelines"});
    request["request"]["kind"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "kind": "Pipeline"});
    let crd = json!({"pauseGracePeriodSeconds": 30, "deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30});
    request["request"]["oldObject"]["spec"]["lifecycle"] = crd.clone();
    for (key, value, allowed, says) in [
        (
            "pauseGracePeriodSeconds",
            json!(0),
            false,
            "spec.lifecycle.pauseGracePeriodSeconds is 0",
        ),
        (
            "deletionGracePeriodSeconds",
            json!(-1),
            false,
            "spec.lifecycle.deletionGracePeriodSeconds is -1",
        ),
        (
            "pauseGracePeriodSeconds",
            json!("1m"),
            false,
            "not an integer",
        ),
        ("pauseGracePeriodSeconds", json!(600), true, ""),
    ] {
        let mut edited = request.clone();
        let mut lifecycle = crd.clone();
        lifecycle[key] = value.clone();
        edited["request"]["object"]["spec"]["lifecycle"] = lifecycle;
        let response = answer(&client, "/validate", &edited).await;
        assert_eq!(response["allowed"], allowed, "{key} {value}: {response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{key} {value}: {message}");
    }
    // A lifecycle that is not an object: a clear denial, never a panic.
    let mut edited = request.clone();
    edited["request"]["object"]["spec"]["lifecycle"] = json!("Paused");
    let response = answer(&client, "/validate", &edited).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.lifecycle is a string, not an object")),
        "{response}"
    );
}
