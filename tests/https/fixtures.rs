//! Every captured AdmissionReview through the endpoint it was captured for,
//! over real HTTPS: the answer tests/fixtures/README.md documents for it,
//! and each patch applied, checked and sent again.

use crate::https_support;

use https_support::{
    TIMEOUT_POINTER, TestServer, fixture, fixture_json, patch_of, patched_object, response_for,
    warnings_of,
};
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
    // Rule 21: a DELETE of a PipelineRollout warns of its deletion timeout.
    allow_warning(
        "15-delete-kubectl-validate.json",
        "its Pipelines are deleted too, each drained at most 30s",
    ),
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
