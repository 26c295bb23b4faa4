//! The kinds the audit judges: one table entry per kind. An entry names
//! the kind's API identity, the parts of a stored object its rules read
//! (the [`Shape`] its watch keeps), the rules a report lists for it, and
//! how stored forces are judged by state. Adding a kind is adding a marker
//! type with [`AuditedKind`] and a line to [`KINDS`].

use futures_util::stream::BoxStream;
use serde_json::Value;

use super::judge;
use super::slim::Shape;
use super::watch::{self, WatchItem};
use crate::rollout::{self, ALLOW_DATA_LOSS, FORCE_PROMOTE_FOR};

/// A kind's API identity and the parts of it kept, known at compile time
/// (the watch reads objects of it as [`super::slim::Slim`]).
pub trait AuditedKind: Send + Sync + 'static {
    /// The API group.
    const GROUP: &'static str;
    /// The version read.
    const VERSION: &'static str;
    /// The kind.
    const KIND: &'static str;
    /// The resource (plural) name.
    const PLURAL: &'static str;
    /// What a stored object keeps.
    const SHAPE: &'static Shape;
}

/// One kind in the audit's table.
#[derive(Debug)]
pub struct KindEntry {
    /// The API group.
    pub group: &'static str,
    /// The version read.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource (plural) name.
    pub plural: &'static str,
    /// The rules every object of this kind gets a result for, in order.
    pub rules: &'static [&'static str],
    /// Watches every object of the kind, slim.
    pub watch: fn(kube::Client) -> BoxStream<'static, WatchItem>,
    /// Judges one stored object (its slim JSON) against the policy.
    pub judge: for<'a> fn(&'a judge::Judge<'a>, &'a Self, &'a str) -> judge::JudgeFuture<'a>,
}

impl KindEntry {
    /// `group/version`, as `apiVersion` writes it.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// The kinds audited, in report order.
pub static KINDS: &[KindEntry] = &[KindEntry {
    group: rollout::GROUP,
    version: rollout::VERSION,
    kind: rollout::KIND,
    plural: rollout::RESOURCE,
    rules: PIPELINE_ROLLOUT_RULES,
    watch: watch::kind::<PipelineRollouts>,
    judge: judge::pipeline_rollout,
}];

/// The rule names a PipelineRollout's results carry (see docs/audit.md for
/// the rule numbers each covers).
pub const PIPELINE_ROLLOUT_RULES: &[&str] = &[
    RULE_TIMEOUT_INTEGER,
    RULE_TIMEOUT_RANGE,
    RULE_TIMEOUT_OVERFLOW,
    RULE_ALLOW_DATA_LOSS_VALUE,
    RULE_FORCE_REAPPLY,
    RULE_FORCE_PROMOTE,
];

/// Rule 2: the drain timeout is an integer (and can be reached).
pub const RULE_TIMEOUT_INTEGER: &str = "drain-timeout-integer";
/// Rule 3: the drain timeout is in the namespace's range.
pub const RULE_TIMEOUT_RANGE: &str = "drain-timeout-range";
/// Rule 4: the drain timeout times the recycle multiplier fits.
pub const RULE_TIMEOUT_OVERFLOW: &str = "drain-timeout-overflow";
/// Rule 5: allow-data-loss is a value Numaplane understands.
pub const RULE_ALLOW_DATA_LOSS_VALUE: &str = "allow-data-loss-value";
/// Rules 6 and 11: a stored forced re-apply, by state.
pub const RULE_FORCE_REAPPLY: &str = "force-reapply";
/// Rules 7 and 12: a stored forcePromote, by state.
pub const RULE_FORCE_PROMOTE: &str = "force-promote";
/// The object could not be judged at all.
pub const RULE_JUDGEABLE: &str = "judgeable";

/// The marker of PipelineRollouts in the table.
#[derive(Debug)]
pub struct PipelineRollouts;

impl AuditedKind for PipelineRollouts {
    const GROUP: &'static str = rollout::GROUP;
    const VERSION: &'static str = rollout::VERSION;
    const KIND: &'static str = rollout::KIND;
    const PLURAL: &'static str = rollout::RESOURCE;
    const SHAPE: &'static Shape = &PIPELINE_ROLLOUT_SHAPE;
}

/// What the PipelineRollout rules read (see [`crate::rollout`]), and the
/// identity a report names.
static PIPELINE_ROLLOUT_SHAPE: Shape = Shape::Fields(&[
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
                Shape::Fields(&[(
                    "spec",
                    Shape::Fields(&[(
                        "lifecycle",
                        Shape::Fields(&[("pauseGracePeriodSeconds", Shape::Leaf)]),
                    )]),
                )]),
            ),
            (
                "strategy",
                Shape::Fields(&[
                    (
                        "recycleStrategy",
                        Shape::Fields(&[("scaleFactor", Shape::Leaf)]),
                    ),
                    (
                        "progressive",
                        Shape::Fields(&[("forcePromote", Shape::Leaf)]),
                    ),
                ]),
            ),
        ]),
    ),
    (
        "status",
        Shape::Fields(&[
            ("upgradeInProgress", Shape::Leaf),
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
                Shape::Fields(&[("lastPauseBeginTime", Shape::Leaf)]),
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

/// Whether `value` (a slim object) is a stored forced re-apply.
pub fn forces_reapply(value: &Value) -> bool {
    value
        .pointer(&format!(
            "/metadata/annotations/{}",
            ALLOW_DATA_LOSS.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some("true")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::background::audit::slim::prune;

    #[test]
    fn the_pipeline_rollout_shape_keeps_what_the_rules_read_and_nothing_of_the_spec() {
        let sample = include_str!("../../../tests/fixtures/numaplane-sample-pipelinerollout.yaml");
        let mut object: Value = serde_saphyr::from_str(sample).expect("sample YAML");
        object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "fieldsV1": {}}]);
        object["metadata"]["annotations"] =
            json!({ALLOW_DATA_LOSS: "true", "other": "x".repeat(5000)});
        object["spec"]["pipeline"]["spec"]["vertices"] = json!([{"name": "v".repeat(20_000)}]);
        let slim = prune(&object.to_string(), &PIPELINE_ROLLOUT_SHAPE).expect("prunes");
        let text = slim.to_string();
        assert!(text.len() < 600, "{} bytes: {text}", text.len());
        assert!(forces_reapply(&slim));
        assert!(slim["metadata"].get("managedFields").is_none());
        assert!(slim["spec"]["pipeline"]["spec"].get("vertices").is_none());
        // What the rules read is the same in the slim and the whole object.
        let whole = crate::rollout::PipelineRollout::from_json(&object.to_string()).expect("view");
        let kept = crate::rollout::PipelineRollout::from_json(&text).expect("view");
        assert_eq!(whole, kept);
    }
}
