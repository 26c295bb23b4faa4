//! Numaplane's namespace-level ConfigMap over real HTTPS (rules 23 and 24):
//! AdmissionReviews for `configmaps` as the API server sends them, and the
//! bad ones it never sends: no object, no stored object on UPDATE, no
//! `data`, a strategy that is not a string; keys Numaplane's Go decoder
//! reads as upgradeStrategy in another case, and several of them. Each gets a clear answer with
//! the uid, never a panic; the gate's audit annotation and metric.

use crate::https_support;

use https_support::{TestServer, response_for, warnings_of};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

/// An AdmissionReview of `operation` on a ConfigMap in `team-a` by alice.
fn review(operation: &str, object: Value, old: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7d3a5e4c-0b8f-4f4e-9a55-1f1c2d3e4f50",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "numaplane-config",
            "namespace": "team-a",
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        },
    })
}

fn config_map(data: Value) -> Value {
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "numaplane-config", "namespace": "team-a",
            "labels": {"numaplane.numaproj.io/config": "namespace-level-config"}},
    });
    if !data.is_null() {
        object["data"] = data;
    }
    object
}

#[tokio::test]
async fn namespace_configmaps_get_a_clear_answer_with_the_uid() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let strategy = |value: Value| config_map(json!({"upgradeStrategy": value}));
    // (name, request, allowed, text the message or a warning holds)
    let cases = [
        (
            "progressive",
            review("CREATE", strategy(json!("progressive")), Value::Null),
            true,
            "",
        ),
        (
            "no-strategy",
            review("CREATE", strategy(json!("no-strategy")), Value::Null),
            false,
            "user \"alice\" may not set data.upgradeStrategy to \"no-strategy\" in namespace \"team-a\"",
        ),
        (
            "a number",
            review("CREATE", strategy(json!(42)), Value::Null),
            false,
            "data.upgradeStrategy is 42, not a string, which Numaplane does not accept",
        ),
        (
            "data a list",
            review("CREATE", config_map(json!(["x"])), Value::Null),
            false,
            "data is an array, not an object",
        ),
        (
            "no data",
            review("CREATE", config_map(Value::Null), Value::Null),
            true,
            "has no data: Numaplane ignores it",
        ),
        (
            "no object",
            review("CREATE", Value::Null, Value::Null),
            false,
            "request.object is null; a CREATE of a ConfigMap must carry the object",
        ),
        (
            "an UPDATE without the stored object",
            review("UPDATE", strategy(json!("progressive")), Value::Null),
            false,
            "request.oldObject is null; an UPDATE of a ConfigMap must carry the stored object",
        ),
        (
            "an UPDATE adding the label",
            review(
                "UPDATE",
                strategy(json!("")),
                json!({"metadata": {"name": "numaplane-config"}, "data": {"upgradeStrategy": ""}}),
            ),
            false,
            "empty or blank (Numaplane reads it as \"no-strategy\")",
        ),
        // Keys Numaplane's Go decoder reads as upgradeStrategy.
        (
            "UpgradeStrategy no-strategy",
            review(
                "CREATE",
                config_map(json!({"UpgradeStrategy": "no-strategy"})),
                Value::Null,
            ),
            false,
            "may not set data.UpgradeStrategy (which Numaplane reads as upgradeStrategy: Go matches keys in any case) to \"no-strategy\"",
        ),
        (
            "UPGRADESTRATEGY empty",
            review(
                "CREATE",
                config_map(json!({"UPGRADESTRATEGY": ""})),
                Value::Null,
            ),
            false,
            "to empty or blank (Numaplane reads it as \"no-strategy\")",
        ),
        (
            "two keys",
            review(
                "CREATE",
                config_map(json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""})),
                Value::Null,
            ),
            false,
            "data has both \"upgradestrategy\" and \"upgradeStrategy\"",
        ),
        (
            "a key added to an admin's pause-and-drain",
            review(
                "UPDATE",
                config_map(
                    json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": "no-strategy"}),
                ),
                strategy(json!("pause-and-drain")),
            ),
            false,
            "may not set data.upgradestrategy (which Numaplane reads as upgradeStrategy",
        ),
        (
            "a non-string under another case",
            review(
                "CREATE",
                config_map(json!({"UpgradeStrategy": {"a": 1}})),
                Value::Null,
            ),
            false,
            "data.UpgradeStrategy (which Numaplane reads as upgradeStrategy: Go matches keys in any case) is {\"a\":1}, not a string",
        ),
        (
            "a DELETE is not judged",
            review("DELETE", Value::Null, strategy(json!("no-strategy"))),
            true,
            "",
        ),
    ];
    for (name, request, allowed, says) in cases {
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        assert_eq!(response["allowed"], allowed, "{name}: {response}");
        let text = format!(
            "{} {}",
            response["status"]["message"].as_str().unwrap_or_default(),
            warnings_of(&response).join(" ")
        );
        assert!(text.contains(says), "{name}: {response}");
        if !allowed {
            assert_eq!(response["status"]["code"], 403, "{name}: {response}");
        }
    }
    // The gate's decision is an audit annotation and a metric.
    let request = review("CREATE", strategy(json!("no-strategy")), Value::Null);
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(
        response["auditAnnotations"]["namespace-strategy"].as_str(),
        Some("denied by rule 24: user \"alice\""),
        "{response}"
    );
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("pipelinerollout_webhook_force_decisions_total{")
                && l.contains("gate=\"namespace-strategy\"")
                && l.contains("result=\"denied\"")
                && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
    // /mutate changes nothing in a ConfigMap.
    let response = response_for(&request, &client.post("/mutate", request.to_string()).await);
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
}
