//! pipelinerollout-webhook: a Kubernetes admission webhook for Numaplane
//! PipelineRollouts.
//!
//! The data flows through the modules in this order: [`server`] (HTTPS in),
//! [`admission`] (AdmissionReview parsed, answer built), [`rollout`] (the
//! lenient view of the object), [`policy`] (the pure rules), [`authz`] (who
//! may force a re-apply).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod authz;
pub mod certs;
pub mod cli;
pub mod lenient;
pub mod policy;
pub mod rollout;
pub mod server;
