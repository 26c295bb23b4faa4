//! RBAC objects for the cluster's users.

use serde_json::{Value, json};

use crate::user::User;

/// A RoleBinding (`namespace` given) or ClusterRoleBinding of `users` to
/// the `role_kind` (Role or ClusterRole) `role`.
pub fn binding(
    namespace: Option<&str>,
    name: &str,
    role_kind: &str,
    role: &str,
    users: &[User],
) -> Value {
    let role_ref =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role});
    let subjects: Vec<Value> = users.iter().map(|u| u.subject()).collect();
    match namespace {
        Some(namespace) => json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": role_ref, "subjects": subjects}),
        None => json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name}, "roleRef": role_ref, "subjects": subjects}),
    }
}
