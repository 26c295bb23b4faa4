//! Rules 23 and 24: Numaplane's namespace-level ConfigMap. Its
//! `data.upgradeStrategy` must be one of the three strategies Numaplane
//! accepts (rule 23: any other value is dropped with a log line the user
//! never sees), and a strategy that skips draining (`no-strategy`, or an
//! empty or blank value, which Numaplane reads as `no-strategy`) needs a
//! permission of its own, `forceReapply.namespaceStrategy` (rule 24): every
//! rollout of the namespace then upgrades by plain apply, with no pause, no
//! drain and no assessment. Both ratchet (an unchanged value warns) and
//! follow warn mode, like the other rules; an unchanged strategy is no
//! decision and records no Event.

use super::force::Settle;
use super::guarded_write::{Operation, Origin};
use super::need::{Need, Pending, Permissions};
use super::rule::Rule;
use super::verdict::{EventReason, Finding, Gate, StoredState, Verdict};
use super::violation::Violation;
use crate::namespace_config::{ClusterDefault, ConfigRead, StrategyRead};
use crate::policy::model::Policy;
use crate::policy::user::{Permission, UserInfo};

/// One write of a ConfigMap that carries Numaplane's config label (or
/// carried it), as rules 23 and 24 look at it.
#[derive(Debug, Clone)]
pub struct StrategyWrite<'a> {
    pub(crate) operation: Operation,
    /// The ConfigMap's namespace: the namespace whose rollouts it steers.
    pub(crate) namespace: &'a str,
    pub(crate) user: &'a UserInfo,
    /// What the ConfigMap as it would be stored says.
    pub(crate) object: ConfigRead,
    /// What the stored ConfigMap says, on UPDATE (on DELETE, the
    /// ConfigMap deleted, as `object` is too).
    pub(crate) old_object: Option<ConfigRead>,
    /// Numaplane's cluster default, as the webhook last read it (`None`:
    /// not read, taken as `no-strategy`).
    pub(crate) fallback: Option<&'a ClusterDefault>,
    /// A request, or a ConfigMap found stored.
    pub(crate) origin: Origin,
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
/// permission check: finish it with [`Pending::finish`].
#[derive(Debug)]
pub(crate) struct StrategyValidation<'a> {
    policy: &'a Policy,
    write: StrategyWrite<'a>,
    findings: Vec<Finding>,
    /// Rule 24 applies: the strategy becomes one that skips draining.
    gated: bool,
    /// Rule 27 applies: controller definitions outside Numaplane's
    /// namespace, written by anyone but Numaplane's controller.
    definitions: bool,
    /// Rule 24 applies to a fall-back: the write makes Numaplane use its
    /// cluster default here (how, in words), and that skips draining.
    falls_back: Option<&'static str>,
}

/// How the write makes Numaplane fall back to its cluster default for the
/// namespace, if it does: a DELETE of a namespace-level ConfigMap (of any
/// one: Numaplane keeps one configuration per namespace, and a DELETE of
/// either of two unsets it), the label removed or changed, or no
/// `upgradeStrategy` written (Numaplane then finds no valid strategy). Not
/// in Numaplane's namespace, which it never reads such a ConfigMap from,
/// and not by Kubernetes' own deleters (a namespace being deleted).
fn fallback(policy: &Policy, write: &StrategyWrite<'_>) -> Option<&'static str> {
    if write.namespace == policy.numaplane.namespace {
        return None;
    }
    let labelled = |read: &ConfigRead| read.strategy != StrategyRead::NotNamespaceConfig;
    let old = write.old_object.as_ref();
    let how = match write.operation {
        Operation::Delete => {
            let deleter = policy.is_system_deleter(write.user.username());
            (old.is_some_and(labelled) && !deleter).then_some("deleting it")?
        }
        _ if old.is_some_and(labelled) && !labelled(&write.object) => "removing its label",
        _ if write.object.strategy == StrategyRead::Unset => "leaving out data.upgradeStrategy",
        _ => return None,
    };
    // Already on the default, or already skipping draining: nothing changes.
    let before = old.filter(|read| labelled(read) && write.operation != Operation::Create);
    let unchanged = before.is_some_and(|read| {
        read.skips_draining()
            || (read.strategy == StrategyRead::Unset && write.operation != Operation::Delete)
    });
    let skips = write.fallback.is_none_or(ClusterDefault::skips_draining);
    (skips && !unchanged).then_some(how)
}

/// Judges a write of a ConfigMap for `/validate`, short of the permission.
pub(crate) fn validate<'a>(policy: &'a Policy, write: StrategyWrite<'a>) -> StrategyValidation<'a> {
    // A stored ConfigMap asks no permission: see `stored_states`.
    let request = write.origin == Origin::Request;
    let falls_back = fallback(policy, &write).filter(|_| request);
    if write.operation == Operation::Delete {
        // A DELETE is judged only for where it leaves the namespace.
        return StrategyValidation {
            policy,
            write,
            findings: Vec::new(),
            gated: false,
            definitions: false,
            falls_back,
        };
    }
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
    let gated = request && write.object.skips_draining() && !write.already_skips_draining();
    let definitions = request
        && write.object.definitions
        && write.namespace != policy.numaplane.namespace
        && write.user.username() != policy.numaplane.controller_account;
    StrategyValidation {
        policy,
        write,
        findings,
        gated,
        definitions,
        falls_back,
    }
}

impl StrategyValidation<'_> {
    /// The grant asked for: who may write controller definitions outside
    /// Numaplane's namespace (rule 27), else who may make the namespace
    /// skip draining (rule 24).
    fn need(&self) -> Need {
        if self.definitions {
            Need::ControllerDefinitions
        } else {
            Need::NamespaceStrategy
        }
    }
}

impl Pending for StrategyValidation<'_> {
    fn needs(&self, need: Need) -> bool {
        need == self.need() && (self.gated || self.definitions || self.falls_back.is_some())
    }

    fn finish(self, permissions: &Permissions) -> Verdict {
        let permission = &permissions[self.need()];
        let mut verdict = Verdict::default();
        let write = &self.write;
        verdict.ratchet(self.findings);
        if write.operation != Operation::Delete {
            verdict.warnings.extend(notice(write));
        }
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
            let what = format!(
                "{} to {} in namespace \"{}\", so every rollout there upgrades by plain apply, with no pause and no drain",
                write.object.field(),
                write.object.shown(),
                write.namespace
            );
            settle(self.policy, write, permission).gate_as(
                &mut verdict,
                Gate::NamespaceStrategy,
                (EventReason::NamespaceStrategyAllowed, &what),
                outcome,
            );
        }
        if self.definitions {
            definitions_gate(self.policy, write, permission, &mut verdict);
        }
        if let Some(how) = self.falls_back {
            fallback_gate(self.policy, write, how, permission, &mut verdict);
        }
        if write.origin == Origin::Stored {
            verdict.stored = stored_states(self.policy, write);
        }
        verdict.apply_mode(self.policy.mode);
        verdict
    }
}

/// Rules 24 and 27 on a stored ConfigMap, by the state it leaves: a
/// strategy that skips draining, and controller definitions outside
/// Numaplane's namespace, each a warning.
fn stored_states(policy: &Policy, write: &StrategyWrite<'_>) -> Vec<StoredState> {
    let (namespace, home) = (write.namespace, &policy.numaplane.namespace);
    let skips = write.object.skips_draining().then(|| {
        StoredState::warn(
            Rule::NamespaceStrategy,
            format!(
                "upgradeStrategy is {}: every rollout in namespace \"{namespace}\" upgrades by plain apply, with no pause and no drain; write \"pause-and-drain\" or \"progressive\" unless that is meant",
                write.object.shown()
            ),
        )
    });
    let definitions = (write.object.definitions && namespace != home).then(|| {
        StoredState::warn(
            Rule::ControllerDefinitions,
            format!(
                "Numaflow controller definitions in namespace \"{namespace}\": Numaplane prefers them to those of \"{home}\" and applies a definition's fullSpec with its own account; move them to \"{home}\" or delete them unless a platform admin wrote them"
            ),
        )
    });
    skips.into_iter().chain(definitions).collect()
}

/// How a gate on this ConfigMap is settled: an Event on a refused UPDATE or
/// DELETE (a refused CREATE leaves no ConfigMap to record it on).
fn settle<'p>(
    policy: &Policy,
    write: &'p StrategyWrite<'_>,
    permission: &'p Permission,
) -> Settle<'p> {
    Settle::plain(
        policy.mode,
        write.operation != Operation::Create,
        write.user.username(),
        permission,
    )
}

/// Rule 24 on a fall-back: a write that makes the namespace use
/// Numaplane's cluster default, which skips draining, needs the
/// namespaceStrategy permission as writing `no-strategy` does.
fn fallback_gate(
    policy: &Policy,
    write: &StrategyWrite<'_>,
    how: &'static str,
    permission: &Permission,
    verdict: &mut Verdict,
) {
    let user = write.user.username();
    let default = write.fallback.map_or_else(
        || ClusterDefault::Unknown("not read here".to_owned()).described(),
        ClusterDefault::described,
    );
    let outcome = permission
        .outcome()
        .map_err(|refused| Violation::NamespaceFallbackDenied {
            user: user.to_owned(),
            namespace: write.namespace.to_owned(),
            how,
            default: default.clone(),
            refused,
        });
    let what = format!(
        "the namespace-level ConfigMap of namespace \"{}\" by {how}, so Numaplane uses {default} there: every rollout upgrades by plain apply, with no pause and no drain",
        write.namespace
    );
    settle(policy, write, permission).gate_as(
        verdict,
        Gate::NamespaceStrategy,
        (EventReason::NamespaceStrategyAllowed, &what),
        outcome,
    );
}

/// Rule 27: Numaflow controller definitions outside Numaplane's namespace
/// need the controllerDefinitions permission, on every write that keeps
/// the label (Numaplane reads a user namespace's definitions first, and
/// applies their `fullSpec` with its own account).
fn definitions_gate(
    policy: &Policy,
    write: &StrategyWrite<'_>,
    permission: &Permission,
    verdict: &mut Verdict,
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
    let what = format!(
        "Numaflow controller definitions in namespace \"{}\", which Numaplane prefers to those of \"{}\" and applies with its own account",
        write.namespace, policy.numaplane.namespace
    );
    settle(policy, write, permission).gate_as(
        verdict,
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
