//! Tests through a real kube-apiserver and etcd, with the webhook binary
//! registered by the project's manifests (the `envtest` crate): one test
//! binary, one module per subject. The self-managed certificates have a
//! binary of their own (`tests/apiserver_certs`), where every test runs
//! alone.

#[path = "../cel_support/mod.rs"]
mod cel_support;
#[path = "../helm_support/mod.rs"]
mod helm_support;

mod apiserver_children_support;
mod apiserver_leader_support;
mod apiserver_numaflow_support;
mod apiserver_support;
mod apiserver_vap_support;

mod audit;
mod audit_kinds;
mod child_deletes;
mod child_edits;
mod children;
mod deletion_fallback;
mod drain_timeouts;
mod force_lifecycle;
mod guards;
mod helm;
mod install_namespace;
mod leader;
mod mutating_policy;
mod namespace_strategy;
mod numaflow_controller;
mod numaflow_made;
mod vap;
mod webhook;
