//! Tests that reach the webhook as a real server on 127.0.0.1 (in-process
//! `server::serve`, or the built binary) spoken to over HTTPS, and the
//! proptest properties of the parsing and decision path
//! (`admission_properties`): one test binary, one module per subject.

#[path = "../helm_support/mod.rs"]
mod helm_support;
#[path = "../https_support/mod.rs"]
mod https_support;

mod admission_bodies;
mod admission_properties;
mod bodies;
mod bookkeeping;
mod child_edits;
mod connections;
mod deletes;
mod drain_timeouts;
mod fixtures;
mod floods;
mod force_lifecycle;
mod logging;
mod namespace_config;
mod operations;
mod policy;
mod prometheus;
mod protocol;
mod rbac;
mod scope;
mod shutdown;
