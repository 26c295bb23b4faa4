//! The admission rules, as pure functions of the policy and the write they
//! judge ([`GuardedWrite`]), one concern a file, each naming its rules.
//! [`validate`] combines the findings and applies ratcheting (rule 8) and
//! warn mode (rule 10) in one place; [`mutate`] builds the patch (the
//! defaults and the one-shot resets). Both end in a [`Verdict`], which the
//! admission layer turns into the wire answer. [`Rule`] numbers and names
//! every rule, for violations, metrics, the audit's reports and
//! docs/rules.md.

pub(crate) mod child_edits;
mod child_lifecycle;
pub(crate) mod controller_version;
mod defaulting;
mod deletes;
mod deletion_timeout;
mod force;
mod force_promote_reset;
mod guarded_write;
pub(crate) mod made_objects;
pub(crate) mod namespace_strategy;
mod need;
mod numaplane_keys;
mod pause_timestamp;
mod riders;
mod rule;
pub(crate) mod stale_force_reset;
mod timeout;
mod timeout_field;
pub(crate) mod verdict;
mod violation;

pub(crate) use child_edits::ChildEdits;
pub(crate) use controller_version::{
    ClusterView, DefinitionLookup, Definitions, VersionValidation, VersionWrite,
};
pub(crate) use deletes::DeleteGates;
pub(crate) use force::ForceGates;
pub(crate) use guarded_write::{GuardedWrite, Operation, Origin};
pub(crate) use made_objects::{Belonging, ChildLookup, MadeValidation, MadeWrite};
pub(crate) use namespace_strategy::{StrategyValidation, StrategyWrite};
pub(crate) use need::{Need, Pending, Permissions};
pub(crate) use numaplane_keys::KeyGates;
pub use rule::Rule;
pub(crate) use timeout::{OverflowReading, check_timeout};
pub(crate) use timeout_field::{Drain, TimeoutField};
pub use verdict::Verdict;
pub(crate) use verdict::{DenialMessage, EventReason, Finding, Gate, GateResult, StoredState};
pub(crate) use violation::Violation;

use super::model::{Mode, Policy};
use super::user::Permission;

/// A `/validate` judgement up to the permission check: everything that
/// needs no I/O is worked out once, here.
#[derive(Debug)]
pub(crate) struct Validation<'a> {
    policy: &'a Policy,
    write: GuardedWrite<'a>,
    findings: Vec<Finding>,
    gates: ForceGates,
    keys: KeyGates,
    deletes: DeleteGates,
    edits: ChildEdits,
    /// Warnings that need no permission: the deprecated or ignored
    /// deletion timeout.
    notes: Vec<String>,
}

/// Judges a CREATE or UPDATE for `/validate`, short of the permission:
/// finish it with [`Pending::finish`].
pub(crate) fn validate<'a>(policy: &'a Policy, write: GuardedWrite<'a>) -> Validation<'a> {
    let gates = ForceGates::of(policy, &write);
    let deletes = DeleteGates::of(policy, &write);
    // A DELETE meets rules 20 and 21 only: what the stored object holds
    // was judged when it was written.
    if write.is_delete() {
        return Validation {
            policy,
            write,
            findings: Vec::new(),
            gates,
            keys: KeyGates::default(),
            deletes,
            edits: ChildEdits::default(),
            notes: Vec::new(),
        };
    }
    let mut findings: Vec<Finding> = force::metadata_finding(&write).into_iter().collect();
    let mut notes = Vec::new();
    if write.is_pipeline_rollout() {
        findings.extend(timeout::findings(&policy.drain_timeout, &write));
        let deletion = deletion_timeout::rollout_findings(&policy.deletion_timeout, &write);
        findings.extend(deletion.findings);
        notes.extend(deletion.warnings);
    }
    let child = child_lifecycle::findings(policy, &write);
    findings.extend(child.findings);
    notes.extend(child.warnings);
    findings.extend(force::annotation_finding(&write));
    findings.extend(force_promote_reset::record_finding(policy, &write));
    findings.extend(numaplane_keys::findings(policy, &write));
    findings.extend(pause_timestamp::finding(policy, &write));
    let keys = KeyGates::of(policy, &write);
    let edits = ChildEdits::of(policy, &write);
    Validation {
        policy,
        write,
        findings,
        gates,
        keys,
        deletes,
        edits,
        notes,
    }
}

impl Validation<'_> {
    /// Whether the request is denied whatever the permissions: in enforce
    /// mode, a changed violation or a gate's own condition.
    fn denied_anyway(&self) -> bool {
        self.policy.mode == Mode::Enforce
            && (self.findings.iter().any(|f| !f.unchanged)
                || self.gates.reapply_denied_anyway()
                || self.keys.denied_anyway())
    }
}

impl Pending for Validation<'_> {
    /// forceReapply's for rules 6, 7 and 13, deleteUndrained's for rules
    /// 14, 20 and 21, editChildren's for rule 26.
    fn needs(&self, need: Need) -> bool {
        match need {
            Need::ForceReapply => self.gates.need_permission() || self.keys.need_force_permission(),
            Need::DeleteUndrained => {
                self.keys.need_undrained_permission() || self.deletes.need_undrained_permission()
            }
            Need::EditChildren => self.edits.need_permission(),
            Need::NamespaceStrategy | Need::ControllerDefinitions => false,
        }
    }

    /// A permission, when it is settled without asking an API server: not
    /// needed, or needed when the request is denied anyway (then the static
    /// lists answer alone; where only RBAC could grant it, it is
    /// [`Permission::NotAsked`]). `None`: ask.
    fn settled(&self, need: Need) -> Option<Permission> {
        if !self.needs(need) {
            return Some(Permission::NotNeeded);
        }
        if !self.denied_anyway() {
            return None;
        }
        let grant = need.grant(self.policy);
        Some(
            match (grant.static_permission(self.write.user), grant.rbac) {
                (Permission::Refused(_), Some(_)) => Permission::NotAsked,
                (answer, _) => answer,
            },
        )
    }

    fn finish(self, permissions: &Permissions) -> Verdict {
        let permission = &permissions[Need::ForceReapply];
        let mut verdict = Verdict {
            warnings: self.notes,
            ..Verdict::default()
        };
        verdict.ratchet(self.findings);
        force::judge_gates(
            &mut verdict,
            self.policy,
            &self.write,
            &self.gates,
            permission,
        );
        self.keys.judge(
            &mut verdict,
            self.policy,
            &self.write,
            permission,
            &permissions[Need::DeleteUndrained],
        );
        self.deletes.judge(
            &mut verdict,
            self.policy,
            &self.write,
            &permissions[Need::DeleteUndrained],
        );
        self.edits.judge(
            &mut verdict,
            self.policy,
            &self.write,
            &permissions[Need::EditChildren],
        );
        verdict
            .warnings
            .extend(riders::hpa_rider_warning(&self.write));
        verdict
            .warnings
            .extend(riders::access_rider_warnings(&self.write));
        verdict
            .warnings
            .extend(force::stale_force_warning(&self.write, &self.gates));
        verdict
            .warnings
            .extend(force_promote_reset::left_on_warning(&self.write));
        if self.write.is_stored() {
            verdict.stored = stored_states(&self.write);
        }
        verdict.apply_mode(self.policy.mode);
        verdict
    }
}

/// What a stored object holds that is judged by the state it leaves,
/// since who wrote it cannot be known: rules 6 and 7 (its forces), 13 and
/// 14 (its child template's), 17 (no deletion timeout), 22 and 28 (its
/// riders).
fn stored_states(write: &GuardedWrite<'_>) -> Vec<StoredState> {
    let mut states = force::stored_states(write);
    states.extend(numaplane_keys::stored_states(write));
    states.extend(deletion_timeout::stored_state(write));
    states.extend(riders::stored_states(write));
    states
}

/// Judges a CREATE or UPDATE for `/mutate`: the patch that fills in what the
/// policy defaults, and resets a force that is over (one-shot).
pub(crate) fn mutate(policy: &Policy, write: &GuardedWrite<'_>) -> Verdict {
    let mut verdict = Verdict::default();
    // `/mutate` is not called for DELETE; if it is, it changes nothing.
    if write.is_delete() {
        return verdict;
    }
    defaulting::default_timeout(policy, write, &mut verdict);
    stale_force_reset::reset_stale_force(policy, write, &mut verdict);
    force_promote_reset::reset_finished_force_promote(policy, write, &mut verdict);
    verdict
}

#[cfg(test)]
mod tests;
