//! The drain-timeout rules as CEL, for any field they judge: a
//! PipelineRollout's pause timeout (rules 2 to 4, with Numaplane's recycle
//! multiplier), its deletion timeout (rules 16 to 18), and a child
//! Pipeline's own two (read as they are). Each check is one of the
//! webhook's violations (`check_timeout`), worded the same.

use super::cel;
use super::validation::{Assertion, assertion};
use crate::policy::format_seconds;
use crate::policy::model::{DrainTimeout, MAX_CLOCK_SECONDS, TimeoutRules};
use crate::rollout::{FieldPath, LifecycleKey};

/// The variables a scope choice reads: `variables.INDEX`, the index of
/// the first matching override (`-1`: none), and `variables.NAME`, its
/// words ("the policy for namespaces ...").
#[derive(Debug, Clone, Copy)]
pub struct ScopeVars {
    pub index: &'static str,
    pub name: &'static str,
}

/// The scope variables of `drainTimeout`.
pub const PAUSE_SCOPE: ScopeVars = ScopeVars {
    index: "scope",
    name: "scopeName",
};

/// The scope variables of `deletionTimeout`.
pub const DELETION_SCOPE: ScopeVars = ScopeVars {
    index: "dScope",
    name: "dScopeName",
};

/// The rule labels of one field's checks, for the comment block.
#[derive(Debug, Clone, Copy)]
pub struct Labels {
    pub integer: &'static str,
    pub min: &'static str,
    pub max: &'static str,
    pub no_timeout: &'static str,
    pub overflow: &'static str,
}

/// The labels of the deletion timeout's checks (rules 16 to 18).
pub const DELETION_LABELS: Labels = Labels {
    integer: "rule 16: the deletion timeout is an integer",
    min: "rule 17: the deletion timeout is at least min",
    max: "rule 17: the deletion timeout is at most max, or no timeout",
    no_timeout: "rule 17: the deletion timeout means no timeout only where allowed",
    overflow: "rule 18: the deletion timeout fits Numaflow's clock",
};

/// The timeout field judged.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    /// The pause timeout at the path, read as `variables.NAME` (with
    /// `NAMEInt` and `NAMESame`, unchanged from the stored object); `true`:
    /// the overflow rule multiplies it by `variables.multiplier` (a
    /// rollout's, rule 4, judged only with a valid scale factor).
    Pause(FieldPath, &'static str, bool),
    /// The deletion timeout Numaflow reads (`variables.dJ`, see
    /// [`super::variables::deletion_vars`]), placed by
    /// `LifecycleKey::rollout_field` or `child_field`.
    Deletion(fn(LifecycleKey) -> FieldPath),
}

/// `value(rules)` for the namespace's scope: a literal when every scope
/// agrees, else a choice on the scope index.
pub fn scoped(
    dt: &DrainTimeout,
    scope: ScopeVars,
    value: impl Fn(&TimeoutRules) -> String,
) -> String {
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
            format!("(variables.{} == {i} ? {v} : {rest})", scope.index)
        })
}

/// The integer, range, no-timeout and overflow checks of one field of
/// `dt`, exempting requests for which `exempt` (CEL) holds.
pub fn checks(
    dt: &DrainTimeout,
    judged: Field,
    exempt: Option<&str>,
    labels: Labels,
) -> Vec<Assertion> {
    // The field (CEL text, and for static messages), its variables, what
    // 0 or less does (as the webhook words it) and the section.
    let (field, f, value, same, zero_effect, section, scope_vars) = match judged {
        Field::Pause(path, value, _) => (
            cel::string(path.dotted()),
            path.to_string(),
            value,
            format!("variables.{value}Same"),
            " (0 or less ends the pause at once, without draining)",
            "drainTimeout",
            PAUSE_SCOPE,
        ),
        Field::Deletion(path) => (
            "variables.dField".to_owned(),
            format!(
                "{} (or the deprecated {})",
                path(LifecycleKey::Deletion),
                LifecycleKey::DeprecatedDeletion.json_name()
            ),
            "dJ",
            "variables.dSame".to_owned(),
            " (0 or less deletes the Pipeline's buffers at once, dropping unconsumed messages)",
            "deletionTimeout",
            DELETION_SCOPE,
        ),
    };
    let field = format!("{field} + ' is '");
    let mut scope = if dt.namespaces.is_empty() {
        "'the policy'".to_owned()
    } else {
        format!("variables.{}", scope_vars.name)
    };
    if let Field::Deletion(_) = judged {
        scope = format!("{} + {scope}", cel::string(&format!("{section} in ")));
    }
    let no_timeout = dt.no_timeout_seconds;
    // The allowed values, as the webhook's advice words them.
    let fix = scoped(dt, scope_vars, |r| {
        let (min, max) = (r.min, r.max);
        cel::string(&if r.allow_no_timeout {
            format!("set {min} to {max} seconds, or {no_timeout} (or more) for no timeout")
        } else {
            format!("set {min} to {max} seconds")
        })
    });
    // A bound: its seconds, and its words.
    let bound = |of: fn(&TimeoutRules) -> u64| {
        let words = |r: &TimeoutRules| format!("{} ({})", of(r), format_seconds(of(r)));
        (
            scoped(dt, scope_vars, |r| of(r).to_string()),
            scoped(dt, scope_vars, |r| cel::string(&words(r))),
        )
    };
    let ((min, min_words), (max, max_words)) = (bound(|r| r.min), bound(|r| r.max));
    let v = format!("variables.{value}");
    let int = format!("variables.{value}Int");
    let exempt = exempt.map(|e| format!("{e} || ")).unwrap_or_default();
    let mut checks = vec![
        assertion(
            labels.integer,
            format!("{exempt}{v} == null || {int} != null || {same}"),
            &format!("{f} is not an integer number of seconds: write an integer, e.g. 3600 for 1h"),
            format!(
                "{field} + {} + ', which is not an integer number of seconds: write an integer, e.g. 3600 for 1h'",
                cel::show(&v)
            ),
        ),
        assertion(
            labels.min,
            format!("{exempt}{int} == null || {int} >= {min} || {same}"),
            &format!("{f} is below the minimum the policy sets for this namespace"),
            format!(
                "{field} + string({int}) + ', below the minimum of ' + {min_words} + ' set by ' + {scope} +\n  \
                 ({int} < 1 ? {} : '') + ': ' + {fix}",
                cel::string(zero_effect)
            ),
        ),
        assertion(
            labels.max,
            format!("{exempt}{int} == null || {int} <= {max} || {int} >= {no_timeout} || {same}"),
            &format!(
                "{f} is above the maximum the policy sets for this namespace, and below noTimeoutSeconds ({no_timeout})"
            ),
            format!(
                "{field} + string({int}) + ', above the maximum of ' + {max_words} + ' set by ' + {scope} + ': ' + {fix}"
            ),
        ),
    ];
    // Only where some scope forbids no timeout.
    let allow = scoped(dt, scope_vars, |r| r.allow_no_timeout.to_string());
    if allow != "true" {
        checks.push(assertion(
            labels.no_timeout,
            format!("{exempt}{int} == null || {int} < {no_timeout} || {allow} || {same}"),
            &format!(
                "{f} means no timeout (at or above {no_timeout}), which the policy does not allow in this namespace"
            ),
            format!(
                "{field} + string({int}) + ', which means no timeout (at or above {no_timeout}), and ' + {scope} + ' does not allow no timeout: ' + {fix}"
            ),
        ));
    }
    // T x multiplier > clock, tested by division: the product can overflow
    // int64 in CEL.
    checks.push(if let Field::Pause(_, _, true) = judged {
        assertion(
            labels.overflow,
            format!(
                "{exempt}{int} == null || !variables.sValid || {int} <= {MAX_CLOCK_SECONDS} / variables.multiplier ||\n  \
                 ({same} && variables.sSame)"
            ),
            &format!(
                "{f} multiplied by Numaplane's recycle multiplier ceil(100 / scaleFactor) overflows Numaflow's clock (at most {MAX_CLOCK_SECONDS} seconds)"
            ),
            format!(
                "{field} + string({int}) + '; Numaplane multiplies it by ' + string(variables.multiplier) +\n  \
                 ' (scaleFactor ' + string(variables.sInt) + '%) and ' + string({int}) + ' x ' + string(variables.multiplier) +\n  \
                 ' seconds overflow Numaflow\\'s clock (at most {MAX_CLOCK_SECONDS}): set at most ' + string({MAX_CLOCK_SECONDS} / variables.multiplier)"
            ),
        )
    } else {
        assertion(
            labels.overflow,
            format!("{exempt}{int} == null || {int} <= {MAX_CLOCK_SECONDS} || {same}"),
            &format!(
                "{f} overflows Go's time.Duration, in which Numaflow counts it (at most {MAX_CLOCK_SECONDS} seconds)"
            ),
            format!(
                "{field} + string({int}) + {}",
                cel::string(&format!(
                    "; Numaflow counts it in Go's time.Duration, which overflows above {MAX_CLOCK_SECONDS} seconds: set at most {MAX_CLOCK_SECONDS}, or the {} policy's no-timeout value if it allows one",
                    section
                ))
            ),
        )
    });
    checks
}
