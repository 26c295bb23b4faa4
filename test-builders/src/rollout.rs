//! PipelineRollout documents, built up one field at a time.

use serde_json::{Value, json};

/// The annotation that forces a re-apply.
pub const ALLOW_DATA_LOSS: &str = "numaplane.numaproj.io/allow-data-loss";

/// Where the drain timeout lives.
pub const TIMEOUT_PATH: [&str; 5] = [
    "spec",
    "pipeline",
    "spec",
    "lifecycle",
    "pauseGracePeriodSeconds",
];

/// Where the deletion timeout lives.
pub const DELETION_TIMEOUT_PATH: [&str; 5] = [
    "spec",
    "pipeline",
    "spec",
    "lifecycle",
    "deletionGracePeriodSeconds",
];

/// The object that holds the drain timeout.
pub const LIFECYCLE_PATH: [&str; 4] = ["spec", "pipeline", "spec", "lifecycle"];

/// Where the recycle scale factor lives.
pub const SCALE_FACTOR_PATH: [&str; 4] = ["spec", "strategy", "recycleStrategy", "scaleFactor"];

/// Where the progressive strategy's forcePromote lives.
pub const FORCE_PROMOTE_PATH: [&str; 4] = ["spec", "strategy", "progressive", "forcePromote"];

/// Sets `path` in `doc` to `value`, creating objects on the way and
/// replacing whatever is not an object there (a null, a string). An empty
/// path leaves `doc` as it is.
pub fn set_field(doc: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for key in parents {
        cur = object_of(cur)
            .entry((*key).to_owned())
            .or_insert_with(|| json!({}));
    }
    object_of(cur).insert((*last).to_owned(), value);
}

/// `value` as an object, replacing it with an empty one if it is not.
fn object_of(value: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

/// A PipelineRollout document under construction.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineRolloutDoc(Value);

/// A small, realistic PipelineRollout without a drain timeout, a name or a
/// namespace: a generator source, a log sink, one edge and a label.
pub fn pipeline_rollout() -> PipelineRolloutDoc {
    PipelineRolloutDoc(json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "PipelineRollout",
        "metadata": {"labels": {"team": "a"}},
        "spec": {"pipeline": {"spec": {
            "vertices": [
                {"name": "in", "source": {"generator": {"rpu": 5}}},
                {"name": "out", "sink": {"log": {}}}
            ],
            "edges": [{"from": "in", "to": "out"}]
        }}}
    }))
}

impl PipelineRolloutDoc {
    /// A document that is exactly `value` (for shapes the builder does not
    /// make, such as one without a `spec`).
    pub fn from_json(value: Value) -> Self {
        Self(value)
    }

    /// The document with `path` set to `value` (see [`set_field`]).
    pub fn with_field(mut self, path: &[&str], value: impl Into<Value>) -> Self {
        set_field(&mut self.0, path, value.into());
        self
    }

    /// The drain timeout, `spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds`.
    pub fn with_timeout(self, value: impl Into<Value>) -> Self {
        self.with_field(&TIMEOUT_PATH, value)
    }

    /// The deletion timeout, `spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds`.
    pub fn with_deletion_timeout(self, value: impl Into<Value>) -> Self {
        self.with_field(&DELETION_TIMEOUT_PATH, value)
    }

    /// `spec.pipeline.spec.lifecycle` itself.
    pub fn with_lifecycle(self, value: impl Into<Value>) -> Self {
        self.with_field(&LIFECYCLE_PATH, value)
    }

    /// The recycle scale factor, `spec.strategy.recycleStrategy.scaleFactor`.
    pub fn with_scale_factor(self, value: impl Into<Value>) -> Self {
        self.with_field(&SCALE_FACTOR_PATH, value)
    }

    /// The `allow-data-loss` annotation (any JSON value, to test the
    /// malformed ones too).
    pub fn with_allow_data_loss(self, value: impl Into<Value>) -> Self {
        self.with_field(&["metadata", "annotations", ALLOW_DATA_LOSS], value)
    }

    /// `spec.strategy.progressive.forcePromote`.
    pub fn with_force_promote(self, value: impl Into<Value>) -> Self {
        self.with_field(&FORCE_PROMOTE_PATH, value)
    }

    /// The whole `status`.
    pub fn with_status(self, value: impl Into<Value>) -> Self {
        self.with_field(&["status"], value)
    }

    /// A label no rule reads, so that an UPDATE changes something.
    pub fn with_unrelated_edit(self) -> Self {
        self.with_field(&["metadata", "labels", "edited"], "yes")
    }

    /// Deleted and waiting for no finalizer: a deletion timestamp and an
    /// empty finalizer list.
    pub fn terminating(self) -> Self {
        self.with_field(&["metadata", "deletionTimestamp"], "2026-06-01T10:00:00Z")
            .with_field(&["metadata", "finalizers"], json!([]))
    }

    /// The document, taken out of the builder.
    pub fn into_json(self) -> Value {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_land_at_their_paths_and_replace_what_is_not_an_object() {
        let doc = pipeline_rollout()
            .with_lifecycle("oops")
            .with_timeout(600)
            .with_scale_factor(50)
            .with_allow_data_loss("true")
            .with_force_promote(true)
            .into_json();
        let at = |pointer: &str| doc.pointer(pointer).cloned();
        assert_eq!(
            at("/spec/pipeline/spec/lifecycle"),
            Some(json!({"pauseGracePeriodSeconds": 600}))
        );
        assert_eq!(
            at("/spec/strategy"),
            Some(
                json!({"recycleStrategy": {"scaleFactor": 50}, "progressive": {"forcePromote": true}})
            )
        );
        assert_eq!(
            at("/metadata/annotations/numaplane.numaproj.io~1allow-data-loss"),
            Some(json!("true"))
        );
        assert_eq!(at("/metadata/labels/team"), Some(json!("a")));
    }
}
