//! What a stolen token of the webhook's own service account can do in the
//! self-managed install (`manifests/overlays/self-managed`, `serve
//! --manage-certs`), where that account may patch the Lease, the caBundle of
//! its webhook configurations and create Secrets; through a real
//! kube-apiserver, the token played by the harness' client certificate for
//! the account's username (what the API server authorizes and the
//! policies match is the same).
//!
//! - It cannot create a Secret of type `kubernetes.io/service-account-token`
//!   (which the token controller fills with a token that never expires),
//!   nor any Secret but the webhook's own two (own-secrets-policy.yaml).
//! - A Lease it writes once with a huge duration, and caBundles it replaces
//!   (a foreign CA, bytes that are not PEM), are taken back: every replica
//!   reports the untrusted caBundle (metric, log, not ready), the replicas
//!   take the Lease over after their own duration, and the new leader
//!   writes the caBundle back at once.
//!
//! - With the fail-open install, a webhook the API server cannot reach or
//!   no longer trusts lets PipelineRollout writes through unjudged; with
//!   the second line (components/validating-admission-policy) the API
//!   server still refuses a namespace editor's allow-data-loss "true" and
//!   forcePromote.
//! - Bad input: a CA Secret of a type the webhook does not write gets a log
//!   line that says how to get out and retries with backoff, no write.
//!
//! Same harness and skip rules as tests/apiserver_certs/certs.rs.

use crate::apiserver_certs_support;
use crate::apiserver_support;

use std::time::{Duration, Instant};

use apiserver_certs_support::{
    CONFIGURATION, LEADER_ELECT, NAMESPACE, OVERLAY, SelfManaged, TEAM, ca_bundles, metric,
    one_at_a_time, ready, within,
};
use base64::Engine as _;
use envtest::{Assets, User, binding, repo_root, require};
use serde_json::json;

/// The Lease settings of the replicas: short, so that a take-over is quick.
const LEASE_FLAGS: [&str; 5] = [
    LEADER_ELECT,
    "--leader-elect-namespace=pipelinerollout-webhook",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];
const LEASE_DURATION: Duration = Duration::from_secs(4);
const PROPAGATION: Duration = Duration::from_secs(2);

fn secret(name: &str, type_: &str, annotations: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "type": type_})
}

#[test]
fn the_webhooks_token_cannot_mint_a_service_account_token_or_write_other_secrets() {
    let _serial = one_at_a_time();
    let Some(assets) = require("stolen token: Secrets", Assets::find()) else {
        return;
    };
    let env = SelfManaged::start(&assets, &["127.0.0.1"], &[]).unwrap_or_else(|e| panic!("{e}"));
    let as_webhook = env.cluster.kubectl(User::Webhook);
    let minted = secret(
        "minted-token",
        "kubernetes.io/service-account-token",
        json!({"kubernetes.io/service-account.name": "pipelinerollout-webhook"}),
    );
    // The policy is in force once a server-side dry run is refused (the
    // API server type-checks a new policy before enforcing it).
    let refused = within(Duration::from_secs(15), || {
        !as_webhook.create(&minted, &["--dry-run=server"]).success
    });
    assert!(
        refused.is_some(),
        "a dry run of the minting is still allowed after 15 s: {}\n{}",
        as_webhook.create(&minted, &["--dry-run=server"]),
        env.cluster
            .kubectl(User::Admin)
            .run(&["get", "validatingadmissionpolicy", "-o", "yaml"])
    );

    let out = as_webhook.create(&minted, &[]);
    assert!(
        !out.success
            && out.stderr.contains("may write only its own Secrets")
            && out.stderr.contains("not minted-token"),
        "the webhook's account mints a service-account token Secret: {out}"
    );
    // Named like its own, but of the wrong type: refused for the type
    // (admission comes before the check that the name is taken).
    let admin = env.cluster.kubectl(User::Admin);
    let out = as_webhook.create(
        &secret(
            "pipelinerollout-webhook-ca",
            "kubernetes.io/service-account-token",
            json!({"kubernetes.io/service-account.name": "pipelinerollout-webhook"}),
        ),
        &[],
    );
    assert!(
        !out.success
            && out
                .stderr
                .contains("only Secrets of type Opaque or kubernetes.io/tls"),
        "a service-account token Secret under the CA Secret's name: {out}"
    );
    // Any other Secret, even an ordinary one, is refused too.
    let out = as_webhook.create(&secret("other", "Opaque", json!({})), &[]);
    assert!(
        !out.success && out.stderr.contains("may write only its own Secrets"),
        "{out}"
    );
    // The policy binds the webhook's account only: an admin may.
    admin
        .create(&secret("other", "Opaque", json!({})), &[])
        .expect_success("an admin creates a Secret");
    // And the webhook's own work is not hindered: it wrote both Secrets
    // under the policy, and keeps them without error.
    let replica = &env.replicas[0];
    assert!(ready(replica));
    assert_eq!(
        metric(replica, "pipelinerollout_webhook_certs_errors_total"),
        0.0,
        "{}",
        replica.webhook.log_tail(20)
    );
    let out = env.write("after-refusals");
    assert!(out.success, "{out}");

    // Bad input: the CA Secret replaced (by an admin) with one of a type
    // the webhook does not write. It says so and how to get out, retries
    // with backoff, and writes nothing meanwhile.
    let wrong = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "pipelinerollout-webhook-ca", "namespace": NAMESPACE},
        "type": "example.com/other", "stringData": {"note": "not a CA"}});
    let is_wrong = || {
        admin
            .get("secret", NAMESPACE, "pipelinerollout-webhook-ca")
            .is_some_and(|s| s["type"] == "example.com/other")
    };
    // The controller makes the Secret anew as soon as it is deleted; the
    // replacement races it, so it is tried a few times.
    for _ in 0..5 {
        let out =
            admin.run_with_stdin(&["replace", "--force", "-f", "-"], Some(&wrong.to_string()));
        if out.success && is_wrong() {
            break;
        }
    }
    assert!(
        is_wrong(),
        "the CA Secret could not be replaced with one of another type"
    );
    let errors = |r| {
        metric(
            r,
            "pipelinerollout_webhook_certs_errors_total{operation=\"secret\"}",
        )
    };
    let before = errors(replica);
    let said = within(Duration::from_secs(5), || {
        replica.webhook.log_tail(200).contains(
            "is of type example.com/other, not Opaque, and a Secret's type cannot change: the webhook does not write it; delete it",
        )
    });
    assert!(
        said.is_some(),
        "no log line names the wrong type:\n{}",
        replica.webhook.log_tail(20)
    );
    std::thread::sleep(Duration::from_secs(6));
    let retries = errors(replica) - before;
    assert!(
        (1.0..=8.0).contains(&retries),
        "{retries} retries in about 6 s: the backoff bounds them"
    );
    assert!(is_wrong(), "the webhook wrote the Secret of the wrong type");
    // The way out works: deleted, it is made anew.
    admin
        .run(&[
            "delete",
            "secret",
            "pipelinerollout-webhook-ca",
            "-n",
            NAMESPACE,
        ])
        .expect_success("delete the Secret of the wrong type");
    let remade = within(Duration::from_secs(10), || {
        admin
            .get("secret", NAMESPACE, "pipelinerollout-webhook-ca")
            .is_some_and(|s| s["type"] == "Opaque")
    });
    assert!(remade.is_some(), "{}", replica.webhook.log_tail(20));
}

#[test]
fn a_lease_and_ca_bundles_the_webhooks_token_overwrites_are_detected_and_taken_back() {
    let _serial = one_at_a_time();
    let Some(assets) = require("stolen token: Lease and caBundle", Assets::find()) else {
        return;
    };
    let env = SelfManaged::start(
        &assets,
        &["127.0.0.1", "127.0.0.2"],
        &[&LEASE_FLAGS[..], &["--cert-propagation=2s"]].concat(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let original = ca_bundles(&env.cluster);
    let leader_gauge = |i: usize| metric(&env.replicas[i], "pipelinerollout_webhook_leader ");
    assert!(
        within(Duration::from_secs(10), || leader_gauge(0)
            + leader_gauge(1)
            == 1.0)
        .is_some(),
        "one replica leads"
    );
    let as_webhook = env.cluster.kubectl(User::Webhook);

    // One write of the Lease: held by "evil" for 68 years, never renewed.
    as_webhook
        .run(&[
            "patch",
            "lease",
            "pipelinerollout-webhook",
            "-n",
            NAMESPACE,
            "--type=merge",
            "-p",
            r#"{"spec":{"holderIdentity":"evil","leaseDurationSeconds":2147483647}}"#,
        ])
        .expect_success("the token writes the Lease");
    // The leader steps down at its next renewal.
    assert!(
        within(Duration::from_secs(5), || leader_gauge(0) + leader_gauge(1)
            == 0.0)
        .is_some(),
        "the leader did not step down"
    );

    // Then every caBundle: bytes that are not PEM in the first validating
    // webhook, a foreign CA in every other.
    let stranger = pipelinerollout_webhook::pki::generate("stranger", &["stranger".to_owned()], 1)
        .expect("a CA");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let count = env
            .cluster
            .kubectl(User::Admin)
            .run(&["get", kind, CONFIGURATION, "-o", "json"])
            .json()["webhooks"]
            .as_array()
            .map_or(0, Vec::len);
        let ops: Vec<_> = (0..count)
            .map(|i| {
                let value = if kind.starts_with("validating") && i == 0 {
                    b64("this is not PEM")
                } else {
                    b64(&stranger.ca_pem)
                };
                json!({"op": "replace", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": value})
            })
            .collect();
        as_webhook
            .run(&[
                "patch",
                kind,
                CONFIGURATION,
                "--type=json",
                "-p",
                &json!(ops).to_string(),
            ])
            .expect_success("the token replaces the caBundle");
    }
    let overwritten = Instant::now();

    // Every replica notices: its certs_trusted gauge falls to 0, it logs
    // why and is not ready, until the caBundle is put back.
    let mut noticed = [None, None];
    let mut restored = None;
    while restored.is_none() || noticed.iter().any(Option::is_none) {
        for (i, seen) in noticed.iter_mut().enumerate() {
            if seen.is_none()
                && metric(&env.replicas[i], "pipelinerollout_webhook_certs_trusted ") == 0.0
            {
                *seen = Some(overwritten.elapsed());
            }
        }
        if restored.is_none() && ca_bundles(&env.cluster) == original {
            restored = Some(overwritten.elapsed());
        }
        assert!(
            overwritten.elapsed() < LEASE_DURATION + PROPAGATION + Duration::from_secs(6),
            "noticed {noticed:?}, restored {restored:?}; logs:\n{}\n---\n{}",
            env.replicas[0].webhook.log_tail(20),
            env.replicas[1].webhook.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let restored = restored.expect("set");
    eprintln!(
        "the replicas noticed the untrusted caBundle after {noticed:?}; it was put back {restored:?} after the overwrite (Lease duration {LEASE_DURATION:?}, propagation {PROPAGATION:?})"
    );
    // A replica took the Lease after its own duration, and wrote the
    // caBundle back within a propagation period of leading.
    assert!(
        restored <= LEASE_DURATION + PROPAGATION + Duration::from_secs(2),
        "put back {restored:?} after the overwrite"
    );
    for replica in &env.replicas {
        let log = replica.webhook.log_tail(10_000);
        assert!(
            log.contains("not ready until the caBundle trusts the served certificate")
                && log.contains("the caBundle holds no certificate"),
            "replica {} says the caBundle does not trust it, and why:\n{log}",
            replica.ip
        );
        assert!(
            within(Duration::from_secs(6), || ready(replica)).is_some(),
            "replica {} is ready again",
            replica.ip
        );
    }
    // The caBundle was written once per configuration, not in a loop.
    let writes: f64 = env
        .replicas
        .iter()
        .map(|r| metric(r, "pipelinerollout_webhook_certs_ca_bundle_updates_total"))
        .sum();
    std::thread::sleep(Duration::from_secs(2));
    let later: f64 = env
        .replicas
        .iter()
        .map(|r| metric(r, "pipelinerollout_webhook_certs_ca_bundle_updates_total"))
        .sum();
    assert_eq!(writes, later, "the caBundle is written again and again");
    let out = env.write("after-take-back");
    assert!(out.success, "{out}");
}

#[test]
fn with_the_second_line_a_fail_open_install_still_judges_forces_when_the_webhook_is_out_of_reach() {
    let _serial = one_at_a_time();
    let Some(assets) = require("stolen token: the second line", Assets::find()) else {
        return;
    };
    // The self-managed overlay, failing open, with the second line.
    let dir = tempfile::tempdir().expect("a directory");
    // kustomize takes relative paths only: up from the directory to /,
    // then down to the repository.
    let up = "../".repeat(dir.path().components().count() - 1);
    let root = std::path::PathBuf::from(format!(
        "{up}{}",
        repo_root().display().to_string().trim_start_matches('/')
    ));
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\ncomponents:\n- {}\n- {}\n",
        root.join(OVERLAY).display(),
        root.join("manifests/components/fail-open").display(),
        root.join("manifests/components/validating-admission-policy")
            .display()
    );
    std::fs::write(dir.path().join("kustomization.yaml"), kustomization).expect("write");
    let lags = [Duration::from_millis(500)];
    let env = SelfManaged::start_install(&assets, dir.path(), &["127.0.0.1"], &[], &lags)
        .unwrap_or_else(|e| panic!("{e}"));
    let cluster = &env.cluster;
    // A namespace editor: may write PipelineRollouts in the team's
    // namespace, holds no force-reapply grant.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "rollout-editor", "namespace": TEAM},
        "rules": [{"apiGroups": ["numaplane.numaproj.io"], "resources": ["pipelinerollouts"],
                   "verbs": ["get", "list", "create", "update", "patch"]}]});
    cluster
        .create_all(vec![
            role,
            binding(
                Some(TEAM),
                "rollout-editor",
                "Role",
                "rollout-editor",
                &[User::Alice],
            ),
        ])
        .expect("grant the editor");
    cluster
        .wait_for_access(
            User::Alice,
            "patch",
            "pipelinerollouts.numaplane.numaproj.io",
            TEAM,
            true,
        )
        .expect("the editor's grant");
    cluster
        .wait_for_policies_compiled(Duration::from_secs(3), Duration::from_secs(60))
        .expect("the policies compiled");
    let alice = cluster.kubectl(User::Alice);
    alice
        .create(
            &apiserver_support::rollout(TEAM, "p", Some(json!(300))),
            &[],
        )
        .expect_success("the editor creates a rollout through the webhook");

    // The webhook is out of reach (what a replaced caBundle also makes of
    // it): its only replica is killed. Fail-open lets writes through
    // without it: a rollout created without a timeout is no longer
    // defaulted.
    env.replicas[0].webhook.signal("KILL").expect("SIGKILL");
    let undefaulted = within(Duration::from_secs(15), || {
        let out = alice.create(
            &apiserver_support::rollout(TEAM, "unjudged", None),
            &["--dry-run=server", "-o", "json"],
        );
        out.success
            && out.json()["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"]
                .is_null()
    });
    assert!(
        undefaulted.is_some(),
        "fail-open lets an ordinary write through, undefaulted"
    );
    let forces = [
        (
            "allow-data-loss",
            json!({"metadata": {"annotations": {"numaplane.numaproj.io/allow-data-loss": "true"}}}),
        ),
        (
            "forcePromote",
            json!({"spec": {"strategy": {"progressive": {"forcePromote": true}}}}),
        ),
    ];
    for (what, patch) in forces {
        let out = alice.merge_patch("pipelinerollout", TEAM, "p", &patch, &[]);
        assert!(
            !out.success && out.stderr.contains("ValidatingAdmissionPolicy"),
            "with the webhook out of reach, the editor's {what} is refused by the API server: {out}"
        );
    }
}
