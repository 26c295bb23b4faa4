//! Work that is not a request: controllers that run beside the server,
//! built by [`crate::app`] and started and stopped by [`leader`] (in the
//! replica that holds the Lease, or in every replica with election off):
//! the stale-force [`sweeper`], the [`audit`] of stored objects into
//! PolicyReports, and the certificate controller of `--manage-certs`
//! ([`certs`], whose readiness check runs in every replica). Every replica
//! also follows Numaplane's cluster default strategy
//! ([`numaplane_default`]), the children and the controller definitions
//! ([`watched`]), which admission reads.
//!
//! The dependency rule: background work uses [`crate::admission`],
//! [`crate::policy`], [`crate::rollout`], [`crate::events`],
//! [`crate::metrics`] and the Kubernetes client, never [`crate::server`].
//! What it needs from the process it runs in it is handed as values: the
//! policy in force as a `watch` channel, the Event queue, its own block of
//! metrics; the readiness check reports through one small trait,
//! [`certs::readiness::ServedCertificate`].

pub mod audit;
pub mod backoff;
pub mod certs;
pub mod leader;
pub mod list;
pub mod numaplane_default;
pub mod rollout_watch;
pub mod sweeper;
pub mod watched;
