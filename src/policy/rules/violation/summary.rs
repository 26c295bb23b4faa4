//! What a violation is about, in short: the one-line summary a warning
//! shows (kubectl shows warnings on one line), the field a report names,
//! and the helpers that cut values and names short.

use serde_json::Value;

use super::Violation;
use crate::kinds::{
    FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION, PAUSE_TIMESTAMP, UPGRADE_STRATEGY_KEY,
};
use crate::policy::rules::rule::Rule;
use crate::rollout::{
    ALLOW_DATA_LOSS, ANNOTATIONS, FORCE_PROMOTE_FIELD, FORCE_PROMOTE_FOR, SCALE_FACTOR_FIELD,
    TIMEOUT_FIELD,
};

const SHORT_TIMEOUT: &str = TIMEOUT_FIELD.name();

impl Violation {
    /// A one-line summary for warnings (kubectl shows them; kept short).
    pub fn summary(&self) -> String {
        match self {
            Self::TimeoutUnreachable { path, found, field } => {
                format!(
                    "{path} is {found}, not an object: no {} can be set",
                    field.name()
                )
            }
            Self::TimeoutNotInteger { value, field } => {
                format!(
                    "{} {value} is not an integer number of seconds",
                    field.name()
                )
            }
            Self::TimeoutTooShort {
                value, min, field, ..
            } => {
                format!("{} {value} is below the minimum {min}", field.name())
            }
            Self::TimeoutTooLong {
                value, max, field, ..
            } => {
                format!("{} {value} is above the maximum {max}", field.name())
            }
            Self::NoTimeoutNotAllowed { value, field, .. } => {
                format!(
                    "{} {value} means no timeout, which is not allowed here",
                    field.name()
                )
            }
            Self::ClockOverflow { value, field } => {
                format!("{} {value} overflows Numaflow's clock", field.name())
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
            Self::ForcePromoteLabelValue { value, .. } => {
                format!("force-promote label {value}: any value force-promotes")
            }
            Self::ForcePromoteLabelDenied { user, .. } => {
                format!("{} may not set the force-promote label", short(user))
            }
            Self::DeleteUndrainedDenied { user, .. } => {
                format!(
                    "{} may not mark a Pipeline for undrained deletion",
                    short(user)
                )
            }
            Self::BookkeepingChanged { key, .. } => {
                format!("{} is Numaplane's bookkeeping", cut(key, 60))
            }
            Self::TemplateMalformed { path, found } => {
                format!("{} is {found}, not an object", cut(path, 60))
            }
            Self::PauseTimestampChanged { user, .. } => {
                format!("{} may not write Numaflow's pause-timestamp", short(user))
            }
            Self::ChildDeleteDenied { user, kind, .. } => {
                format!("{} may not delete a rollout's {kind}", short(user))
            }
            Self::RolloutDeleteDenied { user, .. } => {
                format!("{} may not delete a PipelineRollout", short(user))
            }
            Self::MadeEditDenied {
                user, kind, child, ..
            } => format!(
                "{} may not change {} of the {} of a rollout's {child}",
                short(user),
                cut(&self.field().unwrap_or_default(), 40),
                kind.kind()
            ),
            Self::ChildEditDenied { user, kind, .. } => format!(
                "{} may not change {} of a rollout's {}",
                short(user),
                cut(&self.field().unwrap_or_default(), 40),
                kind.kind()
            ),
            Self::StrategyDataMalformed { found } => format!("data is {found}, not an object"),
            Self::StrategyInvalid { value, .. } => {
                format!("upgradeStrategy {value} is ignored by Numaplane")
            }
            Self::StrategyKeysClash { kept, also } => {
                format!(
                    "data keys \"{}\" and \"{}\" are both upgradeStrategy to Numaplane",
                    cut(kept, 30),
                    cut(also, 30)
                )
            }
            Self::NamespaceStrategyDenied { user, .. } => {
                format!(
                    "{} may not make the namespace upgrade without draining",
                    short(user)
                )
            }
            Self::NamespaceFallbackDenied { user, .. } => {
                format!(
                    "{} may not leave the namespace to Numaplane's default, which skips draining",
                    short(user)
                )
            }
            Self::ControllerVersionDenied { user, version, .. } => format!(
                "{} may not name controller version \"{version}\", defined outside Numaplane's namespace",
                short(user)
            ),
            Self::ControllerDefinitionsDenied { user, .. } => {
                format!(
                    "{} may not write Numaflow controller definitions outside Numaplane's namespace",
                    short(user)
                )
            }
            Self::ForcePromoteRecordWritten { .. } => {
                "force-promote-for is the webhook's own record: leave it out".to_owned()
            }
            Self::Unjudgeable(message) => format!("cannot be judged: {}", cut(message, 80)),
        }
    }

    /// The field this violation is about, dotted as users write it (`None`
    /// when the request could not be judged). Rules added later without an
    /// arm here are mapped by their rule number.
    pub fn field(&self) -> Option<String> {
        match self {
            Self::TimeoutUnreachable { path, .. } | Self::MetadataMalformed { path, .. } => {
                Some((*path).to_owned())
            }
            Self::TimeoutNotInteger { field, .. }
            | Self::TimeoutTooShort { field, .. }
            | Self::TimeoutTooLong { field, .. }
            | Self::NoTimeoutNotAllowed { field, .. }
            | Self::ClockOverflow { field, .. } => Some(field.to_string()),
            Self::ScaleFactorInvalid { .. } => Some(SCALE_FACTOR_FIELD.to_string()),
            Self::TemplateMalformed { path, .. } => Some(path.clone()),
            Self::ForcePromoteLabelValue { path, .. }
            | Self::ForcePromoteLabelDenied { path, .. } => {
                Some(format!("{path}[\"{FORCE_PROMOTE_LABEL}\"]"))
            }
            Self::DeleteUndrainedDenied { path, .. } => {
                Some(format!("{path}[\"{MARKED_FOR_DELETION}\"]"))
            }
            Self::BookkeepingChanged { path, key, .. } => Some(format!("{path}[\"{key}\"]")),
            Self::PauseTimestampChanged { path, .. } => {
                Some(format!("{path}[\"{PAUSE_TIMESTAMP}\"]"))
            }
            Self::StrategyDataMalformed { .. } | Self::StrategyKeysClash { .. } => {
                Some("data".to_owned())
            }
            Self::ChildEditDenied { fields, .. } | Self::MadeEditDenied { fields, .. } => Some(
                fields
                    .split(", ")
                    .next()
                    .filter(|f| !f.is_empty())
                    .unwrap_or("metadata.ownerReferences")
                    .to_owned(),
            ),
            Self::StrategyInvalid { .. } | Self::NamespaceStrategyDenied { .. } => {
                Some(format!("data.{UPGRADE_STRATEGY_KEY}"))
            }
            Self::ControllerVersionDenied { kind, .. } => {
                Some(format!("spec.{}", kind.version_path().join(".")))
            }
            other => match other.rule() {
                Rule::TimeoutInteger | Rule::TimeoutRange | Rule::TimeoutOverflow => {
                    Some(TIMEOUT_FIELD.to_string())
                }
                Rule::AllowDataLossValue | Rule::ForceReapply => {
                    Some(ANNOTATIONS.entry(ALLOW_DATA_LOSS))
                }
                Rule::ForcePromote => Some(FORCE_PROMOTE_FIELD.to_string()),
                Rule::ForcePromoteRecord => Some(ANNOTATIONS.entry(FORCE_PROMOTE_FOR)),
                _ => None,
            },
        }
    }
}

/// Shows a JSON value compactly, cut short when long.
pub(in crate::policy::rules) fn show(value: &Value) -> String {
    cut(&value.to_string(), 32)
}

/// Shows a user name, cut short when long.
fn short(text: &str) -> String {
    cut(text, 48)
}

/// Cuts a text to `limit` characters, marking the cut with `…`.
pub(in crate::policy::rules) fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(limit - 1).collect();
        format!("{kept}…")
    }
}
