//! How the process reaches the API server: the kubeconfig named on the
//! command line, else the in-cluster service account or `KUBECONFIG` /
//! `~/.kube/config`. `serve` reads it once ([`crate::app`]); `review`
//! and the tests build their own.

pub mod args;

use std::path::{Path, PathBuf};

use kube::config::{InferConfigError, KubeconfigError};

/// Why no client for the API server could be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    /// The kubeconfig file cannot be read.
    #[error("cannot read kubeconfig {}: {source}", path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: KubeconfigError,
    },
    /// The kubeconfig was read but cannot be used.
    #[error("kubeconfig {}: {source}", path.display())]
    UseKubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: KubeconfigError,
    },
    /// Neither the in-cluster account nor a kubeconfig is usable.
    #[error("no API server to ask: not in a cluster and no usable kubeconfig ({0})")]
    NoApiServer(InferConfigError),
    /// The configuration found cannot make a client.
    #[error("cannot build the API client: {0}")]
    Build(kube::Error),
}

/// Builds a client for the API server: from `kubeconfig` when given, else
/// the in-cluster service account or `KUBECONFIG` / `~/.kube/config`.
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, KubeClientError> {
    let config = config(kubeconfig).await?;
    kube::Client::try_from(config).map_err(KubeClientError::Build)
}

/// The configuration [`client`] builds its client from (for clients
/// with settings of their own, such as the leader election's timeouts).
pub(crate) async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, KubeClientError> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                KubeClientError::ReadKubeconfig {
                    path: path.to_owned(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|source| KubeClientError::UseKubeconfig {
                    path: path.to_owned(),
                    source,
                })?
        }
        None => kube::Config::infer()
            .await
            .map_err(KubeClientError::NoApiServer)?,
    })
}
