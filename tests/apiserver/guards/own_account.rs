//! The webhook's own account, through a real kube-apiserver: it may change
//! nothing of a rollout but a reset of `allow-data-loss` to "false", and
//! the audit's RBAC reaches no PolicyReport but the webhook's own.

use super::*;

const OWN_ACCOUNT_POLICY: &str = "manifests/base/own-account-policy.yaml";

#[test]
fn the_webhooks_own_account_may_only_reset_a_force() {
    let Some(cluster) = cluster() else { return };
    let admin = cluster.kubectl(User::Admin);
    team_namespace(&cluster, "e2e-own-account").expect("a team namespace");
    // The sweeper's grant: get, list, watch and patch on every rollout.
    let sweeper = render_with(&cluster, "manifests/base/stale-force-sweeper.yaml", &[]);
    cluster.create_all(sweeper).expect("the sweeper's RBAC");
    install(&cluster, OWN_ACCOUNT_POLICY, &[]);
    let namespace = "e2e-own-account";
    admin
        .create(&with_force(rollout(namespace, "p", Some(json!(60)))), &[])
        .expect_success("a forced rollout");
    let webhook = cluster.kubectl(User::Webhook);
    let policy = "pipelinerollout-webhook-own-account";
    let patch = |patch: Value| webhook.merge_patch(ROLLOUTS, namespace, "p", &patch, &[]);
    // Each attempt changes the spec, so that one let through before the
    // policy was in force does not make the next a no-op.
    let attempt = std::cell::Cell::new(0);
    let out = until_refused("a spec patch", "may change nothing", || {
        attempt.set(attempt.get() + 1);
        let seconds = 100 + attempt.get();
        patch(
            json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": seconds}}}}}),
        )
    });
    assert_refused_by(&out, policy, "may change nothing on a PipelineRollout");
    for (what, change) in [
        ("a label", json!({"metadata": {"labels": {"team": "x"}}})),
        (
            "another annotation",
            json!({"metadata": {"annotations": {"x": "y"}}}),
        ),
        (
            "a finalizer",
            json!({"metadata": {"finalizers": ["example.com/x"]}}),
        ),
        (
            "the force and the spec together",
            json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "false"}},
                   "spec": {"strategy": {"progressive": {"forcePromote": true}}}}),
        ),
    ] {
        assert_refused_by(&patch(change), policy, "may change nothing");
        let _ = what;
    }
    // The sweeper's own reset: a JSON Patch that tests the resourceVersion.
    let stored = admin.get(ROLLOUTS, namespace, "p").expect("stored");
    let version = stored["metadata"]["resourceVersion"].clone();
    let reset = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/metadata/annotations/numaplane.numaproj.io~1allow-data-loss", "value": "false"},
    ]);
    webhook
        .run(&[
            "patch",
            ROLLOUTS,
            "p",
            "-n",
            namespace,
            "--type=json",
            "-p",
            &reset.to_string(),
        ])
        .expect_success("the sweeper's reset");
    let out = patch(json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "true"}}}));
    assert_refused_by(
        &out,
        policy,
        "may only set numaplane.numaproj.io/allow-data-loss to \"false\"",
    );
    // Everyone else is not this policy's business.
    admin
        .merge_patch(
            ROLLOUTS,
            namespace,
            "p",
            &json!({"metadata": {"labels": {"team": "x"}}}),
            &[],
        )
        .expect_success("admin changes a label");
    let stored = admin.get(ROLLOUTS, namespace, "p").expect("stored");
    assert_eq!(stored["metadata"]["annotations"][ALLOW_DATA_LOSS], "false");
}

/// A PolicyReport named `name` in `namespace`, as the audit applies one.
fn policy_report(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {"name": name, "namespace": namespace},
        "results": [],
    })
}

#[test]
fn the_webhooks_own_account_touches_no_policy_report_but_its_own() {
    let Some(cluster) = cluster() else { return };
    cluster
        .install_crd(&repo_root().join("tests/fixtures/wgpolicyk8s.io_policyreports.yaml"))
        .expect("the PolicyReport CRD");
    let audit = render_with(&cluster, "manifests/base/audit-rbac.yaml", &[]);
    cluster.create_all(audit).expect("the audit's RBAC");
    let namespace = "e2e-reports";
    team_namespace(&cluster, namespace).expect("a team namespace");
    let admin = cluster.kubectl(User::Admin);
    admin
        .create(&policy_report(namespace, "kyverno-pol"), &[])
        .expect_success("another tool's report");
    let webhook = cluster.kubectl(User::Webhook);
    let apply = |name: &str| {
        webhook.run_with_stdin(
            &[
                "apply",
                "--server-side",
                "--field-manager=pipelinerollout-webhook-audit",
                "-f",
                "-",
            ],
            Some(&policy_report(namespace, name).to_string()),
        )
    };
    // What the audit does: apply, list by name, delete its own report.
    apply("pipelinerollout-webhook").expect_success("the audit's own report");
    webhook
        .run(&[
            "get",
            "policyreports",
            "-A",
            "--field-selector",
            "metadata.name=pipelinerollout-webhook",
        ])
        .expect_success("list the audit's own reports");
    // Anything else is forbidden by RBAC, whatever the verb.
    let refusals = [
        ("apply another report", apply("kyverno-pol")),
        ("create another report", apply("made-up")),
        (
            "delete another report",
            webhook.run(&["delete", "policyreport", "kyverno-pol", "-n", namespace]),
        ),
        (
            "list every report",
            webhook.run(&["get", "policyreports", "-A"]),
        ),
        (
            "replace its own report",
            webhook.run_with_stdin(
                &["replace", "-f", "-"],
                Some(&policy_report(namespace, "pipelinerollout-webhook").to_string()),
            ),
        ),
    ];
    for (what, out) in refusals {
        assert!(
            !out.success && out.stderr.contains("forbidden"),
            "the webhook's account may not {what}: {out}"
        );
    }
    webhook
        .run(&[
            "delete",
            "policyreport",
            "pipelinerollout-webhook",
            "-n",
            namespace,
        ])
        .expect_success("delete the audit's own report");
    assert!(
        admin
            .get("policyreports", namespace, "kyverno-pol")
            .is_some(),
        "another tool's report is untouched"
    );
}
