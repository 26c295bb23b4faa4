//! What a PipelineRollout says about draining that the rules only warn
//! of: the deletion timeout its Pipeline is drained for when it is
//! deleted, and riders that make Numaplane skip the progressive
//! assessment.

use serde::Deserialize;

use super::{GuardedObject, LifecycleKey, TimeoutSlot};
use crate::lenient::{Obj, Text};

/// How a rollout's words name the deletion timeout of a Pipeline that sets
/// none.
pub(crate) const DEFAULT_DELETION_WORDS: &str = "at most 30s (0s with Numaflow's minimal CRDs)";

/// One entry of `spec.riders`: only its definition's identity.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(super) struct Rider {
    #[serde(default)]
    pub(super) definition: Obj<RiderDefinition>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RiderDefinition {
    #[serde(default)]
    pub(super) api_version: Text,
    #[serde(default)]
    pub(super) kind: Text,
}

/// The deletion timeout a PipelineRollout's Pipeline is drained for when
/// it is deleted, as Numaflow reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionTimeout {
    /// An integer number of seconds, from this field.
    Set {
        /// The dotted path it was read from.
        path: &'static str,
        seconds: i64,
    },
    /// The field Numaflow reads holds something other than an integer.
    Unreadable {
        path: &'static str,
        /// The value as JSON.
        value: String,
    },
    /// Neither field is set: 30s from the schema defaults of Numaflow's
    /// full CRDs. Numaflow's own fallback
    /// (`Pipeline.GetTerminationGracePeriodSeconds`) reads the deleted
    /// object's `metadata.deletionGracePeriodSeconds` first, which the API
    /// server sets to 0 for a custom resource: with the minimal CRDs, which
    /// default nothing, the Pipeline is not drained at all.
    Default,
}

impl std::fmt::Display for DeletionTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Set { seconds, .. } if *seconds <= 0 => {
                write!(f, "{seconds}s, so not drained at all")
            }
            Self::Set { seconds, .. } => write!(f, "at most {seconds}s"),
            Self::Unreadable { value, .. } => {
                write!(f, "for an unreadable deletion timeout ({value})")
            }
            Self::Default => f.write_str(DEFAULT_DELETION_WORDS),
        }
    }
}

/// The path of the deletion timeout Numaflow reads first.
pub(crate) const DELETION_FIELD: &str = LifecycleKey::Deletion.rollout_field().dotted();
/// The deprecated one it reads when the first is absent.
const DEPRECATED_DELETION_FIELD: &str = LifecycleKey::DeprecatedDeletion.rollout_field().dotted();

impl GuardedObject {
    /// The deletion timeout of this rollout's Pipeline:
    /// `deletionGracePeriodSeconds`, else the deprecated
    /// `deleteGracePeriodSeconds`, else Numaflow's 30 s. (Numaflow would
    /// next read the Pipeline's `metadata.deletionGracePeriodSeconds`,
    /// which Numaplane never sets.)
    pub fn deletion_timeout(&self) -> DeletionTimeout {
        let fields = [
            (DELETION_FIELD, LifecycleKey::Deletion),
            (DEPRECATED_DELETION_FIELD, LifecycleKey::DeprecatedDeletion),
        ];
        for (path, key) in fields {
            if let TimeoutSlot::Set(value) = self.lifecycle_timeout(key) {
                return match value.as_i64() {
                    Some(seconds) => DeletionTimeout::Set { path, seconds },
                    None => DeletionTimeout::Unreadable {
                        path,
                        value: value.to_string().chars().take(20).collect(),
                    },
                };
            }
        }
        DeletionTimeout::Default
    }

    /// Each rider of `spec.riders` whose definition names an apiVersion
    /// and a kind, by index: (index, group, version, kind), the group
    /// empty for a core apiVersion such as `v1`.
    fn rider_kinds(&self) -> impl Iterator<Item = (usize, &str, &str, &str)> {
        self.spec
            .get()
            .into_iter()
            .flat_map(|spec| spec.riders.items().iter().enumerate())
            .filter_map(|(i, rider)| {
                let definition = rider.get()?.definition.get()?;
                let api_version = definition.api_version.as_deref()?;
                let kind = definition.kind.as_deref()?;
                let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
                Some((i, group, version, kind))
            })
    }

    /// The riders in `spec.riders` that grant access, by index and kind:
    /// Roles, RoleBindings, ClusterRoles and ClusterRoleBindings (group
    /// `rbac.authorization.k8s.io`, any version), ServiceAccounts and
    /// Secrets (core `v1`). Numaplane applies riders with its own account,
    /// so whoever may edit the rollout has it create them.
    pub(crate) fn access_riders(&self) -> Vec<(usize, &'static str)> {
        const RBAC: [&str; 4] = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
        const CORE: [&str; 2] = ["ServiceAccount", "Secret"];
        self.rider_kinds()
            .filter_map(|(i, group, version, kind)| {
                let known = match (group, version) {
                    ("rbac.authorization.k8s.io", _) => RBAC.iter().find(|k| **k == kind),
                    ("", "v1") => CORE.iter().find(|k| **k == kind),
                    _ => None,
                };
                known.map(|k| (i, *k))
            })
            .collect()
    }

    /// The indexes in `spec.riders` of the riders that are
    /// HorizontalPodAutoscalers (apiVersion group `autoscaling`, any
    /// version): with one, Numaplane promotes every progressive upgrade
    /// without assessment (Numaplane 75c9dd5, `progressiveUnsupported`).
    pub(crate) fn hpa_riders(&self) -> Vec<usize> {
        self.rider_kinds()
            .filter(|(_, group, _, kind)| {
                *group == "autoscaling" && *kind == "HorizontalPodAutoscaler"
            })
            .map(|(i, ..)| i)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn view(v: Value) -> GuardedObject {
        serde_json::from_value(v).expect("lenient")
    }

    fn lifecycle(l: Value) -> GuardedObject {
        view(json!({"spec": {"pipeline": {"spec": {"lifecycle": l}}}}))
    }

    #[test]
    fn the_deletion_timeout_is_read_as_numaflow_reads_it() {
        let cases = [
            (json!({}), DeletionTimeout::Default),
            (
                json!({"deletionGracePeriodSeconds": 600, "deleteGracePeriodSeconds": 5}),
                DeletionTimeout::Set {
                    path: DELETION_FIELD,
                    seconds: 600,
                },
            ),
            (
                json!({"deleteGracePeriodSeconds": 0}),
                DeletionTimeout::Set {
                    path: DEPRECATED_DELETION_FIELD,
                    seconds: 0,
                },
            ),
            (
                json!({"deletionGracePeriodSeconds": null, "deleteGracePeriodSeconds": 45}),
                DeletionTimeout::Set {
                    path: DEPRECATED_DELETION_FIELD,
                    seconds: 45,
                },
            ),
            (
                json!({"deletionGracePeriodSeconds": "30s"}),
                DeletionTimeout::Unreadable {
                    path: DELETION_FIELD,
                    value: "\"30s\"".to_owned(),
                },
            ),
        ];
        for (l, want) in cases {
            assert_eq!(lifecycle(l.clone()).deletion_timeout(), want, "{l}");
        }
        assert_eq!(
            view(json!({"spec": {"pipeline": "x"}})).deletion_timeout(),
            DeletionTimeout::Default
        );
        assert_eq!(
            lifecycle(json!({})).deletion_timeout().to_string(),
            "at most 30s (0s with Numaflow's minimal CRDs)"
        );
    }

    #[test]
    fn hpa_riders_are_found_by_group_and_kind() {
        let rider =
            |api: &str, kind: &str| json!({"definition": {"apiVersion": api, "kind": kind}});
        let r = view(json!({"spec": {"riders": [
            rider("v1", "ConfigMap"),
            rider("autoscaling/v2", "HorizontalPodAutoscaler"),
            rider("autoscaling/v1", "HorizontalPodAutoscaler"),
            rider("keda.sh/v1alpha1", "ScaledObject"),
            rider("v1", "HorizontalPodAutoscaler"),
            "not an object",
            {"definition": 3},
        ]}}));
        assert_eq!(r.hpa_riders(), [1, 2]);
        assert!(
            view(json!({"spec": {"riders": "x"}}))
                .hpa_riders()
                .is_empty()
        );
        assert!(view(json!({})).hpa_riders().is_empty());
    }

    #[test]
    fn access_riders_are_found_by_group_and_kind() {
        let rider =
            |api: &str, kind: &str| json!({"definition": {"apiVersion": api, "kind": kind}});
        let r = view(json!({"spec": {"riders": [
            rider("v1", "ConfigMap"),
            rider("rbac.authorization.k8s.io/v1", "RoleBinding"),
            rider("v1", "Secret"),
            rider("v1", "ServiceAccount"),
            rider("rbac.authorization.k8s.io/v1", "ClusterRole"),
            rider("example.com/v1", "RoleBinding"),
            rider("apps/v1", "Secret"),
            "not an object",
            {"definition": {"apiVersion": 1, "kind": "Secret"}},
        ]}}));
        assert_eq!(
            r.access_riders(),
            [
                (1, "RoleBinding"),
                (2, "Secret"),
                (3, "ServiceAccount"),
                (4, "ClusterRole")
            ]
        );
        assert!(
            view(json!({"spec": {"riders": 3}}))
                .access_riders()
                .is_empty()
        );
    }
}
