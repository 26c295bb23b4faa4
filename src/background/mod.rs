//! Work that is not a request: tasks that run beside the server for as long
//! as the process does, later under an elected leader: the stale-force
//! [`sweeper`] and the [`audit`] of stored objects into PolicyReports.
//!
//! The dependency rule: background work uses [`crate::admission`],
//! [`crate::policy`], [`crate::rollout`], [`crate::events`] and the
//! Kubernetes client, never [`crate::server`]. What it needs from the
//! process it runs in (the policy in force, where Events go, where its work
//! is counted) it asks through a small trait such as
//! [`sweeper::SweeperHost`] or [`audit::AuditHost`], which the command
//! line's `serve` wiring implements for the server's shared state.

pub mod audit;
pub mod sweeper;
