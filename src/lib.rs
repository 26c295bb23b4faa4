//! pipelinerollout-webhook: a Kubernetes admission webhook for Numaplane
//! PipelineRollouts and the other rollouts.
//!
//! The data flows through the modules in this order: [`server`] (HTTPS in),
//! [`admission`] (AdmissionReview parsed, answer built), [`authz`] (who may
//! force a re-apply: static lists or RBAC), [`policy`] (the pure core: the
//! policy and the rules), [`rollout`] and [`lenient`] (the lenient view of
//! the object). Each module imports only from those after it.
//!
//! [`app`] is the composition root of `serve`: it reaches the API server
//! once ([`apiserver`]), builds the shared state, the [`events`] queue and
//! the [`metrics`] (one block per component, each fed by its component),
//! and hands them to the server and to [`background`]: the work that is
//! not a request, run by the elected leader (the stale-force sweeper, the
//! audit of stored rollouts into PolicyReports, the certificate controller
//! of `--manage-certs`) or in every replica (the certificate readiness
//! check). [`check`] (offline, for CI) judges manifests through
//! [`admission`], and [`logsink`] writes the log lines in batches off the
//! request path.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod apiserver;
pub mod app;
pub mod authz;
mod background;
mod check;
pub mod cli;
mod events;
pub mod kinds;
mod lenient;
mod logsink;
mod logtext;
mod metrics;
pub mod namespace_config;
pub mod pki;
pub mod policy;
pub mod rollout;
pub mod server;
mod skim;
pub mod vap;
