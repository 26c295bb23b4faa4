//! The admission rules, as pure functions of the policy and the write they
//! judge ([`RolloutWrite`]).
//!
//! Each concern returns its findings: [`timeout`] (rules 2 to 4), [`force`]
//! (rules 5 to 7 and 11), [`force_promote_reset`] (rules 12 and 25),
//! [`numaplane_keys`] (rules 13 to 15, on children and rollouts' child
//! templates); for `/mutate`,
//! [`defaulting`] (the missing timeout), [`stale_force_reset`] (the one-shot
//! force) and [`force_promote_reset`] (the one-shot forcePromote). [`validate`]
//! combines the findings and applies ratcheting (rule 8) and warn mode
//! (rule 10) in one place; [`mutate`] builds the patch. Both end in a
//! [`Decision`], which the admission layer turns into the wire answer.
//! [`Rule`] numbers and names every rule, for violations, metrics, the
//! audit's reports and docs/rules.md.

pub mod decision;
pub mod defaulting;
pub mod force;
pub mod force_promote_reset;
pub mod numaplane_keys;
pub mod rollout_write;
pub mod rule;
pub mod stale_force_reset;
pub mod timeout;
pub mod violation;

pub use decision::{Decision, EventReason, Finding, ForceEvent, Gate, GateResult};
pub use force::ForceGates;
pub use numaplane_keys::KeyGates;
pub use rollout_write::{Operation, RolloutWrite};
pub use rule::Rule;
pub use timeout::check_timeout;
pub use violation::{NotActable, NotPausing, PauseAgeProblem, RecordProblem, Violation};

use super::model::{Grant, Mode, Policy};
use super::user::Permission;

/// A `/validate` judgement up to the permission check: everything that
/// needs no I/O is worked out once, here.
#[derive(Debug)]
pub struct Validation<'a> {
    policy: &'a Policy,
    write: RolloutWrite<'a>,
    findings: Vec<Finding>,
    gates: ForceGates,
    keys: KeyGates,
}

/// The requester's permissions, one per grant the gates read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// forceReapply's: rules 6, 7 and 13.
    pub force: Permission,
    /// forceReapply.deleteUndrained's: rule 14.
    pub undrained: Permission,
}

/// Judges a CREATE or UPDATE for `/validate`, short of the permission:
/// finish it with [`Validation::finish`].
pub fn validate<'a>(policy: &'a Policy, write: RolloutWrite<'a>) -> Validation<'a> {
    let mut findings: Vec<Finding> = force::metadata_finding(&write).into_iter().collect();
    if write.is_pipeline_rollout() {
        findings.extend(timeout::findings(&policy.drain_timeout, &write));
    }
    findings.extend(force::annotation_finding(&write));
    findings.extend(force_promote_reset::record_finding(policy, &write));
    findings.extend(numaplane_keys::findings(policy, &write));
    let gates = ForceGates::of(policy, &write);
    let keys = KeyGates::of(policy, &write);
    Validation {
        policy,
        write,
        findings,
        gates,
        keys,
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

    /// A permission, when it is settled without asking an API server: not
    /// needed, or needed when the request is denied anyway (then the static
    /// lists answer alone; where only RBAC could grant it, it is
    /// [`Permission::NotAsked`]). `None`: ask.
    fn settled(&self, needed: bool, grant: Grant<'_>) -> Option<Permission> {
        if !needed {
            return Some(Permission::NotNeeded);
        }
        if !self.denied_anyway() {
            return None;
        }
        Some(
            match (grant.static_permission(self.write.user), grant.rbac) {
                (Permission::Refused(_), Some(_)) => Permission::NotAsked,
                (answer, _) => answer,
            },
        )
    }

    /// The requester's permission to force (forceReapply's lists and RBAC
    /// verb), when settled without asking; `None`: ask who may force.
    pub fn settled_permission(&self) -> Option<Permission> {
        let needed = self.gates.need_permission() || self.keys.need_force_permission();
        self.settled(needed, self.policy.force_reapply.grant())
    }

    /// The requester's permission to delete undrained
    /// (forceReapply.deleteUndrained), when settled without asking; `None`: ask.
    pub fn settled_undrained_permission(&self) -> Option<Permission> {
        self.settled(
            self.keys.need_undrained_permission(),
            self.policy.force_reapply.delete_undrained.grant(),
        )
    }

    /// Finishes the judgement with the static lists as the only source of
    /// permission: what the tables test (no RBAC is ever asked there).
    #[cfg(test)]
    pub(crate) fn finish_by_static_lists(self) -> Decision {
        let user = self.write.user;
        let force = self
            .settled_permission()
            .unwrap_or_else(|| self.policy.force_reapply.static_permission(user));
        let undrained = self.settled_undrained_permission().unwrap_or_else(|| {
            self.policy
                .force_reapply
                .delete_undrained
                .grant()
                .static_permission(user)
        });
        self.finish(&Permissions { force, undrained })
    }

    /// Finishes the judgement with the requester's permissions (the settled
    /// ones, or the answers of whoever was asked).
    pub fn finish(self, permissions: &Permissions) -> Decision {
        let permission = &permissions.force;
        let mut decision = Decision::default();
        // Rule 8: a violation whose inputs are unchanged warns.
        for finding in self.findings {
            if finding.unchanged {
                decision.warnings.push(format!(
                    "unchanged, so allowed: {}",
                    finding.violation.summary()
                ));
            } else {
                decision.denials.push(finding.violation);
            }
        }
        force::judge_gates(
            &mut decision,
            self.policy,
            &self.write,
            &self.gates,
            permission,
        );
        self.keys.judge(
            &mut decision,
            self.policy,
            &self.write,
            permission,
            &permissions.undrained,
        );
        decision
            .warnings
            .extend(force::stale_force_warning(&self.write, &self.gates));
        decision
            .warnings
            .extend(force_promote_reset::left_on_warning(&self.write));
        // Rule 10: warn mode denies nothing.
        if self.policy.mode == Mode::Warn {
            for violation in std::mem::take(&mut decision.denials) {
                decision
                    .warnings
                    .push(format!("warn mode, would deny: {}", violation.summary()));
            }
        }
        decision
    }
}

/// Judges a CREATE or UPDATE for `/mutate`: the patch that fills in what the
/// policy defaults, and resets a force that is over (one-shot).
pub fn mutate(policy: &Policy, write: &RolloutWrite<'_>) -> Decision {
    let mut decision = Decision::default();
    defaulting::default_timeout(policy, write, &mut decision);
    stale_force_reset::reset_stale_force(policy, write, &mut decision);
    force_promote_reset::reset_finished_force_promote(policy, write, &mut decision);
    decision
}

#[cfg(test)]
mod tests;
