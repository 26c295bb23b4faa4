//! The PipelineRollout DELETE policies: rule 21 as CEL. Deleting a
//! PipelineRollout makes Numaplane delete its Pipelines, each drained for
//! at most its deletion timeout, so the webhook allows it with a warning
//! naming that timeout; with `forceReapply.deleteUndrained.gateRolloutDeletes`
//! it also needs the `forceReapply.deleteUndrained` permission, except for
//! `forceReapply.deleteUndrained.systemDeleters`. A DELETE carries the
//! stored object in `oldObject` only; dry runs are judged like any other
//! request.
//!
//! Two policies, because a binding's validationActions hold for all of its
//! policy's validations: [`warnings`] (bound with `[Warn]` whatever the
//! mode) gives the warning, and [`gate`] (bound like every other policy)
//! refuses, when the policy gates rollout deletes.

use super::cel;
use super::validation::{Assertion, Grantees, assertion};
use super::variables::{self, ROLLOUT_LIFECYCLE, Var, Vars};
use crate::policy::model::{Mode, Policy};
use crate::rollout::{DEFAULT_DELETION_WORDS, LifecycleKey};

/// The variables both policies read: the request's, and `rdWords`, the
/// stored rollout's deletion timeout in the webhook's words
/// (`at most 600s`, `0s, so not drained at all`, `at most 30s (Numaflow's
/// default)`, `for an unreadable deletion timeout ("600")`).
///
/// An unreadable value is shown as the webhook shows it (its JSON, cut at
/// 20 characters) when it is a string without characters JSON escapes, a
/// number or a boolean; an array or object is shown by its kind, as CEL
/// cannot write JSON.
pub fn vars() -> Vars {
    let mut vars = Vars::default();
    variables::request_vars(&mut vars);
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
    vars.add(
        "rdJ",
        "variables.rdD != null ? variables.rdD : variables.rdDD".into(),
    );
    vars.add(
        "rdJInt",
        "variables.rdD != null ? variables.rdDInt : variables.rdDDInt".into(),
    );
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
    vars
}

/// Who may delete a PipelineRollout under the gate, as CEL: the system
/// deleters and whoever `forceReapply.deleteUndrained` grants (its RBAC
/// verb asked on the PipelineRollout). `None` when the policy does not
/// gate rollout deletes.
fn allowed(policy: &Policy) -> Option<(String, String)> {
    let undrained = &policy.force_reapply.delete_undrained;
    if !undrained.own.gate_rollout_deletes {
        return None;
    }
    let grantees = Grantees(undrained.grant());
    let permitted = grantees
        .permitted("authorizer.group(request.resource.group).resource(request.resource.resource)");
    let refused = grantees.refused("request.resource.resource + '.' + request.resource.group");
    let exempt: Vec<String> = undrained.own.system_deleters.iter().cloned().collect();
    Some((
        format!(
            "variables.user in {} ||\n  {permitted}",
            cel::string_list(&exempt)
        ),
        refused,
    ))
}

/// The warning policy's variables and its one validation, which fails (so
/// warns) on every DELETE the webhook warns about: all of them, except,
/// in enforce mode, those the gate refuses.
pub fn warnings(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
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
    (vars().0, vec![check])
}

/// The gate policy's variables and validation, or `None` when the policy
/// does not gate rollout deletes (`gateRolloutDeletes: false`).
pub fn gate(policy: &Policy) -> Option<(Vec<Var>, Vec<Assertion>)> {
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
    Some((vars().0, vec![check]))
}
