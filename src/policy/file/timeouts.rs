//! The two drain-timeout sections of the policy file, `drainTimeout` (the
//! pause) and `deletionTimeout` (the deletion): what their keys inherit,
//! and the keys only the pause timeout has.

use crate::policy::model::{DrainTimeout, TimeoutRules};

/// Which section is read: the keys only the pause timeout has are refused
/// in `deletionTimeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    /// `drainTimeout`.
    Pause,
    /// `deletionTimeout`.
    Deletion,
}

/// Resolves a section as read: its rules, its overrides' rules (each key
/// an override leaves out is the section's, then written in), and its
/// recycle scale factor.
pub(super) fn resolve_section(dt: &mut DrainTimeout, section: Section, problems: &mut Vec<String>) {
    let key = match section {
        Section::Pause => "drainTimeout",
        Section::Deletion => "deletionTimeout",
    };
    dt.rules = TimeoutRules {
        default: dt.default,
        allow_no_timeout: dt.allow_no_timeout,
        min: dt.min,
        max: dt.max,
    };
    for (i, ns) in dt.namespaces.iter_mut().enumerate() {
        if section == Section::Deletion && ns.min_pause_age_seconds.is_some() {
            problems.push(format!(
                "{key}.namespaces[{i}].minPauseAge does not apply to the deletion timeout: set it under drainTimeout.namespaces"
            ));
        }
        ns.rules = TimeoutRules {
            default: *ns.default.get_or_insert(dt.default),
            allow_no_timeout: *ns.allow_no_timeout.get_or_insert(dt.allow_no_timeout),
            min: *ns.min.get_or_insert(dt.min),
            max: *ns.max.get_or_insert(dt.max),
        };
    }
    dt.default_recycle_scale_factor = match section {
        Section::Pause => dt.recycle_scale_factor.unwrap_or_default(),
        Section::Deletion => {
            if dt.recycle_scale_factor.take().is_some() {
                problems.push(
                    "deletionTimeout.defaultRecycleScaleFactor does not apply: Numaplane multiplies only the pause timeout (set it under drainTimeout)".to_owned(),
                );
            }
            // 100%: a multiplier of 1.
            100
        }
    };
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
