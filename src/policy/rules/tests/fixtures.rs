//! What every table judges with: the policies, the users (the shared
//! builders' `userInfo`, as the crate's [`UserInfo`]), the time, and the
//! documents (the shared builders' JSON, as a [`GuardedObject`]).

use serde_json::Value;
use test_builders::{PipelineRolloutDoc, rollout, users};
use time::OffsetDateTime;
use time::macros::datetime;

use crate::policy::rules::{
    GuardedWrite, Need, Operation, Origin, Pending, Permissions, Verdict, mutate,
};
use crate::policy::{Policy, UserInfo};
use crate::rollout::GuardedObject;

pub(super) use test_builders::pipeline_rollout;

/// The time every case is judged at.
pub(super) const NOW: OffsetDateTime = datetime!(2026-12-01 10:00:00 UTC);

/// Two overrides: the first wins for `payments-eu` and `ledger` (which `pay*`
/// also matches for `payments-eu`); `min` comes from the top level.
const OVERRIDES: &str = "\
drainTimeout:
  min: 60s
  namespaces:
  - match: [\"payments-*\", ledger]
    default: 5m
    allowNoTimeout: false
  - match: [\"pay*\"]
    default: 10m
    max: 2h
";

/// The policy written in `yaml`.
pub(super) fn policy(yaml: &str) -> Policy {
    Policy::from_yaml(yaml).unwrap_or_else(|e| panic!("test policy {yaml:?} is invalid: {e}"))
}

/// The built-in policy.
pub(super) fn built_in() -> Policy {
    Policy::built_in()
}

/// The policy with the two namespace overrides of [`OVERRIDES`].
pub(super) fn overrides() -> Policy {
    policy(OVERRIDES)
}

/// The built-in policy in warn mode.
pub(super) fn warn_mode() -> Policy {
    policy("mode: warn\n")
}

/// A builders' `userInfo` as the crate's [`UserInfo`].
fn user_info(user: &Value) -> UserInfo {
    UserInfo::new(users::username(user), &users::groups(user))
}

/// Argo CD's API server: in the built-in policy's forceReapply.users.
pub(super) fn argocd_server() -> UserInfo {
    user_info(&users::argocd_server())
}

/// A member of system:masters: in the built-in policy's forceReapply.groups.
pub(super) fn admin() -> UserInfo {
    user_info(&users::admin())
}

/// A developer with no permission to force.
pub(super) fn alice() -> UserInfo {
    user_info(&users::alice())
}

/// The users whose permission the tables vary: name, user, and whether the
/// built-in policy lets them force.
pub(super) fn forcers() -> Vec<(&'static str, UserInfo, bool)> {
    vec![
        ("argocd-server", argocd_server(), true),
        ("system:masters", admin(), true),
        ("alice", alice(), false),
    ]
}

/// A PipelineRollout with valid timeouts (pause 600 s, deletion 30 s), the allow-data-loss
/// annotation (if given) and the status (if given).
pub(super) fn rollout_with(
    allow_data_loss: Option<&str>,
    status: Option<Value>,
) -> PipelineRolloutDoc {
    let mut doc = pipeline_rollout()
        .with_timeout(600)
        .with_deletion_timeout(30);
    if let Some(value) = allow_data_loss {
        doc = doc.with_allow_data_loss(value);
    }
    if let Some(status) = status {
        doc = doc.with_status(status);
    }
    doc
}

/// Finishes `pending` with the static lists as the only source of
/// permission: what the tables test (no RBAC is ever asked there).
pub(super) fn by_static_lists(pending: impl Pending, policy: &Policy, user: &UserInfo) -> Verdict {
    let permissions = Permissions(Need::ALL.map(|need| {
        pending
            .settled(need)
            .unwrap_or_else(|| need.grant(policy).static_permission(user))
    }));
    pending.finish(&permissions)
}

/// A document as the rules read it.
pub(super) fn parse(value: &Value) -> GuardedObject {
    GuardedObject::from_json(&value.to_string())
        .unwrap_or_else(|e| panic!("test object is not JSON: {e}"))
}

/// The builders spell out the webhook's own field paths.
#[test]
fn the_builders_paths_are_the_webhooks() {
    use crate::rollout as webhook;
    assert_eq!(rollout::ALLOW_DATA_LOSS, webhook::ALLOW_DATA_LOSS);
    assert_eq!(rollout::TIMEOUT_PATH, webhook::TIMEOUT_FIELD.keys());
    assert_eq!(
        rollout::TIMEOUT_PATH.join("."),
        webhook::TIMEOUT_FIELD.dotted()
    );
    assert_eq!(
        rollout::LIFECYCLE_PATH,
        webhook::TIMEOUT_FIELD.parent().keys()
    );
    assert_eq!(
        rollout::SCALE_FACTOR_PATH,
        webhook::SCALE_FACTOR_FIELD.keys()
    );
    assert_eq!(
        rollout::FORCE_PROMOTE_PATH,
        webhook::FORCE_PROMOTE_FIELD.keys()
    );
}

/// Runs `/mutate` on an UPDATE from `old` to `new` (or a CREATE of `new`)
/// by Argo CD's API server.
pub(super) fn mutated(policy: &Policy, old: Option<&Value>, new: &Value) -> Verdict {
    let object = parse(new);
    let old = old.map(parse);
    let user = argocd_server();
    let write = GuardedWrite {
        kind: crate::kinds::Kind::PipelineRollout,
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace: "default",
        user: &user,
        object: &object,
        old_object: old.as_ref(),
        now: NOW,
        origin: Origin::Request,
    };
    mutate(policy, &write)
}
