//! The two drain-timeout sections of the policy file, `drainTimeout` (the
//! pause) and `deletionTimeout` (the deletion): one schema, read into one
//! model type ([`DrainTimeout`]) and rendered back.

use serde::{Deserialize, Serialize};

use super::pick_or;
use crate::policy::duration::{DefaultSpec, Seconds};
use crate::policy::model::{DrainTimeout, NamespaceRules, TimeoutRules};

/// A drain-timeout section as written.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TimeoutFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) default: Option<DefaultSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) no_timeout_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) allow_no_timeout: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) min: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) default_recycle_scale_factor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) namespaces: Option<Vec<NamespaceFile>>,
}

/// One namespace override as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct NamespaceFile {
    #[serde(rename = "match")]
    patterns: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<DefaultSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allow_no_timeout: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_pause_age: Option<Seconds>,
}

/// Which section is read: the keys only the pause timeout has are refused
/// in `deletionTimeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    /// `drainTimeout`.
    Pause,
    /// `deletionTimeout`.
    Deletion,
}

impl Section {
    fn key(self) -> &'static str {
        match self {
            Self::Pause => "drainTimeout",
            Self::Deletion => "deletionTimeout",
        }
    }
}

/// Reads a section: each key the file's value, else the built-in one.
pub(super) fn parse_section(
    problems: &mut Vec<String>,
    section: Section,
    given: TimeoutFile,
    base: TimeoutFile,
) -> DrainTimeout {
    let key = section.key();
    let rules = TimeoutRules {
        default: pick_or(
            problems,
            given.default,
            base.default,
            &format!("{key}.default"),
        )
        .0,
        allow_no_timeout: pick_or(
            problems,
            given.allow_no_timeout,
            base.allow_no_timeout,
            &format!("{key}.allowNoTimeout"),
        ),
        min: pick_or(
            problems,
            given.min.map(|s| s.0),
            base.min.map(|s| s.0),
            &format!("{key}.min"),
        ),
        max: pick_or(
            problems,
            given.max.map(|s| s.0),
            base.max.map(|s| s.0),
            &format!("{key}.max"),
        ),
    };
    let namespaces: Vec<NamespaceRules> = given
        .namespaces
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, ns)| {
            if section == Section::Deletion && ns.min_pause_age.is_some() {
                problems.push(format!(
                    "{key}.namespaces[{i}].minPauseAge does not apply to the deletion timeout: set it under drainTimeout.namespaces"
                ));
            }
            NamespaceRules {
                patterns: ns.patterns,
                rules: TimeoutRules {
                    default: ns.default.map_or(rules.default, |d| d.0),
                    allow_no_timeout: ns.allow_no_timeout.unwrap_or(rules.allow_no_timeout),
                    min: ns.min.map_or(rules.min, |s| s.0),
                    max: ns.max.map_or(rules.max, |s| s.0),
                },
                min_pause_age_seconds: ns.min_pause_age.map(|s| s.0),
            }
        })
        .collect();
    let default_recycle_scale_factor = match section {
        Section::Pause => pick_or(
            problems,
            given.default_recycle_scale_factor,
            base.default_recycle_scale_factor,
            "drainTimeout.defaultRecycleScaleFactor",
        ),
        Section::Deletion => {
            if given.default_recycle_scale_factor.is_some() {
                problems.push(
                    "deletionTimeout.defaultRecycleScaleFactor does not apply: Numaplane multiplies only the pause timeout (set it under drainTimeout)".to_owned(),
                );
            }
            // 100%: a multiplier of 1.
            100
        }
    };
    DrainTimeout {
        rules,
        no_timeout_seconds: pick_or(
            problems,
            given.no_timeout_seconds,
            base.no_timeout_seconds,
            &format!("{key}.noTimeoutSeconds"),
        ),
        default_recycle_scale_factor,
        namespaces,
    }
}

/// A section in the file's schema, every key spelled out.
pub(super) fn render_section(section: Section, dt: &DrainTimeout) -> TimeoutFile {
    TimeoutFile {
        default: Some(DefaultSpec(dt.rules.default)),
        no_timeout_seconds: Some(dt.no_timeout_seconds),
        allow_no_timeout: Some(dt.rules.allow_no_timeout),
        min: Some(Seconds(dt.rules.min)),
        max: Some(Seconds(dt.rules.max)),
        default_recycle_scale_factor: (section == Section::Pause)
            .then_some(dt.default_recycle_scale_factor),
        namespaces: Some(
            dt.namespaces
                .iter()
                .map(|ns| NamespaceFile {
                    patterns: ns.patterns.clone(),
                    default: Some(DefaultSpec(ns.rules.default)),
                    allow_no_timeout: Some(ns.rules.allow_no_timeout),
                    min: Some(Seconds(ns.rules.min)),
                    max: Some(Seconds(ns.rules.max)),
                    min_pause_age: ns.min_pause_age_seconds.map(Seconds),
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::Policy;
    use crate::policy::model::DefaultTimeout;

    fn problems(yaml: &str) -> String {
        match Policy::from_yaml(yaml) {
            Ok(p) => panic!("expected an error for {yaml:?}, got {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_built_in_deletion_timeout_is_numaflows_default_without_no_timeout() {
        let dt = Policy::built_in().deletion_timeout;
        assert_eq!(dt.rules.default, DefaultTimeout::Seconds(30));
        assert_eq!((dt.rules.min, dt.rules.max), (30, 3600));
        assert!(!dt.rules.allow_no_timeout);
        assert_eq!(dt.no_timeout_seconds, 31_536_000);
        assert!(dt.namespaces.is_empty());
    }

    #[test]
    fn deletion_timeout_keys_inherit_and_round_trip() {
        let p = Policy::from_yaml(
            "deletionTimeout:\n  default: 5m\n  namespaces:\n  - match: [\"batch-*\"]\n    min: 5s\n",
        )
        .expect("valid");
        let dt = &p.deletion_timeout;
        assert_eq!(dt.rules.default, DefaultTimeout::Seconds(300));
        let scope = dt.scope("batch-1");
        assert_eq!(
            (scope.rules.min, scope.rules.max, scope.rules.default),
            (5, 3600, DefaultTimeout::Seconds(300))
        );
        assert_eq!(p.drain_timeout, Policy::built_in().drain_timeout);
        assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
    }

    #[test]
    fn deletion_timeout_start_up_errors_name_their_key() {
        let cases = [
            (
                "deletionTimeout:\n  default: none\n",
                "deletionTimeout.default is none (no timeout) but deletionTimeout.allowNoTimeout is false",
            ),
            (
                "deletionTimeout:\n  min: 0\n",
                "deletionTimeout.min must be at least 1s",
            ),
            (
                "deletionTimeout:\n  default: 10s\n",
                "deletionTimeout.default (10) would be denied",
            ),
            (
                "deletionTimeout:\n  max: 2y\n",
                "deletionTimeout.noTimeoutSeconds (31536000) must be above deletionTimeout.max",
            ),
            (
                "deletionTimeout:\n  noTimeoutSeconds: 9223372037\n  max: 1h\n",
                "deletionTimeout.noTimeoutSeconds 9223372037 is above 9223372036",
            ),
            (
                "deletionTimeout:\n  defaultRecycleScaleFactor: 50\n",
                "deletionTimeout.defaultRecycleScaleFactor does not apply",
            ),
            (
                "deletionTimeout:\n  namespaces:\n  - match: [a]\n    minPauseAge: 1m\n",
                "deletionTimeout.namespaces[0].minPauseAge does not apply",
            ),
            (
                "deletionTimeout:\n  namespaces:\n  - match: [\"A_b\"]\n",
                "deletionTimeout.namespaces[0].match: \"A_b\" is not a namespace name",
            ),
            ("deletionTimeout:\n  maxx: 1h\n", "maxx"),
        ];
        for (yaml, want) in cases {
            let got = problems(yaml);
            assert!(got.contains(want), "{yaml:?}: {got:?} lacks {want:?}");
        }
    }
}
