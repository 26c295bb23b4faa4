//! Rules 23 and 24: Numaplane's namespace-level ConfigMap. Its
//! `data.upgradeStrategy` must be one of the three strategies Numaplane
//! accepts (rule 23: any other value is dropped with a log line the user
//! never sees), and a strategy that skips draining (`no-strategy`, or an
//! empty or blank value, which Numaplane reads as `no-strategy`) needs a
//! permission of its own, `forceReapply.namespaceStrategy` (rule 24): every
//! rollout of the namespace then upgrades by plain apply, with no pause, no
//! drain and no assessment. Both ratchet (an unchanged value warns) and
//! follow warn mode, like the other rules. Rule 24's decisions are Events
//! on the ConfigMap, as the other gates' are on their objects: allowed
//! (warn mode included, as the strategy then goes through), or refused on
//! an UPDATE (a refused CREATE leaves no ConfigMap to record it on); an
//! unchanged strategy is no decision and records none.

use super::force::Settle;
use super::guarded_write::Operation;
use super::verdict::{EventReason, Finding, Gate, Verdict};
use super::violation::Violation;
use crate::namespace_config::{ConfigRead, StrategyRead};
use crate::policy::model::{Grant, Mode, Policy};
use crate::policy::user::{Permission, UserInfo};

/// One write of a ConfigMap that carries Numaplane's config label (or
/// carried it), as rules 23 and 24 look at it.
#[derive(Debug, Clone)]
pub struct StrategyWrite<'a> {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// The ConfigMap's namespace: the namespace whose rollouts it steers.
    pub namespace: &'a str,
    /// Who is asking.
    pub user: &'a UserInfo,
    /// What the ConfigMap as it would be stored says.
    pub object: ConfigRead,
    /// What the stored ConfigMap says, on UPDATE.
    pub old_object: Option<ConfigRead>,
}

impl StrategyWrite<'_> {
    /// The stored ConfigMap's strategy, on UPDATE only.
    fn old(&self) -> Option<&ConfigRead> {
        match self.operation {
            Operation::Update | Operation::Delete => self.old_object.as_ref(),
            Operation::Create => None,
        }
    }

    /// Whether the stored ConfigMap already made the namespace skip
    /// draining (then the write changes nothing that matters: ratcheting).
    fn already_skips_draining(&self) -> bool {
        self.old().is_some_and(ConfigRead::skips_draining)
    }
}

/// A `/validate` judgement of a namespace-level ConfigMap up to the
/// permission check: finish it with [`StrategyValidation::finish`].
#[derive(Debug)]
pub struct StrategyValidation<'a> {
    policy: &'a Policy,
    write: StrategyWrite<'a>,
    findings: Vec<Finding>,
    /// Rule 24 applies: the strategy becomes one that skips draining.
    gated: bool,
    /// Rule 27 applies: controller definitions outside Numaplane's
    /// namespace, written by anyone but Numaplane's controller.
    definitions: bool,
}

/// Judges a write of a ConfigMap for `/validate`, short of the permission.
pub fn validate<'a>(policy: &'a Policy, write: StrategyWrite<'a>) -> StrategyValidation<'a> {
    let field = write.object.field();
    let violation = match &write.object.strategy {
        StrategyRead::DataMalformed(found) => {
            Some(Violation::StrategyDataMalformed { found: *found })
        }
        StrategyRead::Unknown(text) => Some(Violation::StrategyInvalid {
            field,
            value: format!("\"{text}\""),
            not_string: "",
        }),
        StrategyRead::NotString(json) => Some(Violation::StrategyInvalid {
            field,
            value: json.clone(),
            not_string: ", not a string",
        }),
        _ => None,
    };
    let unchanged = write.old() == Some(&write.object);
    // Keys Numaplane reads as one field: refused, as the value kept depends
    // on how the keys sort, not on what the writer meant.
    let clash = write
        .object
        .clash
        .as_ref()
        .map(|(kept, also)| Violation::StrategyKeysClash {
            kept: kept.clone(),
            also: also.clone(),
        });
    let findings: Vec<Finding> = clash
        .into_iter()
        .chain(violation)
        .map(|violation| Finding {
            violation,
            unchanged,
        })
        .collect();
    let gated = write.object.skips_draining() && !write.already_skips_draining();
    let definitions = write.object.definitions
        && write.namespace != policy.numaplane.namespace
        && write.user.username() != policy.numaplane.controller_account;
    StrategyValidation {
        policy,
        write,
        findings,
        gated,
        definitions,
    }
}

impl<'a> StrategyValidation<'a> {
    /// Who may make the namespace skip draining.
    pub fn grant(&self) -> Grant<'a> {
        if self.definitions {
            self.policy.force_reapply.controller_definitions.grant()
        } else {
            self.policy.force_reapply.namespace_strategy.grant()
        }
    }

    /// The permission, when it is settled without asking anyone: not
    /// needed. `None`: ask (the static lists, then RBAC).
    pub fn settled_permission(&self) -> Option<Permission> {
        (!self.gated && !self.definitions).then_some(Permission::NotNeeded)
    }

    /// Finishes the judgement with the requester's permission.
    pub fn finish(self, permission: &Permission) -> Verdict {
        let mut decision = Verdict::default();
        let write = &self.write;
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
        decision.warnings.extend(notice(write));
        if self.gated {
            let user = write.user.username();
            let outcome =
                permission
                    .outcome()
                    .map_err(|refused| Violation::NamespaceStrategyDenied {
                        user: user.to_owned(),
                        namespace: write.namespace.to_owned(),
                        field: write.object.field(),
                        shown: write.object.shown(),
                        refused,
                    });
            let settle = Settle {
                mode: self.policy.mode,
                update: write.operation == Operation::Update,
                user,
                permission,
                after: String::new(),
                about: String::new(),
            };
            let what = format!(
                "{} to {} in namespace \"{}\", so every rollout there upgrades by plain apply, with no pause and no drain",
                write.object.field(),
                write.object.shown(),
                write.namespace
            );
            settle.gate_as(
                &mut decision,
                Gate::NamespaceStrategy,
                (EventReason::NamespaceStrategyAllowed, &what),
                outcome,
            );
        }
        if self.definitions {
            definitions_gate(self.policy, write, permission, &mut decision);
        }
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

/// Rule 27: Numaflow controller definitions outside Numaplane's namespace
/// need the controllerDefinitions permission, on every write that keeps
/// the label (Numaplane reads a user namespace's definitions first, and
/// applies their `fullSpec` with its own account).
fn definitions_gate(
    policy: &Policy,
    write: &StrategyWrite<'_>,
    permission: &Permission,
    decision: &mut Verdict,
) {
    let user = write.user.username();
    let outcome = permission
        .outcome()
        .map_err(|refused| Violation::ControllerDefinitionsDenied {
            user: user.to_owned(),
            namespace: write.namespace.to_owned(),
            numaplane_namespace: policy.numaplane.namespace.clone(),
            refused,
        });
    let settle = Settle {
        mode: policy.mode,
        update: write.operation == Operation::Update,
        user,
        permission,
        after: String::new(),
        about: String::new(),
    };
    let what = format!(
        "Numaflow controller definitions in namespace \"{}\", which Numaplane prefers to those of \"{}\" and applies with its own account",
        write.namespace, policy.numaplane.namespace
    );
    settle.gate_as(
        decision,
        Gate::ControllerDefinitions,
        (EventReason::ControllerDefinitionsAllowed, &what),
        outcome,
    );
}

/// What the requester should know about a ConfigMap that is allowed: a
/// strategy that skips draining, kept as it was (ratcheting); a ConfigMap
/// Numaplane ignores; a namespace left to Numaplane's default.
fn notice(write: &StrategyWrite<'_>) -> Option<String> {
    match &write.object.strategy {
        StrategyRead::Strategy { .. }
            if write.object.skips_draining() && write.already_skips_draining() =>
        {
            Some(format!(
                "unchanged, so allowed: upgradeStrategy {} makes every rollout in \"{}\" upgrade without draining",
                write.object.shown(),
                write.namespace
            ))
        }
        StrategyRead::NoData => Some(
            "this namespace-level ConfigMap has no data: Numaplane ignores it and logs an error"
                .to_owned(),
        ),
        StrategyRead::Unset => Some(
            "no data.upgradeStrategy: Numaplane uses its cluster-wide default strategy here"
                .to_owned(),
        ),
        _ => None,
    }
}
