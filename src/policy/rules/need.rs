//! The permissions a judgement may need: [`Need`] names each of the
//! policy's grants a gate reads, [`Permissions`] holds the requester's
//! answer to each, and [`Pending`] is what every judgement short of them
//! says: which it needs, which are settled without asking, and its finish.

use std::ops::Index;

use super::Verdict;
use crate::policy::model::{Grant, Policy};
use crate::policy::user::Permission;

/// One of the policy's grants a gate reads, in the order they are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// `forceReapply`: rules 6, 7 and 13.
    ForceReapply,
    /// `forceReapply.deleteUndrained`: rules 14, 20 and 21.
    DeleteUndrained,
    /// `forceReapply.editChildren`: rules 26 and 29.
    EditChildren,
    /// `forceReapply.namespaceStrategy`: rule 24.
    NamespaceStrategy,
    /// `forceReapply.controllerDefinitions`: rule 27.
    ControllerDefinitions,
}

impl Need {
    /// Every grant, in the order they are asked.
    pub(crate) const ALL: [Self; 5] = [
        Self::ForceReapply,
        Self::DeleteUndrained,
        Self::EditChildren,
        Self::NamespaceStrategy,
        Self::ControllerDefinitions,
    ];

    /// Who `policy` lets have it, and how RBAC is asked.
    pub(crate) fn grant(self, policy: &Policy) -> Grant<'_> {
        let reapply = &policy.force_reapply;
        match self {
            Self::ForceReapply => reapply.grant(),
            Self::DeleteUndrained => reapply.delete_undrained.grant(),
            Self::EditChildren => reapply.edit_children.grant(),
            Self::NamespaceStrategy => reapply.namespace_strategy.grant(),
            Self::ControllerDefinitions => reapply.controller_definitions.grant(),
        }
    }
}

/// The requester's permissions, one per [`Need`] in [`Need::ALL`]'s order
/// (`NotNeeded` for those a judgement does not read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Permissions(pub [Permission; Need::ALL.len()]);

impl Index<Need> for Permissions {
    type Output = Permission;

    fn index(&self, need: Need) -> &Permission {
        &self.0[need as usize]
    }
}

/// A judgement up to the permissions it needs: everything that needs no
/// I/O is worked out; [`finish`](Pending::finish) completes it.
pub(crate) trait Pending {
    /// Whether the write needs `need`'s permission.
    fn needs(&self, need: Need) -> bool;

    /// A permission, when it is settled without asking: not needed.
    /// `None`: ask (the static lists, then RBAC).
    fn settled(&self, need: Need) -> Option<Permission> {
        (!self.needs(need)).then_some(Permission::NotNeeded)
    }

    /// Finishes the judgement with the requester's permissions (the
    /// settled ones, or the answers of whoever was asked).
    fn finish(self, permissions: &Permissions) -> Verdict;
}
