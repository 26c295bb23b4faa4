//! The drain-timeout rules as CEL, for any field they judge: a
//! PipelineRollout's pause timeout (rules 2 to 4, with Numaplane's recycle
//! multiplier), its deletion timeout (rules 16 to 18), and a child
//! Pipeline's own two (read as they are). Each check is one of the
//! webhook's violations (`check_timeout`), worded the same.

use super::cel;
use super::validation::{Assertion, assertion};
use crate::policy::format_seconds;
use crate::policy::model::{DrainTimeout, MAX_CLOCK_SECONDS, TimeoutRules};

/// The variables a scope choice reads: the index of the first matching
/// override (`-1`: none) and its words.
#[derive(Debug, Clone, Copy)]
pub struct ScopeVars {
    /// `variables.NAME`: the override's index.
    pub index: &'static str,
    /// `variables.NAME`: "the policy for namespaces ...".
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

/// How the overflow rule reads a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CelOverflow {
    /// A rollout's pause timeout: multiplied by `variables.multiplier`
    /// (rule 4), judged only with a valid scale factor.
    Recycle,
    /// As it is (rule 4 on a child, rule 18).
    Clock,
}

/// The rule labels of one field's checks, for the comment block.
#[derive(Debug, Clone, Copy)]
pub struct Labels {
    /// The integer rule.
    pub integer: &'static str,
    /// At least min.
    pub min: &'static str,
    /// At most max, or no timeout.
    pub max: &'static str,
    /// No timeout only where allowed.
    pub no_timeout: &'static str,
    /// The clock.
    pub overflow: &'static str,
}

/// One judged timeout field.
#[derive(Debug, Clone)]
pub struct Judged<'a> {
    /// The policy section.
    pub dt: &'a DrainTimeout,
    /// Its section's name, for the deletion timeout's scope words and the
    /// clock's advice (`drainTimeout`, `deletionTimeout`).
    pub section: &'static str,
    /// Whether the scope words name the section (`deletionTimeout in the
    /// policy`), as the deletion timeout's do.
    pub section_in_scope: bool,
    /// Its scope variables.
    pub scope: ScopeVars,
    /// CEL text: the field's dotted path, as a string.
    pub field: String,
    /// The field's path for static messages.
    pub field_text: String,
    /// Variable names: the raw value, its integer view, and "unchanged".
    pub value: &'static str,
    /// The integer view.
    pub int: &'static str,
    /// Unchanged from the stored object (rule 8).
    pub same: &'static str,
    /// CEL text that, when true, exempts the request (`false`: none).
    pub exempt: String,
    /// What 0 or less does, as the webhook words it.
    pub zero_effect: &'static str,
    /// The overflow rule.
    pub overflow: CelOverflow,
    /// The labels.
    pub labels: Labels,
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

/// The scope's words, as CEL text.
fn scope_words(j: &Judged<'_>) -> String {
    let name = if j.dt.namespaces.is_empty() {
        "'the policy'".to_owned()
    } else {
        format!("variables.{}", j.scope.name)
    };
    if j.section_in_scope {
        format!("{} + {name}", cel::string(&format!("{} in ", j.section)))
    } else {
        name
    }
}

/// The allowed values of a scope, as the webhook's advice words them.
fn allowed_values(dt: &DrainTimeout, scope: ScopeVars) -> String {
    let no_timeout = dt.no_timeout_seconds;
    scoped(dt, scope, |r| {
        let (min, max) = (r.min, r.max);
        cel::string(&if r.allow_no_timeout {
            format!("set {min} to {max} seconds, or {no_timeout} (or more) for no timeout")
        } else {
            format!("set {min} to {max} seconds")
        })
    })
}

/// The integer, range, no-timeout and overflow checks of one field.
pub fn checks(j: &Judged<'_>) -> Vec<Assertion> {
    let dt = j.dt;
    let field = format!("{} + ' is '", j.field);
    let f = &j.field_text;
    let scope = scope_words(j);
    let fix = allowed_values(dt, j.scope);
    let no_timeout = dt.no_timeout_seconds;
    let min = scoped(dt, j.scope, |r| r.min.to_string());
    let max = scoped(dt, j.scope, |r| r.max.to_string());
    let (v, int, same) = (
        format!("variables.{}", j.value),
        format!("variables.{}", j.int),
        format!("variables.{}", j.same),
    );
    let exempt = if j.exempt == "false" {
        String::new()
    } else {
        format!("{} || ", j.exempt)
    };
    let mut checks = vec![
        assertion(
            j.labels.integer,
            format!("{exempt}{v} == null || {int} != null || {same}"),
            &format!("{f} is not an integer number of seconds: write an integer, e.g. 3600 for 1h"),
            format!(
                "{field} + {} + ', which is not an integer number of seconds: write an integer, e.g. 3600 for 1h'",
                cel::show(&v)
            ),
        ),
        assertion(
            j.labels.min,
            format!("{exempt}{int} == null || {int} >= {min} || {same}"),
            &format!("{f} is below the minimum the policy sets for this namespace"),
            format!(
                "{field} + string({int}) + ', below the minimum of ' + {} + ' set by ' + {scope} +\n  \
                 ({int} < 1 ? {} : '') + ': ' + {fix}",
                scoped(dt, j.scope, |r| cel::string(&format!(
                    "{} ({})",
                    r.min,
                    format_seconds(r.min)
                ))),
                cel::string(j.zero_effect)
            ),
        ),
        assertion(
            j.labels.max,
            format!("{exempt}{int} == null || {int} <= {max} || {int} >= {no_timeout} || {same}"),
            &format!(
                "{f} is above the maximum the policy sets for this namespace, and below noTimeoutSeconds ({no_timeout})"
            ),
            format!(
                "{field} + string({int}) + ', above the maximum of ' + {} + ' set by ' + {scope} + ': ' + {fix}",
                scoped(dt, j.scope, |r| cel::string(&format!(
                    "{} ({})",
                    r.max,
                    format_seconds(r.max)
                )))
            ),
        ),
    ];
    // Only where some scope forbids no timeout.
    let allow = scoped(dt, j.scope, |r| r.allow_no_timeout.to_string());
    if allow != "true" {
        checks.push(assertion(
            j.labels.no_timeout,
            format!("{exempt}{int} == null || {int} < {no_timeout} || {allow} || {same}"),
            &format!(
                "{f} means no timeout (at or above {no_timeout}), which the policy does not allow in this namespace"
            ),
            format!(
                "{field} + string({int}) + ', which means no timeout (at or above {no_timeout}), and ' + {scope} + ' does not allow no timeout: ' + {fix}"
            ),
        ));
    }
    checks.push(match j.overflow {
        // T x multiplier > clock, tested by division: the product can
        // overflow int64 in CEL.
        CelOverflow::Recycle => assertion(
            j.labels.overflow,
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
        ),
        CelOverflow::Clock => assertion(
            j.labels.overflow,
            format!("{exempt}{int} == null || {int} <= {MAX_CLOCK_SECONDS} || {same}"),
            &format!(
                "{f} overflows Go's time.Duration, in which Numaflow counts it (at most {MAX_CLOCK_SECONDS} seconds)"
            ),
            format!(
                "{field} + string({int}) + {}",
                cel::string(&format!(
                    "; Numaflow counts it in Go's time.Duration, which overflows above {MAX_CLOCK_SECONDS} seconds: set at most {MAX_CLOCK_SECONDS}, or the {} policy's no-timeout value if it allows one",
                    j.section
                ))
            ),
        ),
    });
    checks
}
