//! The static lists, then Kubernetes RBAC through a SubjectAccessReview for
//! the policy's custom verb, with answers cached for a short while.

use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;

use super::cache::{AnswerCache, Bounds, Source};
use super::{PermissionCheck, RbacTrace, Target, oversized_user};
use crate::policy::{Grant, Permission, RbacPolicy, UserInfo};

/// The most answers kept, and the bytes they may take: the cache keeps a
/// digest of each key, so whatever the requesters carry 10,000 answers fit
/// and the cache stays within a few MiB.
const CACHE_BOUNDS: Bounds = Bounds {
    entries: 10_000,
    bytes: 4 << 20,
};

/// Why RBAC could not answer.
#[derive(Debug, Clone, thiserror::Error)]
enum RbacError {
    /// The API server did not answer in time.
    #[error("the API server did not answer the SubjectAccessReview within {0:?}")]
    Timeout(Duration),
    /// The API server answered with an error.
    #[error("the SubjectAccessReview failed: {0}")]
    Failed(String),
}

/// Asks the API server through SubjectAccessReviews, caching answers. The
/// cache key holds everything that can change the answer: user, uid,
/// groups, extra, verb, namespace and name.
pub struct RbacAuthorizer {
    client: kube::Client,
    cache: AnswerCache,
}

impl std::fmt::Debug for RbacAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RbacAuthorizer").finish_non_exhaustive()
    }
}

fn cache_key(user: &UserInfo, verb: &str, target: Target<'_>) -> String {
    let mut groups: Vec<&str> = user.groups().collect();
    groups.sort_unstable();
    // JSON keeps the parts apart whatever characters they hold.
    serde_json::json!([
        user.username(),
        user.uid(),
        groups,
        user.extra_map(),
        verb,
        target.group,
        target.resource,
        target.namespace,
        target.name
    ])
    .to_string()
}

impl RbacAuthorizer {
    /// An authorizer that asks the API server through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: AnswerCache::new(CACHE_BOUNDS),
        }
    }

    /// May `user` perform `policy.verb` on the object `target`?
    /// Gives up after `limit`.
    async fn rbac_allows(
        &self,
        policy: &RbacPolicy,
        user: &UserInfo,
        target: Target<'_>,
        limit: Duration,
    ) -> Result<(bool, Source), RbacError> {
        let ttl = Duration::from_secs(policy.cache_ttl_seconds);
        let key = cache_key(user, &policy.verb, target);
        let ask = || async {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.username().to_owned()),
                    uid: user.uid().map(str::to_owned),
                    groups: Some(user.groups().map(str::to_owned).collect()),
                    extra: Some(user.extra_map()),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(target.group.to_owned()),
                        resource: Some(target.resource.to_owned()),
                        verb: Some(policy.verb.clone()),
                        namespace: Some(target.namespace.to_owned()),
                        name: Some(target.name.to_owned()),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
            let answer = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| RbacError::Failed(e.to_string()))?;
            Ok(answer.status.is_some_and(|s| s.allowed))
        };
        tokio::time::timeout(limit, self.cache.get_or_ask(&key, ttl, ask))
            .await
            .map_err(|_| RbacError::Timeout(limit))?
    }

    /// Whether `user` has `grant` on `target`: the static lists first, then
    /// RBAC when the policy names it, within `limit`. Any RBAC error
    /// refuses, saying why.
    pub(crate) async fn ask(
        &self,
        grant: Grant<'_>,
        user: &UserInfo,
        target: Target<'_>,
        limit: Duration,
    ) -> PermissionCheck {
        if let Some(why) = oversized_user(user) {
            return Permission::Refused(why).into();
        }
        let refused = match grant.static_permission(user) {
            Permission::Refused(why) => why,
            answer => return answer.into(),
        };
        let Some(rbac_policy) = grant.rbac else {
            return Permission::Refused(refused).into();
        };
        let started = Instant::now();
        let limit = limit.min(Duration::from_secs(rbac_policy.timeout_seconds));
        let answer = self.rbac_allows(rbac_policy, user, target, limit).await;
        let verb = &rbac_policy.verb;
        let (namespace, name) = (target.namespace, target.name);
        // A core resource (configmaps) has no group to name.
        let resource = match target.group {
            "" => target.resource.to_owned(),
            group => format!("{}.{group}", target.resource),
        };
        let (permission, result, cached) = match answer {
            Ok((true, source)) => (
                Permission::Granted(format!("RBAC allows verb \"{verb}\"")),
                "allowed",
                source == Source::Cached,
            ),
            Ok((false, source)) => (
                Permission::Refused(format!(
                    "{refused}, and RBAC does not allow verb \"{verb}\" on {resource} \"{name}\" in namespace \"{namespace}\"; ask for a Role or ClusterRole granting it"
                )),
                "denied",
                source == Source::Cached,
            ),
            Err(e) => (
                Permission::Refused(format!(
                    "{refused}, and the RBAC permission (verb \"{verb}\") could not be checked: {e}"
                )),
                "error",
                false,
            ),
        };
        PermissionCheck {
            permission,
            rbac: Some(RbacTrace {
                result,
                cached,
                duration: started.elapsed(),
            }),
        }
    }
}
