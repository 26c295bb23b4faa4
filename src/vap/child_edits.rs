//! The child edit policy: rule 26 as CEL. A CREATE or UPDATE (the
//! `/status` subresource included) of a Pipeline, MonoVertex or
//! InterStepBufferService that a rollout owns (the stored object, else the
//! one written, carries `numaplane.numaproj.io/parent-rollout-name` or an
//! ownerReference to a Numaplane rollout) by anyone but Numaplane's and
//! Numaflow's controllers needs `forceReapply.editChildren` when it
//! changes the child's spec (compared key by key, one level deeper under
//! `spec.lifecycle`, with `spec.lifecycle.desiredPhase` and a MonoVertex's
//! `spec.replicas` left out), its status, its ownerReferences, its
//! finalizers, or its keys under `numaplane.numaproj.io/` and
//! `numaflow.numaproj.io/` (those rules 13 to 15 and 19 judge left out),
//! or makes a new object with an ownerReference to a rollout. The
//! Kubernetes deleters (`systemDeleters`) may add and remove the deletion
//! finalizers and remove ownerReferences. What changes is listed as the
//! webhook lists it: sorted within each part, the first four, then how many
//! more.

use super::validation::{Assertion, assertion, permission};
use super::variables::{Var, Vars};
use super::{CHILDREN, cel};
use crate::kinds::{
    BOOKKEEPING_ANNOTATIONS, BOOKKEEPING_LABELS, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION,
    NUMAFLOW_GROUP, NUMAPLANE_GROUP, PARENT_ROLLOUT, PAUSE_TIMESTAMP,
};
use crate::policy::model::Policy;
use crate::policy::rules::child_edits::DELETION_FINALIZERS;
use crate::rollout::DESIRED_PHASE;

/// A CEL map from each owned kind's resource to `text` of the kind, read
/// at the request's resource.
pub(super) fn by_resource(text: impl Fn(Kind) -> String) -> String {
    let entries = CHILDREN
        .iter()
        .map(|k| format!("{}: {}", cel::string(k.resource()), cel::string(&text(*k))))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{{{entries}}}[request.resource.resource]")
}

/// The rollout `root` (CEL text, may be null) names in its
/// parent-rollout-name label, as an optional.
pub(super) fn labelled_parent(root: &str) -> String {
    let label = cel::string(PARENT_ROLLOUT);
    format!(
        "{root} != null && has({root}.metadata.labels) && {label} in {root}.metadata.labels ?\n  \
         optional.of({root}.metadata.labels[{label}]) : optional.none()"
    )
}

/// The CEL list of the keys of `map` (CEL text, a map) whose values differ
/// from those of `old` or that only one of them holds, that `keep` (CEL
/// text on `k`) selects, each shown as `prefix + k + suffix`.
fn changed_keys(map: &str, old: &str, keep: &str, prefix: &str, suffix: &str) -> String {
    let (prefix, suffix) = (cel::string(prefix), cel::string(suffix));
    format!(
        "{map}.filter(k, ({keep}) && (!(k in {old}) || type({map}[k]) != type({old}[k]) || {map}[k] != {old}[k])).map(k, {prefix} + k + {suffix}) +\n  \
         {old}.filter(k, ({keep}) && !(k in {map})).map(k, {prefix} + k + {suffix})"
    )
}

/// The first four of a list of distinct strings (CEL text) in byte order.
fn first_four_sorted(list: &str) -> String {
    format!(
        "[0, 1, 2, 3].map(i, {list}.filter(k, {list}.filter(j, j < k).size() == i))\n  \
         .filter(x, x.size() > 0).map(x, x[0])"
    )
}

/// An optional value (CEL text) at `key` of `root`'s map at `parent`
/// (CEL text selecting it after `has()`): none when absent.
fn optional_at(root: &str, parent: &str, key: &str) -> String {
    format!(
        "{root} != null && has({parent}) && type(dyn({parent})) == map && {k} in dyn({parent}) ?\n  \
         optional.of(dyn({parent})[{k}]) : optional.none()",
        k = cel::string(key)
    )
}

/// The variables and validations of the child edit policy.
pub fn rules(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let edit = &policy.force_reapply.edit_children;
    let mut vars = Vars::request();
    let controllers = [
        policy.numaplane.controller_account.clone(),
        policy.numaflow.controller_account.clone(),
    ];
    vars.add(
        "exempt",
        format!("variables.user in {}", cel::string_list(&controllers)),
    );
    // The Kubernetes deleters, who add and remove the deletion finalizers
    // and remove ownerReferences as they delete and orphan.
    let deleters = &policy.force_reapply.delete_undrained.own.system_deleters;
    vars.add(
        "deleter",
        format!("variables.user in {}", cel::string_list(deleters)),
    );
    let rollout_kinds: Vec<String> = Kind::ALL
        .iter()
        .filter(|k| !k.is_child())
        .map(|k| k.kind().to_owned())
        .collect();
    for (root, [refs, by_ref, owner]) in [
        ("object", ["refs", "byRef", "owner"]),
        ("oldObject", ["oldRefs", "oldByRef", "oldOwner"]),
    ] {
        vars.add(
            refs,
            format!(
                "{root} != null && has({root}.metadata.ownerReferences) &&\n  \
                 type({root}.metadata.ownerReferences) == list ? {root}.metadata.ownerReferences : []"
            ),
        );
        // An ownerReference to a Numaplane rollout: its group, or its kind.
        vars.add(
            by_ref,
            format!(
                "variables.{refs}.filter(r, (has(r.apiVersion) && r.apiVersion.startsWith({})) ||\n  \
                 (has(r.kind) && r.kind in {}))",
                cel::string(&format!("{NUMAPLANE_GROUP}/")),
                cel::string_list(&rollout_kinds)
            ),
        );
        vars.add(
            owner,
            format!(
                "variables.{by_ref}.size() > 0 ?\n  \
                 optional.of(has(variables.{by_ref}[0].name) ? variables.{by_ref}[0].name : '?') :\n  {}",
                labelled_parent(root)
            ),
        );
    }
    // The stored object's owner, else the new object's; a new object is
    // one only by an ownerReference (the label is rule 15's).
    vars.add(
        "parent",
        "oldObject == null ? (variables.byRef.size() > 0 ? variables.owner : optional.none()) :\n  \
         variables.oldOwner.hasValue() ? variables.oldOwner : variables.owner"
            .to_owned(),
    );
    spec_vars(&mut vars);
    vars.add("statusFields", changed_fields("status", "true"));
    // The deleters orphan by removing ownerReferences; adding or changing
    // one is an edit.
    vars.add(
        "refsChanged",
        "oldObject != null && (variables.deleter ?\n  \
         variables.refs.exists(r, !(r in variables.oldRefs)) : variables.refs != variables.oldRefs)"
            .to_owned(),
    );
    // Finalizers as sets; the deleters' own left out for them.
    let deletion = cel::string_list(&DELETION_FINALIZERS.map(str::to_owned));
    for (root, name) in [("object", "fins"), ("oldObject", "oldFins")] {
        vars.add(
            name,
            format!(
                "({root} != null && has({root}.metadata.finalizers) &&\n  \
                 type({root}.metadata.finalizers) == list ? {root}.metadata.finalizers : [])\n  \
                 .filter(f, !(variables.deleter && f in {deletion}))"
            ),
        );
    }
    vars.add(
        "finsChanged",
        "oldObject != null && (variables.fins.exists(f, !(f in variables.oldFins)) ||\n  \
         variables.oldFins.exists(f, !(f in variables.fins)))"
            .to_owned(),
    );
    // Numaplane's and Numaflow's keys, but those other rules judge.
    let reserved: Vec<&str> = [FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION]
        .into_iter()
        .chain(BOOKKEEPING_LABELS)
        .chain(BOOKKEEPING_ANNOTATIONS)
        .collect();
    key_vars(&mut vars, &reserved, &reserved);
    // What changes, as the webhook lists it: each part in byte order (the
    // spec's by dotted path, which is the webhook's order but where a spec
    // key continues `lifecycle` with a character below '.', which Numaflow's
    // schema prunes).
    let parts = [
        first_four_sorted("(variables.specFields + variables.lcFields)"),
        first_four_sorted("variables.statusFields"),
        "(variables.refsChanged ? ['metadata.ownerReferences'] : [])".to_owned(),
        "(variables.finsChanged ? ['metadata.finalizers'] : [])".to_owned(),
        first_four_sorted("variables.labelFields"),
        first_four_sorted("variables.annotationFields"),
    ];
    vars.add("fields", parts.join(" +\n  "));
    vars.add(
        "count",
        "variables.specFields.size() + variables.lcFields.size() + variables.statusFields.size() +\n  \
         (variables.refsChanged ? 1 : 0) + (variables.finsChanged ? 1 : 0) +\n  \
         variables.labelFields.size() + variables.annotationFields.size()"
            .to_owned(),
    );
    let (permitted, refused) = permission(edit.grant(), None);
    let of_rollout = by_resource(|k| format!("{} of {}", k.kind(), k.rollout().kind()));
    let rollout = by_resource(|k| k.rollout().kind().to_owned());
    let shown = "([0, 1, 2, 3].filter(i, i < variables.fields.size()).map(i, variables.fields[i])\n  \
                 .map(f, f.size() > 80 ? f.substring(0, 79) + '…' : f) +\n  \
                 (variables.count > 4 ? [string(variables.count - 4) + ' more'] : [])).join(', ')";
    let check = assertion(
        "rule 26: changing an owned child needs forceReapply.editChildren",
        format!(
            "!variables.parent.hasValue() || variables.exempt ||\n  \
             (oldObject != null && variables.count == 0) ||\n  {permitted}"
        ),
        "only Numaplane's and Numaflow's controllers change a rollout's children (their spec but scaling and pausing, their status, ownerReferences, finalizers and Numaplane's and Numaflow's keys): it needs forceReapply.editChildren; change the rollout instead, or ask a platform admin",
        format!(
            "'user \"' + variables.user + '\" may not ' +\n  \
             (oldObject == null ? 'make' : 'change ' + {shown} + ' of') +\n  \
             ' this ' + {of_rollout} + ' \"' +\n  \
             (variables.parent.value().size() > 64 ? variables.parent.value().substring(0, 63) + '…' : variables.parent.value()) +\n  \
             {} +\n  {refused} + '; change the ' + {rollout} + {}",
            cel::string(
                "\": only Numaplane's and Numaflow's controllers change a rollout's children (Numaplane reads their status to decide whether to drain, and applies a change that can lose data only by pausing and draining); "
            ),
            cel::string(
                " instead, or ask a platform admin to add you to forceReapply.editChildren in the webhook's policy (scaling, pausing, resuming and your own labels and annotations need no permission)"
            )
        ),
    );
    (vars.0, vec![check])
}

/// The variables that list what an UPDATE changes of a child's spec, key
/// by key, without what anyone may change (a MonoVertex's `replicas`,
/// `spec.lifecycle.desiredPhase`; `spec.lifecycle` is compared one level
/// deeper): `specFields`, `lc`/`lcOn` and `oldLc`/`oldLcOn` (the
/// lifecycles, and whether they hold more than the phase), `lcFields`.
fn spec_vars(vars: &mut Vars) {
    let lifecycle = DESIRED_PHASE.parent();
    let free = format!(
        "k != {} && !(request.resource.resource == {} && k == 'replicas')",
        cel::string(lifecycle.name()),
        cel::string(Kind::MonoVertex.resource())
    );
    vars.add("specFields", changed_fields("spec", &free));
    // spec.lifecycle without desiredPhase; one that holds nothing else is
    // none.
    let phase = cel::string(DESIRED_PHASE.name());
    for (root, [lc, on]) in [
        ("object", ["lc", "lcOn"]),
        ("oldObject", ["oldLc", "oldLcOn"]),
    ] {
        vars.add(
            lc,
            optional_at(root, &format!("{root}.spec"), lifecycle.name()),
        );
        vars.add(
            on,
            format!(
                "variables.{lc}.hasValue() &&\n  \
                 !(type(variables.{lc}.value()) == map && variables.{lc}.value().all(k, k == {phase}))"
            ),
        );
    }
    vars.add(
        "lcFields",
        format!(
            "oldObject == null || (!variables.lcOn && !variables.oldLcOn) ? [] :\n  \
             variables.lcOn && variables.oldLcOn && type(variables.lc.value()) == map && type(variables.oldLc.value()) == map ?\n  \
             {} :\n  \
             variables.lcOn && variables.oldLcOn && type(variables.lc.value()) == type(variables.oldLc.value()) &&\n  \
             variables.lc.value() == variables.oldLc.value() ? [] : [{}]",
            changed_keys(
                "variables.lc.value()",
                "variables.oldLc.value()",
                &format!("k != {phase}"),
                &format!("{lifecycle}."),
                ""
            ),
            cel::string(lifecycle.dotted())
        ),
    );
}

/// The variables that list the keys under Numaplane's and Numaflow's
/// prefixes an UPDATE sets, changes or removes on a child, but `labels`
/// and `annotations` (those other rules judge): `labelFields`,
/// `annotationFields`. A pause-timestamp set or changed is rule 19's, its
/// removal rule 26's.
fn key_vars(vars: &mut Vars, labels: &[&str], annotations: &[&str]) {
    for (map, name, reserved) in [
        ("labels", "labelFields", labels),
        ("annotations", "annotationFields", annotations),
    ] {
        let reserved: Vec<String> = reserved.iter().map(|k| (*k).to_owned()).collect();
        let judged = format!(
            "(k.startsWith({}) || k.startsWith({})) && !(k in {})",
            cel::string(&format!("{NUMAPLANE_GROUP}/")),
            cel::string(&format!("{NUMAFLOW_GROUP}/")),
            cel::string_list(&reserved)
        );
        let new = format!("(has(object.metadata.{map}) ? object.metadata.{map} : {{}})");
        let old = format!("(has(oldObject.metadata.{map}) ? oldObject.metadata.{map} : {{}})");
        let keep = if map == "annotations" {
            format!(
                "{judged} && !(k == {} && k in {new})",
                cel::string(PAUSE_TIMESTAMP)
            )
        } else {
            judged
        };
        vars.add(
            name,
            format!(
                "oldObject == null ? [] :\n  {}",
                changed_keys(&new, &old, &keep, &format!("metadata.{map}[\""), "\"]")
            ),
        );
    }
}

/// The variables of the chart's skipped-namespaces policy that list what
/// an UPDATE changes of a child a rollout owns, as rule 26 compares it
/// (`specFields`, `lcFields`, `labelFields`, `annotationFields` and the
/// lifecycles they read). No webhook judges there, so only the keys that
/// policy judges itself are left out: the force-promote label and
/// marked-for-deletion (and pause-timestamp set or changed); Numaplane's
/// bookkeeping keys are rule 26's there. `cargo xtask generate` writes
/// them into the chart.
pub fn skipped_namespaces_vars() -> Vec<Var> {
    let mut vars = Vars::default();
    spec_vars(&mut vars);
    key_vars(&mut vars, &[FORCE_PROMOTE_LABEL], &[MARKED_FOR_DELETION]);
    vars.0
}

/// The CEL list of what changed in `part` (`spec` or `status`) between
/// the old object and the new: `[]` on a create or when neither has it,
/// `[part]` when one lacks it or either is not a map (and they differ),
/// else each changed key not `free`, as `part.key`.
fn changed_fields(part: &str, free: &str) -> String {
    let (new, old) = (
        format!("dyn(object.{part})"),
        format!("dyn(oldObject.{part})"),
    );
    format!(
        "oldObject == null || (!has(object.{part}) && !has(oldObject.{part})) ? [] :\n  \
         !has(object.{part}) || !has(oldObject.{part}) ? ['{part}'] :\n  \
         type({new}) != map || type({old}) != map ?\n  \
         (type({new}) == type({old}) && {new} == {old} ? [] : ['{part}']) :\n  \
         {}",
        changed_keys(&new, &old, free, &format!("{part}."), "")
    )
}
