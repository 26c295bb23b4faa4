//! The install manifests in `manifests/`: `kubectl kustomize` renders the
//! base and every overlay (the self-signed one after `gen-certs`), every
//! rendered object parses as its k8s-openapi type without losing a field,
//! and the invariants that tie the manifests to the server hold: webhook
//! paths and ports, probes, RBAC, certificates, security context, rules,
//! timeouts, failurePolicy and the policy file.
//!
//! Each invariant is a test of its own that checks every rendering, in the
//! module of the object it is about (deployment, pod, network, webhooks,
//! certificates, rbac, policies, components); each rendering also has a
//! test here that checks every invariant on it. The renderings are made
//! once per test process (`render::RENDERINGS`).
//!
//! Needs `kubectl` (with its built-in kustomize) on the PATH; without it the
//! tests fail and say so.

mod binary;
mod certificates;
mod components;
mod deployment;
mod install;
mod namespace;
mod network;
mod pod;
mod policies;
mod rbac;
mod render;
mod webhooks;

use crate::manifests::certificates::ca_comes_from_cert_manager_or_gen_certs;
use crate::manifests::deployment::{
    allocator_returns_large_buffers, args_are_flags_serve_has,
    deployment_selects_at_least_two_replicas, memory_limit_holds_the_body_budget,
    ports_are_the_listen_ports, probes_ask_the_admin_server,
    resources_request_and_limit_memory_only, termination_outlasts_the_shutdown,
};
use crate::manifests::network::{
    network_policy_opens_the_ports, service_targets_the_container_ports,
};
use crate::manifests::pod::{
    disruption_budget_keeps_one_pod, namespace_is_restricted, pods_spread_over_nodes_and_zones,
    policy_configmap_keeps_its_name_and_asks_rbac, security_context_is_restricted,
    tls_and_policy_are_read_only_directories,
};
use crate::manifests::policies::skipped_namespaces_and_own_account_are_guarded;
use crate::manifests::rbac::{
    force_is_granted_only_by_the_opt_in_bindings, rbac_grants_exactly_what_is_needed,
};
use crate::manifests::render::{OVERLAYS, Rendering, rendering};
use crate::manifests::webhooks::{
    force_key_webhooks_send_only_force_writes, webhook_configurations_match_the_server,
};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The webhook's binary, built for the tests.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_pipelinerollout-webhook");

// The names the kustomize install gives its objects.
pub(crate) const NAMESPACE: &str = "pipelinerollout-webhook";
pub(crate) const WEBHOOK_CONFIG: &str = "pipelinerollout-webhook";
pub(crate) const MUTATE_NAME: &str = "mutate.pipelinerollout-webhook.numaplane.numaproj.io";
pub(crate) const VALIDATE_NAME: &str = "validate.pipelinerollout-webhook.numaplane.numaproj.io";
pub(crate) const INJECT_CA: &str = "cert-manager.io/inject-ca-from";
pub(crate) const POLICY_CONFIGMAP: &str = "pipelinerollout-webhook-policy";
pub(crate) const TLS_SECRET: &str = "pipelinerollout-webhook-tls";

/// Every invariant, on one rendering.
pub(crate) fn holds_every_invariant(r: &Rendering) {
    for check in INVARIANTS {
        check(r);
    }
}

/// The invariants, in the order they are read.
const INVARIANTS: [fn(&Rendering); 22] = [
    namespace_is_restricted,
    deployment_selects_at_least_two_replicas,
    args_are_flags_serve_has,
    ports_are_the_listen_ports,
    probes_ask_the_admin_server,
    termination_outlasts_the_shutdown,
    resources_request_and_limit_memory_only,
    memory_limit_holds_the_body_budget,
    allocator_returns_large_buffers,
    security_context_is_restricted,
    pods_spread_over_nodes_and_zones,
    disruption_budget_keeps_one_pod,
    tls_and_policy_are_read_only_directories,
    policy_configmap_keeps_its_name_and_asks_rbac,
    service_targets_the_container_ports,
    webhook_configurations_match_the_server,
    force_key_webhooks_send_only_force_writes,
    ca_comes_from_cert_manager_or_gen_certs,
    rbac_grants_exactly_what_is_needed,
    network_policy_opens_the_ports,
    force_is_granted_only_by_the_opt_in_bindings,
    skipped_namespaces_and_own_account_are_guarded,
];

#[test]
fn base_renders_and_holds_the_invariants() {
    let base = rendering("base");
    holds_every_invariant(base);
    assert!(base.install.cert_manager.is_empty());
}

#[test]
fn every_overlay_is_checked() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/overlays");
    let found: BTreeSet<String> = fs::read_dir(&dir)
        .expect("manifests/overlays")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let known: BTreeSet<String> = OVERLAYS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(
        found, known,
        "every overlay in manifests/overlays has expectations in tests/install/manifests/render.rs (OVERLAYS)"
    );
}

fn check_overlay(name: &str) {
    holds_every_invariant(rendering(&format!("overlays/{name}")));
}

#[test]
fn cert_manager_overlay() {
    check_overlay("cert-manager");
}

#[test]
fn self_signed_overlay_after_gen_certs() {
    check_overlay("self-signed");
}

#[test]
fn fail_open_overlay() {
    check_overlay("fail-open");
}
