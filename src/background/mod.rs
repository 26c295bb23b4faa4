//! Work that is not a request: controllers that run beside the server,
//! started and stopped by [`leader`] (in the replica that holds the Lease,
//! or in every replica with election off): the stale-force [`sweeper`],
//! the [`audit`] of stored objects into PolicyReports, and the certificate
//! controller of `--manage-certs` ([`certs`], whose readiness check runs in
//! every replica).
//!
//! The dependency rule: background work uses [`crate::admission`],
//! [`crate::policy`], [`crate::rollout`], [`crate::events`] and the
//! Kubernetes client, never [`crate::server`]. What it needs from the
//! process it runs in (the policy in force, where Events go, where its work
//! is counted) it asks through a small trait such as
//! [`sweeper::SweeperHost`] or [`audit::AuditHost`], which the command
//! line's `serve` wiring implements for the server's shared state.

pub mod audit;
pub mod certs;
pub mod leader;
pub mod sweeper;
