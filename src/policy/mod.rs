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
mod duration;
mod error;
mod file;
pub(crate) mod model;
pub mod rules;
pub(crate) mod timestamp;
mod user;

pub(crate) use duration::format_seconds;
pub(crate) use error::PolicyError;
pub(crate) use model::{Grant, RbacPolicy};
pub use model::{Mode, Policy};
pub(crate) use user::{Permission, UserInfo};
