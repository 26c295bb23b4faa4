//! The drain timeouts in a Pipeline's `lifecycle`: where each stands in a
//! PipelineRollout's embedded pipeline spec (`spec.pipeline.spec.lifecycle`)
//! and in a child Pipeline's own spec (`spec.lifecycle`).

use serde::Deserialize;
use serde_json::Value;

use super::GuardedObject;
use super::fields::{
    CHILD_DELETION, CHILD_DEPRECATED_DELETION, CHILD_PAUSE, DELETION_KEY, DEPRECATED_DELETION_KEY,
    FieldPath, PAUSE_KEY, ROLLOUT_DELETION, ROLLOUT_DEPRECATED_DELETION, ROLLOUT_PAUSE,
};
use crate::lenient::{JsonKind, Obj};

/// One drain timeout of a Pipeline's `lifecycle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleKey {
    /// `pauseGracePeriodSeconds`: how long a pause drains.
    Pause,
    /// `deletionGracePeriodSeconds`: how long a deletion drains.
    Deletion,
    /// `deleteGracePeriodSeconds`: the deprecated name of the deletion
    /// timeout, read by Numaflow only when `deletionGracePeriodSeconds` is
    /// not set.
    DeprecatedDeletion,
}

impl LifecycleKey {
    pub(crate) const fn json_name(self) -> &'static str {
        match self {
            Self::Pause => PAUSE_KEY,
            Self::Deletion => DELETION_KEY,
            Self::DeprecatedDeletion => DEPRECATED_DELETION_KEY,
        }
    }

    /// This timeout in a PipelineRollout's embedded pipeline spec
    /// (`spec.pipeline.spec.lifecycle`); its keys are what `/mutate`
    /// creates.
    pub(crate) const fn rollout_field(self) -> FieldPath {
        match self {
            Self::Pause => ROLLOUT_PAUSE,
            Self::Deletion => ROLLOUT_DELETION,
            Self::DeprecatedDeletion => ROLLOUT_DEPRECATED_DELETION,
        }
    }

    /// This timeout in a child Pipeline's own `spec.lifecycle`.
    pub const fn child_field(self) -> FieldPath {
        match self {
            Self::Pause => CHILD_PAUSE,
            Self::Deletion => CHILD_DELETION,
            Self::DeprecatedDeletion => CHILD_DEPRECATED_DELETION,
        }
    }
}

/// The drain timeouts of a lifecycle, as found (any JSON value).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Lifecycle {
    #[serde(default)]
    pub(super) pause_grace_period_seconds: Option<Value>,
    #[serde(default)]
    pub(super) deletion_grace_period_seconds: Option<Value>,
    #[serde(default)]
    pub(super) delete_grace_period_seconds: Option<Value>,
}

impl Lifecycle {
    fn value(&self, key: LifecycleKey) -> Option<&Value> {
        match key {
            LifecycleKey::Pause => self.pause_grace_period_seconds.as_ref(),
            LifecycleKey::Deletion => self.deletion_grace_period_seconds.as_ref(),
            LifecycleKey::DeprecatedDeletion => self.delete_grace_period_seconds.as_ref(),
        }
        .filter(|v| !v.is_null())
    }
}

/// Where a drain timeout stands in an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TimeoutSlot<'a> {
    /// Set to a value other than `null` (not necessarily a valid one).
    Set(&'a Value),
    /// Absent or `null`. `depth` is the index in the key's path (for a
    /// rollout, [`LifecycleKey::rollout_field`]) of the first key that is
    /// absent or `null`: the mutating webhook must create the objects from
    /// there on.
    Unset { depth: usize },
    /// A value on the way is not an object, so no timeout can be read or set.
    Blocked {
        /// The dotted path of the value that is not an object.
        path: &'static str,
        /// What was found there instead.
        found: JsonKind,
    },
}

/// Steps one level down on the way to `field`: the object, or the slot
/// that says why not.
fn step<T>(obj: &Obj<T>, level: usize, field: FieldPath) -> Result<&T, TimeoutSlot<'static>> {
    match obj {
        Obj::Present(t) => Ok(t),
        Obj::Missing | Obj::Null => Err(TimeoutSlot::Unset { depth: level }),
        Obj::Wrong(found) => Err(TimeoutSlot::Blocked {
            path: field.prefix(level + 1).dotted(),
            found: *found,
        }),
    }
}

fn slot(lifecycle: &Lifecycle, key: LifecycleKey, depth: usize) -> TimeoutSlot<'_> {
    match lifecycle.value(key) {
        Some(v) => TimeoutSlot::Set(v),
        None => TimeoutSlot::Unset { depth },
    }
}

impl GuardedObject {
    /// Where the pause timeout
    /// `spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds` stands.
    pub(crate) fn timeout(&self) -> TimeoutSlot<'_> {
        self.lifecycle_timeout(LifecycleKey::Pause)
    }

    /// Where `key` stands in a PipelineRollout's
    /// `spec.pipeline.spec.lifecycle`.
    pub(crate) fn lifecycle_timeout(&self, key: LifecycleKey) -> TimeoutSlot<'_> {
        let field = key.rollout_field();
        let lookup = || -> Result<TimeoutSlot<'_>, TimeoutSlot<'_>> {
            let spec = step(&self.spec, 0, field)?;
            let pipeline = step(&spec.pipeline, 1, field)?;
            let pipeline_spec = step(&pipeline.spec, 2, field)?;
            let lifecycle = step(&pipeline_spec.lifecycle, 3, field)?;
            Ok(slot(lifecycle, key, 4))
        };
        lookup().unwrap_or_else(|slot| slot)
    }

    /// Where `key` stands in a child Pipeline's own `spec.lifecycle`.
    pub(crate) fn child_lifecycle_timeout(&self, key: LifecycleKey) -> TimeoutSlot<'_> {
        let field = key.child_field();
        let lookup = || -> Result<TimeoutSlot<'_>, TimeoutSlot<'_>> {
            let spec = step(&self.spec, 0, field)?;
            let lifecycle = step(&spec.lifecycle, 1, field)?;
            Ok(slot(lifecycle, key, 2))
        };
        lookup().unwrap_or_else(|slot| slot)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn view(object: Value) -> GuardedObject {
        serde_json::from_value(object).expect("a view")
    }

    #[test]
    fn each_key_is_read_where_it_is_written() {
        let object = view(json!({"spec": {
            "lifecycle": {"deletionGracePeriodSeconds": 30, "deleteGracePeriodSeconds": 30},
            "pipeline": {"spec": {"lifecycle": {"deletionGracePeriodSeconds": 0, "deleteGracePeriodSeconds": "1m"}}}}}));
        let (zero, text, thirty) = (json!(0), json!("1m"), json!(30));
        assert_eq!(
            object.lifecycle_timeout(LifecycleKey::Deletion),
            TimeoutSlot::Set(&zero)
        );
        assert_eq!(
            object.lifecycle_timeout(LifecycleKey::DeprecatedDeletion),
            TimeoutSlot::Set(&text)
        );
        assert_eq!(
            object.lifecycle_timeout(LifecycleKey::Pause),
            TimeoutSlot::Unset { depth: 4 }
        );
        assert_eq!(
            object.child_lifecycle_timeout(LifecycleKey::Deletion),
            TimeoutSlot::Set(&thirty)
        );
        assert_eq!(
            object.child_lifecycle_timeout(LifecycleKey::Pause),
            TimeoutSlot::Unset { depth: 2 }
        );
    }

    #[test]
    fn a_child_lifecycle_of_each_shape() {
        let cases = [
            (json!({}), TimeoutSlot::Unset { depth: 0 }),
            (json!({"spec": {}}), TimeoutSlot::Unset { depth: 1 }),
            (
                json!({"spec": {"lifecycle": null}}),
                TimeoutSlot::Unset { depth: 1 },
            ),
            (
                json!({"spec": {"lifecycle": "Paused"}}),
                TimeoutSlot::Blocked {
                    path: "spec.lifecycle",
                    found: JsonKind::String,
                },
            ),
            (
                json!({"spec": 3}),
                TimeoutSlot::Blocked {
                    path: "spec",
                    found: JsonKind::Number,
                },
            ),
        ];
        for (object, want) in cases {
            assert_eq!(
                view(object.clone()).child_lifecycle_timeout(LifecycleKey::Pause),
                want,
                "{object}"
            );
        }
    }
}
