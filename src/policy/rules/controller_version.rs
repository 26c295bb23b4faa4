//! Rule 27 on the versions: Numaplane installs the Numaflow controller a
//! NumaflowController names from the controller definitions, taking the
//! NumaflowController's own namespace's definition of that version before
//! the one in its own namespace, and applies its `fullSpec` with its own
//! account. So a NumaflowController or NumaflowControllerRollout that
//! names a version Numaplane would take from a user namespace (its own
//! namespace defines it, or only user namespaces do) needs the
//! controllerDefinitions permission, as writing such a definition does.
//! A version kept as it was needs nothing; Numaplane's own writes are not
//! judged. What the cluster defines is the webhook's own view of the
//! definitions, given here as data ([`Definitions`]).

use super::force::Settle;
use super::guarded_write::Operation;
use super::need::{Need, Pending, Permissions};
use super::verdict::{EventReason, Gate, Verdict};
use super::violation::{Violation, cut};
use crate::kinds::ControllerKind;
use crate::policy::model::Policy;
use crate::policy::user::UserInfo;
use crate::rollout::GuardedObject;

/// Where the controller definitions of one version are, as the webhook
/// knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Definitions {
    /// Read from the cluster.
    Found {
        /// The written object's own namespace defines it.
        own: bool,
        /// Numaplane's namespace defines it.
        numaplane: bool,
        /// A user namespace that defines it, if any.
        elsewhere: Option<String>,
    },
    /// Cannot be told: why.
    Unknown(String),
}

/// One CREATE or UPDATE of a NumaflowController or NumaflowControllerRollout.
#[derive(Debug, Clone)]
pub struct VersionWrite<'a> {
    pub(crate) kind: ControllerKind,
    pub(crate) operation: Operation,
    pub(crate) namespace: &'a str,
    pub(crate) user: &'a UserInfo,
    pub(crate) object: &'a GuardedObject,
    pub(crate) old_object: Option<&'a GuardedObject>,
    /// Where the version written is defined: filled in by whoever knows.
    pub(crate) definitions: Definitions,
}

impl VersionWrite<'_> {
    /// Asks `lookup` where the version written is defined, with Numaplane
    /// in `numaplane_namespace`.
    pub(crate) fn look_up(
        &mut self,
        lookup: Option<&dyn DefinitionLookup>,
        numaplane_namespace: &str,
    ) {
        self.definitions = match (self.new_version(), lookup) {
            (None, _) => Definitions::Found {
                own: false,
                numaplane: false,
                elsewhere: None,
            },
            (Some(version), Some(lookup)) => {
                lookup.definitions(self.namespace, numaplane_namespace, &version)
            }
            (Some(_), None) => {
                Definitions::Unknown("the webhook has no view of the definitions here".to_owned())
            }
        };
    }

    /// The version `object` names (`None`: none, or not a string).
    fn version_of(&self, object: &GuardedObject) -> Option<String> {
        let spec = object.child_content()?.spec()?;
        let mut at = &spec;
        for key in self.kind.version_path() {
            at = at.get(key)?;
        }
        at.as_str().map(str::to_owned)
    }

    /// The version written, when the write sets or changes it.
    fn new_version(&self) -> Option<String> {
        let version = self.version_of(self.object)?;
        let before = self.old_object.and_then(|old| self.version_of(old));
        (before.as_ref() != Some(&version)).then_some(version)
    }
}

/// Reads the definitions of a version: the server's watch, a test's table.
pub trait DefinitionLookup: Sync + std::fmt::Debug {
    /// Where `version` is defined, for an object in `namespace`, with
    /// Numaplane in `numaplane_namespace`.
    fn definitions(&self, namespace: &str, numaplane_namespace: &str, version: &str)
    -> Definitions;
}

/// What admission reads from the cluster besides the request: the
/// children (rule 29) and the controller definitions (rule 27).
pub trait ClusterView: super::ChildLookup + DefinitionLookup {}

impl<T: super::ChildLookup + DefinitionLookup> ClusterView for T {}

/// A `/validate` judgement of a version write, up to the permission.
#[derive(Debug)]
pub(crate) struct VersionValidation<'a> {
    policy: &'a Policy,
    write: VersionWrite<'a>,
    /// The version and where Numaplane would take it from, when gated.
    gated: Option<(String, String)>,
}

/// Judges a write of a NumaflowController or NumaflowControllerRollout,
/// short of the permission.
pub(crate) fn validate<'a>(policy: &'a Policy, write: VersionWrite<'a>) -> VersionValidation<'a> {
    let numaplane = &policy.numaplane;
    let judged = write.user.username() != numaplane.controller_account
        && write.namespace != numaplane.namespace
        && write.operation != Operation::Delete;
    let gated = write.new_version().filter(|_| judged).and_then(|version| {
        let from = match &write.definitions {
            Definitions::Found { own: true, .. } => {
                format!("namespace \"{}\"'s own definition", write.namespace)
            }
            Definitions::Found {
                numaplane: false,
                elsewhere: Some(other),
                ..
            } => format!(
                "only namespace \"{}\" defines it, not \"{}\"",
                cut(other, 64),
                numaplane.namespace
            ),
            Definitions::Found { .. } => return None,
            Definitions::Unknown(why) => format!("it could not be told where it is defined: {why}"),
        };
        Some((version, from))
    });
    VersionValidation {
        policy,
        write,
        gated,
    }
}

impl Pending for VersionValidation<'_> {
    /// Rule 27 asks `forceReapply.controllerDefinitions`'s.
    fn needs(&self, need: Need) -> bool {
        need == Need::ControllerDefinitions && self.gated.is_some()
    }

    fn finish(self, permissions: &Permissions) -> Verdict {
        let permission = &permissions[Need::ControllerDefinitions];
        let mut verdict = Verdict::default();
        let Some((version, from)) = self.gated else {
            return verdict;
        };
        let write = &self.write;
        let user = write.user.username();
        let version = cut(&version, 64);
        let outcome = permission
            .outcome()
            .map_err(|refused| Violation::ControllerVersionDenied {
                user: user.to_owned(),
                kind: write.kind,
                version: version.clone(),
                from: from.clone(),
                numaplane_namespace: self.policy.numaplane.namespace.clone(),
                refused,
            });
        let what = format!(
            "Numaflow controller version \"{version}\" on this {}, which Numaplane installs from {from}, with its own account",
            write.kind.kind()
        );
        let settle = Settle::plain(
            self.policy.mode,
            write.operation == Operation::Update,
            user,
            permission,
        );
        settle.gate_as(
            &mut verdict,
            Gate::ControllerDefinitions,
            (EventReason::ControllerDefinitionsAllowed, &what),
            outcome,
        );
        verdict.apply_mode(self.policy.mode);
        verdict
    }
}
