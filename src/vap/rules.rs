//! The webhook's rules 2 to 8 as CEL: the variables they share, and one
//! validation per kind of violation, in the order the webhook lists
//! violations (so the first message the API server shows is the first one
//! the webhook would list). The policy's values are written into the
//! expressions.

use super::cel;
use super::variables::{self, Var};
use crate::policy::format_seconds;
use crate::policy::model::{DrainTimeout, MAX_CLOCK_SECONDS, Policy, TimeoutRules};
use crate::rollout::{
    ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, GROUP, RESOURCE, SCALE_FACTOR_FIELD, TIMEOUT_FIELD,
};

/// One validation: the request is denied (or warned about) when
/// `expression` is false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Which rule it expresses, for the comment block and tests.
    pub rule: &'static str,
    /// The CEL condition that must hold.
    pub expression: String,
    /// The static message (shown if `message_expression` fails).
    pub message: String,
    /// The CEL expression building the message.
    pub message_expression: String,
}

/// Everything the exported policy evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The variables, each after those it reads.
    pub variables: Vec<Var>,
    /// The validations.
    pub checks: Vec<Check>,
}

/// Builds the variables and validations for `policy`.
pub fn rules(policy: &Policy) -> Rules {
    let mut checks = vec![
        metadata_check(),
        scale_check(policy.drain_timeout.default_recycle_scale_factor),
    ];
    checks.extend(timeout_checks(&policy.drain_timeout));
    checks.push(annotation_check());
    checks.extend(force_checks(policy));
    Rules {
        variables: variables::variables(&policy.drain_timeout),
        checks,
    }
}

/// `value(rules)` for the namespace's scope: a literal when every scope
/// agrees, else a choice on `variables.scope`.
fn scoped(dt: &DrainTimeout, value: impl Fn(&TimeoutRules) -> String) -> String {
    let top = value(&dt.rules);
    let per: Vec<String> = dt.namespaces.iter().map(|ns| value(&ns.rules)).collect();
    if per.iter().all(|v| *v == top) {
        return top;
    }
    // Only the overrides that differ from the top level need a branch.
    per.iter()
        .enumerate()
        .rev()
        .filter(|(_, v)| **v != top)
        .fold(top.clone(), |rest, (i, v)| {
            format!("(variables.scope == {i} ? {v} : {rest})")
        })
}

fn scope_name(dt: &DrainTimeout) -> &'static str {
    if dt.namespaces.is_empty() {
        "'the policy'"
    } else {
        "variables.scopeName"
    }
}

/// The allowed values of a scope, as the webhook's advice words them.
fn allowed_values(dt: &DrainTimeout) -> String {
    let no_timeout = dt.no_timeout_seconds;
    scoped(dt, |r| {
        let (min, max) = (r.min, r.max);
        cel::string(&if r.allow_no_timeout {
            format!("set {min} to {max} seconds, or {no_timeout} (or more) for no timeout")
        } else {
            format!("set {min} to {max} seconds")
        })
    })
}

fn check(
    rule: &'static str,
    expression: String,
    message: &str,
    message_expression: String,
) -> Check {
    Check {
        rule,
        expression,
        message: message.to_owned(),
        message_expression,
    }
}

fn metadata_check() -> Check {
    check(
        "rule 5: metadata and its annotations are objects",
        "variables.metaBad == '' || variables.oldMetaBad == variables.metaBad".into(),
        "metadata or metadata.annotations is not an object: annotations must be a map of strings",
        "variables.metaBad + ', not an object: annotations must be a map of strings'".into(),
    )
}

fn scale_check(default: u64) -> Check {
    check(
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

fn timeout_checks(dt: &DrainTimeout) -> Vec<Check> {
    let field = cel::string(&format!("{TIMEOUT_FIELD} is "));
    let scope = scope_name(dt);
    let fix = allowed_values(dt);
    let no_timeout = dt.no_timeout_seconds;
    let min = scoped(dt, |r| r.min.to_string());
    let max = scoped(dt, |r| r.max.to_string());
    let mut checks = vec![
        check(
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
        ),
        check(
            "rule 2: the timeout is an integer",
            "variables.t == null || variables.tInt != null || variables.tSame".into(),
            &format!(
                "{TIMEOUT_FIELD} is not an integer number of seconds: write an integer, e.g. 3600 for 1h"
            ),
            format!(
                "{field} + {} + ', which is not an integer number of seconds: write an integer, e.g. 3600 for 1h'",
                cel::show("variables.t")
            ),
        ),
        check(
            "rule 3: at least min",
            format!("variables.tInt == null || variables.tInt >= {min} || variables.tSame"),
            &format!("{TIMEOUT_FIELD} is below the minimum the policy sets for this namespace"),
            format!(
                "{field} + string(variables.tInt) + ', below the minimum of ' + {} + ' set by ' + {scope} +\n  \
                 (variables.tInt < 1 ? ' (0 or less ends the pause at once, without draining)' : '') + ': ' + {fix}",
                scoped(dt, |r| cel::string(&format!(
                    "{} ({})",
                    r.min,
                    format_seconds(r.min)
                )))
            ),
        ),
        check(
            "rule 3: at most max, or no timeout",
            format!(
                "variables.tInt == null || variables.tInt <= {max} || variables.tInt >= {no_timeout} || variables.tSame"
            ),
            &format!(
                "{TIMEOUT_FIELD} is above the maximum the policy sets for this namespace, and below noTimeoutSeconds ({no_timeout})"
            ),
            format!(
                "{field} + string(variables.tInt) + ', above the maximum of ' + {} + ' set by ' + {scope} + ': ' + {fix}",
                scoped(dt, |r| cel::string(&format!(
                    "{} ({})",
                    r.max,
                    format_seconds(r.max)
                )))
            ),
        ),
    ];
    // Only where some scope forbids no timeout.
    let allow = scoped(dt, |r| r.allow_no_timeout.to_string());
    if allow != "true" {
        checks.push(check(
            "rule 3: no timeout only where allowed",
            format!(
                "variables.tInt == null || variables.tInt < {no_timeout} || {allow} || variables.tSame"
            ),
            &format!(
                "{TIMEOUT_FIELD} means no timeout (at or above {no_timeout}), which the policy does not allow in this namespace"
            ),
            format!(
                "{field} + string(variables.tInt) + ', which means no timeout (at or above {no_timeout}), and ' + {scope} + ' does not allow no timeout: ' + {fix}"
            ),
        ));
    }
    // T x multiplier > clock, tested by division: the product can
    // overflow int64 in CEL.
    checks.push(check(
        "rule 4: the timeout times the recycle multiplier fits Numaflow's clock",
        format!(
            "variables.tInt == null || !variables.sValid || variables.tInt <= {MAX_CLOCK_SECONDS} / variables.multiplier ||\n  \
             (variables.tSame && variables.sSame)"
        ),
        &format!(
            "{TIMEOUT_FIELD} multiplied by Numaplane's recycle multiplier ceil(100 / scaleFactor) overflows Numaflow's clock (at most {MAX_CLOCK_SECONDS} seconds)"
        ),
        format!(
            "{field} + string(variables.tInt) + '; Numaplane multiplies it by ' + string(variables.multiplier) +\n  \
             ' (scaleFactor ' + string(variables.sInt) + '%) and ' + string(variables.tInt) + ' x ' + string(variables.multiplier) +\n  \
             ' seconds overflow Numaflow\\'s clock (at most {MAX_CLOCK_SECONDS}): set at most ' + string({MAX_CLOCK_SECONDS} / variables.multiplier)"
        ),
    ));
    checks
}

fn annotation_check() -> Check {
    let field = format!("metadata.annotations[\"{ALLOW_DATA_LOSS}\"]");
    let advice = ", which Numaplane ignores (it acts only on exactly \"true\"): set \"true\" to force a re-apply, or \"false\", or remove it";
    check(
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
fn force_checks(policy: &Policy) -> Vec<Check> {
    let force = &policy.force_reapply;
    let mut permitted = Vec::new();
    if !force.users.is_empty() {
        permitted.push(format!(
            "variables.user in {}",
            cel::string_list(&force.users)
        ));
    }
    if !force.groups.is_empty() {
        permitted.push(format!(
            "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))",
            cel::string_list(&force.groups)
        ));
    }
    let mut refused =
        "'it is not in forceReapply.users and none of its groups is in forceReapply.groups'"
            .to_owned();
    if let Some(rbac) = &force.rbac {
        permitted.push(format!(
            "authorizer.group({}).resource({})\n    \
             .namespace(variables.ns).name(variables.name).check({}).allowed()",
            cel::string(GROUP),
            cel::string(RESOURCE),
            cel::string(&rbac.verb)
        ));
        refused = format!(
            "{refused} + ', and RBAC does not allow verb \"{verb}\" on {RESOURCE}.{GROUP} \"' + \
             variables.name + '\" in namespace \"' + variables.ns + '\"; ask for a Role or ClusterRole granting it'",
            verb = rbac.verb
        );
    }
    let permitted = if permitted.is_empty() {
        "false".to_owned()
    } else {
        permitted.join(" ||\n  ")
    };
    let reapply = format!(
        "may not set metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\" (a forced re-apply skips draining and can lose data): "
    );
    let user = "'user \"' + variables.user + '\" '";
    let mut checks = vec![check(
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
        checks.push(check(
            "rule 6: allow-data-loss becomes \"true\" only while the stored object is pausing",
            "!variables.reapply || variables.pausing".into(),
            &format!("the user {reapply}the pipeline is not pausing: set it only while a pause is stuck"),
            format!(
                "{user} + {} + (oldObject == null ? {} : {})",
                cel::string(&reapply),
                cel::string("a new PipelineRollout cannot be pausing: create it without the annotation and set it only while a pause is stuck"),
                cel::string("the pipeline is not pausing (status.upgradeInProgress is not PipelinePauseAndDrain and no PipelinePausingOrPaused condition has reason PipelinePausing): set it only while a pause is stuck"),
            ),
        ));
    }
    if force.gate_force_promote {
        let promote = format!(
            "may not turn on {FORCE_PROMOTE_FIELD} (it promotes without draining and can lose data): "
        );
        checks.push(check(
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
