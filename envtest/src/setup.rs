//! A cluster with the webhook installed the way users install it, the
//! policy users install, and the running test's name (`shared.rs` keeps
//! one installation for a test module's tests).

use std::path::Path;

use crate::assets::Assets;
use crate::cluster::Cluster;
use crate::install::{Installed, repo_root};
use crate::webhook::{Webhook, WebhookOptions};

/// The Numaplane CRD the tests install.
pub const CRD: &str = "tests/fixtures/numaplane-pipelinerollout-crd.yaml";
/// The kustomization users install (its webhook configurations and RBAC).
pub const MANIFESTS: &str = "manifests/base";
/// The namespace [`Installation::start`] probes the webhooks in.
pub const PROBE_NAMESPACE: &str = "envtest-probe";

/// A cluster with the Numaplane CRD, the manifests of [`MANIFESTS`] and a
/// webhook process they point at.
#[derive(Debug)]
pub struct Installation {
    /// The webhook (declared first: it stops before the cluster does).
    pub webhook: Webhook,
    /// What the manifests installed.
    pub installed: Installed,
    /// The cluster.
    pub cluster: Cluster,
}

impl Installation {
    /// Starts a cluster; installs the CRD; runs `before_webhooks` (objects
    /// that must predate the webhooks); writes `policy` (YAML or JSON) to a
    /// file and starts the webhook binary `webhook` with it; installs the
    /// manifests; and waits until the API server calls the webhooks.
    pub fn start(
        assets: &Assets,
        webhook: &Path,
        policy: &str,
        before_webhooks: impl FnOnce(&Cluster) -> Result<(), String>,
    ) -> Result<Self, String> {
        Self::start_with(assets, webhook, policy, &[], before_webhooks)
    }

    /// [`Installation::start`], with more flags for the webhook's `serve`.
    pub fn start_with(
        assets: &Assets,
        webhook: &Path,
        policy: &str,
        extra_args: &[&str],
        before_webhooks: impl FnOnce(&Cluster) -> Result<(), String>,
    ) -> Result<Self, String> {
        let cluster = Cluster::start(assets)?;
        cluster.install_crd(&repo_root().join(CRD))?;
        before_webhooks(&cluster)?;
        let policy_file = cluster.dir().join("policy.yaml");
        std::fs::write(&policy_file, policy)
            .map_err(|e| format!("{}: {e}", policy_file.display()))?;
        let webhook = Webhook::start(
            &cluster,
            WebhookOptions {
                binary: webhook.to_owned(),
                name: "webhook".to_owned(),
                policy: policy_file,
                extra_args: extra_args.iter().map(|a| (*a).to_owned()).collect(),
                kubeconfig: None,
            },
        )?;
        let installed = cluster.install_manifests(&repo_root().join(MANIFESTS), &webhook)?;
        cluster
            .wait_for_webhooks(&installed, PROBE_NAMESPACE)
            .map_err(|why| format!("{why}\nwebhook log:\n{}", webhook.log_tail(30)))?;
        Ok(Self {
            webhook,
            installed,
            cluster,
        })
    }
}

/// The policy users install (`manifests/base/policy.yaml`), as text.
pub fn base_policy() -> Result<String, String> {
    let path = repo_root().join(MANIFESTS).join("policy.yaml");
    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", Path::new(&path).display()))
}

/// The running test's name (libtest names each test's thread after it).
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("an end-to-end test")
        .to_owned()
}
