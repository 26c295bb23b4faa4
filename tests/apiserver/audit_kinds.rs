//! The audit of the other rollout kinds through a real kube-apiserver:
//! with Numaplane's MonoVertexRollout and ISBServiceRollout CRDs
//! installed, rollouts of both made before the webhook (a forcePromote, a
//! force-promote label and Numaplane's bookkeeping in the child template)
//! are reported in their namespace's PolicyReport next to a
//! PipelineRollout, each kind with its own rules. Same harness and skip
//! rules as tests/apiserver/audit.rs.

use crate::apiserver_support;

use std::path::Path;
use std::time::{Duration, Instant};

use envtest::{Cluster, Installation, User, repo_root};
use serde_json::{Value, json};

const NAMESPACE: &str = "e2e-audit-kinds";
const FORCE_PROMOTE: &str = "numaplane.numaproj.io/force-promote";
const REQUIRES_DRAIN: &str = "numaplane.numaproj.io/requires-drain";

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
}

/// A rollout of `kind` whose child template (`template`, with its `spec`)
/// carries `metadata`, and whose strategy is `strategy`.
fn rollout(kind: &str, name: &str, template: &str, spec: Value, metadata: Value) -> Value {
    json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {template: {"metadata": metadata, "spec": spec}},
    })
}

/// The rollouts, made before the webhook so that nothing judged them.
fn predating(cluster: &Cluster) -> Result<(), String> {
    for crd in [
        "tests/fixtures/numaplane/numaplane.numaproj.io_monovertexrollouts.yaml",
        "tests/fixtures/numaplane/numaplane.numaproj.io_isbservicerollouts.yaml",
        "tests/fixtures/wgpolicyk8s.io_policyreports.yaml",
    ] {
        cluster.install_crd(&repo_root().join(crd))?;
    }
    apiserver_support::grant_components(cluster)?;
    let mut mono = rollout(
        "MonoVertexRollout",
        "mono",
        "monoVertex",
        json!({"source": {"udsource": {"container": {"image": "source"}}},
               "sink": {"udsink": {"container": {"image": "sink"}}}}),
        json!({"labels": {FORCE_PROMOTE: "true"}}),
    );
    mono["spec"]["strategy"] = json!({"progressive": {"forcePromote": true}});
    cluster.create_all(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        mono,
        rollout(
            "ISBServiceRollout",
            "isb",
            "interStepBufferService",
            json!({"jetstream": {"version": "2.10.3"}}),
            json!({"annotations": {REQUIRES_DRAIN: "false"}}),
        ),
        apiserver_support::rollout(NAMESPACE, "pipe", Some(json!(300))),
    ])
}

/// The results of rollout `name` in `report`: rule to (result, message).
fn results_of(report: &Value, name: &str) -> Vec<(String, String, String)> {
    report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["resources"][0]["name"] == name)
        .map(|r| {
            let text = |key: &str| r[key].as_str().unwrap_or_default().to_owned();
            (text("rule"), text("result"), text("message"))
        })
        .collect()
}

#[test]
fn monovertex_and_isbservice_rollouts_are_reported_with_their_own_rules() {
    let Some(assets) = envtest::require(&envtest::test_name(), envtest::Assets::find()) else {
        return;
    };
    let policy = envtest::base_policy().expect("the base policy");
    let env = Installation::start_with(&assets, binary(), &policy, &[], predating)
        .expect("the test cluster starts");
    let admin = env.cluster.kubectl(User::Admin);
    let deadline = Instant::now() + Duration::from_secs(60);
    let report = loop {
        let report = admin.get(
            "policyreports.wgpolicyk8s.io",
            NAMESPACE,
            "pipelinerollout-webhook",
        );
        if let Some(report) = report
            && ["mono", "isb", "pipe"]
                .iter()
                .all(|name| !results_of(&report, name).is_empty())
        {
            break report;
        }
        assert!(
            Instant::now() < deadline,
            "no report of all three rollouts after 60 s; log:\n{}",
            env.webhook.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let rules = |name: &str| -> Vec<String> {
        results_of(&report, name).into_iter().map(|r| r.0).collect()
    };
    let others = [
        "force-promote",
        "template-force-promote",
        "template-bookkeeping",
    ];
    assert_eq!(rules("mono"), others, "{report:#}");
    assert_eq!(rules("isb"), others, "{report:#}");
    assert_eq!(rules("pipe").len(), 14, "{report:#}");

    let result = |name: &str, rule: &str| {
        results_of(&report, name)
            .into_iter()
            .find(|r| r.0 == rule)
            .map(|r| (r.1, r.2))
            .unwrap_or_default()
    };
    let (status, message) = result("mono", "force-promote");
    assert_eq!(status, "warn", "{message}");
    assert!(message.contains("forcePromote is true"), "{message}");
    let (status, message) = result("mono", "template-force-promote");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("spec.monoVertex.metadata.labels") && message.contains("every MonoVertex"),
        "{message}"
    );
    let (status, message) = result("isb", "template-bookkeeping");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains(&format!(
            "spec.interStepBufferService.metadata.annotations[\"{REQUIRES_DRAIN}\"]"
        )),
        "{message}"
    );
    assert_eq!(result("isb", "force-promote").0, "pass");
    let kinds: Vec<&str> = report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["resources"][0]["kind"].as_str())
        .collect();
    for kind in ["MonoVertexRollout", "ISBServiceRollout", "PipelineRollout"] {
        assert!(kinds.contains(&kind), "{kind}: {report:#}");
    }
    let log = env.webhook.log_tail(200);
    assert!(!log.contains("is not served"), "{log}");
}
