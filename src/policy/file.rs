//! The policy file: its schema, how a file is merged over the built-in
//! values, and rendering it back.

use std::path::Path;

use serde::{Deserialize, Serialize};

mod timeouts;

use self::timeouts::{Section, TimeoutFile, parse_section, render_section};
use super::checks;
use super::duration::Seconds;
use super::error::PolicyError;
use super::model::{
    DeleteUndrained, EditChildren, ForcePromote, ForceReapply, Mode, NamespaceStrategy, Numaflow,
    Numaplane, Policy, RbacPolicy,
};

/// The built-in policy, in the file format, exactly as documented; its
/// second document holds the defaults of optional sections.
pub const BUILT_IN_POLICY: &str = include_str!("builtin-policy.yaml");

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<ModeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drain_timeout: Option<TimeoutFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_timeout: Option<TimeoutFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    force_reapply: Option<ForceReapplyFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    force_promote: Option<ForcePromoteFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    numaplane: Option<NumaplaneFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    numaflow: Option<NumaplaneFile>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NumaplaneFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    controller_account: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DeleteUndrainedFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    users: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rbac_verb: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_deleters: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate_rollout_deletes: Option<bool>,
}

/// A grant of its own (`forceReapply.namespaceStrategy`,
/// `forceReapply.editChildren`): each key left out takes forceReapply's
/// value (namespaceStrategy) or forceReapply.deleteUndrained's
/// (editChildren).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GrantFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    users: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rbac_verb: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ForcePromoteFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    one_shot: Option<bool>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum ModeSpec {
    #[default]
    Enforce,
    Warn,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ForceReapplyFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    users: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    require_pausing: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate_force_promote: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    one_shot: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_pause_age: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rbac: Option<RbacFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delete_undrained: Option<DeleteUndrainedFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace_strategy: Option<GrantFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    edit_children: Option<GrantFile>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RbacFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    verb: Option<String>,
    #[serde(rename = "cacheTTL", skip_serializing_if = "Option::is_none")]
    cache_ttl: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<Seconds>,
}

fn parse_error(e: impl std::fmt::Display) -> PolicyError {
    PolicyError::Parse {
        where_: String::new(),
        message: e.to_string(),
    }
}

fn parse_file(text: &str) -> Result<PolicyFile, PolicyError> {
    // An empty file (or one with only comments) is the built-in policy.
    if text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    }) {
        return Ok(PolicyFile::default());
    }
    serde_saphyr::from_str(text).map_err(parse_error)
}

/// The built-in text's two documents: the policy, and the defaults of
/// optional sections.
fn built_in_files() -> Result<(PolicyFile, PolicyFile), PolicyError> {
    let mut docs: Vec<PolicyFile> =
        serde_saphyr::from_str_multiple(BUILT_IN_POLICY).map_err(parse_error)?;
    let optional = docs.pop().unwrap_or_default();
    let base = docs.pop().unwrap_or_default();
    Ok((base, optional))
}

/// Parses a policy; keys left out take the built-in policy's values.
fn parse(text: &str) -> Result<Policy, PolicyError> {
    let given = parse_file(text)?;
    let (base, optional) = built_in_files()?;
    let base_dt = base.drain_timeout.unwrap_or_default();
    let base_fr = base.force_reapply.unwrap_or_default();
    let base_fp = base.force_promote.unwrap_or_default();
    let optional_rbac = optional
        .force_reapply
        .and_then(|f| f.rbac)
        .unwrap_or_default();
    let base_np = base.numaplane.unwrap_or_default();
    let base_nf = base.numaflow.unwrap_or_default();
    let base_du = base_fr.delete_undrained.as_ref();
    let base_du_deleters = base_du.and_then(|d| d.system_deleters.clone());
    let base_du_gate = base_du.and_then(|d| d.gate_rollout_deletes);
    let dt = given.drain_timeout.unwrap_or_default();
    let mut fr = given.force_reapply.unwrap_or_default();
    let fp = given.force_promote.unwrap_or_default();
    let np = given.numaplane.unwrap_or_default();
    let nf = given.numaflow.unwrap_or_default();
    let du = fr.delete_undrained.take().unwrap_or_default();
    let ns_strategy = fr.namespace_strategy.take().unwrap_or_default();
    let edit_children = fr.edit_children.take().unwrap_or_default();

    // Each key: the file's value, else the built-in one. The built-in text
    // sets every key (a unit test checks it), so `missing` never shows.
    let mut problems = Vec::new();
    let mode = match pick_or(&mut problems, given.mode, base.mode, "mode") {
        ModeSpec::Warn => Mode::Warn,
        ModeSpec::Enforce => Mode::Enforce,
    };
    let drain_timeout = parse_section(&mut problems, Section::Pause, dt, base_dt);
    let deletion_timeout = parse_section(
        &mut problems,
        Section::Deletion,
        given.deletion_timeout.unwrap_or_default(),
        base.deletion_timeout.unwrap_or_default(),
    );
    let rbac = fr.rbac.map(|r| RbacPolicy {
        verb: pick_or(
            &mut problems,
            r.verb,
            optional_rbac.verb.clone(),
            "forceReapply.rbac.verb",
        ),
        cache_ttl_seconds: pick_or(
            &mut problems,
            r.cache_ttl.map(|s| s.0),
            optional_rbac.cache_ttl.map(|s| s.0),
            "forceReapply.rbac.cacheTTL",
        ),
        timeout_seconds: pick_or(
            &mut problems,
            r.timeout.map(|s| s.0),
            optional_rbac.timeout.map(|s| s.0),
            "forceReapply.rbac.timeout",
        ),
    });
    let users: std::collections::BTreeSet<String> =
        pick_or(&mut problems, fr.users, base_fr.users, "forceReapply.users")
            .into_iter()
            .collect();
    let groups: std::collections::BTreeSet<String> = pick_or(
        &mut problems,
        fr.groups,
        base_fr.groups,
        "forceReapply.groups",
    )
    .into_iter()
    .collect();
    if du.rbac_verb.is_some() && rbac.is_none() {
        problems.push(
            "forceReapply.deleteUndrained.rbacVerb is set but forceReapply.rbac is not: RBAC is asked only when forceReapply.rbac is set".to_owned(),
        );
    }
    let delete_undrained = DeleteUndrained {
        users: du
            .users
            .map_or_else(|| users.clone(), |u| u.into_iter().collect()),
        groups: du
            .groups
            .map_or_else(|| groups.clone(), |g| g.into_iter().collect()),
        rbac: rbac.as_ref().map(|r| RbacPolicy {
            verb: du.rbac_verb.clone().unwrap_or_else(|| r.verb.clone()),
            ..r.clone()
        }),
        system_deleters: pick_or(
            &mut problems,
            du.system_deleters,
            base_du_deleters,
            "forceReapply.deleteUndrained.systemDeleters",
        )
        .into_iter()
        .collect(),
        gate_rollout_deletes: pick_or(
            &mut problems,
            du.gate_rollout_deletes,
            base_du_gate,
            "forceReapply.deleteUndrained.gateRolloutDeletes",
        ),
    };
    let namespace_strategy =
        namespace_strategy_of(ns_strategy, (&users, &groups), rbac.as_ref(), &mut problems);
    let edit_children = edit_children_of(edit_children, &delete_undrained, &mut problems);
    let policy = Policy {
        mode,
        drain_timeout,
        deletion_timeout,
        force_reapply: ForceReapply {
            users,
            groups,
            delete_undrained,
            namespace_strategy,
            edit_children,
            require_pausing: pick_or(
                &mut problems,
                fr.require_pausing,
                base_fr.require_pausing,
                "forceReapply.requirePausing",
            ),
            gate_force_promote: pick_or(
                &mut problems,
                fr.gate_force_promote,
                base_fr.gate_force_promote,
                "forceReapply.gateForcePromote",
            ),
            rbac,
            one_shot: pick_or(
                &mut problems,
                fr.one_shot,
                base_fr.one_shot,
                "forceReapply.oneShot",
            ),
            min_pause_age_seconds: pick_or(
                &mut problems,
                fr.min_pause_age.map(|s| s.0),
                base_fr.min_pause_age.map(|s| s.0),
                "forceReapply.minPauseAge",
            ),
        },
        force_promote: ForcePromote {
            one_shot: pick_or(
                &mut problems,
                fp.one_shot,
                base_fp.one_shot,
                "forcePromote.oneShot",
            ),
        },
        numaplane: Numaplane {
            controller_account: pick_or(
                &mut problems,
                np.controller_account,
                base_np.controller_account,
                "numaplane.controllerAccount",
            ),
        },
        numaflow: Numaflow {
            controller_account: pick_or(
                &mut problems,
                nf.controller_account,
                base_nf.controller_account,
                "numaflow.controllerAccount",
            ),
        },
    };
    checks::check(&policy, &mut problems);
    if problems.is_empty() {
        Ok(policy)
    } else {
        Err(PolicyError::Invalid {
            where_: String::new(),
            problems,
        })
    }
}

/// The file's value, else the built-in one; a key the built-in text lacks
/// is a problem (a unit test checks it never happens).
fn pick_or<T: Default>(
    problems: &mut Vec<String>,
    given: Option<T>,
    base: Option<T>,
    key: &str,
) -> T {
    match given.or(base) {
        Some(v) => v,
        None => {
            problems.push(format!("{key} is missing from the built-in policy"));
            T::default()
        }
    }
}

/// The policy in the file's schema, every key spelled out.
fn to_file(policy: &Policy) -> PolicyFile {
    let fr = &policy.force_reapply;
    PolicyFile {
        mode: Some(match policy.mode {
            Mode::Enforce => ModeSpec::Enforce,
            Mode::Warn => ModeSpec::Warn,
        }),
        drain_timeout: Some(render_section(Section::Pause, &policy.drain_timeout)),
        deletion_timeout: Some(render_section(Section::Deletion, &policy.deletion_timeout)),
        force_reapply: Some(ForceReapplyFile {
            users: Some(fr.users.iter().cloned().collect()),
            groups: Some(fr.groups.iter().cloned().collect()),
            require_pausing: Some(fr.require_pausing),
            gate_force_promote: Some(fr.gate_force_promote),
            one_shot: Some(fr.one_shot),
            min_pause_age: Some(Seconds(fr.min_pause_age_seconds)),
            rbac: fr.rbac.as_ref().map(|r| RbacFile {
                verb: Some(r.verb.clone()),
                cache_ttl: Some(Seconds(r.cache_ttl_seconds)),
                timeout: Some(Seconds(r.timeout_seconds)),
            }),
            delete_undrained: Some(DeleteUndrainedFile {
                users: Some(fr.delete_undrained.users.iter().cloned().collect()),
                groups: Some(fr.delete_undrained.groups.iter().cloned().collect()),
                rbac_verb: fr.delete_undrained.rbac.as_ref().map(|r| r.verb.clone()),
                system_deleters: Some(
                    fr.delete_undrained
                        .system_deleters
                        .iter()
                        .cloned()
                        .collect(),
                ),
                gate_rollout_deletes: Some(fr.delete_undrained.gate_rollout_deletes),
            }),
            namespace_strategy: Some(GrantFile {
                users: Some(fr.namespace_strategy.users.iter().cloned().collect()),
                groups: Some(fr.namespace_strategy.groups.iter().cloned().collect()),
                rbac_verb: fr.namespace_strategy.rbac.as_ref().map(|r| r.verb.clone()),
            }),
            edit_children: Some(GrantFile {
                users: Some(fr.edit_children.users.iter().cloned().collect()),
                groups: Some(fr.edit_children.groups.iter().cloned().collect()),
                rbac_verb: fr.edit_children.rbac.as_ref().map(|r| r.verb.clone()),
            }),
        }),
        force_promote: Some(ForcePromoteFile {
            one_shot: Some(policy.force_promote.one_shot),
        }),
        numaplane: Some(NumaplaneFile {
            controller_account: Some(policy.numaplane.controller_account.clone()),
        }),
        numaflow: Some(NumaplaneFile {
            controller_account: Some(policy.numaflow.controller_account.clone()),
        }),
    }
}

/// `forceReapply.namespaceStrategy`: each key left out takes
/// forceReapply's (its lists, its RBAC verb).
fn namespace_strategy_of(
    file: GrantFile,
    (users, groups): (
        &std::collections::BTreeSet<String>,
        &std::collections::BTreeSet<String>,
    ),
    rbac: Option<&RbacPolicy>,
    problems: &mut Vec<String>,
) -> NamespaceStrategy {
    if file.rbac_verb.is_some() && rbac.is_none() {
        problems.push(
            "forceReapply.namespaceStrategy.rbacVerb is set but forceReapply.rbac is not: RBAC is asked only when forceReapply.rbac is set".to_owned(),
        );
    }
    NamespaceStrategy {
        users: file
            .users
            .map_or_else(|| users.clone(), |u| u.into_iter().collect()),
        groups: file
            .groups
            .map_or_else(|| groups.clone(), |g| g.into_iter().collect()),
        rbac: rbac.map(|r| RbacPolicy {
            verb: file.rbac_verb.unwrap_or_else(|| r.verb.clone()),
            ..r.clone()
        }),
    }
}

/// `forceReapply.editChildren`: each key left out takes
/// forceReapply.deleteUndrained's (its lists, its RBAC verb).
fn edit_children_of(
    file: GrantFile,
    delete_undrained: &DeleteUndrained,
    problems: &mut Vec<String>,
) -> EditChildren {
    if file.rbac_verb.is_some() && delete_undrained.rbac.is_none() {
        problems.push(
            "forceReapply.editChildren.rbacVerb is set but forceReapply.rbac is not: RBAC is asked only when forceReapply.rbac is set".to_owned(),
        );
    }
    EditChildren {
        users: file.users.map_or_else(
            || delete_undrained.users.clone(),
            |u| u.into_iter().collect(),
        ),
        groups: file.groups.map_or_else(
            || delete_undrained.groups.clone(),
            |g| g.into_iter().collect(),
        ),
        rbac: delete_undrained.rbac.as_ref().map(|r| RbacPolicy {
            verb: file.rbac_verb.unwrap_or_else(|| r.verb.clone()),
            ..r.clone()
        }),
    }
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
    pub fn from_file(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text).map_err(|e| e.in_file(path))
    }

    /// The policy in `path`, or the built-in one when there is no file.
    pub fn from_file_or_built_in(path: Option<&Path>) -> Result<Self, PolicyError> {
        match path {
            Some(path) => Self::from_file(path),
            None => Ok(Self::built_in()),
        }
    }

    /// The policy in the file format, every key spelled out.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(&to_file(self))
            .unwrap_or_else(|e| format!("# cannot render the policy: {e}\n"))
    }
}

#[cfg(test)]
mod tests;
