//! The users who write PipelineRollouts, as the `userInfo` of an
//! AdmissionReview: the username and the groups the API server sends for
//! them (as captured in `tests/fixtures/admission/`).

use serde_json::{Value, json};

/// A `userInfo` object.
fn user_info(username: &str, groups: &[&str]) -> Value {
    json!({"username": username, "groups": groups})
}

/// A cluster admin (group `system:masters`).
pub fn admin() -> Value {
    user_info("admin", &["system:masters", "system:authenticated"])
}

/// A developer, in group `devs` only: no permission to force.
pub fn alice() -> Value {
    user_info("alice", &["devs", "system:authenticated"])
}

/// An SRE (group `sre`), whom RBAC may grant the permission to force.
pub fn carol() -> Value {
    user_info("carol", &["sre", "system:authenticated"])
}

/// Argo CD's API server, which runs the allow-data-loss resource action.
pub fn argocd_server() -> Value {
    user_info(
        "system:serviceaccount:argocd:argocd-server",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:argocd",
            "system:authenticated",
        ],
    )
}

/// The username of a `userInfo` object ("" when it has none).
pub fn username(user: &Value) -> &str {
    user["username"].as_str().unwrap_or_default()
}

/// The groups of a `userInfo` object (the strings among them).
pub fn groups(user: &Value) -> Vec<&str> {
    user["groups"]
        .as_array()
        .map(|groups| groups.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `userInfo` of a captured AdmissionReview, without its uid.
    fn captured(fixture: &str) -> Value {
        let path = format!(
            "{}/../tests/fixtures/admission/{fixture}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let review: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let user = &review["request"]["userInfo"];
        user_info(username(user), &groups(user))
    }

    #[test]
    fn the_users_are_the_ones_a_real_api_server_sent() {
        for (fixture, user) in [
            ("01-create-kubectl-apply-validate.json", admin()),
            (
                "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
                alice(),
            ),
            (
                "04-allow-data-loss-argocd-server-action-validate.json",
                argocd_server(),
            ),
        ] {
            assert_eq!(captured(fixture), user, "{fixture}");
        }
    }
}
