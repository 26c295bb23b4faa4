//! What the rules judge: one write (a CREATE, UPDATE or DELETE) of a
//! PipelineRollout or another guarded kind, with who makes it, where and
//! when.

use std::fmt;

use time::OffsetDateTime;

use crate::kinds::Kind;
use crate::policy::user::UserInfo;
use crate::rollout::GuardedObject;

/// The operations the rules judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    /// The removal of a stored object: judged on the stored object, which
    /// is then the write's `object`.
    Delete,
}

impl Operation {
    /// The name the API server gives it.
    pub(crate) fn to_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_str())
    }
}

/// Where the object judged comes from, which says what can be known of
/// who wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// An admission request, or a manifest `check` judges as one: the
    /// requester is known, so a force it sets is gated on the requester's
    /// permission.
    Request,
    /// An object found stored (the audit's): who wrote it cannot be known,
    /// so a force it holds is judged by the state it leaves
    /// ([`super::verdict::StoredState`]), and no permission is asked.
    Stored,
}

/// One write of a guarded object (a rollout of any kind, or a rollout's
/// child), as the rules look at it: the operation, the namespace, the
/// user, the object, the stored object, and the time it is judged at.
#[derive(Debug, Clone, Copy)]
pub struct GuardedWrite<'a> {
    /// The kind written (the request's resource).
    pub(crate) kind: Kind,
    pub(crate) operation: Operation,
    /// The object's namespace (selects the namespace override).
    pub(crate) namespace: &'a str,
    pub(crate) user: &'a UserInfo,
    /// The object as it would be stored; on DELETE, the stored object
    /// being deleted.
    pub(crate) object: &'a GuardedObject,
    /// The stored object, on UPDATE (on DELETE it is `object`).
    pub(crate) old_object: Option<&'a GuardedObject>,
    /// The time the request is judged at (the webhook's clock, or
    /// `review --now`): clock-dependent rules read only this.
    pub(crate) now: OffsetDateTime,
    pub(crate) origin: Origin,
}

impl GuardedWrite<'_> {
    /// The stored object, on UPDATE only.
    pub(crate) fn old(&self) -> Option<&GuardedObject> {
        match self.operation {
            Operation::Update => self.old_object,
            Operation::Create | Operation::Delete => None,
        }
    }

    /// Whether this is a write of a PipelineRollout (the drain-timeout and
    /// allow-data-loss rules judge nothing else).
    pub(crate) fn is_pipeline_rollout(&self) -> bool {
        self.kind == Kind::PipelineRollout
    }

    /// Whether the object was found stored rather than written by a request.
    pub(crate) fn is_stored(&self) -> bool {
        self.origin == Origin::Stored
    }

    /// Rule 6's trigger: `allow-data-loss` becomes "true" with this request
    /// (a stored one is judged by its state instead).
    pub(crate) fn annotation_becomes_true(&self) -> bool {
        self.is_pipeline_rollout()
            && !self.is_stored()
            && !self.is_delete()
            && self.object.forces_reapply()
            && !self.old().is_some_and(GuardedObject::forces_reapply)
    }

    /// Rule 7's trigger: `forcePromote` is turned on with this request (on
    /// any rollout kind; a stored one is judged by its state instead).
    pub(crate) fn force_promote_turned_on(&self) -> bool {
        !self.kind.is_child()
            && !self.is_stored()
            && !self.is_delete()
            && self.object.force_promote()
            && !self.old().is_some_and(GuardedObject::force_promote)
    }

    pub(crate) fn is_delete(&self) -> bool {
        self.operation == Operation::Delete
    }

    /// Whether the stored object says its pipeline is pausing.
    pub(crate) fn old_is_pausing(&self) -> bool {
        self.old().is_some_and(GuardedObject::is_pausing)
    }
}
