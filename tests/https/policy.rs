//! The policy's rules over real HTTPS, varied from the fixtures: who may
//! force a reapply, the drain timeout's values, every violation in one
//! denial, warn mode, namespace overrides and dry runs.

use crate::https_support;

use https_support::{
    Client, TIMEOUT_POINTER, TestServer, fixture, fixture_json, patched_object, response_for,
    warnings_of,
};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

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
