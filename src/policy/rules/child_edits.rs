//! Rule 26: a rollout's children are Numaplane's. A Pipeline, MonoVertex
//! or InterStepBufferService that a rollout owns (the stored object, or
//! the one written, carries the `numaplane.numaproj.io/parent-rollout-name`
//! label or an ownerReference to a Numaplane rollout) is changed by
//! Numaplane's and Numaflow's controllers. Anyone else needs the
//! `forceReapply.editChildren` permission to change its `spec`, its
//! `status`, its `ownerReferences`, its `finalizers` or its keys under
//! `numaplane.numaproj.io/` and `numaflow.numaproj.io/`, and to make a new
//! object with an ownerReference to a rollout (a new object with the label
//! is refused by rule 15 already):
//!
//! - a forged status steers Numaplane (a `Failed` Pipeline is upgraded
//!   without a pause, a `Paused` one with `drainedOnPause` counts as
//!   drained);
//! - an ownerReference to a missing owner has the garbage collector delete
//!   the child, which rule 20 lets it do;
//! - a finalizer removed from a terminating child ends its deletion drain;
//! - a spec edited in place is applied by Numaflow at once, undrained.
//!
//! Free for everyone: other labels and annotations, a MonoVertex's
//! `spec.replicas` (its `/scale` subresource never reaches the webhook) and
//! `spec.lifecycle.desiredPhase` (pausing and resuming drain by timeouts
//! judged elsewhere). The Kubernetes deleters
//! (`forceReapply.deleteUndrained.systemDeleters`) add and remove the
//! `foregroundDeletion` and `orphan` finalizers and remove ownerReferences
//! as they delete and orphan. The keys rules 13 to 15 and 19 judge are left
//! to them: this rule only adds refusals, and a holder of the permission
//! still cannot write what they reserve.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::force::Settle;
use super::guarded_write::{GuardedWrite, Operation};
use super::verdict::{EventReason, Gate, Verdict};
use super::violation::{Violation, cut};
use crate::kinds::{
    BOOKKEEPING_ANNOTATIONS, BOOKKEEPING_LABELS, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION,
    PAUSE_TIMESTAMP,
};
use crate::policy::model::Policy;
use crate::policy::user::Permission;
use crate::rollout::{DESIRED_PHASE, GuardedObject, Ownership};

/// The finalizers the Kubernetes deleters add and remove as they delete
/// (foreground) and orphan.
pub(crate) const DELETION_FINALIZERS: [&str; 2] = ["foregroundDeletion", "orphan"];

/// The spec keys anyone may change: `replicas` (scaling) where
/// `replicas_free` (a MonoVertex, and what Numaflow makes).
fn free_spec_key(replicas_free: bool, key: &str) -> bool {
    replicas_free && key == "replicas"
}

/// What rule 26 asks of a request, worked out once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ChildEdits {
    /// The owning rollout, as a denial names it.
    parent: String,
    /// What the write changes that needs the permission, dotted as users
    /// write it; empty: the rule asks nothing.
    fields: Vec<String>,
    /// A CREATE of an object a rollout owns.
    created: bool,
}

/// The keys of `map` (labels or annotations) under Numaplane's and
/// Numaflow's prefixes, and their values, that rule 26 judges: all but
/// those rules 13 to 15 judge, and a pause-timestamp set or changed (rule
/// 19's; its removal is this rule's).
fn judged_keys(object: &GuardedObject, labels: bool) -> Vec<(&str, &Value)> {
    object
        .prefixed_keys(labels)
        .into_iter()
        .filter(|(k, _)| {
            *k != FORCE_PROMOTE_LABEL
                && *k != MARKED_FOR_DELETION
                && !BOOKKEEPING_LABELS.contains(k)
                && !BOOKKEEPING_ANNOTATIONS.contains(k)
        })
        .collect()
}

/// The keys of one map that differ between `old` and `new`.
fn changed_keys(new: &GuardedObject, old: &GuardedObject, labels: bool) -> Vec<String> {
    let (new_keys, old_keys) = (judged_keys(new, labels), judged_keys(old, labels));
    fn value(keys: &[(&str, &Value)], key: &str) -> Option<Value> {
        keys.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (*v).clone())
    }
    let names: BTreeSet<&str> = new_keys.iter().chain(&old_keys).map(|(k, _)| *k).collect();
    let map = if labels { "labels" } else { "annotations" };
    names
        .into_iter()
        .filter(|key| {
            let (now, before) = (value(&new_keys, key), value(&old_keys, key));
            // pause-timestamp set or changed is rule 19's.
            let rule_19 = *key == PAUSE_TIMESTAMP && now.is_some();
            now != before && !rule_19
        })
        .map(|key| format!("metadata.{map}[\"{key}\"]"))
        .collect()
}

/// `spec.lifecycle` as rule 26 judges it: without `desiredPhase` (anyone
/// may pause), and absent when nothing else is in it.
#[derive(Clone, Copy)]
enum JudgedLifecycle<'a> {
    /// An object: its keys other than `desiredPhase` count.
    Object(&'a Map<String, Value>),
    /// Anything else, compared as found.
    Other(&'a Value),
}

fn judged_lifecycle(value: Option<&Value>) -> Option<JudgedLifecycle<'_>> {
    match value? {
        Value::Object(map) if map.keys().all(|k| k == DESIRED_PHASE.name()) => None,
        Value::Object(map) => Some(JudgedLifecycle::Object(map)),
        other => Some(JudgedLifecycle::Other(other)),
    }
}

/// The keys of a lifecycle that count, of two lifecycles together.
fn lifecycle_keys<'a>(
    new: &'a Map<String, Value>,
    old: &'a Map<String, Value>,
) -> BTreeSet<&'a String> {
    new.keys()
        .chain(old.keys())
        .filter(|k| *k != DESIRED_PHASE.name())
        .collect()
}

/// The dotted paths of what differs between two specs, leaving out what
/// anyone may change ([`free_spec_key`], `lifecycle.desiredPhase`): the
/// keys of two objects (one level deeper for `spec.lifecycle`), else
/// `spec` itself. Compared in place, without a copy of either spec.
fn spec_differences(
    replicas_free: bool,
    new: Option<&Value>,
    old: Option<&Value>,
    out: &mut Vec<String>,
) {
    let (Some(Value::Object(n)), Some(Value::Object(o))) = (new, old) else {
        if new != old {
            out.push("spec".to_owned());
        }
        return;
    };
    let keys: BTreeSet<&String> = n
        .keys()
        .chain(o.keys())
        .filter(|k| !free_spec_key(replicas_free, k))
        .collect();
    for key in keys {
        if key != DESIRED_PHASE.parent().name() {
            if n.get(key) != o.get(key) {
                out.push(format!("spec.{key}"));
            }
            continue;
        }
        match (judged_lifecycle(n.get(key)), judged_lifecycle(o.get(key))) {
            (None, None) => {}
            (Some(JudgedLifecycle::Object(nl)), Some(JudgedLifecycle::Object(ol))) => {
                for inner in lifecycle_keys(nl, ol) {
                    if nl.get(inner) != ol.get(inner) {
                        out.push(format!("{}.{inner}", DESIRED_PHASE.parent().dotted()));
                    }
                }
            }
            (Some(JudgedLifecycle::Other(nl)), Some(JudgedLifecycle::Other(ol))) if nl == ol => {}
            _ => out.push(DESIRED_PHASE.parent().dotted().to_owned()),
        }
    }
}

/// The dotted paths of what differs between two values under `path`: the
/// keys of two objects, else `path` itself.
fn differences(path: &str, new: Option<&Value>, old: Option<&Value>, out: &mut Vec<String>) {
    if new == old {
        return;
    }
    match (new, old) {
        (Some(Value::Object(n)), Some(Value::Object(o))) => {
            let keys: BTreeSet<&String> = n.keys().chain(o.keys()).collect();
            for key in keys {
                if n.get(key) != o.get(key) {
                    out.push(format!("{path}.{key}"));
                }
            }
        }
        _ => out.push(path.to_owned()),
    }
}

/// A list of strings read as a set (`None`: absent; not a list of
/// strings: `Err`, compared as found).
fn string_set(value: Option<&Value>) -> Result<BTreeSet<&str>, ()> {
    match value {
        None | Some(Value::Null) => Ok(BTreeSet::new()),
        Some(Value::Array(items)) => items.iter().map(|i| i.as_str().ok_or(())).collect(),
        Some(_) => Err(()),
    }
}

/// Whether the finalizers differ, leaving out the deletion finalizers
/// when `deleter`.
fn finalizers_changed(new: Option<&Value>, old: Option<&Value>, deleter: bool) -> bool {
    match (string_set(new), string_set(old)) {
        (Ok(mut n), Ok(mut o)) => {
            if deleter {
                n.retain(|f| !DELETION_FINALIZERS.contains(f));
                o.retain(|f| !DELETION_FINALIZERS.contains(f));
            }
            n != o
        }
        _ => new != old,
    }
}

/// Whether the ownerReferences differ; for a deleter, whether any is added
/// or changed (removing them is how it orphans).
fn owner_references_changed(new: Option<&Value>, old: Option<&Value>, deleter: bool) -> bool {
    let empty = Vec::new();
    match (new, old) {
        _ if new == old => false,
        (None | Some(Value::Array(_)), None | Some(Value::Array(_))) if deleter => {
            let old = old.and_then(Value::as_array).unwrap_or(&empty);
            new.and_then(Value::as_array)
                .unwrap_or(&empty)
                .iter()
                .any(|r| !old.contains(r))
        }
        (None, Some(Value::Array(o))) | (Some(Value::Array(o)), None) => !o.is_empty(),
        _ => true,
    }
}

/// What an UPDATE changes that rule 26 (and rule 29, on what Numaflow
/// makes) judges; `replicas_free`: `spec.replicas` is anyone's.
pub(super) fn update_fields(
    replicas_free: bool,
    new: &GuardedObject,
    old: &GuardedObject,
    deleter: bool,
) -> Vec<String> {
    let mut fields = Vec::new();
    match (new.child_content(), old.child_content()) {
        (Some(n), Some(o)) => {
            // The same text is the same value: the trees are built only
            // for texts that differ.
            if n.spec_text() != o.spec_text() {
                spec_differences(
                    replicas_free,
                    n.spec().as_ref(),
                    o.spec().as_ref(),
                    &mut fields,
                );
            }
            if n.status_text() != o.status_text() {
                differences(
                    "status",
                    n.status().as_ref(),
                    o.status().as_ref(),
                    &mut fields,
                );
            }
        }
        // Only an object whose `kind` names no child lacks them: what it
        // changes cannot be told, so it is judged as changing both.
        _ => fields.extend(["spec".to_owned(), "status".to_owned()]),
    }
    if owner_references_changed(new.owner_references(), old.owner_references(), deleter) {
        fields.push("metadata.ownerReferences".to_owned());
    }
    if finalizers_changed(new.finalizers(), old.finalizers(), deleter) {
        fields.push("metadata.finalizers".to_owned());
    }
    fields.extend(changed_keys(new, old, true));
    fields.extend(changed_keys(new, old, false));
    fields
}

/// What changes, as a denial lists it (at most four fields named).
pub(super) fn shown_fields(fields: &[String]) -> String {
    let mut shown: Vec<String> = fields.iter().take(4).map(|f| cut(f, 80)).collect();
    if fields.len() > 4 {
        shown.push(format!("{} more", fields.len() - 4));
    }
    shown.join(", ")
}

/// The owner of a write: the stored object's, else the new object's.
fn owner_of(write: &GuardedWrite<'_>) -> Option<String> {
    let new = write.object.ownership();
    let old = write.old().map(GuardedObject::ownership);
    match (old, new) {
        (Some(Ownership::Owned(name)), _) | (_, Ownership::Owned(name)) => Some(name),
        (Some(unreadable @ Ownership::Unreadable(_)), _) | (_, unreadable) => unreadable.shown(),
    }
}

impl ChildEdits {
    pub(crate) fn of(policy: &Policy, write: &GuardedWrite<'_>) -> Self {
        if !write.kind.is_child() || write.is_delete() {
            return Self::default();
        }
        let user = write.user.username();
        if user == policy.numaplane.controller_account || user == policy.numaflow.controller_account
        {
            return Self::default();
        }
        // A new object carrying the parent-rollout-name label is rule
        // 15's (the label is Numaplane's bookkeeping); one carrying an
        // ownerReference to a rollout is made a child here.
        let owner = match write.old() {
            Some(_) => owner_of(write),
            None if write.object.owned_by_reference() => write.object.ownership().shown(),
            None => None,
        };
        let Some(parent) = owner else {
            return Self::default();
        };
        let deleter = policy.is_system_deleter(user);
        let (fields, created) = match write.old() {
            Some(old) => (
                update_fields(write.kind == Kind::MonoVertex, write.object, old, deleter),
                false,
            ),
            None => (vec!["metadata.ownerReferences".to_owned()], true),
        };
        Self {
            parent,
            fields,
            created,
        }
    }

    /// Whether rule 26 needs the editChildren permission.
    pub(crate) fn need_permission(&self) -> bool {
        !self.fields.is_empty()
    }

    /// Rule 26: records the gate's decision (Event, audit annotation,
    /// metric label) and its denial.
    pub(crate) fn judge(
        &self,
        verdict: &mut Verdict,
        policy: &Policy,
        write: &GuardedWrite<'_>,
        permission: &Permission,
    ) {
        if !self.need_permission() {
            return;
        }
        let kind = write.kind;
        let user = write.user.username();
        let parent = cut(&self.parent, 64);
        let fields = shown_fields(&self.fields);
        let outcome = permission
            .outcome()
            .map_err(|refused| Violation::ChildEditDenied {
                user: user.to_owned(),
                kind,
                parent: parent.clone(),
                fields: if self.created {
                    String::new()
                } else {
                    fields.clone()
                },
                refused,
            });
        let what = if self.created {
            format!(
                "a new {} owned by {} \"{parent}\" (made by Numaplane only)",
                kind.kind(),
                kind.rollout().kind()
            )
        } else {
            format!(
                "{fields} on this {} of {} \"{parent}\" (kept by Numaplane's and Numaflow's controllers)",
                kind.kind(),
                kind.rollout().kind()
            )
        };
        let settle = Settle::plain(
            policy.mode,
            write.operation == Operation::Update,
            user,
            permission,
        );
        settle.gate_as(
            verdict,
            Gate::EditChild,
            (EventReason::ChildEditAllowed, &what),
            outcome,
        );
    }
}
