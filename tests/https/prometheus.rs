//! The dashboard and the alerts against a real Prometheus: Debian's
//! `prometheus` scrapes the real webhook binary's admin port every second
//! while the test sends it a scripted mix of AdmissionReviews over HTTPS
//! (allowed, denied, defaulted, forced, a bad body) and a policy edit the
//! webhook refuses. Then every PromQL expression of the dashboard
//! (charts/pipelinerollout-webhook/files/dashboard.json) and of the alerts
//! (the chart's PrometheusRule) is evaluated through Prometheus' HTTP API:
//!
//! - every dashboard expression returns data, so no panel is empty because
//!   of a wrong metric or label name;
//! - every alert expression parses, and every webhook series it selects
//!   (name and label matchers) returns data on its own; the whole
//!   expression may be empty where its condition is false (its promtool
//!   test covers it), and the force alert fires for the force just sent.
//!
//! Without prometheus this prints a skip line, and fails when CI=true.

use crate::helm_support;
use crate::https_support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use https_support::binary::Binary;
use https_support::sar_stand_in::SarStandIn;
use https_support::{admin_get, fixture};
use hyper::StatusCode;
use serde_json::Value;

/// The labels a ServiceMonitor would give the target.
const JOB: &str = "pipelinerollout-webhook";
const NAMESPACE: &str = "pipelinerollout-webhook";
/// Substituted for Grafana's `$__rate_interval`: several 1s scrapes.
const RATE_INTERVAL: &str = "20s";

/// A Prometheus process on loopback; killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every second, with a fresh data
    /// directory; waits until it is ready.
    async fn start(program: &str, target: SocketAddr) -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n- job_name: {JOB}\n  static_configs:\n  - targets: ['{target}']\n    \
             labels: {{namespace: {NAMESPACE}, pod: webhook-0}}\n"
        );
        let config_file = helm_support::write(dir.path(), "prometheus.yml", &config);
        // Prometheus logs the address it was given, not the port it bound:
        // its port is picked here.
        let port = envtest::free_port().expect("a port for Prometheus");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = Command::new(program)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let prometheus = Self {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok()
                && admin_get(addr, "/-/ready").await.0 == StatusCode::OK
            {
                return prometheus;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus was not ready within 60s: {}",
                prometheus.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query: its result vector, or Prometheus' error.
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let path = format!("/api/v1/query?query={}", encode(expr));
        let (status, _, body) = admin_get(self.addr, &path).await;
        let answer: Value =
            serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: {e}: {body}"))?;
        if answer["status"] != "success" {
            return Err(format!("HTTP {status}: {}", answer["error"]));
        }
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

/// Percent-encodes a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The program, or `None` after a skip line (a failure when CI=true).
fn prometheus_program() -> Option<&'static str> {
    if envtest::on_path("prometheus") {
        return Some("prometheus");
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("prometheus is not installed, and CI=true: install Debian's prometheus package");
    }
    eprintln!(
        "SKIPPED https_prometheus: prometheus is not installed (Debian's prometheus package)"
    );
    None
}

/// Every PromQL expression of the dashboard, with the panel's title.
fn dashboard_exprs() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(helm_support::chart().join("files/dashboard.json"))
        .expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            let expr = expr
                .replace("$namespace", NAMESPACE)
                .replace("$job", JOB)
                .replace("$__rate_interval", RATE_INTERVAL);
            out.push((panel["title"].as_str().unwrap_or("?").to_owned(), expr));
        }
    }
    out
}

/// Every alert of the chart's PrometheusRule: name and expression (with
/// `certificates.mode=selfManaged`, which adds the certificate work's
/// alerts; their series are exported without --manage-certs too).
fn alert_exprs() -> Vec<(String, String)> {
    let docs = helm_support::template(&[
        "--set",
        "prometheusRule.enabled=true,certificates.mode=selfManaged",
    ]);
    let rule = helm_support::object(&docs, "PrometheusRule", "pipelinerollout-webhook");
    rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or("?").to_owned(),
                r["expr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The selectors `name{matchers}` of the webhook's own metrics (and `up`)
/// in `expr`.
fn selectors(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find('{') {
        let before = &rest[..at];
        let name: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let Some(end) = rest[at..].find('}') else {
            break;
        };
        if name.starts_with("pipelinerollout_webhook_") || name == "up" {
            out.push(format!("{name}{}", &rest[at..at + end + 1]));
        }
        rest = &rest[at + end + 1..];
    }
    out
}

/// The labels of every `by (...)` in `expr`, but `le` (which
/// histogram_quantile consumes).
fn by_labels(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for part in expr.split("by (").skip(1) {
        if let Some((labels, _)) = part.split_once(')') {
            out.extend(
                labels
                    .split(',')
                    .map(|l| l.trim().to_owned())
                    .filter(|l| !l.is_empty() && l != "le"),
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_and_alert_expression_finds_the_webhooks_series() {
    let Some(program) = prometheus_program() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    // Forces are checked through RBAC, against a stand-in that allows alice.
    let api = SarStandIn::allowing(&["alice"]).await;
    let policy = helm_support::write(
        dir.path(),
        "policy.yaml",
        "forceReapply:\n  rbac: {verb: force-reapply}\n",
    );
    let (policy_arg, kubeconfig) = (
        policy.display().to_string(),
        api.kubeconfig.display().to_string(),
    );
    let webhook = Binary::start_with(
        None,
        &[
            "--policy",
            &policy_arg,
            "--reload-interval",
            "1s",
            "--kubeconfig",
            &kubeconfig,
        ],
    )
    .await;
    let prometheus = Prometheus::start(program, webhook.admin).await;
    // Traffic only once Prometheus has the webhook's series at their
    // starting values, so that rate() and increase() see every request.
    let up = format!("up{{job=\"{JOB}\"}} == 1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while prometheus
        .query(&up)
        .await
        .map(|r| r.is_empty())
        .unwrap_or(true)
    {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape the webhook within 60s:\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The scripted mix: allowed; denied (a string timeout, a capital
    // "True", a force while nothing pauses); defaulted; forced (alice,
    // allowed by RBAC, and Argo CD's action, allowed by the static list);
    // and a bad body.
    let script: [(&str, &str, StatusCode); 8] = [
        (
            "/validate",
            "01-create-kubectl-apply-validate.json",
            StatusCode::OK,
        ),
        (
            "/validate",
            "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
            StatusCode::OK,
        ),
        (
            "/validate",
            "13-create-string-timeout-kubectl-create-validate.json",
            StatusCode::OK,
        ),
        (
            "/validate",
            "06-allow-data-loss-capital-True-kubectl-annotate-alice-validate.json",
            StatusCode::OK,
        ),
        (
            "/validate",
            "14-create-with-allow-data-loss-alice-validate.json",
            StatusCode::OK,
        ),
        (
            "/mutate",
            "11-create-no-lifecycle-kubectl-create-mutate.json",
            StatusCode::OK,
        ),
        (
            "/validate",
            "04-allow-data-loss-argocd-server-action-validate.json",
            StatusCode::OK,
        ),
        (
            "/mutate",
            "01-create-kubectl-apply-mutate.json",
            StatusCode::OK,
        ),
    ];
    let rounds = 5;
    for _ in 0..rounds {
        for (path, name, status) in script {
            let answer = webhook.client.post(path, fixture(name)).await;
            assert_eq!(answer.status, status, "{path} {name}: {}", answer.text());
        }
        let bad = webhook.client.post("/validate", "hello").await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A policy edit the webhook refuses (min above max).
    std::fs::write(&policy, "drainTimeout:\n  min: 3h\n  max: 2h\n").expect("bad policy");

    // Until Prometheus has scraped everything sent, and the refused edit.
    let sent = (rounds * (script.len() + 1)) as f64;
    let total = format!("sum(pipelinerollout_webhook_requests_total{{job=\"{JOB}\"}})");
    let failed = "sum(pipelinerollout_webhook_policy_reloads_total{result=\"failure\"})";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let value = |r: Result<Vec<Value>, String>| {
            r.ok()
                .and_then(|v| v.first().cloned())
                .and_then(|s| s["value"][1].as_str().and_then(|t| t.parse::<f64>().ok()))
        };
        let scraped = value(prometheus.query(&total).await);
        let refused = value(prometheus.query(failed).await);
        if scraped == Some(sent) && refused == Some(1.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape the traffic within 60s (requests {scraped:?} of {sent}, \
             refused reloads {refused:?}):\n{}\nwebhook log:\n{}",
            prometheus.log(),
            webhook.log_text()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A few more scrapes, so that rate() over the window has its samples.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut problems = Vec::new();
    let dashboard = dashboard_exprs();
    assert!(
        dashboard.len() > 20,
        "the dashboard has {} expressions",
        dashboard.len()
    );
    for (panel, expr) in &dashboard {
        match prometheus.query(expr).await {
            Ok(result) if !result.is_empty() => {
                // A misspelt `by` label still returns data, without the
                // label: every one must be on some series (the legend).
                for label in by_labels(expr) {
                    if !result.iter().any(|s| s["metric"][&label].is_string()) {
                        problems.push(format!(
                            "dashboard panel {panel:?}: no series has the label {label:?} of {expr}"
                        ));
                    }
                }
            }
            Ok(_) => problems.push(format!("dashboard panel {panel:?}: no data for {expr}")),
            Err(e) => problems.push(format!("dashboard panel {panel:?}: {e} in {expr}")),
        }
    }
    let alerts = alert_exprs();
    let mut selected = BTreeSet::new();
    for (alert, expr) in &alerts {
        if let Err(e) = prometheus.query(expr).await {
            problems.push(format!("alert {alert}: {e} in {expr}"));
        }
        for selector in selectors(expr) {
            selected.insert(selector.clone());
            match prometheus.query(&selector).await {
                Ok(result) if !result.is_empty() => {}
                Ok(_) => problems.push(format!("alert {alert}: no series {selector}")),
                Err(e) => problems.push(format!("alert {alert}: {e} in {selector}")),
            }
        }
    }
    assert!(
        selected.len() >= 10,
        "too few selectors found: {selected:?}"
    );

    // The force just allowed: the info alert names who and which rollout.
    let (_, force) = alerts
        .iter()
        .find(|(a, _)| a == "PipelineRolloutWebhookForceAllowed")
        .expect("the force alert");
    let fired = prometheus.query(force).await.unwrap_or_default();
    let labels: Vec<&Value> = fired.iter().map(|s| &s["metric"]).collect();
    if !labels.iter().any(|m| {
        m["user"] == "system:serviceaccount:argocd:argocd-server"
            && m["rollout_namespace"] == "team-a"
            && m["rollout"] == "my-pipeline"
            && m["gate"] == "force-reapply"
    }) {
        problems.push(format!(
            "the force alert does not name the force sent: {labels:?}"
        ));
    }
    // alice's force was allowed through RBAC, once asked and then cached:
    // the cache panel shows a ratio, not 0/0.
    assert!(
        api.reviews() >= 1,
        "no SubjectAccessReview reached the stand-in"
    );
    let ratio = dashboard
        .iter()
        .find(|(panel, _)| panel == "RBAC cache hit ratio")
        .map(|(_, expr)| expr.clone())
        .expect("the cache panel");
    let value = prometheus.query(&ratio).await.unwrap_or_default();
    let hit_ratio = value
        .first()
        .and_then(|s| s["value"][1].as_str())
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    if !(hit_ratio > 0.0 && hit_ratio < 1.0) {
        let metrics = admin_get(webhook.admin, "/metrics").await.2;
        let rbac: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("pipelinerollout_webhook_rbac_c"))
            .collect();
        problems.push(format!(
            "the RBAC cache hit ratio is {hit_ratio}, not between 0 and 1: {value:?}; the webhook says\n{}",
            rbac.join("\n")
        ));
    }
    let allowed = "pipelinerollout_webhook_force_decision_timestamp_seconds{result=\"allowed\",user=\"alice\"}";
    if prometheus
        .query(allowed)
        .await
        .map(|r| r.is_empty())
        .unwrap_or(true)
    {
        problems.push(format!(
            "alice's force, allowed by RBAC, is not recorded: {allowed}"
        ));
    }
    // alice's refused force is among the recent decisions, by namespace.
    let recent = "pipelinerollout_webhook_force_decision_timestamp_seconds{result=\"denied\",user=\"alice\",rollout_namespace=\"team-a\"}";
    if prometheus
        .query(recent)
        .await
        .map(|r| r.is_empty())
        .unwrap_or(true)
    {
        problems.push(format!("no recent denied force of alice: {recent}"));
    }
    // The denials by rule: the string (2), "True" (5), the force (6).
    for rule in ["2", "5", "6"] {
        let expr = format!("pipelinerollout_webhook_denials_total{{rule=\"{rule}\"}} > 0");
        if prometheus
            .query(&expr)
            .await
            .map(|r| r.is_empty())
            .unwrap_or(true)
        {
            problems.push(format!("no denial counted for rule {rule}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
