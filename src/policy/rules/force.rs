//! Rules 5 to 7 and 11: the `allow-data-loss` annotation's value, who may
//! force a re-apply or a promotion and when, and a force left on.

use time::OffsetDateTime;

use super::guarded_write::{GuardedWrite, Operation};
use super::rule::Rule;
use super::stale_force_reset::force_is_stale;
use super::verdict::{EventReason, Finding, ForceEvent, Gate, GateResult, StoredState, Verdict};
use super::violation::{NotPausing, PauseAgeProblem, Violation, cut, show};
use crate::policy::duration::format_seconds;
use crate::policy::model::{Mode, Policy};
use crate::policy::timestamp::format_rfc3339_utc;
use crate::policy::user::Permission;
use crate::rollout::{ALLOW_DATA_LOSS, ANNOTATIONS, FORCE_PROMOTE_FIELD, PAUSE_BEGIN, PauseStart};

/// Rule 5's first half: `metadata` and its annotations must be objects.
pub(crate) fn metadata_finding(write: &GuardedWrite<'_>) -> Option<Finding> {
    let (path, kind) = write.object.malformed_metadata()?;
    let unchanged = write
        .old()
        .is_some_and(|o| o.malformed_metadata() == Some((path, kind)));
    Some(Finding {
        violation: Violation::MetadataMalformed { path, found: kind },
        unchanged,
    })
}

/// Rule 5: the annotation, when present, is exactly "true" or "false".
pub(crate) fn annotation_finding(write: &GuardedWrite<'_>) -> Option<Finding> {
    if !write.is_pipeline_rollout() {
        return None;
    }
    let value = write
        .object
        .allow_data_loss()
        .filter(|v| v.as_str() != Some("true") && v.as_str() != Some("false"))?;
    let unchanged = write
        .old()
        .is_some_and(|o| o.allow_data_loss() == Some(value));
    Some(Finding {
        violation: Violation::AnnotationInvalid { value: show(value) },
        unchanged,
    })
}

/// What rules 6 and 7 ask of a request, worked out once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForceGates {
    /// Rule 6 applies: the annotation becomes "true".
    reapply: bool,
    /// Rule 7 applies: forcePromote is turned on and the policy gates it.
    promote: bool,
    /// Why rule 6's pause condition fails, when it applies and fails.
    not_pausing: Option<NotPausing>,
    /// Whether the stored object says its pipeline is pausing.
    pausing: bool,
    /// Why rule 6's minimum pause age fails, when it applies and fails.
    too_young: Option<PauseAgeProblem>,
    /// How long the stored object's pause has lasted, in seconds, when its
    /// start can be read (for the audit log and the Event).
    pause_age: Option<u64>,
}

/// Why the age of the stored object's pause cannot be read; the message
/// goes into the denial.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PauseAgeUnknown {
    /// A CREATE: nothing is stored, so nothing pauses.
    #[error("a new PipelineRollout has no pause")]
    NewObject,
    /// The status names no start.
    #[error(
        "neither a pausing PipelinePausingOrPaused condition's lastTransitionTime nor {PAUSE_BEGIN} is set"
    )]
    NoStart,
    /// The status names a start that is not a time.
    #[error("{path} is \"{value}\", not an RFC 3339 time")]
    Unreadable {
        path: &'static str,
        /// What was found there, cut to 40 characters.
        value: String,
    },
}

/// The age of the stored object's pause at `now`, in seconds (a start in
/// the future counts as 0), or why it cannot be read.
fn pause_age(write: &GuardedWrite<'_>) -> Result<(u64, OffsetDateTime), PauseAgeUnknown> {
    let Some(old) = write.old() else {
        return Err(PauseAgeUnknown::NewObject);
    };
    match old.pause_started() {
        PauseStart::At(start) => {
            let age = (write.now - start).whole_seconds().max(0);
            Ok((u64::try_from(age).unwrap_or(0), start))
        }
        PauseStart::Missing => Err(PauseAgeUnknown::NoStart),
        PauseStart::Unreadable { path, value } => Err(PauseAgeUnknown::Unreadable {
            path,
            value: cut(&value, 40),
        }),
    }
}

/// Rule 6's minimum pause age, when a policy sets one above 0.
fn pause_age_problem(
    min: u64,
    age: &Result<(u64, OffsetDateTime), PauseAgeUnknown>,
) -> Option<PauseAgeProblem> {
    if min == 0 {
        return None;
    }
    match age {
        Ok((age, _)) if *age >= min => None,
        Ok((age, start)) => {
            let from = *start + time::Duration::seconds(i64::try_from(min).unwrap_or(i64::MAX));
            Some(PauseAgeProblem::TooYoung {
                age: *age,
                min,
                allowed_from: format_rfc3339_utc(from),
            })
        }
        Err(detail) => Some(PauseAgeProblem::StartUnreadable {
            detail: detail.to_string(),
            min,
        }),
    }
}

impl ForceGates {
    /// Works out which gates a request meets.
    pub(crate) fn of(policy: &Policy, write: &GuardedWrite<'_>) -> Self {
        let reapply = write.annotation_becomes_true();
        let pausing = write.is_pipeline_rollout() && write.old_is_pausing();
        let not_pausing = match (
            reapply && policy.force_reapply.require_pausing,
            write.operation,
            pausing,
        ) {
            (false, _, _) | (true, Operation::Update, true) => None,
            (true, Operation::Create, _) => Some(NotPausing::NewObject),
            (true, Operation::Update, false) => Some(NotPausing::Idle),
            // A DELETE sets no force (`reapply` is false for it).
            (true, Operation::Delete, _) => None,
        };
        let promote = policy.force_reapply.gate_force_promote && write.force_promote_turned_on();
        // The pause's age matters only to a gate that applies.
        let age = (reapply || promote).then(|| pause_age(write));
        let too_young = match &age {
            Some(age) if reapply && not_pausing.is_none() => {
                pause_age_problem(policy.min_pause_age_seconds(write.namespace), age)
            }
            _ => None,
        };
        Self {
            reapply,
            promote,
            not_pausing,
            pausing,
            too_young,
            pause_age: age.and_then(Result::ok).map(|(age, _)| age),
        }
    }

    /// Whether rule 6 denies whatever the requester's permission.
    pub(crate) fn reapply_denied_anyway(&self) -> bool {
        self.reapply && (self.not_pausing.is_some() || self.too_young.is_some())
    }

    /// Whether either gate needs the requester's permission.
    pub(crate) fn need_permission(&self) -> bool {
        self.reapply || self.promote
    }
}

/// Rules 6 and 7: records each gate's decision (audit annotation, metric
/// label) and its denial.
pub(crate) fn judge_gates(
    verdict: &mut Verdict,
    policy: &Policy,
    write: &GuardedWrite<'_>,
    gates: &ForceGates,
    permission: &Permission,
) {
    if !gates.need_permission() {
        return;
    }
    let user = write.user.username();
    let refused = match permission {
        Permission::Granted(_) | Permission::NotAsked => None,
        Permission::Refused(why) => Some(why.clone()),
        Permission::NotNeeded => Some("its permission was not checked".to_owned()),
    };
    let settle = Settle {
        mode: policy.mode,
        update: write.operation == Operation::Update,
        user,
        permission,
        after: format!(
            " after the pause had lasted {}",
            gates
                .pause_age
                .map_or_else(|| "an unknown time".to_owned(), format_seconds)
        ),
        about: String::new(),
    };
    // Not asked (denied anyway, only RBAC could grant it): the gate speaks
    // only when it denies for its own pause conditions.
    let not_asked = *permission == Permission::NotAsked;
    if gates.reapply && (!not_asked || gates.reapply_denied_anyway()) {
        let outcome = if refused.is_none() && !gates.reapply_denied_anyway() {
            Ok(())
        } else {
            Err(Violation::ForceReapplyDenied {
                user: user.to_owned(),
                refused: refused.clone(),
                not_pausing: gates.not_pausing,
                too_young: gates.too_young.clone(),
            })
        };
        settle.gate(verdict, Gate::ForceReapply, outcome);
    }
    // Not asked: the request is denied anyway, and the promotion's
    // permission is not known, so it adds no reason of its own.
    if gates.promote && !not_asked {
        let outcome = match refused {
            None => Ok(()),
            Some(refused) => Err(Violation::ForcePromoteDenied {
                user: user.to_owned(),
                refused,
            }),
        };
        settle.gate(verdict, Gate::ForcePromote, outcome);
    }
}

/// What every gate's decision is recorded with.
pub(super) struct Settle<'a> {
    pub(super) mode: Mode,
    pub(super) update: bool,
    pub(super) user: &'a str,
    pub(super) permission: &'a Permission,
    /// When, for the Event's note (" after the pause had lasted 5m").
    pub(super) after: String,
    /// What the object is, for the Event's note (" on Pipeline \"p-1\" of
    /// PipelineRollout \"p\""); empty for a PipelineRollout's own gates.
    pub(super) about: String,
}

impl<'a> Settle<'a> {
    /// How a gate is settled for `user` with `permission`, under `mode`:
    /// an Event on a refused `update` (a refused CREATE leaves no object
    /// to record it on), nothing said of when or what.
    pub(super) fn plain(
        mode: Mode,
        update: bool,
        user: &'a str,
        permission: &'a Permission,
    ) -> Self {
        Self {
            mode,
            update,
            user,
            permission,
            after: String::new(),
            about: String::new(),
        }
    }

    /// Records one gate's decision: its Event, audit annotation, metric
    /// label and denial.
    pub(super) fn gate(&self, verdict: &mut Verdict, gate: Gate, outcome: Result<(), Violation>) {
        let what = match gate {
            Gate::ForceReapply => (
                EventReason::ForceReapplyAllowed,
                "allow-data-loss to \"true\" (a forced re-apply that skips draining)",
            ),
            Gate::ForcePromote => (
                EventReason::ForcePromoteAllowed,
                "forcePromote on (a promotion that skips draining)",
            ),
            Gate::DeleteUndrained => (
                EventReason::DeleteUndrainedAllowed,
                "marked-for-deletion to \"true\" (a recyclable Pipeline deleted without draining)",
            ),
            // Recorded by rules::deletes, which words its own Events.
            Gate::DeleteChild | Gate::DeleteRollout => (
                EventReason::DeleteUndrainedAllowed,
                "a delete that drains for at most the deletion timeout",
            ),
            // Recorded by rules::namespace_strategy through `gate_as`, naming
            // the value and the namespace.
            Gate::NamespaceStrategy => (
                EventReason::NamespaceStrategyAllowed,
                "data.upgradeStrategy to \"no-strategy\" (every rollout of the namespace upgrades without draining)",
            ),
            // Recorded by rules::child_edits through `gate_as`, naming the
            // fields and the owner.
            Gate::EditChild => (
                EventReason::ChildEditAllowed,
                "a change of a rollout's child",
            ),
            // Recorded by rules::namespace_strategy through `gate_as`,
            // naming the namespace.
            Gate::ControllerDefinitions => (
                EventReason::ControllerDefinitionsAllowed,
                "Numaflow controller definitions outside Numaplane's namespace",
            ),
        };
        self.gate_as(verdict, gate, what, outcome);
    }

    /// [`Settle::gate`], saying what was set in the Event's note.
    pub(super) fn gate_as(
        &self,
        verdict: &mut Verdict,
        gate: Gate,
        what: (EventReason, &str),
        outcome: Result<(), Violation>,
    ) {
        let denied = match gate {
            Gate::DeleteUndrained | Gate::DeleteChild | Gate::DeleteRollout => {
                EventReason::DeleteUndrainedDenied
            }
            Gate::NamespaceStrategy => EventReason::NamespaceStrategyDenied,
            Gate::EditChild => EventReason::ChildEditDenied,
            Gate::ControllerDefinitions => EventReason::ControllerDefinitionsDenied,
            Gate::ForceReapply | Gate::ForcePromote => EventReason::ForceReapplyDenied,
        };
        let what_on = (what.0, format!("{}{}", what.1, self.about));
        let event = force_event(
            self.mode,
            &outcome,
            self.update,
            (what_on.0, &what_on.1, denied),
            self.user,
            &self.after,
        );
        verdict.events.extend(event);
        record_gate(
            verdict,
            self.mode,
            gate,
            self.user,
            self.permission,
            outcome,
        );
    }
}

/// The Event a gate's decision asks for: allowed (warn mode included, as
/// the force then goes through), or refused on an UPDATE (a CREATE has no
/// stored object to record it on).
fn force_event(
    mode: Mode,
    outcome: &Result<(), Violation>,
    update: bool,
    (allowed, what, denied): (EventReason, &str, EventReason),
    user: &str,
    after: &str,
) -> Option<ForceEvent> {
    let user = cut(user, 64);
    let note = match (outcome, mode) {
        (Ok(()), _) => format!(
            "allowed by the admission webhook: user \"{user}\" set {what}{after}; data still in flight may be lost"
        ),
        (Err(v), Mode::Warn) => format!(
            "allowed by the admission webhook in warn mode (enforce would deny: {}): user \"{user}\" set {what}{after}",
            v.summary()
        ),
        (Err(v), Mode::Enforce) if update => {
            return Some(ForceEvent {
                reason: denied,
                note: cut(&format!("refused by the admission webhook: {v}"), 1000),
            });
        }
        (Err(_), Mode::Enforce) => return None,
    };
    Some(ForceEvent {
        reason: allowed,
        note: cut(&note, 1000),
    })
}

/// Rules 6 and 7 on a stored object: a force found on is judged by the
/// state it leaves, since who set it cannot be known. `allow-data-loss:
/// "true"` fails once the pause is over (the next change skips the drain)
/// and warns while a forced re-apply is under way; `forcePromote: true`
/// warns.
pub(crate) fn stored_states(write: &GuardedWrite<'_>) -> Vec<StoredState> {
    let object = write.object;
    let mut states = Vec::new();
    if write.is_pipeline_rollout() && force_is_stale(object) {
        states.push(StoredState {
            rule: Rule::ForceReapply,
            fails: true,
            message: format!(
                "{ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] is \"true\" and the pause is over: the next change is applied without draining and can lose data; set it to \"false\" (the stale-force sweeper resets it after its grace period when it runs; who set it is unknown to the audit)"
            ),
        });
    } else if write.is_pipeline_rollout() && object.forces_reapply() {
        states.push(StoredState::warn(
            Rule::ForceReapply,
            format!(
                "{ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] is \"true\" while the pipeline is paused or pausing: a forced re-apply is under way, skipping the drain; set it to \"false\" once the pause is over (who set it is unknown to the audit)"
            ),
        ));
    }
    if write.kind.is_child() || !object.force_promote() {
        return states;
    }
    let upgrade = object.progressive_upgrade();
    let message = if upgrade.in_progress {
        let child = upgrade
            .child
            .map_or_else(|| format!("a {}", write.kind.child().kind()), str::to_owned);
        format!(
            "{FORCE_PROMOTE_FIELD} is true during the progressive upgrade of {child}: it is promoted without assessment; set it to false once the upgrade is over (who set it is unknown to the audit)"
        )
    } else {
        let also = if write.is_pipeline_rollout() {
            " and recyclable pipelines are deleted without draining"
        } else {
            ""
        };
        format!(
            "{FORCE_PROMOTE_FIELD} is true and no progressive upgrade is in progress: the next upgrade skips assessment{also}; set it to false (who set it is unknown to the audit)"
        )
    };
    states.push(StoredState::warn(Rule::ForcePromote, message));
    states
}

/// Rule 11: the annotation left at "true" after the force is over.
pub(crate) fn stale_force_warning(write: &GuardedWrite<'_>, gates: &ForceGates) -> Option<String> {
    let stale = write.is_pipeline_rollout()
        && write.object.forces_reapply()
        && write
            .old()
            .is_some_and(crate::rollout::GuardedObject::forces_reapply)
        && !gates.pausing;
    stale.then(|| {
        "allow-data-loss is still \"true\" and nothing is pausing: this change applies without draining; set it to \"false\""
            .to_owned()
    })
}

/// Records a gate's decision: the audit annotation, and the denial.
pub(super) fn record_gate(
    verdict: &mut Verdict,
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
            format!("denied by rule {}: user \"{user}\"", v.rule().number()),
        ),
        (Err(v), Mode::Warn) => (
            GateResult::WouldDeny,
            format!(
                "would-deny by rule {} (warn mode): user \"{user}\"",
                v.rule().number()
            ),
        ),
    };
    verdict.audit.insert(gate.as_str().to_owned(), text);
    verdict.gates.push((gate, result));
    if let Err(v) = outcome {
        verdict.denials.push(v);
    }
}
