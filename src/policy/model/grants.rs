//! The grants under `forceReapply` that name who may pass one gate
//! (`deleteUndrained`, `namespaceStrategy`, `editChildren`): `users`,
//! `groups` and `rbacVerb`, each left out taking the value of the grant it
//! inherits from, and a section's own keys. One type, [`GrantSection`],
//! reads, resolves and writes them all; each section is a [`SectionKeys`]
//! that names it and holds its own keys.

use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::{Grant, RbacPolicy, base};

/// What makes one grant section differ from the others: its name, its
/// keys beyond `users`, `groups` and `rbacVerb`, and its built-in value.
pub trait SectionKeys: Clone + Default + fmt::Debug + PartialEq + Eq {
    /// The section's name in serde's messages.
    const NAME: &'static str;
    /// The policy key of the section, for messages.
    const KEY: &'static str;
    /// Every key of the section: `users`, `groups`, `rbacVerb`, then its own.
    const FIELDS: &'static [&'static str];
    /// The section as the built-in policy sets it.
    fn base() -> GrantSection<Self>;
    /// Reads the value of `FIELDS[field]`, one of the section's own keys.
    fn read<'de, A: MapAccess<'de>>(&mut self, field: usize, map: &mut A) -> Result<(), A::Error>;
    /// Writes the section's own keys.
    fn write<S: SerializeStruct>(&self, out: &mut S) -> Result<(), S::Error>;
}

/// The keys every grant section starts with, as [`SectionKeys::FIELDS`]
/// lists them.
const USERS: usize = 0;
const GROUPS: usize = 1;
const RBAC_VERB: usize = 2;

/// One grant section: its lists and RBAC verb as written (a key left out is
/// `None`), as resolved at load from the grant it inherits from, and its
/// own keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrantSection<K> {
    /// `users` as written; left out: inherited.
    given_users: Option<BTreeSet<String>>,
    /// `groups` as written; left out: inherited.
    given_groups: Option<BTreeSet<String>>,
    /// `rbacVerb` as written; left out: inherited.
    pub(crate) rbac_verb: Option<String>,
    pub(crate) users: BTreeSet<String>,
    pub(crate) groups: BTreeSet<String>,
    /// RBAC asked when the lists say no: the inherited RBAC with this
    /// gate's verb (`None` when forceReapply.rbac is off).
    pub(crate) rbac: Option<RbacPolicy>,
    /// The section's own keys.
    pub own: K,
}

impl<K: SectionKeys> GrantSection<K> {
    /// Resolves what the section inherits: each list as written, else
    /// `users` and `groups`; the RBAC `rbac` with the verb as written, else
    /// `rbac`'s verb (none when `rbac` is none). What was inherited is then
    /// written in, so that the policy renders with every key spelled out.
    pub(crate) fn inherit(
        &mut self,
        users: &BTreeSet<String>,
        groups: &BTreeSet<String>,
        rbac: Option<&RbacPolicy>,
    ) {
        self.users = self
            .given_users
            .get_or_insert_with(|| users.clone())
            .clone();
        self.groups = self
            .given_groups
            .get_or_insert_with(|| groups.clone())
            .clone();
        self.rbac = rbac.map(|r| RbacPolicy {
            verb: self.rbac_verb.clone().unwrap_or_else(|| r.verb.clone()),
            ..r.clone()
        });
        self.rbac_verb = self.rbac.as_ref().map(|r| r.verb.clone());
    }

    /// Who may pass the gate, as the permission check reads it.
    pub(crate) fn grant(&self) -> Grant<'_> {
        Grant {
            key: K::KEY,
            users: &self.users,
            groups: &self.groups,
            rbac: self.rbac.as_ref(),
        }
    }
}

/// A key of a section, identified as serde's derived readers identify
/// one: by its index in `FIELDS`, an unknown key refused with the list.
struct Field(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Field {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        struct Name(&'static [&'static str]);
        impl Visitor<'_> for Name {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
                self.0
                    .iter()
                    .position(|f| *f == v)
                    .ok_or_else(|| E::unknown_field(v, self.0))
            }
        }
        deserializer.deserialize_identifier(Name(self.0))
    }
}

/// Read as serde derives a struct with `deny_unknown_fields` and the
/// built-in section as its default: a key left out takes the built-in
/// value, but `users`, `groups` and `rbacVerb`, which are then `None`.
impl<'de, K: SectionKeys> Deserialize<'de> for GrantSection<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Section<K>(PhantomData<K>);
        impl<'de, K: SectionKeys> Visitor<'de> for Section<K> {
            type Value = GrantSection<K>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "struct {}", K::NAME)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut section = GrantSection {
                    given_users: None,
                    given_groups: None,
                    rbac_verb: None,
                    ..K::base()
                };
                let mut seen = [false; 8];
                while let Some(field) = map.next_key_seed(Field(K::FIELDS))? {
                    if let Some(seen) = seen.get_mut(field) {
                        if *seen {
                            return Err(de::Error::duplicate_field(K::FIELDS[field]));
                        }
                        *seen = true;
                    }
                    match field {
                        USERS => section.given_users = map.next_value()?,
                        GROUPS => section.given_groups = map.next_value()?,
                        RBAC_VERB => section.rbac_verb = map.next_value()?,
                        own => section.own.read(own, &mut map)?,
                    }
                }
                Ok(section)
            }
        }
        deserializer.deserialize_struct(K::NAME, K::FIELDS, Section(PhantomData))
    }
}

/// Written as serde derives it: the lists and the verb when set, then the
/// section's own keys.
impl<K: SectionKeys> Serialize for GrantSection<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct(K::NAME, K::FIELDS.len())?;
        for (field, value) in [(USERS, &self.given_users), (GROUPS, &self.given_groups)] {
            match value {
                Some(v) => out.serialize_field(K::FIELDS[field], v)?,
                None => out.skip_field(K::FIELDS[field])?,
            }
        }
        match &self.rbac_verb {
            Some(v) => out.serialize_field(K::FIELDS[RBAC_VERB], v)?,
            None => out.skip_field(K::FIELDS[RBAC_VERB])?,
        }
        self.own.write(&mut out)?;
        out.end()
    }
}

/// Who may set `marked-for-deletion: "true"` on a recyclable Pipeline (or
/// in a PipelineRollout's `spec.pipeline.metadata`): Numaplane deletes it
/// without draining. Resolved at load: keys left out take forceReapply's.
pub(crate) type DeleteUndrained = GrantSection<UndrainedDeletes>;

/// `forceReapply.deleteUndrained`'s own keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UndrainedDeletes {
    /// The accounts that delete a rollout's children as Kubernetes itself
    /// (the garbage collector, the namespace controller): their DELETEs of
    /// children are allowed unasked, as Numaplane's controller's are.
    pub system_deleters: BTreeSet<String>,
    /// A DELETE of a PipelineRollout needs this permission too (its
    /// Pipelines are then drained for at most their deletion timeout).
    pub gate_rollout_deletes: bool,
}

impl SectionKeys for UndrainedDeletes {
    const NAME: &'static str = "DeleteUndrained";
    const KEY: &'static str = "forceReapply.deleteUndrained";
    const FIELDS: &'static [&'static str] = &[
        "users",
        "groups",
        "rbacVerb",
        "systemDeleters",
        "gateRolloutDeletes",
    ];

    fn base() -> GrantSection<Self> {
        base(|p, _| p.force_reapply.delete_undrained.clone())
    }

    fn read<'de, A: MapAccess<'de>>(&mut self, field: usize, map: &mut A) -> Result<(), A::Error> {
        if field == 3 {
            self.system_deleters = map.next_value()?;
        } else {
            self.gate_rollout_deletes = map.next_value()?;
        }
        Ok(())
    }

    fn write<S: SerializeStruct>(&self, out: &mut S) -> Result<(), S::Error> {
        out.serialize_field(Self::FIELDS[3], &self.system_deleters)?;
        out.serialize_field(Self::FIELDS[4], &self.gate_rollout_deletes)
    }
}

/// Who may set `upgradeStrategy: no-strategy` (or empty, or blank) in
/// Numaplane's namespace-level ConfigMap: every rollout of the namespace
/// then upgrades by plain apply, with no pause and no drain. Resolved at
/// load: keys left out take forceReapply's. RBAC is asked on the ConfigMap
/// (`configmaps`, core group) in its namespace.
pub(crate) type NamespaceStrategy = GrantSection<StrategyKeys>;

/// `forceReapply.namespaceStrategy`: no keys of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StrategyKeys;

/// Who may change a rollout's child the way only Numaplane's and Numaflow's
/// controllers otherwise do (rule 26): its spec (but scaling and pausing),
/// status, ownerReferences, finalizers, and its keys under Numaplane's and
/// Numaflow's prefixes. Resolved at load: keys left out take
/// forceReapply.deleteUndrained's. RBAC is asked on the child's own
/// resource in its namespace.
pub(crate) type EditChildren = GrantSection<ChildEditKeys>;

/// `forceReapply.editChildren`: no keys of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ChildEditKeys;

/// Who may write Numaflow controller definitions (a ConfigMap labelled
/// `numaplane.numaproj.io/config: numaflow-controller-definitions`)
/// outside Numaplane's own namespace: Numaplane applies their `fullSpec`
/// with its own account, which can create RoleBindings. Resolved at load:
/// keys left out take forceReapply's. RBAC is asked on the ConfigMap
/// (`configmaps`, core group) in its namespace.
pub(crate) type ControllerDefinitions = GrantSection<DefinitionKeys>;

/// `forceReapply.controllerDefinitions`: no keys of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DefinitionKeys;

/// A section with no keys of its own.
macro_rules! lists_only {
    ($keys:ty, $name:literal, $key:literal, $field:ident) => {
        impl SectionKeys for $keys {
            const NAME: &'static str = $name;
            const KEY: &'static str = $key;
            const FIELDS: &'static [&'static str] = &["users", "groups", "rbacVerb"];

            fn base() -> GrantSection<Self> {
                base(|p, _| p.force_reapply.$field.clone())
            }

            fn read<'de, A: MapAccess<'de>>(
                &mut self,
                _: usize,
                _: &mut A,
            ) -> Result<(), A::Error> {
                Ok(())
            }

            fn write<S: SerializeStruct>(&self, _: &mut S) -> Result<(), S::Error> {
                Ok(())
            }
        }
    };
}

lists_only!(
    StrategyKeys,
    "NamespaceStrategy",
    "forceReapply.namespaceStrategy",
    namespace_strategy
);
lists_only!(
    DefinitionKeys,
    "ControllerDefinitions",
    "forceReapply.controllerDefinitions",
    controller_definitions
);
lists_only!(
    ChildEditKeys,
    "EditChildren",
    "forceReapply.editChildren",
    edit_children
);
