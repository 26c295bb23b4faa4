//! The self-managed install under another namespace, through a real
//! kube-apiserver: an overlay of manifests/overlays/self-managed with
//! `namespace: webhooks` and the transformer manifests/namespace. The
//! webhook runs as the ServiceAccount `webhooks/pipelinerollout-webhook`
//! (a real token), so it works only if the RBAC subjects name that
//! namespace; the API server calls the Service `webhooks/...` and checks
//! the certificate for `pipelinerollout-webhook.webhooks.svc`; and the
//! in-process policies apply to the namespace and account of the install.
//!
//! Without the binaries the test prints a skip line, and fails in CI.

use crate::apiserver_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use apiserver_support::rollout;
use envtest::{
    Assets, Cluster, SecretMirror, User, Webhook, WebhookOptions, repo_root, require, test_name,
};
use serde_json::json;

const WEBHOOK: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");
const NAMESPACE: &str = "webhooks";
const ACCOUNT: &str = "pipelinerollout-webhook";
const SECRET: &str = "pipelinerollout-webhook-tls";
const TEAM: &str = "namespace-team";

/// `dir` as a path relative to `from` (kustomize takes relative paths only).
fn relative(from: &Path, dir: &Path) -> String {
    let up = "../".repeat(from.components().count().saturating_sub(1));
    format!("{up}{}", dir.display().to_string().trim_start_matches('/'))
}

/// The overlay a user writes to install self-managed into `webhooks`.
fn overlay(cluster: &Cluster) -> PathBuf {
    let dir = cluster.dir().join("overlay");
    std::fs::create_dir_all(&dir).expect("overlay dir");
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {NAMESPACE}\n\
         resources:\n- {}\ntransformers:\n- {}\n",
        relative(&dir, &repo_root().join("manifests/overlays/self-managed")),
        relative(&dir, &repo_root().join("manifests/namespace")),
    );
    std::fs::write(dir.join("kustomization.yaml"), text).expect("kustomization");
    dir
}

/// A kubeconfig with a real token of the ServiceAccount `webhooks/pipelinerollout-webhook`.
fn account_kubeconfig(cluster: &Cluster) -> PathBuf {
    cluster
        .service_account_kubeconfig(NAMESPACE, ACCOUNT)
        .expect("a token of the webhook's account")
}

#[test]
fn the_self_managed_install_works_under_another_namespace() {
    let Some(assets) = require(&test_name(), Assets::find()) else {
        return;
    };
    let cluster = Cluster::start(&assets).expect("start the API server");
    cluster
        .install_crd(&repo_root().join(envtest::CRD))
        .expect("CRD");
    let policy = cluster.dir().join("policy.yaml");
    std::fs::write(&policy, envtest::base_policy().expect("policy")).expect("policy file");
    let installed = cluster
        .install_self_managed(&overlay(&cluster), 443)
        .expect("install the overlay");
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}}),
        ])
        .expect("team namespace");

    let kubeconfig = account_kubeconfig(&cluster);
    let certs = cluster.dir().join("replica").join("tls");
    let _mirror = SecretMirror::start(
        &cluster,
        NAMESPACE,
        SECRET,
        &certs,
        Duration::from_millis(500),
    )
    .expect("the kubelet stand-in");
    let options = WebhookOptions {
        binary: WEBHOOK.into(),
        name: "replica".to_owned(),
        policy,
        extra_args: Vec::new(),
        kubeconfig: Some(kubeconfig.clone()),
    };
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut webhook =
        Webhook::spawn_managed(&cluster, options, listen, &certs, NAMESPACE, &kubeconfig)
            .expect("start the webhook as webhooks/pipelinerollout-webhook");
    cluster
        .set_webhook_port(&installed, webhook.addr().port())
        .expect("the webhook's port");
    // Ready once it wrote the Secret and the caBundle as its own account.
    webhook
        .wait_ready()
        .expect("the webhook is ready under namespace webhooks");
    // The API server calls both webhooks through the Service in `webhooks`.
    cluster
        .wait_for_webhooks(&installed, TEAM)
        .expect("the API server calls the webhooks");
    let admin = cluster.kubectl(User::Admin);
    let created = admin.create(&rollout(TEAM, "written", None), &["-o", "json"]);
    assert!(created.success, "a write through the webhook: {created}");
    assert!(
        !created.json()["spec"]["pipeline"]["spec"]["lifecycle"]["pauseGracePeriodSeconds"]
            .is_null(),
        "the mutating webhook set the drain timeout: {created}"
    );

    // The install's namespace is the one the webhooks skip and the
    // in-process policy guards.
    let skipped = admin.create(&rollout(NAMESPACE, "skipped", Some(json!(60))), &[]);
    assert!(
        !skipped.success
            && skipped
                .stderr
                .contains("pipelinerollout-webhook-skipped-namespaces"),
        "a rollout in the install's namespace is refused in-process: {skipped}"
    );
    // The own-account policy applies to webhooks/pipelinerollout-webhook:
    // its RBAC lets it patch any rollout, the policy only a reset.
    let out = Command::new(cluster.kubectl_binary())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "patch",
            "pipelinerollout",
            "written",
            "-n",
            TEAM,
            "--type=merge",
        ])
        .args([
            "-p",
            r#"{"metadata":{"labels":{"changed":"by-the-webhook"}}}"#,
        ])
        .output()
        .expect("run kubectl as the webhook's account");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("pipelinerollout-webhook-own-account"),
        "the webhook's account may not change a label: {stderr}"
    );
}
