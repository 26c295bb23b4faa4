//! A real Kubernetes control plane for pipelinerollout-webhook's end-to-end
//! tests, the way controller-runtime's envtest provides one: etcd and
//! kube-apiserver (and, on request, kube-controller-manager) on loopback,
//! with a throwaway CA, static-token users and RBAC, plus the real webhook
//! binary.
//!
//! - [`Assets::find`] finds the binaries (`TEST_ASSET_*`, then
//!   `KUBEBUILDER_ASSETS`, then the PATH for etcd and kubectl); [`require`]
//!   turns "missing" into a failure in CI and a printed skip elsewhere.
//! - [`Cluster::start`] starts etcd and kube-apiserver; [`Cluster::kubectl`]
//!   acts as one of the [`User`]s; [`Cluster::install_crd`] and
//!   [`Cluster::install_manifests`] install what users install.
//! - [`Webhook::start`] runs `pipelinerollout-webhook serve` from the binary
//!   the caller names: the webhook's integration tests pass
//!   `env!("CARGO_BIN_EXE_pipelinerollout-webhook")`, which Cargo sets only
//!   for them.
//! - [`Served`] is the one launcher of that binary (the [`Webhook`]'s, and
//!   the tests' that measure the process without a cluster): it starts
//!   [`ServeCommand`] on port 0 unless told otherwise and reads the
//!   addresses `serve` reports it bound ([`Bound`]).
//! - [`Installation::start`] does all of that in the order users do, and
//!   [`shared`] shares one installation between a test module's tests, and
//!   stops it once they are done (`shared.rs`).
//! - [`Cluster::install_self_managed`] and [`SecretMirror`] run the
//!   webhook with `serve --manage-certs`: the webhooks call a Service, and
//!   the harness plays the kubelet, copying the webhook's Secret into each
//!   replica's certificate directory whenever it changes;
//!   [`Webhook::start_managed`] starts such a replica.
//! - [`binding`] and [`webhook_calls`] build RBAC for the users and read the
//!   API server's webhook latency.
//! - [`Cluster::wait_for_policies_compiled`] waits until kube-apiserver
//!   has compiled the admission policies a test installed, before the test
//!   writes under them (see `policies.rs` for the crash it avoids).
//! - [`Proxy`] stands between one process and the API server, and can be
//!   cut to take the API server away from that process alone
//!   ([`Cluster::kubeconfig_via`] points a kubeconfig at it).
//!
//! Every process runs under a wrapper that stops it when the test process
//! ends, however it ends (see `process.rs`); scratch directories go the same
//! way, unless `ENVTEST_KEEP=1` asks to keep them (logs of every server,
//! kubeconfigs of every user).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod assets;
mod cluster;
mod http;
mod install;
mod kubectl;
mod managed;
mod metrics;
mod numaflow;
mod pki;
mod policies;
mod process;
mod proxy;
mod rbac;
mod serve;
mod setup;
mod shared;
mod user;
mod webhook;

pub use assets::{Assets, Missing, in_ci, require};
pub use cluster::{Cluster, KEEP, free_port};
pub use install::{Installed, repo_root};
pub use kubectl::{Kubectl, Output};
pub use managed::SecretMirror;
pub use metrics::{WebhookCalls, webhook_calls};
pub use numaflow::{NUMAFLOW_ACCOUNT, TEST_ASSET_NUMAFLOW, numaflow_binary};
pub use pki::{CertPair, Pki};
pub use proxy::Proxy;
pub use rbac::binding;
pub use serve::{BOUND_TARGET, Bound, DEPLOYMENT_ENV, ServeCommand, Served, on_path};
pub use setup::{CRD, Installation, MANIFESTS, PROBE_NAMESPACE, base_policy, test_name};
pub use shared::shared;
pub use user::User;
pub use webhook::{Webhook, WebhookOptions};
