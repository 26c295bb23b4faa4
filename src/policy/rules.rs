//! The admission rules, as pure functions of the policy and the request.
//!
//! [`validate`] judges a CREATE or UPDATE for `/validate`; [`mutate`] fills
//! in a missing drain timeout for `/mutate`. Both return a [`Decision`]; the
//! admission layer turns it into the wire answer.

use std::collections::BTreeMap;
use std::fmt;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::Value;

use super::{DrainTimeout, MAX_CLOCK_SECONDS, Mode, Policy, Scope, format_seconds};
use crate::authz::{Permission, UserInfo};
use crate::lenient::JsonKind;
use crate::rollout::{
    ALLOW_DATA_LOSS, FORCE_PROMOTE_FIELD, PipelineRollout, SCALE_FACTOR_FIELD, TIMEOUT_FIELD,
    TIMEOUT_PATH, TimeoutSlot,
};

/// The operations the rules judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to a stored object.
    Update,
}

/// What the rules look at in one admission request.
#[derive(Debug, Clone, Copy)]
pub struct Review<'a> {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// The object's namespace (selects the namespace override).
    pub namespace: &'a str,
    /// Who is asking.
    pub user: &'a UserInfo,
    /// The object as it would be stored.
    pub object: &'a PipelineRollout,
    /// The stored object, on UPDATE.
    pub old_object: Option<&'a PipelineRollout>,
}

impl Review<'_> {
    fn old(&self) -> Option<&PipelineRollout> {
        match self.operation {
            Operation::Update => self.old_object,
            Operation::Create => None,
        }
    }
}

/// Why the pause condition of rule 6 is not met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotPausing {
    /// A CREATE: a new object cannot be pausing.
    NewObject,
    /// The stored status shows no pause in progress.
    Idle,
}

/// One broken rule. The `Display` text is the full message a denial shows:
/// what is wrong, where, the value, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// An object on the way to the timeout is not an object.
    #[error(
        "{path} is {found}, not an object, so {TIMEOUT_FIELD} cannot be read or set: make {path} an object as the PipelineRollout CRD describes"
    )]
    TimeoutUnreachable {
        /// The dotted path of the bad value.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 2: the timeout is not a JSON integer.
    #[error(
        "{TIMEOUT_FIELD} is {value}, which is not an integer number of seconds: write an integer, e.g. 3600 for 1h"
    )]
    TimeoutNotInteger {
        /// The value as JSON.
        value: String,
    },
    /// Rule 3: below 1 or below the minimum.
    #[error(
        "{TIMEOUT_FIELD} is {value}, below the minimum of {min} ({min_text}) set by {scope}{zero}: {fix}"
    )]
    TimeoutTooShort {
        /// The value.
        value: i128,
        /// The minimum in force.
        min: u64,
        /// The minimum as a duration.
        min_text: String,
        /// Which scope.
        scope: String,
        /// Extra words for 0 and negative values.
        zero: &'static str,
        /// The allowed values.
        fix: String,
    },
    /// Rule 3: above the maximum but not "no timeout".
    #[error(
        "{TIMEOUT_FIELD} is {value}, above the maximum of {max} ({max_text}) set by {scope}: {fix}"
    )]
    TimeoutTooLong {
        /// The value.
        value: i128,
        /// The maximum in force.
        max: u64,
        /// The maximum as a duration.
        max_text: String,
        /// Which scope.
        scope: String,
        /// The allowed values.
        fix: String,
    },
    /// Rule 3: "no timeout" where it is not allowed.
    #[error(
        "{TIMEOUT_FIELD} is {value}, which means no timeout (at or above {no_timeout}), and {scope} does not allow no timeout: {fix}"
    )]
    NoTimeoutNotAllowed {
        /// The value.
        value: i128,
        /// noTimeoutSeconds.
        no_timeout: u64,
        /// Which scope.
        scope: String,
        /// The allowed values.
        fix: String,
    },
    /// Rule 4: the timeout times the recycle multiplier overflows Numaflow's clock.
    #[error(
        "{TIMEOUT_FIELD} is {value}; Numaplane multiplies it by {multiplier} (scaleFactor {scale_factor}%) and {value} x {multiplier} seconds overflow Numaflow's clock (at most {MAX_CLOCK_SECONDS}): set at most {largest}"
    )]
    TimeoutOverflows {
        /// The value.
        value: i128,
        /// ceil(100 / scaleFactor).
        multiplier: u64,
        /// The scale factor used.
        scale_factor: u64,
        /// The largest value that does not overflow.
        largest: u64,
    },
    /// Rule 4: the scale factor is not an integer percent from 1 to 100.
    #[error(
        "{SCALE_FACTOR_FIELD} is {value}, which is not an integer percent from 1 to 100: set e.g. 50, or leave it out for the default of {default}"
    )]
    ScaleFactorInvalid {
        /// The value as JSON.
        value: String,
        /// defaultRecycleScaleFactor.
        default: u64,
    },
    /// `metadata` or `metadata.annotations` is not an object.
    #[error("{path} is {found}, not an object: annotations must be a map of strings")]
    MetadataMalformed {
        /// The dotted path.
        path: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// Rule 5: the annotation is neither "true" nor "false".
    #[error(
        "metadata.annotations[\"{ALLOW_DATA_LOSS}\"] is {value}, which Numaplane ignores (it acts only on exactly \"true\"): set \"true\" to force a re-apply, or \"false\", or remove it"
    )]
    AnnotationInvalid {
        /// The value as JSON.
        value: String,
    },
    /// Rule 6: setting allow-data-loss to "true" is not allowed here.
    #[error(
        "user \"{user}\" may not set metadata.annotations[\"{ALLOW_DATA_LOSS}\"] to \"true\" (a forced re-apply skips draining and can lose data): {}",
        force_reapply_reasons(refused.as_deref(), *not_pausing)
    )]
    ForceReapplyDenied {
        /// The requester.
        user: String,
        /// Why the requester lacks permission, if they do.
        refused: Option<String>,
        /// Why the pause condition is not met, if it is not.
        not_pausing: Option<NotPausing>,
    },
    /// Rule 7: turning on forcePromote needs permission.
    #[error(
        "user \"{user}\" may not turn on {FORCE_PROMOTE_FIELD} (it promotes without draining and can lose data): {refused}; ask a platform admin to add you to forceReapply in the webhook's policy"
    )]
    ForcePromoteDenied {
        /// The requester.
        user: String,
        /// Why the requester lacks permission.
        refused: String,
    },
}

fn force_reapply_reasons(refused: Option<&str>, not_pausing: Option<NotPausing>) -> String {
    let mut reasons = Vec::new();
    if let Some(why) = refused {
        reasons.push(format!(
            "{why}; ask a platform admin to add you to forceReapply in the webhook's policy, or use Argo CD's allow-data-loss action"
        ));
    }
    match not_pausing {
        Some(NotPausing::NewObject) => reasons.push(
            "a new PipelineRollout cannot be pausing: create it without the annotation and set it only while a pause is stuck"
                .to_owned(),
        ),
        Some(NotPausing::Idle) => reasons.push(
            "the pipeline is not pausing (status.upgradeInProgress is not PipelinePauseAndDrain and no PipelinePausingOrPaused condition has reason PipelinePausing): set it only while a pause is stuck"
                .to_owned(),
        ),
        None => {}
    }
    reasons.join("; and ")
}

const SHORT_TIMEOUT: &str = "pauseGracePeriodSeconds";

impl Violation {
    /// The rule of the core specification this violation breaks.
    pub fn rule(&self) -> u8 {
        match self {
            Self::TimeoutUnreachable { .. } | Self::TimeoutNotInteger { .. } => 2,
            Self::TimeoutTooShort { .. }
            | Self::TimeoutTooLong { .. }
            | Self::NoTimeoutNotAllowed { .. } => 3,
            Self::TimeoutOverflows { .. } | Self::ScaleFactorInvalid { .. } => 4,
            Self::MetadataMalformed { .. } | Self::AnnotationInvalid { .. } => 5,
            Self::ForceReapplyDenied { .. } => 6,
            Self::ForcePromoteDenied { .. } => 7,
        }
    }

    /// A one-line summary for warnings (kubectl shows them; kept short).
    pub fn summary(&self) -> String {
        match self {
            Self::TimeoutUnreachable { path, found } => {
                format!("{path} is {found}, not an object: no drain timeout can be set")
            }
            Self::TimeoutNotInteger { value } => {
                format!("{SHORT_TIMEOUT} {value} is not an integer number of seconds")
            }
            Self::TimeoutTooShort { value, min, .. } => {
                format!("{SHORT_TIMEOUT} {value} is below the minimum {min}")
            }
            Self::TimeoutTooLong { value, max, .. } => {
                format!("{SHORT_TIMEOUT} {value} is above the maximum {max}")
            }
            Self::NoTimeoutNotAllowed { value, .. } => {
                format!("{SHORT_TIMEOUT} {value} means no timeout, which is not allowed here")
            }
            Self::TimeoutOverflows {
                value, multiplier, ..
            } => format!(
                "{SHORT_TIMEOUT} {value} x{multiplier} (recycle) overflows Numaflow's clock"
            ),
            Self::ScaleFactorInvalid { value, .. } => {
                format!("scaleFactor {value} is not an integer from 1 to 100")
            }
            Self::MetadataMalformed { path, found } => format!("{path} is {found}, not an object"),
            Self::AnnotationInvalid { value } => {
                format!(
                    "allow-data-loss {value} is ignored by Numaplane: use \"true\" or \"false\""
                )
            }
            Self::ForceReapplyDenied { user, .. } => {
                format!("{} may not set allow-data-loss to \"true\"", short(user))
            }
            Self::ForcePromoteDenied { user, .. } => {
                format!("{} may not turn on forcePromote", short(user))
            }
        }
    }
}

/// Shows a JSON value compactly, cut short when long.
fn show(value: &Value) -> String {
    cut(&value.to_string(), 32)
}

/// Shows a user name, cut short when long.
fn short(text: &str) -> String {
    cut(text, 48)
}

fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(limit - 1).collect();
        format!("{kept}…")
    }
}

/// What the webhook decided, before it is put on the wire.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// The violations that deny the request; empty means allowed.
    pub denials: Vec<Violation>,
    /// Warnings for the requester.
    pub warnings: Vec<String>,
    /// A JSON Patch to apply (only from [`mutate`]).
    pub patch: Option<Patch>,
    /// Audit annotations (keys without the webhook's prefix).
    pub audit: BTreeMap<String, String>,
    /// The drain timeout [`mutate`] wrote, if it wrote one.
    pub defaulted: Option<u64>,
    /// The rule 6 and 7 decisions taken, for the metrics.
    pub gates: Vec<(Gate, GateResult)>,
}

/// The two permission gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Rule 6: allow-data-loss set to "true".
    ForceReapply,
    /// Rule 7: forcePromote turned on.
    ForcePromote,
}

impl Gate {
    /// The name used in audit annotations and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ForceReapply => "force-reapply",
            Self::ForcePromote => "force-promote",
        }
    }
}

/// What a gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateResult {
    /// Allowed.
    Allowed,
    /// Denied.
    Denied,
    /// Would have been denied; warn mode let it through.
    WouldDeny,
}

impl GateResult {
    /// The name used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::WouldDeny => "would_deny",
        }
    }
}

impl Decision {
    /// Whether the request is allowed.
    pub fn allowed(&self) -> bool {
        self.denials.is_empty()
    }

    /// The denial text for `status.message`: every violation, numbered when
    /// there are several.
    pub fn denial_message(&self) -> Option<String> {
        match self.denials.as_slice() {
            [] => None,
            [one] => Some(one.to_string()),
            many => Some(
                many.iter()
                    .enumerate()
                    .map(|(i, v)| format!("({}) {v}", i + 1))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        }
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

/// Whether a request needs the force-reapply permission: rule 6 (the
/// annotation becomes "true") or rule 7 (forcePromote is turned on).
pub fn needs_permission(policy: &Policy, review: &Review<'_>) -> bool {
    annotation_becomes_true(review)
        || (policy.force_reapply.gate_force_promote && force_promote_turned_on(review))
}

fn annotation_becomes_true(review: &Review<'_>) -> bool {
    review.object.forces_reapply() && !review.old().is_some_and(PipelineRollout::forces_reapply)
}

fn force_promote_turned_on(review: &Review<'_>) -> bool {
    review.object.force_promote() && !review.old().is_some_and(PipelineRollout::force_promote)
}

/// Judges a CREATE or UPDATE for `/validate`. `permission` answers whether
/// the requester may force a re-apply; it is consulted only when
/// [`needs_permission`] says so.
pub fn validate(policy: &Policy, review: &Review<'_>, permission: &Permission) -> Decision {
    let mut decision = Decision::default();
    let object = review.object;
    let old = review.old();
    let dt = &policy.drain_timeout;
    let scope = dt.scope(review.namespace);

    // Rules 2 to 5, each with whether its inputs are unchanged (rule 8).
    let mut found: Vec<(Violation, bool)> = Vec::new();
    if let Some((path, kind)) = object.malformed_metadata() {
        let unchanged = old.is_some_and(|o| o.malformed_metadata() == Some((path, kind)));
        found.push((
            Violation::MetadataMalformed { path, found: kind },
            unchanged,
        ));
    }
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
    if let Err(v) = &scale {
        found.push((v.clone(), scale_unchanged));
    }
    match timeout {
        TimeoutSlot::Unset { .. } => {}
        TimeoutSlot::Blocked { path, found: kind } => found.push((
            Violation::TimeoutUnreachable { path, found: kind },
            timeout_unchanged,
        )),
        TimeoutSlot::Set(value) => match integer(value) {
            None => found.push((
                Violation::TimeoutNotInteger { value: show(value) },
                timeout_unchanged,
            )),
            Some(seconds) => {
                for v in check_timeout(seconds, &scope, dt, scale.as_ref().ok().copied()) {
                    let unchanged = match v {
                        Violation::TimeoutOverflows { .. } => timeout_unchanged && scale_unchanged,
                        _ => timeout_unchanged,
                    };
                    found.push((v, unchanged));
                }
            }
        },
    }
    if let Some(value) = object
        .allow_data_loss()
        .filter(|v| v.as_str() != Some("true") && v.as_str() != Some("false"))
    {
        let unchanged = old.is_some_and(|o| o.allow_data_loss() == Some(value));
        found.push((
            Violation::AnnotationInvalid { value: show(value) },
            unchanged,
        ));
    }
    for (violation, unchanged) in found {
        if unchanged {
            decision
                .warnings
                .push(format!("unchanged, so allowed: {}", violation.summary()));
        } else {
            decision.denials.push(violation);
        }
    }

    // Rules 6 and 7: the forced re-apply and forced promotion.
    let user = review.user.username();
    let refused = match permission {
        Permission::Granted(_) => None,
        Permission::Refused(why) => Some(why.clone()),
        Permission::NotNeeded => Some("its permission was not checked".to_owned()),
    };
    let pausing = old.is_some_and(PipelineRollout::is_pausing);
    if annotation_becomes_true(review) {
        let not_pausing = match (
            policy.force_reapply.require_pausing,
            review.operation,
            pausing,
        ) {
            (false, _, _) | (true, Operation::Update, true) => None,
            (true, Operation::Create, _) => Some(NotPausing::NewObject),
            (true, Operation::Update, false) => Some(NotPausing::Idle),
        };
        let outcome = if refused.is_none() && not_pausing.is_none() {
            Ok(())
        } else {
            Err(Violation::ForceReapplyDenied {
                user: user.to_owned(),
                refused: refused.clone(),
                not_pausing,
            })
        };
        record_gate(
            &mut decision,
            policy.mode,
            Gate::ForceReapply,
            user,
            permission,
            outcome,
        );
    }
    if policy.force_reapply.gate_force_promote && force_promote_turned_on(review) {
        let outcome = match &refused {
            None => Ok(()),
            Some(why) => Err(Violation::ForcePromoteDenied {
                user: user.to_owned(),
                refused: why.clone(),
            }),
        };
        record_gate(
            &mut decision,
            policy.mode,
            Gate::ForcePromote,
            user,
            permission,
            outcome,
        );
    }

    // Rule 11: the annotation left at "true" after the force is over.
    if object.forces_reapply() && old.is_some_and(PipelineRollout::forces_reapply) && !pausing {
        decision.warnings.push(
            "allow-data-loss is still \"true\" and nothing is pausing: this change applies without draining; set it to \"false\""
                .to_owned(),
        );
    }

    // Rule 10: warn mode denies nothing.
    if policy.mode == Mode::Warn {
        for violation in std::mem::take(&mut decision.denials) {
            decision
                .warnings
                .push(format!("warn mode, would deny: {}", violation.summary()));
        }
    }
    decision
}

/// Records a rule 6 or 7 decision: the audit annotation, and the denial.
fn record_gate(
    decision: &mut Decision,
    mode: Mode,
    gate: Gate,
    user: &str,
    permission: &Permission,
    outcome: Result<(), Violation>,
) {
    let (result, text) = match (&outcome, mode) {
        (Ok(()), _) => {
            let how = match permission {
                Permission::Granted(how) => how.as_str(),
                _ => "permission not needed",
            };
            (
                GateResult::Allowed,
                format!("allowed: user \"{user}\", {how}"),
            )
        }
        (Err(v), Mode::Enforce) => (
            GateResult::Denied,
            format!("denied by rule {}: user \"{user}\"", v.rule()),
        ),
        (Err(v), Mode::Warn) => (
            GateResult::WouldDeny,
            format!(
                "would-deny by rule {} (warn mode): user \"{user}\"",
                v.rule()
            ),
        ),
    };
    decision.audit.insert(gate.as_str().to_owned(), text);
    decision.gates.push((gate, result));
    if let Err(v) = outcome {
        decision.denials.push(v);
    }
}

/// Fills in a missing drain timeout for `/mutate`: a JSON Patch that adds the
/// namespace's default, creating the objects on the way. A present timeout
/// (even an invalid one) is never changed.
pub fn mutate(policy: &Policy, review: &Review<'_>) -> Decision {
    let mut decision = Decision::default();
    match review.object.timeout() {
        TimeoutSlot::Set(_) => {}
        TimeoutSlot::Blocked { path, found } => decision.warnings.push(format!(
            "no default drain timeout set: {path} is {found}, not an object"
        )),
        TimeoutSlot::Unset { depth } => {
            let dt = &policy.drain_timeout;
            let default = dt.scope(review.namespace).rules.default;
            let seconds = dt.default_seconds(default);
            let mut value = Value::from(seconds);
            for key in TIMEOUT_PATH[depth + 1..].iter().rev() {
                value = Value::Object([((*key).to_owned(), value)].into_iter().collect());
            }
            let path = PointerBuf::from_tokens(TIMEOUT_PATH[..=depth].iter().copied());
            decision.patch = Some(Patch(vec![PatchOperation::Add(AddOperation {
                path,
                value,
            })]));
            decision.defaulted = Some(seconds);
            let meaning = if seconds >= dt.no_timeout_seconds {
                "no timeout".to_owned()
            } else {
                format_seconds(seconds)
            };
            decision.audit.insert(
                "drain-timeout-default".to_owned(),
                format!("{seconds} ({meaning})"),
            );
        }
    }
    decision
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
        })
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
