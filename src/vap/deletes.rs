//! The DELETE policies. Rule 20: a DELETE of a Pipeline, MonoVertex or
//! InterStepBufferService that a rollout owns (its stored object,
//! `oldObject`, carries `numaplane.numaproj.io/parent-rollout-name`) ends
//! its drain after its deletion timeout, so it needs the
//! `forceReapply.deleteUndrained` permission, except for Numaplane's
//! controller and `forceReapply.deleteUndrained.systemDeleters`.
//!
//! Rule 21: deleting a PipelineRollout makes Numaplane delete its
//! Pipelines, each drained for at most its deletion timeout, so the webhook
//! allows it with a warning naming that timeout; with
//! `forceReapply.deleteUndrained.gateRolloutDeletes` it also needs the
//! `forceReapply.deleteUndrained` permission, except for
//! `forceReapply.deleteUndrained.systemDeleters`. Two policies, because a
//! binding's validationActions hold for all of its policy's validations:
//! [`rollout_warnings`] (bound with `[Warn]` whatever the mode) gives the
//! warning, and [`rollout_gate`] (bound like every other policy) refuses,
//! when the policy gates rollout deletes.
//!
//! A DELETE carries the stored object in `oldObject` only; dry runs are
//! judged like any other request.

use super::cel;
use super::child_edits::{by_resource, labelled_parent};
use super::validation::{Assertion, assertion, permission};
use super::variables::{self, ROLLOUT_LIFECYCLE, Var, Vars};
use crate::policy::model::{Mode, Policy};
use crate::rollout::{DEFAULT_DELETION_WORDS, LifecycleKey};

/// The variables and validation of the child DELETE policy (rule 20).
pub fn children(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let undrained = &policy.force_reapply.delete_undrained;
    let mut vars = Vars::request();
    vars.add("parent", labelled_parent("oldObject"));
    let exempt: Vec<String> = std::iter::once(policy.numaplane.controller_account.clone())
        .chain(undrained.own.system_deleters.iter().cloned())
        .collect();
    let (permitted, refused) = permission(undrained.grant(), None);
    let check = assertion(
        "rule 20: deleting an owned child needs forceReapply.deleteUndrained",
        format!(
            "!variables.parent.hasValue() || variables.user in {} ||\n  {permitted}",
            cel::string_list(&exempt)
        ),
        "deleting a child a rollout owns drains it for at most its deletion timeout, then drops what was not consumed: it needs forceReapply.deleteUndrained; ask a platform admin, or change or delete the rollout instead and let Numaplane drain it",
        format!(
            "'user \"' + variables.user + '\" may not delete this ' + {} + ' \"' + variables.parent.value() +\n  \
             '\": it is drained for at most its deletion timeout ({deletion}), then what was not consumed is dropped, and Numaplane makes it again; ' +\n  \
             {refused} + '; ask a platform admin to add you to forceReapply.deleteUndrained in the webhook\\'s policy, or change or delete the ' +\n  \
             {} + ' instead and let Numaplane drain it'",
            by_resource(|k| format!("{} of {}", k.kind(), k.rollout().kind())),
            by_resource(|k| k.rollout().kind().to_owned()),
            deletion = LifecycleKey::Deletion.child_field()
        ),
    );
    (vars.0, vec![check])
}

/// The variables both rollout DELETE policies read: the request's, and
/// `rdWords`, the stored rollout's deletion timeout in the webhook's words
/// (`at most 600s`, `0s, so not drained at all`, `at most 30s (Numaflow's
/// default)`, `for an unreadable deletion timeout ("600")`).
///
/// An unreadable value is shown as the webhook shows it (its JSON, cut at
/// 20 characters) when it is a string without characters JSON escapes, a
/// number or a boolean; an array or object is shown by its kind, as CEL
/// cannot write JSON.
fn rollout_vars() -> Vec<Var> {
    let mut vars = Vars::request();
    let lifecycle = cel::steps("oldObject", ROLLOUT_LIFECYCLE, Some(3));
    let readable = format!("{} && ", cel::all_maps(&lifecycle));
    for (key, names) in [
        (LifecycleKey::Deletion, ["rdD", "rdDInt"]),
        (LifecycleKey::DeprecatedDeletion, ["rdDD", "rdDDInt"]),
    ] {
        let keys = key.rollout_field().keys();
        variables::value_var(
            &mut vars,
            names,
            &cel::steps("oldObject", keys, Some(3)),
            &readable,
        );
    }
    variables::numaflow_reads(&mut vars, ["rdJ", "rdJInt"], "rdD", "rdDD");
    let quoted = "('\"' + string(variables.rdJ) + '\"')";
    vars.add(
        "rdWords",
        format!(
            "variables.rdJ == null ? {default} :\n  \
             variables.rdJInt != null ? (variables.rdJInt <= 0 ? string(variables.rdJInt) + 's, so not drained at all' : 'at most ' + string(variables.rdJInt) + 's') :\n  \
             'for an unreadable deletion timeout (' + (type(variables.rdJ) == string ? ({quoted}.size() > 20 ? {quoted}.substring(0, 20) : {quoted}) :\n  \
             type(variables.rdJ) == list ? 'an array' : type(variables.rdJ) == map ? 'an object' : string(variables.rdJ)) + ')'",
            default = cel::string(DEFAULT_DELETION_WORDS),
        ),
    );
    vars.0
}

/// Who may delete a PipelineRollout under the gate, as CEL: the system
/// deleters and whoever `forceReapply.deleteUndrained` grants (its RBAC
/// verb asked on the PipelineRollout), and why others are refused. `None`
/// when the policy does not gate rollout deletes.
fn allowed(policy: &Policy) -> Option<(String, String)> {
    let undrained = &policy.force_reapply.delete_undrained;
    if !undrained.own.gate_rollout_deletes {
        return None;
    }
    let (permitted, refused) = permission(undrained.grant(), None);
    Some((
        format!(
            "variables.user in {} ||\n  {permitted}",
            cel::string_list(&undrained.own.system_deleters)
        ),
        refused,
    ))
}

/// The warning policy's variables and its one validation, which fails (so
/// warns) on every DELETE the webhook warns about: all of them, except,
/// in enforce mode, those the gate refuses.
pub fn rollout_warnings(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let expression = match (policy.mode, allowed(policy)) {
        (Mode::Enforce, Some((allowed, _))) => format!("!({allowed})"),
        _ => "false".to_owned(),
    };
    let check = assertion(
        "rule 21: deleting a PipelineRollout warns of its Pipelines' deletion timeout",
        expression,
        "its Pipelines are deleted too, each drained for at most its deletion timeout, then undrained data is lost",
        "'its Pipelines are deleted too, each drained ' + variables.rdWords + ', then undrained data is lost'"
            .to_owned(),
    );
    (rollout_vars(), vec![check])
}

/// The gate policy's variables and validation, or `None` when the policy
/// does not gate rollout deletes (`gateRolloutDeletes: false`).
pub fn rollout_gate(policy: &Policy) -> Option<(Vec<Var>, Vec<Assertion>)> {
    let (allowed, refused) = allowed(policy)?;
    let check = assertion(
        "rule 21: with gateRolloutDeletes, deleting a PipelineRollout needs forceReapply.deleteUndrained",
        allowed,
        "deleting a PipelineRollout deletes its Pipelines, each drained for at most its deletion timeout, and forceReapply.deleteUndrained.gateRolloutDeletes requires the forceReapply.deleteUndrained permission for it; ask a platform admin to add you to forceReapply.deleteUndrained",
        format!(
            "'user \"' + variables.user + '\" may not delete this PipelineRollout: Numaplane then deletes its Pipelines, each drained ' + variables.rdWords +\n  \
             ' before what was not consumed is dropped, and the webhook\\'s policy (forceReapply.deleteUndrained.gateRolloutDeletes) requires the forceReapply.deleteUndrained permission for it; ' +\n  \
             {refused} + '; ask a platform admin to add you to forceReapply.deleteUndrained'"
        ),
    );
    Some((rollout_vars(), vec![check]))
}
