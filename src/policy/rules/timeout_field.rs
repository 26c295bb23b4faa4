//! Which drain timeout a finding is about: where it is written (a
//! PipelineRollout's embedded pipeline spec, or a child Pipeline's own
//! spec), and which drain it bounds (the pause: rules 2 to 4; the
//! deletion: rules 16 to 18).

use std::fmt;

use super::rule::Rule;
use crate::rollout::{FieldPath, LifecycleKey};

/// The drain a timeout bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drain {
    /// The pause: `pauseGracePeriodSeconds`, judged by `drainTimeout`.
    Pause,
    /// The deletion: `deletionGracePeriodSeconds` (or the deprecated
    /// `deleteGracePeriodSeconds`), judged by `deletionTimeout`.
    Deletion,
}

/// One drain-timeout field: which key of which lifecycle (a
/// PipelineRollout's embedded pipeline spec, or a child Pipeline's own
/// spec), and the drain it bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutField {
    key: LifecycleKey,
    /// Whether it is in a PipelineRollout's `spec.pipeline.spec.lifecycle`
    /// (else in a child Pipeline's `spec.lifecycle`).
    pub(crate) in_rollout: bool,
    pub(crate) drain: Drain,
}

impl TimeoutField {
    pub(crate) const ROLLOUT_PAUSE: Self = Self::new(LifecycleKey::Pause, true);
    pub(crate) const ROLLOUT_DELETION: Self = Self::new(LifecycleKey::Deletion, true);
    pub(crate) const ROLLOUT_DEPRECATED_DELETION: Self =
        Self::new(LifecycleKey::DeprecatedDeletion, true);
    pub(crate) const CHILD_PAUSE: Self = Self::new(LifecycleKey::Pause, false);
    pub(crate) const CHILD_DELETION: Self = Self::new(LifecycleKey::Deletion, false);
    pub(crate) const CHILD_DEPRECATED_DELETION: Self =
        Self::new(LifecycleKey::DeprecatedDeletion, false);

    const fn new(key: LifecycleKey, in_rollout: bool) -> Self {
        let drain = match key {
            LifecycleKey::Pause => Drain::Pause,
            LifecycleKey::Deletion | LifecycleKey::DeprecatedDeletion => Drain::Deletion,
        };
        Self {
            key,
            in_rollout,
            drain,
        }
    }

    /// The field's path, e.g.
    /// `spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds`.
    const fn path(self) -> FieldPath {
        if self.in_rollout {
            self.key.rollout_field()
        } else {
            self.key.child_field()
        }
    }

    /// The field's own name (the last part of its path), for short warnings.
    pub(crate) const fn name(self) -> &'static str {
        self.key.json_name()
    }

    /// The rules that judge this field: integer, range, overflow.
    pub(crate) const fn rules(self) -> [Rule; 3] {
        match self.drain {
            Drain::Pause => [
                Rule::TimeoutInteger,
                Rule::TimeoutRange,
                Rule::TimeoutOverflow,
            ],
            Drain::Deletion => [
                Rule::DeletionTimeoutInteger,
                Rule::DeletionTimeoutRange,
                Rule::DeletionTimeoutOverflow,
            ],
        }
    }

    /// What a value of 0 or less does, for messages.
    pub(crate) const fn zero_effect(self) -> &'static str {
        match self.drain {
            Drain::Pause => " (0 or less ends the pause at once, without draining)",
            Drain::Deletion => {
                " (0 or less deletes the Pipeline's buffers at once, dropping unconsumed messages)"
            }
        }
    }

    /// The policy section that judges this field.
    pub(crate) const fn section(self) -> &'static str {
        match self.drain {
            Drain::Pause => "drainTimeout",
            Drain::Deletion => "deletionTimeout",
        }
    }
}

/// The dotted path.
impl fmt::Display for TimeoutField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path().dotted())
    }
}
