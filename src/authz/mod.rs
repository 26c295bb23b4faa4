//! Whether the requester may force a re-apply, behind one seam:
//! [`ForcePermission`], with one implementation per source.
//!
//! [`StaticLists`] reads the policy's `users` and `groups` only (no I/O);
//! [`RbacAuthorizer`] reads them first, then asks Kubernetes RBAC through a
//! SubjectAccessReview with a custom verb (the way cert-manager authorises
//! approvals), where any error denies. [`Authorizer`] holds either, for the
//! server and the command line.

mod cache;
mod rbac;

use std::future::Future;
use std::time::Duration;

pub use rbac::{
    KubeClientError, RBAC_GROUP, RBAC_RESOURCE, RbacAuthorizer, RbacError, kube_client,
};

use crate::policy::{ForceReapply, Permission, UserInfo};

/// What an RBAC check did, for the metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RbacTrace {
    /// allowed, denied or error.
    pub result: &'static str,
    /// Whether the answer came from the cache.
    pub cached: bool,
    /// How long the check took.
    pub duration: Duration,
}

/// The answer to one permission check, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionCheck {
    /// Granted or refused, with the words for the audit log or the denial.
    pub permission: Permission,
    /// The RBAC check made, if one was.
    pub rbac: Option<RbacTrace>,
}

impl From<Permission> for PermissionCheck {
    fn from(permission: Permission) -> Self {
        Self {
            permission,
            rbac: None,
        }
    }
}

/// The object a force is asked for.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// One source of the answer to "may this requester force a re-apply of
/// this object?".
pub trait ForcePermission: Sync {
    /// Asks, within `limit`.
    fn check(
        &self,
        policy: &ForceReapply,
        user: &UserInfo,
        target: Target<'_>,
        limit: Duration,
    ) -> impl Future<Output = PermissionCheck> + Send;
}

/// The policy's static lists as the only source: when the policy also
/// names RBAC, what only RBAC could allow is refused, saying why RBAC could
/// not be asked.
#[derive(Debug, Clone)]
pub struct StaticLists {
    no_rbac: String,
}

impl StaticLists {
    /// Static lists only; `no_rbac` says why no API server can be asked.
    pub fn new(no_rbac: impl Into<String>) -> Self {
        Self {
            no_rbac: no_rbac.into(),
        }
    }

    /// The lists' answer, with no I/O.
    pub fn answer(&self, policy: &ForceReapply, user: &UserInfo) -> Permission {
        match (policy.static_permission(user), &policy.rbac) {
            (Permission::Refused(why), Some(rbac)) => Permission::Refused(format!(
                "{why}, and RBAC (verb \"{}\") could not be asked: {}",
                rbac.verb, self.no_rbac
            )),
            (answer, _) => answer,
        }
    }
}

impl ForcePermission for StaticLists {
    fn check(
        &self,
        policy: &ForceReapply,
        user: &UserInfo,
        _target: Target<'_>,
        _limit: Duration,
    ) -> impl Future<Output = PermissionCheck> + Send {
        std::future::ready(self.answer(policy, user).into())
    }
}

/// Either source, chosen at start-up.
#[derive(Debug)]
pub enum Authorizer {
    /// The static lists only (no API server).
    StaticLists(StaticLists),
    /// The static lists, then RBAC.
    Rbac(RbacAuthorizer),
}

impl ForcePermission for Authorizer {
    async fn check(
        &self,
        policy: &ForceReapply,
        user: &UserInfo,
        target: Target<'_>,
        limit: Duration,
    ) -> PermissionCheck {
        match self {
            Self::StaticLists(lists) => lists.check(policy, user, target, limit).await,
            Self::Rbac(rbac) => rbac.check(policy, user, target, limit).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn static_lists_say_why_rbac_was_not_asked() {
        let policy = Policy::from_yaml("forceReapply:\n  rbac: {verb: force-reapply}\n")
            .expect("valid policy")
            .force_reapply;
        let lists = StaticLists::new("no connection to the API server");
        let alice = UserInfo::new("alice", &["devs"]);
        match lists.answer(&policy, &alice) {
            Permission::Refused(why) => assert!(
                why.contains("could not be asked: no connection to the API server"),
                "{why}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let admin = UserInfo::new("root", &["system:masters"]);
        assert!(matches!(
            lists.answer(&policy, &admin),
            Permission::Granted(_)
        ));
    }
}
