//! Whether the requester has one of the policy's grants (forceReapply,
//! deleteUndrained, editChildren, namespaceStrategy) on an object: the
//! server's only source of the permissions a judgement asks for.
//!
//! [`StaticLists`] reads the grant's `users` and `groups` only (no I/O);
//! [`RbacAuthorizer`] reads them first, then asks Kubernetes RBAC through a
//! SubjectAccessReview with a custom verb (the way cert-manager authorises
//! approvals), where any error denies. [`Authorizer`] holds either, for the
//! server and the command line.

mod cache;
mod rbac;

use std::time::Duration;

pub use rbac::RbacAuthorizer;

use crate::policy::{Grant, Permission, UserInfo};

/// The most groups a requester may carry for a force to be considered.
/// Authenticators in common use send a few hundred at most (Microsoft Entra
/// ID puts no more than 200 into a token); a request with more is forged.
const MAX_GROUPS: usize = 1_000;

/// The most bytes of userInfo (username, uid, groups, extra keys and
/// values, added up) a requester may carry for a force to be considered:
/// 1,000 groups of 64 characters.
const MAX_USER_INFO_BYTES: usize = 64 * 1024;

/// Why `user` is too large to be a requester the API server sent, if it is.
/// Such a request is refused any force without asking RBAC, so that a
/// forged identity costs neither a SubjectAccessReview nor cache memory.
fn oversized_user(user: &UserInfo) -> Option<String> {
    let groups = user.groups().count();
    let extra: usize = user
        .extra_map()
        .iter()
        .map(|(k, v)| k.len() + v.iter().map(String::len).sum::<usize>())
        .sum();
    let bytes = user.username().len()
        + user.uid().map_or(0, str::len)
        + user.groups().map(str::len).sum::<usize>()
        + extra;
    (groups > MAX_GROUPS || bytes > MAX_USER_INFO_BYTES).then(|| {
        format!(
            "the request's userInfo carries {groups} groups and {bytes} bytes, more than the {MAX_GROUPS} groups and {MAX_USER_INFO_BYTES} bytes any API server sends, so it is not considered for a force; if this identity is real, force the re-apply as a user with fewer groups"
        )
    })
}

/// What an RBAC check did, for the metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RbacTrace {
    /// allowed, denied or error.
    pub(crate) result: &'static str,
    /// Whether the answer came from the cache.
    pub(crate) cached: bool,
    pub(crate) duration: Duration,
}

/// The answer to one permission check, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PermissionCheck {
    /// Granted or refused, with the words for the audit log or the denial.
    pub(crate) permission: Permission,
    /// The RBAC check made, if one was.
    pub(crate) rbac: Option<RbacTrace>,
}

impl From<Permission> for PermissionCheck {
    fn from(permission: Permission) -> Self {
        Self {
            permission,
            rbac: None,
        }
    }
}

/// The object a permission is asked on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) group: &'a str,
    /// Its resource (plural).
    pub(crate) resource: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
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
    pub fn answer(&self, grant: Grant<'_>, user: &UserInfo) -> Permission {
        if let Some(why) = oversized_user(user) {
            return Permission::Refused(why);
        }
        match (grant.static_permission(user), grant.rbac) {
            (Permission::Refused(why), Some(rbac)) => Permission::Refused(format!(
                "{why}, and RBAC (verb \"{}\") could not be asked: {}",
                rbac.verb, self.no_rbac
            )),
            (answer, _) => answer,
        }
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

impl Authorizer {
    /// Whether `user` has `grant` on `target`, asked within `limit`.
    pub(crate) async fn ask(
        &self,
        grant: Grant<'_>,
        user: &UserInfo,
        target: Target<'_>,
        limit: Duration,
    ) -> PermissionCheck {
        match self {
            Self::StaticLists(lists) => lists.answer(grant, user).into(),
            Self::Rbac(rbac) => rbac.ask(grant, user, target, limit).await,
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
        let policy = policy.grant();
        let lists = StaticLists::new("no connection to the API server");
        let alice = UserInfo::new("alice", &["devs"]);
        match lists.answer(policy, &alice) {
            Permission::Refused(why) => assert!(
                why.contains("could not be asked: no connection to the API server"),
                "{why}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let admin = UserInfo::new("root", &["system:masters"]);
        assert!(matches!(
            lists.answer(policy, &admin),
            Permission::Granted(_)
        ));
    }

    #[test]
    fn a_requester_larger_than_any_api_server_sends_is_refused() {
        let policy = Policy::built_in().force_reapply;
        let policy = policy.grant();
        let lists = StaticLists::new("no API server");
        // Every requester is in system:masters, so only the size refuses.
        let groups = |more: Vec<String>| {
            let mut all = vec!["system:masters".to_owned()];
            all.extend(more);
            all
        };
        let cases = [
            (
                "one group more than the limit",
                groups((0..MAX_GROUPS).map(|i| format!("g{i}")).collect()),
                true,
            ),
            (
                "one group longer than the byte limit",
                groups(vec!["g".repeat(MAX_USER_INFO_BYTES)]),
                true,
            ),
            (
                "at the group limit, under the byte limit",
                groups((1..MAX_GROUPS).map(|i| format!("{i:064}")).collect()),
                false,
            ),
            (
                "an ordinary requester",
                groups(vec!["devs".to_owned()]),
                false,
            ),
        ];
        for (name, groups, refused) in cases {
            let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
            let user = UserInfo::new("root", &groups);
            match (lists.answer(policy, &user), refused) {
                (Permission::Refused(why), true) => assert!(
                    why.contains("more than the 1000 groups and 65536 bytes"),
                    "{name}: {why}"
                ),
                (Permission::Granted(_), false) => {}
                (other, _) => panic!("{name}: got {other:?}"),
            }
        }
    }
}
