//! Numaplane's cluster default upgrade strategy, followed by a watch of its
//! ConfigMap `numaplane-controller-config` in `numaplane.namespace`, in
//! every replica: a namespace whose namespace-level ConfigMap is deleted,
//! loses its label or sets no strategy falls back to it, and `/validate`
//! judges such a write by it (rule 24). Whatever cannot be read (no such
//! ConfigMap, no `config.yaml`, invalid YAML, a watch that fails) is held
//! as [`ClusterDefault::Unknown`], which the rule takes as `no-strategy`.
//! A policy that names another namespace restarts the watch there.

use std::sync::Arc;

use arc_swap::ArcSwap;
use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::logtext::Escaped;
use crate::namespace_config::{CONTROLLER_CONFIG, ClusterDefault};
use crate::policy::Policy;

/// Follows the default until the policy channel closes, storing each
/// reading in `into`.
pub async fn run(
    client: kube::Client,
    mut policies: watch::Receiver<Arc<Policy>>,
    into: Arc<ArcSwap<ClusterDefault>>,
) {
    loop {
        let namespace = policies.borrow_and_update().numaplane.namespace.clone();
        tokio::select! {
            () = follow(client.clone(), &namespace, &into) => return,
            changed = policies.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Watches the ConfigMap in `namespace` for as long as the watch yields.
async fn follow(client: kube::Client, namespace: &str, into: &ArcSwap<ClusterDefault>) {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    // kube-runtime's backoff spaces the retries after an error.
    let mut maps = watcher::watch_object(api, CONTROLLER_CONFIG)
        .default_backoff()
        .boxed();
    while let Some(map) = maps.next().await {
        let read = match map {
            Ok(Some(map)) => ClusterDefault::from_config_map(map.data.as_ref()),
            Ok(None) => ClusterDefault::Unknown(format!(
                "no ConfigMap {CONTROLLER_CONFIG} in namespace \"{namespace}\""
            )),
            Err(e) => ClusterDefault::Unknown(format!(
                "cannot watch {namespace}/{CONTROLLER_CONFIG}: {e}"
            )),
        };
        if **into.load() != read {
            tracing::info!(
                default = %Escaped(&read.described()),
                "Numaplane's cluster default upgrade strategy, for namespaces without their own"
            );
            into.store(Arc::new(read));
        }
    }
}
