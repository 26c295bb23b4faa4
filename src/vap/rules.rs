//! The PipelineRollout policy: the webhook's rules 2 to 8, 16 to 18 and
//! rule 19's template half as CEL, one validation per kind of violation,
//! in the order the webhook lists violations (so the first message the API
//! server shows is the first one the webhook would list). The policy's
//! values are written into the expressions.

use super::cel;
use super::timeout::{self, DELETION_LABELS, Field, Labels};
use super::validation::{Assertion, assertion, permission};
use super::variables::{self, Var};
use crate::kinds::{Kind, PAUSE_TIMESTAMP};
use crate::policy::model::{DrainTimeout, Policy};
use crate::rollout::{
    ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, GROUP, LifecycleKey, Map, RESOURCE, SCALE_FACTOR_FIELD,
    TIMEOUT_FIELD, UPGRADE_IN_PROGRESS,
};

/// The variables and validations of the PipelineRollout policy.
pub fn rules(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let mut checks = vec![
        metadata_check(),
        scale_check(policy.drain_timeout.default_recycle_scale_factor),
    ];
    checks.extend(timeout_checks(&policy.drain_timeout));
    checks.extend(timeout::checks(
        &policy.deletion_timeout,
        Field::Deletion(LifecycleKey::rollout_field),
        None,
        DELETION_LABELS,
    ));
    checks.push(annotation_check());
    checks.extend(force_checks(policy));
    checks.push(template_pause_timestamp_check());
    (variables::variables(policy), checks)
}

fn metadata_check() -> Assertion {
    assertion(
        "rule 5: metadata and its annotations are objects",
        "variables.metaBad == '' || variables.oldMetaBad == variables.metaBad".into(),
        "metadata or metadata.annotations is not an object: annotations must be a map of strings",
        "variables.metaBad + ', not an object: annotations must be a map of strings'".into(),
    )
}

fn scale_check(default: u64) -> Assertion {
    assertion(
        "rule 4: the scale factor is an integer percent from 1 to 100",
        "variables.sValid || variables.sSame".into(),
        &format!(
            "{SCALE_FACTOR_FIELD} is not an integer percent from 1 to 100: set e.g. 50, or leave it out for the default of {default}"
        ),
        format!(
            "{} + {} + ', which is not an integer percent from 1 to 100: set e.g. 50, or leave it out for the default of {default}'",
            cel::string(&format!("{SCALE_FACTOR_FIELD} is ")),
            cel::show("variables.s")
        ),
    )
}

fn timeout_checks(dt: &DrainTimeout) -> Vec<Assertion> {
    let mut checks = vec![assertion(
        "rule 2: the objects on the way to the timeout are objects",
        "variables.tBlock == '' || variables.oldTBlock == variables.tBlock".into(),
        &format!(
            "an object on the way to {TIMEOUT_FIELD} is not an object, so the timeout cannot be read or set: make it an object as the PipelineRollout CRD describes"
        ),
        format!(
            "variables.tBlock + {} + variables.tBlock.split(' is ')[0] + ' an object as the PipelineRollout CRD describes'",
            cel::string(&format!(
                ", not an object, so {TIMEOUT_FIELD} cannot be read or set: make "
            ))
        ),
    )];
    checks.extend(timeout::checks(
        dt,
        Field::Pause(TIMEOUT_FIELD, "t", true),
        None,
        Labels {
            integer: "rule 2: the timeout is an integer",
            min: "rule 3: at least min",
            max: "rule 3: at most max, or no timeout",
            no_timeout: "rule 3: no timeout only where allowed",
            overflow: "rule 4: the timeout times the recycle multiplier fits Numaflow's clock",
        },
    ));
    checks
}

fn annotation_check() -> Assertion {
    let field = format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"]");
    let advice = ", which Numaplane ignores (it acts only on exactly \"true\"): set \"true\" to force a re-apply, or \"false\", or remove it";
    assertion(
        "rule 5: allow-data-loss is \"true\" or \"false\"",
        "!variables.a.hasValue() || variables.a.value() == 'true' || variables.a.value() == 'false' || variables.aSame"
            .into(),
        &format!("{field} is neither \"true\" nor \"false\"{advice}"),
        format!(
            "{} + {} + {}",
            cel::string(&format!("{field} is ")),
            cel::show("variables.a.value()"),
            cel::string(advice)
        ),
    )
}

/// Rules 6 and 7. A `messageExpression` cannot call the authorizer, so the
/// permission and the pause are two validations.
fn force_checks(policy: &Policy) -> Vec<Assertion> {
    let force = &policy.force_reapply;
    let (permitted, refused) = permission(force.grant(), Some((GROUP, RESOURCE)));
    let reapply = format!(
        "may not set metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\" (a forced re-apply skips draining and can lose data): "
    );
    let user = "'user \"' + variables.user + '\" '";
    let mut checks = vec![assertion(
        "rule 6: setting allow-data-loss to \"true\" needs permission",
        format!("!variables.reapply ||\n  {permitted}"),
        &format!(
            "the user {reapply}it is not in forceReapply (users, groups or RBAC); ask a platform admin"
        ),
        format!(
            "{user} + {} + {refused} + {}",
            cel::string(&reapply),
            cel::string(
                "; ask a platform admin to add you to forceReapply in the webhook's policy, or use Argo CD's allow-data-loss action"
            )
        ),
    )];
    if force.require_pausing {
        checks.push(assertion(
            "rule 6: allow-data-loss becomes \"true\" only while the stored object is pausing",
            "!variables.reapply || variables.pausing".into(),
            &format!("the user {reapply}the pipeline is not pausing: set it only while a pause is stuck"),
            format!(
                "{user} + {} + (oldObject == null ? {} : {})",
                cel::string(&reapply),
                cel::string("a new PipelineRollout cannot be pausing: create it without the annotation and set it only while a pause is stuck"),
                cel::string(&format!("the pipeline is not pausing ({UPGRADE_IN_PROGRESS} is not PipelinePauseAndDrain and no PipelinePausingOrPaused condition has reason PipelinePausing): set it only while a pause is stuck")),
            ),
        ));
    }
    if force.gate_force_promote {
        let promote = format!(
            "may not turn on {FORCE_PROMOTE_FIELD} (it promotes without draining and can lose data): "
        );
        checks.push(assertion(
            "rule 7: turning on forcePromote needs the same permission",
            format!("!variables.promote ||\n  {permitted}"),
            &format!("the user {promote}it is not in forceReapply (users, groups or RBAC); ask a platform admin"),
            format!(
                "{user} + {} + {refused} + {}",
                cel::string(&promote),
                cel::string("; ask a platform admin to add you to forceReapply in the webhook's policy")
            ),
        ));
    }
    checks
}

/// Rule 19 in the template: nobody may set or change pause-timestamp in
/// `spec.pipeline.metadata.annotations` (Numaplane copies it onto every
/// Pipeline it makes).
fn template_pause_timestamp_check() -> Assertion {
    let path = format!(
        "{}[\"{PAUSE_TIMESTAMP}\"]",
        Map::TemplateAnnotations.path(Kind::PipelineRollout)
    );
    let why = format!(
        ": Numaflow ends a pause at this time plus {}, drained or not, so an earlier time ends the drain with data undrained; Numaplane would copy it onto every Pipeline it makes: remove it from the template",
        LifecycleKey::Pause.child_field()
    );
    assertion(
        "rule 19: pause-timestamp is not set or changed in the template",
        "!variables.tpt.hasValue() ||\n  (variables.oldTpt.hasValue() && variables.oldTpt.value() == variables.tpt.value())".into(),
        &format!("nobody may set or change {path}{why}"),
        format!(
            "'user \"' + variables.user + '\" may not ' + (variables.oldTpt.hasValue() ? 'change' : 'set') + {} + {} + {}",
            cel::string(&format!(" {path} (to ")),
            cel::show("variables.tpt.value()"),
            cel::string(&format!("){why}"))
        ),
    )
}
