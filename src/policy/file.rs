//! The policy file: reading it into the model over the built-in values,
//! resolving what keys inherit, and rendering it back.

use std::path::Path;

mod timeouts;

use self::timeouts::{Section, resolve_section};
use super::coherence;
use super::error::BuiltInUnreadable;
use super::error::PolicyError;
use super::model::{
    BASE, ChildEditKeys, DefinitionKeys, Policy, RbacPolicy, SectionKeys, StrategyKeys,
    UndrainedDeletes,
};

/// The built-in policy, in the file format, exactly as documented; its
/// second document holds the defaults of optional sections.
const BUILT_IN_POLICY: &str = include_str!("builtin-policy.yaml");

fn parse_error(e: impl std::fmt::Display) -> PolicyError {
    PolicyError::Parse {
        where_: String::new(),
        message: e.to_string(),
    }
}

/// The built-in text as read: the policy, and `forceReapply.rbac`'s values
/// for the keys it leaves out. Read once; while it is read the model's
/// defaults are zero values (the text sets every key).
fn base() -> Result<&'static (Policy, RbacPolicy), PolicyError> {
    let base = BASE.get_or_init(|| {
        let mut docs: Vec<Policy> = serde_saphyr::from_str_multiple(BUILT_IN_POLICY)
            .map_err(|e| BuiltInUnreadable(e.to_string()))?;
        let optional = docs.pop().unwrap_or_default();
        let policy = docs.pop().unwrap_or_default();
        Ok((policy, optional.force_reapply.rbac.unwrap_or_default()))
    });
    base.as_ref().map_err(|e| PolicyError::from(e.clone()))
}

/// Parses a policy; keys left out take the built-in policy's values.
fn parse(text: &str) -> Result<Policy, PolicyError> {
    let (base, _) = base()?;
    // An empty file (or one with only comments) is the built-in policy.
    let mut policy = if text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    }) {
        base.clone()
    } else {
        serde_saphyr::from_str(text).map_err(parse_error)?
    };
    let mut problems = Vec::new();
    resolve(&mut policy, &mut problems);
    coherence::check(&policy, &mut problems);
    if problems.is_empty() {
        Ok(policy)
    } else {
        Err(PolicyError::Invalid {
            where_: String::new(),
            problems,
        })
    }
}

/// What keys inherit from others: each timeout section's overrides and
/// rules, and each grant's lists and RBAC verb. The keys written are then
/// filled in with what they inherited, so that the policy renders with
/// every key spelled out.
fn resolve(policy: &mut Policy, problems: &mut Vec<String>) {
    resolve_section(&mut policy.drain_timeout, Section::Pause, problems);
    resolve_section(&mut policy.deletion_timeout, Section::Deletion, problems);
    let fr = &mut policy.force_reapply;
    for (verb, key) in [
        (&fr.delete_undrained.rbac_verb, UndrainedDeletes::KEY),
        (&fr.namespace_strategy.rbac_verb, StrategyKeys::KEY),
        (&fr.controller_definitions.rbac_verb, DefinitionKeys::KEY),
        (&fr.edit_children.rbac_verb, ChildEditKeys::KEY),
    ] {
        if verb.is_some() && fr.rbac.is_none() {
            problems.push(format!(
                "{key}.rbacVerb is set but forceReapply.rbac is not: RBAC is asked only when forceReapply.rbac is set"
            ));
        }
    }
    let rbac = fr.rbac.as_ref();
    fr.delete_undrained.inherit(&fr.users, &fr.groups, rbac);
    fr.namespace_strategy.inherit(&fr.users, &fr.groups, rbac);
    fr.controller_definitions
        .inherit(&fr.users, &fr.groups, rbac);
    // editChildren falls back to deleteUndrained, as resolved.
    let du = &fr.delete_undrained;
    fr.edit_children
        .inherit(&du.users, &du.groups, du.rbac.as_ref());
}

impl Policy {
    /// The built-in default policy.
    pub fn built_in() -> Self {
        match Self::from_yaml("") {
            Ok(policy) => policy,
            // The text is a constant checked by a unit test.
            Err(e) => unreachable!("the built-in policy is invalid: {e}"),
        }
    }

    /// Parses and validates a policy from YAML (JSON is YAML too). Keys the
    /// text leaves out take the built-in default's values.
    pub fn from_yaml(text: &str) -> Result<Self, PolicyError> {
        parse(text)
    }

    /// Reads, parses and validates a policy file.
    pub(crate) fn from_file(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text).map_err(|e| e.in_file(path))
    }

    /// The policy in `path`, or the built-in one when there is no file.
    pub(crate) fn from_file_or_built_in(path: Option<&Path>) -> Result<Self, PolicyError> {
        match path {
            Some(path) => Self::from_file(path),
            None => Ok(Self::built_in()),
        }
    }

    /// The policy in the file format, every key spelled out.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self)
            .unwrap_or_else(|e| format!("# cannot render the policy: {e}\n"))
    }
}

#[cfg(test)]
mod tests;
