//! Rules 2 to 4 (the pause timeout) and, through the same checks, rules 16
//! to 18 (the deletion timeout): a drain timeout is an integer within the
//! scope's range and does not overflow Numaflow's clock (for the pause
//! timeout of a rollout, after the recycle path's multiplier).

use serde_json::Value;

use super::guarded_write::GuardedWrite;
use super::timeout_field::{Drain, TimeoutField};
use super::verdict::Finding;
use super::violation::{Violation, show};
use crate::policy::duration::format_seconds;
use crate::policy::model::{DrainTimeout, MAX_CLOCK_SECONDS, Scope};
use crate::rollout::{GuardedObject, TimeoutSlot};

/// How the overflow rule (4 or 18) reads a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OverflowReading {
    /// Multiplied by Numaplane's recycle path, with this scale factor
    /// (percent, 1 to 100): a rollout's pause timeout.
    Recycle(u64),
    /// As it is: Numaflow reads it straight.
    Clock,
    /// Not checked (the scale factor is itself invalid, which is reported).
    Skip,
}

/// The findings of rules 2 to 4 for one request, each with whether its
/// inputs are unchanged from the stored object.
pub(crate) fn findings(dt: &DrainTimeout, write: &GuardedWrite<'_>) -> Vec<Finding> {
    let mut found = Vec::new();
    let object = write.object;
    let old = write.old();
    let timeout = object.timeout();
    let timeout_unchanged = old.is_some_and(|o| o.timeout() == timeout);
    let scale = scale_factor(object, dt);
    // S as the rules see it: the rollout's own value, else the policy default.
    let effective_scale = |o: &GuardedObject| {
        o.scale_factor()
            .cloned()
            .unwrap_or_else(|| Value::from(dt.default_recycle_scale_factor))
    };
    let scale_unchanged = old.is_some_and(|o| effective_scale(o) == effective_scale(object));
    if let Err(v) = &scale {
        found.push(Finding {
            violation: v.clone(),
            unchanged: scale_unchanged,
        });
    }
    let overflow = scale
        .as_ref()
        .map_or(OverflowReading::Skip, |s| OverflowReading::Recycle(*s));
    let judged = JudgedSlot {
        field: TimeoutField::ROLLOUT_PAUSE,
        slot: &timeout,
        unchanged: timeout_unchanged,
    };
    for mut finding in judged.findings(dt, write.namespace, overflow) {
        if matches!(finding.violation, Violation::TimeoutOverflows { .. }) {
            finding.unchanged &= scale_unchanged;
        }
        found.push(finding);
    }
    found
}

/// One drain-timeout field as a write leaves it: where it stands, and
/// whether the stored object has it the same.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JudgedSlot<'s, 'v> {
    pub(crate) field: TimeoutField,
    pub(crate) slot: &'s TimeoutSlot<'v>,
    /// Whether the stored object has the same (rule 8).
    pub(crate) unchanged: bool,
}

impl JudgedSlot<'_, '_> {
    /// The integer, range and overflow findings for this field in
    /// `namespace`, under `dt`'s rules.
    pub(crate) fn findings(
        &self,
        dt: &DrainTimeout,
        namespace: &str,
        overflow: OverflowReading,
    ) -> Vec<Finding> {
        let field = self.field;
        let violations = match self.slot {
            TimeoutSlot::Unset { .. } => Vec::new(),
            TimeoutSlot::Blocked { path, found } => vec![Violation::TimeoutUnreachable {
                field,
                path,
                found: *found,
            }],
            TimeoutSlot::Set(value) => match integer(value) {
                None => vec![Violation::TimeoutNotInteger {
                    field,
                    value: show(value),
                }],
                Some(seconds) => check_timeout(seconds, field, &dt.scope(namespace), dt, overflow),
            },
        };
        violations
            .into_iter()
            .map(|violation| Finding {
                violation,
                unchanged: self.unchanged,
            })
            .collect()
    }
}

/// The allowed values of a scope, as advice.
fn allowed_values(scope: &Scope<'_>, dt: &DrainTimeout) -> String {
    let (min, max) = (scope.rules.min, scope.rules.max);
    if scope.rules.allow_no_timeout {
        format!(
            "set {min} to {max} seconds, or {} (or more) for no timeout",
            dt.no_timeout_seconds
        )
    } else {
        format!("set {min} to {max} seconds")
    }
}

/// The scale factor a rollout uses: its own if valid, else `Err` with the
/// violation; the policy's default when absent.
fn scale_factor(object: &GuardedObject, dt: &DrainTimeout) -> Result<u64, Violation> {
    match object.scale_factor() {
        None => Ok(dt.default_recycle_scale_factor),
        Some(v) => v.as_u64().filter(|s| (1..=100).contains(s)).ok_or_else(|| {
            Violation::ScaleFactorInvalid {
                value: show(v),
                default: dt.default_recycle_scale_factor,
            }
        }),
    }
}

/// The range and overflow rules (3 and 4, or 17 and 18) for `field` set to
/// `seconds`, under `scope`.
pub(crate) fn check_timeout(
    seconds: i128,
    field: TimeoutField,
    scope: &Scope<'_>,
    dt: &DrainTimeout,
    overflow: OverflowReading,
) -> Vec<Violation> {
    let mut found = Vec::new();
    let rules = scope.rules;
    let no_timeout = i128::from(dt.no_timeout_seconds);
    let scope_text = match field.drain {
        Drain::Pause => scope.to_string(),
        Drain::Deletion => format!("{} in {scope}", field.section()),
    };
    if seconds < i128::from(rules.min) {
        found.push(Violation::TimeoutTooShort {
            field,
            value: seconds,
            min: rules.min,
            scope: scope_text.clone(),
            fix: allowed_values(scope, dt),
        });
    } else if seconds > i128::from(rules.max) && seconds < no_timeout {
        found.push(Violation::TimeoutTooLong {
            field,
            value: seconds,
            max: rules.max,
            max_text: format_seconds(rules.max),
            scope: scope_text.clone(),
            fix: allowed_values(scope, dt),
        });
    } else if seconds >= no_timeout && !rules.allow_no_timeout {
        found.push(Violation::NoTimeoutNotAllowed {
            field,
            value: seconds,
            no_timeout: dt.no_timeout_seconds,
            scope: scope_text.clone(),
            fix: allowed_values(scope, dt),
        });
    }
    match overflow {
        OverflowReading::Recycle(s) if s >= 1 => {
            let multiplier = 100u64.div_ceil(s);
            if seconds * i128::from(multiplier) > i128::from(MAX_CLOCK_SECONDS) {
                found.push(Violation::TimeoutOverflows {
                    value: seconds,
                    multiplier,
                    scale_factor: s,
                    largest: MAX_CLOCK_SECONDS / multiplier,
                });
            }
        }
        OverflowReading::Clock if seconds > i128::from(MAX_CLOCK_SECONDS) => {
            found.push(Violation::ClockOverflow {
                field,
                value: seconds,
            });
        }
        _ => {}
    }
    found
}

/// Reads a timeout value as an integer: JSON integers only (a float such as
/// `30.5` or `1e3` fails, as it does in Numaplane's Go decoder).
fn integer(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        _ => None,
    }
}
