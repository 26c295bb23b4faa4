//! The [`Shape`] each audited kind's watch keeps: the identity a report
//! names and the parts its rules read, nothing of the specs.

use super::Shape;
use crate::kinds::{
    BOOKKEEPING_ANNOTATIONS as ANN, BOOKKEEPING_LABELS as LAB, CONFIG_LABEL, FORCE_PROMOTE_LABEL,
    MARKED_FOR_DELETION, UPGRADE_STRATEGY_KEY,
};
use crate::rollout::{
    ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, FORCE_PROMOTE_FOR, LifecycleKey, PAUSE_BEGIN,
    SCALE_FACTOR_FIELD, UPGRADE_IN_PROGRESS,
};

/// The identity a report names.
const IDENTITY: Shape = Shape::Fields(&[
    ("name", Shape::Leaf),
    ("namespace", Shape::Leaf),
    ("uid", Shape::Leaf),
    ("resourceVersion", Shape::Leaf),
]);

/// A child template's `metadata`: of its labels and annotations, only the
/// Numaplane keys rules 13 to 15 read.
const TEMPLATE_META: Shape = Shape::Fields(&[
    (
        "labels",
        Shape::Fields(&[
            (FORCE_PROMOTE_LABEL, Shape::Leaf),
            (LAB[0], Shape::Leaf),
            (LAB[1], Shape::Leaf),
            (LAB[2], Shape::Leaf),
            (LAB[3], Shape::Leaf),
            (LAB[4], Shape::Leaf),
            (LAB[5], Shape::Leaf),
        ]),
    ),
    (
        "annotations",
        Shape::Fields(&[
            (MARKED_FOR_DELETION, Shape::Leaf),
            (ANN[0], Shape::Leaf),
            (ANN[1], Shape::Leaf),
            (ANN[2], Shape::Leaf),
            (ANN[3], Shape::Leaf),
            (ANN[4], Shape::Leaf),
        ]),
    ),
]);

/// A child template: its `metadata` only.
const TEMPLATE: Shape = Shape::Fields(&[("metadata", TEMPLATE_META)]);

/// A MonoVertexRollout's or an ISBServiceRollout's `status`: whether a
/// progressive upgrade is under way.
const OTHER_STATUS: Shape = Shape::Fields(&[(UPGRADE_IN_PROGRESS.name(), Shape::Leaf)]);

/// The progressive strategy's `forcePromote`.
const STRATEGY: Shape = Shape::Fields(&[(
    "progressive",
    Shape::Fields(&[(FORCE_PROMOTE_FIELD.name(), Shape::Leaf)]),
)]);

/// What the MonoVertexRollout rules read.
pub(super) static MONO_VERTEX_ROLLOUT_SHAPE: Shape = Shape::Fields(&[
    ("apiVersion", Shape::Leaf),
    ("metadata", IDENTITY),
    (
        "spec",
        Shape::Fields(&[("monoVertex", TEMPLATE), ("strategy", STRATEGY)]),
    ),
    ("status", OTHER_STATUS),
]);

/// What the ISBServiceRollout rules read.
pub(super) static ISB_SERVICE_ROLLOUT_SHAPE: Shape = Shape::Fields(&[
    ("apiVersion", Shape::Leaf),
    ("metadata", IDENTITY),
    (
        "spec",
        Shape::Fields(&[("interStepBufferService", TEMPLATE), ("strategy", STRATEGY)]),
    ),
    ("status", OTHER_STATUS),
]);

/// What the PipelineRollout rules read (see [`crate::rollout`]), and the
/// identity a report names.
pub(super) static PIPELINE_ROLLOUT_SHAPE: Shape = Shape::Fields(&[
    ("apiVersion", Shape::Leaf),
    (
        "metadata",
        Shape::Fields(&[
            ("name", Shape::Leaf),
            ("namespace", Shape::Leaf),
            ("uid", Shape::Leaf),
            ("resourceVersion", Shape::Leaf),
            (
                "annotations",
                Shape::Fields(&[
                    (ALLOW_DATA_LOSS, Shape::Leaf),
                    (FORCE_PROMOTE_FOR, Shape::Leaf),
                ]),
            ),
        ]),
    ),
    (
        "spec",
        Shape::Fields(&[
            (
                "pipeline",
                Shape::Fields(&[
                    (
                        "spec",
                        Shape::Fields(&[(
                            "lifecycle",
                            Shape::Fields(&[
                                (LifecycleKey::Pause.json_name(), Shape::Leaf),
                                (LifecycleKey::Deletion.json_name(), Shape::Leaf),
                                (LifecycleKey::DeprecatedDeletion.json_name(), Shape::Leaf),
                            ]),
                        )]),
                    ),
                    ("metadata", TEMPLATE_META),
                ]),
            ),
            (
                "riders",
                Shape::Items(&Shape::Fields(&[(
                    "definition",
                    Shape::Fields(&[("apiVersion", Shape::Leaf), ("kind", Shape::Leaf)]),
                )])),
            ),
            (
                "strategy",
                Shape::Fields(&[
                    (
                        "recycleStrategy",
                        Shape::Fields(&[(SCALE_FACTOR_FIELD.name(), Shape::Leaf)]),
                    ),
                    (
                        "progressive",
                        Shape::Fields(&[(FORCE_PROMOTE_FIELD.name(), Shape::Leaf)]),
                    ),
                ]),
            ),
        ]),
    ),
    (
        "status",
        Shape::Fields(&[
            (UPGRADE_IN_PROGRESS.name(), Shape::Leaf),
            (
                "conditions",
                Shape::Items(&Shape::Fields(&[
                    ("type", Shape::Leaf),
                    ("status", Shape::Leaf),
                    ("reason", Shape::Leaf),
                    ("lastTransitionTime", Shape::Leaf),
                ])),
            ),
            (
                "pauseStatus",
                Shape::Fields(&[(PAUSE_BEGIN.name(), Shape::Leaf)]),
            ),
            (
                "progressiveStatus",
                Shape::Fields(&[(
                    "upgradingPipelineStatus",
                    Shape::Fields(&[("name", Shape::Leaf)]),
                )]),
            ),
        ]),
    ),
]);

/// What the namespace-level ConfigMap's rules read (23 and 24): Numaplane's
/// label and the strategy, under every key Numaplane reads as it, nothing
/// else of its data.
pub(super) static NAMESPACE_CONFIG_SHAPE: Shape = Shape::Fields(&[
    ("apiVersion", Shape::Leaf),
    (
        "metadata",
        Shape::Fields(&[
            ("name", Shape::Leaf),
            ("namespace", Shape::Leaf),
            ("uid", Shape::Leaf),
            ("resourceVersion", Shape::Leaf),
            ("labels", Shape::Fields(&[(CONFIG_LABEL, Shape::Leaf)])),
        ]),
    ),
    (
        "data",
        Shape::GoFields(&[(UPGRADE_STRATEGY_KEY, Shape::Leaf)]),
    ),
]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::TIMEOUT_FIELD;

    /// Whether `shape` keeps the value at `keys`.
    fn keeps(shape: &Shape, keys: &[&str]) -> bool {
        match (shape, keys.split_first()) {
            (Shape::Leaf, _) => true,
            (Shape::Fields(fields) | Shape::GoFields(fields), Some((key, rest))) => fields
                .iter()
                .any(|(k, inner)| k == key && keeps(inner, rest)),
            _ => false,
        }
    }

    #[test]
    fn each_shape_keeps_the_fields_its_rules_read() {
        for path in [
            TIMEOUT_FIELD,
            LifecycleKey::Deletion.rollout_field(),
            LifecycleKey::DeprecatedDeletion.rollout_field(),
            SCALE_FACTOR_FIELD,
            FORCE_PROMOTE_FIELD,
            UPGRADE_IN_PROGRESS,
            PAUSE_BEGIN,
        ] {
            assert!(keeps(&PIPELINE_ROLLOUT_SHAPE, path.keys()), "{path}");
        }
        for shape in [&MONO_VERTEX_ROLLOUT_SHAPE, &ISB_SERVICE_ROLLOUT_SHAPE] {
            for path in [FORCE_PROMOTE_FIELD, UPGRADE_IN_PROGRESS] {
                assert!(keeps(shape, path.keys()), "{path}");
            }
        }
        assert!(!keeps(
            &PIPELINE_ROLLOUT_SHAPE,
            &["spec", "pipeline", "spec", "vertices"]
        ));
    }
}
