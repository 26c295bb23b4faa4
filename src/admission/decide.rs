//! The decision, on typed input, as a pure and synchronous core: what a
//! request (or a stored object the audit judges, or a manifest `check`
//! judges) is, and the rules applied to it. [`decide`] judges everything
//! that needs no I/O and names the permissions it still needs as
//! [`Question`]s; [`Judgement::finish`] completes it with their answers.
//! Only the server asks anyone (RBAC, in [`super::answer`]); the audit
//! and `check` answer from what they know. No JSON and no AdmissionReview
//! here: [`super::answer`] reads those and writes the answer.

use super::Webhook;
use crate::authz::Target;
use crate::kinds::CONFIGMAPS;
use crate::policy::rules::{
    self, GuardedWrite, MadeValidation, MadeWrite, Permissions, StrategyValidation, StrategyWrite,
    Validation, Verdict, VersionValidation, VersionWrite, Violation, controller_version,
    made_objects, namespace_strategy,
};
use crate::policy::{Grant, Permission, Policy, UserInfo};

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
        write: GuardedWrite<'a>,
        /// The object's name (the permission is asked about it; empty on
        /// a CREATE with generateName).
        name: &'a str,
    },
    /// A write of a Vertex, Deployment, StatefulSet or Service that Numaflow
    /// may have made for a child: rule 29.
    Made {
        /// The write.
        write: MadeWrite<'a>,
        /// The object's name (the permission is asked about it).
        name: &'a str,
    },
    /// A write of a NumaflowController or NumaflowControllerRollout: rule
    /// 27 on the version it names.
    ControllerVersion {
        /// The write.
        write: VersionWrite<'a>,
        /// The object's name (the permission is asked about it).
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

/// The typed input of [`decide`]: which webhook judges what.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// `/validate` or `/mutate`.
    pub webhook: Webhook,
    /// What is judged.
    pub subject: Subject<'a>,
}

/// Which of the policy's grants a [`Question`] asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `forceReapply`: rules 6, 7 and 13.
    ForceReapply,
    /// `forceReapply.deleteUndrained`: rules 14, 20 and 21.
    DeleteUndrained,
    /// `forceReapply.editChildren`: rules 26 and 29.
    EditChildren,
    /// `forceReapply.namespaceStrategy`: rule 24.
    NamespaceStrategy,
    /// `forceReapply.controllerDefinitions`: rule 27 on a version.
    ControllerDefinitions,
}

/// A permission a judgement waits for: may `user` have `grant` on `target`?
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// Which grant, so that the answer finds its place.
    pub need: Need,
    /// Who the policy lets have it, and how RBAC is asked.
    pub grant: Grant<'a>,
    /// The requester.
    pub user: &'a UserInfo,
    /// The object the permission is asked on.
    pub target: Target<'a>,
}

/// What [`Judgement::finish`] found.
#[derive(Debug)]
pub struct Decided {
    /// The verdict.
    pub verdict: Verdict,
    /// Whether the rules judged it (false for CONNECT, other resources, ...).
    pub judged: bool,
}

/// A judgement up to the permissions it needs: ask its
/// [`questions`](Judgement::questions), then [`finish`](Judgement::finish) it.
#[derive(Debug)]
pub struct Judgement<'a> {
    state: State<'a>,
}

/// One permission a judgement reads: settled without asking (`Ok`), or
/// the question to ask (`Err`).
type Slot<'a> = Result<Permission, Question<'a>>;

/// Where a judgement stands. A judgement lives on the stack for one
/// request, so its size costs nothing that boxing the large variant (an
/// allocation per request) would save.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum State<'a> {
    /// Nothing left to ask: the verdict, and whether the rules judged.
    Done(Verdict, bool),
    /// `/validate` on a write, and its three permissions: forceReapply's,
    /// deleteUndrained's, editChildren's.
    Write(Validation<'a>, [Slot<'a>; 3]),
    /// `/validate` on a namespace-level ConfigMap, and rule 24's permission.
    NamespaceConfig(StrategyValidation<'a>, Slot<'a>),
    /// `/validate` on what Numaflow makes, and rule 29's permission.
    Made(MadeValidation<'a>, Slot<'a>),
    /// `/validate` on a controller version, and rule 27's permission.
    Version(VersionValidation<'a>, Slot<'a>),
}

/// The slot of one permission: `settled`, else the question of `grant`.
fn slot<'a>(
    settled: Option<Permission>,
    need: Need,
    grant: Grant<'a>,
    user: &'a UserInfo,
    target: Target<'a>,
) -> Slot<'a> {
    settled.ok_or(Question {
        need,
        grant,
        user,
        target,
    })
}

/// Judges `input` under `policy`, short of the permissions no policy list
/// settles: the [`Judgement`] names them.
pub fn decide<'a>(policy: &'a Policy, input: Input<'a>) -> Judgement<'a> {
    let state = match (input.subject, input.webhook) {
        (Subject::Skipped, _) | (Subject::Unguarded(_), Webhook::Mutate) => {
            State::Done(Verdict::default(), false)
        }
        (Subject::Unguarded(why), Webhook::Validate) => {
            let mut verdict = Verdict::default();
            verdict.audit.insert("not-judged".to_owned(), why.clone());
            verdict.warnings.push(why);
            State::Done(verdict, false)
        }
        (Subject::Unjudgeable(message), webhook) => {
            let mut verdict = Verdict::default();
            match webhook {
                // The validating webhook denies what it cannot judge.
                Webhook::Validate => verdict.denials.push(Violation::Unjudgeable(message)),
                Webhook::Mutate => verdict.warnings.push(format!("not defaulted: {message}")),
            }
            State::Done(verdict, true)
        }
        // `/mutate` defaults PipelineRollouts only.
        (Subject::Write { write, .. }, Webhook::Mutate) if !write.is_pipeline_rollout() => {
            State::Done(Verdict::default(), false)
        }
        (Subject::Write { write, .. }, Webhook::Mutate) => {
            State::Done(rules::mutate(policy, &write), true)
        }
        // Nothing in a ConfigMap is defaulted.
        (Subject::NamespaceConfig { .. }, Webhook::Mutate) => {
            State::Done(Verdict::default(), false)
        }
        (Subject::Made { .. } | Subject::ControllerVersion { .. }, Webhook::Mutate) => {
            State::Done(Verdict::default(), false)
        }
        (Subject::ControllerVersion { write, .. }, Webhook::Validate) => {
            // Asked on the namespace's ConfigMaps, as for writing a
            // definition there (rule 27).
            let target = Target {
                group: "",
                resource: CONFIGMAPS,
                namespace: write.namespace,
                name: "",
            };
            let user = write.user;
            let validation = controller_version::validate(policy, write);
            let permission = slot(
                validation.settled_permission(),
                Need::ControllerDefinitions,
                validation.grant(),
                user,
                target,
            );
            State::Version(validation, permission)
        }
        (Subject::Made { write, .. }, Webhook::Validate) => {
            let (namespace, user) = (write.namespace, write.user);
            let validation = made_objects::validate(policy, write);
            // Asked on the kind of child the object belongs to, in its
            // namespace, as rule 26 asks on the child (a Pipeline's when
            // that cannot be told).
            let kind = validation
                .child_kind()
                .unwrap_or(crate::kinds::Kind::Pipeline);
            let target = Target {
                group: kind.group(),
                resource: kind.resource(),
                namespace,
                name: "",
            };
            let permission = slot(
                validation.settled_permission(),
                Need::EditChildren,
                validation.grant(),
                user,
                target,
            );
            State::Made(validation, permission)
        }
        (Subject::NamespaceConfig { write, name }, Webhook::Validate) => {
            let target = Target {
                group: "",
                resource: CONFIGMAPS,
                namespace: write.namespace,
                name,
            };
            let user = write.user;
            let validation = namespace_strategy::validate(policy, write);
            let permission = slot(
                validation.settled_permission(),
                Need::NamespaceStrategy,
                validation.grant(),
                user,
                target,
            );
            State::NamespaceConfig(validation, permission)
        }
        (Subject::Write { write, name }, Webhook::Validate) => {
            let target = Target {
                group: write.kind.group(),
                resource: write.kind.resource(),
                namespace: write.namespace,
                name,
            };
            let user = write.user;
            let validation = rules::validate(policy, write);
            let reapply = &policy.force_reapply;
            let slots = [
                slot(
                    validation.settled_permission(),
                    Need::ForceReapply,
                    reapply.grant(),
                    user,
                    target,
                ),
                slot(
                    validation.settled_undrained_permission(),
                    Need::DeleteUndrained,
                    reapply.delete_undrained.grant(),
                    user,
                    target,
                ),
                slot(
                    validation.settled_edit_permission(),
                    Need::EditChildren,
                    reapply.edit_children.grant(),
                    user,
                    target,
                ),
            ];
            State::Write(validation, slots)
        }
    };
    Judgement { state }
}

impl<'a> Judgement<'a> {
    /// The permissions the judgement still needs, in the order they are
    /// asked (none for most requests).
    pub fn questions(&self) -> impl Iterator<Item = Question<'a>> + use<'a, '_> {
        let slots: &[Slot<'a>] = match &self.state {
            State::Done(..) => &[],
            State::Write(_, slots) => slots,
            State::NamespaceConfig(_, slot) | State::Made(_, slot) | State::Version(_, slot) => {
                std::slice::from_ref(slot)
            }
        };
        slots.iter().filter_map(|slot| slot.as_ref().err().copied())
    }

    /// Finishes the judgement, `answer` giving the permission each open
    /// question asks about (it is not called when none is open).
    pub fn finish(self, mut answer: impl FnMut(&Question<'a>) -> Permission) -> Decided {
        let mut answered = |slot: Slot<'a>| slot.unwrap_or_else(|question| answer(&question));
        match self.state {
            State::Done(verdict, judged) => Decided { verdict, judged },
            State::Write(validation, [force, undrained, edit_children]) => Decided {
                verdict: validation.finish(&Permissions {
                    force: answered(force),
                    undrained: answered(undrained),
                    edit_children: answered(edit_children),
                }),
                judged: true,
            },
            State::Version(validation, permission) => Decided {
                verdict: validation.finish(&answered(permission)),
                judged: true,
            },
            State::Made(validation, permission) => Decided {
                verdict: validation.finish(&answered(permission)),
                judged: true,
            },
            State::NamespaceConfig(validation, permission) => Decided {
                verdict: validation.finish(&answered(permission)),
                judged: true,
            },
        }
    }
}

#[cfg(test)]
mod tests;
