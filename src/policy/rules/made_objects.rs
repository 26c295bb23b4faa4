//! Rule 29: what Numaflow's controller makes for a rollout's child is
//! Numaflow's. Numaplane and Numaflow read back the Vertices of a Pipeline
//! (the progressive assessment counts their replicas), the daemon Service
//! and Deployment (Numaflow asks the daemon whether a pausing or deleted
//! Pipeline has drained) and the workloads of the vertices and the
//! InterStepBufferService. An editor who points the daemon Service at a
//! pod of their own, changes the daemon's image, forges a Vertex's status
//! or adds a Vertex decides a drain or an assessment without any force.
//!
//! So a Vertex, Deployment, StatefulSet or Service that belongs to a
//! guarded child (an ownerReference to it, or Numaflow's label naming it)
//! is changed only by Numaflow's controller, the Kubernetes deleters (as
//! they delete and orphan) and holders of `forceReapply.editChildren`,
//! which rule 26 asks for the child itself. What is judged is what rule 26
//! judges: `spec` (`replicas` aside: scaling is anyone's), `status`,
//! ownerReferences, finalizers and keys under `numaplane.numaproj.io/` and
//! `numaflow.numaproj.io/`; other labels and annotations are free. Whether
//! the child is guarded is the webhook's own view of the children, given
//! here as data ([`Belonging`]): the rule does no I/O.

use super::child_edits::{shown_fields, update_fields};
use super::force::Settle;
use super::guarded_write::Operation;
use super::need::{Need, Pending, Permissions};
use super::verdict::{EventReason, Gate, Verdict};
use super::violation::{Violation, cut};
use crate::kinds::{Kind, Made};
use crate::policy::model::Policy;
use crate::policy::user::UserInfo;
use crate::rollout::GuardedObject;

/// Whether what a write touches belongs to a rollout's child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Belonging {
    /// It belongs to this child, which this rollout owns: judged.
    Guarded {
        kind: Kind,
        child: String,
        rollout: String,
    },
    /// It names no child, or only children no rollout owns: free.
    Free,
    /// Whether a child it names is guarded cannot be told (what: why);
    /// judged as guarded.
    Unknown(String),
}

/// Tells whether the children an object names belong to a rollout: the
/// server's view of the children (a watch); in tests, a table.
pub trait ChildLookup: Sync + std::fmt::Debug {
    /// The first of `parents` (children of `namespace`, as `(kind, name)`)
    /// that a rollout owns, else [`Belonging::Free`], or why it cannot be
    /// told.
    fn belonging(&self, namespace: &str, parents: &[(Kind, String)]) -> Belonging;
}

/// One write of a Vertex, Deployment, StatefulSet or Service that Numaflow
/// may have made for a child, as rule 29 looks at it.
#[derive(Debug, Clone)]
pub struct MadeWrite<'a> {
    pub(crate) kind: Made,
    pub(crate) operation: Operation,
    pub(crate) namespace: &'a str,
    pub(crate) user: &'a UserInfo,
    pub(crate) object: &'a GuardedObject,
    pub(crate) old_object: Option<&'a GuardedObject>,
    /// Whether the children the object (or the stored one) names belong
    /// to a rollout: filled in by whoever knows the children.
    pub(crate) belonging: Belonging,
}

impl MadeWrite<'_> {
    /// Every child the object and the stored object name, as
    /// `(kind, name)`; `Err`: what cannot be read.
    fn parents(&self) -> Result<Vec<(Kind, String)>, String> {
        let mut parents = self.object.numaflow_parents()?;
        if let Some(old) = self.old_object {
            parents.extend(old.numaflow_parents()?);
        }
        parents.sort();
        parents.dedup();
        Ok(parents)
    }

    /// Asks `lookup` whether the object belongs to a guarded child.
    pub(crate) fn look_up(&mut self, lookup: Option<&dyn ChildLookup>) {
        self.belonging = match (self.parents(), lookup) {
            (Err(why), _) => Belonging::Unknown(why),
            (Ok(parents), _) if parents.is_empty() => Belonging::Free,
            (Ok(parents), Some(lookup)) => lookup.belonging(self.namespace, &parents),
            (Ok(_), None) => {
                Belonging::Unknown("the webhook has no view of the children here".to_owned())
            }
        };
    }
}

/// A `/validate` judgement of a write rule 29 looks at, up to the
/// permission check: finish it with [`Pending::finish`].
#[derive(Debug)]
pub(crate) struct MadeValidation<'a> {
    policy: &'a Policy,
    write: MadeWrite<'a>,
    /// What the write changes that needs the permission; empty: nothing.
    fields: Vec<String>,
}

/// Judges a write of what Numaflow makes, short of the permission.
pub(crate) fn validate<'a>(policy: &'a Policy, write: MadeWrite<'a>) -> MadeValidation<'a> {
    let user = write.user.username();
    let exempt = user == policy.numaflow.controller_account
        || matches!(write.belonging, Belonging::Free)
        || write.operation == Operation::Delete;
    let deleter = policy.is_system_deleter(user);
    let fields = match (exempt, write.old_object) {
        (true, _) => Vec::new(),
        (false, Some(old)) => update_fields(true, write.object, old, deleter),
        (false, None) => vec!["metadata".to_owned()],
    };
    MadeValidation {
        policy,
        write,
        fields,
    }
}

impl MadeValidation<'_> {
    /// The kind of the child the object belongs to, which the permission
    /// is asked on (`None`: it cannot be told).
    pub(crate) fn child_kind(&self) -> Option<Kind> {
        match &self.write.belonging {
            Belonging::Guarded { kind, .. } => Some(*kind),
            Belonging::Free | Belonging::Unknown(_) => None,
        }
    }
}

impl Pending for MadeValidation<'_> {
    /// Rule 29 asks `forceReapply.editChildren`'s.
    fn needs(&self, need: Need) -> bool {
        need == Need::EditChildren && !self.fields.is_empty()
    }

    fn finish(self, permissions: &Permissions) -> Verdict {
        let permission = &permissions[Need::EditChildren];
        let mut verdict = Verdict::default();
        if self.fields.is_empty() {
            return verdict;
        }
        let write = &self.write;
        let user = write.user.username();
        let created = write.operation == Operation::Create;
        let (child, parent) = match &write.belonging {
            Belonging::Guarded {
                kind,
                child,
                rollout,
            } => (
                format!("{} \"{}\"", kind.kind(), cut(child, 64)),
                format!("{} \"{}\"", kind.rollout().kind(), cut(rollout, 64)),
            ),
            Belonging::Unknown(why) => (
                "a child".to_owned(),
                format!("a rollout (it could not be told: {})", cut(why, 120)),
            ),
            Belonging::Free => return verdict,
        };
        let fields = shown_fields(&self.fields);
        let outcome = permission
            .outcome()
            .map_err(|refused| Violation::MadeEditDenied {
                user: user.to_owned(),
                kind: write.kind,
                child: child.clone(),
                parent: parent.clone(),
                fields: if created {
                    String::new()
                } else {
                    fields.clone()
                },
                refused,
            });
        let what = if created {
            format!(
                "a new {} for {child} of {parent} (made by Numaflow only)",
                write.kind.kind()
            )
        } else {
            format!(
                "{fields} on this {} of {child} of {parent} (kept by Numaflow's controller)",
                write.kind.kind()
            )
        };
        let settle = Settle::plain(self.policy.mode, !created, user, permission);
        settle.gate_as(
            &mut verdict,
            Gate::EditChild,
            (EventReason::ChildEditAllowed, &what),
            outcome,
        );
        verdict.apply_mode(self.policy.mode);
        verdict
    }
}
