//! The users the API server knows: their names, groups and RBAC subjects.

/// The users the API server knows (static tokens, `--token-auth-file`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum User {
    /// `admin`, group `system:masters`: may do anything.
    Admin,
    /// `alice`, group `devs`: a developer; the tests grant her RBAC.
    Alice,
    /// `carol`, group `sre` (which force-reapply-rbac.yaml binds).
    Carol,
    /// Argo CD's API server, which runs resource actions such as allow-data-loss.
    ArgocdServer,
    /// Argo CD's application controller, which syncs.
    ArgocdApplicationController,
    /// The Numaplane controller (finalizers, status).
    NumaplaneController,
    /// The webhook's own service account (its SubjectAccessReviews).
    Webhook,
}

impl User {
    /// Every user.
    pub const ALL: [User; 7] = [
        User::Admin,
        User::Alice,
        User::Carol,
        User::ArgocdServer,
        User::ArgocdApplicationController,
        User::NumaplaneController,
        User::Webhook,
    ];

    /// The username the API server sees.
    pub fn name(self) -> &'static str {
        match self {
            User::Admin => "admin",
            User::Alice => "alice",
            User::Carol => "carol",
            User::ArgocdServer => "system:serviceaccount:argocd:argocd-server",
            User::ArgocdApplicationController => {
                "system:serviceaccount:argocd:argocd-application-controller"
            }
            User::NumaplaneController => "system:serviceaccount:numaplane-system:numaplane-sa",
            User::Webhook => {
                "system:serviceaccount:pipelinerollout-webhook:pipelinerollout-webhook"
            }
        }
    }

    /// The groups the API server gives it (service accounts get the groups
    /// real service-account tokens carry).
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            User::Admin => &["system:masters", "system:authenticated"],
            User::Alice => &["devs", "system:authenticated"],
            User::Carol => &["sre", "system:authenticated"],
            User::ArgocdServer | User::ArgocdApplicationController => &[
                "system:serviceaccounts",
                "system:serviceaccounts:argocd",
                "system:authenticated",
            ],
            User::NumaplaneController => &[
                "system:serviceaccounts",
                "system:serviceaccounts:numaplane-system",
                "system:authenticated",
            ],
            User::Webhook => &[
                "system:serviceaccounts",
                "system:serviceaccounts:pipelinerollout-webhook",
                "system:authenticated",
            ],
        }
    }

    /// The user as a RoleBinding or ClusterRoleBinding subject: a
    /// `ServiceAccount` for service accounts, else a `User`.
    pub fn subject(self) -> serde_json::Value {
        match self.name().strip_prefix("system:serviceaccount:") {
            Some(account) => {
                let (namespace, name) = account.split_once(':').unwrap_or(("", account));
                serde_json::json!({"kind": "ServiceAccount", "namespace": namespace, "name": name})
            }
            None => serde_json::json!({
                "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": self.name(),
            }),
        }
    }

    /// Its name in file names (kubeconfigs, kubectl caches).
    pub(crate) fn file_name(self) -> String {
        format!("{self:?}").to_lowercase()
    }
}
