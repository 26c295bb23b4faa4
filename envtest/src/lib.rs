//! A real Kubernetes control plane for end-to-end tests, the way
//! controller-runtime's envtest provides one: etcd and kube-apiserver (and,
//! on request, kube-controller-manager) on loopback, with a throwaway CA,
//! static-token users and RBAC, plus the real webhook binary.
//!
//! - [`Assets::find`] finds the binaries (`TEST_ASSET_*`, then
//!   `KUBEBUILDER_ASSETS`, then the PATH for etcd and kubectl); [`require`]
//!   turns "missing" into a failure in CI and a printed skip elsewhere.
//! - [`Cluster::start`] starts etcd and kube-apiserver; [`Cluster::kubectl`]
//!   acts as one of the [`User`]s; [`Cluster::install_crd`] and
//!   [`Cluster::install_manifests`] install what users install.
//! - [`Webhook::start`] runs `pipelinerollout-webhook serve`.
//! - [`Installation::start`] does all of that in the order users do, and
//!   [`shared`] shares one installation between a test binary's tests.
//!
//! Every process runs under a wrapper that stops it when the test process
//! ends, however it ends (see `process.rs`); scratch directories go the same
//! way, unless `ENVTEST_KEEP=1` asks to keep them (logs of every server,
//! kubeconfigs of every user).
// Not every test binary uses every item.
#![allow(dead_code, unused_imports)]

mod assets;
mod cluster;
mod http;
mod install;
mod kubectl;
mod pki;
mod process;
mod setup;
mod webhook;

pub use assets::{
    Assets, KUBEBUILDER_ASSETS, Missing, TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER,
    TEST_ASSET_KUBE_CONTROLLER_MANAGER, TEST_ASSET_KUBECTL, in_ci, require,
};
pub use cluster::{Cluster, KEEP, User, free_port};
pub use install::{Installed, render, repo_root};
pub use kubectl::{Kubectl, Output};
pub use pki::{CertPair, Pki};
pub use process::{Process, log_tail};
pub use setup::{CRD, Installation, MANIFESTS, PROBE_NAMESPACE, base_policy, shared, test_name};
pub use webhook::{BINARY, Webhook, WebhookOptions};
