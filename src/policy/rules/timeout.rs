//! Rules 2 to 4: the drain timeout is an integer within the scope's range,
//! and the recycle path's multiplier does not overflow Numaflow's clock.

use serde_json::Value;

use super::decision::Finding;
use super::rollout_write::RolloutWrite;
use super::violation::{Violation, show};
use crate::policy::duration::format_seconds;
use crate::policy::model::{DrainTimeout, MAX_CLOCK_SECONDS, Scope};
use crate::rollout::{PipelineRollout, TimeoutSlot};

/// The findings of rules 2 to 4 for one request, each with whether its
/// inputs are unchanged from the stored object.
pub fn findings(dt: &DrainTimeout, write: &RolloutWrite<'_>) -> Vec<Finding> {
    let mut found = Vec::new();
    let object = write.object;
    let old = write.old();
    let scope = dt.scope(write.namespace);
    let timeout = object.timeout();
    let timeout_unchanged = old.is_some_and(|o| o.timeout() == timeout);
    let scale = scale_factor(object, dt);
    // S as the rules see it: the rollout's own value, else the policy default.
    let effective_scale = |o: &PipelineRollout| {
        o.scale_factor()
            .cloned()
            .unwrap_or_else(|| Value::from(dt.default_recycle_scale_factor))
    };
    let scale_unchanged = old.is_some_and(|o| effective_scale(o) == effective_scale(object));
    let mut push = |violation, unchanged| {
        found.push(Finding {
            violation,
            unchanged,
        })
    };
    if let Err(v) = &scale {
        push(v.clone(), scale_unchanged);
    }
    match timeout {
        TimeoutSlot::Unset { .. } => {}
        TimeoutSlot::Blocked { path, found: kind } => push(
            Violation::TimeoutUnreachable { path, found: kind },
            timeout_unchanged,
        ),
        TimeoutSlot::Set(value) => match integer(value) {
            None => push(
                Violation::TimeoutNotInteger { value: show(value) },
                timeout_unchanged,
            ),
            Some(seconds) => {
                for v in check_timeout(seconds, &scope, dt, scale.as_ref().ok().copied()) {
                    let unchanged = match v {
                        Violation::TimeoutOverflows { .. } => timeout_unchanged && scale_unchanged,
                        _ => timeout_unchanged,
                    };
                    push(v, unchanged);
                }
            }
        },
    }
    found
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
fn scale_factor(object: &PipelineRollout, dt: &DrainTimeout) -> Result<u64, Violation> {
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

/// Rules 3 and 4 for a timeout of `seconds`, with recycle scale factor
/// `scale_factor` (percent, 1 to 100; `None` skips the overflow check).
pub fn check_timeout(
    seconds: i128,
    scope: &Scope<'_>,
    dt: &DrainTimeout,
    scale_factor: Option<u64>,
) -> Vec<Violation> {
    let mut found = Vec::new();
    let rules = scope.rules;
    let no_timeout = i128::from(dt.no_timeout_seconds);
    if seconds < i128::from(rules.min) {
        found.push(Violation::TimeoutTooShort {
            value: seconds,
            min: rules.min,
            min_text: format_seconds(rules.min),
            scope: scope.to_string(),
            zero: if seconds < 1 {
                " (0 or less ends the pause at once, without draining)"
            } else {
                ""
            },
            fix: allowed_values(scope, dt),
        });
    } else if seconds > i128::from(rules.max) && seconds < no_timeout {
        found.push(Violation::TimeoutTooLong {
            value: seconds,
            max: rules.max,
            max_text: format_seconds(rules.max),
            scope: scope.to_string(),
            fix: allowed_values(scope, dt),
        });
    } else if seconds >= no_timeout && !rules.allow_no_timeout {
        found.push(Violation::NoTimeoutNotAllowed {
            value: seconds,
            no_timeout: dt.no_timeout_seconds,
            scope: scope.to_string(),
            fix: allowed_values(scope, dt),
        });
    }
    if let Some(s) = scale_factor.filter(|s| *s >= 1) {
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
