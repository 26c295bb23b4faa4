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
    DeleteUndrained, ForcePromote, ForceReapply, Mode, Numaplane, Policy, RbacPolicy,
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
    let dt = given.drain_timeout.unwrap_or_default();
    let mut fr = given.force_reapply.unwrap_or_default();
    let fp = given.force_promote.unwrap_or_default();
    let np = given.numaplane.unwrap_or_default();
    let du = fr.delete_undrained.take().unwrap_or_default();

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
    };
    let policy = Policy {
        mode,
        drain_timeout,
        deletion_timeout,
        force_reapply: ForceReapply {
            users,
            groups,
            delete_undrained,
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
            }),
        }),
        force_promote: Some(ForcePromoteFile {
            one_shot: Some(policy.force_promote.one_shot),
        }),
        numaplane: Some(NumaplaneFile {
            controller_account: Some(policy.numaplane.controller_account.clone()),
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
mod tests {
    use super::*;
    use crate::policy::model::DefaultTimeout;

    fn problems(yaml: &str) -> String {
        match Policy::from_yaml(yaml) {
            Ok(p) => panic!("expected an error for {yaml:?}, got {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn built_in_text_sets_every_key() {
        let (raw, optional) = built_in_files().expect("built-in parses");
        let rbac = optional
            .force_reapply
            .and_then(|f| f.rbac)
            .expect("rbac defaults");
        assert!(rbac.verb.is_some() && rbac.cache_ttl.is_some() && rbac.timeout.is_some());
        assert!(
            raw.force_reapply.as_ref().is_some_and(|f| f.rbac.is_none()),
            "RBAC is off"
        );
        let dt = raw.drain_timeout.expect("drainTimeout");
        let fr = raw.force_reapply.expect("forceReapply");
        assert!(raw.mode.is_some());
        assert!(dt.default.is_some() && dt.no_timeout_seconds.is_some());
        assert!(dt.allow_no_timeout.is_some() && dt.min.is_some() && dt.max.is_some());
        assert!(dt.default_recycle_scale_factor.is_some() && dt.namespaces.is_some());
        assert!(fr.users.is_some() && fr.groups.is_some());
        assert!(fr.require_pausing.is_some() && fr.gate_force_promote.is_some());
        assert!(fr.one_shot.is_some() && fr.min_pause_age.is_some());
    }

    #[test]
    fn delete_undrained_defaults_to_the_force_reapply_lists() {
        let p = Policy::built_in();
        let du = &p.force_reapply.delete_undrained;
        assert_eq!(
            (&du.users, &du.groups, &du.rbac),
            (&p.force_reapply.users, &p.force_reapply.groups, &None)
        );
        assert_eq!(
            p.numaplane.controller_account,
            "system:serviceaccount:numaplane-system:numaplane-sa"
        );
        let p = Policy::from_yaml(
            "forceReapply:\n  groups: [sre]\n  rbac: {verb: force-reapply}\n  deleteUndrained: {users: [bob], rbacVerb: delete-undrained}\nnumaplane: {controllerAccount: ctl}\n",
        )
        .expect("valid");
        let du = &p.force_reapply.delete_undrained;
        assert_eq!(du.users.iter().collect::<Vec<_>>(), ["bob"]);
        assert_eq!(du.groups.iter().collect::<Vec<_>>(), ["sre"]);
        let rbac = du.rbac.as_ref().expect("rbac");
        assert_eq!(
            (rbac.verb.as_str(), rbac.timeout_seconds),
            ("delete-undrained", 2)
        );
        assert_eq!(p.numaplane.controller_account, "ctl");
        assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
        for (yaml, want) in [
            (
                "forceReapply:\n  deleteUndrained: {rbacVerb: x}\n",
                "rbacVerb is set but forceReapply.rbac is not",
            ),
            ("forceReapply:\n  deleteUndrained: {user: [x]}\n", "user"),
            (
                "numaplane: {controllerAccount: \"\"}\n",
                "numaplane.controllerAccount is empty",
            ),
        ] {
            assert!(problems(yaml).contains(want), "{yaml}: {}", problems(yaml));
        }
    }

    #[test]
    fn durations_in_every_accepted_form() {
        let p = Policy::from_yaml("drainTimeout:\n  min: 45\n  max: 1h30m\n").expect("valid");
        assert_eq!(
            (p.drain_timeout.rules.min, p.drain_timeout.rules.max),
            (45, 5400)
        );
    }

    #[test]
    fn empty_file_is_the_built_in_policy() {
        assert_eq!(Policy::from_yaml("").expect("empty"), Policy::built_in());
        assert_eq!(
            Policy::from_yaml("# nothing\n").expect("comments"),
            Policy::built_in()
        );
    }

    #[test]
    fn json_is_accepted() {
        let p = Policy::from_yaml(r#"{"mode": "warn", "drainTimeout": {"max": "2h"}}"#)
            .expect("json policy");
        assert_eq!(p.mode, Mode::Warn);
        assert_eq!(p.drain_timeout.rules.max, 7200);
    }

    #[test]
    fn start_up_errors_are_precise() {
        let cases = [
            ("mode: strict\n", "strict"),
            ("drainTimeout:\n  maxx: 1h\n", "maxx"),
            ("forceReapply:\n  user: [a]\n", "user"),
            (
                "drainTimeout:\n  min: 2h\n  max: 1h\n",
                "drainTimeout.min (2h) is above drainTimeout.max (1h)",
            ),
            (
                "drainTimeout:\n  noTimeoutSeconds: 3600\n",
                "must be above drainTimeout.max",
            ),
            (
                "drainTimeout:\n  noTimeoutSeconds: 92233721\n",
                "92233721 is above 92233720",
            ),
            (
                "drainTimeout:\n  allowNoTimeout: false\n",
                "default is none (no timeout) but drainTimeout.allowNoTimeout is false",
            ),
            (
                "drainTimeout:\n  default: 10s\n",
                "drainTimeout.default (10) would be denied",
            ),
            (
                "drainTimeout:\n  default: 2h\n",
                "drainTimeout.default (7200) would be denied",
            ),
            ("drainTimeout:\n  min: 0\n", "min must be at least 1s"),
            ("drainTimeout:\n  min: -5\n", "negative"),
            ("drainTimeout:\n  max: soon\n", "\"soon\" is not a duration"),
            (
                "drainTimeout:\n  defaultRecycleScaleFactor: 0\n",
                "from 1 to 100",
            ),
            (
                "drainTimeout:\n  defaultRecycleScaleFactor: 101\n",
                "from 1 to 100",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: [pay]\n    allowNoTimeout: false\n",
                "drainTimeout.namespaces[0].default is none",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: [pay]\n    maxx: 1h\n",
                "maxx",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: []\n    max: 2h\n",
                "match is empty",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: [\"Pay_1\"]\n",
                "not a namespace name",
            ),
            (
                "forceReapply:\n  users: [\"\"]\n",
                "forceReapply.users has an empty name",
            ),
            ("mode: [\n", "invalid policy"),
        ];
        for (yaml, want) in cases {
            let got = problems(yaml);
            assert!(got.contains(want), "{yaml:?}: {got:?} lacks {want:?}");
        }
    }

    #[test]
    fn default_seconds_at_or_above_no_timeout_need_allow_no_timeout() {
        let yaml = "drainTimeout:\n  default: 40000000\n  allowNoTimeout: false\n";
        assert!(problems(yaml).contains("no timeout"));
        let ok = Policy::from_yaml("drainTimeout:\n  default: 40000000\n").expect("allowed");
        assert_eq!(
            ok.drain_timeout.rules.default,
            DefaultTimeout::Seconds(40_000_000)
        );
    }

    #[test]
    fn rbac_settings() {
        let p = Policy::from_yaml("forceReapply:\n  rbac: {verb: force-reapply}\n").expect("valid");
        let rbac = p.force_reapply.rbac.clone().expect("rbac");
        assert_eq!(
            (
                rbac.verb.as_str(),
                rbac.cache_ttl_seconds,
                rbac.timeout_seconds
            ),
            ("force-reapply", 10, 2)
        );
        assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
        let p =
            Policy::from_yaml("forceReapply:\n  rbac: {verb: approve, cacheTTL: 0, timeout: 1s}\n")
                .expect("valid");
        assert_eq!(
            p.force_reapply
                .rbac
                .map(|r| (r.cache_ttl_seconds, r.timeout_seconds)),
            Some((0, 1))
        );
        assert!(Policy::built_in().force_reapply.rbac.is_none());
        for (yaml, want) in [
            (
                "forceReapply:\n  rbac: {verb: \"force reapply\"}\n",
                "is not a verb",
            ),
            ("forceReapply:\n  rbac: {timeout: 30s}\n", "from 1s to 10s"),
            ("forceReapply:\n  rbac: {cacheTTL: 1h}\n", "above 5m"),
            ("forceReapply:\n  rbac: {verbs: [x]}\n", "verbs"),
        ] {
            assert!(problems(yaml).contains(want), "{yaml}: {}", problems(yaml));
        }
    }

    #[test]
    fn rendering_round_trips() {
        let p = Policy::from_yaml(
            "mode: warn\ndrainTimeout:\n  default: 5m\n  max: 1h30m\n  namespaces:\n  - match: [\"pay-*\"]\n    allowNoTimeout: false\nforceReapply:\n  users: [a, \"b:c\"]\n",
        )
        .expect("valid");
        let text = p.to_yaml();
        assert_eq!(
            Policy::from_yaml(&text).expect("rendered text parses"),
            p,
            "{text}"
        );
        assert_eq!(
            Policy::from_yaml(&Policy::built_in().to_yaml()).expect("built-in renders"),
            Policy::built_in()
        );
    }

    #[test]
    fn built_in_policy_has_the_documented_values() {
        let p = Policy::built_in();
        assert_eq!(p.mode, Mode::Enforce);
        assert_eq!(p.drain_timeout.rules.default, DefaultTimeout::NoTimeout);
        assert_eq!(p.drain_timeout.no_timeout_seconds, 31_536_000);
        assert!(p.drain_timeout.rules.allow_no_timeout);
        assert_eq!(p.drain_timeout.rules.min, 30);
        assert_eq!(p.drain_timeout.rules.max, 3600);
        assert_eq!(p.drain_timeout.default_recycle_scale_factor, 50);
        assert!(p.drain_timeout.namespaces.is_empty());
        assert!(
            p.force_reapply
                .users
                .contains("system:serviceaccount:argocd:argocd-server")
        );
        assert!(p.force_reapply.groups.contains("system:masters"));
        assert!(p.force_reapply.require_pausing);
        assert!(p.force_reapply.gate_force_promote);
    }

    #[test]
    fn first_matching_override_wins() {
        let p = Policy::from_yaml(
            "drainTimeout:\n  namespaces:\n  - match: [\"pay-*\", ledger]\n    max: 2h\n  - match: [\"*\"]\n    default: 5m\n    allowNoTimeout: false\n",
        )
        .expect("valid policy");
        let scope = p.drain_timeout.scope("pay-eu");
        assert_eq!(scope.matched, Some("pay-*"));
        assert_eq!(scope.rules.max, 7200);
        assert_eq!(scope.rules.min, 30, "keys not given come from above");
        assert_eq!(p.drain_timeout.scope("ledger").rules.max, 7200);
        let other = p.drain_timeout.scope("team-a");
        assert_eq!(other.matched, Some("*"));
        assert_eq!(other.rules.default, DefaultTimeout::Seconds(300));
        assert!(!other.rules.allow_no_timeout);
    }
}
