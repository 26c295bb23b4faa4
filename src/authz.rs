//! Who is asking, and whether they may force a re-apply.
//!
//! First the policy's static `users` and `groups` lists; then, when the
//! policy asks for it, Kubernetes RBAC through a SubjectAccessReview with a
//! custom verb (the way cert-manager authorises approvals). Any error of
//! that check denies.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use serde::Deserialize;

use crate::lenient::{List, Text};
use crate::policy::{ForceReapply, RbacPolicy};

/// The requester, as the API server's `request.userInfo` names them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    username: Text,
    #[serde(default)]
    uid: Text,
    #[serde(default)]
    groups: List<Text>,
    /// Extra attributes, passed on untouched when the API server is asked.
    #[serde(default)]
    pub extra: Option<serde_json::Value>,
}

impl UserInfo {
    /// A user with a name and groups (for tests and tools).
    pub fn new(username: &str, groups: &[&str]) -> Self {
        Self {
            username: Text(Some(username.to_owned())),
            uid: Text(None),
            groups: List::Present(groups.iter().map(|g| Text(Some((*g).to_owned()))).collect()),
            extra: None,
        }
    }

    /// The username, or `""` when the request named none.
    pub fn username(&self) -> &str {
        self.username.as_deref().unwrap_or_default()
    }

    /// The user's uid, when given.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// The groups, skipping any entry that is not a string.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.items().iter().filter_map(Text::as_deref)
    }

    /// The extra attributes as the API server's types hold them (entries
    /// that are not lists of strings are skipped).
    pub fn extra_map(&self) -> BTreeMap<String, Vec<String>> {
        let Some(serde_json::Value::Object(extra)) = &self.extra else {
            return BTreeMap::new();
        };
        extra
            .iter()
            .filter_map(|(k, v)| {
                let values = v.as_array()?;
                let strings: Option<Vec<String>> = values
                    .iter()
                    .map(|s| s.as_str().map(str::to_owned))
                    .collect();
                Some((k.clone(), strings?))
            })
            .collect()
    }
}

/// The answer to "may this requester force a re-apply of this object?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// Nothing in the request needed permission, so nobody was asked.
    NotNeeded,
    /// Granted; says how (for the audit log).
    Granted(String),
    /// Refused; says why, in words the requester can act on.
    Refused(String),
}

/// Checks the policy's static lists: the username in `users`, or one of the
/// groups in `groups`.
pub fn static_permission(policy: &ForceReapply, user: &UserInfo) -> Permission {
    if policy.users.contains(user.username()) {
        return Permission::Granted("listed in forceReapply.users".to_owned());
    }
    if let Some(group) = user.groups().find(|g| policy.groups.contains(*g)) {
        return Permission::Granted(format!(
            "member of group \"{group}\" in forceReapply.groups"
        ));
    }
    Permission::Refused(
        "it is not in forceReapply.users and none of its groups is in forceReapply.groups"
            .to_owned(),
    )
}

/// The API group and resource the custom verb is checked on.
pub const RBAC_GROUP: &str = "numaplane.numaproj.io";
/// See [`RBAC_GROUP`].
pub const RBAC_RESOURCE: &str = "pipelinerollouts";

/// Why RBAC could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RbacError {
    /// No client for the API server.
    #[error("{0}")]
    Unavailable(String),
    /// The API server did not answer in time.
    #[error("the API server did not answer the SubjectAccessReview within {0:?}")]
    Timeout(Duration),
    /// The API server answered with an error.
    #[error("the SubjectAccessReview failed: {0}")]
    Failed(String),
}

/// What RBAC said about one requester and object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RbacAnswer {
    /// A fresh answer from the API server.
    Fresh(bool),
    /// An answer from the cache.
    Cached(bool),
}

impl RbacAnswer {
    /// Whether the verb is allowed.
    pub fn allowed(self) -> bool {
        matches!(self, Self::Fresh(true) | Self::Cached(true))
    }
}

/// Asks the API server through SubjectAccessReviews, caching answers for a
/// short while. The cache key holds everything that can change the answer:
/// user, uid, groups, extra, verb, namespace and name.
pub struct RbacAuthorizer {
    client: Option<kube::Client>,
    unavailable: String,
    cache: Mutex<HashMap<String, (Instant, bool)>>,
}

impl std::fmt::Debug for RbacAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RbacAuthorizer")
            .field("connected", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

/// The most answers kept; past it, expired ones are dropped, then all.
const CACHE_LIMIT: usize = 10_000;

impl RbacAuthorizer {
    /// An authorizer that asks the API server through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client: Some(client),
            unavailable: String::new(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// An authorizer with no API server: every check fails with `why`.
    pub fn unavailable(why: impl Into<String>) -> Self {
        Self {
            client: None,
            unavailable: why.into(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an API server can be asked.
    pub fn is_connected(&self) -> bool {
        self.client.is_some()
    }

    fn cache_key(user: &UserInfo, verb: &str, namespace: &str, name: &str) -> String {
        let mut groups: Vec<&str> = user.groups().collect();
        groups.sort_unstable();
        // JSON keeps the parts apart whatever characters they hold.
        serde_json::json!([
            user.username(),
            user.uid(),
            groups,
            user.extra_map(),
            verb,
            namespace,
            name
        ])
        .to_string()
    }

    /// May `user` perform `policy.verb` on the PipelineRollout
    /// `namespace/name`? Gives up after `limit`.
    pub async fn check(
        &self,
        policy: &RbacPolicy,
        user: &UserInfo,
        namespace: &str,
        name: &str,
        limit: Duration,
    ) -> Result<RbacAnswer, RbacError> {
        let Some(client) = &self.client else {
            return Err(RbacError::Unavailable(self.unavailable.clone()));
        };
        let ttl = Duration::from_secs(policy.cache_ttl_seconds);
        let key = Self::cache_key(user, &policy.verb, namespace, name);
        if !ttl.is_zero()
            && let Ok(cache) = self.cache.lock()
            && let Some((expires, allowed)) = cache.get(&key)
            && Instant::now() < *expires
        {
            return Ok(RbacAnswer::Cached(*allowed));
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username().to_owned()),
                uid: user.uid().map(str::to_owned),
                groups: Some(user.groups().map(str::to_owned).collect()),
                extra: Some(user.extra_map()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(RBAC_GROUP.to_owned()),
                    resource: Some(RBAC_RESOURCE.to_owned()),
                    verb: Some(policy.verb.clone()),
                    namespace: Some(namespace.to_owned()),
                    name: Some(name.to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
        let answer = tokio::time::timeout(limit, api.create(&PostParams::default(), &review))
            .await
            .map_err(|_| RbacError::Timeout(limit))?
            .map_err(|e| RbacError::Failed(e.to_string()))?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        if !ttl.is_zero()
            && let Ok(mut cache) = self.cache.lock()
        {
            if cache.len() >= CACHE_LIMIT {
                let now = Instant::now();
                cache.retain(|_, (expires, _)| *expires > now);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
            }
            cache.insert(key, (Instant::now() + ttl, allowed));
        }
        Ok(RbacAnswer::Fresh(allowed))
    }
}

/// Builds a client for the API server: from `kubeconfig` when given, else
/// the in-cluster service account or `KUBECONFIG` / `~/.kube/config`.
pub async fn kube_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            format!("no API server to ask: not in a cluster and no usable kubeconfig ({e})")
        })?,
    };
    kube::Client::try_from(config).map_err(|e| format!("cannot build the API client: {e}"))
}

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

/// The static lists' answer, for when no API server can be asked: a
/// refusal says so when the policy would also have asked RBAC.
pub fn permission_without_api(policy: &ForceReapply, user: &UserInfo) -> Permission {
    match (static_permission(policy, user), &policy.rbac) {
        (Permission::Refused(why), Some(rbac)) => Permission::Refused(format!(
            "{why}, and RBAC (verb \"{}\") could not be asked: no connection to the API server (give --kubeconfig)",
            rbac.verb
        )),
        (answer, _) => answer,
    }
}

/// The whole answer: the static lists first, then RBAC when the policy
/// names it. Any RBAC error refuses, saying why.
pub async fn permission(
    policy: &ForceReapply,
    user: &UserInfo,
    namespace: &str,
    name: &str,
    rbac: &RbacAuthorizer,
    limit: Duration,
) -> (Permission, Option<RbacTrace>) {
    let refused = match static_permission(policy, user) {
        granted @ Permission::Granted(_) => return (granted, None),
        Permission::Refused(why) => why,
        Permission::NotNeeded => String::new(),
    };
    let Some(rbac_policy) = &policy.rbac else {
        return (Permission::Refused(refused), None);
    };
    let started = Instant::now();
    let limit = limit.min(Duration::from_secs(rbac_policy.timeout_seconds));
    let answer = rbac.check(rbac_policy, user, namespace, name, limit).await;
    let verb = &rbac_policy.verb;
    let (permission, result, cached) = match answer {
        Ok(answer) if answer.allowed() => (
            Permission::Granted(format!("RBAC allows verb \"{verb}\"")),
            "allowed",
            matches!(answer, RbacAnswer::Cached(_)),
        ),
        Ok(answer) => (
            Permission::Refused(format!(
                "{refused}, and RBAC does not allow verb \"{verb}\" on {RBAC_RESOURCE}.{RBAC_GROUP} \"{name}\" in namespace \"{namespace}\"; ask for a Role or ClusterRole granting it"
            )),
            "denied",
            matches!(answer, RbacAnswer::Cached(_)),
        ),
        Err(e) => (
            Permission::Refused(format!(
                "{refused}, and the RBAC permission (verb \"{verb}\") could not be checked: {e}"
            )),
            "error",
            false,
        ),
    };
    let trace = RbacTrace {
        result,
        cached,
        duration: started.elapsed(),
    };
    (permission, Some(trace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn static_lists() {
        let policy = Policy::built_in().force_reapply;
        let cases = [
            (
                UserInfo::new("system:serviceaccount:argocd:argocd-server", &[]),
                true,
            ),
            (
                UserInfo::new("admin", &["system:masters", "system:authenticated"]),
                true,
            ),
            (
                UserInfo::new("alice", &["devs", "system:authenticated"]),
                false,
            ),
            (UserInfo::new("system:masters", &[]), false),
            (UserInfo::new("", &[]), false),
        ];
        for (user, granted) in cases {
            let got = static_permission(&policy, &user);
            assert_eq!(
                matches!(got, Permission::Granted(_)),
                granted,
                "{user:?}: {got:?}"
            );
        }
    }

    #[test]
    fn reads_user_info_leniently() {
        let user: UserInfo = serde_json::from_str(
            r#"{"username":"bob","uid":"42","groups":["a",7,"b"],"extra":{"k":["v"]}}"#,
        )
        .expect("parses");
        assert_eq!(user.username(), "bob");
        assert_eq!(user.uid(), Some("42"));
        assert_eq!(user.groups().collect::<Vec<_>>(), ["a", "b"]);
        let odd: UserInfo = serde_json::from_str(r#"{"username":5,"groups":"x"}"#).expect("parses");
        assert_eq!(odd.username(), "");
        assert_eq!(odd.groups().count(), 0);
    }
}
