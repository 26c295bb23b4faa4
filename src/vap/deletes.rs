//! The child DELETE policy: rule 20 as CEL. A DELETE of a Pipeline,
//! MonoVertex or InterStepBufferService that a rollout owns (its stored
//! object, `oldObject`, carries `numaplane.numaproj.io/parent-rollout-name`)
//! ends its drain after its deletion timeout, so it needs the
//! `forceReapply.deleteUndrained` permission, except for Numaplane's
//! controller and `forceReapply.deleteUndrained.systemDeleters`. Dry runs
//! are judged like any other request.

use super::cel;
use super::validation::{Assertion, Grantees, assertion};
use super::variables::{self, Var, Vars};
use crate::kinds::{Kind, PARENT_ROLLOUT};
use crate::policy::model::Policy;
use crate::rollout::LifecycleKey;

/// The kinds whose DELETE the policy judges.
pub const KINDS: [Kind; 3] = [
    Kind::Pipeline,
    Kind::MonoVertex,
    Kind::InterStepBufferService,
];

/// The variables and validations of the child DELETE policy.
pub fn rules(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let undrained = &policy.force_reapply.delete_undrained;
    let mut vars = Vars::default();
    variables::request_vars(&mut vars);
    let label = cel::string(PARENT_ROLLOUT);
    vars.add(
        "parent",
        format!(
            "oldObject != null && has(oldObject.metadata.labels) && {label} in oldObject.metadata.labels ?\n  \
             optional.of(oldObject.metadata.labels[{label}]) : optional.none()"
        ),
    );
    let exempt: Vec<String> = std::iter::once(policy.numaplane.controller_account.clone())
        .chain(undrained.own.system_deleters.iter().cloned())
        .collect();
    let grantees = Grantees(undrained.grant());
    let permitted = grantees
        .permitted("authorizer.group(request.resource.group).resource(request.resource.resource)");
    let refused = grantees.refused("request.resource.resource + '.' + request.resource.group");
    let kinds = KINDS
        .iter()
        .map(|k| {
            format!(
                "{}: {}",
                cel::string(k.resource()),
                cel::string(&format!("{} of {}", k.kind(), k.rollout().kind()))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let rollouts = KINDS
        .iter()
        .map(|k| {
            format!(
                "{}: {}",
                cel::string(k.resource()),
                cel::string(k.rollout().kind())
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let check = assertion(
        "rule 20: deleting an owned child needs forceReapply.deleteUndrained",
        format!(
            "!variables.parent.hasValue() || variables.user in {} ||\n  {permitted}",
            cel::string_list(&exempt)
        ),
        "deleting a child a rollout owns drains it for at most its deletion timeout, then drops what was not consumed: it needs forceReapply.deleteUndrained; ask a platform admin, or change or delete the rollout instead and let Numaplane drain it",
        format!(
            "'user \"' + variables.user + '\" may not delete this ' + {{{kinds}}}[request.resource.resource] + ' \"' + variables.parent.value() +\n  \
             '\": it is drained for at most its deletion timeout ({deletion}), then what was not consumed is dropped, and Numaplane makes it again; ' +\n  \
             {refused} + '; ask a platform admin to add you to forceReapply.deleteUndrained in the webhook\\'s policy, or change or delete the ' +\n  \
             {{{rollouts}}}[request.resource.resource] + ' instead and let Numaplane drain it'",
            deletion = LifecycleKey::Deletion.child_field()
        ),
    );
    (vars.0, vec![check])
}
