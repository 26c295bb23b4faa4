//! Rule 15's refusals of service accounts at run time, over real HTTPS:
//! a child write that sets Numaplane's bookkeeping as a service account
//! other than `numaplane.controllerAccount` is refused and moves
//! `pipelinerollout_webhook_bookkeeping_refusals_total` (by whether the
//! account is in the controller's namespace); the controller's own write,
//! a person's refused write and a dry run leave it as it was.

use crate::https_support;

use https_support::{TestServer, fixture_json, metric_value, response_for};
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

const METRIC: &str = "pipelinerollout_webhook_bookkeeping_refusals_total";
/// The built-in policy's numaplane.controllerAccount.
const CONTROLLER: &str = "system:serviceaccount:numaplane-system:numaplane-sa";

/// An UPDATE of a Pipeline by `username` that sets the upgrade-state label.
fn sets_upgrade_state(username: &str, dry_run: bool) -> Value {
    let mut request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    request["request"]["resource"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "resource": "pipelines"});
    request["request"]["kind"] =
        json!({"group": "numaflow.numaproj.io", "version": "v1alpha1", "kind": "Pipeline"});
    request["request"]["userInfo"] =
        json!({"username": username, "groups": ["system:authenticated"]});
    request["request"]["dryRun"] = json!(dry_run);
    request["request"]["object"]["metadata"]["labels"] =
        json!({"numaplane.numaproj.io/upgrade-state": "promoted"});
    request
}

async fn counts(server: &TestServer) -> (f64, f64) {
    let (_, _, metrics) = server.admin_get("/metrics").await;
    let series = |same: &str| {
        metric_value(
            &metrics,
            &format!("{METRIC}{{kind=\"Pipeline\",controller_namespace=\"{same}\"}} "),
        )
        .unwrap_or_else(|| {
            panic!("no {METRIC} for Pipeline, controller_namespace={same}:\n{metrics}")
        })
    };
    (series("true"), series("false"))
}

#[tokio::test]
async fn service_account_writes_refused_by_rule_15_are_counted() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    assert_eq!(
        counts(&server).await,
        (0.0, 0.0),
        "every series starts at zero"
    );

    let answer = |username: &'static str, dry_run: bool| {
        let request = sets_upgrade_state(username, dry_run);
        let client = &client;
        async move {
            response_for(
                &request,
                &client.post("/validate", request.to_string()).await,
            )
        }
    };

    // The controller's own write is allowed and not counted.
    let allowed = answer(CONTROLLER, false).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert_eq!(
        counts(&server).await,
        (0.0, 0.0),
        "the controller's write is not a refusal"
    );

    // Another account in the controller's namespace: refused, counted there.
    let refused = answer(
        "system:serviceaccount:numaplane-system:numaplane-controller",
        false,
    )
    .await;
    assert_eq!(refused["allowed"], false, "{refused}");
    let message = refused["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("numaplane.numaproj.io/upgrade-state"),
        "{message}"
    );
    assert_eq!(counts(&server).await, (1.0, 0.0));

    // An account elsewhere: refused, counted as another namespace.
    let refused = answer("system:serviceaccount:team:deployer", false).await;
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(counts(&server).await, (1.0, 1.0));

    // A person and a dry run are refused as well, but are no sign of a
    // misconfigured controller.
    for (username, dry_run) in [
        ("alice", false),
        ("system:serviceaccount:team:deployer", true),
    ] {
        let refused = answer(username, dry_run).await;
        assert_eq!(
            refused["allowed"], false,
            "{username} dry run {dry_run}: {refused}"
        );
    }
    assert_eq!(counts(&server).await, (1.0, 1.0));
}
