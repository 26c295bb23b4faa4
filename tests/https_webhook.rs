//! The webhook over real HTTPS: every captured AdmissionReview through the
//! endpoint it was captured for, variations of each rule, both apiVersions,
//! warn mode, namespace overrides and the HTTP error cases.

mod https_support;

use https_support::{
    Client, TIMEOUT_POINTER, TestServer, fixture, fixture_json, patch_of, response_for, warnings_of,
};
use hyper::{Method, StatusCode};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

/// What the built-in policy must answer to a fixture.
struct Expect {
    file: &'static str,
    allowed: bool,
    /// The drain timeout a patch must write, if any.
    patched: Option<u64>,
    /// A piece of the denial message, or of a warning when allowed.
    says: Option<&'static str>,
}

const fn allow(file: &'static str) -> Expect {
    Expect {
        file,
        allowed: true,
        patched: None,
        says: None,
    }
}

const fn allow_warning(file: &'static str, says: &'static str) -> Expect {
    Expect {
        file,
        allowed: true,
        patched: None,
        says: Some(says),
    }
}

const fn deny(file: &'static str, says: &'static str) -> Expect {
    Expect {
        file,
        allowed: false,
        patched: None,
        says: Some(says),
    }
}

const fn patch(file: &'static str) -> Expect {
    Expect {
        file,
        allowed: true,
        patched: Some(31_536_000),
        says: None,
    }
}

/// The table from tests/fixtures/README.md: what the built-in policy makes
/// of each fixture.
const FIXTURES: &[Expect] = &[
    allow("01-create-kubectl-apply-validate.json"),
    allow("01-create-kubectl-apply-mutate.json"),
    deny(
        "02-update-timeout-kubectl-apply-validate.json",
        "7200, above the maximum of 3600",
    ),
    allow("02-update-timeout-kubectl-apply-mutate.json"),
    allow_warning(
        "03-finalizer-numaplane-controller-validate.json",
        "unchanged, so allowed: pauseGracePeriodSeconds 7200",
    ),
    allow("03-finalizer-numaplane-controller-mutate.json"),
    allow_warning(
        "04-allow-data-loss-argocd-server-action-validate.json",
        "unchanged, so allowed",
    ),
    allow("04-allow-data-loss-argocd-server-action-mutate.json"),
    allow_warning(
        "05-disallow-data-loss-argocd-server-action-validate.json",
        "unchanged, so allowed",
    ),
    allow("05-disallow-data-loss-argocd-server-action-mutate.json"),
    deny(
        "06-allow-data-loss-capital-True-kubectl-annotate-alice-validate.json",
        "is \"True\", which Numaplane ignores",
    ),
    allow("06-allow-data-loss-capital-True-kubectl-annotate-alice-mutate.json"),
    deny(
        "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
        "user \"alice\" may not set",
    ),
    allow("07-allow-data-loss-true-kubectl-annotate-alice-mutate.json"),
    allow_warning(
        "08-remove-annotation-kubectl-annotate-alice-validate.json",
        "unchanged, so allowed",
    ),
    allow("08-remove-annotation-kubectl-annotate-alice-mutate.json"),
    deny(
        "09-force-promote-json-patch-alice-validate.json",
        "user \"alice\" may not turn on spec.strategy.progressive.forcePromote",
    ),
    allow("09-force-promote-json-patch-alice-mutate.json"),
    // The sync keeps the forcePromote fixture 09 turned on: rule 12.
    allow_warning(
        "10-argocd-sync-server-side-apply-validate.json",
        "forcePromote is still true: the next upgrade skips assessment",
    ),
    allow("10-argocd-sync-server-side-apply-mutate.json"),
    allow("11-create-no-lifecycle-kubectl-create-validate.json"),
    patch("11-create-no-lifecycle-kubectl-create-mutate.json"),
    allow("12-create-dry-run-server-alice-validate.json"),
    patch("12-create-dry-run-server-alice-mutate.json"),
    deny(
        "13-create-string-timeout-kubectl-create-validate.json",
        "is \"1h\", which is not an integer number of seconds",
    ),
    allow("13-create-string-timeout-kubectl-create-mutate.json"),
    deny(
        "14-create-with-allow-data-loss-alice-validate.json",
        "a new PipelineRollout cannot be pausing",
    ),
    patch("14-create-with-allow-data-loss-alice-mutate.json"),
    allow("15-delete-kubectl-validate.json"),
    allow("16-create-v1beta1-validate.json"),
    allow("17-create-isb-paused-kubectl-create-validate.json"),
    patch("17-create-isb-paused-kubectl-create-mutate.json"),
    allow("18-allow-data-loss-isbsvc-triggered-pause-argocd-server-action-validate.json"),
    patch("18-allow-data-loss-isbsvc-triggered-pause-argocd-server-action-mutate.json"),
];

fn endpoint(file: &str) -> &'static str {
    if file.ends_with("-mutate.json") {
        "/mutate"
    } else {
        "/validate"
    }
}

/// Applies a response's patch to the request's object and returns the result.
fn patched_object(request: &Value, response: &Value) -> Option<Value> {
    let patch = patch_of(response)?;
    let mut object = request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch.0).expect("patch applies to the object");
    Some(object)
}

#[tokio::test]
async fn every_fixture_gets_the_documented_answer() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let listed: Vec<&str> = FIXTURES.iter().map(|e| e.file).collect();
    for entry in std::fs::read_dir(https_support::fixtures_dir()).expect("fixtures") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        assert!(
            listed.contains(&name.as_str()),
            "fixture {name} has no expectation"
        );
    }
    for expect in FIXTURES {
        let request = fixture_json(expect.file);
        let answer = client
            .post(endpoint(expect.file), fixture(expect.file))
            .await;
        let response = response_for(&request, &answer);
        let case = expect.file;
        assert_eq!(response["allowed"], expect.allowed, "{case}: {response}");
        if expect.allowed {
            assert!(
                response["status"].get("code").is_none_or(|c| c != 403),
                "{case}"
            );
        } else {
            assert_eq!(response["status"]["code"], 403, "{case}");
            assert_eq!(response["status"]["reason"], "Forbidden", "{case}");
            assert!(
                response.get("patch").is_none(),
                "{case}: a denial carries no patch"
            );
        }
        if endpoint(case) == "/validate" {
            assert!(
                response.get("patch").is_none(),
                "{case}: a validating answer carries no patch"
            );
        }
        if let Some(says) = expect.says {
            let text = if expect.allowed {
                warnings_of(&response).join("\n")
            } else {
                response["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            };
            assert!(text.contains(says), "{case}: {text:?} lacks {says:?}");
        } else if expect.allowed {
            assert!(
                warnings_of(&response).is_empty(),
                "{case}: unexpected warnings {response}"
            );
        }
        // /mutate writes the pause timeout where the table says, and the
        // deletion timeout's default (30 s) where the object sets neither
        // deletion field; nothing else.
        let original = request["request"]["object"].clone();
        let mut expected = original.clone();
        if let Some(seconds) = expect.patched {
            set_lifecycle(&mut expected, "pauseGracePeriodSeconds", json!(seconds));
        }
        let lifecycle = &original["spec"]["pipeline"]["spec"]["lifecycle"];
        if endpoint(case) == "/mutate"
            && expect.allowed
            && lifecycle.get("deletionGracePeriodSeconds").is_none()
            && lifecycle.get("deleteGracePeriodSeconds").is_none()
        {
            set_lifecycle(&mut expected, "deletionGracePeriodSeconds", json!(30));
        }
        match patched_object(&request, &response) {
            None => assert_eq!(expected, original, "{case}: expected a patch"),
            Some(object) => {
                assert_eq!(
                    object.pointer(TIMEOUT_POINTER),
                    expected.pointer(TIMEOUT_POINTER),
                    "{case}"
                );
                assert_eq!(
                    object, expected,
                    "{case}: the patch changed more than the timeouts"
                );
                // Sent again, the patched object needs no further change.
                let mut again = request.clone();
                again["request"]["object"] = object;
                let answer = client.post("/mutate", again.to_string()).await;
                let response = response_for(&again, &answer);
                assert_eq!(
                    patch_of(&response),
                    None,
                    "{case}: mutation is not idempotent"
                );
            }
        }
    }
}

/// Sets `key` in the object's `spec.pipeline.spec.lifecycle`, creating it.
fn set_lifecycle(object: &mut Value, key: &str, value: Value) {
    let spec = &mut object["spec"]["pipeline"]["spec"];
    if !spec["lifecycle"].is_object() {
        spec["lifecycle"] = json!({});
    }
    spec["lifecycle"][key] = value;
}

#[tokio::test]
async fn the_patched_object_passes_validation() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let request = fixture_json("11-create-no-lifecycle-kubectl-create-mutate.json");
    let response = response_for(&request, &client.post("/mutate", request.to_string()).await);
    let object = patched_object(&request, &response).expect("a patch");
    let mut validate = fixture_json("11-create-no-lifecycle-kubectl-create-validate.json");
    validate["request"]["object"] = object;
    let response = response_for(
        &validate,
        &client.post("/validate", validate.to_string()).await,
    );
    assert_eq!(response["allowed"], true, "{response}");
}

/// Fixture 07 (alice sets allow-data-loss to "true" while the pipeline is
/// pausing) with the user, groups and stored status varied.
#[tokio::test]
async fn force_reapply_by_user_group_and_status() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let base = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let pausing_condition =
        json!([{"type": "PipelinePausingOrPaused", "status": "True", "reason": "PipelinePausing"}]);
    let paused_condition =
        json!([{"type": "PipelinePausingOrPaused", "status": "True", "reason": "PipelinePaused"}]);
    // (name, username, groups, replacement old status, allowed, message piece)
    type Case = (
        &'static str,
        Value,
        Value,
        Option<Value>,
        bool,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        // (name, username, groups, replacement old status, allowed, message piece)
        (
            "alice, pausing",
            json!("alice"),
            json!(["devs"]),
            None,
            false,
            "not in forceReapply.users",
        ),
        (
            "argocd-server, pausing",
            json!("system:serviceaccount:argocd:argocd-server"),
            json!([]),
            None,
            true,
            "",
        ),
        (
            "a system:masters member",
            json!("bob"),
            json!(["system:masters", "system:authenticated"]),
            None,
            true,
            "",
        ),
        (
            "argocd-server, not pausing",
            json!("system:serviceaccount:argocd:argocd-server"),
            json!([]),
            Some(json!({"upgradeInProgress": "", "conditions": []})),
            false,
            "the pipeline is not pausing",
        ),
        (
            "argocd-server, ISB-triggered pause (condition only)",
            json!("system:serviceaccount:argocd:argocd-server"),
            json!([]),
            Some(json!({"upgradeInProgress": "", "conditions": pausing_condition})),
            true,
            "",
        ),
        (
            "argocd-server, already paused",
            json!("system:serviceaccount:argocd:argocd-server"),
            json!([]),
            Some(json!({"conditions": paused_condition})),
            false,
            "the pipeline is not pausing",
        ),
        (
            "alice, not pausing: both reasons",
            json!("alice"),
            json!(["devs"]),
            Some(json!({})),
            false,
            "; and the pipeline is not pausing",
        ),
    ];
    for (name, username, groups, old_status, allowed, says) in cases {
        let mut request = base.clone();
        request["request"]["userInfo"]["username"] = username;
        request["request"]["userInfo"]["groups"] = groups;
        if let Some(status) = old_status {
            request["request"]["oldObject"]["status"] = status;
        }
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(response["allowed"], allowed, "{name}: {response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{name}: {message}");
        let audit = response["auditAnnotations"]["force-reapply"]
            .as_str()
            .unwrap_or_default();
        let want = if allowed {
            "allowed"
        } else {
            "denied by rule 6"
        };
        assert!(audit.starts_with(want), "{name}: audit {audit:?}");
        if !allowed {
            let user = request["request"]["userInfo"]["username"]
                .as_str()
                .unwrap_or_default();
            assert!(
                message.contains(&format!("user \"{user}\"")),
                "{name}: names the user"
            );
        }
    }
}

#[tokio::test]
async fn timeout_values_over_https() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let base = fixture_json("01-create-kubectl-apply-validate.json");
    let cases: Vec<(Value, bool, &str)> = vec![
        (json!(30), true, ""),
        (json!(3600), true, ""),
        (json!(31_536_000), true, ""),
        (json!(29), false, "below the minimum of 30"),
        (json!(0), false, "without draining"),
        (json!(-1), false, "below the minimum"),
        (json!(3601), false, "above the maximum of 3600"),
        (json!("300"), false, "not an integer"),
        (json!(30.5), false, "not an integer"),
        (json!(true), false, "not an integer"),
        (json!(5_000_000_000u64), false, "overflow"),
        (json!(u64::MAX), false, "overflow"),
        (Value::Null, true, ""),
    ];
    for (value, allowed, says) in cases {
        let mut request = base.clone();
        request["request"]["object"]["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"] =
            value.clone();
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(response["allowed"], allowed, "{value}: {response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{value}: {message}");
        if !allowed {
            assert!(
                message.contains("spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds"),
                "{value}: names the field"
            );
        }
    }
}

#[tokio::test]
async fn every_violation_is_listed() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let mut request = fixture_json("14-create-with-allow-data-loss-alice-validate.json");
    let object = &mut request["request"]["object"];
    object["spec"]["pipeline"]["spec"]["lifecycle"] = json!({"pauseGracePeriodSeconds": 7200});
    object["spec"]["strategy"] =
        json!({"recycleStrategy": {"scaleFactor": 0}, "progressive": {"forcePromote": true}});
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().expect("message");
    for piece in [
        "(1)",
        "(2)",
        "(3)",
        "(4)",
        "7200",
        "scaleFactor is 0",
        "allow-data-loss",
        "forcePromote",
    ] {
        assert!(message.contains(piece), "{piece} missing from {message}");
    }
}

#[tokio::test]
async fn warn_mode_denies_nothing() {
    let policy = Policy::from_yaml("mode: warn\n").expect("policy");
    let server = TestServer::start(policy).await;
    let client = server.client();
    for file in [
        "02-update-timeout-kubectl-apply-validate.json",
        "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
        "13-create-string-timeout-kubectl-create-validate.json",
        "14-create-with-allow-data-loss-alice-validate.json",
    ] {
        let request = fixture_json(file);
        let response = response_for(&request, &client.post("/validate", fixture(file)).await);
        assert_eq!(response["allowed"], true, "{file}: {response}");
        let warnings = warnings_of(&response);
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("warn mode, would deny:")),
            "{file}: {warnings:?}"
        );
    }
    let request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    let audit = response["auditAnnotations"]["force-reapply"]
        .as_str()
        .expect("audit");
    assert!(audit.starts_with("would-deny"), "{audit}");
}

#[tokio::test]
async fn namespace_overrides_apply_to_validate_and_mutate() {
    let policy = Policy::from_yaml(
        "drainTimeout:\n  namespaces:\n  - match: [\"team-*\"]\n    default: 5m\n    allowNoTimeout: false\n    max: 2h\n",
    )
    .expect("policy");
    let server = TestServer::start(policy).await;
    let client = server.client();
    // Mutate in team-a writes the override's default.
    let request = fixture_json("11-create-no-lifecycle-kubectl-create-mutate.json");
    let response = response_for(&request, &client.post("/mutate", request.to_string()).await);
    let object = patched_object(&request, &response).expect("patch");
    assert_eq!(object.pointer(TIMEOUT_POINTER), Some(&json!(300)));
    // Elsewhere, the cluster-wide default (no timeout).
    let mut elsewhere = request.clone();
    elsewhere["request"]["namespace"] = json!("ledger");
    let response = response_for(
        &elsewhere,
        &client.post("/mutate", elsewhere.to_string()).await,
    );
    let object = patched_object(&elsewhere, &response).expect("patch");
    assert_eq!(object.pointer(TIMEOUT_POINTER), Some(&json!(31_536_000)));
    // 7200 is within team-*'s max; no timeout is not allowed there.
    let base = fixture_json("01-create-kubectl-apply-validate.json");
    for (namespace, value, allowed) in [
        ("team-a", 7200, true),
        ("team-a", 31_536_000, false),
        ("ledger", 7200, false),
        ("ledger", 31_536_000, true),
    ] {
        let mut request = base.clone();
        request["request"]["namespace"] = json!(namespace);
        request["request"]["object"]["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"] =
            json!(value);
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(
            response["allowed"], allowed,
            "{namespace} {value}: {response}"
        );
    }
}

#[tokio::test]
async fn v1beta1_is_answered_in_v1beta1_on_both_endpoints() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let request = fixture_json("16-create-v1beta1-validate.json");
    let response = response_for(
        &request,
        &client
            .post("/validate", fixture("16-create-v1beta1-validate.json"))
            .await,
    );
    assert_eq!(response["allowed"], true);
    let mut mutate = fixture_json("11-create-no-lifecycle-kubectl-create-mutate.json");
    mutate["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let response = response_for(&mutate, &client.post("/mutate", mutate.to_string()).await);
    assert!(patch_of(&response).is_some());
}

#[tokio::test]
async fn http2_is_negotiated_and_served() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client().http2();
    let request = fixture_json("02-update-timeout-kubectl-apply-validate.json");
    let answer = client.post("/validate", request.to_string()).await;
    assert_eq!(answer.version, hyper::Version::HTTP_2);
    let response = response_for(&request, &answer);
    assert_eq!(response["allowed"], false);
}

#[tokio::test]
async fn malformed_objects_get_a_clear_answer_with_the_uid() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let base = fixture_json("01-create-kubectl-apply-validate.json");
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/spec/pipeline",
            json!("a string"),
            "spec.pipeline is a string, not an object",
        ),
        ("/spec", json!(42), "spec is a number, not an object"),
        (
            "/spec/pipeline/spec/lifecycle",
            json!([1, 2]),
            "spec.pipeline.spec.lifecycle is an array",
        ),
        (
            "/metadata/annotations",
            json!("x"),
            "metadata.annotations is a string",
        ),
    ];
    for (pointer, value, says) in cases {
        let mut request = base.clone();
        *request["request"]["object"]
            .pointer_mut(pointer)
            .expect("pointer") = value;
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(response["allowed"], false, "{pointer}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{pointer}: {message}");
        // /mutate allows it without a patch, with a warning.
        let mut mutate = request.clone();
        if let Some(spec) = mutate
            .pointer_mut("/request/object/spec/pipeline/spec")
            .and_then(Value::as_object_mut)
        {
            spec.remove("lifecycle");
        }
        let response = response_for(&mutate, &client.post("/mutate", mutate.to_string()).await);
        assert_eq!(response["allowed"], true, "{pointer}");
    }
    let mut request = base.clone();
    request["request"]["object"]["spec"] = json!("oops");
    let response = response_for(&request, &client.post("/mutate", request.to_string()).await);
    assert_eq!(response["allowed"], true);
    assert_eq!(patch_of(&response), None);
    assert!(
        warnings_of(&response)
            .iter()
            .any(|w| w.contains("spec is a string")),
        "{response}"
    );
    // The object itself missing or not an object.
    for object in [Value::Null, json!("x"), json!([1])] {
        let mut request = base.clone();
        request["request"]["object"] = object.clone();
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(response["allowed"], false, "{object}");
        assert!(
            response["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("request.object")
        );
    }
}

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
        "version": "v1alpha1", "resource": "numaflowcontrollerrollouts"});
    request["request"]["object"]["metadata"]["labels"] =
        json!({"numaplane.numaproj.io/force-promote": "true"});
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], true, "{response}");
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains(
            "numaflowcontrollerrollouts.numaplane.numaproj.io is no kind this webhook guards"
        ) && warning.contains("force-promote went unchecked"),
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

#[tokio::test]
async fn http_errors() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let good = fixture("01-create-kubectl-apply-validate.json");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not JSON", b"hello".to_vec(), "not valid JSON"),
        ("empty", Vec::new(), "not valid JSON"),
        ("JSON array", b"[1,2]".to_vec(), "not an AdmissionReview"),
        ("no request", br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), "no request"),
        ("no uid", br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#.to_vec(), "no request.uid"),
        ("other kind", br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}"#.to_vec(), "not AdmissionReview"),
        ("unknown version", br#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x"}}"#.to_vec(), "unsupported"),
        ("truncated", good[..good.len() / 2].to_vec(), "not valid JSON"),
    ];
    for (name, body, says) in cases {
        for path in ["/validate", "/mutate"] {
            let answer = client.post(path, body.clone()).await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{name} {path}");
            let text = answer.text();
            assert!(text.contains(says), "{name}: {text}");
            assert_eq!(text.trim_end().lines().count(), 1, "{name}: one line");
        }
    }
    // The Content-Type does not matter, and the API server's ?timeout= is accepted.
    let answer = client
        .request(
            Method::POST,
            "/validate?timeout=10s",
            "text/plain",
            good.clone().into(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    // Too large: 413.
    let answer = client
        .post("/validate", vec![b' '; 8 * 1024 * 1024 + 1])
        .await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Just under the limit is read (and is not JSON).
    let mut big = good.clone();
    big.resize(8 * 1024 * 1024, b' ');
    assert_eq!(client.post("/validate", big).await.status, StatusCode::OK);
    // Wrong method, unknown path.
    let answer = client
        .request(
            Method::GET,
            "/validate",
            "application/json",
            Default::default(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    let answer = client.post("/nope", good.clone()).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    // The server still answers normally afterwards.
    let request = fixture_json("01-create-kubectl-apply-validate.json");
    let response = response_for(&request, &client.post("/validate", good).await);
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn dry_run_is_judged_like_any_request() {
    let server = TestServer::start(Policy::built_in()).await;
    let client: Client = server.client();
    let mut request = fixture_json("13-create-string-timeout-kubectl-create-validate.json");
    request["request"]["dryRun"] = json!(true);
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], false);
}
