//! Tests of the built binary's commands (`review`, `check`, `check-policy`,
//! `export-vap`, `gen-certs`, `serve`'s start-up), run as a user or a CI
//! job runs them: one test binary, one module per command.

#[path = "../cel_support/mod.rs"]
mod cel_support;
#[path = "../https_support/mod.rs"]
mod https_support;

mod check;
mod commands;
mod export_mutating;
mod export_vap;
mod export_vap_children;
mod export_vap_deletion_timeout;
mod export_vap_namespace_config;
mod export_vap_rollout_deletes;
