//! The decision, on typed input: what a request (or a stored object the
//! audit judges, or a manifest `check` judges) is, the rules applied to it,
//! and the permission asked of the authorizer when a force needs it. No
//! JSON and no AdmissionReview here: [`super::answer`] reads those and
//! writes the answer; the audit and `check` call [`decide`] directly.

use std::time::Duration;

use super::Webhook;
use crate::authz::{ForcePermission, RbacTrace, Target};
use crate::kinds::CONFIGMAPS;
use crate::policy::Policy;
use crate::policy::rules::{
    self, Decision, Permissions, RolloutWrite, StrategyWrite, Violation, namespace_strategy,
};

/// Where a decision is asked for. The rules judge the same way for every
/// origin; only admission records Events on the object, since the audit
/// and `check` change nothing they judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A request from the API server (or `review`, which answers one).
    Admission,
    /// The audit, judging a stored object as its CREATE would be judged.
    Audit,
    /// `check`, judging a manifest offline.
    OfflineCheck,
}

impl Origin {
    /// The name used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admission => "admission",
            Self::Audit => "audit",
            Self::OfflineCheck => "offline-check",
        }
    }
}

/// What the rules make of a request, before they judge it.
#[derive(Debug, Clone)]
pub enum Subject<'a> {
    /// Not judged: CONNECT, a subresource.
    Skipped,
    /// A resource the webhook does not guard: allowed, with this warning.
    Unguarded(String),
    /// A CREATE or UPDATE that cannot be judged: the reason.
    Unjudgeable(String),
    /// A write the rules judge.
    Write {
        /// The write.
        write: RolloutWrite<'a>,
        /// The object's name (the permission is asked about it; empty on
        /// a CREATE with generateName).
        name: &'a str,
    },
    /// A write of a ConfigMap that carries (or carried) Numaplane's config
    /// label: rules 23 and 24.
    NamespaceConfig {
        /// The write.
        write: StrategyWrite<'a>,
        /// The ConfigMap's name (the permission is asked about it).
        name: &'a str,
    },
}

/// The typed input of [`decide`]: which webhook judges what, for whom.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// `/validate` or `/mutate`.
    pub webhook: Webhook,
    /// Who asks.
    pub origin: Origin,
    /// What is judged.
    pub subject: Subject<'a>,
}

/// Who may force, and how long asking may take.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a, P> {
    /// The source of the force permissions.
    pub authorizer: &'a P,
    /// How long one question may take.
    pub timeout: Duration,
}

/// What [`decide`] found.
#[derive(Debug)]
pub struct Decided {
    /// The decision.
    pub decision: Decision,
    /// Whether the rules judged it (false for CONNECT, other resources, ...).
    pub judged: bool,
    /// The RBAC check made for it, if one was.
    pub rbac: Option<RbacTrace>,
}

/// Judges `input` under `policy`, asking `asker` when a force needs a
/// permission the policy's lists do not settle.
pub async fn decide<P: ForcePermission>(
    policy: &Policy,
    input: Input<'_>,
    asker: Asker<'_, P>,
) -> Decided {
    let mut rbac = None;
    let (mut decision, judged) = match (input.subject, input.webhook) {
        (Subject::Skipped, _) | (Subject::Unguarded(_), Webhook::Mutate) => {
            (Decision::default(), false)
        }
        (Subject::Unguarded(why), Webhook::Validate) => {
            let mut decision = Decision::default();
            decision.audit.insert("not-judged".to_owned(), why.clone());
            decision.warnings.push(why);
            (decision, false)
        }
        (Subject::Unjudgeable(message), webhook) => {
            let mut decision = Decision::default();
            match webhook {
                // The validating webhook denies what it cannot judge.
                Webhook::Validate => decision.denials.push(Violation::Unjudgeable(message)),
                Webhook::Mutate => decision.warnings.push(format!("not defaulted: {message}")),
            }
            (decision, true)
        }
        // `/mutate` defaults PipelineRollouts only.
        (Subject::Write { write, .. }, Webhook::Mutate) if !write.is_pipeline_rollout() => {
            (Decision::default(), false)
        }
        (Subject::Write { write, .. }, Webhook::Mutate) => (rules::mutate(policy, &write), true),
        // Nothing in a ConfigMap is defaulted.
        (Subject::NamespaceConfig { .. }, Webhook::Mutate) => (Decision::default(), false),
        (Subject::NamespaceConfig { write, name }, Webhook::Validate) => {
            let (decision, trace) = validate_namespace_config(policy, write, name, asker).await;
            rbac = trace;
            (decision, true)
        }
        (Subject::Write { write, name }, Webhook::Validate) => {
            let (decision, trace) = validate(policy, write, name, asker).await;
            rbac = trace;
            (decision, true)
        }
    };
    if input.origin != Origin::Admission {
        decision.events.clear();
    }
    Decided {
        decision,
        judged,
        rbac,
    }
}

/// `/validate` on a write: the rules, and the permissions they need.
async fn validate<P: ForcePermission>(
    policy: &Policy,
    write: RolloutWrite<'_>,
    name: &str,
    asker: Asker<'_, P>,
) -> (Decision, Option<RbacTrace>) {
    let validation = rules::validate(policy, write);
    let kind = write.kind;
    let target = Target {
        group: kind.group(),
        resource: kind.resource(),
        namespace: write.namespace,
        name,
    };
    let user = write.user;
    let mut rbac = None;
    let force = match validation.settled_permission() {
        Some(settled) => settled,
        None => {
            let grant = policy.force_reapply.grant();
            let check = asker
                .authorizer
                .check(grant, user, target, asker.timeout)
                .await;
            rbac = check.rbac;
            check.permission
        }
    };
    let undrained = match validation.settled_undrained_permission() {
        Some(settled) => settled,
        None => {
            let grant = policy.force_reapply.delete_undrained.grant();
            let check = asker
                .authorizer
                .check(grant, user, target, asker.timeout)
                .await;
            rbac = check.rbac.or(rbac);
            check.permission
        }
    };
    let edit_children = match validation.settled_edit_permission() {
        Some(settled) => settled,
        None => {
            let grant = policy.force_reapply.edit_children.grant();
            let check = asker
                .authorizer
                .check(grant, user, target, asker.timeout)
                .await;
            rbac = check.rbac.or(rbac);
            check.permission
        }
    };
    (
        validation.finish(&Permissions {
            force,
            undrained,
            edit_children,
        }),
        rbac,
    )
}

/// `/validate` on a namespace-level ConfigMap: rules 23 and 24, and the
/// permission rule 24 needs, asked on the ConfigMap itself.
async fn validate_namespace_config<P: ForcePermission>(
    policy: &Policy,
    write: StrategyWrite<'_>,
    name: &str,
    asker: Asker<'_, P>,
) -> (Decision, Option<RbacTrace>) {
    let namespace = write.namespace;
    let user = write.user;
    let validation = namespace_strategy::validate(policy, write);
    let mut rbac = None;
    let permission = match validation.settled_permission() {
        Some(settled) => settled,
        None => {
            let target = Target {
                group: "",
                resource: CONFIGMAPS,
                namespace,
                name,
            };
            let check = asker
                .authorizer
                .check(validation.grant(), user, target, asker.timeout)
                .await;
            rbac = check.rbac;
            check.permission
        }
    };
    (validation.finish(&permission), rbac)
}
