//! The policy as the rules read it, and as the policy file writes it.
//!
//! The types are also the policy file's schema: serde reads a file into
//! them, a key left out taking the built-in policy's value (see
//! `BASE`). What one key inherits from another (a grant's lists, a
//! namespace override's rules) is resolved after reading, into the fields
//! serde skips.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize};

pub(crate) use super::duration::DefaultTimeout;
use super::duration::{as_opt_seconds, as_seconds};
use super::error::BuiltInUnreadable;
use super::user::{Permission, UserInfo};

mod grants;

pub(crate) use grants::{
    ChildEditKeys, ControllerDefinitions, DefinitionKeys, DeleteUndrained, EditChildren,
    NamespaceStrategy, SectionKeys, StrategyKeys, UndrainedDeletes,
};

/// The built-in policy as read, before what keys inherit is resolved,
/// and the values `forceReapply.rbac` takes for the keys it leaves out:
/// the values of the keys a policy file leaves out. Unset while the
/// built-in text itself is read (it sets every key).
pub(super) static BASE: OnceLock<Result<(Policy, RbacPolicy), BuiltInUnreadable>> = OnceLock::new();

thread_local! {
    /// Set while `deletionTimeout` is read: its defaults are its own.
    static READING_DELETION: Cell<bool> = const { Cell::new(false) };
}

/// The built-in value picked by `part`, or the type's zero value while the
/// built-in text is read.
fn base<T: Default>(part: impl FnOnce(&Policy, &RbacPolicy) -> T) -> T {
    match BASE.get() {
        Some(Ok((policy, rbac))) => part(policy, rbac),
        _ => T::default(),
    }
}

/// Numaflow compares drain deadlines with Go's `time.Duration` (int64
/// nanoseconds): more seconds than this overflow it.
pub(crate) const MAX_CLOCK_SECONDS: u64 = 9_223_372_036;

/// The largest multiplier Numaplane's recycle path applies (scaleFactor 1%).
const MAX_RECYCLE_MULTIPLIER: u64 = 100;

/// The largest `noTimeoutSeconds` that survives the largest multiplier.
pub(crate) const MAX_NO_TIMEOUT_SECONDS: u64 = MAX_CLOCK_SECONDS / MAX_RECYCLE_MULTIPLIER;

/// What happens to violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Violations deny the request.
    #[default]
    Enforce,
    /// Nothing is denied; every violation becomes a warning.
    Warn,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Enforce => "enforce",
            Self::Warn => "warn",
        })
    }
}

/// The drain-timeout rules of one scope: the whole cluster, or the
/// namespaces an override matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeoutRules {
    /// Written by `/mutate` when the timeout is absent.
    pub(crate) default: DefaultTimeout,
    /// Whether values at or above `noTimeoutSeconds` are allowed.
    pub(crate) allow_no_timeout: bool,
    /// The smallest allowed timeout, in seconds (at least 1).
    pub(crate) min: u64,
    /// The largest allowed timeout, in seconds, short of "no timeout".
    pub(crate) max: u64,
}

/// An override for the namespaces whose names match one of `patterns`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NamespaceRules {
    /// Namespace names; `*` matches any run of characters.
    #[serde(rename = "match")]
    pub(crate) patterns: Vec<String>,
    /// The rules in force there, with keys the override did not give taken
    /// from the cluster-wide rules (resolved from the four keys below).
    #[serde(skip)]
    pub(crate) rules: TimeoutRules,
    /// `default` as written; left out: the section's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) default: Option<DefaultTimeout>,
    /// `allowNoTimeout` as written; left out: the section's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) allow_no_timeout: Option<bool>,
    /// `min` as written; left out: the section's.
    #[serde(
        default,
        with = "as_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) min: Option<u64>,
    /// `max` as written; left out: the section's.
    #[serde(
        default,
        with = "as_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) max: Option<u64>,
    /// The minimum pause age before a force there, in seconds; `None`:
    /// `forceReapply.minPauseAge`.
    #[serde(
        rename = "minPauseAge",
        default,
        with = "as_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) min_pause_age_seconds: Option<u64>,
}

/// One drain-timeout section of the policy: `drainTimeout` (the pause
/// timeout) or `deletionTimeout` (the deletion timeout), which share keys,
/// checks and rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(
    default = "DrainTimeout::base",
    deny_unknown_fields,
    rename_all = "camelCase"
)]
pub struct DrainTimeout {
    /// Cluster-wide rules (resolved from the four keys below).
    #[serde(skip)]
    pub(crate) rules: TimeoutRules,
    pub(crate) default: DefaultTimeout,
    /// The value that stands for "no timeout"; values at or above it mean no timeout.
    pub(crate) no_timeout_seconds: u64,
    pub(crate) allow_no_timeout: bool,
    /// `min` as written, in seconds.
    #[serde(with = "as_seconds")]
    pub(crate) min: u64,
    /// `max` as written, in seconds.
    #[serde(with = "as_seconds")]
    pub(crate) max: u64,
    /// `defaultRecycleScaleFactor` as written (only the pause timeout has it).
    #[serde(
        rename = "defaultRecycleScaleFactor",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) recycle_scale_factor: Option<u64>,
    /// The recycle scale factor (percent) assumed when a rollout sets none;
    /// 100 (a multiplier of 1) for the deletion timeout, which Numaplane
    /// does not multiply.
    #[serde(skip)]
    pub(crate) default_recycle_scale_factor: u64,
    /// Overrides, first match wins.
    pub(crate) namespaces: Vec<NamespaceRules>,
}

/// The rules in force for one namespace, and where they came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) rules: &'a TimeoutRules,
    /// The pattern of the override that matched, if one did.
    pub(crate) matched: Option<&'a str>,
}

impl fmt::Display for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.matched {
            Some(pattern) => write!(f, "the policy for namespaces \"{pattern}\""),
            None => f.write_str("the policy"),
        }
    }
}

impl DrainTimeout {
    /// The built-in section being read (`drainTimeout` or `deletionTimeout`).
    fn base() -> Self {
        base(|p, _| match READING_DELETION.get() {
            true => p.deletion_timeout.clone(),
            false => p.drain_timeout.clone(),
        })
    }

    /// Reads `deletionTimeout`, whose keys left out take its own defaults.
    fn deserialize_deletion<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        READING_DELETION.set(true);
        let section = Self::deserialize(d);
        READING_DELETION.set(false);
        section
    }

    /// The rules in force in `namespace`: the first override that matches, or
    /// the cluster-wide rules.
    pub(crate) fn scope(&self, namespace: &str) -> Scope<'_> {
        match self.matching(namespace) {
            Some((ns, pattern)) => Scope {
                rules: &ns.rules,
                matched: Some(pattern),
            },
            None => Scope {
                rules: &self.rules,
                matched: None,
            },
        }
    }

    /// The first override that matches `namespace`, with the pattern that
    /// matched it.
    fn matching(&self, namespace: &str) -> Option<(&NamespaceRules, &str)> {
        self.namespaces.iter().find_map(|ns| {
            ns.patterns
                .iter()
                .find(|p| wildcard_match(p, namespace))
                .map(|p| (ns, p.as_str()))
        })
    }

    /// The value `/mutate` writes for a default.
    pub(crate) fn default_seconds(&self, default: DefaultTimeout) -> u64 {
        match default {
            DefaultTimeout::NoTimeout => self.no_timeout_seconds,
            DefaultTimeout::Seconds(s) => s,
        }
    }
}

/// Who may force a re-apply (and turn on forcePromote), and when.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(
    default = "ForceReapply::base",
    deny_unknown_fields,
    rename_all = "camelCase"
)]
pub struct ForceReapply {
    pub(crate) users: BTreeSet<String>,
    pub(crate) groups: BTreeSet<String>,
    /// Allow `allow-data-loss: "true"` only while the stored object says its
    /// pipeline is pausing.
    pub require_pausing: bool,
    /// Turning on `forcePromote` needs the same permission.
    pub(crate) gate_force_promote: bool,
    /// Reset the annotation to "false" once the forced re-apply is over.
    pub one_shot: bool,
    /// How long a pause must have lasted before a force is allowed, in
    /// seconds (0: no minimum); a namespace override may set its own.
    #[serde(rename = "minPauseAge", with = "as_seconds")]
    pub(crate) min_pause_age_seconds: u64,
    /// Also ask Kubernetes RBAC (a SubjectAccessReview) when the lists say no.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rbac: Option<RbacPolicy>,
    /// Who may mark a recyclable Pipeline for deletion (deleted undrained).
    pub delete_undrained: DeleteUndrained,
    /// Who may give a namespace the upgrade strategy `no-strategy`.
    pub(crate) namespace_strategy: NamespaceStrategy,
    /// Who may write Numaflow controller definitions outside Numaplane's
    /// namespace (rule 27).
    pub(crate) controller_definitions: ControllerDefinitions,
    /// Who may change what Numaplane's and Numaflow's controllers keep on a
    /// rollout's child (rule 26).
    pub(crate) edit_children: EditChildren,
}

impl ForceReapply {
    fn base() -> Self {
        base(|p, _| p.force_reapply.clone())
    }

    #[cfg(test)]
    pub(crate) fn static_permission(&self, user: &UserInfo) -> Permission {
        self.grant().static_permission(user)
    }

    /// Who may force a re-apply or a promotion, as the permission check reads it.
    pub(crate) fn grant(&self) -> Grant<'_> {
        Grant {
            key: "forceReapply",
            users: &self.users,
            groups: &self.groups,
            rbac: self.rbac.as_ref(),
        }
    }
}

/// One gate's grantees, borrowed from the policy: what a permission check
/// reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant<'a> {
    /// The policy key the lists live under, for messages.
    pub(crate) key: &'static str,
    pub(crate) users: &'a BTreeSet<String>,
    pub(crate) groups: &'a BTreeSet<String>,
    /// How RBAC is asked when the lists say no, if it is.
    pub(crate) rbac: Option<&'a RbacPolicy>,
}

impl Grant<'_> {
    /// The static lists' answer: the username in `users`, or one of the
    /// groups in `groups`. Pure: no API server is asked.
    pub(crate) fn static_permission(&self, user: &UserInfo) -> Permission {
        let key = self.key;
        if self.users.contains(user.username()) {
            return Permission::Granted(format!("listed in {key}.users"));
        }
        if let Some(group) = user.groups().find(|g| self.groups.contains(*g)) {
            return Permission::Granted(format!("member of group \"{group}\" in {key}.groups"));
        }
        Permission::Refused(format!(
            "it is not in {key}.users and none of its groups is in {key}.groups"
        ))
    }
}

/// What the webhook knows of the Numaplane controller.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(
    default = "Numaplane::base",
    deny_unknown_fields,
    rename_all = "camelCase"
)]
pub struct Numaplane {
    /// The controller's username: the only one that may change Numaplane's
    /// bookkeeping keys on a child, and whose writes of children are not
    /// judged (they carry what a rollout, judged itself, asked for).
    pub controller_account: String,
    /// Numaplane's own namespace: where its Numaflow controller
    /// definitions belong (rule 27 gates them everywhere else).
    pub(crate) namespace: String,
}

/// What the webhook knows of the Numaflow controller.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(
    default = "Numaflow::base",
    deny_unknown_fields,
    rename_all = "camelCase"
)]
pub struct Numaflow {
    /// The controller's username: the only one that may set or change a
    /// Pipeline's `numaflow.numaproj.io/pause-timestamp`.
    pub controller_account: String,
}

/// What happens to `spec.strategy.progressive.forcePromote` once it is on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(
    default = "ForcePromote::base",
    deny_unknown_fields,
    rename_all = "camelCase"
)]
pub(crate) struct ForcePromote {
    /// Reset it to `false` (by `/mutate`, on the next write) once the
    /// progressive upgrade it was set for has finished. Off by default: a
    /// GitOps source that declares `forcePromote: true` would fight a reset.
    pub(crate) one_shot: bool,
}

/// How RBAC is asked whether a requester may force a re-apply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(default = "RbacPolicy::base", deny_unknown_fields)]
pub struct RbacPolicy {
    /// The custom verb checked on `pipelinerollouts` in `numaplane.numaproj.io`.
    pub(crate) verb: String,
    /// How long an answer is reused, in seconds (0: not cached).
    #[serde(rename = "cacheTTL", with = "as_seconds")]
    pub(crate) cache_ttl_seconds: u64,
    /// The longest a check may take, in seconds (further bounded by the
    /// request's own deadline).
    #[serde(rename = "timeout", with = "as_seconds")]
    pub(crate) timeout_seconds: u64,
}

impl RbacPolicy {
    fn base() -> Self {
        base(|_, rbac| rbac.clone())
    }
}

/// A complete, validated policy. Its `Default` is the zero value serde
/// starts from while the built-in text is read; the built-in policy is
/// `Policy::built_in()`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(
    default = "Policy::base",
    deny_unknown_fields,
    rename_all = "camelCase"
)]
pub struct Policy {
    /// enforce or warn.
    pub mode: Mode,
    /// The pause timeout's rules (`drainTimeout`).
    pub(crate) drain_timeout: DrainTimeout,
    /// The deletion timeout's rules (`deletionTimeout`).
    #[serde(deserialize_with = "DrainTimeout::deserialize_deletion")]
    pub(crate) deletion_timeout: DrainTimeout,
    /// Forced re-apply rules.
    pub force_reapply: ForceReapply,
    /// What happens to a forcePromote left on.
    pub(crate) force_promote: ForcePromote,
    /// The Numaplane controller.
    pub numaplane: Numaplane,
    /// The Numaflow controller.
    pub numaflow: Numaflow,
}

impl Policy {
    /// Whether `user` is one of Kubernetes' own deleters
    /// (`forceReapply.deleteUndrained.systemDeleters`).
    pub(crate) fn is_system_deleter(&self, user: &str) -> bool {
        self.force_reapply
            .delete_undrained
            .own
            .system_deleters
            .contains(user)
    }

    fn base() -> Self {
        base(|p, _| p.clone())
    }

    /// The minimum pause age before a force in `namespace`, in seconds: the
    /// first matching override's, else `forceReapply.minPauseAge`.
    pub(crate) fn min_pause_age_seconds(&self, namespace: &str) -> u64 {
        self.drain_timeout
            .matching(namespace)
            .and_then(|(ns, _)| ns.min_pause_age_seconds)
            .unwrap_or(self.force_reapply.min_pause_age_seconds)
    }
}

/// Matches a namespace name against a pattern where `*` stands for any run
/// of characters (namespace names cannot contain `*`, so no escaping).
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else {
        // No `*` at all: the whole name must have matched.
        return rest.is_empty();
    };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl Numaplane {
    fn base() -> Self {
        base(|p, _| p.numaplane.clone())
    }
}

impl Numaflow {
    fn base() -> Self {
        base(|p, _| p.numaflow.clone())
    }
}

impl ForcePromote {
    fn base() -> Self {
        base(|p, _| p.force_promote.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_table() {
        let cases = [
            ("ledger", "ledger", true),
            ("ledger", "ledger2", false),
            ("ledger", "xledger", false),
            ("payments-*", "payments-eu", true),
            ("payments-*", "payments-", true),
            ("payments-*", "payment", false),
            ("*-prod", "team-a-prod", true),
            ("*-prod", "prod", false),
            ("team-*-prod", "team-a-prod", true),
            ("team-*-prod", "team-prod", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("*", "anything", true),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(wildcard_match(pattern, name), want, "{pattern} vs {name}");
        }
    }
}
