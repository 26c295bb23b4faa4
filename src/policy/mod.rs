//! The organisation's policy and the pure admission rules: the core of the
//! webhook. It imports nothing from the layers above it (admission, authz,
//! server, cli): who is asking ([`UserInfo`]) and whether they may
//! ([`Permission`]) are types it owns, filled in by those layers.
//!
//! Inside, the data moves one way: [`user`], [`timestamp`] and [`duration`]
//! ← [`model`] (also the policy file's schema) ← [`rules`] ← `coherence` ←
//! `file` (reading and rendering the policy file); each imports only from
//! those before it.

mod coherence;
pub mod duration;
mod error;
mod file;
pub mod model;
pub mod rules;
pub mod timestamp;
pub mod user;

pub use duration::format_seconds;
pub use error::PolicyError;
pub use file::BUILT_IN_POLICY;
pub use model::{
    DefaultTimeout, DeleteUndrained, DrainTimeout, ForceReapply, Grant, MAX_CLOCK_SECONDS,
    MAX_NO_TIMEOUT_SECONDS, MAX_RECYCLE_MULTIPLIER, Mode, NamespaceRules, NamespaceStrategy,
    Numaplane, Policy, RbacPolicy, Scope, TimeoutRules, wildcard_match,
};
pub use user::{Permission, UserInfo};
