//! The wire over real HTTPS: both AdmissionReview apiVersions, HTTP/2,
//! malformed objects answered with the request's uid, and the HTTP error
//! cases (bad bodies, the size limit, methods, paths).

use crate::https_support;

use https_support::{TestServer, fixture, fixture_json, patch_of, response_for, warnings_of};
use hyper::{Method, StatusCode};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

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

/// A body the API server cannot send: JSON broken only inside values no
/// rule reads. The webhook skims those values, checking their brackets,
/// strings and escapes only (src/skim.rs), so it answers such a body from
/// what it read, with the request's uid, as it answers the intact one.
/// Broken brackets, a broken escape, or JSON broken where a rule reads are
/// refused (docs/robustness.md).
#[tokio::test]
async fn json_broken_only_where_no_rule_reads_is_answered() {
    use crate::admission_bodies::nasty::with_text;
    const DENIED: &str = "07-allow-data-loss-true-kubectl-annotate-alice-validate.json";
    const MANAGED: &str = "/request/object/metadata/managedFields";
    const LAST_APPLIED: &str =
        "/request/object/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration";
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let request = fixture_json(DENIED);
    let intact = response_for(&request, &client.post("/validate", fixture(DENIED)).await);
    assert_eq!(intact["allowed"], false);
    let answered: [(&str, &[u8]); 3] = [
        (
            MANAGED,
            br#"[{"manager" "kubectl", "n": 1.2.3, "t": tru, "s": ""}]"#,
        ),
        (LAST_APPLIED, b"\"\xff\xfe\""),
        (
            "/request/object/spec/pipeline/spec/vertices",
            br#"[{"name": 01, +2: nul}]"#,
        ),
    ];
    for (pointer, text) in answered {
        let body = with_text(DENIED, pointer, text);
        assert!(
            serde_json::from_slice::<Value>(&body).is_err(),
            "{pointer}: not JSON"
        );
        let response = response_for(&request, &client.post("/validate", body).await);
        assert_eq!(response, intact, "{pointer}: answered as the intact body");
    }
    let refused: [(&str, &[u8]); 4] = [
        (MANAGED, br#"[{"manager": "kubectl"]"#),
        (MANAGED, br#"[{"manager": "kubectl}]"#),
        (LAST_APPLIED, br#""\q""#),
        ("/request/object/spec/strategy", br#"{"progressive" {}}"#),
    ];
    for (pointer, text) in refused {
        let answer = client
            .post("/validate", with_text(DENIED, pointer, text))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{pointer}: {}",
            answer.text()
        );
        assert!(
            answer.text().contains("not valid JSON"),
            "{}",
            answer.text()
        );
    }
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
