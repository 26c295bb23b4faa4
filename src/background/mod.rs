//! Work that is not a request: tasks that run beside the server for as long
//! as the process does, later under an elected leader. Today that is the
//! stale-force [`sweeper`] and the certificates of `--manage-certs`
//! ([`certs`]).
//!
//! The dependency rule: background work uses [`crate::admission`],
//! [`crate::policy`], [`crate::rollout`], [`crate::events`] and the
//! Kubernetes client, never [`crate::server`]. What it needs from the
//! process it runs in (the policy in force, where Events go, where its work
//! is counted) it asks through a small trait such as
//! [`sweeper::SweeperHost`], which the command line's `serve` wiring
//! implements for the server's shared state.

pub mod certs;
pub mod sweeper;
