//! Tests of what users install: the kustomize manifests (`manifests`), the
//! Helm chart (`helm_*`) and the alerts (`prometheus_rules`), rendered by
//! kubectl, helm and promtool: one test binary.

#[path = "../helm_support/mod.rs"]
mod helm_support;

mod helm_accounts;
mod helm_chart;
mod helm_values;
mod manifests;
mod prometheus_rules;
