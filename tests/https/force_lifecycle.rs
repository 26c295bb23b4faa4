//! The force lifecycle over real HTTPS: the one-shot reset in `/mutate`
//! (patch applied to the object and checked), the minimum pause age in
//! `/validate`, and `review --now` reproducing a clock-dependent decision.

use crate::https_support;

use https_support::{TestServer, fixture_json, patch_of, response_for, warnings_of};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

const ANNOTATION: &str = "numaplane.numaproj.io/allow-data-loss";

/// Fixture 04 (Argo CD's allow-data-loss action while pausing) turned into
/// an UPDATE that keeps the annotation after the pause is over.
fn kept_after_the_pause(path: &str) -> Value {
    let mut review = fixture_json(path);
    let request = &mut review["request"];
    request["oldObject"]["metadata"]["annotations"][ANNOTATION] = json!("true");
    request["oldObject"]["status"] = json!({
        "phase": "Deployed", "upgradeInProgress": "",
        "conditions": [{"type": "PipelinePausingOrPaused", "status": "False",
                        "reason": "PipelineUnpaused", "lastTransitionTime": "2026-11-29T16:20:00Z"}]
    });
    request["object"]["status"] = request["oldObject"]["status"].clone();
    review
}

#[tokio::test]
async fn mutate_resets_a_force_kept_after_its_pause() {
    let server = TestServer::start(Policy::built_in()).await;
    let review = kept_after_the_pause("04-allow-data-loss-argocd-server-action-mutate.json");
    let answer = server.client().post("/mutate", review.to_string()).await;
    let response = response_for(&review, &answer);
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).expect("a patch");
    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).expect("the patch applies");
    assert_eq!(object["metadata"]["annotations"][ANNOTATION], "false");
    let warnings = warnings_of(&response);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("forced re-apply is over")),
        "{warnings:?}"
    );
    assert!(
        response["auditAnnotations"]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.contains("force-reapply-reset"))),
        "{response}"
    );

    // Re-invoked with the patched object, nothing more changes.
    let mut again = review.clone();
    again["request"]["object"] = object;
    let answer = server.client().post("/mutate", again.to_string()).await;
    let response = response_for(&again, &answer);
    assert!(patch_of(&response).is_none(), "{response}");

    // With oneShot off, the force stays.
    let off =
        TestServer::start(Policy::from_yaml("forceReapply:\n  oneShot: false\n").expect("policy"))
            .await;
    let answer = off.client().post("/mutate", review.to_string()).await;
    let mut object = review["request"]["object"].clone();
    if let Some(patch) = patch_of(&response_for(&review, &answer)) {
        // Only the deletion timeout the fixture lacks is defaulted.
        json_patch::patch(&mut object, &patch).expect("the patch applies");
    }
    assert_eq!(object["metadata"]["annotations"][ANNOTATION], "true");
}

#[tokio::test]
async fn validate_refuses_a_force_on_a_young_pause_and_says_when_it_may() {
    // Fixture 04's pause began at 2026-11-29T16:10:30Z; the server's clock
    // is later than that by far, so a minimum of 1h is met and the force
    // by Argo CD's account is allowed...
    let review = fixture_json("04-allow-data-loss-argocd-server-action-validate.json");
    let server =
        TestServer::start(Policy::from_yaml("forceReapply:\n  minPauseAge: 1h\n").expect("policy"))
            .await;
    let answer = server.client().post("/validate", review.to_string()).await;
    assert_eq!(response_for(&review, &answer)["allowed"], true);

    // ...and a pause that began a minute ago is too young.
    let mut young = review.clone();
    let start = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
    let start = start
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format");
    for path in ["oldObject", "object"] {
        young["request"][path]["status"]["conditions"][0]["lastTransitionTime"] = json!(start);
    }
    let answer = server.client().post("/validate", young.to_string()).await;
    let response = response_for(&young, &answer);
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("the pause has lasted 1m"), "{message}");
    assert!(message.contains("minimum of 1h"), "{message}");
    assert!(message.contains("force only from 20"), "{message}");
}

#[test]
fn review_now_makes_the_pause_age_reproducible() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "forceReapply:\n  minPauseAge: 10m\n").expect("policy");
    let fixture =
        https_support::fixtures_dir().join("04-allow-data-loss-argocd-server-action-validate.json");
    let review = |now: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
            .args(["review", "--webhook", "validate", "--now", now, "--policy"])
            .arg(&policy)
            .arg(&fixture)
            .output()
            .expect("run review")
    };
    // Five minutes into the pause that began at 16:10:30: denied, saying
    // from when a force will be allowed.
    let out = review("2026-11-29T16:15:30Z");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("has lasted 5m"), "{stderr}");
    assert!(stderr.contains("from 2026-11-29T16:20:30Z"), "{stderr}");
    // Twenty minutes in: allowed.
    let out = review("2026-11-29T16:30:30Z");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A --now that is not RFC 3339 is refused with the reason.
    let out = review("yesterday");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RFC 3339"));
}
