//! The verdict, on typed input, as a pure and synchronous core: what a
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
pub(crate) use crate::policy::rules::Need;
use crate::policy::rules::{
    self, GuardedWrite, MadeValidation, MadeWrite, Pending, Permissions, StrategyValidation,
    StrategyWrite, Validation, Verdict, VersionValidation, VersionWrite, Violation,
    controller_version, made_objects, namespace_strategy,
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
    Write {
        write: GuardedWrite<'a>,
        /// The object's name (the permission is asked about it; empty on
        /// a CREATE with generateName).
        name: &'a str,
    },
    /// A write of a Vertex, Deployment, StatefulSet or Service that Numaflow
    /// may have made for a child: rule 29.
    Made { write: MadeWrite<'a>, name: &'a str },
    /// A write of a NumaflowController or NumaflowControllerRollout: rule
    /// 27 on the version it names.
    ControllerVersion {
        write: VersionWrite<'a>,
        name: &'a str,
    },
    /// A write of a ConfigMap that carries (or carried) Numaplane's config
    /// label: rules 23 and 24.
    NamespaceConfig {
        write: StrategyWrite<'a>,
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

/// A permission a judgement waits for: may `user` have `grant` on `target`?
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// Which grant, so that the answer finds its place.
    pub(crate) need: Need,
    /// Who the policy lets have it, and how RBAC is asked.
    pub grant: Grant<'a>,
    pub user: &'a UserInfo,
    /// The object the permission is asked on.
    pub(crate) target: Target<'a>,
}

/// A judgement up to the permissions it needs: ask its
/// [`questions`](Judgement::questions), then [`finish`](Judgement::finish) it.
#[derive(Debug)]
pub struct Judgement<'a> {
    state: State<'a>,
}

/// Where a judgement stands. A judgement lives on the stack for one
/// request, so its size costs nothing that boxing the large variant (an
/// allocation per request) would save.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum State<'a> {
    /// Nothing left to ask: the verdict, and whether the rules judged.
    Done(Verdict, bool),
    /// `/validate` short of its permissions.
    Open(Settled<'a>, Open<'a>),
}

impl<'a> State<'a> {
    /// `/validate` short of what `pending` needs, asked of `user` on
    /// `target`; `open` names which judgement it is.
    fn open<P: Pending>(
        pending: P,
        policy: &'a Policy,
        user: &'a UserInfo,
        target: Target<'a>,
        open: fn(P) -> Open<'a>,
    ) -> Self {
        Self::Open(Settled::of(&pending, policy, user, target), open(pending))
    }
}

/// An open judgement's permissions as far as they are settled without
/// asking, and whom the others are asked of, on what.
#[derive(Debug)]
struct Settled<'a> {
    /// One per [`Need`]: `NotAsked` stands for those to ask until they
    /// are answered.
    permissions: Permissions,
    /// Whether each [`Need`]'s permission is asked.
    ask: [bool; Need::ALL.len()],
    policy: &'a Policy,
    user: &'a UserInfo,
    target: Target<'a>,
}

impl<'a> Settled<'a> {
    /// `pending`'s settled permissions, the others asked of `user` on
    /// `target` under `policy`.
    fn of(
        pending: &impl Pending,
        policy: &'a Policy,
        user: &'a UserInfo,
        target: Target<'a>,
    ) -> Self {
        let mut ask = [false; Need::ALL.len()];
        let permissions = Permissions(Need::ALL.map(|need| {
            pending.settled(need).unwrap_or_else(|| {
                ask[need as usize] = true;
                Permission::NotAsked
            })
        }));
        Self {
            permissions,
            ask,
            policy,
            user,
            target,
        }
    }

    /// The questions of the permissions asked, in [`Need::ALL`]'s order.
    fn questions(&self) -> impl Iterator<Item = Question<'a>> + use<'a, '_> {
        Need::ALL
            .into_iter()
            .filter(|need| self.ask[*need as usize])
            .map(|need| self.question(need))
    }

    fn question(&self, need: Need) -> Question<'a> {
        Question {
            need,
            grant: need.grant(self.policy),
            user: self.user,
            target: self.target,
        }
    }

    /// Every permission: the settled ones, and `answer`'s to the
    /// questions (answered in place, so that they are not moved).
    fn answered(&mut self, answer: &mut impl FnMut(&Question<'a>) -> Permission) -> &Permissions {
        for need in Need::ALL {
            if self.ask[need as usize] {
                self.permissions.0[need as usize] = answer(&self.question(need));
            }
        }
        &self.permissions
    }
}

/// A `/validate` judgement short of its permissions.
#[derive(Debug)]
enum Open<'a> {
    /// On a write of a rollout or a child: rules 6, 7, 13, 14, 20, 21, 26.
    Write(Validation<'a>),
    /// On a namespace-level ConfigMap: rules 24 and 27.
    NamespaceConfig(StrategyValidation<'a>),
    /// On what Numaflow makes: rule 29.
    Made(MadeValidation<'a>),
    /// On a controller version: rule 27.
    Version(VersionValidation<'a>),
}

/// Judges `input` under `policy`, short of the permissions no policy list
/// settles: the [`Judgement`] names them.
pub fn decide<'a>(policy: &'a Policy, input: Input<'a>) -> Judgement<'a> {
    Judgement {
        state: match (input.subject, input.webhook) {
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
                State::open(validation, policy, user, target, Open::Version)
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
                State::open(validation, policy, user, target, Open::Made)
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
                State::open(validation, policy, user, target, Open::NamespaceConfig)
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
                State::open(validation, policy, user, target, Open::Write)
            }
        },
    }
}

impl<'a> Judgement<'a> {
    /// The permissions the judgement still needs, in the order they are
    /// asked (none for most requests).
    pub(crate) fn questions(&self) -> impl Iterator<Item = Question<'a>> + use<'a, '_> {
        let settled = match &self.state {
            State::Done(..) => None,
            State::Open(settled, _) => Some(settled),
        };
        settled.into_iter().flat_map(Settled::questions)
    }

    /// Whether the rules judge the request (false for CONNECT, other
    /// resources, ...).
    pub fn judged(&self) -> bool {
        matches!(self.state, State::Done(_, true) | State::Open(..))
    }

    /// Finishes the judgement with its verdict, `answer` giving the
    /// permission each open question asks about (it is not called when
    /// none is open).
    pub fn finish(self, mut answer: impl FnMut(&Question<'a>) -> Permission) -> Verdict {
        // Each kind of judgement is matched where it lies, so that it is
        // moved once, into its finish.
        match self.state {
            State::Done(verdict, _) => verdict,
            State::Open(mut settled, Open::Write(validation)) => {
                validation.finish(settled.answered(&mut answer))
            }
            State::Open(mut settled, Open::NamespaceConfig(validation)) => {
                validation.finish(settled.answered(&mut answer))
            }
            State::Open(mut settled, Open::Made(validation)) => {
                validation.finish(settled.answered(&mut answer))
            }
            State::Open(mut settled, Open::Version(validation)) => {
                validation.finish(settled.answered(&mut answer))
            }
        }
    }
}

#[cfg(test)]
mod tests;
