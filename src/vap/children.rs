//! The child Pipeline policy: what the validate-children webhook judges on
//! a CREATE or UPDATE of a Numaflow Pipeline that CEL can express. A
//! Pipeline's own `spec.lifecycle` drain timeouts, written by anyone but
//! Numaplane's controller (which copies them from a rollout judged
//! itself): the pause timeout by rules 2 to 4 under `drainTimeout`, the
//! deletion timeout by rules 16 to 18 under `deletionTimeout`, both read
//! as they are (no recycle multiplier). And rule 19: only Numaflow's
//! controller may set or change `numaflow.numaproj.io/pause-timestamp`.
//!
//! Numaflow's CRD types `spec.lifecycle` and its fields (an object,
//! integers) and defaults all three timeouts to 30, so the API server
//! refuses what is not an object or an integer before admission, and a
//! stored Pipeline carries `deletionGracePeriodSeconds`. The fields are
//! still read through `dyn()` and guarded, as the rollout's are.

use super::cel;
use super::timeout::{self, DELETION_LABELS, DELETION_SCOPE, Field, Labels, PAUSE_SCOPE};
use super::validation::{Assertion, assertion};
use super::variables::{self, Var, Vars};
use crate::kinds::PAUSE_TIMESTAMP;
use crate::policy::model::Policy;
use crate::rollout::{ANNOTATIONS, FieldPath, LifecycleKey};

/// The pause timeout's path on a Pipeline.
const PAUSE_FIELD: FieldPath = LifecycleKey::Pause.child_field();

/// The variables and validations of the child Pipeline policy.
pub fn rules(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let mut vars = Vars::request();
    variables::scope_vars(&mut vars, &policy.drain_timeout, PAUSE_SCOPE);
    variables::scope_vars(&mut vars, &policy.deletion_timeout, DELETION_SCOPE);
    vars.add(
        "controller",
        format!(
            "variables.user == {}",
            cel::string(&policy.numaplane.controller_account)
        ),
    );
    // Step 1 on (the lifecycle) through dyn(): its fields are integers, and
    // `null` meets no integer in the type checker.
    for (names, root) in [
        (["p", "pInt"], "object"),
        (["oldP", "oldPInt"], "oldObject"),
    ] {
        let steps = cel::steps(root, PAUSE_FIELD.keys(), Some(1));
        variables::value_var(&mut vars, names, &steps, "");
    }
    vars.add("pSame", variables::same_timeout("p", "oldP"));
    variables::deletion_vars(&mut vars, LifecycleKey::child_field, Some(1), ["", ""]);
    vars.optional_key("pt", "oldPt", ANNOTATIONS.keys(), PAUSE_TIMESTAMP);
    let exempt = Some("variables.controller");
    let mut checks = timeout::checks(
        &policy.drain_timeout,
        Field::Pause(PAUSE_FIELD, "p", false),
        exempt,
        Labels {
            integer: "rule 2: a Pipeline's pause timeout is an integer",
            min: "rule 3: a Pipeline's pause timeout is at least min",
            max: "rule 3: a Pipeline's pause timeout is at most max, or no timeout",
            no_timeout: "rule 3: a Pipeline's pause timeout means no timeout only where allowed",
            overflow: "rule 4: a Pipeline's pause timeout fits Numaflow's clock",
        },
    );
    checks.extend(timeout::checks(
        &policy.deletion_timeout,
        Field::Deletion(LifecycleKey::child_field),
        exempt,
        Labels {
            integer: "rule 16: a Pipeline's deletion timeout is an integer",
            ..DELETION_LABELS
        },
    ));
    checks.push(pause_timestamp_check(&policy.numaflow.controller_account));
    (vars.0, checks)
}

/// Rule 19 on a Pipeline: only Numaflow's controller sets or changes
/// pause-timestamp (removing it is allowed).
fn pause_timestamp_check(numaflow: &str) -> Assertion {
    let path = ANNOTATIONS.entry(PAUSE_TIMESTAMP);
    let why = format!(
        ": Numaflow ends a pause at this time plus {PAUSE_FIELD}, drained or not, so an earlier time ends the drain with data undrained; only Numaflow's controller (\"{numaflow}\", numaflow.controllerAccount in the webhook's policy) writes it: leave it as Numaflow wrote it, and to end a stuck pause use a forced re-apply (allow-data-loss) on the PipelineRollout"
    );
    assertion(
        "rule 19: only Numaflow's controller sets or changes pause-timestamp",
        format!(
            "variables.user == {} || !variables.pt.hasValue() ||\n  \
             (variables.oldPt.hasValue() && variables.oldPt.value() == variables.pt.value())",
            cel::string(numaflow)
        ),
        &format!("only Numaflow's controller may set or change {path}{why}"),
        format!(
            "'user \"' + variables.user + '\" may not ' + (variables.oldPt.hasValue() ? 'change' : 'set') + {} + {} + {}",
            cel::string(&format!(" {path} (to ")),
            cel::show("variables.pt.value()"),
            cel::string(&format!("){why}"))
        ),
    )
}
