//! RBAC authorisation of the forced re-apply through SubjectAccessReviews,
//! against an HTTPS stand-in for the API server's endpoint.

use crate::https_support;

use std::time::{Duration, Instant};

use https_support::sar_stand_in::{Behaviour, SarStandIn};
use https_support::{Client, TestServer, fixture_json, metric_value, response_for};
use pipelinerollout_webhook::app::{self, StartError};
use pipelinerollout_webhook::pki;
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};

fn rbac_policy(extra: &str) -> Policy {
    Policy::from_yaml(&format!(
        "forceReapply:\n  rbac: {{verb: force-reapply{extra}}}\n"
    ))
    .expect("policy")
}

async fn webhook(api: &SarStandIn, policy: Policy) -> TestServer {
    let kubeconfig = api.kubeconfig.clone();
    TestServer::start_with(policy, |o| o.api.kubeconfig = Some(kubeconfig)).await
}

/// Fixture 07: alice (not in the static lists) sets allow-data-loss to
/// "true" while the pipeline is pausing; with a uid and extra attributes.
fn alice_forces() -> Value {
    let mut request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    request["request"]["userInfo"]["uid"] = json!("alice-uid-1234");
    request["request"]["userInfo"]["extra"] =
        json!({"scopes.authorization.openshift.io": ["a", "b"], "team": ["payments"]});
    request
}

async fn send(client: &Client, request: &Value, query: &str) -> Value {
    let answer = client
        .post(&format!("/validate{query}"), request.to_string())
        .await;
    response_for(request, &answer)
}

#[tokio::test]
async fn the_review_carries_the_requester_and_the_object_exactly() {
    let api = SarStandIn::start(Behaviour::Allow).await;
    let server = webhook(&api, rbac_policy(", cacheTTL: 0")).await;
    let request = alice_forces();
    let response = send(&server.client(), &request, "?timeout=5s").await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        response["auditAnnotations"]["force-reapply"]
            .as_str()
            .unwrap_or_default()
            .contains("RBAC allows verb \"force-reapply\""),
        "{response}"
    );
    let received = api.received();
    assert_eq!(received.len(), 1);
    let sar = &received[0];
    assert_eq!(sar["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(sar["kind"], "SubjectAccessReview");
    let spec = &sar["spec"];
    assert_eq!(spec["user"], "alice");
    assert_eq!(spec["uid"], "alice-uid-1234");
    assert_eq!(spec["groups"], json!(["devs", "system:authenticated"]));
    assert_eq!(
        spec["extra"],
        json!({"scopes.authorization.openshift.io": ["a", "b"], "team": ["payments"]})
    );
    assert_eq!(
        spec["resourceAttributes"],
        json!({
            "group": "numaplane.numaproj.io",
            "resource": "pipelinerollouts",
            "verb": "force-reapply",
            "namespace": "team-a",
            "name": "my-pipeline",
        })
    );
}

#[tokio::test]
async fn denied_by_rbac_is_denied_and_says_how_to_get_it() {
    let api = SarStandIn::start(Behaviour::Deny).await;
    let server = webhook(&api, rbac_policy("")).await;
    let response = send(&server.client(), &alice_forces(), "").await;
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("RBAC does not allow verb \"force-reapply\""),
        "{message}"
    );
    assert!(message.contains("Role or ClusterRole"), "{message}");
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(
        metric_value(
            &metrics,
            "pipelinerollout_webhook_rbac_checks_total{result=\"denied\"}"
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn an_api_error_denies_saying_the_permission_could_not_be_checked() {
    let api = SarStandIn::start(Behaviour::Fail).await;
    let server = webhook(&api, rbac_policy("")).await;
    let response = send(&server.client(), &alice_forces(), "").await;
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.contains("could not be checked"), "{message}");
    assert!(
        message.contains("etcd is sad") || message.contains("500"),
        "{message}"
    );
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(
        metric_value(
            &metrics,
            "pipelinerollout_webhook_rbac_checks_total{result=\"error\"}"
        ),
        Some(1.0)
    );
    // Errors are not cached: once the API server recovers, the next request is allowed.
    api.set(Behaviour::Allow);
    let response = send(&server.client(), &alice_forces(), "").await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn a_slow_answer_past_the_deadline_denies_in_time() {
    let api = SarStandIn::start(Behaviour::Slow(Duration::from_secs(4))).await;
    let server = webhook(&api, rbac_policy("")).await;
    let started = Instant::now();
    // The API server gives the webhook 2s; the check gets 2s less the margin.
    let response = send(&server.client(), &alice_forces(), "?timeout=2s").await;
    let elapsed = started.elapsed();
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.contains("did not answer"), "{message}");
    assert!(
        elapsed < Duration::from_millis(1900),
        "answered after {elapsed:?}, past the API server's deadline"
    );
    assert!(elapsed >= Duration::from_millis(1400), "{elapsed:?}");
    // Without ?timeout= the policy's timeout (2s by default) bounds it.
    let started = Instant::now();
    let response = send(&server.client(), &alice_forces(), "").await;
    assert_eq!(response["allowed"], false);
    assert!(
        started.elapsed() < Duration::from_millis(2600),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn answers_are_cached_until_they_expire() {
    let api = SarStandIn::start(Behaviour::Allow).await;
    let server = webhook(&api, rbac_policy(", cacheTTL: 1")).await;
    let client = server.client();
    for _ in 0..3 {
        assert_eq!(send(&client, &alice_forces(), "").await["allowed"], true);
    }
    assert_eq!(api.received().len(), 1, "two answers came from the cache");
    // Another user, or another object, is another question.
    let mut bob = alice_forces();
    bob["request"]["userInfo"]["username"] = json!("bob");
    send(&client, &bob, "").await;
    let mut other = alice_forces();
    other["request"]["name"] = json!("other-pipeline");
    send(&client, &other, "").await;
    let mut other_groups = alice_forces();
    other_groups["request"]["userInfo"]["groups"] = json!(["devs"]);
    send(&client, &other_groups, "").await;
    assert_eq!(api.received().len(), 4);
    // After the TTL, asked again; a revoked permission now denies.
    api.set(Behaviour::Deny);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(send(&client, &alice_forces(), "").await["allowed"], false);
    assert_eq!(api.received().len(), 5);
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(
        metric_value(&metrics, "pipelinerollout_webhook_rbac_cache_hits_total"),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        metric_value(
            &metrics,
            "pipelinerollout_webhook_rbac_check_duration_seconds_count"
        ),
        Some(7.0)
    );
}

#[tokio::test]
async fn the_static_lists_and_unneeded_permission_ask_nothing() {
    let api = SarStandIn::start(Behaviour::Deny).await;
    let server = webhook(&api, rbac_policy("")).await;
    let client = server.client();
    // argocd-server is in forceReapply.users.
    let request = fixture_json("04-allow-data-loss-argocd-server-action-validate.json");
    assert_eq!(send(&client, &request, "").await["allowed"], true);
    // Removing the annotation needs no permission.
    let request = fixture_json("08-remove-annotation-kubectl-annotate-alice-validate.json");
    assert_eq!(send(&client, &request, "").await["allowed"], true);
    assert!(api.received().is_empty());
    // RBAC cannot lift the pausing requirement.
    api.set(Behaviour::Allow);
    let request = fixture_json("14-create-with-allow-data-loss-alice-validate.json");
    let response = send(&client, &request, "").await;
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot be pausing")
    );
}

#[tokio::test]
async fn rbac_without_an_api_server_is_a_start_up_error() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("dir");
    let (paths, _) = pki::ensure_dev_certs(dir.path()).expect("certs");
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(
        &policy_file,
        "forceReapply:\n  rbac: {verb: force-reapply}\n",
    )
    .expect("policy");
    let mut options = https_support::serve_options(&paths, Some(policy_file));
    options.server.admin_listen = None;
    options.api.kubeconfig = Some(dir.path().join("no-such-kubeconfig"));
    match app::start(options).await {
        Err(StartError::Rbac(why)) => {
            assert!(why.to_string().contains("no-such-kubeconfig"), "{why}")
        }
        other => panic!("expected an RBAC start-up error, got {other:?}"),
    }
}

#[test]
fn review_without_a_kubeconfig_denies_what_only_rbac_could_allow() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "forceReapply:\n  rbac: {verb: force-reapply}\n").expect("policy");
    let fixture = https_support::fixtures_dir()
        .join("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
        .args(["review", "--webhook", "validate", "--policy"])
        .arg(&policy)
        .arg(&fixture)
        .output()
        .expect("run review");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without --kubeconfig"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_with_a_kubeconfig_asks_rbac() {
    let api = SarStandIn::start(Behaviour::Allow).await;
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "forceReapply:\n  rbac: {verb: force-reapply}\n").expect("policy");
    let fixture = https_support::fixtures_dir()
        .join("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let kubeconfig = api.kubeconfig.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
            .args(["review", "--webhook", "validate", "--policy"])
            .arg(&policy)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg(&fixture)
            .output()
            .expect("run review")
    })
    .await
    .expect("join");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(api.received().len(), 1);
}

/// `alice_forces` as a forged requester: its own name and `groups` groups
/// of 64 bytes each.
fn forged_force(name: &str, groups: usize) -> Value {
    let mut request = alice_forces();
    let groups: Vec<String> = (0..groups).map(|i| format!("forged-{i:057}")).collect();
    request["request"]["userInfo"]["username"] = json!(name);
    request["request"]["userInfo"]["groups"] = json!(groups);
    request
}

/// Sends `requests` from 4 connections at once; every answer is a denial.
async fn send_all_denied(client: &Client, requests: Vec<Value>) {
    let mut lanes: Vec<Vec<Value>> = vec![Vec::new(); 4];
    for (i, request) in requests.into_iter().enumerate() {
        lanes[i % 4].push(request);
    }
    let tasks: Vec<_> = lanes
        .into_iter()
        .map(|lane| {
            let client = client.clone();
            tokio::spawn(async move {
                for request in lane {
                    let response = send(&client, &request, "").await;
                    assert_eq!(response["allowed"], false, "{response}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("sender");
    }
}

/// One round of forged requests: 60 requesters with 1 MiB of groups each,
/// then 400 requesters with 60 KiB of groups each, whose reviews first fail
/// (nothing is kept) and then are denied (kept up to the byte bound).
async fn forge_a_round(api: &SarStandIn, client: &Client, round: usize) {
    let huge: Vec<Value> = (0..60)
        .map(|i| forged_force(&format!("huge-{round}-{i}"), 16_384))
        .collect();
    let reviews_before = api.received().len();
    send_all_denied(client, huge).await;
    assert_eq!(
        api.received().len(),
        reviews_before,
        "an oversized requester must cost no SubjectAccessReview"
    );
    for (wave, behaviour) in [Behaviour::Fail, Behaviour::Deny].into_iter().enumerate() {
        api.set(behaviour);
        let near_limit: Vec<Value> = (0..200)
            .map(|i| forged_force(&format!("near-{round}-{wave}-{i}"), 960))
            .collect();
        send_all_denied(client, near_limit).await;
    }
    api.set(Behaviour::Fail);
}

/// Forged requests cannot grow the process: requesters with megabytes of
/// groups are refused without a SubjectAccessReview, and hundreds of
/// distinct forged requesters just under the size limit fill the answer
/// cache only up to its byte bound. The webhook binary stays under 64 MiB
/// throughout; once the answers have expired it is back near its idle size
/// (what is left is free memory the allocator keeps), and a second round
/// leaves it no larger than the first did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_identities_cannot_grow_memory() {
    let api = SarStandIn::start(Behaviour::Fail).await;
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "forceReapply:\n  rbac: {verb: force-reapply, cacheTTL: 2s}\n",
    )
    .expect("policy");
    let path = |p: &std::path::Path| p.to_str().expect("UTF-8 path").to_owned();
    let (policy, kubeconfig) = (path(&policy), path(&api.kubeconfig));
    let binary = https_support::binary::Binary::start_with(
        None,
        &["--policy", &policy, "--kubeconfig", &kubeconfig],
    )
    .await;
    send_all_denied(&binary.client, vec![forged_force("warm-up", 10); 8]).await;
    let answer = send(&binary.client, &forged_force("huge", 16_384), "").await;
    let message = answer["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("more than the 1000 groups and 65536 bytes"),
        "{answer}"
    );
    let idle_kib = binary.status_kib("VmRSS");
    let mut after_kib = Vec::new();
    for round in 0..2 {
        forge_a_round(&api, &binary.client, round).await;
        let peak_kib = binary.status_kib("VmHWM");
        assert!(
            peak_kib < 64 * 1024,
            "round {round}: peak RSS {} MiB (idle {} MiB)",
            peak_kib / 1024,
            idle_kib / 1024
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        // Adding a key drops every expired answer.
        send_all_denied(&binary.client, vec![forged_force("after", 10)]).await;
        after_kib.push(binary.status_kib("VmRSS"));
        eprintln!(
            "forged identities, round {round}: VmRSS {} MiB idle, VmHWM {} MiB, VmRSS {} MiB after the TTL",
            idle_kib / 1024,
            peak_kib / 1024,
            after_kib[round] / 1024
        );
    }
    assert!(
        after_kib[0] <= idle_kib + 16 * 1024,
        "RSS {} MiB after the TTL, {} MiB idle",
        after_kib[0] / 1024,
        idle_kib / 1024
    );
    assert!(
        after_kib[1] <= after_kib[0] + 4 * 1024,
        "a second round grew the process: {} MiB after it, {} MiB after the first",
        after_kib[1] / 1024,
        after_kib[0] / 1024
    );
}
