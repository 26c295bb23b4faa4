//! Each violation in words: the message a denial shows and the one-line
//! summary a warning shows (kubectl shows warnings on one line), side by
//! side in one match; the field a report names; and the helpers that cut
//! values and names short.

use std::fmt;

use serde_json::Value;

use super::Violation;
use super::reasons::refusal;
use crate::kinds::{FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION, PAUSE_TIMESTAMP};
use crate::logtext::cut;
use crate::namespace_config::{STRATEGIES_SHOWN, UPGRADE_STRATEGY_KEY};
use crate::policy::duration::format_seconds;
use crate::policy::model::MAX_CLOCK_SECONDS;
use crate::rollout::{
    ALLOW_DATA_LOSS, ANNOTATIONS, FORCE_PROMOTE_FIELD, FORCE_PROMOTE_FOR, FieldPath, LifecycleKey,
    SCALE_FACTOR_FIELD, TIMEOUT_FIELD,
};

const SHORT_TIMEOUT: &str = TIMEOUT_FIELD.name();
/// A child Pipeline's pause timeout, as messages name it.
const CHILD_PAUSE: FieldPath = LifecycleKey::Pause.child_field();
/// A child Pipeline's deletion timeout, as messages name it.
const CHILD_DELETION: FieldPath = LifecycleKey::Deletion.child_field();

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.words(Form::Message, f)
    }
}

/// Which of a violation's words to write: the message or the summary.
#[derive(Clone, Copy)]
enum Form {
    Message,
    Summary,
}

impl std::error::Error for Violation {}

impl Violation {
    /// A one-line summary for warnings (kubectl shows them; kept short).
    pub fn summary(&self) -> String {
        fmt::from_fn(|f| self.words(Form::Summary, f)).to_string()
    }

    /// Each variant's words in one arm: the full message a denial shows
    /// (what is wrong, where, the value, and how to fix it), then its
    /// one-line summary; `form` says which of the two is written to `f`.
    fn words(&self, form: Form, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pick!((message..), (summary..))`: writes the message or the
        // summary, each given as `write!` arguments, whichever `form` asks
        // for; only that one's arguments are evaluated.
        macro_rules! pick {
            (($($message:tt)+), ($($summary:tt)+) $(,)?) => {
                match form {
                    Form::Message => write!(f, $($message)+),
                    Form::Summary => write!(f, $($summary)+),
                }
            };
        }
        match self {
            Self::TimeoutUnreachable { field, path, found } => pick!(
                (
                    "{path} is {found}, not an object, so {field} cannot be read or set: make {path} an object as the {} CRD describes",
                    if field.in_rollout {
                        "PipelineRollout"
                    } else {
                        "Pipeline"
                    }
                ),
                (
                    "{path} is {found}, not an object: no {} can be set",
                    field.name()
                ),
            ),
            Self::TimeoutNotInteger { field, value } => pick!(
                ("{field} is {value}, which is not an integer number of seconds: write an integer, e.g. 3600 for 1h"),
                (
                    "{} {value} is not an integer number of seconds",
                    field.name()
                ),
            ),
            Self::TimeoutTooShort {
                field,
                value,
                min,
                scope,
                fix,
            } => pick!(
                (
                    "{field} is {value}, below the minimum of {min} ({}) set by {scope}{}: {fix}",
                    format_seconds(*min),
                    if *value < 1 { field.zero_effect() } else { "" }
                ),
                ("{} {value} is below the minimum {min}", field.name()),
            ),
            Self::TimeoutTooLong {
                field,
                value,
                max,
                max_text,
                scope,
                fix,
            } => pick!(
                ("{field} is {value}, above the maximum of {max} ({max_text}) set by {scope}: {fix}"),
                ("{} {value} is above the maximum {max}", field.name()),
            ),
            Self::NoTimeoutNotAllowed {
                field,
                value,
                no_timeout,
                scope,
                fix,
            } => pick!(
                ("{field} is {value}, which means no timeout (at or above {no_timeout}), and {scope} does not allow no timeout: {fix}"),
                (
                    "{} {value} means no timeout, which is not allowed here",
                    field.name()
                ),
            ),
            Self::TimeoutOverflows {
                value,
                multiplier,
                scale_factor,
                largest,
            } => pick!(
                ("{TIMEOUT_FIELD} is {value}; Numaplane multiplies it by {multiplier} (scaleFactor {scale_factor}%) and {value} x {multiplier} seconds overflow Numaflow's clock (at most {MAX_CLOCK_SECONDS}): set at most {largest}"),
                ("{SHORT_TIMEOUT} {value} x{multiplier} (recycle) overflows Numaflow's clock"),
            ),
            Self::ClockOverflow { field, value } => pick!(
                (
                    "{field} is {value}; Numaflow counts it in Go's time.Duration, which overflows above {MAX_CLOCK_SECONDS} seconds: set at most {MAX_CLOCK_SECONDS}, or the {} policy's no-timeout value if it allows one",
                    field.section()
                ),
                ("{} {value} overflows Numaflow's clock", field.name()),
            ),
            Self::ScaleFactorInvalid { value, default } => pick!(
                ("{SCALE_FACTOR_FIELD} is {value}, which is not an integer percent from 1 to 100: set e.g. 50, or leave it out for the default of {default}"),
                ("scaleFactor {value} is not an integer from 1 to 100"),
            ),
            Self::MetadataMalformed { path, found } => pick!(
                ("{path} is {found}, not an object: annotations must be a map of strings"),
                ("{path} is {found}, not an object"),
            ),
            Self::AnnotationInvalid { value } => pick!(
                ("{ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] is {value}, which Numaplane ignores (it acts only on exactly \"true\"): set \"true\" to force a re-apply, or \"false\", or remove it"),
                ("allow-data-loss {value} is ignored by Numaplane: use \"true\" or \"false\""),
            ),
            Self::ForceReapplyDenied {
                user,
                refused,
                not_pausing,
                too_young,
            } => pick!(
                (
                    "user \"{user}\" may not set {ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] to \"true\" (a forced re-apply skips draining and can lose data): {}",
                    refusal(
                        refused.as_deref(),
                        "forceReapply in the webhook's policy",
                        "Argo CD's allow-data-loss action",
                        [
                            not_pausing.as_ref().map(|n| n as _),
                            too_young.as_ref().map(|t| t as _)
                        ],
                    )
                ),
                ("{} may not set allow-data-loss to \"true\"", short(user)),
            ),
            Self::StrategyDataMalformed { found } => pick!(
                ("data is {found}, not an object, so Numaplane cannot read this namespace-level ConfigMap: make data a map of strings with upgradeStrategy one of {STRATEGIES_SHOWN}"),
                ("data is {found}, not an object"),
            ),
            Self::StrategyInvalid {
                field,
                value,
                not_string,
            } => pick!(
                ("{field} is {value}{not_string}, which Numaplane does not accept: it ignores the ConfigMap and only logs an error its operators see; write one of {STRATEGIES_SHOWN} (an empty value means \"no-strategy\")"),
                ("upgradeStrategy {value} is ignored by Numaplane"),
            ),
            Self::StrategyKeysClash { kept, also } => pick!(
                ("data has both \"{kept}\" and \"{also}\", which Numaplane reads as the same field upgradeStrategy (Go matches keys in any case, and keeps the value of the key that sorts last, \"{kept}\"): keep one key, spelled upgradeStrategy, with one of {STRATEGIES_SHOWN}"),
                (
                    "data keys \"{}\" and \"{}\" are both upgradeStrategy to Numaplane",
                    cut(kept, 30),
                    cut(also, 30)
                ),
            ),
            Self::NamespaceStrategyDenied {
                user,
                namespace,
                field,
                shown,
                refused,
            } => pick!(
                ("user \"{user}\" may not set {field} to {shown} in namespace \"{namespace}\": every rollout there would then upgrade by plain apply, with no pause and no drain, so data in flight may be lost; {refused}; ask a platform admin to add you to forceReapply.namespaceStrategy in the webhook's policy, or write \"pause-and-drain\" or \"progressive\""),
                (
                    "{} may not make the namespace upgrade without draining",
                    short(user)
                ),
            ),
            Self::NamespaceFallbackDenied {
                user,
                namespace,
                how,
                default,
                refused,
            } => pick!(
                ("user \"{user}\" may not change the namespace-level ConfigMap of namespace \"{namespace}\" by {how}: Numaplane would then use {default} there, so every rollout would upgrade by plain apply, with no pause and no drain, and data in flight may be lost; {refused}; keep data.upgradeStrategy \"pause-and-drain\" or \"progressive\" in a namespace-level ConfigMap, or ask a platform admin to add you to forceReapply.namespaceStrategy in the webhook's policy"),
                (
                    "{} may not leave the namespace to Numaplane's default, which skips draining",
                    short(user)
                ),
            ),
            Self::ControllerDefinitionsDenied {
                user,
                namespace,
                numaplane_namespace,
                refused,
            } => pick!(
                ("user \"{user}\" may not write Numaflow controller definitions (a ConfigMap labelled numaplane.numaproj.io/config: numaflow-controller-definitions) in namespace \"{namespace}\": Numaplane prefers them to its own and applies a definition's fullSpec with its own account, which can grant any permission; {refused}; keep the definitions in \"{numaplane_namespace}\" (Numaplane's namespace), or ask a platform admin to add you to forceReapply.controllerDefinitions in the webhook's policy"),
                (
                    "{} may not write Numaflow controller definitions outside Numaplane's namespace",
                    short(user)
                ),
            ),
            Self::ControllerVersionDenied {
                user,
                kind,
                version,
                from,
                numaplane_namespace,
                refused,
            } => pick!(
                (
                    "user \"{user}\" may not name Numaflow controller version \"{version}\" in this {}: Numaplane would install it from {from}, applying its fullSpec with its own account, which can grant any permission; {refused}; name a version defined in \"{numaplane_namespace}\" (Numaplane's namespace), or ask a platform admin to add you to forceReapply.controllerDefinitions in the webhook's policy",
                    kind.kind()
                ),
                (
                    "{} may not name controller version \"{version}\", defined outside Numaplane's namespace",
                    short(user)
                ),
            ),
            Self::ForcePromoteRecordWritten { value, why } => pick!(
                ("{ANNOTATIONS}[\"{FORCE_PROMOTE_FOR}\"] is {value}, {why}: it is the webhook's own record of the upgrade a forcePromote was set for, written only by its mutating webhook, so that forcePromote.oneShot resets it when that upgrade is over; leave the annotation out of your change (the webhook keeps it)"),
                ("force-promote-for is the webhook's own record: leave it out"),
            ),
            Self::Unjudgeable(message) => {
                pick!(("{message}"), ("cannot be judged: {}", cut(message, 80)),)
            }
            Self::ForcePromoteLabelValue { path, value } => pick!(
                ("{path}[\"{FORCE_PROMOTE_LABEL}\"] is {value}: Numaplane acts on the label's presence, so any value, \"false\" included, force-promotes; to force a promotion set \"true\", otherwise remove the label"),
                ("force-promote label {value}: any value force-promotes"),
            ),
            Self::ForcePromoteLabelDenied {
                user,
                path,
                also,
                refused,
                state,
            } => pick!(
                (
                    "user \"{user}\" may not set {path}[\"{FORCE_PROMOTE_LABEL}\"] (Numaplane then promotes without assessment{also}): {}",
                    refusal(
                        refused.as_deref(),
                        "the webhook's policy",
                        "Argo CD's force-promote action",
                        [state.as_deref().map(|s| s as _), None],
                    )
                ),
                ("{} may not set the force-promote label", short(user)),
            ),
            Self::DeleteUndrainedDenied {
                user,
                path,
                refused,
                state,
            } => pick!(
                (
                    "user \"{user}\" may not set {path}[\"{MARKED_FOR_DELETION}\"] to \"true\" (Numaplane then deletes the recyclable Pipeline at once, without draining, and its data is lost): {}",
                    refusal(
                        refused.as_deref(),
                        "the webhook's policy",
                        "Argo CD's delete action",
                        [state.as_deref().map(|s| s as _), None],
                    )
                ),
                (
                    "{} may not mark a Pipeline for undrained deletion",
                    short(user)
                ),
            ),
            Self::BookkeepingChanged {
                user,
                path,
                key,
                change,
                controller,
            } => pick!(
                ("user \"{user}\" may not {change} {path}[\"{key}\"]: Numaplane keeps its bookkeeping there, and only its controller (\"{controller}\", numaplane.controllerAccount in the webhook's policy) may change it; leave the key as Numaplane wrote it"),
                ("{} is Numaplane's bookkeeping", cut(key, 60)),
            ),
            Self::TemplateMalformed { path, found } => pick!(
                ("{path} is {found}, not an object: labels and annotations must be maps of strings"),
                ("{} is {found}, not an object", cut(path, 60)),
            ),
            Self::PauseTimestampChanged {
                user,
                change,
                path,
                value,
                template,
                controller,
            } => pick!(
                (
                    "user \"{user}\" may not {change} {path}[\"{PAUSE_TIMESTAMP}\"] (to {value}): Numaflow ends a pause at this time plus {CHILD_PAUSE}, drained or not, so an earlier time ends the drain with data undrained; {}",
                    if *template {
                        "Numaplane would copy it onto every Pipeline it makes: remove it from the template".to_owned()
                    } else {
                        format!(
                            "only Numaflow's controller (\"{controller}\", numaflow.controllerAccount in the webhook's policy) writes it: leave it as Numaflow wrote it, and to end a stuck pause use a forced re-apply (allow-data-loss) on the PipelineRollout"
                        )
                    }
                ),
                ("{} may not write Numaflow's pause-timestamp", short(user)),
            ),
            Self::ChildDeleteDenied {
                user,
                kind,
                rollout,
                parent,
                refused,
            } => pick!(
                ("user \"{user}\" may not delete this {kind} of {rollout} \"{parent}\": it is drained for at most its deletion timeout ({CHILD_DELETION}), then what was not consumed is dropped, and Numaplane makes it again; {refused}; ask a platform admin to add you to forceReapply.deleteUndrained in the webhook's policy, or change or delete the {rollout} instead and let Numaplane drain it"),
                ("{} may not delete a rollout's {kind}", short(user)),
            ),
            Self::ChildEditDenied {
                user,
                kind,
                parent,
                fields,
                refused,
            } => pick!(
                (
                    "user \"{user}\" may not {} this {} of {} \"{parent}\": only Numaplane's and Numaflow's controllers change a rollout's children (Numaplane reads their status to decide whether to drain, and applies a change that can lose data only by pausing and draining); {refused}; change the {} instead, or ask a platform admin to add you to forceReapply.editChildren in the webhook's policy (scaling, pausing, resuming and your own labels and annotations need no permission)",
                    make_or_change(fields),
                    kind.kind(),
                    kind.rollout().kind(),
                    kind.rollout().kind()
                ),
                (
                    "{} may not change {} of a rollout's {}",
                    short(user),
                    cut(&self.field().unwrap_or_default(), 40),
                    kind.kind()
                ),
            ),
            Self::MadeEditDenied {
                user,
                kind,
                child,
                parent,
                fields,
                refused,
            } => pick!(
                (
                    "user \"{user}\" may not {} this {} of {child} of {parent}: Numaflow's controller makes and keeps it, and Numaplane and Numaflow read it back to decide whether a pause or a deletion has drained and whether an upgrade is healthy; {refused}; change the rollout instead, or ask a platform admin to add you to forceReapply.editChildren in the webhook's policy (scaling and your own labels and annotations need no permission)",
                    make_or_change(fields),
                    kind.kind()
                ),
                (
                    "{} may not change {} of the {} of a rollout's {child}",
                    short(user),
                    cut(&self.field().unwrap_or_default(), 40),
                    kind.kind()
                ),
            ),
            Self::RolloutDeleteDenied {
                user,
                timeout,
                refused,
            } => pick!(
                ("user \"{user}\" may not delete this PipelineRollout: Numaplane then deletes its Pipelines, each drained {timeout} before what was not consumed is dropped, and the webhook's policy (forceReapply.deleteUndrained.gateRolloutDeletes) requires the forceReapply.deleteUndrained permission for it; {refused}; ask a platform admin to add you to forceReapply.deleteUndrained"),
                ("{} may not delete a PipelineRollout", short(user)),
            ),
            Self::ForcePromoteDenied { user, refused } => pick!(
                ("user \"{user}\" may not turn on {FORCE_PROMOTE_FIELD} (it promotes without draining and can lose data): {refused}; ask a platform admin to add you to forceReapply in the webhook's policy"),
                ("{} may not turn on forcePromote", short(user)),
            ),
        }
    }

    /// The field this violation is about, dotted as users write it (`None`
    /// when it is about no one field, or the request could not be judged).
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
            Self::TimeoutOverflows { .. } => Some(TIMEOUT_FIELD.to_string()),
            Self::AnnotationInvalid { .. } | Self::ForceReapplyDenied { .. } => {
                Some(ANNOTATIONS.entry(ALLOW_DATA_LOSS))
            }
            Self::ForcePromoteDenied { .. } => Some(FORCE_PROMOTE_FIELD.to_string()),
            Self::ForcePromoteRecordWritten { .. } => Some(ANNOTATIONS.entry(FORCE_PROMOTE_FOR)),
            Self::NamespaceFallbackDenied { .. }
            | Self::ControllerDefinitionsDenied { .. }
            | Self::ChildDeleteDenied { .. }
            | Self::RolloutDeleteDenied { .. }
            | Self::Unjudgeable(_) => None,
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

/// How a denial of rules 26 and 29 names the write: "make" for a CREATE
/// (no fields), else "change FIELDS of".
fn make_or_change(fields: &str) -> String {
    if fields.is_empty() {
        "make".to_owned()
    } else {
        format!("change {fields} of")
    }
}
