//! The admission rules, as pure functions of the policy and the write they
//! judge ([`RolloutWrite`]).
//!
//! Each concern returns its findings: [`timeout`] (rules 2 to 4), [`force`]
//! (rules 5 to 7 and 11), [`force_promote_reset`] (rule 12); for `/mutate`,
//! [`defaulting`] (the missing timeout), [`stale_force_reset`] (the one-shot
//! force) and [`force_promote_reset`] (the one-shot forcePromote). [`validate`]
//! combines the findings and applies ratcheting (rule 8) and warn mode
//! (rule 10) in one place; [`mutate`] builds the patch. Both end in a
//! [`Decision`], which the admission layer turns into the wire answer.

pub mod decision;
pub mod defaulting;
pub mod force;
pub mod force_promote_reset;
pub mod rollout_write;
pub mod stale_force_reset;
pub mod timeout;
pub mod violation;

pub use decision::{Decision, EventReason, Finding, ForceEvent, Gate, GateResult};
pub use force::ForceGates;
pub use rollout_write::{Operation, RolloutWrite};
pub use timeout::check_timeout;
pub use violation::{NotPausing, PauseAgeProblem, Violation};

use super::model::{Mode, Policy};
use super::user::Permission;

/// A `/validate` judgement up to the permission check: everything that
/// needs no I/O is worked out once, here.
#[derive(Debug)]
pub struct Validation<'a> {
    policy: &'a Policy,
    write: RolloutWrite<'a>,
    findings: Vec<Finding>,
    gates: ForceGates,
}

/// Judges a CREATE or UPDATE for `/validate`, short of the permission:
/// finish it with [`Validation::finish`].
pub fn validate<'a>(policy: &'a Policy, write: RolloutWrite<'a>) -> Validation<'a> {
    let mut findings: Vec<Finding> = force::metadata_finding(&write).into_iter().collect();
    findings.extend(timeout::findings(&policy.drain_timeout, &write));
    findings.extend(force::annotation_finding(&write));
    let gates = ForceGates::of(policy, &write);
    Validation {
        policy,
        write,
        findings,
        gates,
    }
}

impl Validation<'_> {
    /// The requester's permission to force, when it is settled without
    /// asking an API server: not needed, or needed when the request is
    /// denied anyway (then the static lists answer alone; where only RBAC
    /// could grant it, it is [`Permission::NotAsked`]). `None`: ask who may
    /// force.
    pub fn settled_permission(&self) -> Option<Permission> {
        if !self.gates.need_permission() {
            return Some(Permission::NotNeeded);
        }
        let denied_anyway = self.policy.mode == Mode::Enforce
            && (self.findings.iter().any(|f| !f.unchanged) || self.gates.reapply_denied_anyway());
        if !denied_anyway {
            return None;
        }
        let force = &self.policy.force_reapply;
        Some(
            match (force.static_permission(self.write.user), &force.rbac) {
                (Permission::Refused(_), Some(_)) => Permission::NotAsked,
                (answer, _) => answer,
            },
        )
    }

    /// Finishes the judgement with the static lists as the only source of
    /// permission: what the tables test (no RBAC is ever asked there).
    #[cfg(test)]
    pub(crate) fn finish_by_static_lists(self) -> Decision {
        let permission = self
            .settled_permission()
            .unwrap_or_else(|| self.policy.force_reapply.static_permission(self.write.user));
        self.finish(&permission)
    }

    /// Finishes the judgement with the requester's permission (the settled
    /// one, or the answer of whoever was asked).
    pub fn finish(self, permission: &Permission) -> Decision {
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
