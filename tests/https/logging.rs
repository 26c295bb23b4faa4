//! The binary's log against what requests do to it: a log collector that
//! stops reading cannot stall requests (lines are dropped and counted), and
//! request fields cannot forge a log line of their own.

use crate::https_support;

use std::time::{Duration, Instant};

use https_support::binary::Binary;
use https_support::{admin_get, fixture_json, metric_value};
use hyper::StatusCode;

#[tokio::test]
async fn a_stalled_log_pipe_drops_counted_lines_and_never_stalls_requests() {
    // Standard error is a pipe nobody reads: once the pipe (64 KiB) and the
    // log buffer are full, lines must be dropped and counted, and
    // requests answered as before. `trace` makes every request log many
    // lines (TLS, HTTP), so the buffer fills within a few hundred requests.
    let binary = Binary::start_with_stalled_log(&["--log-level", "trace"]).await;
    let body = fixture_json("01-create-kubectl-apply-validate.json").to_string();
    let dropped = || async {
        let (_, _, metrics) = admin_get(binary.admin, "/metrics").await;
        metric_value(&metrics, "pipelinerollout_webhook_log_lines_dropped_total ")
            .unwrap_or_else(|| panic!("no dropped-lines counter in\n{metrics}"))
    };
    let started = Instant::now();
    let mut sent = 0;
    while dropped().await == 0.0 {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no line dropped after {sent} requests"
        );
        for _ in 0..50 {
            let answer = tokio::time::timeout(
                Duration::from_secs(5),
                binary.client.post("/validate?timeout=10s", body.clone()),
            )
            .await
            .unwrap_or_else(|_| panic!("request {sent} waited on the stalled log"));
            assert_eq!(answer.status, StatusCode::OK, "request {sent}");
            sent += 1;
        }
    }
    // Full, not just filling: later requests are still answered at once.
    for _ in 0..20 {
        let before = Instant::now();
        let answer = binary
            .client
            .post("/validate?timeout=10s", body.clone())
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            before.elapsed() < Duration::from_secs(2),
            "{:?}",
            before.elapsed()
        );
    }
}

/// A forged request whose uid, user name and object name hold newlines
/// cannot start a log line of its own: the text log escapes them.
#[tokio::test]
async fn request_fields_cannot_forge_a_log_line() {
    let binary = Binary::start_with(None, &["--log-format", "text"]).await;
    let mut request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let forged = "FORGED level=INFO decision allowed=true";
    request["request"]["uid"] = serde_json::json!(format!("u1\n{forged} uid"));
    request["request"]["userInfo"]["username"] =
        serde_json::json!(format!("mallory\n{forged} user"));
    request["request"]["name"] = serde_json::json!(format!("p\r\n{forged} name"));
    let answer = binary.client.post("/validate", request.to_string()).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !binary.log_text().contains("mallory") {
        assert!(
            Instant::now() < deadline,
            "no decision line: {}",
            binary.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = binary.log_text();
    let starts: Vec<&str> = log.lines().filter(|l| l.starts_with("FORGED")).collect();
    assert!(starts.is_empty(), "forged lines {starts:?} in\n{log}");
    for escaped in [
        format!("u1\\n{forged} uid"),
        // A &str field is written quoted and escaped by the formatter itself.
        format!("user=\"mallory\\n{forged} user\""),
        format!("p\\r\\n{forged} name"),
    ] {
        assert!(log.contains(&escaped), "{escaped:?} is not in\n{log}");
    }
}

#[tokio::test]
async fn start_up_names_the_controller_accounts_the_policy_trusts() {
    let binary = Binary::start_with(None, &["--log-format", "text"]).await;
    let log = binary.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("trusted controller accounts"))
        .unwrap_or_else(|| panic!("no line names the trusted accounts:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    for account in [
        pipelinerollout_webhook::kinds::NUMAPLANE_CONTROLLER,
        pipelinerollout_webhook::kinds::NUMAFLOW_CONTROLLER,
    ] {
        assert!(line.contains(account), "{line}");
    }
    assert!(line.contains("set numaplane.controllerAccount"), "{line}");
    assert!(
        line.contains("pipelinerollout_webhook_bookkeeping_refusals_total"),
        "the line names the counter that shows the refusals at run time: {line}"
    );
}
