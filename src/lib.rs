//! pipelinerollout-webhook: a Kubernetes admission webhook for Numaplane
//! PipelineRollouts.
//!
//! The data flows through the modules in this order: [`server`] (HTTPS in),
//! [`admission`] (AdmissionReview parsed, answer built), [`authz`] (who may
//! force a re-apply: static lists or RBAC), [`policy`] (the pure core: the
//! policy and the rules), [`rollout`] and [`lenient`] (the lenient view of
//! the object). Each module imports only from those after it. Beside the
//! server, [`background`] holds work that is not a request (the sweeper
//! resets forces whose pause ended without a write), [`events`] publishes
//! Kubernetes Events for both, [`check`] (offline, for CI) judges manifests
//! through [`admission`], and [`logsink`] writes the log lines in batches
//! off the request path.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod authz;
pub mod background;
pub mod check;
pub mod cli;
pub mod events;
pub mod kinds;
pub mod lenient;
pub mod logsink;
pub mod logtext;
pub mod match_conditions;
pub mod pki;
pub mod policy;
pub mod rollout;
pub mod server;
pub mod vap;
