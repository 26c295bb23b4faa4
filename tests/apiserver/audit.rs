//! The audit of stored rollouts through a real kube-apiserver: the
//! webhook binary watches PipelineRollouts and writes one PolicyReport per
//! namespace. Rollouts made before the webhook (out of policy, a stale
//! force, Numaplane's bookkeeping in the child template, a wrong shape)
//! are reported; ratcheting lets an out-of-policy
//! value through an update, and the report still names it; a policy reload
//! changes the reports; an emptied namespace loses its report; an API
//! server stopped and started again during an audit loses nothing. A
//! second cluster without the PolicyReport CRD runs the audit with its
//! reports off. Only the PipelineRollout CRD is installed: the audit's
//! other kinds are not served, which it says once and works around. Same harness and skip rules as tests/apiserver/webhook.rs.

use crate::apiserver_support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use apiserver_support::{ALLOW_DATA_LOSS, ROLLOUTS, idle, rollout, set_status};
use envtest::{Cluster, Installation, User};
use serde_json::{Value, json};

const REPORT: &str = "pipelinerollout-webhook";
const UPGRADE_STATE: &str = "numaplane.numaproj.io/upgrade-state";
const REPORTS: &str = "policyreports.wgpolicyk8s.io";
const OLD: &str = "e2e-audit-old";
const NEW: &str = "e2e-audit-new";
const LATE: &str = "e2e-audit-late";

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
}

/// The base policy with `max` as the drain timeout's maximum.
fn policy(max: &str) -> String {
    let text = envtest::base_policy().expect("the base policy");
    let mut policy: Value = serde_saphyr::from_str(&text).expect("the base policy is YAML");
    policy["drainTimeout"]["max"] = json!(max);
    policy.to_string()
}

/// Rollouts that predate the webhook, so nothing judged them.
fn predating(cluster: &Cluster) -> Result<(), String> {
    cluster.create_all(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OLD}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NEW}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LATE}}),
        rollout(OLD, "too-long", Some(json!(7200))),
        rollout(OLD, "good", Some(json!(300))),
        rollout(OLD, "stale-force", Some(json!(300))),
        rollout(OLD, "broken", Some(json!(300))),
    ])?;
    let admin = cluster.kubectl(User::Admin);
    let out = admin.merge_patch(
        ROLLOUTS,
        OLD,
        "stale-force",
        &json!({
            "metadata": {"annotations": {ALLOW_DATA_LOSS: "true"}},
            // Numaplane's bookkeeping smuggled into the child template.
            "spec": {"pipeline": {"metadata": {"labels": {UPGRADE_STATE: "recyclable"}}}},
        }),
        &[],
    );
    if !out.success {
        return Err(format!("annotate stale-force: {out}"));
    }
    set_status(cluster, OLD, "stale-force", idle());
    let out = admin.merge_patch(
        ROLLOUTS,
        OLD,
        "broken",
        &json!({"spec": {"pipeline": {"spec": {"lifecycle": "drain slowly"}}}}),
        &[],
    );
    if out.success {
        Ok(())
    } else {
        Err(format!("break broken: {out}"))
    }
}

/// The report of `namespace`, if there is one.
fn report(cluster: &Cluster, namespace: &str) -> Option<Value> {
    cluster.kubectl(User::Admin).get(REPORTS, namespace, REPORT)
}

/// Waits up to `limit` for `ready` to return `Some`.
#[track_caller]
fn wait_for<T>(what: &str, limit: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Whether `ready` held within `limit` (asked every 250 ms).
fn wait_until_or_timeout(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The result of `rule` for rollout `name` in `report`: (result, message).
fn result_of(report: &Value, name: &str, rule: &str) -> Option<(String, String)> {
    report["results"].as_array()?.iter().find_map(|r| {
        let about = r["resources"][0]["name"] == name && r["rule"] == rule;
        about.then(|| {
            (
                r["result"].as_str().unwrap_or_default().to_owned(),
                r["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
    })
}

/// Waits until the report of `namespace` gives `rule` of `name` the
/// result `want`; returns the report.
#[track_caller]
fn wait_for_result(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    rule: &str,
    want: &str,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = report(cluster, namespace);
        if let Some(report) = &found
            && result_of(report, name, rule).is_some_and(|(result, _)| result == want)
        {
            return report.clone();
        }
        assert!(
            Instant::now() < deadline,
            "after 60s, {namespace}/{name} {rule} is not {want}; the report now: {:#}",
            found.unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The webhook's metrics (plain HTTP on its admin port).
fn metrics(admin: SocketAddr) -> String {
    let mut stream = TcpStream::connect(admin).expect("the admin port");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("read");
    text
}

fn metric(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The audit's count of drain-timeout-range failures in namespace OLD, from
/// the webhook's metrics text.
fn old_timeout_failures(text: &str) -> Option<f64> {
    metric(
        text,
        &format!(
            "pipelinerollout_webhook_audit_violations{{rollout_namespace=\"{OLD}\",rule=\"drain-timeout-range\",result=\"fail\"}}"
        ),
    )
}

/// Whether the webhook's metrics text says an audit has completed.
fn audit_completed(text: &str) -> bool {
    metric(
        text,
        "pipelinerollout_webhook_audit_last_completed_timestamp_seconds",
    )
    .is_some_and(|t| t > 0.0)
}

fn start(crd: bool) -> Option<Installation> {
    let assets = envtest::require(&envtest::test_name(), envtest::Assets::find())?;
    let installation = Installation::start_with(
        &assets,
        binary(),
        &policy("1h"),
        &["--audit-qps", "20", "--audit-burst", "20"],
        |cluster| {
            if crd {
                cluster.install_crd(
                    &envtest::repo_root().join("tests/fixtures/wgpolicyk8s.io_policyreports.yaml"),
                )?;
            }
            apiserver_support::grant_components(cluster)?;
            predating(cluster)
        },
    )
    .expect("the test cluster starts");
    Some(installation)
}

#[test]
fn stored_rollouts_are_reported_and_the_reports_follow_policy_changes_and_outages() {
    let Some(env) = start(true) else { return };
    let cluster = &env.cluster;
    let admin = cluster.kubectl(User::Admin);

    // The first audit reports what predates the webhook.
    let old = wait_for_result(cluster, OLD, "too-long", "drain-timeout-range", "fail");
    let (_, message) = result_of(&old, "too-long", "drain-timeout-range").expect("a result");
    assert!(
        message.contains("above the maximum of 3600 (1h)"),
        "{message}"
    );
    for rule in [
        "drain-timeout-integer",
        "drain-timeout-range",
        "drain-timeout-overflow",
        "allow-data-loss-value",
        "force-reapply",
        "force-promote",
        "template-force-promote",
        "template-delete-undrained",
        "template-bookkeeping",
        "deletion-timeout-integer",
        "deletion-timeout-overflow",
    ] {
        assert_eq!(
            result_of(&old, "good", rule).map(|r| r.0).as_deref(),
            Some("pass"),
            "good {rule}"
        );
    }
    // Made before the webhook, no rollout here sets a deletion timeout: the
    // pipeline drains for 0s on delete where Numaflow's minimal CRDs are
    // installed.
    let (result, message) = result_of(&old, "good", "deletion-timeout-range").expect("a result");
    assert_eq!(result, "warn", "{message}");
    assert!(
        message.contains("spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds is not set")
            && message.contains("which the API server sets to 0"),
        "{message}"
    );
    let (result, message) = result_of(&old, "stale-force", "force-reapply").expect("a result");
    assert_eq!(result, "fail", "{message}");
    assert!(
        message.contains("is \"true\" and the pause is over"),
        "{message}"
    );
    let (result, message) =
        result_of(&old, "stale-force", "template-bookkeeping").expect("a result");
    assert_eq!(result, "fail", "{message}");
    assert!(
        message.contains(&format!(
            "set spec.pipeline.metadata.labels[\"{UPGRADE_STATE}\"]: Numaplane keeps its bookkeeping there"
        )),
        "{message}"
    );
    let (result, message) = result_of(&old, "broken", "drain-timeout-integer").expect("a result");
    assert_eq!(result, "error", "{message}");
    assert!(
        message.contains("spec.pipeline.spec.lifecycle is a string, not an object"),
        "{message}"
    );
    assert_eq!(
        result_of(&old, "broken", "drain-timeout-range")
            .map(|r| r.0)
            .as_deref(),
        Some("skip")
    );
    // One result per rollout and rule, a summary that adds up, no owner.
    assert_eq!(
        old["results"].as_array().map(Vec::len),
        Some(4 * 14),
        "{old:#}"
    );
    assert_eq!(
        old["summary"],
        json!({"pass": 44, "fail": 3, "warn": 3, "error": 1, "skip": 5}),
        "{old:#}"
    );
    assert!(old["metadata"].get("ownerReferences").is_none(), "{old:#}");
    let first = &old["results"][0];
    assert_eq!(first["policy"], REPORT);
    assert_eq!(first["resources"][0]["kind"], "PipelineRollout");
    assert!(
        first["resources"][0]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{first}"
    );
    let listed = admin
        .run(&["get", "policyreports", "-A"])
        .expect_success("kubectl get policyreports -A");
    assert!(
        listed.stdout.contains(OLD) && listed.stdout.contains(REPORT),
        "{listed}"
    );

    // Ratcheting lets the out-of-policy value through an update; the
    // report still names it.
    let out = admin
        .merge_patch(
            ROLLOUTS,
            OLD,
            "too-long",
            &json!({"metadata": {"labels": {"touched": "yes"}}}),
            &[],
        )
        .expect_success("an update keeping 7200");
    assert!(
        out.warnings()
            .iter()
            .any(|w| w.contains("unchanged, so allowed")),
        "{out}"
    );
    // A rollout made now gets its report through the watch.
    admin
        .create(&rollout(NEW, "fresh", Some(json!(600))), &[])
        .expect_success("create fresh");
    wait_for_result(cluster, NEW, "fresh", "drain-timeout-range", "pass");
    let old = report(cluster, OLD).expect("the report");
    assert_eq!(
        result_of(&old, "too-long", "drain-timeout-range")
            .map(|r| r.0)
            .as_deref(),
        Some("fail")
    );
    let text = metrics(env.webhook.admin_addr());
    assert_eq!(old_timeout_failures(&text), Some(1.0), "{text}");
    assert!(audit_completed(&text), "{text}");

    // A policy reload: 7200 is within a 3h maximum.
    let policy_file = cluster.dir().join("policy.yaml");
    let changed = Instant::now();
    std::fs::write(&policy_file, policy("3h")).expect("write the policy");
    wait_for_result(cluster, OLD, "too-long", "drain-timeout-range", "pass");
    eprintln!(
        "reports updated {:?} after the policy file changed",
        changed.elapsed()
    );

    // An emptied namespace loses its report.
    admin
        .run(&["delete", ROLLOUTS, "fresh", "-n", NEW])
        .expect_success("delete fresh");
    wait_for(
        "the emptied namespace's report is deleted",
        Duration::from_secs(30),
        || report(cluster, NEW).is_none().then_some(()),
    );

    // The API server goes away during an audit: the policy changes while it
    // is down, so the audit's writes are refused; once it is back the
    // reports catch up and the watch delivers new objects again.
    cluster.stop_apiserver();
    std::fs::write(&policy_file, policy("1h")).expect("write the policy");
    std::thread::sleep(Duration::from_secs(4));
    cluster
        .restart_apiserver()
        .expect("the API server starts again");
    wait_for_result(cluster, OLD, "too-long", "drain-timeout-range", "fail");
    admin
        .create(&rollout(LATE, "after", Some(json!(600))), &[])
        .expect_success("create after");
    let text = metrics(env.webhook.admin_addr());
    assert!(
        metric(
            &text,
            "pipelinerollout_webhook_audit_report_writes_total{result=\"failed\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "refused writes are counted: {text}"
    );
    assert!(
        metric(&text, "pipelinerollout_webhook_audit_watch_restarts_total")
            .is_some_and(|n| n >= 1.0),
        "the broken watch is counted: {text}"
    );
    let late = wait_for_result(cluster, LATE, "after", "drain-timeout-range", "pass");
    assert_eq!(late["summary"]["pass"], 14, "{late:#}");
}

#[test]
fn without_the_policy_report_crd_the_audit_runs_with_reports_off() {
    let Some(env) = start(false) else { return };
    let text = wait_for("the audit completes", Duration::from_secs(60), || {
        let text = metrics(env.webhook.admin_addr());
        audit_completed(&text).then_some(text)
    });
    assert_eq!(old_timeout_failures(&text), Some(1.0), "{text}");
    assert_eq!(
        metric(&text, "pipelinerollout_webhook_audit_objects"),
        Some(4.0),
        "{text}"
    );
    let log = env.webhook.log_tail(200);
    assert!(
        log.contains(
            "the PolicyReport CRD (policyreports.wgpolicyk8s.io, v1alpha2) is not installed"
        ),
        "{log}"
    );
    assert!(!log.contains("PolicyReport not written"), "{log}");
    // Only the PipelineRollout CRD is installed: the other kinds are said
    // once to be not served, and their failing lists are not logged.
    for kind in ["MonoVertexRollout", "ISBServiceRollout"] {
        let said = log
            .lines()
            .filter(|l| {
                l.contains("this kind is not served") && l.contains(&format!("kind=\"{kind}\""))
            })
            .count();
        assert_eq!(said, 1, "{kind}: {log}");
    }
    assert!(!log.contains("404 page not found"), "{log}");
}

#[test]
fn a_report_write_from_a_stale_view_is_refused_counted_and_read_again() {
    // What a deposed leader's late write is: a write over the version of a
    // report it read or wrote before another writer (the new leader) wrote
    // it. Here the other writer is an admin's edit.
    let Some(env) = start(true) else { return };
    let cluster = &env.cluster;
    let admin = cluster.kubectl(User::Admin);
    wait_for_result(cluster, OLD, "too-long", "drain-timeout-range", "fail");
    let conflicts = "pipelinerollout_webhook_audit_report_writes_total{result=\"conflict\"}";
    let counted = |text: &str| metric(text, conflicts).unwrap_or(0.0);
    assert_eq!(counted(&metrics(env.webhook.admin_addr())), 0.0);
    admin
        .merge_patch(
            REPORTS,
            OLD,
            REPORT,
            &json!({"metadata": {"labels": {"e2e-written-by": "another-replica"}}}),
            &[],
        )
        .expect_success("another writer writes the report");
    // A change makes the webhook write the report again, over the version
    // it wrote before the other writer.
    admin
        .create(&rollout(OLD, "after-the-edit", Some(json!(600))), &[])
        .expect_success("create after-the-edit");
    wait_for(
        "the stale write is refused and counted",
        Duration::from_secs(30),
        || (counted(&metrics(env.webhook.admin_addr())) >= 1.0).then_some(()),
    );
    // The log line goes out through the log buffer, after the count.
    let refusal = "PolicyReport not written: it changed since this replica last read or wrote it";
    let logged = wait_until_or_timeout(Duration::from_secs(5), || {
        env.webhook.log_tail(10_000).contains(refusal)
    });
    assert!(
        logged,
        "the refusal is logged:\n{}",
        env.webhook.log_tail(10_000)
    );
    // It read the report again and wrote over the version stored now: the
    // other writer's label is kept, and the new rollout is reported.
    let after = wait_for_result(
        cluster,
        OLD,
        "after-the-edit",
        "drain-timeout-range",
        "pass",
    );
    assert_eq!(
        after["metadata"]["labels"]["e2e-written-by"], "another-replica",
        "{after:#}"
    );
    assert_eq!(
        result_of(&after, "too-long", "drain-timeout-range")
            .map(|r| r.0)
            .as_deref(),
        Some("fail")
    );
    let text = metrics(env.webhook.admin_addr());
    assert_eq!(
        counted(&text),
        1.0,
        "one refusal, then a write over the fresh version: {text}"
    );
}

/// `VmHWM` (the peak resident set) of `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// What tenants may store, before the webhook starts: `huge` rollouts near
/// etcd's object limit (1.4 MiB in the pipeline spec), and `bloated` ones
/// with 250 KiB in annotations the rules read (allow-data-loss, the
/// webhook's own force-promote-for).
fn stored_by_tenants(cluster: &Cluster, huge: usize, bloated: usize) -> Result<(), String> {
    const NS: &str = "e2e-audit-memory";
    let payload = "h".repeat(1_400 * 1024);
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    for i in 0..huge {
        let mut object = rollout(NS, &format!("huge-{i:03}"), Some(json!(300)));
        let vertex = json!({"name": "huge", "udf": {"container": {
            "image": "quay.io/numaio/numaflow-go/map-cat:stable",
            "env": [{"name": "PAYLOAD", "value": payload}]}}});
        object["spec"]["pipeline"]["spec"]["vertices"]
            .as_array_mut()
            .ok_or("the sample has vertices")?
            .push(vertex);
        objects.push(object);
    }
    for i in 0..bloated {
        let mut object = rollout(NS, &format!("bloated-{i:03}"), Some(json!(300)));
        object["metadata"]["annotations"] = if i % 2 == 0 {
            json!({"pipelinerollout-webhook.numaplane.numaproj.io/force-promote-for": "f".repeat(250 * 1024)})
        } else {
            json!({ALLOW_DATA_LOSS: "a".repeat(250 * 1024)})
        };
        objects.push(object);
    }
    // kubectl creates a List's items one request each, in order.
    cluster.create_all(objects)
}

#[test]
fn the_leaders_memory_does_not_grow_with_what_tenants_store() {
    // Everything the base Deployment turns on reads the stored rollouts:
    // the audit, the stale-force sweeper and Events. Listed in pages, the
    // objects below (about 53 MiB as stored) are held whole at once, and
    // the leader's peak passes 100 MiB; listed one object at a time it
    // stays within the bound the chart's 128 Mi limit leaves room for.
    let Some(assets) = envtest::require(&envtest::test_name(), envtest::Assets::find()) else {
        return;
    };
    // The harness runs `serve` with the Deployment's environment (glibc's
    // mmap threshold), as a cluster does.
    let deployment =
        std::fs::read_to_string(envtest::repo_root().join("manifests/base/deployment.yaml"))
            .expect("the base Deployment");
    for (name, value) in envtest::DEPLOYMENT_ENV {
        assert!(
            deployment.contains(&format!("- name: {name}\n          value: \"{value}\"")),
            "manifests/base/deployment.yaml sets {name}={value}"
        );
    }
    let env = Installation::start_with(
        &assets,
        binary(),
        &policy("1h"),
        &[
            "--reset-stale-force",
            "--audit-qps",
            "20",
            "--audit-burst",
            "20",
        ],
        |cluster| {
            cluster.install_crd(
                &envtest::repo_root().join("tests/fixtures/wgpolicyk8s.io_policyreports.yaml"),
            )?;
            apiserver_support::grant_components(cluster)?;
            stored_by_tenants(cluster, 20, 100)
        },
    )
    .expect("the test cluster starts");
    let text = wait_for("the audit completes", Duration::from_secs(120), || {
        let text = metrics(env.webhook.admin_addr());
        audit_completed(&text).then_some(text)
    });
    assert_eq!(
        metric(&text, "pipelinerollout_webhook_audit_objects"),
        Some(120.0),
        "{text}"
    );
    wait_for_result(
        &env.cluster,
        "e2e-audit-memory",
        "huge-000",
        "drain-timeout-range",
        "pass",
    );
    let pid = env.webhook.pid().expect("the webhook runs");
    let peak = peak_rss_mib(pid);
    let log = env.webhook.log_tail(usize::MAX);
    assert!(
        log.contains("stale-force sweeper on"),
        "the sweeper runs: {log}"
    );
    assert!(
        peak < 64.0,
        "the leader's peak RSS was {peak:.1} MiB; log:\n{log}"
    );
    eprintln!("the leader's peak RSS: {peak:.1} MiB");
}
