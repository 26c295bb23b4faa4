//! The flag that says how `serve` reaches the API server.

use std::path::PathBuf;

/// The API server's flag of `serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ApiServerArgs {
    /// Kubeconfig for RBAC checks (forceReapply.rbac), Events, the sweeper and leader election; without it, the in-cluster service account or KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}
